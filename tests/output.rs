//! What people and programs see: the `-json` stream against its published
//! schema, colour and the progress display only on a terminal, the
//! `providers` tree, help and shell completions.

mod support;

use serde_json::Value;
use support::json_stream::schema;
use support::pty::run_on_pty;
use support::{Fault, HostedRegistry, Payload, ProviderSpec, Snapshot, validated_stream};

/// A registry on a local HTTPS server and a project whose configuration
/// requires its providers.
struct World {
    registry: HostedRegistry,
}

impl World {
    /// `alpha` 1.0.0 and `beta` 2.1.0 in namespace `test`, each `payload`
    /// big; the configuration wants `alpha ~> 1.0` and any `beta`.
    fn new(payload: Payload) -> World {
        let registry = HostedRegistry::new(|registry| {
            registry
                .provider(ProviderSpec::new("test", "alpha", "1.0.0").payload(payload))
                .provider(ProviderSpec::new("test", "beta", "2.1.0").payload(payload))
        });
        let world = World { registry };
        world.write_config("~> 1.0");
        world
    }

    fn write_config(&self, alpha_constraint: &str) {
        let host = self.registry.server.host();
        self.registry.project.write(
            "main.tf",
            &format!(
                r#"terraform {{
  required_providers {{
    alpha = {{
      source  = "{host}/test/alpha"
      version = "{alpha_constraint}"
    }}
    beta = {{
      source = "{host}/test/beta"
    }}
  }}
}}

module "net" {{
  source = "./net"
}}
"#
            ),
        );
        self.registry.project.write(
            "net/main.tf",
            &format!(
                r#"terraform {{
  required_providers {{
    beta = {{
      source  = "{host}/test/beta"
      version = ">= 2.0"
    }}
  }}
}}
"#
            ),
        );
    }

    /// `tfinstall init -json`, run to completion.
    fn init_json(&self) -> std::process::Output {
        self.registry
            .project
            .command(&["init", "-json"])
            .output()
            .unwrap()
    }

    /// The whole working directory, configuration included.
    fn snapshot(&self) -> Snapshot {
        Snapshot::of(&self.registry.project.work)
    }

    /// The server path of a package for this platform.
    fn zip_path(&self, type_name: &str, version: &str) -> String {
        self.registry
            .zip_path(type_name, version, &support::current_platform())
    }

    /// The same environment as [`support::Project::command`], for running on a pty.
    fn std_command(&self, args: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_tfinstall"));
        command
            .args(args)
            .current_dir(&self.registry.project.work)
            .env_clear()
            .envs(support::home_environment(&self.registry.project.home))
            .env("SSL_CERT_FILE", self.registry.ca.ca_pem_path())
            .env("TERM", "xterm-256color");
        command
    }
}

fn of_type<'a>(stream: &'a [Value], kind: &str) -> Vec<&'a Value> {
    stream.iter().filter(|m| m["type"] == kind).collect()
}

/// The `log` lines (Terraform's type) of one `event` (tfinstall's field).
fn of_event<'a>(stream: &'a [Value], event: &str) -> Vec<&'a Value> {
    of_type(stream, "log")
        .into_iter()
        .filter(|m| m["event"] == event)
        .collect()
}

/// The error diagnostics of a stream, in order.
fn errors_in(stream: &[Value]) -> Vec<&Value> {
    of_type(stream, "diagnostic")
        .into_iter()
        .filter(|m| m["diagnostic"]["severity"] == "error")
        .collect()
}

/// Removes escape sequences, keeping the text a terminal would show
/// (good enough for finding words, not for layout).
fn strip_escapes(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Select Graphic Rendition sequences (`ESC [ … m`): colour and bold.
fn has_sgr(text: &str) -> bool {
    text.match_indices("\x1b[").any(|(at, _)| {
        text[at + 2..]
            .chars()
            .find(|c| !c.is_ascii_digit() && *c != ';')
            == Some('m')
    })
}

#[test]
fn the_schema_rejects_what_it_does_not_describe() {
    let validator = schema();
    let valid = serde_json::json!({
        "@level": "info", "@message": "Installing provider version: hashicorp/aws v5.0.0...",
        "@module": "terraform.ui", "@timestamp": "2026-05-01T09:30:00.123456Z", "type": "log",
        "event": "installing", "provider": "registry.terraform.io/hashicorp/aws", "version": "5.0.0",
    });
    assert!(validator.is_valid(&valid));
    let broken = |edit: &dyn Fn(&mut Value)| {
        let mut message = valid.clone();
        edit(&mut message);
        message
    };
    for message in [
        broken(&|m| m["surprise"] = true.into()),
        broken(&|m| m["event"] = "installed".into()),
        broken(&|m| {
            m.as_object_mut().unwrap().remove("event");
        }),
        broken(&|m| m["type"] = "installing".into()),
        broken(&|m| m["provider"] = "aws".into()),
        broken(&|m| m["@timestamp"] = "yesterday".into()),
        broken(&|m| {
            m.as_object_mut().unwrap().remove("version");
        }),
    ] {
        assert!(!validator.is_valid(&message), "{message}");
    }
}

#[test]
fn json_stream_of_a_successful_install_follows_the_schema() {
    let world = World::new(Payload::Random(300_000));
    let output = world.init_json();
    assert!(output.status.success(), "{output:?}");
    assert!(
        output.stderr.is_empty(),
        "nothing on stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stream = validated_stream(&output.stdout);

    assert_eq!(stream[0]["type"], "version");
    assert_eq!(stream[0]["ui"], "1.2");
    assert_eq!(stream[0]["tfinstall_ui"], "2.3");
    assert_eq!(stream[0]["engine"], "terraform");
    let host = world.registry.server.host();
    let alpha = format!("{host}/test/alpha");
    let beta = format!("{host}/test/beta");
    let queries = of_event(&stream, "query");
    assert_eq!(queries.len(), 2);
    assert_eq!(queries[0]["provider"], alpha.as_str());
    assert_eq!(queries[0]["selection"], "newest_matching");
    assert_eq!(queries[0]["constraints"], "~> 1.0");
    assert_eq!(queries[1]["provider"], beta.as_str());
    assert_eq!(queries[1]["constraints"], ">= 2.0.0");

    let selected = of_type(&stream, "selected");
    assert_eq!(selected.len(), 2);
    assert_eq!(selected[0]["version"], "1.0.0");
    assert_eq!(selected[0]["locked"], false);
    assert!(
        selected[0]["package"]
            .as_str()
            .unwrap()
            .starts_with(&world.registry.server.url())
    );

    for provider in [&alpha, &beta] {
        let progress: Vec<&Value> = of_type(&stream, "download_progress")
            .into_iter()
            .filter(|m| m["provider"] == provider.as_str())
            .collect();
        let last = progress
            .last()
            .expect("download progress for each provider");
        assert_eq!(last["received_bytes"], last["total_bytes"]);
        assert!(last["total_bytes"].as_u64().unwrap() > 300_000);
    }

    let key_id = world.registry.key.key_id();
    for messages in [of_type(&stream, "verified"), of_event(&stream, "installed")] {
        assert_eq!(messages.len(), 2, "{messages:?}");
        for message in messages {
            assert_eq!(message["authentication"]["result"], "self-signed");
            assert_eq!(message["authentication"]["trust"], "self_signed");
            assert_eq!(message["authentication"]["key_id"], key_id.as_str());
        }
    }
    // Terraform's wording, its missing separator included.
    let installed = of_event(&stream, "installed");
    assert_eq!(
        installed[0]["@message"],
        format!("Installed provider version: {alpha} v1.0.0 (self-signedkey_id: {key_id})")
    );
    assert_eq!(
        of_event(&stream, "partner_and_community_providers").len(),
        1
    );

    let codes: Vec<&str> = of_type(&stream, "init_output")
        .iter()
        .map(|m| m["message_code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "initializing_modules_message",
            "initializing_provider_plugin_message",
            "lock_info",
            "output_init_success_message"
        ]
    );
    // The configuration's local module, as Terraform's `log` line.
    let modules = of_event(&stream, "module_installed");
    assert_eq!(modules.len(), 1);
    assert!(
        modules[0]["@message"].as_str().unwrap().starts_with("- "),
        "{:?}",
        modules[0]
    );

    let summary = stream.last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["success"], true);
    assert_eq!(summary["providers"]["installed"], 2);
    assert_eq!(summary["lock_file"], "created");
    assert_eq!(summary["errors"], 0);

    // A second run reuses everything and says so.
    let again = world.init_json();
    assert!(again.status.success());
    let stream = validated_stream(&again.stdout);
    assert_eq!(of_event(&stream, "using_installed").len(), 2);
    assert!(of_type(&stream, "download_progress").is_empty());
    let summary = stream.last().unwrap();
    assert_eq!(summary["providers"]["reused"], 2);
    assert_eq!(summary["lock_file"], "unchanged");
}

#[test]
fn json_stream_of_failed_runs_follows_the_schema_and_changes_nothing() {
    let world = World::new(Payload::Small);
    world
        .registry
        .project
        .command(&["init", "-json"])
        .assert()
        .success();
    let before = world.snapshot();

    // No version matches.
    world.write_config("~> 7.0");
    let before_config_change = world.snapshot();
    let output = world.init_json();
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stderr.is_empty());
    let stream = validated_stream(&output.stdout);
    let errors = errors_in(&stream);
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0]["@level"], "error");
    assert_eq!(
        errors[0]["diagnostic"]["summary"],
        "Failed to query available provider packages"
    );
    let detail = errors[0]["diagnostic"]["detail"].as_str().unwrap();
    assert!(detail.contains("~> 7.0"), "{detail}");
    assert!(
        detail.ends_with("run the following command:\n    tfinstall providers"),
        "{detail}"
    );
    let summary = stream.last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["success"], false);
    assert_eq!(summary["errors"], 1);
    assert_eq!(summary["lock_file"], "unchanged");
    assert_eq!(world.snapshot(), before_config_change);

    // The download fails. The configuration is back as it was, though
    // rewritten, so only its content compares.
    world.write_config("~> 1.0");
    assert_eq!(world.snapshot().without_times(), before.without_times());
    std::fs::remove_dir_all(world.registry.project.work.join(".terraform")).unwrap();
    let before = world.snapshot();
    world
        .registry
        .server
        .fault(&world.zip_path("alpha", "1.0.0"), Fault::Status(404));
    let output = world.init_json();
    assert_eq!(output.status.code(), Some(1));
    let stream = validated_stream(&output.stdout);
    let error = errors_in(&stream)[0];
    assert_eq!(error["diagnostic"]["summary"], "Failed to install provider");
    assert!(
        error["diagnostic"]["detail"]
            .as_str()
            .unwrap()
            .contains("bad response code: 404")
    );
    assert_eq!(stream.last().unwrap()["success"], false);
    assert_eq!(world.snapshot(), before);

    // The configuration is invalid: the diagnostic points at the file.
    std::fs::write(
        world.registry.project.work.join("broken.tf"),
        "terraform {\n  required_providers {\n    x = 1\n",
    )
    .unwrap();
    let before = world.snapshot();
    let output = world.init_json();
    assert_eq!(output.status.code(), Some(1));
    let stream = validated_stream(&output.stdout);
    let error = errors_in(&stream)[0];
    assert_eq!(error["diagnostic"]["range"]["filename"], "broken.tf");
    assert_eq!(world.snapshot(), before);
}

#[test]
fn a_terminal_gets_colour_and_a_progress_display() {
    let world = World::new(Payload::Random(1_500_000));
    for type_name in ["alpha", "beta"] {
        world.registry.server.fault(
            &world.zip_path(
                type_name,
                if type_name == "alpha" {
                    "1.0.0"
                } else {
                    "2.1.0"
                },
            ),
            Fault::Throttle(3_000_000),
        );
    }
    let run = run_on_pty(world.std_command(&["init"]));
    assert!(run.status.success(), "{}", run.text);
    assert!(
        run.text
            .contains("\x1b[1mInitializing provider plugins...\x1b[0m")
    );
    let host = world.registry.server.host();
    let plain = strip_escapes(&run.text);
    // The bars: label, bytes of the total, rate and time left.
    assert!(
        plain.contains(&format!("{host}/test/alpha v1.0.0")),
        "{plain}"
    );
    assert!(plain.contains(" / 1.43 MiB"), "{plain}");
    assert!(plain.contains("/s") && plain.contains("ETA"), "{plain}");
    // Lines printed while bars were drawn arrive whole.
    let key_id = world.registry.key.key_id();
    for (name, version) in [("alpha", "1.0.0"), ("beta", "2.1.0")] {
        let line = format!(
            "- Installed {host}/test/{name} v{version} (self-signed, key ID \x1b[1m{key_id}\x1b[0m)\r\n"
        );
        assert!(run.text.contains(&line), "{line:?} in {:?}", run.text);
    }
}

#[test]
fn no_color_and_the_no_color_flag_turn_colour_off_on_a_terminal() {
    let world = World::new(Payload::Random(600_000));
    world.registry.server.fault(
        &world.zip_path("alpha", "1.0.0"),
        Fault::Throttle(2_000_000),
    );
    let mut with_env = world.std_command(&["init"]);
    with_env.env("NO_COLOR", "1");
    let run = run_on_pty(with_env);
    assert!(run.status.success(), "{}", run.text);
    assert!(!has_sgr(&run.text), "{:?}", run.text);
    assert!(run.text.contains("Initializing provider plugins..."));
    // Progress is not colour: it still shows, in plain characters.
    assert!(strip_escapes(&run.text).contains("ETA"), "{:?}", run.text);

    std::fs::remove_dir_all(world.registry.project.work.join(".terraform")).unwrap();
    let run = run_on_pty(world.std_command(&["init", "-no-color"]));
    assert!(run.status.success(), "{}", run.text);
    assert!(!has_sgr(&run.text), "{:?}", run.text);
}

#[test]
fn piped_output_has_no_colour_and_no_progress() {
    let world = World::new(Payload::Random(600_000));
    world.registry.server.fault(
        &world.zip_path("alpha", "1.0.0"),
        Fault::Throttle(2_000_000),
    );
    let output = world.registry.project.command(&["init"]).output().unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(!stdout.contains('\x1b') && !stderr.contains('\x1b'));
    assert!(!stdout.contains("ETA") && !stderr.contains("ETA"));
    assert_eq!(stderr, "");
    let host = world.registry.server.host();
    let key_id = world.registry.key.key_id();
    assert!(stdout.contains(&format!(
        "\nInitializing provider plugins...\n- Finding {host}/test/alpha versions matching \"~> 1.0\"...\n- Finding {host}/test/beta versions matching \">= 2.0.0\"...\n- Installing {host}/test/alpha v1.0.0...\n- Installed {host}/test/alpha v1.0.0 (self-signed, key ID {key_id})\n- Installing {host}/test/beta v2.1.0...\n- Installed {host}/test/beta v2.1.0 (self-signed, key ID {key_id})\n"
    )), "{stdout}");
}

#[test]
fn providers_shows_the_requirement_tree_with_origins_and_locks() {
    let world = World::new(Payload::Small);
    let host = world.registry.server.host();
    let before = world
        .registry
        .project
        .command(&["providers"])
        .output()
        .unwrap();
    assert!(before.status.success());
    let expected_tree = format!(
        "
Providers required by configuration:
.
├── provider[{host}/test/alpha] ~> 1.0
│   └── required_providers \"alpha\" ~> 1.0 (main.tf:3)
├── provider[{host}/test/beta]
│   └── required_providers \"beta\" (main.tf:7)
└── module.net
    └── provider[{host}/test/beta] >= 2.0.0
        └── required_providers \"beta\" >= 2.0.0 (net/main.tf:3)

Providers selected in the dependency lock file:

"
    );
    let text = String::from_utf8(before.stdout).unwrap();
    assert_eq!(
        text,
        format!(
            "{expected_tree}    provider[{host}/test/alpha] not locked yet: run tfinstall init
    provider[{host}/test/beta] not locked yet: run tfinstall init

Providers required only by state are not shown: tfinstall does not read Terraform state.
Read with Terraform's rules (-engine=terraform; default registry registry.terraform.io).
"
        )
    );

    world.registry.project.command(&["init"]).assert().success();
    let after = world
        .registry
        .project
        .command(&["providers"])
        .output()
        .unwrap();
    let text = String::from_utf8(after.stdout).unwrap();
    assert!(
        text.starts_with(&format!(
            "{expected_tree}    provider[{host}/test/alpha] 1.0.0\n    provider[{host}/test/beta] 2.1.0\n"
        )),
        "{text}"
    );

    // A resource of a provider no module declares makes it required too.
    std::fs::write(
        world.registry.project.work.join("net/extra.tf"),
        "resource \"gamma_thing\" \"x\" {}\n",
    )
    .unwrap();
    let json = world
        .registry
        .project
        .command(&["providers", "-json"])
        .output()
        .unwrap();
    assert!(json.status.success());
    let stream = validated_stream(&json.stdout);
    assert_eq!(stream.len(), 2);
    let report = &stream[1];
    assert_eq!(report["type"], "provider_requirements");
    let net = &report["modules"][1];
    assert_eq!(net["path"], "module.net");
    assert_eq!(
        net["providers"][1]["provider"],
        "registry.terraform.io/hashicorp/gamma"
    );
    assert_eq!(net["providers"][1]["origins"][0]["kind"], "resource");
    assert_eq!(
        net["providers"][1]["origins"][0]["address"],
        "gamma_thing.x"
    );
    assert_eq!(report["locked"][1]["version"], "2.1.0");
    let text = String::from_utf8(
        world
            .registry
            .project
            .command(&["providers"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        text.contains(&format!(
            "└── module.net\n    ├── provider[{host}/test/beta] >= 2.0.0\n    │   └── required_providers \"beta\" >= 2.0.0 (net/main.tf:3)\n    └── provider[registry.terraform.io/hashicorp/gamma]\n        └── used by gamma_thing.x (net/extra.tf:1)\n"
        )),
        "{text}"
    );
    assert!(text.contains(
        "    provider[registry.terraform.io/hashicorp/gamma] not locked yet: run tfinstall init\n"
    ));
}

#[test]
fn providers_reports_a_broken_configuration() {
    let world = World::new(Payload::Small);
    std::fs::write(
        world.registry.project.work.join("broken.tf"),
        "terraform {\n",
    )
    .unwrap();
    let output = world
        .registry
        .project
        .command(&["providers"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("Error: "), "{stderr}");
    assert!(stderr.contains("broken.tf"), "{stderr}");
}

#[test]
fn every_command_has_help() {
    let home = tempfile::tempdir().unwrap();
    for args in [
        &["--help"][..],
        &["init", "--help"],
        &["init", "-help"],
        &["providers", "--help"],
        &["completions", "--help"],
    ] {
        let output = support::tfinstall_command(home.path())
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "{args:?}");
        let text = String::from_utf8(output.stdout).unwrap();
        assert!(text.contains("Usage: tfinstall"), "{args:?}: {text}");
    }
    let init_help = support::tfinstall_command(home.path())
        .args(["init", "--help"])
        .output()
        .unwrap();
    let text = String::from_utf8(init_help.stdout).unwrap();
    for flag in [
        "--plugin-dir",
        "--upgrade",
        "--lockfile",
        "--json",
        "--no-color",
    ] {
        assert!(text.contains(flag), "{flag} in {text}");
    }
}

#[test]
fn completions_are_generated_for_common_shells() {
    let home = tempfile::tempdir().unwrap();
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef tfinstall"),
        ("fish", "complete -c tfinstall"),
    ] {
        let output = support::tfinstall_command(home.path())
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(output.status.success(), "{shell}");
        let script = String::from_utf8(output.stdout).unwrap();
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(script.contains("plugin-dir"), "{shell}");
    }
    support::tfinstall_command(home.path())
        .args(["completions", "tcsh"])
        .assert()
        .code(1);
}

/// A reader that goes away (`tfinstall completions bash | head -1`) ends
/// the process as it ends Terraform and other Unix tools: by SIGPIPE,
/// quietly, not with a panic over the failed print. So for standard output
/// written by tfinstall (completions), by clap (help), and for standard
/// error (an error message): the writes `src/stdio.rs` watches for `EPIPE`,
/// with SIGPIPE itself left ignored for sockets.
#[cfg(unix)]
#[test]
fn a_closed_standard_output_ends_the_run_quietly() {
    use std::os::unix::process::ExitStatusExt as _;
    let home = tempfile::tempdir().unwrap();
    let command = support::tfinstall_command(home.path());
    let cases: [(&[&str], bool); 3] = [
        (&["completions", "bash"], false),
        (&["--help"], false),
        (&["-chdir=/nonexistent", "init"], true),
    ];
    for (args, closed_stderr) in cases {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut std_command = std::process::Command::new(command.get_program());
        for (key, value) in command.get_envs() {
            match value {
                Some(value) => std_command.env(key, value),
                None => std_command.env_remove(key),
            };
        }
        std_command.args(args);
        let output = if closed_stderr {
            std_command
                .stdout(std::process::Stdio::piped())
                .stderr(writer)
                .output()
        } else {
            std_command
                .stdout(writer)
                .stderr(std::process::Stdio::piped())
                .output()
        }
        .unwrap();
        let said = String::from_utf8_lossy(if closed_stderr {
            &output.stdout
        } else {
            &output.stderr
        });
        assert!(!said.contains("panicked"), "{args:?}: {said}");
        assert_eq!(
            output.status.signal(),
            Some(13),
            "{args:?}: {:?}: {said}",
            output.status
        );
    }
}

/// `testdata/providers-tree`: modules that require no provider, at the
/// root and below, listed as real Terraform 1.0.3 lists them (its output
/// is recorded beside the configuration; `tests/differential.rs` checks
/// the recording against Terraform itself).
#[test]
fn providers_lists_every_module_as_terraform_does() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/providers-tree");
    let project = support::Project::new();
    support::copy_fixture_tree(&fixture, &project.work);
    let run = project.run(&["providers"]);
    run.assert_success();
    let terraform = support::read_text(&fixture.join("terraform-1.0.3-providers.txt"));
    let expected = support::provider_tree_paths(&terraform);
    assert!(expected.contains("module.topology"), "{expected:?}");
    assert!(
        expected.contains("module.network › module.labels"),
        "{expected:?}"
    );
    assert_eq!(support::provider_tree_paths(&run.stdout), expected);

    let json = project.run(&["providers", "-json"]);
    json.assert_success();
    let stream = validated_stream(json.stdout.as_bytes());
    let modules: Vec<(&str, usize)> = stream[1]["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["path"].as_str().unwrap(),
                m["providers"].as_array().unwrap().len(),
            )
        })
        .collect();
    assert_eq!(
        modules,
        [
            ("", 1),
            ("module.network", 1),
            ("module.network.module.labels", 0),
            ("module.topology", 0),
            ("module.wrapper", 0),
            ("module.wrapper.module.inner", 1),
        ]
    );
}
