//! Where the hand-off's CLI configuration lives while the command runs.
//!
//! It holds copies of the user's tokens, so no copy may outlive tfinstall,
//! not even after `kill -9` (a CI job's timeout, the OOM killer), which
//! runs no clean-up:
//! - on Linux, an anonymous in-memory file (`memfd_create`), handed over as
//!   `/proc/PID/fd/N` with tfinstall's own pid. It is freed when tfinstall
//!   ends, however it ends; nothing is written to disk. The path names
//!   tfinstall's descriptor rather than `/proc/self/fd/N`, so every process
//!   below the command reads it, including those started through a program
//!   that closes the descriptors it inherits (Python's `subprocess`, `sudo`),
//!   and Terraform's plugins, which get the variable too (a provider such as
//!   `hashicorp/tfe` reads the CLI configuration to find its token).
//!   Terraform and OpenTofu read the file once, when they start; the
//!   command and everything it starts outlive tfinstall only when tfinstall
//!   is killed, and then nothing of it remains to read.
//! - elsewhere, or where `/proc` is not there to read it through, a file in
//!   a directory of its own (mode 0700) in the temporary directory. The
//!   directory's name carries tfinstall's pid and holds a lock file locked
//!   for as long as tfinstall runs: [`remove_abandoned`] (the next `exec`,
//!   and `cache prune`) removes the directories whose process no longer
//!   runs.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The prefix of a file hand-off's directory in the temporary directory,
/// followed by `PID-` and a random suffix.
const DIR_PREFIX: &str = "tfinstall-handoff-";

/// The lock file in a file hand-off's directory, locked by its process
/// while it runs.
const LOCK_FILE: &str = "lock";

/// The configuration handed to the command: readable at [`path`] for as
/// long as this value lives, gone when it is dropped.
///
/// [`path`]: HandedConfig::path
pub struct HandedConfig {
    path: PathBuf,
    /// What keeps the file readable; dropped, it removes it.
    _keep: Kept,
}

enum Kept {
    /// The in-memory file: closing the last descriptor frees it.
    #[cfg(target_os = "linux")]
    Memory { _file: File },
    /// The directory, removed on drop, and its lock file, held locked.
    /// The lock is closed first (Windows removes no open file); the pid in
    /// the name keeps the directory from others until it is gone.
    Directory {
        _lock: File,
        _dir: tempfile::TempDir,
    },
}

impl HandedConfig {
    /// Where the command reads it (`TF_CLI_CONFIG_FILE`).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Writes `text` where the command can read it as `file_name` (such as
/// `terraform.tfrc`): in memory where the platform allows it, else into a
/// private directory in `tmp`.
pub fn write(text: &str, file_name: &str, tmp: &Path) -> std::io::Result<HandedConfig> {
    #[cfg(target_os = "linux")]
    if let Ok(handed) = in_memory(text, file_name) {
        return Ok(handed);
    }
    in_directory(text, file_name, tmp)
}

/// The in-memory file, if it can be read back through its `/proc` path (a
/// kernel without `memfd_create`, or a missing or foreign `/proc`, leave
/// the file hand-off).
#[cfg(target_os = "linux")]
fn in_memory(text: &str, file_name: &str) -> std::io::Result<HandedConfig> {
    use std::os::fd::{AsRawFd as _, FromRawFd as _};
    use std::os::unix::fs::PermissionsExt as _;

    let name = std::ffi::CString::new(file_name).map_err(std::io::Error::other)?;
    // Close-on-exec: the command reads it through tfinstall's descriptor,
    // so no process below tfinstall holds a copy.
    // SAFETY: `name` is a valid C string; the call touches nothing else.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and nothing else owns it.
    let mut file = unsafe { File::from_raw_fd(fd) };
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(text.as_bytes())?;
    let path = PathBuf::from(format!(
        "/proc/{}/fd/{}",
        std::process::id(),
        file.as_raw_fd()
    ));
    if std::fs::read(&path)? != text.as_bytes() {
        return Err(std::io::Error::other(
            "the in-memory file reads differently through /proc",
        ));
    }
    Ok(HandedConfig {
        path,
        _keep: Kept::Memory { _file: file },
    })
}

/// The file hand-off: `tmp/tfinstall-handoff-PID-XXXXXX/FILE_NAME`, the
/// directory 0700 and the file 0600, the lock taken before the token is
/// written.
fn in_directory(text: &str, file_name: &str, tmp: &Path) -> std::io::Result<HandedConfig> {
    let mut builder = tempfile::Builder::new();
    let prefix = format!("{DIR_PREFIX}{}-", std::process::id());
    builder.prefix(&prefix);
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700));
    let dir = builder.tempdir_in(tmp)?;
    let lock = File::create_new(dir.path().join(LOCK_FILE))?;
    lock.try_lock().map_err(std::io::Error::other)?;
    let path = dir.path().join(file_name);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(&path)?.write_all(text.as_bytes())?;
    Ok(HandedConfig {
        path,
        _keep: Kept::Directory {
            _lock: lock,
            _dir: dir,
        },
    })
}

/// Removes the file hand-offs in `tmp` that no running process holds: those
/// left by a tfinstall that was killed. A directory is kept while the
/// process its name gives runs (a recycled pid only delays its removal) or
/// anyone holds its lock (a tfinstall in another pid namespace sharing the
/// directory); one not this user's is left alone. Returns the directories
/// removed; what cannot be read or removed is left for the next time.
pub fn remove_abandoned(tmp: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(owner_pid) else {
            continue;
        };
        let dir = entry.path();
        let is_ours_dir = std::fs::symlink_metadata(&dir).is_ok_and(|meta| {
            #[cfg(unix)]
            let ours = std::os::unix::fs::MetadataExt::uid(&meta) == current_uid();
            #[cfg(not(unix))]
            let ours = true;
            meta.is_dir() && ours
        });
        if !is_ours_dir || process_runs(pid) {
            continue;
        }
        // Held while it is removed, so that no other tfinstall removing
        // abandoned hand-offs races this one.
        let lock = match File::open(dir.join(LOCK_FILE)) {
            Ok(lock) => match lock.try_lock() {
                Ok(()) => Some(lock),
                Err(_) => continue,
            },
            // Killed before it took its lock: nothing written yet.
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(_) => continue,
        };
        if std::fs::remove_dir_all(&dir).is_ok() {
            removed.push(dir);
        }
        drop(lock);
    }
    removed
}

/// The pid in a file hand-off directory's name, `tfinstall-handoff-PID-XXXXXX`.
fn owner_pid(name: &str) -> Option<u32> {
    let (pid, suffix) = name.strip_prefix(DIR_PREFIX)?.split_once('-')?;
    if suffix.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse()
        .ok()
        .filter(|&pid| pid > 0 && pid <= i32::MAX as u32)
}

#[cfg(unix)]
fn current_uid() -> u32 {
    // SAFETY: getuid cannot fail and touches no memory of ours.
    unsafe { libc::getuid() }
}

/// Whether process `pid` runs (or may: a process of another user counts).
#[cfg(unix)]
fn process_runs(pid: u32) -> bool {
    // SAFETY: signal 0 sends nothing; kill only checks the process exists.
    let sent = unsafe { libc::kill(pid as libc::pid_t, 0) };
    sent == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Elsewhere the lock alone tells.
#[cfg(not(unix))]
fn process_runs(_pid: u32) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "credentials \"example.com\" {\n  token = \"secret\"\n}\n";

    #[test]
    fn the_file_reads_back_and_is_gone_when_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let handed = write(TEXT, "terraform.tfrc", tmp.path()).unwrap();
        assert_eq!(std::fs::read_to_string(handed.path()).unwrap(), TEXT);
        #[cfg(target_os = "linux")]
        assert!(
            handed.path().starts_with("/proc"),
            "{}",
            handed.path().display()
        );
        let path = handed.path().to_path_buf();
        drop(handed);
        assert!(!path.exists());
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }

    #[test]
    fn the_file_fallback_is_private_and_kept_while_held() {
        let tmp = tempfile::tempdir().unwrap();
        let handed = in_directory(TEXT, "tofu.tfrc", tmp.path()).unwrap();
        assert!(handed.path().ends_with("tofu.tfrc"));
        assert_eq!(std::fs::read_to_string(handed.path()).unwrap(), TEXT);
        let dir = handed.path().parent().unwrap().to_path_buf();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&dir), 0o700);
            assert_eq!(mode(handed.path()), 0o600);
        }
        assert_eq!(remove_abandoned(tmp.path()), Vec::<PathBuf>::new());
        assert!(handed.path().is_file());
        drop(handed);
        assert!(!dir.exists());
    }

    #[cfg(unix)]
    #[test]
    fn abandoned_directories_are_removed_and_others_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let ended = {
            let mut child = std::process::Command::new("true").spawn().unwrap();
            let pid = child.id();
            child.wait().unwrap();
            pid
        };
        let make = |name: &str, lock: bool| {
            let dir = tmp.path().join(name);
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("terraform.tfrc"), TEXT).unwrap();
            if lock {
                std::fs::write(dir.join(LOCK_FILE), "").unwrap();
            }
            dir
        };
        let abandoned = make(&format!("{DIR_PREFIX}{ended}-aB3dEf"), true);
        let before_its_lock = make(&format!("{DIR_PREFIX}{ended}-x1y2z3"), false);
        let running = make(&format!("{DIR_PREFIX}{}-Gh4iJk", std::process::id()), true);
        // Its pid ended, but its lock is held: another pid namespace's.
        let held = make(&format!("{DIR_PREFIX}{ended}-Lm5nOp"), true);
        let holder = File::open(held.join(LOCK_FILE)).unwrap();
        holder.lock().unwrap();
        let others: Vec<PathBuf> = ["tfinstall-handoff-Qr6sTu", "tfinstall-handoff-x-1", "other"]
            .iter()
            .map(|name| make(name, true))
            .collect();
        let mut removed = remove_abandoned(tmp.path());
        removed.sort();
        let mut expected = vec![abandoned, before_its_lock];
        expected.sort();
        assert_eq!(removed, expected);
        assert!(running.is_dir() && held.is_dir());
        assert!(others.iter().all(|dir| dir.is_dir()));
    }

    #[test]
    fn only_names_with_a_pid_are_hand_off_directories() {
        assert_eq!(owner_pid("tfinstall-handoff-123-aBcDeF"), Some(123));
        assert_eq!(owner_pid("tfinstall-handoff-aBcDeF"), None);
        assert_eq!(owner_pid("tfinstall-handoff-123-"), None);
        assert_eq!(owner_pid("tfinstall-handoff-0-abc"), None);
        assert_eq!(owner_pid("tfinstall-handoff-+12-abc"), None);
        assert_eq!(owner_pid("tfinstall-handoff-99999999999-abc"), None);
        assert_eq!(owner_pid("other-123-abc"), None);
    }
}
