//! The global plugin cache (`plugin_cache_dir`, `TF_PLUGIN_CACHE_DIR`).
//!
//! Laid out like an unpacked mirror (`HOST/NS/TYPE/VERSION/OS_ARCH/`) so
//! Terraform and tfinstall can share one cache. What Terraform's cache lacks
//! (hashicorp/terraform#31964, #32915, #32129), this one has:
//!
//! * Entries are built in `.tmp/` inside the cache and renamed into place
//!   whole, never written in place, so no reader sees a partial entry and no
//!   running provider binary is ever overwritten ("text file busy"). Each
//!   entry has one fixed work directory there, used only by the holder of
//!   the entry's lock, so whatever a killed process left in it is removed by
//!   the next one to take the lock instead of piling up.
//! * A per-entry lock file (`.OS_ARCH.lock` beside the entry) makes every
//!   package download at most once however many processes share the cache;
//!   waiters reuse the result. Locks are `flock`-style and released by the
//!   kernel when a process dies, so a killed process never wedges the rest.
//!   A process holds each entry's lock file once for all its holders
//!   ([`process_locks`]): the directories of one run share an entry without
//!   contending for its lock, and no task of a process waits on its own
//!   process's file lock (opentofu#2967, opentofu#4166). A wait for another
//!   process is a blocking lock on a blocking thread, which ends when the
//!   holder releases it; no runtime thread blocks.
//! * Beside each entry, `.OS_ARCH.tfinstall.json` keeps its provenance: the
//!   `h1:` of the files, the signed `zh:` list and who signed it, and where it
//!   came from. A cache hit for a provider new to the lock file can then write
//!   the same complete, verified lock entry a download would, without
//!   downloading. Terraform ignores these dot-files when it scans the cache.
//! * Files in an entry are made read-only. Installs hard-link them, so the
//!   working directory shares the inode: the read-only mode makes an
//!   accidental write fail instead of corrupting every project that links the
//!   entry, and tfinstall itself only ever replaces installed packages by
//!   rename. `tfinstall cache verify` re-hashes entries to find damage done
//!   anyway (by root, or by a tool that changes modes first).
//!
//! # The invariant: each entry is filled once
//!
//! An entry is *complete* when its directory is in place; tfinstall's
//! entries are complete with their provenance, because [`PluginCache::insert`]
//! writes the provenance (atomically, by rename) before it renames the files
//! into place, and a replaced entry's files are moved aside before the new
//! provenance is written. A reader therefore sees no entry, or a whole one:
//! never tfinstall's files without their provenance, which would look like
//! an entry Terraform made and nothing vouches for. A crash between the two
//! renames leaves provenance without files, which [`PluginCache::lookup`]
//! reads as no entry and the next fill overwrites.
//!
//! Every write to an entry or its provenance happens under the entry's lock:
//! fills and replacements hold it exclusively; the stamps a later run
//! records ([`PluginCache::remember_stamps`]) are written while it is held
//! at least for use, which no fill, replacement or removal can be, and
//! skipped when one holds it. A process that holds the lock looks at the entry afresh
//! before it fills it, and uses a complete entry it finds there: it never
//! acts on what it saw before it held the lock. Within one run, what may be
//! remembered about an entry is only the `h1:` of files whose identity
//! (inode, size, times, mode) is unchanged; its provenance is read from disk
//! at every look. `cache verify` checks each entry under its lock, so it
//! never reports an entry half-way through a replacement.
//! `tests/cache_interleavings.rs` forces each order of two processes at
//! these steps, and runs 16 at once for several rounds.
//!
//! # Use, and removal
//!
//! A run that installs from an entry (or fills it, or warms it) holds the
//! entry's lock *shared* from the moment it settles on the entry until its
//! files are linked, and records the use then by touching `.OS_ARCH.used`
//! (see [`PluginCache::record_use`]). `cache prune` takes the lock
//! exclusively with `try_lock`, so it never takes an entry from under a
//! run: it skips the entries a run holds, and a run that finds the lock
//! held waits, then looks again. Removal is insertion backwards: the files
//! are renamed into the entry's work directory first, then the archive and
//! provenance, and only then deleted, so a crash leaves no entry (or the
//! whole one), and whatever it left in `.tmp/` or beside the entry goes
//! with the next prune, or the next holder of the lock.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::addr::{Platform, ProviderAddr};
use crate::package::layout::unpacked_package_dir;
use crate::package::stamps::DirStamps;
use crate::source::PackageLocation;
use crate::source::filesystem::scan_directory;
use crate::verify::hash::PackageHash;
use crate::verify::{AuthResult, SignatureCheck, Trust};
use crate::version::Version;

pub mod facts;
pub mod module_upkeep;
pub mod modules;
mod process_locks;
mod prune;
mod usage;

use process_locks::{EntryLocks, ExclusiveHold, SharedHold};

pub use prune::{PruneCriteria, PruneReport, Pruned};
pub use usage::{CacheStats, EntryUsage, ProviderStats};

const TMP_DIR: &str = ".tmp";
const CACHEDIR_TAG: &str = "CACHEDIR.TAG";
pub const META_FORMAT: u32 = 1;

/// How long a waiter waits before it says it is waiting; OpenTofu uses the
/// same delay for its "Waiting for lock" line.
pub const WAIT_NOTICE_AFTER: Duration = Duration::from_secs(5);

#[derive(Clone, Debug)]
pub struct PluginCache {
    root: PathBuf,
}

/// Provenance of one cache entry, stored beside it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryMeta {
    pub format: u32,
    pub provider: String,
    pub version: String,
    pub platform: String,
    /// `h1:` of the entry's files, as the lock file records it.
    pub h1: String,
    /// `zh:` of the archive the entry was unpacked from, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zh: Option<String>,
    /// Every `zh:` of the signed SHA256SUMS, when the package was signed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signed_hashes: Vec<String>,
    pub auth: AuthRecord,
    /// Where the package came from (URL or path), for `cache verify` reports.
    pub origin: String,
    /// The entry's file stamps once a run has hashed it and found `h1`:
    /// later runs that find them unchanged take `h1` without hashing the
    /// package again (see `package::stamps` for why that is safe; the
    /// entry's files are read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stamps: Option<DirStamps>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum AuthRecord {
    Unauthenticated,
    VerifiedChecksum,
    Signed {
        trust: TrustRecord,
        key_id: String,
        /// The primary key's fingerprint and the signing subkey's, for
        /// policies that pin keys by fingerprint (absent from records made
        /// before they were kept, which such a pin then does not match).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        fingerprints: Vec<String>,
        /// The signing key had expired, which the provider policy may
        /// refuse (`accept_expired_keys = false`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        key_expired: bool,
    },
    SigningSkipped,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrustRecord {
    Hashicorp,
    Partner,
    SelfSigned,
}

impl From<&AuthResult> for AuthRecord {
    fn from(auth: &AuthResult) -> Self {
        match auth {
            AuthResult::Unauthenticated => AuthRecord::Unauthenticated,
            AuthResult::VerifiedChecksum => AuthRecord::VerifiedChecksum,
            AuthResult::Signed(check) => AuthRecord::Signed {
                trust: match check.trust {
                    Trust::HashiCorp => TrustRecord::Hashicorp,
                    Trust::Partner => TrustRecord::Partner,
                    Trust::SelfSigned => TrustRecord::SelfSigned,
                },
                key_id: check.key_id.clone(),
                fingerprints: check.fingerprints.clone(),
                key_expired: check.key_expired,
            },
            AuthResult::SigningSkipped => AuthRecord::SigningSkipped,
        }
    }
}

impl From<&AuthRecord> for AuthResult {
    fn from(record: &AuthRecord) -> Self {
        match record {
            AuthRecord::Unauthenticated => AuthResult::Unauthenticated,
            AuthRecord::VerifiedChecksum => AuthResult::VerifiedChecksum,
            AuthRecord::Signed {
                trust,
                key_id,
                fingerprints,
                key_expired,
            } => AuthResult::Signed(SignatureCheck {
                trust: match trust {
                    TrustRecord::Hashicorp => Trust::HashiCorp,
                    TrustRecord::Partner => Trust::Partner,
                    TrustRecord::SelfSigned => Trust::SelfSigned,
                },
                key_id: key_id.clone(),
                fingerprints: fingerprints.clone(),
                key_expired: *key_expired,
            }),
            AuthRecord::SigningSkipped => AuthResult::SigningSkipped,
        }
    }
}

impl EntryMeta {
    pub fn h1(&self) -> Option<PackageHash> {
        PackageHash::parse(&self.h1).ok()
    }

    pub fn signed_hashes(&self) -> Vec<PackageHash> {
        self.signed_hashes
            .iter()
            .filter_map(|h| PackageHash::parse(h).ok())
            .collect()
    }
}

/// A usable entry: the unpacked package, and its provenance when tfinstall
/// made it (entries Terraform made have none).
#[derive(Clone, Debug)]
pub struct CacheEntry {
    pub dir: PathBuf,
    pub meta: Option<EntryMeta>,
}

/// Holding this keeps other processes from filling the same entry. It owns
/// the entry's work directory in `.tmp/`, removed when the lock is dropped
/// (and by the next holder if this process dies first).
pub struct EntryLock {
    entry: PathBuf,
    work: PathBuf,
    _hold: ExclusiveHold,
}

impl EntryLock {
    /// An empty directory on the cache's filesystem to build the entry in,
    /// ready for [`PluginCache::insert`]; it does not exist yet. What a
    /// killed holder left in the work directory goes first
    /// ([`clear_work`]).
    pub fn build_dir(&self) -> io::Result<PathBuf> {
        clear_work(&self.work)?;
        fs::create_dir_all(&self.work)?;
        Ok(self.work.join("package"))
    }
}

impl EntryLock {
    /// Where a fill that keeps the entry's archive puts it for
    /// [`PluginCache::insert`] to publish.
    pub fn archive_path(&self) -> PathBuf {
        self.work.join("archive.zip")
    }
}

impl Drop for EntryLock {
    fn drop(&mut self) {
        // Runs before the lock file closes, so no other holder is affected.
        let _ = remove_tree(&self.work);
    }
}

/// Holding this (the entry's lock, shared) keeps `cache prune` from
/// removing the entry while a run links its files; any number of runs, and
/// of directories in a run, may hold it at once.
pub struct EntryUse {
    _hold: SharedHold,
}

/// The lock file of the entry at `dir`, for a use of it. A cache this user
/// may read but not write (another user's) is used as before: held if its
/// lock file is there, else not at all (`Ok(None)`), since whoever can prune
/// it can also lock it.
fn open_for_use(lock_path: &Path, dir: &Path) -> io::Result<Option<File>> {
    let opened = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(lock_path);
    match opened {
        Ok(file) => Ok(Some(file)),
        Err(_) if dir.is_dir() => Ok(fs::File::open(lock_path).ok()),
        Err(err) => Err(err),
    }
}

/// The file beside `entry` named `.NAME{suffix}` (the lock, provenance and
/// use record of an entry): dot-files, which Terraform's scan of the plugin
/// cache skips.
fn sidecar(entry: &Path, suffix: &str) -> PathBuf {
    let name = entry
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    entry.with_file_name(format!(".{name}{suffix}"))
}

/// The work directory of the entry at `entry` in the cache at `root`:
/// `.tmp/` and the entry's path below `root` with `~` for `/` (`~` occurs
/// in none of the parts), flat so nothing is left behind.
fn work_dir(root: &Path, entry: &Path) -> PathBuf {
    let name = entry
        .strip_prefix(root)
        .unwrap_or(entry)
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("~");
    root.join(TMP_DIR).join(name)
}

/// Marks `root` as a cache so backup tools skip it
/// (https://bford.info/cachedir/).
fn mark_cache_dir(root: &Path) {
    let tag = root.join(CACHEDIR_TAG);
    if !tag.exists() {
        let _ = crate::fsutil::write_atomic(
            &tag,
            b"Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag created by tfinstall.\n",
            0o644,
        );
    }
}

/// How the name of a work directory [`clear_work`] set aside in `.tmp/`
/// begins; `cache prune` removes what is left of it
/// ([`remove_if_set_aside`]).
const ASIDE_PREFIX: &str = "aside-";

/// For `cache prune`'s sweep of `.tmp/`: `None` when `name` is not work
/// [`clear_work`] set aside, else whether the tree at `path` is gone now.
/// No lock names such a tree, so it goes whatever its age.
fn remove_if_set_aside(name: &str, path: &Path) -> Option<bool> {
    name.starts_with(ASIDE_PREFIX)
        .then(|| remove_tree(path).is_ok())
}

/// Removes what a killed holder left in the work directory `work`. Its
/// `git` child outlives it and may still be adding files there (until the
/// server's answer ends), and then removing the tree in place fails with
/// "Directory not empty", and the fill with it. So a tree that will not go
/// is renamed aside, which works however busy it is (the child's writes
/// follow it), and removed as far as it goes; the rest is `cache prune`'s.
fn clear_work(work: &Path) -> io::Result<()> {
    if remove_tree(work).is_ok() {
        return Ok(());
    }
    static SET_ASIDE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let aside = work.with_file_name(format!(
        "{ASIDE_PREFIX}{}-{stamp}-{}",
        std::process::id(),
        SET_ASIDE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    fs::rename(work, &aside)?;
    let _ = remove_tree(&aside);
    Ok(())
}

/// Removes a tree that may hold read-only files (cache entries do); absent
/// is fine.
fn remove_tree(dir: &Path) -> io::Result<()> {
    if fs::symlink_metadata(dir).is_err() {
        return Ok(());
    }
    let _ = make_writable(dir);
    fs::remove_dir_all(dir)
}

/// One problem `cache verify` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    pub dir: PathBuf,
    pub problem: String,
}

impl PluginCache {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        PluginCache { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn entry_dir(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
    ) -> PathBuf {
        unpacked_package_dir(&self.root, provider, version, platform)
    }

    fn sidecar(&self, entry: &Path, suffix: &str) -> PathBuf {
        sidecar(entry, suffix)
    }

    fn meta_path(&self, entry: &Path) -> PathBuf {
        self.sidecar(entry, ".tfinstall.json")
    }

    fn archive_of_dir(&self, entry: &Path) -> PathBuf {
        self.sidecar(entry, ".zip")
    }

    fn used_path(&self, entry: &Path) -> PathBuf {
        self.sidecar(entry, ".used")
    }

    /// Records that a run used the entry now, for `cache prune -unused-for`:
    /// one byte written to `.OS_ARCH.used`, whose modification time is the
    /// last use. A write moves the time for anyone allowed to write, where
    /// setting times is for the file's owner only (caches are shared by
    /// users); it needs no lock (overwriting one byte with the same byte
    /// cannot go wrong however many runs do it at once) and a crash leaves
    /// the file as it was or written. Failing only costs the record, so it
    /// never fails the install (a read-only cache is still usable).
    pub fn record_use(&self, entry: &Path) {
        use std::io::Write as _;
        let _ = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.used_path(entry))
            .and_then(|mut file| file.write_all(b"\n"));
    }

    /// Holds the entry at `dir` for use: its lock, shared, waited for while
    /// a fill, a check or a prune holds it exclusively. The caller looks at
    /// the entry again once it holds it: the wait may have ended with the
    /// entry replaced or removed.
    pub async fn hold_for_use(&self, dir: &Path) -> io::Result<EntryUse> {
        let lock_path = self.sidecar(dir, ".lock");
        let hold = EntryLocks::of(&lock_path)
            .hold_shared(&|| open_for_use(&lock_path, dir))
            .await?;
        crate::failpoint::pause("use-held");
        Ok(EntryUse { _hold: hold })
    }

    /// The verified archive the entry was unpacked from, when the fill kept
    /// it (`serve`'s store does): `.OS_ARCH.zip` beside the entry, which
    /// Terraform's scan of the cache skips as it skips the other dot-files.
    pub fn archive(&self, entry: &CacheEntry) -> Option<PathBuf> {
        let archive = self.archive_of_dir(&entry.dir);
        archive.is_file().then_some(archive)
    }

    /// The entry for this exact package, if one is complete. Entries are
    /// only ever renamed into place whole, so existence means complete.
    pub fn lookup(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
    ) -> Option<CacheEntry> {
        let dir = self.entry_dir(provider, version, platform);
        if !dir.is_dir() {
            return None;
        }
        let meta = self.read_meta(&dir);
        Some(CacheEntry { dir, meta })
    }

    /// The provenance beside `entry`, if it is there and readable. It is
    /// only ever replaced by rename, so it is read whole or not at all.
    fn read_meta(&self, entry: &Path) -> Option<EntryMeta> {
        fs::read(self.meta_path(entry))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<EntryMeta>(&bytes).ok())
            .filter(|m| m.format == META_FORMAT)
    }

    /// Takes the entry's lock, waiting (without holding up the async
    /// runtime) for this process's other holders and for other processes.
    /// `on_wait` is called once if another process still holds it after
    /// [`WAIT_NOTICE_AFTER`].
    pub async fn lock_entry(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
        on_wait: impl FnOnce(),
    ) -> io::Result<EntryLock> {
        let dir = self.entry_dir(provider, version, platform);
        let lock_path = self.sidecar(&dir, ".lock");
        let hold = EntryLocks::of(&lock_path)
            .hold_exclusive(&|| self.open_for_change(&dir), on_wait)
            .await?;
        Ok(self.entry_lock(&dir, hold))
    }

    /// The lock of the entry at `dir`, unless another process (or another
    /// holder in this one) has it.
    fn try_lock_dir(&self, dir: &Path) -> io::Result<Option<EntryLock>> {
        let lock_path = self.sidecar(dir, ".lock");
        let hold = EntryLocks::of(&lock_path).try_hold_exclusive(&|| self.open_for_change(dir))?;
        Ok(hold.map(|hold| self.entry_lock(dir, hold)))
    }

    /// [`PluginCache::lock_entry`] for code that may block its thread.
    fn lock_dir_blocking(&self, dir: &Path) -> io::Result<EntryLock> {
        let lock_path = self.sidecar(dir, ".lock");
        let hold =
            EntryLocks::of(&lock_path).hold_exclusive_blocking(&|| self.open_for_change(dir))?;
        Ok(self.entry_lock(dir, hold))
    }

    fn entry_lock(&self, dir: &Path, hold: ExclusiveHold) -> EntryLock {
        EntryLock {
            work: self.work_dir(dir),
            entry: dir.to_path_buf(),
            _hold: hold,
        }
    }

    /// The lock file of the entry at `dir`, made if need be, for a holder
    /// that changes the entry.
    fn open_for_change(&self, dir: &Path) -> io::Result<Option<File>> {
        if let Some(parent) = dir.parent() {
            fs::create_dir_all(parent)?;
        }
        self.mark_cache_dir();
        fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.sidecar(dir, ".lock"))
            .map(Some)
    }

    /// The entry's work directory: `.tmp/HOST~NS~TYPE~VERSION~OS_ARCH`
    /// (`~` occurs in none of the parts), flat so nothing is left behind.
    fn work_dir(&self, entry: &Path) -> PathBuf {
        work_dir(&self.root, entry)
    }

    /// Publishes the package built in `lock`'s [`EntryLock::build_dir`]
    /// with its provenance; see the module documentation for the order. An
    /// existing entry (a damaged one, or one Terraform left that nothing
    /// vouches for) is first moved aside into the work directory, so files
    /// linked to it keep their content: entries are replaced, never
    /// rewritten.
    pub fn insert(&self, lock: &EntryLock, meta: &EntryMeta) -> io::Result<PathBuf> {
        let built = lock.work.join("package");
        let dir = &lock.entry;
        make_read_only(&built)?;
        // Stamps taken now vouch for the files from the start when their
        // times were pinned (`package::stamps::pin_mtimes`); renaming the
        // entry into place changes none of them.
        let meta = EntryMeta {
            stamps: DirStamps::of(&built)?,
            ..meta.clone()
        };
        crate::failpoint::pause("insert-before-publish");
        let archive = self.archive_of_dir(dir);
        if fs::symlink_metadata(dir).is_ok() {
            fs::rename(dir, lock.work.join("replaced"))?;
        }
        if fs::symlink_metadata(&archive).is_ok() {
            fs::rename(&archive, lock.work.join("replaced.zip"))?;
        }
        let json = serde_json::to_vec_pretty(&meta).map_err(io::Error::other)?;
        crate::fsutil::write_atomic(&self.meta_path(dir), &json, 0o644)?;
        let kept = lock.archive_path();
        if kept.is_file() {
            set_read_only(&kept)?;
            fs::rename(&kept, &archive)?;
        }
        crate::failpoint::pause("insert-midway");
        fs::rename(&built, dir)?;
        Ok(dir.clone())
    }

    /// Records in `entry`'s provenance the stamps its files had before they
    /// were hashed and found to be `meta`'s (a write since shows in them),
    /// for an entry whose recorded stamps do not hold: one filled before
    /// stamps were recorded at insertion, or whose files' times were not
    /// pinned, so that its stamps were too fresh to trust. The write is
    /// made under the entry's lock (`held`, or taken here for use if no
    /// fill, check or removal holds it) and only while the provenance is
    /// still `meta`: an entry being filled or replaced is left alone.
    /// Skipping only costs a later run the hashing.
    pub fn remember_stamps(
        &self,
        entry: &Path,
        meta: &EntryMeta,
        stamps: DirStamps,
        held: Option<&EntryLock>,
    ) {
        // Held for use is enough, and keeps the other directories of the
        // run using the entry from waiting: every fill, check or removal
        // (of this process or another) holds the lock exclusively, and runs
        // remembering stamps at once write the same ones, each by rename.
        let _taken = match held {
            Some(lock) if lock.entry == entry => None,
            _ => {
                let lock_path = self.sidecar(entry, ".lock");
                match EntryLocks::of(&lock_path)
                    .try_hold_shared(&|| open_for_use(&lock_path, entry))
                {
                    Ok(Some(hold)) => Some(hold),
                    _ => return,
                }
            }
        };
        let still = self.read_meta(entry).is_some_and(|now| now == *meta);
        if !still {
            return;
        }
        let meta = EntryMeta {
            stamps: Some(stamps),
            ..meta.clone()
        };
        if let Ok(json) = serde_json::to_vec_pretty(&meta) {
            let _ = crate::fsutil::write_atomic(&self.meta_path(entry), &json, 0o644);
        }
    }

    fn mark_cache_dir(&self) {
        mark_cache_dir(&self.root);
    }

    /// Every unpacked entry, for `cache verify`.
    pub fn entries(&self) -> Vec<(ProviderAddr, Version, Platform, PathBuf)> {
        let mut out = Vec::new();
        for (provider, packages) in scan_directory(&self.root) {
            for package in packages {
                if let PackageLocation::LocalDir(dir) = package.location {
                    out.push((provider.clone(), package.version, package.platform, dir));
                }
            }
        }
        out
    }

    /// Re-hashes every entry tfinstall made against its recorded `h1:`,
    /// each under its lock, so an entry being replaced is checked once the
    /// replacement is whole (or found gone), never half-way.
    pub fn verify(&self) -> (usize, Vec<Damage>) {
        let mut checked = 0;
        let mut damage = Vec::new();
        let entries = self.entries();
        crate::failpoint::pause("verify-listed");
        for (_, _, _, dir) in entries {
            // A cache this user may read but not lock (another user's) is
            // checked all the same.
            let lock = self.lock_dir_blocking(&dir).ok();
            let Some(meta) = self.read_meta(&dir).filter(|_| dir.is_dir()) else {
                continue;
            };
            checked += 1;
            match PackageHash::h1_of_dir(&dir) {
                Ok(actual) if actual.as_str() == meta.h1 => {}
                Ok(actual) => damage.push(Damage {
                    dir: dir.clone(),
                    problem: format!("contents changed: expected {}, found {actual}", meta.h1),
                }),
                Err(err) => damage.push(Damage {
                    dir: dir.clone(),
                    problem: format!("cannot be read: {err}"),
                }),
            }
            // The archive a `serve` store keeps beside the entry must still
            // be the one its record names.
            let archive = self.archive_of_dir(&dir);
            if archive.is_file() {
                match PackageHash::zh_of_file(&archive) {
                    Ok(actual) if meta.zh.as_deref() == Some(actual.as_str()) => {}
                    Ok(actual) => damage.push(Damage {
                        dir: dir.clone(),
                        problem: format!(
                            "its archive {} changed: expected {}, found {actual}",
                            archive.display(),
                            meta.zh.as_deref().unwrap_or("no archive")
                        ),
                    }),
                    Err(err) => damage.push(Damage {
                        dir: dir.clone(),
                        problem: format!("its archive {} cannot be read: {err}", archive.display()),
                    }),
                }
            }
            drop(lock);
        }
        (checked, damage)
    }
}

#[cfg(unix)]
fn set_read_only(file: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(file)?.permissions().mode();
    fs::set_permissions(file, fs::Permissions::from_mode(mode & !0o222))
}

#[cfg(not(unix))]
fn set_read_only(_file: &Path) -> io::Result<()> {
    Ok(())
}

fn make_read_only(dir: &Path) -> io::Result<()> {
    set_file_modes(dir, &|mode| mode & !0o222)
}

fn make_writable(dir: &Path) -> io::Result<()> {
    set_file_modes(dir, &|mode| mode | 0o200)
}

#[cfg(unix)]
fn set_file_modes(dir: &Path, change: &dyn Fn(u32) -> u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        if meta.is_dir() {
            set_file_modes(&entry.path(), change)?;
        } else if meta.is_file() {
            let mode = meta.permissions().mode();
            fs::set_permissions(entry.path(), fs::Permissions::from_mode(change(mode)))?;
        }
    }
    Ok(())
}

#[cfg(not(unix))]
fn set_file_modes(_dir: &Path, _change: &dyn Fn(u32) -> u32) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Hostname;

    fn provider() -> ProviderAddr {
        ProviderAddr::new(Hostname::default_registry(), "hashicorp", "null")
    }

    fn meta(h1: &str) -> EntryMeta {
        EntryMeta {
            format: META_FORMAT,
            provider: provider().to_string(),
            version: "1.0.0".into(),
            platform: "linux_amd64".into(),
            h1: h1.into(),
            zh: None,
            signed_hashes: vec!["zh:00".into()],
            auth: AuthRecord::Signed {
                trust: TrustRecord::SelfSigned,
                key_id: "ABCDEF0123456789".into(),
                fingerprints: vec!["0123456789ABCDEF0123456789ABCDEF01234567".into()],
                key_expired: true,
            },
            origin: "https://example.com/p.zip".into(),
            stamps: None,
        }
    }

    fn key() -> (ProviderAddr, Version, Platform) {
        (
            provider(),
            Version::new(1, 0, 0),
            Platform::parse("linux_amd64").unwrap(),
        )
    }

    /// Builds an entry holding `content` under the entry's lock and inserts
    /// it with a record of `h1` (the real one when `None`).
    async fn insert_entry(cache: &PluginCache, content: &[u8], h1: Option<&str>) -> PathBuf {
        let (p, v, plat) = key();
        let lock = cache.lock_entry(&p, &v, &plat, || {}).await.unwrap();
        let built = lock.build_dir().unwrap();
        fs::create_dir(&built).unwrap();
        fs::write(built.join("terraform-provider-null"), content).unwrap();
        let real = PackageHash::h1_of_dir(&built).unwrap();
        cache
            .insert(&lock, &meta(h1.unwrap_or(real.as_str())))
            .unwrap()
    }

    #[tokio::test]
    async fn inserted_entries_are_found_with_provenance_and_read_only() {
        let root = tempfile::tempdir().unwrap();
        let cache = PluginCache::new(root.path());
        let (p, v, plat) = key();
        assert!(cache.lookup(&p, &v, &plat).is_none());
        let dir = insert_entry(&cache, b"binary", None).await;
        assert_eq!(
            dir,
            root.path()
                .join("registry.terraform.io/hashicorp/null/1.0.0/linux_amd64")
        );
        let entry = cache.lookup(&p, &v, &plat).unwrap();
        let recorded = entry.meta.unwrap();
        assert_eq!(recorded.h1(), Some(PackageHash::h1_of_dir(&dir).unwrap()));
        assert_eq!(AuthResult::from(&recorded.auth).to_string(), "self-signed");
        // The key's expiry is kept for the provider policy; records made
        // before it was kept read as unexpired.
        let AuthResult::Signed(check) = AuthResult::from(&recorded.auth) else {
            panic!("recorded as signed");
        };
        assert!(check.key_expired);
        let older: AuthRecord = serde_json::from_str(
            r#"{"result":"signed","trust":"partner","key_id":"ABCDEF0123456789"}"#,
        )
        .unwrap();
        assert!(matches!(
            older,
            AuthRecord::Signed {
                key_expired: false,
                ..
            }
        ));
        let mode = fs::metadata(dir.join("terraform-provider-null"))
            .unwrap()
            .permissions();
        assert!(mode.readonly());
        assert_eq!(cache.verify(), (1, Vec::new()));
        // The work directory went with the lock.
        assert_eq!(fs::read_dir(root.path().join(TMP_DIR)).unwrap().count(), 0);
    }

    /// A killed fill's `git` child outlives it and goes on adding files
    /// to the work directory it was given. The next holder's build
    /// directory is empty all the same, none of the child's files reach
    /// it, and `cache prune` removes what was set aside. (Removed in place,
    /// such a tree failed the fill with "Directory not empty".)
    #[cfg(unix)]
    #[tokio::test]
    async fn a_work_directory_still_written_to_is_set_aside() {
        use rustix::fs::{Mode, OFlags};
        use std::sync::atomic::{AtomicBool, Ordering};
        let root = tempfile::tempdir().unwrap();
        let cache = PluginCache::new(root.path());
        let (p, v, plat) = key();
        let work = work_dir(root.path(), &cache.entry_dir(&p, &v, &plat));
        for _ in 0..10 {
            fs::create_dir_all(work.join("package")).unwrap();
            // The child writes where it was started: a handle on the
            // directory, which goes with it wherever it is renamed.
            let dir =
                rustix::fs::open(&work, OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty()).unwrap();
            let stop = std::sync::Arc::new(AtomicBool::new(false));
            let writer = {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let _ = rustix::fs::openat(
                            &dir,
                            format!("object-{n}"),
                            OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC,
                            Mode::from_raw_mode(0o644),
                        );
                        n += 1;
                    }
                })
            };
            while fs::read_dir(&work).unwrap().count() < 50 {
                std::thread::yield_now();
            }
            let lock = cache.lock_entry(&p, &v, &plat, || {}).await.unwrap();
            let built = lock.build_dir().unwrap();
            stop.store(true, Ordering::Relaxed);
            writer.join().unwrap();
            assert!(!built.exists());
            assert_eq!(fs::read_dir(&work).unwrap().count(), 0);
            drop(lock);
        }
        cache.prune(
            &prune::PruneCriteria {
                unused_for: Some(std::time::Duration::from_secs(3600)),
                keep_latest: None,
                keep_locked: None,
            },
            false,
            std::time::SystemTime::now(),
        );
        assert_eq!(fs::read_dir(root.path().join(TMP_DIR)).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn replacing_an_entry_keeps_files_linked_to_the_old_one() {
        let root = tempfile::tempdir().unwrap();
        let cache = PluginCache::new(root.path());
        let dir = insert_entry(&cache, b"old", Some("h1:x")).await;
        let linked = root.path().join("linked");
        fs::hard_link(dir.join("terraform-provider-null"), &linked).unwrap();
        insert_entry(&cache, b"new", Some("h1:y")).await;
        assert_eq!(fs::read(&linked).unwrap(), b"old");
        assert_eq!(
            fs::read(dir.join("terraform-provider-null")).unwrap(),
            b"new"
        );
    }

    #[tokio::test]
    async fn the_next_holder_removes_what_a_killed_one_left() {
        let root = tempfile::tempdir().unwrap();
        let cache = PluginCache::new(root.path());
        let (p, v, plat) = key();
        // What a holder killed while unpacking leaves: its work directory
        // with a half-built, read-only package.
        let work = cache.work_dir(&cache.entry_dir(&p, &v, &plat));
        assert_eq!(
            work,
            root.path()
                .join(".tmp/registry.terraform.io~hashicorp~null~1.0.0~linux_amd64")
        );
        fs::create_dir_all(work.join("package")).unwrap();
        fs::write(work.join("package/half-unpacked"), b"...").unwrap();
        make_read_only(&work).unwrap();
        let lock = cache.lock_entry(&p, &v, &plat, || {}).await.unwrap();
        let built = lock.build_dir().unwrap();
        assert!(!built.exists());
        assert_eq!(fs::read_dir(&work).unwrap().count(), 0);
        drop(lock);
        assert!(!work.exists());
    }

    /// A kept archive is published with its entry, and `cache verify`
    /// checks it against the record's `zh:`.
    #[tokio::test]
    async fn kept_archives_are_published_with_the_entry_and_verified() {
        let root = tempfile::tempdir().unwrap();
        let cache = PluginCache::new(root.path());
        let (p, v, plat) = key();
        let lock = cache.lock_entry(&p, &v, &plat, || {}).await.unwrap();
        let built = lock.build_dir().unwrap();
        fs::create_dir(&built).unwrap();
        fs::write(built.join("terraform-provider-null"), b"binary").unwrap();
        fs::write(lock.archive_path(), b"the archive").unwrap();
        let zh = PackageHash::zh_of_file(&lock.archive_path()).unwrap();
        let record = EntryMeta {
            zh: Some(zh.to_string()),
            ..meta(PackageHash::h1_of_dir(&built).unwrap().as_str())
        };
        cache.insert(&lock, &record).unwrap();
        drop(lock);
        let entry = cache.lookup(&p, &v, &plat).unwrap();
        let archive = cache.archive(&entry).unwrap();
        assert_eq!(fs::read(&archive).unwrap(), b"the archive");
        assert!(fs::metadata(&archive).unwrap().permissions().readonly());
        assert_eq!(cache.verify(), (1, Vec::new()));
        make_writable(root.path()).unwrap();
        fs::write(&archive, b"another archive").unwrap();
        let (_, damage) = cache.verify();
        assert_eq!(damage.len(), 1, "{damage:?}");
        assert!(damage[0].problem.contains("archive"), "{damage:?}");
    }

    #[tokio::test]
    async fn verify_reports_changed_entries() {
        let root = tempfile::tempdir().unwrap();
        let cache = PluginCache::new(root.path());
        let dir = insert_entry(&cache, b"binary", None).await;
        let file = dir.join("terraform-provider-null");
        make_writable(&dir).unwrap();
        fs::write(&file, b"tampered").unwrap();
        let (checked, damage) = cache.verify();
        assert_eq!(checked, 1);
        assert_eq!(damage.len(), 1);
        assert!(
            damage[0].problem.starts_with("contents changed"),
            "{damage:?}"
        );
    }

    /// Provenance is published before the files: a crash between the two
    /// renames leaves a record without an entry, which reads as no entry.
    #[tokio::test]
    async fn provenance_without_files_is_no_entry() {
        let root = tempfile::tempdir().unwrap();
        let cache = PluginCache::new(root.path());
        let (p, v, plat) = key();
        let dir = cache.entry_dir(&p, &v, &plat);
        fs::create_dir_all(dir.parent().unwrap()).unwrap();
        fs::write(
            cache.meta_path(&dir),
            serde_json::to_vec(&meta("h1:x")).unwrap(),
        )
        .unwrap();
        assert!(cache.lookup(&p, &v, &plat).is_none());
        insert_entry(&cache, b"binary", None).await;
        let entry = cache.lookup(&p, &v, &plat).unwrap();
        assert_eq!(
            entry.meta.unwrap().h1(),
            Some(PackageHash::h1_of_dir(&dir).unwrap())
        );
    }

    /// Stamps are recorded only under the entry's lock and only over the
    /// provenance they were taken for: never while another holder may be
    /// filling or replacing the entry, never over a newer record.
    #[tokio::test]
    async fn stamps_are_remembered_only_under_the_lock_over_the_same_record() {
        let root = tempfile::tempdir().unwrap();
        let cache = PluginCache::new(root.path());
        let (p, v, plat) = key();
        let dir = insert_entry(&cache, b"binary", None).await;
        let recorded = || cache.lookup(&p, &v, &plat).unwrap().meta.unwrap();
        let stamps = DirStamps::of(&dir).unwrap().unwrap();
        let first = recorded();

        let held = cache.lock_entry(&p, &v, &plat, || {}).await.unwrap();
        cache.remember_stamps(&dir, &first, stamps.clone(), None);
        assert_eq!(recorded(), first, "written while another held the lock");
        cache.remember_stamps(&dir, &first, stamps.clone(), Some(&held));
        assert_eq!(recorded().stamps, Some(stamps.clone()));
        drop(held);

        let newer = EntryMeta {
            origin: "https://example.com/other.zip".into(),
            ..first.clone()
        };
        fs::write(cache.meta_path(&dir), serde_json::to_vec(&newer).unwrap()).unwrap();
        cache.remember_stamps(&dir, &first, stamps, None);
        assert_eq!(recorded(), newer, "written over a newer record");
    }

    #[tokio::test]
    async fn a_held_lock_makes_others_wait_until_released() {
        let root = tempfile::tempdir().unwrap();
        let cache = PluginCache::new(root.path());
        let (p, v, plat) = (
            provider(),
            Version::new(1, 0, 0),
            Platform::parse("linux_amd64").unwrap(),
        );
        let held = cache.lock_entry(&p, &v, &plat, || {}).await.unwrap();
        let waiter = {
            let cache = cache.clone();
            let (p, v, plat) = (p.clone(), v.clone(), plat.clone());
            tokio::spawn(async move { cache.lock_entry(&p, &v, &plat, || {}).await })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!waiter.is_finished());
        drop(held);
        waiter.await.unwrap().unwrap();
        assert!(root.path().join(CACHEDIR_TAG).exists());
    }
}
