//! `tfinstall providers mirror`: the packed layout plus network-mirror
//! indexes, made from a real HTTPS registry (signed SHA256SUMS) or from
//! other mirrors, then served by a static HTTPS server to `tfinstall init`.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use support::{
    Fault, PgpKey, ProviderSpec, PublishedTree, Registry, Response, TestCa, TestServer,
    current_platform, tfinstall_command,
};
use tempfile::TempDir;

fn other_platform() -> String {
    ["linux_arm64", "linux_amd64"]
        .iter()
        .map(|p| p.to_string())
        .find(|p| *p != current_platform())
        .unwrap()
}

const MAIN_TF: &str = r#"terraform {
  required_providers {
    null = {
      source  = "hashicorp/null"
      version = "~> 3.0"
    }
  }
}
"#;

const PROVIDER_DIR: &str = "registry.terraform.io/hashicorp/null";

/// A registry for `registry.terraform.io` (through a CLI-config `host`
/// override), a project using it and an output directory for the mirror.
struct World {
    ca: TestCa,
    server: TestServer,
    _site: TempDir,
    tree: PublishedTree,
    home: TempDir,
    project: TempDir,
    out: TempDir,
    cli_config: PathBuf,
}

impl World {
    fn new(versions: &[&str]) -> World {
        let ca = TestCa::new();
        let key = PgpKey::generate();
        let server = TestServer::https(&ca);
        let site = tempfile::tempdir().unwrap();
        let platforms = [current_platform(), other_platform()];
        let platforms: Vec<&str> = platforms.iter().map(String::as_str).collect();
        let mut registry = Registry::new(&key);
        for version in versions {
            registry = registry
                .provider(ProviderSpec::new("hashicorp", "null", version).platforms(&platforms));
        }
        let tree = registry.write(site.path(), &server.url());
        server.serve_dir(site.path());
        let home = tempfile::tempdir().unwrap();
        let cli_config = home.path().join("tfinstall.tfrc");
        std::fs::write(
            &cli_config,
            format!(
                "host \"registry.terraform.io\" {{\n  services = {{\n    \"providers.v1\" = \"{}v1/providers/\"\n  }}\n}}\n",
                server.url()
            ),
        )
        .unwrap();
        let project = tempfile::tempdir().unwrap();
        std::fs::write(project.path().join("main.tf"), MAIN_TF).unwrap();
        World {
            ca,
            server,
            _site: site,
            tree,
            home,
            project,
            out: tempfile::tempdir().unwrap(),
            cli_config,
        }
    }

    fn command(&self, args: &[&str]) -> assert_cmd::Command {
        let mut command = tfinstall_command(self.home.path());
        self.ca.configure(&mut command);
        command
            .env("TF_CLI_CONFIG_FILE", &self.cli_config)
            .current_dir(self.project.path())
            .args(args);
        command
    }

    fn mirror_args(&self, platforms: &[&str]) -> Vec<String> {
        let mut args = vec!["providers".to_string(), "mirror".to_string()];
        args.extend(platforms.iter().map(|p| format!("-platform={p}")));
        args.push(self.out.path().display().to_string());
        args
    }

    fn mirror(&self, platforms: &[&str]) -> std::process::Output {
        let args = self.mirror_args(platforms);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.command(&args).output().unwrap()
    }

    fn provider_dir(&self) -> PathBuf {
        self.out.path().join(PROVIDER_DIR)
    }

    fn zip_path(&self, version: &str, platform: &str) -> String {
        self.tree
            .package("null", version, platform)
            .url_path
            .clone()
            .unwrap()
    }

    /// The `VERSION.json` archive entry this run must write for a package.
    fn archive_entry(&self, version: &str, platform: &str) -> String {
        let package = self.tree.package("null", version, platform);
        format!(
            "    \"{platform}\": {{\n      \"hashes\": [\n        \"{}\",\n        \"{}\"\n      ],\n      \"url\": \"{}\"\n    }}",
            package.h1,
            package.zh.as_deref().unwrap(),
            package.filename
        )
    }
}

fn stdout_of(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr_of(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every path below `dir` with its mode and, for files, its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (u32, Option<Vec<u8>>)> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, (u32, Option<Vec<u8>>)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = mode_of(&meta);
            let rel = path.strip_prefix(base).unwrap().to_path_buf();
            if meta.is_dir() {
                out.insert(rel, (mode, None));
                walk(base, &path, out);
            } else {
                out.insert(rel, (mode, Some(std::fs::read(&path).unwrap())));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

#[cfg(unix)]
fn mode_of(meta: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    meta.permissions().mode()
}

#[cfg(not(unix))]
fn mode_of(_meta: &std::fs::Metadata) -> u32 {
    0
}

/// A fresh project whose CLI configuration installs from `mirror_url` only.
fn consumer_of(mirror_url: &str) -> (TempDir, PathBuf) {
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("main.tf"), MAIN_TF).unwrap();
    let config = project.path().join("consumer.tfrc");
    std::fs::write(
        &config,
        format!(
            "provider_installation {{\n  network_mirror {{\n    url = \"{mirror_url}\"\n  }}\n}}\n"
        ),
    )
    .unwrap();
    (project, config)
}

#[test]
fn a_mirror_served_by_a_static_server_works_as_a_network_mirror_for_init() {
    let world = World::new(&["3.2.0"]);
    let current = current_platform();
    let other = other_platform();
    let output = world.mirror(&[&current, &other]);
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert_eq!(
        stdout_of(&output),
        format!(
            "- Mirroring hashicorp/null...\n  - Selected v3.2.0 to meet constraints ~> 3.0\n  - Downloading package for {current}...\n  - Package authenticated: self-signed\n  - Downloading package for {other}...\n  - Package authenticated: self-signed\n"
        )
    );

    let dir = world.provider_dir();
    assert_eq!(
        read(&dir.join("index.json")),
        "{\n  \"versions\": {\n    \"3.2.0\": {}\n  }\n}"
    );
    let mut entries = [
        world.archive_entry("3.2.0", &current),
        world.archive_entry("3.2.0", &other),
    ];
    entries.sort();
    assert_eq!(
        read(&dir.join("3.2.0.json")),
        format!("{{\n  \"archives\": {{\n{}\n  }}\n}}", entries.join(",\n"))
    );
    for platform in [&current, &other] {
        let package = world.tree.package("null", "3.2.0", platform);
        assert_eq!(
            std::fs::read(dir.join(&package.filename)).unwrap(),
            std::fs::read(&package.path).unwrap()
        );
    }
    // No staging leftovers: the top level holds the hostname directory only.
    let top: Vec<String> = std::fs::read_dir(world.out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(top, ["registry.terraform.io"]);

    let mirror_server = TestServer::https(&world.ca);
    mirror_server.serve_dir(world.out.path());
    let (consumer, config) = consumer_of(&mirror_server.url());
    world.server.clear_log();
    let mut init = world.command(&["init"]);
    init.env("TF_CLI_CONFIG_FILE", &config)
        .current_dir(consumer.path());
    let output = init.output().unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert!(
        stdout_of(&output).contains("- Installed hashicorp/null v3.2.0 (verified checksum)"),
        "{}",
        stdout_of(&output)
    );
    assert!(world.server.requests().is_empty());
    assert_eq!(
        mirror_server.count(&format!(
            "/{PROVIDER_DIR}/{}",
            world.tree.package("null", "3.2.0", &current).filename
        )),
        1
    );
}

#[test]
fn running_again_downloads_nothing_and_rewrites_nothing() {
    let world = World::new(&["3.2.0"]);
    let current = current_platform();
    let other = other_platform();
    assert!(world.mirror(&[&current, &other]).status.success());
    let before = snapshot(world.out.path());
    world.server.clear_log();

    let output = world.mirror(&[&current, &other]);
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert_eq!(
        stdout_of(&output),
        format!(
            "- Mirroring hashicorp/null...\n  - Selected v3.2.0 to meet constraints ~> 3.0\n  - Package for {current} is already in the mirror (self-signed)\n  - Package for {other} is already in the mirror (self-signed)\n"
        )
    );
    for platform in [&current, &other] {
        assert_eq!(world.server.count(&world.zip_path("3.2.0", platform)), 0);
    }
    assert_eq!(snapshot(world.out.path()), before);
}

#[test]
fn a_package_that_no_longer_verifies_is_replaced() {
    let world = World::new(&["3.2.0"]);
    let current = current_platform();
    assert!(world.mirror(&[&current]).status.success());
    let package = world.tree.package("null", "3.2.0", &current);
    let mirrored = world.provider_dir().join(&package.filename);
    std::fs::write(&mirrored, b"not the package").unwrap();

    let output = world.mirror(&[&current]);
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert!(stdout_of(&output).contains(&format!(
        "  - Package for {current} in the mirror does not match its source; replacing it\n  - Downloading package for {current}...\n"
    )));
    assert_eq!(
        std::fs::read(&mirrored).unwrap(),
        std::fs::read(&package.path).unwrap()
    );
}

#[test]
fn indexes_merge_with_what_the_mirror_already_lists() {
    let world = World::new(&["3.2.0"]);
    let current = current_platform();
    let dir = world.provider_dir();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("index.json"),
        "{\"versions\":{\"3.1.0\":{},\"2.0.0\":{\"hint\":true}}}",
    )
    .unwrap();
    let old_version_doc = "{\"archives\":{\"linux_amd64\":{\"url\":\"https://elsewhere.example/null_3.1.0.zip\",\"hashes\":[\"h1:abc=\"]}}}";
    std::fs::write(dir.join("3.1.0.json"), old_version_doc).unwrap();
    std::fs::write(
        dir.join("3.2.0.json"),
        "{\"archives\":{\"freebsd_amd64\":{\"url\":\"terraform-provider-null_3.2.0_freebsd_amd64.zip\",\"hashes\":[\"h1:xyz=\"]}}}",
    )
    .unwrap();
    let random_dir = world
        .out
        .path()
        .join("registry.terraform.io/hashicorp/random");
    std::fs::create_dir_all(&random_dir).unwrap();
    std::fs::write(
        random_dir.join("index.json"),
        "{\"versions\":{\"3.1.0\":{}}}",
    )
    .unwrap();

    let output = world.mirror(&[&current]);
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert_eq!(
        read(&dir.join("index.json")),
        "{\n  \"versions\": {\n    \"2.0.0\": {\n      \"hint\": true\n    },\n    \"3.1.0\": {},\n    \"3.2.0\": {}\n  }\n}"
    );
    assert_eq!(read(&dir.join("3.1.0.json")), old_version_doc);
    let mut entries = [
        "    \"freebsd_amd64\": {\n      \"hashes\": [\n        \"h1:xyz=\"\n      ],\n      \"url\": \"terraform-provider-null_3.2.0_freebsd_amd64.zip\"\n    }".to_string(),
        world.archive_entry("3.2.0", &current),
    ];
    entries.sort();
    assert_eq!(
        read(&dir.join("3.2.0.json")),
        format!("{{\n  \"archives\": {{\n{}\n  }}\n}}", entries.join(",\n"))
    );
    assert_eq!(
        read(&random_dir.join("index.json")),
        "{\"versions\":{\"3.1.0\":{}}}"
    );
}

#[test]
fn a_failed_download_leaves_the_mirror_as_it_was() {
    let world = World::new(&["3.2.0"]);
    let current = current_platform();
    let other = other_platform();
    assert!(world.mirror(&[&current]).status.success());
    let before = snapshot(world.out.path());

    world
        .server
        .fault(&world.zip_path("3.2.0", &other), Fault::Status(404));
    let output = world.mirror(&[&current, &other]);
    assert!(!output.status.success());
    let stderr = stderr_of(&output);
    assert!(
        stderr.contains("Error: Cannot download provider release"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "Failed to download registry.terraform.io/hashicorp/null v3.2.0 for {other}:"
        )),
        "{stderr}"
    );
    assert_eq!(snapshot(world.out.path()), before);

    // A download that arrives but is not the signed package fares the same.
    world.server.fault(
        &world.zip_path("3.2.0", &other),
        Fault::Respond(Response::bytes(
            "application/zip",
            b"PK not a real zip".to_vec(),
        )),
    );
    let output = world.mirror(&[&current, &other]);
    assert!(!output.status.success());
    let stderr = stderr_of(&output);
    assert!(
        stderr.contains("Error: Invalid provider package"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "Failed to authenticate registry.terraform.io/hashicorp/null v3.2.0 for {other}: archive has incorrect checksum"
        )),
        "{stderr}"
    );
    assert_eq!(snapshot(world.out.path()), before);
}

#[test]
fn a_mirror_can_be_made_from_a_network_mirror_or_a_filesystem_mirror() {
    let world = World::new(&["3.2.0"]);
    let current = current_platform();
    assert!(world.mirror(&[&current]).status.success());
    let first = snapshot(world.out.path());
    let mirror_server = TestServer::https(&world.ca);
    mirror_server.serve_dir(world.out.path());
    world.server.clear_log();

    let from_network = tempfile::tempdir().unwrap();
    let config = world.home.path().join("from-network.tfrc");
    std::fs::write(
        &config,
        format!(
            "provider_installation {{\n  network_mirror {{\n    url = \"{}\"\n  }}\n}}\n",
            mirror_server.url()
        ),
    )
    .unwrap();
    let mut command = world.command(&[
        "providers",
        "mirror",
        &format!("-platform={current}"),
        &from_network.path().display().to_string(),
    ]);
    let output = command.env("TF_CLI_CONFIG_FILE", &config).output().unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert!(stdout_of(&output).contains("  - Package authenticated: verified checksum\n"));
    assert_eq!(snapshot(from_network.path()), first);

    let from_disk = tempfile::tempdir().unwrap();
    let config = world.home.path().join("from-disk.tfrc");
    std::fs::write(
        &config,
        format!(
            "provider_installation {{\n  filesystem_mirror {{\n    path = \"{}\"\n  }}\n}}\n",
            world.out.path().display()
        ),
    )
    .unwrap();
    let mut command = world.command(&[
        "providers",
        "mirror",
        &format!("-platform={current}"),
        &from_disk.path().display().to_string(),
    ]);
    let output = command.env("TF_CLI_CONFIG_FILE", &config).output().unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert!(!stdout_of(&output).contains("Package authenticated"));
    assert_eq!(snapshot(from_disk.path()), first);
    assert!(world.server.requests().is_empty());
}

#[test]
fn the_lock_file_chooses_the_version_unless_told_otherwise() {
    let world = World::new(&["3.1.0", "3.2.0"]);
    let current = current_platform();
    std::fs::write(
        world.project.path().join(".terraform.lock.hcl"),
        "provider \"registry.terraform.io/hashicorp/null\" {\n  version     = \"3.1.0\"\n  constraints = \"~> 3.0\"\n}\n",
    )
    .unwrap();
    let output = world.mirror(&[&current]);
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert!(stdout_of(&output).contains("  - Selected v3.1.0 to match dependency lock file\n"));
    assert!(world.provider_dir().join("3.1.0.json").is_file());
    assert!(!world.provider_dir().join("3.2.0.json").exists());

    let mut args = world.mirror_args(&[&current]);
    args.insert(2, "-lock-file=false".to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = world.command(&args).output().unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert!(stdout_of(&output).contains("  - Selected v3.2.0 to meet constraints ~> 3.0\n"));
    assert_eq!(
        read(&world.provider_dir().join("index.json")),
        "{\n  \"versions\": {\n    \"3.1.0\": {},\n    \"3.2.0\": {}\n  }\n}"
    );
}

#[test]
fn the_output_directory_is_required() {
    let world = World::new(&["3.2.0"]);
    let output = world.command(&["providers", "mirror"]).output().unwrap();
    assert!(!output.status.success());
    let stderr = stderr_of(&output);
    assert!(
        stderr.contains("Error: No output directory specified"),
        "{stderr}"
    );
    assert!(stderr.contains(
        "The providers mirror command requires an output directory as a command-line argument."
    ));
    assert!(world.server.requests().is_empty());
}
