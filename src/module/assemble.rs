//! Combines a directory's files into one module the way Terraform's
//! NewModule does: primary files first, then override files merged on top.

use std::collections::BTreeMap;

use crate::addr::{ProviderAddr, parse_provider_part};
use crate::diag::{Diagnostic, Diagnostics};

use super::decode::{
    FileDecls, ImportDecl, ModuleCallDecl, ProviderConfig, ProviderRef, RequiredProvider,
    ResourceDecl, ResourceMode,
};
use super::range::{DiagnosticExt, SrcRange};

/// A module's provider-relevant content after override merging, with every
/// resource's provider resolved to a full address.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct ModuleConfig {
    /// By local name; sorted so results do not depend on file order.
    pub required: BTreeMap<String, RequiredProvider>,
    pub provider_configs: Vec<ProviderConfig>,
    pub resources: Vec<(ResourceDecl, Option<ProviderAddr>)>,
    pub module_calls: Vec<ModuleCallDecl>,
    /// Import blocks that generate configuration, with their provider.
    pub imports: Vec<(ImportDecl, ProviderAddr)>,
}

pub(super) fn assemble(
    primary: Vec<FileDecls>,
    overrides: Vec<FileDecls>,
    diags: &mut Diagnostics,
) -> ModuleConfig {
    let mut module = ModuleConfig::default();

    let mut first_block: Option<SrcRange> = None;
    for block in primary.iter().flat_map(|file| &file.required_providers) {
        if let Some(first) = &first_block {
            diags.push(
                Diagnostic::error(
                    "Duplicate required providers configuration",
                    format!(
                        "A module may have only one required providers configuration. The required providers were previously configured at {first}."
                    ),
                )
                .with_range(&block.def_range),
            );
            continue;
        }
        first_block = Some(block.def_range.clone());
        for entry in &block.entries {
            module
                .required
                .insert(entry.local_name.clone(), entry.clone());
        }
    }
    // Override entries replace whole entries per local name, and apply
    // before any resource is resolved.
    for entry in overrides
        .iter()
        .flat_map(|file| &file.required_providers)
        .flat_map(|block| &block.entries)
    {
        module
            .required
            .insert(entry.local_name.clone(), entry.clone());
    }

    report_duplicate_locals(&primary, diags);
    let mut resources: Vec<ResourceDecl> = Vec::new();
    let mut imports: Vec<ImportDecl> = Vec::new();
    for file in primary {
        append_file(&mut module, &mut resources, &mut imports, file, diags);
    }
    for file in overrides {
        merge_file(&mut module, &mut resources, file, diags);
    }

    module.imports = resolve_imports(&module, &resources, imports, diags);
    module.resources = resources
        .into_iter()
        .map(|resource| {
            let provider = resource_provider(&module, &resource);
            (resource, provider)
        })
        .collect();
    module
}

/// A local value defined twice among a module's primary files is an error,
/// as in Terraform, which names the definition seen last before it (an
/// override file's replaces one instead, and values never bear on
/// requirements, so only the names are kept).
fn report_duplicate_locals(primary: &[FileDecls], diags: &mut Diagnostics) {
    let mut seen: BTreeMap<&str, &SrcRange> = BTreeMap::new();
    for (name, range) in primary.iter().flat_map(|file| &file.locals) {
        if let Some(existing) = seen.insert(name, range) {
            diags.push(
                Diagnostic::error(
                    "Duplicate local value definition",
                    format!(
                        "A local value named {name:?} was already defined at {existing}. Local value names must be unique within a module."
                    ),
                )
                .with_range(range),
            );
        }
    }
}

fn append_file(
    module: &mut ModuleConfig,
    resources: &mut Vec<ResourceDecl>,
    imports: &mut Vec<ImportDecl>,
    file: FileDecls,
    diags: &mut Diagnostics,
) {
    for config in file.provider_configs {
        if let Some(existing) = module
            .provider_configs
            .iter()
            .find(|existing| existing.key() == config.key())
        {
            let detail = match &existing.alias {
                None => format!(
                    "A default (non-aliased) provider configuration for {:?} was already given at {}. If multiple configurations are required, set the \"alias\" argument for alternative configurations.",
                    existing.name, existing.def_range
                ),
                Some(alias) => format!(
                    "A provider configuration for {:?} with alias {alias:?} was already given at {}. Each configuration for the same provider must have a distinct alias.",
                    existing.name, existing.def_range
                ),
            };
            diags.push(
                Diagnostic::error("Duplicate provider configuration", detail)
                    .with_range(&config.def_range),
            );
            continue;
        }
        module.provider_configs.push(config);
    }

    for call in file.module_calls {
        // Terraform reports the duplicate but still lets the later call win.
        if let Some(existing) = module.module_calls.iter_mut().find(|c| c.name == call.name) {
            diags.push(
                Diagnostic::error(
                    "Duplicate module call",
                    format!(
                        "A module call named {:?} was already defined at {}. Module calls must have unique names within a module.",
                        existing.name, existing.def_range
                    ),
                )
                .with_range(&call.def_range),
            );
            *existing = call;
            continue;
        }
        module.module_calls.push(call);
    }

    for resource in file.resources {
        if let Some(existing) = find_resource(
            resources,
            resource.mode,
            &resource.type_name,
            &resource.name,
        ) {
            let (summary, detail) = match resource.mode {
                ResourceMode::Managed => (
                    format!("Duplicate resource {:?} configuration", existing.type_name),
                    format!(
                        "A {} resource named {:?} was already declared at {}. Resource names must be unique per type in each module.",
                        existing.type_name, existing.name, existing.def_range
                    ),
                ),
                ResourceMode::Data => (
                    format!("Duplicate data {:?} configuration", existing.type_name),
                    format!(
                        "A {} data resource named {:?} was already declared at {}. Resource names must be unique per type in each module.",
                        existing.type_name, existing.name, existing.def_range
                    ),
                ),
                ResourceMode::Ephemeral => (
                    format!("Duplicate ephemeral {:?} configuration", existing.type_name),
                    format!(
                        "A {} ephemeral resource named {:?} was already declared at {}. Resource names must be unique per type in each module.",
                        existing.type_name, existing.name, existing.def_range
                    ),
                ),
            };
            diags.push(Diagnostic::error(summary, detail).with_range(&resource.def_range));
            continue;
        }
        resources.push(resource);
    }

    imports.extend(file.imports);
}

fn merge_file(
    module: &mut ModuleConfig,
    resources: &mut [ResourceDecl],
    file: FileDecls,
    diags: &mut Diagnostics,
) {
    for config in file.provider_configs {
        let existing = module
            .provider_configs
            .iter_mut()
            .find(|existing| existing.key() == config.key());
        match (existing, &config.alias) {
            (Some(existing), _) => {
                if config.version.is_some() {
                    existing.version = config.version;
                }
            }
            // An absent default configuration counts as an empty one, so
            // overriding it is allowed.
            (None, None) => module.provider_configs.push(config),
            (None, Some(alias)) => diags.push(
                Diagnostic::error(
                    "Missing base provider configuration for override",
                    format!(
                        "There is no {} provider configuration with the alias {alias:?}. An override file can only override an aliased provider configuration that was already defined in a primary configuration file.",
                        config.name
                    ),
                )
                .with_range(&config.def_range),
            ),
        }
    }

    for call in file.module_calls {
        match module.module_calls.iter_mut().find(|c| c.name == call.name) {
            Some(existing) => {
                if call.source_range.is_some() {
                    existing.source = call.source;
                    existing.source_range = call.source_range;
                }
                if call.version_range.is_some() {
                    existing.version = call.version;
                    existing.version_range = call.version_range;
                }
            }
            None => diags.push(
                Diagnostic::error(
                    "Missing module call to override",
                    format!(
                        "There is no module call named {:?}. An override file can only override a module call that was defined in a primary configuration file.",
                        call.name
                    ),
                )
                .with_range(&call.def_range),
            ),
        }
    }

    for resource in file.resources {
        if resource.in_check || resource.mode == ResourceMode::Ephemeral {
            continue;
        }
        match find_resource_mut(
            resources,
            resource.mode,
            &resource.type_name,
            &resource.name,
        ) {
            Some(existing) => {
                if resource.provider.is_some() {
                    existing.provider = resource.provider;
                }
            }
            None => {
                let (summary, detail) = if resource.mode == ResourceMode::Managed {
                    (
                        "Missing resource to override",
                        format!(
                            "There is no {} resource named {:?}. An override file can only override a resource block defined in a primary configuration file.",
                            resource.type_name, resource.name
                        ),
                    )
                } else {
                    (
                        "Missing data resource to override",
                        format!(
                            "There is no {} data resource named {:?}. An override file can only override a data block defined in a primary configuration file.",
                            resource.type_name, resource.name
                        ),
                    )
                };
                diags.push(Diagnostic::error(summary, detail).with_range(&resource.def_range));
            }
        }
    }

    for import in file.imports {
        diags.push(
            Diagnostic::error(
                "Cannot override 'import' blocks",
                "Import blocks can appear only in normal files, not in override files.",
            )
            .with_range(&import.def_range),
        );
    }
}

fn find_resource<'a>(
    resources: &'a [ResourceDecl],
    mode: ResourceMode,
    type_name: &str,
    name: &str,
) -> Option<&'a ResourceDecl> {
    resources
        .iter()
        .find(|r| r.mode == mode && r.type_name == type_name && r.name == name)
}

fn find_resource_mut<'a>(
    resources: &'a mut [ResourceDecl],
    mode: ResourceMode,
    type_name: &str,
    name: &str,
) -> Option<&'a mut ResourceDecl> {
    resources
        .iter_mut()
        .find(|r| r.mode == mode && r.type_name == type_name && r.name == name)
}

impl ModuleConfig {
    /// A local name's provider: the module's own `required_providers` entry,
    /// else the implied `hashicorp/<name>` (or the built-in `terraform`).
    pub fn provider_for_local_name(&self, name: &str) -> Option<ProviderAddr> {
        match self.required.get(name) {
            Some(entry) => Some(entry.addr.clone()),
            None => ProviderAddr::implied(name).ok(),
        }
    }

    /// A resource type's provider from its prefix (`aws_instance` → `aws`).
    /// An unusable prefix yields nothing; Terraform reports the bad type
    /// name elsewhere.
    fn provider_for_type(&self, type_name: &str) -> Option<ProviderAddr> {
        let prefix = type_name.split('_').next().unwrap_or(type_name);
        let local = parse_provider_part(prefix).ok()?;
        self.provider_for_local_name(&local)
    }
}

fn resource_provider(module: &ModuleConfig, resource: &ResourceDecl) -> Option<ProviderAddr> {
    match &resource.provider {
        Some(reference) => module.provider_for_local_name(&reference.name),
        None => module.provider_for_type(&resource.type_name),
    }
}

/// Keeps the import blocks that will generate configuration: only those
/// name a provider of their own; an import into a declared resource takes
/// the resource's provider.
fn resolve_imports(
    module: &ModuleConfig,
    resources: &[ResourceDecl],
    imports: Vec<ImportDecl>,
    diags: &mut Diagnostics,
) -> Vec<(ImportDecl, ProviderAddr)> {
    let mut generating = Vec::new();
    for import in imports {
        let Some((type_name, name)) = &import.target else {
            continue;
        };
        if let Some(target) = find_resource(resources, ResourceMode::Managed, type_name, name) {
            if let Some(reference) = &import.provider
                && !same_config(target.provider.as_ref(), reference)
            {
                diags.push(
                    Diagnostic::error(
                        "Invalid import provider argument",
                        "The provider argument can only be specified in import blocks that will generate configuration.\n\nUse the provider argument in the target resource block to configure the provider for a resource with explicit provider configuration.",
                    )
                    .with_range(&reference.range),
                );
            }
            continue;
        }
        let provider = match &import.provider {
            Some(reference) => module.provider_for_local_name(&reference.name),
            None => module.provider_for_type(type_name),
        };
        if let Some(provider) = provider {
            generating.push((import, provider));
        }
    }
    generating
}

fn same_config(target: Option<&ProviderRef>, reference: &ProviderRef) -> bool {
    target.is_some_and(|target| target.name == reference.name && target.alias == reference.alias)
}
