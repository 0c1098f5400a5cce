//! The hashes a lock entry records for one provider, version and platform,
//! whatever platform this machine is: the package's `h1:` and what its
//! source vouches for beside it (a signed checksum list's `zh:` of every
//! platform's archive, a content address), from the cheapest source that
//! can be trusted with them. `init -platform` and `providers lock` both
//! ask here, for any number of providers and platforms at once.
//!
//! The sources, cheapest first:
//!
//! 1. The plugin cache, when its entry for the platform carries tfinstall's
//!    record of a signed release and its files are still the ones recorded:
//!    no request at all.
//! 2. What the source's answer for the platform already says: an OpenTofu
//!    registry's `packages` (each platform's `h1:`, trusted once the signed
//!    checksum list confirms that platform's `zh:`), a network mirror
//!    trusted with every platform's hashes (`trust_all_hashes`), an OCI
//!    mirror's layer digest (the archive's `zh:`).
//! 3. A package whose files are at hand (a cache entry whose record names
//!    the very archive the signed list vouches for; or one installed here,
//!    or in the cache without a record, whose `h1:` the lock entry already
//!    holds: the lock file is what Terraform trusts, so it vouches for a
//!    hash it holds wherever that hash was seen again). A network mirror's
//!    listed `h1:` is used in the same way, and only so: an untrusted
//!    mirror's word alone never reaches the lock file.
//! 4. The package itself, downloaded and hashed in memory as it streams
//!    ([`Destination::Hashed`]): nothing is written, nothing is unpacked
//!    to disk. An archive the streaming walker cannot vouch for (data
//!    before its first entry, zip64 entries, …) is downloaded again to a
//!    temporary file, judged by the full extractor without writing its
//!    files ([`hash_package`]), and removed.
//!
//! Every archive is authenticated as the installer authenticates it
//! ([`authenticate_archive`]) before its `h1:` counts, what vouches for the
//! hashes must satisfy the provider policy as a package installed here
//! must (its minimum trust, its pinned keys), and the same
//! archive (by location) is fetched once per run however many working
//! directories ask. What each hash came from is reported with it.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex};

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use tokio::sync::Semaphore;

use crate::addr::{Platform, ProviderAddr};
use crate::cache::PluginCache;
use crate::cache::facts::{EntryFacts, entry_h1};
use crate::fetch::{Destination, Downloader};
use crate::fsutil::blocking;
use crate::package::extract::{ExtractLimits, ExtractedFile, hash_package};
use crate::policy::Policy;
use crate::source::authentication::{
    StageError, alongside_documents, authenticate_archive, authenticate_files, authenticate_signed,
};
use crate::source::{PackageAuthentication, PackageLocation, PackageMeta, Source};
use crate::verify::AuthResult;
use crate::verify::hash::PackageHash;
use crate::version::Version;

/// Where one recorded hash came from, cheapest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HashSource {
    /// The lock entry already held it, and a package at hand has it.
    LockFile,
    /// The plugin cache entry's record of how it was verified.
    PluginCache,
    /// An OpenTofu registry's `packages` list for the release.
    RegistryPackages,
    /// The registry's signed `SHA256SUMS`.
    SignedChecksums,
    /// A network mirror trusted with every platform's hashes.
    NetworkMirror,
    /// The digest an OCI mirror addresses the archive by.
    OciDigest,
    /// Computed from the package itself, streamed and hashed in memory (or,
    /// for a local mirror, read where it lies).
    Package,
}

impl HashSource {
    /// The name `-json` and the log use.
    pub fn as_str(self) -> &'static str {
        match self {
            HashSource::LockFile => "lock_file",
            HashSource::PluginCache => "plugin_cache",
            HashSource::RegistryPackages => "registry_packages",
            HashSource::SignedChecksums => "signed_checksums",
            HashSource::NetworkMirror => "network_mirror",
            HashSource::OciDigest => "oci_digest",
            HashSource::Package => "package",
        }
    }
}

impl fmt::Display for HashSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HashSource::LockFile => "the lock file",
            HashSource::PluginCache => "the plugin cache",
            HashSource::RegistryPackages => "the registry's package list",
            HashSource::SignedChecksums => "the signed checksums",
            HashSource::NetworkMirror => "the trusted network mirror",
            HashSource::OciDigest => "the OCI layer digest",
            HashSource::Package => "the package",
        })
    }
}

/// One provider, version and platform whose hashes are wanted.
pub struct HashQuery<'a> {
    pub provider: &'a ProviderAddr,
    pub version: &'a Version,
    pub platform: &'a Platform,
    /// The lock entry's hashes for this version (none for a new entry):
    /// they vouch for a package at hand that has one of them.
    pub locked: &'a BTreeSet<PackageHash>,
    /// The `h1:` of this platform's package installed in the working
    /// directory, whose origin nothing records.
    pub installed: Option<PackageHash>,
}

/// What a lock entry records for one platform.
#[derive(Clone, Debug)]
pub struct FoundHashes {
    /// Each hash with the source it came from first, sorted by hash.
    pub hashes: Vec<(PackageHash, HashSource)>,
    /// How the package or its release was authenticated.
    pub auth: AuthResult,
}

impl FoundHashes {
    /// Where the platform's `h1:` came from.
    pub fn h1_source(&self) -> Option<HashSource> {
        self.hashes
            .iter()
            .find(|(hash, _)| hash.scheme() == "h1")
            .map(|(_, source)| *source)
    }

    pub fn set(&self) -> BTreeSet<PackageHash> {
        self.hashes.iter().map(|(hash, _)| hash.clone()).collect()
    }

    /// One line for the log: each source and what it gave.
    pub fn describe(&self) -> String {
        let mut by_source: Vec<(HashSource, Vec<&str>)> = Vec::new();
        for (hash, source) in &self.hashes {
            match by_source.iter_mut().find(|(s, _)| s == source) {
                Some((_, hashes)) => hashes.push(hash.as_str()),
                None => by_source.push((*source, vec![hash.as_str()])),
            }
        }
        by_source.sort();
        by_source
            .iter()
            .map(|(source, hashes)| format!("{} from {source}", hashes.join(", ")))
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn add(&mut self, hash: PackageHash, source: HashSource) {
        if !self.hashes.iter().any(|(h, _)| *h == hash) {
            self.hashes.push((hash, source));
        }
    }
}

/// An archive downloaded and hashed: its SHA-256 and size, which
/// authenticate it, and the `h1:` of the files it holds.
#[derive(Debug)]
struct HashedArchive {
    sha256: [u8; 32],
    size: u64,
    h1: PackageHash,
}

type HashedOnce = Shared<BoxFuture<'static, Result<Arc<HashedArchive>, String>>>;

/// The one place that finds platform hashes; one per run, shared by every
/// working directory and platform of it.
pub struct PlatformHashes {
    downloader: Arc<Downloader>,
    cache: Option<PluginCache>,
    limits: ExtractLimits,
    /// The provider policy (`-policy`): hashes are recorded only of
    /// packages it would let this machine install.
    policy: Option<Arc<Policy>>,
    /// Downloads hashed at once. Each holds a few MiB (its queue, the
    /// bytes not yet hashed, the inflater's buffers) and takes its share of
    /// two cores; more at once hide no more round trips.
    downloads: Arc<Semaphore>,
    /// Archives fetched this run, by location: asked for again (by another
    /// working directory), they are not fetched again.
    fetched: Mutex<HashMap<String, HashedOnce>>,
}

impl PlatformHashes {
    pub fn new(
        downloader: Arc<Downloader>,
        cache: Option<PluginCache>,
        limits: ExtractLimits,
        policy: Option<Arc<Policy>>,
        parallelism: usize,
    ) -> Self {
        PlatformHashes {
            downloader,
            cache,
            limits,
            policy,
            downloads: Arc::new(Semaphore::new(parallelism.max(1))),
            fetched: Mutex::new(HashMap::new()),
        }
    }

    /// The hashes of `query`'s package, from the cheapest trusted source
    /// (see the module documentation); `source` is where the working
    /// directory's configuration gets the provider. A failure is the
    /// source's (it has no such package, its documents failed), the
    /// package's (it fails authentication or the extractor's checks), or
    /// the policy's refusal of how it was authenticated.
    pub async fn find(
        &self,
        source: &dyn Source,
        query: &HashQuery<'_>,
    ) -> Result<FoundHashes, StageError> {
        let found = self.cheapest(source, query).await?;
        if let Some(policy) = &self.policy {
            policy
                .admit(query.provider, query.version, &found.auth)
                .map_err(StageError::Refused)?;
        }
        tracing::info!(
            "{} {} for {}: {}",
            query.provider.for_display(),
            query.version,
            query.platform,
            found.describe()
        );
        Ok(found)
    }

    async fn cheapest(
        &self,
        source: &dyn Source,
        query: &HashQuery<'_>,
    ) -> Result<FoundHashes, StageError> {
        let cached = self.cached(query).await;
        if let Some(found) = cached.as_ref().and_then(vouched_release) {
            return Ok(found);
        }
        let meta = source
            .package_meta(query.provider, query.version, query.platform)
            .await
            .map_err(StageError::Source)?;
        let mut found = FoundHashes {
            hashes: Vec::new(),
            auth: AuthResult::Unauthenticated,
        };
        // An `h1:` the source's answer vouches for; else one the lock file
        // may vouch for.
        let mut vouched_h1: Option<(PackageHash, HashSource)> = None;
        let mut candidates: Vec<PackageHash> = query.installed.iter().cloned().collect();
        match &meta.authentication {
            PackageAuthentication::Signed(signed) => {
                vouched_h1 = signed
                    .packages
                    .as_ref()
                    .and_then(|packages| packages.platforms.get(query.platform))
                    .and_then(|package| package.hashes.iter().find(|h| h.scheme() == "h1"))
                    .map(|h1| (h1.clone(), HashSource::RegistryPackages));
                if vouched_h1.is_none()
                    && let Some(entry) = &cached
                    && entry.zh == Some(PackageHash::zh_of_digest(&signed.shasum))
                {
                    vouched_h1 = Some((entry.h1.clone(), HashSource::PluginCache));
                }
            }
            PackageAuthentication::Hashes { listed, trusted } => {
                let listed_h1s = listed.iter().filter(|h| h.scheme() == "h1");
                if trusted.is_empty() {
                    candidates.extend(listed_h1s.cloned());
                } else {
                    vouched_h1 = listed_h1s
                        .clone()
                        .next()
                        .map(|h1| (h1.clone(), HashSource::NetworkMirror));
                }
            }
            PackageAuthentication::ContentAddressed(zh) => {
                found.add(zh.clone(), HashSource::OciDigest);
            }
            PackageAuthentication::None => {}
        }
        if vouched_h1.is_none() {
            candidates.extend(cached.as_ref().map(|entry| entry.h1.clone()));
            vouched_h1 = candidates
                .into_iter()
                .find(|h1| query.locked.contains(h1))
                .map(|h1| (h1, HashSource::LockFile));
        }

        match vouched_h1 {
            Some((h1, h1_source)) => {
                found.add(h1, h1_source);
                self.vouched_without_package(&meta, &mut found).await?;
            }
            None => self.hash_package(&meta, &mut found).await?,
        }
        found.hashes.sort();
        Ok(found)
    }

    /// What the source vouches for beside an `h1:` it was not asked to
    /// prove with the package: the signed list's hashes (its signature
    /// checked), or a trusted mirror's.
    async fn vouched_without_package(
        &self,
        meta: &PackageMeta,
        found: &mut FoundHashes,
    ) -> Result<(), StageError> {
        match &meta.authentication {
            PackageAuthentication::Signed(signed) => {
                signed.documents.get().await.map_err(StageError::Source)?;
                let (auth, release) = authenticate_signed(meta, signed, None)
                    .await
                    .map_err(StageError::Package)?;
                for hash in release {
                    let source = vouched_source(&meta.authentication, &hash);
                    found.add(hash, source);
                }
                found.auth = auth;
            }
            PackageAuthentication::Hashes { trusted, .. } => {
                for hash in trusted {
                    found.add(hash.clone(), HashSource::NetworkMirror);
                }
            }
            PackageAuthentication::ContentAddressed(_) | PackageAuthentication::None => {}
        }
        Ok(())
    }

    /// The package's own `h1:`, with what its authentication vouches for.
    async fn hash_package(
        &self,
        meta: &PackageMeta,
        found: &mut FoundHashes,
    ) -> Result<(), StageError> {
        let hashed = match &meta.location {
            PackageLocation::LocalDir(dir) => {
                let dir = dir.clone();
                let h1 = blocking(move || PackageHash::h1_of_dir(&dir))
                    .await
                    .map_err(|err| StageError::Package(err.to_string()))?;
                found.add(h1, HashSource::Package);
                return Ok(());
            }
            PackageLocation::LocalArchive(path) => {
                let (path, limits) = (path.clone(), self.limits.clone());
                let type_name = meta.provider.type_name.clone();
                let hashed = blocking(move || {
                    Ok(HashedArchive {
                        h1: h1_of_saved(&path, &path, &type_name, &limits)?,
                        sha256: crate::verify::hash::sha256_file(&path)?,
                        size: std::fs::metadata(&path)?.len(),
                    })
                })
                .await
                .map_err(|err| StageError::Package(err.to_string()))?;
                Arc::new(hashed)
            }
            PackageLocation::Http(_) | PackageLocation::OciBlob(_) => {
                alongside_documents(&meta.authentication, self.fetched_once(meta)).await?
            }
        };
        let zh = PackageHash::zh_of_digest(&hashed.sha256);
        let (auth, vouched) = authenticate_archive(meta, &hashed.sha256, &zh, hashed.size)
            .await
            .map_err(StageError::Package)?;
        authenticate_files(meta, &zh, &hashed.h1).map_err(StageError::Package)?;
        found.add(hashed.h1.clone(), HashSource::Package);
        for hash in vouched {
            let source = vouched_source(&meta.authentication, &hash);
            found.add(hash, source);
        }
        found.auth = auth;
        Ok(())
    }

    /// The download and hashing of the archive `meta` points to, shared by
    /// every caller of the run that wants the same archive.
    fn fetched_once(&self, meta: &PackageMeta) -> HashedOnce {
        let key = format!("{} {}", meta.provider.type_name, meta.location);
        let mut fetched = self.fetched.lock().unwrap_or_else(|e| e.into_inner());
        fetched
            .entry(key)
            .or_insert_with(|| {
                let downloader = self.downloader.clone();
                let downloads = self.downloads.clone();
                let (location, limits) = (meta.location.clone(), self.limits.clone());
                let (type_name, filename) =
                    (meta.provider.type_name.clone(), meta.filename.clone());
                async move {
                    let _slot = downloads.acquire_owned().await.map_err(|e| e.to_string())?;
                    hash_download(&downloader, &location, &type_name, &filename, &limits)
                        .await
                        .map(Arc::new)
                }
                .boxed()
                .shared()
            })
            .clone()
    }

    /// The plugin cache's entry for the query's package, when it holds the
    /// provider and its files can be hashed (from its record while its
    /// stamps hold; otherwise only when a hash could vouch for it: without
    /// a record, only a locked `h1:` can).
    async fn cached(&self, query: &HashQuery<'_>) -> Option<EntryFacts> {
        let entry = self
            .cache
            .as_ref()?
            .lookup(query.provider, query.version, query.platform)?;
        if entry.meta.is_none() && !query.locked.iter().any(|h| h.scheme() == "h1") {
            return None;
        }
        let meta = entry.meta.clone();
        let hashed = entry_h1(entry, query.provider.type_name.clone()).await?;
        Some(EntryFacts::of(hashed.h1, meta.as_ref()))
    }
}

/// Where a hash that `authentication` vouches for came from, as `-json`
/// and the log name it.
fn vouched_source(authentication: &PackageAuthentication, hash: &PackageHash) -> HashSource {
    match authentication {
        PackageAuthentication::Signed(_) if hash.scheme() == "zh" => HashSource::SignedChecksums,
        PackageAuthentication::Signed(_) => HashSource::RegistryPackages,
        PackageAuthentication::Hashes { trusted, .. } if trusted.contains(hash) => {
            HashSource::NetworkMirror
        }
        PackageAuthentication::ContentAddressed(_) => HashSource::OciDigest,
        _ => HashSource::Package,
    }
}

/// The whole answer from a cache entry, when its record is of a release
/// whose signed checksums were checked when the entry was filled.
fn vouched_release(entry: &EntryFacts) -> Option<FoundHashes> {
    if !entry.auth.vouches_for_release() || entry.signed_hashes.is_empty() {
        return None;
    }
    let mut found = FoundHashes {
        hashes: vec![(entry.h1.clone(), HashSource::PluginCache)],
        auth: entry.auth.clone(),
    };
    for hash in &entry.signed_hashes {
        found.add(hash.clone(), HashSource::PluginCache);
    }
    found.hashes.sort();
    Some(found)
}

/// Downloads the archive at `location` and hashes its files as they
/// stream, storing nothing; an archive the streaming walker declines is
/// downloaded again to a temporary file, judged by the full extractor
/// without unpacking, and removed.
async fn hash_download(
    downloader: &Downloader,
    location: &PackageLocation,
    type_name: &str,
    filename: &str,
    limits: &ExtractLimits,
) -> Result<HashedArchive, String> {
    let streamed = location
        .download(
            downloader,
            Destination::Hashed {
                provider_type: type_name,
                limits,
            },
            &|_| {},
        )
        .await
        .map_err(|err| err.to_string())?;
    match streamed.unpacked {
        Some(Ok(files)) => Ok(HashedArchive {
            sha256: streamed.sha256,
            size: streamed.size,
            h1: h1_of(&files)?,
        }),
        declined => {
            if let Some(Err(reason)) = declined {
                tracing::debug!(
                    "{location}: hashing while downloading declined ({reason}); downloading it again to a temporary file"
                );
            }
            let temp = tempfile::Builder::new()
                .prefix("tfinstall-hash-")
                .tempdir()
                .map_err(|err| format!("could not create a temporary directory: {err}"))?;
            let name = Path::new(filename)
                .file_name()
                .filter(|name| !name.is_empty())
                .unwrap_or("package.zip".as_ref());
            let path = temp.path().join(name);
            let saved = location
                .download(downloader, Destination::File(&path), &|_| {})
                .await
                .map_err(|err| err.to_string())?;
            let (shown_as, limits, type_name) = (
                std::path::PathBuf::from(location.to_string()),
                limits.clone(),
                type_name.to_owned(),
            );
            let h1 = blocking(move || h1_of_saved(&path, &shown_as, &type_name, &limits))
                .await
                .map_err(|err| err.to_string())?;
            Ok(HashedArchive {
                sha256: saved.sha256,
                size: saved.size,
                h1,
            })
        }
    }
}

/// The `h1:` of a saved archive's files, by the full extractor's rules,
/// writing nothing; `shown_as` names the archive in messages.
fn h1_of_saved(
    path: &Path,
    shown_as: &Path,
    type_name: &str,
    limits: &ExtractLimits,
) -> std::io::Result<PackageHash> {
    let files = hash_package(path, type_name, limits)
        .map_err(|err| std::io::Error::other(err.shown_as(shown_as)))?;
    h1_of(&files).map_err(std::io::Error::other)
}

fn h1_of(files: &[ExtractedFile]) -> Result<PackageHash, String> {
    let entries: Vec<(String, [u8; 32])> =
        files.iter().map(|f| (f.name.clone(), f.sha256)).collect();
    PackageHash::h1_of_files(&entries).map_err(|err| err.to_string())
}
