//! File stamps: what lets a hash computed once stand for a package's files
//! later, without reading them again. The installed tree's hash memo
//! ([`crate::install::hash_memo`]) and every plugin-cache entry's provenance
//! keep them.
//!
//! Like git's index, a stamp is each file's identity and change times
//! (inode, size, mode, modification and status-change times). Any write to
//! a file moves its status-change time, which user space cannot set back,
//! so an unchanged stamp means unchanged content; anything else is hashed
//! again. As in git, a stamp taken within one clock tick of a file's last
//! change proves nothing (a second write in the same tick leaves the times
//! equal), so such "racy" stamps are not trusted.
//!
//! One exception keeps a no-op a no-op on machines where many working
//! directories share the plugin cache: adding or removing a hard link (the
//! next project linking the same cache entry, or one being deleted) moves
//! the shared inode's status-change time too. For a file that is read-only
//! (no write bit, as tfinstall makes its cache files) and whose inode, size,
//! mode and modification time are all unchanged, the status-change time is
//! not compared, and its content dates from its modification time. Changing
//! such a file's bytes takes a `chmod` (which changes the mode, or is undone
//! only by a second deliberate step) or root, and any write sets the
//! modification time, which only an explicit `utimensat` call could set
//! back: an accident cannot slip through, only a deliberate forgery by
//! someone who could as well have replaced the provider.

use std::fs;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FileStamp {
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
    pub(crate) fn unchanged_in(&self, now: &FileStamp) -> bool {
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

/// Wider than the coarse kernel clock tick that file times come from.
const RACY_NS: i128 = 20_000_000;

impl DirStamps {
    /// Stamps of `files` taken now.
    pub(crate) fn taken_now(files: Vec<FileStamp>) -> DirStamps {
        DirStamps {
            recorded_at: now_ns(),
            files,
        }
    }

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

    pub(crate) fn trustworthy_for(&self, stamps: &[FileStamp]) -> bool {
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

pub(crate) fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
        .unwrap_or(0)
}

/// Stamps of every file below `dir` in a stable order, or `None` where the
/// platform gives no change times to trust (then the hash is always computed).
#[cfg(unix)]
pub(crate) fn stamps_of(dir: &Path) -> io::Result<Option<Vec<FileStamp>>> {
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
    // `dir` as given: reading a directory and its files' metadata follow a
    // symbolic link (an installed package linked to the plugin cache)
    // anyway, and resolving every component first cost a `readlink` each,
    // three walks per provider and working directory.
    let mut out = Vec::new();
    walk(dir, "", &mut out)?;
    Ok(Some(out))
}

#[cfg(not(unix))]
pub(crate) fn stamps_of(_dir: &Path) -> io::Result<Option<Vec<FileStamp>>> {
    Ok(None)
}
