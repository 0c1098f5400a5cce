//! Remembered `h1:` hashes of installed packages.
//!
//! Deciding that a re-run of `init` has nothing to do means knowing that each
//! installed package still matches the lock file, and hashing every file of
//! every provider (hundreds of megabytes for the big clouds) on each run would
//! make the no-op path slower than a download on a fast network. Like git's
//! index, the hash is remembered together with each file's identity and
//! change stamps (inode, size, mode, modification and status-change times).
//! Any write to a file moves its status-change time, which user space cannot
//! set back, so an unchanged stamp means unchanged content; anything else is
//! hashed again. As in git, a stamp taken within one clock tick of a file's
//! last change proves nothing (a second write in the same tick leaves the
//! times equal), so such "racy" entries are hashed again on the next run.
//!
//! One exception keeps a no-op a no-op on machines where many working
//! directories share the plugin cache: adding or removing a hard link (the
//! next project linking the same cache entry, or one being deleted) moves
//! the shared inode's status-change time too. For a file that is read-only
//! (no write bit, as tfinstall makes its cache files) and whose inode, size,
//! mode and modification time are all unchanged, the status-change time is
//! not compared. Changing such a file's bytes takes a `chmod` (which changes
//! the mode, or is undone only by a second deliberate step) or root, and any
//! write sets the modification time, which only an explicit `utimensat` call
//! could set back: an accident cannot slip through, only a deliberate
//! forgery by someone who could as well have replaced the provider.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use crate::install::staging::{FileMode, Staging};
use crate::verify::hash::PackageHash;

const MEMO_FILE: &str = ".tfinstall-hashes.json";

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct FileStamp {
    name: String,
    size: u64,
    inode: u64,
    mtime: i128,
    ctime: i128,
    /// Permission bits; absent in memos written before they were kept,
    /// which then get no exception.
    #[serde(default)]
    mode: Option<u32>,
}

impl FileStamp {
    fn read_only(&self) -> bool {
        self.mode.is_some_and(|mode| mode & 0o222 == 0)
    }

    /// The same file with the same content, as far as stamps can tell; see
    /// the module documentation for when the change time may differ.
    fn unchanged_in(&self, now: &FileStamp) -> bool {
        self.name == now.name
            && self.size == now.size
            && self.inode == now.inode
            && self.mtime == now.mtime
            && self.mode == now.mode
            && (self.ctime == now.ctime || self.read_only())
    }
}

/// The stamps of every file below a directory, with when they were taken:
/// what lets a remembered hash stand for the files. Kept by the hash memo
/// for installed packages and in each plugin-cache entry's provenance.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirStamps {
    /// When the stamps were taken, in nanoseconds since the Unix epoch.
    recorded_at: i128,
    files: Vec<FileStamp>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Remembered {
    h1: String,
    stamps: DirStamps,
}

/// Wider than the coarse kernel clock tick that file times come from.
const RACY_NS: i128 = 20_000_000;

impl DirStamps {
    /// The stamps of `dir`'s files now; `None` where the platform gives no
    /// change times to trust.
    pub fn of(dir: &Path) -> io::Result<Option<DirStamps>> {
        Ok(stamps_of(dir)?.map(|files| DirStamps {
            recorded_at: now_ns(),
            files,
        }))
    }

    /// Whether the files stamped `now` are, by their stamps, the ones these
    /// stamps were taken of, and these were not taken too soon after a
    /// write to prove it.
    pub fn still_hold_in(&self, now: &DirStamps) -> bool {
        self.trustworthy_for(&now.files)
    }

    /// Whether `dir` holds the very files these stamps were taken of,
    /// whenever that was: without [`DirStamps::still_hold_in`]'s proof
    /// that no write came in the same clock tick, so only for what one
    /// process learnt and keeps in memory.
    pub fn same_files_in(&self, dir: &Path) -> bool {
        matches!(stamps_of(dir), Ok(Some(now)) if self.files.len() == now.len()
            && self.files.iter().zip(&now).all(|(then, now)| then.unchanged_in(now)))
    }

    fn trustworthy_for(&self, stamps: &[FileStamp]) -> bool {
        self.files.len() == stamps.len()
            && self
                .files
                .iter()
                .zip(stamps)
                .all(|(then, now)| then.unchanged_in(now))
            && self.files.iter().all(|f| {
                // A read-only file's content last changed at its mtime (a
                // write takes a chmod first, which its stamp would show);
                // any other file's at its ctime.
                let changed = if f.read_only() { f.mtime } else { f.ctime };
                changed < self.recorded_at - RACY_NS
            })
    }
}

/// The modification time given to every file of a plugin-cache entry once
/// it is unpacked and hashed (2000-01-01T00:00:00Z). Stamps taken right
/// after unpacking would otherwise be "racy" (a write in the same clock
/// tick leaves the times equal) and the next run would hash the package
/// again. With the time set back, any later write moves it forward, so
/// the stamps an entry is published with can be trusted at once, by the
/// run after the one that filled it and by every project that links it.
pub const PINNED_MTIME_SECS: u64 = 946_684_800;

/// Sets every file below `dir` to [`PINNED_MTIME_SECS`]. Only for files
/// this process has just written and hashed and no one else can reach yet.
pub fn pin_mtimes(dir: &Path) -> io::Result<()> {
    let pinned = std::time::UNIX_EPOCH + std::time::Duration::from_secs(PINNED_MTIME_SECS);
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            pin_mtimes(&path)?;
        } else {
            fs::File::open(&path)?.set_modified(pinned)?;
        }
    }
    Ok(())
}

fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
        .unwrap_or(0)
}

/// Kept in the data directory; Terraform ignores files it does not know there.
#[derive(Debug, Default)]
pub struct HashMemo {
    path: PathBuf,
    entries: Mutex<BTreeMap<String, Remembered>>,
    /// Whether anything was learnt since loading: a no-op run leaves the
    /// file alone.
    changed: AtomicBool,
}

impl HashMemo {
    /// Loads the memo; a missing or unreadable one is simply empty.
    pub fn load(data_dir: &Path) -> HashMemo {
        let path = data_dir.join(MEMO_FILE);
        let entries = fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        HashMemo {
            path,
            entries: Mutex::new(entries),
            changed: AtomicBool::new(false),
        }
    }

    /// The `h1:` of the package in `dir`, from memory when no file changed.
    pub fn h1_of_dir(&self, dir: &Path) -> io::Result<PackageHash> {
        let key = dir.to_string_lossy().into_owned();
        let stamps = stamps_of(dir)?;
        if let Some(stamps) = &stamps {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(known) = entries.get(&key)
                && known.stamps.trustworthy_for(stamps)
                && let Ok(hash) = PackageHash::parse(&known.h1)
            {
                return Ok(hash);
            }
        }
        let hash = PackageHash::h1_of_dir(dir)?;
        if let Some(files) = stamps {
            self.remember(key, &hash, files);
        }
        Ok(hash)
    }

    /// Records the hash of a package just written to `written`, which will
    /// be (or already is) renamed to `installed`: renaming a directory
    /// changes no stamp of the files inside it.
    pub fn record(&self, written: &Path, installed: &Path, hash: &PackageHash) {
        if let Ok(Some(files)) = stamps_of(written) {
            self.remember(installed.to_string_lossy().into_owned(), hash, files);
        }
    }

    fn remember(&self, key: String, hash: &PackageHash, files: Vec<FileStamp>) {
        let recorded_at = now_ns();
        self.changed.store(true, Ordering::Relaxed);
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.insert(
            key,
            Remembered {
                h1: hash.to_string(),
                stamps: DirStamps { recorded_at, files },
            },
        );
    }

    /// Writes the memo through the staging area (so a killed run leaves the
    /// old one or the new one), keeping only packages that still exist,
    /// unless nothing changed. Failing to save costs a re-hash next time,
    /// never correctness, so errors are ignored.
    pub fn save(&self, staging: &Staging) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let before = entries.len();
        entries.retain(|dir, _| Path::new(dir).is_dir());
        if entries.len() == before && !self.changed.load(Ordering::Relaxed) {
            return;
        }
        if let Ok(json) = serde_json::to_vec(&*entries)
            && self.path.parent().is_some_and(Path::is_dir)
        {
            let _ = staging.replace_file(&self.path, &json, FileMode::Exact(0o644));
        }
    }
}

/// Stamps of every file below `dir` in a stable order, or `None` where the
/// platform gives no change times to trust (then the hash is always computed).
#[cfg(unix)]
fn stamps_of(dir: &Path) -> io::Result<Option<Vec<FileStamp>>> {
    use std::os::unix::fs::MetadataExt;
    fn walk(dir: &Path, prefix: &str, out: &mut Vec<FileStamp>) -> io::Result<()> {
        let mut names: Vec<_> = fs::read_dir(dir)?.collect::<Result<_, _>>()?;
        names.sort_by_key(|e| e.file_name());
        for entry in names {
            let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
            let meta = fs::metadata(entry.path())?;
            if meta.is_dir() {
                walk(&entry.path(), &format!("{name}/"), out)?;
            } else {
                out.push(FileStamp {
                    name,
                    size: meta.size(),
                    inode: meta.ino(),
                    mtime: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
                    ctime: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
                    mode: Some(meta.mode() & 0o7777),
                });
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(&fs::canonicalize(dir)?, "", &mut out)?;
    Ok(Some(out))
}

#[cfg(not(unix))]
fn stamps_of(_dir: &Path) -> io::Result<Option<Vec<FileStamp>>> {
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembered_hash_is_reused_until_a_file_changes() {
        let data = tempfile::tempdir().unwrap();
        let pkg = data.path().join("pkg");
        fs::create_dir(&pkg).unwrap();
        fs::write(pkg.join("terraform-provider-x"), b"one").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let memo = HashMemo::load(data.path());
        let first = memo.h1_of_dir(&pkg).unwrap();
        memo.save(&Staging::create(data.path()).unwrap());
        // Prove the memo is used: a wrong remembered hash comes back as is
        // while no file changes.
        let reloaded = HashMemo::load(data.path());
        reloaded
            .entries
            .lock()
            .unwrap()
            .values_mut()
            .for_each(|r| r.h1 = "h1:remembered".into());
        assert_eq!(reloaded.h1_of_dir(&pkg).unwrap().as_str(), "h1:remembered");

        let reloaded = HashMemo::load(data.path());
        assert_eq!(reloaded.h1_of_dir(&pkg).unwrap(), first);
        std::thread::sleep(std::time::Duration::from_millis(50));

        fs::write(pkg.join("terraform-provider-x"), b"two").unwrap();
        let changed = reloaded.h1_of_dir(&pkg).unwrap();
        assert_ne!(changed, first);
        assert_eq!(changed, PackageHash::h1_of_dir(&pkg).unwrap());
    }

    #[cfg(unix)]
    #[test]
    fn links_made_elsewhere_keep_a_read_only_file_trusted_but_writes_are_caught() {
        use std::os::unix::fs::PermissionsExt as _;
        let chmod = |path: &Path, mode| {
            fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap()
        };
        let data = tempfile::tempdir().unwrap();
        let pkg = data.path().join("pkg");
        fs::create_dir(&pkg).unwrap();
        let file = pkg.join("terraform-provider-x");
        fs::write(&file, b"one").unwrap();
        chmod(&file, 0o555);
        std::thread::sleep(std::time::Duration::from_millis(50));
        let memo = HashMemo::load(data.path());
        let real = memo.h1_of_dir(&pkg).unwrap();
        let remembered = |memo: &HashMemo| {
            memo.entries
                .lock()
                .unwrap()
                .values_mut()
                .for_each(|r| r.h1 = "h1:remembered".into())
        };
        remembered(&memo);

        // Another project links the same file: its change time moves.
        let elsewhere = data.path().join("elsewhere");
        fs::hard_link(&file, &elsewhere).unwrap();
        assert_eq!(memo.h1_of_dir(&pkg).unwrap().as_str(), "h1:remembered");
        fs::remove_file(&elsewhere).unwrap();
        assert_eq!(memo.h1_of_dir(&pkg).unwrap().as_str(), "h1:remembered");

        // The same content, writable: no exception, so hashed again.
        chmod(&file, 0o755);
        assert_eq!(memo.h1_of_dir(&pkg).unwrap(), real);

        // New bytes written through a link, mode put back: caught.
        chmod(&file, 0o555);
        std::thread::sleep(std::time::Duration::from_millis(50));
        memo.h1_of_dir(&pkg).unwrap();
        remembered(&memo);
        assert_eq!(memo.h1_of_dir(&pkg).unwrap().as_str(), "h1:remembered");
        fs::hard_link(&file, &elsewhere).unwrap();
        chmod(&elsewhere, 0o755);
        fs::write(&elsewhere, b"two").unwrap();
        chmod(&elsewhere, 0o555);
        assert_eq!(
            memo.h1_of_dir(&pkg).unwrap(),
            PackageHash::h1_of_dir(&pkg).unwrap()
        );
    }

    /// A read-only file whose modification time was set back is trusted
    /// from a stamp taken at once; a write through any link moves the time
    /// forward and is caught.
    #[cfg(unix)]
    #[test]
    fn pinned_read_only_files_are_trusted_at_once_and_writes_are_caught() {
        use std::os::unix::fs::PermissionsExt as _;
        let data = tempfile::tempdir().unwrap();
        let pkg = data.path().join("pkg");
        fs::create_dir(&pkg).unwrap();
        let file = pkg.join("terraform-provider-x");
        fs::write(&file, b"one").unwrap();
        pin_mtimes(&pkg).unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o555)).unwrap();
        let memo = HashMemo::load(data.path());
        memo.record(&pkg, &pkg, &PackageHash::parse("h1:remembered").unwrap());
        assert_eq!(memo.h1_of_dir(&pkg).unwrap().as_str(), "h1:remembered");

        let elsewhere = data.path().join("elsewhere");
        fs::hard_link(&file, &elsewhere).unwrap();
        fs::set_permissions(&elsewhere, fs::Permissions::from_mode(0o755)).unwrap();
        fs::write(&elsewhere, b"two").unwrap();
        fs::set_permissions(&elsewhere, fs::Permissions::from_mode(0o555)).unwrap();
        assert_eq!(
            memo.h1_of_dir(&pkg).unwrap(),
            PackageHash::h1_of_dir(&pkg).unwrap()
        );
    }

    #[test]
    fn a_stamp_taken_right_after_a_write_is_not_trusted() {
        let data = tempfile::tempdir().unwrap();
        let pkg = data.path().join("pkg");
        fs::create_dir(&pkg).unwrap();
        fs::write(pkg.join("a"), b"content").unwrap();
        let memo = HashMemo::load(data.path());
        memo.record(&pkg, &pkg, &PackageHash::parse("h1:bogus").unwrap());
        fs::write(pkg.join("a"), b"content").unwrap();
        assert_eq!(
            memo.h1_of_dir(&pkg).unwrap(),
            PackageHash::h1_of_dir(&pkg).unwrap()
        );
    }
}
