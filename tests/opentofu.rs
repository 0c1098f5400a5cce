//! OpenTofu mode: a real HTTPS registry on 127.0.0.1 stands in for
//! `registry.opentofu.org` (and, for Terraform mode, `registry.terraform.io`)
//! through `host` blocks, with real signatures; the built binary decides the
//! engine, reads the files OpenTofu reads and installs as `tofu init` does.

mod support;

use std::path::Path;

use support::*;

const TOFU_REGISTRY: &str = "registry.opentofu.org";
const TERRAFORM_REGISTRY: &str = "registry.terraform.io";
const UNSIGNED_WARNING: &str = "Signature validation was skipped due to the registry not containing GPG keys for this provider";
const SIGNING_FOOTER: &str = "Providers are signed by their developers.\nIf you'd like to know more about provider signing, you can read about it here:\nhttps://opentofu.org/docs/cli/plugins/signing/";

/// `acme/widget` 1.0.0 and 1.1.0 for this platform and one other, served
/// for both default registries through the project's CLI configuration.
fn widget_registry() -> HostedRegistry {
    let mut hosted = HostedRegistry::new(|registry| {
        ["1.0.0", "1.1.0"]
            .into_iter()
            .fold(registry, |registry, version| {
                registry.provider(
                    ProviderSpec::new("acme", "widget", version)
                        .platforms(&[&current_platform(), "darwin_arm64"]),
                )
            })
    });
    let url = hosted.server.url_for("/v1/providers/");
    hosted.project.cli_config(&format!(
        "{}{}",
        host_block(TOFU_REGISTRY, &url),
        host_block(TERRAFORM_REGISTRY, &url)
    ));
    hosted
}

/// The lock entry the registry's signed release vouches for.
fn release_hashes(hosted: &HostedRegistry, version: &str) -> Vec<String> {
    let mut hashes: Vec<String> = hosted
        .tree
        .packages
        .iter()
        .filter(|p| p.version == version)
        .map(|p| p.zh.clone().expect("registry packages have zh"))
        .collect();
    hashes.push(
        hosted
            .tree
            .package("widget", version, &current_platform())
            .h1
            .clone(),
    );
    hashes
}

/// Removes what `init` installed and locked, for a run from scratch.
fn start_over(project: &Project) {
    std::fs::remove_dir_all(project.data()).unwrap();
    std::fs::remove_file(project.lock_path()).unwrap();
}

fn tofu_lock(blocks: &[String]) -> String {
    lock_file(blocks).replacen("\"terraform init\"", "\"tofu init\"", 1)
}

fn installed(project: &Project, layout: &str, host: &str, version: &str) -> bool {
    project
        .data()
        .join(layout)
        .join(host)
        .join("acme/widget")
        .join(version)
        .join(current_platform())
        .is_dir()
}

/// Makes every download document of `version` list no signing keys, as
/// OpenTofu's registry does for providers whose authors registered none.
fn remove_keys(hosted: &HostedRegistry, version: &str) {
    for platform in [current_platform(), "darwin_arm64".to_owned()] {
        let doc = hosted.site_path(&Registry::download_path(
            "acme", "widget", version, &platform,
        ));
        edit_json(&doc, |doc| {
            doc["signing_keys"]["gpg_public_keys"] = serde_json::Value::Null
        });
    }
}

#[test]
fn a_tofu_file_chooses_opentofu_and_its_default_registry() {
    let hosted = widget_registry();
    let project = &hosted.project;
    project.write(
        "main.tofu",
        &required_providers(&[("widget", "acme/widget", "~> 1.0")]),
    );

    let run = project.init(&[]);
    run.assert_success()
        .assert_stdout_has(&format!(
            "- Installed acme/widget v1.1.0 (signed, key ID {})",
            hosted.key.key_id()
        ))
        .assert_stdout_has(SIGNING_FOOTER)
        .assert_says("OpenTofu has created a lock file .terraform.lock.hcl")
        .assert_says("you run \"tofu init\" in the future");
    assert_eq!(
        project.lock(),
        tofu_lock(&[lock_block(
            &format!("{TOFU_REGISTRY}/acme/widget"),
            "1.1.0",
            "~> 1.0",
            &release_hashes(&hosted, "1.1.0")
        )])
    );
    assert!(installed(project, "providers", TOFU_REGISTRY, "1.1.0"));
    assert!(!project.data().join("plugins").exists());

    start_over(project);
    let json = project.init(&["-json"]);
    json.assert_success();
    let stream = validated_stream(json.stdout.as_bytes());
    assert_eq!(stream[0]["engine"], "opentofu");
    let installed = stream.iter().find(|m| m["event"] == "installed").unwrap();
    assert_eq!(installed["authentication"]["result"], "signed");

    project
        .run(&["providers"])
        .assert_success()
        .assert_stdout_has("Read with OpenTofu's rules (-engine=opentofu; default registry registry.opentofu.org).")
        .assert_stdout_has(&format!("provider[{TOFU_REGISTRY}/acme/widget] ~> 1.0"));
}

#[test]
fn without_tofu_files_terraform_rules_apply_unless_told_otherwise() {
    let mut hosted = widget_registry();
    hosted
        .project
        .require(&[("widget", "acme/widget", "1.0.0")]);
    hosted
        .project
        .init(&[])
        .assert_success()
        .assert_says("Terraform has created a lock file .terraform.lock.hcl");
    assert!(
        hosted
            .project
            .lock()
            .contains(&format!("provider \"{TERRAFORM_REGISTRY}/acme/widget\""))
    );
    assert!(installed(
        &hosted.project,
        "plugins",
        TERRAFORM_REGISTRY,
        "1.0.0"
    ));

    // The same files under OpenTofu's rules, by flag and by variable.
    for (args, variable) in [
        (&["-engine=opentofu"][..], None),
        (&[][..], Some("opentofu")),
    ] {
        start_over(&hosted.project);
        if let Some(value) = variable {
            hosted.project.env("TFINSTALL_ENGINE", value);
        }
        hosted.project.init(args).assert_success();
        assert!(
            hosted
                .project
                .lock()
                .contains(&format!("provider \"{TOFU_REGISTRY}/acme/widget\""))
        );
        assert!(installed(
            &hosted.project,
            "providers",
            TOFU_REGISTRY,
            "1.0.0"
        ));
    }

    // And a .tofu file does not win over an explicit choice.
    hosted.project.write("extra.tofu", "");
    hosted.project.env("TFINSTALL_ENGINE", "terraform");
    std::fs::remove_file(hosted.project.lock_path()).unwrap();
    hosted.project.init(&[]).assert_success();
    assert!(
        hosted
            .project
            .lock()
            .contains(&format!("provider \"{TERRAFORM_REGISTRY}/acme/widget\""))
    );
}

#[test]
fn tofu_files_take_the_place_of_tf_files_of_the_same_name_in_every_module() {
    let hosted = widget_registry();
    let project = &hosted.project;
    let requiring = |constraint: &str| required_providers(&[("widget", "acme/widget", constraint)]);
    project.write(
        "main.tf",
        &format!(
            "{}module \"net\" {{\n  source = \"./net\"\n}}\n",
            requiring("1.0.0")
        ),
    );
    project.write(
        "main.tofu",
        &format!(
            "{}module \"net\" {{\n  source = \"./net\"\n}}\n",
            requiring("1.1.0")
        ),
    );
    // Read together, either pair would leave no version to choose.
    project.write("net/versions.tf", &requiring("< 1.1.0"));
    project.write("net/versions.tofu", &requiring(">= 1.1.0"));

    project.init(&[]).assert_success();
    let lock = project.lock();
    assert!(lock.contains("version     = \"1.1.0\""), "{lock}");
    assert!(lock.contains("constraints = \">= 1.1.0, 1.1.0\""), "{lock}");

    // Terraform reads the .tf files only.
    start_over(project);
    project.init(&["-engine=terraform"]).assert_success();
    let lock = project.lock();
    assert!(lock.contains("version     = \"1.0.0\""), "{lock}");
    assert!(lock.contains("constraints = \"1.0.0, < 1.1.0\""), "{lock}");
}

#[test]
fn tofurc_is_read_before_terraformrc() {
    let mut hosted = HostedRegistry::new(|registry| {
        registry.provider(ProviderSpec::new("acme", "widget", "1.0.0"))
    });
    let url = hosted.server.url_for("/v1/providers/");
    let project = &mut hosted.project;
    project.write_home(".tofurc", &host_block(TOFU_REGISTRY, &url));
    let empty_mirror = project.dir("empty-mirror");
    project.write_home(".terraformrc", &filesystem_mirror_config(&empty_mirror));
    project.write(
        "main.tofu",
        &required_providers(&[("widget", "acme/widget", "")]),
    );

    project.init(&[]).assert_success();
    assert!(installed(project, "providers", TOFU_REGISTRY, "1.0.0"));

    // Only ~/.terraformrc: OpenTofu reads it, and finds nothing there.
    std::fs::remove_file(project.home.join(".tofurc")).unwrap();
    start_over(project);
    project
        .init_failing(&[])
        .assert_says("was not found in any of the search locations");
}

#[test]
fn a_provider_without_keys_on_opentofus_registry_installs_unless_validation_is_enforced() {
    let mut hosted = widget_registry();
    remove_keys(&hosted, "1.0.0");
    hosted.project.write(
        "main.tofu",
        &required_providers(&[("widget", "acme/widget", "1.0.0")]),
    );

    let json = hosted.project.init(&["-json"]);
    json.assert_success();
    let installed = validated_stream(json.stdout.as_bytes())
        .into_iter()
        .find(|m| m["event"] == "installed")
        .unwrap();
    assert_eq!(installed["authentication"]["result"], "signing skipped");
    start_over(&hosted.project);

    let run = hosted.project.init(&[]);
    run.assert_success().assert_stdout_has(&format!(
        "- Installed acme/widget v1.0.0. {UNSIGNED_WARNING}\n"
    ));
    assert!(
        !run.stdout.contains("signed by their developers"),
        "{}",
        run.stdout
    );
    // OpenTofu records the release's checksums all the same.
    assert_eq!(
        hosted.project.lock(),
        tofu_lock(&[lock_block(
            &format!("{TOFU_REGISTRY}/acme/widget"),
            "1.0.0",
            "1.0.0",
            &release_hashes(&hosted, "1.0.0")
        )])
    );

    start_over(&hosted.project);
    hosted
        .project
        .env("OPENTOFU_ENFORCE_GPG_VALIDATION", "true");
    hosted
        .project
        .init_failing(&[])
        .assert_says("authentication signature from unknown issuer");
}

#[test]
fn only_opentofus_own_registry_may_skip_the_signature() {
    let hosted = widget_registry();
    remove_keys(&hosted, "1.0.0");
    // Another registry, in OpenTofu mode.
    let address = format!("{}/acme/widget", hosted.server.host());
    hosted.project.write(
        "main.tofu",
        &required_providers(&[("widget", &address, "1.0.0")]),
    );
    hosted
        .project
        .init_failing(&[])
        .assert_says("authentication signature from unknown issuer");
    // Terraform's default registry, in Terraform mode.
    std::fs::remove_file(hosted.project.work.join("main.tofu")).unwrap();
    hosted
        .project
        .require(&[("widget", "acme/widget", "1.0.0")]);
    hosted
        .project
        .init_failing(&[])
        .assert_says("authentication signature from unknown issuer");
}

#[test]
fn skipping_the_signature_still_checks_the_checksums() {
    let hosted = widget_registry();
    remove_keys(&hosted, "1.0.0");
    let doc = hosted.site_path(&Registry::download_path(
        "acme",
        "widget",
        "1.0.0",
        &current_platform(),
    ));
    edit_json(&doc, |doc| doc["shasum"] = "0".repeat(64).into());
    hosted.project.write(
        "main.tofu",
        &required_providers(&[("widget", "acme/widget", "1.0.0")]),
    );
    hosted
        .project
        .init_failing(&[])
        .assert_says("checksum list has unexpected SHA-256 hash");
}

#[test]
fn opentofu_reads_only_the_providers_layout() {
    let hosted = widget_registry();
    hosted.project.write("main.tofu", "");
    hosted
        .project
        .init_failing(&["-layout=plugins"])
        .assert_says("OpenTofu reads providers only from .terraform/providers");
}

#[test]
fn providers_lock_and_cache_warm_follow_opentofu() {
    let mut hosted = widget_registry();
    hosted.project.write(
        "main.tofu",
        &required_providers(&[("widget", "acme/widget", "1.0.0")]),
    );
    hosted
        .project
        .run(&["providers", "lock", "-platform=darwin_arm64"])
        .assert_success()
        .assert_says("OpenTofu has updated the lock file.");
    let darwin = hosted.tree.package("widget", "1.0.0", "darwin_arm64");
    let lock = hosted.project.lock();
    assert!(
        lock.starts_with("# This file is maintained automatically by \"tofu init\"."),
        "{lock}"
    );
    assert!(
        lock.contains(&format!("provider \"{TOFU_REGISTRY}/acme/widget\"")),
        "{lock}"
    );
    assert!(lock.contains(&darwin.h1), "{lock}");

    let cache = hosted.project.dir("cache");
    hosted.project.env("TF_PLUGIN_CACHE_DIR", &cache);
    hosted
        .project
        .run(&["cache", "warm", "-platform=darwin_arm64"])
        .assert_success();
    assert!(
        Path::new(&cache)
            .join(TOFU_REGISTRY)
            .join("acme/widget/1.0.0/darwin_arm64")
            .is_dir()
    );
}

/// Adds OpenTofu 1.12's `packages` to every download document of `version`:
/// each platform's `h1:` and `zh:` and its archive's size, as
/// registry.opentofu.org serves them; `edit` then reshapes the object.
fn serve_packages(hosted: &HostedRegistry, version: &str, edit: impl Fn(&mut serde_json::Value)) {
    let mut packages = serde_json::Map::new();
    for package in hosted.tree.packages.iter().filter(|p| p.version == version) {
        let size = std::fs::metadata(&package.path).unwrap().len();
        packages.insert(
            package.platform.clone(),
            serde_json::json!({
                "hashes": [package.h1, package.zh.clone().unwrap()],
                "package_size": size,
            }),
        );
    }
    let mut packages = serde_json::Value::Object(packages);
    edit(&mut packages);
    for platform in [current_platform(), "darwin_arm64".to_owned()] {
        let doc = hosted.site_path(&Registry::download_path(
            "acme", "widget", version, &platform,
        ));
        edit_json(&doc, |doc| doc["packages"] = packages.clone());
    }
}

/// Every platform's `h1:` and `zh:`: the lock entry `tofu init` 1.12 writes
/// from a registry that serves `packages`.
fn all_platform_hashes(hosted: &HostedRegistry, version: &str) -> Vec<String> {
    hosted
        .tree
        .packages
        .iter()
        .filter(|p| p.version == version)
        .flat_map(|p| [p.h1.clone(), p.zh.clone().unwrap()])
        .collect()
}

#[test]
fn opentofus_registry_hashes_complete_the_lock_for_every_platform() {
    let hosted = widget_registry();
    serve_packages(&hosted, "1.1.0", |_| {});
    let project = &hosted.project;
    project.write(
        "main.tofu",
        &required_providers(&[("widget", "acme/widget", "1.1.0")]),
    );
    project.init(&[]).assert_success();
    assert_eq!(
        project.lock(),
        tofu_lock(&[lock_block(
            &format!("{TOFU_REGISTRY}/acme/widget"),
            "1.1.0",
            "1.1.0",
            &all_platform_hashes(&hosted, "1.1.0")
        )])
    );
    // The next run finds the lock complete and changes nothing.
    let before = std::fs::read(project.lock_path()).unwrap();
    project.init(&[]).assert_success();
    assert_eq!(std::fs::read(project.lock_path()).unwrap(), before);
}

/// Where OpenTofu enforces signatures (another registry, or
/// `OPENTOFU_ENFORCE_GPG_VALIDATION=true`), the unsigned `h1:` hashes of
/// other platforms stay out: the signed checksum list's remain.
#[test]
fn under_enforced_signatures_only_signed_registry_hashes_are_kept() {
    let mut hosted = widget_registry();
    serve_packages(&hosted, "1.1.0", |_| {});
    let other_registry = format!("{}/acme/widget", hosted.server.host());
    for (address, enforce) in [("acme/widget", "true"), (other_registry.as_str(), "false")] {
        hosted
            .project
            .env("OPENTOFU_ENFORCE_GPG_VALIDATION", enforce);
        hosted.project.write(
            "main.tofu",
            &required_providers(&[("widget", address, "1.1.0")]),
        );
        hosted.project.init(&[]).assert_success();
        let lock = hosted.project.lock();
        let expected = release_hashes(&hosted, "1.1.0");
        for hash in all_platform_hashes(&hosted, "1.1.0") {
            assert_eq!(
                lock.contains(&hash),
                expected.contains(&hash),
                "{address}: {hash}\n{lock}"
            );
        }
        start_over(&hosted.project);
    }
}

/// Terraform's registry client has no `packages`: even a malformed one
/// leaves the install and the lock bytes as Terraform's.
#[test]
fn the_terraform_engine_ignores_packages() {
    let hosted = widget_registry();
    serve_packages(&hosted, "1.1.0", |packages| {
        *packages = serde_json::json!("not an object")
    });
    hosted
        .project
        .require(&[("widget", "acme/widget", "1.1.0")]);
    hosted.project.init(&[]).assert_success();
    assert_eq!(
        hosted.project.lock(),
        lock_file(&[lock_block(
            &format!("{TERRAFORM_REGISTRY}/acme/widget"),
            "1.1.0",
            "1.1.0",
            &release_hashes(&hosted, "1.1.0")
        )])
    );
}

/// A `null` or empty `packages` is a registry that does not send it.
#[test]
fn a_null_packages_installs_as_before() {
    let hosted = widget_registry();
    serve_packages(&hosted, "1.1.0", |packages| {
        *packages = serde_json::Value::Null
    });
    let project = &hosted.project;
    project.write(
        "main.tofu",
        &required_providers(&[("widget", "acme/widget", "1.1.0")]),
    );
    project.init(&[]).assert_success();
    assert_eq!(
        project.lock(),
        tofu_lock(&[lock_block(
            &format!("{TOFU_REGISTRY}/acme/widget"),
            "1.1.0",
            "1.1.0",
            &release_hashes(&hosted, "1.1.0")
        )])
    );
}

/// A `packages` that does not describe the archive fails the install with
/// OpenTofu's words, and nothing is installed or locked.
#[test]
fn a_wrong_packages_fails_as_opentofu_fails() {
    let size = |hosted: &HostedRegistry| {
        std::fs::metadata(
            &hosted
                .tree
                .package("widget", "1.1.0", &current_platform())
                .path,
        )
        .unwrap()
        .len()
    };
    type Edit = Box<dyn Fn(&mut serde_json::Value, &HostedRegistry)>;
    type Message = Box<dyn Fn(&HostedRegistry) -> String>;
    let cases: Vec<(Edit, Message)> = vec![
        (
            Box::new(|p, _| {
                p.as_object_mut().unwrap().remove(&current_platform());
            }),
            Box::new(|_| {
                format!(
                    "registry response missing package with platform \"{}\"",
                    current_platform()
                )
            }),
        ),
        (
            Box::new(|p, _| p[current_platform()]["package_size"] = serde_json::json!(12)),
            Box::new(move |hosted| {
                format!(
                    "registry response indicates a package of size 12, but received a package of size {}",
                    size(hosted)
                )
            }),
        ),
        (
            Box::new(|p, hosted| {
                let other = hosted.tree.package("widget", "1.1.0", "darwin_arm64");
                p[current_platform()]["hashes"] = serde_json::json!([other.zh]);
            }),
            Box::new(|hosted| {
                let here = hosted.tree.package("widget", "1.1.0", &current_platform());
                let other = hosted.tree.package("widget", "1.1.0", "darwin_arm64");
                format!(
                    "registry response expected sha256sum is \"{}\", which does not match the platform's value of \"{}\"",
                    here.sha256_hex.clone().unwrap(),
                    other.sha256_hex.clone().unwrap()
                )
            }),
        ),
        (
            Box::new(|p, _| p["darwin"] = serde_json::json!({"hashes": [], "package_size": 1})),
            Box::new(|_| {
                format!(
                    "could not query provider registry for {TOFU_REGISTRY}/acme/widget: registry response includes invalid package platform \"darwin\": must be two words separated by an underscore"
                )
            }),
        ),
    ];
    for (edit, message) in cases {
        let hosted = widget_registry();
        serve_packages(&hosted, "1.1.0", |p| edit(p, &hosted));
        let project = &hosted.project;
        project.write(
            "main.tofu",
            &required_providers(&[("widget", "acme/widget", "1.1.0")]),
        );
        let before = project.snapshot();
        project
            .init_failing(&[])
            .assert_says("Error while installing acme/widget v1.1.0:")
            .assert_says(&message(&hosted));
        project.assert_unchanged(&before);
    }
}

/// A network mirror whose every hash OpenTofu's `trust_all_hashes` takes.
fn trusted_mirror_config(url: &str) -> String {
    format!(
        "provider_installation {{\n  network_mirror {{\n    url              = \"{url}\"\n    trust_all_hashes = true\n  }}\n}}\n"
    )
}

/// `providers mirror` writes each platform's verified `h1:` and `zh:` into
/// `VERSION.json`; a consumer that trusts the mirror locks all of them,
/// as `tofu init` 1.12 does, where OpenTofu takes unsigned hashes at all.
#[test]
fn a_mirror_with_every_hash_and_trust_all_hashes_completes_the_lock() {
    let hosted = widget_registry();
    serve_packages(&hosted, "1.1.0", |_| {});
    let platforms = [current_platform(), "darwin_arm64".to_owned()];
    hosted.project.write(
        "main.tofu",
        &required_providers(&[("widget", "acme/widget", "1.1.0")]),
    );
    let out = hosted.project.dir("out");
    let mut args = vec!["providers".to_owned(), "mirror".to_owned()];
    args.extend(platforms.iter().map(|p| format!("-platform={p}")));
    args.push(out.display().to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    hosted.project.run(&args).assert_success();
    let doc: serde_json::Value = serde_json::from_str(&read_text(
        &out.join(TOFU_REGISTRY).join("acme/widget/1.1.0.json"),
    ))
    .unwrap();
    for platform in &platforms {
        let package = hosted.tree.package("widget", "1.1.0", platform);
        assert_eq!(
            doc["archives"][platform]["hashes"],
            serde_json::json!([package.h1, package.zh]),
            "{platform}"
        );
    }

    let server = TestServer::https(&hosted.ca);
    server.serve_dir(&out);
    let here_package = hosted.tree.package("widget", "1.1.0", &current_platform());
    let (here, here_zh) = (here_package.h1.clone(), here_package.zh.clone().unwrap());
    let consumer = |file: &str, config: String, enforce: &str| {
        let mut project = Project::new();
        project
            .trust(&hosted.ca)
            .env("OPENTOFU_ENFORCE_GPG_VALIDATION", enforce)
            .cli_config(&config);
        project.write(
            file,
            &required_providers(&[("widget", "registry.opentofu.org/acme/widget", "1.1.0")]),
        );
        let run = project.init(&[]);
        run.assert_success();
        (project.lock(), run)
    };
    let entry = |hashes: &[String]| {
        lock_block(
            &format!("{TOFU_REGISTRY}/acme/widget"),
            "1.1.0",
            "1.1.0",
            hashes,
        )
    };

    let (lock, run) = consumer("main.tofu", trusted_mirror_config(&server.url()), "false");
    assert_eq!(
        lock,
        tofu_lock(&[entry(&all_platform_hashes(&hosted, "1.1.0"))])
    );
    run.assert_not_contains("Incomplete lock file");
    // Not trusted, or trusted where OpenTofu enforces signatures: the
    // hashes the package matched, its own h1: and zh:.
    let (lock, _) = consumer("main.tofu", network_mirror_config(&server.url()), "false");
    assert_eq!(lock, tofu_lock(&[entry(&[here.clone(), here_zh.clone()])]));
    let (lock, _) = consumer("main.tofu", trusted_mirror_config(&server.url()), "true");
    assert_eq!(lock, tofu_lock(&[entry(&[here.clone(), here_zh])]));
    // Terraform has no such setting and ignores it, and locks the h1: alone.
    let (lock, _) = consumer("main.tf", trusted_mirror_config(&server.url()), "false");
    assert_eq!(lock, lock_file(&[entry(&[here])]));
}

/// The lock file `tofu init` writes for `acme/widget` `version` from
/// OpenTofu's registry, as the real ones committed by OpenTofu projects are
/// laid out (testdata/opentofu-lock/ecr/.terraform.lock.hcl is one).
fn opentofu_made_lock(hosted: &HostedRegistry, version: &str) -> String {
    tofu_lock(&[lock_block(
        &format!("{TOFU_REGISTRY}/acme/widget"),
        version,
        "~> 1.0",
        &release_hashes(hosted, version),
    )])
}

const LOCK_FILE_NOTE: &str = "Installing as OpenTofu does: every provider in .terraform.lock.hcl is on registry.opentofu.org, so OpenTofu made it. To install as Terraform does instead, and rewrite the lock file for Terraform, use -engine=terraform.";

#[test]
fn a_lock_file_opentofu_made_chooses_opentofu_and_is_kept_byte_for_byte() {
    let hosted = widget_registry();
    let project = &hosted.project;
    // No *.tofu file: only the lock file says this is an OpenTofu project.
    project.require(&[("widget", "acme/widget", "~> 1.0")]);
    let committed = opentofu_made_lock(&hosted, "1.0.0");
    project.write(".terraform.lock.hcl", &committed);

    project
        .init(&[])
        .assert_success()
        .assert_says(LOCK_FILE_NOTE)
        .assert_stdout_has("- Installing acme/widget v1.0.0...")
        .assert_stdout_has(SIGNING_FOOTER)
        .assert_not_contains("has created a lock file")
        .assert_not_contains("has made some changes");
    assert_eq!(
        std::fs::read(project.lock_path()).unwrap(),
        committed.as_bytes()
    );
    assert!(installed(project, "providers", TOFU_REGISTRY, "1.0.0"));
    assert!(!project.data().join("plugins").exists());

    // -json says so in its first line and in an engine message.
    std::fs::remove_dir_all(project.data()).unwrap();
    let json = project.init(&["-json"]);
    json.assert_success();
    let stream = validated_stream(json.stdout.as_bytes());
    assert_eq!(stream[0]["engine"], "opentofu");
    let engine = stream
        .iter()
        .find(|m| m["message_code"] == "engine")
        .expect("an engine message");
    assert_eq!(engine["engine"], "opentofu");
    assert_eq!(engine["chosen_by"], "lock_file");
    assert_eq!(
        std::fs::read(project.lock_path()).unwrap(),
        committed.as_bytes()
    );

    // `providers` reads it with OpenTofu's rules and says why.
    project
        .run(&["providers"])
        .assert_success()
        .assert_stdout_has(&format!("provider[{TOFU_REGISTRY}/acme/widget] 1.0.0\n"))
        .assert_not_contains("no longer required")
        .assert_stdout_has("Read with OpenTofu's rules (default registry registry.opentofu.org): OpenTofu made .terraform.lock.hcl, every provider in it is on registry.opentofu.org; -engine=terraform reads with Terraform's.");
}

#[test]
fn engine_terraform_on_a_lock_file_opentofu_made_proceeds_as_asked() {
    let hosted = widget_registry();
    let project = &hosted.project;
    project.require(&[("widget", "acme/widget", "~> 1.0")]);
    project.write(".terraform.lock.hcl", &opentofu_made_lock(&hosted, "1.0.0"));

    project
        .init(&["-engine=terraform"])
        .assert_success()
        .assert_says("Installing as Terraform does, as -engine=terraform asks, although OpenTofu made .terraform.lock.hcl (every provider in .terraform.lock.hcl is on registry.opentofu.org): the lock file is rewritten for Terraform where the two differ.")
        .assert_says("Terraform has made some changes to the provider dependency selections");
    let lock = project.lock();
    assert!(lock.starts_with(LOCK_HEADER), "{lock}");
    assert!(
        lock.contains(&format!("provider \"{TERRAFORM_REGISTRY}/acme/widget\"")),
        "{lock}"
    );
    assert!(!lock.contains(TOFU_REGISTRY), "{lock}");
    assert!(installed(project, "plugins", TERRAFORM_REGISTRY, "1.1.0"));
}

#[test]
fn a_lock_file_of_both_registries_keeps_terraforms_rules() {
    let hosted = widget_registry();
    let project = &hosted.project;
    project.require(&[("widget", "acme/widget", "~> 1.0")]);
    let hashes = release_hashes(&hosted, "1.0.0");
    project.write(
        ".terraform.lock.hcl",
        &lock_file(&[
            lock_block(
                &format!("{TOFU_REGISTRY}/acme/widget"),
                "1.0.0",
                "~> 1.0",
                &hashes,
            ),
            lock_block(
                &format!("{TERRAFORM_REGISTRY}/acme/widget"),
                "1.0.0",
                "~> 1.0",
                &hashes,
            ),
        ]),
    );

    let json = project.init(&["-json"]);
    json.assert_success();
    let stream = validated_stream(json.stdout.as_bytes());
    assert_eq!(stream[0]["engine"], "terraform");
    assert!(!stream.iter().any(|m| m["message_code"] == "engine"));
    // As before: the locked Terraform entry is kept, the other dropped.
    assert_eq!(
        project.lock(),
        lock_file(&[lock_block(
            &format!("{TERRAFORM_REGISTRY}/acme/widget"),
            "1.0.0",
            "~> 1.0",
            &hashes
        )])
    );
    assert!(installed(project, "plugins", TERRAFORM_REGISTRY, "1.0.0"));
}

#[test]
fn tofu_files_with_a_lock_file_terraform_made_stop_until_the_engine_is_chosen() {
    let hosted = widget_registry();
    let project = &hosted.project;
    project.write(
        "main.tofu",
        &required_providers(&[("widget", "acme/widget", "~> 1.0")]),
    );
    let hashes = release_hashes(&hosted, "1.0.0");
    let committed = lock_file(&[lock_block(
        &format!("{TERRAFORM_REGISTRY}/acme/widget"),
        "1.0.0",
        "~> 1.0",
        &hashes,
    )]);
    project.write(".terraform.lock.hcl", &committed);

    project
        .init_failing(&[])
        .assert_says("Error: Lock file made by Terraform")
        .assert_says("every provider in its .terraform.lock.hcl is on registry.terraform.io: Terraform made the lock file.")
        .assert_says("Choose with -engine=terraform (install as Terraform does and keep the lock file) or -engine=opentofu (install as OpenTofu does and rewrite the lock file for it)");
    assert!(!project.data().exists());
    project
        .run(&["providers"])
        .assert_failure()
        .assert_says("Error: Lock file made by Terraform");
    assert_eq!(project.lock(), committed);

    // Told, either way, it proceeds: Terraform's rules keep the lock file
    // (and read no *.tofu file, so the configuration here requires nothing
    // but what main.tf says: add it).
    project.require(&[("widget", "acme/widget", "~> 1.0")]);
    project.init(&["-engine=terraform"]).assert_success();
    assert_eq!(project.lock(), committed);
    start_over(project);
    project.write(".terraform.lock.hcl", &committed);
    project
        .init(&["-engine=opentofu"])
        .assert_success()
        .assert_says("Installing as OpenTofu does, as -engine=opentofu asks, although Terraform made .terraform.lock.hcl");
    let lock = project.lock();
    assert!(
        lock.contains(&format!("provider \"{TOFU_REGISTRY}/acme/widget\"")),
        "{lock}"
    );
    assert!(!lock.contains(TERRAFORM_REGISTRY), "{lock}");
}

#[test]
fn init_and_cache_warm_choose_for_each_directory() {
    let mut hosted = widget_registry();
    let tofu_locked = opentofu_made_lock(&hosted, "1.0.0");
    let project = &mut hosted.project;
    let requiring = required_providers(&[("widget", "acme/widget", "~> 1.0")]);
    project.write("tofu/main.tf", &requiring);
    project.write("tofu/.terraform.lock.hcl", &tofu_locked);
    project.write("tf/main.tf", &requiring);
    let work = project.work.clone();

    let run = project.init(&["tofu", "tf"]);
    run.assert_success().assert_says(LOCK_FILE_NOTE);
    let text = &run.stdout;
    let (tofu_part, tf_part) = text.split_at(text.find("[tf]").expect("tf heading"));
    assert!(!tofu_part.contains("has created a lock file"), "{text}");
    assert!(tf_part.contains("Installing as Terraform does."), "{text}");
    assert!(
        tf_part.contains("Terraform has created a lock file"),
        "{text}"
    );
    assert_eq!(
        read_text(&work.join("tofu/.terraform.lock.hcl")),
        tofu_locked
    );
    assert!(
        work.join("tofu/.terraform/providers")
            .join(TOFU_REGISTRY)
            .join("acme/widget/1.0.0")
            .is_dir()
    );
    let tf_lock = read_text(&work.join("tf/.terraform.lock.hcl"));
    assert!(tf_lock.starts_with(LOCK_HEADER), "{tf_lock}");
    assert!(
        tf_lock.contains(&format!("provider \"{TERRAFORM_REGISTRY}/acme/widget\"")),
        "{tf_lock}"
    );
    assert!(
        work.join("tf/.terraform/plugins")
            .join(TERRAFORM_REGISTRY)
            .join("acme/widget/1.1.0")
            .is_dir()
    );

    // -json: each directory names its engine.
    let json = project.init(&["-json", "tofu", "tf"]);
    json.assert_success();
    let stream = validated_stream(json.stdout.as_bytes());
    let engine_of = |dir: &str| {
        stream
            .iter()
            .find(|m| m["message_code"] == "engine" && m["directory"] == dir)
            .map(|m| (m["engine"].clone(), m["chosen_by"].clone()))
    };
    assert_eq!(
        engine_of("tofu"),
        Some(("opentofu".into(), "lock_file".into()))
    );
    assert_eq!(
        engine_of("tf"),
        Some(("terraform".into(), "default".into()))
    );

    let cache = project.dir("cache");
    project.env("TF_PLUGIN_CACHE_DIR", &cache);
    project
        .run(&["cache", "warm", "tofu", "tf"])
        .assert_success()
        .assert_stdout_has("As OpenTofu does, for tofu:")
        .assert_stdout_has("As Terraform does, for tf:");
    for (host, version) in [(TOFU_REGISTRY, "1.0.0"), (TERRAFORM_REGISTRY, "1.1.0")] {
        assert!(
            cache
                .join(host)
                .join("acme/widget")
                .join(version)
                .join(current_platform())
                .is_dir(),
            "{host} {version}"
        );
    }
}

#[test]
fn a_real_opentofu_projects_lock_file_is_read_with_opentofus_rules() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/opentofu-lock/ecr");
    let project = Project::new();
    for entry in std::fs::read_dir(&fixture).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), project.work.join(entry.file_name())).unwrap();
    }
    let committed = std::fs::read(project.lock_path()).unwrap();
    let run = project.run(&["providers"]);
    run.assert_success()
        .assert_not_contains("no longer required")
        .assert_not_contains("not locked yet")
        .assert_stdout_has(&format!("provider[{TOFU_REGISTRY}/hashicorp/aws] 5.73.0\n"))
        .assert_stdout_has(&format!("provider[{TOFU_REGISTRY}/hashicorp/null] 3.2.3\n"))
        .assert_stdout_has("Read with OpenTofu's rules (default registry registry.opentofu.org)");
    assert_eq!(std::fs::read(project.lock_path()).unwrap(), committed);
}
