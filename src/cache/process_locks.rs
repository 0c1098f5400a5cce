//! An entry's lock as one process holds it: one holder of the lock file per
//! entry, shared by every working directory of a run.
//!
//! The lock itself is a `flock` on `.OS_ARCH.lock` beside the entry:
//! exclusive to fill, replace, check or remove the entry, shared to use it.
//! `flock` knows open files, not processes: two directories of one run that
//! each opened the lock file contended as two processes would, so a
//! directory that took the lock exclusively after another directory's fill
//! waited for that directory's use of it, polling (issue 31), and a
//! blocking `flock` could even wait on its own process. Here each process
//! decides among its own holders first, with a read-write lock per entry
//! (uses read, a fill, check or removal writes), and only then takes the
//! file lock: shared once for all the uses the process has at a time,
//! exclusively for its one writer. Uses of an entry by the directories of
//! one run therefore never wait for each other.
//!
//! A wait for another process is a blocking `flock` on a blocking thread,
//! which the kernel ends the moment the lock is released, instead of a
//! `try_lock` retried on a timer; a wait within the process is woken by the
//! holder's release.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, Weak};

use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};

use super::WAIT_NOTICE_AFTER;

/// Every entry lock this process holds or waits for, by lock file. One
/// table for the process, not one per [`super::PluginCache`], so that two
/// handles on one cache still share each entry's holder.
static ENTRY_LOCKS: LazyLock<Mutex<HashMap<PathBuf, Weak<EntryLocks>>>> =
    LazyLock::new(Mutex::default);

/// This process's holders of one entry's lock.
pub(super) struct EntryLocks {
    /// Read by each use, written by the one fill, check or removal.
    holders: Arc<RwLock<()>>,
    /// The lock file, held shared while the process has any use.
    shared: Mutex<SharedLock>,
    /// Held by the use that takes the shared file lock for the process,
    /// so that the uses arriving meanwhile wait for it instead of opening
    /// the file again.
    sharing: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct SharedLock {
    /// `None` where the lock file could not be opened (a cache this user
    /// may read but not lock).
    file: Option<File>,
    uses: usize,
}

/// A use of the entry by this process: the lock file held shared (for all
/// of the process's uses) and this holder's read of the in-process lock.
pub(super) struct SharedHold {
    locks: Arc<EntryLocks>,
    _holder: OwnedRwLockReadGuard<()>,
}

impl Drop for SharedHold {
    fn drop(&mut self) {
        // The file lock goes with the last use, before its in-process read
        // ends: a writer of this process then takes the file lock with no
        // shared lock of its own process left to wait on.
        let mut shared = self.locks.shared();
        shared.uses -= 1;
        if shared.uses == 0 {
            shared.file = None;
        }
    }
}

/// The entry held exclusively by this process and, in it, by one holder.
/// The file lock is released before the in-process one. The holders are
/// kept alive with the hold: were the table's only reference gone while a
/// fill held the file, the next directory of the run to ask would get new
/// holders of its own, pass the fill's in-process lock, and wait on the
/// file as another process would.
pub(super) struct ExclusiveHold {
    _file: File,
    _holder: OwnedRwLockWriteGuard<()>,
    _locks: Arc<EntryLocks>,
}

/// Opens an entry's lock file: `Ok(None)` when it cannot be locked but the
/// entry may be used all the same.
pub(super) type OpenLockFile<'a> = &'a (dyn Fn() -> io::Result<Option<File>> + Sync);

impl EntryLocks {
    /// This process's holders of the lock in `lock_file`.
    pub(super) fn of(lock_file: &Path) -> Arc<EntryLocks> {
        let mut table = ENTRY_LOCKS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(locks) = table.get(lock_file).and_then(Weak::upgrade) {
            return locks;
        }
        table.retain(|_, locks| locks.strong_count() > 0);
        let locks = Arc::new(EntryLocks {
            holders: Arc::default(),
            shared: Mutex::default(),
            sharing: tokio::sync::Mutex::default(),
        });
        table.insert(lock_file.to_path_buf(), Arc::downgrade(&locks));
        locks
    }

    fn shared(&self) -> MutexGuard<'_, SharedLock> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Joins the process's shared hold of the file, if it has one; else
    /// gives the in-process read back.
    fn join_shared(
        self: &Arc<Self>,
        holder: OwnedRwLockReadGuard<()>,
    ) -> Result<SharedHold, OwnedRwLockReadGuard<()>> {
        let mut shared = self.shared();
        if shared.uses == 0 {
            return Err(holder);
        }
        shared.uses += 1;
        Ok(SharedHold {
            locks: Arc::clone(self),
            _holder: holder,
        })
    }

    /// Records the shared file lock just taken (or `None`) for the process.
    fn start_sharing(
        self: &Arc<Self>,
        file: Option<File>,
        holder: OwnedRwLockReadGuard<()>,
    ) -> SharedHold {
        let mut shared = self.shared();
        shared.file = file;
        shared.uses = 1;
        SharedHold {
            locks: Arc::clone(self),
            _holder: holder,
        }
    }

    /// Holds the entry for use, waiting while this process fills, checks
    /// or removes it, or another process does.
    pub(super) async fn hold_shared(
        self: &Arc<Self>,
        open: OpenLockFile<'_>,
    ) -> io::Result<SharedHold> {
        let holder = match Arc::clone(&self.holders).try_read_owned() {
            Ok(holder) => holder,
            Err(_) => {
                crate::failpoint::count("entry-lock-wait-fill");
                Arc::clone(&self.holders).read_owned().await
            }
        };
        let holder = match self.join_shared(holder) {
            Ok(hold) => return Ok(hold),
            Err(holder) => holder,
        };
        let _sharing = self.sharing.lock().await;
        let holder = match self.join_shared(holder) {
            Ok(hold) => return Ok(hold),
            Err(holder) => holder,
        };
        let file = match open()? {
            Some(file) => Some(lock_file(file, Mode::Shared, &mut None::<fn()>).await?),
            None => None,
        };
        Ok(self.start_sharing(file, holder))
    }

    /// [`EntryLocks::hold_shared`] if no one has to be waited for.
    pub(super) fn try_hold_shared(
        self: &Arc<Self>,
        open: OpenLockFile<'_>,
    ) -> io::Result<Option<SharedHold>> {
        let Ok(holder) = Arc::clone(&self.holders).try_read_owned() else {
            return Ok(None);
        };
        let holder = match self.join_shared(holder) {
            Ok(hold) => return Ok(Some(hold)),
            Err(holder) => holder,
        };
        let Ok(_sharing) = self.sharing.try_lock() else {
            return Ok(None);
        };
        let holder = match self.join_shared(holder) {
            Ok(hold) => return Ok(Some(hold)),
            Err(holder) => holder,
        };
        let file = match open()? {
            Some(file) if try_lock(&file, Mode::Shared)? => Some(file),
            Some(_) => return Ok(None),
            None => None,
        };
        Ok(Some(self.start_sharing(file, holder)))
    }

    /// Holds the entry exclusively, waiting for this process's other
    /// holders and for other processes. `on_wait` is called once if another
    /// process still holds it after [`WAIT_NOTICE_AFTER`].
    pub(super) async fn hold_exclusive(
        self: &Arc<Self>,
        open: OpenLockFile<'_>,
        on_wait: impl FnOnce(),
    ) -> io::Result<ExclusiveHold> {
        let holder = match Arc::clone(&self.holders).try_write_owned() {
            Ok(holder) => holder,
            Err(_) => {
                crate::failpoint::count(self.holders_kind());
                Arc::clone(&self.holders).write_owned().await
            }
        };
        let file = open()?.ok_or_else(unlockable)?;
        let file = lock_file(file, Mode::Exclusive, &mut Some(on_wait)).await?;
        Ok(ExclusiveHold {
            _file: file,
            _holder: holder,
            _locks: Arc::clone(self),
        })
    }

    /// [`EntryLocks::hold_exclusive`] if no one has to be waited for.
    pub(super) fn try_hold_exclusive(
        self: &Arc<Self>,
        open: OpenLockFile<'_>,
    ) -> io::Result<Option<ExclusiveHold>> {
        let Ok(holder) = Arc::clone(&self.holders).try_write_owned() else {
            return Ok(None);
        };
        let file = open()?.ok_or_else(unlockable)?;
        Ok(try_lock(&file, Mode::Exclusive)?.then_some(ExclusiveHold {
            _file: file,
            _holder: holder,
            _locks: Arc::clone(self),
        }))
    }

    /// [`EntryLocks::hold_exclusive`] for code that may block its thread
    /// (`cache verify`), waiting for other processes only: it runs in a
    /// process of its own, where no other holder can be waited for, so an
    /// entry this process holds already is an error.
    pub(super) fn hold_exclusive_blocking(
        self: &Arc<Self>,
        open: OpenLockFile<'_>,
    ) -> io::Result<ExclusiveHold> {
        let holder = Arc::clone(&self.holders).try_write_owned().map_err(|_| {
            io::Error::new(
                io::ErrorKind::WouldBlock,
                "this process holds the entry already",
            )
        })?;
        let file = open()?.ok_or_else(unlockable)?;
        if !try_lock(&file, Mode::Exclusive)? {
            crate::failpoint::pause("entry-lock-busy");
            crate::failpoint::count("entry-lock-wait-process");
            file.lock()?;
        }
        Ok(ExclusiveHold {
            _file: file,
            _holder: holder,
            _locks: Arc::clone(self),
        })
    }

    /// What a writer that cannot have the entry now waits for: the uses of
    /// this process, or its other writer. Only the tests' count asks.
    fn holders_kind(&self) -> &'static str {
        if self.shared().uses > 0 {
            "entry-lock-wait-use"
        } else {
            "entry-lock-wait-fill"
        }
    }
}

fn unlockable() -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        "the entry's lock file cannot be opened",
    )
}

#[derive(Clone, Copy)]
enum Mode {
    Shared,
    Exclusive,
}

/// Takes the file lock of `file` in `mode` if it is free; false if another
/// process holds it.
fn try_lock(file: &File, mode: Mode) -> io::Result<bool> {
    let tried = match mode {
        Mode::Shared => file.try_lock_shared(),
        Mode::Exclusive => file.try_lock(),
    };
    match tried {
        Ok(()) => Ok(true),
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(err)) => Err(err),
    }
}

/// Takes the file lock of `file` in `mode`, at once if it is free, else
/// on a blocking thread, woken by the other process's release.
async fn lock_file(
    file: File,
    mode: Mode,
    on_wait: &mut Option<impl FnOnce()>,
) -> io::Result<File> {
    if try_lock(&file, mode)? {
        return Ok(file);
    }
    crate::failpoint::pause(match mode {
        Mode::Shared => "use-lock-busy",
        Mode::Exclusive => "entry-lock-busy",
    });
    crate::failpoint::count("entry-lock-wait-process");
    let mut waiting = tokio::task::spawn_blocking(move || {
        match mode {
            Mode::Shared => file.lock_shared(),
            Mode::Exclusive => file.lock(),
        }
        .map(|()| file)
    });
    let locked = match tokio::time::timeout(WAIT_NOTICE_AFTER, &mut waiting).await {
        Ok(locked) => locked,
        Err(_) => {
            if let Some(notify) = on_wait.take() {
                notify();
            }
            waiting.await
        }
    };
    locked.map_err(io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The lock file in a fresh directory, and an opener for it.
    fn lock_file_in(dir: &tempfile::TempDir) -> PathBuf {
        dir.path().join(".linux_amd64.lock")
    }

    fn opener(path: &Path) -> impl Fn() -> io::Result<Option<File>> + Sync + '_ {
        move || {
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(path)
                .map(Some)
        }
    }

    /// Another process's hold, as flock sees it: the file opened anew.
    fn foreign(path: &Path) -> File {
        std::fs::OpenOptions::new().write(true).open(path).unwrap()
    }

    /// Uses by one process share one file lock: a second use takes it at
    /// once (no wait, not even on the file), no writer can have it until
    /// the last use ends, and then the file lock is free for any process.
    #[tokio::test]
    async fn uses_of_one_process_share_one_file_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = lock_file_in(&dir);
        let open = opener(&path);
        let locks = EntryLocks::of(&path);
        let first = locks.hold_shared(&open).await.unwrap();
        let second = locks
            .try_hold_shared(&open)
            .unwrap()
            .expect("shared at once");
        assert!(locks.try_hold_exclusive(&open).unwrap().is_none());
        assert!(matches!(
            foreign(&path).try_lock(),
            Err(std::fs::TryLockError::WouldBlock)
        ));
        drop(first);
        assert!(locks.try_hold_exclusive(&open).unwrap().is_none());
        drop(second);
        foreign(&path)
            .try_lock()
            .expect("released with the last use");
        let writer = locks.try_hold_exclusive(&open).unwrap();
        assert!(writer.is_some());
        // Another handle on the same lock file is the same holder.
        assert!(
            EntryLocks::of(&path)
                .try_hold_shared(&open)
                .unwrap()
                .is_none()
        );
    }

    /// A writer's hold keeps this process's holders of the entry, though
    /// nothing else refers to them: a directory asking for the entry while
    /// another fills it finds the fill's in-process lock, and waits for it
    /// there, not on the file as another process would.
    #[tokio::test]
    async fn a_writer_keeps_the_holders_while_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let path = lock_file_in(&dir);
        let writer = EntryLocks::of(&path)
            .hold_exclusive(&opener(&path), || {})
            .await
            .unwrap();
        assert!(EntryLocks::of(&path).holders.try_read().is_err());
        drop(writer);
        assert!(EntryLocks::of(&path).holders.try_read().is_ok());
    }

    /// A use waits for this process's writer, and for another process's,
    /// and each wait ends with the holder's release.
    #[tokio::test]
    async fn waits_end_when_the_holder_releases() {
        let dir = tempfile::tempdir().unwrap();
        let path = lock_file_in(&dir);
        let locks = EntryLocks::of(&path);
        let writer = locks.hold_exclusive(&opener(&path), || {}).await.unwrap();
        let waiting = {
            let (locks, path) = (Arc::clone(&locks), path.clone());
            tokio::spawn(async move { locks.hold_shared(&opener(&path)).await.map(drop) })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!waiting.is_finished());
        drop(writer);
        waiting.await.unwrap().unwrap();

        let other = foreign(&path);
        other.lock().unwrap();
        let waiting = {
            let (locks, path) = (Arc::clone(&locks), path.clone());
            tokio::spawn(async move { locks.hold_exclusive(&opener(&path), || {}).await.map(drop) })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!waiting.is_finished());
        drop(other);
        waiting.await.unwrap().unwrap();
    }
}
