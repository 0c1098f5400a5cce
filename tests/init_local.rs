//! `tfinstall init` against local mirrors only: the implied local
//! directories, `-plugin-dir` and `filesystem_mirror` in a CLI config; module
//! requirements in all their forms; the lock file, both layouts and
//! `selections.json`, byte for byte. No test here touches any network.
//!
//! Failure cases live in `init_local_errors.rs`.

mod support;

use std::path::Path;

use support::*;

const SUCCESS: &str = "\ntfinstall has installed the providers successfully!\n";

const CREATED: &str = "\nTerraform has created a lock file .terraform.lock.hcl to record the provider\nselections it made above. Include this file in your version control repository\nso that Terraform can guarantee to make the same selections by default when\nyou run \"terraform init\" in the future.\n";

const CHANGED: &str = "\nTerraform has made some changes to the provider dependency selections recorded\nin the .terraform.lock.hcl file. Review those changes and commit them to your\nversion control system if they represent changes you intended to make.\n";

/// Terraform's warning after a lock file was written with only locally
/// computed checksums ("Incomplete lock file information for providers");
/// `providers` as the UI names them, sorted.
fn incomplete_warning(providers: &[&str]) -> String {
    let list: String = providers.iter().map(|p| format!("  - {p}\n")).collect();
    format!(
        "\nWarning: Incomplete lock file information for providers\n\nDue to your customized provider installation methods, Terraform was forced to calculate lock file checksums locally for the following providers:\n{list}\nThe current .terraform.lock.hcl file only includes checksums for {platform}, so Terraform running on another platform will fail to install these providers.\n\nTo calculate additional checksums for another platform, run:\n  terraform providers lock -platform=linux_amd64\n(where linux_amd64 is the platform to generate)\n",
        platform = current_platform()
    )
}

/// The whole stdout of a successful run that installed with local hashes.
fn expected_stdout(lines: &[String], lock_message: &str, warning: &str) -> String {
    format!(
        "\nInitializing provider plugins...\n{}\n{lock_message}{warning}{SUCCESS}",
        lines.join("\n")
    )
}

fn installing(pkg: &Pkg) -> [String; 2] {
    [
        format!("- Installing {} v{}...", pkg.display(), pkg.version),
        format!(
            "- Installed {} v{} (unauthenticated)",
            pkg.display(),
            pkg.version
        ),
    ]
}

/// `selections.json` as Terraform 0.13's Go `json.MarshalIndent` writes it.
fn selections_json(entries: &[(&Pkg, String)]) -> String {
    let body: Vec<String> = entries
        .iter()
        .map(|(pkg, hash)| {
            format!(
                "  \"{}\": {{\n    \"hash\": \"{hash}\",\n    \"version\": \"{}\"\n  }}",
                pkg.addr(),
                pkg.version
            )
        })
        .collect();
    format!("{{\n{}\n}}", body.join(",\n"))
}

/// Checks the installed files. Modes are normalised as the extractor
/// promises: 0755 for anything with an execute bit, else 0644.
#[track_caller]
fn assert_installed(pkg: &Pkg, base: &Path) {
    let dir = pkg.package_dir(base);
    for (name, content, mode) in &pkg.files {
        let path = dir.join(name);
        assert_eq!(
            std::fs::read(&path).unwrap_or_default(),
            *content,
            "{}",
            path.display()
        );
        #[cfg(unix)]
        assert_eq!(
            mode_of(&path),
            if mode & 0o111 != 0 { 0o755 } else { 0o644 },
            "mode of {}",
            path.display()
        );
        #[cfg(not(unix))]
        let _ = mode;
    }
}

#[test]
fn installs_packed_unpacked_and_home_directory_providers_without_cli_config() {
    let case = Project::new();
    case.write(
        "main.tf",
        r#"
terraform {
  required_providers {
    alpha = {
      source  = "hashicorp/alpha"
      version = "~> 1.0"
    }
    beta = ">= 2.0"
    gamma = {
      source = "example.com/acme/gamma"
    }
  }
}
"#,
    );
    let local = case.work.join("terraform.d/plugins");
    let home_plugins = case.home.join(".terraform.d/plugins");
    let alpha = Pkg::fake("hashicorp/alpha", "1.1.0");
    alpha.write_packed(&local);
    Pkg::fake("hashicorp/alpha", "1.0.0").write_packed(&local);
    Pkg::fake("hashicorp/alpha", "2.0.0").write_packed(&local);
    let beta = Pkg::fake("hashicorp/beta", "2.1.0");
    beta.write_unpacked(&local);
    let gamma = Pkg::fake("example.com/acme/gamma", "3.0.0").with_file(
        "README.txt",
        b"not executable\n",
        0o644,
    );
    gamma.write_unpacked(&home_plugins);

    let run = case.init(&[]);
    run.assert_success();
    assert_eq!(run.stderr, "");
    let mut lines = vec![
        "- Finding latest version of example.com/acme/gamma...".to_owned(),
        "- Finding hashicorp/alpha versions matching \"~> 1.0\"...".to_owned(),
        "- Finding hashicorp/beta versions matching \">= 2.0.0\"...".to_owned(),
    ];
    lines.extend(installing(&gamma));
    lines.extend(installing(&alpha));
    lines.extend(installing(&beta));
    assert_eq!(
        run.stdout,
        expected_stdout(
            &lines,
            CREATED,
            &incomplete_warning(&[
                "example.com/acme/gamma",
                "hashicorp/alpha",
                "hashicorp/beta"
            ])
        )
    );

    assert_eq!(
        case.lock(),
        lock_text(&[
            ("example.com/acme/gamma", "3.0.0", "", &[&gamma.h1()]),
            (
                "registry.terraform.io/hashicorp/alpha",
                "1.1.0",
                "~> 1.0",
                &[&alpha.h1()]
            ),
            (
                "registry.terraform.io/hashicorp/beta",
                "2.1.0",
                ">= 2.0.0",
                &[&beta.h1()]
            ),
        ])
    );
    #[cfg(unix)]
    assert_eq!(mode_of(&case.lock_path()), 0o644);

    let plugins = case.data().join("plugins");
    for pkg in [&alpha, &beta, &gamma] {
        assert_installed(pkg, &plugins);
    }
    let selections = std::fs::read_to_string(plugins.join("selections.json")).unwrap();
    assert_eq!(
        selections,
        selections_json(&[
            (&gamma, gamma.h1()),
            (&alpha, alpha.h1()),
            (&beta, beta.h1()),
        ])
    );
    assert!(!case.data().join("providers").exists());
}

#[test]
fn plugin_dir_is_repeatable_and_replaces_every_implied_directory() {
    let case = Project::new();
    case.write(
        "main.tf",
        r#"
terraform {
  required_providers {
    alpha = { source = "hashicorp/alpha" }
    beta  = { source = "hashicorp/beta" }
  }
}
"#,
    );
    let first = case.dir("first");
    let second = case.dir("second");
    let alpha = Pkg::fake("hashicorp/alpha", "1.0.0");
    alpha.write_packed(&first);
    let beta = Pkg::fake("hashicorp/beta", "1.0.0");
    beta.write_unpacked(&second);
    // Newer copies in the implied directories must not be seen.
    Pkg::fake("hashicorp/alpha", "9.0.0").write_packed(&case.work.join("terraform.d/plugins"));
    Pkg::fake("hashicorp/beta", "9.0.0").write_unpacked(&case.home.join(".terraform.d/plugins"));

    let first_arg = format!("-plugin-dir={}", first.display());
    let second_arg = second.display().to_string();
    // Terraform's other flags, as scripts pass them, are accepted too.
    let run = case.init(&[
        &first_arg,
        "-input=false",
        "-plugin-dir",
        &second_arg,
        "-no-color",
    ]);
    run.assert_success();
    let mut lines = vec![
        "- Finding latest version of hashicorp/alpha...".to_owned(),
        "- Finding latest version of hashicorp/beta...".to_owned(),
    ];
    lines.extend(installing(&alpha));
    lines.extend(installing(&beta));
    assert_eq!(run.progress(), lines);
    assert_eq!(
        case.lock(),
        lock_text(&[
            (
                "registry.terraform.io/hashicorp/alpha",
                "1.0.0",
                "",
                &[&alpha.h1()]
            ),
            (
                "registry.terraform.io/hashicorp/beta",
                "1.0.0",
                "",
                &[&beta.h1()]
            ),
        ])
    );
}

#[test]
fn plugin_dir_does_not_find_a_provider_that_only_an_implied_directory_holds() {
    let case = Project::new();
    case.write(
        "main.tf",
        "terraform {\n  required_providers {\n    gamma = { source = \"hashicorp/gamma\" }\n  }\n}\n",
    );
    let only = case.dir("only");
    Pkg::fake("hashicorp/alpha", "1.0.0").write_packed(&only);
    Pkg::fake("hashicorp/gamma", "1.0.0").write_packed(&case.work.join("terraform.d/plugins"));
    Pkg::fake("hashicorp/gamma", "1.0.0").write_unpacked(&case.home.join(".terraform.d/plugins"));

    let before = case.snapshot();
    let arg = format!("-plugin-dir={}", only.display());
    let run = case.init(&[&arg]);
    run.assert_failure().assert_stderr_has(&format!(
        "Error: Failed to query available provider packages\n\nCould not retrieve the list of available versions for provider hashicorp/gamma: provider registry.terraform.io/hashicorp/gamma was not found in any of the search locations\n\n  - {}\n",
        only.display()
    ));
    assert_eq!(case.snapshot(), before);
}

#[test]
fn filesystem_mirrors_from_the_cli_config_replace_the_implied_directories() {
    let case = Project::new();
    case.write(
        "main.tf",
        r#"
terraform {
  required_providers {
    widget = {
      source  = "example.com/acme/widget"
      version = ">= 1.0.0"
    }
    alpha = {
      source = "hashicorp/alpha"
    }
  }
}
"#,
    );
    let vendor = case.dir("vendor mirror");
    let general = case.dir("general");
    let widget = Pkg::fake("example.com/acme/widget", "1.2.0");
    widget.write_packed(&vendor);
    // Excluded from the first method, so the second one's copy is used.
    Pkg::fake("hashicorp/alpha", "5.0.0").write_packed(&vendor);
    let alpha = Pkg::fake("hashicorp/alpha", "1.0.0");
    alpha.write_unpacked(&general);
    Pkg::fake("hashicorp/alpha", "7.0.0").write_packed(&case.work.join("terraform.d/plugins"));
    std::fs::write(
        case.home.join(".terraformrc"),
        format!(
            r#"
provider_installation {{
  filesystem_mirror {{
    path    = "{}"
    include = ["example.com/*/*"]
  }}
  filesystem_mirror {{
    path = "{}"
  }}
}}
"#,
            vendor.display(),
            general.display()
        ),
    )
    .unwrap();

    let run = case.init(&[]);
    run.assert_success();
    let mut lines = vec![
        "- Finding example.com/acme/widget versions matching \">= 1.0.0\"...".to_owned(),
        "- Finding latest version of hashicorp/alpha...".to_owned(),
    ];
    lines.extend(installing(&widget));
    lines.extend(installing(&alpha));
    assert_eq!(run.progress(), lines);
    assert_eq!(
        case.lock(),
        lock_text(&[
            (
                "example.com/acme/widget",
                "1.2.0",
                ">= 1.0.0",
                &[&widget.h1()]
            ),
            (
                "registry.terraform.io/hashicorp/alpha",
                "1.0.0",
                "",
                &[&alpha.h1()]
            ),
        ])
    );

    // The same configuration named by TF_CLI_CONFIG_FILE instead.
    let config = case.root.join("elsewhere.tfrc");
    std::fs::rename(case.home.join(".terraformrc"), &config).unwrap();
    std::fs::remove_dir_all(case.data()).unwrap();
    std::fs::remove_file(case.lock_path()).unwrap();
    let run = case
        .command(&["init"])
        .env("TF_CLI_CONFIG_FILE", &config)
        .output()
        .unwrap();
    Run::from(run).assert_success();
    assert_installed(&widget, &case.data().join("plugins"));
    assert_installed(&alpha, &case.data().join("plugins"));
}

#[test]
fn every_kind_of_module_requirement_is_collected() {
    let case = Project::new();
    case.write(
        "main.tf",
        r#"
terraform {
  required_providers {
    alpha = {
      source  = "hashicorp/alpha"
      version = "~> 1.0"
    }
    beta  = "2.0.0"
    delta = {
      version = ">= 1.0"
    }
    acme-widget = {
      source = "example.com/acme/widget"
    }
  }
}

provider "epsilon" {}

resource "zeta_thing" "one" {}

resource "widget_box" "two" {
  provider = acme-widget
}

data "terraform_remote_state" "net" {
  backend = "local"
}

module "child" {
  source = "./modules/child"
}

module "remote" {
  source  = "example/remote/aws"
  version = "1.0.0"
}
"#,
    );
    case.write(
        "extra.tf.json",
        r#"{"resource": {"theta_item": {"x": {}}}}"#,
    );
    case.write(
        "override.tf",
        "terraform {\n  required_providers {\n    beta = \">= 2.0.0\"\n  }\n}\n",
    );
    case.write(
        "modules/child/main.tf",
        r#"
terraform {
  required_providers {
    alpha = {
      source  = "hashicorp/alpha"
      version = "< 1.1.0"
    }
  }
}
"#,
    );
    case.write(
        ".terraform/modules/modules.json",
        r#"{"Modules":[{"Key":"","Source":"","Dir":"."},{"Key":"child","Source":"./modules/child","Dir":"modules/child"},{"Key":"remote","Source":"registry.terraform.io/example/remote/aws","Version":"1.0.0","Dir":".terraform/modules/remote"}]}"#,
    );
    case.write(
        ".terraform/modules/remote/main.tf",
        "resource \"eta_thing\" \"x\" {}\n",
    );

    let mirror = case.dir("mirror");
    let alpha = Pkg::fake("hashicorp/alpha", "1.0.5");
    alpha.write_packed(&mirror);
    Pkg::fake("hashicorp/alpha", "1.1.0").write_packed(&mirror);
    let beta = Pkg::fake("hashicorp/beta", "2.3.0");
    beta.write_packed(&mirror);
    let delta = Pkg::fake("hashicorp/delta", "1.0.0");
    let epsilon = Pkg::fake("hashicorp/epsilon", "1.0.0");
    let eta = Pkg::fake("hashicorp/eta", "1.0.0");
    let theta = Pkg::fake("hashicorp/theta", "1.0.0");
    let zeta = Pkg::fake("hashicorp/zeta", "1.0.0");
    let widget = Pkg::fake("example.com/acme/widget", "0.1.0");
    for pkg in [&delta, &epsilon, &eta, &theta, &zeta, &widget] {
        pkg.write_unpacked(&mirror);
    }

    let arg = format!("-plugin-dir={}", mirror.display());
    let run = case.init(&[&arg]);
    run.assert_success();
    let mut lines = vec![
        "- terraform.io/builtin/terraform is built in to Terraform".to_owned(),
        "- Finding latest version of example.com/acme/widget...".to_owned(),
        "- Finding hashicorp/alpha versions matching \"~> 1.0, < 1.1.0\"...".to_owned(),
        "- Finding hashicorp/beta versions matching \">= 2.0.0\"...".to_owned(),
        "- Finding hashicorp/delta versions matching \">= 1.0.0\"...".to_owned(),
        "- Finding latest version of hashicorp/epsilon...".to_owned(),
        "- Finding latest version of hashicorp/eta...".to_owned(),
        "- Finding latest version of hashicorp/theta...".to_owned(),
        "- Finding latest version of hashicorp/zeta...".to_owned(),
    ];
    for pkg in [
        &widget, &alpha, &beta, &delta, &epsilon, &eta, &theta, &zeta,
    ] {
        lines.extend(installing(pkg));
    }
    assert_eq!(run.progress(), lines);
    let r = |t: &str| format!("registry.terraform.io/hashicorp/{t}");
    assert_eq!(
        case.lock(),
        lock_text(&[
            ("example.com/acme/widget", "0.1.0", "", &[&widget.h1()]),
            (&r("alpha"), "1.0.5", "~> 1.0, < 1.1.0", &[&alpha.h1()]),
            (&r("beta"), "2.3.0", ">= 2.0.0", &[&beta.h1()]),
            (&r("delta"), "1.0.0", ">= 1.0.0", &[&delta.h1()]),
            (&r("epsilon"), "1.0.0", "", &[&epsilon.h1()]),
            (&r("eta"), "1.0.0", "", &[&eta.h1()]),
            (&r("theta"), "1.0.0", "", &[&theta.h1()]),
            (&r("zeta"), "1.0.0", "", &[&zeta.h1()]),
        ])
    );
}

/// A lock file for `pkgs`, as a previous run would have written it.
fn lock_for(pkgs: &[(&Pkg, &str)]) -> String {
    let blocks: Vec<String> = pkgs
        .iter()
        .map(|(pkg, constraints)| lock_block(&pkg.addr(), &pkg.version, constraints, &[pkg.h1()]))
        .collect();
    lock_file(&blocks)
}

#[test]
fn a_locked_older_version_is_kept_until_upgrade_moves_past_it() {
    let case = Project::new();
    case.write(
        "main.tf",
        "terraform {\n  required_providers {\n    alpha = {\n      source  = \"hashicorp/alpha\"\n      version = \">= 1.0.0\"\n    }\n  }\n}\n",
    );
    let mirror = case.dir("mirror");
    let old = Pkg::fake("hashicorp/alpha", "1.0.0");
    let new = Pkg::fake("hashicorp/alpha", "1.2.0");
    old.write_packed(&mirror);
    new.write_packed(&mirror);
    let locked = lock_for(&[(&old, ">= 1.0.0")]);
    case.write(".terraform.lock.hcl", &locked);
    let arg = format!("-plugin-dir={}", mirror.display());

    let run = case.init(&[&arg]);
    run.assert_success();
    assert_eq!(
        run.stdout,
        format!(
            "\nInitializing provider plugins...\n- Reusing previous version of hashicorp/alpha from the dependency lock file\n- Installing hashicorp/alpha v1.0.0...\n- Installed hashicorp/alpha v1.0.0 (unauthenticated)\n{SUCCESS}"
        )
    );
    assert_eq!(case.lock(), locked, "an unchanged lock is not rewritten");
    assert_installed(&old, &case.data().join("plugins"));

    let run = case.init(&[&arg, "-upgrade"]);
    run.assert_success();
    assert_eq!(
        run.stdout,
        expected_stdout(
            &[
                "- Finding hashicorp/alpha versions matching \">= 1.0.0\"...".to_owned(),
                "- Installing hashicorp/alpha v1.2.0...".to_owned(),
                "- Installed hashicorp/alpha v1.2.0 (unauthenticated)".to_owned(),
            ],
            CHANGED,
            &incomplete_warning(&["hashicorp/alpha"]),
        )
    );
    assert_eq!(case.lock(), lock_for(&[(&new, ">= 1.0.0")]));
    let plugins = case.data().join("plugins");
    assert_installed(&new, &plugins);
    assert_eq!(
        std::fs::read_to_string(plugins.join("selections.json")).unwrap(),
        selections_json(&[(&new, new.h1())])
    );
}

#[test]
fn a_second_run_changes_nothing() {
    let case = Project::new();
    case.write(
        "main.tf",
        "terraform {\n  required_providers {\n    alpha = \"~> 1.0\"\n    beta = { source = \"hashicorp/beta\" }\n  }\n}\n",
    );
    let mirror = case.dir("mirror");
    Pkg::fake("hashicorp/alpha", "1.0.0").write_packed(&mirror);
    Pkg::fake("hashicorp/beta", "1.0.0").write_unpacked(&mirror);
    let arg = format!("-plugin-dir={}", mirror.display());
    case.init(&[&arg]).assert_success();

    // Except tfinstall's memo of installed packages' hashes, which this run
    // may refresh: hashes taken right after writing are not trusted yet.
    let without_memo = |mut snapshot: Snapshot| {
        let memo = snapshot.entries.remove(".terraform/.tfinstall-hashes.json");
        assert!(memo.is_some(), "the memo is saved");
        snapshot
    };
    let before = without_memo(case.snapshot());
    let run = case.init(&[&arg]);
    run.assert_success();
    assert_eq!(
        run.stdout,
        format!(
            "\nInitializing provider plugins...\n- Reusing previous version of hashicorp/alpha from the dependency lock file\n- Reusing previous version of hashicorp/beta from the dependency lock file\n- Using previously-installed hashicorp/alpha v1.0.0\n- Using previously-installed hashicorp/beta v1.0.0\n{SUCCESS}"
        )
    );
    assert_eq!(run.stderr, "");
    assert_eq!(without_memo(case.snapshot()), before);
}

#[test]
fn providers_layout_installs_for_terraform_0_14_and_later() {
    for args in [
        &["-layout", "providers"][..],
        &["-layout=providers"][..],
        &["--layout", "providers"][..],
    ] {
        let case = Project::new();
        case.write("main.tf", "resource \"alpha_thing\" \"x\" {}\n");
        let mirror = case.dir("mirror");
        let alpha = Pkg::fake("hashicorp/alpha", "1.0.0").with_file("LICENSE", b"MIT\n", 0o600);
        alpha.write_packed(&mirror);
        let arg = format!("-plugin-dir={}", mirror.display());
        let mut all = vec![arg.as_str()];
        all.extend_from_slice(args);
        case.init(&all).assert_success();
        assert_installed(&alpha, &case.data().join("providers"));
        assert!(!case.data().join("plugins").exists(), "{args:?}");
        assert_eq!(
            case.lock(),
            lock_for(&[(&alpha, "")]),
            "the lock file does not depend on the layout"
        );
    }
}

#[test]
fn tf_data_dir_moves_the_installed_tree_but_not_the_lock_file() {
    let case = Project::new();
    case.write("main.tf", "provider \"alpha\" {}\n");
    let mirror = case.dir("mirror");
    let alpha = Pkg::fake("hashicorp/alpha", "1.0.0");
    alpha.write_unpacked(&mirror);
    let arg = format!("-plugin-dir={}", mirror.display());
    let run = case
        .command(&["init", &arg])
        .env("TF_DATA_DIR", "state/data")
        .output()
        .unwrap();
    Run::from(run).assert_success();
    let plugins = case.work.join("state/data/plugins");
    assert_installed(&alpha, &plugins);
    assert_eq!(
        std::fs::read_to_string(plugins.join("selections.json")).unwrap(),
        selections_json(&[(&alpha, alpha.h1())])
    );
    assert!(!case.data().exists());
    assert_eq!(case.lock(), lock_for(&[(&alpha, "")]));
}

#[test]
fn chdir_switches_the_working_directory_first() {
    let case = Project::new();
    case.write("infra/main.tf", "provider \"alpha\" {}\n");
    let mirror = case.dir("mirror");
    let alpha = Pkg::fake("hashicorp/alpha", "1.0.0");
    alpha.write_packed(&mirror);
    let mut command = tfinstall_command(&case.home);
    command
        .current_dir(&case.work)
        .args(["-chdir=infra", "init"])
        .arg(format!("-plugin-dir={}", mirror.display()));
    Run::from(command.output().unwrap()).assert_success();
    assert_installed(&alpha, &case.work.join("infra/.terraform/plugins"));
    assert!(case.work.join("infra/.terraform.lock.hcl").is_file());
    assert!(!case.data().exists());

    // As in Terraform, the implied terraform.d/plugins directory is found
    // relative to where the command started, not to -chdir's directory.
    let beta = Pkg::fake("hashicorp/beta", "1.0.0");
    beta.write_unpacked(&case.work.join("terraform.d/plugins"));
    Pkg::fake("hashicorp/beta", "2.0.0")
        .write_unpacked(&case.work.join("infra/terraform.d/plugins"));
    case.write("infra/main.tf", "provider \"beta\" {}\n");
    let mut command = tfinstall_command(&case.home);
    command
        .current_dir(&case.work)
        .args(["-chdir=infra", "init"]);
    Run::from(command.output().unwrap()).assert_success();
    assert_installed(&beta, &case.work.join("infra/.terraform/plugins"));
}

#[test]
fn lock_file_keeps_hashes_sorted_and_constraints_canonical() {
    let case = Project::new();
    case.write(
        "main.tf",
        r#"
terraform {
  required_providers {
    alpha = { source = "hashicorp/alpha", version = ">=1.0,<2" }
    beta  = { source = "hashicorp/beta", version = "1.0.0" }
  }
}
"#,
    );
    let mirror = case.dir("mirror");
    let alpha = Pkg::fake("hashicorp/alpha", "1.5.0");
    alpha.write_packed(&mirror);
    let beta = Pkg::fake("hashicorp/beta", "1.0.0");
    beta.write_packed(&mirror);
    // The previous run recorded only the zip's legacy hash for alpha, and a
    // stale constraint string for beta; Terraform keeps both until the
    // hashes change.
    let previous = lock_text(&[
        (
            "registry.terraform.io/hashicorp/alpha",
            "1.5.0",
            ">= 1.0.0, < 2.0.0",
            &[&alpha.zh()],
        ),
        (
            "registry.terraform.io/hashicorp/beta",
            "1.0.0",
            "~> 0.9",
            &[&beta.h1()],
        ),
    ]);
    case.write(".terraform.lock.hcl", &previous);
    let arg = format!("-plugin-dir={}", mirror.display());
    let run = case.init(&[&arg]);
    // alpha gained a hash; beta's only hash was computed locally again.
    run.assert_success().assert_stdout_has(&format!(
        "{CHANGED}{}",
        incomplete_warning(&["hashicorp/beta"])
    ));
    let mut alpha_hashes = [alpha.h1(), alpha.zh()];
    alpha_hashes.sort();
    assert_eq!(
        case.lock(),
        lock_text(&[
            (
                "registry.terraform.io/hashicorp/alpha",
                "1.5.0",
                ">= 1.0.0, < 2.0.0",
                &[&alpha_hashes[0], &alpha_hashes[1]],
            ),
            (
                "registry.terraform.io/hashicorp/beta",
                "1.0.0",
                "1.0.0",
                &[&beta.h1()],
            ),
        ])
    );
}

#[test]
fn providers_no_longer_required_leave_the_lock_file() {
    let case = Project::new();
    case.write("main.tf", "# nothing here yet\n");
    let old = Pkg::fake("hashicorp/old", "1.0.0");
    case.write(".terraform.lock.hcl", &lock_for(&[(&old, "")]));
    let run = case.init(&["-plugin-dir=nowhere"]);
    run.assert_success();
    assert_eq!(
        run.stdout,
        format!("\nInitializing provider plugins...\n{CHANGED}{SUCCESS}")
    );
    assert_eq!(case.lock(), lock_text(&[]));
}

#[test]
fn readonly_lock_file_is_checked_but_never_written() {
    let case = Project::new();
    case.write("main.tf", "provider \"alpha\" {}\n");
    let mirror = case.dir("mirror");
    let alpha = Pkg::fake("hashicorp/alpha", "1.0.0");
    alpha.write_packed(&mirror);
    let arg = format!("-plugin-dir={}", mirror.display());

    // Only the legacy hash recorded: the new h1 is a change that is not saved.
    let zh_only = lock_text(&[(
        "registry.terraform.io/hashicorp/alpha",
        "1.0.0",
        "",
        &[&alpha.zh()],
    )]);
    case.write(".terraform.lock.hcl", &zh_only);
    let lock_modified = std::fs::metadata(case.lock_path())
        .unwrap()
        .modified()
        .unwrap();
    let run = case.init(&[&arg, "-lockfile=readonly"]);
    run.assert_success().assert_stdout_has(
        "\nWarning: Provider lock file not updated\n\nChanges to the provider selections were detected, but not saved in the .terraform.lock.hcl file. To record these selections, run \"terraform init\" without the \"-lockfile=readonly\" flag.\n",
    );
    assert!(!run.stdout.contains("Terraform has"), "{}", run.stdout);
    assert_eq!(case.lock(), zh_only);
    assert_eq!(
        std::fs::metadata(case.lock_path())
            .unwrap()
            .modified()
            .unwrap(),
        lock_modified
    );
    assert_installed(&alpha, &case.data().join("plugins"));

    // A matching lock: nothing to say.
    let full = lock_for(&[(&alpha, "")]);
    case.write(".terraform.lock.hcl", &full);
    let run = case.init(&[&arg, "-lockfile=readonly"]);
    run.assert_success();
    assert!(!run.stdout.contains("Warning"), "{}", run.stdout);
    assert_eq!(case.lock(), full);

    // Any other value of -lockfile is accepted and means nothing.
    case.init(&[&arg, "-lockfile=whatever"]).assert_success();
    assert_eq!(case.lock(), full);
}

#[test]
fn readonly_lock_file_refuses_a_different_set_of_providers() {
    let case = Project::new();
    let mirror = case.dir("mirror");
    let alpha = Pkg::fake("hashicorp/alpha", "1.0.0");
    let beta = Pkg::fake("hashicorp/beta", "1.0.0");
    alpha.write_packed(&mirror);
    beta.write_packed(&mirror);
    let arg = format!("-plugin-dir={}", mirror.display());
    let refused = "Error: Provider dependency changes detected\n\nChanges to the required provider dependencies were detected, but the lock file is read-only. To use and record these requirements, run \"terraform init\" without the \"-lockfile=readonly\" flag.\n";

    // A new provider, with no lock file at all. The package was verified
    // and reported, and the output says plainly that it was not kept.
    case.write("main.tf", "provider \"alpha\" {}\n");
    let before = case.snapshot();
    case.init(&[&arg, "-lockfile=readonly"])
        .assert_failure()
        .assert_stdout_has("- Installed hashicorp/alpha v1.0.0")
        .assert_stderr_has(refused)
        .assert_stderr_has("None of the providers reported as installed above were kept");
    assert_eq!(case.snapshot(), before);
    let json = case.init(&[&arg, "-lockfile=readonly", "-json"]);
    json.assert_failure();
    let summary: serde_json::Value =
        serde_json::from_str(json.stdout.lines().last().expect("summary line")).unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["providers"]["installed"], 0);
    assert_eq!(summary["providers"]["discarded"], 1);
    assert_eq!(case.snapshot(), before);

    // A provider the configuration no longer uses.
    case.write(
        ".terraform.lock.hcl",
        &lock_for(&[(&alpha, ""), (&beta, "")]),
    );
    let before = case.snapshot();
    case.init(&[&arg, "-lockfile=readonly"])
        .assert_failure()
        .assert_stderr_has(refused);
    assert_eq!(case.snapshot(), before);

    // -upgrade cannot be combined with it.
    case.init(&[&arg, "-lockfile=readonly", "-upgrade"])
        .assert_failure()
        .assert_stderr_has(
            "Error: Invalid command-line option\n\nThe -upgrade flag conflicts with -lockfile=readonly.\n",
        );
    assert_eq!(case.snapshot(), before);
}

/// Terraform's own fake packages from `internal/command/init_test.go`, whose
/// `h1:` values upstream asserts.
#[test]
fn terraform_init_test_fake_packages_hash_to_the_upstream_values() {
    let case = Project::new();
    case.write(
        "main.tf",
        r#"
terraform {
  required_providers {
    test      = { source = "hashicorp/test", version = "1.2.3" }
    foobar    = { source = "hashicorp/foobar", version = "9.9.9" }
    test-beta = { source = "hashicorp/test-beta", version = "1.2.4" }
  }
}
"#,
    );
    let mirror = case.dir("mirror");
    Pkg::fake("hashicorp/test", "1.2.3").write_packed(&mirror);
    Pkg::fake("hashicorp/foobar", "9.9.9").write_unpacked(&mirror);
    Pkg::fake("hashicorp/test-beta", "1.2.4").write_packed(&mirror);
    let arg = format!("-plugin-dir={}", mirror.display());
    case.init(&[&arg]).assert_success();
    assert_eq!(
        case.lock(),
        lock_text(&[
            (
                "registry.terraform.io/hashicorp/foobar",
                "9.9.9",
                "9.9.9",
                &["h1:cHfrPr8b4Wjf8x014vgi4H3qQ6tOd+vEVchLY0PnuFE="]
            ),
            (
                "registry.terraform.io/hashicorp/test",
                "1.2.3",
                "1.2.3",
                &["h1:wlbEC2mChQZ2hhgUhl6SeVLPP7fMqOFUZAQhQ9GIIno="]
            ),
            (
                "registry.terraform.io/hashicorp/test-beta",
                "1.2.4",
                "1.2.4",
                &["h1:see6W06w09Ea+AobFJ+mbvPTie6ASqZAAdlFZbs8BSM="]
            ),
        ])
    );
}

const UPSTREAM: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/testdata/vectors/hashicorp/terraform/internal"
);

/// Every upstream package tree with an `h1:` vector (Terraform's testdata
/// under `internal/getproviders` and `internal/providercache`), installed
/// from an unpacked mirror under this platform's name (the hash covers only
/// file names and contents), plus the upstream package zip from a packed
/// mirror. Each goes under an address of its own so that one run installs
/// them all.
#[test]
fn upstream_package_trees_hash_to_the_spec_vectors() {
    let case = Project::new();
    let mirror = case.dir("mirror");
    let platform = current_platform();
    let fs_mirror = format!("{UPSTREAM}/getproviders/testdata/filesystem-mirror");
    let search = format!("{UPSTREAM}/getproviders/testdata/search-local-directory");
    let cache = format!("{UPSTREAM}/providercache/testdata");
    let trees = [
        (
            format!("{fs_mirror}/registry.terraform.io/hashicorp/null/2.0.0/linux_amd64"),
            "registry.terraform.io/hashicorp/null",
            "2.0.0",
            "h1:qjsREM4DqEWECD43FcPqddZ9oxCG+IaMTxvWPciS05g=",
        ),
        (
            format!("{fs_mirror}/registry.terraform.io/hashicorp/null/2.0.0/windows_amd64"),
            "example.org/windows/null",
            "2.0.0",
            "h1:kGhswZiaZEZCbem7JPB+GCzba57SfLtNV20LNIBP1CU=",
        ),
        (
            format!("{fs_mirror}/registry.terraform.io/hashicorp/random/1.2.0/linux_amd64"),
            "registry.terraform.io/hashicorp/random",
            "1.2.0",
            "h1:qWk5Hr1Xw9sEbxS5zNAhmVPxQtius4R/4hrOPgH1sDY=",
        ),
        (
            format!("{fs_mirror}/registry.terraform.io/hashicorp/random-beta/1.2.0/linux_amd64"),
            "registry.terraform.io/hashicorp/random-beta",
            "1.2.0",
            "h1:N8DD/Gk20FXTX4vRLCU4ALq0CPQfRzROct61H9xIPl8=",
        ),
        (
            format!(
                "{fs_mirror}/tfe.example.com/AwesomeCorp/happycloud/0.1.0-alpha.2/darwin_amd64"
            ),
            "tfe.example.com/awesomecorp/happycloud",
            "0.1.0-alpha.2",
            "h1:HEMwKd3ofW3IXaAaIb5PPn0zsRUAbMK8UxZCtLQthVI=",
        ),
        (
            format!("{search}/underscore-namespace/example.com/my_org/foo/1.0.0/linux_amd64"),
            "example.com/my_org/foo",
            "1.0.0",
            "h1:8ygrogzMaTqDHjmGr+KBPZvyF+15qct2NVKfi19JHRI=",
        ),
        (
            format!("{search}/symlinks/real/example.com/foo/bar/1.0.0/linux_amd64"),
            "example.com/foo/bar",
            "1.0.0",
            "h1:6cU1EXqJ1xuhhaeWD2wav+GdmtD70XFXAO+QJpFtU/E=",
        ),
        (
            format!("{cache}/beep-provider"),
            "registry.terraform.io/hashicorp/beep",
            "1.0.0",
            "h1:2y06Ykj0FRneZfGCTxI9wRTori8iB7ZL5kQ6YyEnh84=",
        ),
        (
            format!("{cache}/beep-provider-other-platform"),
            "example.org/other/beep",
            "1.0.0",
            "h1:McUbAIn350hdBfTeZ3GjDCUEpGAwQwVNbIafx83zoH8=",
        ),
    ];
    let mut required = String::new();
    for (index, (from, addr, version, _)) in trees.iter().enumerate() {
        copy_fixture_tree(
            Path::new(from),
            &mirror.join(addr).join(version).join(&platform),
        );
        required.push_str(&format!(
            "    p{index} = {{ source = \"{addr}\", version = \"{version}\" }}\n"
        ));
    }
    let zipped = mirror.join("example.org/zipped/null");
    std::fs::create_dir_all(&zipped).unwrap();
    std::fs::copy(
        format!("{cache}/terraform-provider-null_2.1.0_linux_amd64.zip"),
        zipped.join(format!("terraform-provider-null_2.1.0_{platform}.zip")),
    )
    .unwrap();
    required.push_str("    zipped = { source = \"example.org/zipped/null\" }\n");
    case.write(
        "main.tf",
        &format!("terraform {{\n  required_providers {{\n{required}  }}\n}}\n"),
    );
    // A mirror vouches for nothing, so the zip's zh: reaches the lock only
    // when it was there before, and then the zip must match it.
    let zh = "zh:299dd806df78cb0537e5c111019eaca6e6b7797e1b63cb37cc6a76f91c6c0782";
    case.write(
        ".terraform.lock.hcl",
        &lock_text(&[("example.org/zipped/null", "2.1.0", "", &[zh])]),
    );
    let arg = format!("-plugin-dir={}", mirror.display());
    case.init(&[&arg]).assert_success();

    let lock = case.lock();
    let mut expected: Vec<(&str, &str, &str, Vec<&str>)> = trees
        .iter()
        .map(|(_, addr, version, h1)| (*addr, *version, *version, vec![*h1]))
        .collect();
    expected.push((
        "example.org/zipped/null",
        "2.1.0",
        "",
        vec!["h1:qjsREM4DqEWECD43FcPqddZ9oxCG+IaMTxvWPciS05g=", zh],
    ));
    expected.sort_by_key(|(addr, ..)| {
        let (host, rest) = addr.split_once('/').unwrap();
        (host.to_owned(), rest.to_owned())
    });
    let rows: Vec<(&str, &str, &str, &[&str])> = expected
        .iter()
        .map(|(a, v, c, h)| (*a, *v, *c, h.as_slice()))
        .collect();
    assert_eq!(lock, lock_text(&rows));
}

/// The README's example: the bundled configuration and the mirror beside it.
#[test]
fn the_bundled_example_installs_offline() {
    let case = Project::new();
    copy_fixture_tree(
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/example")),
        &case.work.join("example"),
    );
    let run = |args: &[&str]| {
        let mut command = tfinstall_command(&case.home);
        command
            .current_dir(&case.work)
            .args(["-chdir=example", "init", "-plugin-dir=mirror"])
            .args(args);
        Run::from(command.output().unwrap())
    };
    let first = run(&[]);
    first.assert_success().assert_stdout_has(CREATED);
    assert_eq!(
        first.progress(),
        [
            "- network in modules/network",
            "- Finding example.com/acme/widget versions matching \">= 1.0.0\"...",
            "- Finding latest version of hashicorp/null...",
            "- Finding hashicorp/random versions matching \"~> 3.5, < 3.6.0\"...",
            "- Installing example.com/acme/widget v1.4.0...",
            "- Installed example.com/acme/widget v1.4.0 (unauthenticated)",
            "- Installing hashicorp/null v3.2.2...",
            "- Installed hashicorp/null v3.2.2 (unauthenticated)",
            "- Installing hashicorp/random v3.5.1...",
            "- Installed hashicorp/random v3.5.1 (unauthenticated)",
        ]
    );
    let lock = std::fs::read_to_string(case.work.join("example/.terraform.lock.hcl")).unwrap();
    for label in [
        "provider \"example.com/acme/widget\" {\n  version     = \"1.4.0\"\n  constraints = \">= 1.0.0\"\n",
        "provider \"registry.terraform.io/hashicorp/null\" {\n  version = \"3.2.2\"\n",
        "provider \"registry.terraform.io/hashicorp/random\" {\n  version     = \"3.5.1\"\n  constraints = \"~> 3.5, < 3.6.0\"\n",
    ] {
        assert!(lock.contains(label), "{label}\n{lock}");
    }
    let second = run(&["-lockfile=readonly"]);
    second.assert_success();
    assert_eq!(
        second.progress().last().copied(),
        Some("- Using previously-installed hashicorp/random v3.5.1")
    );
}

/// Terraform's words for a directory without configuration files, with
/// tfinstall named where Terraform names itself (issue 22).
const EMPTY: &str = "\ntfinstall initialized in an empty directory!\n\nThe directory has no Terraform configuration files. You may begin working\nwith Terraform immediately by creating Terraform configuration files.\n";

#[test]
fn an_empty_directory_is_initialized_with_nothing_written() {
    let case = Project::new();
    let mirror = case.dir("mirror");
    let alpha = Pkg::fake("hashicorp/alpha", "1.0.0");
    alpha.write_packed(&mirror);
    let arg = format!("-plugin-dir={}", mirror.display());
    // Not configuration, for Terraform either: test files, notes, backups.
    case.write("main.tftest.hcl", "run \"plan\" {\n  command = plan\n}\n");
    case.write("README.md", "Notes.\n");
    case.write("main.tf~", "provider \"alpha\" {}\n");
    let before = Snapshot::of(&case.work);

    let run = case.init(&[&arg]);
    run.assert_success();
    assert_eq!(run.stdout, EMPTY);
    assert_eq!(run.stderr, "");
    assert_eq!(Snapshot::of(&case.work), before, "nothing is written");

    // Terraform's message code and words; the summary says why nothing
    // was installed.
    let json = case.init(&[&arg, "-json"]);
    json.assert_success();
    let stream = validated_stream(json.stdout.as_bytes());
    let kinds: Vec<&str> = stream.iter().map(|m| m["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["version", "init_output", "summary"]);
    assert_eq!(stream[1]["message_code"], "output_init_empty_message");
    assert_eq!(
        stream[1]["@message"],
        EMPTY
            .trim()
            .replace("tfinstall initialized", "Terraform initialized")
    );
    assert_eq!(stream[2]["success"], true);
    assert_eq!(stream[2]["empty_directory"], true);
    assert_eq!(stream[2]["lock_file"], "unchanged");
    assert_eq!(Snapshot::of(&case.work), before, "nothing is written");

    // What an earlier configuration installed stays as it was: the lock
    // file, .terraform and its plugin_path (which Terraform 1.11 rewrites
    // from -plugin-dir even here; tfinstall writes nothing where there is
    // nothing to install).
    case.write("main.tf", "provider \"alpha\" {}\n");
    case.init(&[&arg])
        .assert_success()
        .assert_stdout_has(SUCCESS);
    std::fs::remove_file(case.work.join("main.tf")).unwrap();
    let before = Snapshot::of(&case.work);
    let run = case.init(&["-plugin-dir="]);
    run.assert_success();
    assert_eq!(run.stdout, EMPTY);
    assert_eq!(Snapshot::of(&case.work), before);
    assert!(case.data().join("plugin_path").is_file());
}

#[test]
fn a_module_read_by_an_earlier_run_warns_the_same_and_a_changed_file_is_read_again() {
    let case = Project::new();
    case.write(
        "main.tf",
        "module \"child\" {\n  source = \"./modules/child\"\n}\n",
    );
    let child = case.write(
        "modules/child/main.tf",
        "provider \"alpha\" {\n  version = \"~> 1.0\"\n}\n",
    );
    let mirror = case.dir("mirror");
    Pkg::fake("hashicorp/alpha", "1.0.0").write_packed(&mirror);
    Pkg::fake("hashicorp/beta", "1.0.0").write_packed(&mirror);
    let arg = format!("-plugin-dir={}", mirror.display());
    let warning = |run: &Run| -> String {
        let (_, warning) = run
            .stdout
            .split_once(
                "Warning: Version constraints inside provider configuration blocks are deprecated",
            )
            .unwrap_or_else(|| panic!("no deprecation warning in:\n{}", run.stdout));
        let end = "into the required_providers block.";
        let (warning, _) = warning.split_once(end).expect("the warning's detail");
        format!("{warning}{end}")
    };

    let first = case.init(&[&arg]);
    first.assert_success();
    assert!(
        warning(&first).contains("on modules/child/main.tf line 2, in provider \"alpha\":")
            && warning(&first).contains("2:   version = \"~> 1.0\""),
        "the warning quotes its source line:\n{}",
        first.stdout
    );
    let kept = case.data().join(".tfinstall-readings.json");
    assert!(kept.is_file(), "the readings are kept for the next run");

    // The second run takes both modules' readings from the first: the same
    // warning, quoting the same line, and nothing rewritten.
    let kept_before = std::fs::read(&kept).expect("readings");
    let data_changed = || {
        std::fs::metadata(case.data())
            .and_then(|meta| meta.modified())
            .expect("the data directory's mtime")
    };
    // Past the window in which a file's stamp cannot tell a later write
    // from the install (the second run hashes the packages again and
    // records stamps it can trust from then on).
    std::thread::sleep(std::time::Duration::from_millis(50));
    let second = case.init(&[&arg]);
    second.assert_success();
    assert_eq!(warning(&second), warning(&first));
    assert_eq!(std::fs::read(&kept).expect("readings"), kept_before);
    // The run after that has nothing to write at all: it makes nothing in
    // the data directory, not even a staging area.
    let data_before = data_changed();
    case.init(&[&arg]).assert_success();
    assert_eq!(
        data_changed(),
        data_before,
        "a run with nothing to do makes nothing in the data directory"
    );

    // A file changed to other bytes of the same length, its modification
    // time put back, is still read again: readings are kept by content.
    let modified = std::fs::metadata(&child)
        .and_then(|meta| meta.modified())
        .expect("mtime");
    let same_length = "provider \"beta\" {\n  versionx = \"~> 1.0\"\n}\n";
    assert_eq!(
        same_length.len(),
        std::fs::metadata(&child).expect("size").len() as usize
    );
    std::fs::write(&child, same_length).expect("rewrite the module");
    std::fs::File::options()
        .write(true)
        .open(&child)
        .and_then(|file| file.set_modified(modified))
        .expect("put the mtime back");
    let third = case.init(&[&arg]);
    third.assert_success();
    assert!(
        third
            .stdout
            .contains("- Installing hashicorp/beta v1.0.0...")
            && !third.stdout.contains("deprecated"),
        "the changed module was read again:\n{}",
        third.stdout
    );
}
