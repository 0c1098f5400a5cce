//! `cache prune`: removing entries no run needs any more, without ever
//! taking one from a run that is using it (the module documentation of
//! [`crate::cache`] has the protocol).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::{EntryUsage, PluginCache, TMP_DIR, remove_tree};
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

    /// Entry directories named by a provenance or archive that has no entry
    /// beside it any more.
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

fn subdirs(dir: &Path) -> Vec<PathBuf> {
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
