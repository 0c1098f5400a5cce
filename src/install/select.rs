//! Stage one: one version per provider, from the lock file, the installed
//! packages, the plugin cache or the source's version list (steps 1 and 2
//! of Terraform's installer).

use std::collections::BTreeSet;

use futures_util::StreamExt;
use futures_util::stream;

use crate::addr::{Platform, ProviderAddr};
use crate::cache::EntryLock;
use crate::cache::facts::{EntryFacts, entry_h1};
use crate::diag::{Diagnostic, Diagnostics};
use crate::install::context::{CachedPackage, InstallMode, Installer, Selected};
use crate::install::events::InstallEvent;
use crate::install::hash_memo::HashMemo;
use crate::lockfile::Locks;
use crate::package::extract::find_executable;
use crate::source::SourceError;
use crate::verify::hash::PackageHash;
use crate::version::{Version, VersionConstraints};

impl Installer {
    /// Steps 1 and 2 of Terraform's installer, for all providers at once.
    pub(super) async fn select_versions(
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

    pub(super) async fn select_one(
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
            self.check_locked(provider, &lock.version)?;
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
                .cached_matching(provider, &lock.version, preferred, None)
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
        .filter(|version| {
            self.version_allowed(provider, version)
                && self.may_need_source_package(provider, version)
        });
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
        let (versions, removed) = self.screen_versions(provider, available.versions.clone());
        let chosen = match locked {
            Some(lock) => versions.iter().find(|v| **v == lock.version),
            None => constraints.newest_allowed(&versions),
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
                if locked.is_none()
                    && let Some(refused) = self
                        .policy
                        .as_ref()
                        .and_then(|policy| policy.none_allowed(provider, constraints, &removed))
                {
                    return Err(refused);
                }
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
    pub(super) fn may_need_source_package(
        &self,
        provider: &ProviderAddr,
        version: &Version,
    ) -> bool {
        self.cache.as_ref().is_none_or(|cache| {
            cache
                .cache
                .lookup(provider, version, &self.platform)
                .is_none()
        })
    }

    /// The `h1:` hash of the installed package when it matches one of the
    /// given hashes (only `h1:` can match an unpacked directory) and the
    /// provider policy admits it as it was authenticated when installed;
    /// remembered from earlier runs for files that did not change.
    pub(super) fn installed_matching(
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
        (hashes.contains(&hash)
            && self.admits_found(provider, version, &memo.installed_auth(&dir, &hash)))
        .then_some(hash)
    }

    /// The cache entry for this package, if this run may use it: the
    /// provider policy admits it as its provenance says it was
    /// authenticated, and its `h1:` (or, for entries tfinstall made, the
    /// archive's `zh:`) is in `preferred`; or, for a provider the lock file
    /// has no hashes for, the entry carries tfinstall's record of how it
    /// was verified (so the lock entry can be complete without a download),
    /// or the user allowed entries that break the lock file. `held` is the
    /// entry's lock
    /// when the caller holds it; the look is then the one that decides
    /// whether to fill, so it is made afresh (the module documentation of
    /// [`crate::cache`] says why).
    pub(super) async fn cached_matching(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        preferred: BTreeSet<PackageHash>,
        held: Option<&EntryLock>,
    ) -> Option<CachedPackage> {
        let cache = self.cache.as_ref()?;
        let entry = cache.cache.lookup(provider, version, &self.platform)?;
        let h1 = match cache
            .fills
            .known_h1(provider, version, &self.platform, &entry.dir)
        {
            Some(h1) => h1,
            None => {
                let hashed = entry_h1(entry.clone(), provider.type_name.clone()).await?;
                if let Some(stamps) = hashed.stamps {
                    if hashed.computed
                        && let Some(meta) = entry
                            .meta
                            .as_ref()
                            .filter(|m| m.h1() == Some(hashed.h1.clone()))
                    {
                        cache
                            .cache
                            .remember_stamps(&entry.dir, meta, stamps.clone(), held);
                    }
                    cache
                        .fills
                        .learn(provider, version, &self.platform, stamps, hashed.h1.clone());
                }
                hashed.h1
            }
        };
        let facts = EntryFacts::of(h1, entry.meta.as_ref());
        // A store that hands out archives needs the entry's own.
        let archive_there = !cache.keep_archives || cache.cache.archive(&entry).is_some();
        let usable = archive_there
            && self.admits_found(provider, version, &facts.auth)
            && if preferred.is_empty() {
                facts.recorded || cache.may_break_lock_file
            } else {
                preferred.contains(&facts.h1) || facts.zh.is_some_and(|z| preferred.contains(&z))
            };
        usable.then_some(CachedPackage {
            dir: entry.dir,
            h1: facts.h1,
            auth: facts.auth,
            signed_hashes: facts.signed_hashes,
        })
    }
}

/// What `-offline` could have installed instead, and how to get more.
pub(super) fn offline_versions(versions: &[Version], platform: &Platform) -> String {
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

/// The lock file's `h1:`/`zh:` hashes for the selected version, which the
/// package must match (the lock entry's `PreferredHashes`, as Terraform's
/// `internal/providercache/installer.go` takes them); none when the lock has
/// another version.
pub(super) fn preferred_hashes(previous: &Locks, s: &Selected) -> BTreeSet<PackageHash> {
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

pub(super) fn check_builtin(
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
/// discovery but runs no provider registry (`ErrHostNoProviders`, "Invalid
/// provider registry host").
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Hostname;
    use crate::lockfile::LockedProvider;

    fn builtin(type_name: &str) -> ProviderAddr {
        ProviderAddr::new(
            Hostname::parse("terraform.io").unwrap(),
            "builtin",
            type_name,
        )
    }

    #[test]
    fn only_terraform_is_built_in_and_it_takes_no_constraints() {
        assert!(check_builtin(&builtin("terraform"), &VersionConstraints::empty()).is_ok());
        let err = check_builtin(&builtin("tf"), &VersionConstraints::empty()).unwrap_err();
        assert_eq!(
            err.detail,
            "Cannot use terraform.io/builtin/tf: this Terraform release has no built-in provider named \"tf\"."
        );
        let pinned = VersionConstraints::parse("1.0.0").unwrap();
        let err = check_builtin(&builtin("terraform"), &pinned).unwrap_err();
        assert!(
            err.detail
                .ends_with("built-in providers do not support explicit version constraints.")
        );
    }

    #[test]
    fn the_lock_files_hashes_bind_only_the_version_it_locked() {
        let provider = ProviderAddr::parse("hashicorp/null").unwrap();
        let h1 = PackageHash::parse("h1:6FG2Xh7Bfp8mN3qvEnNTy39m5ZqtzEQ/BhYhOyyyjn0=").unwrap();
        let mut locks = Locks::default();
        locks.insert(LockedProvider {
            addr: provider.clone(),
            version: Version::new(3, 1, 0),
            constraints: VersionConstraints::empty(),
            hashes: BTreeSet::from([h1.clone()]),
        });
        let selected = |version: Version| Selected {
            provider: provider.clone(),
            version,
            constraints: VersionConstraints::empty(),
            already_installed: None,
            cached: None,
            prefetched: None,
        };
        assert_eq!(
            preferred_hashes(&locks, &selected(Version::new(3, 1, 0))),
            BTreeSet::from([h1])
        );
        assert!(preferred_hashes(&locks, &selected(Version::new(3, 2, 0))).is_empty());
    }

    #[test]
    fn offline_failures_name_what_is_held_and_how_to_get_more() {
        let linux = Platform::parse("linux_amd64").unwrap();
        assert_eq!(
            offline_versions(&[Version::new(1, 0, 0), Version::new(1, 1, 0)], &linux),
            ". With -offline, the plugin cache and the local directories hold only 1.0.0, 1.1.0 for linux_amd64: run init without -offline to fetch it, or fill the cache with tfinstall cache warm"
        );
        assert!(offline_versions(&[], &linux).contains("hold no version for linux_amd64"));
    }
}
