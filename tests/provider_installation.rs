//! The CLI configuration's `provider_installation` story end to end (the CLI
//! configuration docs, "Provider Installation"; Terraform's
//! `internal/getproviders/multi_source.go`): the built binary reads
//! `~/.terraformrc`, `~/.terraform.d` and `TF_CLI_CONFIG_FILE` in native and
//! JSON syntax, combines filesystem mirrors, a network mirror and a registry
//! with include/exclude rules, and reports configuration problems the way
//! Terraform does.

mod support;

use support::*;
use tempfile::TempDir;

const TOKEN: &str = "mirror-secret-token";

/// One HTTPS server holding a registry at its root and a network mirror
/// below `/mirror/`, plus a filesystem mirror directory.
struct World {
    ca: TestCa,
    server: TestServer,
    /// Served by `server`; kept alive for the test.
    _root: TempDir,
    fs_dir: TempDir,
    key: PgpKey,
    /// `https://127.0.0.1:PORT/mirror/`
    mirror_base: String,
    fs: PublishedTree,
    mirror: PublishedTree,
    registry: PublishedTree,
}

impl World {
    fn new(
        fs: FsMirror,
        mirror: NetworkMirror,
        registry: impl FnOnce(Registry) -> Registry,
    ) -> Self {
        let ca = TestCa::new();
        let server = TestServer::https(&ca);
        let root = tempfile::tempdir().unwrap();
        let fs_dir = tempfile::tempdir().unwrap();
        let key = PgpKey::generate();
        let mirror_base = format!("{}mirror/", server.url());
        let mirror = mirror.write(&root.path().join("mirror"), &mirror_base);
        let registry = registry(Registry::new(&key)).write(root.path(), &server.url());
        let fs = fs.write(fs_dir.path());
        server.serve_dir(root.path());
        World {
            ca,
            server,
            _root: root,
            fs_dir,
            key,
            mirror_base,
            fs,
            mirror,
            registry,
        }
    }

    fn fs_path(&self) -> String {
        self.fs_dir.path().display().to_string()
    }

    /// `host` blocks sending both registry hostnames' `providers.v1` to
    /// this server, so `direct` needs no real registry.
    fn host_blocks(&self) -> String {
        let providers_url = self.server.url_for("/v1/providers/");
        ["registry.terraform.io", "example.com"]
            .iter()
            .map(|host| format!("{}\n", host_block(host, &providers_url)))
            .collect()
    }

    fn mirror_doc(&self, provider: &str, file: &str) -> String {
        format!("/mirror/{provider}/{file}")
    }

    fn versions_doc(namespace: &str, type_name: &str) -> String {
        format!("/{}", Registry::versions_path(namespace, type_name))
    }
}

fn spec(namespace: &str, type_name: &str, version: &str) -> ProviderSpec {
    ProviderSpec::new(namespace, type_name, version)
}

/// All three method kinds with overlapping include/exclude. Versions are
/// the union over the methods that handle a provider; each chosen version's
/// package comes from the first method, in configuration order, that has it.
#[test]
fn three_methods_with_overlapping_include_and_exclude() {
    let world = World::new(
        FsMirror::new()
            .provider(spec("hashicorp", "null", "3.2.0"), Layout::Packed)
            .provider(spec("hashicorp", "null", "3.2.1"), Layout::Packed)
            .provider(spec("hashicorp", "random", "3.6.0"), Layout::Unpacked)
            .provider(spec("hashicorp", "tls", "4.0.0"), Layout::Packed),
        NetworkMirror::new()
            .provider(spec("hashicorp", "null", "3.2.1"))
            .provider(spec("hashicorp", "null", "3.2.2"))
            .provider(spec("hashicorp", "random", "3.6.1"))
            .provider(spec("hashicorp", "tls", "4.0.0")),
        |registry| {
            registry
                .provider(spec("hashicorp", "null", "3.2.3"))
                .provider(spec("hashicorp", "random", "3.6.2"))
                .provider(spec("acme", "widget", "1.1.0").hostname("example.com"))
        },
    );
    let mut project = Project::requiring(&[
        ("null", "hashicorp/null", "~> 3.2"),
        ("random", "hashicorp/random", ">= 3.6.0"),
        ("tls", "hashicorp/tls", "4.0.0"),
        ("widget", "example.com/acme/widget", ">= 1.0"),
    ]);
    project.trust(&world.ca);
    project.write_home(
        ".terraformrc",
        &format!(
            r#"{hosts}provider_installation {{
  filesystem_mirror {{
    path    = "{fs}"
    include = ["registry.terraform.io/hashicorp/*"]
  }}
  network_mirror {{
    url     = "{mirror}"
    include = ["registry.terraform.io/*/*"]
    exclude = ["hashicorp/random"]
  }}
  direct {{
    exclude = ["hashicorp/null", "HashiCorp/tls"]
  }}
}}
"#,
            hosts = world.host_blocks(),
            fs = world.fs_path(),
            mirror = world.mirror_base,
        ),
    );

    let run = project.init(&[]);
    let key_id = world.key.key_id();
    run.assert_success()
        // null: the filesystem mirror and the network mirror handle it; the
        // newest of their union exists only in the network mirror.
        .assert_contains("- Installed hashicorp/null v3.2.2 (verified checksum)")
        // random: the network mirror is excluded; the registry's 3.6.2 wins
        // the union with the filesystem mirror's 3.6.0.
        .assert_contains(&format!(
            "- Installed hashicorp/random v3.6.2 (self-signed, key ID {key_id})"
        ))
        // tls: both mirrors have 4.0.0; the first method listed provides it.
        .assert_contains("- Installed hashicorp/tls v4.0.0 (unauthenticated)")
        // widget: only direct handles example.com.
        .assert_contains(&format!(
            "- Installed example.com/acme/widget v1.1.0 (self-signed, key ID {key_id})"
        ))
        .assert_contains("Partner and community providers are signed by their developers.")
        .assert_contains(
            "the following providers:\n  - hashicorp/null\n  - hashicorp/tls\n\nThe current",
        );

    let server = &world.server;
    // Excluded methods are never asked.
    assert_eq!(server.count(&World::versions_doc("hashicorp", "null")), 0);
    assert_eq!(server.count(&World::versions_doc("hashicorp", "tls")), 0);
    assert_eq!(
        server.count(&world.mirror_doc("registry.terraform.io/hashicorp/random", "index.json")),
        0
    );
    assert_eq!(
        server.count(&world.mirror_doc("example.com/acme/widget", "index.json")),
        0
    );
    // Methods that handle a provider all contribute versions…
    assert_eq!(
        server.count(&world.mirror_doc("registry.terraform.io/hashicorp/tls", "index.json")),
        1
    );
    // …but the package comes from the first one that has it.
    assert_eq!(
        server.count(&world.mirror_doc("registry.terraform.io/hashicorp/tls", "4.0.0.json")),
        0
    );

    let platform = current_platform();
    let null = world.mirror.package("null", "3.2.2", &platform);
    let random = world.registry.package("random", "3.6.2", &platform);
    let tls = world.fs.package("tls", "4.0.0", &platform);
    let widget = world.registry.package("widget", "1.1.0", &platform);
    assert_eq!(
        project.lock(),
        lock_file(&[
            lock_block(
                "example.com/acme/widget",
                "1.1.0",
                ">= 1.0.0",
                &[&widget.h1, widget.zh.as_deref().unwrap()]
            ),
            lock_block(
                "registry.terraform.io/hashicorp/null",
                "3.2.2",
                "~> 3.2",
                &[&null.h1]
            ),
            lock_block(
                "registry.terraform.io/hashicorp/random",
                "3.6.2",
                ">= 3.6.0",
                &[&random.h1, random.zh.as_deref().unwrap()]
            ),
            lock_block(
                "registry.terraform.io/hashicorp/tls",
                "4.0.0",
                "4.0.0",
                &[&tls.h1]
            ),
        ])
    );
    for (provider, version) in [
        ("registry.terraform.io/hashicorp/null", "3.2.2"),
        ("registry.terraform.io/hashicorp/random", "3.6.2"),
        ("registry.terraform.io/hashicorp/tls", "4.0.0"),
        ("example.com/acme/widget", "1.1.0"),
    ] {
        assert!(
            project.installed_dir(provider, version).is_dir(),
            "{provider}"
        );
    }
}

#[test]
fn a_provider_no_method_has_lists_the_search_locations() {
    let world = World::new(
        FsMirror::new().provider(spec("hashicorp", "null", "3.2.1"), Layout::Packed),
        NetworkMirror::new().provider(spec("hashicorp", "null", "3.2.2")),
        |registry| registry,
    );
    let mut project = Project::requiring(&[
        ("null", "hashicorp/null", "~> 3.2"),
        ("absent", "hashicorp/absent", ">= 1.0"),
    ]);
    project.trust(&world.ca);
    project.write_home(
        ".terraformrc",
        &format!(
            "provider_installation {{\n  filesystem_mirror {{\n    path = \"{}\"\n  }}\n  network_mirror {{\n    url = \"{}\"\n  }}\n}}\n",
            world.fs_path(),
            world.mirror_base
        ),
    );
    let before = project.snapshot();

    project
        .init(&[])
        .assert_failure()
        .assert_contains("Error: Failed to query available provider packages")
        .assert_contains(&format!(
            "Could not retrieve the list of available versions for provider hashicorp/absent: provider registry.terraform.io/hashicorp/absent was not found in any of the search locations\n\n  - {}\n  - provider mirror at {}\n",
            world.fs_path(),
            world.mirror_base
        ))
        .assert_not_contains("- Installed");
    project.assert_unchanged(&before);
}

#[test]
fn a_provider_no_method_handles_is_not_found_anywhere() {
    let world = World::new(
        FsMirror::new().provider(
            spec("acme", "widget", "1.0.0").hostname("example.com"),
            Layout::Packed,
        ),
        NetworkMirror::new(),
        |registry| registry,
    );
    let mut project = Project::requiring(&[("widget", "example.com/acme/widget", ">= 1.0")]);
    project.trust(&world.ca);
    project.write_home(
        ".terraformrc",
        &format!(
            "provider_installation {{\n  filesystem_mirror {{\n    path    = \"{}\"\n    include = [\"hashicorp/*\"]\n  }}\n  direct {{\n    exclude = [\"example.com/*/*\"]\n  }}\n}}\n",
            world.fs_path()
        ),
    );
    let before = project.snapshot();

    let run = project.init(&[]);
    run.assert_failure().assert_contains(
        "Could not retrieve the list of available versions for provider example.com/acme/widget: provider example.com/acme/widget was not found in any of the search locations\n",
    );
    assert!(world.server.requests().is_empty());
    project.assert_unchanged(&before);
}

#[test]
fn dev_overrides_skip_the_provider_and_keep_its_lock_entry() {
    let world = World::new(
        FsMirror::new()
            .provider(spec("hashicorp", "null", "3.2.1"), Layout::Packed)
            .provider(spec("hashicorp", "tls", "4.0.0"), Layout::Packed),
        NetworkMirror::new(),
        |registry| registry,
    );
    let project = Project::requiring(&[
        ("null", "hashicorp/null", "~> 3.2"),
        ("tls", "hashicorp/tls", "4.0.0"),
    ]);
    // An entry that no install of this run would produce, so any rewrite shows.
    let null_block = lock_block(
        "registry.terraform.io/hashicorp/null",
        "3.2.0",
        ">= 3.0.0",
        &["h1:kept/as/it/was+AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="],
    );
    project.write(
        ".terraform.lock.hcl",
        &lock_file(std::slice::from_ref(&null_block)),
    );
    // HCL 1 quoted keys, after a byte-order mark as Windows editors write it.
    project.write_home(
        ".terraformrc",
        &format!(
            "\u{feff}provider_installation {{\n  dev_overrides {{\n    \"hashicorp/null\" = \"/home/dev/null-provider/../null\"\n  }}\n  filesystem_mirror {{\n    path = \"{}\"\n  }}\n}}\n",
            world.fs_path()
        ),
    );

    let run = project.init(&[]);
    run.assert_success()
        .assert_contains("Warning: Provider development overrides are in effect")
        .assert_contains("\n - hashicorp/null in /home/dev/null\n")
        .assert_contains("- Installed hashicorp/tls v4.0.0 (unauthenticated)")
        .assert_not_contains("hashicorp/null v");
    assert!(
        !project
            .work
            .join(".terraform/plugins/registry.terraform.io/hashicorp/null")
            .exists()
    );
    let tls = world.fs.package("tls", "4.0.0", &current_platform());
    assert_eq!(
        project.lock(),
        lock_file(&[
            null_block,
            lock_block(
                "registry.terraform.io/hashicorp/tls",
                "4.0.0",
                "4.0.0",
                &[&tls.h1]
            ),
        ])
    );
}

/// A JSON CLI configuration keeps its methods in written order, whether it
/// sits in `~/.terraform.d` or is named by `TF_CLI_CONFIG_FILE`.
#[test]
fn json_cli_configuration_in_the_config_dir_and_via_tf_cli_config_file() {
    let world = World::new(
        FsMirror::new().provider(spec("hashicorp", "tls", "4.0.0"), Layout::Packed),
        NetworkMirror::new().provider(spec("hashicorp", "tls", "4.0.0")),
        |registry| registry,
    );
    let fs_block = format!(
        "\"filesystem_mirror\": [{{\"path\": {:?}, \"include\": [\"hashicorp/*\"]}}]",
        world.fs_path()
    );
    let mirror_block = format!("\"network_mirror\": [{{\"url\": {:?}}}]", world.mirror_base);
    let config = |first: &str, second: &str| {
        format!("{{\n  \"provider_installation\": {{\n    {first},\n    {second}\n  }}\n}}\n")
    };
    let tls = [("tls", "hashicorp/tls", "4.0.0")];

    // In ~/.terraform.d, filesystem mirror first.
    let mut project = Project::requiring(&tls);
    project.trust(&world.ca);
    project.write_home(
        ".terraform.d/mirrors.tfrc.json",
        &config(&fs_block, &mirror_block),
    );
    project
        .init(&[])
        .assert_success()
        .assert_contains("- Installed hashicorp/tls v4.0.0 (unauthenticated)");

    // Named by TF_CLI_CONFIG_FILE, network mirror first; the config
    // directory is then not read at all (else its second
    // provider_installation block would be reported).
    let mut project = Project::requiring(&tls);
    project.trust(&world.ca);
    project.write_home(
        ".terraform.d/mirrors.tfrc.json",
        &config(&fs_block, &mirror_block),
    );
    let elsewhere =
        project.write_home("elsewhere/cli.tfrc.json", &config(&mirror_block, &fs_block));
    project.env("TF_CLI_CONFIG_FILE", &elsewhere);
    project
        .init(&[])
        .assert_success()
        .assert_contains("- Installed hashicorp/tls v4.0.0 (verified checksum)")
        .assert_not_contains("problems with the CLI configuration");
}

/// `~/.terraform.d/*.tfrc` files merge in name order, so a later file's
/// `credentials` for a host replace an earlier one's; other files there
/// are not read.
#[test]
fn config_dir_files_merge_in_name_order() {
    for (first, second, works) in [("wrong", TOKEN, true), (TOKEN, "wrong", false)] {
        let world = World::new(
            FsMirror::new(),
            NetworkMirror::new().provider(spec("hashicorp", "null", "3.2.2")),
            |registry| registry,
        );
        world.server.require_bearer(".json", TOKEN);
        let host = world.server.host();
        let mut project = Project::requiring(&[("null", "hashicorp/null", "~> 3.2")]);
        project.trust(&world.ca);
        project.write_home(
            ".terraformrc",
            &format!(
                "provider_installation {{\n  network_mirror {{\n    url = \"{}\"\n  }}\n}}\n",
                world.mirror_base
            ),
        );
        let credentials =
            |token: &str| format!("credentials \"{host}\" {{\n  token = \"{token}\"\n}}\n");
        project.write_home(".terraform.d/a.tfrc", &credentials(first));
        project.write_home(".terraform.d/b.tfrc", &credentials(second));
        project.write_home(".terraform.d/notes.txt", "this is { not a config");
        let before = project.snapshot();

        let run = project.init(&[]);
        if works {
            run.assert_success()
                .assert_contains("- Installed hashicorp/null v3.2.2 (verified checksum)");
        } else {
            run.assert_failure().assert_contains(&format!(
                "host {host} rejected the given authentication credentials"
            ));
            project.assert_unchanged(&before);
        }
        run.assert_not_contains("notes.txt");
    }
}

/// Terraform reports CLI configuration errors and carries on with what it
/// could read; only the first `provider_installation` block is used.
#[test]
fn a_second_provider_installation_block_is_reported_and_ignored() {
    let world = World::new(
        FsMirror::new().provider(spec("hashicorp", "null", "3.2.1"), Layout::Packed),
        NetworkMirror::new().provider(spec("hashicorp", "null", "3.2.2")),
        |registry| registry,
    );
    let mut project = Project::requiring(&[("null", "hashicorp/null", "~> 3.2")]);
    project.trust(&world.ca);
    project.write_home(
        ".terraformrc",
        &format!(
            "provider_installation {{\n  filesystem_mirror {{\n    path = \"{}\"\n  }}\n}}\n",
            world.fs_path()
        ),
    );
    project.write_home(
        ".terraform.d/mirror.tfrc",
        &format!(
            "provider_installation {{\n  network_mirror {{\n    url = \"{}\"\n  }}\n}}\n",
            world.mirror_base
        ),
    );

    let run = project.init(&[]);
    run.assert_success()
        .assert_contains("There are some problems with the CLI configuration:")
        .assert_contains("Error: No more than one provider_installation block may be specified")
        .assert_contains("As a result of the above problems, Terraform may not behave as intended.")
        .assert_contains("- Installed hashicorp/null v3.2.1 (unauthenticated)");
    assert!(world.server.requests().is_empty());
}

#[test]
fn malformed_files_are_reported_with_file_and_line_and_the_rest_is_used() {
    let world = World::new(
        FsMirror::new().provider(spec("hashicorp", "null", "3.2.1"), Layout::Packed),
        NetworkMirror::new(),
        |registry| registry,
    );
    let project = Project::requiring(&[("null", "hashicorp/null", "~> 3.2")]);
    let rc = project.write_home(
        ".terraformrc",
        &format!(
            "# mirrors\nprovider_installation {{\n  not_a_thing {{}}\n  filesystem_mirror {{\n    path = \"{}\"\n  }}\n}}\n",
            world.fs_path()
        ),
    );
    let broken = project.write_home(
        ".terraform.d/broken.tfrc",
        "plugin_cache_may_break_dependency_lock_file = true\n\ncredentials \"example.com\" {\n  token = \"unterminated\n}\n",
    );

    let run = project.init(&[]);
    run.assert_success()
        .assert_contains("There are some problems with the CLI configuration:")
        .assert_contains(&format!(
            "Error: Invalid provider_installation method block\n\n  on {} line 3, in provider_installation:\n   3:   not_a_thing {{}}\n\nUnknown provider installation method \"not_a_thing\" at 3:3.\n",
            rc.display()
        ))
        .assert_contains(&format!(
            "Error: Error parsing {0}: At 4:11: literal not terminated\n\n  on {0} line 4, in credentials \"example.com\":\n   4:   token = \"unterminated\n",
            broken.display()
        ))
        .assert_contains("As a result of the above problems, Terraform may not behave as intended.")
        .assert_contains("- Installed hashicorp/null v3.2.1 (unauthenticated)");
}

#[test]
fn a_missing_tf_cli_config_file_warns_and_uses_the_implied_configuration() {
    let mut project = Project::requiring(&[("null", "hashicorp/null", "~> 3.2")]);
    // The implied configuration searches terraform.d/plugins first (the CLI
    // configuration docs, "Implied Local Mirror Directories").
    FsMirror::new()
        .provider(spec("hashicorp", "null", "3.2.1"), Layout::Packed)
        .write(&project.work.join("terraform.d/plugins"));
    let missing = project.home.join("nowhere.tfrc");
    project.env("TF_CLI_CONFIG_FILE", &missing);
    project
        .init(&[])
        .assert_success()
        .assert_contains("Warning: Unable to open CLI configuration file")
        .assert_contains(&format!(
            "The CLI configuration file at \"{}\" does not exist.",
            missing.display()
        ))
        .assert_contains("- Installed hashicorp/null v3.2.1 (unauthenticated)");
}

/// Terraform would drop these methods and carry on, quietly sending the
/// providers elsewhere; tfinstall names each one and installs nothing.
#[test]
fn invalid_include_and_exclude_patterns_stop_the_run() {
    let world = World::new(
        FsMirror::new().provider(spec("hashicorp", "null", "3.2.1"), Layout::Packed),
        NetworkMirror::new(),
        |registry| registry,
    );
    let project = Project::requiring(&[("null", "hashicorp/null", "~> 3.2")]);
    let rc = project.write_home(
        ".terraformrc",
        &format!(
            "provider_installation {{\n  filesystem_mirror {{\n    path    = \"{0}\"\n    include = [\"just-one-part\"]\n  }}\n  filesystem_mirror {{\n    path    = \"{0}\"\n    exclude = [\"*/x\"]\n  }}\n  filesystem_mirror {{\n    path = \"{0}\"\n  }}\n}}\n",
            world.fs_path(),
        ),
    );
    let before = project.snapshot();
    project
        .init(&[])
        .assert_failure()
        .assert_contains(&format!(
            "Error: Invalid provider source inclusion patterns\n\n  on {} line 2, in provider_installation:\n   2:   filesystem_mirror {{\n\nCLI config specifies invalid provider inclusion patterns: invalid provider matching pattern \"just-one-part\": must have either two or three slash-separated segments.",
            rc.display()
        ))
        .assert_contains(&format!(
            "Error: Invalid provider source exclusion patterns\n\n  on {} line 6, in provider_installation:\n   6:   filesystem_mirror {{\n\nCLI config specifies invalid provider exclusion patterns: invalid provider matching pattern \"*/x\": namespace can be a wildcard only if the provider type is also a wildcard.",
            rc.display()
        ))
        .assert_not_contains("- Installed");
    project.assert_unchanged(&before);
}

#[test]
fn plugin_dir_replaces_the_configured_methods() {
    let world = World::new(
        FsMirror::new().provider(spec("hashicorp", "null", "3.2.1"), Layout::Packed),
        NetworkMirror::new(),
        |registry| registry,
    );
    let project = Project::requiring(&[("null", "hashicorp/null", "~> 3.2")]);
    // A method that would fail the run if it were used.
    project.write_home(
        ".terraformrc",
        "provider_installation {\n  network_mirror {\n    url = \"http://127.0.0.1:1/\"\n  }\n}\n",
    );
    let fs_path = world.fs_path();
    project
        .init(&[&format!("-plugin-dir={fs_path}")])
        .assert_success()
        .assert_contains("- Installed hashicorp/null v3.2.1 (unauthenticated)")
        .assert_not_contains("Invalid URL");
}

/// As in Terraform, a helper that is configured but not installed is
/// ignored (tfinstall logs it with `TFINSTALL_LOG=warn`).
#[test]
fn a_credentials_helper_that_is_not_installed_is_ignored() {
    let world = World::new(
        FsMirror::new().provider(spec("hashicorp", "null", "3.2.1"), Layout::Packed),
        NetworkMirror::new(),
        |registry| registry,
    );
    let mut project = Project::requiring(&[("null", "hashicorp/null", "~> 3.2")]);
    project.write_home(
        ".terraformrc",
        &format!(
            "credentials_helper \"vault\" {{\n  args = [\"--role\", \"ci\"]\n}}\n\nprovider_installation {{\n  filesystem_mirror {{\n    path = \"{}\"\n  }}\n}}\n",
            world.fs_path()
        ),
    );
    project
        .init(&[])
        .assert_success()
        .assert_not_contains("helper")
        .assert_contains("- Installed hashicorp/null v3.2.1 (unauthenticated)");
    project.env("TFINSTALL_LOG", "warn");
    project.init(&[]).assert_success().assert_stderr_has(
        "unable to find credentials helper \"vault\" in the plugin directories; ignoring it",
    );
}
