//! SIGKILL at any moment of an upgrade leaves a state from which the next
//! run succeeds: the previous install and lock file are intact or wholly
//! replaced (every file is the old or the new one, every version a lock
//! file or `selections.json` names is fully installed), and the next run
//! removes the staging directory of the killed process.
//!
//! The binary is killed when it reaches a phase (the archive request in the
//! server log, the staging directory, a package being unpacked, the first
//! package renamed into place, `selections.json` replaced) and after a sweep
//! of delays that covers a whole run.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use support::hardening::{Node, Project, RUN_TIMEOUT, Snapshot, output_text};
use support::{Fault, Payload, PgpKey, ProviderSpec, Registry, TestCa, TestServer};

const TYPES: [&str; 3] = ["null", "random", "tls"];
const OLD: &str = "1.0.0";
const NEW: &str = "2.0.0";

/// A registry with every provider in an old and a new version, and a
/// working directory (the template) with the old versions installed.
struct World {
    ca: TestCa,
    server: TestServer,
    _site: tempfile::TempDir,
    template: Project,
    old: Snapshot,
    new: Snapshot,
}

impl World {
    fn new() -> Self {
        let ca = TestCa::new();
        let server = TestServer::https(&ca);
        let site = tempfile::tempdir().unwrap();
        server.serve_dir(site.path());
        let mut registry = Registry::new(&PgpKey::generate());
        for type_name in TYPES {
            for version in [OLD, NEW] {
                // Big enough that downloading and unpacking take a while.
                registry = registry.provider(
                    ProviderSpec::new("hashicorp", type_name, version)
                        .payload(Payload::Random(1 << 20)),
                );
            }
        }
        registry.write(site.path(), &server.url());

        let mut world = World {
            ca,
            server,
            _site: site,
            template: Project::new(),
            old: Snapshot::default(),
            new: Snapshot::default(),
        };
        world.require(&world.template, OLD);
        world.run_ok(&world.template, &[]);
        world.old = world.template.snapshot();

        let reference = world.copy_of_template();
        world.run_ok(&reference, &["-upgrade"]);
        world.new = reference.snapshot();
        assert_ne!(lock_of(&world.old), lock_of(&world.new));
        world
    }

    /// main.tf requiring every provider at exactly `version`.
    fn require(&self, project: &Project, version: &str) {
        let host = self.server.localhost_host();
        let providers: String = TYPES
            .iter()
            .map(|t| {
                format!(
                    "    {t} = {{\n      source  = \"{host}/hashicorp/{t}\"\n      version = \"{version}\"\n    }}\n"
                )
            })
            .collect();
        std::fs::write(
            project.work().join("main.tf"),
            format!("terraform {{\n  required_providers {{\n{providers}  }}\n}}\n"),
        )
        .unwrap();
    }

    fn command(&self, project: &Project, args: &[&str]) -> assert_cmd::Command {
        let mut command = project.init(args);
        self.ca.configure(&mut command);
        command
    }

    fn run_ok(&self, project: &Project, args: &[&str]) {
        let output = self.command(project, args).output().unwrap();
        let (stdout, stderr) = output_text(&output);
        assert!(output.status.success(), "{stdout}\n{stderr}");
    }

    /// A fresh working directory holding the old install, about to upgrade.
    fn copy_of_template(&self) -> Project {
        let project = Project::new();
        copy_tree(&self.template.work(), &project.work());
        self.require(&project, NEW);
        project
    }

    /// Starts `init -upgrade` as a child process we can kill.
    fn spawn(&self, project: &Project) -> Child {
        support::spawnable(&self.command(project, &["-upgrade"]))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn tfinstall")
    }

    /// Checks the state a kill left behind, then that the next run
    /// succeeds and ends exactly where an uninterrupted run ends.
    fn check_after_kill(&self, project: &Project, moment: &str) {
        let after = project.snapshot();
        let staging = Path::new(".terraform/.tfinstall-staging");
        for (path, node) in &after.0 {
            if path.starts_with(staging) {
                continue;
            }
            let known = self.old.0.get(path) == Some(node) || self.new.0.get(path) == Some(node);
            assert!(
                known,
                "{moment}: {} is neither the old nor the new file",
                path.display()
            );
        }
        // Whatever the lock file and selections.json say is installed must
        // be there in full.
        let lock = lock_of(&after).expect("the lock file must survive");
        let lock_version = if Some(&lock) == lock_of(&self.old).as_ref() {
            OLD
        } else {
            NEW
        };
        self.assert_installed(&after, lock_version, &format!("{moment}, lock file"));
        let selections = after
            .0
            .get(Path::new(".terraform/plugins/selections.json"))
            .expect("selections.json must survive");
        let selections_version = if self
            .old
            .0
            .get(Path::new(".terraform/plugins/selections.json"))
            == Some(selections)
        {
            OLD
        } else {
            NEW
        };
        self.assert_installed(
            &after,
            selections_version,
            &format!("{moment}, selections.json"),
        );

        let output = self.command(project, &["-upgrade"]).output().unwrap();
        let (stdout, stderr) = output_text(&output);
        assert!(
            output.status.success(),
            "{moment}: the next run failed:\n{stdout}\n{stderr}"
        );
        let recovered = project.snapshot();
        if recovered != self.new {
            support::hardening::assert_unchanged(
                &self.new,
                &recovered,
                &format!("{moment}: after the next run"),
            );
        }
    }

    fn package_dir(&self, type_name: &str, version: &str) -> PathBuf {
        Path::new(".terraform/plugins")
            .join(self.server.localhost_host())
            .join("hashicorp")
            .join(type_name)
            .join(version)
    }

    fn assert_installed(&self, state: &Snapshot, version: &str, context: &str) {
        for type_name in TYPES {
            let dir = self.package_dir(type_name, version);
            let expected: Vec<_> = self
                .new
                .0
                .iter()
                .filter(|(p, _)| p.starts_with(&dir))
                .collect();
            assert!(!expected.is_empty());
            for (path, node) in expected {
                assert_eq!(
                    state.0.get(path),
                    Some(node),
                    "{context}: {} is missing or incomplete",
                    path.display()
                );
            }
        }
    }
}

fn lock_of(snapshot: &Snapshot) -> Option<Vec<u8>> {
    match snapshot.0.get(Path::new(".terraform.lock.hcl")) {
        Some(Node::File { content, .. }) => Some(content.clone()),
        _ => None,
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
        let permissions = std::fs::metadata(entry.path()).unwrap().permissions();
        std::fs::set_permissions(&target, permissions).unwrap();
    }
}

/// Polls `reached` until it holds (then kills the child at once) or the
/// child exits by itself; returns whether the kill happened.
fn kill_when(child: &mut Child, reached: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + RUN_TIMEOUT;
    loop {
        if reached() {
            child.kill().unwrap();
            child.wait().unwrap();
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        assert!(Instant::now() < deadline, "tfinstall did not finish");
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Whether any path below `dir` satisfies `test`.
fn any_below(dir: &Path, test: &dyn Fn(&Path) -> bool) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let path = entry.path();
        test(&path) || (path.is_dir() && any_below(&path, test))
    })
}

#[test]
fn killed_during_the_download_the_next_run_succeeds() {
    let world = World::new();
    let archive = format!(
        "/files/hashicorp/random/{NEW}/terraform-provider-random_{NEW}_{}.zip",
        support::current_platform()
    );
    // Hold the download mid-body so the kill lands inside it.
    world.server.fault(&archive, Fault::StallAfter(512 * 1024));
    let project = world.copy_of_template();
    world.server.clear_log();
    let mut child = world.spawn(&project);
    let killed = kill_when(&mut child, || world.server.count(&archive) > 0);
    assert!(killed, "tfinstall finished before the download started");
    std::thread::sleep(Duration::from_millis(100));
    world.server.clear_faults();
    assert!(
        project.staging_dir().exists(),
        "the killed run had a staging directory"
    );
    world.check_after_kill(&project, "during the download");
    assert!(!project.staging_dir().exists());
}

#[test]
fn killed_at_each_phase_the_next_run_succeeds() {
    let world = World::new();
    let staging = |project: &Project| project.staging_dir();
    type Phase = (&'static str, Box<dyn Fn(&Project) -> bool>);
    let phases: Vec<Phase> = vec![
        (
            "staging directory created",
            Box::new(move |p: &Project| staging(p).exists()),
        ),
        (
            "a package being unpacked",
            Box::new(move |p: &Project| {
                any_below(&staging(p), &|path| {
                    path.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                        n.starts_with("terraform-provider-") && !n.ends_with(".zip")
                    })
                })
            }),
        ),
        (
            "first package renamed into place",
            Box::new(|p: &Project| {
                TYPES.iter().any(|t| {
                    any_below(&p.work().join(".terraform/plugins"), &|path| {
                        path.ends_with(Path::new(t).join(NEW))
                    })
                })
            }),
        ),
        (
            "selections.json replaced",
            Box::new({
                let old = world
                    .old
                    .0
                    .get(Path::new(".terraform/plugins/selections.json"))
                    .cloned();
                move |p: &Project| {
                    let current =
                        std::fs::read(p.work().join(".terraform/plugins/selections.json")).ok();
                    match (&old, current) {
                        (Some(Node::File { content, .. }), Some(current)) => *content != current,
                        _ => false,
                    }
                }
            }),
        ),
    ];
    for (moment, reached) in &phases {
        let project = world.copy_of_template();
        let mut child = world.spawn(&project);
        if kill_when(&mut child, || reached(&project)) {
            world.check_after_kill(&project, moment);
        } else {
            // Too quick to catch this time; the run must simply have succeeded.
            assert_eq!(project.snapshot(), world.new, "{moment}");
        }
    }
}

/// Kills after a sweep of delays spread over a whole run.
#[test]
fn killed_after_any_delay_the_next_run_succeeds() {
    let world = World::new();
    let project = world.copy_of_template();
    let started = Instant::now();
    world.run_ok(&project, &["-upgrade"]);
    let full_run = started.elapsed();

    const STEPS: u32 = 12;
    for step in 0..=STEPS {
        let delay = full_run * step / STEPS;
        let project = world.copy_of_template();
        let mut child = world.spawn(&project);
        std::thread::sleep(delay);
        let moment = format!("after {delay:?} of a {full_run:?} run");
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            child.wait().unwrap();
            world.check_after_kill(&project, &moment);
        } else {
            assert_eq!(project.snapshot(), world.new, "{moment}");
        }
    }
}
