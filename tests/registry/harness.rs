//! One registry scenario: a real HTTPS registry on 127.0.0.1 with a test CA,
//! a home directory, a working directory and the built binary, plus the
//! snapshots every failure test compares to prove nothing was touched.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use tempfile::TempDir;

use crate::support::{
    self, PgpKey, ProviderSpec, PublishedTree, Registry, TestCa, TestServer, UrlStyle,
};

pub const LOCK_FILE: &str = ".terraform.lock.hcl";

pub struct Scenario {
    pub ca: TestCa,
    pub server: TestServer,
    pub key: PgpKey,
    pub site: TempDir,
    pub home: TempDir,
    pub work: TempDir,
    env: Vec<(String, String)>,
}

/// What one run printed, with its exit status.
pub struct Run {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn from_output(output: Output) -> Self {
        Run {
            success: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Everything printed, for "contains" assertions that do not care which
    /// stream a line went to.
    pub fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    /// Messages keep their own line breaks; this undoes nothing else, so a
    /// test can look for a sentence that a renderer might wrap.
    pub fn joined(&self) -> String {
        self.all().split_whitespace().collect::<Vec<_>>().join(" ")
    }

    pub fn assert_success(&self) -> &Self {
        assert!(
            self.success,
            "tfinstall failed\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        );
        self
    }

    pub fn assert_failure(&self) -> &Self {
        assert!(
            !self.success,
            "tfinstall succeeded unexpectedly\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// Asserts `text` appears, ignoring how lines were wrapped.
    pub fn assert_says(&self, text: &str) -> &Self {
        let wanted = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            self.joined().contains(&wanted),
            "expected output to contain {text:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    pub fn assert_never_says(&self, text: &str) -> &Self {
        assert!(
            !self.all().contains(text),
            "output must not contain {text:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

/// Paths, bytes and modes of everything tfinstall may write in the working
/// directory: `.terraform/` and the lock file.
#[derive(Debug, PartialEq, Eq)]
pub struct Snapshot(BTreeMap<PathBuf, (u32, Option<Vec<u8>>)>);

impl Scenario {
    pub fn new() -> Self {
        let ca = TestCa::new();
        let server = TestServer::https(&ca);
        let site = tempfile::tempdir().unwrap();
        server.serve_dir(site.path());
        Scenario {
            ca,
            server,
            key: PgpKey::generate_with_signing_subkey(),
            site,
            home: tempfile::tempdir().unwrap(),
            work: tempfile::tempdir().unwrap(),
            env: Vec::new(),
        }
    }

    /// `127.0.0.1:PORT`, the registry's hostname in provider addresses.
    pub fn host(&self) -> String {
        self.server.host()
    }

    /// A registry signed by this scenario's key.
    pub fn registry(&self) -> Registry {
        Registry::new(&self.key)
    }

    /// Writes `registry` at the server's origin, with absolute URLs
    /// naming `127.0.0.1:PORT`.
    pub fn publish(&self, registry: Registry) -> PublishedTree {
        registry.write(self.site.path(), &self.server.url())
    }

    pub fn publish_styled(&self, registry: Registry, style: UrlStyle) -> PublishedTree {
        self.publish(registry.url_style(style))
    }

    /// Writes `main.tf` requiring each `(local name, source, constraint)`.
    pub fn require(&self, providers: &[(&str, &str, &str)]) {
        let entries: String = providers
            .iter()
            .map(|(name, source, constraint)| {
                if constraint.is_empty() {
                    format!("    {name} = {{ source = \"{source}\" }}\n")
                } else {
                    format!(
                        "    {name} = {{ source = \"{source}\", version = \"{constraint}\" }}\n"
                    )
                }
            })
            .collect();
        std::fs::write(
            self.work.path().join("main.tf"),
            format!("terraform {{\n  required_providers {{\n{entries}  }}\n}}\n"),
        )
        .unwrap();
    }

    /// Writes the CLI configuration file the run will use.
    pub fn cli_config(&mut self, text: &str) {
        let path = self.home.path().join("tfinstall-test.tfrc");
        std::fs::write(&path, text).unwrap();
        self.env(
            "TF_CLI_CONFIG_FILE",
            path.to_str().expect("temp paths are UTF-8"),
        );
    }

    pub fn env(&mut self, name: &str, value: &str) {
        self.env.retain(|(existing, _)| existing != name);
        self.env.push((name.to_owned(), value.to_owned()));
    }

    pub fn command(&self) -> assert_cmd::Command {
        let mut command = support::tfinstall_command(self.home.path());
        self.ca.configure(&mut command);
        command.current_dir(self.work.path()).arg("init");
        for (name, value) in &self.env {
            command.env(name, value);
        }
        command
    }

    pub fn run(&self) -> Run {
        Run::from_output(self.command().output().unwrap())
    }

    pub fn lock_file(&self) -> String {
        std::fs::read_to_string(self.work.path().join(LOCK_FILE)).unwrap()
    }

    /// The installed package directory for `address` (`HOST/NS/TYPE`).
    pub fn package_dir(&self, address: &str, version: &str) -> PathBuf {
        self.work
            .path()
            .join(".terraform/plugins")
            .join(address)
            .join(version)
            .join(support::current_platform())
    }

    pub fn snapshot(&self) -> Snapshot {
        let mut entries = BTreeMap::new();
        let lock = self.work.path().join(LOCK_FILE);
        if lock.exists() {
            record(self.work.path(), &lock, &mut entries);
        }
        let data = self.work.path().join(".terraform");
        if data.exists() {
            walk(self.work.path(), &data, &mut entries);
        }
        Snapshot(entries)
    }

    /// Runs tfinstall expecting a failure, and checks that the working
    /// directory is exactly as before.
    pub fn run_failing(&self) -> Run {
        let before = self.snapshot();
        let run = self.run();
        run.assert_failure();
        assert_eq!(
            self.snapshot(),
            before,
            "a failed run must leave .terraform and the lock file alone\n--- stderr\n{}",
            run.stderr
        );
        run
    }

    /// The server log's requests for `path` that carried `token`.
    pub fn authorized(&self, path: &str, token: &str) -> Vec<bool> {
        self.server
            .requests_to(path)
            .iter()
            .map(|request| request.header("authorization") == Some(&format!("Bearer {token}")))
            .collect()
    }
}

fn walk(root: &Path, dir: &Path, entries: &mut BTreeMap<PathBuf, (u32, Option<Vec<u8>>)>) {
    record(root, dir, entries);
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if std::fs::symlink_metadata(&path).unwrap().is_dir() {
            walk(root, &path, entries);
        } else {
            record(root, &path, entries);
        }
    }
}

fn record(root: &Path, path: &Path, entries: &mut BTreeMap<PathBuf, (u32, Option<Vec<u8>>)>) {
    use std::os::unix::fs::PermissionsExt as _;
    let meta = std::fs::symlink_metadata(path).unwrap();
    let content = if meta.is_file() {
        Some(std::fs::read(path).unwrap())
    } else if meta.file_type().is_symlink() {
        Some(
            std::fs::read_link(path)
                .unwrap()
                .into_os_string()
                .into_encoded_bytes(),
        )
    } else {
        None
    };
    entries.insert(
        path.strip_prefix(root).unwrap().to_path_buf(),
        (meta.permissions().mode(), content),
    );
}

/// The lock file Terraform would write for one provider.
pub fn lock_text(address: &str, version: &str, constraints: &str, hashes: &[String]) -> String {
    let mut hashes = hashes.to_vec();
    hashes.sort();
    hashes.dedup();
    let hash_lines: String = hashes
        .iter()
        .map(|hash| format!("    \"{hash}\",\n"))
        .collect();
    let version_lines = if constraints.is_empty() {
        format!("  version = \"{version}\"\n")
    } else {
        format!("  version     = \"{version}\"\n  constraints = \"{constraints}\"\n")
    };
    format!(
        "# This file is maintained automatically by \"terraform init\".\n# Manual edits may be lost in future updates.\n\nprovider \"{address}\" {{\n{version_lines}  hashes = [\n{hash_lines}  ]\n}}\n"
    )
}

/// Every `zh:` a signed `SHA256SUMS` vouches for, plus the `h1:` of the
/// current platform's package: what the lock file must record.
pub fn signed_hashes(tree: &PublishedTree, type_name: &str, version: &str) -> Vec<String> {
    let mut hashes: Vec<String> = tree
        .packages
        .iter()
        .filter(|p| p.type_name == type_name && p.version == version)
        .map(|p| p.zh.clone().unwrap())
        .collect();
    hashes.push(
        tree.package(type_name, version, &support::current_platform())
            .h1
            .clone(),
    );
    hashes
}

/// A provider published for the current platform and one other, so the
/// signed checksum list has more than the installed package in it.
pub fn two_platform_spec(namespace: &str, type_name: &str, version: &str) -> ProviderSpec {
    let platform = support::current_platform();
    let other = if platform == "windows_386" {
        "linux_arm"
    } else {
        "windows_386"
    };
    ProviderSpec::new(namespace, type_name, version).platforms(&[&platform, other])
}

/// The footer Terraform prints after installing a third-party signed provider.
pub const SIGNING_FOOTER: &str = "Partner and community providers are signed by their developers.\nIf you'd like to know more about provider signing, you can read about it here:\nhttps://developer.hashicorp.com/terraform/cli/plugins/signing";
