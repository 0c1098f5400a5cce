//! Stage three: placing each selected package in the working directory's
//! staging area (from the installed copy, the plugin cache or a fresh
//! download) and working out its lock entry.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use futures_util::StreamExt;
use futures_util::stream;

use crate::addr::{Platform, ProviderAddr};
use crate::diag::{Diagnostic, Diagnostics};
use crate::fsutil::blocking;
use crate::install::context::{InstallMode, Installer, OtherPlatforms, Selected};
use crate::install::events::{InstallEvent, OrderedEvents, ProgressStage};
use crate::install::hash_memo::HashMemo;
use crate::install::link::{LinkMode, link_cached_package};
use crate::install::obtain::{StagedPackage, install_failed};
use crate::install::select::preferred_hashes;
use crate::install::staging::Staging;
use crate::lockfile::Locks;
use crate::platform_hashes::{FoundHashes, HashQuery};
use crate::source::SourceError;
use crate::source::authentication::StageError;
use crate::verify::AuthResult;
use crate::verify::hash::PackageHash;
use crate::version::{Version, VersionConstraints};

pub(super) struct Placed {
    pub(super) provider: ProviderAddr,
    pub(super) version: Version,
    pub(super) constraints: VersionConstraints,
    pub(super) staged: Option<PathBuf>,
    pub(super) installed_hash: PackageHash,
    pub(super) hashes: BTreeSet<PackageHash>,
    /// Whether the lock entry ends up with only locally computed hashes, for
    /// Terraform's "Incomplete lock file information for providers".
    pub(super) incomplete: bool,
    pub(super) third_party: bool,
    /// How the package was authenticated, remembered beside the hash of
    /// a staged package for the provider policy's later looks.
    pub(super) auth: AuthResult,
}

impl Installer {
    pub(super) async fn place_all(
        &self,
        selected: Vec<Selected>,
        previous: &Locks,
        staging: &Staging,
        mode: InstallMode,
        memo: &HashMemo,
    ) -> Result<Vec<Placed>, Diagnostics> {
        let order = Arc::new(OrderedEvents::new(selected.len(), self.events.clone()));
        let results: Vec<Result<Placed, Diagnostic>> =
            stream::iter(selected.into_iter().enumerate())
                .map(|(index, s)| {
                    let order = order.clone();
                    async move {
                        let emit = |event| order.emit(index, event);
                        let (provider, version) = (s.provider.clone(), s.version.clone());
                        let result = self
                            .place_one(s, previous, staging, mode, memo, &emit)
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

    /// Places one package and works out its lock entry, with the other
    /// platforms' hashes found at the same time.
    pub(super) async fn place_one(
        &self,
        s: Selected,
        previous: &Locks,
        staging: &Staging,
        mode: InstallMode,
        memo: &HashMemo,
        emit: &(dyn Fn(InstallEvent) + Sync),
    ) -> Result<Placed, Diagnostic> {
        let (provider, version) = (s.provider.clone(), s.version.clone());
        let new_entry = previous
            .get(&s.provider)
            .is_none_or(|lock| lock.version != s.version);
        let others = async {
            match &self.lock_platforms {
                Some(others) if new_entry && !others.platforms.is_empty() => self
                    .other_platforms(others, &provider, &version)
                    .await
                    .map(Some),
                _ => Ok(None),
            }
        };
        let (mut placed, others) = futures_util::future::try_join(
            self.place_here(s, previous, staging, mode, memo, emit),
            others,
        )
        .await?;
        if let Some(platforms) = others {
            for (_, found) in &platforms {
                placed.hashes.extend(found.set());
            }
            // The entry now holds more than this platform's own hashes.
            placed.incomplete = false;
            emit(InstallEvent::PlatformHashes {
                provider,
                version,
                platforms,
            });
        }
        Ok(placed)
    }

    /// The hashes of every other platform's package, all at once.
    async fn other_platforms(
        &self,
        others: &OtherPlatforms,
        provider: &ProviderAddr,
        version: &Version,
    ) -> Result<Vec<(Platform, FoundHashes)>, Diagnostic> {
        let none = BTreeSet::new();
        futures_util::future::try_join_all(others.platforms.iter().map(|platform| {
            let query = HashQuery {
                provider,
                version,
                platform,
                locked: &none,
                installed: None,
            };
            async move {
                let found = others
                    .hashes
                    .find(self.source.as_ref(), &query)
                    .await
                    .map_err(|err| other_platform_failed(others, &query, err))?;
                Ok((platform.clone(), found))
            }
        }))
        .await
    }

    async fn place_here(
        &self,
        s: Selected,
        previous: &Locks,
        staging: &Staging,
        mode: InstallMode,
        memo: &HashMemo,
        emit: &(dyn Fn(InstallEvent) + Sync),
    ) -> Result<Placed, Diagnostic> {
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
            let dir = self
                .layout
                .package_dir(&s.provider, &s.version, &self.platform);
            let auth = memo.installed_auth(&dir, &hash);
            self.report_found(&s.provider, &s.version, &auth, emit);
            return Ok(Placed {
                hashes: prior_hashes,
                provider: s.provider,
                version: s.version,
                constraints: lock.map(|l| l.constraints.clone()).unwrap_or(s.constraints),
                staged: None,
                installed_hash: hash,
                incomplete: false,
                third_party: false,
                auth,
            });
        }

        let install_failed = |err: String| install_failed(&s.provider, &s.version, err);
        let allowed = if mode == InstallMode::Force {
            BTreeSet::new()
        } else {
            preferred.clone()
        };
        if let Some(cache) = &self.cache {
            let (cached, downloaded, held) = self
                .hold_cached(
                    cache,
                    &s,
                    &preferred,
                    &allowed,
                    lock.is_some(),
                    staging,
                    emit,
                )
                .await?;
            // Filled earlier in this run for another working directory: it
            // was installed by this run all the same.
            let installed_now =
                downloaded || cache.fills.filled(&s.provider, &s.version, &self.platform);
            if !downloaded {
                self.report_found(&s.provider, &s.version, &cached.auth, emit);
            }
            if !installed_now {
                emit(InstallEvent::CacheHit {
                    provider: s.provider.clone(),
                    version: s.version.clone(),
                });
            } else if !downloaded {
                emit(InstallEvent::Installing {
                    provider: s.provider.clone(),
                    version: s.version.clone(),
                });
            }
            let staged = staging
                .new_path(&format!("{}-{}", s.provider.type_name, s.version))
                .map_err(|err| {
                    install_failed(format!("could not create a staging directory: {err}"))
                })?;
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
            drop(held);
            let package = StagedPackage {
                h1: cached.h1,
                zh: None,
                auth: cached.auth,
                signed_hashes: cached.signed_hashes,
            };
            return Ok(self.placed(s, staged, package, &preferred, installed_now, emit));
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
        let staged = staging
            .new_path(&format!("{}-{}", s.provider.type_name, s.version))
            .map_err(|err| {
                install_failed(format!("could not create a staging directory: {err}"))
            })?;
        let package = self
            .stage_package(
                &meta,
                &allowed,
                staging,
                &staged,
                emit,
                LinkMode::Auto,
                None,
            )
            .await
            .map_err(|err| self.stage_failed(&s, err))?;

        Ok(self.placed(s, staged, package, &preferred, true, emit))
    }

    /// The lock entry and report for a package staged at `staged`.
    /// `installed_now` is false for a cache hit, which Terraform reports as
    /// "Using … from the shared cache directory" instead of "Installed".
    pub(super) fn placed(
        &self,
        s: Selected,
        staged: PathBuf,
        package: StagedPackage,
        preferred: &BTreeSet<PackageHash>,
        installed_now: bool,
        emit: &(dyn Fn(InstallEvent) + Sync),
    ) -> Placed {
        let (hashes, incomplete) = lock_hashes(preferred, &package);
        let third_party = installed_now && package.auth.is_third_party_signed();
        if installed_now {
            emit(InstallEvent::Installed {
                provider: s.provider.clone(),
                version: s.version.clone(),
                auth: package.auth.clone(),
            });
        }
        Placed {
            provider: s.provider,
            version: s.version,
            constraints: s.constraints,
            staged: Some(staged),
            installed_hash: package.h1,
            hashes,
            incomplete,
            third_party,
            auth: package.auth,
        }
    }
}

/// Why another platform's hashes could not be found, naming the platform,
/// what listed it and what to do.
fn other_platform_failed(
    others: &OtherPlatforms,
    query: &HashQuery<'_>,
    err: StageError,
) -> Diagnostic {
    let (provider, version, platform) = (query.provider, query.version, query.platform);
    let failed = |err: &dyn std::fmt::Display| {
        Diagnostic::error(
            "Failed to obtain checksums for another platform",
            format!(
                "Error while obtaining the checksums of {} v{version} for {platform} (listed by {}): {err}",
                provider.for_display(),
                others.listed_by
            ),
        )
    };
    match err {
        StageError::Source(SourceError::PlatformNotSupported(_)) => Diagnostic::error(
            "Provider not available for a locked platform",
            format!(
                "Provider {provider} v{version} has no package for {platform}, one of the platforms {} asks the lock file to cover. Remove {platform} from that list, or choose a version of {} that is released for it.",
                others.listed_by,
                provider.for_display()
            ),
        ),
        StageError::Source(err) => failed(&err),
        StageError::Package(err) => failed(&err),
        StageError::Refused(refusal) => refusal.diagnostic(),
    }
}

/// The lock entry's hashes for a placed package, and whether they are
/// incomplete (only good for this platform, which Terraform warns about as
/// "Incomplete lock file information for providers"): the lock's own, the
/// package's `h1:`, and what the source vouches for beyond it (a signed
/// checksum list's `zh:` for every platform, or an OCI layer's digest).
fn lock_hashes(
    preferred: &BTreeSet<PackageHash>,
    package: &StagedPackage,
) -> (BTreeSet<PackageHash>, bool) {
    let mut hashes = preferred.clone();
    hashes.insert(package.h1.clone());
    let signed = package.auth.vouches_for_release();
    // OpenTofu counts a trusted mirror's hashes of other platforms
    // (`trust_all_hashes`) as it counts its registry's unsigned ones.
    let other_platforms = package
        .signed_hashes
        .iter()
        .any(|h| *h != package.h1 && Some(h) != package.zh.as_ref());
    // Terraform's test: nothing signed this run, and the lock had no
    // hashes for this version or exactly the one just computed.
    let incomplete = (!signed || package.signed_hashes.is_empty())
        && !other_platforms
        && (preferred.is_empty() || *preferred == BTreeSet::from([package.h1.clone()]));
    hashes.extend(package.signed_hashes.iter().cloned());
    (hashes, incomplete)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(text: &str) -> PackageHash {
        PackageHash::parse(text).unwrap()
    }

    const H1: &str = "h1:6FG2Xh7Bfp8mN3qvEnNTy39m5ZqtzEQ/BhYhOyyyjn0=";
    const ZH_HERE: &str = "zh:53e30545ff8926a8e30ad30648991ca8b93b6fa496272cd23b26763c8ee84515";
    const ZH_THERE: &str = "zh:02a1675fd8de126a00460942aaae242e65ca3380b5bb192e8773ef3da9073fd2";

    fn package(auth: AuthResult, signed: &[&str]) -> StagedPackage {
        StagedPackage {
            h1: hash(H1),
            zh: Some(hash(ZH_HERE)),
            auth,
            signed_hashes: signed.iter().map(|h| hash(h)).collect(),
        }
    }

    fn set(hashes: &[&str]) -> BTreeSet<PackageHash> {
        hashes.iter().map(|h| hash(h)).collect()
    }

    #[test]
    fn an_unsigned_package_new_to_the_lock_file_gets_its_h1_only_and_is_incomplete() {
        let (hashes, incomplete) =
            lock_hashes(&BTreeSet::new(), &package(AuthResult::Unauthenticated, &[]));
        assert_eq!(hashes, set(&[H1]));
        assert!(incomplete);
        // The lock file already held just that h1: still incomplete.
        let (_, incomplete) = lock_hashes(&set(&[H1]), &package(AuthResult::Unauthenticated, &[]));
        assert!(incomplete);
    }

    #[test]
    fn an_unsigned_package_keeps_what_the_lock_file_vouched_for() {
        let locked = set(&[H1, ZH_HERE, ZH_THERE]);
        let (hashes, incomplete) =
            lock_hashes(&locked, &package(AuthResult::VerifiedChecksum, &[]));
        assert_eq!(hashes, locked);
        assert!(!incomplete);
    }

    #[test]
    fn a_release_vouched_for_adds_every_platforms_archive_hash() {
        let (hashes, incomplete) = lock_hashes(
            &BTreeSet::new(),
            &package(AuthResult::SigningSkipped, &[ZH_HERE, ZH_THERE]),
        );
        assert_eq!(hashes, set(&[H1, ZH_HERE, ZH_THERE]));
        assert!(!incomplete);
    }

    #[test]
    fn an_oci_layer_digest_is_recorded_but_does_not_make_the_entry_complete() {
        let (hashes, incomplete) = lock_hashes(
            &BTreeSet::new(),
            &package(AuthResult::VerifiedChecksum, &[ZH_HERE]),
        );
        assert_eq!(hashes, set(&[H1, ZH_HERE]));
        assert!(incomplete, "a mirror vouches for no other platform");
    }

    #[test]
    fn a_trusted_mirrors_hashes_of_other_platforms_complete_the_entry() {
        let (hashes, incomplete) = lock_hashes(
            &BTreeSet::new(),
            &package(AuthResult::VerifiedChecksum, &[H1, ZH_HERE, ZH_THERE]),
        );
        assert_eq!(hashes, set(&[H1, ZH_HERE, ZH_THERE]));
        assert!(!incomplete);
    }
}
