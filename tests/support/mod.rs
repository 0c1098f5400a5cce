// Each integration test compiles this module on its own and uses only part of it.
#![allow(dead_code)]

//! Shared toolkit for integration tests: real HTTPS servers with a CA made at
//! test time, real zips, real OpenPGP signatures and on-disk registry and
//! mirror trees, so that tests exercise the same code paths as production;
//! a [`Project`] (home and working directory) to run the built binary in,
//! and the [`Snapshot`] every "nothing changed" assertion compares.
//!
//! Include it with `mod support;` and use the re-exports below.

pub mod cache_world;
pub mod connect_proxy;
pub mod credentials_helper;
pub mod fake_package;
pub mod fixtures;
pub mod git_server;
pub mod hardening;
pub mod hosted;
pub mod json_stream;
pub mod oci_registry;
pub mod openpgp;
pub mod project;
pub mod pty;
pub mod server;
pub mod snapshot;
pub mod sshd;
pub mod terraform;
pub mod tls;
pub mod zips;

use std::path::{Path, PathBuf};

use base64::Engine as _;
use sha2::{Digest, Sha256};

// A test that uses only some of these would otherwise warn about the rest.
#[allow(unused_imports)]
pub use self::{
    connect_proxy::ConnectProxy,
    credentials_helper::{CredentialsHelper, credentials_helper_block},
    fake_package::Pkg,
    fixtures::{
        FsMirror, Layout, MirrorHashes, NetworkMirror, PackageInfo, Payload, ProviderSpec,
        PublishedTree, Registry, UrlStyle, edit_json,
    },
    git_server::{FileChange, GitRepo, GitServer},
    hosted::HostedRegistry,
    json_stream::validated_stream,
    openpgp::PgpKey,
    project::{
        LOCK_HEADER, Project, Run, filesystem_mirror_config, host_block, lock_block, lock_file,
        lock_text, network_mirror_config, read_text, required_providers,
    },
    server::{Fault, LoggedRequest, Response, TestServer},
    snapshot::{Entry, LOCK_FILE, Snapshot, mode_of},
    tls::TestCa,
    zips::{Compression, RawZip, ZipEntry, build_zip, build_zip_sizes_after},
};

/// The files tfinstall keeps for itself in a data directory, which
/// Terraform ignores: the memo of installed packages' hashes and the
/// modules' readings. Left out where `.terraform` is compared with
/// Terraform's.
#[allow(dead_code)]
pub const TFINSTALL_DATA_FILES: [&str; 2] = [".tfinstall-hashes.json", ".tfinstall-readings.json"];

/// Copies a fixture tree as a fresh clone has it: without what a local run
/// of the README's quick start leaves in the bundled example (`.terraform`
/// and the lock file, ignored by git).
pub fn copy_fixture_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == ".terraform" || name == ".terraform.lock.hcl" {
            continue;
        }
        let target = to.join(&name);
        if entry.file_type().unwrap().is_dir() {
            copy_fixture_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The module and provider lines of a `providers` tree, Terraform's or
/// tfinstall's, each as its path from the root (`module.net › module.sub`,
/// `module.net › provider[…] >= 1.0`). Sibling order does not count (Go's
/// map order makes Terraform's vary from run to run), nor the characters
/// of the indentation (Terraform's holds U+00A0); tfinstall's lines saying
/// what made a provider required are left out.
pub fn provider_tree_paths(text: &str) -> std::collections::BTreeSet<String> {
    let start = text
        .find("Providers required by configuration:\n.\n")
        .unwrap_or_else(|| panic!("no provider tree in {text:?}"));
    let tree = &text[start..];
    let mut stack: Vec<&str> = Vec::new();
    let mut paths = std::collections::BTreeSet::new();
    for line in tree.lines().skip(2).take_while(|line| !line.is_empty()) {
        let marker = line
            .find("├── ")
            .or_else(|| line.find("└── "))
            .unwrap_or_else(|| panic!("not a tree line: {line:?}"));
        let depth = line[..marker].chars().count() / 4;
        let label = &line[marker + "├── ".len()..];
        stack.truncate(depth);
        if label.starts_with("module.") || label.starts_with("provider[") {
            stack.push(label);
            paths.insert(stack.join(" › "));
        }
    }
    paths
}

/// The `Authorization` value of HTTP Basic credentials `login:password`.
pub fn basic_auth(login: &str, password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{login}:{password}"))
    )
}

/// The platform the binary under test installs for, spelled the way Go (and so
/// Terraform's package names) spells it, so fixtures can publish a package the
/// installer will actually pick.
pub fn current_platform() -> String {
    let os = match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    };
    format!("{os}_{arch}")
}

pub fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(sha256(data))
}

/// Terraform's legacy `zh:` hash: the SHA-256 of the zip file's bytes.
pub fn zh_hash(zip_bytes: &[u8]) -> String {
    format!("zh:{}", sha256_hex(zip_bytes))
}

/// Terraform's `h1:` hash (Go's dirhash "Hash1") over (name, content) pairs.
///
/// Written independently of the crate's own implementation so that a bug
/// there cannot hide behind a fixture that computes the same wrong value.
pub fn h1_hash<N: AsRef<str>, C: AsRef<[u8]>>(files: &[(N, C)]) -> String {
    let mut entries: Vec<(&str, String)> = files
        .iter()
        .map(|(name, content)| (name.as_ref(), sha256_hex(content.as_ref())))
        .collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let summary: String = entries
        .iter()
        .map(|(name, digest)| format!("{digest}  {name}\n"))
        .collect();
    format!(
        "h1:{}",
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(summary.as_bytes()))
    )
}

/// The `h1:` hash of a zip's contents, read back with the zip crate, the way
/// Terraform hashes an archive: every central-directory entry, raw names.
pub fn h1_of_zip(zip_bytes: &[u8]) -> String {
    use std::io::Read as _;
    let mut archive =
        zip::ZipArchive::new(std::io::Cursor::new(zip_bytes)).expect("fixture zip must be valid");
    let mut files = Vec::new();
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index).expect("fixture zip entry");
        let mut content = Vec::new();
        entry.read_to_end(&mut content).expect("fixture zip entry");
        files.push((
            String::from_utf8_lossy(entry.name_raw()).into_owned(),
            content,
        ));
    }
    h1_hash(&files)
}

/// A `tfinstall` command that sees none of the developer's or CI's own
/// Terraform settings, so tests behave the same everywhere.
///
/// This workplace sets `SSL_CERT_FILE`, `SSL_CERT_DIR` and
/// `TF_CLI_CONFIG_FILE` globally; any of them leaking in would silently change
/// which CAs are trusted or which CLI config is read. `home` becomes `HOME`
/// and the root of the XDG directories; proxy variables are dropped so that
/// loopback servers are reached directly. Trust a test CA with
/// [`TestCa::configure`].
pub fn tfinstall_command(home: &Path) -> assert_cmd::Command {
    clean_environment(
        assert_cmd::Command::new(env!("CARGO_BIN_EXE_tfinstall")),
        home,
    )
}

/// The `std::process::Command` that `command` would run (program,
/// arguments, environment, directory), for a test that spawns the process
/// to kill it; standard input is closed.
pub fn spawnable(command: &assert_cmd::Command) -> std::process::Command {
    let mut spawnable = std::process::Command::new(command.get_program());
    spawnable.args(command.get_args());
    for (name, value) in command.get_envs() {
        match value {
            Some(value) => spawnable.env(name, value),
            None => spawnable.env_remove(name),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        spawnable.current_dir(dir);
    }
    spawnable.stdin(std::process::Stdio::null());
    spawnable
}

/// [`tfinstall_command`] run with this umask (e.g. `0o027`), through
/// `/bin/sh`, since the umask is per process and tests share one.
pub fn tfinstall_command_with_umask(home: &Path, umask: u32) -> assert_cmd::Command {
    let mut command = assert_cmd::Command::new("/bin/sh");
    command
        .arg("-c")
        .arg(umask_script(umask))
        .arg(env!("CARGO_BIN_EXE_tfinstall"));
    clean_environment(command, home)
}

/// A `sh -c` script that sets `umask` and then runs `$0` with `$@`.
pub fn umask_script(umask: u32) -> String {
    format!("umask {umask:03o} && exec \"$0\" \"$@\"")
}

fn clean_environment(mut command: assert_cmd::Command, home: &Path) -> assert_cmd::Command {
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        let upper = name.to_ascii_uppercase();
        if upper.starts_with("TF_")
            || upper.starts_with("XDG_")
            || upper.starts_with("SSL_CERT_")
            || upper.ends_with("_PROXY")
            || upper.starts_with("RUST_")
            || upper.starts_with("OPENTOFU_")
            || upper == "TFINSTALL_ENGINE"
            || upper == "TFINSTALL_LOCK_PLATFORMS"
            || upper == "TFINSTALL_TEST_PLATFORM"
            || upper == "NETRC"
        {
            command.env_remove(name);
        }
    }
    command.envs(home_environment(home));
    command
}

/// `HOME` and the XDG base directories, all below `home`: what a command
/// run for a test sees as its user's directories.
pub fn home_environment(home: &Path) -> [(&'static str, PathBuf); 4] {
    [
        ("HOME", home.to_path_buf()),
        ("XDG_CONFIG_HOME", home.join(".config")),
        ("XDG_DATA_HOME", home.join(".local/share")),
        ("XDG_CACHE_HOME", home.join(".cache")),
    ]
}
