//! Remembered `h1:` hashes of installed packages.
//!
//! Deciding that a re-run of `init` has nothing to do means knowing that each
//! installed package still matches the lock file, and hashing every file of
//! every provider (hundreds of megabytes for the big clouds) on each run would
//! make the no-op path slower than a download on a fast network. So each
//! installed package's hash is remembered with its files' stamps
//! ([`crate::package::stamps`], which says when they can be trusted), and
//! hashed again only when they no longer hold.
//!
//! Beside each hash goes how the package was authenticated when it was
//! installed: the provider policy asks it of an installed package, whose
//! trust nothing else records. Losing the memo costs a re-hash and, under
//! a policy that asks for trust, a fetch; never a wrong answer.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use crate::cache::AuthRecord;
use crate::fsutil::Flush;
use crate::install::staging::{FileMode, Staging};
use crate::package::stamps::{DirStamps, FileStamp, stamps_of};
use crate::verify::AuthResult;
use crate::verify::hash::PackageHash;

const MEMO_FILE: &str = ".tfinstall-hashes.json";

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Remembered {
    h1: String,
    stamps: DirStamps,
    /// How the package whose files hash to `h1` was authenticated, when
    /// this run or an earlier one installed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    auth: Option<AuthRecord>,
}

/// Kept in the data directory; Terraform ignores files it does not know there.
#[derive(Debug, Default)]
pub struct HashMemo {
    path: PathBuf,
    /// Entries are keyed by their path below it, so that `init DIR` and
    /// `-chdir=DIR init` (and `providers check`) share them.
    data_dir: PathBuf,
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
            data_dir: data_dir.to_path_buf(),
            entries: Mutex::new(entries),
            changed: AtomicBool::new(false),
        }
    }

    /// The `h1:` of the package in `dir`, from memory when no file changed.
    pub fn h1_of_dir(&self, dir: &Path) -> io::Result<PackageHash> {
        let key = self.key(dir);
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
            // Authentication vouches for files with this hash, whatever
            // their stamps.
            let auth = {
                let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
                entries
                    .get(&key)
                    .filter(|known| known.h1 == hash.as_str())
                    .and_then(|known| known.auth.clone())
            };
            self.remember(key, &hash, files, auth);
        }
        Ok(hash)
    }

    /// How the installed package in `dir`, whose files hash to `h1`, was
    /// authenticated when it was installed: unauthenticated when nothing
    /// recorded it (installed by Terraform, or by a tfinstall from before
    /// the record), since nothing then vouches for it.
    pub fn installed_auth(&self, dir: &Path, h1: &PackageHash) -> AuthResult {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(&self.key(dir))
            .filter(|known| known.h1 == h1.as_str())
            .and_then(|known| known.auth.as_ref())
            .map_or(AuthResult::Unauthenticated, AuthResult::from)
    }

    fn key(&self, dir: &Path) -> String {
        dir.strip_prefix(&self.data_dir)
            .unwrap_or(dir)
            .to_string_lossy()
            .into_owned()
    }

    /// Records the hash of a package just written to `written`, which will
    /// be (or already is) renamed to `installed`: renaming a directory
    /// changes no stamp of the files inside it. `auth` is how the package
    /// was authenticated.
    pub fn record(&self, written: &Path, installed: &Path, hash: &PackageHash, auth: &AuthResult) {
        if let Ok(Some(files)) = stamps_of(written) {
            self.remember(self.key(installed), hash, files, Some(auth.into()));
        }
    }

    fn remember(
        &self,
        key: String,
        hash: &PackageHash,
        files: Vec<FileStamp>,
        auth: Option<AuthRecord>,
    ) {
        self.changed.store(true, Ordering::Relaxed);
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.insert(
            key,
            Remembered {
                h1: hash.to_string(),
                stamps: DirStamps::taken_now(files),
                auth,
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
        entries.retain(|dir, _| self.data_dir.join(dir).is_dir());
        if entries.len() == before && !self.changed.load(Ordering::Relaxed) {
            return;
        }
        if let Ok(json) = serde_json::to_vec(&*entries)
            && self.path.parent().is_some_and(Path::is_dir)
        {
            let _ = staging.replace_file(&self.path, &json, FileMode::Exact(0o644), Flush::No);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::package::stamps::pin_mtimes;

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
        memo.record(
            &pkg,
            &pkg,
            &PackageHash::parse("h1:remembered").unwrap(),
            &AuthResult::Unauthenticated,
        );
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

    /// The authentication recorded at install time holds for files with
    /// that hash, across runs and however the data directory is spelt;
    /// other files, or none recorded, count as unauthenticated.
    #[cfg(unix)]
    #[test]
    fn the_recorded_authentication_follows_the_files_hash() {
        use crate::verify::{SignatureCheck, Trust};
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("data");
        let pkg = data.join("providers/x");
        fs::create_dir_all(&pkg).unwrap();
        fs::write(pkg.join("terraform-provider-x"), b"one").unwrap();
        pin_mtimes(&pkg).unwrap();
        let signed = AuthResult::Signed(SignatureCheck {
            trust: Trust::SelfSigned,
            key_id: "38027F80D7FD5FB2".into(),
            fingerprints: Vec::new(),
            key_expired: true,
        });
        let h1 = PackageHash::h1_of_dir(&pkg).unwrap();
        let memo = HashMemo::load(&data);
        memo.record(&pkg, &pkg, &h1, &signed);
        memo.save(&Staging::create(&data).unwrap());

        // Another spelling of the same directory finds it.
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&data, &link).unwrap();
        let reloaded = HashMemo::load(&link);
        let same = link.join("providers/x");
        let hash = reloaded.h1_of_dir(&same).unwrap();
        assert_eq!(reloaded.installed_auth(&same, &hash), signed);

        let other = PackageHash::parse("h1:other").unwrap();
        assert_eq!(
            reloaded.installed_auth(&same, &other),
            AuthResult::Unauthenticated
        );
        assert_eq!(
            reloaded.installed_auth(&link.join("providers/y"), &hash),
            AuthResult::Unauthenticated
        );
    }

    #[test]
    fn a_stamp_taken_right_after_a_write_is_not_trusted() {
        let data = tempfile::tempdir().unwrap();
        let pkg = data.path().join("pkg");
        fs::create_dir(&pkg).unwrap();
        fs::write(pkg.join("a"), b"content").unwrap();
        let memo = HashMemo::load(data.path());
        memo.record(
            &pkg,
            &pkg,
            &PackageHash::parse("h1:bogus").unwrap(),
            &AuthResult::Unauthenticated,
        );
        fs::write(pkg.join("a"), b"content").unwrap();
        assert_eq!(
            memo.h1_of_dir(&pkg).unwrap(),
            PackageHash::h1_of_dir(&pkg).unwrap()
        );
    }
}
