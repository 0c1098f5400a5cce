//! `tfinstall init` on bad input, local mirrors only. Every case starts from
//! a finished install, breaks one thing, and checks both the message (which
//! must name the file or provider) and that `.terraform/` and the lock file
//! are exactly as before: paths, bytes, modes and modification times.

mod support;

use support::*;

/// A working directory that `init -plugin-dir=mirror` has already installed:
/// alpha 1.0.0 (packed, `~> 1.0`) and beta 2.0.0 (unpacked).
struct Installed {
    case: Project,
    mirror: std::path::PathBuf,
    arg: String,
    alpha: Pkg,
    beta: Pkg,
}

const MAIN_TF: &str = r#"terraform {
  required_providers {
    alpha = {
      source  = "hashicorp/alpha"
      version = "~> 1.0"
    }
    beta = {
      source = "hashicorp/beta"
    }
  }
}
"#;

impl Installed {
    fn new() -> Installed {
        let case = Project::new();
        case.write("main.tf", MAIN_TF);
        let mirror = case.dir("mirror");
        let alpha = Pkg::fake("hashicorp/alpha", "1.0.0");
        alpha.write_packed(&mirror);
        let beta = Pkg::fake("hashicorp/beta", "2.0.0");
        beta.write_unpacked(&mirror);
        let arg = format!("-plugin-dir={}", mirror.display());
        case.init(&[&arg]).assert_success();
        assert!(case.lock_path().is_file());
        Installed {
            case,
            mirror,
            arg,
            alpha,
            beta,
        }
    }

    /// Runs init with `args` after the plugin dir, expecting exit 1 and no
    /// change at all to what init owns.
    #[track_caller]
    fn fails(&self, args: &[&str]) -> Run {
        let mut all = vec![self.arg.as_str()];
        all.extend_from_slice(args);
        let run = self.case.init_failing(&all);
        assert!(
            !run.stderr.contains("panicked"),
            "no panic on bad input: {}",
            run.stderr
        );
        run
    }
}

#[test]
fn unparsable_hcl_names_the_file_and_line() {
    let t = Installed::new();
    t.case.write(
        "network.tf",
        "resource \"alpha_net\" \"x\" {\n  name = \"a\"\n  tags = {\n}\n",
    );
    let run = t.fails(&[]);
    run.assert_stderr_has("on network.tf line");
    assert!(
        !run.stdout.contains("Initializing provider plugins"),
        "configuration errors stop before installing: {}",
        run.stdout
    );
}

#[test]
fn unparsable_hcl_in_a_child_module_names_its_path() {
    let t = Installed::new();
    t.case.write(
        "main.tf",
        &format!("{MAIN_TF}\nmodule \"child\" {{\n  source = \"./modules/child\"\n}}\n"),
    );
    t.case.write(
        "modules/child/main.tf",
        "terraform {\n  required_providers {\n    = \"x\"\n  }\n}\n",
    );
    t.fails(&[])
        .assert_stderr_has("on modules/child/main.tf line 3");
}

#[test]
fn invalid_json_configuration_names_the_file() {
    let t = Installed::new();
    t.case.write(
        "extra.tf.json",
        "{\n  \"resource\": {\n    \"alpha_x\": [\n}\n",
    );
    t.fails(&[]).assert_stderr_has("extra.tf.json");
}

#[test]
fn malformed_source_addresses_name_the_file_and_line() {
    let t = Installed::new();
    t.case.write(
        "main.tf",
        "terraform {\n  required_providers {\n    alpha = {\n      source = \"hashicorp/alpha/extra/parts\"\n    }\n  }\n}\n",
    );
    t.fails(&[]).assert_stderr_has(
        "Error: Invalid provider source string\n\n  on main.tf line 4:\n\nThe \"source\" attribute must be in the format \"[hostname/][namespace/]name\"\n",
    );

    t.case.write(
        "main.tf",
        "terraform {\n  required_providers {\n    alpha = {\n      source = \"hashi corp/alpha\"\n    }\n  }\n}\n",
    );
    let run = t.fails(&[]);
    run.assert_stderr_has("Error: Invalid provider namespace\n\n  on main.tf line 4:\n");
    run.assert_stderr_has("\"hashi corp/alpha\"");
}

#[test]
fn invalid_version_constraint_names_the_file_and_line() {
    let t = Installed::new();
    t.case.write(
        "main.tf",
        "terraform {\n  required_providers {\n    alpha = {\n      source  = \"hashicorp/alpha\"\n      version = \"=> 1.0\"\n    }\n  }\n}\n",
    );
    t.fails(&[])
        .assert_stderr_has("Error: Invalid version constraint\n\n  on main.tf line 5:\n");
}

#[test]
fn constraints_that_nothing_satisfies_name_the_provider() {
    let t = Installed::new();
    t.case.write(
        "main.tf",
        "terraform {\n  required_providers {\n    alpha = { source = \"hashicorp/alpha\", version = \">= 9.0\" }\n    beta = { source = \"hashicorp/beta\" }\n  }\n}\n",
    );
    // The lock pins 1.0.0, which the new constraint excludes.
    t.fails(&[]).assert_stderr_has(
        "Error: Failed to query available provider packages\n\nCould not retrieve the list of available versions for provider hashicorp/alpha: locked provider registry.terraform.io/hashicorp/alpha 1.0.0 does not match configured version constraint >= 9.0.0; must use terraform init -upgrade to allow selection of new versions",
    );
    t.fails(&["-upgrade"]).assert_stderr_has(
        "Error: Failed to query available provider packages\n\nCould not retrieve the list of available versions for provider hashicorp/alpha: no available releases match the given constraints >= 9.0.0",
    );
}

#[test]
fn a_child_module_whose_constraint_conflicts_with_the_root_is_reported() {
    let t = Installed::new();
    t.case.write(
        "main.tf",
        &format!("{MAIN_TF}\nmodule \"child\" {{\n  source = \"./modules/child\"\n}}\n"),
    );
    t.case.write(
        "modules/child/main.tf",
        "terraform {\n  required_providers {\n    alpha = { source = \"hashicorp/alpha\", version = \">= 2.0.0\" }\n  }\n}\n",
    );
    t.fails(&["-upgrade"]).assert_stderr_has(
        "provider hashicorp/alpha: no available releases match the given constraints ~> 1.0, >= 2.0.0",
    );
}

#[test]
fn a_corrupt_zip_in_a_packed_mirror_names_the_provider_and_installs_nothing() {
    let t = Installed::new();
    // A new version the lock does not know yet, so -upgrade must install it
    // and finds a broken archive; beta (fine) must not be installed either.
    let zip = Pkg::fake("hashicorp/alpha", "1.1.0").write_packed(&t.mirror);
    std::fs::write(&zip, b"PK\x03\x04 this is not really a zip file").unwrap();
    Pkg::fake("hashicorp/beta", "2.1.0").write_unpacked(&t.mirror);
    let run = t.fails(&["-upgrade"]);
    run.assert_stderr_has(&format!(
        "Error: Failed to install provider\n\nError while installing hashicorp/alpha v1.1.0: {} is not a valid zip archive",
        zip.display()
    ));
    assert!(
        !run.stderr.contains("hashicorp/beta"),
        "only the broken provider is reported: {}",
        run.stderr
    );
}

#[test]
fn the_upstream_non_zip_vector_is_refused() {
    let t = Installed::new();
    let upstream = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/vectors/hashicorp/terraform/internal/getproviders/testdata/filesystem-mirror/registry.terraform.io/hashicorp/null/terraform-provider-null_2.1.0_linux_amd64.zip"
    );
    let dir = t.mirror.join("registry.terraform.io/hashicorp/null");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        upstream,
        dir.join(format!(
            "terraform-provider-null_2.1.0_{}.zip",
            current_platform()
        )),
    )
    .unwrap();
    t.case.write(
        "main.tf",
        &format!("{MAIN_TF}\nresource \"null_resource\" \"x\" {{}}\n"),
    );
    t.fails(&[]).assert_stderr_has(&format!(
        "Error while installing hashicorp/null v2.1.0: {} is not a valid zip archive",
        dir.join(format!(
            "terraform-provider-null_2.1.0_{}.zip",
            current_platform()
        ))
        .display()
    ));
}

#[test]
fn a_package_without_its_executable_is_refused() {
    let t = Installed::new();
    // The upstream `missing/executable` vector: one file, wrongly named.
    let dir = t
        .mirror
        .join("registry.terraform.io/missing/executable/2.0.0")
        .join(current_platform());
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("executable"), b"#!/bin/sh\n").unwrap();
    t.case.write(
        "main.tf",
        "terraform {\n  required_providers {\n    executable = { source = \"missing/executable\" }\n  }\n}\n",
    );
    t.fails(&[]).assert_stderr_has(
        "Error while installing missing/executable v2.0.0: provider binary not found: could not find executable file starting with terraform-provider-executable\n",
    );
}

#[test]
fn a_packed_package_that_disagrees_with_the_lock_file_is_refused() {
    let t = Installed::new();
    // Someone replaced alpha 1.0.0 in the mirror, and the installed copy is
    // gone, so the mirror's package is checked against the lock.
    Pkg::fake("hashicorp/alpha", "1.0.0")
        .with_file("backdoor", b"evil\n", 0o755)
        .write_packed(&t.mirror);
    std::fs::remove_dir_all(
        t.alpha
            .package_dir(&t.case.data().join("plugins"))
            .parent()
            .unwrap(),
    )
    .unwrap();
    t.fails(&[]).assert_stderr_has(
        "Error: Failed to install provider\n\nError while installing hashicorp/alpha v1.0.0: the current package for registry.terraform.io/hashicorp/alpha 1.0.0 doesn't match any of the checksums previously recorded in the dependency lock file; for more information: https://developer.hashicorp.com/terraform/language/files/dependency-lock#checksum-verification\n",
    );
}

#[test]
fn an_unpacked_package_that_disagrees_with_the_lock_file_is_refused() {
    let t = Installed::new();
    // The lock records some other package for beta 2.0.0: the installed copy
    // no longer matches it, and neither does the mirror's.
    let lock = t.case.lock().replace(
        &t.beta.h1(),
        "h1:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
    );
    t.case.write(".terraform.lock.hcl", &lock);
    t.fails(&[]).assert_stderr_has(
        "Error while installing hashicorp/beta v2.0.0: the local package for registry.terraform.io/hashicorp/beta 2.0.0 doesn't match any of the checksums previously recorded in the dependency lock file (this might be because the available checksums are for packages targeting different platforms); for more information: https://developer.hashicorp.com/terraform/language/files/dependency-lock#checksum-verification\n",
    );
}

#[test]
fn a_provider_not_found_lists_every_searched_location() {
    let t = Installed::new();
    t.case
        .write("main.tf", &format!("{MAIN_TF}\nprovider \"gamma\" {{}}\n"));
    let other = t.case.dir("other");
    let other_arg = format!("-plugin-dir={}", other.display());
    t.fails(&[&other_arg]).assert_stderr_has(&format!(
        "Error: Failed to query available provider packages\n\nCould not retrieve the list of available versions for provider hashicorp/gamma: provider registry.terraform.io/hashicorp/gamma was not found in any of the search locations\n\n  - {}\n  - {}\n",
        t.mirror.display(),
        other.display()
    ));
}

#[test]
fn a_provider_not_found_in_cli_config_mirrors_lists_them() {
    let t = Installed::new();
    t.case
        .write("main.tf", &format!("{MAIN_TF}\nprovider \"gamma\" {{}}\n"));
    let config = t.case.root.join("cli.tfrc");
    std::fs::write(
        &config,
        format!(
            "provider_installation {{\n  filesystem_mirror {{\n    path = \"{}\"\n  }}\n}}\n",
            t.mirror.display()
        ),
    )
    .unwrap();
    let before = t.case.snapshot();
    let run = Run::from(
        t.case
            .command(&["init"])
            .env("TF_CLI_CONFIG_FILE", &config)
            .output()
            .unwrap(),
    );
    run.assert_failure().assert_stderr_has(&format!(
        "provider registry.terraform.io/hashicorp/gamma was not found in any of the search locations\n\n  - {}\n",
        t.mirror.display()
    ));
    assert_eq!(t.case.snapshot(), before);
}

#[test]
fn a_package_missing_for_this_platform_says_so() {
    let t = Installed::new();
    Pkg::fake("hashicorp/alpha", "1.5.0").write_unpacked(&t.mirror);
    let here = current_platform();
    let elsewhere = if here == "plan9_mips" {
        "linux_amd64"
    } else {
        "plan9_mips"
    };
    let dir = t.mirror.join("registry.terraform.io/hashicorp/alpha/1.5.0");
    std::fs::rename(dir.join(&here), dir.join(elsewhere)).unwrap();
    t.fails(&["-upgrade"]).assert_stderr_has(&format!(
        "Error: Incompatible provider version\n\nProvider registry.terraform.io/hashicorp/alpha v1.5.0 does not have a package available for your current platform, {here}.\n"
    ));
}

#[test]
fn an_unreadable_lock_file_names_the_file_and_line() {
    let t = Installed::new();
    let lock = t
        .case
        .lock()
        .replace("version     = \"1.0.0\"", "version     = \"1.0\"");
    t.case.write(".terraform.lock.hcl", &lock);
    let run = t.fails(&[]);
    run.assert_stderr_has("Error: Invalid provider version number");
    run.assert_stderr_has("on .terraform.lock.hcl line 5:");

    t.case
        .write(".terraform.lock.hcl", "provider \"hashicorp/alpha\" {\n");
    t.fails(&[]).assert_stderr_has(".terraform.lock.hcl");
}

#[test]
fn a_version_constraint_on_the_builtin_provider_is_refused() {
    let t = Installed::new();
    t.case.write(
        "versions.tf",
        "terraform {\n  required_providers {\n    terraform = \"1.0.0\"\n  }\n}\n",
    );
    t.case.write("main.tf", "resource \"alpha_x\" \"x\" {}\n");
    t.fails(&[]).assert_stderr_has(
        "Error: Invalid dependency on built-in provider\n\nCannot use terraform.io/builtin/terraform: built-in providers do not support explicit version constraints.\n",
    );
}

#[test]
fn every_failing_provider_is_reported_and_none_is_installed() {
    let t = Installed::new();
    t.case.write(
        "main.tf",
        "terraform {\n  required_providers {\n    alpha = { source = \"hashicorp/alpha\", version = \"~> 1.0\" }\n    beta = { source = \"hashicorp/beta\" }\n    delta = { source = \"hashicorp/delta\" }\n    gamma = { source = \"hashicorp/gamma\" }\n  }\n}\n",
    );
    Pkg::fake("hashicorp/gamma", "1.0.0").write_unpacked(&t.mirror);
    let run = t.fails(&[]);
    run.assert_stderr_has("provider registry.terraform.io/hashicorp/delta was not found");
    assert!(
        !t.case
            .data()
            .join("plugins/registry.terraform.io/hashicorp/gamma")
            .exists()
    );
}

#[test]
fn bad_flags_exit_1_and_name_the_flag() {
    let case = Project::new();
    case.write("main.tf", "");
    for (args, mention) in [
        (&["-bogus"][..], "-bogus"),
        (&["-layout=weird"][..], "weird"),
        (&["-parallelism=many"][..], "many"),
        (&["stray"][..], "stray"),
    ] {
        let run = case.init(args);
        run.assert_failure();
        assert!(
            run.stderr.contains(mention),
            "{args:?}: stderr should name {mention:?}: {}",
            run.stderr
        );
        assert!(!case.data().exists() && !case.lock_path().exists());
    }
}

#[test]
fn help_lists_the_init_flags() {
    let case = Project::new();
    for args in [&["--help"][..], &["-help"][..], &["-h"][..]] {
        let run = case.init(args);
        run.assert_success();
        for flag in [
            "-plugin-dir",
            "-upgrade",
            "-lockfile",
            "-layout",
            "-no-color",
            "-input",
            "-chdir",
        ] {
            assert!(
                run.stdout.contains(flag),
                "{args:?}: help lacks {flag}: {}",
                run.stdout
            );
        }
    }
    // The long form explains where providers come from and how it ends.
    let run = case.init(&["--help"]);
    run.assert_stdout_has("~/.terraform.d/plugins")
        .assert_stdout_has("Examples:")
        .assert_stdout_has("Exit status");
}

#[test]
fn missing_module_directories_are_named() {
    let t = Installed::new();
    t.case.write(
        "main.tf",
        &format!(
            "{MAIN_TF}\nmodule \"local\" {{\n  source = \"./nope\"\n}}\n\nmodule \"remote\" {{\n  source = \"example/remote/aws\"\n}}\n"
        ),
    );
    // With -get=false the modules are read as installed: the remote one
    // is not (init without it would install it).
    let run = t.fails(&["-get=false"]);
    run.assert_stderr_has("Error: Failed to read module directory\n\n  on main.tf line 14:\n");
    run.assert_stderr_has("Error: Module not installed\n\n  on main.tf line 18:\n\nModule \"module.remote\" (source \"example/remote/aws\") is not yet installed.");
}
