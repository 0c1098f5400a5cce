//! The shared module cache, with real processes against a module registry
//! on the test HTTPS server whose downloads name real git repositories
//! served by `git http-backend` on the same server. What is counted is what
//! the server saw: requests per path (git's `git-upload-pack` POSTs carry
//! both its ref listings and its object fetches), never time.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use support::git_server::{GitRepo, GitServer};
use support::*;

const HOST: &str = "registry.test";
const MODULE_TF: &str = "variable \"name\" {\n  default = \"x\"\n}\n";

struct World {
    tmp: tempfile::TempDir,
    ca: TestCa,
    server: Option<TestServer>,
    git: GitServer,
    cli_config: PathBuf,
}

impl World {
    /// A registry with `acme/vpc/aws` 1.0.0 and `acme/dns/aws` 2.0.0, each
    /// answered with `git::…?ref=<commit>` as registry.terraform.io
    /// answers, and a plugin cache configured (so the module cache is on,
    /// in its `.modules/`).
    fn new() -> (World, GitRepo, GitRepo) {
        let tmp = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(tmp.path().join("home")).expect("create home");
        let ca = TestCa::new();
        let server = TestServer::https(&ca);
        let git = GitServer::start(&server);
        let cli_config = tmp.path().join("cli.tfrc");
        std::fs::write(
            &cli_config,
            format!(
                "plugin_cache_dir = \"{}\"\nhost \"{HOST}\" {{\n  services = {{\n    \"modules.v1\" = \"{}\"\n  }}\n}}\n",
                tmp.path().join("plugin-cache").display(),
                server.url_for("/v1/modules/")
            ),
        )
        .expect("write CLI config");
        std::fs::create_dir_all(tmp.path().join("plugin-cache")).unwrap();
        let world = World {
            tmp,
            ca,
            server: Some(server),
            git,
            cli_config,
        };
        let vpc = world.git.create("vpc");
        let v1 = vpc.commit("main", "1.0.0", &[("main.tf", MODULE_TF.as_bytes())]);
        world.publish("acme", "vpc", &vpc, &[("1.0.0", &v1)]);
        let dns = world.git.create("dns");
        let d2 = dns.commit(
            "main",
            "2.0.0",
            &[
                ("main.tf", MODULE_TF.as_bytes()),
                ("zones/main.tf", MODULE_TF.as_bytes()),
            ],
        );
        world.publish("acme", "dns", &dns, &[("2.0.0", &d2)]);
        (world, vpc, dns)
    }

    fn server(&self) -> &TestServer {
        self.server.as_ref().expect("the server is up")
    }

    fn publish(&self, namespace: &str, name: &str, repo: &GitRepo, versions: &[(&str, &str)]) {
        let base = format!("/v1/modules/{namespace}/{name}/aws");
        let list: Vec<String> = versions
            .iter()
            .map(|(version, _)| format!("{{\"version\":\"{version}\"}}"))
            .collect();
        self.server().route(
            &format!("{base}/versions"),
            Response::json(format!(
                "{{\"modules\":[{{\"versions\":[{}]}}]}}",
                list.join(",")
            )),
        );
        for (version, commit) in versions {
            self.server().route(
                &format!("{base}/{version}/download"),
                Response::new(204).header(
                    "X-Terraform-Get",
                    format!("git::{}?ref={commit}", repo.url()),
                ),
            );
        }
    }

    fn module_cache(&self) -> PathBuf {
        self.tmp.path().join("plugin-cache/.modules")
    }

    fn workdir(&self, name: &str, main_tf: &str) -> PathBuf {
        let dir = self.tmp.path().join("work").join(name);
        std::fs::create_dir_all(&dir).expect("create work dir");
        std::fs::write(dir.join("main.tf"), main_tf).expect("write main.tf");
        dir
    }

    fn command(&self, dir: &Path, args: &[&str]) -> assert_cmd::Command {
        let mut command = tfinstall_command(&self.tmp.path().join("home"));
        self.ca.configure(&mut command);
        command
            .current_dir(dir)
            .env("TF_CLI_CONFIG_FILE", &self.cli_config)
            .env("GIT_SSL_CAINFO", self.ca.ca_pem_path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .args(args);
        command
    }

    fn init(&self, dir: &Path, args: &[&str]) -> Output {
        let mut all = vec!["init", "-no-color"];
        all.extend(args);
        self.command(dir, &all).output().expect("run tfinstall")
    }

    /// `git-upload-pack` requests to the repository `name`: its ref
    /// listings and its fetches.
    fn upload_packs(&self, name: &str) -> usize {
        self.server()
            .requests_to(&format!("/git/{name}.git/git-upload-pack"))
            .iter()
            .filter(|r| r.method == "POST")
            .count()
    }
}

fn ok(what: &str, output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{what} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn calls() -> String {
    "module \"vpc\" {\n  source  = \"registry.test/acme/vpc/aws\"\n  version = \"1.0.0\"\n}\n\
     module \"dns\" {\n  source  = \"registry.test/acme/dns/aws\"\n  version = \"~> 2.0\"\n}\n"
        .to_string()
}

/// The complete entries of the module cache at `root` (`git/URLKEY/ID`).
fn git_entries(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(repos) = std::fs::read_dir(root.join("git")) else {
        return out;
    };
    for repo in repos.flatten() {
        for entry in std::fs::read_dir(repo.path()).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.starts_with('.') && entry.file_type().unwrap().is_dir() {
                out.push(entry.path());
            }
        }
    }
    out.sort();
    out
}

/// 16 processes on one cold cache install the same modules, and the git
/// server sees each repository fetched once: as many `git-upload-pack`
/// requests as one process alone makes. The packages are pinned by commit,
/// so no process needs a ref listing; the others wait for the one that
/// fills each entry and link from it.
#[test]
fn sixteen_processes_on_a_cold_cache_fetch_each_repository_once() {
    let (world, _, _) = World::new();
    let alone = world.workdir("alone", &calls());
    ok("init alone", &world.init(&alone, &[]));
    let (vpc_once, dns_once) = (world.upload_packs("vpc"), world.upload_packs("dns"));
    assert!(vpc_once >= 1 && dns_once >= 1);
    assert_eq!(git_entries(&world.module_cache()).len(), 2);

    // A cold cache again, and 16 processes at once.
    std::fs::remove_dir_all(world.tmp.path().join("plugin-cache")).unwrap();
    std::fs::create_dir_all(world.tmp.path().join("plugin-cache")).unwrap();
    world.server().clear_log();
    let children: Vec<_> = (0..16)
        .map(|n| {
            let dir = world.workdir(&format!("p{n}"), &calls());
            spawnable(&world.command(&dir, &["init", "-no-color"]))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start tfinstall")
        })
        .collect();
    for child in children {
        ok("concurrent init", &child.wait_with_output().unwrap());
    }
    assert_eq!(world.upload_packs("vpc"), vpc_once);
    assert_eq!(world.upload_packs("dns"), dns_once);
    for n in 0..16 {
        let modules = world
            .tmp
            .path()
            .join(format!("work/p{n}/.terraform/modules"));
        assert_eq!(
            read_text(&modules.join("dns/zones/main.tf")),
            MODULE_TF,
            "p{n}"
        );
        assert_eq!(
            read_text(&modules.join("modules.json")),
            read_text(&alone.join(".terraform/modules/modules.json"))
        );
    }
    assert_eq!(git_entries(&world.module_cache()).len(), 2);

    // Warm: a new directory makes no git request at all.
    world.server().clear_log();
    let warm = world.workdir("warm", &calls());
    ok("warm init", &world.init(&warm, &[]));
    assert_eq!(world.upload_packs("vpc") + world.upload_packs("dns"), 0);
    let git_requests = world
        .server()
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/git/"))
        .count();
    assert_eq!(git_requests, 0);
    // Nothing is left in the cache's staging area.
    let tmp = world.module_cache().join(".tmp");
    assert_eq!(std::fs::read_dir(&tmp).map(|d| d.count()).unwrap_or(0), 0);
}

/// A process killed with SIGKILL while git fetches into the cache leaves no
/// entry (what it left in `.tmp/` is no entry), and the next run fills it
/// and succeeds.
#[test]
fn a_fetch_killed_midway_leaves_no_entry_and_the_next_run_succeeds() {
    let (world, _, _) = World::new();
    let dir = world.workdir("killed", &calls());
    world.server().fault(
        "/git/vpc.git/git-upload-pack",
        Fault::Latency(Duration::from_secs(600)),
    );
    let mut child = spawnable(&world.command(&dir, &["init", "-no-color"]))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start tfinstall");
    let work = world.module_cache().join(".tmp");
    let mut waited = 0;
    while world.upload_packs("vpc") == 0
        || std::fs::read_dir(&work).map(|d| d.count()).unwrap_or(0) == 0
    {
        assert!(waited < 6000, "the fetch never reached the server");
        std::thread::sleep(Duration::from_millis(10));
        waited += 1;
    }
    // SIGKILL: tfinstall gets no chance to clean up (its git child, which
    // kill_on_drop would end, lives on until the server's stall ends).
    child.kill().unwrap();
    child.wait().unwrap();
    let vpc_entries = || {
        git_entries(&world.module_cache())
            .into_iter()
            .filter(|entry| entry.join("main.tf").exists() && !entry.join("zones").exists())
            .count()
    };
    assert_eq!(vpc_entries(), 0, "a partial entry was published");
    assert!(!dir.join(".terraform/modules").exists());

    world.server().clear_faults();
    ok("init after the kill", &world.init(&dir, &[]));
    assert_eq!(vpc_entries(), 1);
    assert_eq!(
        read_text(&dir.join(".terraform/modules/vpc/main.tf")),
        MODULE_TF
    );
    // The killed process's work directory went with the next fill.
    assert_eq!(std::fs::read_dir(&work).map(|d| d.count()).unwrap_or(0), 0);
}

/// Runs `script` with `sh -c` as a user the file modes bind: root without
/// the capabilities that override them.
fn sh_as_user(script: &str) -> Output {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    let mut command = if root {
        let mut command = Command::new("setpriv");
        command.args([
            "--bounding-set=-dac_override,-dac_read_search,-fowner",
            "--inh-caps=-all",
            "sh",
        ]);
        command
    } else {
        Command::new("sh")
    };
    command.arg("-c").arg(script).output().expect("run sh")
}

/// Installed from the cache, a module's files are hard links to the
/// cache's read-only files in directories of its own: a module can write a
/// new file into its directory (as `archive_file` and rendered templates
/// do), but a write to one of its files fails instead of changing the
/// cache. `-module-link-mode=copy` installs writable copies instead.
#[test]
fn a_module_can_add_files_but_not_change_the_cached_ones() {
    let (world, _, _) = World::new();
    let dir = world.workdir("writes", &calls());
    ok("init", &world.init(&dir, &[]));
    let module = dir.join(".terraform/modules/vpc");
    let added = sh_as_user(&format!(
        "echo rendered > '{}'",
        module.join("out.txt").display()
    ));
    assert!(added.status.success(), "{added:?}");
    assert_eq!(read_text(&module.join("out.txt")), "rendered\n");

    let changed = sh_as_user(&format!(
        "echo changed >> '{}'",
        module.join("main.tf").display()
    ));
    assert!(!changed.status.success(), "a cached file was written");
    assert!(
        String::from_utf8_lossy(&changed.stderr).contains("Permission denied"),
        "{changed:?}"
    );
    for entry in git_entries(&world.module_cache()) {
        assert_eq!(read_text(&entry.join("main.tf")), MODULE_TF);
        assert!(!entry.join("out.txt").exists());
    }

    let copied = world.workdir("copies", &calls());
    ok(
        "init with copies",
        &world.init(&copied, &["-module-link-mode=copy"]),
    );
    let main_tf = copied.join(".terraform/modules/vpc/main.tf");
    let edited = sh_as_user(&format!("echo edited >> '{}'", main_tf.display()));
    assert!(edited.status.success(), "{edited:?}");
    for entry in git_entries(&world.module_cache()) {
        assert_eq!(read_text(&entry.join("main.tf")), MODULE_TF);
    }
}

/// With a warm cache, `init -offline` in a new directory, with the
/// registry and the git host down, writes the `modules.json` an online run
/// writes: registry modules from the kept version lists and locations, and
/// a direct git source with a tag from the tag's last resolution. With a
/// cold cache it refuses, naming the module and the fix.
#[test]
fn offline_with_a_warm_cache_installs_what_an_online_run_installs() {
    let (mut world, vpc, _) = World::new();
    vpc.tag("v1.0.0", &vpc.rev_parse("refs/heads/main"));
    let main_tf = format!(
        "{}module \"tagged\" {{\n  source = \"git::{}?ref=v1.0.0\"\n}}\n",
        calls(),
        vpc.url()
    );
    let cold = world.workdir("cold", &main_tf);
    let output = world.init(&cold, &["-offline"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("Error: Module not installed")
            && stderr.contains("module cache")
            && stderr.contains("without -offline"),
        "{stderr}"
    );
    assert_eq!(world.server().requests().len(), 0);

    let online = world.workdir("online", &main_tf);
    ok("online init", &world.init(&online, &[]));
    let expected = read_text(&online.join(".terraform/modules/modules.json"));
    assert!(expected.contains("\"Key\":\"tagged\""), "{expected}");

    // The host goes down: nothing answers on its port any more.
    drop(world.server.take());
    let offline = world.workdir("offline", &main_tf);
    let out = ok("offline init", &world.init(&offline, &["-offline"]));
    assert!(out.contains("Downloading"), "{out}");
    assert_eq!(
        read_text(&offline.join(".terraform/modules/modules.json")),
        expected
    );
    assert_eq!(
        read_text(&offline.join(".terraform/modules/dns/zones/main.tf")),
        MODULE_TF
    );
}

/// A tag that now names another commit than the cache last saw it name is
/// said in a warning naming the module, the tag and both commits.
#[test]
fn a_moved_tag_is_warned_about_with_both_commits() {
    let (world, vpc, _) = World::new();
    let first = vpc.rev_parse("refs/heads/main");
    vpc.annotated_tag("v1", &first);
    let main_tf = format!(
        "module \"net\" {{\n  source = \"git::{}?ref=v1\"\n}}\n",
        vpc.url()
    );
    let a = world.workdir("a", &main_tf);
    let out = ok("first init", &world.init(&a, &[]));
    assert!(!out.contains("Warning"), "{out}");

    // The same tag again: no warning, and no fetch (one ref listing only).
    let b = world.workdir("b", &main_tf);
    world.server().clear_log();
    let output = world.init(&b, &[]);
    let out = ok("second init", &output);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !out.contains("Warning") && !stderr.contains("Warning"),
        "{out}{stderr}"
    );

    let second = vpc.commit("main", "changed", &[("main.tf", b"# changed\n")]);
    let moved = Command::new("git")
        .current_dir(vpc.path())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args(["tag", "-f", "v1", &second])
        .output()
        .unwrap();
    assert!(moved.status.success(), "{moved:?}");
    let c = world.workdir("c", &main_tf);
    let output = world.init(&c, &[]);
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{all}");
    assert!(
        all.contains("Warning: Module tag moved")
            && all.contains("\"net\"")
            && all.contains("\"v1\"")
            && all.contains(&first)
            && all.contains(&second),
        "{all}"
    );
    assert_eq!(
        read_text(&c.join(".terraform/modules/net/main.tf")),
        "# changed\n"
    );
}

/// A git server that serves only what its refs name (protocol version 0
/// without `uploadpack.allowReachableSHA1InWant`) refuses a fetch by
/// commit id: the tag resolved by the ref listing is then fetched by name,
/// and the entry is still keyed by the commit the listing named.
#[test]
fn a_server_refusing_commit_ids_is_fetched_by_the_ref() {
    let (world, vpc, _) = World::new();
    vpc.annotated_tag("v1", &vpc.rev_parse("refs/heads/main"));
    let main_tf = format!(
        "module \"net\" {{\n  source = \"git::{}?ref=v1\"\n}}\n",
        vpc.url()
    );
    let dir = world.workdir("v0", &main_tf);
    let output = world
        .command(&dir, &["init", "-no-color"])
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "protocol.version")
        .env("GIT_CONFIG_VALUE_0", "0")
        .output()
        .unwrap();
    ok("init over protocol version 0", &output);
    assert_eq!(
        read_text(&dir.join(".terraform/modules/net/main.tf")),
        MODULE_TF
    );
    let entries = git_entries(&world.module_cache());
    assert_eq!(entries.len(), 1);
    assert!(entries[0].ends_with(vpc.rev_parse("refs/heads/main")));
}

/// An archive has to be downloaded to know its SHA-256, so each run
/// downloads it; the cache keeps one extraction per SHA-256. When the URL
/// serves other bytes, they make a new entry: the directories installed
/// from the first keep their files. Offline, the URL's last archive is
/// installed with no request.
#[test]
fn archives_are_kept_by_their_sha256_and_never_replaced() {
    let (world, _, _) = World::new();
    let serve = |text: &str| {
        let zip = build_zip(
            &[ZipEntry::new("main.tf", text, 0o644)],
            Compression::Deflated,
        );
        world
            .server()
            .route("/archives/net.zip", Response::bytes("application/zip", zip));
    };
    serve(MODULE_TF);
    world.server().route(
        "/v1/modules/acme/net/aws/versions",
        Response::json(r#"{"modules":[{"versions":[{"version":"1.0.0"}]}]}"#),
    );
    world.server().route(
        "/v1/modules/acme/net/aws/1.0.0/download",
        Response::new(204).header("X-Terraform-Get", "/archives/net.zip"),
    );
    let main_tf =
        "module \"net\" {\n  source  = \"registry.test/acme/net/aws\"\n  version = \"1.0.0\"\n}\n";
    let entries = || {
        let mut out = Vec::new();
        for urls in std::fs::read_dir(world.module_cache().join("archive")).unwrap() {
            for entry in std::fs::read_dir(urls.unwrap().path()).unwrap() {
                let entry = entry.unwrap();
                if !entry.file_name().to_string_lossy().starts_with('.') {
                    out.push(entry.path());
                }
            }
        }
        out
    };
    let a = world.workdir("a", main_tf);
    let b = world.workdir("b", main_tf);
    ok("init a", &world.init(&a, &[]));
    ok("init b", &world.init(&b, &[]));
    assert_eq!(world.server().count("/archives/net.zip"), 2);
    assert_eq!(entries().len(), 1);

    serve("# republished\n");
    let c = world.workdir("c", main_tf);
    ok("init c", &world.init(&c, &[]));
    assert_eq!(entries().len(), 2);
    assert_eq!(
        read_text(&c.join(".terraform/modules/net/main.tf")),
        "# republished\n"
    );
    assert_eq!(
        read_text(&a.join(".terraform/modules/net/main.tf")),
        MODULE_TF
    );

    world.server().clear_log();
    let d = world.workdir("d", main_tf);
    ok("offline init", &world.init(&d, &["-offline"]));
    assert_eq!(world.server().requests().len(), 0);
    assert_eq!(
        read_text(&d.join(".terraform/modules/net/main.tf")),
        "# republished\n"
    );
}

/// A branch moves only with `-upgrade` where the module is installed, as
/// Terraform keeps it; a new directory gets the branch's newest commit, as
/// `terraform init` would clone it, not the commit the cache saw last.
#[test]
fn a_branch_moves_with_upgrade_and_a_new_directory_gets_its_newest_commit() {
    let (world, vpc, _) = World::new();
    let main_tf = format!(
        "module \"net\" {{\n  source = \"git::{}?ref=main\"\n}}\n",
        vpc.url()
    );
    let a = world.workdir("a", &main_tf);
    ok("first init", &world.init(&a, &[]));
    let installed = a.join(".terraform/modules/net/main.tf");
    assert_eq!(read_text(&installed), MODULE_TF);

    vpc.commit("main", "newer", &[("main.tf", b"# newer\n")]);
    world.server().clear_log();
    ok("plain init", &world.init(&a, &[]));
    assert_eq!(read_text(&installed), MODULE_TF);
    assert_eq!(world.upload_packs("vpc"), 0);

    let b = world.workdir("b", &main_tf);
    ok("init in a new directory", &world.init(&b, &[]));
    assert_eq!(
        read_text(&b.join(".terraform/modules/net/main.tf")),
        "# newer\n"
    );

    // The newest commit is in the cache now: -upgrade lists the branch
    // and links it, with no fetch.
    world.server().clear_log();
    let out = ok("init -upgrade", &world.init(&a, &["-upgrade"]));
    assert!(!out.contains("Warning"), "{out}");
    assert_eq!(read_text(&installed), "# newer\n");
    assert_eq!(world.upload_packs("vpc"), 1, "one ref listing, no fetch");
}

/// With a warm module cache, the download location of the version the
/// cache's kept list would choose is asked for alongside the version list,
/// and used only if the fresh list chooses that version: a warm run makes
/// exactly Terraform's requests, once each, and a registry that published
/// a newer version or moved a download is followed exactly. (That the
/// location goes out before the list is answered shows in the new-version
/// case: the old version's location is asked for, which the fresh list
/// alone would never ask.)
#[test]
fn a_warm_cache_asks_what_terraform_asks_and_follows_a_changed_registry() {
    let (world, _vpc, dns) = World::new();
    let vpc_versions = "/v1/modules/acme/vpc/aws/versions";
    let vpc_download = "/v1/modules/acme/vpc/aws/1.0.0/download";
    let dns_versions = "/v1/modules/acme/dns/aws/versions";
    let dns_old = "/v1/modules/acme/dns/aws/2.0.0/download";
    let dns_new = "/v1/modules/acme/dns/aws/2.1.0/download";
    ok("cold init", &world.init(&world.workdir("a", &calls()), &[]));

    world.server().clear_log();
    ok("warm init", &world.init(&world.workdir("b", &calls()), &[]));
    for path in [vpc_versions, vpc_download, dns_versions, dns_old] {
        assert_eq!(world.server().count(path), 1, "{path}");
    }
    assert_eq!(world.server().requests().len(), 4);

    // A newer version within `~> 2.0`: its location is asked for after the
    // list, and installed; the kept version's early answer is not used.
    let newer = dns.commit("main", "2.1.0", &[("main.tf", b"# 2.1.0\n")]);
    world.publish("acme", "dns", &dns, &[("2.1.0", &newer)]);
    world.server().clear_log();
    let c = world.workdir("c", &calls());
    ok("init after a new version", &world.init(&c, &[]));
    assert_eq!(world.server().count(dns_versions), 1);
    assert_eq!(world.server().count(dns_old), 1);
    assert_eq!(world.server().count(dns_new), 1);
    assert_eq!(
        read_text(&c.join(".terraform/modules/dns/main.tf")),
        "# 2.1.0\n"
    );
    assert!(read_text(&c.join(".terraform/modules/modules.json")).contains("\"2.1.0\""));

    // The same version, now downloaded from another repository: the fresh
    // location is the one followed.
    let moved = world.git.create("vpc-moved");
    let commit = moved.commit("main", "moved", &[("main.tf", b"# moved\n")]);
    world.publish("acme", "vpc", &moved, &[("1.0.0", &commit)]);
    world.server().clear_log();
    let d = world.workdir("d", &calls());
    ok("init after a moved download", &world.init(&d, &[]));
    assert_eq!(world.server().count(vpc_versions), 1);
    assert_eq!(world.server().count(vpc_download), 1);
    assert_eq!(world.upload_packs("vpc"), 0);
    assert_eq!(
        read_text(&d.join(".terraform/modules/vpc/main.tf")),
        "# moved\n"
    );
}

/// One `init DIR…` whose directories call one module at two versions: the
/// module cache's kept answers name the older one, so it is placed early
/// for both, and the newer one's directory must end with the newer
/// package and the calls of the newer package (a nested module the older
/// one does not have), not what was read of the older one.
#[test]
fn directories_of_one_run_get_each_their_version_after_an_early_guess() {
    let (world, _vpc, dns) = World::new();
    let old = dns.commit("main", "3.0.0", &[("main.tf", b"# 3.0.0\n")]);
    world.publish("acme", "dns", &dns, &[("3.0.0", &old)]);
    let call = |version: &str| {
        format!(
            "module \"dns\" {{\n  source  = \"registry.test/acme/dns/aws\"\n  version = \"{version}\"\n}}\n"
        )
    };
    ok(
        "warm",
        &world.init(&world.workdir("warm", &call("3.0.0")), &[]),
    );

    let new = dns.commit(
        "main",
        "3.1.0",
        &[
            (
                "main.tf",
                b"module \"zones\" {\n  source = \"./zones\"\n}\n",
            ),
            ("zones/main.tf", b"# zones of 3.1.0\n"),
        ],
    );
    world.publish("acme", "dns", &dns, &[("3.0.0", &old), ("3.1.0", &new)]);
    let a = world.workdir("a", &call("3.0.0"));
    let b = world.workdir("b", &call("~> 3.0"));
    let output = world
        .command(
            &world.tmp.path().join("work"),
            &["init", "-no-color", "a", "b"],
        )
        .output()
        .expect("run tfinstall");
    ok("init a b", &output);

    assert_eq!(
        read_text(&a.join(".terraform/modules/dns/main.tf")),
        "# 3.0.0\n"
    );
    let a_manifest = read_text(&a.join(".terraform/modules/modules.json"));
    assert!(a_manifest.contains("\"3.0.0\""), "{a_manifest}");
    assert!(!a_manifest.contains("dns.zones"), "{a_manifest}");

    assert_eq!(
        read_text(&b.join(".terraform/modules/dns/zones/main.tf")),
        "# zones of 3.1.0\n"
    );
    let b_manifest = read_text(&b.join(".terraform/modules/modules.json"));
    assert!(b_manifest.contains("\"3.1.0\""), "{b_manifest}");
    assert!(b_manifest.contains("\"Key\":\"dns.zones\""), "{b_manifest}");
}

/// A `tfinstall` started with its stdout piped, whose lines arrive as it
/// writes them: to see a line printed while the process waits.
struct Running {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn start(mut command: Command) -> Running {
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start tfinstall");
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead as _;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Running {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits until it prints a line `wanted` accepts.
    fn wait_for_line(&mut self, what: &str, wanted: impl Fn(&str) -> bool) {
        loop {
            match self.lines.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => {
                    let found = wanted(&line);
                    self.seen.push(line);
                    if found {
                        return;
                    }
                }
                Err(err) => {
                    let _ = self.child.kill();
                    panic!(
                        "no {what} ({err}); output so far:\n{}",
                        self.seen.join("\n")
                    );
                }
            }
        }
    }

    /// Its whole stdout once it has exited, which it must with success.
    fn succeeded(mut self, what: &str) -> Vec<String> {
        let output = self.child.wait_with_output().unwrap();
        self.seen.extend(self.lines.iter());
        assert!(
            output.status.success(),
            "{what} failed:\n{}\n{}",
            self.seen.join("\n"),
            String::from_utf8_lossy(&output.stderr)
        );
        self.seen
    }
}

/// While another process fills a module cache entry (held just after it
/// took the entry's lock), `init` says once that it waits for it, as it
/// does for a provider, in text and in `-json`; it fetches nothing
/// meanwhile and installs from the entry once the other is done.
#[test]
fn a_process_waiting_for_a_module_entry_says_so() {
    let (world, _, _) = World::new();
    let vpc =
        "module \"vpc\" {\n  source  = \"registry.test/acme/vpc/aws\"\n  version = \"1.0.0\"\n}\n";
    let pauses = world.tmp.path().join("pauses");
    std::fs::create_dir_all(&pauses).unwrap();
    let filling_dir = world.workdir("filling", vpc);
    let mut filling = spawnable(&world.command(&filling_dir, &["init", "-no-color"]));
    filling
        .env("TFINSTALL_PAUSE_DIR", &pauses)
        .env("TFINSTALL_PAUSE_AT", "module-fill-after-lock");
    let filling = Running::start(filling);
    let mut waited = 0;
    while !pauses.join("module-fill-after-lock.reached").exists() {
        assert!(waited < 6000, "the filling process never took the lock");
        std::thread::sleep(Duration::from_millis(10));
        waited += 1;
    }
    world.server().clear_log();

    let text_dir = world.workdir("text", vpc);
    let mut text = Running::start(spawnable(&world.command(&text_dir, &["init", "-no-color"])));
    let json_dir = world.workdir("json", vpc);
    let mut json = Running::start(spawnable(&world.command(&json_dir, &["init", "-json"])));
    let wanted = "- Waiting for another tfinstall to finish fetching registry.test/acme/vpc/aws 1.0.0 into the shared module cache...";
    text.wait_for_line("wait notice", |line| line == wanted);
    json.wait_for_line("module_cache_wait message", |line| {
        line.contains("\"type\":\"module_cache_wait\"")
    });
    assert_eq!(
        world.upload_packs("vpc"),
        0,
        "the waiting processes fetch nothing"
    );

    std::fs::write(pauses.join("module-fill-after-lock.go"), b"").unwrap();
    let filled = filling.succeeded("the filling init");
    assert!(
        !filled.iter().any(|line| line.contains("Waiting")),
        "{filled:?}"
    );
    let text = text.succeeded("the waiting init");
    assert_eq!(
        text.iter().filter(|line| line.as_str() == wanted).count(),
        1,
        "{text:#?}"
    );
    let downloading = text
        .iter()
        .position(|line| line == "Downloading registry.test/acme/vpc/aws 1.0.0 for vpc...")
        .unwrap_or_else(|| panic!("{text:#?}"));
    assert!(
        text.iter().position(|line| line == wanted) < Some(downloading),
        "{text:#?}"
    );
    let json = json.succeeded("the waiting init -json");
    let stream = validated_stream(format!("{}\n", json.join("\n")).as_bytes());
    let waits: Vec<_> = stream
        .iter()
        .filter(|message| message["type"] == "module_cache_wait")
        .collect();
    assert_eq!(waits.len(), 1, "{json:#?}");
    assert_eq!(waits[0]["source"], "registry.test/acme/vpc/aws");
    assert_eq!(waits[0]["version"], "1.0.0");
    assert_eq!(waits[0]["@message"], &wanted[2..]);
    for dir in [&filling_dir, &text_dir, &json_dir] {
        assert_eq!(
            read_text(&dir.join(".terraform/modules/vpc/main.tf")),
            MODULE_TF
        );
    }
    assert_eq!(git_entries(&world.module_cache()).len(), 1);
}
