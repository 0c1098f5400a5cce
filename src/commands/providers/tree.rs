//! `tfinstall providers`: the requirement tree, as `terraform providers`
//! prints it, plus where each requirement comes from and what the lock
//! file selected, so "why is this provider (version) here?" has an answer.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use crate::addr::ProviderAddr;
use crate::cli::ProvidersArgs;
use crate::lockfile::Locks;
use crate::module::{self, Configuration, OriginKind, RequirementOrigin, Requirements};
use crate::output::Output;
use crate::version::VersionConstraints;
use crate::workdir::engine::EngineChoice;
use crate::workdir::{LOCK_FILE, data_dir};

pub fn run(args: ProvidersArgs, engine: EngineChoice) -> bool {
    let out = Output::new(args.json, args.no_color);
    let (configuration, mut warnings) =
        match module::load_configuration(Path::new("."), &data_dir()) {
            Ok(loaded) => loaded,
            Err(diags) => {
                out.diagnostics(&diags);
                return false;
            }
        };
    let requirements = &configuration.requirements;
    let (locks, lock_diags) = Locks::load(Path::new(LOCK_FILE));
    if lock_diags.has_errors() {
        out.diagnostics(&lock_diags);
        return false;
    }
    warnings.extend(lock_diags);
    let tree = ModuleNode::build(&configuration);
    out.report(
        "provider_requirements",
        "Providers required by configuration",
        json!({
            "modules": tree.to_json(""),
            "locked": locks_json(requirements, &locks),
            "engine": engine.engine.as_str(),
            "engine_chosen_by": engine.chosen_by.as_str(),
        }),
        |ui| {
            let mut text = format!(
                "\n{}\n.\n",
                ui.heading("Providers required by configuration:")
            );
            tree.render("", &mut text);
            text.push_str(&format!(
                "\n{}\n\n",
                ui.heading("Providers selected in the dependency lock file:")
            ));
            text.push_str(&render_locks(requirements, &locks));
            text.push_str(&format!(
                "\nProviders required only by state are not shown: tfinstall does not read {} state.\n{}",
                engine.engine.name(),
                engine.rules_line(),
            ));
            text
        },
    );
    out.diagnostics(&warnings);
    true
}

/// One module's own requirements and its child modules, by call name.
#[derive(Default)]
struct ModuleNode<'a> {
    providers: BTreeMap<&'a ProviderAddr, ModuleRequirement<'a>>,
    children: BTreeMap<String, ModuleNode<'a>>,
}

/// A provider as one module requires it: the constraints written in that
/// module and what there made it required.
#[derive(Default)]
struct ModuleRequirement<'a> {
    constraints: VersionConstraints,
    origins: Vec<&'a RequirementOrigin>,
}

impl<'a> ModuleNode<'a> {
    /// Every module of the configuration, with or without requirements:
    /// `terraform providers` lists a module that requires no provider too.
    fn build(configuration: &'a Configuration) -> ModuleNode<'a> {
        let mut root = ModuleNode::default();
        for path in &configuration.module_paths {
            let mut node = &mut root;
            for name in module_names(path) {
                node = node.children.entry(name.to_string()).or_default();
            }
        }
        for (addr, requirement) in &configuration.requirements.0 {
            for origin in &requirement.declared_in {
                let mut node = &mut root;
                for name in module_names(&origin.module_path) {
                    node = node.children.entry(name.to_string()).or_default();
                }
                let entry = node.providers.entry(addr).or_default();
                if let Some(constraints) = origin_constraints(&origin.kind) {
                    entry.constraints.extend(constraints);
                }
                entry.origins.push(origin);
            }
        }
        root
    }

    /// Providers first, then child modules, each sorted, as Terraform's
    /// tree lists them.
    fn render(&self, indent: &str, text: &mut String) {
        let count = self.providers.len() + self.children.len();
        let mut index = 0;
        let mut branch = |label: String, text: &mut String| {
            index += 1;
            let last = index == count;
            text.push_str(&format!(
                "{indent}{}{label}\n",
                if last { "└── " } else { "├── " }
            ));
            format!("{indent}{}", if last { "    " } else { "│   " })
        };
        for (addr, requirement) in &self.providers {
            let mut label = format!("provider[{addr}]");
            if !requirement.constraints.is_empty() {
                label.push_str(&format!(" {}", requirement.constraints));
            }
            let inner = branch(label, text);
            for (i, origin) in requirement.origins.iter().enumerate() {
                let last = i + 1 == requirement.origins.len();
                text.push_str(&format!(
                    "{inner}{}{}\n",
                    if last { "└── " } else { "├── " },
                    describe_origin(origin)
                ));
            }
        }
        for (name, child) in &self.children {
            let inner = branch(format!("module.{name}"), text);
            child.render(&inner, text);
        }
    }

    fn to_json(&self, path: &str) -> Value {
        let mut modules = vec![json!({
            "path": path,
            "providers": self.providers.iter().map(|(addr, requirement)| json!({
                "provider": addr.to_string(),
                "constraints": requirement.constraints.to_string(),
                "origins": requirement.origins.iter().map(|o| origin_json(o)).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })];
        for (name, child) in &self.children {
            let child_path = if path.is_empty() {
                format!("module.{name}")
            } else {
                format!("{path}.module.{name}")
            };
            if let Value::Array(more) = child.to_json(&child_path) {
                modules.extend(more);
            }
        }
        Value::Array(modules)
    }
}

/// `module.a.module.b` → `a`, `b` (module call names cannot contain dots).
fn module_names(path: &str) -> impl Iterator<Item = &str> {
    path.split('.').skip(1).step_by(2)
}

fn origin_constraints(kind: &OriginKind) -> Option<&VersionConstraints> {
    match kind {
        OriginKind::RequiredProviders { constraints, .. }
        | OriginKind::ProviderConfig { constraints, .. } => Some(constraints),
        OriginKind::Resource { .. } | OriginKind::Import { .. } => None,
    }
}

fn describe_origin(origin: &RequirementOrigin) -> String {
    let with_constraints = |text: String, constraints: &VersionConstraints| {
        if constraints.is_empty() {
            text
        } else {
            format!("{text} {constraints}")
        }
    };
    let what = match &origin.kind {
        OriginKind::RequiredProviders {
            local_name,
            constraints,
        } => with_constraints(format!("required_providers {local_name:?}"), constraints),
        OriginKind::ProviderConfig {
            local_name,
            alias,
            constraints,
        } => {
            let block = match alias {
                Some(alias) => format!("provider {local_name:?} (alias {alias:?})"),
                None => format!("provider {local_name:?}"),
            };
            with_constraints(block, constraints)
        }
        OriginKind::Resource { address } => format!("used by {address}"),
        OriginKind::Import { to } => format!("import to {to}"),
    };
    match &origin.pos {
        Some(pos) => format!("{what} ({}:{})", pos.file.display(), pos.line),
        None => what,
    }
}

fn origin_json(origin: &RequirementOrigin) -> Value {
    let mut value = match &origin.kind {
        OriginKind::RequiredProviders {
            local_name,
            constraints,
        } => json!({
            "kind": "required_providers",
            "local_name": local_name,
            "constraints": constraints.to_string(),
        }),
        OriginKind::ProviderConfig {
            local_name,
            alias,
            constraints,
        } => json!({
            "kind": "provider_config",
            "local_name": local_name,
            "alias": alias,
            "constraints": constraints.to_string(),
        }),
        OriginKind::Resource { address } => json!({ "kind": "resource", "address": address }),
        OriginKind::Import { to } => json!({ "kind": "import", "address": to }),
    };
    if let Some(pos) = &origin.pos {
        value["range"] = json!({
            "filename": pos.file.display().to_string(),
            "start": { "line": pos.line, "column": pos.column },
        });
    }
    value
}

/// Every required provider with its locked version, then lock entries no
/// longer required (the next `init` removes them).
fn render_locks(requirements: &Requirements, locks: &Locks) -> String {
    let mut text = String::new();
    for addr in requirements.0.keys() {
        match locks.get(addr) {
            Some(lock) => text.push_str(&format!("    provider[{addr}] {}\n", lock.version)),
            None if addr.is_builtin() => {
                text.push_str(&format!("    provider[{addr}] built in\n"));
            }
            None => text.push_str(&format!(
                "    provider[{addr}] not locked yet: run tfinstall init\n"
            )),
        }
    }
    for lock in locks
        .iter()
        .filter(|l| !requirements.0.contains_key(&l.addr))
    {
        text.push_str(&format!(
            "    provider[{}] {} no longer required: tfinstall init will remove it\n",
            lock.addr, lock.version
        ));
    }
    text
}

fn locks_json(requirements: &Requirements, locks: &Locks) -> Value {
    Value::Array(
        locks
            .iter()
            .map(|lock| {
                json!({
                    "provider": lock.addr.to_string(),
                    "version": lock.version.to_string(),
                    "required": requirements.0.contains_key(&lock.addr),
                })
            })
            .collect(),
    )
}
