//! Shared pieces of the hardening tests (hostile archives, network faults,
//! crash safety): a working directory to run `tfinstall init` in, a snapshot
//! of everything it may write, and the three ways a package archive reaches
//! the installer (packed filesystem mirror, network mirror, registry) with an
//! archive of the test's choosing in place of the fixture's.
//!
//! Use it as `support::hardening`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::{
    FsMirror, Layout, NetworkMirror, PgpKey, ProviderSpec, Registry, TestCa, TestServer,
    current_platform, edit_json, sha256_hex, tfinstall_command, zh_hash,
};

/// No test run of the binary may take longer than this; a hang fails the
/// test instead of blocking the suite.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(60);

pub const NAMESPACE: &str = "hashicorp";
pub const TYPE: &str = "null";

/// A working directory with a configuration, a HOME, and room for mirrors.
pub struct Project {
    root: tempfile::TempDir,
}

impl Project {
    pub fn new() -> Self {
        let project = Project {
            root: tempfile::tempdir().expect("temp dir"),
        };
        std::fs::create_dir_all(project.work()).expect("create work dir");
        std::fs::create_dir_all(project.home()).expect("create home dir");
        project
    }

    pub fn root(&self) -> &Path {
        self.root.path()
    }

    pub fn work(&self) -> PathBuf {
        self.root.path().join("work")
    }

    pub fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    /// Requires `source` (e.g. `hashicorp/null`) with `constraint` (may be empty).
    pub fn require(&self, source: &str, constraint: &str) {
        let version = if constraint.is_empty() {
            String::new()
        } else {
            format!("\n      version = \"{constraint}\"")
        };
        std::fs::write(
            self.work().join("main.tf"),
            format!(
                "terraform {{\n  required_providers {{\n    {TYPE} = {{\n      source = \"{source}\"{version}\n    }}\n  }}\n}}\n"
            ),
        )
        .expect("write main.tf");
    }

    /// `tfinstall init ARGS…` in the working directory, bounded in time.
    pub fn init(&self, args: &[&str]) -> assert_cmd::Command {
        let mut command = tfinstall_command(&self.home());
        command
            .current_dir(self.work())
            .arg("init")
            .arg("-no-color")
            .args(args)
            .timeout(RUN_TIMEOUT);
        command
    }

    /// Every path below the working directory except the configuration,
    /// with its type, mode and content: what a failed run must not change.
    pub fn snapshot(&self) -> Snapshot {
        let mut snapshot = Snapshot::default();
        snapshot.collect(&self.work(), Path::new(""));
        snapshot.0.remove(Path::new("main.tf"));
        // tfinstall's memo of installed packages' hashes holds inode numbers
        // and times, so no two runs write the same one; it is only ever
        // trusted where it matches the files, so whatever state it is in
        // cannot make an install wrong.
        snapshot
            .0
            .remove(Path::new(".terraform/.tfinstall-hashes.json"));
        snapshot
    }

    pub fn lock_file(&self) -> Option<String> {
        std::fs::read_to_string(self.work().join(".terraform.lock.hcl")).ok()
    }

    /// The installed package directory of `version` for `host`.
    pub fn package_dir(&self, host: &str, version: &str) -> PathBuf {
        self.work()
            .join(".terraform/plugins")
            .join(host)
            .join(NAMESPACE)
            .join(TYPE)
            .join(version)
            .join(current_platform())
    }

    pub fn staging_dir(&self) -> PathBuf {
        self.work().join(".terraform/.tfinstall-staging")
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    Dir { mode: u32 },
    File { mode: u32, content: Vec<u8> },
    Link { target: PathBuf },
}

/// Paths (relative) to what is there; compared whole, so a difference shows
/// up as a readable diff of paths rather than a byte dump.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot(pub BTreeMap<PathBuf, Node>);

impl Snapshot {
    fn collect(&mut self, dir: &Path, relative: &Path) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let entry = entry.expect("read dir entry");
            let path = entry.path();
            let rel = relative.join(entry.file_name());
            let meta = std::fs::symlink_metadata(&path).expect("stat");
            let node = if meta.file_type().is_symlink() {
                Node::Link {
                    target: std::fs::read_link(&path).expect("readlink"),
                }
            } else if meta.is_dir() {
                self.collect(&path, &rel);
                Node::Dir { mode: mode(&meta) }
            } else {
                Node::File {
                    mode: mode(&meta),
                    content: std::fs::read(&path).expect("read file"),
                }
            };
            self.0.insert(rel, node);
        }
    }

    /// Just the paths, for assertion messages.
    pub fn paths(&self) -> Vec<String> {
        self.0.keys().map(|p| p.display().to_string()).collect()
    }

    /// Regular files below `prefix` as (relative name, mode, content).
    pub fn files_below(&self, prefix: &Path) -> Vec<(String, u32, Vec<u8>)> {
        self.0
            .iter()
            .filter_map(|(path, node)| {
                let rel = path.strip_prefix(prefix).ok()?;
                match node {
                    Node::File { mode, content } => {
                        Some((rel.display().to_string(), *mode, content.clone()))
                    }
                    _ => None,
                }
            })
            .collect()
    }
}

#[cfg(unix)]
fn mode(meta: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    meta.permissions().mode() & 0o7777
}

#[cfg(not(unix))]
fn mode(_meta: &std::fs::Metadata) -> u32 {
    0
}

/// Asserts the two snapshots are equal, showing the differing paths.
pub fn assert_unchanged(before: &Snapshot, after: &Snapshot, context: &str) {
    if before == after {
        return;
    }
    let mut diff = Vec::new();
    for (path, node) in &after.0 {
        match before.0.get(path) {
            None => diff.push(format!("+ {}", path.display())),
            Some(old) if old != node => diff.push(format!("~ {}", path.display())),
            Some(_) => {}
        }
    }
    for path in before.0.keys() {
        if !after.0.contains_key(path) {
            diff.push(format!("- {}", path.display()));
        }
    }
    panic!(
        "{context}: the working directory changed:\n{}",
        diff.join("\n")
    );
}

/// How the package archive reaches the installer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    /// A packed filesystem mirror given with `-plugin-dir`.
    FsMirror,
    /// A network mirror over HTTPS, listing the archive's `zh:` hash.
    NetworkMirror,
    /// A registry over HTTPS whose signed `SHA256SUMS` lists the archive.
    Registry,
}

impl Channel {
    pub const ALL: [Channel; 3] = [Channel::FsMirror, Channel::NetworkMirror, Channel::Registry];
}

/// One channel with its server (if any), publishing chosen archive bytes
/// for chosen versions of `hashicorp/null`, each one properly authenticated
/// (listed hash, valid signature), so only the archive itself can be wrong.
pub struct Origin {
    pub channel: Channel,
    pub ca: TestCa,
    pub server: Option<TestServer>,
    key: PgpKey,
    site: tempfile::TempDir,
}

impl Origin {
    /// Served over HTTPS with HTTP/2 offered (and so used).
    pub fn new(channel: Channel) -> Self {
        Self::with_server(channel, TestServer::https)
    }

    /// Served over HTTPS speaking only HTTP/1.1.
    pub fn http1(channel: Channel) -> Self {
        Self::with_server(channel, TestServer::https_http1_only)
    }

    fn with_server(channel: Channel, start: fn(&TestCa) -> TestServer) -> Self {
        let ca = TestCa::new();
        let server = (channel != Channel::FsMirror).then(|| start(&ca));
        let site = tempfile::tempdir().expect("temp dir");
        if let Some(server) = &server {
            server.serve_dir(site.path());
        }
        Origin {
            channel,
            ca,
            server,
            key: PgpKey::generate(),
            site,
        }
    }

    pub fn server(&self) -> &TestServer {
        self.server.as_ref().expect("this channel has a server")
    }

    /// The `source` address to require.
    pub fn source(&self) -> String {
        match self.channel {
            Channel::Registry => format!("{}/{NAMESPACE}/{TYPE}", self.host()),
            _ => format!("{NAMESPACE}/{TYPE}"),
        }
    }

    /// The directory the server serves (registry or mirror tree).
    pub fn site(&self) -> &Path {
        self.site.path()
    }

    /// The provider's hostname as installed directories spell it.
    pub fn host(&self) -> String {
        match self.channel {
            Channel::Registry => self.server().localhost_host(),
            _ => "registry.terraform.io".to_owned(),
        }
    }

    /// Publishes every `(version, archive)` pair, replacing what was there.
    pub fn publish(&self, packages: &[(&str, Vec<u8>)]) {
        let platform = current_platform();
        let specs: Vec<ProviderSpec> = packages
            .iter()
            .map(|(version, _)| ProviderSpec::new(NAMESPACE, TYPE, version))
            .collect();
        let _ = std::fs::remove_dir_all(self.site.path());
        std::fs::create_dir_all(self.site.path()).expect("create site");
        match self.channel {
            Channel::FsMirror => {
                let mirror = specs.iter().fold(FsMirror::new(), |m, spec| {
                    m.provider(spec.clone(), Layout::Packed)
                });
                let tree = mirror.write(self.site.path());
                for (version, zip) in packages {
                    let package = tree.package(TYPE, version, &platform);
                    std::fs::write(&package.path, zip).expect("write archive");
                }
            }
            Channel::NetworkMirror => {
                let mirror = specs
                    .iter()
                    .fold(NetworkMirror::new(), |m, spec| m.provider(spec.clone()));
                let tree = mirror.write(self.site.path(), &self.server().url());
                for (version, zip) in packages {
                    let package = tree.package(TYPE, version, &platform);
                    std::fs::write(&package.path, zip).expect("write archive");
                    let doc = package
                        .path
                        .parent()
                        .expect("archive dir")
                        .join(format!("{version}.json"));
                    edit_json(&doc, |value| {
                        value["archives"][platform.as_str()]["hashes"] =
                            serde_json::json!([zh_hash(zip)]);
                    });
                }
            }
            Channel::Registry => {
                let registry = specs
                    .iter()
                    .fold(Registry::new(&self.key), |r, spec| r.provider(spec.clone()));
                let tree = registry.write(self.site.path(), &self.server().url());
                for ((version, zip), spec) in packages.iter().zip(&specs) {
                    let package = tree.package(TYPE, version, &platform);
                    std::fs::write(&package.path, zip).expect("write archive");
                    let files = package.path.parent().expect("files dir");
                    let sums = format!("{}  {}\n", sha256_hex(zip), package.filename);
                    std::fs::write(files.join(spec.sums_filename()), &sums).expect("write sums");
                    std::fs::write(
                        files.join(format!("{}.sig", spec.sums_filename())),
                        self.key.sign_detached(sums.as_bytes()),
                    )
                    .expect("write signature");
                    let (os, arch) = platform.split_once('_').expect("os_arch");
                    let doc = self.site.path().join(format!(
                        "v1/providers/{NAMESPACE}/{TYPE}/{version}/download/{os}/{arch}"
                    ));
                    edit_json(&doc, |value| value["shasum"] = sha256_hex(zip).into());
                }
            }
        }
    }

    /// The server path the archive of `version` is fetched from.
    pub fn archive_path(&self, version: &str) -> String {
        let file = format!(
            "terraform-provider-{TYPE}_{version}_{}.zip",
            current_platform()
        );
        match self.channel {
            Channel::FsMirror => panic!("a filesystem mirror has no archive URL"),
            Channel::NetworkMirror => {
                format!("/registry.terraform.io/{NAMESPACE}/{TYPE}/{file}")
            }
            Channel::Registry => format!("/files/{NAMESPACE}/{TYPE}/{version}/{file}"),
        }
    }

    /// Points `command` at this origin: `-plugin-dir`, or a CLI
    /// configuration naming the network mirror, plus trust in the test CA.
    pub fn configure(&self, project: &Project, command: &mut assert_cmd::Command) {
        match self.channel {
            Channel::FsMirror => {
                command.arg(format!("-plugin-dir={}", self.site.path().display()));
            }
            Channel::NetworkMirror => {
                let config = project.root().join("network-mirror.tfrc");
                std::fs::write(
                    &config,
                    format!(
                        "provider_installation {{\n  network_mirror {{\n    url = \"{}\"\n  }}\n}}\n",
                        self.server().url()
                    ),
                )
                .expect("write CLI config");
                command.env("TF_CLI_CONFIG_FILE", config);
                self.ca.configure(command);
            }
            Channel::Registry => {
                self.ca.configure(command);
            }
        }
    }
}

/// Standard error and output of a finished run, for messages.
pub fn output_text(output: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}
