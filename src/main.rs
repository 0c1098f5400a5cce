//! The `tfinstall` binary: argument parsing and dispatch; the work is in the library.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::FromArgMatches as _;

use tfinstall::cli::{CacheCommand, Cli, Command, ProvidersCommand, normalize_args};
use tfinstall::engine::Engine;
use tfinstall::output::Output;
use tfinstall::workdir::engine::{ChosenBy, EngineChoice};

fn main() -> ExitCode {
    limit_malloc_arenas();
    let cli = match tfinstall::cli::command()
        .try_get_matches_from(normalize_args(std::env::args_os()))
        .and_then(|matches| Cli::from_arg_matches(&matches))
    {
        Ok(cli) => cli,
        Err(err) => {
            let _ = tfinstall::stdio::end_on_broken_pipe(err.print());
            // Terraform exits 1 on bad flags; help and version are successes.
            return if err.use_stderr() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    // Without TFINSTALL_LOG nothing is logged: every failure the user must
    // see is a diagnostic, and dependencies' own error logs (the TLS
    // verifier's, say) would only repeat them in another format.
    let filter = tracing_subscriber::EnvFilter::builder()
        .with_default_directive(tracing_subscriber::filter::LevelFilter::OFF.into())
        .with_env_var("TFINSTALL_LOG")
        .from_env_lossy();
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(tfinstall::stdio::stderr)
        .init();
    // Terraform looks for the implied `terraform.d/plugins` mirror relative
    // to where it was started, before -chdir applies.
    let launch_dir = std::env::current_dir().unwrap_or_default();
    if let Some(dir) = &cli.chdir
        && let Err(err) = std::env::set_current_dir(dir)
    {
        tfinstall::stdio::print(
            &format!(
                "\nError: Invalid -chdir option\n\nThe -chdir option {:?} cannot be used: {err}.\n",
                dir.display().to_string()
            ),
            true,
        );
        return ExitCode::from(1);
    }
    // `init` and `cache warm` choose for each of their directories; every
    // other command works in one, or in none (then the current one's files
    // choose, as they choose where the CLI configuration is read from).
    let choice = match &cli.command {
        Command::Init(_) | Command::Cache(CacheCommand::Warm(_)) => None,
        Command::Exec(args) => Some(tfinstall::commands::exec::work_dir(
            args.command.get(1..).unwrap_or_default(),
        )),
        _ => Some(PathBuf::from(".")),
    }
    .map(|dir| EngineChoice::for_dir(&dir, cli.engine));
    let choice = match (choice, &cli.command) {
        (None, _) => None,
        (Some(Ok(choice)), _) => Some(choice),
        // These read or write the lock file whose engine is in question.
        (Some(Err(diag)), Command::Providers(args)) => {
            let json = args.command.is_none() && args.json;
            Output::new(json, args.no_color).diagnostics(&diag.into());
            return ExitCode::from(1);
        }
        // The others leave the lock file alone: the *.tofu files choose,
        // as they did before lock files did.
        (Some(Err(_)), _) => Some(EngineChoice {
            engine: Engine::OpenTofu,
            chosen_by: ChosenBy::TofuFiles,
            lock_made_for: Some(Engine::Terraform),
        }),
    };
    if let Some(choice) = &choice {
        choice.engine.select();
    }
    // One thread runs all network I/O (one HTTP/2 connection carries every
    // download); hashing, writing and unpacking go to blocking threads. With
    // worker threads, each 16 KiB chunk crossed threads, a futex wake-up
    // apiece, and cold installs were a third slower on two cores.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            tfinstall::stdio::print(
                &format!("\nError: could not start the async runtime: {err}\n"),
                true,
            );
            return ExitCode::from(1);
        }
    };
    let ok = match cli.command {
        Command::Init(args) => {
            runtime.block_on(tfinstall::commands::init::run(args, launch_dir, cli.engine))
        }
        Command::Get(args) => runtime.block_on(tfinstall::commands::get::run(args)),
        Command::Providers(args) => match args.command {
            Some(ProvidersCommand::Lock(lock)) => {
                runtime.block_on(tfinstall::commands::providers::lock::run(lock))
            }
            Some(ProvidersCommand::Mirror(mirror)) => runtime.block_on(
                tfinstall::commands::providers::mirror::run(mirror, launch_dir),
            ),
            Some(ProvidersCommand::Check(check)) => {
                tfinstall::commands::providers::check::run(check)
            }
            None => tfinstall::commands::providers::tree::run(args, choice.unwrap_or_default()),
        },
        Command::Completions(args) => tfinstall::commands::completions::run(args),
        Command::Cache(CacheCommand::Warm(args)) => runtime.block_on(
            tfinstall::commands::cache::warm(args, launch_dir, cli.engine),
        ),
        Command::Cache(CacheCommand::Verify(args)) => tfinstall::commands::cache::verify(args),
        Command::Cache(CacheCommand::Stats(args)) => tfinstall::commands::cache::stats(args),
        Command::Cache(CacheCommand::Prune(args)) => tfinstall::commands::cache::prune(args),
        Command::Serve(args) => runtime.block_on(tfinstall::serve::run(args, launch_dir)),
        // The command's own exit status, not just success or failure.
        Command::Exec(args) => {
            return ExitCode::from(runtime.block_on(tfinstall::commands::exec::run(args)));
        }
    };
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// glibc gives a thread that allocates while another holds the lock an arena
/// of its own (up to eight per core), and what is freed in an arena stays
/// there for that arena's next use. Each download is written or unpacked on
/// a thread of its own, so peak memory grew with the number of providers:
/// 33 MB for 100 × 1 MB against 23 MB for 10 × 20 MB, and 22 MB for both
/// with two arenas (issue 15). Set before any thread starts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn limit_malloc_arenas() {
    // SAFETY: mallopt only sets an allocator parameter; it is called here
    // before the process has started a second thread.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_malloc_arenas() {}
