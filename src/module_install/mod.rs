//! Module installation, the stage before requirements: the module calls of
//! a configuration are walked as `terraform init` walks them (every call of
//! the root and, recursively, of each installed module), each remote
//! source is resolved (registry version list and download location, or the
//! go-getter address as written) and every distinct package is fetched at
//! once, once per run. The result is what Terraform leaves:
//! `.terraform/modules/KEY` directories and `modules.json`, byte for byte.
//!
//! With a module cache (`cache::modules`), packages are fetched into it
//! once per machine and linked from there: a git ref is resolved first with
//! one ref listing, so an entry already there for its commit costs no
//! fetch, and `-offline` installs from the cache's kept registry answers
//! and entries.
//!
//! Nothing is written in place until the whole `init` has succeeded: the
//! new modules directory is built in the data directory's staging area
//! ([`PreparedModules`]), provider requirements are read from there, and
//! the command renames it into place with the provider packages.

pub mod registry;
pub mod source_addr;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::{OnceCell, Semaphore};

use crate::cache::modules::{ModuleCache, RefRecord};
use crate::cliconfig::netrc::Netrc;
use crate::diag::{Diagnostic, Diagnostics, SourcePos};
use crate::fetch::DownloadSettings;
use crate::fsutil::blocking;
use crate::install::link::{ModuleLinkMode, link_or_copy_module_tree, place_module_tree};
use crate::install::staging::Staging;
use crate::module::manifest::{MANIFEST_FILE, Manifest, ManifestRecord};
use crate::module::{ModuleCall, StagedModules, join_clean, module_calls, module_path};
use crate::module_package::{
    GitAddr, PackageAddr, PackageError, PackageFetcher, PackageIdentity, RefKind,
};
use crate::source::configured::NetworkSources;
use crate::version::{Version, VersionConstraints};

use registry::{ModuleRegistry, RegistryError};
use source_addr::{ModuleSource, RegistryPackage, SourceError, with_subdir};

/// A call's source and version constraints, as written out.
type GuessKey = (String, Option<String>);

/// One answer of the run, computed by the first caller, awaited by others.
type Shared<T, E = String> = Arc<OnceCell<Result<T, E>>>;

/// What every working directory of one run shares: the registry client,
/// the package fetcher, and what each has answered, so that a version list,
/// a download location or a package is asked for once per run however many
/// calls and directories need it.
pub struct ModuleSources {
    registry: ModuleRegistry,
    fetcher: PackageFetcher,
    /// Bounds how many packages are fetched at once.
    fetches: Semaphore,
    /// Where packages are placed: a thread per core, off the runtime's
    /// one thread, so that `init DIR…` places on every core.
    placers: Placers,
    /// The module cache entries whose use this run has recorded.
    used: Mutex<HashSet<PathBuf>>,
    versions: Mutex<HashMap<RegistryPackage, Shared<Vec<Version>, RegistryError>>>,
    locations: Mutex<HashMap<(RegistryPackage, Version), Shared<String>>>,
    packages: Mutex<HashMap<String, Shared<Package>>>,
    /// Each guess of the run ([`ModuleSources::guess`]) by source and
    /// constraints: the twenty directories of an `init DIR…` that call the
    /// same modules read the module cache's kept answers once, not twenty
    /// times on the runtime's one thread while their requests wait to go.
    guesses: Mutex<HashMap<GuessKey, Option<Package>>>,
    /// Where fetched packages are kept for the run when there is no module
    /// cache, each placed from there into every working directory that
    /// calls it: a staging area of the first data directory that needs one,
    /// so that placing is a hard link on the same file system (a temporary
    /// directory elsewhere, such as a `/tmp` in memory, would make it a copy
    /// of every file). It is removed when the run ends, or by the next run
    /// if this one is killed.
    store: Mutex<Option<Arc<Staging>>>,
    /// `-offline`: installed modules are kept as always, and a module that
    /// would need a request is installed from the module cache's records
    /// and entries, or refused.
    offline: bool,
    /// The shared module cache, when one is configured.
    cache: Option<ModuleCache>,
    /// How packages from the module cache are placed.
    link_mode: ModuleLinkMode,
    /// Told at once of what cannot wait for the walk's end, when the
    /// other lines are printed: a wait for another process that is filling
    /// a module cache entry, which may be long.
    live_events: Option<ModuleEventSink>,
}

/// A package fetched for the run: its directory, whether that is a module
/// cache entry, and the tag it was fetched by when that tag now names
/// another commit than the cache last saw.
#[derive(Clone, Debug)]
struct Package {
    dir: PathBuf,
    /// In the module cache: held for use while it is placed.
    cached: bool,
    moved_tag: Option<MovedTag>,
}

/// A tag that names another commit than when the module cache last saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct MovedTag {
    tag: String,
    was: String,
    now: String,
}

/// Why the module cache could not be used, and what to do.
fn cache_failure(cache: &ModuleCache, err: std::io::Error) -> String {
    format!(
        "could not use the module cache at {}: {err}. Check its permissions, or set TFINSTALL_MODULE_CACHE_DIR to a directory you may write",
        cache.root().display()
    )
}

/// A full commit id, which names what it fetches: no ref listing needed.
fn is_full_commit(reference: &str) -> bool {
    reference.len() == 40 && reference.bytes().all(|b| b.is_ascii_hexdigit())
}

impl ModuleSources {
    /// The module sources of a run: the registry through the run's
    /// discovery and credentials, packages through one fetcher with the
    /// run's download settings and `.netrc`.
    pub fn for_run(
        network: &NetworkSources,
        client: reqwest::Client,
        settings: DownloadSettings,
        netrc: Option<Arc<Netrc>>,
        parallelism: usize,
    ) -> Self {
        ModuleSources::new(
            ModuleRegistry::new(network.discovery(), network.api()),
            PackageFetcher::new(client, settings, netrc)
                .with_oci_registries(network.oci_registries()),
            parallelism,
        )
    }

    pub fn new(registry: ModuleRegistry, fetcher: PackageFetcher, parallelism: usize) -> Self {
        ModuleSources {
            registry,
            fetcher,
            fetches: Semaphore::new(parallelism.max(1)),
            placers: Placers::new(
                std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get),
            ),
            used: Mutex::new(HashSet::new()),
            versions: Mutex::new(HashMap::new()),
            locations: Mutex::new(HashMap::new()),
            packages: Mutex::new(HashMap::new()),
            guesses: Mutex::new(HashMap::new()),
            store: Mutex::new(None),
            offline: false,
            cache: None,
            link_mode: ModuleLinkMode::Auto,
            live_events: None,
        }
    }

    /// Fetches through the shared module cache `cache` (none: each run
    /// fetches into a temporary directory of its own).
    pub fn with_cache(mut self, cache: Option<ModuleCache>) -> Self {
        self.cache = cache;
        self
    }

    /// How packages from the module cache are placed.
    pub fn link_mode(mut self, mode: ModuleLinkMode) -> Self {
        self.link_mode = mode;
        self
    }

    /// `-offline`: no module request at all (see [`ModuleSources::offline`]).
    pub fn offline(mut self, offline: bool) -> Self {
        self.offline = offline;
        self
    }

    /// Where the lines shown as they happen go (a wait for another
    /// process's fill of a module cache entry); without it they are not
    /// shown.
    pub fn with_live_events(mut self, sink: ModuleEventSink) -> Self {
        self.live_events = Some(sink);
        self
    }

    fn tell(&self, event: ModuleEvent) {
        if let Some(sink) = &self.live_events {
            sink(event);
        }
    }

    async fn versions(&self, package: &RegistryPackage) -> Result<Vec<Version>, RegistryError> {
        let cell = lock(&self.versions)
            .entry(package.clone())
            .or_default()
            .clone();
        cell.get_or_init(|| async {
            let versions = self.registry.versions(package).await?;
            if let Some(cache) = &self.cache {
                let listed = versions.iter().map(Version::to_string).collect();
                cache.remember_registry_versions(&package.to_string(), listed);
            }
            Ok(versions)
        })
        .await
        .clone()
    }

    /// The registry's version list for `package`, asked for as Terraform
    /// asks, with one round trip fewer when the module cache remembers the
    /// package: the download location of the version its kept list would
    /// choose under `constraints` is asked for at the same time. That
    /// answer is only memoized ([`ModuleSources::location`]), so it is used
    /// only when the fresh list chooses that same version; a registry that
    /// published a new version is asked for the new one's location after
    /// the list, as without the cache. Every request Terraform makes is
    /// still made, to the same host with the same credentials.
    async fn fresh_versions(
        &self,
        package: &RegistryPackage,
        constraints: &VersionConstraints,
    ) -> Result<Vec<Version>, RegistryError> {
        let expected = self
            .cached_versions(package)
            .and_then(|kept| constraints.newest_allowed(&kept).cloned())
            .filter(|version| self.cached_location(package, version).is_some());
        let early_location = async {
            if let Some(version) = &expected {
                // Its error, if any, is the answer only if this version is
                // chosen: then the same memoized result is reported.
                let _ = self.location(package, version).await;
            }
        };
        let (versions, ()) = tokio::join!(self.versions(package), early_location);
        versions
    }

    /// The version list the module cache kept for `package` (`-offline`).
    fn cached_versions(&self, package: &RegistryPackage) -> Option<Vec<Version>> {
        let listed = self
            .cache
            .as_ref()?
            .registry_versions(&package.to_string())?;
        Some(
            listed
                .iter()
                .filter_map(|v| Version::parse(v).ok())
                .collect(),
        )
    }

    /// The download location the module cache kept (`-offline`).
    fn cached_location(&self, package: &RegistryPackage, version: &Version) -> Option<String> {
        self.cache
            .as_ref()?
            .registry_location(&package.to_string(), &version.to_string())
    }

    async fn location(
        &self,
        package: &RegistryPackage,
        version: &Version,
    ) -> Result<String, String> {
        let cell = lock(&self.locations)
            .entry((package.clone(), version.clone()))
            .or_default()
            .clone();
        cell.get_or_init(|| async {
            let location =
                self.registry
                    .location(package, version)
                    .await
                    .map_err(|err| match err {
                        RegistryError::NotFound => "module not found".to_string(),
                        RegistryError::Other(message) => message,
                    })?;
            if let Some(cache) = &self.cache {
                cache.remember_registry_location(
                    &package.to_string(),
                    &version.to_string(),
                    &location,
                );
            }
            Ok(location)
        })
        .await
        .clone()
    }

    /// The package at the go-getter address `addr`, fetched by the first
    /// caller (through the module cache when there is one, else into the
    /// run's store, made in `data_dir` if there is none yet), shared by the
    /// others. `waiting` is told if the first caller waits for another
    /// process filling its module cache entry: once per package.
    async fn package(
        &self,
        addr: &str,
        waiting: &ModuleEvent,
        data_dir: &Path,
    ) -> Result<Package, String> {
        let cell = lock(&self.packages)
            .entry(addr.to_string())
            .or_default()
            .clone();
        cell.get_or_init(|| async {
            let parsed = PackageAddr::parse(addr).map_err(|err| err.to_string())?;
            match &self.cache {
                Some(cache) => self.cached_package(cache, addr, &parsed, waiting).await,
                None => self.run_package(&parsed, data_dir).await,
            }
        })
        .await
        .clone()
    }

    /// Fetches into the run's own store (no module cache).
    async fn run_package(&self, parsed: &PackageAddr, data_dir: &Path) -> Result<Package, String> {
        let store = self.store(data_dir).map_err(|err| {
            format!(
                "could not create a staging directory for module packages in {}: {err}",
                data_dir.display()
            )
        })?;
        let dest = store.new_path("package").map_err(|err| {
            format!(
                "could not create a staging directory for module packages in {}: {err}",
                data_dir.display()
            )
        })?;
        let _permit = self.fetches.acquire().await.map_err(|e| e.to_string())?;
        self.fetcher
            .fetch(parsed, &dest)
            .await
            .map_err(|err| err.to_string())?;
        Ok(Package {
            dir: dest,
            cached: false,
            moved_tag: None,
        })
    }

    /// The module cache's entry for `parsed` (the go-getter address
    /// `addr`), filled first if need be. A git ref is resolved with one ref
    /// listing (a full commit needs none) so that an entry already there is
    /// used with no fetch, and an absent one is filled by one process while
    /// the others wait for it; what cannot be known before it is fetched
    /// (an archive's SHA-256) is fetched, then put in the cache. A wait for
    /// another process's fill of the entry is told as `waiting`.
    async fn cached_package(
        &self,
        cache: &ModuleCache,
        addr: &str,
        parsed: &PackageAddr,
        waiting: &ModuleEvent,
    ) -> Result<Package, String> {
        let mut moved_tag = None;
        if let PackageAddr::Git(git) = parsed {
            let url = git.url.to_string();
            let commit = match git.reference.as_deref() {
                Some(reference) if is_full_commit(reference) => {
                    Some(reference.to_ascii_lowercase())
                }
                reference => {
                    let name = reference.unwrap_or("HEAD");
                    let resolved = self
                        .fetcher
                        .resolve_git_ref(git)
                        .await
                        .map_err(|err| err.to_string())?;
                    resolved.map(|resolved| {
                        if let Some(before) = cache.resolved_ref(&url, name)
                            && resolved.kind == RefKind::Tag
                            && before.kind == RefKind::Tag
                            && before.commit != resolved.commit
                        {
                            moved_tag = Some(MovedTag {
                                tag: name.to_owned(),
                                was: before.commit,
                                now: resolved.commit.clone(),
                            });
                        }
                        cache.remember_ref(&RefRecord {
                            url: url.clone(),
                            reference: name.to_owned(),
                            kind: resolved.kind,
                            commit: resolved.commit.clone(),
                        });
                        resolved.commit
                    })
                }
            };
            if let Some(commit) = commit {
                let identity = PackageIdentity::Git { url, commit };
                let dir = self.fill_entry(cache, &identity, git, waiting).await?;
                cache.remember_fetched(addr, &identity);
                return Ok(Package {
                    dir,
                    cached: true,
                    moved_tag,
                });
            }
        }
        let dir = self.fetch_then_insert(cache, addr, parsed, waiting).await?;
        Ok(Package {
            dir,
            cached: true,
            moved_tag,
        })
    }

    /// The entry for the git package `identity`, filled from `git` at its
    /// commit unless it is there: under the entry's lock, taken only when
    /// it is absent, and looked for again once held.
    async fn fill_entry(
        &self,
        cache: &ModuleCache,
        identity: &PackageIdentity,
        git: &GitAddr,
        waiting: &ModuleEvent,
    ) -> Result<PathBuf, String> {
        let failed = |err| cache_failure(cache, err);
        if let Some(entry) = cache.lookup(identity) {
            return Ok(entry.dir);
        }
        let held = cache
            .lock_entry(identity, || self.tell(waiting.clone()))
            .await
            .map_err(failed)?;
        crate::failpoint::pause("module-fill-after-lock");
        if let Some(entry) = cache.lookup(identity) {
            return Ok(entry.dir);
        }
        let build = held.build_dir().map_err(failed)?;
        let PackageIdentity::Git { commit, .. } = identity else {
            unreachable!("git packages have git identities")
        };
        let pinned = PackageAddr::Git(GitAddr {
            reference: Some(commit.clone()),
            ..git.clone()
        });
        let _permit = self.fetches.acquire().await.map_err(|e| e.to_string())?;
        let fetched = match self.fetcher.fetch(&pinned, &build).await {
            Ok(fetched) => fetched,
            // A server that serves only what its refs name (protocol v0
            // without `uploadpack.allowReachableSHA1InWant`) refuses a
            // commit id: the ref itself is fetched then, and must still
            // name the commit listed.
            Err(PackageError::Git { .. })
                if !git.reference.as_deref().is_some_and(is_full_commit) =>
            {
                tracing::debug!("fetching {commit} by id was refused; fetching the ref");
                self.fetcher
                    .fetch(&PackageAddr::Git(git.clone()), &build)
                    .await
                    .map_err(|err| err.to_string())?
            }
            Err(err) => return Err(err.to_string()),
        };
        if fetched.identity != *identity {
            return Err(format!(
                "git checked out {:?} where the ref listing named {identity:?}; run again",
                fetched.identity
            ));
        }
        cache.insert(&held, identity).map_err(failed)
    }

    /// Fetches `parsed` into the module cache's `.tmp/`, then moves it
    /// into the entry its identity names, unless another run put it there
    /// first (that one is used, and this fetch dropped).
    async fn fetch_then_insert(
        &self,
        cache: &ModuleCache,
        addr: &str,
        parsed: &PackageAddr,
        waiting: &ModuleEvent,
    ) -> Result<PathBuf, String> {
        let failed = |err| cache_failure(cache, err);
        let scratch = cache.fetch_dir().map_err(failed)?;
        let tree = scratch.path().join("package");
        let fetched = {
            let _permit = self.fetches.acquire().await.map_err(|e| e.to_string())?;
            self.fetcher
                .fetch(parsed, &tree)
                .await
                .map_err(|err| err.to_string())?
        };
        let identity = fetched.identity;
        cache.remember_fetched(addr, &identity);
        if let Some(entry) = cache.lookup(&identity) {
            return Ok(entry.dir);
        }
        let held = cache
            .lock_entry(&identity, || self.tell(waiting.clone()))
            .await
            .map_err(failed)?;
        if let Some(entry) = cache.lookup(&identity) {
            return Ok(entry.dir);
        }
        std::fs::rename(&tree, held.build_dir().map_err(failed)?).map_err(failed)?;
        cache.insert(&held, &identity).map_err(failed)
    }

    /// The package at `addr` as the module cache holds it, with no request
    /// (`-offline`): by its commit when the address names one, else by what
    /// the address gave when it was last fetched.
    fn offline_package(&self, addr: &str) -> Option<Package> {
        let cache = self.cache.as_ref()?;
        let identity = match PackageAddr::parse(addr).ok()? {
            PackageAddr::Git(git) if git.reference.as_deref().is_some_and(is_full_commit) => {
                PackageIdentity::Git {
                    url: git.url.to_string(),
                    commit: git.reference?.to_ascii_lowercase(),
                }
            }
            _ => cache.last_fetched(addr)?,
        };
        Some(Package {
            dir: cache.lookup(&identity)?.dir,
            cached: true,
            moved_tag: None,
        })
    }

    /// Places `package` at `dst`: a module cache entry held for use
    /// meanwhile (so `cache prune` cannot remove it half-way), as the link
    /// mode says; a package of the run's own store by hard links.
    async fn place(&self, package: &Package, dst_path: &Path) -> std::io::Result<()> {
        let (src, dst) = (package.dir.clone(), dst_path.to_path_buf());
        let Some(cache) = self.cache.as_ref().filter(|_| package.cached) else {
            self.placers
                .run(move || link_or_copy_module_tree(&src, &dst))
                .await?;
            crate::module::same_tree(dst_path, &package.dir);
            return Ok(());
        };
        let _used = cache.hold_for_use(&package.dir).await?;
        let mode = self.link_mode;
        self.placers
            .run(move || {
                if !src.is_dir() {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!(
                            "{} was removed from the module cache while this run used it; run again",
                            src.display()
                        ),
                    ));
                }
                place_module_tree(&src, &dst, mode)
            })
            .await?;
        crate::module::same_tree(dst_path, &package.dir);
        if lock(&self.used).insert(package.dir.clone()) {
            cache.record_use(&package.dir);
        }
        Ok(())
    }

    /// Reads the root module of `package`, a module cache entry, into the
    /// process's module memo as the walk will name it once placed,
    /// `display` ([`crate::module::read_early`]). The entry is held for use
    /// meanwhile, as for placing: a `cache prune` running beside must not
    /// take it away half read, since the walk would take that reading for
    /// the tree it placed.
    async fn read_root_early(&self, package: &Package, display: PathBuf) {
        let Some(cache) = self.cache.as_ref().filter(|_| package.cached) else {
            return;
        };
        // Read once per run however many directories place the package: the
        // later ones hand no thread a task that would find it read.
        if crate::module::remembered(&package.dir, &display, crate::engine::Engine::current()) {
            return;
        }
        let Ok(_used) = cache.hold_for_use(&package.dir).await else {
            return;
        };
        let dir = package.dir.clone();
        let _ = tokio::task::spawn_blocking(move || {
            crate::failpoint::pause("module-read-early");
            if dir.is_dir() {
                crate::module::read_early(&dir, &display);
            }
        })
        .await;
    }

    /// The package the module cache's kept answers say `source` resolves
    /// to, if the cache holds it: for a registry module, the entry of the
    /// download location it kept for the version its kept list would
    /// choose; for a remote address, the entry that address last gave. A
    /// guess, placed early and kept only if the run's own answers agree
    /// ([`fetch_call`]); none in `-offline`, which asks nothing.
    fn guess(
        &self,
        source: &ModuleSource,
        constraints: Option<&VersionConstraints>,
    ) -> Option<Package> {
        if self.offline || self.cache.is_none() {
            return None;
        }
        let key = (source.to_string(), constraints.map(ToString::to_string));
        if let Some(known) = lock(&self.guesses).get(&key) {
            return known.clone();
        }
        let guess = self.guess_from_cache(source, constraints);
        lock(&self.guesses).insert(key, guess.clone());
        guess
    }

    /// [`ModuleSources::guess`] worked out from the module cache's records.
    fn guess_from_cache(
        &self,
        source: &ModuleSource,
        constraints: Option<&VersionConstraints>,
    ) -> Option<Package> {
        let addr = match source {
            ModuleSource::Registry(source) => {
                let any = VersionConstraints::empty();
                let kept = self.cached_versions(&source.package)?;
                let version = constraints.unwrap_or(&any).newest_allowed(&kept)?;
                let location = self.cached_location(&source.package, version)?;
                source_addr::parse_remote(&location).ok()?.package
            }
            ModuleSource::Remote(remote) => remote.package.clone(),
            ModuleSource::Local(_) => return None,
        };
        self.offline_package(&addr)
    }

    /// Removes a tree placed at `dst` by a guess the answers did not bear
    /// out.
    async fn unplace(&self, dst: &Path) -> std::io::Result<()> {
        let dst = dst.to_path_buf();
        crate::module::tree_removed(&dst);
        blocking(move || match std::fs::remove_dir_all(&dst) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err),
            _ => Ok(()),
        })
        .await
    }

    /// The module cache entries this run's packages came from, each with
    /// the package address that named it, sorted (what `cache warm`
    /// reports).
    pub fn cached_packages(&self) -> Vec<(String, PathBuf)> {
        let mut used: Vec<(String, PathBuf)> = lock(&self.packages)
            .iter()
            .filter_map(|(addr, cell)| {
                let package = cell.get()?.as_ref().ok()?;
                package.cached.then(|| (addr.clone(), package.dir.clone()))
            })
            .collect();
        used.sort();
        used
    }

    fn store(&self, data_dir: &Path) -> std::io::Result<Arc<Staging>> {
        let mut store = lock(&self.store);
        if let Some(store) = &*store {
            return Ok(store.clone());
        }
        let created = Arc::new(Staging::create(data_dir)?);
        *store = Some(created.clone());
        Ok(created)
    }
}

/// A thread per core that places packages, one after another, from a
/// queue of all the run's placements. The runtime's one thread only queues
/// them and hears of each end: one that is busy (reading a configuration,
/// writing a lock file) never holds up the next placement, as it did when
/// each placement had to be polled through a semaphore to start.
struct Placers {
    threads: usize,
    /// Started at the first placement: a run without remote modules starts
    /// no thread.
    queue: OnceLock<std::sync::mpsc::Sender<PlaceJob>>,
}

type PlaceJob = Box<dyn FnOnce() + Send>;

impl Placers {
    fn new(threads: usize) -> Self {
        Placers {
            threads: threads.max(1),
            queue: OnceLock::new(),
        }
    }

    fn queue(&self) -> &std::sync::mpsc::Sender<PlaceJob> {
        self.queue.get_or_init(|| {
            let (queue, jobs) = std::sync::mpsc::channel::<PlaceJob>();
            let jobs = Arc::new(Mutex::new(jobs));
            for _ in 0..self.threads {
                let jobs = jobs.clone();
                // Detached: they end when the queue is dropped with the run.
                std::thread::spawn(move || {
                    loop {
                        let job = lock(&jobs).recv();
                        match job {
                            Ok(job) => job(),
                            Err(_) => return,
                        }
                    }
                });
            }
            queue
        })
    }

    /// Runs `place` on a placing thread and waits for it.
    async fn run(
        &self,
        place: impl FnOnce() -> std::io::Result<()> + Send + 'static,
    ) -> std::io::Result<()> {
        let (done, result) = tokio::sync::oneshot::channel();
        let job: PlaceJob = Box::new(move || {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(place))
                .unwrap_or_else(|_| Err(std::io::Error::other("placing a module panicked")));
            let _ = done.send(outcome);
        });
        self.queue()
            .send(job)
            .map_err(|_| std::io::Error::other("the placing threads have stopped"))?;
        result
            .await
            .map_err(|_| std::io::Error::other("the placing threads have stopped"))?
    }
}

/// The module cache a run uses: `TFINSTALL_MODULE_CACHE_DIR`, else
/// `.modules/` in the configured plugin cache, else none.
pub fn module_cache(cli_config: &crate::cliconfig::CliConfig) -> Option<ModuleCache> {
    ModuleCache::configured(
        std::env::var_os(crate::cache::modules::MODULE_CACHE_DIR_ENV).map(PathBuf::from),
        cli_config.plugin_cache_dir.as_deref(),
    )
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// One line of module output, in the order Terraform prints them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModuleEvent {
    /// `Downloading SOURCE [VERSION] for KEY...`
    Downloading {
        key: String,
        source: String,
        version: Option<String>,
    },
    /// `- KEY in DIR`
    Installed { key: String, dir: String },
    /// Another process holds the module cache entry of the package shown
    /// as `SOURCE [VERSION]` (as `Downloading` shows it) while it fetches
    /// the same package; this run waits, then uses its entry. Shown as it
    /// happens, through [`ModuleSources::with_live_events`].
    WaitingForCache {
        source: String,
        version: Option<String>,
    },
}

/// Where the module lines shown as they happen go.
pub type ModuleEventSink = Arc<dyn Fn(ModuleEvent) + Send + Sync>;

impl ModuleEvent {
    pub fn text(&self) -> String {
        match self {
            ModuleEvent::Downloading {
                key,
                source,
                version: Some(version),
            } => format!("Downloading {source} {version} for {key}..."),
            ModuleEvent::Downloading { key, source, .. } => {
                format!("Downloading {source} for {key}...")
            }
            ModuleEvent::Installed { key, dir } => format!("- {key} in {dir}"),
            ModuleEvent::WaitingForCache { source, version } => {
                let version = version
                    .as_ref()
                    .map(|v| format!(" {v}"))
                    .unwrap_or_default();
                format!(
                    "- Waiting for another tfinstall to finish fetching {source}{version} into the shared module cache..."
                )
            }
        }
    }
}

/// Told how the walk goes, so that the command can start on providers
/// while packages are still arriving (`init` fetches the providers of the
/// modules already in). Both default to nothing.
pub trait WalkObserver: Sync {
    /// A remote package is about to be fetched: the walk will take a while.
    fn fetching(&self) {}
    /// The files of a module are in place at `fs_dir`, in the staging area
    /// or the working directory, and `display_dir` is the directory
    /// diagnostics name for it; told once or more for each module.
    fn module_ready(&self, _fs_dir: &Path, _display_dir: &Path) {}
}

/// No one to tell (`get`).
impl WalkObserver for () {}

/// A working directory's modules, built in its staging area and not yet
/// in place.
pub struct PreparedModules {
    /// The modules directory as `modules.json` names it (`.terraform/modules`).
    named: PathBuf,
    /// Where it is, from the directory the command runs in.
    target: PathBuf,
    /// The new modules directory, or `None` when the installed one already
    /// is what this run would build.
    staged: Option<PathBuf>,
    _staging: Option<Staging>,
    pub events: Vec<ModuleEvent>,
    /// Warnings to print with the module lines (a tag that moved).
    pub warnings: Diagnostics,
}

impl PreparedModules {
    /// Where requirements are read from until the commit.
    pub fn staged(&self) -> Option<StagedModules<'_>> {
        self.staged.as_ref().map(|actual| StagedModules {
            named: &self.named,
            actual,
            kept: None,
        })
    }

    /// The rename that puts the new modules directory in place, if any.
    pub fn moves(&self) -> Vec<(PathBuf, PathBuf)> {
        self.staged
            .iter()
            .map(|staged| (staged.clone(), self.target.clone()))
            .collect()
    }

    /// Puts the new modules directory in place on its own (for `get`).
    pub fn commit(mut self) -> std::io::Result<()> {
        let moves = self.moves();
        match self._staging.as_mut() {
            Some(staging) => staging.commit(&moves),
            None => Ok(()),
        }
    }
}

/// A module whose calls are still to be walked.
struct Node {
    /// Call names from the root.
    names: Vec<String>,
    /// Its directory as `modules.json` names it.
    dir: PathBuf,
    /// The remote package it is in: its root directory and address.
    package: Option<(PathBuf, String)>,
    /// Installed by this run: its children cannot be kept from before.
    fresh: bool,
    /// The source argument of the call that reached it.
    call_pos: Option<SourcePos>,
}

/// What one call turned out to need.
enum Placement {
    /// A local directory, or a package kept from before: just a record.
    Record(Recorded),
    /// A package to fetch into `KEY` and its directory inside it.
    Fetch(FetchJob),
}

struct Recorded {
    record: ManifestRecord,
    /// The remote package the module is in.
    package: Option<(PathBuf, String)>,
    /// A package kept from the previous install, copied over as it is.
    kept: bool,
    /// Its package was installed by this run.
    fresh: bool,
    call_pos: SourcePos,
}

struct FetchJob {
    key: String,
    names: Vec<String>,
    call: ModuleCall,
    source: ModuleSource,
    constraints: Option<VersionConstraints>,
}

/// Installs the modules of the configuration in `dir` (the working
/// directory, from where the command runs) whose data directory is
/// `data_dir_named` as `modules.json` spells it (`.terraform` or
/// `TF_DATA_DIR`). `upgrade` looks again at every remote module.
/// `observer` hears of each module as its files arrive.
pub async fn prepare(
    sources: &ModuleSources,
    dir: &Path,
    data_dir_named: &Path,
    upgrade: bool,
    observer: &dyn WalkObserver,
) -> Result<PreparedModules, Diagnostics> {
    let data_dir = if dir == Path::new(".") {
        data_dir_named.to_path_buf()
    } else {
        dir.join(data_dir_named)
    };
    let named = data_dir_named.join("modules");
    let target = data_dir.join("modules");
    let mut diags = Diagnostics::new();
    let previous = Manifest::load_from(&target, &mut diags);
    if diags.has_errors() {
        return Err(diags);
    }
    // Where the data directory is new, the run's package store goes in it
    // before its staging area: dropped last, at the end of the run, it
    // removes the data directory again if a failed run left it empty.
    // Elsewhere it is made at the first package it holds: a no-op makes
    // none.
    if !data_dir.is_dir() {
        sources.store(&data_dir).map_err(|err| {
            Diagnostics::from(Diagnostic::error(
                "Failed to install modules",
                format!(
                    "Could not create a staging directory for module packages in {}: {err}.",
                    data_dir.display()
                ),
            ))
        })?;
    }
    // The staging area and the new modules directory in it, made when the
    // first package is placed or the walk ends with something changed: a
    // no-op makes neither.
    let make_staging = || -> Result<(Staging, PathBuf), Diagnostics> {
        let staging = Staging::create(&data_dir).map_err(|err| {
            Diagnostics::from(Diagnostic::error(
                "Failed to install modules",
                format!(
                    "Could not create a staging directory in {}: {err}.",
                    data_dir.display()
                ),
            ))
        })?;
        let staged = staging
            .new_path("modules")
            .map_err(|err| io_failure(&data_dir, &err))?;
        std::fs::create_dir(&staged).map_err(|err| io_failure(&staged, &err))?;
        Ok((staging, staged))
    };
    let mut staging: Option<(Staging, PathBuf)> = None;

    let mut records: BTreeMap<String, ManifestRecord> = BTreeMap::new();
    records.insert(
        String::new(),
        ManifestRecord {
            key: String::new(),
            source: String::new(),
            version: String::new(),
            dir: ".".to_string(),
        },
    );
    let mut events: Vec<(Vec<String>, ModuleEvent)> = Vec::new();
    let mut fetched_any = false;
    let mut warnings = Diagnostics::new();
    let mut level = vec![Node {
        names: Vec::new(),
        dir: PathBuf::new(),
        package: None,
        fresh: false,
        call_pos: None,
    }];
    // Packages kept from the previous install, read where they are during
    // the walk: a run that changes nothing (a no-op) copies nothing.
    let mut kept_keys: BTreeSet<String> = BTreeSet::new();
    while !level.is_empty() {
        // Until a package is placed, every module the walk reaches is
        // installed or local: none is looked for in the staging area.
        let view = StagedModules {
            named: &named,
            actual: staging.as_ref().map_or(&target, |(_, staged)| staged),
            kept: Some((&target, &kept_keys)),
        };
        let mut placements = Vec::new();
        let dirs: Vec<&Path> = level.iter().map(|node| node.dir.as_path()).collect();
        crate::module::read_ahead(dir, &dirs, Some(&view));
        for node in &level {
            observer.module_ready(&view.fs_path(dir, &node.dir), &node.dir);
            let calls = match module_calls(dir, &node.dir, Some(&view)) {
                Ok(calls) => calls,
                Err(found) => {
                    for diag in found.0 {
                        diags.push(match (&diag.subject, &node.call_pos) {
                            (None, Some(pos)) => at(diag, pos),
                            _ => diag,
                        });
                    }
                    continue;
                }
            };
            for call in calls {
                match plan_call(node, call, &previous, upgrade, dir, &named) {
                    Ok(placement) => placements.push((node.names.clone(), placement)),
                    Err(diag) => diags.push(diag),
                }
            }
        }
        let jobs = placements.iter().filter_map(|(_, p)| match p {
            Placement::Fetch(job) => Some(job),
            Placement::Record(_) => None,
        });
        let mut jobs = jobs.peekable();
        if jobs.peek().is_some() {
            observer.fetching();
            if staging.is_none() {
                staging = Some(make_staging()?);
            }
        }
        let staged = staging.as_ref().map_or(&target, |(_, staged)| staged);
        let results = futures_util::future::join_all(
            jobs.map(|job| fetch_call(sources, job, &named, staged, observer, &data_dir)),
        )
        .await;
        let mut results = results.into_iter();
        let mut next = Vec::new();
        for (_, placement) in placements {
            match placement {
                Placement::Record(Recorded {
                    record,
                    package,
                    kept,
                    fresh,
                    call_pos,
                }) => {
                    let names: Vec<String> = record.key.split('.').map(str::to_string).collect();
                    if kept {
                        kept_keys.insert(record.key.clone());
                    }
                    let changed = previous.get(&record.key) != Some(&record);
                    if changed {
                        events.push((
                            names.clone(),
                            ModuleEvent::Installed {
                                key: record.key.clone(),
                                dir: record.dir.clone(),
                            },
                        ));
                    }
                    next.push(Node {
                        names,
                        dir: PathBuf::from(&record.dir),
                        package,
                        fresh,
                        call_pos: Some(call_pos),
                    });
                    records.insert(record.key.clone(), record);
                }
                Placement::Fetch(job) => {
                    let Some(result) = results.next() else {
                        continue;
                    };
                    match result {
                        Ok((record, package, download, warning)) => {
                            fetched_any = true;
                            if let Some(warning) = warning {
                                warnings.push(warning);
                            }
                            events.push((job.names.clone(), download));
                            events.push((
                                job.names.clone(),
                                ModuleEvent::Installed {
                                    key: record.key.clone(),
                                    dir: record.dir.clone(),
                                },
                            ));
                            next.push(Node {
                                names: job.names.clone(),
                                dir: PathBuf::from(&record.dir),
                                package: Some(package),
                                fresh: true,
                                call_pos: Some(job.call.source_pos.clone()),
                            });
                            records.insert(record.key.clone(), record);
                        }
                        Err(diag) => diags.push(*diag),
                    }
                }
            }
        }
        level = next;
    }
    // Every module that could be reached was walked, so that all problems
    // are reported at once.
    if diags.has_errors() {
        return Err(diags);
    }

    let manifest = Manifest(records);
    let unchanged = !fetched_any && manifest == previous && target.join(MANIFEST_FILE).exists();
    events.sort_by(|a, b| a.0.cmp(&b.0));
    let events = events.into_iter().map(|(_, event)| event).collect();
    if unchanged {
        return Ok(PreparedModules {
            named,
            target,
            staged: None,
            _staging: None,
            events,
            warnings,
        });
    }
    let (staging, staged) = match staging {
        Some(made) => made,
        None => make_staging()?,
    };
    // Links and a write: off the runtime's one thread, so that the
    // directories of a multi-directory run finish their modules side by
    // side instead of one after another. `modules.json` is not flushed to
    // the disk, as Terraform does not flush it: the module directories it
    // lists are links and directories that no run flushes either, so a
    // flush could not make the tree survive a crash of the machine (the
    // next `init` puts it right). Renamed into place with the tree, it
    // still shows every reader, and a run killed at any moment, the old
    // tree or the new. On a journalled ext4 with a busy disk the flush
    // waited for other writers' data: a warm `init` took 0.35 s, not 0.09 s.
    let (kept_from, kept_to, kept_named) = (target.clone(), staged.clone(), named.clone());
    let manifest_path = staged.join(MANIFEST_FILE);
    let manifest_text = manifest.render();
    tokio::task::spawn_blocking(move || {
        for key in &kept_keys {
            link_or_copy_module_tree(&kept_from.join(key), &kept_to.join(key))
                .map_err(|err| io_failure(&kept_named.join(key), &err))?;
        }
        crate::fsutil::write_umask(
            &manifest_path,
            manifest_text.as_bytes(),
            0o644,
            crate::fsutil::Flush::No,
        )
        .map_err(|err| io_failure(&manifest_path, &err))
    })
    .await
    .map_err(|err| io_failure(&staged, &std::io::Error::other(err)))??;
    Ok(PreparedModules {
        named,
        target,
        staged: Some(staged),
        _staging: Some(staging),
        events,
        warnings,
    })
}

fn io_failure(path: &Path, err: &std::io::Error) -> Diagnostic {
    Diagnostic::error(
        "Failed to install modules",
        format!(
            "Could not write {}: {err}. Check the permissions of the working directory and run tfinstall init again.",
            path.display()
        ),
    )
}

fn at(diag: Diagnostic, pos: &SourcePos) -> Diagnostic {
    diag.at_pos(pos)
}

/// `/`-separated, as `modules.json` writes directories on every platform.
fn slash_path(path: &Path) -> String {
    let text = path.to_string_lossy().replace('\\', "/");
    if text.is_empty() {
        ".".to_string()
    } else {
        text
    }
}

/// Parses one call's source and version, and decides whether it is local,
/// kept from the previous install, or to be fetched.
fn plan_call(
    parent: &Node,
    call: ModuleCall,
    previous: &Manifest,
    upgrade: bool,
    root_dir: &Path,
    named: &Path,
) -> Result<Placement, Diagnostic> {
    let mut names = parent.names.clone();
    names.push(call.name.clone());
    let key = names.join(".");
    let source = match &call.version {
        Some(_) => source_addr::parse_registry(&call.source)
            .map(ModuleSource::Registry)
            .map_err(|err| {
                at(
                    Diagnostic::error(
                        "Invalid registry module source address",
                        format!(
                            "Failed to parse module registry address: {err}.\n\nTerraform assumed that you intended a module registry source address because you also set the argument \"version\", which applies only to registry modules."
                        ),
                    ),
                    &call.source_pos,
                )
            })?,
        None => source_addr::parse(&call.source).map_err(|err| {
            let diag = match err {
                SourceError::MaybeRelativePath(addr) => Diagnostic::error(
                    "Invalid module source address",
                    format!(
                        "Terraform failed to determine your intended installation method for remote module package {addr:?}.\n\nIf you intended this as a path relative to the current module, use \"./{addr}\" instead. The \"./\" prefix indicates that the address is a relative filesystem path."
                    ),
                ),
                SourceError::Invalid(message) => Diagnostic::error(
                    "Invalid module source address",
                    format!("Failed to parse module source address: {message}."),
                ),
            };
            at(diag, &call.source_pos)
        })?,
    };
    let constraints = match &call.version {
        Some((text, pos)) => Some(
            VersionConstraints::parse_config(text).map_err(|err| at(Diagnostic::from(err), pos))?,
        ),
        None => None,
    };

    if let ModuleSource::Local(path) = &source {
        let dir = join_clean(&parent.dir, &call.source);
        if let Some((root, package)) = &parent.package
            && !dir.starts_with(root)
        {
            return Err(at(
                Diagnostic::error(
                    "Local module path escapes module package",
                    format!(
                        "The given source directory for {} would be outside of its containing package {package:?}. Local source addresses starting with ../ must stay within the same package that the calling module belongs to.",
                        module_path(&names)
                    ),
                ),
                &call.source_pos,
            ));
        }
        let record = ManifestRecord {
            key,
            source: path.clone(),
            version: String::new(),
            dir: slash_path(&dir),
        };
        return Ok(Placement::Record(Recorded {
            record,
            package: parent.package.clone(),
            kept: false,
            fresh: parent.fresh,
            call_pos: call.source_pos,
        }));
    }

    // Kept as Terraform keeps it: same key and source, a version that still
    // meets the constraint, its directory there, and a parent not
    // reinstalled by this run.
    if !upgrade
        && !parent.fresh
        && let Some(record) = previous.get(&key)
        && same_source(&record.source, &source)
        && root_dir.join(&record.dir).is_dir()
    {
        let version_holds = match &constraints {
            Some(constraints) => {
                Version::parse(&record.version).is_ok_and(|version| constraints.allows(&version))
            }
            None => true,
        };
        let package_root = named.join(&key);
        if version_holds && Path::new(&record.dir).starts_with(&package_root) {
            let package = Some((package_root, package_name(&source)));
            return Ok(Placement::Record(Recorded {
                record: record.clone(),
                package,
                kept: true,
                fresh: false,
                call_pos: call.source_pos,
            }));
        }
    }
    Ok(Placement::Fetch(FetchJob {
        key,
        names,
        call,
        source,
        constraints,
    }))
}

/// The package address messages name for a remote source.
fn package_name(source: &ModuleSource) -> String {
    match source {
        ModuleSource::Registry(source) => source.package.to_string(),
        ModuleSource::Remote(source) => source.package.clone(),
        ModuleSource::Local(path) => path.clone(),
    }
}

type Fetched = (
    ManifestRecord,
    (PathBuf, String),
    ModuleEvent,
    Option<Diagnostic>,
);

/// Whether a `modules.json` record's source names `source`: written as the
/// call writes it (Terraform 1.0, tfinstall) or normalised (Terraform 1.1
/// and later, OpenTofu).
fn same_source(recorded: &str, source: &ModuleSource) -> bool {
    let wanted = source.to_string();
    recorded == wanted
        || source_addr::parse(recorded).is_ok_and(|parsed| parsed.to_string() == wanted)
}

/// Resolves and fetches one call's package and places it at `KEY` in the
/// staged modules directory (of the data directory `data_dir`). The
/// package the module cache's kept answers name, when it holds one, is
/// placed while the registry and the git host are asked, and kept if their
/// answers name it too: placing thousands of files for `init DIR…` then
/// costs no time beyond the round trips it overlaps.
async fn fetch_call(
    sources: &ModuleSources,
    job: &FetchJob,
    named: &Path,
    staged: &Path,
    observer: &dyn WalkObserver,
    data_dir: &Path,
) -> Result<Fetched, Box<Diagnostic>> {
    let call = &job.call;
    let key = &job.key;
    let place = staged.join(key);
    let guess = sources.guess(&job.source, job.constraints.as_ref());
    let early = async {
        let guess = guess.as_ref()?;
        // Most calls use the package's root module: it is read while the
        // answers are awaited, beside its placing.
        let read = sources.read_root_early(guess, named.join(key));
        let (placed, ()) = futures_util::future::join(sources.place(guess, &place), read).await;
        Some(placed)
    };
    let (resolved, early) =
        futures_util::future::join(resolve_call(sources, job, data_dir), early).await;
    let kept_early = match (&guess, early, &resolved) {
        (Some(guess), Some(Ok(())), Ok(resolved)) if guess.dir == resolved.fetched.dir => true,
        (_, Some(_), _) => {
            sources
                .unplace(&place)
                .await
                .map_err(|err| Box::new(io_failure(&place, &err)))?;
            false
        }
        _ => false,
    };
    let Resolved {
        package_addr,
        subdir,
        version,
        shown_source,
        fetched,
    } = resolved?;
    if !kept_early {
        sources
            .place(&fetched, &place)
            .await
            .map_err(|err| Box::new(io_failure(&place, &err)))?;
    }
    let file_line = format!(
        "{}:{}",
        call.source_pos.file.display(),
        call.source_pos.line
    );
    let package_root = named.join(key);
    let dir = if subdir.is_empty() {
        package_root.clone()
    } else {
        package_root.join(&subdir)
    };
    observer.module_ready(&place.join(&subdir), &dir);
    // The source as the call writes it, as Terraform 1.0 records it: that
    // release compares the record with the call's text, and re-downloads a
    // module whose record it finds normalised (`hashicorp/consul/aws`
    // against `registry.terraform.io/hashicorp/consul/aws`); later releases
    // and OpenTofu parse the record and compare the normalised forms, so
    // every release finds the module in place.
    let record = ManifestRecord {
        key: key.clone(),
        source: call.source.clone(),
        version: version.clone().unwrap_or_default(),
        dir: slash_path(&dir),
    };
    let download = ModuleEvent::Downloading {
        key: key.clone(),
        source: shown_source,
        version,
    };
    let warning = fetched.moved_tag.map(|moved| {
        at(
            Diagnostic::warning(
                "Module tag moved",
                format!(
                    "The tag {:?} of module {:?} ({file_line}, source {:?}) now names commit {}, but it named commit {} when the module cache last fetched it. A tag that moves can mean that someone changed the module under its version; check the repository before you trust it. This run installed commit {}.",
                    moved.tag,
                    call.name,
                    job.source.to_string(),
                    moved.now,
                    moved.was,
                    moved.now,
                ),
            ),
            &call.source_pos,
        )
    });
    Ok((record, (package_root, package_addr), download, warning))
}

/// Where one call's package comes from, as the registry (or the call)
/// says, and the package itself, fetched or found in the module cache.
struct Resolved {
    package_addr: String,
    subdir: String,
    version: Option<String>,
    /// The source as the `Downloading` line shows it.
    shown_source: String,
    fetched: Package,
}

/// Resolves one call: its version and download location from the
/// registry, then its package (in `-offline`, all from the module cache).
async fn resolve_call(
    sources: &ModuleSources,
    job: &FetchJob,
    data_dir: &Path,
) -> Result<Resolved, Box<Diagnostic>> {
    let call = &job.call;
    let file_line = format!(
        "{}:{}",
        call.source_pos.file.display(),
        call.source_pos.line
    );
    // `-offline`: what a request would have said comes from the module
    // cache, or the module is refused, naming what is missing and the fix.
    let not_installed = |missing: &str| {
        let fix = match &sources.cache {
            Some(cache) => format!(
                "{missing}, in the module cache at {}. Run tfinstall init without -offline once (with this module cache) to fill it.",
                cache.root().display()
            ),
            None => "No module cache is configured (plugin_cache_dir, or TFINSTALL_MODULE_CACHE_DIR) to install it from. Run tfinstall init without -offline once to install it.".to_string(),
        };
        Box::new(at(
            Diagnostic::error(
                "Module not installed",
                format!(
                    "Module {:?} ({file_line}, source {:?}) is not installed, and -offline makes no request to install it. {fix}",
                    call.name,
                    job.source.to_string()
                ),
            ),
            &call.source_pos,
        ))
    };
    if sources.offline && sources.cache.is_none() {
        return Err(not_installed(""));
    }
    let (package_addr, subdir, version, shown_source) = match &job.source {
        ModuleSource::Registry(source) => {
            let package = &source.package;
            let host = package.host.for_display();
            let any = VersionConstraints::empty();
            let constraints = job.constraints.as_ref().unwrap_or(&any);
            let versions = if sources.offline {
                sources
                    .cached_versions(package)
                    .ok_or_else(|| not_installed(&format!("There is no version list of {package}")))
            } else {
                sources.fresh_versions(package, constraints).await.map_err(|err| {
                Box::new(at(
                    match err {
                        RegistryError::NotFound => Diagnostic::error(
                            "Module not found",
                            format!(
                                "Module {:?} (from {file_line}) cannot be found in the module registry at {host}.",
                                call.name
                            ),
                        ),
                        RegistryError::Other(message) => Diagnostic::error(
                            "Error accessing remote module registry",
                            format!(
                                "Failed to retrieve available versions for module {:?} ({file_line}) from {host}: {message}.",
                                call.name
                            ),
                        ),
                    },
                    &call.source_pos,
                ))
            })
            }?;
            let Some(version) = constraints.newest_allowed(&versions).cloned() else {
                let newest = any
                    .newest_allowed(&versions)
                    .map(|v| format!(" The newest available version is {v}."))
                    .unwrap_or_default();
                return Err(Box::new(at(
                    Diagnostic::error(
                        "Unresolvable module version constraint",
                        format!(
                            "There is no available version of module {:?} ({file_line}) which matches the given version constraint.{newest}",
                            call.name
                        ),
                    ),
                    &call.source_pos,
                )));
            };
            let location = if sources.offline {
                sources.cached_location(package, &version).ok_or_else(|| {
                    not_installed(&format!(
                        "There is no download location of {package} {version}"
                    ))
                })
            } else {
                sources.location(package, &version).await.map_err(|message| {
                Box::new(at(
                    Diagnostic::error(
                        "Error accessing remote module registry",
                        format!(
                            "Failed to retrieve a download URL for {package} {version} from {host}: {message}"
                        ),
                    ),
                    &call.source_pos,
                ))
            })
            }?;
            let remote = source_addr::parse_remote(&location).map_err(|err| {
                let message = match err {
                    SourceError::MaybeRelativePath(addr) => {
                        format!("relative paths require a module with a pwd: {addr}")
                    }
                    SourceError::Invalid(message) => message,
                };
                Box::new(at(
                    Diagnostic::error(
                        "Invalid package location from module registry",
                        format!(
                            "Module registry {host} returned invalid source location {location:?} for {package} {version}: {message}."
                        ),
                    ),
                    &call.source_pos,
                ))
            })?;
            let subdir = match (remote.subdir.is_empty(), source.subdir.is_empty()) {
                (_, true) => remote.subdir.clone(),
                (true, false) => source.subdir.clone(),
                (false, false) => {
                    source_addr::clean_path(&format!("{}/{}", remote.subdir, source.subdir))
                }
            };
            (
                remote.package,
                subdir,
                Some(version.to_string()),
                package.to_string(),
            )
        }
        ModuleSource::Remote(remote) => (
            remote.package.clone(),
            remote.subdir.clone(),
            None,
            remote.package.clone(),
        ),
        ModuleSource::Local(_) => unreachable!("local calls are never fetched"),
    };
    let fetched = if sources.offline {
        sources.offline_package(&package_addr).ok_or_else(|| {
            not_installed(&format!(
                "There is no entry for {}",
                with_subdir(&package_addr, &subdir)
            ))
        })
    } else {
        let waiting = ModuleEvent::WaitingForCache {
            source: shown_source.clone(),
            version: version.clone(),
        };
        sources.package(&package_addr, &waiting, data_dir).await.map_err(|message| {
            Box::new(at(
                Diagnostic::error(
                    "Failed to download module",
                    format!(
                        "Could not download module {:?} ({file_line}) source code from {:?}: {message}.",
                        call.name,
                        with_subdir(&package_addr, &subdir)
                    ),
                ),
                &call.source_pos,
            ))
        })
    }?;
    Ok(Resolved {
        package_addr,
        subdir,
        version,
        shown_source,
        fetched,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_names_its_call_written_as_the_call_writes_it_or_normalised() {
        let registry = source_addr::parse("cloudposse/label/null").unwrap();
        assert!(same_source("cloudposse/label/null", &registry));
        assert!(same_source(
            "registry.terraform.io/cloudposse/label/null",
            &registry
        ));
        assert!(!same_source("cloudposse/label/aws", &registry));
        let github = source_addr::parse("github.com/o/r").unwrap();
        assert!(same_source("github.com/o/r", &github));
        assert!(same_source("git::https://github.com/o/r.git", &github));
        assert!(!same_source("github.com/o/other", &github));
    }
}
