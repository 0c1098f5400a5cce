//! The hand-off: the CLI configuration under which the `terraform init` (or
//! `tofu init`) that follows tfinstall finds every locked provider where
//! tfinstall put it, and asks no registry or mirror about it.
//!
//! Terraform asks its installation methods for each provider's versions on
//! every `init`, even with the package installed and locked, so the
//! follow-up re-checks every provider with the registry (and fails while
//! the registry is down). Under the configuration built here, each locked
//! provider whose package tfinstall holds for this platform has exactly one
//! method: a `filesystem_mirror` at that package's directory tree, which
//! Terraform lists without a request. Every other provider keeps the
//! user's own methods (or the implied ones), so a provider tfinstall did
//! not install is installed as Terraform would install it.
//!
//! Which tree is handed over:
//! - with a plugin cache, the cache itself. Terraform links the package from
//!   its cache (the same directory) and never copies from the mirror into
//!   the cache; a cache entry that does not match the lock file is refused
//!   (Terraform 1.4+ then tries to install the mirror's package into the
//!   cache, which is the same directory: "cannot install existing provider
//!   directory … to itself"; Terraform 0.14–1.3 check the linked package
//!   against the lock file). A working directory's tree is never handed
//!   over beside a cache: Terraform would install from it into the cache,
//!   leaving a symlink into one working directory in the shared cache.
//! - without one, the working directory's own installed tree
//!   (`.terraform/plugins`, else `.terraform/providers`). Terraform 0.13 and
//!   a Terraform reading the layout tfinstall wrote find the package already
//!   installed; a Terraform 0.14+ after the default `plugins` layout links
//!   it into `.terraform/providers`. A package that no longer matches the
//!   lock file fails the follow-up either way, never falls back elsewhere.
//!
//! The lock file pins the version, and the include list names providers,
//! not versions: another version in the cache is never chosen, because
//! Terraform takes the locked one or fails. `-upgrade`, which asks for the
//! newest version, gets no hand-off (the caller decides that).

pub mod config_file;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::addr::{Platform, ProviderAddr};
use crate::cliconfig::{CliConfig, CliEnv, InstallMethod, MethodLocation, ProviderInstallation};
use crate::diag::SourcePos;
use crate::engine::Engine;
use crate::install::layout::{InstallLayout, LayoutKind};
use crate::lockfile::Locks;
use crate::package::layout::unpacked_package_dir;
use crate::source::configured::implied_mirror_dirs;
use crate::source::filesystem::scan_directory;
use crate::version::Version;
use crate::workdir::LOCK_FILE;

/// Where one working directory keeps what the hand-off reads; all paths
/// absolute, since the follow-up may resolve relative ones elsewhere.
pub struct WorkingDir {
    pub dir: PathBuf,
    /// `.terraform` or `$TF_DATA_DIR`, in `dir`.
    pub data_dir: PathBuf,
    /// Where the follow-up starts: Terraform's implied
    /// `terraform.d/plugins` is relative to it.
    pub launch_dir: PathBuf,
}

/// One provider handed over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handed {
    pub provider: ProviderAddr,
    pub version: Version,
    /// The tree the follow-up reads it from.
    pub tree: PathBuf,
}

/// What the follow-up gets.
pub struct HandOff {
    /// The user's configuration with the hand-off's methods in front.
    pub config: CliConfig,
    pub handed: Vec<Handed>,
}

/// Why nothing can be handed over; the follow-up then runs under the
/// user's own configuration.
#[derive(Debug, PartialEq, Eq)]
pub enum NothingToHandOff {
    /// No lock file (or one that does not parse): nothing is pinned, so
    /// handing over a directory could choose another version.
    NoLockFile(PathBuf),
    /// The lock file's packages for this platform are in none of the
    /// trees looked at.
    NotInstalled { looked_in: Vec<PathBuf> },
}

impl std::fmt::Display for NothingToHandOff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NothingToHandOff::NoLockFile(path) => write!(
                f,
                "there is no readable lock file at {}; run tfinstall init first",
                path.display()
            ),
            NothingToHandOff::NotInstalled { looked_in } => {
                let dirs: Vec<String> = looked_in
                    .iter()
                    .map(|dir| dir.display().to_string())
                    .collect();
                write!(
                    f,
                    "none of the locked providers is installed in {}; run tfinstall init (or cache warm) first",
                    dirs.join(" or ")
                )
            }
        }
    }
}

/// The hand-off for `work`, under the user's configuration `user`.
pub fn prepare(
    user: &CliConfig,
    env: &CliEnv,
    work: &WorkingDir,
    engine: Engine,
    platform: &Platform,
) -> Result<HandOff, NothingToHandOff> {
    let lock_path = work.dir.join(LOCK_FILE);
    let (locks, diags) = Locks::load(&lock_path);
    if diags.has_errors() || !lock_path.is_file() {
        return Err(NothingToHandOff::NoLockFile(lock_path));
    }
    let trees = trees(user, work, engine);
    let dev_overrides: BTreeSet<&ProviderAddr> = user.dev_override_addrs().collect();
    let mut handed = Vec::new();
    for lock in locks.iter() {
        if dev_overrides.contains(&lock.addr) {
            continue;
        }
        let found = trees
            .iter()
            .find(|tree| unpacked_package_dir(tree, &lock.addr, &lock.version, platform).is_dir());
        if let Some(tree) = found {
            handed.push(Handed {
                provider: lock.addr.clone(),
                version: lock.version.clone(),
                tree: tree.clone(),
            });
        }
    }
    if handed.is_empty() {
        return Err(NothingToHandOff::NotInstalled { looked_in: trees });
    }
    let config = CliConfig {
        provider_installation: Some(installation(user, env, work, &handed)),
        ..user.clone()
    };
    Ok(HandOff { config, handed })
}

/// The trees a package may be handed over from, in order of preference.
/// The plugin cache and both install layouts keep a package where a
/// filesystem mirror's unpacked layout has it ([`unpacked_package_dir`]),
/// which is what lets Terraform read each of them as one.
fn trees(user: &CliConfig, work: &WorkingDir, engine: Engine) -> Vec<PathBuf> {
    if let Some(cache_dir) = &user.plugin_cache_dir {
        let cache_dir =
            std::path::absolute(work.dir.join(cache_dir)).unwrap_or_else(|_| cache_dir.clone());
        return vec![cache_dir];
    }
    let kinds: &[LayoutKind] = match engine {
        // tfinstall's default layout first: the one its installs are in.
        Engine::Terraform => &[LayoutKind::Plugins, LayoutKind::Providers],
        Engine::OpenTofu => &[LayoutKind::Providers],
    };
    kinds
        .iter()
        .map(|&kind| InstallLayout::new(&work.data_dir, kind).base())
        .collect()
}

/// The hand-off's mirrors first, each including exactly the providers it
/// holds; then the user's methods (or the implied ones) with those
/// providers excluded, so that no method but the hand-off's answers for
/// them and the others are installed as before.
fn installation(
    user: &CliConfig,
    env: &CliEnv,
    work: &WorkingDir,
    handed: &[Handed],
) -> ProviderInstallation {
    let mut by_tree: BTreeMap<&Path, Vec<String>> = BTreeMap::new();
    for handed in handed {
        by_tree
            .entry(&handed.tree)
            .or_default()
            .push(handed.provider.to_string());
    }
    let handed_patterns: Vec<String> = handed.iter().map(|h| h.provider.to_string()).collect();
    let mut methods: Vec<InstallMethod> = by_tree
        .into_iter()
        .map(|(tree, include)| {
            method(
                MethodLocation::FilesystemMirror(tree.to_path_buf()),
                include,
                Vec::new(),
            )
        })
        .collect();
    let (dev_overrides, rest) = match &user.provider_installation {
        Some(installation) => (
            installation.dev_overrides.clone(),
            installation.methods.clone(),
        ),
        None => (Vec::new(), implied_methods(env, work)),
    };
    methods.extend(rest.into_iter().map(|mut method| {
        method.exclude.extend(handed_patterns.iter().cloned());
        method
    }));
    ProviderInstallation {
        dev_overrides,
        methods,
    }
}

/// Terraform's implied configuration written out: each implied local
/// directory that exists, then `direct` for every provider none of them
/// holds.
fn implied_methods(env: &CliEnv, work: &WorkingDir) -> Vec<InstallMethod> {
    let mut methods = Vec::new();
    let mut found_locally: BTreeSet<ProviderAddr> = BTreeSet::new();
    for dir in implied_mirror_dirs(env, &work.launch_dir) {
        found_locally.extend(scan_directory(&dir).into_keys());
        let dir = std::path::absolute(&dir).unwrap_or(dir);
        methods.push(method(
            MethodLocation::FilesystemMirror(dir),
            Vec::new(),
            Vec::new(),
        ));
    }
    let exclude = found_locally.iter().map(ToString::to_string).collect();
    methods.push(method(MethodLocation::Direct, Vec::new(), exclude));
    methods
}

fn method(location: MethodLocation, include: Vec<String>, exclude: Vec<String>) -> InstallMethod {
    InstallMethod {
        location,
        include,
        exclude,
        trust_all_hashes: false,
        pos: SourcePos::new(PathBuf::from("(hand-off)"), 0, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lockfile::LockedProvider;

    struct World {
        tmp: tempfile::TempDir,
    }

    impl World {
        fn new() -> Self {
            let world = World {
                tmp: tempfile::tempdir().unwrap(),
            };
            std::fs::create_dir_all(world.work().dir).unwrap();
            world
        }

        fn work(&self) -> WorkingDir {
            let dir = self.tmp.path().join("work");
            WorkingDir {
                data_dir: dir.join(".terraform"),
                launch_dir: dir.clone(),
                dir,
            }
        }

        fn env(&self) -> CliEnv {
            CliEnv {
                vars: BTreeMap::from([(
                    "XDG_DATA_DIRS".to_string(),
                    self.tmp.path().join("none").display().to_string(),
                )]),
                profile_dir: Some(self.tmp.path().join("home")),
                engine: Engine::Terraform,
            }
        }

        /// [`prepare`] for the world's working directory on this platform.
        fn hand_off(&self, user: &CliConfig, engine: Engine) -> Result<HandOff, NothingToHandOff> {
            prepare(
                user,
                &self.env(),
                &self.work(),
                engine,
                &Platform::current(),
            )
        }

        fn lock(&self, providers: &[(&str, &str)]) {
            let mut locks = Locks::new();
            for (addr, version) in providers {
                locks.insert(LockedProvider {
                    addr: ProviderAddr::parse(addr).unwrap(),
                    version: Version::parse(version).unwrap(),
                    constraints: Default::default(),
                    hashes: Default::default(),
                });
            }
            locks.save(&self.work().dir.join(LOCK_FILE)).unwrap();
        }

        /// Makes `TREE/HOST/NS/TYPE/VERSION/OS_ARCH`.
        fn package(&self, tree: &Path, addr: &str, version: &str) {
            let dir = crate::package::layout::unpacked_package_dir(
                tree,
                &ProviderAddr::parse(addr).unwrap(),
                &Version::parse(version).unwrap(),
                &Platform::current(),
            );
            std::fs::create_dir_all(dir).unwrap();
        }
    }

    fn methods(handoff: &HandOff) -> Vec<(MethodLocation, Vec<String>, Vec<String>)> {
        handoff
            .config
            .provider_installation
            .as_ref()
            .unwrap()
            .methods
            .iter()
            .map(|m| (m.location.clone(), m.include.clone(), m.exclude.clone()))
            .collect()
    }

    #[test]
    fn without_a_cache_the_installed_tree_is_handed_over_and_the_rest_goes_direct() {
        let world = World::new();
        let work = world.work();
        world.lock(&[("hashicorp/null", "3.2.1"), ("hashicorp/random", "3.5.1")]);
        let plugins = work.data_dir.join("plugins");
        world.package(&plugins, "hashicorp/null", "3.2.1");
        // Another version of random is not the locked one.
        world.package(&plugins, "hashicorp/random", "3.6.0");
        let handoff = world
            .hand_off(&CliConfig::default(), Engine::Terraform)
            .unwrap();
        let null = "registry.terraform.io/hashicorp/null".to_string();
        assert_eq!(
            methods(&handoff),
            [
                (
                    MethodLocation::FilesystemMirror(plugins.clone()),
                    vec![null.clone()],
                    vec![]
                ),
                (MethodLocation::Direct, vec![], vec![null]),
            ]
        );
        assert_eq!(handoff.handed.len(), 1);
    }

    #[test]
    fn with_a_cache_only_the_cache_is_handed_over_and_user_methods_are_kept() {
        let world = World::new();
        let work = world.work();
        let cache = world.tmp.path().join("cache");
        world.lock(&[("acme/a", "1.0.0"), ("acme/b", "1.0.0")]);
        world.package(&cache, "acme/a", "1.0.0");
        // Installed in the working directory but not in the cache: not
        // handed over beside a cache.
        world.package(&work.data_dir.join("plugins"), "acme/b", "1.0.0");
        let user_mirror = world.tmp.path().join("mirror");
        let user = CliConfig {
            plugin_cache_dir: Some(cache.clone()),
            provider_installation: Some(ProviderInstallation {
                dev_overrides: Vec::new(),
                methods: vec![
                    method(
                        MethodLocation::FilesystemMirror(user_mirror.clone()),
                        vec!["example.com/*/*".into()],
                        vec![],
                    ),
                    method(
                        MethodLocation::Direct,
                        vec![],
                        vec!["example.com/*/*".into()],
                    ),
                ],
            }),
            ..CliConfig::default()
        };
        let handoff = world.hand_off(&user, Engine::Terraform).unwrap();
        let a = "registry.terraform.io/acme/a".to_string();
        assert_eq!(
            methods(&handoff),
            [
                (
                    MethodLocation::FilesystemMirror(cache.clone()),
                    vec![a.clone()],
                    vec![]
                ),
                (
                    MethodLocation::FilesystemMirror(user_mirror),
                    vec!["example.com/*/*".into()],
                    vec![a.clone()]
                ),
                (
                    MethodLocation::Direct,
                    vec![],
                    vec!["example.com/*/*".into(), a]
                ),
            ]
        );
        assert_eq!(handoff.config.plugin_cache_dir, Some(cache));
    }

    #[test]
    fn opentofu_reads_only_the_providers_tree() {
        let world = World::new();
        let work = world.work();
        world.lock(&[("opentofu/a", "1.0.0")]);
        world.package(
            &work.data_dir.join("plugins"),
            "registry.opentofu.org/opentofu/a",
            "1.0.0",
        );
        let err = world
            .hand_off(&CliConfig::default(), Engine::OpenTofu)
            .err()
            .unwrap();
        assert_eq!(
            err,
            NothingToHandOff::NotInstalled {
                looked_in: vec![work.data_dir.join("providers")]
            }
        );
    }

    #[test]
    fn nothing_is_handed_over_without_a_lock_file() {
        let world = World::new();
        let work = world.work();
        let err = world
            .hand_off(&CliConfig::default(), Engine::Terraform)
            .err()
            .unwrap();
        assert_eq!(err, NothingToHandOff::NoLockFile(work.dir.join(LOCK_FILE)));
    }

    /// With no provider_installation block, the implied local directories
    /// stay, and `direct` leaves out what they hold, as Terraform's implied
    /// configuration does.
    #[test]
    fn the_implied_local_directories_are_written_out() {
        let world = World::new();
        let work = world.work();
        world.lock(&[("acme/a", "1.0.0")]);
        world.package(&work.data_dir.join("plugins"), "acme/a", "1.0.0");
        let local = work.launch_dir.join("terraform.d/plugins");
        world.package(&local, "example.com/acme/local", "0.1.0");
        let handoff = world
            .hand_off(&CliConfig::default(), Engine::Terraform)
            .unwrap();
        let a = "registry.terraform.io/acme/a".to_string();
        assert_eq!(
            methods(&handoff)[1..],
            [
                (
                    MethodLocation::FilesystemMirror(local),
                    vec![],
                    vec![a.clone()]
                ),
                (
                    MethodLocation::Direct,
                    vec![],
                    vec!["example.com/acme/local".to_string(), a]
                ),
            ]
        );
    }
}
