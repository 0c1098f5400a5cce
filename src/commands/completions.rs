//! `tfinstall completions SHELL`: a completion script generated from the
//! same clap definition that parses the arguments, so it never goes stale.

use crate::cli::CompletionsArgs;

pub fn run(args: CompletionsArgs) -> bool {
    let mut command = crate::cli::command();
    clap_complete::generate(
        args.shell,
        &mut command,
        "tfinstall",
        &mut crate::stdio::stdout(),
    );
    true
}
