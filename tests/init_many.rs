//! `tfinstall init DIR…` (issue 17): many working directories in one run,
//! the built binary against a signed registry over HTTPS (reached through a
//! CLI-configuration `host` block), with requests counted in the server's
//! log.
//!
//! Covered: lock files byte-identical to single-directory runs (some
//! directories with committed lock files pinning older versions); each
//! version list, download document and archive requested once for the whole
//! run, with no plugin cache configured; the packages shared by hard links;
//! a failing directory (constraints that cannot be met, a package that does
//! not match its lock file) left exactly as it was while the others install,
//! with the exit status and the closing summary naming it; `-json` messages
//! carrying their directory and checked against the published schema; a
//! directory without configuration reported as empty, and left untouched,
//! while the others install.

mod support;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use support::*;

const HOST: &str = "registry.test";
const NS: &str = "acme";
const TYPES: [&str; 3] = ["alpha", "beta", "gamma"];
const VERSIONS: [&str; 2] = ["1.0.0", "1.1.0"];
const LOCK: &str = ".terraform.lock.hcl";
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// A registry with `registry.test/acme/{alpha,beta,gamma}` 1.0.0 and 1.1.0,
/// and a temp dir for work dirs and the HOME.
struct World {
    ca: TestCa,
    server: TestServer,
    tmp: tempfile::TempDir,
    tree: PublishedTree,
    config: PathBuf,
}

impl World {
    fn new() -> Self {
        let ca = TestCa::new();
        let server = TestServer::https(&ca);
        let tmp = tempfile::tempdir().unwrap();
        let site = tmp.path().join("site");
        server.serve_dir(&site);
        let platforms = [current_platform(), "darwin_arm64".to_owned()];
        let platforms: Vec<&str> = platforms.iter().map(String::as_str).collect();
        let mut registry = Registry::new(&PgpKey::generate());
        for type_name in TYPES {
            for version in VERSIONS {
                registry = registry.provider(
                    ProviderSpec::new(NS, type_name, version)
                        .hostname(HOST)
                        .platforms(&platforms),
                );
            }
        }
        let tree = registry.write(&site, &server.url());
        std::fs::create_dir_all(tmp.path().join("home")).unwrap();
        std::fs::create_dir_all(tmp.path().join("tmp")).unwrap();
        let config = tmp.path().join("cli.tfrc");
        std::fs::write(
            &config,
            format!(
                "host \"{HOST}\" {{\n  services = {{\n    \"providers.v1\" = \"{}\"\n  }}\n}}\n",
                server.url_for("/v1/providers/")
            ),
        )
        .unwrap();
        World {
            ca,
            server,
            tmp,
            tree,
            config,
        }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.tmp.path().join(relative)
    }

    /// A work dir `rel` requiring `providers` (type, constraint).
    fn workdir(&self, rel: &str, providers: &[(&str, &str)]) -> PathBuf {
        let dir = self.path(rel);
        std::fs::create_dir_all(&dir).unwrap();
        let blocks: String = providers
            .iter()
            .map(|(t, c)| {
                format!("    {t} = {{\n      source  = \"{HOST}/{NS}/{t}\"\n      version = \"{c}\"\n    }}\n")
            })
            .collect();
        std::fs::write(
            dir.join("main.tf"),
            format!("terraform {{\n  required_providers {{\n{blocks}  }}\n}}\n"),
        )
        .unwrap();
        dir
    }

    /// `tfinstall init -no-color ARGS…`, started in the world's temp dir.
    fn init(&self, args: &[&str]) -> std::process::Output {
        self.init_command(args).output().unwrap()
    }

    /// [`World::init`], with the waits for cache entries' locks that the
    /// tests' build counts: one line per wait, naming what it waited for.
    fn init_counting_lock_waits(
        &self,
        args: &[&str],
        envs: &[(&str, &Path)],
    ) -> (std::process::Output, Vec<String>) {
        let counts = self.path("lock-waits");
        let _ = std::fs::remove_file(&counts);
        let mut command = self.init_command(args);
        command.env("TFINSTALL_COUNT_FILE", &counts);
        for (name, value) in envs {
            command.env(name, value);
        }
        let output = command.output().unwrap();
        let waits = std::fs::read_to_string(&counts)
            .unwrap_or_default()
            .lines()
            .filter(|line| line.starts_with("entry-lock-wait"))
            .map(str::to_owned)
            .collect();
        (output, waits)
    }

    fn init_command(&self, args: &[&str]) -> assert_cmd::Command {
        let mut command = tfinstall_command(&self.path("home"));
        self.ca.configure(&mut command);
        command
            .current_dir(self.tmp.path())
            .env("TF_CLI_CONFIG_FILE", &self.config)
            .env("TMPDIR", self.path("tmp"))
            .arg("init")
            .arg("-no-color")
            .args(args)
            .timeout(RUN_TIMEOUT);
        command
    }

    /// Request counts by path since the log was cleared.
    fn requests(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for request in self.server.requests() {
            *counts.entry(request.path).or_default() += 1;
        }
        counts
    }

    fn archive_path(&self, type_name: &str, version: &str) -> String {
        self.tree
            .package(type_name, version, &current_platform())
            .url_path
            .clone()
            .unwrap()
    }
}

/// A mix of configurations: overlapping providers, a directory whose
/// committed lock file pins older versions, one pinned by constraint.
fn mixed_configurations(world: &World, root: &str) -> Vec<String> {
    let dirs = [
        ("app", vec![("alpha", "~> 1.0"), ("beta", "~> 1.0")]),
        (
            "infra/net",
            vec![("alpha", "~> 1.0"), ("gamma", ">= 1.0.0")],
        ),
        (
            "legacy",
            vec![("alpha", "~> 1.0"), ("beta", "~> 1.0"), ("gamma", "~> 1.0")],
        ),
        ("pinned", vec![("beta", "1.0.0"), ("gamma", "~> 1.1")]),
    ];
    dirs.iter()
        .map(|(name, providers)| {
            let rel = format!("{root}/{name}");
            world.workdir(&rel, providers);
            rel
        })
        .collect()
}

/// A committed lock file pinning 1.0.0 of every provider, as `init` in a
/// directory constrained to 1.0.0 writes it.
fn commit_old_lock(world: &World, rel: &str) {
    let seed = format!("{rel}-seed");
    world.workdir(
        &seed,
        &[("alpha", "1.0.0"), ("beta", "1.0.0"), ("gamma", "1.0.0")],
    );
    let out = world.init(&[&format!("-chdir={seed}")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::copy(world.path(&seed).join(LOCK), world.path(rel).join(LOCK)).unwrap();
    std::fs::remove_dir_all(world.path(&seed)).unwrap();
}

fn succeeded(out: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "init failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn executable(dir: &Path, type_name: &str, version: &str) -> PathBuf {
    dir.join(".terraform/plugins")
        .join(HOST)
        .join(NS)
        .join(type_name)
        .join(version)
        .join(current_platform())
        .join(format!("terraform-provider-{type_name}_v{version}"))
}

#[test]
fn lock_files_are_byte_identical_to_single_directory_runs() {
    let world = World::new();
    let many = mixed_configurations(&world, "many");
    let single = mixed_configurations(&world, "single");
    commit_old_lock(&world, "many/legacy");
    commit_old_lock(&world, "single/legacy");

    let args: Vec<&str> = many.iter().map(String::as_str).collect();
    let stdout = succeeded(&world.init(&args));
    for rel in &single {
        succeeded(&world.init(&[&format!("-chdir={rel}")]));
    }

    for (m, s) in many.iter().zip(&single) {
        let from_many = std::fs::read(world.path(m).join(LOCK)).unwrap();
        let from_single = std::fs::read(world.path(s).join(LOCK)).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&from_many),
            String::from_utf8_lossy(&from_single),
            "{m}: the lock file differs from a run in that directory alone"
        );
    }
    // The committed lock kept its versions; the others took the newest.
    assert!(executable(&world.path("many/legacy"), "gamma", "1.0.0").is_file());
    assert!(executable(&world.path("many/app"), "alpha", "1.1.0").is_file());
    assert!(executable(&world.path("many/pinned"), "beta", "1.0.0").is_file());

    // Text output: each directory under its heading, in the order given.
    let headings: Vec<usize> = many
        .iter()
        .map(|rel| {
            stdout
                .find(&format!("[{rel}]"))
                .unwrap_or_else(|| panic!("no heading for {rel}:\n{stdout}"))
        })
        .collect();
    assert!(headings.windows(2).all(|w| w[0] < w[1]), "{stdout}");
    assert!(stdout.contains("All 4 working directories were initialized."));

    // Run again: every directory is a no-op and nothing is requested.
    world.server.clear_log();
    succeeded(&world.init(&args));
    assert_eq!(world.requests(), BTreeMap::new());
}

#[test]
fn each_version_list_and_archive_is_requested_once_for_the_whole_run() {
    let world = World::new();
    // Half of them pin the version exactly, which has each ask for the
    // package alongside the version list.
    let dirs: Vec<String> = (0..6)
        .map(|i| {
            let rel = format!("tree/stack{i}");
            let c = if i % 2 == 0 { "~> 1.0" } else { "1.1.0" };
            world.workdir(&rel, &[("alpha", c), ("beta", c), ("gamma", c)]);
            rel
        })
        .collect();
    world.server.clear_log();
    let args: Vec<&str> = dirs.iter().map(String::as_str).collect();
    succeeded(&world.init(&args));

    let counts = world.requests();
    for type_name in TYPES {
        let versions = Registry::versions_path(NS, type_name);
        assert_eq!(counts.get(&format!("/{versions}")), Some(&1), "{counts:#?}");
        let archive = world.archive_path(type_name, "1.1.0");
        assert_eq!(counts.get(&archive), Some(&1), "{counts:#?}");
    }
    assert!(
        counts.values().all(|&n| n == 1),
        "every document once: {counts:#?}"
    );
    // One package on disk, linked into every directory; the run's own
    // cache (in TMPDIR, on the same filesystem) is gone.
    let first = std::fs::metadata(executable(&world.path(&dirs[0]), "alpha", "1.1.0")).unwrap();
    for rel in &dirs[1..] {
        let other = std::fs::metadata(executable(&world.path(rel), "alpha", "1.1.0")).unwrap();
        assert_eq!(
            (first.dev(), first.ino()),
            (other.dev(), other.ino()),
            "{rel}"
        );
    }
    let leftovers: Vec<_> = std::fs::read_dir(world.path("tmp"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_failing_directory_is_left_as_it_was_while_the_others_install() {
    let world = World::new();
    world.workdir("ok1", &[("alpha", "~> 1.0")]);
    // Constraints no release meets.
    world.workdir("impossible", &[("alpha", "~> 1.0"), ("beta", "~> 9.0")]);
    // Installed once, then its lock file's hashes no longer match what the
    // registry serves.
    world.workdir("tampered", &[("gamma", "~> 1.0")]);
    succeeded(&world.init(&["-chdir=tampered"]));
    let lock = world.path("tampered").join(LOCK);
    let text = std::fs::read_to_string(&lock).unwrap();
    let h1 = world
        .tree
        .package("gamma", "1.1.0", &current_platform())
        .h1
        .clone();
    let forged = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("\"zh:"))
        .collect::<Vec<_>>()
        .join("\n")
        .replace(&h1, "h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
        + "\n";
    std::fs::write(&lock, forged).unwrap();
    std::fs::remove_dir_all(world.path("tampered/.terraform")).unwrap();
    world.workdir("ok2", &[("beta", "~> 1.0"), ("gamma", "~> 1.0")]);

    let before_impossible = Snapshot::of(&world.path("impossible"));
    let before_tampered = Snapshot::of(&world.path("tampered"));
    let out = world.init(&["ok1", "impossible", "tampered", "ok2"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");

    Snapshot::of(&world.path("impossible")).assert_same(&before_impossible, "impossible");
    Snapshot::of(&world.path("tampered")).assert_same(&before_tampered, "tampered");
    assert!(executable(&world.path("ok1"), "alpha", "1.1.0").is_file());
    assert!(executable(&world.path("ok2"), "gamma", "1.1.0").is_file());
    assert!(world.path("ok2").join(LOCK).is_file());

    assert!(
        stderr.contains("tfinstall init failed in 2 of 4 working directories"),
        "{stderr}"
    );
    assert!(
        stderr.contains("  - impossible: Failed to query available provider packages"),
        "{stderr}"
    );
    assert!(
        stderr.contains("  - tampered: Failed to install provider"),
        "{stderr}"
    );
}

#[test]
fn json_messages_carry_their_directory() {
    let world = World::new();
    world.workdir("a", &[("alpha", "~> 1.0")]);
    world.workdir("b", &[("alpha", "~> 1.0"), ("beta", "~> 9.0")]);
    let out = world.init(&["-json", "a", "b"]);
    assert_eq!(out.status.code(), Some(1));
    let stream = validated_stream(&out.stdout);

    assert_eq!(stream[0]["type"], "version");
    let last = stream.last().unwrap();
    assert_eq!(last["type"], "run_summary");
    assert_eq!(last["success"], false);
    assert_eq!(last["directories"], 2);
    assert_eq!(last["failed"][0]["directory"], "b");
    for message in &stream[1..stream.len() - 1] {
        let dir = message["directory"]
            .as_str()
            .unwrap_or_else(|| panic!("{message}"));
        assert!(dir == "a" || dir == "b", "{message}");
    }
    let summaries: BTreeMap<&str, &serde_json::Value> = stream
        .iter()
        .filter(|m| m["type"] == "summary")
        .map(|m| (m["directory"].as_str().unwrap(), m))
        .collect();
    assert_eq!(summaries["a"]["success"], true);
    assert_eq!(summaries["a"]["providers"]["installed"], 1);
    assert_eq!(summaries["a"]["lock_file"], "created");
    assert_eq!(summaries["b"]["success"], false);
    assert!(
        stream
            .iter()
            .any(|m| m["event"] == "installed" && m["directory"] == "a"),
        "{stream:#?}"
    );
}

#[test]
fn an_empty_directory_is_reported_as_such_while_the_others_install() {
    let world = World::new();
    world.workdir("a", &[("alpha", "~> 1.0")]);
    let empty = world.path("empty");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(empty.join("README.md"), "Not configuration.\n").unwrap();
    world.workdir("b", &[("beta", "~> 1.0")]);
    let untouched = Snapshot::of(&empty);

    let stdout = succeeded(&world.init(&["a", "empty", "b"]));
    assert!(
        stdout.contains("\n[empty]\n\ntfinstall initialized in an empty directory!\n\nThe directory has no Terraform configuration files. You may begin working\nwith Terraform immediately by creating Terraform configuration files.\n\n[b]\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("All 3 working directories were initialized."),
        "{stdout}"
    );
    assert!(executable(&world.path("a"), "alpha", "1.1.0").is_file());
    assert!(executable(&world.path("b"), "beta", "1.1.0").is_file());
    assert_eq!(Snapshot::of(&empty), untouched);

    let out = world.init(&["-json", "a", "empty", "b"]);
    assert!(out.status.success());
    let stream = validated_stream(&out.stdout);
    let of_empty: Vec<(&str, &str)> = stream
        .iter()
        .filter(|m| m["directory"] == "empty")
        .map(|m| {
            (
                m["type"].as_str().unwrap(),
                m["message_code"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        of_empty,
        [
            ("message", "directory"),
            ("init_output", "output_init_empty_message"),
            ("summary", "")
        ]
    );
    let summary = stream
        .iter()
        .find(|m| m["type"] == "summary" && m["directory"] == "empty")
        .unwrap();
    assert_eq!(summary["empty_directory"], true);
    let last = stream.last().unwrap();
    assert_eq!(last["type"], "run_summary");
    assert_eq!(last["success"], true);
    assert_eq!(Snapshot::of(&empty), untouched);
}

#[test]
fn a_plugin_cache_is_filled_once_and_reported_the_same_in_every_directory() {
    let world = World::new();
    let cache = world.path("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let mut config = std::fs::read_to_string(&world.config).unwrap();
    config.push_str(&format!("plugin_cache_dir = \"{}\"\n", cache.display()));
    std::fs::write(&world.config, config).unwrap();
    for name in ["x", "y", "z"] {
        world.workdir(name, &[("alpha", "~> 1.0")]);
    }
    world.server.clear_log();
    let stdout = succeeded(&world.init(&["x", "y", "z"]));
    assert_eq!(
        world.requests().get(&world.archive_path("alpha", "1.1.0")),
        Some(&1)
    );
    // Whichever directory downloaded, each reads as installed by this run,
    // never as waiting for another process.
    assert_eq!(
        stdout
            .matches("- Installed registry.test/acme/alpha v1.1.0")
            .count(),
        3,
        "{stdout}"
    );
    assert!(!stdout.contains("Waiting"), "{stdout}");
    let entry = cache
        .join(HOST)
        .join(NS)
        .join("alpha/1.1.0")
        .join(current_platform());
    assert!(entry.is_dir());
}

#[test]
fn each_directory_gets_its_own_readonly_check_and_duplicates_are_refused() {
    let world = World::new();
    world.workdir("steady", &[("alpha", "~> 1.0")]);
    world.workdir("grown", &[("alpha", "~> 1.0")]);
    succeeded(&world.init(&["steady", "grown"]));
    // A provider added since the lock file was written.
    world.workdir("grown", &[("alpha", "~> 1.0"), ("beta", "~> 1.0")]);
    let before = Snapshot::of(&world.path("grown"));

    let out = world.init(&["-lockfile=readonly", "steady", "grown"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("  - grown: Provider dependency changes detected"),
        "{stderr}"
    );
    assert!(!stderr.contains("  - steady:"), "{stderr}");
    Snapshot::of(&world.path("grown")).assert_same(&before, "grown");

    let out = world.init(&["steady", "./steady/"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("are the same directory"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Directories of one run share cache entries without waiting for each
/// other (issue 31): 20 directories needing the same three providers, with
/// the run's own cache (no plugin cache), then with a shared plugin cache
/// cold and warm. The tests' build counts every wait for an entry's lock:
/// none may be for an entry another directory of the run holds for use,
/// and none for the entry's file lock (no other process is running: a
/// process must never contend with itself there).
#[test]
fn directories_of_one_run_never_wait_for_each_others_use_of_an_entry() {
    let world = World::new();
    let cache = world.path("plugin-cache");
    for (round, envs) in [
        ("no plugin cache", vec![]),
        (
            "cold plugin cache",
            vec![("TF_PLUGIN_CACHE_DIR", cache.as_path())],
        ),
        (
            "warm plugin cache",
            vec![("TF_PLUGIN_CACHE_DIR", cache.as_path())],
        ),
    ] {
        let dirs: Vec<String> = (0..20)
            .map(|i| {
                let rel = format!("{round}/d{i:02}");
                world.workdir(
                    &rel,
                    &[("alpha", "~> 1.0"), ("beta", "~> 1.0"), ("gamma", "~> 1.0")],
                );
                rel
            })
            .collect();
        let args: Vec<&str> = dirs.iter().map(String::as_str).collect();
        let (output, waits) = world.init_counting_lock_waits(&args, &envs);
        succeeded(&output);
        let waited_for_use_or_itself: Vec<&String> = waits
            .iter()
            .filter(|wait| *wait != "entry-lock-wait-fill")
            .collect();
        assert_eq!(
            waited_for_use_or_itself,
            Vec::<&String>::new(),
            "{round}: all waits: {waits:?}"
        );
    }
}
