//! `tfinstall exec -- COMMAND…`: runs the command that follows tfinstall
//! (`terraform init`, `tofu init`) with the providers handed over
//! (`crate::handoff`), then exits with its status.
//!
//! Why a wrapper rather than a configuration file the user points
//! `TF_CLI_CONFIG_FILE` at: that variable makes Terraform skip
//! `~/.terraform.d/*.tfrc` and `credentials.tfrc.json`, so the file must
//! carry the user's tokens; held for one run (in memory where the platform
//! allows, `handoff::config_file`), no copy of them outlives it. The wrapper
//! also knows the working directory (its own `-chdir`, or the command's)
//! and reads the lock file, the plugin cache and the installed tree at the
//! moment the command starts, so the hand-off cannot go stale.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::addr::Platform;
use crate::cli::ExecArgs;
use crate::cliconfig::{self, CliEnv};
use crate::engine::Engine;
use crate::handoff::config_file::{self, HandedConfig};
use crate::handoff::{self, HandOff, WorkingDir};
use crate::stdio::errln;
use crate::workdir::data_dir;

/// The variable Terraform and OpenTofu read their main CLI configuration
/// file from.
const CONFIG_VARIABLE: &str = "TF_CLI_CONFIG_FILE";

/// Runs the command and returns the exit status to end with: the
/// command's, 128 + N when signal N ended it, 1 when it could not start.
pub async fn run(args: ExecArgs) -> u8 {
    let (program, command_args) = match args.command.split_first() {
        Some(split) => split,
        None => return 1,
    };
    let mut command = tokio::process::Command::new(program);
    command.args(command_args);
    remove_abandoned_hand_offs();
    // The hand-off configuration, freed or removed when this is dropped:
    // after the command has ended.
    let mut handed_config = None;
    let handoff = match skip_reason(command_args) {
        Some(reason) => Err(reason.to_owned()),
        None => prepare(command_args).map_err(|reason| format!("nothing is handed over: {reason}")),
    };
    match handoff {
        Ok(handoff) => match write_config(&handoff) {
            Ok(handed) => {
                note(&summary(&handoff));
                command.env(CONFIG_VARIABLE, handed.path());
                handed_config = Some(handed);
            }
            Err(err) => {
                errln!(
                    "\nError: Failed to write the hand-off configuration\n\n{err}. Set TMPDIR to a writable directory."
                );
                return 1;
            }
        },
        Err(reason) => note(&format!(
            "{reason}; running {} with your own CLI configuration.",
            program.to_string_lossy()
        )),
    }
    let mut signals = match Signals::listen() {
        Ok(signals) => signals,
        Err(err) => {
            errln!("\nError: Failed to set up signal handling\n\n{err}.");
            return 1;
        }
    };
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) => {
            errln!(
                "\nError: Failed to run {}\n\n{err}. Check that it is installed and on PATH.",
                program.to_string_lossy()
            );
            return 1;
        }
    };
    let status = signals.wait(&mut child).await;
    drop(handed_config);
    match status {
        Ok(status) => exit_code(status),
        Err(err) => {
            errln!(
                "\nError: Lost track of {}\n\n{err}.",
                program.to_string_lossy()
            );
            1
        }
    }
}

/// The working directory the command works in: its own `-chdir=DIR` (which
/// Terraform takes before the subcommand), else the current one.
pub fn work_dir(command_args: &[OsString]) -> PathBuf {
    command_args
        .iter()
        .map_while(|arg| arg.to_str().filter(|a| a.starts_with('-')))
        .find_map(|arg| {
            arg.strip_prefix("-chdir=")
                .or_else(|| arg.strip_prefix("--chdir="))
        })
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Why the command gets no hand-off though it might use one: `-upgrade`
/// asks the registries for newer versions, which a hand-off of the locked
/// ones would hide; `-plugin-dir` makes Terraform read only those
/// directories. Flags may also come from `TF_CLI_ARGS` and
/// `TF_CLI_ARGS_init`, which Terraform adds to the command line.
fn skip_reason(command_args: &[OsString]) -> Option<&'static str> {
    let from_env: Vec<OsString> = ["TF_CLI_ARGS", "TF_CLI_ARGS_init"]
        .iter()
        .filter_map(std::env::var_os)
        .flat_map(|value| {
            value
                .to_string_lossy()
                .split_whitespace()
                .map(OsString::from)
                .collect::<Vec<_>>()
        })
        .collect();
    let flags = || command_args.iter().chain(&from_env).filter_map(|a| flag(a));
    if flags().any(|(name, value)| name == "upgrade" && !is_go_false(value)) {
        return Some("-upgrade asks the registries for newer versions, so nothing is handed over");
    }
    if flags().any(|(name, _)| name == "plugin-dir") {
        return Some(
            "with -plugin-dir Terraform reads only those directories, so nothing is handed over",
        );
    }
    None
}

/// `-name[=value]` or `--name[=value]` as Go's flag package reads it.
fn flag(arg: &OsStr) -> Option<(&str, Option<&str>)> {
    let arg = arg.to_str()?;
    let body = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'))?;
    Some(match body.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (body, None),
    })
}

/// Go's `strconv.ParseBool` false spellings, which a boolean flag takes.
fn is_go_false(value: Option<&str>) -> bool {
    matches!(value, Some("0" | "f" | "F" | "false" | "FALSE" | "False"))
}

fn prepare(command_args: &[OsString]) -> Result<HandOff, String> {
    let launch_dir = std::env::current_dir().map_err(|err| err.to_string())?;
    // Collecting the components drops the `.` of `-chdir=.` and of a
    // relative data directory, so the paths handed over read plainly.
    let dir: PathBuf = launch_dir
        .join(work_dir(command_args))
        .components()
        .collect();
    let work = WorkingDir {
        data_dir: dir.join(data_dir()).components().collect(),
        dir,
        launch_dir,
    };
    let env = CliEnv::from_process();
    let (user, diags) = cliconfig::load(&env);
    // Terraform shows these problems itself when it starts; the hand-off
    // goes on with what could be read, as Terraform does.
    if diags.has_errors() {
        note(
            "the CLI configuration has problems (the command will show them); the hand-off keeps what could be read",
        );
    }
    handoff::prepare(&user, &env, &work, Engine::current(), &Platform::current())
        .map_err(|reason| reason.to_string())
}

fn summary(handoff: &HandOff) -> String {
    let trees: std::collections::BTreeSet<&Path> =
        handoff.handed.iter().map(|h| h.tree.as_path()).collect();
    let count = handoff.handed.len();
    let trees: Vec<String> = trees.iter().map(|t| t.display().to_string()).collect();
    format!(
        "handing {count} provider{} over from {}",
        if count == 1 { "" } else { "s" },
        trees.join(" and ")
    )
}

fn note(message: &str) {
    errln!("tfinstall: {message}");
}

/// The configuration, readable by this user only, for as long as the
/// returned value lives (`handoff::config_file`).
fn write_config(handoff: &HandOff) -> std::io::Result<HandedConfig> {
    config_file::write(
        &format!(
            "# The CLI configuration tfinstall hands to one command: yours, with the\n# installed providers' packages offered first. Gone when the command ends.\n\n{}",
            cliconfig::render(&handoff.config)
        ),
        &format!("{}.tfrc", Engine::current().command()),
        &std::env::temp_dir(),
    )
}

/// Removes the hand-off files that killed runs left behind (where the
/// hand-off is a file), and says so.
fn remove_abandoned_hand_offs() {
    let removed = config_file::remove_abandoned(&std::env::temp_dir());
    if !removed.is_empty() {
        let count = removed.len();
        note(&format!(
            "removed {count} hand-off director{} left behind by a tfinstall exec that was killed",
            if count == 1 { "y" } else { "ies" }
        ));
    }
}

/// The signals tfinstall handles while the command runs, listened for
/// before the command starts: a signal that arrived in between would
/// otherwise end tfinstall and leave the command running on its own.
/// A terminal's Ctrl-C (SIGINT, SIGQUIT) reaches the whole process group,
/// so the command gets it already and tfinstall only stays alive to clean
/// up; SIGTERM and SIGHUP, which supervisors send to one process (`docker
/// stop`, a CI runner's cancel), are passed on.
#[cfg(unix)]
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    fn listen() -> std::io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            quit: signal(SignalKind::quit())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    async fn wait(
        &mut self,
        child: &mut tokio::process::Child,
    ) -> std::io::Result<std::process::ExitStatus> {
        let pid = child.id();
        loop {
            let forward = tokio::select! {
                status = child.wait() => return status,
                _ = self.interrupt.recv() => None,
                _ = self.quit.recv() => None,
                _ = self.terminate.recv() => Some(libc::SIGTERM),
                _ = self.hangup.recv() => Some(libc::SIGHUP),
            };
            if let (Some(signal), Some(pid)) = (forward, pid) {
                // SAFETY: kill only sends a signal; the pid is our child's,
                // which cannot be reaped (and reused) before `wait` returns.
                unsafe {
                    libc::kill(pid as libc::pid_t, signal);
                }
            }
        }
    }
}

/// Elsewhere signals keep their default actions.
#[cfg(not(unix))]
struct Signals;

#[cfg(not(unix))]
impl Signals {
    fn listen() -> std::io::Result<Signals> {
        Ok(Signals)
    }

    async fn wait(
        &mut self,
        child: &mut tokio::process::Child,
    ) -> std::io::Result<std::process::ExitStatus> {
        child.wait().await
    }
}

fn exit_code(status: std::process::ExitStatus) -> u8 {
    #[cfg(unix)]
    if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&status) {
        return 128u8.saturating_add(signal as u8);
    }
    status
        .code()
        .map(|code| u8::try_from(code & 0xff).unwrap_or(1))
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_commands_chdir_is_its_working_directory() {
        assert_eq!(
            work_dir(&args(&["-chdir=infra", "init"])),
            PathBuf::from("infra")
        );
        assert_eq!(work_dir(&args(&["init"])), PathBuf::from("."));
        // Only before the subcommand, as Terraform reads it.
        assert_eq!(work_dir(&args(&["init", "-chdir=x"])), PathBuf::from("."));
    }

    #[test]
    fn upgrade_and_plugin_dir_turn_the_hand_off_off() {
        assert!(skip_reason(&args(&["init", "-upgrade"])).is_some());
        assert!(skip_reason(&args(&["init", "--upgrade=true"])).is_some());
        assert!(skip_reason(&args(&["init", "-upgrade=false"])).is_none());
        assert!(skip_reason(&args(&["init", "-plugin-dir=/m"])).is_some());
        assert!(skip_reason(&args(&["init", "-input=false"])).is_none());
    }
}
