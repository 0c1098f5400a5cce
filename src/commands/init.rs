//! `tfinstall init`: the provider half of `terraform init`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::addr::{Platform, ProviderAddr};
use crate::cache::PluginCache;
use crate::cli::InitArgs;
use crate::cliconfig::{self, CliConfig, CliEnv};
use crate::diag::{Diagnostic, Diagnostics};
use crate::engine::Engine;
use crate::fetch::{DownloadSettings, Downloader};
use crate::fsutil::Flush;
use crate::install::context::OtherPlatforms;
use crate::install::installer::{CacheUse, InstallMode, InstallOutcome, Installer};
use crate::install::layout::{InstallLayout, LayoutKind};
use crate::install::link::{LinkMode, add_owner_write};
use crate::install::staging::{FileMode, Staging};
use crate::lockfile::Locks;
use crate::module_install::{ModuleSources, PreparedModules, WalkObserver, module_cache};
use crate::output::{LockFileChange, Output};
use crate::package::extract::ExtractLimits;
use crate::platform_hashes::PlatformHashes;
use crate::policy::Policy;
use crate::source::Source;
use crate::source::configured::{
    NetworkSources, SourceOptions, build_offline_source, build_source,
};
use crate::workdir::engine::EngineChoice;
use crate::workdir::platforms::LockPlatforms;
use crate::workdir::{LOCK_FILE, configuration_requirements_staged, data_dir, in_dir};

mod prefetch;

/// `init` in the working directory, or in each DIR given, each with the
/// engine its own files choose unless `engine_flag` (`-engine`) says.
pub async fn run(args: InitArgs, launch_dir: PathBuf, engine_flag: Option<Engine>) -> bool {
    // One run per process: each module is read once for it.
    crate::module::remember_modules_read();
    let dirs = if args.dirs.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.dirs.clone()
    };
    let choices: Vec<Result<EngineChoice, Diagnostic>> = dirs
        .iter()
        .map(|dir| EngineChoice::for_dir(dir, engine_flag))
        .collect();
    // The `-json` stream's first line names the first directory's engine;
    // in a run whose directories differ, each says its own.
    if let Some(Ok(first)) = choices.iter().find(|choice| choice.is_ok()) {
        first.engine.select();
    }
    let out = Output::new(args.json, args.no_color);
    if let Err(diag) = distinct_dirs(&args.dirs) {
        report(&out, Err(diag.into()));
        return false;
    }
    if let [choice] = choices.as_slice()
        && args.dirs.len() < 2
    {
        let choice = match choice {
            Ok(choice) => choice,
            Err(diag) => {
                report(&out, Err(diag.clone().into()));
                return false;
            }
        };
        let run = match Run::prepare(&args, &launch_dir, &out) {
            Ok(run) => run,
            Err(diags) => {
                report(&out, Err(diags));
                return false;
            }
        };
        out.engine(choice, false);
        return report(&out, init(&run, &dirs[0], &out).await);
    }
    run_many(&args, &launch_dir, &dirs, &choices, &out).await
}

/// Two DIR arguments naming one directory would install into it twice at
/// once.
fn distinct_dirs(dirs: &[PathBuf]) -> Result<(), Diagnostic> {
    let mut seen: Vec<(PathBuf, &Path)> = Vec::new();
    for dir in dirs {
        let real = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
        if let Some((_, first)) = seen.iter().find(|(other, _)| *other == real) {
            return Err(Diagnostic::error(
                "Duplicate working directory",
                format!(
                    "{} and {} are the same directory. Give each working directory once.",
                    first.display(),
                    dir.display()
                ),
            ));
        }
        seen.push((real, dir));
    }
    Ok(())
}

/// How `init` in one working directory succeeded.
enum Initialized {
    Installed {
        warnings: Diagnostics,
        lock_file: LockFileChange,
    },
    /// The directory has no configuration files; nothing was written.
    EmptyDirectory,
}

/// Shows how one working directory's init ended; true if it succeeded.
fn report(out: &Output, result: Result<Initialized, Diagnostics>) -> bool {
    let engine = Engine::current().name();
    match result {
        Ok(Initialized::Installed {
            warnings,
            lock_file,
        }) => {
            out.diagnostics(&warnings);
            out.init_output(
                "output_init_success_message",
                Some(&format!("{engine} has been successfully initialized!")),
                |ui| {
                    format!(
                        "\n{}",
                        ui.bold("tfinstall has installed the providers successfully!")
                    )
                },
            );
            out.summary(true, lock_file, false);
            true
        }
        Ok(Initialized::EmptyDirectory) => {
            // Terraform's words; the text output says who initialized it.
            let rest = format!(
                "The directory has no {engine} configuration files. You may begin working\nwith {engine} immediately by creating {engine} configuration files."
            );
            out.init_output(
                "output_init_empty_message",
                Some(&format!(
                    "{engine} initialized in an empty directory!\n\n{rest}"
                )),
                |ui| {
                    format!(
                        "\n{}\n\n{rest}",
                        ui.bold("tfinstall initialized in an empty directory!")
                    )
                },
            );
            out.summary(true, LockFileChange::Unchanged, true);
            true
        }
        Err(diags) => {
            out.diagnostics(&diags);
            out.nothing_kept();
            out.summary(false, LockFileChange::Unchanged, false);
            false
        }
    }
}

/// `init DIR…`: every directory at once, sharing the run's sources (one
/// version-list request per provider and source) and its plugin cache (one
/// download per package), or a cache for this run alone when none is
/// configured. Each directory keeps its own modules, lock file and
/// `.terraform`, and succeeds or fails on its own. Text output comes
/// directory by directory in the order given; `-json` messages go out as
/// they happen, each naming its directory.
///
/// Directories whose engines differ run as two groups, one after the
/// other, each with the CLI configuration and sources of its engine: the
/// engine is one for the whole process at any time ([`Engine::select`]).
async fn run_many(
    args: &InitArgs,
    launch_dir: &Path,
    dirs: &[PathBuf],
    choices: &[Result<EngineChoice, Diagnostic>],
    out: &Arc<Output>,
) -> bool {
    let outs: Vec<Arc<Output>> = dirs
        .iter()
        .map(|dir| out.for_directory(&dir.display().to_string()))
        .collect();
    let release = Mutex::new(InOrder {
        next: 0,
        done: vec![false; dirs.len()],
    });
    let heading = |index: usize| {
        outs[index].message("directory", |ui| {
            format!("\n{}", ui.heading(&format!("[{}]", dirs[index].display())))
        });
    };
    // Reports one directory's result and prints the held text it can.
    let finish = |index: usize, result: Result<Initialized, Diagnostics>| {
        let first_error = result
            .as_ref()
            .err()
            .and_then(|diags| diags.iter().find(|d| d.is_error()).cloned());
        report(&outs[index], result);
        release
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .finish(index, &outs);
        first_error
    };
    let mut errors: Vec<Option<Diagnostic>> = vec![None; dirs.len()];
    let mut engines: Vec<Engine> = Vec::new();
    for (index, choice) in choices.iter().enumerate() {
        match choice {
            Ok(choice) if !engines.contains(&choice.engine) => engines.push(choice.engine),
            Ok(_) => {}
            Err(diag) => {
                heading(index);
                errors[index] = finish(index, Err(diag.clone().into()));
            }
        }
    }
    let engines_differ = engines.len() > 1;
    for engine in engines {
        let group: Vec<(usize, &EngineChoice)> = choices
            .iter()
            .enumerate()
            .filter_map(|(index, choice)| Some((index, choice.as_ref().ok()?)))
            .filter(|(_, choice)| choice.engine == engine)
            .collect();
        engine.select();
        let run = match Run::prepare(args, launch_dir, out) {
            Ok(run) => run,
            Err(diags) => {
                for (index, _) in group {
                    heading(index);
                    errors[index] = finish(index, Err(diags.clone()));
                }
                continue;
            }
        };
        let results = futures_util::future::join_all(group.iter().enumerate().map(
            |(order, &(index, choice))| {
                let (run, heading, finish, outs) = (&run, &heading, &finish, &outs);
                async move {
                    // One directory starts per turn of the runtime. A start
                    // reads and plans on the runtime's one thread for a
                    // millisecond or two; begun all in one turn, twenty of them
                    // held the first directory's registry requests unsent (a
                    // TLS handshake needs turns of its own) until every start
                    // was done, and the answers came 40 ms late.
                    for _ in 0..order {
                        tokio::task::yield_now().await;
                    }
                    heading(index);
                    outs[index].engine(choice, engines_differ);
                    let result = init(run, &dirs[index], &outs[index]).await;
                    (index, finish(index, result))
                }
            },
        ))
        .await;
        for (index, error) in results {
            errors[index] = error;
        }
    }
    let failed: Vec<(String, Diagnostic)> = dirs
        .iter()
        .zip(errors)
        .filter_map(|(dir, err)| err.map(|err| (dir.display().to_string(), err)))
        .collect();
    out.run_summary(dirs.len(), &failed);
    failed.is_empty()
}

/// Which directories' held text has been printed: each is printed once it
/// and every directory before it have finished.
struct InOrder {
    next: usize,
    done: Vec<bool>,
}

impl InOrder {
    fn finish(&mut self, index: usize, outs: &[Arc<Output>]) {
        self.done[index] = true;
        while self.next < self.done.len() && self.done[self.next] {
            outs[self.next].release();
            self.next += 1;
        }
    }
}

/// What every working directory of one run shares: the CLI configuration,
/// the network sources, the downloader and the plugin cache.
struct Run<'a> {
    args: &'a InitArgs,
    launch_dir: &'a Path,
    env: CliEnv,
    cli_config: CliConfig,
    layout: LayoutKind,
    dev_overrides: BTreeSet<ProviderAddr>,
    network: NetworkSources,
    modules: ModuleSources,
    downloader: Arc<Downloader>,
    cache: Option<CacheUse>,
    link_mode: LinkMode,
    policy: Option<Arc<Policy>>,
    /// Where the lock entries' hashes of other platforms are found, for
    /// every directory of the run.
    platform_hashes: Arc<PlatformHashes>,
    /// The cache of a multi-directory run without a configured one, removed
    /// when the run ends (the packages it held stay, hard-linked or copied).
    _run_cache: Option<tempfile::TempDir>,
}

impl<'a> Run<'a> {
    fn prepare(
        args: &'a InitArgs,
        launch_dir: &'a Path,
        out: &Arc<Output>,
    ) -> Result<Run<'a>, Diagnostics> {
        let readonly = args.lockfile.as_deref() == Some("readonly");
        if readonly && args.upgrade {
            return Err(Diagnostic::error(
                "Invalid command-line option",
                "The -upgrade flag conflicts with -lockfile=readonly.",
            )
            .into());
        }
        let layout = match (Engine::current(), args.layout) {
            (Engine::OpenTofu, Some(LayoutKind::Plugins)) => {
                return Err(Diagnostic::error(
                    "Invalid command-line option",
                    "OpenTofu reads providers only from .terraform/providers, so -layout=plugins cannot be used with it. Leave -layout out, or choose Terraform's rules with -engine=terraform.",
                )
                .into());
            }
            (_, Some(layout)) => layout,
            (Engine::Terraform, None) => LayoutKind::Plugins,
            (Engine::OpenTofu, None) => LayoutKind::Providers,
        };
        // Before anything else is read: a policy that cannot be read
        // installs nothing.
        let policy = Policy::from_flag(args.policy.as_deref())?;
        if let Some(policy) = &policy {
            out.diagnostics(policy.warnings());
        }
        let env = CliEnv::from_process();
        let (cli_config, config_diags) = cliconfig::load(&env);
        out.config_problems(&config_diags);
        let dev_overrides: BTreeSet<ProviderAddr> =
            cli_config.dev_override_addrs().cloned().collect();
        let client = crate::http::build_client()?;
        let network = NetworkSources::new(&cli_config, &env, client.clone());
        let settings = DownloadSettings {
            retries: args.download_retries,
            stall_timeout: args.download_stall_timeout,
            backoff: args.download_retry_delay,
            max_bytes: args.max_package_size,
        };
        let modules = ModuleSources::for_run(
            &network,
            client.clone(),
            settings.clone(),
            cli_config.netrc.clone(),
            args.parallelism,
        )
        .offline(args.offline)
        .with_cache(module_cache(&cli_config))
        .link_mode(args.module_link_mode)
        // On the run's output, not a directory's: in `init DIR…` that is
        // held until the directory is done, and a wait is news while it
        // lasts.
        .with_live_events(out.module_event_sink());
        let downloader =
            Arc::new(Downloader::new(client, settings).with_netrc(cli_config.netrc.clone()));
        let mut cache = cli_config.plugin_cache_dir.as_ref().map(|dir| {
            CacheUse::new(
                PluginCache::new(dir),
                cli_config.plugin_cache_may_break_lock_file,
            )
        });
        let mut link_mode = args.link_mode;
        let mut run_cache = None;
        if cache.is_none() && args.dirs.len() > 1 {
            let dir = run_cache_dir(&args.dirs[0]).map_err(|err| {
                Diagnostics::from(Diagnostic::error(
                    "Failed to prepare the provider installation directory",
                    format!(
                        "Could not create a temporary directory to share packages between the working directories: {err}. Set TMPDIR to a writable directory, or configure a plugin cache (plugin_cache_dir)."
                    ),
                ))
            })?;
            cache = Some(CacheUse::new(PluginCache::new(dir.path()), false));
            // Links into a cache that is gone when the run ends would dangle.
            if link_mode == LinkMode::Symlink {
                link_mode = LinkMode::Auto;
            }
            run_cache = Some(dir);
        }
        let platform_hashes = Arc::new(PlatformHashes::new(
            downloader.clone(),
            cli_config.plugin_cache_dir.as_ref().map(PluginCache::new),
            extract_limits(args),
            policy.clone(),
            args.parallelism,
        ));
        Ok(Run {
            args,
            launch_dir,
            env,
            cli_config,
            layout,
            dev_overrides,
            network,
            modules,
            downloader,
            cache,
            link_mode,
            policy,
            platform_hashes,
            _run_cache: run_cache,
        })
    }
}

/// Where a multi-directory run without a plugin cache keeps each package
/// once: the system's temporary directory when it is on the working
/// directories' filesystem (so that placing a package is a hard link),
/// otherwise beside the first of them.
fn run_cache_dir(first: &Path) -> std::io::Result<tempfile::TempDir> {
    let temp = std::env::temp_dir();
    let builder = || {
        let mut builder = tempfile::Builder::new();
        builder.prefix(".tfinstall-run-");
        builder
    };
    if same_filesystem(&temp, first) {
        return builder().tempdir_in(temp);
    }
    let beside = std::path::absolute(first)?
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    builder()
        .tempdir_in(beside)
        .or_else(|_| builder().tempdir())
}

#[cfg(unix)]
fn same_filesystem(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn same_filesystem(_: &Path, _: &Path) -> bool {
    false
}

/// `init` in one working directory, `dir` (`.` after -chdir): the files it
/// reads and writes are there, everything else comes from `run`.
async fn init(run: &Run<'_>, dir: &Path, out: &Arc<Output>) -> Result<Initialized, Diagnostics> {
    let args = run.args;
    if !dir.is_dir() {
        return Err(Diagnostic::error(
            "Invalid working directory",
            format!(
                "The directory {} does not exist or is not a directory. Check the DIR arguments of tfinstall init.",
                dir.display()
            ),
        )
        .into());
    }
    // Before anything is read or written: Terraform says so and stops (it
    // still records -plugin-dir in .terraform; tfinstall leaves an empty
    // directory exactly as it is).
    if crate::module::is_empty_dir(dir) {
        return Ok(Initialized::EmptyDirectory);
    }
    let data_dir = in_dir(dir, data_dir());
    crate::module::recall_readings(&data_dir);
    // Read before the modules, for the providers fetched while they arrive;
    // reported where Terraform reports them, after the modules.
    let lock_path = in_dir(dir, LOCK_FILE);
    let (previous, lock_diags) = Locks::load(&lock_path);
    let options = SourceOptions {
        plugin_dirs: &args.plugin_dirs,
        cli_config: &run.cli_config,
        env: &run.env,
        launch_dir: run.launch_dir,
        work_dir: dir,
        network: &run.network,
    };
    let (source, source_diags): (Arc<dyn Source>, _) = if args.offline {
        let (source, diags) = build_offline_source(&options, vec![Platform::current()], None);
        (source, diags)
    } else {
        let (source, diags) = build_source(&options);
        (source, diags)
    };
    // Nothing to gain where providers come from local directories only.
    let prefetch = (args.get
        && !args.offline
        && args.plugin_dirs.is_empty()
        && !lock_diags.has_errors()
        && !source_diags.has_errors())
    .then(|| {
        let (source, data_dir, limits) = (source.clone(), data_dir.clone(), extract_limits(args));
        let (platform, layout, downloader) =
            (Platform::current(), run.layout, run.downloader.clone());
        let (dev_overrides, policy, parallelism) = (
            run.dev_overrides.clone(),
            run.policy.clone(),
            args.parallelism,
        );
        prefetch::Prefetch::new(
            dir,
            run.cache.clone(),
            // -upgrade looks past the lock file, and so does the prefetch.
            if args.upgrade {
                Locks::default()
            } else {
                previous.clone()
            },
            args.parallelism,
            Box::new(move |cache| Installer {
                limits: limits.clone(),
                parallelism,
                dev_overrides: dev_overrides.clone(),
                cache: Some(cache),
                policy: policy.clone(),
                ..Installer::new(
                    source.clone(),
                    InstallLayout::new(&data_dir, layout),
                    platform.clone(),
                    downloader.clone(),
                )
            }),
        )
    });
    let found = Found {
        previous,
        lock_diags,
        source,
        source_diags,
    };
    match &prefetch {
        Some(prefetch) => {
            futures_util::future::join(
                init_found(run, dir, out, found, Some(prefetch)),
                prefetch.run(),
            )
            .await
            .0
        }
        None => init_found(run, dir, out, found, None).await,
    }
}

/// What `init` reads of a working directory before its modules: the lock
/// file and the provider sources, each with what reading it found.
struct Found {
    previous: Locks,
    lock_diags: Diagnostics,
    source: Arc<dyn Source>,
    source_diags: Diagnostics,
}

/// [`init`] from the modules on; `prefetch`, when given, hears of each
/// module as it arrives and fetches what providers it can meanwhile.
async fn init_found(
    run: &Run<'_>,
    dir: &Path,
    out: &Arc<Output>,
    found: Found,
    prefetch: Option<&prefetch::Prefetch>,
) -> Result<Initialized, Diagnostics> {
    let args = run.args;
    let data_dir = in_dir(dir, data_dir());
    let mut warnings = Diagnostics::new();
    let modules = if args.get {
        let observer: &dyn WalkObserver = match prefetch {
            Some(prefetch) => prefetch,
            None => &(),
        };
        let modules = install_modules(&run.modules, dir, args.upgrade, out, observer).await;
        if let Some(prefetch) = prefetch {
            prefetch.walk_done();
        }
        modules?
    } else {
        None
    };
    let staged = modules.as_ref().and_then(PreparedModules::staged);
    let (requirements, module_diags) =
        configuration_requirements_staged(dir, &data_dir, staged.as_ref())?;
    warnings.extend(module_diags);
    if let Some(installation) = &run.cli_config.provider_installation
        && !installation.dev_overrides.is_empty()
    {
        warnings.push(dev_overrides_warning(&installation.dev_overrides));
    }

    let lock_path = in_dir(dir, LOCK_FILE);
    let Found {
        previous,
        lock_diags,
        source,
        source_diags,
    } = found;
    if lock_diags.has_errors() {
        return Err(lock_diags);
    }
    warnings.extend(lock_diags);

    if source_diags.has_errors() {
        return Err(source_diags);
    }
    out.diagnostics(&source_diags);

    out.init_output("initializing_provider_plugin_message", None, |ui| {
        format!("\n{}", ui.heading("Initializing provider plugins..."))
    });
    let lock_platforms = LockPlatforms::for_dir(dir, &args.platforms)?;
    let others = lock_platforms.others(&Platform::current());
    let installer = Installer {
        limits: extract_limits(args),
        lock_platforms: (!others.is_empty()).then(|| OtherPlatforms {
            platforms: others,
            listed_by: lock_platforms.listed_by.to_string(),
            hashes: run.platform_hashes.clone(),
        }),
        parallelism: args.parallelism,
        dev_overrides: run.dev_overrides.clone(),
        cache: run
            .cache
            .clone()
            .or_else(|| prefetch.and_then(prefetch::Prefetch::store)),
        link_mode: match prefetch.and_then(prefetch::Prefetch::store) {
            // Links into a store that is gone when the run ends would dangle.
            Some(_) if run.link_mode == LinkMode::Symlink => LinkMode::Auto,
            _ => run.link_mode,
        },
        events: out.event_sink(),
        offline: args.offline,
        policy: run.policy.clone(),
        ..Installer::new(
            source,
            InstallLayout::new(&data_dir, run.layout),
            Platform::current(),
            run.downloader.clone(),
        )
    };
    let mode = if args.upgrade {
        InstallMode::Upgrade
    } else {
        InstallMode::Normal
    };
    let outcome = installer.install(&requirements, &previous, mode).await?;
    // Linked from the prefetch's store, which only this directory uses and
    // which goes when the run ends: the files get the modes a download
    // straight into place gives them. (A multi-directory run's own cache is
    // shared by its directories: a mode is the inode's, so there the files
    // stay read-only, as they are when linked from any plugin cache.)
    if prefetch.and_then(prefetch::Prefetch::store).is_some() {
        let staged: Vec<PathBuf> = outcome
            .moves
            .iter()
            .map(|(staged, _)| staged.clone())
            .collect();
        tokio::task::spawn_blocking(move || staged.iter().try_for_each(|dir| add_owner_write(dir)))
            .await
            .map_err(std::io::Error::other)
            .and_then(|done| done)
            .map_err(|err| {
                Diagnostics::from(Diagnostic::error(
                    "Failed to install providers",
                    format!("Could not make the installed provider files writable: {err}."),
                ))
            })?;
    }
    let readonly = args.lockfile.as_deref() == Some("readonly");
    // Committing renames and fsyncs; off the runtime's one thread, so that
    // the directories of a multi-directory run commit side by side.
    let commit = Commit {
        module_moves: modules
            .as_ref()
            .map(PreparedModules::moves)
            .unwrap_or_default(),
        selections_file: installer.layout.selections_file(),
        platform: installer.platform.clone(),
        lock_path,
        readonly,
        out: out.clone(),
    };
    let (warnings, lock_file) =
        tokio::task::spawn_blocking(move || commit.finish(outcome, &previous, warnings))
            .await
            .map_err(|err| {
                Diagnostics::from(Diagnostic::error(
                    "Failed to install providers",
                    format!("The commit of the installed providers stopped: {err}."),
                ))
            })??;
    // The modules' staging area goes only now: their directory has moved.
    // Removing it and the writes after it are file work too, kept off the
    // runtime's thread for the same reason as the commit.
    let plugin_dirs = args.plugin_dirs.clone();
    tokio::task::spawn_blocking(move || {
        drop(modules);
        record_plugin_dirs(&data_dir, &plugin_dirs).map_err(|err| {
            Diagnostic::error(
                "Failed to save plugin locations",
                format!(
                    "Could not write {}: {err}. Check the permissions of the working directory and run tfinstall init again.",
                    data_dir.join(PLUGIN_PATH_FILE).display()
                ),
            )
        })?;
        crate::module::keep_readings(&data_dir);
        Ok::<(), Diagnostic>(())
    })
    .await
    .map_err(|err| {
        Diagnostic::error(
            "Failed to save plugin locations",
            format!("The last writes of the installation stopped: {err}."),
        )
    })??;
    Ok(Initialized::Installed {
        warnings,
        lock_file,
    })
}

/// Installs the modules of the configuration in `dir` into its staging
/// area, printing Terraform's lines; `None` when the root module calls no
/// module (Terraform then prints nothing about modules).
async fn install_modules(
    modules: &ModuleSources,
    dir: &Path,
    upgrade: bool,
    out: &Output,
    observer: &dyn WalkObserver,
) -> Result<Option<PreparedModules>, Diagnostics> {
    let calls_any =
        crate::module::module_calls(dir, Path::new(""), None).is_ok_and(|calls| !calls.is_empty());
    if !calls_any {
        return Ok(None);
    }
    let (code, heading) = if upgrade {
        ("upgrading_modules_message", "Upgrading modules...")
    } else {
        ("initializing_modules_message", "Initializing modules...")
    };
    out.init_output(code, Some(heading), |ui| {
        format!("\n{}", ui.heading(heading))
    });
    let prepared =
        crate::module_install::prepare(modules, dir, &data_dir(), upgrade, observer).await?;
    for event in &prepared.events {
        out.module_event(event);
    }
    out.diagnostics(&prepared.warnings);
    Ok(Some(prepared))
}

/// The package limits the flags set.
fn extract_limits(args: &InitArgs) -> ExtractLimits {
    ExtractLimits {
        max_total_bytes: args.max_package_size,
        max_entries: args.max_package_files,
        max_ratio: args.max_compression_ratio,
    }
}

/// Where Terraform records the `-plugin-dir` list for later commands.
const PLUGIN_PATH_FILE: &str = "plugin_path";

/// Saves the `-plugin-dir` list as Terraform does (its later commands read
/// it); a single empty `-plugin-dir=` forgets it. Unlike Terraform, this
/// happens only once the install succeeded, so a failed run changes nothing.
/// Its mode is 0644 less the umask, like Terraform's.
fn record_plugin_dirs(data_dir: &Path, plugin_dirs: &[PathBuf]) -> std::io::Result<()> {
    let path = data_dir.join(PLUGIN_PATH_FILE);
    match plugin_dirs {
        [] => Ok(()),
        [only] if only.as_os_str().is_empty() => match std::fs::remove_file(&path) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err),
            _ => Ok(()),
        },
        dirs => {
            let list: Vec<String> = dirs
                .iter()
                .map(|dir| dir.to_string_lossy().into_owned())
                .collect();
            let text = go_json_pretty(&serde_json::json!(list))?;
            write_if_changed(&path, &text)
        }
    }
}

/// JSON as Go's `json.MarshalIndent(v, "", "  ")` writes it, byte for byte:
/// serde_json's pretty form, plus Go's escaping of `<`, `>`, `&`, U+2028 and
/// U+2029 (which can only occur inside strings).
fn go_json_pretty(value: &serde_json::Value) -> std::io::Result<String> {
    let text = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
    Ok(text
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029"))
}

/// Commits the staged packages and records the result, in an order that
/// keeps the previous state whenever something is refused.
struct Commit {
    /// The new modules directory's rename into place, done with the
    /// providers' (first, so a refusal leaves both as they were).
    module_moves: Vec<(PathBuf, PathBuf)>,
    selections_file: Option<PathBuf>,
    platform: Platform,
    lock_path: PathBuf,
    readonly: bool,
    out: Arc<Output>,
}

impl Commit {
    fn finish(
        self,
        outcome: InstallOutcome,
        previous: &Locks,
        mut warnings: Diagnostics,
    ) -> Result<(Diagnostics, LockFileChange), Diagnostics> {
        let Commit {
            module_moves,
            selections_file,
            platform,
            lock_path,
            readonly,
            out,
        } = self;
        let locks_changed = !outcome.locks.equivalent(previous);
        if locks_changed && readonly {
            if !outcome.locks.same_providers(previous) {
                return Err(Diagnostic::error(
                "Provider dependency changes detected",
                "Changes to the required provider dependencies were detected, but the lock file is read-only. To use and record these requirements, run \"terraform init\" without the \"-lockfile=readonly\" flag.",
            )
            .into());
            }
            warnings.push(Diagnostic::warning(
                "Provider lock file not updated",
                format!(
                    "Changes to the provider selections were detected, but not saved in the .terraform.lock.hcl file. To record these selections, run \"terraform init\" without the \"-lockfile=readonly\" flag.{}",
                    uncovered_platform(previous, &outcome.locks, &platform)
                ),
            ));
        }

        let write_failed = |what: &str, err: std::io::Error| {
            Diagnostics::from(Diagnostic::error(
                format!("Failed to write {what}"),
                format!(
                    "{err}. Check the permissions of the working directory and run tfinstall init again."
                ),
            ))
        };
        let InstallOutcome {
            locks,
            mut staging,
            moves,
            selections,
            incomplete,
            third_party_signed,
            memo,
        } = outcome;
        staging
            .commit(&[module_moves, moves].concat())
            .map_err(|err| write_failed("the installed modules and providers", err))?;
        memo.save(&staging);
        if let Some(path) = selections_file {
            write_selections(&staging, &path, &selections)
                .map_err(|err| write_failed("selections.json", err))?;
        }

        if third_party_signed {
            out.third_party_signed(match Engine::current() {
            Engine::Terraform => "\nPartner and community providers are signed by their developers.\nIf you'd like to know more about provider signing, you can read about it here:\nhttps://developer.hashicorp.com/terraform/cli/plugins/signing",
            Engine::OpenTofu => "\nProviders are signed by their developers.\nIf you'd like to know more about provider signing, you can read about it here:\nhttps://opentofu.org/docs/cli/plugins/signing/",
        });
        }
        let mut lock_file = if locks_changed {
            LockFileChange::NotSaved
        } else {
            LockFileChange::Unchanged
        };
        if locks_changed && !readonly {
            if !incomplete.is_empty() {
                warnings.push(incomplete_lock_warning(&incomplete, &platform));
            }
            // Through the staging area, so a kill mid-write leaves no temporary
            // file beside the lock file.
            let rendered = locks.render();
            staging
            .replace_file(&lock_path, rendered.as_bytes(), FileMode::Exact(0o644), Flush::ToDisk)
            .map_err(|err| {
                Diagnostics::from(Diagnostic::error(
                    "Failed to update dependency lock file",
                    format!(
                        "Error while writing new dependency lock information to {LOCK_FILE}: {err}."
                    ),
                ))
            })?;
            if previous.is_empty() {
                lock_file = LockFileChange::Created;
                let engine = Engine::current();
                out.init_output("lock_info", None, |ui| format!(
                "\n{name} has created a lock file {} to record the provider\nselections it made above. Include this file in your version control repository\nso that {name} can guarantee to make the same selections by default when\nyou run \"{command} init\" in the future.",
                ui.bold(LOCK_FILE),
                name = engine.name(),
                command = engine.command(),
            ));
            } else {
                lock_file = LockFileChange::Updated;
                out.init_output("dependencies_lock_changes_info", None, |_| {
                format!("\n{} has made some changes to the provider dependency selections recorded\nin the .terraform.lock.hcl file. Review those changes and commit them to your\nversion control system if they represent changes you intended to make.", Engine::current().name())
            });
            }
        }
        Ok((warnings, lock_file))
    }
}

/// For a lock file that gains only hashes (versions unchanged): it lacks
/// this machine's platform's `h1:` (it was made on another platform, or
/// from checksums alone), and tfinstall's command adds it.
fn uncovered_platform(previous: &Locks, locks: &Locks, platform: &Platform) -> String {
    let uncovered: Vec<String> = locks
        .iter()
        .filter(|lock| {
            previous.get(&lock.addr).is_some_and(|old| {
                old.version == lock.version && !lock.hashes.is_subset(&old.hashes)
            })
        })
        .map(|lock| lock.addr.for_display())
        .collect();
    if uncovered.is_empty() {
        return String::new();
    }
    format!(
        "\n\nThe lock file does not record the h1: checksums of {} for {platform}, the platform of this machine. To add them, run:\n  tfinstall providers lock -platform={platform}\nand commit the lock file. To lock every platform your team uses whenever tfinstall init records a provider, list them in .tfinstall-platforms (docs/lock-platforms.md).",
        uncovered.join(", ")
    )
}

fn dev_overrides_warning(overrides: &[(ProviderAddr, PathBuf)]) -> Diagnostic {
    let list: String = overrides
        .iter()
        .map(|(addr, path)| format!("\n - {} in {}", addr.for_display(), path.display()))
        .collect();
    Diagnostic::warning(
        "Provider development overrides are in effect",
        format!(
            "The following provider development overrides are set in the CLI configuration:{list}\n\nThese providers are not installed by tfinstall init, and their entries in the lock file are left as they are. The behavior may therefore not match any released version of the provider and applying changes may cause the state to become incompatible with published releases."
        ),
    )
}

fn incomplete_lock_warning(providers: &[ProviderAddr], platform: &Platform) -> Diagnostic {
    let mut names: Vec<String> = providers.iter().map(ProviderAddr::for_display).collect();
    names.sort();
    let list: String = names.iter().map(|n| format!("\n  - {n}")).collect();
    Diagnostic::warning(
        "Incomplete lock file information for providers",
        format!(
            "Due to your customized provider installation methods, {name} was forced to calculate lock file checksums locally for the following providers:{list}\n\nThe current .terraform.lock.hcl file only includes checksums for {platform}, so {name} running on another platform will fail to install these providers.\n\nTo calculate additional checksums for another platform, run:\n  {command} providers lock -platform=linux_amd64\n(where linux_amd64 is the platform to generate)",
            name = Engine::current().name(),
            command = Engine::current().command(),
        ),
    )
}

/// `selections.json` as Terraform 0.13 writes it, so 0.13 accepts the
/// `.terraform/plugins` tree without reinstalling.
fn write_selections(
    staging: &Staging,
    path: &Path,
    selections: &BTreeMap<
        ProviderAddr,
        (crate::version::Version, crate::verify::hash::PackageHash),
    >,
) -> std::io::Result<()> {
    let mut entries: Vec<(String, serde_json::Value)> = selections
        .iter()
        .map(|(addr, (version, hash))| {
            (
                addr.to_string(),
                serde_json::json!({ "hash": hash.to_string(), "version": version.to_string() }),
            )
        })
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let map: serde_json::Map<String, serde_json::Value> = entries.into_iter().collect();
    let text = go_json_pretty(&serde_json::Value::Object(map))?;
    if holds(path, &text) {
        return Ok(());
    }
    staging.replace_file(
        path,
        text.as_bytes(),
        FileMode::LessUmask(0o644),
        Flush::ToDisk,
    )
}

/// Like the lock file, data-directory files are rewritten only when their
/// content changes, so a no-op run leaves `.terraform` untouched.
fn write_if_changed(path: &Path, text: &str) -> std::io::Result<()> {
    if holds(path, text) {
        return Ok(());
    }
    crate::fsutil::write_atomic_umask(path, text.as_bytes(), 0o644)
}

/// Whether the file at `path` already holds exactly `text`.
fn holds(path: &Path, text: &str) -> bool {
    std::fs::read(path).is_ok_and(|old| old == text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_written_the_way_go_marshal_indent_writes_it() {
        let value = serde_json::json!(["../mirror", "/opt/a<b>&c\u{2028}", "é"]);
        assert_eq!(
            go_json_pretty(&value).unwrap(),
            "[\n  \"../mirror\",\n  \"/opt/a\\u003cb\\u003e\\u0026c\\u2028\",\n  \"é\"\n]"
        );
        assert_eq!(go_json_pretty(&serde_json::json!([])).unwrap(), "[]");
    }
}
