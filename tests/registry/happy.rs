//! Successful installs: every way a registry may spell its URLs, discovery
//! under both host names, the CLI configuration's `host` override, and
//! concurrent queries for several providers.

use std::os::unix::fs::PermissionsExt as _;
use std::time::Duration;

use crate::harness::{SIGNING_FOOTER, Scenario, signed_hashes, two_platform_spec};
use crate::support::{
    self, Fault, LOCK_FILE, ProviderSpec, Registry, UrlStyle, edit_json, host_block, lock_block,
    lock_file,
};

#[test]
fn installs_with_absolute_root_relative_and_path_relative_urls() {
    for (style, discovery) in [
        (UrlStyle::Absolute, None),
        (UrlStyle::RootRelative, Some("/v1/providers/")),
        (UrlStyle::PathRelative, Some("../v1/providers/")),
    ] {
        let scenario = Scenario::new();
        let host = scenario.host();
        let tree = scenario.publish_styled(
            scenario
                .registry()
                .provider(two_platform_spec("acme", "widget", "1.1.0"))
                .provider(two_platform_spec("acme", "widget", "1.0.0"))
                .provider(ProviderSpec::new("acme", "widget", "2.0.0")),
            style,
        );
        let discovery_doc = scenario.site.path().join(".well-known/terraform.json");
        edit_json(&discovery_doc, |doc| {
            doc["providers.v1"] = match discovery {
                Some(url) => url.into(),
                None => scenario.server.url_for("/v1/providers/").into(),
            }
        });
        let address = format!("{host}/acme/widget");
        scenario.project.require(&[("widget", &address, "~> 1.0")]);

        let run = scenario.project.init(&[]);
        run.assert_success();
        let key_id = scenario.key.key_id();
        assert!(
            run.stdout.contains(&format!(
                "- Finding {address} versions matching \"~> 1.0\"...\n- Installing {address} v1.1.0...\n- Installed {address} v1.1.0 (self-signed, key ID {key_id})\n"
            )),
            "{style:?}: {}",
            run.stdout
        );
        assert!(run.stdout.contains(SIGNING_FOOTER), "{}", run.stdout);
        run.assert_says("Terraform has created a lock file .terraform.lock.hcl");

        assert_eq!(
            scenario.project.lock(),
            lock_file(&[lock_block(
                &address,
                "1.1.0",
                "~> 1.0",
                &signed_hashes(&tree, "widget", "1.1.0")
            )]),
            "{style:?}"
        );
        let spec = two_platform_spec("acme", "widget", "1.1.0");
        let platform = support::current_platform();
        let executable = scenario
            .project
            .installed_dir(&address, "1.1.0")
            .join(spec.executable_name());
        assert_eq!(
            std::fs::read(&executable).unwrap(),
            spec.executable_content(&platform)
        );
        let mode = std::fs::metadata(&executable).unwrap().permissions().mode();
        assert_eq!(mode & 0o111, 0o111, "executable bits kept");

        // Each document exactly once: no repeated discovery or listing.
        let package = tree.package("widget", "1.1.0", &platform);
        let files = Registry::files_path("acme", "widget", "1.1.0");
        for path in [
            "/.well-known/terraform.json".to_owned(),
            format!("/{}", Registry::versions_path("acme", "widget")),
            format!(
                "/{}",
                Registry::download_path("acme", "widget", "1.1.0", &platform)
            ),
            format!("/{files}{}", spec.sums_filename()),
            format!("/{files}{}.sig", spec.sums_filename()),
            package.url_path.clone().unwrap(),
        ] {
            assert_eq!(scenario.server.count(&path), 1, "{style:?} {path}");
        }
        let requests = scenario.server.requests();
        assert_eq!(requests.len(), 6, "{style:?}");
        assert!(
            requests.iter().all(|request| request.version == "HTTP/2.0"),
            "HTTP/2 where the server offers it"
        );

        // A second run finds everything in place and asks nothing.
        let lock_before = scenario.project.lock();
        scenario.server.clear_log();
        let again = scenario.project.init(&[]);
        again.assert_success();
        assert!(
            again.stdout.contains(&format!(
                "- Reusing previous version of {address} from the dependency lock file\n- Using previously-installed {address} v1.1.0\n"
            )),
            "{}",
            again.stdout
        );
        assert_eq!(scenario.project.lock(), lock_before);
        assert!(scenario.server.requests().is_empty());
    }
}

#[test]
fn a_localhost_address_is_discovered_on_that_host() {
    let scenario = Scenario::new();
    let localhost = scenario.server.localhost_host();
    let base = format!("https://{localhost}/");
    scenario
        .registry()
        .provider(ProviderSpec::new("acme", "gadget", "0.3.0"))
        .write(scenario.site.path(), &base);
    let address = format!("{localhost}/acme/gadget");
    scenario.project.require(&[("gadget", &address, "")]);

    let run = scenario.project.init(&[]);
    run.assert_success();
    assert!(
        run.stdout.contains(&format!(
            "- Finding latest version of {address}...\n- Installing {address} v0.3.0...\n- Installed {address} v0.3.0 (self-signed, key ID {})\n",
            scenario.key.key_id()
        )),
        "{}",
        run.stdout
    );
    let discovery = scenario.server.requests_to("/.well-known/terraform.json");
    assert_eq!(discovery.len(), 1);
    assert_eq!(discovery[0].header("accept"), Some("application/json"));
    assert!(
        scenario
            .project
            .lock()
            .contains(&format!("provider \"{address}\""))
    );
}

#[test]
fn a_host_block_replaces_discovery_for_the_public_registry() {
    let mut scenario = Scenario::new();
    let tree = scenario.publish(scenario.registry().provider(two_platform_spec(
        "hashicorp",
        "foo",
        "4.2.0",
    )));
    scenario.project.cli_config(&host_block(
        "registry.terraform.io",
        &scenario.server.url_for("/v1/providers/"),
    ));
    scenario
        .project
        .require(&[("foo", "hashicorp/foo", "4.2.0")]);

    let run = scenario.project.init(&[]);
    run.assert_success();
    assert!(
        run.stdout.contains(&format!(
            "- Installing hashicorp/foo v4.2.0...\n- Installed hashicorp/foo v4.2.0 (self-signed, key ID {})\n",
            scenario.key.key_id()
        )),
        "{}",
        run.stdout
    );
    assert_eq!(
        scenario.project.lock(),
        lock_file(&[lock_block(
            "registry.terraform.io/hashicorp/foo",
            "4.2.0",
            "4.2.0",
            &signed_hashes(&tree, "foo", "4.2.0")
        )])
    );
    assert_eq!(scenario.server.count("/.well-known/terraform.json"), 0);
    assert!(
        scenario
            .project
            .installed_dir("registry.terraform.io/hashicorp/foo", "4.2.0")
            .is_dir()
    );
    let versions = scenario
        .server
        .requests_to("/v1/providers/hashicorp/foo/versions");
    assert_eq!(versions.len(), 1);
    assert!(versions[0].header("x-terraform-version").is_some());
}

#[test]
fn a_known_version_needs_two_round_trips_not_four() {
    let scenario = Scenario::new();
    let host = scenario.host();
    let spec = ProviderSpec::new("acme", "solo", "1.0.0");
    let tree = scenario.publish(scenario.registry().provider(spec.clone()));
    let platform = support::current_platform();
    let versions = format!("/{}", Registry::versions_path("acme", "solo"));
    let document = format!(
        "/{}",
        Registry::download_path("acme", "solo", "1.0.0", &platform)
    );
    let sums = format!(
        "/{}{}",
        Registry::files_path("acme", "solo", "1.0.0"),
        spec.sums_filename()
    );
    let zip = tree
        .package("solo", "1.0.0", &platform)
        .url_path
        .clone()
        .unwrap();
    // Held requests make overlap visible in the server log, whichever of a
    // pair arrives first.
    for path in [&versions, &document, &sums, &zip] {
        scenario
            .server
            .fault(path, Fault::Latency(Duration::from_millis(300)));
    }
    let concurrent = |a: &str, b: &str| {
        let saw = |this: &str, other: &str| {
            scenario
                .server
                .requests_to(this)
                .iter()
                .any(|request| request.overlapping.iter().any(|p| p == other))
        };
        saw(a, b) || saw(b, a)
    };
    let address = format!("{host}/acme/solo");

    // An exact constraint names the version before the list confirms it.
    scenario.project.require(&[("solo", &address, "1.0.0")]);
    scenario.project.init(&[]).assert_success();
    assert!(
        concurrent(&versions, &document),
        "the package document waited for the version list"
    );
    assert!(
        concurrent(&sums, &zip),
        "the archive waited for its checksum list"
    );

    // So does the lock file, whatever the constraint.
    std::fs::remove_dir_all(scenario.project.work.join(".terraform")).unwrap();
    scenario.server.clear_log();
    scenario.project.require(&[("solo", &address, ">= 0.1")]);
    scenario.project.init(&[]).assert_success();
    assert!(
        concurrent(&versions, &document),
        "the locked version's package document waited for the version list"
    );

    // A locked version the registry no longer lists is still an error,
    // whatever its package document says.
    std::fs::remove_dir_all(scenario.project.work.join(".terraform")).unwrap();
    scenario.server.fault(
        &versions,
        Fault::Respond(support::Response::json(
            r#"{"versions": [{"version": "0.9.0", "protocols": ["5.0"]}]}"#,
        )),
    );
    let run = scenario.project.init_failing(&[]);
    run.assert_says("the previously-selected version 1.0.0 is no longer available");
}

#[test]
fn providers_are_queried_and_fetched_concurrently() {
    let scenario = Scenario::new();
    let host = scenario.host();
    let names = ["alpha", "beta", "gamma"];
    let mut registry = scenario.registry();
    for name in names {
        registry = registry.provider(ProviderSpec::new("acme", name, "1.0.0"));
    }
    let tree = scenario.publish(registry);
    let platform = support::current_platform();
    // Held requests make overlap visible in the server log; a client that
    // asks one at a time never has two of them open.
    let mut held = Vec::new();
    for name in names {
        held.push(format!("/{}", Registry::versions_path("acme", name)));
        held.push(format!(
            "/{}",
            Registry::download_path("acme", name, "1.0.0", &platform)
        ));
        held.push(
            tree.package(name, "1.0.0", &platform)
                .url_path
                .clone()
                .unwrap(),
        );
    }
    for path in &held {
        scenario
            .server
            .fault(path, Fault::Latency(Duration::from_millis(300)));
    }
    let addresses: Vec<String> = names.iter().map(|n| format!("{host}/acme/{n}")).collect();
    let required: Vec<(&str, &str, &str)> = names
        .iter()
        .zip(&addresses)
        .map(|(name, address)| (*name, address.as_str(), ""))
        .collect();
    scenario.project.require(&required);

    let run = scenario.project.init(&[]);
    run.assert_success();
    let requests = scenario.server.requests();
    for (kind, is_kind) in [
        (
            "version lists",
            (|p: &str| p.ends_with("/versions")) as fn(&str) -> bool,
        ),
        ("package documents", |p: &str| p.contains("/download/")),
        ("archive downloads", |p: &str| p.ends_with(".zip")),
    ] {
        let overlapped = requests.iter().any(|request| {
            is_kind(&request.path)
                && request
                    .overlapping
                    .iter()
                    .any(|other| is_kind(other) && *other != request.path)
        });
        assert!(overlapped, "{kind} were requested one at a time");
    }
    assert_eq!(
        scenario.server.count("/.well-known/terraform.json"),
        1,
        "one discovery per host per run, however many providers"
    );
    // Output stays in a stable order whatever finished first.
    let installed: Vec<&str> = run
        .stdout
        .lines()
        .filter(|line| line.starts_with("- Installed "))
        .collect();
    let expected: Vec<String> = addresses
        .iter()
        .map(|address| {
            format!(
                "- Installed {address} v1.0.0 (self-signed, key ID {})",
                scenario.key.key_id()
            )
        })
        .collect();
    assert_eq!(installed, expected);
    let lock = scenario.project.lock();
    for address in &addresses {
        assert!(lock.contains(&format!("provider \"{address}\"")), "{lock}");
    }
    assert!(scenario.project.work.join(LOCK_FILE).is_file());
}
