//! Provider requirements of a configuration: what `terraform init` must
//! install, gathered from the root module and every child module the way
//! Terraform's `Config.ProviderRequirements` does (the "Provider
//! Requirements" docs; `internal/configs/provider_requirements.go`).
//!
//! Each requirement remembers where it came from, so `providers`-style
//! output can show the module tree and errors can point at a line.

mod assemble;
mod decode;
mod files;
mod json;
pub mod manifest;
mod native;
mod range;
mod syntax;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path, PathBuf};

use crate::addr::ProviderAddr;
use crate::diag::{Diagnostic, Diagnostics, SourcePos};
use crate::version::VersionConstraints;

use assemble::ModuleConfig;
use files::{config_files, load_module};
pub use files::{
    keep_readings, read_early, recall_readings, remember_modules_read, remembered, same_tree,
    tree_removed,
};

use crate::engine::Engine;
use manifest::Manifest;
use range::{DiagnosticExt, SrcRange};

/// Every provider the configuration needs, with the intersection of all
/// version constraints written for it (kept as a concatenated list).
#[derive(Clone, Debug, Default)]
pub struct Requirements(pub BTreeMap<ProviderAddr, Requirement>);

#[derive(Clone, Debug)]
pub struct Requirement {
    pub constraints: VersionConstraints,
    /// In discovery order: root module first, then children by name,
    /// depth first.
    pub declared_in: Vec<RequirementOrigin>,
}

#[derive(Clone, Debug)]
pub struct RequirementOrigin {
    /// `""` for the root module, else like `module.child.module.grandchild`.
    pub module_path: String,
    pub pos: Option<SourcePos>,
    pub kind: OriginKind,
}

/// What in a module made the provider required. Resources and imports are
/// recorded once per module and provider (the first one found), since they
/// add no constraints; declarations that carry constraints are all kept,
/// with the constraints each one contributed.
#[derive(Clone, Debug)]
pub enum OriginKind {
    RequiredProviders {
        local_name: String,
        constraints: VersionConstraints,
    },
    /// A `provider` block; `constraints` come from its deprecated `version`
    /// argument.
    ProviderConfig {
        local_name: String,
        alias: Option<String>,
        constraints: VersionConstraints,
    },
    /// A managed, data or ephemeral resource, by address
    /// (`aws_instance.web`, `data.aws_ami.ubuntu`, ...).
    Resource { address: String },
    /// An `import` block that generates configuration, by target address.
    Import { to: String },
}

/// A configuration as the provider commands see it: what it requires, and
/// every module it is made of, including those that require no provider
/// (`terraform providers` lists them too).
#[derive(Clone, Debug, Default)]
pub struct Configuration {
    pub requirements: Requirements,
    /// Each module's path (`""` for the root, else like
    /// `module.child.module.grandchild`), in discovery order.
    pub module_paths: Vec<String>,
}

/// The provider requirements of the configuration rooted at `root_dir`;
/// see [`load_configuration`].
pub fn load_requirements(
    root_dir: &Path,
    data_dir: &Path,
) -> Result<(Requirements, Diagnostics), Diagnostics> {
    load_configuration(root_dir, data_dir)
        .map(|(configuration, diags)| (configuration.requirements, diags))
}

/// Collects the provider requirements of the configuration rooted at
/// `root_dir`, and the modules it is made of. Remote child modules are found through the module manifest
/// in `data_dir` (normally `<root_dir>/.terraform`); they must already be
/// installed.
///
/// File names in diagnostics are relative to `root_dir`, as Terraform
/// shows them when run there. `Err` carries every diagnostic (warnings
/// too) when at least one is an error.
pub fn load_configuration(
    root_dir: &Path,
    data_dir: &Path,
) -> Result<(Configuration, Diagnostics), Diagnostics> {
    load_configuration_staged(root_dir, data_dir, None)
}

/// A modules directory built but not yet in place: the manifest's
/// directories under `named` (the data directory's `modules`, as the
/// manifest spells it) are read from `actual`, so that the providers of
/// modules being installed are known before anything is renamed into place.
pub struct StagedModules<'a> {
    pub named: &'a Path,
    pub actual: &'a Path,
    /// Module packages (by `modules.json` key) still read from the
    /// installed modules directory, `installed`: kept from before, they are
    /// linked into `actual` only if the walk ends with something changed.
    pub kept: Option<(&'a Path, &'a BTreeSet<String>)>,
}

/// [`load_requirements`], with the modules (and their manifest) read from
/// `staged` when given.
pub fn load_requirements_staged(
    root_dir: &Path,
    data_dir: &Path,
    staged: Option<&StagedModules<'_>>,
) -> Result<(Requirements, Diagnostics), Diagnostics> {
    load_configuration_staged(root_dir, data_dir, staged)
        .map(|(configuration, diags)| (configuration.requirements, diags))
}

/// [`load_configuration`], with the modules (and their manifest) read from
/// `staged` when given.
fn load_configuration_staged(
    root_dir: &Path,
    data_dir: &Path,
    staged: Option<&StagedModules<'_>>,
) -> Result<(Configuration, Diagnostics), Diagnostics> {
    let mut diags = Diagnostics::new();
    let manifest = match staged {
        Some(staged) => Manifest::load_from(staged.actual, &mut diags),
        None => Manifest::load(data_dir, &mut diags),
    };
    let mut walker = Walker {
        locations: Locations { root_dir, staged },
        manifest,
        configuration: Configuration::default(),
        diags,
        ancestors: Vec::new(),
        readings: Vec::new(),
    };
    walker.visit(&[], Path::new(""), None);
    files::used_by(data_dir, std::mem::take(&mut walker.readings));
    walker.reject_legacy_addresses();
    if walker.diags.has_errors() {
        Err(walker.diags)
    } else {
        Ok((walker.configuration, walker.diags))
    }
}

/// The providers one module requires by its own files (`required_providers`,
/// `provider` blocks, resources), its child modules left out: what `init`
/// knows of a module as soon as its package is in, while its children may
/// still be on their way, enough to start fetching providers early. The
/// whole configuration is still read ([`load_requirements_staged`]) for the
/// selection itself; a module that does not read here adds nothing.
///
/// `fs_dir` is where the module is, `display_dir` the directory diagnostics
/// name (as `modules.json` does), so that the files read here are the ones
/// the whole configuration's reading finds already parsed.
pub fn module_own_requirements(
    fs_dir: &Path,
    display_dir: &Path,
) -> BTreeMap<ProviderAddr, VersionConstraints> {
    let Ok(loaded) = load_module(fs_dir, display_dir, Engine::current()) else {
        return BTreeMap::new();
    };
    let mut walker = Walker {
        locations: Locations {
            root_dir: fs_dir,
            staged: None,
        },
        manifest: Manifest::default(),
        configuration: Configuration::default(),
        diags: Diagnostics::new(),
        ancestors: Vec::new(),
        readings: Vec::new(),
    };
    walker.record("", &loaded.config);
    walker
        .configuration
        .requirements
        .0
        .into_iter()
        .map(|(addr, requirement)| (addr, requirement.constraints))
        .collect()
}

/// Whether `dir` holds no configuration file (as the engine counts them),
/// which `init` reports as an empty directory instead of installing
/// nothing, as Terraform's `configs.IsEmptyDir` does. A directory that
/// cannot be read is not empty: reading it reports why.
pub fn is_empty_dir(dir: &Path) -> bool {
    config_files(dir, dir, Engine::current())
        .is_ok_and(|files| files.primary.is_empty() && files.overrides.is_empty())
}

/// A module call as written, for module installation.
#[derive(Clone, Debug)]
pub struct ModuleCall {
    pub name: String,
    pub source: String,
    pub source_pos: SourcePos,
    /// The `version` argument and where it is.
    pub version: Option<(String, SourcePos)>,
}

/// The module calls of the module in `display_dir` (named as the
/// diagnostics name it, read from where `staged` puts it), sorted by name
/// as Terraform visits them. Calls without a usable `source` are left out:
/// the configuration's errors are reported by [`load_requirements`], so
/// only whether there are any is returned here.
pub fn module_calls(
    root_dir: &Path,
    display_dir: &Path,
    staged: Option<&StagedModules<'_>>,
) -> Result<Vec<ModuleCall>, Diagnostics> {
    let locations = Locations { root_dir, staged };
    let fs_dir = locations.fs_path(display_dir);
    let loaded = load_module(&fs_dir, display_dir, Engine::current()).map_err(|_| {
        let shown = if display_dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            display_dir
        };
        Diagnostics::from(unreadable_module_dir(shown, None))
    })?;
    let (module, found) = (&loaded.config, &loaded.diags);
    if found.iter().any(Diagnostic::is_error) {
        return Err(Diagnostics(found.clone()));
    }
    let mut calls: Vec<ModuleCall> = module
        .module_calls
        .iter()
        .filter_map(|call| {
            let source = call.source.clone()?;
            let range = call.source_range.as_ref().unwrap_or(&call.def_range);
            Some(ModuleCall {
                name: call.name.clone(),
                source,
                source_pos: range.source_pos(),
                version: call
                    .version
                    .clone()
                    .zip(call.version_range.as_ref().map(|r| r.source_pos())),
            })
        })
        .collect();
    calls.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(calls)
}

/// Reads the modules at `display_dirs` side by side, one thread a core, so
/// that the [`module_calls`] that follow for each of them find it read: a
/// walk's level (the eight modules a root calls, say) is otherwise read one
/// module after another on one core. Only worth it once
/// [`remember_modules_read`] keeps what is read; a module that cannot be
/// read is left for its [`module_calls`] to report. Modules the memo
/// already holds (read early from the module cache, or by another
/// directory of the run) are left out, and with fewer than two left no
/// thread is started: the caller is the runtime's one thread, and waiting
/// for a new thread to be scheduled beside the placing threads held it up
/// to 3 ms per directory of `init DIR…` for reads that were all memo hits.
pub fn read_ahead(root_dir: &Path, display_dirs: &[&Path], staged: Option<&StagedModules<'_>>) {
    if display_dirs.len() < 2 || !files::remembering() {
        return;
    }
    let locations = Locations { root_dir, staged };
    let engine = Engine::current();
    let dirs: Vec<(PathBuf, &Path)> = display_dirs
        .iter()
        .map(|display| (locations.fs_path(display), *display))
        .filter(|(fs_dir, display)| !files::remembered(fs_dir, display, engine))
        .collect();
    if dirs.len() < 2 {
        return;
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let read = || {
        while let Some((fs_dir, display)) =
            dirs.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
        {
            let _ = load_module(fs_dir, display, engine);
        }
    };
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    std::thread::scope(|scope| {
        for _ in 1..cores.min(dirs.len()) {
            scope.spawn(read);
        }
        read();
    });
}

/// Where the files a diagnostic names are on disk.
struct Locations<'a> {
    root_dir: &'a Path,
    staged: Option<&'a StagedModules<'a>>,
}

impl Locations<'_> {
    fn fs_path(&self, display: &Path) -> PathBuf {
        match self.staged {
            Some(staged) => staged.fs_path(self.root_dir, display),
            None => self.root_dir.join(display),
        }
    }
}

impl StagedModules<'_> {
    /// Where the file or directory diagnostics name `display` is on disk,
    /// for the configuration rooted at `root_dir`.
    pub fn fs_path(&self, root_dir: &Path, display: &Path) -> PathBuf {
        let Ok(rest) = display.strip_prefix(self.named) else {
            return root_dir.join(display);
        };
        if let Some((installed, keys)) = self.kept
            && let Some(Component::Normal(key)) = rest.components().next()
            && key.to_str().is_some_and(|key| keys.contains(key))
        {
            return installed.join(rest);
        }
        self.actual.join(rest)
    }
}

/// Which directory a path leads to, symlinks followed: its device and
/// inode, from one `stat`. The walk asks for every module of every working
/// directory (180 of them in an `init DIR…` over 20 clones of 9 modules),
/// and a canonical path cost a `readlink` per component of the path. Where
/// there are no inodes, or the `stat` fails, the canonical path (or the
/// path itself) stands in.
#[derive(PartialEq, Eq)]
enum DirIdentity {
    #[cfg(unix)]
    Inode {
        dev: u64,
        ino: u64,
    },
    Path(PathBuf),
}

impl DirIdentity {
    fn of(dir: &Path) -> DirIdentity {
        #[cfg(unix)]
        if let Ok(meta) = fs::metadata(dir) {
            use std::os::unix::fs::MetadataExt;
            return DirIdentity::Inode {
                dev: meta.dev(),
                ino: meta.ino(),
            };
        }
        DirIdentity::Path(fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf()))
    }
}

/// How a child module was reached, for diagnostics about its directory.
struct ModuleCallSite<'a> {
    range: &'a SrcRange,
    remote: bool,
}

struct Walker<'a> {
    locations: Locations<'a>,
    manifest: Manifest,
    configuration: Configuration,
    diags: Diagnostics,
    /// The directories of the modules being visited, to stop a module
    /// that (indirectly) calls itself.
    ancestors: Vec<DirIdentity>,
    /// The readings of the modules visited, in the order visited.
    readings: Vec<files::LoadedModule>,
}

impl Walker<'_> {
    fn visit(&mut self, names: &[String], display_dir: &Path, call: Option<ModuleCallSite<'_>>) {
        let fs_dir = self.locations.fs_path(display_dir);
        let shown_dir = if display_dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            display_dir
        };
        let loaded = match load_module(&fs_dir, display_dir, Engine::current()) {
            Ok(loaded) => loaded,
            Err(_) => {
                self.diags
                    .push(unreadable_module_dir(shown_dir, call.as_ref()));
                return;
            }
        };
        let identity = DirIdentity::of(&fs_dir);
        if self.ancestors.contains(&identity) {
            let mut diag = Diagnostic::error(
                "Module calls itself",
                format!(
                    "The module at {} is already being loaded higher up in this configuration, so loading it again here would never end.",
                    shown_dir.display()
                ),
            );
            if let Some(call) = &call {
                diag = diag.with_range(call.range);
            }
            self.diags.push(diag);
            return;
        }

        self.readings.push(loaded.clone());
        let (module, found) = (&loaded.config, &loaded.diags);
        let module_diags = Diagnostics(found.clone());
        let path = module_path(names);
        self.record(&path, module);
        self.configuration.module_paths.push(path);

        // As in Terraform, a root module with errors is not descended into
        // (its calls may be what is broken); broken children still are.
        let stop_here = names.is_empty() && module_diags.has_errors();
        self.diags.extend(module_diags);
        if stop_here {
            return;
        }

        let mut calls: Vec<_> = module.module_calls.iter().collect();
        calls.sort_by(|a, b| a.name.cmp(&b.name));
        self.ancestors.push(identity);
        for call in calls {
            let Some(source) = &call.source else {
                continue;
            };
            let range = call.source_range.as_ref().unwrap_or(&call.def_range);
            let mut child_names = names.to_vec();
            child_names.push(call.name.clone());
            if is_local_source(source) {
                let dir = join_clean(display_dir, source);
                let site = ModuleCallSite {
                    range,
                    remote: false,
                };
                self.visit(&child_names, &dir, Some(site));
                continue;
            }
            let key = child_names.join(".");
            let Some(record) = self.manifest.get(&key) else {
                self.diags.push(
                    Diagnostic::error(
                        "Module not installed",
                        format!(
                            "Module \"{}\" (source {source:?}) is not yet installed. Run \"terraform init\" or \"terraform get\" to install all modules required by this configuration.",
                            module_path(&child_names)
                        ),
                    )
                    .with_range(range),
                );
                continue;
            };
            let dir = clean_manifest_dir(&record.dir);
            let site = ModuleCallSite {
                range,
                remote: true,
            };
            self.visit(&child_names, &dir, Some(site));
        }
        self.ancestors.pop();
    }

    /// Terraform's addProviderRequirements for one module.
    fn record(&mut self, module_path: &str, module: &ModuleConfig) {
        let mut recorded_here = BTreeSet::new();
        let mut add = |addr: ProviderAddr,
                       constraints: Option<&VersionConstraints>,
                       range: &SrcRange,
                       kind: OriginKind| {
            let requirement = self
                .configuration
                .requirements
                .0
                .entry(addr.clone())
                .or_insert_with(|| Requirement {
                    constraints: VersionConstraints::empty(),
                    declared_in: Vec::new(),
                });
            if let Some(constraints) = constraints {
                requirement.constraints.extend(constraints);
            }
            let implied_only = matches!(
                kind,
                OriginKind::Resource { .. } | OriginKind::Import { .. }
            );
            if !implied_only || !recorded_here.contains(&addr) {
                requirement.declared_in.push(RequirementOrigin {
                    module_path: module_path.to_string(),
                    pos: Some(range.source_pos()),
                    kind,
                });
                recorded_here.insert(addr);
            }
        };

        for entry in module.required.values() {
            add(
                entry.addr.clone(),
                Some(&entry.constraints),
                &entry.range,
                OriginKind::RequiredProviders {
                    local_name: entry.local_name.clone(),
                    constraints: entry.constraints.clone(),
                },
            );
        }
        for (resource, provider) in &module.resources {
            if let Some(provider) = provider {
                let kind = OriginKind::Resource {
                    address: resource.address(),
                };
                add(provider.clone(), None, &resource.def_range, kind);
            }
        }
        for (import, provider) in &module.imports {
            if let Some((type_name, name)) = &import.target {
                let kind = OriginKind::Import {
                    to: format!("{type_name}.{name}"),
                };
                add(provider.clone(), None, &import.def_range, kind);
            }
        }
        for config in &module.provider_configs {
            if let Some(provider) = module.provider_for_local_name(&config.name) {
                let kind = OriginKind::ProviderConfig {
                    local_name: config.name.clone(),
                    alias: config.alias.clone(),
                    constraints: config
                        .version
                        .clone()
                        .unwrap_or_else(VersionConstraints::empty),
                };
                add(provider, config.version.as_ref(), &config.def_range, kind);
            }
        }
    }

    /// Pre-0.13 unqualified addresses (`-/aws`) cannot be installed; the
    /// user must finish the 0.13 upgrade first.
    fn reject_legacy_addresses(&mut self) {
        for (addr, requirement) in &self.configuration.requirements.0 {
            if !addr.is_legacy() {
                continue;
            }
            let mut diag = Diagnostic::error(
                "Invalid legacy provider address",
                format!(
                    "This configuration or its associated state refers to the unqualified provider {:?}.\n\nYou must complete the Terraform 0.13 upgrade process before upgrading to later versions.",
                    addr.type_name
                ),
            );
            diag.subject = requirement
                .declared_in
                .iter()
                .find_map(|origin| origin.pos.clone());
            self.diags.push(diag);
        }
    }
}

fn unreadable_module_dir(dir: &Path, call: Option<&ModuleCallSite<'_>>) -> Diagnostic {
    match call {
        Some(call) if call.remote => Diagnostic::error(
            "Module not installed",
            format!(
                "This module's local cache directory {} could not be read. Run \"terraform init\" or \"terraform get\" to install all modules required by this configuration.",
                dir.display()
            ),
        )
        .with_range(call.range),
        Some(call) => Diagnostic::error(
            "Failed to read module directory",
            format!("Module directory {} does not exist or cannot be read.", dir.display()),
        )
        .with_range(call.range),
        None => Diagnostic::error(
            "Failed to read module directory",
            format!("Module directory {} does not exist or cannot be read.", dir.display()),
        ),
    }
}

/// `module.a.module.b`, as Terraform names a module in messages.
pub fn module_path(names: &[String]) -> String {
    names
        .iter()
        .map(|name| format!("module.{name}"))
        .collect::<Vec<_>>()
        .join(".")
}

/// Local module sources are paths starting with `./` or `../` (either
/// slash), per Terraform's module source rules; anything else is
/// installed by `terraform init` and listed in the manifest.
pub fn is_local_source(source: &str) -> bool {
    ["./", "../", ".\\", "..\\"]
        .iter()
        .any(|prefix| source.starts_with(prefix))
}

/// Lexical join-and-clean like Go's filepath.Join, so module directories
/// are named as Terraform names them (`modules/app/../shared` →
/// `modules/shared`) without touching the filesystem.
pub fn join_clean(base: &Path, relative: &str) -> PathBuf {
    let separators: &[char] = if cfg!(windows) { &['/', '\\'] } else { &['/'] };
    let mut out = base.to_path_buf();
    for segment in relative.split(separators) {
        match segment {
            "" | "." => {}
            ".." => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(".."),
            },
            name => out.push(name),
        }
    }
    out
}

fn clean_manifest_dir(dir: &str) -> PathBuf {
    if Path::new(dir).is_absolute() {
        PathBuf::from(dir)
    } else {
        join_clean(Path::new(""), dir)
    }
}

#[cfg(test)]
mod tests;
