use std::process::ExitCode;

use clap::Parser;

use tfinstall::cli::{Cli, Command, normalize_args};

fn main() -> ExitCode {
    let cli = match Cli::try_parse_from(normalize_args(std::env::args_os())) {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            // Terraform exits 1 on bad flags; help and version are successes.
            return if err.use_stderr() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("TFINSTALL_LOG"))
        .with_writer(std::io::stderr)
        .init();
    // Terraform looks for the implied `terraform.d/plugins` mirror relative
    // to where it was started, before -chdir applies.
    let launch_dir = std::env::current_dir().unwrap_or_default();
    if let Some(dir) = &cli.chdir
        && let Err(err) = std::env::set_current_dir(dir)
    {
        eprintln!(
            "\nError: Invalid -chdir option\n\nThe -chdir option {:?} cannot be used: {err}.",
            dir.display().to_string()
        );
        return ExitCode::from(1);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("\nError: could not start the async runtime: {err}");
            return ExitCode::from(1);
        }
    };
    let ok = match cli.command {
        Command::Init(args) => runtime.block_on(tfinstall::commands::init::run(args, launch_dir)),
        Command::Providers(args) => tfinstall::commands::providers::run(args),
        Command::Completions(args) => tfinstall::commands::completions::run(args),
    };
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
