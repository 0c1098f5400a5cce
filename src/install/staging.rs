//! Everything an install writes goes first into a staging directory inside
//! the data directory (same filesystem, so the final step is a rename). Only
//! when every provider has been fetched and verified are the staged packages
//! moved into place: a failed or interrupted run leaves the previous install
//! exactly as it was.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::fsutil::Flush;

const STAGING_DIR: &str = ".tfinstall-staging";
const LOCK_SUFFIX: &str = ".lock";

/// Each run stages into `.tfinstall-staging/ID/`, owned through the lock
/// file `.tfinstall-staging/ID.lock` beside it. The lock file is created and
/// locked before the directory exists and removed after it is gone, so at
/// every moment a SIGKILL can strike, what is left is recognisable as
/// abandoned: a lock file nobody holds (with or without its directory), or
/// a directory without a lock file.
///
/// The directory and its lock are made when first needed
/// ([`Staging::when_needed`]), or at once ([`Staging::create`]): a run that
/// places and writes nothing (a no-op) makes none, and on some file systems
/// each new inode costs a fair part of a no-op.
pub struct Staging {
    data_dir: PathBuf,
    area: OnceLock<Area>,
    /// Held while the area is made, so that two packages placed at once
    /// make one.
    making: Mutex<()>,
    counter: AtomicUsize,
}

/// The staging directory of a run, once made.
struct Area {
    root: PathBuf,
    lock_path: PathBuf,
    /// Held for the life of the run; a lock that can be taken belongs to a
    /// process that died, so the next run removes its directory.
    _owner: File,
    /// Directories this run created, removed again if the run commits nothing.
    created: Vec<PathBuf>,
}

impl Staging {
    /// A staging area in `data_dir`, made at once: its drop, last, removes
    /// the data directory again if it made it and nothing was committed.
    pub fn create(data_dir: &Path) -> io::Result<Staging> {
        let staging = Staging::when_needed(data_dir);
        staging.area()?;
        Ok(staging)
    }

    /// A staging area in `data_dir`, made at its first use. Leftovers of
    /// runs that died are removed now all the same, with their parent if
    /// that leaves it empty: a run that never makes its own area must not
    /// leave one behind either.
    pub fn when_needed(data_dir: &Path) -> Staging {
        let parent = data_dir.join(STAGING_DIR);
        if parent.is_dir() {
            remove_abandoned(&parent);
            let _ = fs::remove_dir(&parent);
        }
        Staging {
            data_dir: data_dir.to_path_buf(),
            area: OnceLock::new(),
            making: Mutex::new(()),
            counter: AtomicUsize::new(0),
        }
    }

    fn area(&self) -> io::Result<&Area> {
        if let Some(area) = self.area.get() {
            return Ok(area);
        }
        let _making = self.making.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(area) = self.area.get() {
            return Ok(area);
        }
        let area = Area::make(&self.data_dir)?;
        Ok(self.area.get_or_init(|| area))
    }

    /// A fresh path inside the staging area (made now if it was not yet);
    /// nothing is created at the path itself.
    pub fn new_path(&self, label: &str) -> io::Result<PathBuf> {
        let root = &self.area()?.root;
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        Ok(root.join(format!("{n}-{label}")))
    }

    /// Moves each staged directory onto its target. An existing target is
    /// first moved aside into the staging area, so the swap is two renames
    /// and the old package disappears with the staging directory.
    pub fn commit(&mut self, moves: &[(PathBuf, PathBuf)]) -> io::Result<()> {
        for (staged, target) in moves {
            if let Some(parent) = target.parent() {
                fs::create_dir_all(parent)?;
            }
            if fs::symlink_metadata(target).is_ok() {
                fs::rename(target, self.new_path("replaced")?)?;
            }
            fs::rename(staged, target)?;
        }
        if !moves.is_empty()
            && let Some(area) = self.area.get_mut()
        {
            area.created.clear();
        }
        Ok(())
    }

    /// Replaces the file `target` with `contents`: written and flushed in
    /// the staging area, then renamed over `target`. Readers, and a run
    /// killed at any moment, see the old file or the new one; a temporary
    /// file left by a killed run is inside its staging directory, which the
    /// next run removes, never in the user's working directory. When the
    /// data directory is on another file system than `target` (`TF_DATA_DIR`),
    /// the temporary file goes beside `target` instead.
    /// `flush` says whether it must survive a crash of the machine too.
    pub fn replace_file(
        &self,
        target: &Path,
        contents: &[u8],
        mode: FileMode,
        flush: Flush,
    ) -> io::Result<()> {
        if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent)?;
        }
        let temp = self.new_path("file")?;
        let result =
            write_new_file(&temp, contents, mode, flush).and_then(|()| fs::rename(&temp, target));
        if result.is_err() {
            let _ = fs::remove_file(&temp);
        }
        match result {
            Err(err) if err.kind() == io::ErrorKind::CrossesDevices => match (mode, flush) {
                (FileMode::Exact(mode), _) => crate::fsutil::write_atomic(target, contents, mode),
                (FileMode::LessUmask(mode), flush) => {
                    crate::fsutil::write_umask(target, contents, mode, flush)
                }
            },
            other => other,
        }
    }
}

/// The mode of a file written through the staging area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileMode {
    /// Exactly this mode, whatever the umask (Terraform's lock file is 0644).
    Exact(u32),
    /// This mode less the process umask, as a plain create gives: what Go's
    /// `os.WriteFile` leaves, and so what Terraform leaves for most files.
    LessUmask(u32),
}

fn write_new_file(path: &Path, contents: &[u8], mode: FileMode, flush: Flush) -> io::Result<()> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        if let FileMode::LessUmask(mode) = mode {
            options.mode(mode);
        }
    }
    let mut file = options.open(path)?;
    io::Write::write_all(&mut file, contents)?;
    #[cfg(unix)]
    if let FileMode::Exact(mode) = mode {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(fs::Permissions::from_mode(mode))?;
    }
    match flush {
        Flush::ToDisk => file.sync_all(),
        Flush::No => Ok(()),
    }
}

impl Area {
    fn make(data_dir: &Path) -> io::Result<Area> {
        let parent = data_dir.join(STAGING_DIR);
        let mut created = Vec::new();
        for dir in [data_dir, parent.as_path()] {
            if !dir.exists() {
                fs::create_dir_all(dir)?;
                created.push(dir.to_path_buf());
            }
        }
        let (lock_path, owner) = loop {
            let lock_file = match tempfile::Builder::new()
                .prefix(&format!("{}-", std::process::id()))
                .suffix(LOCK_SUFFIX)
                .tempfile_in(&parent)
            {
                Ok(lock_file) => lock_file,
                // Another run removed the parent the moment it was empty
                // (its own area gone, or only dead runs' leftovers in it).
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    fs::create_dir_all(&parent)?;
                    continue;
                }
                Err(err) => return Err(err),
            };
            let (file, lock_path) = lock_file.keep().map_err(|err| err.error)?;
            file.lock()?;
            // Another run cleaning up may have taken the lock in the instant
            // between creating and locking it, and deleted the file: then the
            // lock guards nothing and a fresh one is needed.
            if still_linked(&file, &lock_path) {
                break (lock_path, file);
            }
        };
        let root = owned_dir(&lock_path);
        fs::create_dir(&root)?;
        Ok(Area {
            root,
            lock_path,
            _owner: owner,
            created,
        })
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
        let _ = fs::remove_file(&self.lock_path);
        // Other runs may still be staging beside us; only an empty parent goes.
        if let Some(parent) = self.root.parent() {
            let _ = fs::remove_dir(parent);
        }
        for dir in self.created.iter().rev() {
            let _ = fs::remove_dir(dir);
        }
    }
}

/// Removes staging directories of processes that are gone. Failures are
/// ignored: a leftover costs disk space, never correctness, and the next run
/// tries again.
fn remove_abandoned(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_lock = path
            .file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.ends_with(LOCK_SUFFIX));
        if is_lock {
            // Holding the lock while deleting keeps a live owner from ever
            // seeing its directory vanish: it holds the lock all along.
            let Ok(lock) = File::open(&path) else {
                continue;
            };
            if lock.try_lock().is_ok() {
                let dir = owned_dir(&path);
                if fs::remove_dir_all(&dir).is_ok() || !dir.exists() {
                    let _ = fs::remove_file(&path);
                }
            }
        } else if path.is_dir() {
            let mut lock_name = entry.file_name();
            lock_name.push(LOCK_SUFFIX);
            if !parent.join(lock_name).exists() {
                let _ = fs::remove_dir_all(&path);
            }
        }
    }
}

/// `…/ID.lock` → `…/ID`.
fn owned_dir(lock_path: &Path) -> PathBuf {
    let name = lock_path
        .file_name()
        .and_then(|name| name.to_str())
        .and_then(|name| name.strip_suffix(LOCK_SUFFIX))
        .unwrap_or_default();
    lock_path.with_file_name(name)
}

/// Whether `path` still names the open `file`.
#[cfg(unix)]
fn still_linked(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), fs::metadata(path)) {
        (Ok(open), Ok(named)) => open.dev() == named.dev() && open.ino() == named.ino(),
        _ => false,
    }
}

/// Windows does not delete a file another process has open, so the race
/// this guards against cannot happen there.
#[cfg(not(unix))]
fn still_linked(_file: &File, path: &Path) -> bool {
    path.exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    #[test]
    fn leftovers_of_dead_runs_are_removed_and_live_runs_kept() {
        let data = tempfile::tempdir().unwrap();
        let parent = data.path().join(STAGING_DIR);
        fs::create_dir_all(parent.join("dead/0-null")).unwrap();
        fs::write(parent.join("dead/0-null/file"), b"x").unwrap();
        fs::write(parent.join("dead.lock"), b"").unwrap();
        fs::write(parent.join("locked-only.lock"), b"").unwrap();
        fs::create_dir_all(parent.join("unlocked-dir/0-tls")).unwrap();

        let live = Staging::create(data.path()).unwrap();
        let live_dir = live
            .area()
            .unwrap()
            .root
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert_eq!(
            names(&parent),
            [live_dir.clone(), format!("{live_dir}.lock")],
            "only the live run's directory and lock remain"
        );

        let second = Staging::create(data.path()).unwrap();
        assert!(
            live.area().unwrap().root.is_dir(),
            "a live run's directory is never taken"
        );
        drop(second);
        drop(live);
        assert!(!data.path().join(STAGING_DIR).exists());
    }

    #[test]
    fn replace_file_swaps_whole_files_and_leaves_no_temporary_file() {
        let data = tempfile::tempdir().unwrap();
        let target = data.path().join("out/lock.hcl");
        let staging = Staging::create(&data.path().join(".terraform")).unwrap();
        staging
            .replace_file(&target, b"one", FileMode::Exact(0o644), Flush::ToDisk)
            .unwrap();
        staging
            .replace_file(&target, b"two", FileMode::Exact(0o600), Flush::No)
            .unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"two");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&target).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(names(&data.path().join("out")), ["lock.hcl"]);
        assert!(names(&staging.area().unwrap().root).is_empty());
    }

    #[test]
    fn an_area_made_when_needed_makes_nothing_until_used_and_cleans_up_all_the_same() {
        let data = tempfile::tempdir().unwrap();
        let parent = data.path().join(".terraform").join(STAGING_DIR);
        fs::create_dir_all(parent.join("dead/0-null")).unwrap();

        let unused = Staging::when_needed(&data.path().join(".terraform"));
        assert!(
            names(&parent).is_empty(),
            "a dead run's leftovers go at once"
        );
        assert!(!parent.exists(), "nor does their emptied parent stay");
        drop(unused);
        assert!(names(&data.path().join(".terraform")).is_empty());

        fs::remove_dir(data.path().join(".terraform")).unwrap();
        let used = Staging::when_needed(&data.path().join(".terraform"));
        assert!(!data.path().join(".terraform").exists());
        let path = used.new_path("null").unwrap();
        assert_eq!(path.parent().unwrap(), used.area().unwrap().root);
        assert!(path.parent().unwrap().is_dir());
        drop(used);
        assert!(
            !data.path().join(".terraform").exists(),
            "a data directory made for nothing committed goes again"
        );
    }
}
