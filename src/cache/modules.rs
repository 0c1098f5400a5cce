//! The shared module package cache: each module package fetched once per
//! machine, with the plugin cache's guarantees (see [`super`]): entries
//! built in `.tmp/` and renamed into place whole, a per-entry `flock` held
//! once per process ([`super::process_locks`]) so each package is fetched
//! once however many processes want it, shared holds while a run places an
//! entry's files so `prune` never takes one from under it, files made
//! read-only, provenance beside the entry.
//!
//! # Where it is
//!
//! `.modules/` inside the plugin cache when one is configured (Terraform's
//! scan of the plugin cache skips dot-directories, as it skips the plugin
//! entries' own dot-files and `.tmp/`), or `TFINSTALL_MODULE_CACHE_DIR`,
//! which wins over it ([`ModuleCache::configured`]).
//!
//! # Layout
//!
//! ```text
//! ROOT/
//!   CACHEDIR.TAG
//!   .tmp/KIND~URLKEY~ID/                 an entry's work directory (its lock holder's)
//!   .tmp/fetch-XXXXXX/                   a fetch whose identity is not known yet
//!   .tmp/aside-PID-TIME-N/               a killed filler's work, still written to when set aside
//!   git/URLKEY/COMMIT/                   a git package: the tree at COMMIT, no .git
//!   git/URLKEY/.COMMIT.lock              the entry's lock
//!   git/URLKEY/.COMMIT.tfinstall.json    its provenance and tree digest (ModuleEntryMeta)
//!   git/URLKEY/.COMMIT.used              touched at each use
//!   git/URLKEY/ref-REFKEY.json           the last resolution of a ref (RefRecord)
//!   archive/URLKEY/SHA256/               an archive's extraction (and .SHA256.* as above)
//!   sources/SRCKEY.json                  what a source address last gave (SourceRecord)
//!   registry/PKGKEY/versions.json        a registry's version list (RegistryVersions)
//!   registry/PKGKEY/VERSION.json         its download location (RegistryLocation)
//! ```
//!
//! `URLKEY` is the first 32 hex digits of the SHA-256 of the URL as git or
//! the downloader was given it (with `//subdir` when an `X-Terraform-Get`
//! answer named one; without a password, which no key or record holds), `REFKEY`, `SRCKEY` and `PKGKEY` likewise of the ref
//! name, of the go-getter source address and of the registry package
//! address (`HOST/NS/NAME/SYSTEM`); the
//! records name what they hash. `ID` is the full commit or the archive's
//! SHA-256 in hex.
//!
//! # Keyed by content, so a mutable source cannot poison it
//!
//! An entry's name is the identity of what it holds: a commit, or the
//! SHA-256 of the archive it was extracted from. A moved tag or a
//! republished archive therefore makes a new entry, never changes one, and
//! entries are never replaced: complete or absent. The records beside them
//! (`ref-*.json`, `sources/`, `registry/`) are memories of the last
//! answers, each replaced by rename; they are read only where no request
//! may be made (`-offline`), and to notice a tag that moved.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::process_locks::EntryLocks;
use super::{
    EntryLock, EntryUse, TMP_DIR, make_read_only, mark_cache_dir, open_for_use, sidecar, work_dir,
};
use crate::module_package::{PackageIdentity, RefKind};

/// The environment variable that puts the module cache elsewhere (or
/// turns it on without a plugin cache).
pub const MODULE_CACHE_DIR_ENV: &str = "TFINSTALL_MODULE_CACHE_DIR";

/// Where the module cache lives inside a plugin cache.
pub const IN_PLUGIN_CACHE: &str = ".modules";

pub(super) const ENTRY_META_SUFFIX: &str = ".tfinstall.json";
pub const MODULE_META_FORMAT: u32 = 1;

#[derive(Clone, Debug)]
pub struct ModuleCache {
    root: PathBuf,
    /// The records this run has read or written, by path, shared by the
    /// clones of one run's cache: `init DIR…` over 20 directories asked
    /// for each module's kept answers and entry record 4 times a
    /// directory, all on the runtime's one thread. A record another
    /// process changes meanwhile is seen by the next run, as if this one
    /// had read it all at its start.
    records: Arc<Mutex<HashMap<PathBuf, Arc<[u8]>>>>,
}

/// Provenance of one module entry, stored beside it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleEntryMeta {
    pub format: u32,
    /// The entry's identity: where it came from and what it was.
    #[serde(flatten)]
    pub identity: IdentityRecord,
    /// [`tree_digest`] of the entry's files when it was published, for
    /// `cache verify`.
    pub tree: String,
}

/// [`PackageIdentity`] as the records spell it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum IdentityRecord {
    Git { url: String, commit: String },
    Archive { url: String, sha256: String },
}

/// The identity as the cache keys and records it: without a password.
impl From<&PackageIdentity> for IdentityRecord {
    fn from(identity: &PackageIdentity) -> Self {
        match identity {
            PackageIdentity::Git { url, commit } => IdentityRecord::Git {
                url: redact(url).into_owned(),
                commit: commit.to_ascii_lowercase(),
            },
            PackageIdentity::Archive { url, sha256 } => IdentityRecord::Archive {
                url: redact(url).into_owned(),
                sha256: sha256.to_ascii_lowercase(),
            },
        }
    }
}

/// What a git ref named when it was last resolved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefRecord {
    pub url: String,
    /// The ref as the source wrote it (`HEAD` when it wrote none).
    #[serde(rename = "ref")]
    pub reference: String,
    pub kind: RefKind,
    pub commit: String,
}

/// What a source address (a go-getter address, as the module installer
/// fetches it) gave when it was last fetched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRecord {
    pub source: String,
    pub identity: IdentityRecord,
}

/// A module registry's version list for one package.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryVersions {
    pub package: String,
    pub versions: Vec<String>,
}

/// A module registry's download location for one version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryLocation {
    pub package: String,
    pub version: String,
    pub location: String,
}

/// A complete entry.
#[derive(Clone, Debug)]
pub struct ModuleEntry {
    pub dir: PathBuf,
    pub meta: Option<ModuleEntryMeta>,
}

/// The first 32 hex digits of the SHA-256 of `text`: a directory name for
/// a URL or a name that may hold any character.
fn short_key(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// `text` with the password of the URL in it left out
/// (`git::https://user:secret@host/r.git` → `git::https://user@host/r.git`):
/// what the cache keys on and writes down. A password changes nothing of
/// what a commit or a SHA-256 names, and the records are readable by every
/// user of the cache; a source with a password in it (rare: it would be
/// committed with the code) therefore finds the entries its fetches filled.
fn redact(text: &str) -> Cow<'_, str> {
    let Some(scheme_end) = text.find("://") else {
        return Cow::Borrowed(text);
    };
    let start = scheme_end + 3;
    let rest = &text[start..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let Some(at) = authority.rfind('@') else {
        return Cow::Borrowed(text);
    };
    let Some(colon) = authority[..at].find(':') else {
        return Cow::Borrowed(text);
    };
    Cow::Owned(format!("{}{}", &text[..start + colon], &text[start + at..]))
}

/// `id` if it can be a directory name of an entry: hex digits only (a
/// commit or a SHA-256), so nothing a server says can name a path.
fn hex_id(id: &str) -> io::Result<&str> {
    if !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(id)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{id:?} is not a commit id or a SHA-256"),
        ))
    }
}

impl ModuleCache {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        ModuleCache {
            root: root.into(),
            records: Arc::default(),
        }
    }

    /// The module cache a run uses: `TFINSTALL_MODULE_CACHE_DIR` (`env`)
    /// when set and not empty, else `.modules/` in the plugin cache, else
    /// none.
    pub fn configured(env: Option<PathBuf>, plugin_cache: Option<&Path>) -> Option<ModuleCache> {
        match env.filter(|dir| !dir.as_os_str().is_empty()) {
            Some(dir) => Some(ModuleCache::new(dir)),
            None => plugin_cache.map(|dir| ModuleCache::new(dir.join(IN_PLUGIN_CACHE))),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the entry for `identity` is, or would be.
    pub fn entry_dir(&self, identity: &PackageIdentity) -> io::Result<PathBuf> {
        Ok(match IdentityRecord::from(identity) {
            IdentityRecord::Git { url, commit } => self
                .root
                .join("git")
                .join(short_key(&url))
                .join(hex_id(&commit)?),
            IdentityRecord::Archive { url, sha256 } => self
                .root
                .join("archive")
                .join(short_key(&url))
                .join(hex_id(&sha256)?),
        })
    }

    /// The entry for `identity`, if one is complete. Entries are renamed
    /// into place whole and never replaced, so existence means complete.
    pub fn lookup(&self, identity: &PackageIdentity) -> Option<ModuleEntry> {
        let dir = self.entry_dir(identity).ok()?;
        if !dir.is_dir() {
            return None;
        }
        let meta = self
            .read_json::<ModuleEntryMeta>(&sidecar(&dir, ENTRY_META_SUFFIX))
            .filter(|meta| meta.format == MODULE_META_FORMAT);
        Some(ModuleEntry { dir, meta })
    }

    /// Takes the lock of `identity`'s entry exclusively, to fill it,
    /// waiting (off the runtime's threads) for this process's other holders
    /// and for other processes; `on_wait` is called once if another process
    /// still holds it after [`super::WAIT_NOTICE_AFTER`]. The holder looks
    /// the entry up again before filling it: another may have filled it.
    pub async fn lock_entry(
        &self,
        identity: &PackageIdentity,
        on_wait: impl FnOnce(),
    ) -> io::Result<EntryLock> {
        let dir = self.entry_dir(identity)?;
        let lock_path = sidecar(&dir, ".lock");
        let open = || {
            fs::create_dir_all(dir.parent().unwrap_or(&self.root))?;
            mark_cache_dir(&self.root);
            open_lock_file(&lock_path)
        };
        let hold = EntryLocks::of(&lock_path)
            .hold_exclusive(&open, on_wait)
            .await?;
        Ok(EntryLock {
            work: work_dir(&self.root, &dir),
            entry: dir,
            _hold: hold,
        })
    }

    /// Holds the entry at `dir` for use (its lock, shared) while a run
    /// places its files; the caller checks that it is still there once it
    /// holds it.
    pub async fn hold_for_use(&self, dir: &Path) -> io::Result<EntryUse> {
        let lock_path = sidecar(dir, ".lock");
        let hold = EntryLocks::of(&lock_path)
            .hold_shared(&|| open_for_use(&lock_path, dir))
            .await?;
        Ok(EntryUse { _hold: hold })
    }

    /// Publishes the package built in `lock`'s [`EntryLock::build_dir`]:
    /// its files made read-only, its provenance written (by rename), then
    /// the tree renamed into place. A crash between the two renames leaves
    /// provenance without an entry, which reads as no entry. An entry that
    /// is there already is kept as it is (entries are immutable) and the
    /// build is dropped with the lock.
    pub fn insert(&self, lock: &EntryLock, identity: &PackageIdentity) -> io::Result<PathBuf> {
        let built = lock.work.join("package");
        let dir = &lock.entry;
        if dir.is_dir() {
            return Ok(dir.clone());
        }
        make_read_only(&built)?;
        let meta = ModuleEntryMeta {
            format: MODULE_META_FORMAT,
            identity: IdentityRecord::from(identity),
            tree: tree_digest(&built)?,
        };
        self.write_json(&sidecar(dir, ENTRY_META_SUFFIX), &meta)?;
        crate::failpoint::pause("module-insert-midway");
        fs::rename(&built, dir)?;
        Ok(dir.clone())
    }

    /// A new, empty directory in `.tmp/` for a fetch whose identity is
    /// known only once it is done (an archive's SHA-256): on the cache's
    /// filesystem, so its tree can be renamed into an entry. Removed when
    /// dropped; one a killed process left is for `cache prune`.
    pub fn fetch_dir(&self) -> io::Result<tempfile::TempDir> {
        let tmp = self.root.join(TMP_DIR);
        fs::create_dir_all(&tmp)?;
        mark_cache_dir(&self.root);
        tempfile::Builder::new().prefix("fetch-").tempdir_in(tmp)
    }

    /// Records that a run used the entry now (see
    /// [`super::PluginCache::record_use`]).
    pub fn record_use(&self, entry: &Path) {
        use std::io::Write as _;
        let _ = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(sidecar(entry, ".used"))
            .and_then(|mut file| file.write_all(b"\n"));
    }

    fn ref_path(&self, url: &str, reference: &str) -> PathBuf {
        self.root
            .join("git")
            .join(short_key(&redact(url)))
            .join(format!("ref-{}.json", short_key(reference)))
    }

    /// What `reference` of the repository at `url` named when last resolved.
    pub fn resolved_ref(&self, url: &str, reference: &str) -> Option<RefRecord> {
        self.read_json::<RefRecord>(&self.ref_path(url, reference))
            .filter(|record| record.url == redact(url) && record.reference == reference)
    }

    /// Remembers a resolution of a ref; failing only costs the memory.
    pub fn remember_ref(&self, record: &RefRecord) {
        let record = RefRecord {
            url: redact(&record.url).into_owned(),
            ..record.clone()
        };
        let _ = self.write_json(&self.ref_path(&record.url, &record.reference), &record);
    }

    fn source_path(&self, source: &str) -> PathBuf {
        self.root
            .join("sources")
            .join(format!("{}.json", short_key(&redact(source))))
    }

    /// The identity the source address `source` gave when last fetched.
    pub fn last_fetched(&self, source: &str) -> Option<PackageIdentity> {
        self.read_json::<SourceRecord>(&self.source_path(source))
            .filter(|record| record.source == redact(source))
            .map(|record| match record.identity {
                IdentityRecord::Git { url, commit } => PackageIdentity::Git { url, commit },
                IdentityRecord::Archive { url, sha256 } => PackageIdentity::Archive { url, sha256 },
            })
    }

    /// Remembers what `source` gave; failing only costs the memory.
    pub fn remember_fetched(&self, source: &str, identity: &PackageIdentity) {
        let record = SourceRecord {
            source: redact(source).into_owned(),
            identity: IdentityRecord::from(identity),
        };
        let _ = self.write_json(&self.source_path(source), &record);
    }

    fn registry_dir(&self, package: &str) -> PathBuf {
        self.root.join("registry").join(short_key(package))
    }

    /// The version list last answered for the registry package `package`
    /// (`HOST/NS/NAME/SYSTEM`).
    pub fn registry_versions(&self, package: &str) -> Option<Vec<String>> {
        self.read_json::<RegistryVersions>(&self.registry_dir(package).join("versions.json"))
            .filter(|record| record.package == package)
            .map(|record| record.versions)
    }

    pub fn remember_registry_versions(&self, package: &str, versions: Vec<String>) {
        let record = RegistryVersions {
            package: package.to_owned(),
            versions,
        };
        let _ = self.write_json(&self.registry_dir(package).join("versions.json"), &record);
    }

    fn location_path(&self, package: &str, version: &str) -> PathBuf {
        self.registry_dir(package)
            .join(format!("{}.json", short_key(version)))
    }

    /// The download location last answered for `version` of `package`,
    /// without the password of a URL in it.
    pub fn registry_location(&self, package: &str, version: &str) -> Option<String> {
        self.read_json::<RegistryLocation>(&self.location_path(package, version))
            .filter(|record| record.package == package && record.version == version)
            .map(|record| record.location)
    }

    pub fn remember_registry_location(&self, package: &str, version: &str, location: &str) {
        let record = RegistryLocation {
            package: package.to_owned(),
            version: version.to_owned(),
            location: redact(location).into_owned(),
        };
        let _ = self.write_json(&self.location_path(package, version), &record);
    }
}

/// The digest of a module tree as it is on disk, links not followed:
/// `sha256:` and the SHA-256 of one record per entry, sorted by path
/// (`/`-separated, relative), each `KIND\0PATH\0DATA\0` where a file is
/// `f` (`x` if executable) with its content's SHA-256, a symbolic link `l`
/// with its target, a directory `d` with nothing. The provider hash `h1:`
/// cannot serve: it follows links, and a module's links may name anything
/// (`/`, a device).
pub fn tree_digest(dir: &Path) -> io::Result<String> {
    let mut records: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut pending: Vec<(PathBuf, String)> = vec![(dir.to_path_buf(), String::new())];
    while let Some((path, rel)) = pending.pop() {
        for entry in fs::read_dir(&path)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let meta = fs::symlink_metadata(entry.path())?;
            let (kind, data) = if meta.file_type().is_symlink() {
                let target = fs::read_link(entry.path())?;
                ("l", target.to_string_lossy().into_owned().into_bytes())
            } else if meta.is_dir() {
                pending.push((entry.path(), rel.clone()));
                ("d", Vec::new())
            } else {
                let digest = crate::verify::hash::sha256_file(&entry.path())?;
                let kind = if is_executable(&meta) { "x" } else { "f" };
                (kind, hex::encode(digest).into_bytes())
            };
            let mut record = Vec::new();
            for part in [kind.as_bytes(), rel.as_bytes(), &data] {
                record.extend_from_slice(part);
                record.push(0);
            }
            records.push((rel.into_bytes(), record));
        }
    }
    records.sort();
    let mut hasher = Sha256::new();
    for (_, record) in &records {
        hasher.update(record);
    }
    Ok(format!("sha256:{}", hex::encode(hasher.finalize())))
}

#[cfg(unix)]
fn is_executable(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_meta: &fs::Metadata) -> bool {
    false
}

impl ModuleCache {
    fn records(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Arc<[u8]>>> {
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bytes of the record at `path`, as this run last read or wrote
    /// them.
    fn record_bytes(&self, path: &Path) -> Option<Arc<[u8]>> {
        if let Some(known) = self.records().get(path) {
            return Some(known.clone());
        }
        let bytes: Arc<[u8]> = fs::read(path).ok()?.into();
        self.records().insert(path.to_path_buf(), bytes.clone());
        Some(bytes)
    }

    /// A record, if it is there and reads; records are replaced by rename
    /// only, so one is read whole or not at all.
    fn read_json<T: serde::de::DeserializeOwned>(&self, path: &Path) -> Option<T> {
        self.record_bytes(path)
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
    }

    /// Writes `value` to `path` atomically, unless `path` already holds
    /// those bytes: every warm `init` remembers the same registry answers
    /// and sources again, and one read costs less than a temp file, its
    /// mode and a rename per record.
    fn write_json<T: Serialize>(&self, path: &Path, value: &T) -> io::Result<()> {
        let json = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
        if self.record_bytes(path).is_some_and(|held| *held == *json) {
            return Ok(());
        }
        crate::fsutil::write_atomic(path, &json, 0o644)?;
        self.records().insert(path.to_path_buf(), json.into());
        Ok(())
    }
}

/// An entry's lock file, made if need be, for a holder that changes the
/// entry (fills or removes it).
pub(super) fn open_lock_file(lock_path: &Path) -> io::Result<Option<fs::File>> {
    fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(lock_path)
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git_identity() -> PackageIdentity {
        PackageIdentity::Git {
            url: "https://example.com/vpc.git".into(),
            commit: "0123456789abcdef0123456789abcdef01234567".into(),
        }
    }

    #[test]
    fn an_unchanged_record_is_not_written_again() {
        use std::os::unix::fs::MetadataExt;
        let root = tempfile::tempdir().unwrap();
        let cache = ModuleCache::new(root.path());
        let inode = || {
            fs::metadata(
                root.path()
                    .join("registry")
                    .join(short_key("a/b/c"))
                    .join("versions.json"),
            )
            .unwrap()
            .ino()
        };
        cache.remember_registry_versions("a/b/c", vec!["1.0.0".into()]);
        let first = inode();
        cache.remember_registry_versions("a/b/c", vec!["1.0.0".into()]);
        assert_eq!(inode(), first);
        cache.remember_registry_versions("a/b/c", vec!["1.0.0".into(), "1.1.0".into()]);
        assert_ne!(inode(), first);
        assert_eq!(
            cache.registry_versions("a/b/c").unwrap(),
            vec!["1.0.0".to_string(), "1.1.0".to_string()]
        );
    }

    #[tokio::test]
    async fn entries_are_published_whole_read_only_with_provenance() {
        let root = tempfile::tempdir().unwrap();
        let cache = ModuleCache::new(root.path());
        let identity = git_identity();
        assert!(cache.lookup(&identity).is_none());
        let lock = cache.lock_entry(&identity, || {}).await.unwrap();
        let built = lock.build_dir().unwrap();
        fs::create_dir(&built).unwrap();
        fs::write(built.join("main.tf"), "x").unwrap();
        let dir = cache.insert(&lock, &identity).unwrap();
        drop(lock);
        assert!(dir.starts_with(root.path().join("git")));
        let entry = cache.lookup(&identity).unwrap();
        assert_eq!(entry.dir, dir);
        let meta = entry.meta.unwrap();
        assert_eq!(meta.identity, IdentityRecord::from(&identity));
        assert_eq!(meta.tree, tree_digest(&dir).unwrap());
        assert!(
            fs::metadata(dir.join("main.tf"))
                .unwrap()
                .permissions()
                .readonly()
        );
        assert!(root.path().join("CACHEDIR.TAG").is_file());
        assert_eq!(fs::read_dir(root.path().join(TMP_DIR)).unwrap().count(), 0);
    }

    /// What a killed filler left in the entry's work directory is removed
    /// by the next holder, and no entry appears.
    #[tokio::test]
    async fn a_killed_fill_leaves_no_entry() {
        let root = tempfile::tempdir().unwrap();
        let cache = ModuleCache::new(root.path());
        let identity = git_identity();
        let dir = cache.entry_dir(&identity).unwrap();
        let work = work_dir(root.path(), &dir);
        fs::create_dir_all(work.join("package")).unwrap();
        fs::write(work.join("package/half"), "...").unwrap();
        assert!(cache.lookup(&identity).is_none());
        let lock = cache.lock_entry(&identity, || {}).await.unwrap();
        assert!(!lock.build_dir().unwrap().exists());
        drop(lock);
        assert!(!work.exists());
    }

    /// The digest sees contents, executable bits, names and link targets,
    /// and follows no link.
    #[cfg(unix)]
    #[test]
    fn the_tree_digest_sees_every_change_and_follows_no_link() {
        use std::os::unix::fs::{PermissionsExt as _, symlink};
        let root = tempfile::tempdir().unwrap();
        let dir = root.path();
        fs::create_dir(dir.join("sub")).unwrap();
        fs::write(dir.join("sub/main.tf"), "x").unwrap();
        symlink("/", dir.join("root")).unwrap();
        let first = tree_digest(dir).unwrap();
        assert!(first.starts_with("sha256:"));
        assert_eq!(tree_digest(dir).unwrap(), first);
        fs::set_permissions(dir.join("sub/main.tf"), fs::Permissions::from_mode(0o755)).unwrap();
        let executable = tree_digest(dir).unwrap();
        assert_ne!(executable, first);
        fs::write(dir.join("sub/main.tf"), "y").unwrap();
        assert_ne!(tree_digest(dir).unwrap(), executable);
        fs::remove_file(dir.join("root")).unwrap();
        symlink("/tmp", dir.join("root")).unwrap();
        let relinked = tree_digest(dir).unwrap();
        fs::rename(dir.join("sub"), dir.join("other")).unwrap();
        assert_ne!(tree_digest(dir).unwrap(), relinked);
    }

    #[test]
    fn identities_name_no_path_and_records_read_back() {
        let root = tempfile::tempdir().unwrap();
        let cache = ModuleCache::new(root.path());
        let bad = PackageIdentity::Git {
            url: "u".into(),
            commit: "../../etc".into(),
        };
        assert!(cache.entry_dir(&bad).is_err());
        let record = RefRecord {
            url: "https://example.com/r.git".into(),
            reference: "v1.0.0".into(),
            kind: RefKind::Tag,
            commit: "ab".repeat(20),
        };
        cache.remember_ref(&record);
        assert_eq!(cache.resolved_ref(&record.url, "v1.0.0"), Some(record));
        assert_eq!(cache.resolved_ref("https://example.com/r.git", "v2"), None);
        cache.remember_registry_versions("h/n/x/aws", vec!["1.0.0".into()]);
        assert_eq!(
            cache.registry_versions("h/n/x/aws"),
            Some(vec!["1.0.0".to_string()])
        );
        cache.remember_registry_location("h/n/x/aws", "1.0.0", "git::https://h/x?ref=v1");
        assert_eq!(
            cache.registry_location("h/n/x/aws", "1.0.0").as_deref(),
            Some("git::https://h/x?ref=v1")
        );
        assert_eq!(cache.registry_location("h/n/x/aws", "2.0.0"), None);
    }

    /// A password in a source is neither written down nor part of a key.
    #[test]
    fn passwords_are_left_out_of_keys_and_records() {
        assert_eq!(
            redact("git::https://user:secret@host/r.git?ref=v1"),
            "git::https://user@host/r.git?ref=v1"
        );
        assert_eq!(redact("https://host/a@b:c"), "https://host/a@b:c");
        assert_eq!(redact("git@host:o/r.git"), "git@host:o/r.git");
        let root = tempfile::tempdir().unwrap();
        let cache = ModuleCache::new(root.path());
        let with = |password: &str| PackageIdentity::Git {
            url: format!("https://ci:{password}@example.com/r.git"),
            commit: "ab".repeat(20),
        };
        assert_eq!(
            cache.entry_dir(&with("one")).unwrap(),
            cache.entry_dir(&with("two")).unwrap()
        );
        cache.remember_fetched("git::https://ci:one@example.com/r.git", &with("one"));
        let found = cache
            .last_fetched("git::https://ci:two@example.com/r.git")
            .unwrap();
        assert_eq!(
            cache.entry_dir(&found).unwrap(),
            cache.entry_dir(&with("one")).unwrap()
        );
        let mut written = String::new();
        for file in fs::read_dir(root.path().join("sources")).unwrap() {
            written += &fs::read_to_string(file.unwrap().path()).unwrap();
        }
        assert!(!written.contains("one"), "{written}");
    }

    #[test]
    fn the_environment_wins_over_the_plugin_cache() {
        let plugin = Path::new("/p");
        assert_eq!(
            ModuleCache::configured(None, Some(plugin)).unwrap().root(),
            Path::new("/p/.modules")
        );
        assert_eq!(
            ModuleCache::configured(Some("/m".into()), Some(plugin))
                .unwrap()
                .root(),
            Path::new("/m")
        );
        assert!(ModuleCache::configured(Some("".into()), None).is_none());
    }
}
