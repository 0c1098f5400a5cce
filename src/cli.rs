//! Command-line parsing. Terraform spells long flags with one dash
//! (`-plugin-dir=DIR`); clap wants two, so arguments are respelled before
//! parsing and both spellings work, letting tfinstall replace `terraform init`
//! in existing scripts.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::install::layout::LayoutKind;

#[derive(Debug, Parser)]
#[command(
    name = "tfinstall",
    version,
    about = "A fast, safe, standalone Terraform provider installer",
    long_about = "A fast, safe, standalone Terraform provider installer.\n\nIt does the provider half of `terraform init`: reads the configuration's \
required providers and the CLI configuration, selects versions, honours \
.terraform.lock.hcl, and downloads, verifies and installs the packages.\n\n\
Flags take Terraform's one-dash spelling (-upgrade) or the two-dash one (--upgrade)."
)]
pub struct Cli {
    /// Switch to DIR before doing anything else, as Terraform's -chdir does.
    #[arg(long, value_name = "DIR", global = true)]
    pub chdir: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Install the providers the configuration in the working directory needs.
    Init(InitArgs),
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Search only this directory for providers (repeatable); no registry is contacted.
    #[arg(long = "plugin-dir", value_name = "DIR")]
    pub plugin_dirs: Vec<PathBuf>,

    /// Ignore versions recorded in the lock file and pick the newest acceptable ones.
    #[arg(long)]
    pub upgrade: bool,

    /// Set to "readonly" to check the lock file without ever changing it.
    #[arg(long, value_name = "MODE")]
    pub lockfile: Option<String>,

    /// Where to install: `plugins` (.terraform/plugins, read by Terraform 0.13)
    /// or `providers` (.terraform/providers, read by Terraform 0.14 and later).
    #[arg(long, value_enum, default_value = "plugins")]
    pub layout: LayoutKind,

    /// How many providers to fetch at once.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub parallelism: usize,

    /// Largest size one provider package may unpack to (bytes, or with a
    /// unit: 512MiB, 4GiB); stops decompression bombs.
    #[arg(long, value_name = "BYTES", env = "TFINSTALL_MAX_PACKAGE_SIZE",
          default_value = "2GiB", value_parser = crate::units::parse_size)]
    pub max_package_size: u64,

    /// Most entries (files and directories) one provider package may hold.
    #[arg(long, value_name = "N", env = "TFINSTALL_MAX_PACKAGE_FILES",
          default_value = "10000", value_parser = crate::units::parse_positive)]
    pub max_package_files: u64,

    /// Most an archive entry may inflate relative to its compressed size
    /// (checked once it passes 1 MiB).
    #[arg(long, value_name = "N", env = "TFINSTALL_MAX_COMPRESSION_RATIO",
          default_value = "200", value_parser = crate::units::parse_positive)]
    pub max_compression_ratio: u64,

    /// How often a failed archive download is retried (5xx, resets, short bodies, stalls).
    #[arg(long, value_name = "N", env = "TFINSTALL_DOWNLOAD_RETRIES",
          default_value = "3", value_parser = crate::units::parse_count)]
    pub download_retries: u32,

    /// Wait before the first download retry, doubled for each further one (up to 30s).
    #[arg(long, value_name = "DURATION", env = "TFINSTALL_DOWNLOAD_RETRY_DELAY",
          default_value = "1s", value_parser = crate::units::parse_duration)]
    pub download_retry_delay: std::time::Duration,

    /// Abandon a download attempt when no data arrives for this long (e.g. 30s, 500ms).
    #[arg(long, value_name = "DURATION", env = "TFINSTALL_DOWNLOAD_STALL_TIMEOUT",
          default_value = "30s", value_parser = crate::units::parse_duration)]
    pub download_stall_timeout: std::time::Duration,

    /// Disable coloured output.
    #[arg(long = "no-color")]
    pub no_color: bool,

    /// Accepted for compatibility with `terraform init`; tfinstall never asks for input.
    #[arg(
        long,
        value_name = "BOOL",
        default_value = "true",
        hide_default_value = true
    )]
    pub input: String,
}

/// Respells `-name` and `-name=value` as `--name…` for every argument before a
/// lone `--`. Single-letter flags (`-h`, `-V`) are left alone.
pub fn normalize_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut passthrough = false;
    for (i, arg) in args.into_iter().enumerate() {
        if i == 0 || passthrough {
            out.push(arg);
            continue;
        }
        let Some(text) = arg.to_str() else {
            out.push(arg);
            continue;
        };
        if text == "--" {
            passthrough = true;
            out.push(arg);
            continue;
        }
        let name = text
            .strip_prefix('-')
            .filter(|rest| !rest.starts_with('-'))
            .map(|rest| rest.split('=').next().unwrap_or_default());
        match name {
            Some(name) if name.len() > 1 && name.starts_with(|c: char| c.is_ascii_alphabetic()) => {
                out.push(OsString::from(format!("-{text}")));
            }
            _ => out.push(arg),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(args: &[&str]) -> Vec<String> {
        normalize_args(args.iter().map(OsString::from))
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn single_dash_long_flags_are_respelled() {
        assert_eq!(
            norm(&[
                "tfinstall",
                "-chdir=x",
                "init",
                "-plugin-dir=/a",
                "-upgrade",
                "--no-color",
                "-h"
            ]),
            [
                "tfinstall",
                "--chdir=x",
                "init",
                "--plugin-dir=/a",
                "--upgrade",
                "--no-color",
                "-h"
            ]
        );
    }

    #[test]
    fn arguments_after_double_dash_are_untouched() {
        assert_eq!(
            norm(&["t", "init", "--", "-upgrade"]),
            ["t", "init", "--", "-upgrade"]
        );
    }

    /// The flags' defaults are spelled as text for `--help`; they must stay
    /// the limits the library documents.
    #[test]
    fn limit_defaults_match_the_library_defaults() {
        let cli = Cli::parse_from(["tfinstall", "init"]);
        let Command::Init(args) = cli.command;
        let limits = crate::install::extract::ExtractLimits::default();
        assert_eq!(args.max_package_size, limits.max_total_bytes);
        assert_eq!(args.max_package_files, limits.max_entries);
        assert_eq!(args.max_compression_ratio, limits.max_ratio);
        let download = crate::fetch::DownloadSettings::default();
        assert_eq!(args.download_retries, download.retries);
        assert_eq!(args.download_retry_delay, download.backoff);
        assert_eq!(args.download_stall_timeout, download.stall_timeout);
        assert_eq!(args.max_package_size, download.max_bytes);
    }

    #[test]
    fn parses_terraform_spelling() {
        let cli = Cli::parse_from(normalize_args(
            [
                "tfinstall",
                "init",
                "-plugin-dir=a",
                "-plugin-dir",
                "b",
                "-lockfile=readonly",
                "-input=false",
            ]
            .iter()
            .map(OsString::from),
        ));
        let Command::Init(args) = cli.command;
        assert_eq!(args.plugin_dirs, [PathBuf::from("a"), PathBuf::from("b")]);
        assert_eq!(args.lockfile.as_deref(), Some("readonly"));
    }
}
