//! Lock files complete for every platform a team uses (issue 32): `init
//! -platform` and the committed list (`.tfinstall-platforms`,
//! `TFINSTALL_LOCK_PLATFORMS`), each hash source used when it is there, an
//! untrusted mirror kept out of the lock file, packages hashed without a
//! byte on disk, and a lock made here that a machine of another platform
//! checks read-only, offline, from a cache warmed for it. Real HTTPS
//! registries and mirrors on 127.0.0.1, real signatures, the built binary.

mod support;

use std::path::Path;

use serde_json::Value;
use support::*;

const NULL: [(&str, &str, &str); 1] = [("null", "hashicorp/null", "~> 3.0")];

/// Platforms other than the current one, so that every test covers
/// packages this machine could never install.
fn others(count: usize) -> Vec<String> {
    [
        "linux_arm64",
        "darwin_arm64",
        "windows_amd64",
        "linux_amd64",
    ]
    .iter()
    .map(|p| p.to_string())
    .filter(|p| *p != current_platform())
    .take(count)
    .collect()
}

fn with_current(platforms: &[String]) -> Vec<String> {
    let mut all = vec![current_platform()];
    all.extend(platforms.iter().cloned());
    all
}

/// `hashicorp/null` 3.2.0 (and 3.1.0) for `platforms` from a registry
/// standing in for `registry.terraform.io`; the project requires `~> 3.0`.
fn null_world(platforms: &[String]) -> HostedRegistry {
    let platforms: Vec<&str> = platforms.iter().map(String::as_str).collect();
    let world = HostedRegistry::new(|registry| {
        registry
            .provider(ProviderSpec::new("hashicorp", "null", "3.1.0").platforms(&platforms))
            .provider(ProviderSpec::new("hashicorp", "null", "3.2.0").platforms(&platforms))
    })
    .standing_in_for("registry.terraform.io");
    world.project.require(&NULL);
    world
}

/// The hashes of the lock file, in file order.
fn locked_hashes(lock: &str) -> Vec<String> {
    lock.lines()
        .map(str::trim)
        .filter(|l| l.starts_with("\"h1:") || l.starts_with("\"zh:"))
        .map(|l| l.trim_end_matches(',').trim_matches('"').to_string())
        .collect()
}

/// What `terraform providers lock -platform=…` records for null `version`
/// on `platforms`: each package's `h1:` and every `zh:` of the signed
/// checksums, sorted as the lock file sorts them.
fn expected_hashes(world: &HostedRegistry, version: &str, platforms: &[String]) -> Vec<String> {
    let mut hashes: Vec<String> = world
        .tree
        .packages
        .iter()
        .filter(|p| p.version == version)
        .map(|p| p.zh.clone().unwrap())
        .collect();
    for platform in platforms {
        hashes.push(world.tree.package("null", version, platform).h1.clone());
    }
    hashes.sort();
    hashes.dedup();
    hashes
}

fn platform_flags(platforms: &[String]) -> Vec<String> {
    platforms.iter().map(|p| format!("-platform={p}")).collect()
}

fn run_with(project: &Project, command: &[&str], extra: &[String]) -> Run {
    let mut args: Vec<&str> = command.to_vec();
    args.extend(extra.iter().map(String::as_str));
    project.run(&args)
}

/// The `platform_hashes` lines of a `-json` stream (checked against the
/// schema), as (platform, [(hash, source)]).
fn platform_hashes(stdout: &str) -> Vec<(String, Vec<(String, String)>)> {
    validated_stream(stdout.as_bytes())
        .into_iter()
        .filter(|m| m["type"] == "platform_hashes")
        .map(|m| {
            let hashes = m["hashes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| {
                    (
                        h["hash"].as_str().unwrap().to_owned(),
                        h["source"].as_str().unwrap().to_owned(),
                    )
                })
                .collect();
            (m["platform"].as_str().unwrap().to_owned(), hashes)
        })
        .collect()
}

fn sources_of(found: &[(String, String)]) -> Vec<(&str, &str)> {
    let mut sources: Vec<(&str, &str)> = found
        .iter()
        .map(|(hash, source)| (&hash[..2], source.as_str()))
        .collect();
    sources.sort();
    sources.dedup();
    sources
}

/// Nothing but what the test put there: no package, no temporary file.
fn assert_empty(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn init_with_platforms_locks_each_from_its_package_streamed_in_memory() {
    let other = others(2);
    let mut world = null_world(&with_current(&other));
    let scratch = world.project.dir("tmp");
    world.project.env("TMPDIR", &scratch);
    let run = run_with(&world.project, &["init", "-json"], &platform_flags(&other));
    run.assert_success();

    assert_eq!(
        locked_hashes(&world.project.lock()),
        expected_hashes(&world, "3.2.0", &with_current(&other))
    );
    // Each other platform's package downloaded once, hashed, never stored:
    // only this platform's package is installed, and no temporary file is
    // left (or was needed).
    for platform in &other {
        assert_eq!(
            world
                .server
                .count(&world.zip_path("null", "3.2.0", platform)),
            1
        );
    }
    // The release's checksum list and signature, once for all platforms.
    let sums = world.sums_path("null", "3.2.0", &other[0]);
    assert_eq!(world.server.count(&sums), 1);
    assert_eq!(world.server.count(&format!("{sums}.sig")), 1);
    let installed = world
        .project
        .data()
        .join("plugins/registry.terraform.io/hashicorp/null/3.2.0");
    let platforms: Vec<String> = std::fs::read_dir(installed)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(platforms, [current_platform()]);
    assert_empty(&scratch);

    // -json says where each hash came from.
    let found = platform_hashes(&run.stdout);
    assert_eq!(
        found.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>(),
        other
    );
    for (_, hashes) in &found {
        assert_eq!(
            sources_of(hashes),
            [("h1", "package"), ("zh", "signed_checksums")]
        );
    }
    assert!(!run.stdout.contains("Incomplete lock file"));
}

#[test]
fn init_records_what_providers_lock_records_and_keeps_unchanged_entries() {
    let other = others(2);
    let world = null_world(&with_current(&other));
    let lock_made = world.project.dir("lock-made");
    std::fs::write(lock_made.join("main.tf"), required_providers(&NULL)).unwrap();
    let mut by_lock = world.project.command(&["providers", "lock"]);
    by_lock.args(platform_flags(&with_current(&other)));
    by_lock.current_dir(&lock_made).assert().success();

    let run = run_with(&world.project, &["init"], &platform_flags(&other));
    run.assert_success();
    run.assert_stdout_has(&format!(
        "- Recorded checksums of hashicorp/null v3.2.0 for {}",
        other.join(", ")
    ));
    assert_eq!(
        world.project.lock(),
        read_text(&lock_made.join(".terraform.lock.hcl"))
    );

    // A lock entry whose version does not change keeps its hashes, as
    // Terraform keeps them: a longer list adds nothing, fetches nothing.
    let lock_text = lock_file(&[lock_block(
        "registry.terraform.io/hashicorp/null",
        "3.1.0",
        "~> 3.0",
        &expected_hashes(&world, "3.1.0", &[current_platform()]),
    )]);
    std::fs::write(world.project.lock_path(), &lock_text).unwrap();
    std::fs::remove_dir_all(world.project.data()).unwrap();
    world.server.clear_log();
    run_with(&world.project, &["init"], &platform_flags(&other)).assert_success();
    assert_eq!(world.project.lock(), lock_text);
    for platform in &other {
        assert_eq!(
            world
                .server
                .count(&world.zip_path("null", "3.1.0", platform)),
            0
        );
    }
    // An upgrade writes the entry anew, for every platform.
    run_with(
        &world.project,
        &["init", "-upgrade"],
        &platform_flags(&other),
    )
    .assert_success();
    assert_eq!(
        locked_hashes(&world.project.lock()),
        expected_hashes(&world, "3.2.0", &with_current(&other))
    );
}

#[test]
fn the_committed_list_comes_from_the_nearest_file_unless_the_environment_says_otherwise() {
    let other = others(2);
    let mut world = null_world(&with_current(&other));
    // The repository root holds the list; the configuration is below it.
    let repo = world.project.root.clone();
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::write(
        repo.join(".tfinstall-platforms"),
        format!(
            "# every machine of the team\n{}\n{}  # laptops\n",
            other[0], other[1]
        ),
    )
    .unwrap();
    world.project.init(&[]).assert_success();
    assert_eq!(
        locked_hashes(&world.project.lock()),
        expected_hashes(&world, "3.2.0", &with_current(&other))
    );

    // The variable replaces the file; set but empty, it locks this platform alone.
    for (value, platforms) in [
        (other[1].clone(), with_current(&other[1..])),
        (String::new(), vec![current_platform()]),
    ] {
        std::fs::remove_file(world.project.lock_path()).unwrap();
        std::fs::remove_dir_all(world.project.data()).unwrap();
        world.project.env("TFINSTALL_LOCK_PLATFORMS", &value);
        world.project.init(&[]).assert_success();
        assert_eq!(
            locked_hashes(&world.project.lock()),
            expected_hashes(&world, "3.2.0", &platforms),
            "TFINSTALL_LOCK_PLATFORMS={value:?}"
        );
    }

    // A platform the provider is not released for fails the run, naming
    // it and what listed it, and changes nothing.
    world.project.env("TFINSTALL_LOCK_PLATFORMS", "plan9_386");
    std::fs::remove_file(world.project.lock_path()).unwrap();
    let before = world.project.snapshot();
    world
        .project
        .init_failing(&[])
        .assert_says("Error: Provider not available for a locked platform")
        .assert_says("Provider registry.terraform.io/hashicorp/null v3.2.0 has no package for plan9_386, one of the platforms TFINSTALL_LOCK_PLATFORMS asks the lock file to cover.");
    world.project.assert_unchanged(&before);
}

/// `cache warm -platform` fills the cache with another platform's package
/// and tfinstall's record of its signed release: both commands then take
/// that platform's hashes from the cache, without a request.
#[test]
fn a_plugin_cache_entry_answers_without_a_request() {
    let other = others(1);
    let mut world = null_world(&with_current(&other));
    let cache = world.project.dir("cache");
    world.project.env("TF_PLUGIN_CACHE_DIR", &cache);
    run_with(&world.project, &["cache", "warm"], &platform_flags(&other)).assert_success();
    let download_doc = format!(
        "/{}",
        Registry::download_path("hashicorp", "null", "3.2.0", &other[0])
    );

    world.server.clear_log();
    let run = run_with(&world.project, &["init", "-json"], &platform_flags(&other));
    run.assert_success();
    assert_eq!(world.server.count(&download_doc), 0);
    assert_eq!(
        world
            .server
            .count(&world.zip_path("null", "3.2.0", &other[0])),
        0
    );
    let found = platform_hashes(&run.stdout);
    assert_eq!(
        sources_of(&found[0].1),
        [("h1", "plugin_cache"), ("zh", "plugin_cache")]
    );
    assert_eq!(
        locked_hashes(&world.project.lock()),
        expected_hashes(&world, "3.2.0", &with_current(&other))
    );

    // providers lock takes it from there too, and its log says so.
    std::fs::remove_file(world.project.lock_path()).unwrap();
    world.server.clear_log();
    world.project.env("TFINSTALL_LOG", "info");
    let run = run_with(
        &world.project,
        &["providers", "lock"],
        &platform_flags(&other),
    );
    run.assert_success();
    let h1 = &world.tree.package("null", "3.2.0", &other[0]).h1;
    assert!(
        run.stderr
            .contains(&format!("hashicorp/null 3.2.0 for {}: {h1}, zh:", other[0]))
            && run.stderr.contains(" from the plugin cache"),
        "{}",
        run.stderr
    );
    run.assert_stdout_has(&format!(
        "- Using hashicorp/null 3.2.0 checksums for {} from the plugin cache (self-signed, key ID {})",
        other[0],
        world.key.key_id()
    ));
    assert_eq!(world.server.count(&download_doc), 0);
    assert_eq!(
        locked_hashes(&world.project.lock()),
        expected_hashes(&world, "3.2.0", &other)
    );
}

/// A network mirror's listed `h1:` reaches the lock file only from a
/// mirror trusted with it; from any other, the package is fetched and
/// hashed, and its own `h1:` recorded.
#[test]
fn an_untrusted_mirrors_h1_is_not_recorded_and_a_trusted_ones_is() {
    let other = others(1);
    let platforms = with_current(&other);
    let refs: Vec<&str> = platforms.iter().map(String::as_str).collect();
    let ca = TestCa::new();
    let server = TestServer::https(&ca);
    let site = tempfile::tempdir().unwrap();
    let tree = NetworkMirror::new()
        .provider(
            ProviderSpec::new("acme", "widget", "1.0.0")
                .hostname("registry.opentofu.org")
                .platforms(&refs),
        )
        .write(site.path(), &server.url());
    server.serve_dir(site.path());
    // The mirror lies about the other platform's h1: and tells the truth
    // about its zh:.
    let bogus = "h1:bm90IHRoZSBwYWNrYWdlIHRoZSBtaXJyb3Igc2VydmVzIGF0IGFsbC4uLi4=";
    let real = tree.package("widget", "1.0.0", &other[0]).clone();
    edit_json(
        &site
            .path()
            .join("registry.opentofu.org/acme/widget/1.0.0.json"),
        |doc| doc["archives"][&other[0]]["hashes"] = serde_json::json!([bogus, real.zh]),
    );
    let zip = format!(
        "/{}",
        real.url_path.as_ref().unwrap().trim_start_matches('/')
    );

    let consumer = |config: String, file: &str| {
        let mut project = Project::new();
        project.trust(&ca).cli_config(&config);
        project.write(
            file,
            &required_providers(&[("widget", "registry.opentofu.org/acme/widget", "1.0.0")]),
        );
        server.clear_log();
        let run = run_with(&project, &["init", "-json"], &platform_flags(&other));
        run.assert_success();
        (locked_hashes(&project.lock()), platform_hashes(&run.stdout))
    };

    // Not trusted (and Terraform has no such trust at all): the package
    // is fetched, its real h1: recorded, the mirror's word not.
    for (config, file) in [
        (network_mirror_config(&server.url()), "main.tofu"),
        (trusted_mirror_config(&server.url()), "main.tf"),
    ] {
        let (lock, found) = consumer(config, file);
        assert!(lock.contains(&real.h1), "{file}: {lock:?}");
        assert!(!lock.contains(&bogus.to_owned()), "{file}: {lock:?}");
        assert_eq!(server.count(&zip), 1, "{file}");
        let (_, hashes) = &found[0];
        assert!(hashes.contains(&(real.h1.clone(), "package".to_owned())));
    }
    // Trusted (OpenTofu's trust_all_hashes): the mirror's list is the
    // lock entry, and the other platform's package is not fetched.
    let (lock, found) = consumer(trusted_mirror_config(&server.url()), "main.tofu");
    assert!(lock.contains(&bogus.to_owned()), "{lock:?}");
    assert_eq!(server.count(&zip), 0);
    assert_eq!(
        sources_of(&found[0].1),
        [("h1", "network_mirror"), ("zh", "network_mirror")]
    );
}

fn trusted_mirror_config(url: &str) -> String {
    format!(
        "provider_installation {{\n  network_mirror {{\n    url              = \"{url}\"\n    trust_all_hashes = true\n  }}\n}}\n"
    )
}

/// OpenTofu's registry lists every platform's `h1:` in `packages`: once
/// the signed checksums confirm that platform's `zh:`, no package is
/// fetched for it.
#[test]
fn opentofu_registry_packages_give_other_platforms_without_a_download() {
    let other = others(1);
    let platforms = with_current(&other);
    let refs: Vec<&str> = platforms.iter().map(String::as_str).collect();
    let mut world = HostedRegistry::new(|registry| {
        registry.provider(ProviderSpec::new("acme", "widget", "1.1.0").platforms(&refs))
    });
    let url = world.server.url_for("/v1/providers/");
    world
        .project
        .cli_config(&host_block("registry.opentofu.org", &url));
    let mut packages = serde_json::Map::new();
    for package in &world.tree.packages {
        let size = std::fs::metadata(&package.path).unwrap().len();
        packages.insert(
            package.platform.clone(),
            serde_json::json!({ "hashes": [package.h1, package.zh.clone().unwrap()], "package_size": size }),
        );
    }
    for platform in &platforms {
        let doc = world.site_path(&Registry::download_path(
            "acme", "widget", "1.1.0", platform,
        ));
        edit_json(&doc, |doc| {
            doc["packages"] = Value::Object(packages.clone())
        });
    }
    // Where OpenTofu enforces signatures, it records the registry's h1:
    // hashes of other platforms only when asked to lock them, so the
    // entry is exactly init's plus that platform's h1:.
    world.project.env("OPENTOFU_ENFORCE_GPG_VALIDATION", "true");
    world.project.write(
        "main.tofu",
        &required_providers(&[("widget", "acme/widget", "1.1.0")]),
    );
    let run = run_with(&world.project, &["init", "-json"], &platform_flags(&other));
    run.assert_success();
    assert_eq!(
        world
            .server
            .count(&world.zip_path("widget", "1.1.0", &other[0])),
        0
    );
    let found = platform_hashes(&run.stdout);
    assert_eq!(
        sources_of(&found[0].1),
        [("h1", "registry_packages"), ("zh", "signed_checksums")]
    );
    let mut expected: Vec<String> = world
        .tree
        .packages
        .iter()
        .flat_map(|p| [p.h1.clone(), p.zh.clone().unwrap()])
        .collect();
    expected.sort();
    assert_eq!(locked_hashes(&world.project.lock()), expected);
}

/// An archive the streaming walker cannot vouch for (here, bytes before
/// its first entry, as a self-extracting archive has) is fetched again to
/// a temporary file, hashed by the full extractor without unpacking, and
/// removed; its `h1:` is the one the files give.
#[test]
fn a_package_the_stream_cannot_vouch_for_is_hashed_from_a_file_that_is_removed() {
    let other = others(1);
    let mut world = null_world(&with_current(&other));
    let package = world.tree.package("null", "3.2.0", &other[0]).clone();
    let mut prefixed = b"#!/bin/sh\nexit 0\n".to_vec();
    prefixed.extend(std::fs::read(&package.path).unwrap());
    std::fs::write(&package.path, &prefixed).unwrap();
    // The signed list and the registry's document name the new archive.
    let sums_path = world.site_path(
        world
            .sums_path("null", "3.2.0", &other[0])
            .trim_start_matches('/'),
    );
    let sums = read_text(&sums_path).replace(
        package.sha256_hex.as_deref().unwrap(),
        &sha256_hex(&prefixed),
    );
    std::fs::write(&sums_path, &sums).unwrap();
    std::fs::write(
        sums_path.with_file_name(format!(
            "{}.sig",
            sums_path.file_name().unwrap().to_string_lossy()
        )),
        world.key.sign_detached(sums.as_bytes()),
    )
    .unwrap();
    let doc = world.site_path(&Registry::download_path(
        "hashicorp",
        "null",
        "3.2.0",
        &other[0],
    ));
    edit_json(&doc, |doc| doc["shasum"] = sha256_hex(&prefixed).into());
    let scratch = world.project.dir("tmp");
    world.project.env("TMPDIR", &scratch);

    run_with(
        &world.project,
        &["providers", "lock"],
        &platform_flags(&other),
    )
    .assert_success();
    assert_eq!(
        world
            .server
            .count(&world.zip_path("null", "3.2.0", &other[0])),
        2
    );
    let lock = world.project.lock();
    assert!(lock.contains(&h1_of_zip(&prefixed)), "{lock}");
    assert!(lock.contains(&zh_hash(&prefixed)), "{lock}");
    assert_empty(&scratch);
}

/// `init DIR…` asks for each other platform's package once, however many
/// directories need it.
#[test]
fn directories_of_one_run_share_each_platforms_download() {
    let other = others(1);
    let world = null_world(&with_current(&other));
    let dirs: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|name| {
            let dir = world.project.work.join(name);
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("main.tf"), required_providers(&NULL)).unwrap();
            dir.display().to_string()
        })
        .collect();
    let mut args = vec!["init".to_owned()];
    args.extend(platform_flags(&other));
    args.extend(dirs.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    world.project.run(&args).assert_success();
    assert_eq!(
        world
            .server
            .count(&world.zip_path("null", "3.2.0", &other[0])),
        1
    );
    for dir in &dirs {
        assert_eq!(
            locked_hashes(&read_text(&Path::new(dir).join(".terraform.lock.hcl"))),
            expected_hashes(&world, "3.2.0", &with_current(&other))
        );
    }
}

/// The lock made here with the committed list passes `-lockfile=readonly`
/// on a machine of another platform whose plugin cache `cache warm
/// -platform` filled, with no request at all; without the list, that
/// machine is told which platform the lock lacks and the command that adds
/// it.
#[test]
fn a_lock_made_here_passes_readonly_on_another_platform_from_a_warmed_cache_offline() {
    let other = others(1);
    let there = &other[0];
    let world = null_world(&with_current(&other));
    for committed in [true, false] {
        let _ = std::fs::remove_file(world.project.lock_path());
        let _ = std::fs::remove_dir_all(world.project.data());
        let list = world.project.work.join(".tfinstall-platforms");
        if committed {
            std::fs::write(&list, format!("{there}\n")).unwrap();
        } else {
            let _ = std::fs::remove_file(&list);
        }
        world.project.init(&[]).assert_success();
        let lock = std::fs::read(world.project.lock_path()).unwrap();

        // The CI image for the other platform is built here.
        let cache = world.project.dir(&format!("cache-{committed}"));
        let mut warm = world
            .project
            .command(&["cache", "warm", &format!("-platform={there}")]);
        warm.env("TF_PLUGIN_CACHE_DIR", &cache).assert().success();

        // The other machine: the committed files, the warmed cache, no network.
        let checkout = world.project.dir(&format!("checkout-{committed}"));
        std::fs::write(checkout.join("main.tf"), required_providers(&NULL)).unwrap();
        std::fs::write(checkout.join(".terraform.lock.hcl"), &lock).unwrap();
        world.server.clear_log();
        let mut readonly = world.project.command(&["init", "-lockfile=readonly"]);
        readonly
            .current_dir(&checkout)
            .env("TF_PLUGIN_CACHE_DIR", &cache)
            .env("TFINSTALL_TEST_PLATFORM", there);
        let run = Run::of(readonly);
        run.assert_success();
        assert!(
            world.server.requests().is_empty(),
            "{:?}",
            world.server.requests()
        );
        assert_eq!(
            std::fs::read(checkout.join(".terraform.lock.hcl")).unwrap(),
            lock
        );
        if committed {
            run.assert_not_contains("Provider lock file not updated");
        } else {
            run.assert_says("Warning: Provider lock file not updated");
            run.assert_says(&format!(
                "The lock file does not record the h1: checksums of hashicorp/null for {there}, the platform of this machine. To add them, run: tfinstall providers lock -platform={there}"
            ));
        }
    }
}

/// A lock file whose checksums are another platform's only (made from a
/// mirror there) fails the install here with Terraform's message, plus
/// the platform it lacks and tfinstall's command that adds it.
#[test]
fn a_lock_that_does_not_cover_this_platform_names_it_and_the_fix() {
    let other = others(1);
    let world = null_world(&with_current(&other));
    let theirs = world.tree.package("null", "3.2.0", &other[0]).h1.clone();
    std::fs::write(
        world.project.lock_path(),
        lock_file(&[lock_block(
            "registry.terraform.io/hashicorp/null",
            "3.2.0",
            "~> 3.0",
            &[theirs],
        )]),
    )
    .unwrap();
    let here = current_platform();
    world
        .project
        .init_failing(&[])
        .assert_says("doesn't match any of the checksums previously recorded in the dependency lock file")
        .assert_says(&format!(
            "The lock file records no checksum of this package for {here}, the platform of this machine; it was probably made on another. If you trust where this package comes from, add this platform's checksums with: tfinstall providers lock -platform={here}"
        ));
}

// ---- byte for byte as Terraform 1.11.4 locks ----
//
// The packages are committed zips (`testdata/lock-platforms/packages/`),
// so the hashes Terraform recorded from them are the hashes tfinstall
// meets here; the signing key and the server are made afresh each run and
// leave no trace in a lock file. `cargo test --test lock_platforms --
// --ignored` runs the `terraform` on PATH (1.11.4) on the same scenarios
// and records its lock files again; the tests need no Terraform.

/// The platforms of the comparisons: this machine's, as Terraform saw it
/// when recording (tfinstall plays it, whatever machine runs the tests),
/// and four others.
const FIVE: [&str; 5] = [
    "linux_amd64",
    "linux_arm64",
    "darwin_amd64",
    "darwin_arm64",
    "windows_amd64",
];
const RECORDED_ON: &str = "linux_amd64";
const TERRAFORM_VERSION: &str = "1.11.4";

const GOLDEN_REQUIREMENTS: [(&str, &str, &str); 2] = [
    ("null", "hashicorp/null", "~> 3.2"),
    ("random", "hashicorp/random", ""),
];

fn golden_path(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/lock-platforms")
        .join(name)
}

/// The registry of the committed packages, standing in for
/// `registry.terraform.io`.
fn golden_world() -> HostedRegistry {
    let packages = golden_path("packages");
    HostedRegistry::new(|registry| {
        registry
            .provider(
                ProviderSpec::new("hashicorp", "null", "3.2.3")
                    .platforms(&FIVE)
                    .committed_packages(&packages),
            )
            .provider(
                ProviderSpec::new("hashicorp", "random", "3.6.3")
                    .platforms(&FIVE)
                    .committed_packages(&packages),
            )
    })
    .standing_in_for("registry.terraform.io")
}

/// The lock file a merge scenario starts from: `null` with this platform's
/// `h1:` and one hash no package has, which both programs keep.
fn merge_start(world: &HostedRegistry) -> String {
    lock_file(&[lock_block(
        "registry.terraform.io/hashicorp/null",
        "3.2.3",
        "~> 3.2",
        &[
            world.tree.package("null", "3.2.3", RECORDED_ON).h1.clone(),
            "h1:c3RhbGUgaGFzaCBmcm9tIGFub3RoZXIgYnVpbGQgb2YgdGhlIHBhY2thZ2U=".to_owned(),
        ],
    )])
}

/// One comparison: the commands each program runs in a fresh directory,
/// and the lock file Terraform left, recorded as `NAME.hcl`.
struct GoldenScenario {
    name: &'static str,
    /// Starts the directory with a lock file.
    merge: bool,
    terraform: &'static [&'static [&'static str]],
    tfinstall: &'static [&'static [&'static str]],
}

const GOLDEN: [GoldenScenario; 3] = [
    GoldenScenario {
        name: "providers-lock",
        merge: false,
        terraform: &[&["providers", "lock"]],
        tfinstall: &[&["providers", "lock"]],
    },
    GoldenScenario {
        name: "providers-lock-merge",
        merge: true,
        terraform: &[&["providers", "lock"]],
        tfinstall: &[&["providers", "lock"]],
    },
    GoldenScenario {
        name: "init-then-providers-lock",
        merge: false,
        terraform: &[&["init", "-input=false"], &["providers", "lock"]],
        tfinstall: &[&["init"]],
    },
];

/// A fresh working directory for `scenario` below the world's project.
fn golden_dir(world: &HostedRegistry, scenario: &GoldenScenario, tool: &str) -> std::path::PathBuf {
    let dir = world.project.dir(&format!("{}-{tool}", scenario.name));
    std::fs::write(
        dir.join("main.tf"),
        required_providers(&GOLDEN_REQUIREMENTS),
    )
    .unwrap();
    if scenario.merge {
        std::fs::write(dir.join(".terraform.lock.hcl"), merge_start(world)).unwrap();
    }
    dir
}

/// The five platforms as `-platform` flags after `args`, for the commands
/// that take them: `providers lock`, and tfinstall's `init`.
fn with_five(args: &[&str], terraform: bool) -> Vec<String> {
    let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    if args[0] == "providers" || (args[0] == "init" && !terraform) {
        all.extend(FIVE.iter().map(|p| format!("-platform={p}")));
    }
    all
}

fn tfinstall_golden(world: &HostedRegistry, scenario: &GoldenScenario) -> String {
    let dir = golden_dir(world, scenario, "tfinstall");
    for args in scenario.tfinstall {
        let mut command = world.project.command(&[]);
        command
            .args(with_five(args, false))
            .current_dir(&dir)
            .env("TFINSTALL_TEST_PLATFORM", RECORDED_ON)
            .assert()
            .success();
    }
    read_text(&dir.join(".terraform.lock.hcl"))
}

#[test]
fn locks_for_five_platforms_are_byte_identical_to_terraforms() {
    let world = golden_world();
    for scenario in &GOLDEN {
        assert_eq!(
            tfinstall_golden(&world, scenario),
            read_text(&golden_path(&format!("{}.hcl", scenario.name))),
            "{}",
            scenario.name
        );
    }
    // tfinstall's own two steps end where its one does.
    let dir = golden_dir(&world, &GOLDEN[2], "tfinstall-two-steps");
    for args in [
        vec!["init".to_owned()],
        with_five(&["providers", "lock"], false),
    ] {
        let mut command = world.project.command(&[]);
        command
            .args(args)
            .current_dir(&dir)
            .env("TFINSTALL_TEST_PLATFORM", RECORDED_ON)
            .assert()
            .success();
    }
    assert_eq!(
        read_text(&dir.join(".terraform.lock.hcl")),
        read_text(&golden_path("init-then-providers-lock.hcl"))
    );
}

/// Records each scenario's lock file with the `terraform` on PATH, which
/// must be Terraform 1.11.4 on linux_amd64; run with `-- --ignored`.
#[test]
#[ignore = "needs real Terraform on PATH; refreshes testdata/lock-platforms"]
fn record_terraform_locks() {
    let version = std::process::Command::new("terraform")
        .args(["version", "-json"])
        .env("CHECKPOINT_DISABLE", "1")
        .output()
        .expect("terraform on PATH");
    let version: Value = serde_json::from_slice(&version.stdout).unwrap();
    assert_eq!(version["terraform_version"], TERRAFORM_VERSION);
    assert_eq!(version["platform"], RECORDED_ON);
    let world = golden_world();
    let config = world.project.home.join("tfinstall-test.tfrc");
    for scenario in &GOLDEN {
        let dir = golden_dir(&world, scenario, "terraform");
        for args in scenario.terraform {
            let output = std::process::Command::new("terraform")
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .env("HOME", &world.project.home)
                .env("TF_CLI_CONFIG_FILE", &config)
                .env("SSL_CERT_FILE", world.ca.ca_pem_path())
                .env("CHECKPOINT_DISABLE", "1")
                .current_dir(&dir)
                .args(with_five(args, true))
                .output()
                .unwrap();
            assert!(
                output.status.success(),
                "terraform {args:?}: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::fs::copy(
            dir.join(".terraform.lock.hcl"),
            golden_path(&format!("{}.hcl", scenario.name)),
        )
        .unwrap();
    }
}
