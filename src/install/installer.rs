//! The installer: decides one version per provider, fetches and verifies the
//! packages concurrently into a staging area, and computes the new lock
//! entries. It reports progress as events and never prints; the command
//! decides how to show them.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::stream;
use futures_util::{StreamExt, TryFutureExt};

use crate::addr::{Platform, ProviderAddr};
use crate::cache::{EntryMeta, PluginCache};
use crate::diag::{Diagnostic, Diagnostics};
use crate::engine::Engine;
use crate::fetch::{DownloadProgress, Downloader};
use crate::http::TERRAFORM_COMPAT_VERSION;
use crate::install::extract::{ExtractLimits, extract_package, find_executable};
use crate::install::hash_memo::HashMemo;
use crate::install::layout::InstallLayout;
use crate::install::link::{LinkMode, link_cached_package, link_package};
use crate::install::staging::Staging;
use crate::lockfile::{LockedProvider, Locks};
use crate::source::{
    IncompatibleProtocol, PackageAuthentication, PackageLocation, PackageMeta, SignedChecksums,
    SignedDocuments, Source, SourceError,
};
use crate::verify::hash::PackageHash;
use crate::verify::signature::verify_sums_signature;
use crate::verify::sums::{acceptable_hashes, checksum_for};
use crate::verify::{AuthError, AuthResult, expired_keys_refused, signature_may_be_skipped};
use crate::version::{Version, VersionConstraints};

const CHECKSUM_DOCS: &str = "https://developer.hashicorp.com/terraform/language/files/dependency-lock#checksum-verification";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstallMode {
    /// The lock file decides the version when it has an entry.
    Normal,
    /// `-upgrade`: the newest acceptable version, lock entries notwithstanding.
    Upgrade,
    /// `providers lock` (Terraform's mode F): versions as in `Normal`, but a
    /// downloaded package need not match the hashes already locked, since
    /// the point is to learn the hashes the source vouches for now.
    Force,
}

impl InstallMode {
    fn honours_locked_version(self) -> bool {
        self != InstallMode::Upgrade
    }
}

#[derive(Clone, Debug)]
pub enum InstallEvent {
    BuiltIn {
        provider: ProviderAddr,
    },
    ReusingLocked {
        provider: ProviderAddr,
    },
    FindingMatching {
        provider: ProviderAddr,
        constraints: String,
    },
    FindingLatest {
        provider: ProviderAddr,
    },
    UsingInstalled {
        provider: ProviderAddr,
        version: Version,
    },
    Installing {
        provider: ProviderAddr,
        version: Version,
    },
    Installed {
        provider: ProviderAddr,
        version: Version,
        auth: AuthResult,
    },
    Warning(Diagnostic),
    /// The package came from the plugin cache; nothing was downloaded.
    CacheHit {
        provider: ProviderAddr,
        version: Version,
    },
    /// Another process holds the cache entry's lock, installing the same
    /// package; this one waits and then uses its result.
    WaitingForCache {
        provider: ProviderAddr,
        version: Version,
    },
    /// The version to install and where its package is; `locked` when the
    /// lock file already records this version.
    Selected {
        provider: ProviderAddr,
        version: Version,
        locked: bool,
        package: String,
    },
    /// The package passed its source's authentication, before unpacking.
    Verified {
        provider: ProviderAddr,
        version: Version,
        auth: AuthResult,
    },
    /// How far a package has got; live, see [`InstallEvent::is_live`].
    Progress {
        provider: ProviderAddr,
        version: Version,
        stage: ProgressStage,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressStage {
    Downloading(DownloadProgress),
    Unpacking,
    /// The provider's work ended, successfully or not.
    Done,
}

impl InstallEvent {
    /// Progress events pass through as they happen instead of waiting for
    /// their turn in the stable per-provider order: a progress display
    /// is only useful while the work is going on.
    pub fn is_live(&self) -> bool {
        matches!(self, InstallEvent::Progress { .. })
    }
}

/// Download progress is reported at most this often per package, plus a
/// final event once the download is complete.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

pub type EventSink = Arc<dyn Fn(InstallEvent) + Send + Sync>;

pub struct Installer {
    pub source: Arc<dyn Source>,
    pub layout: InstallLayout,
    pub platform: Platform,
    pub limits: ExtractLimits,
    pub parallelism: usize,
    pub downloader: Arc<Downloader>,
    /// Providers the CLI configuration's `dev_overrides` replace: not
    /// installed, and their lock entries left alone (Terraform 1.16).
    pub dev_overrides: BTreeSet<ProviderAddr>,
    /// The global plugin cache, when one is configured.
    pub cache: Option<CacheUse>,
    /// How packages from the cache or an unpacked mirror are placed.
    pub link_mode: LinkMode,
    pub events: EventSink,
    /// `init -offline`: the source is local only, and a version it lacks is
    /// reported with the versions it has.
    pub offline: bool,
}

pub struct CacheUse {
    pub cache: PluginCache,
    /// `plugin_cache_may_break_dependency_lock_file`: use entries that the
    /// lock file cannot vouch for (Terraform 1.4's escape hatch).
    pub may_break_lock_file: bool,
}

/// A cache entry this run may use, with what vouches for it.
#[derive(Clone, Debug)]
struct CachedPackage {
    dir: PathBuf,
    h1: PackageHash,
    auth: AuthResult,
    signed_hashes: Vec<PackageHash>,
}

/// What a successful run staged, ready to be committed by the command.
pub struct InstallOutcome {
    pub locks: Locks,
    pub staging: Staging,
    /// (staged directory, final directory) pairs.
    pub moves: Vec<(PathBuf, PathBuf)>,
    /// Every selected provider with the `h1:` hash of its installed package.
    pub selections: BTreeMap<ProviderAddr, (Version, PackageHash)>,
    /// Providers whose lock entry holds only locally computed hashes (§10.5).
    pub incomplete: Vec<ProviderAddr>,
    /// Whether any package was signed by a partner or its own author, which
    /// is when Terraform prints its note on provider signing.
    pub third_party_signed: bool,
    /// Installed packages' hashes, including the staged ones under their
    /// final paths: save it once the staging area is committed.
    pub memo: HashMemo,
}

struct Selected {
    provider: ProviderAddr,
    version: Version,
    constraints: VersionConstraints,
    /// Set when the fast path found the installed package matching the lock,
    /// so no source was asked anything.
    already_installed: Option<PackageHash>,
    /// Set when the fast path found a cache entry matching the lock.
    cached: Option<CachedPackage>,
    /// The source's answer for this version's package, asked for while the
    /// version list was on its way (see [`Installer::select_one`]).
    prefetched: Option<Result<PackageMeta, SourceError>>,
}

struct Fetched {
    provider: ProviderAddr,
    version: Version,
    constraints: VersionConstraints,
    staged: Option<PathBuf>,
    installed_hash: PackageHash,
    hashes: BTreeSet<PackageHash>,
    /// Whether the lock entry ends up with only locally computed hashes (§10.5).
    incomplete: bool,
    third_party: bool,
}

impl Installer {
    pub async fn install(
        &self,
        requirements: &BTreeMap<ProviderAddr, VersionConstraints>,
        previous: &Locks,
        mode: InstallMode,
    ) -> Result<InstallOutcome, Diagnostics> {
        let mut diags = Diagnostics::new();
        let mut wanted = Vec::new();
        for (provider, constraints) in requirements {
            if self.dev_overrides.contains(provider) {
                continue;
            }
            if provider.is_builtin() {
                if let Err(diag) = check_builtin(provider, constraints) {
                    diags.push(diag);
                } else {
                    (self.events)(InstallEvent::BuiltIn {
                        provider: provider.clone(),
                    });
                }
            } else {
                wanted.push((provider.clone(), constraints.clone()));
            }
        }
        if diags.has_errors() {
            return Err(diags);
        }

        let memo = HashMemo::load(&self.layout.data_dir);
        let selected = self.select_versions(&wanted, previous, mode, &memo).await?;
        let staging = Staging::create(&self.layout.data_dir).map_err(|err| {
            Diagnostics::from(Diagnostic::error(
                "Failed to prepare the provider installation directory",
                format!(
                    "Could not create a staging directory in {}: {err}.",
                    self.layout.data_dir.display()
                ),
            ))
        })?;
        let fetched = self
            .fetch_all(selected, previous, &staging, mode, &memo)
            .await?;

        // Providers no longer required leave the lock file (§8 step 4).
        let mut locks = previous.clone();
        let unused: Vec<ProviderAddr> = previous
            .iter()
            .map(|l| l.addr.clone())
            .filter(|addr| !requirements.contains_key(addr) && !self.dev_overrides.contains(addr))
            .collect();
        for addr in &unused {
            locks.remove(addr);
        }
        let mut outcome = InstallOutcome {
            locks,
            staging,
            moves: Vec::new(),
            selections: BTreeMap::new(),
            incomplete: Vec::new(),
            third_party_signed: false,
            memo,
        };
        for f in fetched {
            if f.incomplete {
                outcome.incomplete.push(f.provider.clone());
            }
            outcome.third_party_signed |= f.third_party;
            if let Some(staged) = f.staged {
                let target = self
                    .layout
                    .package_dir(&f.provider, &f.version, &self.platform);
                outcome.memo.record(&staged, &target, &f.installed_hash);
                outcome.moves.push((staged, target));
            }
            outcome.selections.insert(
                f.provider.clone(),
                (f.version.clone(), f.installed_hash.clone()),
            );
            outcome.locks.insert(LockedProvider {
                addr: f.provider,
                version: f.version,
                constraints: f.constraints,
                hashes: f.hashes,
            });
        }
        Ok(outcome)
    }

    /// `cache warm`: makes sure the plugin cache holds the package of every
    /// required provider for this installer's platform, choosing versions
    /// as `init` would (the lock file's when it has them). Nothing outside
    /// the cache is written. Returns each package with whether it was added.
    pub async fn warm(
        &self,
        requirements: &BTreeMap<ProviderAddr, VersionConstraints>,
        previous: &Locks,
    ) -> Result<Vec<(ProviderAddr, Version, bool)>, Diagnostics> {
        let Some(cache) = &self.cache else {
            return Ok(Vec::new());
        };
        let wanted: Vec<(ProviderAddr, VersionConstraints)> = requirements
            .iter()
            .filter(|(p, _)| !p.is_builtin() && !self.dev_overrides.contains(*p))
            .map(|(p, c)| (p.clone(), c.clone()))
            .collect();
        let memo = HashMemo::load(&self.layout.data_dir);
        let selected = self
            .select_versions(&wanted, previous, InstallMode::Normal, &memo)
            .await?;
        let staging = Staging::create(cache.cache.root()).map_err(|err| {
            Diagnostics::from(Diagnostic::error(
                "Failed to prepare the plugin cache",
                format!(
                    "Could not create a staging directory in {}: {err}.",
                    cache.cache.root().display()
                ),
            ))
        })?;
        let emit = |event: InstallEvent| (self.events)(event);
        let results: Vec<Result<(ProviderAddr, Version, bool), Diagnostic>> =
            stream::iter(selected)
                .map(|s| {
                    let staging = &staging;
                    let emit = &emit;
                    async move {
                        let preferred = preferred_hashes(previous, &s);
                        let cached = match s.cached.clone() {
                            Some(cached) => Some(cached),
                            None => {
                                self.cached_matching(&s.provider, &s.version, preferred.clone())
                                    .await
                            }
                        };
                        let added = match cached {
                            Some(_) => false,
                            None => {
                                let locked = previous.get(&s.provider).is_some();
                                self.fill_cache(
                                    cache, &s, &preferred, &preferred, locked, staging, emit,
                                )
                                .await?
                                .1
                            }
                        };
                        Ok((s.provider, s.version, added))
                    }
                })
                .buffered(self.parallelism.max(1))
                .collect()
                .await;
        Diagnostics::collect(results)
    }

    /// Steps 1 and 2 of Terraform's installer, for all providers at once.
    async fn select_versions(
        &self,
        wanted: &[(ProviderAddr, VersionConstraints)],
        previous: &Locks,
        mode: InstallMode,
        memo: &HashMemo,
    ) -> Result<Vec<Selected>, Diagnostics> {
        for (provider, constraints) in wanted {
            let locked = mode.honours_locked_version() && previous.get(provider).is_some();
            let provider = provider.clone();
            (self.events)(if locked {
                InstallEvent::ReusingLocked { provider }
            } else if constraints.is_empty() {
                InstallEvent::FindingLatest { provider }
            } else {
                InstallEvent::FindingMatching {
                    provider,
                    constraints: constraints.to_string(),
                }
            });
        }
        let results: Vec<Result<Selected, Diagnostic>> = stream::iter(wanted)
            .map(|(provider, constraints)| {
                self.select_one(provider, constraints, previous, mode, memo)
            })
            .buffered(self.parallelism.max(1))
            .collect()
            .await;
        Diagnostics::collect(results)
    }

    async fn select_one(
        &self,
        provider: &ProviderAddr,
        constraints: &VersionConstraints,
        previous: &Locks,
        mode: InstallMode,
        memo: &HashMemo,
    ) -> Result<Selected, Diagnostic> {
        // Terraform ends the detail with where to look next, except when it
        // already lists the places it searched.
        let failed = |msg: String, hint: bool| {
            let mut detail = format!(
                "Could not retrieve the list of available versions for provider {}: {msg}",
                provider.for_display()
            );
            if hint {
                detail.push_str(&format!(
                    "\n\nTo see which modules are currently depending on {} and what versions are specified, run the following command:\n    tfinstall providers",
                    provider.for_display()
                ));
            }
            Diagnostic::error("Failed to query available provider packages", detail)
        };
        let query_failed = |msg: String| failed(msg, true);
        let locked = match previous.get(provider) {
            Some(lock) if mode.honours_locked_version() => {
                if !constraints.allows(&lock.version) {
                    return Err(query_failed(format!(
                        "locked provider {provider} {} does not match configured version constraint {constraints}; must use terraform init -upgrade to allow selection of new versions",
                        lock.version
                    )));
                }
                Some(lock)
            }
            _ => None,
        };
        if let Some(lock) = locked {
            // Unlike Terraform 1.x, a provider whose installed package already
            // matches the lock file needs no registry round-trip at all.
            if let Some(hash) = self.installed_matching(provider, &lock.version, &lock.hashes, memo)
            {
                return Ok(Selected {
                    provider: provider.clone(),
                    version: lock.version.clone(),
                    constraints: constraints.clone(),
                    already_installed: Some(hash),
                    cached: None,
                    prefetched: None,
                });
            }
            // Nor does one the plugin cache holds as the lock file records it,
            // which is what lets a pre-warmed CI image run `init` offline.
            let preferred = lock
                .hashes
                .iter()
                .filter(|h| h.is_preferred())
                .cloned()
                .collect();
            if let Some(cached) = self
                .cached_matching(provider, &lock.version, preferred)
                .await
            {
                return Ok(Selected {
                    provider: provider.clone(),
                    version: lock.version.clone(),
                    constraints: constraints.clone(),
                    already_installed: None,
                    cached: Some(cached),
                    prefetched: None,
                });
            }
        }
        // When the lock file or an exact constraint already names the
        // version, its package metadata is asked for alongside the version
        // list, a round trip sooner. The list still decides: the answer for
        // a version it does not offer is dropped.
        let predicted = match locked {
            Some(lock) => Some(&lock.version),
            None => constraints.pinned(),
        }
        .filter(|version| self.may_need_source_package(provider, version));
        let prefetch = async {
            match predicted {
                Some(version) => Some(
                    self.source
                        .package_meta(provider, version, &self.platform)
                        .await,
                ),
                None => None,
            }
        };
        let (available, prefetched) =
            futures_util::future::join(self.source.available_versions(provider), prefetch).await;
        let available = available.map_err(|err| match err {
            SourceError::HostNoProviders { other_version, .. } => {
                invalid_registry_host(provider, other_version)
            }
            err => {
                let listed = matches!(err, SourceError::ProviderNotFound { .. });
                failed(describe_query_error(provider, &err), !listed)
            }
        })?;
        for warning in &available.warnings {
            (self.events)(InstallEvent::Warning(Diagnostic::warning(
                format!(
                    "Additional provider information from registry\n\nThe remote registry returned warnings for {provider}"
                ),
                warning.clone(),
            )));
        }
        for invalid in &available.invalid {
            (self.events)(InstallEvent::Warning(Diagnostic::warning(
                "Invalid version in a provider's version list",
                format!(
                    "The {} lists version {:?} for {provider}, which is not a valid version number. tfinstall skipped it and chose among the other versions (Terraform refuses the whole list). Ask whoever runs it to correct or remove the entry.",
                    invalid.source, invalid.listed
                ),
            )));
        }
        let chosen = match locked {
            Some(lock) => available.versions.iter().find(|v| **v == lock.version),
            None => constraints.newest_allowed(&available.versions),
        };
        match chosen {
            Some(version) => Ok(Selected {
                provider: provider.clone(),
                version: version.clone(),
                constraints: constraints.clone(),
                already_installed: None,
                cached: None,
                prefetched: prefetched.filter(|_| predicted == Some(version)),
            }),
            None => {
                let mut reason = match locked {
                    Some(lock) => format!(
                        "the previously-selected version {} is no longer available",
                        lock.version
                    ),
                    None => {
                        format!("no available releases match the given constraints {constraints}")
                    }
                };
                if self.offline {
                    reason.push_str(&offline_versions(&available.versions, &self.platform));
                }
                Err(query_failed(reason))
            }
        }
    }

    /// Whether installing this version may ask the source for its package:
    /// not when the plugin cache has an entry for it, which usually serves.
    fn may_need_source_package(&self, provider: &ProviderAddr, version: &Version) -> bool {
        self.cache.as_ref().is_none_or(|cache| {
            cache
                .cache
                .lookup(provider, version, &self.platform)
                .is_none()
        })
    }

    /// The source's package metadata for the selected version, prefetched
    /// or asked for now.
    async fn package_meta(&self, s: &Selected) -> Result<PackageMeta, Diagnostic> {
        let meta = match &s.prefetched {
            Some(meta) => meta.clone(),
            None => {
                self.source
                    .package_meta(&s.provider, &s.version, &self.platform)
                    .await
            }
        };
        meta.map_err(|err| {
            fetch_error_diagnostic(&s.provider, &s.version, &s.constraints, &self.platform, err)
        })
    }

    /// The `h1:` hash of the installed package when it matches one of the
    /// given hashes (only `h1:` can match an unpacked directory); remembered
    /// from earlier runs for files that did not change.
    fn installed_matching(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        hashes: &BTreeSet<PackageHash>,
        memo: &HashMemo,
    ) -> Option<PackageHash> {
        if !hashes.iter().any(|h| h.scheme() == "h1") {
            return None;
        }
        let dir = self.layout.package_dir(provider, version, &self.platform);
        if !dir.is_dir() || find_executable(&dir, &provider.type_name).is_err() {
            return None;
        }
        let hash = memo.h1_of_dir(&dir).ok()?;
        hashes.contains(&hash).then_some(hash)
    }

    /// The cache entry for this package if this run may use it (§8 step 3b):
    /// its `h1:` (or, for entries tfinstall made, the archive's `zh:`) is in
    /// `preferred`; or, for a provider the lock file has no hashes for, the
    /// entry carries tfinstall's record of how it was verified (so the lock
    /// entry can be complete without a download), or the user allowed
    /// entries that break the lock file.
    async fn cached_matching(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        preferred: BTreeSet<PackageHash>,
    ) -> Option<CachedPackage> {
        let cache = self.cache.as_ref()?;
        let entry = cache.cache.lookup(provider, version, &self.platform)?;
        let type_name = provider.type_name.clone();
        let may_break = cache.may_break_lock_file;
        let plugin_cache = cache.cache.clone();
        blocking(move || {
            find_executable(&entry.dir, &type_name).map_err(std::io::Error::other)?;
            let stamped = entry
                .meta
                .as_ref()
                .filter(|m| {
                    m.stamps
                        .as_ref()
                        .is_some_and(|s| s.still_hold_for(&entry.dir))
                })
                .and_then(EntryMeta::h1);
            let hashed = stamped.is_none();
            let h1 = match stamped {
                Some(h1) => h1,
                None => PackageHash::h1_of_dir(&entry.dir)?,
            };
            // A record whose hash no longer matches describes other files.
            let meta = entry.meta.filter(|m| m.h1() == Some(h1.clone()));
            if hashed && let Some(meta) = &meta {
                plugin_cache.remember_stamps(&entry.dir, meta);
            }
            let zh = meta
                .as_ref()
                .and_then(|m| m.zh.as_deref())
                .and_then(|z| PackageHash::parse(z).ok());
            let usable = if preferred.is_empty() {
                meta.is_some() || may_break
            } else {
                preferred.contains(&h1) || zh.is_some_and(|z| preferred.contains(&z))
            };
            usable
                .then(|| CachedPackage {
                    dir: entry.dir,
                    h1,
                    auth: meta
                        .as_ref()
                        .map_or(AuthResult::Unauthenticated, |m| AuthResult::from(&m.auth)),
                    signed_hashes: meta.map(|m| m.signed_hashes()).unwrap_or_default(),
                })
                .ok_or_else(|| std::io::Error::other("not usable"))
        })
        .await
        .ok()
    }

    /// Fills the cache entry for this package (once, however many processes
    /// want it: the entry lock makes the others wait and reuse the result).
    #[allow(clippy::too_many_arguments)]
    async fn fill_cache(
        &self,
        cache: &CacheUse,
        s: &Selected,
        preferred: &BTreeSet<PackageHash>,
        allowed: &BTreeSet<PackageHash>,
        lock_known: bool,
        staging: &Staging,
        emit: &(dyn Fn(InstallEvent) + Sync),
    ) -> Result<(CachedPackage, bool), Diagnostic> {
        let cache_failed = |err: std::io::Error| {
            Diagnostic::error(
                "Failed to install provider",
                format!(
                    "Error while installing {} v{}: could not use the plugin cache at {}: {err}. Check its permissions, or unset plugin_cache_dir / TF_PLUGIN_CACHE_DIR to install without it.",
                    s.provider.for_display(),
                    s.version,
                    cache.cache.root().display()
                ),
            )
        };
        let entry_lock = cache
            .cache
            .lock_entry(&s.provider, &s.version, &self.platform, || {
                emit(InstallEvent::WaitingForCache {
                    provider: s.provider.clone(),
                    version: s.version.clone(),
                })
            })
            .await
            .map_err(cache_failed)?;
        if let Some(cached) = self
            .cached_matching(&s.provider, &s.version, preferred.clone())
            .await
        {
            return Ok((cached, false));
        }
        let meta = self.package_meta(s).await?;
        emit(InstallEvent::Selected {
            provider: s.provider.clone(),
            version: s.version.clone(),
            locked: lock_known,
            package: meta.location.to_string(),
        });
        emit(InstallEvent::Installing {
            provider: s.provider.clone(),
            version: s.version.clone(),
        });
        let package_dir = entry_lock.build_dir().map_err(cache_failed)?;
        let package = self
            .stage_package(&meta, allowed, staging, &package_dir, emit, LinkMode::Copy)
            .await
            .map_err(|err| self.stage_failed(s, err))?;
        let record = EntryMeta {
            format: crate::cache::META_FORMAT,
            provider: s.provider.to_string(),
            version: s.version.to_string(),
            platform: self.platform.to_string(),
            h1: package.h1.to_string(),
            zh: package.zh.as_ref().map(ToString::to_string),
            signed_hashes: package
                .signed_hashes
                .iter()
                .map(ToString::to_string)
                .collect(),
            auth: (&package.auth).into(),
            origin: match &meta.location {
                PackageLocation::LocalArchive(p) | PackageLocation::LocalDir(p) => {
                    std::path::absolute(p)
                        .unwrap_or_else(|_| p.clone())
                        .display()
                        .to_string()
                }
                PackageLocation::Http(url) => url.to_string(),
            },
            stamps: None,
        };
        let dir = cache
            .cache
            .insert(&entry_lock, &record)
            .map_err(cache_failed)?;
        Ok((
            CachedPackage {
                dir,
                h1: package.h1,
                auth: package.auth,
                signed_hashes: package.signed_hashes,
            },
            true,
        ))
    }

    async fn fetch_all(
        &self,
        selected: Vec<Selected>,
        previous: &Locks,
        staging: &Staging,
        mode: InstallMode,
        memo: &HashMemo,
    ) -> Result<Vec<Fetched>, Diagnostics> {
        let order = Arc::new(OrderedEvents::new(selected.len(), self.events.clone()));
        let results: Vec<Result<Fetched, Diagnostic>> =
            stream::iter(selected.into_iter().enumerate())
                .map(|(index, s)| {
                    let order = order.clone();
                    async move {
                        let emit = |event| order.emit(index, event);
                        let (provider, version) = (s.provider.clone(), s.version.clone());
                        let result = self
                            .fetch_one(s, previous, staging, mode, memo, &emit)
                            .await;
                        emit(InstallEvent::Progress {
                            provider,
                            version,
                            stage: ProgressStage::Done,
                        });
                        order.finish(index);
                        result
                    }
                })
                .buffered(self.parallelism.max(1))
                .collect()
                .await;
        Diagnostics::collect(results)
    }

    async fn fetch_one(
        &self,
        s: Selected,
        previous: &Locks,
        staging: &Staging,
        mode: InstallMode,
        memo: &HashMemo,
        emit: &(dyn Fn(InstallEvent) + Sync),
    ) -> Result<Fetched, Diagnostic> {
        let lock = previous.get(&s.provider).filter(|l| l.version == s.version);
        let preferred = preferred_hashes(previous, &s);
        let prior_hashes = lock.map(|l| l.hashes.clone()).unwrap_or_default();

        let installed = match s.already_installed.clone() {
            Some(hash) => Some(hash),
            None => self.installed_matching(&s.provider, &s.version, &preferred, memo),
        };
        if let Some(hash) = installed {
            emit(InstallEvent::Selected {
                provider: s.provider.clone(),
                version: s.version.clone(),
                locked: lock.is_some(),
                package: self
                    .layout
                    .package_dir(&s.provider, &s.version, &self.platform)
                    .display()
                    .to_string(),
            });
            emit(InstallEvent::UsingInstalled {
                provider: s.provider.clone(),
                version: s.version.clone(),
            });
            return Ok(Fetched {
                hashes: prior_hashes,
                provider: s.provider,
                version: s.version,
                constraints: lock.map(|l| l.constraints.clone()).unwrap_or(s.constraints),
                staged: None,
                installed_hash: hash,
                incomplete: false,
                third_party: false,
            });
        }

        let install_failed = |err: String| install_failed(&s.provider, &s.version, err);
        let allowed = if mode == InstallMode::Force {
            BTreeSet::new()
        } else {
            preferred.clone()
        };
        if let Some(cache) = &self.cache {
            let (cached, downloaded) = match s.cached.clone() {
                Some(cached) => (cached, false),
                None => match self
                    .cached_matching(&s.provider, &s.version, preferred.clone())
                    .await
                {
                    Some(cached) => (cached, false),
                    None => {
                        self.fill_cache(
                            cache,
                            &s,
                            &preferred,
                            &allowed,
                            lock.is_some(),
                            staging,
                            emit,
                        )
                        .await?
                    }
                },
            };
            if !downloaded {
                emit(InstallEvent::CacheHit {
                    provider: s.provider.clone(),
                    version: s.version.clone(),
                });
            }
            let staged = staging.new_path(&format!("{}-{}", s.provider.type_name, s.version));
            let (from, to, link_mode) = (cached.dir.clone(), staged.clone(), self.link_mode);
            blocking(move || link_cached_package(&from, &to, link_mode))
                .await
                .map_err(|err| {
                    let advice = match link_mode {
                        LinkMode::Hardlink => ". -link-mode=hardlink needs the plugin cache and the working directory on one filesystem that allows hard links; use -link-mode=auto (the default) to copy where they are refused.",
                        _ => "",
                    };
                    install_failed(format!(
                        "could not place the cached package from {} in the working directory: {err}{advice}",
                        cached.dir.display()
                    ))
                })?;
            let package = StagedPackage {
                h1: cached.h1,
                zh: None,
                auth: cached.auth,
                signed_hashes: cached.signed_hashes,
            };
            return Ok(self.fetched(s, staged, package, &preferred, downloaded, emit));
        }
        let meta = self.package_meta(&s).await?;
        emit(InstallEvent::Selected {
            provider: s.provider.clone(),
            version: s.version.clone(),
            locked: lock.is_some(),
            package: meta.location.to_string(),
        });
        emit(InstallEvent::Installing {
            provider: s.provider.clone(),
            version: s.version.clone(),
        });
        let staged = staging.new_path(&format!("{}-{}", s.provider.type_name, s.version));
        let package = self
            .stage_package(&meta, &allowed, staging, &staged, emit, LinkMode::Auto)
            .await
            .map_err(|err| self.stage_failed(&s, err))?;

        Ok(self.fetched(s, staged, package, &preferred, true, emit))
    }

    fn stage_failed(&self, s: &Selected, err: StageError) -> Diagnostic {
        match err {
            StageError::Source(err) => {
                fetch_error_diagnostic(&s.provider, &s.version, &s.constraints, &self.platform, err)
            }
            StageError::Package(message) => install_failed(&s.provider, &s.version, message),
        }
    }

    /// The lock entry and report for a package staged at `staged`.
    /// `installed_now` is false for a cache hit, which Terraform reports as
    /// "Using … from the shared cache directory" instead of "Installed".
    fn fetched(
        &self,
        s: Selected,
        staged: PathBuf,
        package: StagedPackage,
        preferred: &BTreeSet<PackageHash>,
        installed_now: bool,
        emit: &(dyn Fn(InstallEvent) + Sync),
    ) -> Fetched {
        let mut hashes = preferred.clone();
        hashes.insert(package.h1.clone());
        let signed = package.auth.vouches_for_release();
        // Terraform's test: nothing signed this run, and the lock had no
        // hashes for this version or exactly the one just computed.
        let incomplete = (!signed || package.signed_hashes.is_empty())
            && (preferred.is_empty() || *preferred == BTreeSet::from([package.h1.clone()]));
        if signed {
            hashes.extend(package.signed_hashes);
        }
        let third_party = installed_now && package.auth.is_third_party_signed();
        if installed_now {
            emit(InstallEvent::Installed {
                provider: s.provider.clone(),
                version: s.version.clone(),
                auth: package.auth,
            });
        }
        Fetched {
            provider: s.provider,
            version: s.version,
            constraints: s.constraints,
            staged: Some(staged),
            installed_hash: package.h1,
            hashes,
            incomplete,
            third_party,
        }
    }

    /// Obtains, authenticates and unpacks one package into `staged`.
    /// `placement` says how an unpacked (directory) package is placed; a
    /// cache entry must be a copy, since cache files are made read-only and
    /// a hard link would change the mirror's files too.
    async fn stage_package(
        &self,
        meta: &PackageMeta,
        allowed: &BTreeSet<PackageHash>,
        staging: &Staging,
        staged: &Path,
        emit: &(dyn Fn(InstallEvent) + Sync),
        placement: LinkMode,
    ) -> Result<StagedPackage, StageError> {
        let progress = |stage| {
            emit(InstallEvent::Progress {
                provider: meta.provider.clone(),
                version: meta.version.clone(),
                stage,
            })
        };
        match &meta.location {
            PackageLocation::LocalDir(src) => {
                let package = stage_unpacked(
                    src.clone(),
                    staged.to_path_buf(),
                    meta,
                    allowed.clone(),
                    placement,
                )
                .await
                .map_err(StageError::Package)?;
                emit(InstallEvent::Verified {
                    provider: meta.provider.clone(),
                    version: meta.version.clone(),
                    auth: package.auth.clone(),
                });
                Ok(package)
            }
            PackageLocation::LocalArchive(path) => {
                let archive = LocalArchive {
                    path: path.clone(),
                    shown_as: path.clone(),
                    digest: None,
                };
                self.stage_archive(archive, meta, allowed, staged, emit)
                    .await
                    .map_err(StageError::Package)
            }
            PackageLocation::Http(url) => {
                let dest = staging.new_path(&meta.filename);
                let last: Mutex<(Option<Instant>, u64)> = Mutex::new((None, 0));
                let report = |p: DownloadProgress| {
                    let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
                    last.1 = p.received;
                    if last.0.is_none_or(|at| at.elapsed() >= PROGRESS_INTERVAL) {
                        last.0 = Some(Instant::now());
                        progress(ProgressStage::Downloading(p));
                    }
                };
                let fetched = async {
                    let download = async {
                        self.downloader
                            .download_with_progress(url, &dest, &report)
                            .await
                            .map_err(|err| err.to_string())
                    };
                    let digest = alongside_documents(&meta.authentication, download).await?;
                    let size = last.lock().unwrap_or_else(|e| e.into_inner()).1;
                    progress(ProgressStage::Downloading(DownloadProgress {
                        received: size,
                        total: Some(size),
                    }));
                    let archive = LocalArchive {
                        path: dest.clone(),
                        shown_as: PathBuf::from(url.as_str()),
                        digest: Some(digest),
                    };
                    self.stage_archive(archive, meta, allowed, staged, emit)
                        .await
                        .map_err(StageError::Package)
                }
                .await;
                // The archive is needed only until it is unpacked, or until
                // the attempt has failed.
                let _ = tokio::fs::remove_file(&dest).await;
                fetched
            }
        }
    }

    async fn stage_archive(
        &self,
        archive: LocalArchive,
        meta: &PackageMeta,
        allowed: &BTreeSet<PackageHash>,
        staged: &Path,
        emit: &(dyn Fn(InstallEvent) + Sync),
    ) -> Result<StagedPackage, String> {
        let LocalArchive {
            path: archive,
            shown_as,
            digest,
        } = archive;
        let digest = match digest {
            Some(d) => d,
            None => {
                let path = archive.clone();
                let zh = blocking(move || PackageHash::zh_of_file(&path))
                    .await
                    .map_err(|err| {
                        format!(
                            "failed to compute checksum for {}: {err}",
                            archive.display()
                        )
                    })?;
                zh_digest(&zh).ok_or_else(|| "failed to compute checksum".to_string())?
            }
        };
        let zh = PackageHash::zh_of_digest(&digest);
        let (auth, signed_hashes) = authenticate_archive(meta, &digest, &zh).await?;
        if let AuthResult::Signed(check) = &auth
            && check.key_expired
            && Engine::current() == Engine::OpenTofu
        {
            emit(InstallEvent::Warning(Diagnostic::warning(
                "Provider signed with an expired key",
                format!(
                    "Provider {} v{} is signed with key {}, which has expired; this will fail in future versions of OpenTofu. Ask the provider's author to sign its releases with a current key. OPENTOFU_ENFORCE_GPG_EXPIRATION=true refuses such packages.",
                    meta.provider.for_display(),
                    meta.version,
                    check.key_id
                ),
            )));
        }
        emit(InstallEvent::Verified {
            provider: meta.provider.clone(),
            version: meta.version.clone(),
            auth: auth.clone(),
        });
        emit(InstallEvent::Progress {
            provider: meta.provider.clone(),
            version: meta.version.clone(),
            stage: ProgressStage::Unpacking,
        });

        let provider = meta.provider.clone();
        let type_name = provider.type_name.clone();
        let limits = self.limits.clone();
        let dest = staged.to_path_buf();
        let src = archive.clone();
        let files = blocking(move || {
            std::fs::create_dir_all(&dest)?;
            extract_package(&src, &dest, &type_name, &limits)
                .map_err(|err| std::io::Error::other(err.shown_as(&shown_as)))
        })
        .await
        .map_err(|err| err.to_string())?;
        let entries: Vec<(String, [u8; 32])> =
            files.iter().map(|f| (f.name.clone(), f.sha256)).collect();
        let h1 = PackageHash::h1_of_files(&entries).map_err(|err| err.to_string())?;

        if let PackageAuthentication::Hashes(listed) = &meta.authentication
            && !listed.contains(&zh)
            && !listed.contains(&h1)
        {
            return Err(mirror_mismatch(listed));
        }
        if !allowed.is_empty() && !allowed.contains(&zh) && !allowed.contains(&h1) {
            return Err(format!(
                "the current package for {provider} {} doesn't match any of the checksums previously recorded in the dependency lock file; for more information: {CHECKSUM_DOCS}",
                meta.version
            ));
        }
        Ok(StagedPackage {
            h1,
            zh: Some(zh),
            auth,
            signed_hashes,
        })
    }
}

/// An archive on disk, ready to be authenticated and unpacked.
struct LocalArchive {
    path: PathBuf,
    /// How messages name it: its URL when it was downloaded.
    shown_as: PathBuf,
    /// Its SHA-256 when already computed while downloading.
    digest: Option<[u8; 32]>,
}

struct StagedPackage {
    h1: PackageHash,
    /// The archive's hash, when the package came as an archive.
    zh: Option<PackageHash>,
    auth: AuthResult,
    signed_hashes: Vec<PackageHash>,
}

/// Why a package could not be staged. A registry's checksum documents fail
/// as a source query does, which is how Terraform (fetching them before the
/// archive) reports it; everything else is a failure of the package itself.
pub enum StageError<E = String> {
    Source(SourceError),
    Package(E),
}

/// Runs `download` while a registry's checksum documents arrive (other
/// sources have none to wait for). A failure of the documents ends the
/// download at once and is the one reported, since it would have come
/// first had they been fetched beforehand.
pub async fn alongside_documents<T, E>(
    authentication: &PackageAuthentication,
    download: impl Future<Output = Result<T, E>>,
) -> Result<T, StageError<E>> {
    let PackageAuthentication::Signed(signed) = authentication else {
        return download.await.map_err(StageError::Package);
    };
    let documents = &signed.documents;
    let download = async {
        match download.await {
            Ok(done) => Ok(done),
            Err(err) => Err(match documents.get().await {
                Err(source) => StageError::Source(source),
                Ok(_) => StageError::Package(err),
            }),
        }
    };
    let (_, done) =
        futures_util::future::try_join(documents.get().map_err(StageError::Source), download)
            .await?;
    Ok(done)
}

async fn stage_unpacked(
    src: PathBuf,
    staged: PathBuf,
    meta: &PackageMeta,
    allowed: BTreeSet<PackageHash>,
    placement: LinkMode,
) -> Result<StagedPackage, String> {
    let provider = meta.provider.clone();
    let version = meta.version.clone();
    blocking(move || {
        let h1 = PackageHash::h1_of_dir(&src)?;
        let non_zh: Vec<&PackageHash> = allowed.iter().filter(|h| h.scheme() != "zh").collect();
        if !non_zh.is_empty() && !non_zh.contains(&&h1) {
            return Err(std::io::Error::other(format!(
                "the local package for {provider} {version} doesn't match any of the checksums previously recorded in the dependency lock file (this might be because the available checksums are for packages targeting different platforms); for more information: {CHECKSUM_DOCS}"
            )));
        }
        link_package(&src, &staged, placement)?;
        find_executable(&staged, &provider.type_name).map_err(std::io::Error::other)?;
        Ok(StagedPackage {
            h1,
            zh: None,
            auth: AuthResult::Unauthenticated,
            signed_hashes: Vec::new(),
        })
    })
    .await
    .map_err(|err| err.to_string())
}

/// What `-offline` could have installed instead, and how to get more.
fn offline_versions(versions: &[Version], platform: &Platform) -> String {
    let held = if versions.is_empty() {
        "no version".to_owned()
    } else {
        let listed: Vec<String> = versions.iter().map(ToString::to_string).collect();
        format!("only {}", listed.join(", "))
    };
    format!(
        ". With -offline, the plugin cache and the local directories hold {held} for {platform}: run init without -offline to fetch it, or fill the cache with tfinstall cache warm"
    )
}

/// Runs the source's authentication for an archive whose SHA-256 is known
/// (§7.1, §7.4). Registry signatures are checked before anything is unpacked.
pub async fn authenticate_archive(
    meta: &PackageMeta,
    digest: &[u8; 32],
    zh: &PackageHash,
) -> Result<(AuthResult, Vec<PackageHash>), String> {
    match &meta.authentication {
        PackageAuthentication::None => Ok((AuthResult::Unauthenticated, Vec::new())),
        PackageAuthentication::Hashes(listed) => {
            if !listed.iter().any(PackageHash::is_preferred) {
                return Err("this version of Terraform does not support any of the checksum formats given for this provider".to_string());
            }
            let zh_listed = listed.iter().any(|h| h.scheme() == "zh");
            let h1_listed = listed.iter().any(|h| h.scheme() == "h1");
            if zh_listed && !h1_listed && !listed.contains(zh) {
                return Err(mirror_mismatch(listed));
            }
            Ok((AuthResult::VerifiedChecksum, Vec::new()))
        }
        PackageAuthentication::Signed(signed) => {
            let documents = signed.documents.get().await.map_err(|e| e.to_string())?;
            let release = acceptable_hashes(&documents.sha256sums, &meta.filename, &meta.platform);
            if signed.keys.is_empty() && signature_may_be_skipped(&meta.provider) {
                verify_checksums(meta, signed, &documents, digest).map_err(|e| e.to_string())?;
                return Ok((AuthResult::SigningSkipped, release));
            }
            let check =
                verify_signed(meta, signed, &documents, digest).map_err(|e| e.to_string())?;
            if check.key_expired && expired_keys_refused() {
                return Err("the provider is not signed with a valid signing key; please contact the provider author (authentication signature from unknown issuer)".to_owned());
            }
            Ok((AuthResult::Signed(check), release))
        }
    }
}

fn verify_signed(
    meta: &PackageMeta,
    signed: &SignedChecksums,
    documents: &SignedDocuments,
    digest: &[u8; 32],
) -> Result<crate::verify::signature::SignatureCheck, AuthError> {
    verify_checksums(meta, signed, documents, digest)?;
    verify_sums_signature(&documents.sha256sums, &documents.signature, &signed.keys)
}

/// The registry's `shasum` is the one the checksum list gives the archive,
/// and the archive has it.
fn verify_checksums(
    meta: &PackageMeta,
    signed: &SignedChecksums,
    documents: &SignedDocuments,
    digest: &[u8; 32],
) -> Result<(), AuthError> {
    let listed = checksum_for(&documents.sha256sums, &meta.filename)?;
    if listed != signed.shasum {
        return Err(AuthError(format!(
            "checksum list has unexpected SHA-256 hash {} (expected {})",
            hex::encode(listed),
            hex::encode(signed.shasum)
        )));
    }
    if *digest != signed.shasum {
        return Err(AuthError(format!(
            "archive has incorrect checksum zh:{} (expected zh:{})",
            hex::encode(digest),
            hex::encode(signed.shasum)
        )));
    }
    Ok(())
}

pub fn mirror_mismatch(listed: &[PackageHash]) -> String {
    let required: Vec<&PackageHash> = listed.iter().filter(|h| h.is_preferred()).collect();
    if required.len() == 1 {
        format!(
            "provider package doesn't match the expected checksum \"{}\"",
            required[0]
        )
    } else {
        "provider package doesn't match the any of the expected checksums".to_string()
    }
}

fn zh_digest(zh: &PackageHash) -> Option<[u8; 32]> {
    let bytes = hex::decode(zh.to_string().strip_prefix("zh:")?).ok()?;
    bytes.try_into().ok()
}

/// Runs hashing, unpacking and other file work off the async threads, so
/// one large package never stalls the downloads of the others.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(std::io::Error::other)?
}

/// The lock file's `h1:`/`zh:` hashes for the selected version, which the
/// package must match (§8 step 3); none when the lock has another version.
fn preferred_hashes(previous: &Locks, s: &Selected) -> BTreeSet<PackageHash> {
    previous
        .get(&s.provider)
        .filter(|l| l.version == s.version)
        .map(|l| {
            l.hashes
                .iter()
                .filter(|h| h.is_preferred())
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

fn install_failed(provider: &ProviderAddr, version: &Version, err: String) -> Diagnostic {
    Diagnostic::error(
        "Failed to install provider",
        format!(
            "Error while installing {} v{version}: {err}",
            provider.for_display()
        ),
    )
}

fn check_builtin(
    provider: &ProviderAddr,
    constraints: &VersionConstraints,
) -> Result<(), Diagnostic> {
    let err = if provider.type_name != "terraform" {
        format!(
            "this Terraform release has no built-in provider named {:?}",
            provider.type_name
        )
    } else if !constraints.is_empty() {
        "built-in providers do not support explicit version constraints".to_string()
    } else {
        return Ok(());
    };
    Err(Diagnostic::error(
        "Invalid dependency on built-in provider",
        format!("Cannot use {provider}: {err}."),
    ))
}

fn describe_query_error(provider: &ProviderAddr, err: &SourceError) -> String {
    match err {
        SourceError::RegistryProviderNotKnown { .. } => format!(
            "{err}\n\nAll modules should specify their required_providers so that external consumers will get the correct providers when using a module. To see which modules are currently depending on {}, run the following command:\n    terraform providers",
            provider.for_display()
        ),
        SourceError::ProviderNotFound { sources, .. } => {
            let mut text = err.to_string();
            if !sources.is_empty() {
                text.push_str("\n\n");
                text.push_str(
                    &sources
                        .iter()
                        .map(|s| format!("  - {s}"))
                        .collect::<Vec<_>>()
                        .join("\n"),
                );
            }
            text
        }
        _ => err.to_string(),
    }
}

/// Terraform's diagnostic for a source address whose host answers service
/// discovery but runs no provider registry (§11.2).
fn invalid_registry_host(provider: &ProviderAddr, other_version: bool) -> Diagnostic {
    let host = provider.hostname.for_display();
    let detail = if host == "github.com" {
        format!(
            "The given source address \"{provider}\" specifies a GitHub repository rather than a Terraform provider. Refer to the documentation of the provider to find the correct source address to use."
        )
    } else if other_version {
        format!(
            "The host \"{host}\" given in provider source address \"{provider}\" does not offer a Terraform provider registry that is compatible with this Terraform version, but it may be compatible with a different Terraform version."
        )
    } else {
        format!(
            "The host \"{host}\" given in provider source address \"{provider}\" does not offer a Terraform provider registry."
        )
    };
    Diagnostic::error("Invalid provider registry host", detail)
}

/// Terraform's advice when the selected version speaks no plugin protocol
/// this installer's Terraform can run (§11.3): which version to pin instead.
fn incompatible_protocol_detail(
    incompatible: &IncompatibleProtocol,
    constraints: &VersionConstraints,
) -> String {
    let provider = &incompatible.provider;
    let selected = &incompatible.version;
    let Some(suggestion) = &incompatible.suggestion else {
        return format!("No compatible versions of provider {provider} were found.");
    };
    let (advice, alternatively) = if selected > suggestion {
        (
            format!(
                "You need to downgrade to v{suggestion} or earlier. Select it with the following constraint:"
            ),
            "\nAlternatively, upgrade to the latest version of Terraform for compatibility with newer provider releases.",
        )
    } else {
        (
            format!(
                "Provider version {suggestion} is the latest compatible version. Select it with the following version constraint:"
            ),
            "",
        )
    };
    format!(
        "Provider \"{}\" v{selected} is not compatible with Terraform {TERRAFORM_COMPAT_VERSION}.\n{advice}\n\tversion = \"{suggestion}\"\n\nTerraform checked all of the plugin versions matching the given constraint:\n\t{constraints}\n\nConsult the documentation for this provider for more information on compatibility between provider and Terraform versions.{alternatively}",
        provider.for_display()
    )
}

/// "a", "a and b", "a, b and c".
fn english_list(items: &[String]) -> String {
    match items.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

fn fetch_error_diagnostic(
    provider: &ProviderAddr,
    version: &Version,
    constraints: &VersionConstraints,
    platform: &Platform,
    err: SourceError,
) -> Diagnostic {
    match err {
        SourceError::ProtocolNotSupported(incompatible) => Diagnostic::error(
            "Incompatible provider version",
            incompatible_protocol_detail(&incompatible, constraints),
        ),
        SourceError::PlatformNotSupported(missing) if missing.mirror_url.is_some() => {
            Diagnostic::error(
                "Incompatible provider version",
                format!(
                    "Your chosen provider mirror at {} does not have a {provider} v{version} package available for your current platform, {platform}.\n\nProvider releases are separate from Terraform CLI releases, so this provider might not support your current platform. Alternatively, the mirror itself might have only a subset of the plugin packages available in the origin registry, at {}.",
                    missing.mirror_url.as_deref().unwrap_or_default(),
                    provider.hostname.for_display()
                ),
            )
        }
        SourceError::PlatformNotSupported(missing) => {
            let mut detail = format!(
                "Provider {provider} v{version} does not have a package available for your current platform, {platform}.\n\nProvider releases are separate from Terraform CLI releases, so not all providers are available for all platforms. Other versions of this provider may have different platforms supported."
            );
            if !missing.available.is_empty() {
                detail.push_str(&format!(
                    "\n\nVersion {version} is available for {}.",
                    english_list(&missing.available)
                ));
            }
            Diagnostic::error("Incompatible provider version", detail)
        }
        other => Diagnostic::error(
            "Failed to install provider",
            format!(
                "Error while installing {} v{version}: {other}",
                provider.for_display()
            ),
        ),
    }
}

/// Concurrent installs report in a stable order: events of the provider at
/// the head of the (sorted) list pass straight through; later providers'
/// events wait until every provider before them has finished.
struct OrderedEvents {
    sink: EventSink,
    state: Mutex<OrderState>,
}

struct OrderState {
    head: usize,
    finished: Vec<bool>,
    buffered: Vec<Vec<InstallEvent>>,
}

impl OrderedEvents {
    fn new(n: usize, sink: EventSink) -> Self {
        OrderedEvents {
            sink,
            state: Mutex::new(OrderState {
                head: 0,
                finished: vec![false; n],
                buffered: vec![Vec::new(); n],
            }),
        }
    }

    fn emit(&self, index: usize, event: InstallEvent) {
        if event.is_live() {
            (self.sink)(event);
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if index == state.head {
            (self.sink)(event);
        } else {
            state.buffered[index].push(event);
        }
    }

    fn finish(&self, index: usize) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.finished[index] = true;
        while state.head < state.finished.len() && state.finished[state.head] {
            state.head += 1;
            if state.head < state.finished.len() {
                let head = state.head;
                for event in std::mem::take(&mut state.buffered[head]) {
                    (self.sink)(event);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Hostname;
    use crate::source::ChecksumDocuments;
    use crate::verify::signature::{SigningKey, Trust};

    const VECTORS: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/vectors/hashicorp/terraform/extracted/internal/getproviders/package_authentication_test/"
    );

    fn vector(name: &str) -> Vec<u8> {
        std::fs::read(format!("{VECTORS}{name}")).unwrap()
    }

    /// The registry's answer for `hashicorp/null` 3.1.0 on linux_amd64, with
    /// the real HashiCorp-signed checksum list and HashiCorp's key listed.
    fn null_310(shasum_hex: &str) -> PackageMeta {
        let shasum: [u8; 32] = hex::decode(shasum_hex).unwrap().try_into().unwrap();
        PackageMeta {
            provider: ProviderAddr::new(Hostname::default_registry(), "hashicorp", "null"),
            version: Version::new(3, 1, 0),
            platform: Platform::parse("linux_amd64").unwrap(),
            filename: "terraform-provider-null_3.1.0_linux_amd64.zip".to_owned(),
            location: PackageLocation::Http("https://releases.example/null.zip".parse().unwrap()),
            authentication: PackageAuthentication::Signed(Box::new(SignedChecksums {
                shasum,
                documents: ChecksumDocuments::fetch(std::future::ready(Ok(SignedDocuments {
                    sha256sums: vector("terraform-provider-null_3.1.0_SHA256SUMS"),
                    signature: vector("terraform-provider-null_3.1.0_SHA256SUMS.sig"),
                }))),
                keys: vec![SigningKey {
                    ascii_armor: include_str!("../verify/keys/hashicorp-public-key.asc").to_owned(),
                    trust_signature: String::new(),
                }],
            })),
        }
    }

    const LINUX_AMD64: &str = "53e30545ff8926a8e30ad30648991ca8b93b6fa496272cd23b26763c8ee84515";

    #[tokio::test]
    async fn the_real_hashicorp_checksum_list_authenticates_as_official() {
        let meta = null_310(LINUX_AMD64);
        let digest: [u8; 32] = hex::decode(LINUX_AMD64).unwrap().try_into().unwrap();
        let (auth, hashes) =
            authenticate_archive(&meta, &digest, &PackageHash::zh_of_digest(&digest))
                .await
                .unwrap();
        let AuthResult::Signed(check) = &auth else {
            panic!("not signed: {auth}");
        };
        assert_eq!(check.trust, Trust::HashiCorp);
        assert_eq!(check.key_id, "34365D9472D7468F");
        assert_eq!(auth.to_string(), "signed by HashiCorp");
        assert!(!auth.is_third_party_signed(), "no key ID, no footer");
        // Every platform's zip in the signed list goes into the lock file.
        assert_eq!(hashes.len(), 11);
        assert!(hashes.contains(&PackageHash::parse(&format!("zh:{LINUX_AMD64}")).unwrap()));
    }

    #[tokio::test]
    async fn the_real_checksum_list_still_catches_a_wrong_archive() {
        let meta = null_310(LINUX_AMD64);
        let digest = [7u8; 32];
        let err = authenticate_archive(&meta, &digest, &PackageHash::zh_of_digest(&digest))
            .await
            .unwrap_err();
        assert_eq!(
            err,
            format!(
                "archive has incorrect checksum zh:{} (expected zh:{LINUX_AMD64})",
                hex::encode(digest)
            )
        );

        let other_platform = "02a1675fd8de126a00460942aaae242e65ca3380b5bb192e8773ef3da9073fd2";
        let err = authenticate_archive(
            &null_310(other_platform),
            &digest,
            &PackageHash::zh_of_digest(&digest),
        )
        .await
        .unwrap_err();
        assert_eq!(
            err,
            format!(
                "checksum list has unexpected SHA-256 hash {LINUX_AMD64} (expected {other_platform})"
            )
        );
    }

    #[test]
    fn platform_lists_read_as_english() {
        let list =
            |items: &[&str]| english_list(&items.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(list(&[]), "");
        assert_eq!(list(&["linux_arm"]), "linux_arm");
        assert_eq!(list(&["a", "b"]), "a and b");
        assert_eq!(list(&["a", "b", "c"]), "a, b and c");
    }
}
