//! The hand-off end to end: `tfinstall init` (or `cache warm`), then real
//! Terraform 0.13.5 and 1.0.3 as the follow-up through `tfinstall exec`.
//! The provider registry counts every request, so "no provider request"
//! is a count of zero; a module registry on another server needs a token
//! that only the user's `~/.terraform.d` holds, so a follow-up that lost
//! the user's configuration fails to install the module.

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

use support::terraform::Terraform;
use support::*;

const TOKEN: &str = "module-registry-token";

/// `alpha` from the provider registry and a module from the module
/// registry, which wants a token.
const MAIN_TF: &str = r#"terraform {
  required_providers {
    alpha = {
      source  = "registry.test/acme/alpha"
      version = "~> 1.0"
    }
  }
}

module "net" {
  source  = "modules.test/acme/net/test"
  version = "1.0.0"
}
"#;

fn main_tf_pinning(version: &str) -> String {
    format!(
        "terraform {{\n  required_providers {{\n    alpha = {{\n      source  = \"registry.test/acme/alpha\"\n      version = \"{version}\"\n    }}\n  }}\n}}\n"
    )
}

struct World {
    tmp: tempfile::TempDir,
    ca: TestCa,
    /// `registry.test`: alpha 1.0.0 and 1.1.0, signed. `None` once stopped.
    registry: Option<TestServer>,
    /// `modules.test`: one module, behind a bearer token.
    modules: TestServer,
}

impl World {
    fn new() -> Self {
        let tmp = tempfile::tempdir().expect("temp dir");
        let ca = TestCa::new();
        let registry = TestServer::https(&ca);
        let root = tmp.path().join("registry");
        let key = PgpKey::generate_ecdsa();
        let mut published = Registry::new(&key);
        for version in ["1.0.0", "1.1.0"] {
            published = published.provider(ProviderSpec::new("acme", "alpha", version));
        }
        published.write(&root, &registry.url());
        registry.serve_dir(&root);

        let modules = TestServer::https(&ca);
        let module_zip = build_zip(
            &[ZipEntry::new(
                "main.tf",
                "output \"name\" {\n  value = \"net\"\n}\n",
                0o644,
            )],
            Compression::Deflated,
        );
        modules.route(
            "/v1/modules/acme/net/test/versions",
            Response::json(r#"{"modules":[{"versions":[{"version":"1.0.0"}]}]}"#),
        );
        modules.route(
            "/v1/modules/acme/net/test/1.0.0/download",
            Response::new(204).header("X-Terraform-Get", modules.url_for("/archive/net.zip")),
        );
        modules.route(
            "/archive/net.zip",
            Response::bytes("application/zip", module_zip),
        );
        modules.require_bearer("/versions", TOKEN);
        modules.require_bearer("/download", TOKEN);

        let world = World {
            tmp,
            ca,
            registry: Some(registry),
            modules,
        };
        // The user's own CLI configuration, spread as users spread it: the
        // provider registry's host block in ~/.terraformrc, the module
        // registry's in a *.tfrc of ~/.terraform.d and its token in
        // credentials.tfrc.json (what `terraform login` writes). Terraform
        // reads neither of the last two when TF_CLI_CONFIG_FILE is set.
        let providers_url = world.registry().url_for("/v1/providers/");
        world.write_home(".terraformrc", &host_block("registry.test", &providers_url));
        world.write_home(
            ".terraform.d/modules.tfrc",
            &format!(
                "host \"modules.test\" {{\n  services = {{\n    \"modules.v1\" = \"{}\"\n  }}\n}}\n",
                world.modules.url_for("/v1/modules/")
            ),
        );
        world.write_home(
            ".terraform.d/credentials.tfrc.json",
            &format!(r#"{{"credentials": {{"modules.test": {{"token": "{TOKEN}"}}}}}}"#),
        );
        world
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.tmp.path().join(relative)
    }

    fn home(&self) -> PathBuf {
        self.path("home")
    }

    fn write_home(&self, relative: &str, text: &str) {
        let path = self.home().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).expect("create home dirs");
        std::fs::write(path, text).expect("write home file");
    }

    fn registry(&self) -> &TestServer {
        self.registry.as_ref().expect("the registry is running")
    }

    /// Requests the provider registry received since the last call.
    fn provider_requests(&self) -> Vec<String> {
        let registry = self.registry();
        let paths = registry.requests().into_iter().map(|r| r.path).collect();
        registry.clear_log();
        paths
    }

    fn workdir(&self, name: &str, main_tf: &str) -> PathBuf {
        let dir = self.path("work").join(name);
        std::fs::create_dir_all(&dir).expect("create work dir");
        std::fs::write(dir.join("main.tf"), main_tf).expect("write main.tf");
        dir
    }

    /// `tfinstall ARGS` in `dir`, as a user with this world's home.
    fn tfinstall(&self, dir: &Path, args: &[&str], cache: Option<&Path>) -> Output {
        let mut command = tfinstall_command(&self.home());
        self.ca.configure(&mut command);
        if let Some(cache) = cache {
            command.env("TF_PLUGIN_CACHE_DIR", cache);
        }
        command
            .current_dir(dir)
            .env("TF_IN_AUTOMATION", "1")
            .env("CHECKPOINT_DISABLE", "1")
            .args(args)
            .output()
            .expect("run tfinstall")
    }

    /// `tfinstall exec -- terraform init` in `dir`.
    fn follow_up(&self, terraform: Terraform, dir: &Path, cache: Option<&Path>) -> Output {
        let path = terraform.path();
        let terraform = path.to_str().unwrap();
        self.tfinstall(
            dir,
            &["exec", "--", terraform, "init", "-input=false", "-no-color"],
            cache,
        )
    }

    /// `tfinstall exec -- terraform get`: the modules, which `tfinstall init`
    /// reads, installed with the user's configuration (nothing is locked
    /// yet, so nothing is handed over).
    fn get_modules(&self, terraform: Terraform, dir: &Path) {
        let path = terraform.path();
        let output = self.tfinstall(
            dir,
            &["exec", "--", path.to_str().unwrap(), "get", "-no-color"],
            None,
        );
        ok("terraform get", &output);
        assert!(module_installed(dir));
    }

    /// `terraform init` with the user's configuration and no tfinstall.
    fn terraform_alone(&self, terraform: Terraform, dir: &Path) -> Output {
        std::process::Command::new(terraform.path())
            .args(["init", "-input=false", "-no-color"])
            .current_dir(dir)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", self.home())
            .env("SSL_CERT_FILE", self.ca.ca_pem_path())
            .env("TF_IN_AUTOMATION", "1")
            .env("CHECKPOINT_DISABLE", "1")
            .output()
            .expect("run terraform")
    }
}

fn ok(what: &str, output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Where Terraform `terraform` installs alpha `version` in `dir`.
fn installed(terraform: Terraform, dir: &Path, version: &str) -> PathBuf {
    let tree = match terraform {
        Terraform::V0_13_5 => "plugins",
        Terraform::V1_0_3 => "providers",
    };
    dir.join(".terraform")
        .join(tree)
        .join("registry.test/acme/alpha")
        .join(version)
        .join(current_platform())
}

fn module_installed(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join(".terraform/modules/modules.json"))
        .is_ok_and(|text| text.contains("modules.test/acme/net/test"))
}

/// After `tfinstall init` (one directory, and `init DIR…`), with and without
/// a plugin cache, both Terraforms install nothing from the registry: zero
/// provider requests, and the lock file byte for byte as tfinstall wrote
/// it. (`tfinstall init` reads the installed modules, so `terraform get`
/// comes first, through `exec` with nothing to hand over yet.)
#[test]
fn the_follow_up_init_makes_no_provider_request() {
    let world = World::new();
    // Without the hand-off, the same follow-up asks the registry: the
    // count below is not zero by accident.
    let alone = world.workdir("alone", MAIN_TF);
    world.get_modules(Terraform::V1_0_3, &alone);
    ok("tfinstall init", &world.tfinstall(&alone, &["init"], None));
    world.provider_requests();
    ok(
        "terraform 1.0.3 init alone",
        &world.terraform_alone(Terraform::V1_0_3, &alone),
    );
    assert_ne!(world.provider_requests(), Vec::<String>::new());

    for (terraform, cache, many) in [
        (Terraform::V1_0_3, false, false),
        (Terraform::V0_13_5, false, true),
        (Terraform::V1_0_3, true, true),
        (Terraform::V0_13_5, true, false),
    ] {
        let name = format!("{}-cache-{cache}-many-{many}", terraform.version());
        let cache = cache.then(|| world.path(&format!("cache-{name}")));
        if let Some(cache) = &cache {
            std::fs::create_dir_all(cache).unwrap();
        }
        let dirs: Vec<PathBuf> = (0..if many { 2 } else { 1 })
            .map(|i| world.workdir(&format!("{name}-{i}"), MAIN_TF))
            .collect();
        for dir in &dirs {
            world.get_modules(terraform, dir);
        }
        let init = if many {
            let parent = dirs[0].parent().unwrap();
            let names: Vec<String> = dirs
                .iter()
                .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
                .collect();
            let mut args = vec!["init"];
            args.extend(names.iter().map(String::as_str));
            world.tfinstall(parent, &args, cache.as_deref())
        } else {
            world.tfinstall(&dirs[0], &["init"], cache.as_deref())
        };
        ok(&format!("tfinstall init for {name}"), &init);
        world.provider_requests();
        for dir in &dirs {
            let lock = read_text(&dir.join(LOCK_FILE));
            let output = world.follow_up(terraform, dir, cache.as_deref());
            let stdout = ok(&format!("the follow-up of {name}"), &output);
            assert_eq!(
                world.provider_requests(),
                Vec::<String>::new(),
                "{name}: the follow-up asked the registry\n{stdout}"
            );
            assert!(
                stderr(&output).contains("tfinstall: handing 1 provider over from"),
                "{}",
                stderr(&output)
            );
            assert_eq!(read_text(&dir.join(LOCK_FILE)), lock, "{name}: lock file");
            assert!(
                installed(terraform, dir, "1.1.0").is_dir(),
                "{name}\n{stdout}"
            );
            assert!(module_installed(dir), "{name}: module\n{stdout}");
        }
    }
}

/// The image build warms the cache; the job has the committed lock file and
/// no provider registry. The whole pipeline (`tfinstall init`, then
/// `terraform init`) succeeds, and so does the follow-up alone in a fresh
/// checkout straight after the image build (which also installs the module
/// there, with the user's token), while Terraform without the hand-off
/// fails.
#[test]
fn with_the_registry_down_the_pipeline_succeeds_from_a_warm_cache() {
    let mut world = World::new();
    let dev = world.workdir("dev", MAIN_TF);
    world.get_modules(Terraform::V1_0_3, &dev);
    ok("tfinstall init", &world.tfinstall(&dev, &["init"], None));
    let committed_lock = read_text(&dev.join(LOCK_FILE));
    let cache = world.path("image-cache");
    std::fs::create_dir_all(&cache).unwrap();
    let checkout = |world: &World, name: &str| {
        let dir = world.workdir(name, MAIN_TF);
        std::fs::write(dir.join(LOCK_FILE), &committed_lock).unwrap();
        dir
    };
    let image = checkout(&world, "image");
    world.get_modules(Terraform::V1_0_3, &image);
    ok(
        "tfinstall cache warm",
        &world.tfinstall(&image, &["cache", "warm", "."], Some(&cache)),
    );
    world.registry = None;

    for terraform in Terraform::ALL {
        let version = terraform.version();
        let job = checkout(&world, &format!("job-{version}"));
        world.get_modules(terraform, &job);
        ok(
            "tfinstall init with the registry down",
            &world.tfinstall(&job, &["init"], Some(&cache)),
        );
        let stdout = ok(
            &format!("the follow-up with Terraform {version}, registry down"),
            &world.follow_up(terraform, &job, Some(&cache)),
        );
        assert_eq!(read_text(&job.join(LOCK_FILE)), committed_lock, "{stdout}");
        assert!(installed(terraform, &job, "1.1.0").is_dir(), "{stdout}");
        assert!(module_installed(&job));

        let straight = checkout(&world, &format!("straight-{version}"));
        let stdout = ok(
            &format!("Terraform {version} straight after cache warm, registry down"),
            &world.follow_up(terraform, &straight, Some(&cache)),
        );
        assert_eq!(read_text(&straight.join(LOCK_FILE)), committed_lock);
        assert!(
            installed(terraform, &straight, "1.1.0").is_dir(),
            "{stdout}"
        );
        // Fresh from the checkout: the follow-up installed the module, with
        // the token from the user's credentials.tfrc.json.
        assert!(module_installed(&straight), "{stdout}");
    }
    let alone = checkout(&world, "alone");
    let output = world.terraform_alone(Terraform::V1_0_3, &alone);
    assert!(!output.status.success(), "the registry is not down");
}

/// A package that no longer matches the lock file fails the follow-up as
/// Terraform fails on it, with no request and no other version installed,
/// although the cache holds an acceptable one. Also without a cache, where
/// the working directory's own tree is handed over.
#[test]
fn a_package_that_no_longer_matches_the_lock_is_refused() {
    let world = World::new();
    let cache = world.path("cache");
    std::fs::create_dir_all(&cache).unwrap();
    // The lock pins 1.0.0 under "~> 1.0"; the cache also holds 1.1.0.
    let pinned = world.workdir("pinned", &main_tf_pinning("1.0.0"));
    ok(
        "init 1.0.0",
        &world.tfinstall(&pinned, &["init"], Some(&cache)),
    );
    std::fs::write(pinned.join("main.tf"), main_tf_pinning("~> 1.0")).unwrap();
    ok(
        "re-init ~> 1.0",
        &world.tfinstall(&pinned, &["init"], Some(&cache)),
    );
    let newer = world.workdir("newer", &main_tf_pinning("1.1.0"));
    ok(
        "init 1.1.0",
        &world.tfinstall(&newer, &["init"], Some(&cache)),
    );
    let lock = read_text(&pinned.join(LOCK_FILE));
    assert!(lock.contains("version     = \"1.0.0\""), "{lock}");
    tamper(
        &cache
            .join("registry.test/acme/alpha/1.0.0")
            .join(current_platform()),
    );

    let job = world.workdir("job", &main_tf_pinning("~> 1.0"));
    std::fs::write(job.join(LOCK_FILE), &lock).unwrap();
    world.provider_requests();
    let output = world.follow_up(Terraform::V1_0_3, &job, Some(&cache));
    assert!(
        !output.status.success(),
        "a tampered cache entry was accepted"
    );
    assert_eq!(world.provider_requests(), Vec::<String>::new());
    assert_eq!(read_text(&job.join(LOCK_FILE)), lock);
    assert!(!installed(Terraform::V1_0_3, &job, "1.1.0").exists());

    let own = world.workdir("own-tree", &main_tf_pinning("~> 1.0"));
    ok(
        "init without a cache",
        &world.tfinstall(&own, &["init"], None),
    );
    let lock = read_text(&own.join(LOCK_FILE));
    tamper(
        &own.join(".terraform/plugins/registry.test/acme/alpha/1.1.0")
            .join(current_platform()),
    );
    world.provider_requests();
    let output = world.follow_up(Terraform::V1_0_3, &own, None);
    assert!(!output.status.success(), "a tampered install was accepted");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("checksum")
            || stderr(&output).contains("checksum"),
        "{}",
        stderr(&output)
    );
    assert_eq!(world.provider_requests(), Vec::<String>::new());
    assert_eq!(read_text(&own.join(LOCK_FILE)), lock);
}

/// Appends a byte to the provider executable in package directory `dir`.
fn tamper(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let executable = dir.join("terraform-provider-alpha_v1");
    let executable = if executable.exists() {
        executable
    } else {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("terraform-provider-alpha")
            })
            .expect("the package has its executable")
    };
    let mut bytes = std::fs::read(&executable).unwrap();
    bytes.push(b'\n');
    // Cache files are read-only, and may be hard links other installs
    // share: replace the file rather than write through it.
    let _ = std::fs::remove_file(&executable);
    std::fs::write(&executable, bytes).unwrap();
    std::fs::set_permissions(&executable, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The user's filesystem mirror keeps serving the providers the lock file
/// does not have (a provider added to the configuration after `tfinstall
/// init`), and `-plugin-dir` keeps Terraform to those directories.
#[test]
fn the_users_mirrors_and_plugin_dirs_are_kept() {
    let world = World::new();
    let mirror = world.path("mirror");
    FsMirror::new()
        .provider(
            ProviderSpec::new("acme", "epsilon", "0.1.0").hostname("local.test"),
            Layout::Unpacked,
        )
        .provider(
            ProviderSpec::new("acme", "zeta", "2.0.0").hostname("local.test"),
            Layout::Packed,
        )
        .write(&mirror);
    let providers_url = world.registry().url_for("/v1/providers/");
    world.write_home(
        ".terraformrc",
        &format!(
            "{}provider_installation {{\n  filesystem_mirror {{\n    path    = \"{}\"\n    include = [\"local.test/*/*\"]\n  }}\n  direct {{\n    exclude = [\"local.test/*/*\"]\n  }}\n}}\n",
            host_block("registry.test", &providers_url),
            mirror.display()
        ),
    );
    let requires = |extra: &str| {
        format!(
            "terraform {{\n  required_providers {{\n    alpha = {{ source = \"registry.test/acme/alpha\" }}\n    epsilon = {{ source = \"local.test/acme/epsilon\" }}\n{extra}  }}\n}}\n"
        )
    };
    let dir = world.workdir("mirrors", &requires(""));
    ok("tfinstall init", &world.tfinstall(&dir, &["init"], None));
    std::fs::write(
        dir.join("main.tf"),
        requires("    zeta = { source = \"local.test/acme/zeta\" }\n"),
    )
    .unwrap();
    world.provider_requests();
    let stdout = ok(
        "the follow-up with a provider added",
        &world.follow_up(Terraform::V1_0_3, &dir, None),
    );
    assert_eq!(world.provider_requests(), Vec::<String>::new(), "{stdout}");
    assert!(
        dir.join(".terraform/providers/local.test/acme/zeta/2.0.0")
            .is_dir(),
        "{stdout}"
    );

    let with_plugin_dir = world.workdir(
        "plugin-dir",
        "terraform {\n  required_providers {\n    epsilon = { source = \"local.test/acme/epsilon\" }\n  }\n}\n",
    );
    let flag = format!("-plugin-dir={}", mirror.display());
    ok(
        "tfinstall init -plugin-dir",
        &world.tfinstall(&with_plugin_dir, &["init", &flag], None),
    );
    let path = Terraform::V1_0_3.path();
    let output = world.tfinstall(
        &with_plugin_dir,
        &[
            "exec",
            "--",
            path.to_str().unwrap(),
            "init",
            "-no-color",
            &flag,
        ],
        None,
    );
    ok("the follow-up with -plugin-dir", &output);
    assert!(
        stderr(&output).contains("with -plugin-dir Terraform reads only those directories"),
        "{}",
        stderr(&output)
    );
}

/// OpenTofu's names and layout, checked without a tofu binary: the command
/// `exec` runs copies the configuration it was handed. `~/.tofurc` is the
/// user's file (not `~/.terraformrc`), the hand-off offers
/// `.terraform/providers` with OpenTofu's registry host, the file is gone
/// when the command ends, and the command's exit status is tfinstall's.
#[test]
fn opentofu_mode_hands_over_its_own_files_and_layout() {
    let world = World::new();
    let providers_url = world.registry().url_for("/v1/providers/");
    world.write_home(
        ".tofurc",
        &format!(
            "{}credentials \"tofu.example\" {{\n  token = \"from-tofurc\"\n}}\n",
            host_block("registry.opentofu.org", &providers_url)
        ),
    );
    world.write_home(
        ".terraformrc",
        "credentials \"terraform.example\" {\n  token = \"from-terraformrc\"\n}\n",
    );
    let dir = world.workdir("tofu", "");
    std::fs::remove_file(dir.join("main.tf")).unwrap();
    std::fs::write(
        dir.join("main.tofu"),
        "terraform {\n  required_providers {\n    alpha = { source = \"acme/alpha\" }\n  }\n}\n",
    )
    .unwrap();
    ok(
        "tfinstall init (OpenTofu)",
        &world.tfinstall(&dir, &["init"], None),
    );
    assert!(
        dir.join(".terraform/providers/registry.opentofu.org/acme/alpha/1.1.0")
            .join(current_platform())
            .is_dir()
    );

    let script = "cp \"$TF_CLI_CONFIG_FILE\" handed.tfrc && echo \"$TF_CLI_CONFIG_FILE\" > handed-path && exit 3";
    let output = world.tfinstall(&dir, &["exec", "--", "/bin/sh", "-c", script], None);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let handed = read_text(&dir.join("handed.tfrc"));
    let handed_path = read_text(&dir.join("handed-path"));
    // On Linux an in-memory file, named by tfinstall's descriptor.
    assert!(
        handed_path.trim().ends_with("tofu.tfrc")
            || (cfg!(target_os = "linux") && handed_path.starts_with("/proc/")),
        "{handed_path}"
    );
    assert!(
        !Path::new(handed_path.trim()).exists(),
        "the hand-off file outlived the command"
    );
    let providers = std::path::absolute(dir.join(".terraform/providers")).unwrap();
    for expected in [
        format!("path = {:?}", providers.display().to_string()),
        "include = [\"registry.opentofu.org/acme/alpha\"]".to_string(),
        "exclude = [\"registry.opentofu.org/acme/alpha\"]".to_string(),
        "token = \"from-tofurc\"".to_string(),
        "host \"registry.opentofu.org\"".to_string(),
    ] {
        assert!(
            handed.contains(&expected),
            "{expected} missing from\n{handed}"
        );
    }
    assert!(!handed.contains("from-terraformrc"), "{handed}");
}

/// SIGTERM sent to tfinstall alone (as `docker stop` sends it) reaches the
/// command, tfinstall ends with the command's status and removes the
/// hand-off file.
#[test]
fn sigterm_is_passed_on_and_the_hand_off_file_removed() {
    let world = World::new();
    let dir = world.workdir("signal", &main_tf_pinning("1.1.0"));
    ok("tfinstall init", &world.tfinstall(&dir, &["init"], None));
    // Signalled as soon as the command runs: tfinstall must already be
    // listening then (a few rounds, since that moment is a race).
    for round in 0..3 {
        let handed_path = dir.join(format!("handed-path-{round}"));
        let script = format!(
            "trap 'exit 7' TERM; echo \"$TF_CLI_CONFIG_FILE\" > {}; i=0; while [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done",
            handed_path.display()
        );
        let mut command = tfinstall_command(&world.home());
        command
            .current_dir(&dir)
            .args(["exec", "--", "/bin/sh", "-c", &script]);
        // Bounded, and writing nowhere the test harness waits on, so that a
        // command orphaned by a failure cannot hold the test run up.
        let mut child = spawnable(&command)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn tfinstall exec");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !handed_path.exists() || read_text(&handed_path).is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "the command never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let handed = PathBuf::from(read_text(&handed_path).trim());
        assert!(handed.is_file());
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success());
        let status = child.wait().expect("wait for tfinstall");
        assert_eq!(status.code(), Some(7), "round {round}");
        assert!(!handed.exists(), "the hand-off file outlived the command");
    }
}

/// The token of the user configuration the kill tests hand over; it is in
/// no file below the test's `HOME` or `TMPDIR` unless the hand-off put it
/// there.
const KILL_TOKEN: &str = "token-that-must-not-outlive-tfinstall";

/// Every regular file below `root` whose bytes contain `needle`.
fn files_containing(root: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file()
                && std::fs::read(entry.path()).is_ok_and(|bytes| {
                    bytes
                        .windows(needle.len())
                        .any(|window| window == needle.as_bytes())
                })
            {
                found.push(entry.path());
            }
        }
    }
    found
}

/// The `tfinstall` command of the kill tests: this world's home, its own
/// `TMPDIR`, and the user's CLI configuration (with `KILL_TOKEN`) outside
/// both, so that any copy of the token found there is the hand-off's.
fn kill_test_command(world: &World, dir: &Path, tmp: &Path) -> assert_cmd::Command {
    let user_config = world.path("user-config/cli.tfrc");
    std::fs::create_dir_all(user_config.parent().unwrap()).unwrap();
    std::fs::write(
        &user_config,
        format!(
            "{}credentials \"modules.test\" {{\n  token = \"{KILL_TOKEN}\"\n}}\n",
            host_block("registry.test", &world.registry().url_for("/v1/providers/"))
        ),
    )
    .unwrap();
    std::fs::create_dir_all(tmp).unwrap();
    let mut command = tfinstall_command(&world.home());
    command
        .current_dir(dir)
        .env("TMPDIR", tmp)
        .env("TF_CLI_CONFIG_FILE", &user_config);
    command
}

/// `kill -9` of tfinstall while the command runs (a CI job's timeout, the
/// OOM killer) leaves no copy of the user's token in any file below
/// `TMPDIR` or the home directory (on Linux; elsewhere once the next `exec`
/// has run).
#[test]
fn kill_9_leaves_no_copy_of_the_token_on_disk() {
    let world = World::new();
    std::fs::remove_file(world.home().join(".terraform.d/credentials.tfrc.json")).unwrap();
    let dir = world.workdir("killed", &main_tf_pinning("1.1.0"));
    ok("tfinstall init", &world.tfinstall(&dir, &["init"], None));
    let tmp = world.path("tmp");
    let started = dir.join("started");
    // The command proves it was handed the token (without writing it
    // anywhere), says its pid, and waits to be killed (bounded, so that a
    // failure cannot leave it running for long).
    let script = format!(
        "grep -c '{KILL_TOKEN}' \"$TF_CLI_CONFIG_FILE\" > {found}; echo $$ > {started}; i=0; while [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done",
        found = dir.join("found").display(),
        started = started.display(),
    );
    let mut command = kill_test_command(&world, &dir, &tmp);
    command.args(["exec", "--", "/bin/sh", "-c", &script]);
    let mut child = spawnable(&command)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn tfinstall exec");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !started.exists() || read_text(&started).trim().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().expect("kill -9 tfinstall");
    child.wait().expect("wait for tfinstall");
    let command_pid = read_text(&started).trim().to_string();
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &command_pid])
        .status();
    assert_eq!(
        read_text(&dir.join("found")).trim(),
        "1",
        "the command was not handed the user's token"
    );
    if !cfg!(target_os = "linux") {
        // The file hand-off stays until the next exec removes it.
        let output = kill_test_command(&world, &dir, &tmp)
            .args(["exec", "--", "/bin/sh", "-c", "exit 0"])
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
    }
    for root in [&tmp, &world.home()] {
        assert_eq!(
            files_containing(root, KILL_TOKEN),
            Vec::<PathBuf>::new(),
            "a copy of the token outlived tfinstall below {}",
            root.display()
        );
    }
}

/// A hand-off directory as the file fallback writes it (where no in-memory
/// file can be handed over), for process `pid`: its configuration, with the
/// token, and its lock file.
fn leftover_hand_off(tmp: &Path, pid: u32, suffix: &str) -> PathBuf {
    let dir = tmp.join(format!("tfinstall-handoff-{pid}-{suffix}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("terraform.tfrc"),
        format!("credentials \"modules.test\" {{\n  token = \"{KILL_TOKEN}\"\n}}\n"),
    )
    .unwrap();
    std::fs::write(dir.join("lock"), "").unwrap();
    dir
}

/// A pid no process has any more: a child's, after it ended.
fn ended_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// Where the hand-off is written to a file, a `kill -9` leaves it behind:
/// the next `exec`, and `cache prune`, remove the directories of processes
/// that no longer run and keep those of running ones.
#[test]
fn the_next_exec_and_cache_prune_remove_hand_off_files_left_by_killed_runs() {
    let world = World::new();
    let dir = world.workdir("leftovers", &main_tf_pinning("1.1.0"));
    ok("tfinstall init", &world.tfinstall(&dir, &["init"], None));
    let tmp = world.path("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let killed = leftover_hand_off(&tmp, ended_pid(), "Ab3xYz");
    // A running process's: this test's, holding its lock as a running
    // tfinstall does.
    let running = leftover_hand_off(&tmp, std::process::id(), "Qw9rTy");
    let held = std::fs::File::open(running.join("lock")).unwrap();
    held.lock().unwrap();
    let unrelated = tmp.join("tfinstall-handoff-notes");
    std::fs::create_dir_all(&unrelated).unwrap();

    let output = kill_test_command(&world, &dir, &tmp)
        .args(["exec", "--", "/bin/sh", "-c", "exit 0"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!killed.exists(), "the killed run's hand-off was kept");
    assert!(running.is_dir(), "a running process's hand-off was removed");
    assert!(unrelated.is_dir());

    let killed = leftover_hand_off(&tmp, ended_pid(), "Zx8cVb");
    let cache = world.path("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let output = kill_test_command(&world, &dir, &tmp)
        .env("TF_PLUGIN_CACHE_DIR", &cache)
        .args(["cache", "prune", "-unused-for=3650d"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        !killed.exists(),
        "cache prune kept the killed run's hand-off"
    );
    assert!(running.is_dir(), "cache prune removed a running hand-off");
    drop(held);
}
