//! Keeping the module cache ([`super::modules`]) on machines that keep it
//! for months, as `cache stats`, `prune` and `verify` keep the plugin
//! cache: what its entries take and when they were last used, removing the
//! unused ones without ever taking one from a run that is placing it (the
//! entry's lock, taken with `try_lock`; a run holds it shared while it links
//! the files), and re-checking each entry's files against the digest of
//! its tree recorded when it was inserted.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::modules::{
    ENTRY_META_SUFFIX, IdentityRecord, MODULE_META_FORMAT, ModuleCache, open_lock_file, tree_digest,
};
use super::process_locks::EntryLocks;
use super::prune::subdirs;
use super::usage::size_of;
use super::{Damage, EntryLock, TMP_DIR, remove_if_set_aside, remove_tree, sidecar, work_dir};

/// The two kinds of entry, each a directory of the cache's root.
const KINDS: [&str; 2] = ["git", "archive"];

/// A `.tmp/fetch-*` directory older than this belongs to a run that was
/// killed (a fetch takes seconds): `cache prune` removes it.
const ABANDONED_FETCH_AGE: Duration = Duration::from_secs(24 * 3600);

/// One module entry: where it is, what it holds, what it takes, when it
/// was last used.
#[derive(Clone, Debug)]
pub struct ModuleEntryUsage {
    pub dir: PathBuf,
    /// What its provenance says it is; `None` when that cannot be read.
    pub identity: Option<IdentityRecord>,
    /// The entry's files and its provenance and use record.
    pub bytes: u64,
    /// Of `bytes`, what nothing outside the entry links (working
    /// directories hard-link its files): what removing it gives back.
    pub unshared_bytes: u64,
    pub last_use: Option<SystemTime>,
}

impl ModuleEntryUsage {
    /// The package it holds, as `cache stats` and `prune` name it: the
    /// URL, and the commit or the archive's SHA-256.
    pub fn describe(&self) -> String {
        match &self.identity {
            Some(IdentityRecord::Git { url, commit }) => format!("{url} at commit {commit}"),
            Some(IdentityRecord::Archive { url, sha256 }) => {
                format!("{url} with SHA-256 {sha256}")
            }
            None => self.dir.display().to_string(),
        }
    }

    /// Where it came from: entries of one source are versions of one
    /// package, for `-keep-latest`.
    pub fn source(&self) -> String {
        match &self.identity {
            Some(IdentityRecord::Git { url, .. } | IdentityRecord::Archive { url, .. }) => {
                url.clone()
            }
            None => self
                .dir
                .parent()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        }
    }
}

/// Which module entries `cache prune` removes: those that match every
/// criterion given. Lock files name no module, so `-keep-lock-file` is
/// not one of them; with neither criterion no module entry goes.
#[derive(Clone, Debug, Default)]
pub struct ModulePruneCriteria {
    /// Not used for at least this long.
    pub unused_for: Option<Duration>,
    /// Not among this many most recently used entries of its source (a
    /// commit or archive has no version to order by).
    pub keep_latest: Option<usize>,
}

impl ModulePruneCriteria {
    pub fn is_empty(&self) -> bool {
        self.unused_for.is_none() && self.keep_latest.is_none()
    }

    fn unused_long_enough(&self, entry: &ModuleEntryUsage, now: SystemTime) -> bool {
        self.unused_for.is_none_or(|age| {
            entry
                .last_use
                .is_some_and(|used| now.duration_since(used).unwrap_or_default() >= age)
        })
    }
}

#[derive(Debug, Default)]
pub struct ModulePruneReport {
    /// Each entry removed (or, with `-dry-run`, to be), with the bytes its
    /// removal gives back.
    pub removed: Vec<(ModuleEntryUsage, u64)>,
    /// Matched, but a run holds it: left for a later prune.
    pub in_use: Vec<ModuleEntryUsage>,
    /// Matched when listed, but used since.
    pub used_meanwhile: Vec<ModuleEntryUsage>,
    pub kept: usize,
    /// Work directories, abandoned fetches and records of removed entries
    /// that interrupted runs left, removed now.
    pub leftovers: usize,
    pub failed: Vec<(ModuleEntryUsage, String)>,
}

impl ModulePruneReport {
    pub fn bytes_freed(&self) -> u64 {
        self.removed.iter().map(|(_, freed)| *freed).sum()
    }
}

impl ModuleCache {
    /// Every complete entry's directory: `KIND/URLKEY/ID` (the lock,
    /// provenance and use records are dot-files beside it, the ref records
    /// files).
    pub fn entry_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        for kind in KINDS {
            for source in subdirs(&self.root().join(kind)) {
                dirs.extend(subdirs(&source));
            }
        }
        dirs.sort();
        dirs
    }

    /// Every entry with its usage, in path order.
    pub fn usage(&self) -> Vec<ModuleEntryUsage> {
        self.entry_dirs()
            .into_iter()
            .filter_map(|dir| self.entry_usage(dir))
            .collect()
    }

    fn entry_usage(&self, dir: PathBuf) -> Option<ModuleEntryUsage> {
        let mut paths = vec![dir.clone()];
        paths.extend(self.records_of(&dir));
        let (bytes, unshared_bytes) = size_of(&paths).ok()?;
        let identity = self.read_meta(&dir).map(|meta| meta.identity);
        Some(ModuleEntryUsage {
            last_use: self.last_use(&dir),
            identity,
            dir,
            bytes,
            unshared_bytes,
        })
    }

    fn read_meta(&self, dir: &Path) -> Option<super::modules::ModuleEntryMeta> {
        fs::read(sidecar(dir, ENTRY_META_SUFFIX))
            .ok()
            .and_then(|bytes| {
                serde_json::from_slice::<super::modules::ModuleEntryMeta>(&bytes).ok()
            })
            .filter(|meta| meta.format == MODULE_META_FORMAT)
    }

    /// The provenance and use record that go with an entry.
    fn records_of(&self, dir: &Path) -> [PathBuf; 2] {
        [sidecar(dir, ENTRY_META_SUFFIX), sidecar(dir, ".used")]
    }

    /// Its use record, provenance or directory, whichever is newest (an
    /// entry never used since it was filled ages from the fill).
    fn last_use(&self, dir: &Path) -> Option<SystemTime> {
        let [meta, used] = self.records_of(dir);
        [used, meta, dir.to_path_buf()]
            .iter()
            .filter_map(|path| fs::symlink_metadata(path).and_then(|m| m.modified()).ok())
            .max()
    }

    /// The entry's lock, exclusive, if no run holds it now.
    fn try_lock_entry(&self, dir: &Path) -> io::Result<Option<EntryLock>> {
        let lock_path = sidecar(dir, ".lock");
        let hold = EntryLocks::of(&lock_path).try_hold_exclusive(&|| open_lock_file(&lock_path))?;
        Ok(hold.map(|hold| EntryLock {
            work: work_dir(self.root(), dir),
            entry: dir.to_path_buf(),
            _hold: hold,
        }))
    }

    /// Whether a run holds the entry's lock now, asked without writing
    /// anything (`-dry-run`).
    fn is_held(&self, dir: &Path) -> bool {
        let Ok(file) = fs::File::open(sidecar(dir, ".lock")) else {
            return false;
        };
        matches!(file.try_lock(), Err(fs::TryLockError::WouldBlock))
    }

    /// Removes the entries that match `criteria` as of `now`, each under
    /// its lock taken with `try_lock`, so an entry a run is placing is
    /// skipped; nothing is written with `dry_run`. An entry's files go
    /// first (renamed into its work directory: a reader then sees no
    /// entry), then its records; its lock file stays, as a plugin cache
    /// entry's does.
    pub fn prune(
        &self,
        criteria: &ModulePruneCriteria,
        dry_run: bool,
        now: SystemTime,
    ) -> ModulePruneReport {
        let mut report = ModulePruneReport::default();
        if criteria.is_empty() {
            report.kept = self.entry_dirs().len();
            return report;
        }
        if !dry_run {
            report.leftovers = self.remove_leftovers(now);
        }
        let entries = self.usage();
        let newer = more_recently_used(&entries);
        for (entry, newer) in entries.into_iter().zip(newer) {
            let selected = criteria.unused_long_enough(&entry, now)
                && criteria.keep_latest.is_none_or(|n| newer >= n);
            if !selected {
                report.kept += 1;
                continue;
            }
            if dry_run {
                if self.is_held(&entry.dir) {
                    report.in_use.push(entry);
                } else {
                    let freed = entry.unshared_bytes;
                    report.removed.push((entry, freed));
                }
                continue;
            }
            let lock = match self.try_lock_entry(&entry.dir) {
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
            // Listed before the lock was held: it may have been used since,
            // or removed by another prune.
            let Some(now_entry) = self.entry_usage(entry.dir.clone()) else {
                continue;
            };
            if !criteria.unused_long_enough(&now_entry, now) {
                report.used_meanwhile.push(now_entry);
                continue;
            }
            match self.remove_entry(&lock) {
                Ok(()) => {
                    let freed = now_entry.unshared_bytes;
                    report.removed.push((now_entry, freed));
                }
                Err(err) => report.failed.push((now_entry, err.to_string())),
            }
        }
        report
    }

    fn remove_entry(&self, lock: &EntryLock) -> io::Result<()> {
        let work = &lock.work;
        remove_tree(work)?;
        fs::create_dir_all(work)?;
        fs::rename(&lock.entry, work.join("entry"))?;
        let [meta, used] = self.records_of(&lock.entry);
        if fs::symlink_metadata(&meta).is_ok() {
            fs::rename(&meta, work.join("entry.tfinstall.json"))?;
        }
        remove_tree(work)?;
        match fs::remove_file(used) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
            _ => Ok(()),
        }
    }

    /// What killed runs left: entry work directories in `.tmp/` (each
    /// removed under its entry's lock, if free), fetches older than
    /// [`ABANDONED_FETCH_AGE`], and records of entries that are gone.
    fn remove_leftovers(&self, now: SystemTime) -> usize {
        let mut removed = 0;
        if let Ok(tmp) = fs::read_dir(self.root().join(TMP_DIR)) {
            for work in tmp.flatten() {
                let name = work.file_name().to_string_lossy().into_owned();
                if let Some(gone) = remove_if_set_aside(&name, &work.path()) {
                    removed += usize::from(gone);
                    continue;
                }
                if name.starts_with("fetch-") {
                    let old = work.metadata().and_then(|m| m.modified()).is_ok_and(|at| {
                        now.duration_since(at).unwrap_or_default() >= ABANDONED_FETCH_AGE
                    });
                    if old && remove_tree(&work.path()).is_ok() {
                        removed += 1;
                    }
                    continue;
                }
                // Entry work directories are named KIND~URLKEY~ID.
                let parts: Vec<&str> = name.split('~').collect();
                let well_formed = parts.len() == 3
                    && KINDS.contains(&parts[0])
                    && parts[1..]
                        .iter()
                        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_hexdigit()));
                if !well_formed {
                    continue;
                }
                let dir = parts
                    .iter()
                    .fold(self.root().to_path_buf(), |d, p| d.join(p));
                if let Ok(Some(lock)) = self.try_lock_entry(&dir) {
                    // The lock's drop removes its work directory.
                    drop(lock);
                    removed += 1;
                }
            }
        }
        for dir in self.orphaned_entries() {
            let Ok(Some(_lock)) = self.try_lock_entry(&dir) else {
                continue;
            };
            if fs::symlink_metadata(&dir).is_ok() {
                continue;
            }
            for record in self.records_of(&dir) {
                if fs::remove_file(record).is_ok() {
                    removed += 1;
                }
            }
        }
        removed
    }

    /// Entry directories named by a provenance or use record that has no
    /// entry beside it.
    fn orphaned_entries(&self) -> Vec<PathBuf> {
        let mut orphans = Vec::new();
        for kind in KINDS {
            for source in subdirs(&self.root().join(kind)) {
                let Ok(files) = fs::read_dir(&source) else {
                    continue;
                };
                for file in files.flatten() {
                    let name = file.file_name().to_string_lossy().into_owned();
                    let id = name.strip_prefix('.').and_then(|n| {
                        n.strip_suffix(ENTRY_META_SUFFIX)
                            .or_else(|| n.strip_suffix(".used"))
                    });
                    if let Some(id) = id.filter(|id| id.bytes().all(|b| b.is_ascii_hexdigit())) {
                        let dir = source.join(id);
                        if fs::symlink_metadata(&dir).is_err() && !orphans.contains(&dir) {
                            orphans.push(dir);
                        }
                    }
                }
            }
        }
        orphans
    }

    /// Re-checks every entry against the digest of its tree recorded when
    /// it was inserted, and that its files are still read-only (a writable
    /// one can be changed through any working directory's hard link). Each
    /// is checked under its lock, so never while a prune removes it.
    /// Returns how many were checked, how many had no recorded digest to
    /// check against, and the damage found.
    pub fn verify(&self) -> (usize, usize, Vec<Damage>) {
        let (mut checked, mut unrecorded) = (0, 0);
        let mut damage = Vec::new();
        for dir in self.entry_dirs() {
            // A cache this user may read but not lock is checked all the same.
            let lock_path = sidecar(&dir, ".lock");
            let _lock = EntryLocks::of(&lock_path)
                .hold_exclusive_blocking(&|| fs::File::open(&lock_path).map(Some))
                .ok();
            if !dir.is_dir() {
                continue;
            }
            let Some(expected) = self.read_meta(&dir).map(|meta| meta.tree) else {
                unrecorded += 1;
                continue;
            };
            checked += 1;
            match tree_digest(&dir) {
                Ok(actual) if actual == expected => {}
                Ok(actual) => damage.push(Damage {
                    dir: dir.clone(),
                    problem: format!("contents changed: expected {expected}, found {actual}"),
                }),
                Err(err) => damage.push(Damage {
                    dir: dir.clone(),
                    problem: format!("cannot be read: {err}"),
                }),
            }
            if let Some(file) = first_writable_file(&dir) {
                damage.push(Damage {
                    dir: dir.clone(),
                    problem: format!(
                        "{} is writable, so a write through a working directory's link would change the cache",
                        file.display()
                    ),
                });
            }
        }
        (checked, unrecorded, damage)
    }
}

/// For each entry, how many entries of its source were used more recently.
fn more_recently_used(entries: &[ModuleEntryUsage]) -> Vec<usize> {
    let mut by_source: BTreeMap<String, Vec<Option<SystemTime>>> = BTreeMap::new();
    for entry in entries {
        by_source
            .entry(entry.source())
            .or_default()
            .push(entry.last_use);
    }
    entries
        .iter()
        .map(|entry| {
            by_source[&entry.source()]
                .iter()
                .filter(|other| **other > entry.last_use)
                .count()
        })
        .collect()
}

/// A regular file below `dir` someone may write, if there is one.
#[cfg(unix)]
fn first_writable_file(dir: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for child in fs::read_dir(&dir).ok()?.flatten() {
            let Ok(meta) = fs::symlink_metadata(child.path()) else {
                continue;
            };
            if meta.is_dir() {
                pending.push(child.path());
            } else if meta.is_file() && meta.permissions().mode() & 0o222 != 0 {
                return Some(child.path());
            }
        }
    }
    None
}

#[cfg(not(unix))]
fn first_writable_file(_dir: &Path) -> Option<PathBuf> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_latest_counts_more_recent_uses_of_the_same_source() {
        let now = SystemTime::now();
        let entry = |url: &str, id: &str, age: u64| ModuleEntryUsage {
            dir: PathBuf::from(id),
            identity: Some(IdentityRecord::Git {
                url: url.into(),
                commit: id.into(),
            }),
            bytes: 0,
            unshared_bytes: 0,
            last_use: Some(now - Duration::from_secs(age)),
        };
        let entries = [
            entry("https://h/a.git", "a1", 30),
            entry("https://h/a.git", "a2", 20),
            entry("https://h/a.git", "a3", 10),
            entry("https://h/b.git", "b1", 50),
        ];
        assert_eq!(more_recently_used(&entries), [2, 1, 0, 0]);
    }

    /// A work directory a fill set aside (a killed fill's `git` child was
    /// still writing to it) goes with the next prune, whatever its age.
    #[test]
    fn a_prune_removes_work_set_aside() {
        let root = tempfile::tempdir().unwrap();
        let cache = ModuleCache::new(root.path());
        let aside = root
            .path()
            .join(TMP_DIR)
            .join(format!("{}1-2-3", crate::cache::ASIDE_PREFIX));
        fs::create_dir_all(aside.join("package/.git")).unwrap();
        fs::write(aside.join("package/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        let criteria = ModulePruneCriteria {
            unused_for: Some(Duration::from_secs(3600)),
            keep_latest: None,
        };
        let report = cache.prune(&criteria, false, SystemTime::now());
        assert_eq!(report.leftovers, 1);
        assert!(!aside.exists());
    }
}
