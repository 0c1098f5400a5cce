//! Stage two: obtaining one package from its source, authenticating it and
//! unpacking it into a staging directory, or into a plugin cache entry that
//! any number of working directories then share.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};
use std::time::Instant;

use tokio::sync::Semaphore;

use crate::addr::{Platform, ProviderAddr};
use crate::cache::{EntryMeta, EntryUse};
use crate::diag::Diagnostic;
use crate::engine::Engine;
use crate::fetch::{Destination, DownloadProgress, UnpackInto};
use crate::fsutil::blocking;
use crate::http::TERRAFORM_COMPAT_VERSION;
use crate::install::cache_use::CacheUse;
use crate::install::context::{CachedPackage, Installer, Selected};
use crate::install::events::{InstallEvent, PROGRESS_INTERVAL, ProgressStage};
use crate::install::link::{LinkMode, link_package};
use crate::install::staging::Staging;
use crate::package::extract::{ExtractedFile, extract_package, find_executable};
use crate::package::stamps::{DirStamps, pin_mtimes};
use crate::policy::{Refusal, UnpackedCopy};
use crate::source::authentication::{
    StageError, alongside_documents, authenticate_archive, authenticate_files,
};
use crate::source::{IncompatibleProtocol, PackageLocation, PackageMeta, SourceError};
use crate::verify::AuthResult;
use crate::verify::hash::PackageHash;
use crate::version::{Version, VersionConstraints};

/// Unpacking a saved archive is CPU work on page-cache data: more packages
/// unpacking at once than there are cores finish no sooner, and each adds
/// its read and write buffers (half a MiB) to the peak memory, which then
/// grew with the number of providers downloaded at once instead of staying
/// flat (issue 15). One limit for the process, since `init DIR…` runs many
/// installers side by side. Downloads that unpack as they arrive are paced
/// by the network instead and are bounded by the download parallelism.
static UNPACKING_SLOTS: LazyLock<Semaphore> =
    LazyLock::new(|| Semaphore::new(std::thread::available_parallelism().map_or(1, usize::from)));

/// How many times a run looks for a cache entry that keeps being removed
/// or replaced just as it is about to use it; each time means another
/// process (a prune, a replacement) got the entry's lock first.
const HOLD_ATTEMPTS: usize = 3;

/// The error for a plugin cache that cannot be used, naming the way out.
fn cache_failed(cache: &CacheUse, s: &Selected, err: std::io::Error) -> Diagnostic {
    Diagnostic::error(
        "Failed to install provider",
        format!(
            "Error while installing {} v{}: could not use the plugin cache at {}: {err}. Check its permissions, or unset plugin_cache_dir / TF_PLUGIN_CACHE_DIR to install without it.",
            s.provider.for_display(),
            s.version,
            cache.cache.root().display()
        ),
    )
}

const CHECKSUM_DOCS: &str = "https://developer.hashicorp.com/terraform/language/files/dependency-lock#checksum-verification";

impl Installer {
    /// The source's package metadata for the selected version, prefetched
    /// or asked for now.
    pub(super) async fn package_meta(&self, s: &Selected) -> Result<PackageMeta, Diagnostic> {
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

    /// The cache entry for this package, found usable or filled now, and
    /// held for use (so no `cache prune` removes it before the caller has
    /// placed it), with its use recorded; and whether this call downloaded
    /// it. A wait for the hold can end with the entry removed or replaced,
    /// so the entry is looked at again once held, and looked for anew if it
    /// changed.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn hold_cached(
        &self,
        cache: &CacheUse,
        s: &Selected,
        preferred: &BTreeSet<PackageHash>,
        allowed: &BTreeSet<PackageHash>,
        lock_known: bool,
        staging: &Staging,
        emit: &(dyn Fn(InstallEvent) + Sync),
    ) -> Result<(CachedPackage, bool, EntryUse), Diagnostic> {
        let mut found = s.cached.clone();
        let mut downloaded = false;
        for _ in 0..HOLD_ATTEMPTS {
            let cached = match found.take() {
                Some(cached) => cached,
                None => match self
                    .cached_matching(&s.provider, &s.version, preferred.clone(), None)
                    .await
                {
                    Some(cached) => cached,
                    None => {
                        let (cached, filled) = self
                            .fill_cache(cache, s, preferred, allowed, lock_known, staging, emit)
                            .await?;
                        downloaded |= filled;
                        cached
                    }
                },
            };
            let held = match cache.cache.hold_for_use(&cached.dir).await {
                Ok(held) => held,
                // Removed along with the directory its lock file was in.
                Err(_) if !cached.dir.is_dir() => continue,
                Err(err) => return Err(cache_failed(cache, s, err)),
            };
            if cache.fills.still_holds(
                &s.provider,
                &s.version,
                &self.platform,
                &cached.dir,
                &cached.h1,
            ) {
                cache.fills.record_use(
                    &cache.cache,
                    &s.provider,
                    &s.version,
                    &self.platform,
                    &cached.dir,
                );
                return Ok((cached, downloaded, held));
            }
        }
        Err(cache_failed(
            cache,
            s,
            std::io::Error::other(format!(
                "its entry was removed or replaced {HOLD_ATTEMPTS} times while this run was about to use it; stop whatever keeps rewriting the cache (a cache prune in a loop?) and run again"
            )),
        ))
    }

    /// Fills the cache entry for this package (once, however many processes
    /// want it: the entry lock makes the others wait and reuse the result).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn fill_cache(
        &self,
        cache: &CacheUse,
        s: &Selected,
        preferred: &BTreeSet<PackageHash>,
        allowed: &BTreeSet<PackageHash>,
        lock_known: bool,
        staging: &Staging,
        emit: &(dyn Fn(InstallEvent) + Sync),
    ) -> Result<(CachedPackage, bool), FillError> {
        let cache_failed = |err| cache_failed(cache, s, err);
        let _turn = cache
            .fills
            .take_turn(&s.provider, &s.version, &self.platform)
            .await;
        crate::failpoint::pause("fill-before-lock");
        // Filled by another directory of this run while this one waited for
        // its turn: used as that directory uses it, held only for use (and
        // looked at again once held), without the entry's lock, which would
        // wait for that directory's use of it (issue 31).
        if cache.fills.filled(&s.provider, &s.version, &self.platform)
            && let Some(cached) = self
                .cached_matching(&s.provider, &s.version, preferred.clone(), None)
                .await
        {
            return Ok((cached, false));
        }
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
        crate::failpoint::pause("fill-after-lock");
        if let Some(cached) = self
            .cached_matching(
                &s.provider,
                &s.version,
                preferred.clone(),
                Some(&entry_lock),
            )
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
        let keep_archive = cache.keep_archives.then(|| entry_lock.archive_path());
        let package = self
            .stage_package(
                &meta,
                allowed,
                staging,
                &package_dir,
                emit,
                LinkMode::Copy,
                keep_archive.as_deref(),
            )
            .await
            .map_err(|err| match err {
                StageError::Refused(refusal) => FillError::Refused(refusal),
                err => FillError::Failed(self.stage_failed(s, err)),
            })?;
        let pinned = package_dir.clone();
        blocking(move || pin_mtimes(&pinned))
            .await
            .map_err(cache_failed)?;
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
                PackageLocation::Http(_) | PackageLocation::OciBlob(_) => meta.location.to_string(),
            },
            stamps: None,
        };
        // Publishing stats, renames and syncs: off the one runtime thread,
        // where it held up every other download and publication.
        let plugin_cache = cache.cache.clone();
        // The lock comes back to be held until the fill is recorded.
        let (dir, stamps, _entry_lock) = blocking(move || {
            let dir = plugin_cache.insert(&entry_lock, &record)?;
            let stamps = DirStamps::of(&dir);
            Ok((dir, stamps, entry_lock))
        })
        .await
        .map_err(cache_failed)?;
        crate::failpoint::pause("fill-after-insert");
        cache.fills.record(&s.provider, &s.version, &self.platform);
        if let Ok(Some(stamps)) = stamps {
            cache.fills.learn(
                &s.provider,
                &s.version,
                &self.platform,
                stamps,
                package.h1.clone(),
            );
        }
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

    pub(super) fn stage_failed(&self, s: &Selected, err: StageError) -> Diagnostic {
        match err {
            StageError::Source(err) => {
                fetch_error_diagnostic(&s.provider, &s.version, &s.constraints, &self.platform, err)
            }
            StageError::Package(message) => install_failed(&s.provider, &s.version, message),
            StageError::Refused(refusal) => refusal.diagnostic(),
        }
    }

    /// Obtains, authenticates and unpacks one package into `staged`.
    /// `placement` says how an unpacked (directory) package is placed; a
    /// cache entry must be a copy, since cache files are made read-only and
    /// a hard link would change the mirror's files too. With `keep_archive`,
    /// a package that came as an archive keeps it there once verified (a
    /// store that `serve` hands out as it came).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn stage_package(
        &self,
        meta: &PackageMeta,
        allowed: &BTreeSet<PackageHash>,
        staging: &Staging,
        staged: &Path,
        emit: &(dyn Fn(InstallEvent) + Sync),
        placement: LinkMode,
        keep_archive: Option<&Path>,
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
                // An unpacked directory vouches for nothing.
                self.admit(
                    &meta.provider,
                    &meta.version,
                    &AuthResult::Unauthenticated,
                    emit,
                )
                .map_err(|mut refusal| {
                    refusal.unpacked = Some(UnpackedCopy {
                        dir: src.clone(),
                        in_plugin_cache: self
                            .cache
                            .as_ref()
                            .is_some_and(|cache| src.starts_with(cache.cache.root())),
                        offline: self.offline,
                    });
                    StageError::Refused(refusal)
                })?;
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
                let package = self
                    .stage_archive(archive, meta, allowed, staged, emit)
                    .await?;
                if let Some(keep) = keep_archive {
                    tokio::fs::copy(path, keep)
                        .await
                        .map_err(|err| StageError::Package(err.to_string()))?;
                }
                Ok(package)
            }
            PackageLocation::Http(_) | PackageLocation::OciBlob(_) => {
                let last: Mutex<(Option<Instant>, u64)> = Mutex::new((None, 0));
                let report = |p: DownloadProgress| {
                    let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
                    last.1 = p.received;
                    if last.0.is_none_or(|at| at.elapsed() >= PROGRESS_INTERVAL) {
                        last.0 = Some(Instant::now());
                        progress(ProgressStage::Downloading(p));
                    }
                };
                let downloaded = |size| {
                    progress(ProgressStage::Downloading(DownloadProgress {
                        received: size,
                        total: Some(size),
                    }))
                };
                if keep_archive.is_none()
                    && let Some(package) = self
                        .stage_streamed(meta, allowed, staged, emit, &report, &downloaded)
                        .await?
                {
                    return Ok(package);
                }
                let dest = staging.new_path(&meta.filename).map_err(|err| {
                    StageError::Package(format!("could not create a staging directory: {err}"))
                })?;
                let fetched = async {
                    let download = async {
                        meta.location
                            .download(&self.downloader, Destination::File(&dest), &report)
                            .await
                            .map_err(|err| err.to_string())
                    };
                    let fetched = alongside_documents(&meta.authentication, download).await?;
                    downloaded(fetched.size);
                    let archive = LocalArchive {
                        path: dest.clone(),
                        shown_as: PathBuf::from(meta.location.to_string()),
                        digest: Some(fetched.sha256),
                    };
                    self.stage_archive(archive, meta, allowed, staged, emit)
                        .await
                }
                .await;
                // The archive is needed only until it is unpacked, or until
                // the attempt has failed, unless it is to be kept.
                match keep_archive {
                    Some(keep) if fetched.is_ok() => tokio::fs::rename(&dest, keep)
                        .await
                        .map_err(|err| StageError::Package(err.to_string()))?,
                    _ => {
                        let _ = tokio::fs::remove_file(&dest).await;
                    }
                }
                fetched
            }
        }
    }

    /// Downloads and unpacks at once, so the archive is never written and
    /// read back (see `fetch::Destination::Unpacked`). Nothing in `staged`
    /// counts until the archive's hash has passed the same checks as a
    /// saved archive's. `None` when the streaming unpacker declined the
    /// archive: the caller then downloads it again to a file, for the full
    /// extractor to install or refuse with its own message.
    async fn stage_streamed(
        &self,
        meta: &PackageMeta,
        allowed: &BTreeSet<PackageHash>,
        staged: &Path,
        emit: &(dyn Fn(InstallEvent) + Sync),
        report: &(dyn Fn(DownloadProgress) + Sync),
        downloaded: &(dyn Fn(u64) + Sync),
    ) -> Result<Option<StagedPackage>, StageError> {
        let into = UnpackInto {
            dir: staged.to_path_buf(),
            provider_type: meta.provider.type_name.clone(),
            limits: self.limits.clone(),
        };
        let download = async {
            meta.location
                .download(&self.downloader, Destination::Unpacked(&into), report)
                .await
                .map_err(|err| err.to_string())
        };
        let fetched = alongside_documents(&meta.authentication, download).await?;
        downloaded(fetched.size);
        let zh = PackageHash::zh_of_digest(&fetched.sha256);
        let (auth, signed_hashes) = authenticate_archive(meta, &fetched.sha256, &zh, fetched.size)
            .await
            .map_err(StageError::Package)?;
        self.admit(&meta.provider, &meta.version, &auth, emit)
            .map_err(StageError::Refused)?;
        match fetched.unpacked {
            Some(Ok(files)) => {
                report_verified(meta, &auth, emit);
                staged_package(meta, allowed, &files, zh, auth, signed_hashes)
                    .map(Some)
                    .map_err(StageError::Package)
            }
            declined => {
                if let Some(Err(reason)) = declined {
                    tracing::debug!(
                        "{} {}: unpacking while downloading declined ({reason}); downloading the archive again to unpack it from a file",
                        meta.provider,
                        meta.version
                    );
                }
                let dir = staged.to_path_buf();
                blocking(move || match std::fs::remove_dir_all(&dir) {
                    Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err),
                    _ => Ok(()),
                })
                .await
                .map_err(|err| StageError::Package(err.to_string()))?;
                Ok(None)
            }
        }
    }

    pub(super) async fn stage_archive(
        &self,
        archive: LocalArchive,
        meta: &PackageMeta,
        allowed: &BTreeSet<PackageHash>,
        staged: &Path,
        emit: &(dyn Fn(InstallEvent) + Sync),
    ) -> Result<StagedPackage, StageError> {
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
                        StageError::Package(format!(
                            "failed to compute checksum for {}: {err}",
                            archive.display()
                        ))
                    })?;
                zh_digest(&zh)
                    .ok_or_else(|| StageError::Package("failed to compute checksum".to_string()))?
            }
        };
        let zh = PackageHash::zh_of_digest(&digest);
        let size = tokio::fs::metadata(&archive)
            .await
            .map_err(|err| {
                StageError::Package(format!("failed to read {}: {err}", archive.display()))
            })?
            .len();
        let (auth, signed_hashes) = authenticate_archive(meta, &digest, &zh, size)
            .await
            .map_err(StageError::Package)?;
        self.admit(&meta.provider, &meta.version, &auth, emit)
            .map_err(StageError::Refused)?;
        report_verified(meta, &auth, emit);

        let type_name = meta.provider.type_name.clone();
        let limits = self.limits.clone();
        let dest = staged.to_path_buf();
        let src = archive.clone();
        let _slot = UNPACKING_SLOTS
            .acquire()
            .await
            .map_err(|err| StageError::Package(err.to_string()))?;
        let files = blocking(move || {
            std::fs::create_dir_all(&dest)?;
            extract_package(&src, &dest, &type_name, &limits)
                .map_err(|err| std::io::Error::other(err.shown_as(&shown_as)))
        })
        .await
        .map_err(|err| StageError::Package(err.to_string()))?;
        staged_package(meta, allowed, &files, zh, auth, signed_hashes).map_err(StageError::Package)
    }
}

/// Tells the user the package passed authentication and is being unpacked
/// (at once, when it was unpacked while it downloaded).
fn report_verified(meta: &PackageMeta, auth: &AuthResult, emit: &(dyn Fn(InstallEvent) + Sync)) {
    if let AuthResult::Signed(check) = auth
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
}

/// The unpacked package's `h1:`, checked against what the mirror listed and
/// what the lock file allows.
fn staged_package(
    meta: &PackageMeta,
    allowed: &BTreeSet<PackageHash>,
    files: &[ExtractedFile],
    zh: PackageHash,
    auth: AuthResult,
    signed_hashes: Vec<PackageHash>,
) -> Result<StagedPackage, String> {
    let entries: Vec<(String, [u8; 32])> =
        files.iter().map(|f| (f.name.clone(), f.sha256)).collect();
    let h1 = PackageHash::h1_of_files(&entries).map_err(|err| err.to_string())?;
    authenticate_files(meta, &zh, &h1)?;
    if !allowed.is_empty() && !allowed.contains(&zh) && !allowed.contains(&h1) {
        let release = auth
            .vouches_for_release()
            .then_some(signed_hashes.as_slice());
        return Err(format!(
            "the current package for {} {} doesn't match any of the checksums previously recorded in the dependency lock file; for more information: {CHECKSUM_DOCS}{}",
            meta.provider,
            meta.version,
            uncovered_platform(&meta.platform, allowed, release)
        ));
    }
    Ok(StagedPackage {
        h1,
        zh: Some(zh),
        auth,
        signed_hashes,
    })
}

/// Why a cache entry was not filled: the provider policy refused the
/// package (which `serve` answers with 403 and the decision), or anything
/// else, as its diagnostic.
#[derive(Clone)]
pub enum FillError {
    Refused(Box<Refusal>),
    Failed(Diagnostic),
}

impl From<Diagnostic> for FillError {
    fn from(diag: Diagnostic) -> Self {
        FillError::Failed(diag)
    }
}

impl From<FillError> for Diagnostic {
    fn from(err: FillError) -> Self {
        match err {
            FillError::Refused(refusal) => refusal.diagnostic(),
            FillError::Failed(diag) => diag,
        }
    }
}

/// What to do about a package that matches none of the lock file's
/// checksums, when that most likely means the lock was made on another
/// platform: this platform's checksums are missing, and tfinstall's command
/// adds them. Nothing is suggested when the lock's `zh:` hashes are not the
/// signed release's (`release`): then the release itself changed, which
/// no command should paper over.
fn uncovered_platform(
    platform: &Platform,
    locked: &BTreeSet<PackageHash>,
    release: Option<&[PackageHash]>,
) -> String {
    let other_release = release.is_some_and(|release| {
        locked
            .iter()
            .any(|hash| hash.scheme() == "zh" && !release.contains(hash))
    });
    if other_release {
        return String::new();
    }
    format!(
        "\n\nThe lock file records no checksum of this package for {platform}, the platform of this machine; it was probably made on another. If you trust where this package comes from, add this platform's checksums with:\n  tfinstall providers lock -platform={platform}"
    )
}

/// An archive on disk, ready to be authenticated and unpacked.
pub(super) struct LocalArchive {
    pub(super) path: PathBuf,
    /// How messages name it: its URL when it was downloaded.
    pub(super) shown_as: PathBuf,
    /// Its SHA-256 when already computed while downloading.
    pub(super) digest: Option<[u8; 32]>,
}

pub(super) struct StagedPackage {
    pub(super) h1: PackageHash,
    /// The archive's hash, when the package came as an archive.
    pub(super) zh: Option<PackageHash>,
    pub(super) auth: AuthResult,
    /// What goes into the lock entry beside `h1`: a signed checksum list's
    /// hashes for every platform, or a content-addressed archive's `zh:`.
    pub(super) signed_hashes: Vec<PackageHash>,
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
    let advice = uncovered_platform(&meta.platform, &allowed, None);
    blocking(move || {
        let h1 = PackageHash::h1_of_dir(&src)?;
        let non_zh: Vec<&PackageHash> = allowed.iter().filter(|h| h.scheme() != "zh").collect();
        if !non_zh.is_empty() && !non_zh.contains(&&h1) {
            return Err(std::io::Error::other(format!(
                "the local package for {provider} {version} doesn't match any of the checksums previously recorded in the dependency lock file (this might be because the available checksums are for packages targeting different platforms); for more information: {CHECKSUM_DOCS}{advice}"
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

fn zh_digest(zh: &PackageHash) -> Option<[u8; 32]> {
    let bytes = hex::decode(zh.to_string().strip_prefix("zh:")?).ok()?;
    bytes.try_into().ok()
}

pub(super) fn install_failed(
    provider: &ProviderAddr,
    version: &Version,
    err: String,
) -> Diagnostic {
    Diagnostic::error(
        "Failed to install provider",
        format!(
            "Error while installing {} v{version}: {err}",
            provider.for_display()
        ),
    )
}

/// Terraform's advice when the selected version speaks no plugin protocol
/// this installer's Terraform can run ("Incompatible provider version" in
/// `internal/command/init.go`): which version to pin instead.
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

#[cfg(test)]
mod tests {
    use super::*;

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
