//! `tfinstall providers mirror`: the packed layout plus network-mirror
//! indexes, made from a real HTTPS registry (signed SHA256SUMS) or from
//! other mirrors, then served by a static HTTPS server to `tfinstall init`.

mod support;

use std::path::PathBuf;

use support::*;

fn other_platform() -> String {
    ["linux_arm64", "linux_amd64"]
        .iter()
        .map(|p| p.to_string())
        .find(|p| *p != current_platform())
        .unwrap()
}

/// The configuration's one requirement: `hashicorp/null` `~> 3.0`.
const NULL: [(&str, &str, &str); 1] = [("null", "hashicorp/null", "~> 3.0")];

const PROVIDER_DIR: &str = "registry.terraform.io/hashicorp/null";

/// A registry for `registry.terraform.io` (through a CLI-config `host`
/// override), a project using it and an output directory for the mirror.
struct World {
    registry: HostedRegistry,
    out: PathBuf,
}

impl World {
    fn new(versions: &[&str]) -> World {
        let platforms = [current_platform(), other_platform()];
        let platforms: Vec<&str> = platforms.iter().map(String::as_str).collect();
        let registry = HostedRegistry::new(|mut registry| {
            for version in versions {
                registry = registry.provider(
                    ProviderSpec::new("hashicorp", "null", version).platforms(&platforms),
                );
            }
            registry
        })
        .standing_in_for("registry.terraform.io");
        registry.project.require(&NULL);
        let out = registry.project.dir("out");
        World { registry, out }
    }

    fn mirror_args(&self, platforms: &[&str]) -> Vec<String> {
        let mut args = vec!["providers".to_string(), "mirror".to_string()];
        args.extend(platforms.iter().map(|p| format!("-platform={p}")));
        args.push(self.out.display().to_string());
        args
    }

    fn mirror(&self, platforms: &[&str]) -> Run {
        let args = self.mirror_args(platforms);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.registry.project.run(&args)
    }

    fn provider_dir(&self) -> PathBuf {
        self.out.join(PROVIDER_DIR)
    }

    /// The `VERSION.json` archive entry this run must write for a package.
    fn archive_entry(&self, version: &str, platform: &str) -> String {
        let package = self.registry.tree.package("null", version, platform);
        format!(
            "    \"{platform}\": {{\n      \"hashes\": [\n        \"{}\",\n        \"{}\"\n      ],\n      \"url\": \"{}\"\n    }}",
            package.h1,
            package.zh.as_deref().unwrap(),
            package.filename
        )
    }
}

#[test]
fn a_mirror_served_by_a_static_server_works_as_a_network_mirror_for_init() {
    let world = World::new(&["3.2.0"]);
    let current = current_platform();
    let other = other_platform();
    let run = world.mirror(&[&current, &other]);
    run.assert_success();
    assert_eq!(
        run.stdout,
        format!(
            "- Mirroring hashicorp/null...\n  - Selected v3.2.0 to meet constraints ~> 3.0\n  - Downloading package for {current}...\n  - Package authenticated: self-signed\n  - Downloading package for {other}...\n  - Package authenticated: self-signed\n"
        )
    );

    let dir = world.provider_dir();
    assert_eq!(
        read_text(&dir.join("index.json")),
        "{\n  \"versions\": {\n    \"3.2.0\": {}\n  }\n}"
    );
    let mut entries = [
        world.archive_entry("3.2.0", &current),
        world.archive_entry("3.2.0", &other),
    ];
    entries.sort();
    assert_eq!(
        read_text(&dir.join("3.2.0.json")),
        format!("{{\n  \"archives\": {{\n{}\n  }}\n}}", entries.join(",\n"))
    );
    for platform in [&current, &other] {
        let package = world.registry.tree.package("null", "3.2.0", platform);
        assert_eq!(
            std::fs::read(dir.join(&package.filename)).unwrap(),
            std::fs::read(&package.path).unwrap()
        );
    }
    // No staging leftovers: the top level holds the hostname directory only.
    let top: Vec<String> = std::fs::read_dir(&world.out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(top, ["registry.terraform.io"]);

    let mirror_server = TestServer::https(&world.registry.ca);
    mirror_server.serve_dir(&world.out);
    let mut consumer = Project::new();
    consumer
        .trust(&world.registry.ca)
        .cli_config(&network_mirror_config(&mirror_server.url()));
    consumer.require(&NULL);
    world.registry.server.clear_log();
    let run = consumer.init(&[]);
    run.assert_success();
    assert!(
        run.stdout
            .contains("- Installed hashicorp/null v3.2.0 (verified checksum)"),
        "{}",
        run.stdout
    );
    assert!(world.registry.server.requests().is_empty());
    assert_eq!(
        mirror_server.count(&format!(
            "/{PROVIDER_DIR}/{}",
            world
                .registry
                .tree
                .package("null", "3.2.0", &current)
                .filename
        )),
        1
    );
}

#[test]
fn running_again_downloads_nothing_and_rewrites_nothing() {
    let world = World::new(&["3.2.0"]);
    let current = current_platform();
    let other = other_platform();
    world.mirror(&[&current, &other]).assert_success();
    let before = Snapshot::of(&world.out);
    world.registry.server.clear_log();

    let run = world.mirror(&[&current, &other]);
    run.assert_success();
    assert_eq!(
        run.stdout,
        format!(
            "- Mirroring hashicorp/null...\n  - Selected v3.2.0 to meet constraints ~> 3.0\n  - Package for {current} is already in the mirror (self-signed)\n  - Package for {other} is already in the mirror (self-signed)\n"
        )
    );
    for platform in [&current, &other] {
        assert_eq!(
            world
                .registry
                .server
                .count(&world.registry.zip_path("null", "3.2.0", platform)),
            0
        );
    }
    assert_eq!(Snapshot::of(&world.out), before);
}

#[test]
fn a_package_that_no_longer_verifies_is_replaced() {
    let world = World::new(&["3.2.0"]);
    let current = current_platform();
    world.mirror(&[&current]).assert_success();
    let package = world.registry.tree.package("null", "3.2.0", &current);
    let mirrored = world.provider_dir().join(&package.filename);
    std::fs::write(&mirrored, b"not the package").unwrap();

    let run = world.mirror(&[&current]);
    run.assert_success();
    assert!(run.stdout.contains(&format!(
        "  - Package for {current} in the mirror does not match its source; replacing it\n  - Downloading package for {current}...\n"
    )));
    assert_eq!(
        std::fs::read(&mirrored).unwrap(),
        std::fs::read(&package.path).unwrap()
    );
}

#[test]
fn indexes_merge_with_what_the_mirror_already_lists() {
    let world = World::new(&["3.2.0"]);
    let current = current_platform();
    let dir = world.provider_dir();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("index.json"),
        "{\"versions\":{\"3.1.0\":{},\"2.0.0\":{\"hint\":true}}}",
    )
    .unwrap();
    let old_version_doc = "{\"archives\":{\"linux_amd64\":{\"url\":\"https://elsewhere.example/null_3.1.0.zip\",\"hashes\":[\"h1:abc=\"]}}}";
    std::fs::write(dir.join("3.1.0.json"), old_version_doc).unwrap();
    std::fs::write(
        dir.join("3.2.0.json"),
        "{\"archives\":{\"freebsd_amd64\":{\"url\":\"terraform-provider-null_3.2.0_freebsd_amd64.zip\",\"hashes\":[\"h1:xyz=\"]}}}",
    )
    .unwrap();
    let random_dir = world.out.join("registry.terraform.io/hashicorp/random");
    std::fs::create_dir_all(&random_dir).unwrap();
    std::fs::write(
        random_dir.join("index.json"),
        "{\"versions\":{\"3.1.0\":{}}}",
    )
    .unwrap();

    let run = world.mirror(&[&current]);
    run.assert_success();
    assert_eq!(
        read_text(&dir.join("index.json")),
        "{\n  \"versions\": {\n    \"2.0.0\": {\n      \"hint\": true\n    },\n    \"3.1.0\": {},\n    \"3.2.0\": {}\n  }\n}"
    );
    assert_eq!(read_text(&dir.join("3.1.0.json")), old_version_doc);
    let mut entries = [
        "    \"freebsd_amd64\": {\n      \"hashes\": [\n        \"h1:xyz=\"\n      ],\n      \"url\": \"terraform-provider-null_3.2.0_freebsd_amd64.zip\"\n    }".to_string(),
        world.archive_entry("3.2.0", &current),
    ];
    entries.sort();
    assert_eq!(
        read_text(&dir.join("3.2.0.json")),
        format!("{{\n  \"archives\": {{\n{}\n  }}\n}}", entries.join(",\n"))
    );
    assert_eq!(
        read_text(&random_dir.join("index.json")),
        "{\"versions\":{\"3.1.0\":{}}}"
    );
}

#[test]
fn archives_are_fetched_alongside_their_checksum_lists() {
    let world = World::new(&["3.2.0"]);
    let current = current_platform();
    let server = &world.registry.server;
    let sums = world.registry.sums_path("null", "3.2.0", &current);
    let zip = world.registry.zip_path("null", "3.2.0", &current);
    // Held requests make overlap visible in the server log.
    for path in [&sums, &zip] {
        server.fault(path, Fault::Latency(std::time::Duration::from_millis(300)));
    }
    world.mirror(&[&current]).assert_success();
    let saw = |this: &str, other: &str| {
        server
            .requests_to(this)
            .iter()
            .any(|request| request.overlapping.iter().any(|p| p == other))
    };
    assert!(
        saw(&sums, &zip) || saw(&zip, &sums),
        "the archive waited for its checksum list"
    );

    // Without the checksum list there is no release to mirror, whether the
    // package is in the mirror already or its download fails as well.
    let other = other_platform();
    server.clear_faults();
    server.fault(&sums, Fault::Status(404));
    server.fault(
        &world.registry.zip_path("null", "3.2.0", &other),
        Fault::Status(404),
    );
    let before = Snapshot::of(&world.out);
    for platforms in [vec![current.as_str()], vec![other.as_str()]] {
        let run = world.mirror(&platforms);
        run.assert_failure();
        assert!(
            run.stderr.contains("Error: Provider release not available")
                && run
                    .stderr
                    .contains("failed to retrieve authentication checksums for provider"),
            "{}",
            run.stderr
        );
        assert_eq!(Snapshot::of(&world.out), before);
    }
}

#[test]
fn a_failed_download_leaves_the_mirror_as_it_was() {
    let world = World::new(&["3.2.0"]);
    let current = current_platform();
    let other = other_platform();
    world.mirror(&[&current]).assert_success();
    let before = Snapshot::of(&world.out);

    world.registry.server.fault(
        &world.registry.zip_path("null", "3.2.0", &other),
        Fault::Status(404),
    );
    let run = world.mirror(&[&current, &other]);
    run.assert_failure();
    let stderr = &run.stderr;
    assert!(
        stderr.contains("Error: Cannot download provider release"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "Failed to download registry.terraform.io/hashicorp/null v3.2.0 for {other}:"
        )),
        "{stderr}"
    );
    assert_eq!(Snapshot::of(&world.out), before);

    // A download that arrives but is not the signed package fares the same.
    world.registry.server.fault(
        &world.registry.zip_path("null", "3.2.0", &other),
        Fault::Respond(Response::bytes(
            "application/zip",
            b"PK not a real zip".to_vec(),
        )),
    );
    let run = world.mirror(&[&current, &other]);
    run.assert_failure();
    let stderr = &run.stderr;
    assert!(
        stderr.contains("Error: Invalid provider package"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "Failed to authenticate registry.terraform.io/hashicorp/null v3.2.0 for {other}: archive has incorrect checksum"
        )),
        "{stderr}"
    );
    assert_eq!(Snapshot::of(&world.out), before);
}

#[test]
fn a_mirror_can_be_made_from_a_network_mirror_or_a_filesystem_mirror() {
    let world = World::new(&["3.2.0"]);
    let current = current_platform();
    world.mirror(&[&current]).assert_success();
    // Compared with trees written later, so by content only.
    let first = Snapshot::of(&world.out).without_times();
    let mirror_server = TestServer::https(&world.registry.ca);
    mirror_server.serve_dir(&world.out);
    world.registry.server.clear_log();

    let from_network = world.registry.project.dir("from-network");
    let config = world.registry.project.write_home(
        "from-network.tfrc",
        &network_mirror_config(&mirror_server.url()),
    );
    let mut command = world.registry.project.command(&[
        "providers",
        "mirror",
        &format!("-platform={current}"),
        &from_network.display().to_string(),
    ]);
    command.env("TF_CLI_CONFIG_FILE", &config);
    let run = Run::of(command);
    run.assert_success();
    assert!(
        run.stdout
            .contains("  - Package authenticated: verified checksum\n")
    );
    assert_eq!(Snapshot::of(&from_network).without_times(), first);

    let from_disk = world.registry.project.dir("from-disk");
    let config = world
        .registry
        .project
        .write_home("from-disk.tfrc", &filesystem_mirror_config(&world.out));
    let mut command = world.registry.project.command(&[
        "providers",
        "mirror",
        &format!("-platform={current}"),
        &from_disk.display().to_string(),
    ]);
    command.env("TF_CLI_CONFIG_FILE", &config);
    let run = Run::of(command);
    run.assert_success();
    assert!(!run.stdout.contains("Package authenticated"));
    assert_eq!(Snapshot::of(&from_disk).without_times(), first);
    assert!(world.registry.server.requests().is_empty());
}

#[test]
fn the_lock_file_chooses_the_version_unless_told_otherwise() {
    let world = World::new(&["3.1.0", "3.2.0"]);
    let current = current_platform();
    std::fs::write(
        world.registry.project.lock_path(),
        "provider \"registry.terraform.io/hashicorp/null\" {\n  version     = \"3.1.0\"\n  constraints = \"~> 3.0\"\n}\n",
    )
    .unwrap();
    let run = world.mirror(&[&current]);
    run.assert_success();
    assert!(
        run.stdout
            .contains("  - Selected v3.1.0 to match dependency lock file\n")
    );
    assert!(world.provider_dir().join("3.1.0.json").is_file());
    assert!(!world.provider_dir().join("3.2.0.json").exists());

    let mut args = world.mirror_args(&[&current]);
    args.insert(2, "-lock-file=false".to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = world.registry.project.run(&args);
    run.assert_success();
    assert!(
        run.stdout
            .contains("  - Selected v3.2.0 to meet constraints ~> 3.0\n")
    );
    assert_eq!(
        read_text(&world.provider_dir().join("index.json")),
        "{\n  \"versions\": {\n    \"3.1.0\": {},\n    \"3.2.0\": {}\n  }\n}"
    );
}

#[test]
fn the_output_directory_is_required() {
    let world = World::new(&["3.2.0"]);
    let run = world.registry.project.run(&["providers", "mirror"]);
    run.assert_failure();
    let stderr = &run.stderr;
    assert!(
        stderr.contains("Error: No output directory specified"),
        "{stderr}"
    );
    assert!(stderr.contains(
        "The providers mirror command requires an output directory as a command-line argument."
    ));
    assert!(world.registry.server.requests().is_empty());
}

/// `providers mirror -offline` (issue 15): a plugin cache warmed by `init`
/// is copied into DIR in the unpacked layout without a single request, and
/// `init -plugin-dir=DIR` in a fresh project installs the same package (the
/// same `h1:`). A second run finds it there; a platform the cache lacks is
/// refused with what the cache does hold.
#[test]
fn offline_mirroring_copies_the_plugin_cache_in_the_unpacked_layout() {
    let mut world = World::new(&["3.1.0", "3.2.0"]);
    let current = current_platform();
    let other = other_platform();
    let cache = world.registry.project.root.join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let providers_url = world.registry.server.url_for("/v1/providers/");
    world.registry.project.cli_config(&format!(
        "{}plugin_cache_dir = \"{}\"\n",
        host_block("registry.terraform.io", &providers_url),
        cache.display()
    ));
    world.registry.project.init(&[]).assert_success();
    let h1 = &world.registry.tree.package("null", "3.2.0", &current).h1;
    assert!(world.registry.project.lock().contains(h1.as_str()));
    world.registry.server.clear_log();

    let mut args = world.mirror_args(&[&current]);
    args.insert(2, "-offline".to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = world.registry.project.run(&args);
    run.assert_success();
    assert_eq!(
        run.stdout,
        format!(
            "- Mirroring hashicorp/null...\n  - Selected v3.2.0 to match dependency lock file\n  - Copying unpacked package for {current}...\n"
        )
    );
    assert!(world.registry.server.requests().is_empty());
    let package = world.provider_dir().join("3.2.0").join(&current);
    let executable = package.join("terraform-provider-null_v3.2.0");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&executable).unwrap().permissions().mode();
        assert_eq!(mode & 0o111, 0o111, "{mode:o}");
    }
    // Unpacked entries have no archive for a network mirror index to list.
    assert!(!world.provider_dir().join("index.json").exists());
    let top: Vec<String> = std::fs::read_dir(&world.out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(top, ["registry.terraform.io"]);

    // Again, through the environment variable: nothing to copy.
    let before = Snapshot::of(&world.out);
    let mut command = world.registry.project.command(&[
        "providers",
        "mirror",
        &format!("-platform={current}"),
        &world.out.display().to_string(),
    ]);
    command.env("TFINSTALL_OFFLINE", "1");
    let run = Run::of(command);
    run.assert_success();
    assert!(
        run.stdout.contains(&format!(
            "  - Package for {current} is already in the mirror\n"
        )),
        "{}",
        run.stdout
    );
    assert_eq!(Snapshot::of(&world.out), before);

    // A platform the cache does not hold: refused, naming what it holds.
    let mut args = world.mirror_args(&[&current, &other]);
    args.insert(2, "-offline".to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = world.registry.project.run(&args);
    run.assert_failure();
    run.assert_stderr_has(&format!(
        "hold, of the platforms asked for ({current}, {other}): 3.2.0 for {current} only"
    ));
    assert_eq!(Snapshot::of(&world.out), before);
    assert!(world.registry.server.requests().is_empty());

    let consumer = Project::requiring(&NULL);
    let out = world.out.display().to_string();
    consumer
        .init(&[&format!("-plugin-dir={out}")])
        .assert_success();
    let lock = consumer.lock();
    assert!(lock.contains(&format!("\"{h1}\"")), "{lock}");
    assert_eq!(
        std::fs::read(
            consumer
                .installed_dir(PROVIDER_DIR, "3.2.0")
                .join("terraform-provider-null_v3.2.0")
        )
        .unwrap(),
        std::fs::read(&executable).unwrap()
    );
}
