//! `tfinstall providers lock` against a real HTTPS registry with signed
//! SHA256SUMS, a network mirror and a filesystem mirror.

mod support;

use support::*;

/// Two platforms other than the current one, so every test covers a
/// platform that `init` here could never install.
fn other_platforms() -> Vec<String> {
    [
        "linux_arm64",
        "darwin_arm64",
        "windows_amd64",
        "linux_amd64",
    ]
    .iter()
    .map(|p| p.to_string())
    .filter(|p| *p != current_platform())
    .take(2)
    .collect()
}

fn all_platforms() -> Vec<String> {
    let mut all = vec![current_platform()];
    all.extend(other_platforms());
    all
}

/// The configuration's one requirement: `hashicorp/null` `~> 3.0`.
const NULL: [(&str, &str, &str); 1] = [("null", "hashicorp/null", "~> 3.0")];

/// `hashicorp/null` 3.2.0 for `platforms` from a registry standing in for
/// `registry.terraform.io`, and a project requiring `~> 3.0` of it.
fn null_world(platforms: &[String]) -> HostedRegistry {
    let platforms: Vec<&str> = platforms.iter().map(String::as_str).collect();
    let world = HostedRegistry::new(|registry| {
        registry.provider(ProviderSpec::new("hashicorp", "null", "3.2.0").platforms(&platforms))
    })
    .standing_in_for("registry.terraform.io");
    world.project.require(&NULL);
    world
}

/// The hashes the lock file records for one provider, in file order.
fn locked_hashes(lock: &str) -> Vec<String> {
    lock.lines()
        .map(str::trim)
        .filter(|l| l.starts_with("\"h1:") || l.starts_with("\"zh:"))
        .map(|l| l.trim_end_matches(',').trim_matches('"').to_string())
        .collect()
}

/// What `init` on `platform` records for null 3.2.0: the package's `h1:`
/// plus every `zh:` the signed SHA256SUMS lists.
fn init_hashes(tree: &PublishedTree, platform: &str) -> Vec<String> {
    let mut hashes: Vec<String> = tree
        .packages
        .iter()
        .map(|p| p.zh.clone().unwrap())
        .collect();
    hashes.push(tree.package("null", "3.2.0", platform).h1.clone());
    hashes.sort();
    hashes
}

#[test]
fn multi_platform_lock_holds_what_init_records_on_each_platform() {
    let world = null_world(&all_platforms());
    let others = other_platforms();
    let current = current_platform();
    let run = world.project.run(&[
        "providers",
        "lock",
        &format!("-platform={}", others[0]),
        &format!("-platform={}", others[1]),
        &format!("-platform={current}"),
    ]);
    run.assert_success();

    let key_id = world.key.key_id();
    let mut expected = String::new();
    for platform in [&others[0], &others[1], &current] {
        expected.push_str(&format!(
            "- Fetching hashicorp/null 3.2.0 for {platform}...\n- Retrieved hashicorp/null 3.2.0 for {platform} (self-signed, key ID {key_id})\n"
        ));
    }
    for platform in [&others[0], &others[1], &current] {
        expected.push_str(&format!(
            "- Obtained hashicorp/null checksums for {platform}; This was a new provider and the checksums for this platform are now tracked in the lock file\n"
        ));
    }
    expected.push_str("\nSuccess! Terraform has updated the lock file.\n\nReview the changes in .terraform.lock.hcl and then commit to your\nversion control system to retain the new checksums.\n\n");
    assert_eq!(run.stdout, expected);

    // The union of what init records on each of the three platforms.
    let mut union: Vec<String> = all_platforms()
        .iter()
        .flat_map(|p| init_hashes(&world.tree, p))
        .collect();
    union.sort();
    union.dedup();
    let lock = world.project.lock();
    assert_eq!(locked_hashes(&lock), union);
    assert!(lock.starts_with("# This file is maintained automatically by \"terraform init\".\n# Manual edits may be lost in future updates.\n\nprovider \"registry.terraform.io/hashicorp/null\" {\n  version     = \"3.2.0\"\n  constraints = \"~> 3.0\"\n  hashes = [\n"));

    // And init here, in a project of its own, records exactly its share.
    let fresh = Project::requiring(&NULL);
    let mut init = world.project.command(&["init"]);
    init.current_dir(&fresh.work).assert().success();
    assert_eq!(
        locked_hashes(&fresh.lock()),
        init_hashes(&world.tree, &current)
    );
    // The lock command installs nothing.
    assert!(!world.project.data().exists());
}

#[test]
fn a_lock_made_by_providers_lock_is_accepted_by_init_unchanged() {
    let world = null_world(&all_platforms());
    let others = other_platforms();
    world
        .project
        .command(&[
            "providers",
            "lock",
            &format!("-platform={}", current_platform()),
            &format!("-platform={}", others[0]),
        ])
        .assert()
        .success();
    let before = world.project.lock();

    let run = world.project.run(&["init"]);
    run.assert_success();
    let stdout = &run.stdout;
    assert!(
        stdout
            .contains("- Reusing previous version of hashicorp/null from the dependency lock file"),
        "{stdout}"
    );
    assert!(!stdout.contains("made some changes"), "{stdout}");
    assert_eq!(world.project.lock(), before);
}

#[test]
fn running_again_changes_nothing_and_says_so() {
    let world = null_world(&all_platforms());
    let platform = format!("-platform={}", other_platforms()[0]);
    world
        .project
        .command(&["providers", "lock", &platform])
        .assert()
        .success();
    let before = world.project.lock();
    let run = world.project.run(&["providers", "lock", &platform]);
    run.assert_success();
    let stdout = &run.stdout;
    assert!(
        stdout.contains(&format!(
            "- Obtained hashicorp/null checksums for {}; All checksums for this platform were already tracked in the lock file\n",
            other_platforms()[0]
        )),
        "{stdout}"
    );
    assert!(
        stdout.ends_with(
            "\nSuccess! Terraform has validated the lock file and found no need for changes.\n"
        ),
        "{stdout}"
    );
    assert_eq!(world.project.lock(), before);
}

#[test]
fn a_new_platform_adds_checksums_to_an_existing_lock() {
    let world = null_world(&all_platforms());
    let others = other_platforms();
    world
        .project
        .command(&["providers", "lock", &format!("-platform={}", others[0])])
        .assert()
        .success();
    let run = world
        .project
        .run(&["providers", "lock", &format!("-platform={}", others[1])]);
    run.assert_success();
    assert!(run.stdout.contains(&format!(
        "- Obtained hashicorp/null checksums for {}; Additional checksums for this platform are now tracked in the lock file\n",
        others[1]
    )));
    let lock = world.project.lock();
    for platform in &others {
        let h1 = &world.tree.package("null", "3.2.0", platform).h1;
        assert!(lock.contains(h1.as_str()), "{platform} missing from {lock}");
    }
}

#[test]
fn the_installed_package_for_this_platform_is_not_downloaded_again() {
    for layout in ["-layout=providers", "-layout=plugins"] {
        installed_package_is_reused(layout);
    }
}

fn installed_package_is_reused(layout: &str) {
    let world = null_world(&all_platforms());
    let current = current_platform();
    let other = &other_platforms()[0];
    world.project.command(&["init", layout]).assert().success();
    let installed = Snapshot::of(&world.project.data());
    world.server.clear_log();

    let run = world.project.run(&[
        "providers",
        "lock",
        &format!("-platform={current}"),
        &format!("-platform={other}"),
    ]);
    run.assert_success();
    let stdout = &run.stdout;
    assert!(
        stdout.contains(&format!(
            "- Using previously-installed hashicorp/null 3.2.0 for {current}\n"
        )),
        "{stdout}"
    );
    assert_eq!(
        world
            .server
            .count(&world.zip_path("null", "3.2.0", &current)),
        0
    );
    assert_eq!(
        world.server.count(&world.zip_path("null", "3.2.0", other)),
        1
    );
    let lock = world.project.lock();
    assert!(lock.contains(world.tree.package("null", "3.2.0", other).h1.as_str()));
    assert_eq!(Snapshot::of(&world.project.data()), installed);
}

#[test]
fn only_the_named_providers_are_locked() {
    let platforms = [current_platform()];
    let platform_refs: Vec<&str> = platforms.iter().map(String::as_str).collect();
    let world = HostedRegistry::new(|registry| {
        registry
            .provider(ProviderSpec::new("hashicorp", "null", "3.2.0").platforms(&platform_refs))
            .provider(ProviderSpec::new("hashicorp", "random", "3.1.0").platforms(&platform_refs))
    })
    .standing_in_for("registry.terraform.io");
    world.project.require(&[
        ("null", "hashicorp/null", ""),
        ("random", "hashicorp/random", ""),
    ]);
    world
        .project
        .command(&["providers", "lock", "hashicorp/random"])
        .assert()
        .success();
    let lock = world.project.lock();
    assert!(lock.contains("provider \"registry.terraform.io/hashicorp/random\""));
    assert!(!lock.contains("hashicorp/null"));
}

#[test]
fn a_filesystem_mirror_gives_only_local_hashes() {
    let world = null_world(&[current_platform()]);
    let mirror_dir = tempfile::tempdir().unwrap();
    let other = &other_platforms()[0];
    let platforms = [current_platform(), other.clone()];
    let platform_refs: Vec<&str> = platforms.iter().map(String::as_str).collect();
    let tree = FsMirror::new()
        .provider(
            ProviderSpec::new("hashicorp", "null", "3.2.0").platforms(&platform_refs),
            Layout::Packed,
        )
        .write(mirror_dir.path());
    let run = world.project.run(&[
        "providers",
        "lock",
        &format!("-fs-mirror={}", mirror_dir.path().display()),
        &format!("-platform={other}"),
    ]);
    run.assert_success();
    assert!(run.stdout.contains(&format!(
        "- Retrieved hashicorp/null 3.2.0 for {other} (unauthenticated)\n"
    )));
    assert_eq!(
        locked_hashes(&world.project.lock()),
        [tree.package("null", "3.2.0", other).h1.clone()]
    );
    assert!(world.server.requests().is_empty());
}

#[test]
fn a_network_mirror_gives_verified_local_hashes() {
    let world = null_world(&[current_platform()]);
    let mirror_server = TestServer::https(&world.ca);
    let mirror_site = tempfile::tempdir().unwrap();
    let other = &other_platforms()[0];
    let tree = NetworkMirror::new()
        .provider(ProviderSpec::new("hashicorp", "null", "3.2.0").platforms(&[other]))
        .write(mirror_site.path(), &mirror_server.url());
    mirror_server.serve_dir(mirror_site.path());
    let run = world.project.run(&[
        "providers",
        "lock",
        &format!("-net-mirror={}", mirror_server.url()),
        &format!("-platform={other}"),
    ]);
    run.assert_success();
    assert!(run.stdout.contains(&format!(
        "- Retrieved hashicorp/null 3.2.0 for {other} (verified checksum)\n"
    )));
    assert_eq!(
        locked_hashes(&world.project.lock()),
        [tree.package("null", "3.2.0", other).h1.clone()]
    );
}

/// Runs a failing lock command and checks its message and that neither the
/// lock file nor `.terraform` changed.
fn assert_fails_cleanly(world: &HostedRegistry, args: &[&str], expected_stderr: &[&str]) {
    let before = Snapshot::of(&world.project.work);
    let run = world.project.run(args);
    run.assert_failure();
    let stderr = &run.stderr;
    for part in expected_stderr {
        assert!(stderr.contains(part), "{part:?} not in:\n{stderr}");
    }
    assert_eq!(Snapshot::of(&world.project.work), before);
}

/// A project with an installed tree and a lock file to keep intact.
fn initialized_world() -> HostedRegistry {
    let world = null_world(&[current_platform(), other_platforms()[0].clone()]);
    world.project.command(&["init"]).assert().success();
    world
}

#[test]
fn both_mirror_flags_conflict() {
    let world = initialized_world();
    assert_fails_cleanly(
        &world,
        &[
            "providers",
            "lock",
            "-fs-mirror=a",
            "-net-mirror=https://example.com/",
        ],
        &[
            "Error: Invalid installation method options",
            "The -fs-mirror and -net-mirror command line options are mutually-exclusive.",
        ],
    );
}

#[test]
fn a_provider_the_configuration_does_not_need_is_refused() {
    let world = initialized_world();
    assert_fails_cleanly(
        &world,
        &["providers", "lock", "hashicorp/random", "not/a/valid/addr"],
        &[
            "Error: Invalid provider argument",
            "The provider registry.terraform.io/hashicorp/random is not required by the current configuration.",
            "Error: Invalid provider source string",
        ],
    );
}

#[test]
fn bad_platforms_and_mirror_urls_are_refused() {
    let world = initialized_world();
    assert_fails_cleanly(
        &world,
        &["providers", "lock", "-platform=linux"],
        &[
            "Error: Invalid target platform",
            "The string \"linux\" given in the -platform option is not a valid target platform: must be two words separated by an underscore.",
        ],
    );
    assert_fails_cleanly(
        &world,
        &["providers", "lock", "-net-mirror=http://example.com/"],
        &[
            "Error: Invalid network mirror URL",
            "The -net-mirror option requires a valid https: URL as the mirror base URL.",
        ],
    );
}

#[test]
fn a_platform_without_a_package_fails_without_touching_anything() {
    let world = initialized_world();
    assert_fails_cleanly(
        &world,
        &[
            "providers",
            "lock",
            &format!("-platform={}", other_platforms()[0]),
            "-platform=plan9_386",
        ],
        &[
            "Error: Could not retrieve providers for locking",
            "Terraform failed to fetch the requested providers for plan9_386 in order to calculate their checksums:",
            "plan9_386",
        ],
    );
}

#[test]
fn a_download_that_fails_verification_changes_nothing() {
    let world = initialized_world();
    let other = &other_platforms()[0];
    world.server.fault(
        &world.zip_path("null", "3.2.0", other),
        support::Fault::Respond(support::Response::bytes(
            "application/zip",
            support::build_zip(
                &[support::ZipEntry::executable(
                    "terraform-provider-null_v3.2.0",
                    b"tampered".to_vec(),
                )],
                support::Compression::Deflated,
            ),
        )),
    );
    assert_fails_cleanly(
        &world,
        &["providers", "lock", &format!("-platform={other}")],
        &[
            "Error: Could not retrieve providers for locking",
            &format!("for {other} in order to calculate their checksums"),
            "archive has incorrect checksum",
        ],
    );
}

#[test]
fn locked_hashes_are_kept_but_not_enforced() {
    let world = null_world(&all_platforms());
    let stale = "h1:c3RhbGUgaGFzaCBmcm9tIGFub3RoZXIgYnVpbGQgb2YgdGhlIHBhY2thZ2U=";
    std::fs::write(
        world.project.lock_path(),
        format!(
            "provider \"registry.terraform.io/hashicorp/null\" {{\n  version     = \"3.2.0\"\n  constraints = \"~> 3.0\"\n  hashes = [\n    \"{stale}\",\n  ]\n}}\n"
        ),
    )
    .unwrap();
    let run = world.project.run(&["providers", "lock"]);
    run.assert_success();
    assert!(run.stdout.contains(&format!(
        "- Obtained hashicorp/null checksums for {}; Additional checksums for this platform are now tracked in the lock file\n",
        current_platform()
    )));
    let mut expected = init_hashes(&world.tree, &current_platform());
    expected.push(stale.to_string());
    expected.sort();
    assert_eq!(locked_hashes(&world.project.lock()), expected);
}
