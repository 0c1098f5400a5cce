//! Everything an install writes goes first into a staging directory inside
//! the data directory (same filesystem, so the final step is a rename). Only
//! when every provider has been fetched and verified are the staged packages
//! moved into place: a failed or interrupted run leaves the previous install
//! exactly as it was.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

const STAGING_DIR: &str = ".tfinstall-staging";
const OWNER_LOCK: &str = ".owner.lock";

pub struct Staging {
    root: PathBuf,
    /// Held for the life of the run; a staging directory whose lock can be
    /// taken belongs to a process that died, so the next run removes it.
    _owner: File,
    counter: AtomicUsize,
    /// Directories this run created, removed again if the run commits nothing.
    created: Vec<PathBuf>,
}

impl Staging {
    pub fn create(data_dir: &Path) -> io::Result<Staging> {
        let parent = data_dir.join(STAGING_DIR);
        let mut created = Vec::new();
        for dir in [data_dir, parent.as_path()] {
            if !dir.exists() {
                fs::create_dir_all(dir)?;
                created.push(dir.to_path_buf());
            }
        }
        remove_abandoned(&parent);
        let root = tempfile::Builder::new()
            .prefix(&format!("{}-", std::process::id()))
            .tempdir_in(&parent)?
            .keep();
        let owner = File::create(root.join(OWNER_LOCK))?;
        owner.lock()?;
        Ok(Staging {
            root,
            _owner: owner,
            counter: AtomicUsize::new(0),
            created,
        })
    }

    /// A fresh path inside the staging area; nothing is created there yet.
    pub fn new_path(&self, label: &str) -> PathBuf {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        self.root.join(format!("{n}-{label}"))
    }

    /// Moves each staged directory onto its target. An existing target is
    /// first moved aside into the staging area, so the swap is two renames
    /// and the old package disappears with the staging directory.
    pub fn commit(mut self, moves: &[(PathBuf, PathBuf)]) -> io::Result<()> {
        for (staged, target) in moves {
            if let Some(parent) = target.parent() {
                fs::create_dir_all(parent)?;
            }
            if fs::symlink_metadata(target).is_ok() {
                fs::rename(target, self.new_path("replaced"))?;
            }
            fs::rename(staged, target)?;
        }
        if !moves.is_empty() {
            self.created.clear();
        }
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
        // Other runs may still be staging beside us; only an empty parent goes.
        if let Some(parent) = self.root.parent() {
            let _ = fs::remove_dir(parent);
        }
        for dir in self.created.iter().rev() {
            let _ = fs::remove_dir(dir);
        }
    }
}

/// Removes staging directories of processes that are gone (their owner lock
/// is free). Failures are ignored: a leftover costs disk space, never
/// correctness, and the next run tries again.
fn remove_abandoned(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        let abandoned = match File::open(dir.join(OWNER_LOCK)) {
            Ok(lock) => lock.try_lock().is_ok(),
            // A directory without its lock is either being set up by a live
            // process this very moment or was abandoned before locking: only
            // an old one is taken to be abandoned.
            Err(err) => err.kind() == io::ErrorKind::NotFound && older_than_an_hour(&dir),
        };
        if abandoned {
            let _ = fs::remove_dir_all(&dir);
        }
    }
}

fn older_than_an_hour(path: &Path) -> bool {
    fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age.as_secs() > 3600)
}
