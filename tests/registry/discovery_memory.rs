//! Discovery answers remembered across runs (in `$XDG_CACHE_HOME/tfinstall`):
//! a warm run sends its version-list request at once, alongside discovery,
//! yet follows a changed answer and never installs on a stale one.

use std::time::Duration;

use crate::harness::Scenario;
use crate::support::{Fault, ProviderSpec, Registry, Response, edit_json};

const DISCOVERY: &str = "/.well-known/terraform.json";

/// A scenario with `acme/solo` 1.0.0 required without a version (so the
/// version list decides), installed once: discovery's answer is remembered.
fn after_a_cold_run() -> (Scenario, String) {
    let scenario = Scenario::new();
    scenario.publish(
        scenario
            .registry()
            .provider(ProviderSpec::new("acme", "solo", "1.0.0")),
    );
    let address = format!("{}/acme/solo", scenario.host());
    scenario.project.require(&[("solo", &address, "")]);
    scenario.project.init(&[]).assert_success();
    (scenario, address)
}

/// A new working directory's first run: no lock file, nothing installed.
fn start_over(scenario: &Scenario) {
    std::fs::remove_dir_all(scenario.project.data()).unwrap();
    std::fs::remove_file(scenario.project.lock_path()).unwrap();
    scenario.server.clear_log();
}

fn versions_path() -> String {
    format!("/{}", Registry::versions_path("acme", "solo"))
}

#[test]
fn a_warm_run_asks_for_the_version_list_before_discovery_answers() {
    let (scenario, _) = after_a_cold_run();
    start_over(&scenario);
    // Held requests make overlap visible in the server log, whichever of
    // the two arrives first.
    for path in [DISCOVERY, versions_path().as_str()] {
        scenario
            .server
            .fault(path, Fault::Latency(Duration::from_millis(300)));
    }
    scenario.project.init(&[]).assert_success();
    let overlapped = scenario
        .server
        .requests_to(DISCOVERY)
        .iter()
        .any(|request| {
            request
                .overlapping
                .iter()
                .any(|path| *path == versions_path())
        })
        || scenario
            .server
            .requests_to(&versions_path())
            .iter()
            .any(|request| request.overlapping.iter().any(|path| path == DISCOVERY));
    assert!(overlapped, "the version list waited for discovery");
    assert_eq!(
        scenario.server.count(DISCOVERY),
        1,
        "discovery is still asked"
    );
}

#[test]
fn a_changed_discovery_answer_is_followed_and_the_early_answer_dropped() {
    let (scenario, _) = after_a_cold_run();
    // The registry moves its API; what is left at the old place lists a
    // version that does not exist.
    let site = scenario.site.path();
    copy_dir(&site.join("v1"), &site.join("moved/v1"));
    edit_json(&site.join(".well-known/terraform.json"), |doc| {
        doc["providers.v1"] = "/moved/v1/providers/".into();
    });
    edit_json(&site.join(Registry::versions_path("acme", "solo")), |doc| {
        doc["versions"][0]["version"] = "9.9.9".into()
    });
    start_over(&scenario);
    scenario.project.init(&[]).assert_success();
    assert!(
        scenario.project.lock().contains("version = \"1.0.0\""),
        "{}",
        scenario.project.lock()
    );
    assert_eq!(scenario.server.count(&versions_path()), 1, "sent early");
    assert_eq!(
        scenario.server.count(&format!("/moved{}", versions_path())),
        1
    );
}

#[test]
fn an_answer_within_its_max_age_is_used_without_asking() {
    let scenario = Scenario::new();
    scenario.publish(
        scenario
            .registry()
            .provider(ProviderSpec::new("acme", "solo", "1.0.0")),
    );
    let document = std::fs::read_to_string(scenario.site.path().join(&DISCOVERY[1..])).unwrap();
    scenario.server.route(
        DISCOVERY,
        Response::json(document).header("Cache-Control", "public, max-age=3600"),
    );
    let address = format!("{}/acme/solo", scenario.host());
    scenario.project.require(&[("solo", &address, "")]);
    scenario.project.init(&[]).assert_success();
    assert_eq!(scenario.server.count(DISCOVERY), 1);

    start_over(&scenario);
    scenario.project.init(&[]).assert_success();
    assert_eq!(scenario.server.count(DISCOVERY), 0);
    assert_eq!(scenario.server.count(&versions_path()), 1);
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
