//! How one run uses the plugin cache: the cache itself, and what the run
//! learns about its entries, shared by every installer of the run (one per
//! working directory and platform).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::addr::{Platform, ProviderAddr};
use crate::cache::PluginCache;
use crate::package::stamps::DirStamps;
use crate::verify::hash::PackageHash;
use crate::version::Version;

#[derive(Clone)]
pub struct CacheUse {
    pub cache: PluginCache,
    /// `plugin_cache_may_break_dependency_lock_file`: use entries that the
    /// lock file cannot vouch for (Terraform 1.4's escape hatch).
    pub may_break_lock_file: bool,
    /// Keep each entry's verified archive beside it (`serve`'s store, which
    /// hands clients the very bytes the signed checksums name).
    pub keep_archives: bool,
    /// The entries this run fills, shared by every installer of the run.
    pub fills: Arc<CacheFills>,
}

impl CacheUse {
    pub fn new(cache: PluginCache, may_break_lock_file: bool) -> Self {
        CacheUse {
            cache,
            may_break_lock_file,
            keep_archives: false,
            fills: Arc::default(),
        }
    }
}

/// Which cache entries this run is filling or has filled, and the `h1:`
/// of entries it hashed or filled. Installers of one run (one per working
/// directory) that want the same entry wait for each other here, quietly,
/// before the entry's file lock (which is for other processes, and says
/// so); an entry filled earlier in the run is reported as installed by this
/// run in every directory that uses it, so each directory's report reads
/// the same whichever one downloaded; and an entry hashed or filled once is
/// not hashed again by the next directory. Only the hash is kept: it holds
/// as long as the files do, while the provenance beside them may be written
/// at any moment by another process, so it is read afresh at every look.
#[derive(Default)]
pub struct CacheFills {
    in_flight: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    filled: Mutex<HashSet<String>>,
    hashed: Mutex<HashMap<String, (DirStamps, PackageHash)>>,
    used: Mutex<HashMap<String, Instant>>,
}

/// How often a long-running process (`serve`) records again that it uses
/// an entry; a run of `init` records each entry once. An hour is nothing
/// next to the days `cache prune -unused-for` is given in.
const USE_RECORD_INTERVAL: Duration = Duration::from_secs(3600);

impl CacheFills {
    fn key(provider: &ProviderAddr, version: &Version, platform: &Platform) -> String {
        format!("{provider} {version} {platform}")
    }

    /// Waits until no other installer of this run is filling the entry,
    /// and keeps the others waiting until the guard is dropped.
    pub(super) async fn take_turn(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
    ) -> tokio::sync::OwnedMutexGuard<()> {
        let turn = {
            let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            in_flight
                .entry(Self::key(provider, version, platform))
                .or_default()
                .clone()
        };
        turn.lock_owned().await
    }

    pub(super) fn record(&self, provider: &ProviderAddr, version: &Version, platform: &Platform) {
        let mut filled = self.filled.lock().unwrap_or_else(|e| e.into_inner());
        filled.insert(Self::key(provider, version, platform));
    }

    /// The `h1:` this run learnt for the entry in `dir`, if its files are
    /// still the ones it learnt it of. Within one run the files' identity
    /// (inode, size, mtime, mode) is enough: an entry replaced by another
    /// process has new inodes. Across runs the cache's own stamps decide,
    /// which also refuse files written too recently to tell.
    pub(super) fn known_h1(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
        dir: &std::path::Path,
    ) -> Option<PackageHash> {
        let hashed = self.hashed.lock().unwrap_or_else(|e| e.into_inner());
        let (stamps, h1) = hashed.get(&Self::key(provider, version, platform))?;
        stamps.same_files_in(dir).then(|| h1.clone())
    }

    pub(super) fn learn(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
        stamps: DirStamps,
        h1: PackageHash,
    ) {
        let mut hashed = self.hashed.lock().unwrap_or_else(|e| e.into_inner());
        hashed.insert(Self::key(provider, version, platform), (stamps, h1));
    }

    /// Records that the run uses the entry at `dir`: once per entry per
    /// run (once an hour for `serve`), so using an entry in many working
    /// directories costs one write.
    pub fn record_use(
        &self,
        cache: &PluginCache,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
        dir: &std::path::Path,
    ) {
        {
            let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
            let key = Self::key(provider, version, platform);
            if used
                .get(&key)
                .is_some_and(|at| at.elapsed() < USE_RECORD_INTERVAL)
            {
                return;
            }
            used.insert(key, Instant::now());
        }
        cache.record_use(dir);
    }

    /// Whether the entry at `dir` still holds the files this run settled
    /// on (hashed, or filled, to `h1`); a wait for the entry's lock may have
    /// ended with them replaced or removed.
    pub(super) fn still_holds(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
        dir: &std::path::Path,
        h1: &PackageHash,
    ) -> bool {
        let hashed = self.hashed.lock().unwrap_or_else(|e| e.into_inner());
        match hashed.get(&Self::key(provider, version, platform)) {
            Some((stamps, known)) => known == h1 && stamps.same_files_in(dir),
            // Where files have no stamps, presence is all there is to see.
            None => dir.is_dir(),
        }
    }

    pub(super) fn filled(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
    ) -> bool {
        let filled = self.filled.lock().unwrap_or_else(|e| e.into_inner());
        filled.contains(&Self::key(provider, version, platform))
    }
}
