//! What `serve` answers, apart from HTTP: the provider network mirror
//! protocol's documents and archives, from the store when it has them and
//! from upstream (once) when it does not.
//!
//! Nothing reaches a client that was not verified: an archive is served
//! only from a store entry that a fill put there after `init`'s checks
//! (signed `SHA256SUMS`, the archive's hash, size and unpacking limits), and
//! the `zh:` hashes a version document lists come from a checksum list whose
//! signature was checked here.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use crate::addr::{Platform, ProviderAddr};
use crate::diag::Diagnostic;
use crate::fetch::Downloader;
use crate::install::installer::{CacheUse, FillError, Installer};
use crate::install::layout::{InstallLayout, LayoutKind};
use crate::memo::{Freshness, Memo, MemoPolicy};
use crate::package::extract::ExtractLimits;
use crate::policy::Policy;
use crate::serve::access::AccessTokens;
use crate::serve::access_log;
use crate::serve::metrics::{OciOperation, ServeMetrics};
use crate::source::oci::publish::{Staged, push};
use crate::source::oci::template::RepositoryTemplate;
use crate::source::oci::{OciMirror, Registries};
use crate::source::{PackageAuthentication, Source, SourceError};
use crate::verify::AuthResult;
use crate::verify::hash::PackageHash;
use crate::verify::signature::verify_sums_signature;
use crate::verify::signature_may_be_skipped;
use crate::verify::sums::checksum_for;
use crate::version::Version;

/// Where the server keeps what it learnt from upstream, inside the store:
/// version lists and each version's platforms and signed hashes, so that a
/// restarted server whose upstream is down still answers.
const STATE_DIR: &str = ".tfinstall-serve";

/// How an answer was found, for the request log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// From the store or memory, no upstream request.
    Hit,
    /// Asked of upstream now.
    Miss,
    /// The last answer upstream gave: it failed since, or a newer answer
    /// is being asked for.
    Stale,
    /// The archive was fetched into the store by the fill this request
    /// started.
    Fill,
    /// The archive was fetched into the store by a fill another request
    /// had started, which this one waited on.
    Joined,
    /// Upstream could not give the archive, and the store held the package
    /// unpacked only: its files were checked and packed for this answer.
    Repacked,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Hit => "hit",
            Outcome::Miss => "miss",
            Outcome::Stale => "stale",
            Outcome::Fill => "fill",
            Outcome::Joined => "joined",
            Outcome::Repacked => "repacked",
        }
    }
}

/// An answer for the HTTP layer.
pub enum Reply {
    Json(String, Outcome),
    /// An archive, opened: from the store, or packed for this answer.
    Archive(std::fs::File, Outcome),
    /// A status and a message saying why, for the client and the log.
    Failed(u16, String),
    /// The provider policy's refusal, as JSON: a 403.
    Denied(serde_json::Value),
}

/// What upstream said about one version: its platforms and, per platform,
/// the hashes that vouch for its archive.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct VersionFacts {
    platforms: Vec<String>,
    hashes: BTreeMap<String, Vec<String>>,
}

type Fill = Shared<BoxFuture<'static, Result<PathBuf, FillError>>>;

/// `-store=oci://HOST/TEMPLATE`: an OCI registry that several servers share,
/// in the layout `providers mirror oci://` writes. A server looks there
/// before going upstream and publishes there what it fetched from upstream,
/// so a package crosses from upstream once for all of them. Each server
/// still keeps a local store to stream from.
pub struct SharedStore {
    pub template: RepositoryTemplate,
    pub registries: Arc<Registries>,
}

/// What the command line decides about the mirror.
pub struct MirrorOptions {
    /// `-platform`: the only platforms served; `None` for every one.
    pub platforms: Option<Vec<Platform>>,
    /// `-max-fills`: fetches from upstream at once.
    pub max_fills: usize,
    /// `-max-package-size`: the largest a package may unpack to.
    pub max_package_size: u64,
    /// `-auth-token-file`: archive URLs carry grants.
    pub grants: Option<AccessTokens>,
    /// `-store=oci://…`.
    pub shared: Option<SharedStore>,
    /// `-policy`: denied versions are neither listed nor fetched, and a
    /// package it refuses is not served.
    pub policy: Option<Arc<Policy>>,
    /// `-metadata-max-age` and `-failure-max-age`: how long a version list,
    /// and a failure to get one, is answered before upstream is asked
    /// again.
    pub freshness: Freshness,
    /// Where fills and the shared store's reads and writes are counted.
    pub metrics: Arc<ServeMetrics>,
}

pub struct Mirror {
    source: Arc<dyn Source>,
    store: CacheUse,
    downloader: Arc<Downloader>,
    /// `-platform`: the only platforms served; `None` for every one.
    platforms: Option<Vec<Platform>>,
    fills: Mutex<HashMap<(ProviderAddr, Version, Platform), Fill>>,
    fill_slots: Arc<Semaphore>,
    limits: ExtractLimits,
    /// With `-auth-token-file`: archive URLs carry a grant.
    grants: Option<AccessTokens>,
    shared: Option<SharedStore>,
    policy: Option<Arc<Policy>>,
    /// Version lists as upstream gave them, aging as `-metadata-max-age`
    /// says; failures for `-failure-max-age`. Every memo beneath, on the way
    /// upstream, ages by the same policy ([`crate::memo`]).
    lists: Memo<ProviderAddr, Vec<Version>, SourceError>,
    /// The last list upstream gave for each provider, however old: answered
    /// while a newer one is being asked for, and while upstream fails.
    last_lists: Mutex<HashMap<ProviderAddr, Vec<Version>>>,
    /// Archives hashed and found to be their records', by file identity.
    verified: Mutex<HashMap<PathBuf, FileIdentity>>,
    log: Arc<dyn Fn(String) + Send + Sync>,
    metrics: Arc<ServeMetrics>,
}

/// Device, inode, size, and modification and change times: any write or
/// replacement moves one of them.
type FileIdentity = (u64, u64, u64, i64, i64, i64, i64);

#[cfg(unix)]
fn file_identity(path: &Path) -> Option<FileIdentity> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    ))
}

#[cfg(not(unix))]
fn file_identity(_path: &Path) -> Option<FileIdentity> {
    None
}

impl Mirror {
    pub fn new(
        source: Arc<dyn Source>,
        store: CacheUse,
        downloader: Arc<Downloader>,
        options: MirrorOptions,
        log: Arc<dyn Fn(String) + Send + Sync>,
    ) -> Self {
        Mirror {
            source,
            store,
            downloader,
            platforms: options.platforms,
            fills: Mutex::default(),
            fill_slots: Arc::new(Semaphore::new(options.max_fills.max(1))),
            limits: ExtractLimits {
                max_total_bytes: options.max_package_size,
                ..ExtractLimits::default()
            },
            grants: options.grants,
            shared: options.shared,
            policy: options.policy,
            lists: Memo::new(MemoPolicy::Aging(options.freshness)),
            last_lists: Mutex::default(),
            verified: Mutex::default(),
            log,
            metrics: options.metrics,
        }
    }

    /// How many fills are running, for a shutdown that lets them finish.
    pub fn fills_in_flight(&self) -> usize {
        self.fills.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn state_path(&self, provider: &ProviderAddr, name: &str) -> PathBuf {
        self.store
            .cache
            .root()
            .join(STATE_DIR)
            .join(provider.hostname.to_string())
            .join(&provider.namespace)
            .join(&provider.type_name)
            .join(name)
    }

    /// `index.json`: the versions upstream has that the policy allows, so
    /// that an unmodified client never picks a denied one.
    pub async fn index(self: &Arc<Self>, provider: &ProviderAddr) -> Reply {
        match self.versions(provider).await {
            Ok((versions, outcome)) => {
                let listed: serde_json::Map<String, serde_json::Value> = versions
                    .iter()
                    .filter(|version| {
                        self.policy
                            .as_ref()
                            .is_none_or(|policy| policy.allows(provider, version))
                    })
                    .map(|v| (v.to_string(), serde_json::json!({})))
                    .collect();
                Reply::Json(
                    serde_json::json!({ "versions": listed }).to_string(),
                    outcome,
                )
            }
            Err(reply) => reply,
        }
    }

    /// The provider's versions: the list kept while it is younger than
    /// `-metadata-max-age`; once it is older, the last list while one
    /// request upstream (shared by every asker) fetches the next (stale
    /// while revalidating); the last list, or the one kept on disk, or the
    /// store's versions while upstream fails (stale on error). A failure or
    /// a 404 is answered for `-failure-max-age`, then upstream is asked
    /// again.
    async fn versions(
        self: &Arc<Self>,
        provider: &ProviderAddr,
    ) -> Result<(Vec<Version>, Outcome), Reply> {
        let answer = match self.lists.kept(provider) {
            Some(Ok(versions)) => return Ok((versions, Outcome::Hit)),
            Some(failed) => failed,
            None => {
                let refresh = self.refresh_list(provider);
                if let Some(last) = self.last_list(provider) {
                    return Ok((last, Outcome::Stale));
                }
                refresh.await.unwrap_or_else(|err| {
                    Err(SourceError::Other(format!(
                        "asking upstream for the version list stopped: {err}"
                    )))
                })
            }
        };
        let saved = self.state_path(provider, "index.json");
        match answer {
            Ok(versions) => Ok((versions, Outcome::Miss)),
            Err(err) if err.is_not_exist() => Err(Reply::Failed(
                404,
                format!(
                    "{} is not available upstream: {err}",
                    provider.for_display()
                ),
            )),
            Err(err) => {
                let last = self.last_list(provider).or_else(|| {
                    let names: Vec<String> =
                        serde_json::from_slice(&std::fs::read(&saved).ok()?).ok()?;
                    Some(
                        names
                            .iter()
                            .filter_map(|n| Version::parse(n).ok())
                            .collect(),
                    )
                });
                if let Some(versions) = last {
                    (self.log)(format!(
                        "upstream failed for {}; answering with the last version list it gave: {err}",
                        provider.for_display()
                    ));
                    return Ok((versions, Outcome::Stale));
                }
                let mut held: Vec<Version> = self
                    .held(provider)
                    .into_iter()
                    .map(|(version, _)| version)
                    .collect();
                held.sort();
                held.dedup();
                if held.is_empty() {
                    return Err(Reply::Failed(
                        502,
                        format!(
                            "upstream failed for {} and no earlier version list is kept: {err}",
                            provider.for_display()
                        ),
                    ));
                }
                (self.log)(format!(
                    "upstream failed for {}; answering with the versions the store holds: {err}",
                    provider.for_display()
                ));
                Ok((held, Outcome::Stale))
            }
        }
    }

    fn last_list(&self, provider: &ProviderAddr) -> Option<Vec<Version>> {
        self.last_lists
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(provider)
            .cloned()
    }

    /// Asks upstream for the provider's version list on a task of its own,
    /// unless a request for it is in flight already (then its answer is
    /// shared): no client waits for it while an older list can be answered,
    /// and a client that goes away cancels nothing. A list upstream gives
    /// is kept on disk for a restarted server whose upstream is down.
    fn refresh_list(
        self: &Arc<Self>,
        provider: &ProviderAddr,
    ) -> tokio::task::JoinHandle<Result<Vec<Version>, SourceError>> {
        let mirror = Arc::clone(self);
        let provider = provider.clone();
        // The request that starts the refresh names its upstream URL in
        // the access log, as a fill's does.
        tokio::spawn(access_log::for_this_request(async move {
            let fetch = || async {
                let stale = mirror.last_list(&provider).is_some();
                if stale {
                    (mirror.log)(format!(
                        "the version list of {} is older than -metadata-max-age; asking upstream again, answering with the last one meanwhile",
                        provider.for_display()
                    ));
                }
                let versions = match mirror.source.available_versions(&provider).await {
                    Ok(found) => found.versions,
                    Err(err) => {
                        if stale {
                            (mirror.log)(format!(
                                "upstream failed for {}; answering with the last version list it gave: {err}",
                                provider.for_display()
                            ));
                        }
                        return Err(err);
                    }
                };
                let names: Vec<String> = versions.iter().map(Version::to_string).collect();
                if let Ok(json) = serde_json::to_vec(&names) {
                    let saved = mirror.state_path(&provider, "index.json");
                    let _ = crate::fsutil::write_atomic(&saved, &json, 0o644);
                }
                mirror
                    .last_lists
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(provider.clone(), versions.clone());
                Ok(versions)
            };
            mirror.lists.get(provider.clone(), fetch).await
        }))
    }

    /// `VERSION.json`: an archive for every platform served, each with the
    /// signed `zh:` upstream vouches for and, once the package is in the
    /// store, its `h1:`.
    pub async fn version(self: &Arc<Self>, provider: &ProviderAddr, version: &Version) -> Reply {
        if let Some(denied) = self.denied(provider, version) {
            return denied;
        }
        let (versions, mut outcome) = match self.versions(provider).await {
            Ok(found) => found,
            Err(reply) => return reply,
        };
        if !versions.contains(version) {
            return Reply::Failed(
                404,
                format!(
                    "{} has no version {version} upstream",
                    provider.for_display()
                ),
            );
        }
        let facts = match self.version_facts(provider, version).await {
            Ok((facts, fetched)) => {
                if fetched && outcome == Outcome::Hit {
                    outcome = Outcome::Miss;
                }
                facts
            }
            Err(message) => return Reply::Failed(502, message),
        };
        self.fill_served_platforms(provider, version, &facts).await;
        let mut archives = serde_json::Map::new();
        for name in &facts.platforms {
            let Ok(platform) = Platform::parse(name) else {
                continue;
            };
            if !self.serves(&platform) {
                continue;
            }
            let mut hashes: Vec<String> = Vec::new();
            // The `h1:` of the package in the store, whether its archive is
            // kept or it would be packed anew: both match it.
            if let Some(entry) = self.store.cache.lookup(provider, version, &platform)
                && let Some(meta) = &entry.meta
            {
                hashes.push(meta.h1.clone());
            }
            for hash in facts.hashes.get(name).into_iter().flatten() {
                if !hashes.contains(hash) {
                    hashes.push(hash.clone());
                }
            }
            let file = archive_name(provider, version, &platform);
            let url = match &self.grants {
                Some(grants) => {
                    let path = format!(
                        "/{}/{}/{}/{file}",
                        provider.hostname, provider.namespace, provider.type_name
                    );
                    format!("{file}?grant={}", grants.grant(&path))
                }
                None => file,
            };
            archives.insert(
                name.clone(),
                serde_json::json!({ "url": url, "hashes": hashes }),
            );
        }
        Reply::Json(
            serde_json::json!({ "archives": archives }).to_string(),
            outcome,
        )
    }

    /// With `-platform`, the version document waits until the packages of
    /// the platforms served are in the store, so it lists their `h1:`:
    /// Terraform 0.13 accepts nothing else from a mirror. Without it, only
    /// packages that have been through the server have one.
    async fn fill_served_platforms(
        self: &Arc<Self>,
        provider: &ProviderAddr,
        version: &Version,
        facts: &VersionFacts,
    ) {
        let Some(served) = &self.platforms else {
            return;
        };
        let missing = served.iter().filter(|platform| {
            facts.platforms.contains(&platform.to_string())
                && self.stored_archive(provider, version, platform).is_none()
        });
        let fills: Vec<Fill> = missing
            .map(|platform| self.fill(provider, version, platform))
            .collect();
        futures_util::future::join_all(fills).await;
    }

    /// The versions and platforms of `provider` the store holds with a
    /// record of how they were verified.
    fn held(&self, provider: &ProviderAddr) -> Vec<(Version, Platform)> {
        self.store
            .cache
            .entries()
            .into_iter()
            .filter(|(held, version, platform, _)| {
                held == provider
                    && self
                        .store
                        .cache
                        .lookup(held, version, platform)
                        .is_some_and(|entry| entry.meta.is_some())
            })
            .map(|(_, version, platform, _)| (version, platform))
            .collect()
    }

    fn serves(&self, platform: &Platform) -> bool {
        self.platforms
            .as_ref()
            .is_none_or(|served| served.contains(platform))
    }

    /// The version's platforms and hashes: kept from an earlier answer (a
    /// release never changes), else asked of upstream and checked. Also
    /// says whether upstream was asked.
    async fn version_facts(
        &self,
        provider: &ProviderAddr,
        version: &Version,
    ) -> Result<(VersionFacts, bool), String> {
        let saved = self.state_path(provider, &format!("{version}.json"));
        if let Some(facts) = std::fs::read(&saved)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<VersionFacts>(&bytes).ok())
        {
            return Ok((facts, false));
        }
        // Without a list of the version's platforms, this machine's is
        // served; that guess is not kept, so a list that failed to arrive
        // (upstream down a moment) does not leave one platform listed for
        // good.
        let (platforms, known): (Vec<Platform>, bool) = match &self.platforms {
            Some(served) => (served.clone(), true),
            None => match self
                .source
                .platforms(provider, version)
                .await
                .filter(|listed| !listed.is_empty())
            {
                Some(listed) => (listed, true),
                None => (vec![Platform::current()], false),
            },
        };
        let hashes = match self.upstream_hashes(provider, version, &platforms).await {
            Ok(hashes) => hashes,
            Err(message) => {
                // What the store holds of the version, vouched for by the
                // `h1:` each entry's provenance records (listed by
                // `version`); nothing is kept, so upstream is asked again.
                let held: Vec<String> = self
                    .held(provider)
                    .into_iter()
                    .filter(|(held, _)| held == version)
                    .map(|(_, platform)| platform.to_string())
                    .collect();
                if held.is_empty() {
                    return Err(message);
                }
                (self.log)(format!(
                    "{message}; answering with the platforms the store holds"
                ));
                let facts = VersionFacts {
                    platforms: held,
                    hashes: BTreeMap::new(),
                };
                return Ok((facts, false));
            }
        };
        let facts = VersionFacts {
            platforms: platforms.iter().map(Platform::to_string).collect(),
            hashes,
        };
        if known && let Ok(json) = serde_json::to_vec_pretty(&facts) {
            let _ = crate::fsutil::write_atomic(&saved, &json, 0o644);
        }
        Ok((facts, true))
    }

    /// Per platform, the hashes upstream vouches for: a registry's signed
    /// checksum list (its signature checked here, as `init` checks it)
    /// names every platform's `zh:` at once; a mirror's per-platform
    /// documents list theirs.
    async fn upstream_hashes(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        platforms: &[Platform],
    ) -> Result<BTreeMap<String, Vec<String>>, String> {
        let mut hashes = BTreeMap::new();
        let Some(first) = platforms.first() else {
            return Ok(hashes);
        };
        let failed = |err: String| {
            format!(
                "upstream failed for {} v{version}: {err}",
                provider.for_display()
            )
        };
        let meta = self
            .source
            .package_meta(provider, version, first)
            .await
            .map_err(|err| failed(err.to_string()))?;
        if let PackageAuthentication::Signed(signed) = &meta.authentication {
            let documents = signed
                .documents
                .get()
                .await
                .map_err(|err| failed(err.to_string()))?;
            if !(signed.keys.is_empty() && signature_may_be_skipped(provider)) {
                verify_sums_signature(&documents.sha256sums, &documents.signature, &signed.keys)
                    .map_err(|err| failed(err.to_string()))?;
            }
            for platform in platforms {
                let name = archive_name(provider, version, platform);
                if let Ok(digest) = checksum_for(&documents.sha256sums, &name) {
                    hashes.insert(
                        platform.to_string(),
                        vec![PackageHash::zh_of_digest(&digest).to_string()],
                    );
                }
            }
            return Ok(hashes);
        }
        for platform in platforms {
            let meta = if platform == first {
                meta.clone()
            } else {
                match self.source.package_meta(provider, version, platform).await {
                    Ok(meta) => meta,
                    Err(_) => continue,
                }
            };
            let listed = match meta.authentication {
                PackageAuthentication::Hashes { listed, .. } => listed,
                PackageAuthentication::ContentAddressed(zh) => vec![zh],
                PackageAuthentication::None | PackageAuthentication::Signed(_) => Vec::new(),
            };
            hashes.insert(
                platform.to_string(),
                listed.iter().map(ToString::to_string).collect(),
            );
        }
        Ok(hashes)
    }

    /// The archive: streamed from the store, or fetched into it first
    /// (once, however many clients ask at the same moment).
    pub async fn archive(
        self: &Arc<Self>,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
    ) -> Reply {
        if !self.serves(platform) {
            return Reply::Failed(404, format!("{platform} is not served here"));
        }
        // Before the store or upstream is asked anything.
        if let Some(denied) = self.denied(provider, version) {
            return denied;
        }
        let opened = |archive: PathBuf, outcome| match std::fs::File::open(&archive) {
            Ok(file) => Reply::Archive(file, outcome),
            Err(err) => Reply::Failed(500, format!("reading {}: {err}", archive.display())),
        };
        if let Some(archive) = self.stored_archive(provider, version, platform) {
            self.record_use(provider, version, platform);
            return opened(archive, Outcome::Hit);
        }
        let (fill, joined) = self.fill_or_join(provider, version, platform);
        match fill.await {
            Ok(entry) => match self.store.cache.archive(&crate::cache::CacheEntry {
                dir: entry,
                meta: None,
            }) {
                Some(archive) => {
                    self.record_use(provider, version, platform);
                    opened(
                        archive,
                        if joined {
                            Outcome::Joined
                        } else {
                            Outcome::Fill
                        },
                    )
                }
                None => Reply::Failed(
                    502,
                    format!(
                        "{} v{version} for {platform} was filled without its archive",
                        provider.for_display()
                    ),
                ),
            },
            Err(FillError::Refused(refusal)) => {
                (self.log)(format!(
                    "refused {} v{version} for {platform}: {}",
                    provider.for_display(),
                    refusal.decision
                ));
                Reply::Denied(refusal.json())
            }
            Err(FillError::Failed(failure)) => {
                let message = failure.detail;
                match self.repacked(provider, version, platform).await {
                    Some(file) => {
                        (self.log)(format!(
                            "upstream could not give {} v{version} for {platform} ({message}); serving the store's unpacked copy, packed",
                            provider.for_display()
                        ));
                        self.record_use(provider, version, platform);
                        Reply::Archive(file, Outcome::Repacked)
                    }
                    None => {
                        (self.log)(format!(
                            "refused {} v{version} for {platform}: {message}",
                            provider.for_display()
                        ));
                        Reply::Failed(502, message)
                    }
                }
            }
        }
    }

    /// A store entry that holds the package unpacked but not its archive
    /// (a plugin cache `init` filled, served as it is), packed into a zip
    /// once its files are checked against the `h1:` its provenance records:
    /// the version document lists that `h1:`, which any zip of these files
    /// matches. The zip is written to an unnamed temporary file, gone when
    /// the answer is.
    async fn repacked(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
    ) -> Option<std::fs::File> {
        let entry = self.store.cache.lookup(provider, version, platform)?;
        let meta = entry.meta.as_ref()?;
        if !self.admits_stored(provider, version, meta) {
            return None;
        }
        let recorded = meta.h1()?;
        let work = self.store.cache.root().join(".tmp");
        crate::fsutil::blocking(move || {
            if PackageHash::h1_of_dir(&entry.dir)? != recorded {
                return Err(std::io::Error::other("the files changed"));
            }
            std::fs::create_dir_all(&work)?;
            let packed = tempfile::NamedTempFile::new_in(&work)?;
            pack(&entry.dir, packed.as_file())?;
            packed.reopen()
        })
        .await
        .ok()
    }

    /// Records that a client was handed the entry's archive, for
    /// `cache prune -unused-for` on the store.
    fn record_use(&self, provider: &ProviderAddr, version: &Version, platform: &Platform) {
        let dir = self.store.cache.entry_dir(provider, version, platform);
        self.store
            .fills
            .record_use(&self.store.cache, provider, version, platform, &dir);
    }

    /// The archive of a complete, vouched-for store entry.
    fn stored_archive(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
    ) -> Option<PathBuf> {
        let entry = self.store.cache.lookup(provider, version, platform)?;
        let meta = entry.meta.as_ref()?;
        if !self.admits_stored(provider, version, meta) {
            return None;
        }
        let archive = self.store.cache.archive(&entry)?;
        // The archive must be the one its record names. Hashing it on every
        // request would cost a fleet's worth of SHA-256 over the same bytes;
        // once hashed, its identity and change times vouch for it until they
        // move (a write, a replacement).
        let identity = file_identity(&archive)?;
        let mut verified = self.verified.lock().unwrap_or_else(|e| e.into_inner());
        if verified.get(&archive) == Some(&identity) {
            return Some(archive);
        }
        let zh = PackageHash::zh_of_file(&archive).ok()?;
        if meta.zh.as_deref() != Some(zh.as_str()) {
            return None;
        }
        verified.insert(archive.clone(), identity);
        Some(archive)
    }

    /// The policy's refusal of this version, as the answer to give: no
    /// store entry and no upstream request for it.
    fn denied(&self, provider: &ProviderAddr, version: &Version) -> Option<Reply> {
        let decision = self.policy.as_ref()?.decide(provider, version, None);
        (!decision.allowed()).then(|| Reply::Denied(decision.json(provider, Some(version), None)))
    }

    /// Whether the policy admits a store entry as its record says it was
    /// authenticated; one it does not is not served (a fill decides anew).
    fn admits_stored(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        meta: &crate::cache::EntryMeta,
    ) -> bool {
        self.policy.as_ref().is_none_or(|policy| {
            policy
                .decide(provider, version, Some(&AuthResult::from(&meta.auth)))
                .allowed()
        })
    }

    /// The one fill of this package in flight, started if there is none.
    /// It runs on its own task, so a client that goes away cancels nothing.
    fn fill(
        self: &Arc<Self>,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
    ) -> Fill {
        self.fill_or_join(provider, version, platform).0
    }

    /// [`Mirror::fill`], and whether the fill was in flight already.
    fn fill_or_join(
        self: &Arc<Self>,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
    ) -> (Fill, bool) {
        let key = (provider.clone(), version.clone(), platform.clone());
        let mut fills = self.fills.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(fill) = fills.get(&key) {
            return (fill.clone(), true);
        }
        let mirror = Arc::clone(self);
        let (p, v, plat) = key.clone();
        let task = tokio::spawn(access_log::for_this_request(async move {
            let _slot = mirror.fill_slots.acquire().await;
            let started = Instant::now();
            let result = mirror.fill_now(&p, &v, &plat).await;
            mirror.metrics.fill_finished(started.elapsed());
            mirror
                .fills
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&(p, v, plat));
            result
        }));
        let fill: Fill = async move {
            task.await.unwrap_or_else(|err| {
                Err(FillError::Failed(Diagnostic::error(
                    "Failed to fill the store",
                    format!("the fill stopped: {err}"),
                )))
            })
        }
        .boxed()
        .shared();
        fills.insert(key, fill.clone());
        (fill, false)
    }

    /// Fills the store's entry: from the shared store when it has the
    /// package upstream signed, else from upstream (then publishing it to
    /// the shared store).
    async fn fill_now(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
    ) -> Result<PathBuf, FillError> {
        if let Some(shared) = &self.shared {
            match self
                .fill_from_shared(shared, provider, version, platform)
                .await
            {
                Ok(Some(dir)) => {
                    self.metrics.oci(OciOperation::Read);
                    return Ok(dir);
                }
                Ok(None) => self.metrics.oci(OciOperation::ReadMissed),
                Err(message) => {
                    self.metrics.oci(OciOperation::ReadMissed);
                    (self.log)(format!(
                        "not taking {} v{version} for {platform} from the shared store: {message}",
                        provider.for_display()
                    ));
                }
            }
        }
        let (dir, filled) = self
            .installer(Arc::clone(&self.source), platform)
            .fill_entry(provider, version, None)
            .await?;
        if let Some(shared) = &self.shared
            && filled
        {
            self.publish(shared, provider, version, platform, &dir)
                .await;
        }
        Ok(dir)
    }

    /// The package from the shared store, accepted only when its archive
    /// is the one upstream's signed checksums name for this platform.
    async fn fill_from_shared(
        &self,
        shared: &SharedStore,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
    ) -> Result<Option<PathBuf>, String> {
        let source = Arc::new(OciMirror::new(
            shared.template.clone(),
            Arc::clone(&shared.registries),
        ));
        let Ok(meta) = source.package_meta(provider, version, platform).await else {
            return Ok(None);
        };
        let PackageAuthentication::ContentAddressed(zh) = &meta.authentication else {
            return Err("its package is not addressed by its hash".to_owned());
        };
        let (facts, _) = self.version_facts(provider, version).await?;
        let signed = facts
            .hashes
            .get(&platform.to_string())
            .is_some_and(|hashes| hashes.contains(&zh.to_string()));
        if !signed {
            return Err(format!(
                "its archive {zh} is not one upstream's signed checksums name"
            ));
        }
        let (dir, _) = self
            .installer(source, platform)
            .fill_entry(provider, version, Some(meta))
            .await
            .map_err(|err| Diagnostic::from(err).detail)?;
        Ok(Some(dir))
    }

    /// Publishes a package fetched from upstream to the shared store; a
    /// failure is logged, and the package is served all the same.
    async fn publish(
        &self,
        shared: &SharedStore,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
        dir: &Path,
    ) {
        let entry = crate::cache::CacheEntry {
            dir: dir.to_path_buf(),
            meta: None,
        };
        let Some(archive) = self.store.cache.archive(&entry) else {
            return;
        };
        let staged = vec![Staged {
            provider: provider.clone(),
            version: version.clone(),
            platform: platform.clone(),
            archive,
        }];
        let pushed = push(&shared.template, &shared.registries, staged, &|_| {}).await;
        self.metrics.oci(if pushed.is_ok() {
            OciOperation::Written
        } else {
            OciOperation::WriteFailed
        });
        if let Err(diags) = pushed {
            (self.log)(format!(
                "could not publish {} v{version} for {platform} to the shared store: {diags}",
                provider.for_display()
            ));
        }
    }

    fn installer(&self, source: Arc<dyn Source>, platform: &Platform) -> Installer {
        let root: &Path = self.store.cache.root();
        Installer {
            limits: self.limits.clone(),
            parallelism: 1,
            cache: Some(self.store.clone()),
            policy: self.policy.clone(),
            // Nothing is installed: a layout in a directory that does not
            // exist keeps every "already installed" check false.
            ..Installer::new(
                source,
                InstallLayout::new(root.join(".none"), LayoutKind::Providers),
                platform.clone(),
                Arc::clone(&self.downloader),
            )
        }
    }
}

/// The archive's file name, which is also its URL relative to the version
/// document: the name registries give it.
fn archive_name(provider: &ProviderAddr, version: &Version, platform: &Platform) -> String {
    format!(
        "terraform-provider-{}_{version}_{platform}.zip",
        provider.type_name
    )
}

/// A zip of the package in `dir`, as a registry would ship it: each file at
/// its path, stored (the package is about to be unpacked again, usually on
/// the same network), with its mode and a fixed time.
fn pack(dir: &Path, out: &std::fs::File) -> std::io::Result<()> {
    use std::io::Write as _;
    use zip::write::SimpleFileOptions;
    fn add(
        zip: &mut zip::ZipWriter<&std::fs::File>,
        dir: &Path,
        prefix: &str,
    ) -> std::io::Result<()> {
        let mut names: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
        names.sort_by_key(|e| e.file_name());
        for entry in names {
            let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
            let meta = std::fs::metadata(entry.path())?;
            if meta.is_dir() {
                add(zip, &entry.path(), &format!("{name}/"))?;
                continue;
            }
            #[cfg(unix)]
            let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) | 0o200;
            #[cfg(not(unix))]
            let mode = 0o644;
            let options = SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Stored)
                .unix_permissions(mode & 0o777)
                .large_file(meta.len() >= u64::from(u32::MAX));
            zip.start_file(name, options)
                .map_err(std::io::Error::other)?;
            let mut file = std::fs::File::open(entry.path())?;
            std::io::copy(&mut file, zip)?;
        }
        Ok(())
    }
    let mut zip = zip::ZipWriter::new(out);
    add(&mut zip, dir, "")?;
    zip.finish().map_err(std::io::Error::other)?.flush()
}
