//! Decodes one file's blocks into the declarations that imply provider
//! requirements, with Terraform's per-block validation and messages
//! (`internal/configs`: provider_requirements.go, provider.go,
//! resource.go, module_call.go, import.go).

use crate::addr::{ProviderAddr, parse_provider_part};
use crate::diag::{Diagnostic, Diagnostics};
use crate::version::VersionConstraints;

use super::range::{DiagnosticExt, SrcRange};
use super::syntax::{Attr, Block, Body, Expr, ExprKind, Step};

#[derive(Debug, Default)]
pub(super) struct FileDecls {
    pub required_providers: Vec<RequiredProvidersBlock>,
    pub provider_configs: Vec<ProviderConfig>,
    pub resources: Vec<ResourceDecl>,
    pub module_calls: Vec<ModuleCallDecl>,
    pub imports: Vec<ImportDecl>,
    /// Each `locals` value's name and its whole definition (`a = 1`).
    pub locals: Vec<(String, SrcRange)>,
}

#[derive(Debug)]
pub(super) struct RequiredProvidersBlock {
    pub def_range: SrcRange,
    pub entries: Vec<RequiredProvider>,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct RequiredProvider {
    pub local_name: String,
    pub addr: ProviderAddr,
    pub constraints: VersionConstraints,
    pub range: SrcRange,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct ProviderConfig {
    pub name: String,
    pub alias: Option<String>,
    /// The deprecated `version` argument; `None` when absent or null.
    pub version: Option<VersionConstraints>,
    pub def_range: SrcRange,
}

impl ProviderConfig {
    /// The key Terraform uses to find duplicates and override targets.
    pub fn key(&self) -> String {
        match &self.alias {
            Some(alias) => format!("{}.{alias}", self.name),
            None => self.name.clone(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) enum ResourceMode {
    Managed,
    Data,
    Ephemeral,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct ResourceDecl {
    pub mode: ResourceMode,
    pub type_name: String,
    pub name: String,
    pub provider: Option<ProviderRef>,
    /// Data sources scoped to a `check` block; override files never merge
    /// these.
    pub in_check: bool,
    pub def_range: SrcRange,
}

impl ResourceDecl {
    /// The resource address within its module (`aws_instance.web`,
    /// `data.aws_ami.x`, `ephemeral.random_password.p`).
    pub fn address(&self) -> String {
        let prefix = match self.mode {
            ResourceMode::Managed => "",
            ResourceMode::Data => "data.",
            ResourceMode::Ephemeral => "ephemeral.",
        };
        format!("{prefix}{}.{}", self.type_name, self.name)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct ProviderRef {
    pub name: String,
    pub alias: Option<String>,
    pub range: SrcRange,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct ModuleCallDecl {
    pub name: String,
    pub source: Option<String>,
    pub source_range: Option<SrcRange>,
    /// The `version` argument as written, for registry modules.
    pub version: Option<String>,
    pub version_range: Option<SrcRange>,
    pub def_range: SrcRange,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct ImportDecl {
    /// `(type, name)` of a resource in this module; `None` when the target
    /// is inside a child module or not a static resource address.
    pub target: Option<(String, String)>,
    pub provider: Option<ProviderRef>,
    pub def_range: SrcRange,
}

/// Decodes a file's top-level body. `is_override` relaxes the arguments a
/// primary file must set, as Terraform's override decoding does.
pub(super) fn decode_file(body: &Body, is_override: bool, diags: &mut Diagnostics) -> FileDecls {
    let mut decls = FileDecls::default();
    for block in &body.blocks {
        match block.kind.as_str() {
            "terraform" => {
                for inner in &block.body.blocks {
                    decls
                        .required_providers
                        .push(decode_required_providers(inner, diags));
                }
            }
            "provider" => {
                if let Some(config) = decode_provider(block, diags) {
                    decls.provider_configs.push(config);
                }
            }
            "resource" => {
                decls
                    .resources
                    .push(decode_resource(block, ResourceMode::Managed, false, diags))
            }
            "data" => {
                decls
                    .resources
                    .push(decode_resource(block, ResourceMode::Data, false, diags))
            }
            "ephemeral" => decls.resources.push(decode_resource(
                block,
                ResourceMode::Ephemeral,
                false,
                diags,
            )),
            "check" => {
                for inner in &block.body.blocks {
                    decls
                        .resources
                        .push(decode_resource(inner, ResourceMode::Data, true, diags));
                }
            }
            "module" => decls
                .module_calls
                .push(decode_module_call(block, is_override, diags)),
            "import" => decls.imports.push(decode_import(block, diags)),
            "locals" => decls.locals.extend(
                block
                    .body
                    .attrs
                    .iter()
                    .map(|attr| (attr.name.clone(), attr.name_range.to(&attr.expr.range))),
            ),
            _ => {}
        }
    }
    decls
}

fn decode_required_providers(block: &Block, diags: &mut Diagnostics) -> RequiredProvidersBlock {
    // Terraform keeps one diagnostics list for the whole block, so an error
    // in one entry stops later object-form entries from being recorded.
    let mut block_diags = Diagnostics::new();
    let mut entries = Vec::new();
    report_duplicate_arguments(&block.body, &mut block_diags);

    for attr in &block.body.attrs {
        let name = &attr.name;
        let expr = &attr.expr;
        if let Some(legacy) = expr.primitive_string() {
            let constraints = match VersionConstraints::parse_config(&legacy) {
                Ok(constraints) => constraints,
                Err(err) => {
                    block_diags
                        .push(Diagnostic::error(err.summary, err.detail).with_range(&expr.range));
                    VersionConstraints::empty()
                }
            };
            match implied_provider(name) {
                Ok(addr) => entries.push(RequiredProvider {
                    local_name: name.clone(),
                    addr,
                    constraints,
                    range: expr.range.clone(),
                }),
                Err(diag) => block_diags.push(diag.with_range(&expr.range)),
            }
            continue;
        }

        let name_diags = check_name_normalized(name, &expr.range);
        if name_diags.has_errors() {
            block_diags.extend(name_diags);
            continue;
        }
        let ExprKind::Object(items) = &expr.kind else {
            block_diags.push(
                Diagnostic::error(
                    "Invalid required_providers object",
                    "required_providers entries must be strings or objects.",
                )
                .with_range(&expr.range),
            );
            continue;
        };
        if let Some(entry) = decode_required_provider_object(attr, items, &mut block_diags) {
            entries.push(entry);
        }
    }
    diags.extend(block_diags);
    RequiredProvidersBlock {
        def_range: block.def_range.clone(),
        entries,
    }
}

/// Returns nothing once `diags` (the whole block's so far) holds an error,
/// as Terraform does.
fn decode_required_provider_object(
    attr: &Attr,
    items: &[(Expr, Expr)],
    diags: &mut Diagnostics,
) -> Option<RequiredProvider> {
    let name = &attr.name;
    let mut addr = None;
    let mut constraints = VersionConstraints::empty();
    for (key, value) in items {
        if let Some(problem) = key.static_problem() {
            diags.push(problem);
            continue;
        }
        let Some(key_name) = key.as_str() else {
            diags.push(
                Diagnostic::error(
                    "Invalid Attribute",
                    "Invalid attribute value for provider requirement: the key must be a string.",
                )
                .with_range(&key.range),
            );
            continue;
        };
        match key_name {
            "version" => {
                let Some(text) = value.as_str().filter(|_| value.static_problem().is_none()) else {
                    diags.push(
                        Diagnostic::error(
                            "Invalid version constraint",
                            "Version must be specified as a string.",
                        )
                        .with_range(&value.range),
                    );
                    continue;
                };
                match VersionConstraints::parse_config(text) {
                    Ok(parsed) => constraints = parsed,
                    Err(err) => diags
                        .push(Diagnostic::error(err.summary, err.detail).with_range(&value.range)),
                }
            }
            "source" => {
                let Some(text) = value.as_str().filter(|_| value.static_problem().is_none()) else {
                    diags.push(
                        Diagnostic::error(
                            "Invalid source",
                            "Source must be specified as a string.",
                        )
                        .with_range(&value.range),
                    );
                    continue;
                };
                match ProviderAddr::parse(text) {
                    Ok(parsed) => addr = Some(parsed),
                    Err(err) => diags.push(
                        Diagnostic::error(
                            err.summary().unwrap_or("Invalid provider source string"),
                            err.detail(),
                        )
                        .with_range(&value.range),
                    ),
                }
            }
            "configuration_aliases" => check_configuration_aliases(name, value, diags),
            _ => {
                diags.push(
                    Diagnostic::error(
                        "Invalid required_providers object",
                        "required_providers objects can only contain \"version\", \"source\" and \"configuration_aliases\" attributes. To configure a provider, use a \"provider\" block.",
                    )
                    .with_range(&key.range),
                );
                break;
            }
        }
    }
    if diags.has_errors() {
        return None;
    }
    let addr = match addr {
        Some(addr) => addr,
        None => match implied_provider(name) {
            Ok(addr) => addr,
            Err(diag) => {
                diags.push(diag.with_range(&attr.expr.range));
                return None;
            }
        },
    };
    Some(RequiredProvider {
        local_name: name.clone(),
        addr,
        constraints,
        range: attr.expr.range.clone(),
    })
}

/// Aliases do not change what gets installed, but a malformed list makes
/// Terraform reject the configuration, so it is checked the same way.
fn check_configuration_aliases(name: &str, value: &Expr, diags: &mut Diagnostics) {
    let ExprKind::List(items) = &value.kind else {
        diags.push(
            Diagnostic::error(
                "Invalid expression",
                "A static list expression is required.",
            )
            .with_range(&value.range),
        );
        return;
    };
    for item in items {
        let traversal = match &item.kind {
            ExprKind::Traversal(traversal) => Some(traversal.clone()),
            ExprKind::String(text) if item.from_json => super::syntax::parse_traversal(text),
            _ => None,
        };
        let Some(traversal) = traversal else {
            diags.push(
                Diagnostic::error(
                    "Invalid expression",
                    "A single static variable reference is required: only attribute access and indexing with constant keys. No calculations, function calls, template expressions, etc are allowed here.",
                )
                .with_range(&item.range),
            );
            continue;
        };
        if traversal.steps.len() > 1 || matches!(traversal.steps.first(), Some(Step::Index)) {
            diags.push(
                Diagnostic::error(
                    "Invalid configuration_aliases value",
                    "Configuration aliases can only contain references to local provider configuration names in the format of provider.alias",
                )
                .with_range(&value.range),
            );
            continue;
        }
        if traversal.root != name {
            diags.push(
                Diagnostic::error(
                    "Invalid configuration_aliases value",
                    format!(
                        "Configuration aliases must be prefixed with the provider name. Expected {name:?}, but found {:?}.",
                        traversal.root
                    ),
                )
                .with_range(&value.range),
            );
        }
    }
}

fn report_duplicate_arguments(body: &Body, diags: &mut Diagnostics) {
    for (i, attr) in body.attrs.iter().enumerate() {
        if let Some(first) = body.attrs[..i].iter().find(|prev| prev.name == attr.name) {
            diags.push(
                Diagnostic::error(
                    "Duplicate argument",
                    format!(
                        "The argument {:?} was already set at {}. Each argument may be set only once.",
                        attr.name, first.name_range
                    ),
                )
                .with_range(&attr.name_range),
            );
        }
    }
}

/// The provider a bare local name stands for when `required_providers`
/// does not say (`terraform` is the built-in provider).
fn implied_provider(name: &str) -> Result<ProviderAddr, Diagnostic> {
    ProviderAddr::implied(name)
        .map_err(|err| Diagnostic::error("Invalid provider name", err.to_string()))
}

/// Local names in provider blocks, references and object-form
/// requirements must already be in normalized (lower-case) form.
fn check_name_normalized(name: &str, range: &SrcRange) -> Diagnostics {
    let mut diags = Diagnostics::new();
    match parse_provider_part(name) {
        Err(err) => diags.push(
            Diagnostic::error(
                "Invalid provider local name",
                format!("{name} is an invalid provider local name: {err}"),
            )
            .with_range(range),
        ),
        Ok(normalized) if normalized != name => diags.push(
            Diagnostic::error(
                "Invalid provider local name",
                format!(
                    "Provider names must be normalized. Replace {name:?} with {normalized:?} to fix this error."
                ),
            )
            .with_range(range),
        ),
        Ok(_) => {}
    }
    diags
}

fn decode_provider(block: &Block, diags: &mut Diagnostics) -> Option<ProviderConfig> {
    let name = block.labels.first()?.clone();
    let name_diags = check_name_normalized(&name, &block.def_range);
    if name_diags.has_errors() {
        diags.extend(name_diags);
        return None;
    }
    let mut alias = None;
    if let Some(attr) = block.body.attr("alias") {
        if let Some(problem) = attr.expr.static_problem() {
            diags.push(problem);
        } else if let Some(text) = attr.expr.primitive_string() {
            if !is_valid_identifier(&text) {
                diags.push(
                    Diagnostic::error(
                        "Invalid provider configuration alias",
                        "An alias must be a valid name. A name must start with a letter or underscore and may contain only letters, digits, underscores, and dashes.",
                    )
                    .with_range(&attr.expr.range),
                );
            }
            alias = Some(text);
        }
    }
    let mut version = None;
    if let Some(attr) = block.body.attr("version") {
        diags.push(
            Diagnostic::warning(
                "Version constraints inside provider configuration blocks are deprecated",
                "Terraform 0.13 and earlier allowed provider version constraints inside the provider configuration block, but that is now deprecated and will be removed in a future version of Terraform. To silence this warning, move the provider version constraint into the required_providers block.",
            )
            .with_range(&attr.expr.range),
        );
        version = decode_version_argument(attr, diags);
    }
    Some(ProviderConfig {
        name,
        alias,
        version,
        def_range: block.def_range.clone(),
    })
}

/// Terraform's decodeVersionConstraint: any primitive converts to a
/// string, null means "no constraint".
fn decode_version_argument(attr: &Attr, diags: &mut Diagnostics) -> Option<VersionConstraints> {
    if let Some(problem) = attr.expr.static_problem() {
        diags.push(problem);
        return None;
    }
    if matches!(attr.expr.kind, ExprKind::Null) {
        return None;
    }
    let Some(text) = attr.expr.primitive_string() else {
        diags.push(
            Diagnostic::error(
                "Invalid version constraint",
                format!("A string value is required for {}.", attr.name),
            )
            .with_range(&attr.expr.range),
        );
        return None;
    };
    match VersionConstraints::parse_config(&text) {
        Ok(constraints) => Some(constraints),
        Err(err) => {
            diags.push(Diagnostic::error(err.summary, err.detail).with_range(&attr.expr.range));
            None
        }
    }
}

fn is_valid_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|first| first.is_alphabetic() || first == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '-')
}

fn decode_resource(
    block: &Block,
    mode: ResourceMode,
    in_check: bool,
    diags: &mut Diagnostics,
) -> ResourceDecl {
    let label = |i: usize| block.labels.get(i).cloned().unwrap_or_default();
    ResourceDecl {
        mode,
        type_name: label(0),
        name: label(1),
        provider: block
            .body
            .attr("provider")
            .and_then(|attr| decode_provider_ref(&attr.expr, diags)),
        in_check,
        def_range: block.def_range.clone(),
    }
}

/// Reads a `provider = <name>[.<alias>]` meta-argument.
pub(super) fn decode_provider_ref(expr: &Expr, diags: &mut Diagnostics) -> Option<ProviderRef> {
    let quoted = matches!(expr.kind, ExprKind::String(_)) && !expr.from_json;
    let mut ref_diags = Diagnostics::new();
    let traversal = expr
        .traversal(&mut ref_diags)
        .filter(|t| t.steps.len() <= 1);
    let Some(traversal) = traversal else {
        let detail = if quoted {
            "A provider configuration reference must not be given in quotes."
        } else {
            "The provider argument requires a provider type name, optionally followed by a period and then a configuration alias."
        };
        diags.push(
            Diagnostic::error("Invalid provider configuration reference", detail)
                .with_range(&expr.range),
        );
        return None;
    };
    diags.extend(ref_diags);
    let name_diags = check_name_normalized(&traversal.root, &expr.range);
    if name_diags.has_errors() {
        diags.extend(name_diags);
        return None;
    }
    let alias = match traversal.steps.first() {
        None => None,
        Some(Step::Attr(alias)) => Some(alias.clone()),
        Some(Step::Index) => {
            diags.push(
                Diagnostic::error(
                    "Invalid provider configuration reference",
                    "Provider name must either stand alone or be followed by a period and then a configuration alias.",
                )
                .with_range(&expr.range),
            );
            None
        }
    };
    Some(ProviderRef {
        name: traversal.root,
        alias,
        range: expr.range.clone(),
    })
}

fn decode_module_call(block: &Block, is_override: bool, diags: &mut Diagnostics) -> ModuleCallDecl {
    let name = block.labels.first().cloned().unwrap_or_default();
    let mut call = ModuleCallDecl {
        name,
        source: None,
        source_range: None,
        version: None,
        version_range: None,
        def_range: block.def_range.clone(),
    };
    if let Some(attr) = block.body.attr("version") {
        call.version_range = Some(attr.expr.range.clone());
        match (attr.expr.static_problem(), attr.expr.as_str()) {
            (Some(problem), _) => diags.push(problem),
            (None, Some(version)) => call.version = Some(version.to_string()),
            (None, None) => diags.push(
                Diagnostic::error(
                    "Invalid version constraint",
                    "A string value is required for version.",
                )
                .with_range(&attr.expr.range),
            ),
        }
    }
    match block.body.attr("source") {
        Some(attr) => {
            call.source_range = Some(attr.expr.range.clone());
            match (attr.expr.static_problem(), attr.expr.as_str()) {
                (Some(problem), _) => diags.push(problem),
                (None, Some(source)) => call.source = Some(source.to_string()),
                (None, None) => diags.push(
                    Diagnostic::error(
                        "Invalid module source address",
                        "The module source address must be a string.",
                    )
                    .with_range(&attr.expr.range),
                ),
            }
        }
        None if !is_override => diags.push(
            Diagnostic::error(
                "Missing required argument",
                "The argument \"source\" is required, but no definition was found.",
            )
            .with_range(&block.def_range),
        ),
        None => {}
    }
    call
}

fn decode_import(block: &Block, diags: &mut Diagnostics) -> ImportDecl {
    let target = block.body.attr("to").and_then(|attr| {
        let traversal = match &attr.expr.kind {
            ExprKind::Traversal(traversal) => Some(traversal.clone()),
            ExprKind::String(text) if attr.expr.from_json => super::syntax::parse_traversal(text),
            _ => None,
        }?;
        match traversal.steps.first() {
            Some(Step::Attr(name)) if traversal.root != "module" && traversal.root != "data" => {
                Some((traversal.root, name.clone()))
            }
            _ => None,
        }
    });
    ImportDecl {
        target,
        provider: block
            .body
            .attr("provider")
            .and_then(|attr| decode_provider_ref(&attr.expr, diags)),
        def_range: block.def_range.clone(),
    }
}
