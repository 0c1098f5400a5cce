//! `tfinstall providers lock`: Terraform's `providers lock`. Each platform's
//! packages are installed into a throwaway directory with the locked hashes
//! not enforced (Terraform's `InstallNewProvidersForce`), and the hashes each
//! install vouches for
//! (`zh:` from the signed SHA256SUMS, `h1:` from the package) are merged
//! into the lock file.
//!
//! Unlike Terraform, the platforms are fetched concurrently, and a package
//! already installed for this platform that matches the lock file is used
//! as it is instead of being downloaded again. The installed tree is only
//! ever read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use url::Url;

use crate::addr::target_platforms;
use crate::addr::{Platform, ProviderAddr};
use crate::cli::ProvidersLockArgs;
use crate::cliconfig::{self, CliEnv};
use crate::diag::{Diagnostic, Diagnostics};
use crate::engine::Engine;
use crate::fetch::{DownloadSettings, Downloader};
use crate::install::installer::{InstallMode, Installer};
use crate::install::layout::{InstallLayout, LayoutKind};
use crate::lockfile::{LockedProvider, Locks};
use crate::output::Output;
use crate::output::ordered::OrderedOutput;
use crate::policy::Policy;
use crate::source::Source;
use crate::source::configured::NetworkSources;
use crate::source::filesystem::FilesystemMirror;
use crate::version::{Version, VersionConstraints};
use crate::workdir::configuration_requirements;
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
    let platforms = target_platforms(&args.platforms)?;
    let policy = Policy::from_flag(args.policy.as_deref())?;

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

    let data_dir = data_dir();
    let (mut requirements, mut warnings) = configuration_requirements(Path::new("."), &data_dir)?;
    select_providers(&mut requirements, &args.providers)?;
    let (previous, lock_diags) = Locks::load(Path::new(LOCK_FILE));
    if lock_diags.has_errors() {
        return Err(lock_diags);
    }
    warnings.extend(lock_diags);

    let per_platform = install_platforms(
        &platforms,
        &requirements,
        &previous,
        source,
        Downloader::new(client, DownloadSettings::from_env()).with_netrc(cli_config.netrc.clone()),
        &data_dir,
        args.parallelism,
        policy,
        out,
    )
    .await?;
    let (locks, changed) = merge(&requirements, &previous, &per_platform, out)?;
    let rendered = locks.render();
    if std::fs::read(LOCK_FILE).ok().as_deref() != Some(rendered.as_bytes()) {
        save_lock_file(&locks)?;
    }
    Ok((warnings, changed))
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

/// Runs one installer per platform, all at once, and returns each
/// platform's resulting locks in the order the platforms were given.
#[allow(clippy::too_many_arguments)]
async fn install_platforms(
    platforms: &[Platform],
    requirements: &BTreeMap<ProviderAddr, VersionConstraints>,
    previous: &Locks,
    source: Arc<dyn Source>,
    downloader: Downloader,
    data_dir: &Path,
    parallelism: usize,
    policy: Option<Arc<Policy>>,
    out: &Output,
) -> Result<Vec<(Platform, Locks)>, Diagnostics> {
    let temp = tempfile::Builder::new()
        .prefix("tfinstall-providers-lock")
        .tempdir()
        .map_err(|err| {
            Diagnostics::from(Diagnostic::error(
                "Could not create temporary directory",
                format!(
                    "Failed to create a temporary directory for staging the requested provider packages: {err}."
                ),
            ))
        })?;
    let downloader = Arc::new(downloader);
    let lines = Arc::new(OrderedOutput::new(platforms.len()));
    let installs = platforms.iter().enumerate().map(|(slot, platform)| {
        let layout = InstallLayout::new(
            temp.path().join(platform.to_string()),
            LayoutKind::Providers,
        );
        link_installed(data_dir, requirements, previous, platform, &layout);
        let installer = Installer {
            parallelism,
            policy: policy.clone(),
            events: out.platform_event_sink(lines.clone(), slot, platform.clone()),
            ..Installer::new(source.clone(), layout, platform.clone(), downloader.clone())
        };
        let lines = lines.clone();
        async move {
            let result = installer
                .install(requirements, previous, InstallMode::Force)
                .await
                .map(|outcome| outcome.locks);
            lines.finish(slot);
            result
        }
    });
    let results = futures_util::future::join_all(installs).await;

    // The same failure on several platforms is reported once, naming them all.
    let mut failures: Vec<(String, Vec<&Platform>)> = Vec::new();
    let mut per_platform = Vec::new();
    for (platform, result) in platforms.iter().zip(results) {
        match result {
            Ok(locks) => per_platform.push((platform.clone(), locks)),
            Err(diags) => {
                for diag in diags.iter().filter(|d| d.is_error()) {
                    let text = if diag.detail.is_empty() {
                        diag.summary.clone()
                    } else {
                        diag.detail.trim_end_matches('.').to_string()
                    };
                    match failures.iter_mut().find(|(t, _)| *t == text) {
                        Some((_, platforms)) => platforms.push(platform),
                        None => failures.push((text, vec![platform])),
                    }
                }
            }
        }
    }
    if failures.is_empty() {
        return Ok(per_platform);
    }
    Err(Diagnostics(
        failures
            .into_iter()
            .map(|(text, platforms)| {
                let names: Vec<String> = platforms.iter().map(|p| p.to_string()).collect();
                Diagnostic::error(
                    "Could not retrieve providers for locking",
                    format!(
                        "Terraform failed to fetch the requested providers for {} in order to calculate their checksums: {text}.",
                        names.join(", ")
                    ),
                )
            })
            .collect(),
    ))
}

/// Makes the packages installed for `platform` (in either layout) visible
/// in the throwaway `layout` through symlinks, so the installer finds them
/// there and, when they match the lock file, uses them instead of
/// downloading. Where a link cannot be made the package is simply fetched.
fn link_installed(
    data_dir: &Path,
    requirements: &BTreeMap<ProviderAddr, VersionConstraints>,
    previous: &Locks,
    platform: &Platform,
    layout: &InstallLayout,
) {
    for provider in requirements.keys() {
        let Some(lock) = previous.get(provider) else {
            continue;
        };
        let installed = [LayoutKind::Providers, LayoutKind::Plugins]
            .into_iter()
            .map(|kind| {
                InstallLayout::new(data_dir, kind).package_dir(provider, &lock.version, platform)
            })
            .find(|dir| dir.is_dir())
            .and_then(|dir| std::fs::canonicalize(dir).ok());
        if let Some(installed) = installed {
            let link = layout.package_dir(provider, &lock.version, platform);
            if let Some(parent) = link.parent()
                && std::fs::create_dir_all(parent).is_ok()
            {
                let _ = symlink_dir(&installed, &link);
            }
        }
    }
}

#[cfg(unix)]
fn symlink_dir(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

#[cfg(windows)]
fn symlink_dir(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::windows::fs::symlink_dir(target, link)
}

/// Terraform's merge: every provider keeps its previous hashes and gains
/// each platform's, with one "Obtained" line per provider and platform.
/// Returns the new locks and whether any checksum was added.
fn merge(
    requirements: &BTreeMap<ProviderAddr, VersionConstraints>,
    previous: &Locks,
    per_platform: &[(Platform, Locks)],
    out: &Output,
) -> Result<(Locks, bool), Diagnostics> {
    let mut locks = previous.clone();
    let mut changed = false;
    let mut diags = Diagnostics::new();
    for (provider, constraints) in requirements {
        let old = previous.get(provider);
        let mut version: Option<Version> = old.map(|l| l.version.clone());
        let mut hashes = old.map(|l| l.hashes.clone()).unwrap_or_default();
        let mut selected: Option<&Version> = None;
        for (platform, platform_locks) in per_platform {
            let Some(new) = platform_locks.get(provider) else {
                continue;
            };
            if selected.is_some_and(|v| *v != new.version) {
                diags.push(Diagnostic::error(
                    "Inconsistent provider versions",
                    format!(
                        "The version constraint for {provider} selected inconsistent versions for different platforms, which is unexpected.\n\nThe upstream registry may have changed its available versions during Terraform's work. If so, re-running this command may produce a successful result."
                    ),
                ));
            }
            selected = Some(&new.version);
            version = Some(new.version.clone());
            hashes.extend(new.hashes.iter().cloned());
            let what = match old {
                None => {
                    "This was a new provider and the checksums for this platform are now tracked in the lock file"
                }
                Some(old) if new.hashes.is_subset(&old.hashes) => {
                    "All checksums for this platform were already tracked in the lock file"
                }
                Some(_) => {
                    "Additional checksums for this platform are now tracked in the lock file"
                }
            };
            changed |= old.is_none_or(|old| !new.hashes.is_subset(&old.hashes));
            out.text(|_| {
                format!(
                    "- Obtained {} checksums for {platform}; {what}",
                    provider.for_display()
                )
            });
        }
        if let Some(version) = version {
            locks.insert(LockedProvider {
                addr: provider.clone(),
                version,
                constraints: constraints.clone(),
                hashes,
            });
        }
    }
    if diags.has_errors() {
        Err(diags)
    } else {
        Ok((locks, changed))
    }
}
