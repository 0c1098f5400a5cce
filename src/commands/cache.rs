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
use crate::install::extract::ExtractLimits;
use crate::install::installer::{CacheUse, InstallEvent, Installer};
use crate::install::layout::{InstallLayout, LayoutKind};
use crate::install::link::LinkMode;
use crate::lockfile::Locks;
use crate::output::Output;
use crate::source::configured::{SourceOptions, build_source};

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
    let (source, source_diags) = build_source(&SourceOptions {
        plugin_dirs: &args.plugin_dirs,
        cli_config: &cli_config,
        env: &env,
        launch_dir,
        client: client.clone(),
    });
    if source_diags.has_errors() {
        return Err(source_diags);
    }
    let mut warnings = source_diags;
    let downloader = Arc::new(Downloader::new(client, DownloadSettings::from_env()));
    let dirs = if args.dirs.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.dirs.clone()
    };
    println!("Warming the plugin cache at {}", cache.root().display());
    let (mut added, mut present) = (0, 0);
    for dir in &dirs {
        let data_dir = dir.join(crate::commands::init::data_dir());
        let (requirements, module_diags) = configuration_requirements(dir, &data_dir)?;
        warnings.extend(module_diags);
        let (locks, lock_diags) = Locks::load(&dir.join(crate::commands::init::LOCK_FILE));
        if lock_diags.has_errors() {
            return Err(lock_diags);
        }
        warnings.extend(lock_diags);
        for platform in &platforms {
            let installer = Installer {
                source: source.clone(),
                // Nothing is installed: a layout in a directory that does not
                // exist keeps every "already installed" check false.
                layout: InstallLayout::new(cache.root().join(".none"), LayoutKind::Providers),
                platform: platform.clone(),
                limits: ExtractLimits::default(),
                parallelism: args.parallelism,
                downloader: downloader.clone(),
                dev_overrides: Default::default(),
                cache: Some(CacheUse {
                    cache: cache.clone(),
                    may_break_lock_file: cli_config.plugin_cache_may_break_lock_file,
                }),
                link_mode: LinkMode::Auto,
                events: warm_events(out.clone()),
                offline: false,
            };
            for (provider, version, was_added) in installer.warm(&requirements, &locks).await? {
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
fn warm_events(out: Arc<Output>) -> crate::install::installer::EventSink {
    Arc::new(move |event| {
        if matches!(
            event,
            InstallEvent::Warning(_) | InstallEvent::WaitingForCache { .. }
        ) {
            out.event(&event);
        }
    })
}
