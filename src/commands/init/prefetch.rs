//! Providers fetched while modules are still arriving. Terraform installs
//! every module, then selects and installs providers; `init` does the same
//! selection at the same point, but while the module walk runs, this starts
//! fetching the packages it can already predict: each provider that the
//! modules already in require, at the version the selection would pick from
//! what is known so far (the lock file's, else the newest that meets the
//! constraints seen so far). Each goes into the plugin cache, or a store of
//! this run when none is configured, where the real installation finds it.
//!
//! Nothing here decides anything: a later module whose constraint rules a
//! fetched version out leaves that package unused (never installed, never
//! in the lock file), and a fetch that fails is forgotten, for the real
//! installation to try again and report. The version lists and package
//! documents come from the run's sources, whose memos answer each question
//! once, so predicting costs no request the installation would not make.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::{Semaphore, mpsc};

use crate::addr::ProviderAddr;
use crate::cache::PluginCache;
use crate::install::installer::{CacheUse, Installer};
use crate::lockfile::Locks;
use crate::module::module_own_requirements;
use crate::module_install::WalkObserver;
use crate::version::VersionConstraints;

/// What the module walk tells the prefetch.
enum Learned {
    /// A package is being fetched: the walk takes long enough to overlap.
    Fetching,
    /// A module's files are in place: where they are, and the directory
    /// diagnostics name.
    Module(PathBuf, PathBuf),
}

/// The prefetch of one working directory's `init`.
pub(super) struct Prefetch {
    /// Closed when the walk ends: no prefetch starts after that, since the
    /// real installation, which knows everything, is under way.
    learned: Mutex<Option<mpsc::UnboundedSender<Learned>>>,
    receiver: Mutex<Option<mpsc::UnboundedReceiver<Learned>>>,
    /// Builds the installer once there is something to fetch, given where
    /// packages go: the configured plugin cache, or this run's store.
    installer: Box<dyn Fn(CacheUse) -> Installer + Send + Sync>,
    /// The configured plugin cache (or `init DIR…`'s shared one).
    cache: Option<CacheUse>,
    /// Where the store of this run goes when there is no cache: beside
    /// the working directory's filesystem ([`super::run_cache_dir`]).
    dir: PathBuf,
    /// The cache the prefetch fills, settled when it first starts; with
    /// the store (removed when the run ends) when it made one.
    target: OnceLock<Option<(CacheUse, Option<tempfile::TempDir>)>>,
    /// The lock entries that decide versions (none under `-upgrade`).
    locks: Locks,
    /// `-parallelism`: packages fetched at once.
    permits: Semaphore,
    /// Set with [`Prefetch::walk_done`]: a prefetch still waiting for a
    /// permit then never starts. It would look for the package where the
    /// real installation may already have put it, and hash it there, for
    /// nothing.
    walk_ended: AtomicBool,
}

impl Prefetch {
    pub(super) fn new(
        dir: &Path,
        cache: Option<CacheUse>,
        locks: Locks,
        parallelism: usize,
        installer: Box<dyn Fn(CacheUse) -> Installer + Send + Sync>,
    ) -> Prefetch {
        let (sender, receiver) = mpsc::unbounded_channel();
        Prefetch {
            learned: Mutex::new(Some(sender)),
            receiver: Mutex::new(Some(receiver)),
            installer,
            cache,
            dir: dir.to_path_buf(),
            target: OnceLock::new(),
            locks,
            permits: Semaphore::new(parallelism.max(1)),
            walk_ended: AtomicBool::new(false),
        }
    }

    fn tell(&self, learned: Learned) {
        if let Some(sender) = &*lock(&self.learned) {
            // The receiving end lives as long as the run; a send after it
            // stopped has nothing left to start.
            let _ = sender.send(learned);
        }
    }

    /// The walk has ended: what is in flight finishes, nothing new starts.
    pub(super) fn walk_done(&self) {
        self.walk_ended.store(true, Ordering::Relaxed);
        lock(&self.learned).take();
    }

    /// The store of this run the prefetch filled, when there is no plugin
    /// cache: the real installation must look there too.
    pub(super) fn store(&self) -> Option<CacheUse> {
        match self.target.get() {
            Some(Some((cache, Some(_)))) => Some(cache.clone()),
            _ => None,
        }
    }

    /// Where prefetched packages go, settled at the first prefetch; `None`
    /// when no store could be made (then nothing is prefetched).
    fn target(&self) -> Option<&CacheUse> {
        self.target
            .get_or_init(|| match &self.cache {
                Some(cache) => Some((cache.clone(), None)),
                None => {
                    let store = super::run_cache_dir(&self.dir).ok()?;
                    let cache = CacheUse::new(PluginCache::new(store.path()), false);
                    Some((cache, Some(store)))
                }
            })
            .as_ref()
            .map(|(cache, _)| cache)
    }

    /// Runs until the walk has ended and every prefetch it started is done.
    pub(super) async fn run(&self) {
        let Some(mut receiver) = lock(&self.receiver).take() else {
            return;
        };
        let mut known: BTreeMap<ProviderAddr, VersionConstraints> = BTreeMap::new();
        let mut modules_seen: HashSet<PathBuf> = HashSet::new();
        let mut unread: Vec<(PathBuf, PathBuf)> = Vec::new();
        let mut started: HashMap<ProviderAddr, VersionConstraints> = HashMap::new();
        let built: OnceLock<Option<Installer>> = OnceLock::new();
        let mut overlapping = false;
        let mut in_flight = FuturesUnordered::new();
        loop {
            tokio::select! {
                learned = receiver.recv() => match learned {
                    None => break,
                    Some(Learned::Fetching) => overlapping = true,
                    Some(Learned::Module(fs_dir, display_dir)) => {
                        if modules_seen.insert(fs_dir.clone()) {
                            unread.push((fs_dir, display_dir));
                        }
                    }
                },
                Some(()) = in_flight.next(), if !in_flight.is_empty() => {}
            }
            // Read only once there is a walk to overlap: a configuration
            // whose modules are all in place has no time to gain.
            if !overlapping {
                continue;
            }
            for (fs_dir, display_dir) in unread.drain(..) {
                for (provider, constraints) in module_own_requirements(&fs_dir, &display_dir) {
                    known
                        .entry(provider)
                        .or_insert_with(VersionConstraints::empty)
                        .extend(&constraints);
                }
            }
            let installer =
                built.get_or_init(|| self.target().map(|cache| (self.installer)(cache.clone())));
            let Some(installer) = installer.as_ref() else {
                break;
            };
            for (provider, constraints) in &known {
                if started.get(provider) == Some(constraints) {
                    continue;
                }
                started.insert(provider.clone(), constraints.clone());
                let (provider, constraints) = (provider.clone(), constraints.clone());
                in_flight.push(async move {
                    let Ok(_permit) = self.permits.acquire().await else {
                        return;
                    };
                    if self.walk_ended.load(Ordering::Relaxed) {
                        return;
                    }
                    // A failure is the real installation's to meet and report.
                    let _ = installer
                        .prefetch(&provider, &constraints, &self.locks)
                        .await;
                });
            }
        }
        while in_flight.next().await.is_some() {}
    }
}

impl WalkObserver for Prefetch {
    fn fetching(&self) {
        self.tell(Learned::Fetching);
    }

    fn module_ready(&self, fs_dir: &Path, display_dir: &Path) {
        self.tell(Learned::Module(
            fs_dir.to_path_buf(),
            display_dir.to_path_buf(),
        ));
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
