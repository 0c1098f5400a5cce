//! Everything a registry can get wrong. Each case starts from a working
//! directory where `acme/good` is already installed and locked, then adds
//! `acme/bad`: the run must fail with a clear message and leave `.terraform/`
//! and the lock file exactly as they were.

use std::time::Duration;

use crate::harness::Scenario;
use crate::support::{
    self, Fault, PgpKey, ProviderSpec, PublishedTree, Registry, Response, Run, TestCa, TestServer,
};

/// A working directory with `acme/good` installed from the scenario's
/// registry, which also publishes `bad` (the specs of `acme/bad`); `main.tf`
/// now requires both.
struct Broken {
    scenario: Scenario,
    tree: PublishedTree,
    /// `127.0.0.1:PORT/acme/bad`
    address: String,
}

impl Broken {
    fn new(bad: &[ProviderSpec]) -> Self {
        Self::with_constraint(bad, "")
    }

    fn with_constraint(bad: &[ProviderSpec], constraint: &str) -> Self {
        let scenario = Scenario::new();
        let mut registry = scenario
            .registry()
            .provider(ProviderSpec::new("acme", "good", "1.0.0"));
        for spec in bad {
            registry = registry.provider(spec.clone());
        }
        let tree = scenario.publish(registry);
        let host = scenario.host();
        let good = format!("{host}/acme/good");
        scenario.project.require(&[("good", &good, "")]);
        scenario.project.init(&[]).assert_success();
        let address = format!("{host}/acme/bad");
        scenario
            .project
            .require(&[("good", &good, ""), ("bad", &address, constraint)]);
        Broken {
            scenario,
            tree,
            address,
        }
    }

    /// The published file of `acme/bad` `version` named `name` (a zip, or
    /// the `SHA256SUMS` and its `.sig`).
    fn file(&self, version: &str, name: &str) -> std::path::PathBuf {
        self.scenario
            .site
            .path()
            .join(Registry::files_path("acme", "bad", version))
            .join(name)
    }

    fn sums_name(version: &str) -> String {
        ProviderSpec::new("acme", "bad", version).sums_filename()
    }

    fn zip_name(version: &str) -> String {
        ProviderSpec::new("acme", "bad", version).zip_filename(&support::current_platform())
    }

    /// The URL path of `acme/bad` `version`'s checksum list.
    fn sums_path(&self, version: &str) -> String {
        format!(
            "/{}{}",
            Registry::files_path("acme", "bad", version),
            Self::sums_name(version)
        )
    }

    /// The URL path of `acme/bad` `version`'s archive for this platform.
    fn zip_path(&self, version: &str) -> String {
        self.tree
            .package("bad", version, &support::current_platform())
            .url_path
            .clone()
            .unwrap()
    }

    fn versions_path(&self) -> String {
        format!("/{}", Registry::versions_path("acme", "bad"))
    }

    fn download_path(&self, version: &str) -> String {
        format!(
            "/{}",
            Registry::download_path("acme", "bad", version, &support::current_platform())
        )
    }

    /// The failure Terraform reports for a package it could not install.
    fn assert_install_error(&self, run: &Run, version: &str, error: &str) {
        run.assert_says("Error: Failed to install provider")
            .assert_says(&format!(
                "Error while installing {} v{version}: {error}",
                self.address
            ));
        assert!(
            !self
                .scenario
                .project
                .installed_dir(&self.address, version)
                .exists()
        );
    }

    /// The failure Terraform reports when it cannot list versions.
    fn assert_query_error(&self, run: &Run, error: &str) {
        self.assert_listing_error(
            run,
            &format!(
                "could not query provider registry for {}: {error}",
                self.address
            ),
        );
    }

    /// The same, for errors that are not about the registry's answer.
    fn assert_listing_error(&self, run: &Run, error: &str) {
        run.assert_says("Error: Failed to query available provider packages")
            .assert_says(&format!(
                "Could not retrieve the list of available versions for provider {}: {error}",
                self.address
            ));
    }
}

#[test]
fn a_signature_that_does_not_match_the_checksums_is_refused() {
    let broken = Broken::new(&[ProviderSpec::new("acme", "bad", "1.0.0")]);
    let sig = broken.file("1.0.0", &format!("{}.sig", Broken::sums_name("1.0.0")));
    std::fs::write(
        &sig,
        broken
            .scenario
            .key
            .sign_detached(b"some other checksum list\n"),
    )
    .unwrap();
    let run = broken.scenario.project.init_failing(&[]);
    broken.assert_install_error(&run, "1.0.0", "error checking signature: ");
}

#[test]
fn a_signature_by_a_key_the_registry_did_not_list_is_refused() {
    let broken = Broken::new(&[ProviderSpec::new("acme", "bad", "1.0.0")]);
    let sums = std::fs::read(broken.file("1.0.0", &Broken::sums_name("1.0.0"))).unwrap();
    let stranger = PgpKey::generate();
    std::fs::write(
        broken.file("1.0.0", &format!("{}.sig", Broken::sums_name("1.0.0"))),
        stranger.sign_detached(&sums),
    )
    .unwrap();
    let run = broken.scenario.project.init_failing(&[]);
    broken.assert_install_error(
        &run,
        "1.0.0",
        "authentication signature from unknown issuer",
    );
}

#[test]
fn a_tampered_checksum_list_is_refused() {
    let broken = Broken::new(&[ProviderSpec::new("acme", "bad", "1.0.0")]);
    let sums_path = broken.file("1.0.0", &Broken::sums_name("1.0.0"));
    let original = std::fs::read_to_string(&sums_path).unwrap();
    let package = broken
        .tree
        .package("bad", "1.0.0", &support::current_platform());
    let listed = package.sha256_hex.clone().unwrap();
    let forged = support::sha256_hex(b"a different archive");

    // The line for the package no longer matches the registry's `shasum`.
    std::fs::write(&sums_path, original.replace(&listed, &forged)).unwrap();
    let run = broken.scenario.project.init_failing(&[]);
    broken.assert_install_error(
        &run,
        "1.0.0",
        &format!("checksum list has unexpected SHA-256 hash {forged} (expected {listed})"),
    );

    // An extra line keeps the package's own line intact but breaks the
    // signature over the whole list.
    std::fs::write(&sums_path, format!("{original}{forged}  extra.zip\n")).unwrap();
    let run = broken.scenario.project.init_failing(&[]);
    broken.assert_install_error(&run, "1.0.0", "error checking signature: ");

    // A list without the package's file name at all.
    let other_name = original.replace(&Broken::zip_name("1.0.0"), "renamed.zip");
    std::fs::write(&sums_path, other_name).unwrap();
    let run = broken.scenario.project.init_failing(&[]);
    broken.assert_install_error(
        &run,
        "1.0.0",
        &format!(
            "checksum list has no SHA-256 hash for \"{}\"",
            Broken::zip_name("1.0.0")
        ),
    );
}

#[test]
fn a_tampered_archive_is_refused() {
    let broken = Broken::new(&[ProviderSpec::new("acme", "bad", "1.0.0")]);
    let zip_path = broken.file("1.0.0", &Broken::zip_name("1.0.0"));
    let expected = support::sha256_hex(&std::fs::read(&zip_path).unwrap());
    let evil = ProviderSpec::new("evil", "bad", "1.0.0").package_zip(&support::current_platform());
    std::fs::write(&zip_path, &evil).unwrap();
    let run = broken.scenario.project.init_failing(&[]);
    broken.assert_install_error(
        &run,
        "1.0.0",
        &format!(
            "archive has incorrect checksum zh:{} (expected zh:{expected})",
            support::sha256_hex(&evil)
        ),
    );
}

#[test]
fn a_missing_platform_names_the_platforms_that_exist() {
    let platform = support::current_platform();
    let others: Vec<&str> = ["windows_386", "darwin_arm64", "freebsd_amd64"]
        .into_iter()
        .filter(|p| *p != platform)
        .take(2)
        .collect();
    let broken = Broken::new(&[ProviderSpec::new("acme", "bad", "1.0.0").platforms(&others)]);
    let run = broken.scenario.project.init_failing(&[]);
    let mut listed = others.clone();
    listed.sort();
    run.assert_says("Error: Incompatible provider version")
        .assert_says(&format!(
            "Provider {} v1.0.0 does not have a package available for your current platform, {platform}.",
            broken.address
        ))
        .assert_says(&format!(
            "Version 1.0.0 is available for {} and {}.",
            listed[0], listed[1]
        ));
    assert_eq!(
        broken.scenario.server.count(&broken.download_path("1.0.0")),
        1
    );
}

#[test]
fn an_unknown_provider_is_reported_by_name() {
    let broken = Broken::new(&[]);
    let run = broken.scenario.project.init_failing(&[]);
    broken.assert_listing_error(
        &run,
        &format!(
            "provider registry {} does not have a provider named {}",
            broken.scenario.host(),
            broken.address
        ),
    );
    run.assert_says("All modules should specify their required_providers");
}

#[test]
fn transient_server_errors_are_retried() {
    let broken = Broken::new(&[ProviderSpec::new("acme", "bad", "1.0.0")]);
    let server = &broken.scenario.server;
    let sums = broken.sums_path("1.0.0");
    let zip = broken.zip_path("1.0.0");
    server.status_sequence(&broken.versions_path(), &[500, 200]);
    server.status_sequence(&broken.download_path("1.0.0"), &[502, 200]);
    server.status_sequence(&sums, &[503, 200]);
    server.status_sequence(&zip, &[500, 200]);

    let run = broken.scenario.project.init(&[]);
    run.assert_success();
    assert!(
        run.stdout.contains(&format!(
            "- Installed {} v1.0.0 (self-signed",
            broken.address
        )),
        "{}",
        run.stdout
    );
    for path in [
        broken.versions_path(),
        broken.download_path("1.0.0"),
        sums,
        zip,
    ] {
        assert_eq!(server.count(&path), 2, "{path}: failed once, then retried");
    }
}

#[test]
fn a_registry_asking_to_retry_later_is_given_the_time_it_asks_for() {
    let broken = Broken::new(&[ProviderSpec::new("acme", "bad", "1.0.0")]);
    let busy = Response::text("slow down\n")
        .status(429)
        .header("retry-after", "2");
    broken
        .scenario
        .server
        .fault_sequence(&broken.versions_path(), [Fault::Respond(busy), Fault::Pass]);
    let started = std::time::Instant::now();
    broken.scenario.project.init(&[]).assert_success();
    // The usual first backoff is one second.
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "retried before the two seconds the registry asked for"
    );
    assert_eq!(broken.scenario.server.count(&broken.versions_path()), 2);
}

#[test]
fn a_missing_checksum_list_is_reported_even_though_the_archive_is_fetched_alongside() {
    let broken = Broken::new(&[ProviderSpec::new("acme", "bad", "1.0.0")]);
    let sums = broken.sums_path("1.0.0");
    let zip = broken.zip_path("1.0.0");
    let expected = format!(
        "could not query provider registry for {}: failed to retrieve authentication checksums for provider: 404 Not Found returned from 127.0.0.1",
        broken.address
    );
    broken.scenario.server.fault(&sums, Fault::Status(404));
    let run = broken.scenario.project.init_failing(&[]);
    broken.assert_install_error(&run, "1.0.0", &expected);

    // With the archive missing too, the checksum list is still what is
    // reported: Terraform asks for it first, so that is what its users see.
    broken.scenario.server.fault(&zip, Fault::Status(404));
    let run = broken.scenario.project.init_failing(&[]);
    broken.assert_install_error(&run, "1.0.0", &expected);
}

#[test]
fn persistent_server_errors_fail_after_the_retries() {
    let broken = Broken::new(&[ProviderSpec::new("acme", "bad", "1.0.0")]);
    broken
        .scenario
        .server
        .fault(&broken.versions_path(), Fault::Status(500));
    let run = broken.scenario.project.init_failing(&[]);
    broken.assert_query_error(
        &run,
        "the request failed after 2 attempts, please try again later: 500 Internal Server Error returned from 127.0.0.1",
    );
    assert_eq!(
        broken.scenario.server.count(&broken.versions_path()),
        2,
        "TF_REGISTRY_DISCOVERY_RETRY defaults to one retry"
    );

    // An archive that is not there is not worth retrying.
    broken.scenario.server.clear_faults();
    let zip = broken.zip_path("1.0.0");
    broken.scenario.server.fault(&zip, Fault::Status(404));
    let run = broken.scenario.project.init_failing(&[]);
    broken.assert_install_error(&run, "1.0.0", "127.0.0.1: bad response code: 404");
    assert_eq!(broken.scenario.server.count(&zip), 1);
}

#[test]
fn garbage_json_is_reported_with_the_document_url() {
    let broken = Broken::new(&[ProviderSpec::new("acme", "bad", "1.0.0")]);
    let server = &broken.scenario.server;
    let garbage = Response::json("{\"versions\": [ <html>Gateway error</html>");

    server.fault(&broken.versions_path(), Fault::Respond(garbage.clone()));
    let run = broken.scenario.project.init_failing(&[]);
    broken.assert_query_error(
        &run,
        &format!(
            "the response from {} is not a valid registry document",
            server.url_for(&broken.versions_path())
        ),
    );

    server.clear_faults();
    server.fault(&broken.download_path("1.0.0"), Fault::Respond(garbage));
    let run = broken.scenario.project.init_failing(&[]);
    broken.assert_install_error(
        &run,
        "1.0.0",
        &format!(
            "could not query provider registry for {}: the response from {} is not a valid registry document",
            broken.address,
            server.url_for(&broken.download_path("1.0.0"))
        ),
    );
}

#[test]
fn a_stalled_registry_times_out() {
    let mut broken = Broken::new(&[ProviderSpec::new("acme", "bad", "1.0.0")]);
    broken
        .scenario
        .project
        .env("TF_REGISTRY_CLIENT_TIMEOUT", "1");
    let server = &broken.scenario.server;

    // Headers, then nothing: the body never completes.
    server.fault(&broken.versions_path(), Fault::StallAfter(4));
    let run = broken.scenario.project.init_failing(&[]);
    broken.assert_query_error(
        &run,
        &format!(
            "the request failed after 2 attempts, please try again later: Get \"{}\": request timed out after 1 s",
            server.url_for(&broken.versions_path())
        ),
    );

    // No headers at all.
    server.clear_faults();
    server.fault(
        &broken.download_path("1.0.0"),
        Fault::Latency(Duration::from_secs(30)),
    );
    let run = broken.scenario.project.init_failing(&[]);
    broken.assert_install_error(
        &run,
        "1.0.0",
        &format!(
            "could not query provider registry for {}: the request failed after 2 attempts, please try again later: Get \"{}\": request timed out after 1 s",
            broken.address,
            server.url_for(&broken.download_path("1.0.0"))
        ),
    );
}

#[test]
fn a_stalled_archive_download_is_abandoned_and_retried() {
    let mut broken = Broken::new(&[ProviderSpec::new("acme", "bad", "1.0.0")]);
    broken
        .scenario
        .project
        .env("TFINSTALL_DOWNLOAD_STALL_TIMEOUT", "1");
    let zip = broken.zip_path("1.0.0");
    broken
        .scenario
        .server
        .fault_sequence(&zip, [Fault::StallAfter(10), Fault::Pass]);
    broken.scenario.project.init(&[]).assert_success();
    assert_eq!(broken.scenario.server.count(&zip), 2);
    assert!(
        broken
            .scenario
            .project
            .installed_dir(&broken.address, "1.0.0")
            .is_dir()
    );
}

#[test]
fn protocol_incompatible_versions_get_terraforms_advice() {
    // Newest allowed version speaks only protocol 4: downgrade advice.
    let broken = Broken::with_constraint(
        &[
            ProviderSpec::new("acme", "bad", "2.0.0").protocols(&["4.0"]),
            ProviderSpec::new("acme", "bad", "1.5.0").protocols(&["5.0"]),
        ],
        ">= 1.0",
    );
    let run = broken.scenario.project.init_failing(&[]);
    run.assert_says("Error: Incompatible provider version")
        .assert_says(&format!(
            "Provider \"{}\" v2.0.0 is not compatible with Terraform 1.16.0.",
            broken.address
        ))
        .assert_says(
            "You need to downgrade to v1.5.0 or earlier. Select it with the following constraint:",
        )
        .assert_says("version = \"1.5.0\"")
        .assert_says("Terraform checked all of the plugin versions matching the given constraint: >= 1.0.0")
        .assert_says("Alternatively, upgrade to the latest version of Terraform for compatibility with newer provider releases.");
    assert!(
        run.stderr.contains("\n\tversion = \"1.5.0\"\n"),
        "{}",
        run.stderr
    );

    // A pinned old version speaks only protocol 4: upgrade advice.
    let broken = Broken::with_constraint(
        &[
            ProviderSpec::new("acme", "bad", "1.0.0").protocols(&["4.0"]),
            ProviderSpec::new("acme", "bad", "2.0.0").protocols(&["5.0", "6.0"]),
        ],
        "1.0.0",
    );
    let run = broken.scenario.project.init_failing(&[]);
    run.assert_says(&format!(
        "Provider \"{}\" v1.0.0 is not compatible with Terraform 1.16.0.",
        broken.address
    ))
    .assert_says(
        "Provider version 2.0.0 is the latest compatible version. Select it with the following version constraint:",
    )
    .assert_says("version = \"2.0.0\"");
    assert!(!run.stderr.contains("Alternatively"), "{}", run.stderr);

    // Nothing compatible at all.
    let broken = Broken::new(&[ProviderSpec::new("acme", "bad", "1.0.0").protocols(&["4.0"])]);
    let run = broken.scenario.project.init_failing(&[]);
    run.assert_says("Error: Incompatible provider version")
        .assert_says(&format!(
            "No compatible versions of provider {} were found.",
            broken.address
        ));
}

#[test]
fn a_host_without_a_provider_registry_is_an_invalid_registry_host() {
    let broken = Broken::new(&[]);
    let scenario = &broken.scenario;
    let host_server = TestServer::https(&scenario.ca);
    let site = tempfile::tempdir().unwrap();
    host_server.serve_dir(site.path());
    let discovery = site.path().join(".well-known/terraform.json");
    std::fs::create_dir_all(discovery.parent().unwrap()).unwrap();
    std::fs::write(&discovery, "{\"modules.v1\": \"/v1/modules/\"}").unwrap();
    let good = format!("{}/acme/good", scenario.host());
    let elsewhere = format!("{}/acme/thing", host_server.host());
    scenario
        .project
        .require(&[("good", &good, ""), ("thing", &elsewhere, "")]);

    let run = scenario.project.init_failing(&[]);
    run.assert_says("Error: Invalid provider registry host")
        .assert_says(&format!(
            "The host \"{}\" given in provider source address \"{elsewhere}\" does not offer a Terraform provider registry.",
            host_server.host()
        ));

    std::fs::write(&discovery, "{\"providers.v2\": \"/v2/providers/\"}").unwrap();
    let run = scenario.project.init_failing(&[]);
    run.assert_says("Error: Invalid provider registry host")
        .assert_says(&format!(
            "The host \"{}\" given in provider source address \"{elsewhere}\" does not offer a Terraform provider registry that is compatible with this Terraform version, but it may be compatible with a different Terraform version.",
            host_server.host()
        ));
}

#[test]
fn a_certificate_file_that_does_not_exist_is_named() {
    let mut broken = Broken::new(&[ProviderSpec::new("acme", "bad", "1.0.0")]);
    let missing = broken.scenario.project.root.join("no-such-ca.pem");
    broken.scenario.project.env("SSL_CERT_FILE", &missing);
    let run = broken.scenario.project.init_failing(&[]);
    run.assert_says("Error: Failed to set up HTTPS")
        .assert_says(&format!(
            "Check SSL_CERT_FILE={:?}: each must name a readable PEM file or directory of certificates, or be unset.",
            missing.display().to_string()
        ));
}

#[test]
fn a_server_certificate_from_an_untrusted_ca_is_refused() {
    let broken = Broken::new(&[ProviderSpec::new("acme", "bad", "1.0.0")]);
    let stranger_ca = TestCa::new();
    let impostor = TestServer::https(&stranger_ca);
    impostor.serve_dir(broken.scenario.site.path());
    let good = format!("{}/acme/good", broken.scenario.host());
    let address = format!("{}/acme/bad", impostor.host());
    broken
        .scenario
        .project
        .require(&[("good", &good, ""), ("bad", &address, "")]);
    let run = broken.scenario.project.init_failing(&[]);
    run.assert_says("Error: Failed to query available provider packages")
        .assert_says(&format!(
            "Could not retrieve the list of available versions for provider {address}: could not connect to {}: failed to request discovery document:",
            impostor.host()
        ))
        .assert_says("invalid peer certificate");
    assert!(impostor.requests().is_empty(), "no request got through");
}
