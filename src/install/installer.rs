//! The installer: decides one version per provider ([`super::select`]),
//! obtains and verifies each package once ([`super::obtain`]) and places it
//! in the working directory's staging area with its lock entry
//! ([`super::place`]). It reports progress as events and never prints; the
//! command decides how to show them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use futures_util::StreamExt;
use futures_util::stream;

use crate::addr::ProviderAddr;
use crate::diag::{Diagnostic, Diagnostics};
pub use crate::install::cache_use::CacheUse;
use crate::install::context::Selected;
pub use crate::install::context::{InstallMode, Installer};
use crate::install::events::InstallEvent;
use crate::install::hash_memo::HashMemo;
pub use crate::install::obtain::FillError;
use crate::install::select::{check_builtin, preferred_hashes};
use crate::install::staging::Staging;
use crate::lockfile::{LockedProvider, Locks};
use crate::verify::hash::PackageHash;
use crate::version::{Version, VersionConstraints};

/// What a successful run staged, ready to be committed by the command.
pub struct InstallOutcome {
    pub locks: Locks,
    pub staging: Staging,
    /// (staged directory, final directory) pairs.
    pub moves: Vec<(PathBuf, PathBuf)>,
    /// Every selected provider with the `h1:` hash of its installed package.
    pub selections: BTreeMap<ProviderAddr, (Version, PackageHash)>,
    /// Providers whose lock entry holds only locally computed hashes, for
    /// Terraform's "Incomplete lock file information for providers".
    pub incomplete: Vec<ProviderAddr>,
    /// Whether any package was signed by a partner or its own author, which
    /// is when Terraform prints its note on provider signing.
    pub third_party_signed: bool,
    /// Installed packages' hashes, including the staged ones under their
    /// final paths: save it once the staging area is committed.
    pub memo: HashMemo,
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
        // Made at the first package placed or file written: a run with
        // every package installed already (a no-op) makes none.
        let staging = Staging::when_needed(&self.layout.data_dir);
        let fetched = self
            .place_all(selected, previous, &staging, mode, &memo)
            .await?;

        // Providers no longer required leave the lock file, as at the end of
        // Terraform's `EnsureProviderVersions`.
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
                outcome
                    .memo
                    .record(&staged, &target, &f.installed_hash, &f.auth);
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

    /// The required providers that have packages to fetch: neither built in
    /// nor overridden for development.
    fn to_fetch(
        &self,
        requirements: &BTreeMap<ProviderAddr, VersionConstraints>,
    ) -> Vec<(ProviderAddr, VersionConstraints)> {
        requirements
            .iter()
            .filter(|(p, _)| !p.is_builtin() && !self.dev_overrides.contains(*p))
            .map(|(p, c)| (p.clone(), c.clone()))
            .collect()
    }

    /// `providers lock`: the version of each required provider, chosen as
    /// `init` would choose it in `mode` (the lock file's when it has one),
    /// with nothing fetched but what choosing needs and nothing written.
    /// `memo` is the caller's, which goes on to hash the installed packages.
    pub async fn choose_versions(
        &self,
        requirements: &BTreeMap<ProviderAddr, VersionConstraints>,
        previous: &Locks,
        mode: InstallMode,
        memo: &HashMemo,
    ) -> Result<Vec<(ProviderAddr, Version)>, Diagnostics> {
        let wanted = self.to_fetch(requirements);
        let selected = self.select_versions(&wanted, previous, mode, memo).await?;
        Ok(selected
            .into_iter()
            .map(|s| (s.provider, s.version))
            .collect())
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
        let wanted = self.to_fetch(requirements);
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
                        let locked = previous.get(&s.provider).is_some();
                        // Held only to see it whole and record the use: a
                        // warmed entry is one the image is meant to keep.
                        let (_, added, _) = self
                            .hold_cached(cache, &s, &preferred, &preferred, locked, staging, emit)
                            .await?;
                        Ok((s.provider, s.version, added))
                    }
                })
                .buffered(self.parallelism.max(1))
                .collect()
                .await;
        Diagnostics::collect(results)
    }

    /// `init` while modules still arrive: makes sure the plugin cache (or
    /// the run's store) holds the package this installer would install for
    /// `provider` if `constraints` were all there is to know, unless it is
    /// installed or cached already. Nothing is placed and nothing reported:
    /// the real installation decides and finds the entry, and meets any
    /// failure again itself.
    pub async fn prefetch(
        &self,
        provider: &ProviderAddr,
        constraints: &VersionConstraints,
        previous: &Locks,
    ) -> Result<(), Diagnostic> {
        let Some(cache) = &self.cache else {
            return Ok(());
        };
        if provider.is_builtin() || self.dev_overrides.contains(provider) {
            return Ok(());
        }
        // The lock file's version, with an entry in the cache, is left to
        // the real installation: it looks the entry over anyway (and fills
        // it afresh in the rare case it does not match the lock file), and
        // looking here too cost each provider of each directory of `init
        // DIR…` its lookups twice, on the runtime's one thread.
        if let Some(lock) = previous.get(provider)
            && constraints.allows(&lock.version)
            && cache
                .cache
                .entry_dir(provider, &lock.version, &self.platform)
                .is_dir()
        {
            return Ok(());
        }
        let memo = HashMemo::load(&self.layout.data_dir);
        let s = self
            .select_one(provider, constraints, previous, InstallMode::Normal, &memo)
            .await?;
        if s.already_installed.is_some() || s.cached.is_some() {
            return Ok(());
        }
        let staging = Staging::create(cache.cache.root()).map_err(|err| {
            Diagnostic::error(
                "Failed to prepare the plugin cache",
                format!(
                    "Could not create a staging directory in {}: {err}.",
                    cache.cache.root().display()
                ),
            )
        })?;
        let preferred = preferred_hashes(previous, &s);
        let locked = previous.get(provider).is_some();
        self.hold_cached(cache, &s, &preferred, &preferred, locked, &staging, &|_| {})
            .await?;
        Ok(())
    }

    /// `serve`: the store's entry for exactly this package, filled from the
    /// source when it is missing or nothing vouches for it; once however
    /// many ask at the same moment (the run's turns and the entry lock).
    /// `prefetched` is the source's answer for the package when the caller
    /// already has it. Returns the entry's directory, and whether this call
    /// filled it.
    pub async fn fill_entry(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        prefetched: Option<crate::source::PackageMeta>,
    ) -> Result<(PathBuf, bool), FillError> {
        let Some(cache) = &self.cache else {
            return Err(Diagnostic::error("No store", "serve needs a store to fill.").into());
        };
        let none = BTreeSet::new();
        if let Some(cached) = self
            .cached_matching(provider, version, none.clone(), None)
            .await
        {
            return Ok((cached.dir, false));
        }
        let staging = Staging::create(cache.cache.root()).map_err(|err| {
            Diagnostic::error(
                "Failed to prepare the store",
                format!(
                    "Could not create a staging directory in {}: {err}.",
                    cache.cache.root().display()
                ),
            )
        })?;
        let selected = Selected {
            provider: provider.clone(),
            version: version.clone(),
            constraints: VersionConstraints::default(),
            already_installed: None,
            cached: None,
            prefetched: prefetched.map(Ok),
        };
        let emit = |event: InstallEvent| (self.events)(event);
        let (cached, filled) = self
            .fill_cache(cache, &selected, &none, &none, false, &staging, &emit)
            .await?;
        Ok((cached.dir, filled))
    }
}
