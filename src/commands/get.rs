//! `tfinstall get`: the modules half of `terraform init`, as `terraform get`.

use std::path::Path;
use std::sync::Arc;

use crate::cli::GetArgs;
use crate::cliconfig::{self, CliEnv};
use crate::diag::{Diagnostic, Diagnostics};
use crate::fetch::DownloadSettings;
use crate::module_install::{ModuleSources, module_cache, prepare};
use crate::output::Output;
use crate::source::configured::NetworkSources;
use crate::workdir::data_dir;

pub async fn run(args: GetArgs) -> bool {
    // One run per process: each module is read once for it.
    crate::module::remember_modules_read();
    let out = Output::new(false, args.no_color);
    match get(&args, &out).await {
        Ok(()) => true,
        Err(diags) => {
            out.diagnostics(&diags);
            false
        }
    }
}

async fn get(args: &GetArgs, out: &Arc<Output>) -> Result<(), Diagnostics> {
    let env = CliEnv::from_process();
    let (cli_config, config_diags) = cliconfig::load(&env);
    out.config_problems(&config_diags);
    let client = crate::http::build_client()?;
    let network = NetworkSources::new(&cli_config, &env, client.clone());
    let modules = ModuleSources::for_run(
        &network,
        client,
        DownloadSettings::default(),
        cli_config.netrc.clone(),
        args.parallelism,
    )
    .with_cache(module_cache(&cli_config))
    .link_mode(args.module_link_mode)
    .with_live_events(out.module_event_sink());
    let prepared = prepare(&modules, Path::new("."), &data_dir(), args.update, &()).await?;
    for event in &prepared.events {
        out.module_event(event);
    }
    out.diagnostics(&prepared.warnings);
    prepared.commit().map_err(|err| {
        Diagnostics::from(Diagnostic::error(
            "Failed to install modules",
            format!(
                "Could not move the installed modules into place: {err}. Check the permissions of the working directory and run tfinstall get again."
            ),
        ))
    })
}
