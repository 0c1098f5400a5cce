//! `init -json` as a drop-in for Terraform's (issue 22): a reader written
//! for `terraform init -json` must find everything it knows in tfinstall's
//! stream. Each scenario below was run with real Terraform 1.11.4 and its
//! stream recorded in `testdata/terraform-json/` (see the README there);
//! the tests run tfinstall on the same scenario and hold its stream to the
//! recording, event by event:
//!
//! * every event of the provider half of Terraform's `init` has a
//!   counterpart with the same `type`, `message_code`, `@message` and
//!   `@level` and `@module`; tfinstall adds no other event of those types;
//! * the events that are about no one provider (headings, lock-file notes,
//!   diagnostics, the result) come in Terraform's order;
//! * each provider's events come in Terraform's order, and between the same
//!   run-wide events as in Terraform's stream;
//! * the exit status is Terraform's.
//!
//! The recordings are refreshed with real Terraform on PATH by
//! `cargo test --test terraform_json -- --ignored`; the tests themselves need
//! no Terraform.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::tls::trust_only;
use support::{
    HostedRegistry, Pkg, ProviderSpec, filesystem_mirror_config, required_providers,
    validated_stream,
};

/// Where the recordings live, below the repository.
const RECORDINGS: &str = "testdata/terraform-json";

/// The release the recordings were made with.
const TERRAFORM_VERSION: &str = "1.11.4";

/// Terraform's `init_output` codes for the parts of `init` tfinstall does
/// not do (backend, modules) or does not claim (that every Terraform command
/// now works, which needs the backend and modules too).
const NOT_PROVIDER_HALF: [&str; 3] = [
    "initializing_backend_message",
    "initializing_modules_message",
    "output_init_success_cli_message",
];

/// The types that have a Terraform counterpart; tfinstall's other types
/// (`selected`, `verified`, `download_progress`, `summary`, …) are its own.
const TERRAFORM_TYPES: [&str; 3] = ["init_output", "log", "diagnostic"];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Tool {
    Terraform,
    Tfinstall,
}

/// One scenario's world: a home directory, working directories, a
/// filesystem mirror, the CLI configuration, and a registry if it needs one.
struct Bench {
    tool: Tool,
    _tmp: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    mirror: PathBuf,
    cli_config: PathBuf,
    registry: Option<HostedRegistry>,
}

/// What one `init -json` printed, normalized (see [`Bench::normalize`]).
struct Recorded {
    code: Option<i32>,
    stream: Vec<Value>,
}

impl Bench {
    fn new(tool: Tool) -> Bench {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let home = root.join("home");
        let mirror = root.join("mirror");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&mirror).unwrap();
        let cli_config = home.join("cli.tfrc");
        std::fs::write(&cli_config, "").unwrap();
        Bench {
            tool,
            _tmp: tmp,
            root,
            home,
            mirror,
            cli_config,
            registry: None,
        }
    }

    /// A working directory `name` whose `main.tf` requires `providers`
    /// (none: an empty directory).
    fn work(&self, name: &str, providers: &[(&str, &str, &str)]) -> PathBuf {
        let dir = self.root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        if !providers.is_empty() {
            std::fs::write(dir.join("main.tf"), required_providers(providers)).unwrap();
        }
        dir
    }

    /// Puts Terraform's fake package of `source` `version` in the mirror.
    fn publish(&self, source: &str, version: &str) {
        Pkg::fake(source, version).write_packed(&self.mirror);
    }

    fn mirror_arg(&self) -> String {
        format!("-plugin-dir={}", self.mirror.display())
    }

    fn set_cli_config(&self, text: &str) {
        std::fs::write(&self.cli_config, text).unwrap();
    }

    /// `init -json ARGS…` in `dir` with this bench's tool.
    fn init(&self, dir: &Path, args: &[&str]) -> Recorded {
        let output = match self.tool {
            Tool::Terraform => {
                let mut command = Command::new("terraform");
                command
                    .env_clear()
                    .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                    .env("HOME", &self.home)
                    .env("TF_CLI_CONFIG_FILE", &self.cli_config)
                    .env("CHECKPOINT_DISABLE", "1");
                if let Some(registry) = &self.registry {
                    command.env("SSL_CERT_FILE", registry.ca.ca_pem_path());
                }
                command
                    .current_dir(dir)
                    .args(["init", "-json"])
                    .args(args)
                    .output()
                    .unwrap()
            }
            Tool::Tfinstall => {
                let mut command = support::tfinstall_command(&self.home);
                command.env("TF_CLI_CONFIG_FILE", &self.cli_config);
                if let Some(registry) = &self.registry {
                    trust_only(&mut command, &registry.ca.ca_pem_path());
                }
                command
                    .current_dir(dir)
                    .args(["init", "-json"])
                    .args(args)
                    .output()
                    .unwrap()
            }
        };
        let stream = match self.tool {
            Tool::Tfinstall => {
                assert!(
                    output.stderr.is_empty(),
                    "{}",
                    String::from_utf8_lossy(&output.stderr)
                );
                validated_stream(&output.stdout)
            }
            Tool::Terraform => String::from_utf8(output.stdout)
                .unwrap()
                .lines()
                .map(|line| serde_json::from_str(line).unwrap())
                .collect(),
        };
        Recorded {
            code: output.status.code(),
            stream: stream.into_iter().map(|m| self.normalize(m)).collect(),
        }
    }

    /// What differs from run to run leaves the stream: timestamps go, and the
    /// temp root, the registry's host and its signing key's ID read `ROOT`,
    /// `HOST` and `KEY_ID`.
    fn normalize(&self, mut message: Value) -> Value {
        if let Some(object) = message.as_object_mut() {
            object.remove("@timestamp");
        }
        let mut replacements = vec![(self.root.display().to_string(), "ROOT".to_owned())];
        if let Some(registry) = &self.registry {
            replacements.push((registry.server.localhost_host(), "HOST".to_owned()));
            replacements.push((registry.key.key_id(), "KEY_ID".to_owned()));
        }
        replace_strings(&mut message, &replacements);
        message
    }
}

fn replace_strings(value: &mut Value, replacements: &[(String, String)]) {
    match value {
        Value::String(text) => {
            for (from, to) in replacements {
                if text.contains(from.as_str()) {
                    *text = text.replace(from.as_str(), to);
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| replace_strings(item, replacements)),
        Value::Object(fields) => fields
            .values_mut()
            .for_each(|field| replace_strings(field, replacements)),
        _ => {}
    }
}

/// The providers of the mirror scenarios, as Terraform's messages name them.
const MIRROR_PROVIDERS: [&str; 4] = [
    "hashicorp/alpha",
    "hashicorp/beta",
    "example/gamma",
    "terraform.io/builtin/terraform",
];

/// `alpha` with a constraint two versions meet, `beta` with none, `gamma`
/// pinned, and the built-in provider.
const MIRROR_REQUIREMENTS: [(&str, &str, &str); 4] = [
    ("alpha", "hashicorp/alpha", "~> 1.0"),
    ("beta", "hashicorp/beta", ""),
    ("gamma", "example/gamma", "0.3.0"),
    ("terraform", "terraform.io/builtin/terraform", ""),
];

fn publish_mirror(bench: &Bench) {
    for (source, version) in [
        ("hashicorp/alpha", "1.0.0"),
        ("hashicorp/alpha", "1.1.0"),
        ("hashicorp/beta", "2.1.0"),
        ("example/gamma", "0.3.0"),
    ] {
        bench.publish(source, version);
    }
}

/// A first install from `-plugin-dir`: no lock file, nothing installed.
fn fresh_install(bench: &mut Bench) -> Recorded {
    publish_mirror(bench);
    let work = bench.work("work", &MIRROR_REQUIREMENTS);
    bench.init(&work, &[&bench.mirror_arg()])
}

/// The lock file is there, `.terraform` is not: the locked versions are
/// installed again.
fn locked_reinstall(bench: &mut Bench) -> Recorded {
    publish_mirror(bench);
    let work = bench.work("work", &MIRROR_REQUIREMENTS);
    assert_eq!(bench.init(&work, &[&bench.mirror_arg()]).code, Some(0));
    std::fs::remove_dir_all(work.join(".terraform")).unwrap();
    bench.init(&work, &[&bench.mirror_arg()])
}

/// Everything is installed as locked: nothing to do.
fn already_installed(bench: &mut Bench) -> Recorded {
    publish_mirror(bench);
    let work = bench.work("work", &MIRROR_REQUIREMENTS);
    assert_eq!(bench.init(&work, &[&bench.mirror_arg()]).code, Some(0));
    bench.init(&work, &[&bench.mirror_arg()])
}

/// `-upgrade` after a newer version appeared: the lock file changes.
fn upgrade(bench: &mut Bench) -> Recorded {
    bench.publish("hashicorp/alpha", "1.0.0");
    bench.publish("hashicorp/beta", "2.1.0");
    let work = bench.work(
        "work",
        &[
            ("alpha", "hashicorp/alpha", "~> 1.0"),
            ("beta", "hashicorp/beta", ""),
        ],
    );
    assert_eq!(bench.init(&work, &[&bench.mirror_arg()]).code, Some(0));
    bench.publish("hashicorp/alpha", "1.1.0");
    bench.init(&work, &[&bench.mirror_arg(), "-upgrade"])
}

/// A second working directory with the first one's lock file installs
/// from the plugin cache the first one filled (a filesystem mirror in the
/// CLI configuration, since `-plugin-dir` bypasses the cache).
fn plugin_cache(bench: &mut Bench) -> Recorded {
    publish_mirror(bench);
    let cache = bench.root.join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    bench.set_cli_config(&format!(
        "{}plugin_cache_dir = \"{}\"\n",
        filesystem_mirror_config(&bench.mirror),
        cache.display()
    ));
    let first = bench.work("first", &MIRROR_REQUIREMENTS);
    assert_eq!(bench.init(&first, &[]).code, Some(0));
    let second = bench.work("second", &MIRROR_REQUIREMENTS);
    std::fs::copy(
        first.join(".terraform.lock.hcl"),
        second.join(".terraform.lock.hcl"),
    )
    .unwrap();
    bench.init(&second, &[])
}

/// No version meets the constraint: an error, exit 1.
fn no_matching_version(bench: &mut Bench) -> Recorded {
    publish_mirror(bench);
    let work = bench.work(
        "work",
        &[
            ("alpha", "hashicorp/alpha", "~> 7.0"),
            ("beta", "hashicorp/beta", ""),
        ],
    );
    bench.init(&work, &[&bench.mirror_arg()])
}

/// No configuration at all.
fn empty_directory(bench: &mut Bench) -> Recorded {
    let work = bench.work("work", &[]);
    bench.init(&work, &[])
}

/// A registry over HTTPS whose packages are signed by a key that is not
/// HashiCorp's: "self-signed", with the key ID, and the note on partner and
/// community providers.
fn registry_self_signed(bench: &mut Bench) -> Recorded {
    let registry = HostedRegistry::new(|registry| {
        registry
            .provider(ProviderSpec::new("test", "alpha", "1.0.0"))
            .provider(ProviderSpec::new("test", "beta", "2.1.0"))
    });
    let host = registry.server.localhost_host();
    bench.registry = Some(registry);
    let work = bench.work(
        "work",
        &[
            ("alpha", &format!("{host}/test/alpha"), "~> 1.0"),
            ("beta", &format!("{host}/test/beta"), ""),
        ],
    );
    bench.init(&work, &[])
}

struct Scenario {
    name: &'static str,
    run: fn(&mut Bench) -> Recorded,
    /// How the scenario's messages name its providers.
    providers: &'static [&'static str],
    /// The `@message`s of Terraform's events that tfinstall deliberately
    /// does not write, each list with its reason in `docs/json-output.md`.
    terraform_only: &'static [&'static str],
}

const SCENARIOS: [Scenario; 8] = [
    Scenario {
        name: "fresh_install",
        run: fresh_install,
        providers: &MIRROR_PROVIDERS,
        terraform_only: &[],
    },
    Scenario {
        name: "locked_reinstall",
        run: locked_reinstall,
        providers: &MIRROR_PROVIDERS,
        terraform_only: &[],
    },
    Scenario {
        name: "already_installed",
        run: already_installed,
        providers: &MIRROR_PROVIDERS,
        terraform_only: &[],
    },
    Scenario {
        name: "upgrade",
        run: upgrade,
        providers: &MIRROR_PROVIDERS,
        terraform_only: &[],
    },
    Scenario {
        name: "plugin_cache",
        run: plugin_cache,
        providers: &MIRROR_PROVIDERS,
        terraform_only: &[],
    },
    Scenario {
        name: "no_matching_version",
        run: no_matching_version,
        providers: &MIRROR_PROVIDERS,
        // Terraform goes on to install the providers it could select, and
        // keeps them; tfinstall fetches nothing once a selection failed,
        // since a failed run keeps nothing.
        terraform_only: &[
            "Installing provider version: hashicorp/beta v2.1.0...",
            "Installed provider version: hashicorp/beta v2.1.0 (unauthenticated)",
        ],
    },
    Scenario {
        name: "empty_directory",
        run: empty_directory,
        providers: &[],
        terraform_only: &[],
    },
    Scenario {
        name: "registry_self_signed",
        run: registry_self_signed,
        providers: &["HOST/test/alpha", "HOST/test/beta"],
        terraform_only: &[],
    },
];

fn recording_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(RECORDINGS)
        .join(format!("{name}.jsonl"))
}

/// A recording: the exit status, then the stream.
fn read_recording(name: &str) -> Recorded {
    let path = recording_path(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("reading {}: {err}", path.display()));
    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    Recorded {
        code: header["exit_status"].as_i64().map(|code| code as i32),
        stream: lines
            .map(|line| serde_json::from_str(line).unwrap())
            .collect(),
    }
}

/// What a reader of Terraform's stream looks at in one event.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    kind: String,
    code: String,
    level: String,
    module: String,
    message: String,
}

fn key(message: &Value) -> Key {
    let text = |field: &str| message[field].as_str().unwrap_or_default().to_owned();
    Key {
        kind: text("type"),
        code: text("message_code"),
        level: text("@level"),
        module: text("@module"),
        message: text("@message"),
    }
}

/// The events of a stream that Terraform's provider half has counterparts
/// for, in order.
fn comparable(stream: &[Value]) -> Vec<&Value> {
    stream
        .iter()
        .filter(|m| TERRAFORM_TYPES.contains(&m["type"].as_str().unwrap_or_default()))
        .filter(|m| !NOT_PROVIDER_HALF.contains(&m["message_code"].as_str().unwrap_or_default()))
        .collect()
}

/// The provider a `log` event is about, by the name in its text.
fn provider_of<'a>(message: &Value, providers: &[&'a str]) -> Option<&'a str> {
    if message["type"] != "log" {
        return None;
    }
    let text = message["@message"].as_str().unwrap_or_default();
    providers
        .iter()
        .find(|p| {
            text.starts_with(&format!("{p}:"))
                || text.starts_with(&format!("{p} "))
                || text.contains(&format!(": {p} v"))
                || text.contains(&format!("provider: {p},"))
        })
        .copied()
}

/// The run-wide events in order, and each provider's events with the
/// number of run-wide events before each.
type Shape<'a> = (Vec<Key>, BTreeMap<&'a str, Vec<(usize, Key)>>);

fn shape<'a>(events: &[&Value], providers: &[&'a str]) -> Shape<'a> {
    let mut run_wide = Vec::new();
    let mut per_provider: BTreeMap<&str, Vec<(usize, Key)>> = BTreeMap::new();
    for event in events {
        match provider_of(event, providers) {
            Some(provider) => per_provider
                .entry(provider)
                .or_default()
                .push((run_wide.len(), key(event))),
            None => run_wide.push(key(event)),
        }
    }
    (run_wide, per_provider)
}

fn assert_matches_recording(scenario: &Scenario) {
    let terraform = read_recording(scenario.name);
    let mut bench = Bench::new(Tool::Tfinstall);
    let tfinstall = (scenario.run)(&mut bench);
    let name = scenario.name;
    let dump = |stream: &[Value]| -> String {
        stream.iter().map(|m| format!("{m}\n")).collect::<String>()
    };
    let context = format!(
        "scenario {name}\n--- Terraform {TERRAFORM_VERSION}\n{}--- tfinstall\n{}",
        dump(&terraform.stream),
        dump(&tfinstall.stream)
    );
    assert_eq!(tfinstall.code, terraform.code, "exit status\n{context}");

    // The stream starts as Terraform's does.
    assert_eq!(tfinstall.stream[0]["type"], "version", "{context}");
    assert_eq!(
        tfinstall.stream[0]["ui"], terraform.stream[0]["ui"],
        "{context}"
    );

    let is_terraform_only = |m: &Value| {
        scenario
            .terraform_only
            .contains(&m["@message"].as_str().unwrap_or_default())
    };
    let mut expected = comparable(&terraform.stream);
    let actual = comparable(&tfinstall.stream);
    assert_eq!(
        expected.iter().filter(|m| is_terraform_only(m)).count(),
        scenario.terraform_only.len(),
        "the recording has the events tfinstall leaves out\n{context}"
    );
    assert!(
        !actual.iter().any(|m| is_terraform_only(m)),
        "tfinstall leaves out {:?}\n{context}",
        scenario.terraform_only
    );
    expected.retain(|m| !is_terraform_only(m));
    let mut expected_keys: Vec<Key> = expected.iter().map(|m| key(m)).collect();
    let mut actual_keys: Vec<Key> = actual.iter().map(|m| key(m)).collect();
    expected_keys.sort();
    actual_keys.sort();
    assert_eq!(
        actual_keys, expected_keys,
        "the same events of Terraform's types\n{context}"
    );

    let (expected_run_wide, expected_providers) = shape(&expected, scenario.providers);
    let (actual_run_wide, actual_providers) = shape(&actual, scenario.providers);
    assert_eq!(
        actual_run_wide, expected_run_wide,
        "run-wide events in Terraform's order\n{context}"
    );
    assert_eq!(
        actual_providers, expected_providers,
        "each provider's events in Terraform's order and place\n{context}"
    );

    // tfinstall's fields ride on the events about a provider.
    for event in &actual {
        if let Some(provider) = provider_of(event, scenario.providers) {
            let full = event["provider"].as_str().unwrap_or_default();
            assert!(
                full.ends_with(provider.trim_start_matches("terraform.io/builtin/"))
                    && full.contains('/'),
                "{event} names its provider in full\n{context}"
            );
        }
    }
}

#[test]
fn fresh_install_matches_terraform() {
    assert_matches_recording(&SCENARIOS[0]);
}

#[test]
fn locked_reinstall_matches_terraform() {
    assert_matches_recording(&SCENARIOS[1]);
}

#[test]
fn already_installed_matches_terraform() {
    assert_matches_recording(&SCENARIOS[2]);
}

#[test]
fn upgrade_matches_terraform() {
    assert_matches_recording(&SCENARIOS[3]);
}

#[test]
fn plugin_cache_matches_terraform() {
    assert_matches_recording(&SCENARIOS[4]);
}

#[test]
fn no_matching_version_matches_terraform() {
    assert_matches_recording(&SCENARIOS[5]);
}

#[test]
fn empty_directory_matches_terraform() {
    assert_matches_recording(&SCENARIOS[6]);
}

#[test]
fn registry_self_signed_matches_terraform() {
    assert_matches_recording(&SCENARIOS[7]);
}

/// Records every scenario with the `terraform` on PATH, which must be
/// Terraform 1.11.4; run with `-- --ignored` to refresh `RECORDINGS`.
#[test]
#[ignore = "needs real Terraform on PATH; refreshes the recordings"]
fn record_terraform_streams() {
    let version = Command::new("terraform")
        .args(["version", "-json"])
        .env("CHECKPOINT_DISABLE", "1")
        .output()
        .expect("terraform on PATH");
    let version: Value = serde_json::from_slice(&version.stdout).unwrap();
    assert_eq!(version["terraform_version"], TERRAFORM_VERSION);
    for scenario in &SCENARIOS {
        let mut bench = Bench::new(Tool::Terraform);
        let recorded = (scenario.run)(&mut bench);
        let mut text = format!(
            "{}\n",
            serde_json::json!({ "exit_status": recorded.code, "scenario": scenario.name })
        );
        for message in &recorded.stream {
            text.push_str(&format!("{message}\n"));
        }
        let path = recording_path(scenario.name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
    }
}
