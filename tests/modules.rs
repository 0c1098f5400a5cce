//! Module installation against real Terraform 1.0.3 (from PyPI): a module
//! registry on the test HTTPS server whose downloads point at real git
//! repositories served by `git http-backend` on the same server, direct git
//! sources, and local modules inside remote ones. tfinstall and Terraform
//! install the same configuration side by side; `modules.json` must be
//! byte for byte the same and every module directory must hold the same
//! files (`.git` aside: tfinstall keeps no history). Then Terraform, run
//! where tfinstall installed, must send no request at all, and neither
//! must a second tfinstall.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use support::git_server::{self, GitRepo, GitServer};
use support::terraform::Terraform;
use support::*;

/// The registry's hostname in module sources, answered by a `host` block.
const HOST: &str = "registry.test";

struct World {
    tmp: tempfile::TempDir,
    ca: TestCa,
    server: TestServer,
    git: GitServer,
    cli_config: PathBuf,
    /// The git repositories' own server, when not the registry's.
    _git_host: Option<TestServer>,
}

impl World {
    fn new() -> World {
        let ca = TestCa::new();
        let server = TestServer::https(&ca);
        let git = GitServer::start(&server);
        World::with(ca, server, git, None)
    }

    /// The registry `server` on a server of its own, apart from the git
    /// repositories', so that its connections can be counted.
    fn registry_apart(server: impl FnOnce(&TestCa) -> TestServer) -> World {
        let ca = TestCa::new();
        let git_host = TestServer::https(&ca);
        let git = GitServer::start(&git_host);
        let server = server(&ca);
        World::with(ca, server, git, Some(git_host))
    }

    fn with(ca: TestCa, server: TestServer, git: GitServer, git_host: Option<TestServer>) -> World {
        let tmp = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(tmp.path().join("home")).expect("create home");
        let cli_config = tmp.path().join("cli.tfrc");
        std::fs::write(
            &cli_config,
            format!(
                "host \"{HOST}\" {{\n  services = {{\n    \"modules.v1\" = \"{}\"\n  }}\n}}\n",
                server.url_for("/v1/modules/")
            ),
        )
        .expect("write CLI config");
        World {
            tmp,
            ca,
            server,
            git,
            cli_config,
            _git_host: git_host,
        }
    }

    fn home(&self) -> PathBuf {
        self.tmp.path().join("home")
    }

    /// Publishes `versions` of `NAMESPACE/NAME/aws` in the registry, each
    /// answered as registry.terraform.io answers: 204 with
    /// `X-Terraform-Get: git::https://…?ref=<commit>`.
    fn publish(&self, namespace: &str, name: &str, repo: &GitRepo, versions: &[(&str, &str)]) {
        let base = format!("/v1/modules/{namespace}/{name}/aws");
        let list: Vec<String> = versions
            .iter()
            .map(|(version, _)| format!("{{\"version\":\"{version}\"}}"))
            .collect();
        self.server.route(
            &format!("{base}/versions"),
            Response::json(format!(
                "{{\"modules\":[{{\"versions\":[{}]}}]}}",
                list.join(",")
            )),
        );
        for (version, commit) in versions {
            self.server.route(
                &format!("{base}/{version}/download"),
                Response::new(204).header(
                    "X-Terraform-Get",
                    format!("git::{}?ref={commit}", repo.url()),
                ),
            );
        }
    }

    fn workdir(&self, name: &str, main_tf: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = self.tmp.path().join("work").join(name);
        std::fs::create_dir_all(&dir).expect("create work dir");
        std::fs::write(dir.join("main.tf"), main_tf).expect("write main.tf");
        for (path, text) in files {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    fn terraform_init(&self, dir: &Path) -> std::process::Output {
        Terraform::V1_0_3
            .command(&self.home(), &self.cli_config, Some(&self.ca))
            .env("GIT_SSL_CAINFO", self.ca.ca_pem_path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .current_dir(dir)
            .args(["init", "-no-color", "-input=false", "-backend=false"])
            .output()
            .expect("run terraform")
    }

    fn tfinstall(&self, dir: &Path, args: &[&str]) -> std::process::Output {
        self.tfinstall_env(dir, args, &[])
    }

    fn tfinstall_env(
        &self,
        dir: &Path,
        args: &[&str],
        env: &[(&str, &Path)],
    ) -> std::process::Output {
        let mut command = tfinstall_command(&self.home());
        self.ca.configure(&mut command);
        command.envs(env.iter().copied());
        command
            .current_dir(dir)
            .env("TF_CLI_CONFIG_FILE", &self.cli_config)
            .env("GIT_SSL_CAINFO", self.ca.ca_pem_path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            // Longer than a held answer ([`World::hold_module_until`]) waits.
            .env("TF_REGISTRY_CLIENT_TIMEOUT", "60")
            .args(args)
            .output()
            .expect("run tfinstall")
    }
}

fn ok(what: &str, output: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{what} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Every file under `dir` (`.git` directories and `modules.json`, which is
/// compared on its own, left out) with its text.
fn files(dir: &Path) -> BTreeMap<String, String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_name() == ".git" || entry.file_name() == "modules.json" {
                continue;
            }
            let path = entry.path();
            let rel = path
                .strip_prefix(base)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if entry.file_type().unwrap().is_dir() {
                walk(base, &path, out);
            } else {
                out.insert(rel, read_text(&path));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// The records of a `modules.json`, by key, each as its exact bytes, in
/// the order of the file.
fn records(text: &str) -> BTreeMap<String, String> {
    let inner = text
        .strip_prefix("{\"Modules\":[{")
        .and_then(|rest| rest.strip_suffix("}]}"))
        .unwrap_or_else(|| panic!("not a modules.json: {text}"));
    inner
        .split("},{")
        .map(|record| {
            let key = record
                .strip_prefix("\"Key\":\"")
                .and_then(|rest| rest.split('"').next())
                .unwrap_or_else(|| panic!("record without a leading key: {record}"));
            (key.to_string(), record.to_string())
        })
        .collect()
}

const MODULE_TF: &str = "variable \"name\" {\n  default = \"x\"\n}\n";

#[test]
fn registry_git_and_local_modules_match_terraform_1_0_3() {
    let world = World::new();

    // A registry module with a local child, at two versions.
    let vpc = world.git.create("vpc");
    let v1 = vpc.commit(
        "main",
        "1.0.0",
        &[
            (
                "main.tf",
                b"module \"subnets\" {\n  source = \"./modules/subnets\"\n}\n",
            ),
            ("modules/subnets/main.tf", MODULE_TF.as_bytes()),
        ],
    );
    vpc.tag("v1.0.0", &v1);
    let v11 = vpc.commit("main", "1.1.0", &[("README.md", b"# vpc\n")]);
    vpc.tag("v1.1.0", &v11);
    world.publish("acme", "vpc", &vpc, &[("1.0.0", &v1), ("1.1.0", &v11)]);

    // A registry module that calls another registry module.
    let sg = world.git.create("sg");
    let sg1 = sg.commit(
        "main",
        "1.0.0",
        &[(
            "main.tf",
            b"module \"vpc\" {\n  source  = \"registry.test/acme/vpc/aws\"\n  version = \"1.0.0\"\n}\n",
        )],
    );
    world.publish("acme", "sg", &sg, &[("1.0.0", &sg1)]);

    // A repository called directly, by tag, branch and commit, with a
    // subdirectory.
    let direct = world.git.create("direct");
    let d1 = direct.commit(
        "main",
        "first",
        &[
            ("mods/a/main.tf", MODULE_TF.as_bytes()),
            ("mods/a/inner/main.tf", MODULE_TF.as_bytes()),
            ("main.tf", MODULE_TF.as_bytes()),
        ],
    );
    direct.tag("v2", &d1);
    let d2 = direct.commit("stable", "second", &[("mods/a/extra.tf", b"locals {}\n")]);
    let url = direct.url().to_string();

    // A registry module served as a zip archive, at a location relative to
    // the download URL.
    let zip = build_zip(
        &[
            ZipEntry::new("main.tf", MODULE_TF, 0o644),
            ZipEntry::new("modules/x/main.tf", MODULE_TF, 0o644),
        ],
        Compression::Deflated,
    );
    world.server.route(
        "/archives/net-2.0.0.zip",
        Response::bytes("application/zip", zip),
    );
    world.server.route(
        "/v1/modules/acme/net/aws/versions",
        Response::json(
            r#"{"modules":[{"versions":[{"version":"2.0.0"},{"version":"2.1.0-beta1"}]}]}"#,
        ),
    );
    world.server.route(
        "/v1/modules/acme/net/aws/2.0.0/download",
        Response::new(204).header("X-Terraform-Get", "/archives/net-2.0.0.zip"),
    );

    let main_tf = format!(
        r#"module "net" {{
  source  = "registry.test/acme/net/aws//modules/x"
  version = ">= 2.0.0"
}}

module "vpc" {{
  source  = "registry.test/acme/vpc/aws"
  version = "~> 1.0"
}}

module "vpc_old" {{
  source  = "registry.test/acme/vpc/aws"
  version = "1.0.0"
}}

module "sg" {{
  source  = "registry.test/acme/sg/aws"
  version = "1.0.0"
}}

module "by_tag" {{
  source = "git::{url}//mods/a?ref=v2"
}}

module "by_branch" {{
  source = "git::{url}//mods/a?ref=stable"
}}

module "by_commit" {{
  source = "git::{url}?ref={d2}"
}}

module "local" {{
  source = "./local"
}}
"#
    );
    let local = [(
        "local/main.tf",
        "module \"inner\" {\n  source = \"git::URL//mods/a?ref=v2\"\n}\n",
    )];
    let local_tf = local[0].1.replace("URL", &url);
    let files_in = [("local/main.tf", local_tf.as_str())];

    let ours = world.workdir("tfinstall", &main_tf, &files_in);
    let theirs = world.workdir("terraform", &main_tf, &files_in);
    let out = ok(
        "tfinstall init",
        &world.tfinstall(&ours, &["init", "-no-color"]),
    );
    assert!(out.contains("Initializing modules..."), "{out}");
    assert!(
        out.contains("Downloading registry.test/acme/vpc/aws 1.1.0 for vpc..."),
        "{out}"
    );
    assert!(
        out.contains("- vpc.subnets in .terraform/modules/vpc/modules/subnets"),
        "{out}"
    );
    ok("terraform init", &world.terraform_init(&theirs));

    // Terraform 1.0.3 writes the records in Go's map order (random);
    // later releases, and tfinstall, sort them by key. The records and
    // their bytes are the same.
    let manifest = |dir: &Path| read_text(&dir.join(".terraform/modules/modules.json"));
    assert_eq!(records(&manifest(&ours)), records(&manifest(&theirs)));
    let sorted: Vec<String> = records(&manifest(&ours)).into_values().collect();
    assert_eq!(
        manifest(&ours),
        format!("{{\"Modules\":[{{{}}}]}}", sorted.join("},{"))
    );
    assert!(manifest(&ours).contains("\"Version\":\"1.1.0\""));
    assert_eq!(
        files(&ours.join(".terraform/modules")),
        files(&theirs.join(".terraform/modules"))
    );

    // Through a module cache, cold and then warm: the same records, files.
    let module_cache = world.tmp.path().join("module-cache");
    for name in ["cached-cold", "cached-warm"] {
        let cached = world.workdir(name, &main_tf, &files_in);
        ok(
            name,
            &world.tfinstall_env(
                &cached,
                &["init", "-no-color"],
                &[("TFINSTALL_MODULE_CACHE_DIR", &module_cache)],
            ),
        );
        assert_eq!(manifest(&cached), manifest(&ours), "{name}");
        assert_eq!(
            files(&cached.join(".terraform/modules")),
            files(&theirs.join(".terraform/modules")),
            "{name}"
        );
    }

    // Terraform accepts what tfinstall left: no module request, no request
    // at all. Nor does a second tfinstall make any.
    world.server.clear_log();
    ok(
        "terraform init after tfinstall",
        &world.terraform_init(&ours),
    );
    assert_eq!(
        world.server.requests().len(),
        0,
        "{:?}",
        world.server.requests()
    );
    let before = files(&ours.join(".terraform/modules"));
    ok(
        "second tfinstall init",
        &world.tfinstall(&ours, &["init", "-no-color"]),
    );
    assert_eq!(
        world.server.requests().len(),
        0,
        "{:?}",
        world.server.requests()
    );
    assert_eq!(files(&ours.join(".terraform/modules")), before);

    // A changed call reinstalls only its own subtree.
    std::fs::write(
        ours.join("main.tf"),
        main_tf.replace("version = \"~> 1.0\"", "version = \"1.0.0\""),
    )
    .unwrap();
    let out = ok(
        "tfinstall init after a change",
        &world.tfinstall(&ours, &["init", "-no-color"]),
    );
    assert!(
        out.contains("Downloading registry.test/acme/vpc/aws 1.0.0 for vpc..."),
        "{out}"
    );
    assert!(!out.contains("for sg..."), "{out}");
    assert!(!out.contains("for by_tag..."), "{out}");
    assert_eq!(world.server.count("/v1/modules/acme/sg/aws/versions"), 0);
}

#[test]
fn a_local_path_escaping_its_package_is_refused_with_nothing_written() {
    let world = World::new();
    let repo = world.git.create("escape");
    let commit = repo.commit(
        "main",
        "escape",
        &[(
            "main.tf",
            b"module \"out\" {\n  source = \"../../elsewhere\"\n}\n",
        )],
    );
    let main_tf = format!(
        "module \"bad\" {{\n  source = \"git::{}?ref={commit}\"\n}}\n",
        repo.url()
    );
    let dir = world.workdir("escape", &main_tf, &[]);
    let output = world.tfinstall(&dir, &["init", "-no-color"]);
    assert!(!output.status.success());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        text.contains("Local module path escapes module package"),
        "{text}"
    );
    assert!(text.contains("module.bad.module.out"), "{text}");
    assert!(!dir.join(".terraform").exists(), "{text}");
    assert!(!dir.join(".terraform.lock.hcl").exists());
}

/// A world with one registry module `acme/vpc/aws` at 1.0.0 and 1.1.0.
fn world_with_vpc() -> World {
    let world = World::new();
    let vpc = world.git.create("vpc");
    let v1 = vpc.commit("main", "1.0.0", &[("main.tf", MODULE_TF.as_bytes())]);
    let v11 = vpc.commit("main", "1.1.0", &[("README.md", b"# vpc\n")]);
    world.publish("acme", "vpc", &vpc, &[("1.0.0", &v1), ("1.1.0", &v11)]);
    world
}

fn vpc_call(version: &str) -> String {
    format!(
        "module \"vpc\" {{\n  source  = \"registry.test/acme/vpc/aws\"\n  version = \"{version}\"\n}}\n"
    )
}

#[test]
fn a_failed_init_leaves_the_modules_as_they_were() {
    let world = world_with_vpc();
    let dir = world.workdir("all-or-nothing", &vpc_call("1.0.0"), &[]);
    ok("first init", &world.tfinstall(&dir, &["init", "-no-color"]));
    let manifest = read_text(&dir.join(".terraform/modules/modules.json"));
    let tree = files(&dir.join(".terraform/modules"));
    let data_dir = || -> Vec<_> {
        let mut names: Vec<_> = std::fs::read_dir(dir.join(".terraform"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        names
    };
    let before = data_dir();

    // The module changes, and a provider nobody serves makes init fail
    // after the new module was fetched.
    let main_tf = format!(
        "{}\nterraform {{\n  required_providers {{\n    x = {{\n      source = \"registry.test/acme/x\"\n    }}\n  }}\n}}\n",
        vpc_call("1.1.0")
    );
    std::fs::write(dir.join("main.tf"), main_tf).unwrap();
    let output = world.tfinstall(&dir, &["init", "-no-color"]);
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stdout)
            .contains("Downloading registry.test/acme/vpc/aws 1.1.0 for vpc..."),
        "{output:?}"
    );
    assert_eq!(
        read_text(&dir.join(".terraform/modules/modules.json")),
        manifest
    );
    assert_eq!(files(&dir.join(".terraform/modules")), tree);
    assert!(!dir.join(".terraform.lock.hcl").exists());
    assert_eq!(data_dir(), before);
}

#[test]
fn get_false_skips_modules_and_get_installs_only_modules() {
    let world = world_with_vpc();
    let dir = world.workdir("get", &vpc_call("1.0.0"), &[]);
    let out = ok(
        "tfinstall get",
        &world.tfinstall(&dir, &["get", "-no-color"]),
    );
    assert_eq!(
        out,
        "Downloading registry.test/acme/vpc/aws 1.0.0 for vpc...\n- vpc in .terraform/modules/vpc\n"
    );
    assert!(
        read_text(&dir.join(".terraform/modules/modules.json")).contains("\"Version\":\"1.0.0\"")
    );
    assert!(!dir.join(".terraform.lock.hcl").exists());

    // A plain get keeps it, without a request; -update looks again.
    std::fs::write(dir.join("main.tf"), vpc_call("~> 1.0")).unwrap();
    world.server.clear_log();
    let out = ok(
        "tfinstall get again",
        &world.tfinstall(&dir, &["get", "-no-color"]),
    );
    assert_eq!(out, "");
    assert_eq!(world.server.requests().len(), 0);

    // -get=false reads the installed modules as they are.
    let out = ok(
        "init -get=false",
        &world.tfinstall(&dir, &["init", "-no-color", "-get=false"]),
    );
    assert!(!out.contains("Initializing modules"), "{out}");
    assert_eq!(world.server.requests().len(), 0);

    let out = ok(
        "tfinstall get -update",
        &world.tfinstall(&dir, &["get", "-no-color", "-update"]),
    );
    assert!(
        out.contains("Downloading registry.test/acme/vpc/aws 1.1.0 for vpc..."),
        "{out}"
    );
    assert!(
        read_text(&dir.join(".terraform/modules/modules.json")).contains("\"Version\":\"1.1.0\"")
    );
}

#[test]
fn providers_of_remote_modules_join_the_same_run() {
    let world = World::new();
    // The provider registry on the same server, beside the module registry.
    let root = world.tmp.path().join("registry");
    Registry::new(&PgpKey::generate_ecdsa())
        .provider(ProviderSpec::new("acme", "alpha", "1.0.0").hostname(HOST))
        .write(&root, &world.server.url());
    world.server.serve_dir(&root);
    std::fs::write(
        &world.cli_config,
        format!(
            "host \"{HOST}\" {{\n  services = {{\n    \"modules.v1\" = \"{}\"\n    \"providers.v1\" = \"{}\"\n  }}\n}}\n",
            world.server.url_for("/v1/modules/"),
            world.server.url_for("/v1/providers/")
        ),
    )
    .unwrap();

    let repo = world.git.create("app");
    let commit = repo.commit(
        "main",
        "app",
        &[(
            "main.tf",
            b"terraform {\n  required_providers {\n    alpha = {\n      source  = \"registry.test/acme/alpha\"\n      version = \"1.0.0\"\n    }\n  }\n}\n",
        )],
    );
    world.publish("acme", "app", &repo, &[("1.0.0", &commit)]);
    let dir = world.workdir(
        "providers",
        "module \"app\" {\n  source  = \"registry.test/acme/app/aws\"\n  version = \"1.0.0\"\n}\n",
        &[],
    );
    let out = ok(
        "tfinstall init",
        &world.tfinstall(&dir, &["init", "-no-color", "-layout=providers"]),
    );
    let modules_at = out
        .find("- app in .terraform/modules/app")
        .expect("module line");
    let providers_at = out
        .find("- Installed registry.test/acme/alpha v1.0.0")
        .expect("provider line");
    assert!(modules_at < providers_at, "{out}");
    assert!(
        read_text(&dir.join(".terraform.lock.hcl"))
            .contains("provider \"registry.test/acme/alpha\"")
    );

    // Terraform 1.0.3 finds modules and providers in place: no module
    // request, no package download. (It asks for the provider's version
    // list on every init, after its own install too: the second run below.)
    let requests = || -> Vec<String> {
        world
            .server
            .requests()
            .into_iter()
            .map(|r| r.path)
            .collect()
    };
    world.server.clear_log();
    ok(
        "terraform init after tfinstall",
        &world.terraform_init(&dir),
    );
    let after_tfinstall = requests();
    assert_eq!(after_tfinstall, ["/v1/providers/acme/alpha/versions"]);
    world.server.clear_log();
    ok("terraform init again", &world.terraform_init(&dir));
    assert_eq!(requests(), after_tfinstall);
}

#[test]
fn many_directories_fetch_each_package_once_and_tf_data_dir_is_honoured() {
    let world = world_with_vpc();
    let a = world.workdir("a", &vpc_call("1.0.0"), &[]);
    let b = world.workdir("b", &vpc_call("1.0.0"), &[]);
    let work = a.parent().unwrap();
    ok(
        "init DIR…",
        &world.tfinstall(work, &["init", "-no-color", "a", "b"]),
    );
    for dir in [&a, &b] {
        assert!(dir.join(".terraform/modules/vpc/main.tf").is_file());
    }
    assert_eq!(world.server.count("/v1/modules/acme/vpc/aws/versions"), 1);
    assert_eq!(
        world
            .server
            .count("/v1/modules/acme/vpc/aws/1.0.0/download"),
        1
    );

    let c = world.workdir("c", &vpc_call("1.0.0"), &[]);
    let mut command = tfinstall_command(&world.home());
    world.ca.configure(&mut command);
    let output = command
        .current_dir(&c)
        .env("TF_CLI_CONFIG_FILE", &world.cli_config)
        .env("TF_DATA_DIR", "data")
        .env("GIT_SSL_CAINFO", world.ca.ca_pem_path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args(["get", "-no-color"])
        .output()
        .unwrap();
    let out = ok("get with TF_DATA_DIR", &output);
    assert!(out.contains("- vpc in data/modules/vpc"), "{out}");
    assert!(
        read_text(&c.join("data/modules/modules.json")).contains("\"Dir\":\"data/modules/vpc\"")
    );
    assert!(!c.join(".terraform").exists());
}

/// Eight modules installed by one `init`, which asks for their eight
/// version lists before any connection is up (sixteen requests with a
/// module cache, which asks for the download locations beside).
fn init_eight_modules(server: impl FnOnce(&TestCa) -> TestServer) -> World {
    let world = World::registry_apart(server);
    let mut main_tf = String::new();
    for index in 0..8 {
        let name = format!("m{index}");
        let repo = world.git.create(&name);
        let commit = repo.commit("main", "1.0.0", &[("main.tf", MODULE_TF.as_bytes())]);
        world.publish("acme", &name, &repo, &[("1.0.0", &commit)]);
        main_tf.push_str(&format!(
            "module \"{name}\" {{\n  source  = \"registry.test/acme/{name}/aws\"\n  version = \"1.0.0\"\n}}\n"
        ));
    }
    let dir = world.workdir("eight", &main_tf, &[]);
    ok("init", &world.tfinstall(&dir, &["init", "-no-color"]));
    for index in 0..8 {
        assert!(
            dir.join(format!(".terraform/modules/m{index}/main.tf"))
                .is_file()
        );
    }
    world
}

#[test]
fn a_burst_of_registry_requests_shares_one_http2_connection() {
    let world = init_eight_modules(TestServer::https);
    for index in 0..8 {
        assert_eq!(
            world
                .server
                .count(&format!("/v1/modules/acme/m{index}/aws/versions")),
            1
        );
    }
    // Before, each request opened its own: seven TLS handshakes on both
    // ends for connections left idle.
    assert_eq!(world.server.connections(), 1);
}

#[test]
fn a_burst_of_registry_requests_to_an_http1_registry_gets_its_connections() {
    let world = init_eight_modules(TestServer::https_http1_only);
    // HTTP/1.1 carries one request at a time: the burst still goes out
    // side by side, each request on a connection of its own, not one after
    // another on the first.
    assert!(
        world.server.connections() > 1,
        "{}",
        world.server.connections()
    );
}

#[test]
fn a_bad_version_or_source_is_refused_with_its_file_and_line() {
    let world = World::new();
    let dir = world.workdir(
        "bad",
        "module \"a\" {\n  source  = \"registry.test/acme/vpc/aws\"\n  version = \"~> one\"\n}\n\nmodule \"b\" {\n  source = \"modules/b\"\n}\n",
        &[],
    );
    let output = world.tfinstall(&dir, &["init", "-no-color"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("Error: Invalid version constraint\n\n  on main.tf line 3, in module \"a\":\n   3:   version = \"~> one\"\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Error: Invalid module source address\n\n  on main.tf line 7, in module \"b\":\n   7:   source = \"modules/b\"\n"),
        "{stderr}"
    );
    assert!(stderr.contains("use \"./modules/b\" instead"), "{stderr}");
    assert!(!dir.join(".terraform").exists());
    assert_eq!(world.server.requests().len(), 0);
}

#[test]
fn a_hostile_module_archive_is_refused_naming_the_module_with_nothing_written() {
    let world = World::new();
    let zip = build_zip(
        &[
            ZipEntry::new("main.tf", MODULE_TF, 0o644),
            ZipEntry::new("../../escaped.tf", MODULE_TF, 0o644),
        ],
        Compression::Deflated,
    );
    world.server.route(
        "/archives/evil.zip",
        Response::bytes("application/zip", zip),
    );
    world.server.route(
        "/v1/modules/acme/evil/aws/versions",
        Response::json(r#"{"modules":[{"versions":[{"version":"1.0.0"}]}]}"#),
    );
    world.server.route(
        "/v1/modules/acme/evil/aws/1.0.0/download",
        Response::new(204).header("X-Terraform-Get", "/archives/evil.zip"),
    );
    let dir = world.workdir(
        "hostile",
        "module \"evil\" {\n  source  = \"registry.test/acme/evil/aws\"\n  version = \"1.0.0\"\n}\n",
        &[],
    );
    let output = world.tfinstall(&dir, &["init", "-no-color"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("Error: Failed to download module\n\n  on main.tf line 2, in module \"evil\":\n   2:   source  = \"registry.test/acme/evil/aws\"\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Could not download module \"evil\""),
        "{stderr}"
    );
    assert!(stderr.contains("escaped.tf"), "{stderr}");
    assert!(!dir.join(".terraform").exists(), "{stderr}");
    assert!(!world.tmp.path().join("work/escaped.tf").exists());
    assert!(!dir.parent().unwrap().join("escaped.tf").exists());
}

/// `-offline` keeps the modules already installed, with no request, and
/// refuses to fetch one that is not, naming it and the fix, with nothing
/// written.
#[test]
fn offline_keeps_installed_modules_and_fetches_none() {
    let world = world_with_vpc();
    let dir = world.workdir("offline", &vpc_call("1.0.0"), &[]);
    let output = world.tfinstall(&dir, &["init", "-no-color", "-offline"]);
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("Error: Module not installed")
            && stderr.contains("-offline makes no request")
            && stderr.contains("Run tfinstall init without -offline"),
        "{stderr}"
    );
    assert_eq!(world.server.requests().len(), 0);
    assert!(!dir.join(".terraform").exists());

    ok(
        "online init",
        &world.tfinstall(&dir, &["init", "-no-color"]),
    );
    world.server.clear_log();
    let out = ok(
        "offline init",
        &world.tfinstall(&dir, &["init", "-no-color", "-offline"]),
    );
    assert!(!out.contains("Downloading"), "{out}");
    assert_eq!(world.server.requests().len(), 0);
}

/// A module repository's symbolic links are installed as links, as git
/// leaves them for Terraform: one naming `/` is neither walked nor copied
/// into `.terraform/modules`.
#[test]
fn a_module_links_are_kept_as_links_and_never_followed() {
    let world = World::new();
    let repo = world.git.create("linked");
    let commit = repo.commit_changes(
        "main",
        "links",
        &[
            git_server::FileChange::Write {
                path: "main.tf",
                data: MODULE_TF.as_bytes(),
                mode: "100644",
            },
            git_server::FileChange::Symlink {
                path: "everything",
                target: "/",
            },
            git_server::FileChange::Symlink {
                path: "docs/main.tf",
                target: "../main.tf",
            },
        ],
    );
    world.publish("acme", "linked", &repo, &[("1.0.0", &commit)]);
    let dir = world.workdir(
        "links",
        "module \"linked\" {\n  source  = \"registry.test/acme/linked/aws\"\n  version = \"1.0.0\"\n}\n",
        &[],
    );
    ok("init", &world.tfinstall(&dir, &["init", "-no-color"]));
    let placed = dir.join(".terraform/modules/linked");
    assert_eq!(
        std::fs::read_link(placed.join("everything")).unwrap(),
        Path::new("/")
    );
    assert_eq!(
        std::fs::read_link(placed.join("docs/main.tf")).unwrap(),
        Path::new("../main.tf")
    );
    assert_eq!(read_text(&placed.join("main.tf")), MODULE_TF);
}

impl World {
    /// A provider registry on the same server, beside the module registry,
    /// publishing `specs` under the registry's hostname.
    fn with_providers(&self, specs: Vec<ProviderSpec>) -> PublishedTree {
        let root = self.tmp.path().join("registry");
        let mut registry = Registry::new(&PgpKey::generate_ecdsa());
        for spec in specs {
            registry = registry.provider(spec.hostname(HOST));
        }
        let tree = registry.write(&root, &self.server.url());
        self.server.serve_dir(&root);
        std::fs::write(
            &self.cli_config,
            format!(
                "host \"{HOST}\" {{\n  services = {{\n    \"modules.v1\" = \"{}\"\n    \"providers.v1\" = \"{}\"\n  }}\n}}\n",
                self.server.url_for("/v1/modules/"),
                self.server.url_for("/v1/providers/")
            ),
        )
        .unwrap();
        tree
    }

    /// Publishes `acme/NAME/aws` 1.0.0, a module whose files are `main_tf`.
    fn publish_module(&self, name: &str, main_tf: &str) -> GitRepo {
        let repo = self.git.create(name);
        let commit = repo.commit("main", name, &[("main.tf", main_tf.as_bytes())]);
        self.publish("acme", name, &repo, &[("1.0.0", &commit)]);
        repo
    }

    /// Holds the registry's download answer for `acme/NAME/aws` 1.0.0 until
    /// `path` has been asked for: the module cannot arrive before then.
    fn hold_module_until(&self, name: &str, path: &str) {
        self.server.fault(
            &format!("/v1/modules/acme/{name}/aws/1.0.0/download"),
            Fault::AwaitRequest {
                path: path.to_string(),
                at_most: std::time::Duration::from_secs(20),
            },
        );
    }

    /// Where in the request log the first request for `path` is.
    fn first_request(&self, path: &str) -> usize {
        self.server
            .requests()
            .iter()
            .position(|r| r.path == path)
            .unwrap_or_else(|| panic!("no request for {path}"))
    }

    /// Where in the request log the first request into the git repository
    /// `name` is.
    fn first_git_request(&self, name: &str) -> usize {
        let prefix = format!("/git/{name}.git/");
        self.server
            .requests()
            .iter()
            .position(|r| r.path.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no request into {prefix}"))
    }
}

fn requires_alpha(constraint: &str) -> String {
    format!(
        "terraform {{\n  required_providers {{\n    alpha = {{\n      source  = \"registry.test/acme/alpha\"\n      version = \"{constraint}\"\n    }}\n  }}\n}}\n"
    )
}

fn calls(names: &[&str]) -> String {
    names
        .iter()
        .map(|name| {
            format!(
                "module \"{name}\" {{\n  source  = \"registry.test/acme/{name}/aws\"\n  version = \"1.0.0\"\n}}\n"
            )
        })
        .collect()
}

/// The lines of an init's output from the provider heading on.
fn provider_lines(out: &str) -> String {
    let at = out
        .find("Initializing provider plugins...")
        .unwrap_or_else(|| panic!("no provider heading in {out}"));
    out[at..].to_string()
}

#[test]
fn providers_of_modules_in_start_downloading_while_another_module_is_still_arriving() {
    let world = World::new();
    let tree = world.with_providers(vec![ProviderSpec::new("acme", "alpha", "1.0.0")]);
    let zip = tree
        .package("alpha", "1.0.0", &current_platform())
        .url_path
        .clone()
        .unwrap();
    world.publish_module("fast", &requires_alpha(">= 1.0.0"));
    world.publish_module("slow", MODULE_TF);
    // The slow module's download location is held until alpha's package has
    // been asked for: only a provider download that starts while modules
    // still arrive lets the slow module in before the 20 s cap.
    world.hold_module_until("slow", &zip);
    let dir = world.workdir("overlap", &calls(&["fast", "slow"]), &[]);
    let out = ok(
        "tfinstall init",
        &world.tfinstall(&dir, &["init", "-no-color", "-layout=providers"]),
    );
    assert!(
        world.first_request(&zip) < world.first_git_request("slow"),
        "alpha's package was not asked for before the slow module's repository: {:#?}",
        world
            .server
            .requests()
            .iter()
            .map(|r| &r.path)
            .collect::<Vec<_>>()
    );
    assert_eq!(world.server.count(&zip), 1);
    assert!(dir.join(".terraform/modules/slow/main.tf").is_file());
    let installed = format!(
        ".terraform/providers/{HOST}/acme/alpha/1.0.0/{}",
        current_platform()
    );
    assert!(dir.join(&installed).is_dir(), "{out}");

    // The same configuration installed with its modules in place already
    // (-get=false: no walk, nothing fetched early) reports the providers in
    // the same words and writes the same lock file.
    let plain = world.workdir("plain", &calls(&["fast", "slow"]), &[]);
    ok(
        "tfinstall get",
        &world.tfinstall(&plain, &["get", "-no-color"]),
    );
    let plain_out = ok(
        "tfinstall init -get=false",
        &world.tfinstall(
            &plain,
            &["init", "-no-color", "-layout=providers", "-get=false"],
        ),
    );
    assert_eq!(provider_lines(&out), provider_lines(&plain_out));
    // Fetched into a store of the run and linked from there, the installed
    // files still have the bytes and modes of a download straight into
    // place (their times are a cache entry's, as with a plugin cache).
    let files_and_modes = |dir: &Path| -> Vec<(String, u32, Vec<u8>)> {
        use std::os::unix::fs::PermissionsExt;
        let mut found: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| {
                let path = entry.unwrap().path();
                let mode = std::fs::metadata(&path).unwrap().permissions().mode();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                (name, mode, std::fs::read(&path).unwrap())
            })
            .collect();
        found.sort();
        found
    };
    assert_eq!(
        files_and_modes(&dir.join(&installed)),
        files_and_modes(&plain.join(&installed))
    );
    assert_eq!(
        read_text(&dir.join(".terraform.lock.hcl")),
        read_text(&plain.join(".terraform.lock.hcl"))
    );
    assert!(read_text(&dir.join(".terraform.lock.hcl")).contains("version     = \"1.0.0\""));
}

#[test]
fn a_later_module_ruling_out_the_early_version_gets_the_right_one() {
    let world = World::new();
    let tree = world.with_providers(vec![
        ProviderSpec::new("acme", "alpha", "1.0.0"),
        ProviderSpec::new("acme", "alpha", "2.0.0"),
    ]);
    let platform = current_platform();
    let zip_2 = tree
        .package("alpha", "2.0.0", &platform)
        .url_path
        .clone()
        .unwrap();
    world.publish_module("fast", &requires_alpha(">= 1.0.0"));
    // Arrives only once 2.0.0, the newest the fast module allows, is being
    // fetched, and rules it out.
    world.publish_module("slow", &requires_alpha("< 2.0.0"));
    world.hold_module_until("slow", &zip_2);
    let dir = world.workdir("ruled-out", &calls(&["fast", "slow"]), &[]);
    let out = ok(
        "tfinstall init",
        &world.tfinstall(&dir, &["init", "-no-color", "-layout=providers"]),
    );
    assert!(world.first_request(&zip_2) < world.first_git_request("slow"));
    assert!(
        out.contains("- Installed registry.test/acme/alpha v1.0.0"),
        "{out}"
    );
    assert!(!out.contains("v2.0.0"), "{out}");
    let lock = read_text(&dir.join(".terraform.lock.hcl"));
    assert!(lock.contains("version     = \"1.0.0\""), "{lock}");
    assert!(
        lock.contains("constraints = \">= 1.0.0, < 2.0.0\""),
        "{lock}"
    );
    assert!(!lock.contains("version     = \"2.0.0\""), "{lock}");
    let providers = dir.join(format!(".terraform/providers/{HOST}/acme/alpha"));
    assert!(providers.join("1.0.0").join(&platform).is_dir());
    assert!(!providers.join("2.0.0").exists());
}

#[test]
fn a_failed_early_download_is_tried_again_by_the_installation() {
    let world = World::new();
    let tree = world.with_providers(vec![ProviderSpec::new("acme", "alpha", "1.0.0")]);
    let zip = tree
        .package("alpha", "1.0.0", &current_platform())
        .url_path
        .clone()
        .unwrap();
    world.publish_module("fast", &requires_alpha("1.0.0"));
    world.publish_module("slow", MODULE_TF);
    world.hold_module_until("slow", &zip);
    // The early download meets a 500 and, with no retries, gives up.
    world.server.status_sequence(&zip, &[500]);
    let dir = world.workdir("failed-early", &calls(&["fast", "slow"]), &[]);
    let out = ok(
        "tfinstall init",
        &world.tfinstall(
            &dir,
            &[
                "init",
                "-no-color",
                "-layout=providers",
                "--download-retries=0",
            ],
        ),
    );
    assert!(world.first_request(&zip) < world.first_git_request("slow"));
    assert_eq!(world.server.count(&zip), 2);
    assert!(
        out.contains("- Installed registry.test/acme/alpha v1.0.0"),
        "{out}"
    );
    assert!(!out.contains("500"), "{out}");
    assert!(read_text(&dir.join(".terraform.lock.hcl")).contains("version     = \"1.0.0\""));
}

/// A module package as a zip archive, for registries that answer with an
/// archive's URL.
fn module_zip() -> Vec<u8> {
    build_zip(
        &[ZipEntry::new("main.tf", MODULE_TF, 0o644)],
        Compression::Deflated,
    )
}

#[test]
fn registry_credentials_reach_the_module_registry_and_not_the_package_host() {
    const TOKEN: &str = "module-registry-token";
    let world = World::new();
    // The registry as `127.0.0.1:PORT` (a registry hostname needs a dot),
    // found by service discovery; its download answer points at the same
    // server as `localhost:PORT`, which is another host to Terraform and so
    // gets no token.
    let registry_host = format!("127.0.0.1:{}", world.server.port());
    world.server.route(
        "/.well-known/terraform.json",
        Response::json(r#"{"modules.v1":"/v1/modules/"}"#),
    );
    world.server.route(
        "/v1/modules/acme/net/aws/versions",
        Response::json(r#"{"modules":[{"versions":[{"version":"1.0.0"}]}]}"#),
    );
    world.server.route(
        "/v1/modules/acme/net/aws/1.0.0/download",
        Response::new(204).header(
            "X-Terraform-Get",
            format!("https://{}/archive/net.zip", world.server.localhost_host()),
        ),
    );
    world.server.route(
        "/archive/net.zip",
        Response::bytes("application/zip", module_zip()),
    );
    world.server.require_bearer("terraform.json", TOKEN);
    world.server.require_bearer("/versions", TOKEN);
    world.server.require_bearer("/download", TOKEN);
    std::fs::write(
        &world.cli_config,
        format!("credentials \"{registry_host}\" {{\n  token = \"{TOKEN}\"\n}}\n"),
    )
    .unwrap();
    let dir = world.workdir(
        "credentials",
        &format!(
            "module \"net\" {{\n  source  = \"{registry_host}/acme/net/aws\"\n  version = \"1.0.0\"\n}}\n"
        ),
        &[],
    );
    let out = ok(
        "tfinstall get",
        &world.tfinstall(&dir, &["get", "-no-color"]),
    );
    assert!(out.contains("- net in .terraform/modules/net"), "{out}");
    assert_eq!(
        read_text(&dir.join(".terraform/modules/net/main.tf")),
        MODULE_TF
    );
    let bearer = format!("Bearer {TOKEN}");
    for path in [
        "/.well-known/terraform.json",
        "/v1/modules/acme/net/aws/versions",
        "/v1/modules/acme/net/aws/1.0.0/download",
    ] {
        let requests = world.server.requests_to(path);
        assert_eq!(requests.len(), 1, "{path}");
        assert_eq!(requests[0].header("authorization"), Some(bearer.as_str()));
    }
    let archive = world.server.requests_to("/archive/net.zip");
    assert_eq!(archive.len(), 1);
    assert_eq!(archive[0].header("authorization"), None);

    // TF_TOKEN_<host> does the same for a host named in a `host` block,
    // and git, on another host, is sent none.
    let world = world_with_vpc();
    world.server.require_bearer("/versions", TOKEN);
    world.server.require_bearer("/download", TOKEN);
    let dir = world.workdir("tf-token", &vpc_call("1.0.0"), &[]);
    let mut command = tfinstall_command(&world.home());
    world.ca.configure(&mut command);
    let output = command
        .current_dir(&dir)
        .env("TF_CLI_CONFIG_FILE", &world.cli_config)
        .env("TF_TOKEN_registry_test", TOKEN)
        .env("GIT_SSL_CAINFO", world.ca.ca_pem_path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .args(["get", "-no-color"])
        .output()
        .unwrap();
    ok("get with TF_TOKEN", &output);
    assert!(dir.join(".terraform/modules/vpc/main.tf").is_file());
    let requests = world.server.requests();
    let (registry, git): (Vec<_>, Vec<_>) = requests
        .iter()
        .partition(|r| r.path.starts_with("/v1/modules/"));
    assert_eq!(registry.len(), 2, "{requests:?}");
    for request in registry {
        assert_eq!(request.header("authorization"), Some(bearer.as_str()));
    }
    assert!(!git.is_empty());
    for request in git {
        assert_eq!(request.header("authorization"), None, "{}", request.path);
    }
}

#[test]
fn opentofus_json_download_answer_with_a_relative_location_is_followed() {
    let world = World::new();
    let base = "/v1/modules/acme/net/aws";
    world.server.route(
        &format!("{base}/versions"),
        Response::json(r#"{"modules":[{"versions":[{"version":"1.0.0"}]}]}"#),
    );
    // OpenTofu's registry answers 200 with the location in the body; one
    // starting with ./ is resolved against the download URL.
    world.server.route(
        &format!("{base}/1.0.0/download"),
        Response::json(r#"{"location":"./net.zip"}"#),
    );
    world.server.route(
        &format!("{base}/1.0.0/net.zip"),
        Response::bytes("application/zip", module_zip()),
    );
    let dir = world.workdir(
        "tofu-location",
        "module \"net\" {\n  source  = \"registry.test/acme/net/aws\"\n  version = \"1.0.0\"\n}\n",
        &[],
    );
    let out = ok(
        "tfinstall get",
        &world.tfinstall(&dir, &["get", "-no-color"]),
    );
    assert_eq!(
        out,
        "Downloading registry.test/acme/net/aws 1.0.0 for net...\n- net in .terraform/modules/net\n"
    );
    assert_eq!(
        read_text(&dir.join(".terraform/modules/net/main.tf")),
        MODULE_TF
    );
    assert_eq!(world.server.count(&format!("{base}/1.0.0/net.zip")), 1);
}

#[test]
fn init_json_reports_each_module_line_with_its_key() {
    let world = world_with_vpc();
    let dir = world.workdir("json", &vpc_call("1.0.0"), &[]);
    let output = world.tfinstall(&dir, &["init", "-json"]);
    let stdout = ok("tfinstall init -json", &output);
    let stream = validated_stream(stdout.as_bytes());
    let lines: Vec<(String, String, String)> = stream
        .iter()
        .filter(|m| {
            m["type"] == "log"
                && m["event"]
                    .as_str()
                    .is_some_and(|e| e.starts_with("module_"))
        })
        .map(|m| {
            (
                m["event"].as_str().unwrap().to_string(),
                m["module"].as_str().unwrap().to_string(),
                m["@message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        lines,
        [
            (
                "module_downloading".to_string(),
                "vpc".to_string(),
                "Downloading registry.test/acme/vpc/aws 1.0.0 for vpc...".to_string()
            ),
            (
                "module_installed".to_string(),
                "vpc".to_string(),
                "- vpc in .terraform/modules/vpc".to_string()
            ),
        ]
    );
    assert!(
        stream
            .iter()
            .any(|m| m["message_code"] == "initializing_modules_message")
    );
}

#[test]
fn with_a_plugin_cache_the_early_download_fills_the_cache_entry_the_install_uses() {
    let world = World::new();
    let tree = world.with_providers(vec![ProviderSpec::new("acme", "alpha", "1.0.0")]);
    let platform = current_platform();
    let zip = tree
        .package("alpha", "1.0.0", &platform)
        .url_path
        .clone()
        .unwrap();
    let cache = world.tmp.path().join("plugin-cache");
    std::fs::create_dir_all(&cache).unwrap();
    let mut config = read_text(&world.cli_config);
    config.push_str(&format!("plugin_cache_dir = \"{}\"\n", cache.display()));
    std::fs::write(&world.cli_config, config).unwrap();
    world.publish_module("fast", &requires_alpha("1.0.0"));
    world.publish_module("slow", MODULE_TF);
    world.hold_module_until("slow", &zip);
    let dir = world.workdir("cached", &calls(&["fast", "slow"]), &[]);
    let out = ok(
        "tfinstall init",
        &world.tfinstall(&dir, &["init", "-no-color", "-layout=providers"]),
    );
    assert!(world.first_request(&zip) < world.first_git_request("slow"));
    assert_eq!(world.server.count(&zip), 1);
    assert!(
        cache
            .join(format!("{HOST}/acme/alpha/1.0.0/{platform}"))
            .is_dir()
    );
    // Filled by this run: reported as installed, not as a cache hit.
    assert!(
        out.contains("- Installed registry.test/acme/alpha v1.0.0"),
        "{out}"
    );
    assert!(!out.contains("shared cache directory"), "{out}");
    assert!(read_text(&dir.join(".terraform.lock.hcl")).contains("version     = \"1.0.0\""));
}
