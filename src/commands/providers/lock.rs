//! `tfinstall providers lock`: Terraform's `providers lock`. Each provider's
//! version is chosen once, as Terraform's installer chooses it in its
//! "force" mode (the lock file's version, else the newest allowed), and the
//! hashes of its package for every platform asked for are found where
//! `init -platform` finds them ([`crate::platform_hashes`]) and merged into
//! the lock file as Terraform merges them: every provider keeps its
//! previous hashes and gains each platform's.
//!
//! Unlike Terraform, every provider and platform is worked on at once;
//! packages are hashed in memory as they stream, never written or
//! unpacked; and what is already at hand is used instead of a download:
//! the package installed here when the lock file vouches for it, a plugin
//! cache entry with tfinstall's record of its signed release. Without
//! `-platform`, the platforms the configuration commits to
//! (`.tfinstall-platforms`, `TFINSTALL_LOCK_PLATFORMS`) are locked with
//! this one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use url::Url;

use crate::addr::{Platform, ProviderAddr};
use crate::cache::PluginCache;
use crate::cli::ProvidersLockArgs;
use crate::cliconfig::{self, CliEnv};
use crate::diag::{Diagnostic, Diagnostics};
use crate::engine::Engine;
use crate::fetch::{DownloadSettings, Downloader};
use crate::install::events::InstallEvent;
use crate::install::hash_memo::HashMemo;
use crate::install::installer::{InstallMode, Installer};
use crate::install::layout::{InstallLayout, LayoutKind};
use crate::lockfile::{LockedProvider, Locks};
use crate::output::Output;
use crate::output::ordered::OrderedOutput;
use crate::package::extract::ExtractLimits;
use crate::platform_hashes::{FoundHashes, HashQuery, HashSource, PlatformHashes};
use crate::policy::Policy;
use crate::source::Source;
use crate::source::authentication::StageError;
use crate::source::configured::NetworkSources;
use crate::source::filesystem::FilesystemMirror;
use crate::verify::hash::PackageHash;
use crate::version::{Version, VersionConstraints};
use crate::workdir::configuration_requirements;
use crate::workdir::platforms::LockPlatforms;
use crate::workdir::{LOCK_FILE, data_dir, save_lock_file};

pub async fn run(args: ProvidersLockArgs) -> bool {
    let out = Output::new(false, args.no_color);
    match lock(&args, &out).await {
        Ok((warnings, changed)) => {
            out.diagnostics(&warnings);
            let name = Engine::current().name();
            let text = if changed {
                format!("{name} has updated the lock file.")
            } else {
                format!("{name} has validated the lock file and found no need for changes.")
            };
            out.text(|ui| format!("\n{}", ui.success("Success!", &text)));
            if changed {
                out.text(|_| {
                    "\nReview the changes in .terraform.lock.hcl and then commit to your\nversion control system to retain the new checksums.\n".to_owned()
                });
            }
            true
        }
        Err(diags) => {
            out.diagnostics(&diags);
            false
        }
    }
}

/// Returns the warnings to show and whether any checksums were added.
async fn lock(
    args: &ProvidersLockArgs,
    out: &Arc<Output>,
) -> Result<(Diagnostics, bool), Diagnostics> {
    let fs_mirror = args.fs_mirror.as_deref().filter(|s| !s.is_empty());
    let net_mirror = args.net_mirror.as_deref().filter(|s| !s.is_empty());
    if fs_mirror.is_some() && net_mirror.is_some() {
        return Err(Diagnostic::error(
            "Invalid installation method options",
            "The -fs-mirror and -net-mirror command line options are mutually-exclusive.",
        )
        .into());
    }
    let platforms = platforms_to_lock(&args.platforms)?;
    let policy = Policy::from_flag(args.policy.as_deref())?;
    if let Some(policy) = &policy {
        out.diagnostics(policy.warnings());
    }

    let env = CliEnv::from_process();
    let (cli_config, config_diags) = cliconfig::load(&env);
    out.config_problems(&config_diags);
    let client = crate::http::build_client()?;
    let network = NetworkSources::new(&cli_config, &env, client.clone());
    // Like Terraform, this ignores the CLI configuration's installation
    // methods: the lock should hold what the origin vouches for, so that a
    // later `init` can check local mirrors against it.
    let source: Arc<dyn Source> = match (fs_mirror, net_mirror) {
        (Some(dir), _) => Arc::new(FilesystemMirror::new(dir)),
        (None, Some(raw)) => match Url::parse(raw) {
            Ok(url) if url.scheme() == "https" && url.host_str().is_some() => {
                network.network_mirror(url, false)
            }
            _ => {
                return Err(Diagnostic::error(
                    "Invalid network mirror URL",
                    "The -net-mirror option requires a valid https: URL as the mirror base URL.",
                )
                .into());
            }
        },
        (None, None) => network.registry(),
    };
    // The plugin cache holds the origin's signed releases; a lock made from
    // a mirror the user named holds what that mirror vouches for alone.
    let cache = match (fs_mirror, net_mirror) {
        (None, None) => cli_config.plugin_cache_dir.as_ref().map(PluginCache::new),
        _ => None,
    };

    let data_dir = data_dir();
    let (mut requirements, mut warnings) = configuration_requirements(Path::new("."), &data_dir)?;
    select_providers(&mut requirements, &args.providers)?;
    let (previous, lock_diags) = Locks::load(Path::new(LOCK_FILE));
    if lock_diags.has_errors() {
        return Err(lock_diags);
    }
    warnings.extend(lock_diags);

    let settings = DownloadSettings::from_env();
    let max_bytes = settings.max_bytes;
    let downloader =
        Arc::new(Downloader::new(client, settings).with_netrc(cli_config.netrc.clone()));
    let chooser = Installer {
        parallelism: args.parallelism,
        policy: policy.clone(),
        ..Installer::new(
            source.clone(),
            InstallLayout::new(&data_dir, LayoutKind::Providers),
            Platform::current(),
            downloader.clone(),
        )
    };
    // One memo for choosing and for the installed packages' hashes, so a
    // package choosing has hashed is not hashed again.
    let memo = HashMemo::load(&data_dir);
    let selected = chooser
        .choose_versions(&requirements, &previous, InstallMode::Force, &memo)
        .await?;
    let installed = installed_hashes(&data_dir, &selected, &previous, &memo);
    let hashes = PlatformHashes::new(
        downloader,
        cache,
        ExtractLimits {
            max_total_bytes: max_bytes,
            ..ExtractLimits::default()
        },
        policy,
        args.parallelism,
    );
    let per_platform = find_all(
        &platforms,
        &selected,
        &previous,
        source.as_ref(),
        &hashes,
        &installed,
        out,
    )
    .await?;
    let (locks, changed) = merge(&requirements, &previous, &selected, &per_platform, out);
    let rendered = locks.render();
    if std::fs::read(LOCK_FILE).ok().as_deref() != Some(rendered.as_bytes()) {
        save_lock_file(&locks)?;
    }
    Ok((warnings, changed))
}

/// The `-platform` options, as Terraform takes them; without any, this
/// platform and those the configuration commits to.
fn platforms_to_lock(given: &[String]) -> Result<Vec<Platform>, Diagnostics> {
    if !given.is_empty() {
        return crate::addr::target_platforms(given);
    }
    let current = Platform::current();
    let committed = LockPlatforms::for_dir(Path::new("."), &[])?;
    let mut platforms = vec![current.clone()];
    platforms.extend(committed.others(&current));
    Ok(platforms)
}

/// Narrows the requirements to the providers named on the command line
/// (each must be required by the configuration), then drops those that
/// never take part in locking.
fn select_providers(
    requirements: &mut BTreeMap<ProviderAddr, VersionConstraints>,
    given: &[String],
) -> Result<(), Diagnostics> {
    if !given.is_empty() {
        let mut diags = Diagnostics::new();
        let mut chosen = BTreeSet::new();
        for raw in given {
            match ProviderAddr::parse(raw) {
                Ok(addr) => {
                    if !requirements.contains_key(&addr) {
                        diags.push(Diagnostic::error(
                            "Invalid provider argument",
                            format!(
                                "The provider {addr} is not required by the current configuration."
                            ),
                        ));
                    }
                    chosen.insert(addr);
                }
                Err(err) => diags.push(Diagnostic::error(
                    err.summary().unwrap_or("Invalid provider source string"),
                    err.detail(),
                )),
            }
        }
        if diags.has_errors() {
            return Err(diags);
        }
        requirements.retain(|addr, _| chosen.contains(addr));
    }
    requirements.retain(|addr, _| !addr.is_builtin() && !addr.is_legacy());
    Ok(())
}

/// Each platform's hashes of each selected provider, all at once, in the
/// order the platforms were given; each platform's lines print together.
async fn find_all(
    platforms: &[Platform],
    selected: &[(ProviderAddr, Version)],
    previous: &Locks,
    source: &dyn Source,
    hashes: &PlatformHashes,
    installed: &BTreeMap<ProviderAddr, PackageHash>,
    out: &Output,
) -> Result<Vec<(Platform, BTreeMap<ProviderAddr, FoundHashes>)>, Diagnostics> {
    let lines = Arc::new(OrderedOutput::new(platforms.len()));
    let per_platform = platforms.iter().enumerate().map(|(slot, platform)| {
        let emit = out.platform_event_sink(lines.clone(), slot, platform.clone());
        let lines = lines.clone();
        async move {
            let found = futures_util::future::join_all(selected.iter().map(
                |(provider, version)| async move {
                    let none = BTreeSet::new();
                    let query = HashQuery {
                        provider,
                        version,
                        platform,
                        locked: previous
                            .get(provider)
                            .filter(|lock| lock.version == *version)
                            .map_or(&none, |lock| &lock.hashes),
                        installed: (*platform == Platform::current())
                            .then(|| installed.get(provider).cloned())
                            .flatten(),
                    };
                    let found = hashes.find(source, &query).await;
                    (provider, version, query.installed.clone(), found)
                },
            ))
            .await;
            let mut ok = BTreeMap::new();
            let mut failed = Vec::new();
            for (provider, version, installed, found) in found {
                match found {
                    Ok(found) => {
                        for event in events(provider, version, platform, installed.as_ref(), &found)
                        {
                            emit(event);
                        }
                        ok.insert(provider.clone(), found);
                    }
                    Err(err) => failed.push(err),
                }
            }
            lines.finish(slot);
            (ok, failed)
        }
    });
    let results = futures_util::future::join_all(per_platform).await;

    // The same failure on several platforms is reported once, naming them all.
    let mut failures: Vec<(String, Vec<&Platform>)> = Vec::new();
    let mut refusals = Diagnostics::new();
    let mut found = Vec::new();
    for (platform, (ok, failed)) in platforms.iter().zip(results) {
        for err in failed {
            let text = match err {
                StageError::Source(err) => err.to_string(),
                StageError::Package(err) => err,
                StageError::Refused(refusal) => {
                    let diag = refusal.diagnostic();
                    if !refusals.iter().any(|known| *known == diag) {
                        refusals.push(diag);
                    }
                    continue;
                }
            };
            let text = text.trim_end_matches('.').to_owned();
            match failures.iter_mut().find(|(t, _)| *t == text) {
                Some((_, platforms)) => platforms.push(platform),
                None => failures.push((text, vec![platform])),
            }
        }
        found.push((platform.clone(), ok));
    }
    if failures.is_empty() && refusals.is_empty() {
        return Ok(found);
    }
    refusals.0.extend(failures.into_iter().map(|(text, platforms)| {
        let names: Vec<String> = platforms.iter().map(|p| p.to_string()).collect();
        Diagnostic::error(
            "Could not retrieve providers for locking",
            format!(
                "Terraform failed to fetch the requested providers for {} in order to calculate their checksums: {text}.",
                names.join(", ")
            ),
        )
    }));
    Err(refusals)
}

/// The `h1:` of each selected provider's package installed here, in either
/// layout, for the version the lock file holds: the lock file vouches for
/// it, so it needs no download when the lock holds it.
fn installed_hashes(
    data_dir: &Path,
    selected: &[(ProviderAddr, Version)],
    previous: &Locks,
    memo: &HashMemo,
) -> BTreeMap<ProviderAddr, PackageHash> {
    let platform = Platform::current();
    selected
        .iter()
        .filter(|(provider, version)| {
            previous
                .get(provider)
                .is_some_and(|lock| lock.version == *version)
        })
        .filter_map(|(provider, version)| {
            let h1 = [LayoutKind::Providers, LayoutKind::Plugins]
                .into_iter()
                .map(|kind| {
                    InstallLayout::new(data_dir, kind).package_dir(provider, version, &platform)
                })
                .filter(|dir| dir.is_dir())
                .find_map(|dir| memo.h1_of_dir(&dir).ok())?;
            Some((provider.clone(), h1))
        })
        .collect()
}

/// The lines for one provider on one platform: Terraform's for a package
/// fetched, tfinstall's for hashes that needed none.
fn events(
    provider: &ProviderAddr,
    version: &Version,
    platform: &Platform,
    installed: Option<&PackageHash>,
    found: &FoundHashes,
) -> Vec<InstallEvent> {
    let (provider, version) = (provider.clone(), version.clone());
    let h1 = found.hashes.iter().find(|(hash, _)| hash.scheme() == "h1");
    match h1 {
        Some((_, HashSource::Package)) => vec![
            InstallEvent::Installing {
                provider: provider.clone(),
                version: version.clone(),
            },
            InstallEvent::Installed {
                provider,
                version,
                auth: found.auth.clone(),
            },
        ],
        Some((h1, HashSource::LockFile)) if Some(h1) == installed => {
            vec![InstallEvent::UsingInstalled { provider, version }]
        }
        _ => vec![InstallEvent::PlatformHashes {
            provider,
            version,
            platforms: vec![(platform.clone(), found.clone())],
        }],
    }
}

/// Terraform's merge: every provider keeps its previous hashes and gains
/// each platform's, with one "Obtained" line per provider and platform.
/// Returns the new locks and whether any checksum was added.
fn merge(
    requirements: &BTreeMap<ProviderAddr, VersionConstraints>,
    previous: &Locks,
    selected: &[(ProviderAddr, Version)],
    per_platform: &[(Platform, BTreeMap<ProviderAddr, FoundHashes>)],
    out: &Output,
) -> (Locks, bool) {
    let mut locks = previous.clone();
    let mut changed = false;
    for (provider, version) in selected {
        let old = previous.get(provider);
        let mut hashes = old.map(|l| l.hashes.clone()).unwrap_or_default();
        for (platform, found) in per_platform {
            let Some(found) = found.get(provider) else {
                continue;
            };
            let new = found.set();
            hashes.extend(new.iter().cloned());
            let what = match old {
                None => {
                    "This was a new provider and the checksums for this platform are now tracked in the lock file"
                }
                Some(old) if new.is_subset(&old.hashes) => {
                    "All checksums for this platform were already tracked in the lock file"
                }
                Some(_) => {
                    "Additional checksums for this platform are now tracked in the lock file"
                }
            };
            changed |= old.is_none_or(|old| !new.is_subset(&old.hashes));
            out.text(|_| {
                format!(
                    "- Obtained {} checksums for {platform}; {what}",
                    provider.for_display()
                )
            });
        }
        locks.insert(LockedProvider {
            addr: provider.clone(),
            version: version.clone(),
            constraints: requirements.get(provider).cloned().unwrap_or_default(),
            hashes,
        });
    }
    (locks, changed)
}
