//! The module cache through `cache warm`, `stats`, `prune` and `verify`,
//! and the CI recipe of docs/cache.md run as written: an image warmed with
//! providers and modules, then a job that inits with the registry and the
//! git host stopped.
//!
//! The world: a signed provider registry and a module registry on one
//! loopback HTTPS server, with git repositories served by `git
//! http-backend` on the same server. The root module calls a registry
//! module (`acme/net/aws`, in git) that calls a git module by tag and a
//! local module inside its own package, and requires a provider of its
//! own: every kind of nesting `cache warm` must follow.

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use support::cache_world::{CacheWorld, HOST, NS};
use support::git_server::GitServer;
use support::*;

const DAY: Duration = Duration::from_secs(86_400);

struct World {
    inner: CacheWorld,
    git: GitServer,
    config: PathBuf,
    /// The same registries, and no plugin cache.
    config_without_plugin_cache: PathBuf,
}

impl World {
    fn new() -> World {
        let inner = CacheWorld::new(&[("root", "1.0.0"), ("net", "2.0.0")]);
        let git = GitServer::start(&inner.server);
        let hosts = format!(
            "host \"{HOST}\" {{\n  services = {{\n    \"providers.v1\" = \"{0}\"\n    \"modules.v1\" = \"{1}\"\n  }}\n}}\n",
            inner.server.url_for("/v1/providers/"),
            inner.server.url_for("/v1/modules/"),
        );
        let config = inner.path("cli-modules.tfrc");
        fs::write(
            &config,
            format!("{hosts}plugin_cache_dir = \"{}\"\n", inner.cache.display()),
        )
        .unwrap();
        let config_without_plugin_cache = inner.path("cli-no-plugin-cache.tfrc");
        fs::write(&config_without_plugin_cache, &hosts).unwrap();

        let sg = git.create("sg");
        let sg_commit = sg.commit(
            "main",
            "sg",
            &[("main.tf", b"variable \"x\" {\n  default = 1\n}\n")],
        );
        sg.tag("v1.0.0", &sg_commit);
        let net = git.create("net");
        let net_main = format!(
            "terraform {{\n  required_providers {{\n    net = {{\n      source = \"{HOST}/{NS}/net\"\n    }}\n  }}\n}}\n\nmodule \"sg\" {{\n  source = \"git::{}?ref=v1.0.0\"\n}}\n\nmodule \"sub\" {{\n  source = \"./modules/sub\"\n}}\n",
            sg.url()
        );
        let net_commit = net.commit(
            "main",
            "net",
            &[
                ("main.tf", net_main.as_bytes()),
                ("modules/sub/main.tf", b"output \"x\" {\n  value = 1\n}\n"),
            ],
        );
        let base = format!("/v1/modules/{NS}/net/aws");
        inner.server.route(
            &format!("{base}/versions"),
            Response::json("{\"modules\":[{\"versions\":[{\"version\":\"1.0.0\"}]}]}"),
        );
        inner.server.route(
            &format!("{base}/1.0.0/download"),
            Response::new(204).header(
                "X-Terraform-Get",
                format!("git::{}?ref={net_commit}", net.url()),
            ),
        );
        World {
            inner,
            git,
            config,
            config_without_plugin_cache,
        }
    }

    /// A fresh clone of the project: a root module calling `acme/net/aws`.
    fn project(&self, name: &str) -> PathBuf {
        let dir = self.inner.path(name);
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("main.tf"),
            format!(
                "terraform {{\n  required_providers {{\n    root = {{\n      source = \"{HOST}/{NS}/root\"\n    }}\n  }}\n}}\n\nmodule \"net\" {{\n  source  = \"{HOST}/{NS}/net/aws\"\n  version = \"1.0.0\"\n}}\n"
            ),
        )
        .unwrap();
        dir
    }

    fn module_cache(&self) -> PathBuf {
        self.inner.cache.join(".modules")
    }

    fn tfinstall(&self, dir: &Path, args: &[&str]) -> std::process::Output {
        self.run(dir, &self.config, None, args)
    }

    /// `tfinstall ARGS…` in `dir` with the CLI configuration `config` and,
    /// when given, `TFINSTALL_MODULE_CACHE_DIR=module_cache`.
    fn run(
        &self,
        dir: &Path,
        config: &Path,
        module_cache: Option<&Path>,
        args: &[&str],
    ) -> std::process::Output {
        self.command(dir, config, module_cache, args)
            .output()
            .expect("run tfinstall")
    }

    /// The command [`World::run`] runs.
    fn command(
        &self,
        dir: &Path,
        config: &Path,
        module_cache: Option<&Path>,
        args: &[&str],
    ) -> assert_cmd::Command {
        let mut command = tfinstall_command(&self.inner.path("home"));
        self.inner.ca.configure(&mut command);
        command
            .current_dir(dir)
            .env("TF_CLI_CONFIG_FILE", config)
            .env("GIT_SSL_CAINFO", self.inner.ca.ca_pem_path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env_remove("TFINSTALL_MODULE_CACHE_DIR");
        if let Some(module_cache) = module_cache {
            command.env("TFINSTALL_MODULE_CACHE_DIR", module_cache);
        }
        command.args(args);
        command
    }

    fn ok(&self, dir: &Path, args: &[&str]) -> String {
        let output = self.tfinstall(dir, args);
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "tfinstall {args:?} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    }

    /// `cache warm` of a fresh project, as a CI image is built.
    fn warmed(&self) -> PathBuf {
        let project = self.project("image");
        self.ok(&project, &["cache", "warm", "-no-color"]);
        project
    }

    /// The module cache's entry directories (`KIND/URLKEY/ID`).
    fn entries(&self) -> Vec<PathBuf> {
        module_entries(&self.module_cache())
    }
}

/// The entry directories (`KIND/URLKEY/ID`) of the module cache at `root`.
fn module_entries(root: &Path) -> Vec<PathBuf> {
    let mut entries = Vec::new();
    for kind in ["git", "archive"] {
        for source in subdirs(&root.join(kind)) {
            entries.extend(subdirs(&source));
        }
    }
    entries.sort();
    entries
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .map(|children| {
            children
                .flatten()
                .filter(|c| c.file_type().unwrap().is_dir())
                .filter(|c| !c.file_name().to_string_lossy().starts_with('.'))
                .map(|c| c.path())
                .collect()
        })
        .unwrap_or_default()
}

/// `.NAME{suffix}` beside the entry `dir`.
fn sidecar(dir: &Path, suffix: &str) -> PathBuf {
    dir.with_file_name(format!(
        ".{}{suffix}",
        dir.file_name().unwrap().to_string_lossy()
    ))
}

/// Dates every trace of a use of the entry `age` ago.
fn age_entry(dir: &Path, age: Duration) {
    let then = SystemTime::now() - age;
    for path in [
        sidecar(dir, ".used"),
        sidecar(dir, ".tfinstall.json"),
        dir.to_path_buf(),
    ] {
        if let Ok(file) = fs::File::options()
            .write(!path.is_dir())
            .read(path.is_dir())
            .open(&path)
        {
            file.set_modified(then).unwrap();
        }
    }
}

/// Every file below `dir` with its bytes, `.terraform/modules` as compared
/// between an online and an offline install.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for child in fs::read_dir(&next).unwrap().flatten() {
            if child.file_type().unwrap().is_dir() {
                pending.push(child.path());
            } else {
                let rel = child
                    .path()
                    .strip_prefix(dir)
                    .unwrap()
                    .display()
                    .to_string();
                files.push((rel, fs::read(child.path()).unwrap()));
            }
        }
    }
    files.sort();
    files
}

/// The CI recipe of docs/cache.md: `cache warm` fills both caches (the
/// nested modules and the providers they require included), a second warm
/// finds everything there, and with the registry and the git host stopped
/// `init -offline` in a fresh clone with its lock file committed installs
/// the same modules.json and files as an online init.
#[test]
fn a_warmed_image_inits_offline_with_the_servers_stopped() {
    let world = World::new();
    let image = world.project("image");
    let platform = current_platform();
    let out = world.ok(
        image.parent().unwrap(),
        &[
            "cache",
            "warm",
            "-no-color",
            &format!("-platform={platform}"),
            "image",
        ],
    );
    for provider in ["root", "net"] {
        assert!(
            out.contains(&format!("- Added {HOST}/{NS}/{provider} v")),
            "{provider}:\n{out}"
        );
    }
    assert_eq!(
        out.matches("- Added module package git::").count(),
        2,
        "{out}"
    );
    assert!(
        out.contains("registry answers init -offline needs: 2 added, 0 already there."),
        "{out}"
    );
    assert!(out.contains(&format!("for {platform}")), "{out}");
    assert_eq!(world.entries().len(), 2);
    assert!(
        !image.join(".terraform").exists(),
        "cache warm installs nothing in the directory"
    );
    assert_eq!(
        fs::read_dir(world.module_cache().join(".tmp"))
            .unwrap()
            .count(),
        0,
        "the scratch install is gone"
    );

    let again = world.ok(&image, &["cache", "warm", "-no-color"]);
    assert_eq!(again.matches("was already cached").count(), 4, "{again}");
    assert!(again.contains(": 0 added, 2 already there."), "{again}");

    // The reference: an online init with a module cache of its own, so the
    // warmed one stays as the image left it.
    let online = world.project("online");
    let mut command = tfinstall_command(&world.inner.path("home"));
    world.inner.ca.configure(&mut command);
    let output = command
        .current_dir(&online)
        .env("TF_CLI_CONFIG_FILE", &world.config)
        .env("GIT_SSL_CAINFO", world.inner.ca.ca_pem_path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env(
            "TFINSTALL_MODULE_CACHE_DIR",
            world.inner.path("other-modules"),
        )
        .args(["init", "-no-color"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let lock = fs::read(online.join(".terraform.lock.hcl")).unwrap();

    let World {
        inner, git, config, ..
    } = world;
    let CacheWorld {
        ca,
        server,
        tmp,
        cache,
        ..
    } = inner;
    drop(git);
    drop(server);

    let job = tmp.path().join("job");
    fs::create_dir_all(&job).unwrap();
    fs::copy(image.join("main.tf"), job.join("main.tf")).unwrap();
    fs::write(job.join(".terraform.lock.hcl"), &lock).unwrap();
    let mut command = tfinstall_command(&tmp.path().join("home"));
    ca.configure(&mut command);
    let output = command
        .current_dir(&job)
        .env("TF_CLI_CONFIG_FILE", &config)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("TFINSTALL_MODULE_CACHE_DIR")
        .args(["init", "-offline", "-no-color"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "offline init failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        tree(&job.join(".terraform/modules")),
        tree(&online.join(".terraform/modules")),
        "modules.json and the module files, offline vs online"
    );
    assert_eq!(fs::read(job.join(".terraform.lock.hcl")).unwrap(), lock);
    assert!(cache.is_dir());
}

/// A fresh clone's `init` reads the root module of the package the kept
/// answers guess while the registry is asked, and holds that entry for use
/// meanwhile, as it does while placing it: a `cache prune` run then (the
/// entry unused for 40 days by its records) skips it, and the `init`
/// installs from it.
#[test]
fn an_entry_read_while_the_registry_is_asked_is_not_pruned_under_it() {
    let world = World::new();
    world.warmed();
    let net = world
        .entries()
        .into_iter()
        .find(|entry| {
            fs::read_to_string(entry.join("main.tf"))
                .is_ok_and(|text| text.contains("module \"sg\""))
        })
        .expect("the net module's entry");
    let pauses = world.inner.path("pauses");
    fs::create_dir_all(&pauses).unwrap();
    let clone = world.project("clone");
    let started = SystemTime::now();
    let mut init = spawnable(&world.command(&clone, &world.config, None, &["init", "-no-color"]));
    init.env("TFINSTALL_PAUSE_DIR", &pauses)
        .env("TFINSTALL_PAUSE_AT", "module-read-early")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let init = init.spawn().expect("start tfinstall init");
    // Held in the early read, once the placing beside it has recorded its
    // use: the records are then dated back, so that only the hold keeps
    // the entry.
    let used = sidecar(&net, ".used");
    let mut waited = 0;
    while !(pauses.join("module-read-early.reached").exists()
        && fs::metadata(&used)
            .and_then(|meta| meta.modified())
            .is_ok_and(|modified| modified >= started))
    {
        assert!(waited < 6000, "the init never reached its early read");
        std::thread::sleep(Duration::from_millis(10));
        waited += 1;
    }
    age_entry(&net, 40 * DAY);
    let pruned = world.ok(&clone, &["cache", "prune", "-no-color", "-unused-for=30d"]);
    assert!(
        pruned.contains("- Skipped module ") && pruned.contains("a running tfinstall is using it"),
        "{pruned}"
    );
    assert!(net.join("main.tf").is_file(), "{pruned}");

    fs::write(pauses.join("module-read-early.go"), b"").unwrap();
    let output = init.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        fs::read(clone.join(".terraform/modules/net/main.tf")).unwrap(),
        fs::read(net.join("main.tf")).unwrap()
    );
}

/// `cache stats` counts module entries in text and JSON; `cache prune
/// -unused-for` removes the module entries no run used for that long,
/// skips one a run holds (its lock, shared, as a run holds it while it
/// links the files), and `-keep-latest` keeps the most recently used of
/// each source.
#[test]
fn stats_and_prune_cover_module_entries() {
    let world = World::new();
    let project = world.warmed();
    let entries = world.entries();
    assert_eq!(entries.len(), 2);

    let stats = world.ok(&project, &["cache", "stats", "-no-color"]);
    assert!(stats.contains("2 module entries of 2 sources"), "{stats}");
    assert!(
        stats.contains("Last used: the oldest module entry"),
        "{stats}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&world.ok(&project, &["cache", "stats", "-json"])).unwrap();
    assert_eq!(json["modules"]["entries"], 2, "{json}");
    assert_eq!(json["modules"]["packages"].as_array().unwrap().len(), 2);
    assert!(json["modules"]["bytes"].as_u64().unwrap() > 0);

    // Nothing is old enough yet.
    let fresh = world.ok(
        &project,
        &["cache", "prune", "-no-color", "-unused-for=30d"],
    );
    assert!(fresh.contains("Removed 0 module entries"), "{fresh}");

    for entry in &entries {
        age_entry(entry, 40 * DAY);
    }
    let dry = world.ok(
        &project,
        &["cache", "prune", "-no-color", "-unused-for=30d", "-dry-run"],
    );
    assert_eq!(
        dry.matches("- Would remove module https://").count(),
        2,
        "{dry}"
    );
    assert_eq!(world.entries().len(), 2, "a dry run removes nothing");

    // A run placing the first entry's files holds its lock shared.
    let held = fs::File::open(sidecar(&entries[0], ".lock")).unwrap();
    held.lock_shared().unwrap();
    let pruned = world.ok(
        &project,
        &["cache", "prune", "-no-color", "-unused-for=30d"],
    );
    assert!(
        pruned.contains("- Skipped module ") && pruned.contains("a running tfinstall is using it"),
        "{pruned}"
    );
    assert!(pruned.contains("Removed 1 module entry"), "{pruned}");
    assert_eq!(world.entries(), [entries[0].clone()]);
    assert!(!sidecar(&entries[1], ".tfinstall.json").exists());
    drop(held);

    let json: serde_json::Value =
        serde_json::from_str(&world.ok(&project, &["cache", "prune", "-json", "-unused-for=30d"]))
            .unwrap();
    assert_eq!(
        json["modules"]["removed"].as_array().unwrap().len(),
        1,
        "{json}"
    );
    assert!(world.entries().is_empty());

    // Warmed again, each source has one entry, the most recent: kept.
    world.ok(&project, &["cache", "warm", "-no-color"]);
    let latest = world.ok(&project, &["cache", "prune", "-no-color", "-keep-latest=1"]);
    assert!(latest.contains("Removed 0 module entries"), "{latest}");
    assert_eq!(world.entries().len(), 2);

    // Lock files name no module: by them alone, no module entry goes.
    fs::write(project.join(".terraform.lock.hcl"), "").unwrap();
    let by_lock = world.ok(
        &project,
        &[
            "cache",
            "prune",
            "-no-color",
            "-keep-lock-file=.terraform.lock.hcl",
        ],
    );
    assert!(
        by_lock.contains("Removed 0 module entries")
            && by_lock.contains("lock files name no module"),
        "{by_lock}"
    );
    assert_eq!(world.entries().len(), 2);
}

/// `cache verify` re-hashes each module entry against the digest recorded
/// when it was inserted, and reports a file made writable (a write
/// through a working directory's hard link would change the cache).
#[test]
fn verify_reports_a_changed_module_entry() {
    let world = World::new();
    let project = world.warmed();
    let out = world.ok(&project, &["cache", "verify", "-no-color"]);
    assert!(
        out.contains("Checked 2 module cache entries")
            && out.contains("all match what was fetched"),
        "{out}"
    );

    let file = world
        .entries()
        .into_iter()
        .map(|entry| entry.join("main.tf"))
        .find(|file| file.is_file())
        .unwrap();
    let mut permissions = fs::metadata(&file).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    permissions.set_readonly(false);
    fs::set_permissions(&file, permissions).unwrap();
    let output = world.tfinstall(&project, &["cache", "verify", "-no-color"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stdout}");
    assert!(stdout.contains("is writable"), "{stdout}");
    assert!(!stdout.contains("contents changed"), "{stdout}");
    assert!(stderr.contains("Damaged module cache entries"), "{stderr}");

    fs::write(&file, "# changed\n").unwrap();
    let output = world.tfinstall(&project, &["cache", "verify", "-no-color"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "{stdout}");
    assert!(
        stdout.contains("contents changed: expected sha256:"),
        "{stdout}"
    );
}

/// With only `TFINSTALL_MODULE_CACHE_DIR` set, `cache warm` fills the
/// module cache and warns that providers need a plugin cache, and `stats`,
/// `verify` and `prune` work on the module cache, saying nothing of a
/// plugin cache. With neither cache they refuse, naming both settings.
#[test]
fn the_cache_commands_work_on_a_module_cache_alone() {
    let world = World::new();
    let project = world.project("alone");
    let modules = world.inner.path("modules-alone");
    let config = &world.config_without_plugin_cache;
    let alone = |args: &[&str]| world.run(&project, config, Some(&modules), args);
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();

    for args in [
        &["cache", "warm", "-no-color"][..],
        &["cache", "stats", "-no-color"],
        &["cache", "verify", "-no-color"],
        &["cache", "prune", "-no-color", "-unused-for=30d"],
    ] {
        let output = world.run(&project, config, None, args);
        let stderr = text(&output.stderr);
        assert!(!output.status.success(), "{args:?}");
        assert!(
            stderr.contains("No plugin cache configured")
                && stderr.contains("TF_PLUGIN_CACHE_DIR")
                && stderr.contains("TFINSTALL_MODULE_CACHE_DIR"),
            "{args:?}: {stderr}"
        );
    }
    // A module cache that was never made is not read as an empty one.
    let output = alone(&["cache", "stats", "-no-color"]);
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("No such cache directory") && stderr.contains("TFINSTALL_MODULE_CACHE_DIR"),
        "{stderr}"
    );

    let output = alone(&["cache", "warm", "-no-color"]);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", text(&output.stderr));
    assert!(
        stdout.starts_with(&format!(
            "Warming the module cache at {}\n",
            modules.display()
        )),
        "{stdout}"
    );
    assert_eq!(
        stdout.matches("- Added module package git::").count(),
        2,
        "{stdout}"
    );
    assert!(stdout.contains(": 2 added, 0 already there."), "{stdout}");
    assert!(!stdout.contains("Warming the plugin cache"), "{stdout}");
    assert!(
        stdout.contains("Warning: Providers not warmed")
            && stdout.contains("plugin_cache_dir")
            && stdout.contains("TF_PLUGIN_CACHE_DIR environment variable, to warm providers too"),
        "{stdout}"
    );
    let entries = module_entries(&modules);
    assert_eq!(entries.len(), 2);
    assert!(!world.inner.cache.join(".modules").exists());

    let stats = text(&alone(&["cache", "stats", "-no-color"]).stdout);
    assert!(
        stats.starts_with(&format!(
            "{}: 2 module entries of 2 sources, ",
            modules.display()
        )),
        "{stats}"
    );
    assert!(!stats.contains("providers"), "{stats}");
    let json: serde_json::Value =
        serde_json::from_slice(&alone(&["cache", "stats", "-json"]).stdout).unwrap();
    assert_eq!(json["modules"]["entries"], 2, "{json}");
    assert_eq!(
        json["modules"]["cache_dir"],
        modules.display().to_string(),
        "{json}"
    );
    assert_eq!(json.as_object().unwrap().len(), 1, "modules only: {json}");

    let verify = alone(&["cache", "verify", "-no-color"]);
    assert!(verify.status.success());
    assert_eq!(
        text(&verify.stdout),
        format!(
            "Checked 2 module cache entries in {}: all match what was fetched.\n",
            modules.display()
        )
    );

    for entry in &entries {
        age_entry(entry, 40 * DAY);
    }
    let dry = alone(&["cache", "prune", "-json", "-dry-run", "-unused-for=30d"]);
    assert!(dry.status.success());
    let json: serde_json::Value = serde_json::from_slice(&dry.stdout).unwrap();
    assert_eq!(
        json["modules"]["removed"].as_array().unwrap().len(),
        2,
        "{json}"
    );
    assert_eq!(json["dry_run"], true);
    assert!(json.get("cache_dir").is_none(), "no plugin cache: {json}");
    assert_eq!(
        module_entries(&modules).len(),
        2,
        "a dry run removes nothing"
    );

    let pruned = alone(&["cache", "prune", "-no-color", "-unused-for=30d"]);
    let stdout = text(&pruned.stdout);
    assert!(pruned.status.success(), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "Removed 2 module entries from {}, freed ",
            modules.display()
        )),
        "{stdout}"
    );
    assert!(!stdout.contains("Removed 0 entries"), "{stdout}");
    assert!(module_entries(&modules).is_empty());

    // Empty now, and still reported: it is the cache that was asked about.
    let verify = alone(&["cache", "verify", "-no-color"]);
    assert!(
        text(&verify.stdout).starts_with("Checked 0 module cache entries in "),
        "{}",
        text(&verify.stdout)
    );
}
