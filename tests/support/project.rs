//! A test project: a temp home directory and working directory, the files
//! a user would write there (`.tf` files, CLI configuration), `tfinstall`
//! run in it through [`tfinstall_command`], and what a run printed.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Output;

use tempfile::TempDir;

use super::snapshot::{LOCK_FILE, Snapshot};
use super::tls::{TestCa, trust_only};
use super::{current_platform, tfinstall_command};

/// `home/` and `work/` below one temp dir (canonical, so paths in output
/// compare equal to the ones a test builds), plus room beside them for
/// mirrors and other inputs that must stay outside the working directory.
pub struct Project {
    _tmp: TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
    pub work: PathBuf,
    /// Set on every command, after the clean environment.
    env: Vec<(OsString, OsString)>,
    /// The only CA every command trusts, if any.
    ca_pem: Option<PathBuf>,
}

impl Project {
    pub fn new() -> Project {
        let tmp = tempfile::tempdir().expect("temp dir");
        let root = tmp.path().canonicalize().expect("canonical temp dir");
        let home = root.join("home");
        let work = root.join("work");
        std::fs::create_dir_all(&home).expect("create home");
        std::fs::create_dir_all(&work).expect("create working dir");
        Project {
            _tmp: tmp,
            root,
            home,
            work,
            env: Vec::new(),
            ca_pem: None,
        }
    }

    /// A project whose `main.tf` requires each `(local name, source,
    /// constraint)`.
    pub fn requiring(providers: &[(&str, &str, &str)]) -> Project {
        let project = Project::new();
        project.require(providers);
        project
    }

    /// Writes `content` to `rel` below the working directory.
    pub fn write(&self, rel: &str, content: &str) -> PathBuf {
        write_file(&self.work.join(rel), content)
    }

    /// Writes `content` to `rel` below the home directory (`.terraformrc`,
    /// `.terraform.d/NAME.tfrc`, …).
    pub fn write_home(&self, rel: &str, content: &str) -> PathBuf {
        write_file(&self.home.join(rel), content)
    }

    /// A new directory `name` below the temp root, outside the working dir.
    pub fn dir(&self, name: &str) -> PathBuf {
        let dir = self.root.join(name);
        std::fs::create_dir_all(&dir).expect("create dir");
        dir
    }

    /// Writes `main.tf` requiring each `(local name, source, constraint)`.
    pub fn require(&self, providers: &[(&str, &str, &str)]) {
        self.write("main.tf", &required_providers(providers));
    }

    /// Every later command trusts `ca` and no other CA.
    pub fn trust(&mut self, ca: &TestCa) -> &mut Self {
        self.ca_pem = Some(ca.ca_pem_path());
        self
    }

    /// Every later command gets `name=value` (replacing an earlier value).
    pub fn env(&mut self, name: &str, value: impl AsRef<OsStr>) -> &mut Self {
        self.env.retain(|(existing, _)| existing != name);
        self.env.push((name.into(), value.as_ref().to_owned()));
        self
    }

    /// Writes the CLI configuration every later command reads, named by
    /// `TF_CLI_CONFIG_FILE`; returns its path.
    pub fn cli_config(&mut self, text: &str) -> PathBuf {
        let path = self.write_home("tfinstall-test.tfrc", text);
        self.env("TF_CLI_CONFIG_FILE", &path);
        path
    }

    /// `tfinstall ARGS…` in the working directory, not yet run.
    pub fn command(&self, args: &[&str]) -> assert_cmd::Command {
        let mut command = tfinstall_command(&self.home);
        if let Some(ca_pem) = &self.ca_pem {
            trust_only(&mut command, ca_pem);
        }
        for (name, value) in &self.env {
            command.env(name, value);
        }
        command.current_dir(&self.work).args(args);
        command
    }

    /// Runs `tfinstall ARGS…`.
    pub fn run(&self, args: &[&str]) -> Run {
        Run::of(self.command(args))
    }

    /// Runs `tfinstall init ARGS…`.
    pub fn init(&self, args: &[&str]) -> Run {
        let mut all = vec!["init"];
        all.extend_from_slice(args);
        self.run(&all)
    }

    /// The data directory, `.terraform`.
    pub fn data(&self) -> PathBuf {
        self.work.join(".terraform")
    }

    pub fn lock_path(&self) -> PathBuf {
        self.work.join(LOCK_FILE)
    }

    pub fn lock(&self) -> String {
        read_text(&self.lock_path())
    }

    /// Where the default layout installs `provider` (`HOST/NS/TYPE`) at
    /// `version` for this platform.
    pub fn installed_dir(&self, provider: &str, version: &str) -> PathBuf {
        self.data()
            .join("plugins")
            .join(provider)
            .join(version)
            .join(current_platform())
    }

    /// Everything `init` may write: a failed run must leave it as it was.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::of_install(&self.work)
    }

    /// `.terraform` and the lock file are exactly as in `before`.
    #[track_caller]
    pub fn assert_unchanged(&self, before: &Snapshot) {
        assert_eq!(
            &self.snapshot(),
            before,
            "a failed run changed .terraform or the lock file"
        );
    }

    /// Runs `tfinstall init ARGS…` expecting exit 1, and checks that it
    /// left `.terraform` and the lock file exactly as they were.
    #[track_caller]
    pub fn init_failing(&self, args: &[&str]) -> Run {
        let before = self.snapshot();
        let run = self.init(args);
        run.assert_failure();
        assert_eq!(
            self.snapshot(),
            before,
            "a failed run changed .terraform or the lock file\n--- stderr\n{}",
            run.stderr
        );
        run
    }
}

impl Default for Project {
    fn default() -> Self {
        Self::new()
    }
}

/// What one run printed, and how it exited.
pub struct Run {
    /// `None` if a signal ended the process.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(output: Output) -> Run {
        Run {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

impl Run {
    /// Runs `command` to completion.
    pub fn of(mut command: assert_cmd::Command) -> Run {
        Run::from(command.output().expect("run tfinstall"))
    }

    /// Everything printed, for messages whose stream does not matter.
    pub fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    /// [`Run::all`] with every run of white space made one space, so a test
    /// can look for a sentence that a renderer might wrap.
    pub fn joined(&self) -> String {
        fold_whitespace(&self.all())
    }

    /// The `- …` progress lines of stdout, in order.
    pub fn progress(&self) -> Vec<&str> {
        self.stdout
            .lines()
            .filter(|line| line.starts_with("- "))
            .collect()
    }

    #[track_caller]
    pub fn assert_success(&self) -> &Self {
        assert_eq!(
            self.code,
            Some(0),
            "expected success\n{}",
            self.both_streams()
        );
        self
    }

    /// Exit status 1, the one Terraform (and tfinstall) uses for every error.
    #[track_caller]
    pub fn assert_failure(&self) -> &Self {
        assert_eq!(
            self.code,
            Some(1),
            "expected exit 1\n{}",
            self.both_streams()
        );
        self
    }

    #[track_caller]
    pub fn assert_stdout_has(&self, text: &str) -> &Self {
        assert!(
            self.stdout.contains(text),
            "stdout lacks {text:?}\n{}",
            self.both_streams()
        );
        self
    }

    #[track_caller]
    pub fn assert_stderr_has(&self, text: &str) -> &Self {
        assert!(
            self.stderr.contains(text),
            "stderr lacks {text:?}\n{}",
            self.both_streams()
        );
        self
    }

    /// `text` was printed, on either stream.
    #[track_caller]
    pub fn assert_contains(&self, text: &str) -> &Self {
        assert!(
            self.all().contains(text),
            "output lacks {text:?}\n{}",
            self.both_streams()
        );
        self
    }

    /// `text` was printed on neither stream.
    #[track_caller]
    pub fn assert_not_contains(&self, text: &str) -> &Self {
        assert!(
            !self.all().contains(text),
            "output must not contain {text:?}\n{}",
            self.both_streams()
        );
        self
    }

    /// `text` was printed, on either stream, however its lines were wrapped.
    #[track_caller]
    pub fn assert_says(&self, text: &str) -> &Self {
        assert!(
            self.joined().contains(&fold_whitespace(text)),
            "output lacks {text:?}\n{}",
            self.both_streams()
        );
        self
    }

    fn both_streams(&self) -> String {
        format!("--- stdout\n{}\n--- stderr\n{}", self.stdout, self.stderr)
    }
}

fn fold_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The file at `path` as text, naming the file if it cannot be read.
pub fn read_text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|err| panic!("reading {}: {err}", path.display()))
}

fn write_file(path: &Path, content: &str) -> PathBuf {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create parent dir");
    }
    std::fs::write(path, content).unwrap_or_else(|err| panic!("writing {}: {err}", path.display()));
    path.to_path_buf()
}

/// A `terraform { required_providers { … } }` block for each
/// `(local name, source, constraint)`; an empty constraint is left out.
pub fn required_providers(providers: &[(&str, &str, &str)]) -> String {
    let entries: String = providers
        .iter()
        .map(|(name, source, constraint)| {
            let version = if constraint.is_empty() {
                String::new()
            } else {
                format!("      version = \"{constraint}\"\n")
            };
            format!("    {name} = {{\n      source  = \"{source}\"\n{version}    }}\n")
        })
        .collect();
    format!("terraform {{\n  required_providers {{\n{entries}  }}\n}}\n")
}

/// The two comment lines every lock file starts with (Terraform's
/// `internal/depsfile/locks_file.go`).
pub const LOCK_HEADER: &str = "# This file is maintained automatically by \"terraform init\".\n# Manual edits may be lost in future updates.\n";

/// One lock file block as Terraform writes it: hashes sorted and
/// without repeats, `constraints` left out when empty.
pub fn lock_block<H: AsRef<str>>(
    provider: &str,
    version: &str,
    constraints: &str,
    hashes: &[H],
) -> String {
    let mut hashes: Vec<&str> = hashes.iter().map(AsRef::as_ref).collect();
    hashes.sort_unstable();
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
/// (Terraform's is by provider address).
pub fn lock_file(blocks: &[String]) -> String {
    format!("{LOCK_HEADER}{}", blocks.concat())
}

/// [`lock_file`] of one [`lock_block`] per `(provider, version,
/// constraints, hashes)`.
pub fn lock_text(entries: &[(&str, &str, &str, &[&str])]) -> String {
    let blocks: Vec<String> = entries
        .iter()
        .map(|(provider, version, constraints, hashes)| {
            lock_block(provider, version, constraints, hashes)
        })
        .collect();
    lock_file(&blocks)
}

/// A CLI configuration `host` block sending `hostname`'s provider registry
/// API (`providers.v1`) to `providers_url`, so no real registry is asked.
pub fn host_block(hostname: &str, providers_url: &str) -> String {
    format!(
        "host \"{hostname}\" {{\n  services = {{\n    \"providers.v1\" = \"{providers_url}\"\n  }}\n}}\n"
    )
}

/// A CLI configuration whose only installation method is the network
/// mirror at `url`.
pub fn network_mirror_config(url: &str) -> String {
    format!("provider_installation {{\n  network_mirror {{\n    url = \"{url}\"\n  }}\n}}\n")
}

/// A CLI configuration whose only installation method is the filesystem
/// mirror at `path`.
pub fn filesystem_mirror_config(path: &Path) -> String {
    format!(
        "provider_installation {{\n  filesystem_mirror {{\n    path = \"{}\"\n  }}\n}}\n",
        path.display()
    )
}
