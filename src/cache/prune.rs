//! `cache prune`: removing entries no run needs any more, without ever
//! taking one from a run that is using it (the module documentation of
//! [`crate::cache`] has the protocol).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::{EntryUsage, PluginCache, TMP_DIR, remove_if_set_aside, remove_tree};
use crate::addr::{Platform, ProviderAddr};
use crate::version::Version;

/// Which entries go: those that match every criterion given.
#[derive(Clone, Debug, Default)]
pub struct PruneCriteria {
    /// Not used for at least this long.
    pub unused_for: Option<Duration>,
    /// Not among this many newest versions of its provider on its platform.
    pub keep_latest: Option<usize>,
    /// Not a version these lock files select.
    pub keep_locked: Option<BTreeSet<(ProviderAddr, Version)>>,
}

impl PruneCriteria {
    /// No criterion would remove every entry, which nobody asks for by
    /// leaving flags out.
    pub fn is_empty(&self) -> bool {
        self.unused_for.is_none() && self.keep_latest.is_none() && self.keep_locked.is_none()
    }

    fn unused_long_enough(&self, entry: &EntryUsage, now: SystemTime) -> bool {
        self.unused_for.is_none_or(|age| {
            entry
                .last_use
                .is_some_and(|used| now.duration_since(used).unwrap_or_default() >= age)
        })
    }

    fn matches(&self, entry: &EntryUsage, newer_versions: usize, now: SystemTime) -> bool {
        self.unused_long_enough(entry, now)
            && self.keep_latest.is_none_or(|n| newer_versions >= n)
            && self.keep_locked.as_ref().is_none_or(|locked| {
                !locked.contains(&(entry.provider.clone(), entry.version.clone()))
            })
    }
}

/// One entry prune removed (or, with `-dry-run`, would remove).
#[derive(Clone, Debug)]
pub struct Pruned {
    pub entry: EntryUsage,
    /// What its removal gave back (the entry's bytes nothing else links).
    pub freed: u64,
}

#[derive(Debug, Default)]
pub struct PruneReport {
    pub removed: Vec<Pruned>,
    /// Matched, but a run holds the entry: left for a later prune.
    pub in_use: Vec<EntryUsage>,
    /// Matched when listed, but used since (seen once its lock was held).
    pub used_meanwhile: Vec<EntryUsage>,
    /// Entries no criterion selected.
    pub kept: usize,
    /// Entries and sidecars an interrupted removal or fill left behind,
    /// removed now.
    pub leftovers: usize,
    /// Entries that could not be removed, with why.
    pub failed: Vec<(EntryUsage, String)>,
}

impl PruneReport {
    pub fn bytes_freed(&self) -> u64 {
        self.removed.iter().map(|p| p.freed).sum()
    }
}

impl PluginCache {
    /// Removes the entries that match `criteria` as of `now`, each under its
    /// lock, taken with `try_lock`: an entry a run holds is skipped. With
    /// `dry_run` nothing is written; the report says what would go.
    pub fn prune(&self, criteria: &PruneCriteria, dry_run: bool, now: SystemTime) -> PruneReport {
        let mut report = PruneReport::default();
        if !dry_run {
            report.leftovers = self.remove_leftovers();
        }
        let entries = self.usage();
        let newer = newer_versions(&entries);
        for (entry, newer) in entries.into_iter().zip(newer) {
            if !criteria.matches(&entry, newer, now) {
                report.kept += 1;
                continue;
            }
            if dry_run {
                if self.is_held(&entry.dir) {
                    report.in_use.push(entry);
                } else {
                    let freed = entry.unshared_bytes;
                    report.removed.push(Pruned { entry, freed });
                }
                continue;
            }
            let lock = match self.try_lock_dir(&entry.dir) {
                Ok(Some(lock)) => lock,
                Ok(None) => {
                    report.in_use.push(entry);
                    continue;
                }
                Err(err) => {
                    report.failed.push((entry, err.to_string()));
                    continue;
                }
            };
            // What was listed before the lock was held may have changed: a
            // run may have used the entry, or another prune removed it.
            let Ok((_, freed)) = self.entry_size(&entry.dir) else {
                continue;
            };
            let now_entry = EntryUsage {
                last_use: self.last_use(&entry.dir),
                ..entry
            };
            if !criteria.unused_long_enough(&now_entry, now) {
                report.used_meanwhile.push(now_entry);
                continue;
            }
            match self.remove_entry(&lock.work, &now_entry.dir) {
                Ok(()) => report.removed.push(Pruned {
                    entry: now_entry,
                    freed,
                }),
                Err(err) => report.failed.push((now_entry, err.to_string())),
            }
        }
        report
    }

    /// Takes the entry at `dir` out of the cache, as
    /// [`PluginCache::insert`] put it in but backwards: the files first (a
    /// reader then sees no entry), then the archive and the provenance, all
    /// renamed into `work` (the entry's work directory, owned by the
    /// caller's lock) and deleted there. The use record and the lock file
    /// are the only things left in place: the record is rewritten by the
    /// next use; the lock file must stay, or a run that opened it before
    /// would lock a file the next run no longer finds.
    fn remove_entry(&self, work: &Path, dir: &Path) -> io::Result<()> {
        remove_tree(work)?;
        fs::create_dir_all(work)?;
        fs::rename(dir, work.join("entry"))?;
        let [archive, meta, used] = self.removed_sidecars(dir);
        for (sidecar, name) in [(archive, "entry.zip"), (meta, "entry.tfinstall.json")] {
            if fs::symlink_metadata(&sidecar).is_ok() {
                fs::rename(&sidecar, work.join(name))?;
            }
        }
        crate::failpoint::pause("prune-after-rename");
        remove_tree(work)?;
        match fs::remove_file(used) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
            _ => Ok(()),
        }
    }

    /// Finishes what an interrupted prune (or fill) left: entry work
    /// directories in `.tmp/`, and an archive or provenance whose entry is
    /// gone, each removed under the entry's lock if it is free. Returns how
    /// many it removed.
    fn remove_leftovers(&self) -> usize {
        let mut removed = 0;
        let Ok(tmp) = fs::read_dir(self.root.join(TMP_DIR)) else {
            return 0;
        };
        for work in tmp.flatten() {
            let name = work.file_name().to_string_lossy().into_owned();
            if let Some(gone) = remove_if_set_aside(&name, &work.path()) {
                removed += usize::from(gone);
                continue;
            }
            // Only entry work directories are named HOST~NS~TYPE~VERSION~OS_ARCH.
            let parts: Vec<&str> = name.split('~').collect();
            if parts.len() != 5 || parts.iter().any(|p| p.is_empty() || *p == "..") {
                continue;
            }
            let dir = parts.iter().fold(self.root.clone(), |d, p| d.join(p));
            if let Ok(Some(lock)) = self.try_lock_dir(&dir) {
                // The lock's drop removes its work directory.
                drop(lock);
                removed += 1;
            }
        }
        for dir in self.orphaned_entries() {
            let Ok(Some(_lock)) = self.try_lock_dir(&dir) else {
                continue;
            };
            if fs::symlink_metadata(&dir).is_ok() {
                continue;
            }
            let [archive, meta, used] = self.removed_sidecars(&dir);
            for sidecar in [archive, meta, used] {
                if fs::remove_file(sidecar).is_ok() {
                    removed += 1;
                }
            }
        }
        removed
    }

    /// Entry directories named by a provenance, archive or use record that
    /// has no entry beside it any more.
    fn orphaned_entries(&self) -> Vec<PathBuf> {
        let mut orphans = Vec::new();
        for host in subdirs(&self.root) {
            for namespace in subdirs(&host) {
                for type_dir in subdirs(&namespace) {
                    for version in subdirs(&type_dir) {
                        let Ok(files) = fs::read_dir(&version) else {
                            continue;
                        };
                        for file in files.flatten() {
                            let name = file.file_name().to_string_lossy().into_owned();
                            let platform = name
                                .strip_prefix('.')
                                .and_then(|n| {
                                    n.strip_suffix(".tfinstall.json")
                                        .or_else(|| n.strip_suffix(".zip"))
                                        .or_else(|| n.strip_suffix(".used"))
                                })
                                .filter(|p| Platform::parse(p).is_ok());
                            if let Some(platform) = platform {
                                let dir = version.join(platform);
                                if fs::symlink_metadata(&dir).is_err() && !orphans.contains(&dir) {
                                    orphans.push(dir);
                                }
                            }
                        }
                    }
                }
            }
        }
        orphans
    }

    /// Whether a run holds the entry's lock now; asked without writing
    /// anything, for `-dry-run`.
    fn is_held(&self, dir: &Path) -> bool {
        let Ok(file) = fs::File::open(self.sidecar(dir, ".lock")) else {
            return false;
        };
        matches!(file.try_lock(), Err(fs::TryLockError::WouldBlock))
    }
}

/// For each entry, how many newer versions of its provider the cache holds
/// for its platform.
fn newer_versions(entries: &[EntryUsage]) -> Vec<usize> {
    let mut versions: BTreeMap<(&ProviderAddr, &Platform), BTreeSet<&Version>> = BTreeMap::new();
    for entry in entries {
        versions
            .entry((&entry.provider, &entry.platform))
            .or_default()
            .insert(&entry.version);
    }
    entries
        .iter()
        .map(|entry| {
            versions[&(&entry.provider, &entry.platform)]
                .iter()
                .filter(|v| **v > &entry.version)
                .count()
        })
        .collect()
}

/// The directories in `dir` that are not dot-directories (the caches keep
/// their own files in those).
pub(super) fn subdirs(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .map(|children| {
            children
                .flatten()
                .filter(|c| c.file_type().is_ok_and(|t| t.is_dir()))
                .filter(|c| !c.file_name().to_string_lossy().starts_with('.'))
                .map(|c| c.path())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Hostname;
    use crate::cache::{AuthRecord, EntryMeta, META_FORMAT};

    const DAY: Duration = Duration::from_secs(86_400);

    fn null() -> ProviderAddr {
        ProviderAddr::new(Hostname::default_registry(), "hashicorp", "null")
    }

    /// Fills the entry of null `version` for linux_amd64 and dates its
    /// last use `age` ago.
    async fn entry(cache: &PluginCache, version: &str, age: Duration) -> PathBuf {
        let (p, v) = (null(), Version::parse(version).unwrap());
        let plat = Platform::parse("linux_amd64").unwrap();
        let lock = cache.lock_entry(&p, &v, &plat, || {}).await.unwrap();
        let built = lock.build_dir().unwrap();
        fs::create_dir(&built).unwrap();
        fs::write(built.join("terraform-provider-null"), version).unwrap();
        let meta = EntryMeta {
            format: META_FORMAT,
            provider: p.to_string(),
            version: version.into(),
            platform: plat.to_string(),
            h1: "h1:x".into(),
            zh: None,
            signed_hashes: Vec::new(),
            auth: AuthRecord::Unauthenticated,
            origin: "test".into(),
            stamps: None,
        };
        let dir = cache.insert(&lock, &meta).unwrap();
        drop(lock);
        cache.record_use(&dir);
        let then = SystemTime::now() - age;
        for path in [cache.used_path(&dir), cache.meta_path(&dir), dir.clone()] {
            fs::File::options()
                .write(!path.is_dir())
                .read(path.is_dir())
                .open(&path)
                .unwrap()
                .set_modified(then)
                .unwrap();
        }
        dir
    }

    fn removed(report: &PruneReport) -> Vec<String> {
        report
            .removed
            .iter()
            .map(|p| p.entry.version.to_string())
            .collect()
    }

    #[tokio::test]
    async fn an_entry_goes_only_when_it_matches_every_criterion() {
        let root = tempfile::tempdir().unwrap();
        let cache = PluginCache::new(root.path());
        entry(&cache, "1.0.0", 40 * DAY).await;
        entry(&cache, "2.0.0", 40 * DAY).await;
        entry(&cache, "3.0.0", DAY).await;
        let now = SystemTime::now();
        let old = PruneCriteria {
            unused_for: Some(30 * DAY),
            ..Default::default()
        };
        let latest = PruneCriteria {
            keep_latest: Some(2),
            ..Default::default()
        };
        let locked = PruneCriteria {
            keep_locked: Some([(null(), Version::new(1, 0, 0))].into()),
            ..Default::default()
        };
        let both = PruneCriteria {
            keep_latest: Some(2),
            ..old.clone()
        };
        let all_three = PruneCriteria {
            keep_locked: locked.keep_locked.clone(),
            ..both.clone()
        };
        let dry = |criteria: &PruneCriteria| removed(&cache.prune(criteria, true, now));
        assert_eq!(dry(&old), ["1.0.0", "2.0.0"]);
        assert_eq!(dry(&latest), ["1.0.0"]);
        assert_eq!(dry(&locked), ["2.0.0", "3.0.0"]);
        assert_eq!(dry(&both), ["1.0.0"]);
        assert_eq!(dry(&all_three), Vec::<String>::new());
        assert_eq!(cache.usage().len(), 3, "a dry run removes nothing");

        let report = cache.prune(&old, false, now);
        assert_eq!(removed(&report), ["1.0.0", "2.0.0"]);
        assert_eq!(report.kept, 1);
        assert!(report.bytes_freed() > 0);
        let left: Vec<String> = cache
            .usage()
            .iter()
            .map(|e| e.version.to_string())
            .collect();
        assert_eq!(left, ["3.0.0"]);
        // Nothing of the removed entries is left but their lock files.
        let version_dir = root
            .path()
            .join("registry.terraform.io/hashicorp/null/1.0.0");
        let names: Vec<String> = fs::read_dir(&version_dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, [".linux_amd64.lock"]);
        assert_eq!(fs::read_dir(root.path().join(TMP_DIR)).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn an_entry_whose_lock_is_held_is_skipped_and_reported() {
        let root = tempfile::tempdir().unwrap();
        let cache = PluginCache::new(root.path());
        let dir = entry(&cache, "1.0.0", 40 * DAY).await;
        let criteria = PruneCriteria {
            unused_for: Some(30 * DAY),
            ..Default::default()
        };
        let held = cache.hold_for_use(&dir).await.unwrap();
        for dry_run in [true, false] {
            let report = cache.prune(&criteria, dry_run, SystemTime::now());
            assert_eq!(report.in_use.len(), 1, "dry run: {dry_run}");
            assert!(report.removed.is_empty());
        }
        drop(held);
        assert!(dir.is_dir());
        assert_eq!(
            removed(&cache.prune(&criteria, false, SystemTime::now())),
            ["1.0.0"]
        );
        assert!(!dir.exists());
    }

    #[tokio::test]
    async fn a_use_recorded_after_the_listing_keeps_the_entry() {
        let root = tempfile::tempdir().unwrap();
        let cache = PluginCache::new(root.path());
        let dir = entry(&cache, "1.0.0", 40 * DAY).await;
        let criteria = PruneCriteria {
            unused_for: Some(30 * DAY),
            ..Default::default()
        };
        cache.record_use(&dir);
        let report = cache.prune(&criteria, false, SystemTime::now());
        assert!(report.removed.is_empty());
        assert!(dir.is_dir());
    }

    /// What a prune killed between its renames leaves (the files in the
    /// entry's work directory, the provenance beside no entry), and what a
    /// fill killed after writing the provenance leaves: the next prune
    /// removes it all.
    #[tokio::test]
    async fn the_next_prune_finishes_what_a_killed_one_left() {
        let root = tempfile::tempdir().unwrap();
        let cache = PluginCache::new(root.path());
        let dir = entry(&cache, "1.0.0", DAY).await;
        let work = cache.work_dir(&dir);
        fs::create_dir_all(&work).unwrap();
        fs::rename(&dir, work.join("entry")).unwrap();
        let orphan = entry(&cache, "2.0.0", DAY).await;
        super::remove_tree(&orphan).unwrap();
        assert!(cache.usage().is_empty());
        let criteria = PruneCriteria {
            keep_latest: Some(1),
            ..Default::default()
        };
        let report = cache.prune(&criteria, false, SystemTime::now());
        // The work directory, and each entry's provenance and use record.
        assert_eq!(report.leftovers, 5);
        assert!(!work.exists());
        assert!(!cache.meta_path(&orphan).exists());
        assert!(!cache.used_path(&orphan).exists());
    }
}
