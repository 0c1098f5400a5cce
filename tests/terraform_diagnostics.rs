//! Configuration errors shown as Terraform shows them (issue 43): `on FILE
//! line N, in BLOCK:`, the quoted lines, and `-json`'s `range` and
//! `snippet`. Each scenario below was run with real Terraform 1.11.4 and
//! its output recorded in `testdata/terraform-diagnostics/` (see the README
//! there); the tests run tfinstall on the same files and compare, line for
//! line, what each scenario's [`Expect`] says must agree.
//!
//! The recordings are refreshed with real Terraform on PATH by
//! `cargo test --test terraform_diagnostics -- --ignored`; the tests
//! themselves need no Terraform.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::tfinstall_command;

const RECORDINGS: &str = "testdata/terraform-diagnostics";
const TERRAFORM_VERSION: &str = "1.11.4";

/// What of Terraform's diagnostics tfinstall must reproduce.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Every error and warning tfinstall shows is one of Terraform's, word
    /// for word: summary, where (file, line, block, quoted lines) and
    /// detail; in `-json`, the same `range` and `snippet`.
    Same,
    /// tfinstall's first error points where Terraform's does (file, line,
    /// block and quoted lines); its words are its own (a syntax error
    /// worded by hcl-edit, or a module call whose installation is another
    /// part's business).
    SamePlace,
    /// Terraform quotes no lock file (`(source code not available)`):
    /// tfinstall's first error is on the same line, and it quotes it.
    SameLineQuoted,
    /// Terraform's CLI configuration errors have no position at all (its
    /// reader is HCL 1): the same summary, and tfinstall quotes the file.
    SameSummaryQuoted,
}

struct Scenario {
    name: &'static str,
    files: &'static [(&'static str, &'static str)],
    /// A CLI configuration of the scenario's own, else an empty one.
    cli_config: Option<&'static str>,
    expect: Expect,
}

const REQUIRE_NULL: &str =
    "terraform {\n  required_providers {\n    null = { source = \"hashicorp/null\" }\n  }\n}\n";

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "constraint_syntax",
        files: &[(
            "main.tf",
            "terraform {\n  required_providers {\n    null = {\n      source  = \"hashicorp/null\"\n      version = \">= 1.0 and bogus\"\n    }\n  }\n}\n",
        )],
        cli_config: None,
        expect: Expect::Same,
    },
    Scenario {
        name: "provider_source",
        files: &[(
            "main.tf",
            "terraform {\n  required_providers {\n    null = {\n      source = \"hashicorp/nu ll/x/y\"\n    }\n  }\n}\n",
        )],
        cli_config: None,
        expect: Expect::Same,
    },
    Scenario {
        name: "json_file",
        files: &[(
            "main.tf.json",
            "{\n  \"terraform\": {\n    \"required_providers\": {\n      \"null\": {\n        \"source\": \"hashicorp/null\",\n        \"version\": \"~> nope\"\n      }\n    }\n  }\n}\n",
        )],
        cli_config: None,
        expect: Expect::Same,
    },
    Scenario {
        name: "duplicate_module_call",
        files: &[(
            "main.tf",
            "module \"a\" {\n  source = \"./a\"\n}\n\nmodule \"a\" {\n  source = \"./b\"\n}\n",
        )],
        cli_config: None,
        expect: Expect::Same,
    },
    Scenario {
        name: "duplicate_locals",
        files: &[
            (
                "main.tf",
                "locals {\n  a = 1\n  b = \"x\"\n}\n\nlocals {\n  a = 2\n}\n",
            ),
            ("x.tf.json", "{\n  \"locals\": {\n    \"a\": 1\n  }\n}\n"),
        ],
        cli_config: None,
        expect: Expect::Same,
    },
    Scenario {
        name: "duplicate_required_providers",
        files: &[(
            "main.tf",
            "terraform {\n  required_providers {\n    null = { source = \"hashicorp/null\" }\n  }\n}\nterraform {\n  required_providers {\n    random = { source = \"hashicorp/random\" }\n  }\n}\n",
        )],
        cli_config: None,
        expect: Expect::Same,
    },
    Scenario {
        name: "provider_block_version",
        files: &[(
            "main.tf",
            "resource \"null_resource\" \"a\" {\n  triggers = {\n    x = \"1\"\n  }\n}\n\nprovider \"null\" {\n  version = \"not a version\"\n}\n",
        )],
        cli_config: None,
        expect: Expect::Same,
    },
    Scenario {
        name: "module_source",
        files: &[(
            "main.tf",
            "module \"vpc\" {\n  source = \"hashicorp/vpc/aws/extra/bits\"\n}\n",
        )],
        cli_config: None,
        expect: Expect::Same,
    },
    Scenario {
        name: "module_version",
        files: &[(
            "main.tf",
            "module \"vpc\" {\n  source  = \"localhost:1/acme/vpc/aws\"\n  version = \"~> bogus\"\n}\n",
        )],
        cli_config: None,
        expect: Expect::Same,
    },
    Scenario {
        name: "module_version_on_local_source",
        files: &[(
            "main.tf",
            "module \"vpc\" {\n  source  = \"./modules/vpc\"\n  version = \"1.0.0\"\n}\n",
        )],
        cli_config: None,
        expect: Expect::SamePlace,
    },
    Scenario {
        name: "syntax_error",
        files: &[(
            "main.tf",
            "terraform {\n  required_providers {\n    aws = {\n      source                = \"hashicorp/aws\"\n      configuration_aliases = [ aws.a b ]\n    }\n  }\n}\n",
        )],
        cli_config: None,
        expect: Expect::SamePlace,
    },
    Scenario {
        name: "lock_file_syntax",
        files: &[
            ("main.tf", REQUIRE_NULL),
            (
                ".terraform.lock.hcl",
                "provider \"registry.terraform.io/hashicorp/null\" {\n  version = \"3.2.1\"\n  hashes = \"h1:abc\" \"h1:def\"\n}\n",
            ),
        ],
        cli_config: None,
        expect: Expect::SameLineQuoted,
    },
    Scenario {
        name: "cli_config",
        files: &[("main.tf", "locals {\n  a = 1\n}\n")],
        cli_config: Some(
            "provider_installation {\n  filesystem_mirror {\n    path    = \"/nonexistent\"\n    include = \"not-a-list\"\n  }\n  direct {}\n}\n",
        ),
        expect: Expect::SameSummaryQuoted,
    },
];

/// One diagnostic of text output, without Terraform's frame.
#[derive(Debug, PartialEq)]
struct Shown {
    severity_and_summary: String,
    /// `on FILE line N…:` and the quoted lines under it.
    place: Vec<String>,
    /// Whitespace-normalized, since Terraform wraps paragraphs and
    /// tfinstall does not.
    detail: String,
}

/// The diagnostics of `init -no-color` output.
fn diagnostics(text: &str) -> Vec<Shown> {
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| !line.starts_with('╷') && !line.starts_with('╵'))
        .map(|line| {
            line.strip_prefix("│ ")
                .or_else(|| line.strip_prefix('│'))
                .unwrap_or(line)
        })
        .collect();
    let starts = |line: &str| line.starts_with("Error: ") || line.starts_with("Warning: ");
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if !starts(lines[i]) {
            i += 1;
            continue;
        }
        let mut shown = Shown {
            severity_and_summary: lines[i].to_owned(),
            place: Vec::new(),
            detail: String::new(),
        };
        i += 1;
        while i < lines.len() && lines[i].is_empty() {
            i += 1;
        }
        if i < lines.len() && lines[i].starts_with("  on ") {
            shown.place.push(lines[i].to_owned());
            i += 1;
            while i < lines.len() && !lines[i].is_empty() {
                shown.place.push(lines[i].to_owned());
                i += 1;
            }
        }
        let mut detail = Vec::new();
        while i < lines.len() && !starts(lines[i]) {
            detail.push(lines[i]);
            i += 1;
        }
        shown.detail = detail
            .join(" ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        out.push(shown);
    }
    out
}

/// The `diagnostic` objects of a `-json` stream.
fn json_diagnostics(stream: &str) -> Vec<Value> {
    stream
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|message| message["type"] == "diagnostic")
        .map(|message| message["diagnostic"].clone())
        .collect()
}

/// The scenario's files in a fresh directory, and a CLI configuration.
fn prepare(scenario: &Scenario, root: &Path) -> (PathBuf, PathBuf) {
    let dir = root.join("work");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in scenario.files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let cli_config = dir.join("cli.tfrc");
    std::fs::write(&cli_config, scenario.cli_config.unwrap_or("")).unwrap();
    (dir, cli_config)
}

fn recording(scenario: &Scenario, ending: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(RECORDINGS)
        .join(format!("{}.{ending}", scenario.name));
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// tfinstall's `init` output on the scenario, `-json` or text.
fn run_tfinstall(scenario: &Scenario, json: bool) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let (dir, cli_config) = prepare(scenario, &root);
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    if scenario.cli_config.is_none() {
        // An empty mirror, so that nothing can reach a network.
        let mirror = root.join("mirror");
        std::fs::create_dir_all(&mirror).unwrap();
        std::fs::write(
            &cli_config,
            format!(
                "provider_installation {{\n  filesystem_mirror {{\n    path = \"{}\"\n  }}\n}}\n",
                mirror.display()
            ),
        )
        .unwrap();
    }
    let output = tfinstall_command(&home)
        .current_dir(&dir)
        .env("TF_CLI_CONFIG_FILE", &cli_config)
        .arg("init")
        .arg(if json { "-json" } else { "-no-color" })
        .output()
        .unwrap();
    // CLI configuration errors do not stop `init`, in Terraform either.
    assert_eq!(
        output.status.success(),
        scenario.cli_config.is_some(),
        "{}",
        scenario.name
    );
    let mut text = String::from_utf8(output.stdout).unwrap();
    text.push_str(&String::from_utf8(output.stderr).unwrap());
    text
}

fn assert_matches_terraform(scenario: &Scenario) {
    let theirs = diagnostics(&recording(scenario, "txt"));
    let ours_text = run_tfinstall(scenario, false);
    let ours = diagnostics(&ours_text);
    let context = format!(
        "{}: tfinstall printed\n{ours_text}\nTerraform's diagnostics: {theirs:#?}",
        scenario.name
    );
    let first_error = ours
        .iter()
        .find(|d| d.severity_and_summary.starts_with("Error: "))
        .unwrap_or_else(|| panic!("no error; {context}"));
    let matching_line = |d: &&Shown| {
        d.place
            .first()
            .map(|on| on.split([',', ':']).next().map(str::to_owned))
            == first_error
                .place
                .first()
                .map(|on| on.split([',', ':']).next().map(str::to_owned))
    };
    match scenario.expect {
        Expect::Same => {
            for diag in &ours {
                assert!(
                    theirs.contains(diag),
                    "{diag:#?} is not Terraform's; {context}"
                );
            }
            let theirs_json = json_diagnostics(&recording(scenario, "jsonl"));
            for diag in json_diagnostics(&run_tfinstall(scenario, true)) {
                let same = theirs_json
                    .iter()
                    .find(|d| d["summary"] == diag["summary"] && d["range"] == diag["range"]);
                let same = same.unwrap_or_else(|| {
                    panic!("{diag:#} has no counterpart in Terraform's {theirs_json:#?}")
                });
                assert_eq!(same["snippet"], diag["snippet"], "{}", scenario.name);
                assert_eq!(same["detail"], diag["detail"], "{}", scenario.name);
            }
        }
        Expect::SamePlace => {
            assert!(
                theirs
                    .iter()
                    .any(|d| !d.place.is_empty() && d.place == first_error.place),
                "{context}"
            );
        }
        Expect::SameLineQuoted => {
            let theirs = theirs
                .iter()
                .find(matching_line)
                .unwrap_or_else(|| panic!("not on Terraform's line; {context}"));
            assert_eq!(theirs.place[1], "  (source code not available)");
            assert!(
                first_error.place.len() >= 2 && first_error.place[1].starts_with("   "),
                "{context}"
            );
        }
        Expect::SameSummaryQuoted => {
            let summary = &first_error.severity_and_summary;
            assert!(
                theirs
                    .iter()
                    .any(|d| &d.severity_and_summary == summary && d.place.is_empty()),
                "{context}"
            );
            assert!(first_error.place.len() >= 2, "{context}");
        }
    }
}

#[test]
fn every_scenario_matches_terraform() {
    for scenario in SCENARIOS {
        assert_matches_terraform(scenario);
    }
}

/// Records every scenario with the `terraform` on PATH, which must be
/// Terraform 1.11.4; run with `-- --ignored` to refresh the recordings.
#[test]
#[ignore = "needs real Terraform on PATH; refreshes the recordings"]
fn record_terraform_diagnostics() {
    let version = Command::new("terraform")
        .args(["version", "-json"])
        .env("CHECKPOINT_DISABLE", "1")
        .output()
        .expect("terraform on PATH");
    let version: Value = serde_json::from_slice(&version.stdout).unwrap();
    assert_eq!(version["terraform_version"], TERRAFORM_VERSION);
    let out_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(RECORDINGS);
    std::fs::create_dir_all(&out_dir).unwrap();
    for scenario in SCENARIOS {
        for (flag, ending) in [("-no-color", "txt"), ("-json", "jsonl")] {
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().canonicalize().unwrap();
            let (dir, cli_config) = prepare(scenario, &root);
            let output = Command::new("terraform")
                .current_dir(&dir)
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .env("HOME", &root)
                .env("CHECKPOINT_DISABLE", "1")
                .env("TF_CLI_CONFIG_FILE", &cli_config)
                .args(["init", "-backend=false", "-input=false", flag])
                .output()
                .unwrap();
            let mut text = String::from_utf8(output.stdout).unwrap();
            text.push_str(&String::from_utf8(output.stderr).unwrap());
            let text = text.replace(&root.display().to_string(), "$ROOT");
            let text = if ending == "jsonl" {
                // Only the diagnostics, without the timestamps that make
                // every recording differ.
                json_diagnostics(&text)
                    .iter()
                    .map(|d| {
                        format!(
                            "{}\n",
                            serde_json::json!({ "type": "diagnostic", "diagnostic": d })
                        )
                    })
                    .collect()
            } else {
                text
            };
            std::fs::write(out_dir.join(format!("{}.{ending}", scenario.name)), text).unwrap();
        }
    }
}
