//! `cache stats` and `cache prune` end to end (issue 24): the built binary
//! against a signed registry on loopback HTTPS, sharing one plugin cache
//! with `init`s that run at the same time, are held at pause points
//! (`src/failpoint.rs`) or are killed.
//!
//! Covered: every criterion and combination, globs, `-dry-run`, the
//! refusals; an entry a running `init` holds is skipped; 8 `init`s beside
//! repeated prunes all succeed with whole packages; `kill -9` between a
//! prune's renames and its delete, then `cache verify` and the next prune;
//! `cache stats` against `du` and link counts, with a `serve` store's
//! archive sidecar; last use recorded once per run and never on the no-op
//! path.

mod support;

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use support::cache_world::{CacheWorld, HOST, NS};
use support::*;

/// No run may take longer; a hang fails instead of blocking.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);
const DAY: Duration = Duration::from_secs(86_400);

/// `registry.test/acme/alpha` 1.0.0, 1.1.0 and 1.2.0 and `beta` 1.0.0,
/// one plugin cache, and a CLI configuration for both.
type World = CacheWorld;

const PACKAGES: [(&str, &str); 4] = [
    ("alpha", "1.0.0"),
    ("alpha", "1.1.0"),
    ("alpha", "1.2.0"),
    ("beta", "1.0.0"),
];

impl World {
    fn with_packages() -> Self {
        CacheWorld::new(&PACKAGES)
    }

    /// A work dir `work/NAME` pinning each `(type, version)`.
    fn workdir(&self, name: &str, pins: &[(&str, &str)]) -> PathBuf {
        let dir = self.path("work").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let providers: String = pins
            .iter()
            .map(|(t, v)| {
                format!("    {t} = {{\n      source  = \"{HOST}/{NS}/{t}\"\n      version = \"= {v}\"\n    }}\n")
            })
            .collect();
        std::fs::write(
            dir.join("main.tf"),
            format!("terraform {{\n  required_providers {{\n{providers}  }}\n}}\n"),
        )
        .unwrap();
        dir
    }

    fn command(&self, dir: &Path, args: &[&str], pauses: &[&str]) -> assert_cmd::Command {
        let pause_dir = self.path("pauses");
        std::fs::create_dir_all(&pause_dir).unwrap();
        let mut command = tfinstall_command(&self.path("home"));
        self.ca.configure(&mut command);
        command
            .current_dir(dir)
            .env("TF_CLI_CONFIG_FILE", &self.config)
            .env("TFINSTALL_PAUSE_DIR", &pause_dir)
            .env("TFINSTALL_PAUSE_AT", pauses.join(","))
            .args(args)
            .timeout(RUN_TIMEOUT);
        command
    }

    /// `tfinstall ARGS…` in the world's temp dir.
    fn run(&self, args: &[&str]) -> std::process::Output {
        self.command(self.tmp.path(), args, &[]).output().unwrap()
    }

    fn run_ok(&self, args: &[&str]) -> String {
        succeeded(&args.join(" "), &self.run(args))
    }

    fn init_ok(&self, dir: &Path) -> String {
        succeeded(
            "init",
            &self
                .command(dir, &["init", "-no-color"], &[])
                .output()
                .unwrap(),
        )
    }

    /// Starts `tfinstall ARGS…` in `dir`, to be held at `pauses` (each
    /// process gets its own pause directory, `pauses-NAME`).
    fn start(&self, name: &str, dir: &Path, args: &[&str], pauses: &[&str]) -> Process {
        let pause_dir = self.path(&format!("pauses-{name}"));
        std::fs::create_dir_all(&pause_dir).unwrap();
        let command = self.command(dir, args, pauses);
        let mut std_command = std::process::Command::new(command.get_program());
        std_command.args(command.get_args()).current_dir(dir);
        for (key, value) in command.get_envs() {
            match value {
                Some(value) => std_command.env(key, value),
                None => std_command.env_remove(key),
            };
        }
        std_command.env("TFINSTALL_PAUSE_DIR", &pause_dir);
        let log = self.path(&format!("{name}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let child = std_command
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("spawn tfinstall");
        Process {
            name: name.to_owned(),
            child,
            pause_dir,
            log,
        }
    }

    fn entry(&self, type_name: &str, version: &str) -> PathBuf {
        self.cache
            .join(HOST)
            .join(NS)
            .join(type_name)
            .join(version)
            .join(current_platform())
    }

    fn sidecar(&self, type_name: &str, version: &str, suffix: &str) -> PathBuf {
        self.entry(type_name, version)
            .with_file_name(format!(".{}{suffix}", current_platform()))
    }

    fn executable_in(root: &Path, type_name: &str, version: &str) -> PathBuf {
        root.join(HOST)
            .join(NS)
            .join(type_name)
            .join(version)
            .join(current_platform())
            .join(format!("terraform-provider-{type_name}_v{version}"))
    }

    fn installed(dir: &Path, type_name: &str, version: &str) -> PathBuf {
        Self::executable_in(&dir.join(".terraform/plugins"), type_name, version)
    }

    fn downloads(&self, type_name: &str, version: &str) -> usize {
        let package = self.tree.package(type_name, version, &current_platform());
        self.server.count(package.url_path.as_deref().unwrap())
    }

    /// Fills the cache with every package, each through an `init` of its
    /// own work dir `TYPE-VERSION`, and dates every entry's last use
    /// `age` ago.
    fn fill_all(&self, age: Duration) {
        for (t, v) in PACKAGES {
            let dir = self.workdir(&format!("{t}-{v}"), &[(t, v)]);
            self.init_ok(&dir);
            self.date_use(t, v, age);
        }
    }

    /// Makes the entry look last used `age` ago.
    fn date_use(&self, type_name: &str, version: &str, age: Duration) {
        let then = SystemTime::now() - age;
        for path in [
            self.sidecar(type_name, version, ".used"),
            self.sidecar(type_name, version, ".tfinstall.json"),
            self.entry(type_name, version),
        ] {
            set_mtime(&path, then);
        }
    }

    /// The `(type, version)` pairs a `-json` prune report lists under `key`.
    fn listed(report: &Value, key: &str) -> Vec<String> {
        let mut listed: Vec<String> = report[key]
            .as_array()
            .unwrap_or_else(|| panic!("no {key} in {report}"))
            .iter()
            .map(|e| {
                let provider = e["provider"].as_str().unwrap();
                let type_name = provider.rsplit('/').next().unwrap();
                format!("{type_name} {}", e["version"].as_str().unwrap())
            })
            .collect();
        listed.sort();
        listed
    }

    fn prune_json(&self, flags: &[&str]) -> Value {
        let mut args = vec!["cache", "prune", "-json"];
        args.extend(flags);
        let stdout = self.run_ok(&args);
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    }

    fn cached(&self) -> Vec<String> {
        let mut cached: Vec<String> = PACKAGES
            .iter()
            .filter(|(t, v)| self.entry(t, v).exists())
            .map(|(t, v)| format!("{t} {v}"))
            .collect();
        cached.sort();
        cached
    }

    fn verify_is_clean(&self) -> String {
        let report = self.run_ok(&["cache", "verify", "-no-color"]);
        assert!(report.contains("all match what was installed"), "{report}");
        report
    }
}

/// A running `tfinstall` that may be held at pause points.
struct Process {
    name: String,
    child: Child,
    pause_dir: PathBuf,
    log: PathBuf,
}

impl Process {
    fn reaches(&mut self, point: &str) -> &mut Self {
        let marker = self.pause_dir.join(format!("{point}.reached"));
        let deadline = Instant::now() + RUN_TIMEOUT;
        while !marker.exists() {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "{} exited ({status}) before {point}:\n{}",
                    self.name,
                    self.output()
                );
            }
            assert!(
                Instant::now() < deadline,
                "{} never reached {point}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        self
    }

    fn release(&mut self, point: &str) -> &mut Self {
        std::fs::write(self.pause_dir.join(format!("{point}.go")), b"").unwrap();
        self
    }

    fn succeeds(mut self) -> String {
        let deadline = Instant::now() + RUN_TIMEOUT;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("{} timed out:\n{}", self.name, self.output());
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let output = self.output();
        assert!(status.success(), "{} failed:\n{output}", self.name);
        output
    }

    /// SIGKILL, as a crash or the OOM killer would end it.
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

fn succeeded(what: &str, output: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn set_mtime(path: &Path, time: SystemTime) {
    let file = if path.is_dir() {
        std::fs::File::open(path)
    } else {
        std::fs::File::options().append(true).open(path)
    };
    file.and_then(|f| f.set_modified(time))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn mtime(path: &Path) -> SystemTime {
    std::fs::metadata(path).unwrap().modified().unwrap()
}

/// `du -s -B1 PATH…` (GNU): each inode counted once across all of them.
fn du(paths: &[&Path]) -> u64 {
    let output = std::process::Command::new("du")
        .args(["-s", "-c", "-B1"])
        .args(paths)
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    let total = text.lines().last().unwrap();
    total.split_whitespace().next().unwrap().parse().unwrap()
}

/// Every path below `root`, to show that a refused prune changed nothing.
fn listing(root: &Path) -> Vec<(PathBuf, u64)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, u64)>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let meta = entry.metadata().unwrap();
            out.push((entry.path(), meta.ino()));
            if meta.is_dir() {
                walk(&entry.path(), out);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, &mut out);
    out.sort();
    out
}

/// Each criterion alone and in every combination selects exactly the
/// entries that match all of those given; `-dry-run` removes nothing; the
/// real prune removes what the dry run listed and leaves every working
/// directory's installed files in place.
#[test]
fn every_criterion_and_combination_selects_what_it_says() {
    let world = World::with_packages();
    world.fill_all(40 * DAY);
    world.date_use("alpha", "1.2.0", DAY);
    // Repositories whose lock files pin alpha 1.1.0 and beta 1.0.0.
    for (name, pin) in [
        ("repo-a", ("alpha", "1.1.0")),
        ("repo-b", ("beta", "1.0.0")),
    ] {
        let dir = world.workdir(name, &[pin]);
        world.init_ok(&dir);
        world.date_use(pin.0, pin.1, 40 * DAY);
    }
    let repo_a = world.path("work/repo-a/.terraform.lock.hcl");
    let repo_a = format!("-keep-lock-file={}", repo_a.display());
    let repos = format!(
        "-keep-lock-file={}",
        world.path("work/repo-*/.terraform.lock.hcl").display()
    );
    let cases: [(&[&str], &[&str]); 9] = [
        (
            &["-unused-for=30d"],
            &["alpha 1.0.0", "alpha 1.1.0", "beta 1.0.0"],
        ),
        (
            &["-unused-for=1w"],
            &["alpha 1.0.0", "alpha 1.1.0", "beta 1.0.0"],
        ),
        (&["-unused-for=41d"], &[]),
        (&["-keep-latest=1"], &["alpha 1.0.0", "alpha 1.1.0"]),
        (&["-keep-latest=2"], &["alpha 1.0.0"]),
        (&[&repo_a], &["alpha 1.0.0", "alpha 1.2.0", "beta 1.0.0"]),
        (&[&repos], &["alpha 1.0.0", "alpha 1.2.0"]),
        (&["-unused-for=30d", &repos], &["alpha 1.0.0"]),
        (
            &["-unused-for=30d", "-keep-latest=1", &repo_a],
            &["alpha 1.0.0"],
        ),
    ];
    for (flags, expected) in cases {
        let mut dry = vec!["-dry-run"];
        dry.extend(flags);
        let report = world.prune_json(&dry);
        assert_eq!(World::listed(&report, "removed"), expected, "{flags:?}");
        assert_eq!(report["dry_run"], true);
        assert_eq!(
            report["kept"].as_u64().unwrap() as usize,
            PACKAGES.len() - expected.len(),
            "{flags:?}"
        );
    }
    let more: [(&[&str], &[&str]); 2] = [
        (&["-keep-latest=1", &repo_a], &["alpha 1.0.0"]),
        (&["-unused-for=30d", "-keep-latest=2"], &["alpha 1.0.0"]),
    ];
    for (flags, expected) in more {
        let mut dry = vec!["-dry-run"];
        dry.extend(flags);
        assert_eq!(World::listed(&world.prune_json(&dry), "removed"), expected);
    }
    assert_eq!(world.cached().len(), 4, "a dry run removes nothing");

    let text = world.run_ok(&["cache", "prune", "-unused-for=30d", &repos, "-no-color"]);
    assert!(
        text.contains(&format!(
            "- Removed {HOST}/{NS}/alpha v1.0.0 for {}",
            current_platform()
        )),
        "{text}"
    );
    assert!(text.contains("Removed 1 entry from"), "{text}");
    assert_eq!(world.cached(), ["alpha 1.1.0", "alpha 1.2.0", "beta 1.0.0"]);
    for suffix in [".tfinstall.json", ".used"] {
        assert!(
            !world.sidecar("alpha", "1.0.0", suffix).exists(),
            "{suffix}"
        );
    }
    // The working directory that installed it keeps its hard link, and
    // the bytes with it.
    let kept = World::installed(&world.path("work/alpha-1.0.0"), "alpha", "1.0.0");
    assert_eq!(std::fs::metadata(&kept).unwrap().nlink(), 1);
    let output = world.init_ok(&world.path("work/alpha-1.0.0"));
    assert!(output.contains("Using previously-installed"), "{output}");
    assert_eq!(world.downloads("alpha", "1.0.0"), 1);
    world.verify_is_clean();
}

/// A prune with no criterion, a bad duration, a missing or unreadable
/// lock file, a glob that matches nothing or a cache that is not there is
/// refused with what to do instead, and nothing is removed.
#[test]
fn refusals_name_the_fix_and_remove_nothing() {
    let world = World::with_packages();
    world.fill_all(40 * DAY);
    let garbage = world.path("garbage.hcl");
    std::fs::write(
        &garbage,
        "provider \"registry.test/acme/alpha\" {\n  version = [\n",
    )
    .unwrap();
    let before = listing(&world.cache);
    let missing = format!("-keep-lock-file={}", world.path("missing.hcl").display());
    let nothing = format!("-keep-lock-file={}", world.path("none/*/x.hcl").display());
    let unreadable = format!("-keep-lock-file={}", garbage.display());
    let cache_dir = format!("-cache-dir={}", world.path("no-such-cache").display());
    let cases: [(&[&str], &str); 8] = [
        (&[], "Give at least one of -unused-for"),
        (&["-dry-run"], "Give at least one of -unused-for"),
        (&["-unused-for=30"], "such as 30d"),
        (&["-unused-for=soon"], "such as 30d"),
        (&["-keep-latest=0"], "greater than zero"),
        (&["-unused-for=30d", &missing], "names no file"),
        (&["-unused-for=30d", &nothing], "names no file"),
        (
            &["-unused-for=30d", &unreadable],
            "cannot be read as a lock file",
        ),
    ];
    for (flags, says) in cases
        .iter()
        .chain([(&[&cache_dir, "-unused-for=1d"][..], "is not a directory")].iter())
    {
        let mut args = vec!["cache", "prune", "-no-color"];
        args.extend(*flags);
        let output = world.run(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{flags:?} was not refused");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
        assert_eq!(listing(&world.cache), before, "{flags:?} changed the cache");
    }
}

/// An `init` that holds an entry (paused right after taking its lock for
/// use) keeps it: the prune skips and reports it, and removes the rest;
/// the `init` then completes with the entry's own files.
#[test]
fn an_entry_an_init_is_using_is_skipped_and_reported() {
    let world = World::with_packages();
    world.fill_all(40 * DAY);
    let dir = world.workdir("held", &[("alpha", "1.1.0")]);
    let mut held = world.start("held", &dir, &["init", "-no-color"], &["use-held"]);
    held.reaches("use-held");
    // By version, not age: looking at the entry was a use already.
    let report = world.prune_json(&["-keep-latest=1"]);
    assert_eq!(
        World::listed(&report, "in_use"),
        ["alpha 1.1.0"],
        "{report}"
    );
    assert_eq!(World::listed(&report, "removed"), ["alpha 1.0.0"]);
    let text = world.run_ok(&["cache", "prune", "-keep-latest=1", "-dry-run", "-no-color"]);
    assert!(
        text.contains(&format!(
            "- Skipped {HOST}/{NS}/alpha v1.1.0 for {}: a running tfinstall is using it",
            current_platform()
        )),
        "{text}"
    );
    held.release("use-held");
    held.succeeds();
    assert_eq!(world.cached(), ["alpha 1.1.0", "alpha 1.2.0", "beta 1.0.0"]);
    assert_eq!(
        std::fs::metadata(World::installed(&dir, "alpha", "1.1.0"))
            .unwrap()
            .ino(),
        std::fs::metadata(World::executable_in(&world.cache, "alpha", "1.1.0"))
            .unwrap()
            .ino()
    );
    // It used the entry just now, so an age criterion keeps it.
    let report = world.prune_json(&["-unused-for=1h"]);
    assert_eq!(
        World::listed(&report, "removed"),
        ["alpha 1.2.0", "beta 1.0.0"]
    );
}

/// Eight `init`s run on one cache while prunes that would remove every
/// entry no run holds run again and again: every `init` succeeds with
/// whole packages (an entry removed before an `init` held it is filled
/// again), and the cache is whole at the end.
#[test]
fn prunes_beside_eight_inits_never_break_one() {
    let world = World::with_packages();
    world.fill_all(40 * DAY);
    let pins = |i: usize| [PACKAGES[i % 3], PACKAGES[3]];
    let dirs: Vec<PathBuf> = (0..8)
        .map(|i| world.workdir(&format!("w{i}"), &pins(i)))
        .collect();
    let inits: Vec<Process> = dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| world.start(&format!("w{i}"), dir, &["init", "-no-color"], &[]))
        .collect();
    let mut removed = 0;
    for _ in 0..5 {
        let report = world.prune_json(&["-unused-for=0s"]);
        removed += report["removed"].as_array().unwrap().len();
    }
    for init in inits {
        init.succeeds();
    }
    for (i, dir) in dirs.iter().enumerate() {
        for (t, v) in pins(i) {
            let installed = std::fs::read(World::installed(dir, t, v)).unwrap();
            let published = ProviderSpec::new(NS, t, v)
                .hostname(HOST)
                .executable_content(&current_platform());
            assert_eq!(installed, published, "w{i}: {t} {v}");
        }
    }
    assert!(removed > 0, "the prunes removed nothing");
    world.verify_is_clean();
    let leftovers: Vec<_> = std::fs::read_dir(world.cache.join(".tmp"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert_eq!(leftovers, Vec::<PathBuf>::new());
}

/// A prune killed between moving an entry out of place and deleting it
/// leaves no entry that looks whole: `cache verify` is clean and does not
/// count it, `cache stats` does not list it, and the next prune deletes
/// what was left; an `init` then fills the entry again.
#[test]
fn a_prune_killed_midway_is_finished_by_the_next() {
    let world = World::with_packages();
    world.fill_all(40 * DAY);
    let mut prune = world.start(
        "prune",
        world.tmp.path(),
        &["cache", "prune", "-keep-latest=2"],
        &["prune-after-rename"],
    );
    prune.reaches("prune-after-rename");
    prune.kill();
    assert!(!world.entry("alpha", "1.0.0").exists());
    let work = world.cache.join(format!(
        ".tmp/{HOST}~{NS}~alpha~1.0.0~{}",
        current_platform()
    ));
    assert!(work.join("entry").is_dir());
    let verify = world.verify_is_clean();
    assert!(verify.contains("Checked 3 cache entries"), "{verify}");
    let stats: Value = serde_json::from_str(&world.run_ok(&["cache", "stats", "-json"])).unwrap();
    assert_eq!(stats["entries"], 3);

    let text = world.run_ok(&["cache", "prune", "-keep-latest=2", "-no-color"]);
    // The work directory, and the use record left beside no entry.
    assert!(text.contains("Cleaned up 2 items"), "{text}");
    assert!(!world.sidecar("alpha", "1.0.0", ".used").exists());
    assert!(text.contains("Removed 0 entries"), "{text}");
    assert!(!work.exists());
    assert_eq!(world.cached(), ["alpha 1.1.0", "alpha 1.2.0", "beta 1.0.0"]);
    let dir = world.workdir("again", &[("alpha", "1.0.0")]);
    world.init_ok(&dir);
    assert_eq!(world.downloads("alpha", "1.0.0"), 2);
    world.verify_is_clean();
}

/// `cache stats` against `du` and link counts: the bytes on disk are what
/// `du -s` says of the cache; the bytes saved are what the working
/// directories' links would take as copies (`du` of each directory alone,
/// less `du` of all together); a `serve` store's archive beside an entry
/// counts, and goes when prune removes the entry.
#[test]
fn stats_match_du_and_link_counts() {
    let world = World::with_packages();
    world.fill_all(40 * DAY);
    world.date_use("alpha", "1.2.0", DAY);
    let second = world.workdir("second", &[PACKAGES[0], PACKAGES[3]]);
    world.init_ok(&second);
    world.date_use("alpha", "1.0.0", 50 * DAY);
    world.date_use("alpha", "1.1.0", 3 * DAY);
    world.date_use("beta", "1.0.0", 40 * DAY);
    // What `serve` keeps beside each entry of its store.
    let site_zip = world.path("site").join(
        world
            .tree
            .package("beta", "1.0.0", &current_platform())
            .url_path
            .as_deref()
            .unwrap()
            .trim_start_matches('/'),
    );
    let archive = world.sidecar("beta", "1.0.0", ".zip");
    std::fs::copy(&site_zip, &archive).unwrap();

    let stats: Value = serde_json::from_str(&world.run_ok(&["cache", "stats", "-json"])).unwrap();
    assert_eq!(stats["entries"], 4);
    assert_eq!(
        stats["providers"][0]["provider"],
        format!("{HOST}/{NS}/alpha")
    );
    assert_eq!(
        stats["providers"][0]["versions"],
        serde_json::json!(["1.2.0", "1.1.0", "1.0.0"])
    );
    assert_eq!(stats["providers"][1]["entries"], 1);
    assert_eq!(stats["bytes_on_disk"], du(&[&world.cache]));
    let workdirs: Vec<PathBuf> = std::fs::read_dir(world.path("work"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    let mut all: Vec<&Path> = vec![&world.cache];
    all.extend(workdirs.iter().map(PathBuf::as_path));
    let apart: u64 = all.iter().map(|p| du(&[p])).sum();
    assert_eq!(stats["bytes_saved_by_links"], apart - du(&all));
    // And by link counts: every other link of a cached file is a copy saved.
    let mut saved = 0;
    for (t, v) in PACKAGES {
        let meta = std::fs::metadata(World::executable_in(&world.cache, t, v)).unwrap();
        let linked_twice = (t, v) == PACKAGES[0] || (t, v) == PACKAGES[3];
        assert_eq!(meta.nlink(), if linked_twice { 3 } else { 2 }, "{t} {v}");
        saved += meta.blocks() * 512 * (meta.nlink() - 1);
    }
    assert_eq!(stats["bytes_saved_by_links"], saved);
    let beta = &stats["providers"][1]["bytes"];
    let beta_du = du(&[
        &world.entry("beta", "1.0.0"),
        &archive,
        &world.sidecar("beta", "1.0.0", ".tfinstall.json"),
        &world.sidecar("beta", "1.0.0", ".used"),
    ]);
    assert_eq!(*beta, beta_du);
    let day_of = |age: Duration| {
        let date = std::process::Command::new("date")
            .args(["-u", "-d"])
            .arg(format!(
                "@{}",
                (SystemTime::now() - age)
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap()
                    .as_secs()
            ))
            .arg("+%FT")
            .output()
            .unwrap();
        String::from_utf8(date.stdout).unwrap().trim().to_owned()
    };
    assert!(
        stats["oldest_use"]
            .as_str()
            .unwrap()
            .starts_with(&day_of(50 * DAY)),
        "{stats}"
    );
    assert!(
        stats["newest_use"]
            .as_str()
            .unwrap()
            .starts_with(&day_of(DAY)),
        "{stats}"
    );
    let text = world.run_ok(&["cache", "stats", "-no-color"]);
    assert!(text.contains("4 entries of 2 providers"), "{text}");
    assert!(
        text.contains("- registry.test/acme/alpha: v1.2.0, v1.1.0, v1.0.0 (3 entries)"),
        "{text}"
    );

    let cache_dir = format!("-cache-dir={}", world.cache.display());
    let report = world.prune_json(&[&cache_dir, "-keep-latest=1", "-unused-for=30d"]);
    assert_eq!(World::listed(&report, "removed"), ["alpha 1.0.0"]);
    let keep = world.path("work/alpha-1.1.0/.terraform.lock.hcl");
    let report = world.prune_json(&[&cache_dir, &format!("-keep-lock-file={}", keep.display())]);
    assert_eq!(
        World::listed(&report, "removed"),
        ["alpha 1.2.0", "beta 1.0.0"]
    );
    // beta was linked by one work dir only: the archive and the provenance
    // are freed, the package files stay for that directory.
    let beta = &report["removed"][1];
    assert_eq!(beta["bytes"], beta_du);
    assert!(beta["freed_bytes"].as_u64().unwrap() < beta_du);
    assert!(!archive.exists());
}

/// Last use is recorded once per run that uses an entry (installing from
/// it, filling it, warming it), and not at all by an `init` that finds
/// everything installed.
#[test]
fn last_use_is_recorded_by_use_and_never_by_the_no_op_path() {
    let world = World::with_packages();
    let first = world.workdir("first", &[("alpha", "1.0.0")]);
    world.init_ok(&first);
    let used = world.sidecar("alpha", "1.0.0", ".used");
    assert!(used.is_file(), "a fill records its use");
    let long_ago = SystemTime::now() - 40 * DAY;
    set_mtime(&used, long_ago);
    world.init_ok(&first);
    assert_eq!(mtime(&used), long_ago, "the no-op init wrote");
    let second = world.workdir("second", &[("alpha", "1.0.0")]);
    world.init_ok(&second);
    assert!(
        mtime(&used) > long_ago,
        "installing from the cache is a use"
    );
    set_mtime(&used, long_ago);
    succeeded(
        "cache warm",
        &world
            .command(&second, &["cache", "warm"], &[])
            .output()
            .unwrap(),
    );
    assert!(mtime(&used) > long_ago, "warming is a use");
    assert_eq!(std::fs::metadata(&used).unwrap().len(), 1);
}
