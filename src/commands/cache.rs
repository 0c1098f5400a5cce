//! `tfinstall cache warm` and `tfinstall cache verify`: filling the plugin
//! cache ahead of time (CI images) and checking it for damage.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::addr::Platform;
use crate::cache::PluginCache;
use crate::cli::{CacheVerifyArgs, CacheWarmArgs};
use crate::cliconfig::{self, CliConfig, CliEnv};
use crate::commands::init::print_config_problems;
use crate::commands::providers::{configuration_requirements, target_platforms};
use crate::diag::{Diagnostic, Diagnostics};
use crate::fetch::{DownloadSettings, Downloader};
use crate::install::events::InstallEvent;
use crate::install::extract::ExtractLimits;
use crate::install::installer::{CacheUse, Installer};
use crate::install::layout::{InstallLayout, LayoutKind};
use crate::install::link::LinkMode;
use crate::lockfile::Locks;
use crate::output::Output;
use crate::source::configured::{NetworkSources, SourceOptions, build_source};

pub async fn warm(args: CacheWarmArgs, launch_dir: PathBuf) -> bool {
    let out = Output::new(false, args.no_color);
    match run_warm(&args, &launch_dir, &out).await {
        Ok(warnings) => {
            out.diagnostics(&warnings);
            true
        }
        Err(diags) => {
            out.diagnostics(&diags);
            false
        }
    }
}

pub fn verify(args: CacheVerifyArgs) -> bool {
    let out = Output::new(false, args.no_color);
    let env = CliEnv::from_process();
    let (cli_config, config_diags) = cliconfig::load(&env);
    print_config_problems(&out, &config_diags);
    let cache = match configured_cache(&cli_config) {
        Ok(cache) => cache,
        Err(diag) => {
            out.diagnostics(&diag.into());
            return false;
        }
    };
    let (checked, damage) = cache.verify();
    for problem in &damage {
        println!("- {}: {}", problem.dir.display(), problem.problem);
    }
    if damage.is_empty() {
        println!(
            "Checked {checked} cache entries in {}: all match what was installed.",
            cache.root().display()
        );
        true
    } else {
        out.diagnostics(
            &Diagnostic::error(
                "Damaged plugin cache entries",
                format!(
                    "{} of {checked} entries in {} no longer match what was installed. Delete the directories listed above; the next tfinstall init or cache warm downloads them again.",
                    damage.len(),
                    cache.root().display()
                ),
            )
            .into(),
        );
        false
    }
}

fn configured_cache(cli_config: &CliConfig) -> Result<PluginCache, Diagnostic> {
    cli_config
        .plugin_cache_dir
        .as_ref()
        .map(PluginCache::new)
        .ok_or_else(|| {
            Diagnostic::error(
                "No plugin cache configured",
                "Set plugin_cache_dir in the CLI configuration (~/.terraformrc or the file TF_CLI_CONFIG_FILE names), or the TF_PLUGIN_CACHE_DIR environment variable, to the directory to use.",
            )
        })
}

async fn run_warm(
    args: &CacheWarmArgs,
    launch_dir: &Path,
    out: &Arc<Output>,
) -> Result<Diagnostics, Diagnostics> {
    let platforms = target_platforms(&args.platforms)?;
    let env = CliEnv::from_process();
    let (mut cli_config, mut config_diags) = cliconfig::load(&env);
    // Filling a cache that does not exist yet (a fresh CI image) is what
    // warming is for: make it, then read the configuration again without
    // the "cannot be opened" problem Terraform would report.
    if let Some(dir) = cli_config.plugin_cache_dir.clone()
        && !dir.exists()
    {
        std::fs::create_dir_all(&dir).map_err(|err| {
            Diagnostic::error(
                "Cannot create the plugin cache",
                format!(
                    "Could not create the plugin cache directory {}: {err}. Create it, or point plugin_cache_dir / TF_PLUGIN_CACHE_DIR at a directory you can write.",
                    dir.display()
                ),
            )
        })?;
        (cli_config, config_diags) = cliconfig::load(&env);
    }
    print_config_problems(out, &config_diags);
    let cache = configured_cache(&cli_config)?;
    let client = crate::http::build_client()?;
    let network = NetworkSources::new(&cli_config, &env, client.clone());
    let (source, source_diags) = build_source(&SourceOptions {
        plugin_dirs: &args.plugin_dirs,
        cli_config: &cli_config,
        env: &env,
        launch_dir,
        work_dir: Path::new("."),
        network: &network,
    });
    if source_diags.has_errors() {
        return Err(source_diags);
    }
    let mut warnings = source_diags;
    let downloader = Arc::new(
        Downloader::new(client, DownloadSettings::from_env()).with_netrc(cli_config.netrc.clone()),
    );
    let dirs = if args.dirs.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.dirs.clone()
    };
    let mut configurations = Vec::new();
    for dir in &dirs {
        let data_dir = dir.join(crate::commands::init::data_dir());
        let (requirements, module_diags) = configuration_requirements(dir, &data_dir)?;
        warnings.extend(module_diags);
        let (locks, lock_diags) = Locks::load(&dir.join(crate::commands::init::LOCK_FILE));
        if lock_diags.has_errors() {
            return Err(lock_diags);
        }
        warnings.extend(lock_diags);
        configurations.push((requirements, locks));
    }
    println!("Warming the plugin cache at {}", cache.root().display());
    // Every directory and platform at once, through one cache whose entries
    // are filled once however many of them need a package; the results are
    // then listed in the order given.
    let cache_use = CacheUse::new(cache.clone(), cli_config.plugin_cache_may_break_lock_file);
    let (source, downloader, cache_use, out, cache_root) =
        (&source, &downloader, &cache_use, &out, cache.root());
    let warms = configurations.iter().flat_map(|(requirements, locks)| {
        platforms.iter().map(move |platform| {
            let installer = Installer {
                source: source.clone(),
                // Nothing is installed: a layout in a directory that does not
                // exist keeps every "already installed" check false.
                layout: InstallLayout::new(cache_root.join(".none"), LayoutKind::Providers),
                platform: platform.clone(),
                limits: ExtractLimits::default(),
                parallelism: args.parallelism,
                downloader: (*downloader).clone(),
                dev_overrides: Default::default(),
                cache: Some(cache_use.clone()),
                link_mode: LinkMode::Auto,
                events: warm_events(Arc::clone(out)),
                offline: false,
            };
            async move { (platform, installer.warm(requirements, locks).await) }
        })
    });
    let (mut added, mut present) = (0, 0);
    for (platform, result) in futures_util::future::join_all(warms).await {
        for (provider, version, was_added) in result? {
            let shown = provider.for_display();
            if was_added {
                added += 1;
                println!("- Added {shown} v{version} for {platform}");
            } else {
                present += 1;
                println!("- {shown} v{version} for {platform} was already cached");
            }
        }
    }
    println!(
        "\nThe plugin cache now holds every provider package the configuration needs for {}: {added} added, {present} already there.",
        platforms
            .iter()
            .map(Platform::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(warnings)
}

/// Only warnings and the wait notice are shown while warming; the result
/// lines say per platform what happened to each package.
fn warm_events(out: Arc<Output>) -> crate::install::events::EventSink {
    Arc::new(move |event| {
        if matches!(
            event,
            InstallEvent::Warning(_) | InstallEvent::WaitingForCache { .. }
        ) {
            out.event(&event);
        }
    })
}
