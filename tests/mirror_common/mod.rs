// Each test crate includes this module and uses only part of it.
#![allow(dead_code)]

//! A working directory and home directory for running `tfinstall init`
//! against CLI configurations, with the before/after snapshot every failure
//! test compares. Shared by the provider-installation and network-mirror
//! tests; the servers and fixtures come from `tests/support`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

use crate::support::{TestCa, current_platform, tfinstall_command};

pub const LOCK_FILE: &str = ".terraform.lock.hcl";

/// The two comment lines every lock file starts with (§10.1).
pub const LOCK_HEADER: &str = "# This file is maintained automatically by \"terraform init\".\n# Manual edits may be lost in future updates.\n";

pub struct Project {
    home: TempDir,
    work: TempDir,
}

/// What one run printed.
pub struct Run {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Everything printed, for messages whose stream does not matter.
    pub fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    #[track_caller]
    pub fn assert_success(&self) -> &Self {
        assert!(
            self.success,
            "tfinstall init failed\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        );
        self
    }

    #[track_caller]
    pub fn assert_failure(&self) -> &Self {
        assert!(
            !self.success,
            "tfinstall init should have failed\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// Asserts `needle` was printed (on either stream), showing both on failure.
    #[track_caller]
    pub fn assert_contains(&self, needle: &str) -> &Self {
        assert!(
            self.all().contains(needle),
            "expected output to contain:\n{needle}\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    #[track_caller]
    pub fn assert_not_contains(&self, needle: &str) -> &Self {
        assert!(
            !self.all().contains(needle),
            "expected output not to contain:\n{needle}\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

impl Project {
    /// A working directory holding `main.tf` and an empty home directory.
    pub fn new(main_tf: &str) -> Self {
        let project = Project {
            home: tempfile::tempdir().expect("temp home"),
            work: tempfile::tempdir().expect("temp working dir"),
        };
        project.write("main.tf", main_tf);
        project
    }

    pub fn home(&self) -> &Path {
        self.home.path()
    }

    pub fn dir(&self) -> &Path {
        self.work.path()
    }

    /// Writes a file below the working directory.
    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        write_file(&self.dir().join(rel), text)
    }

    /// Writes a file below the home directory (`.terraformrc`,
    /// `.terraform.d/NAME.tfrc`, …).
    pub fn write_home(&self, rel: &str, text: &str) -> PathBuf {
        write_file(&self.home().join(rel), text)
    }

    /// The command, run in the working directory, trusting `ca` if given.
    pub fn command(&self, ca: Option<&TestCa>) -> assert_cmd::Command {
        let mut command = tfinstall_command(self.home());
        command.current_dir(self.dir());
        if let Some(ca) = ca {
            ca.configure(&mut command);
        }
        command
    }

    /// `tfinstall init -no-color ARGS…`.
    pub fn init(&self, ca: Option<&TestCa>, args: &[&str]) -> Run {
        self.run(self.command(ca), args)
    }

    /// Runs a prepared command (extra environment, say) as `init`.
    pub fn run(&self, mut command: assert_cmd::Command, args: &[&str]) -> Run {
        let output = command
            .arg("init")
            .arg("-no-color")
            .args(args)
            .output()
            .expect("run tfinstall");
        Run {
            success: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    pub fn lock_text(&self) -> String {
        std::fs::read_to_string(self.dir().join(LOCK_FILE)).expect("read lock file")
    }

    /// Where the default layout puts a package for this platform.
    pub fn installed_dir(&self, provider: &str, version: &str) -> PathBuf {
        self.dir()
            .join(".terraform/plugins")
            .join(provider)
            .join(version)
            .join(current_platform())
    }

    /// The provider executable as installed, for telling packages apart.
    #[track_caller]
    pub fn installed_executable(&self, provider: &str, version: &str) -> Vec<u8> {
        let type_name = provider.rsplit('/').next().expect("provider address");
        let path = self
            .installed_dir(provider, version)
            .join(format!("terraform-provider-{type_name}_v{version}"));
        std::fs::read(&path).unwrap_or_else(|err| panic!("read {}: {err}", path.display()))
    }

    /// Every path below `.terraform` and the lock file with its kind, mode
    /// and bytes: a failed run must leave this exactly as it found it.
    pub fn snapshot(&self) -> Snapshot {
        let mut entries = BTreeMap::new();
        for rel in [".terraform", LOCK_FILE] {
            record(self.dir(), &self.dir().join(rel), &mut entries);
        }
        Snapshot(entries)
    }
}

#[derive(Debug, PartialEq, Eq)]
pub struct Snapshot(BTreeMap<PathBuf, Entry>);

#[derive(Debug, PartialEq, Eq)]
enum Entry {
    Dir { mode: u32 },
    File { mode: u32, bytes: Vec<u8> },
    Symlink { target: PathBuf },
}

fn record(root: &Path, path: &Path, entries: &mut BTreeMap<PathBuf, Entry>) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    let rel = path.strip_prefix(root).expect("below root").to_path_buf();
    let mode = mode_of(&meta);
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path).expect("read symlink");
        entries.insert(rel, Entry::Symlink { target });
    } else if meta.is_dir() {
        entries.insert(rel, Entry::Dir { mode });
        for child in std::fs::read_dir(path).expect("read dir") {
            record(root, &child.expect("dir entry").path(), entries);
        }
    } else {
        let bytes = std::fs::read(path).expect("read file");
        entries.insert(rel, Entry::File { mode, bytes });
    }
}

#[cfg(unix)]
fn mode_of(meta: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    meta.permissions().mode()
}

#[cfg(not(unix))]
fn mode_of(meta: &std::fs::Metadata) -> u32 {
    u32::from(meta.permissions().readonly())
}

fn write_file(path: &Path, text: &str) -> PathBuf {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create parent dir");
    }
    std::fs::write(path, text).expect("write file");
    path.to_path_buf()
}

/// A `required_providers` block for `(local name, source, constraint)`.
pub fn main_tf(providers: &[(&str, &str, &str)]) -> String {
    let entries: String = providers
        .iter()
        .map(|(name, source, version)| {
            format!("    {name} = {{\n      source  = \"{source}\"\n      version = \"{version}\"\n    }}\n")
        })
        .collect();
    format!("terraform {{\n  required_providers {{\n{entries}  }}\n}}\n")
}

/// One lock file block as Terraform writes it (§10.1).
pub fn lock_block(provider: &str, version: &str, constraints: &str, hashes: &[&str]) -> String {
    let mut hashes: Vec<&str> = hashes.to_vec();
    hashes.sort();
    hashes.dedup();
    let mut block = format!("\nprovider \"{provider}\" {{\n");
    if constraints.is_empty() {
        block.push_str(&format!("  version = \"{version}\"\n"));
    } else {
        block.push_str(&format!(
            "  version     = \"{version}\"\n  constraints = \"{constraints}\"\n"
        ));
    }
    if !hashes.is_empty() {
        block.push_str("  hashes = [\n");
        for hash in hashes {
            block.push_str(&format!("    \"{hash}\",\n"));
        }
        block.push_str("  ]\n");
    }
    block.push_str("}\n");
    block
}

/// A whole lock file from blocks made by [`lock_block`], in the order given
/// (callers pass them sorted by address).
pub fn lock_file(blocks: &[String]) -> String {
    format!("{LOCK_HEADER}{}", blocks.concat())
}
