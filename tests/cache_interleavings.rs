//! The plugin cache fills each entry exactly once, whatever the
//! interleaving (issue 26): the built binary, run as several processes on
//! one cache, against a signed registry on loopback HTTPS, with archive
//! downloads counted at the server and inodes compared on disk.
//!
//! Each interleaving is forced, not hoped for: the tests' build of the
//! binary has pause points (`src/failpoint.rs`) at the steps that matter:
//! before and after the entry lock, before, midway through and after the
//! rename that publishes an entry and its provenance, and where a process
//! finds the lock held. A test holds one process at a step, lets another
//! run past it, then releases the first. A bounded stress run (16
//! processes, several rounds) backs them up.

mod support;

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use support::cache_world::{CacheWorld, HOST, NS};
use support::*;

const VERSION: &str = "1.0.0";
/// No process may take longer; a hang fails instead of blocking.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// A registry of `registry.test/acme/TYPE` 1.0.0, a temp dir for work
/// dirs and logs, one shared plugin cache and the CLI configuration
/// pointing at both.
type World = CacheWorld;

impl World {
    fn of_types(types: &[&str]) -> Self {
        let packages: Vec<(&str, &str)> = types.iter().map(|t| (*t, VERSION)).collect();
        CacheWorld::new(&packages)
    }

    /// A new work dir requiring every provider of the world.
    fn workdir(&self, name: &str) -> PathBuf {
        let dir = self.path("work").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let providers: String = self
            .packages
            .iter()
            .map(|(t, _)| {
                format!("    {t} = {{\n      source  = \"{HOST}/{NS}/{t}\"\n      version = \"~> 1.0\"\n    }}\n")
            })
            .collect();
        std::fs::write(
            dir.join("main.tf"),
            format!("terraform {{\n  required_providers {{\n{providers}  }}\n}}\n"),
        )
        .unwrap();
        dir
    }

    /// Starts `tfinstall ARGS…` in `dir`, to be held at `pauses`. Its
    /// output goes to a log named after `name`.
    fn start(&self, name: &str, dir: &Path, args: &[&str], pauses: &[&str]) -> Process {
        let pause_dir = self.path(&format!("pauses-{name}"));
        std::fs::create_dir_all(&pause_dir).unwrap();
        let mut command = tfinstall_command(&self.path("home"));
        self.ca.configure(&mut command);
        command
            .current_dir(dir)
            .env("TF_CLI_CONFIG_FILE", &self.config)
            .env("TFINSTALL_PAUSE_DIR", &pause_dir)
            .env("TFINSTALL_PAUSE_AT", pauses.join(","))
            .env("TFINSTALL_COUNT_FILE", pause_dir.join("counts"))
            .args(args);
        let mut std_command = std::process::Command::new(command.get_program());
        std_command.args(command.get_args()).current_dir(dir);
        for (key, value) in command.get_envs() {
            match value {
                Some(value) => std_command.env(key, value),
                None => std_command.env_remove(key),
            };
        }
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

    /// `init` in a new work dir `name`, held at `pauses`.
    fn init(&self, name: &str, pauses: &[&str]) -> (Process, PathBuf) {
        let dir = self.workdir(name);
        (self.start(name, &dir, &["init", "-no-color"], pauses), dir)
    }

    fn downloads(&self, type_name: &str) -> usize {
        let package = self.tree.package(type_name, VERSION, &current_platform());
        self.server.count(package.url_path.as_deref().unwrap())
    }

    fn entry(&self, type_name: &str) -> PathBuf {
        self.cache
            .join(HOST)
            .join(NS)
            .join(type_name)
            .join(VERSION)
            .join(current_platform())
    }

    fn cached_file(&self, type_name: &str) -> PathBuf {
        self.entry(type_name)
            .join(format!("terraform-provider-{type_name}_v{VERSION}"))
    }

    /// Asserts that `type_name`'s entry is complete and whole: its
    /// provenance records the files' real `h1:`, and every work dir in
    /// `dirs` holds the entry's own inode.
    fn assert_one_entry_linked_by(&self, type_name: &str, dirs: &[&Path]) {
        let cached = self.cached_file(type_name);
        let meta = std::fs::read_to_string(
            self.entry(type_name)
                .with_file_name(format!(".{}.tfinstall.json", current_platform())),
        )
        .expect("a complete entry has its provenance");
        let h1 = &self
            .tree
            .package(type_name, VERSION, &current_platform())
            .h1;
        assert!(meta.contains(h1.as_str()), "{meta}");
        for dir in dirs {
            let installed = dir
                .join(".terraform/plugins")
                .join(HOST)
                .join(NS)
                .join(type_name)
                .join(VERSION)
                .join(current_platform())
                .join(format!("terraform-provider-{type_name}_v{VERSION}"));
            assert_eq!(
                inode(&installed),
                inode(&cached),
                "{} does not link the cache's {type_name}",
                dir.display()
            );
        }
    }

    /// `cache verify`, held at `pauses`.
    fn verify(&self, pauses: &[&str]) -> Process {
        self.start(
            "verify",
            self.tmp.path(),
            &["cache", "verify", "-no-color"],
            pauses,
        )
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
    /// Waits until the process is held at `point` (or has passed it, when
    /// it was released beforehand).
    fn reaches(&mut self, point: &str) -> &mut Self {
        self.wait_for(|p| p.pause_dir.join(format!("{point}.reached")).exists())
            .unwrap_or_else(|log| panic!("{} never reached {point}:\n{log}", self.name));
        self
    }

    /// Lets the process go on from `point`, now or whenever it gets there.
    fn release(&mut self, point: &str) -> &mut Self {
        std::fs::write(self.pause_dir.join(format!("{point}.go")), b"").unwrap();
        self
    }

    /// Waits until the process reaches `point` or exits, whichever comes
    /// first; returns whether it reached the point.
    fn reaches_or_exits(&mut self, point: &str) -> bool {
        let marker = self.pause_dir.join(format!("{point}.reached"));
        let _ = self.wait_for(|p| marker.exists() || p.child.try_wait().unwrap().is_some());
        marker.exists()
    }

    /// Waits until the process reaches one of `points`; returns which.
    fn reaches_first(&mut self, points: &[&'static str]) -> &'static str {
        let reached = |p: &Self| {
            points
                .iter()
                .find(|point| p.pause_dir.join(format!("{point}.reached")).exists())
                .copied()
        };
        self.wait_for(|p| reached(p).is_some())
            .unwrap_or_else(|log| panic!("{} reached none of {points:?}:\n{log}", self.name));
        reached(self).unwrap()
    }

    fn wait_for(&mut self, done: impl Fn(&mut Self) -> bool) -> Result<(), String> {
        let deadline = Instant::now() + RUN_TIMEOUT;
        while !done(self) {
            if let Some(status) = self.child.try_wait().unwrap() {
                if done(self) {
                    return Ok(());
                }
                return Err(format!("exited with {status}: {}", self.output()));
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                return Err(format!("timed out: {}", self.output()));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    /// Waits for a successful exit; returns the output.
    fn succeeds(mut self) -> String {
        self.wait_for(|p| p.child.try_wait().unwrap().is_some())
            .unwrap_or_else(|log| panic!("{}: {log}", self.name));
        let status = self.child.wait().unwrap();
        let output = self.output();
        assert!(status.success(), "{} failed:\n{output}", self.name);
        output
    }

    /// SIGKILL, as a crash or an OOM killer would end it.
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for a successful exit; returns the output and what the
    /// process counted (`src/failpoint.rs`), a line each.
    fn succeeds_counting(self) -> (String, Vec<String>) {
        let counts = self.pause_dir.join("counts");
        let output = self.succeeds();
        let counted = std::fs::read_to_string(counts)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect();
        (output, counted)
    }
}

fn inode(path: &Path) -> (u64, u64) {
    let meta = std::fs::metadata(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    (meta.dev(), meta.ino())
}

fn using_cache_line(type_name: &str) -> String {
    format!("- Using {HOST}/{NS}/{type_name} v{VERSION} from the shared cache directory")
}

/// The steps of a fill at which a holder of the entry's lock can be held:
/// lock taken, package built but not published, provenance or files
/// published but not both, published with the lock still held.
const FILL_STEPS: [&str; 4] = [
    "fill-after-lock",
    "insert-before-publish",
    "insert-midway",
    "fill-after-insert",
];

/// The bug of issue 26: B looks at the entry while A is publishing it,
/// then waits for the lock; once A is done, B must use A's entry, not
/// download the package again and rename a second copy over it.
#[test]
fn a_look_during_publication_is_not_trusted_once_the_lock_is_held() {
    let world = World::of_types(&["alpha"]);
    let (mut a, a_dir) = world.init("a", &["insert-midway"]);
    a.reaches("insert-midway");
    let (mut b, b_dir) = world.init("b", &["fill-before-lock"]);
    b.reaches("fill-before-lock");
    a.release("insert-midway");
    a.succeeds();
    b.release("fill-before-lock");
    let b_output = b.succeeds();
    assert_eq!(world.downloads("alpha"), 1, "{b_output}");
    assert!(b_output.contains(&using_cache_line("alpha")), "{b_output}");
    world.assert_one_entry_linked_by("alpha", &[&a_dir, &b_dir]);
}

/// B starts while A is held at each step of its fill, and runs until it
/// finds the lock held; then A goes on. Whatever B saw, the package is
/// downloaded once and both link the one entry; and B waited once, on the
/// file lock, woken by A's release rather than retrying on a timer.
#[test]
fn a_second_process_during_each_step_of_a_fill_reuses_it() {
    const WAITS: [&str; 2] = ["entry-lock-busy", "use-lock-busy"];
    for step in FILL_STEPS {
        let world = World::of_types(&["alpha"]);
        let (mut a, a_dir) = world.init("a", &[step]);
        a.reaches(step);
        let (mut b, b_dir) = world.init("b", &WAITS);
        b.release(WAITS[0]).release(WAITS[1]);
        let waited = b.reaches_first(&WAITS);
        a.release(step);
        a.succeeds();
        let (b_output, b_waits) = b.succeeds_counting();
        assert_eq!(world.downloads("alpha"), 1, "at {step}:\n{b_output}");
        // Before the entry is published B waits for the lock to fill it;
        // once it is, B waits only to hold it for use (shared), which A's
        // fill lock still excludes: A may yet replace what B saw.
        let expected = if step == "fill-after-insert" {
            "use-lock-busy"
        } else {
            "entry-lock-busy"
        };
        assert_eq!(waited, expected, "at {step}");
        assert_eq!(b_waits, ["entry-lock-wait-process"], "at {step}");
        world.assert_one_entry_linked_by("alpha", &[&a_dir, &b_dir]);
    }
}

/// B found no entry and is about to take the lock when A fills the entry
/// from start to end: B, holding the lock, finds it complete and uses it.
#[test]
fn a_look_before_the_entry_existed_is_not_trusted_once_the_lock_is_held() {
    let world = World::of_types(&["alpha"]);
    let (mut b, b_dir) = world.init("b", &["fill-before-lock"]);
    b.reaches("fill-before-lock");
    let (a, a_dir) = world.init("a", &[]);
    a.succeeds();
    b.release("fill-before-lock");
    let b_output = b.succeeds();
    assert_eq!(world.downloads("alpha"), 1, "{b_output}");
    assert!(b_output.contains(&using_cache_line("alpha")), "{b_output}");
    world.assert_one_entry_linked_by("alpha", &[&a_dir, &b_dir]);
}

/// A is killed at each step of its fill. The next process finds either a
/// complete entry (A got as far as publishing both halves) or none, never
/// half of one; it ends with a whole, verified entry and a clean `.tmp`.
#[test]
fn a_fill_killed_at_any_step_leaves_a_whole_entry_or_none() {
    for step in FILL_STEPS {
        let world = World::of_types(&["alpha"]);
        let (mut a, _) = world.init("a", &[step]);
        a.reaches(step);
        a.kill();
        // Provenance goes first and the files' rename publishes the entry:
        // killed between the two, A leaves no entry, not files that look
        // like one Terraform made and nothing vouches for.
        assert_eq!(
            world.entry("alpha").exists(),
            step == "fill-after-insert",
            "at {step}"
        );
        let (b, b_dir) = world.init("b", &[]);
        let b_output = b.succeeds();
        // Killed after its download but before the entry was whole, A's
        // download is lost and B downloads again.
        let expected = match step {
            "insert-before-publish" | "insert-midway" => 2,
            _ => 1,
        };
        assert_eq!(world.downloads("alpha"), expected, "at {step}:\n{b_output}");
        world.assert_one_entry_linked_by("alpha", &[&b_dir]);
        let verify = world.verify(&[]).succeeds();
        assert!(
            verify.contains("Checked 1 cache entr"),
            "at {step}: {verify}"
        );
        let leftovers: Vec<_> = std::fs::read_dir(world.cache.join(".tmp"))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        assert_eq!(leftovers, Vec::<PathBuf>::new(), "at {step}");
    }
}

/// `cache warm` and `init` share the machinery: either one held midway
/// through publishing while the other looks, both orders.
#[test]
fn cache_warm_and_init_racing_fill_once() {
    for warm_first in [true, false] {
        let world = World::of_types(&["alpha"]);
        let warm_dir = world.workdir("warm");
        let (mut first, first_dir) = if warm_first {
            let warm = world.start("warm", &warm_dir, &["cache", "warm"], &["insert-midway"]);
            (warm, None)
        } else {
            let (init, dir) = world.init("first", &["insert-midway"]);
            (init, Some(dir))
        };
        first.reaches("insert-midway");
        let (mut second, second_dir) = if warm_first {
            let (init, dir) = world.init("second", &["fill-before-lock"]);
            (init, Some(dir))
        } else {
            let warm = world.start("warm", &warm_dir, &["cache", "warm"], &["fill-before-lock"]);
            (warm, None)
        };
        let looked = second.reaches_or_exits("fill-before-lock");
        first.release("insert-midway");
        first.succeeds();
        second.release("fill-before-lock");
        let output = second.succeeds();
        assert_eq!(
            world.downloads("alpha"),
            1,
            "warm first: {warm_first}\n{output}"
        );
        assert!(looked, "warm first: {warm_first}");
        let dirs: Vec<&Path> = [&first_dir, &second_dir]
            .into_iter()
            .flatten()
            .map(PathBuf::as_path)
            .collect();
        world.assert_one_entry_linked_by("alpha", &dirs);
    }
}

/// Two `init DIR…` runs share the cache: the first is held midway through
/// publishing, the second looks then, and each run's directories all link
/// the one entry.
#[test]
fn two_multi_directory_runs_sharing_a_cache_fill_once() {
    let world = World::of_types(&["alpha", "beta"]);
    let dirs: Vec<PathBuf> = (0..4).map(|i| world.workdir(&format!("d{i}"))).collect();
    let args = |pair: &[PathBuf]| -> Vec<String> {
        let mut args = vec!["init".to_owned(), "-no-color".to_owned()];
        args.extend(pair.iter().map(|d| d.display().to_string()));
        args
    };
    let first_args = args(&dirs[..2]);
    let second_args = args(&dirs[2..]);
    let mut first = world.start(
        "first",
        world.tmp.path(),
        &first_args.iter().map(String::as_str).collect::<Vec<_>>(),
        &["insert-midway"],
    );
    first.reaches("insert-midway");
    let mut second = world.start(
        "second",
        world.tmp.path(),
        &second_args.iter().map(String::as_str).collect::<Vec<_>>(),
        &["fill-before-lock"],
    );
    second.reaches("fill-before-lock");
    first.release("insert-midway");
    second.release("fill-before-lock");
    first.succeeds();
    let output = second.succeeds();
    assert_eq!(world.downloads("alpha"), 1, "{output}");
    assert_eq!(world.downloads("beta"), 1, "{output}");
    let dirs: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
    world.assert_one_entry_linked_by("alpha", &dirs);
    world.assert_one_entry_linked_by("beta", &dirs);
}

/// `cache verify` racing with an `init` that replaces a damaged entry:
/// verify has listed the entry when the replacement starts; it must report
/// what it finds once the replacement is done (a whole, good entry), not a
/// mix of the new provenance and the files being moved.
#[test]
fn cache_verify_racing_with_a_replacement_reports_only_real_damage() {
    let world = World::of_types(&["alpha"]);
    let (first, _) = world.init("first", &[]);
    first.succeeds();
    // Damage the entry as an editor saving the file would.
    let cached = world.cached_file("alpha");
    let evil = world.entry("alpha").with_file_name("evil");
    std::fs::write(&evil, b"#!/bin/sh\necho pwned\n").unwrap();
    std::fs::rename(&evil, &cached).unwrap();

    let mut verify = world.verify(&["verify-listed", "entry-lock-busy"]);
    verify.reaches("verify-listed");
    let (mut replacer, replacer_dir) = world.init("replacer", &["insert-midway"]);
    replacer.reaches("insert-midway");
    verify.release("entry-lock-busy").release("verify-listed");
    verify.reaches("entry-lock-busy");
    replacer.release("insert-midway");
    replacer.succeeds();
    let report = verify.succeeds();
    assert!(report.contains("Checked 1 cache entr"), "{report}");
    assert_eq!(world.downloads("alpha"), 2);
    world.assert_one_entry_linked_by("alpha", &[&replacer_dir]);
}

/// The held-out scenario, bounded: 16 `init`s at once on one empty cache,
/// ten providers each, for several rounds (`TFINSTALL_STRESS_ROUNDS`,
/// default 3). Every round, each archive is downloaded once and every
/// directory links the entry the cache holds at the end.
#[test]
fn sixteen_inits_fill_each_entry_once_in_every_round() {
    const PROCESSES: usize = 16;
    let rounds: usize = std::env::var("TFINSTALL_STRESS_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let types: Vec<String> = (0..10).map(|i| format!("synth{i:02}")).collect();
    let types: Vec<&str> = types.iter().map(String::as_str).collect();
    for round in 0..rounds {
        let world = World::of_types(&types);
        let processes: Vec<(Process, PathBuf)> = (0..PROCESSES)
            .map(|i| world.init(&format!("w{i}"), &[]))
            .collect();
        let dirs: Vec<PathBuf> = processes
            .into_iter()
            .map(|(process, dir)| {
                process.succeeds();
                dir
            })
            .collect();
        let dirs: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
        for t in &types {
            assert_eq!(world.downloads(t), 1, "round {round}: {t}");
            world.assert_one_entry_linked_by(t, &dirs);
            let links = std::fs::metadata(world.cached_file(t)).unwrap().nlink();
            assert_eq!(links, 1 + PROCESSES as u64, "round {round}: {t}");
        }
    }
}
