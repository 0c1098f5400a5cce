//! The no-op path's memory of installed packages' `h1:` hashes
//! (`.terraform/.tfinstall-hashes.json`): consulted instead of hashing every
//! installed file on every run, yet never trusted over a changed file.

use std::time::Duration;

use crate::harness::Scenario;
use crate::support::{self, ProviderSpec, edit_json};

const MEMO: &str = ".tfinstall-hashes.json";

/// A scenario with `acme/widget` 1.0.0 installed and its lock file written.
fn installed() -> (Scenario, ProviderSpec, String) {
    let scenario = Scenario::new();
    let spec = ProviderSpec::new("acme", "widget", "1.0.0");
    let tree = scenario.publish(scenario.registry().provider(spec.clone()));
    let address = format!("{}/acme/widget", scenario.host());
    scenario.project.require(&[("widget", &address, "")]);
    scenario.project.init(&[]).assert_success();
    let zip = tree
        .package("widget", "1.0.0", &support::current_platform())
        .url_path
        .clone()
        .unwrap();
    (scenario, spec, zip)
}

#[test]
fn a_remembered_hash_stands_in_for_hashing_the_installed_files() {
    let (scenario, _, zip) = installed();
    // Stamps taken within a clock tick of the files' last change are not
    // trusted; one more run, later, takes trustworthy ones.
    std::thread::sleep(Duration::from_millis(50));
    scenario.project.init(&[]).assert_success();
    let memo = scenario.project.data().join(MEMO);
    assert!(memo.is_file(), "the memo is saved in the data directory");

    // A remembered hash that matches nothing in the lock file: a run that
    // believes it must have consulted the memo, and so fetches the package.
    edit_json(&memo, |doc| {
        for entry in doc.as_object_mut().unwrap().values_mut() {
            entry["h1"] = "h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=".into();
        }
    });
    scenario.server.clear_log();
    let run = scenario.project.init(&[]);
    run.assert_success();
    assert_eq!(scenario.server.count(&zip), 1, "{}", run.stdout);

    // The fresh install was recorded with its true hash: no network next time.
    std::thread::sleep(Duration::from_millis(50));
    scenario.project.init(&[]).assert_success();
    scenario.server.clear_log();
    scenario.project.init(&[]).assert_success();
    assert!(scenario.server.requests().is_empty());
}

#[test]
fn an_installed_file_changed_in_place_is_noticed_and_reinstalled() {
    let (scenario, spec, zip) = installed();
    std::thread::sleep(Duration::from_millis(50));
    scenario.project.init(&[]).assert_success();

    // Same size, same name, different bytes: only the stamps can tell.
    let executable = scenario
        .project
        .installed_dir(&format!("{}/acme/widget", scenario.host()), "1.0.0")
        .join(spec.executable_name());
    let original = std::fs::read(&executable).unwrap();
    let tampered: Vec<u8> = original.iter().map(|b| b ^ 1).collect();
    std::fs::write(&executable, &tampered).unwrap();

    scenario.server.clear_log();
    let run = scenario.project.init(&[]);
    run.assert_success();
    assert_eq!(scenario.server.count(&zip), 1, "{}", run.stdout);
    assert_eq!(std::fs::read(&executable).unwrap(), original);
}
