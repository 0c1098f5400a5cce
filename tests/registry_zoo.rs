//! The registry zoo: every document shape in `testdata/registry-zoo/`
//! (captured from real registry implementations, or synthesized for one rule
//! of Go's decoder each; every shape's `about.md` says which) is served to
//! real Terraform 1.0.3 and to tfinstall side by side, and Terraform decides
//! what must happen:
//! - Terraform installs: tfinstall installs the same packages into the same
//!   tree and writes the same lock file bytes;
//! - Terraform fails: tfinstall fails with an error and installs nothing;
//! - where tfinstall is deliberately better ([`Expect`]), the test checks
//!   that Terraform still behaves as described, so the claim cannot rot.
//!
//! A registry is reached through service discovery on `localhost:PORT`, so
//! the discovery document's shape counts too; a shape with an `index.json`
//! is a network mirror's instead.

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

use support::terraform::Terraform;
use support::*;

const VERSIONS: [&str; 3] = ["1.0.0", "1.1.0", "2.0.0"];
const PLATFORMS: [&str; 3] = ["linux_amd64", "darwin_arm64", "windows_amd64"];
/// What `~> 1.0` selects from [`VERSIONS`].
const SELECTED: &str = "1.1.0";

#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Whatever Terraform does.
    AsTerraform,
    /// Whatever Terraform does, and tfinstall warns about what it skipped
    /// where Terraform is silent.
    AsTerraformWarning(&'static str),
    /// Terraform refuses the version list over one bad entry; tfinstall
    /// installs from the others and prints this warning.
    InstallsWhereTerraformRefuses(&'static str),
    /// Terraform crashes on a document that means something clear;
    /// tfinstall installs what the document says.
    InstallsWhereTerraformCrashes,
}

macro_rules! zoo {
    ($($test:ident: $dir:literal => $expect:expr,)*) => {
        const SHAPES: &[&str] = &[$($dir),*];
        $(
            #[test]
            fn $test() {
                check_shape($dir, $expect);
            }
        )*
    };
}

zoo! {
    public_registry: "public-registry" => Expect::AsTerraform,
    opentofu_registry: "opentofu-registry" => Expect::AsTerraform,
    opentofu_registry_unsigned: "opentofu-registry-unsigned" => Expect::AsTerraform,
    tfe_private: "tfe-private" => Expect::AsTerraform,
    boring_registry: "boring-registry" => Expect::AsTerraform,
    terralist: "terralist" => Expect::AsTerraform,
    citizen: "citizen" => Expect::AsTerraform,
    tapir: "tapir" => Expect::AsTerraform,
    terrakube: "terrakube" => Expect::AsTerraform,
    nrkno_terraform_registry: "nrkno-terraform-registry" => Expect::AsTerraform,
    tf_registry_rust: "tf-registry-rust" => Expect::AsTerraform,
    null_warnings: "null-warnings" => Expect::AsTerraform,
    null_version_protocols: "null-version-protocols" => Expect::AsTerraform,
    null_download_protocols: "null-download-protocols" => Expect::AsTerraform,
    null_key_fields: "null-key-fields" => Expect::AsTerraform,
    capitalised_keys: "capitalised-keys" => Expect::AsTerraform,
    extra_keys: "extra-keys" => Expect::AsTerraform,
    absent_optional_keys: "absent-optional-keys" => Expect::AsTerraform,
    null_platforms: "null-platforms" => Expect::AsTerraform,
    null_versions: "null-versions" => Expect::AsTerraform,
    unsorted_duplicated_versions: "unsorted-duplicated-versions" => Expect::AsTerraform,
    sums_crlf_uppercase: "sums-crlf-uppercase" => Expect::AsTerraform,
    sums_binary_marker: "sums-binary-marker" => Expect::AsTerraform,
    mirror_providers_mirror: "mirror-providers-mirror" => Expect::AsTerraform,
    mirror_go_nil: "mirror-go-nil" => Expect::AsTerraform,
    mirror_capitalised_keys: "mirror-capitalised-keys" => Expect::AsTerraform,
    mirror_extra_keys: "mirror-extra-keys" => Expect::AsTerraform,
    mirror_invalid_version: "mirror-invalid-version" => Expect::AsTerraformWarning(
        "lists version \"latest\" for registry.test/acme/alpha"
    ),
    malformed_version: "malformed-version" => Expect::InstallsWhereTerraformRefuses(
        "lists version \"v1.2\" for localhost"
    ),
    sums_blank_and_stray_lines: "sums-blank-and-stray-lines" => Expect::InstallsWhereTerraformCrashes,
}

#[test]
fn every_shape_in_the_zoo_is_tested() {
    let mut dirs: Vec<String> = std::fs::read_dir(zoo_dir())
        .expect("read the zoo")
        .map(|entry| entry.expect("zoo entry"))
        .filter(|entry| entry.path().is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    let mut tested: Vec<&str> = SHAPES.to_vec();
    tested.sort();
    assert_eq!(dirs, tested);
    for dir in dirs {
        assert!(
            zoo_dir().join(&dir).join("about.md").is_file(),
            "{dir} says where its shape comes from"
        );
    }
}

fn zoo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/registry-zoo")
}

fn check_shape(name: &str, expect: Expect) {
    if current_platform() != "linux_amd64" {
        eprintln!("skipped: the real Terraform fetched for comparison runs on linux_amd64 only");
        return;
    }
    let zoo = Zoo::new(name);
    let theirs = zoo.workdir("terraform");
    let ours = zoo.workdir("tfinstall");
    let their_run = zoo.terraform_init(&theirs);
    let our_run = zoo.tfinstall_init(&ours);
    let (their_out, our_out) = (described(&their_run), described(&our_run));
    let crashed = text(&their_run.stderr).contains("panic:");

    match expect {
        Expect::AsTerraform | Expect::AsTerraformWarning(_) => {
            if let Expect::AsTerraformWarning(warning) = expect {
                assert!(
                    text(&our_run.stdout).contains(warning),
                    "{name}:\n{our_out}"
                );
            }
            assert!(!crashed, "{name}: Terraform crashed:\n{their_out}");
            if their_run.status.success() {
                assert!(
                    our_run.status.success(),
                    "{name}: Terraform installs, tfinstall fails:\n{our_out}\nTerraform:\n{their_out}"
                );
                assert_eq!(
                    installed_lines(&our_run),
                    installed_lines(&their_run),
                    "{name}: installed packages differ"
                );
                data_tree(&theirs)
                    .assert_same(&data_tree(&ours), &format!("{name}: .terraform trees"));
                assert_eq!(
                    read_text(&ours.join(LOCK_FILE)),
                    read_text(&theirs.join(LOCK_FILE)),
                    "{name}: lock files of tfinstall (left) and Terraform (right) differ"
                );
            } else {
                assert_eq!(
                    our_run.status.code(),
                    Some(1),
                    "{name}: Terraform fails, tfinstall does not:\n{our_out}\nTerraform:\n{their_out}"
                );
                assert!(
                    text(&our_run.stderr).contains("Error: "),
                    "{name}:\n{our_out}"
                );
                assert_installed_nothing(&ours, name);
            }
        }
        Expect::InstallsWhereTerraformRefuses(warning) => {
            assert!(
                !their_run.status.success() && !crashed,
                "{name}: Terraform no longer refuses this shape:\n{their_out}"
            );
            assert!(our_run.status.success(), "{name}:\n{our_out}");
            assert!(
                text(&our_run.stdout).contains(warning),
                "{name}:\n{our_out}"
            );
            zoo.assert_installed_selected(&ours);
        }
        Expect::InstallsWhereTerraformCrashes => {
            assert!(crashed, "{name}: Terraform no longer crashes:\n{their_out}");
            assert!(our_run.status.success(), "{name}:\n{our_out}");
            zoo.assert_installed_selected(&ours);
        }
    }
}

/// One shape served from its own HTTPS server: `acme/alpha` in every
/// version of [`VERSIONS`] for every platform of [`PLATFORMS`], with the
/// shape's documents in place of the tidy ones.
struct Zoo {
    tmp: tempfile::TempDir,
    ca: TestCa,
    /// Serves the shape for as long as the zoo lives.
    _server: TestServer,
    tree: PublishedTree,
    cli_config: PathBuf,
    /// The hostname in the provider's source address.
    source_host: String,
}

impl Zoo {
    fn new(name: &str) -> Zoo {
        let shape = zoo_dir().join(name);
        let tmp = tempfile::tempdir().expect("temp dir");
        let ca = TestCa::new();
        let server = TestServer::https(&ca);
        let site = tmp.path().join("site");
        let is_mirror = shape.join("index.json").exists();
        let source_host = if is_mirror {
            "registry.test".to_owned()
        } else {
            server.localhost_host()
        };
        let specs = VERSIONS.map(|version| {
            ProviderSpec::new("acme", "alpha", version)
                .hostname(&source_host)
                .platforms(&PLATFORMS)
                .protocols(&["5.0"])
        });
        let (tree, cli_config) = if is_mirror {
            let mirror_url = server.url();
            let mirror = specs.into_iter().fold(
                NetworkMirror::new().url_style(UrlStyle::PathRelative),
                NetworkMirror::provider,
            );
            let tree = mirror.write(&site, &mirror_url);
            apply_mirror_shape(&shape, &site);
            (tree, network_mirror_config(&mirror_url))
        } else {
            let key = PgpKey::generate_ecdsa();
            let registry = specs
                .into_iter()
                .fold(Registry::new(&key), Registry::provider);
            let tree = registry.write(&site, &server.url());
            apply_registry_shape(&shape, &site, &key);
            (tree, String::new())
        };
        server.serve_dir(&site);
        std::fs::create_dir_all(tmp.path().join("home")).expect("create home");
        let cli_config_path = tmp.path().join("cli.tfrc");
        std::fs::write(&cli_config_path, cli_config).expect("write CLI config");
        Zoo {
            tmp,
            ca,
            _server: server,
            tree,
            cli_config: cli_config_path,
            source_host,
        }
    }

    fn workdir(&self, name: &str) -> PathBuf {
        let dir = self.tmp.path().join(name);
        std::fs::create_dir_all(&dir).expect("create work dir");
        let main_tf = format!(
            "terraform {{\n  required_providers {{\n    alpha = {{\n      source  = \"{}/acme/alpha\"\n      version = \"~> 1.0\"\n    }}\n  }}\n}}\n",
            self.source_host
        );
        std::fs::write(dir.join("main.tf"), main_tf).expect("write main.tf");
        dir
    }

    fn terraform_init(&self, dir: &Path) -> Output {
        Terraform::V1_0_3
            .command(
                &self.tmp.path().join("home"),
                &self.cli_config,
                Some(&self.ca),
            )
            .current_dir(dir)
            .args(["init", "-no-color", "-input=false"])
            .output()
            .expect("run terraform")
    }

    fn tfinstall_init(&self, dir: &Path) -> Output {
        let mut command = tfinstall_command(&self.tmp.path().join("home"));
        self.ca.configure(&mut command);
        command
            .current_dir(dir)
            .env("TF_CLI_CONFIG_FILE", &self.cli_config)
            .args(["init", "-no-color", "-layout", "providers"])
            .output()
            .expect("run tfinstall")
    }

    /// The selected version is installed, and the lock file vouches for
    /// every platform of it through the signed checksums, and for nothing
    /// else.
    fn assert_installed_selected(&self, dir: &Path) {
        let lock = read_text(&dir.join(LOCK_FILE));
        assert!(
            lock.contains(&format!("version     = \"{SELECTED}\"")),
            "{lock}"
        );
        for platform in PLATFORMS {
            let package = self.tree.package("alpha", SELECTED, platform);
            let zh = package.zh.as_deref().expect("registry packages have zh");
            assert!(lock.contains(zh), "no {zh} for {platform} in:\n{lock}");
        }
        assert_eq!(lock.matches("\"zh:").count(), PLATFORMS.len(), "{lock}");
        let current = self.tree.package("alpha", SELECTED, &current_platform());
        assert!(lock.contains(&current.h1), "{lock}");
        assert!(
            dir.join(format!(
                ".terraform/providers/{}/acme/alpha/{SELECTED}/{}",
                self.source_host,
                current_platform()
            ))
            .is_dir()
        );
    }
}

/// Replaces the tidy documents `Registry::write` put in `site` with the
/// shape's templates, filled in with the values of the tidy ones; a
/// `SHA256SUMS` template is filled in with the tidy lines and signed again.
fn apply_registry_shape(shape: &Path, site: &Path, key: &PgpKey) {
    let template = |file: &str| std::fs::read_to_string(shape.join(file)).ok();
    if let Some(versions) = template("versions.json") {
        std::fs::write(
            site.join(Registry::versions_path("acme", "alpha")),
            versions,
        )
        .expect("write versions");
    }
    if let Some(discovery) = template("discovery.json") {
        let path = site.join(".well-known/terraform.json");
        let tidy: serde_json::Value = serde_json::from_str(&read_text(&path)).unwrap();
        let filled = fill(&discovery, &[("PROVIDERS_V1", &tidy["providers.v1"])]);
        std::fs::write(path, filled).expect("write discovery");
    }
    for version in VERSIONS {
        if let Some(download) = template("download.json") {
            for platform in PLATFORMS {
                let path = site.join(Registry::download_path("acme", "alpha", version, platform));
                let tidy: serde_json::Value = serde_json::from_str(&read_text(&path)).unwrap();
                let key = &tidy["signing_keys"]["gpg_public_keys"][0];
                let filled = fill(
                    &download,
                    &[
                        ("VERSION", &serde_json::json!(version)),
                        ("OS", &tidy["os"]),
                        ("ARCH", &tidy["arch"]),
                        ("FILENAME", &tidy["filename"]),
                        ("DOWNLOAD_URL", &tidy["download_url"]),
                        ("SHASUMS_URL", &tidy["shasums_url"]),
                        ("SHASUMS_SIGNATURE_URL", &tidy["shasums_signature_url"]),
                        ("SHASUM", &tidy["shasum"]),
                        ("KEY_ID", &key["key_id"]),
                        ("ASCII_ARMOR", &key["ascii_armor"]),
                    ],
                );
                std::fs::write(path, filled).expect("write download document");
            }
        }
        if let Some(sums_template) = template("SHA256SUMS") {
            let spec = ProviderSpec::new("acme", "alpha", version);
            let path = site
                .join(Registry::files_path("acme", "alpha", version))
                .join(spec.sums_filename());
            let tidy = read_text(&path);
            let lines = || {
                tidy.lines()
                    .map(|line| line.split_once("  ").expect("sums line"))
            };
            let crlf_upper: String = lines()
                .map(|(hex, name)| format!("{}  {name}\r\n", hex.to_uppercase()))
                .collect();
            let star: String = lines()
                .map(|(hex, name)| format!("{hex} *{name}\n"))
                .collect();
            let sums = sums_template
                .replace("{{SUMS}}", tidy.trim_end())
                .replace("{{SUMS_CRLF_UPPER}}", &crlf_upper)
                .replace("{{SUMS_STAR}}", &star);
            std::fs::write(&path, &sums).expect("write SHA256SUMS");
            let mut signature = path.clone().into_os_string();
            signature.push(".sig");
            std::fs::write(signature, key.sign_detached(sums.as_bytes())).expect("sign");
        }
    }
}

/// Replaces the tidy `index.json` and `VERSION.json` documents
/// `NetworkMirror::write` put in `site` with the shape's templates;
/// `version.json` is filled in per version with each platform's archive
/// URL and hashes (`{{URL_OS_ARCH}}`, `{{H1_OS_ARCH}}`, `{{ZH_OS_ARCH}}`).
fn apply_mirror_shape(shape: &Path, site: &Path) {
    let provider_dir = site.join(NetworkMirror::provider_path(
        "registry.test",
        "acme",
        "alpha",
    ));
    let index = std::fs::read_to_string(shape.join("index.json")).expect("read index.json");
    std::fs::write(provider_dir.join("index.json"), index).expect("write index.json");
    let Ok(template) = std::fs::read_to_string(shape.join("version.json")) else {
        return;
    };
    for version in VERSIONS {
        let path = provider_dir.join(format!("{version}.json"));
        let tidy: serde_json::Value = serde_json::from_str(&read_text(&path)).unwrap();
        let mut values = vec![("VERSION".to_owned(), serde_json::json!(version))];
        for platform in PLATFORMS {
            let archive = &tidy["archives"][platform];
            let hashes = archive["hashes"].as_array().expect("tidy hashes");
            let hash = |scheme: &str| {
                hashes
                    .iter()
                    .find(|h| h.as_str().is_some_and(|h| h.starts_with(scheme)))
                    .cloned()
                    .expect("tidy mirrors list h1: and zh:")
            };
            values.push((format!("URL_{platform}"), archive["url"].clone()));
            values.push((format!("H1_{platform}"), hash("h1:")));
            values.push((format!("ZH_{platform}"), hash("zh:")));
        }
        let values: Vec<(&str, &serde_json::Value)> = values
            .iter()
            .map(|(name, value)| (name.as_str(), value))
            .collect();
        std::fs::write(path, fill(&template, &values)).expect("write VERSION.json");
    }
}

/// `template` with each `{{NAME}}` (which stands inside a JSON string)
/// replaced by the JSON-escaped text of its value.
fn fill(template: &str, values: &[(&str, &serde_json::Value)]) -> String {
    let mut text = template.to_owned();
    for (name, value) in values {
        let value = value
            .as_str()
            .unwrap_or_else(|| panic!("{name} is {value}"));
        let quoted = serde_json::to_string(value).unwrap();
        text = text.replace(&format!("{{{{{name}}}}}"), &quoted[1..quoted.len() - 1]);
    }
    assert!(!text.contains("{{"), "a placeholder is left in:\n{text}");
    text
}

fn assert_installed_nothing(dir: &Path, name: &str) {
    assert!(
        !dir.join(LOCK_FILE).exists(),
        "{name}: a lock file was written"
    );
    assert!(
        !dir.join(".terraform/providers").exists(),
        "{name}: something was installed"
    );
}

/// The data directory less tfinstall's own files (Terraform ignores files
/// it does not know there).
fn data_tree(dir: &Path) -> Snapshot {
    let mut tree = Snapshot::resolved(&dir.join(".terraform"));
    tree.entries
        .retain(|path, _| !TFINSTALL_DATA_FILES.contains(&path.as_str()));
    tree
}

fn installed_lines(run: &Output) -> Vec<String> {
    let mut lines: Vec<String> = text(&run.stdout)
        .lines()
        .filter(|line| line.starts_with("- Installed "))
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn described(run: &Output) -> String {
    format!(
        "({})\n{}\n{}",
        run.status,
        text(&run.stdout),
        text(&run.stderr)
    )
}
