//! `.netrc` credentials (issue 22): HTTP Basic on the package archive, as
//! Terraform 1.11 sends them, and unlike Terraform also on the checksum
//! list and its signature when they are on the archive's host; never on
//! discovery or registry API calls.

use crate::credentials::{publish_widget, widget_paths};
use crate::harness::Scenario;
use crate::support::{self, PublishedTree, Registry, basic_auth, edit_json};

const LOGIN: &str = "artifactory-user";
const PASSWORD: &str = "n3trc-s3cret";

/// A registry whose downloads (archive, `SHA256SUMS`, `.sig`) sit behind
/// Basic auth while its API stays open, and a project that installs
/// `acme/widget` from it with `netrc` as the user's `~/.netrc`.
fn guarded_registry(netrc: &str) -> (Scenario, PublishedTree) {
    let scenario = Scenario::new();
    let tree = publish_widget(&scenario);
    for suffix in [".zip", "SHA256SUMS", ".sig"] {
        scenario.server.require_basic(suffix, LOGIN, PASSWORD);
    }
    let address = format!("{}/acme/widget", scenario.host());
    scenario.project.require(&[("widget", &address, "")]);
    let netrc = netrc.replace("HOST", &scenario.host());
    scenario.project.write_home(".netrc", &netrc);
    (scenario, tree)
}

#[track_caller]
fn assert_basic_only_on_downloads(scenario: &Scenario, tree: &PublishedTree) {
    let (mut api, downloads) = widget_paths(tree);
    api.push("/.well-known/terraform.json".to_owned());
    for path in &api {
        let requests = scenario.server.requests_to(path);
        assert_eq!(requests.len(), 1, "{path}");
        assert_eq!(requests[0].header("authorization"), None, "{path}");
    }
    for path in &downloads {
        let requests = scenario.server.requests_to(path);
        assert_eq!(requests.len(), 1, "{path}");
        assert_eq!(
            requests[0].header("authorization"),
            Some(basic_auth(LOGIN, PASSWORD).as_str()),
            "{path}"
        );
    }
}

#[test]
fn netrc_credentials_go_with_the_downloads_and_never_with_api_calls() {
    // Terraform's match (the URL's host with its port), curl's (the bare
    // host), and the default entry.
    for netrc in [
        format!("machine HOST login {LOGIN} password {PASSWORD}\n"),
        format!("machine 127.0.0.1\n  login {LOGIN}\n  password {PASSWORD}\n"),
        format!(
            "machine elsewhere.example login a password b\ndefault login {LOGIN} password {PASSWORD}\n"
        ),
    ] {
        let (scenario, tree) = guarded_registry(&netrc);
        scenario
            .project
            .init(&[])
            .assert_success()
            .assert_contains("- Installed ")
            .assert_not_contains(PASSWORD);
        assert_basic_only_on_downloads(&scenario, &tree);
    }
}

#[test]
fn without_a_matching_entry_the_guarded_download_fails() {
    let (scenario, _tree) = guarded_registry(&format!(
        "machine 127.0.0.2 login {LOGIN} password {PASSWORD}\n"
    ));
    scenario
        .project
        .init_failing(&[])
        .assert_contains("401 Unauthorized");
}

/// Checksum documents on another host than the archive are left alone:
/// the credentials are the archive host's.
#[test]
fn checksum_documents_on_another_host_get_no_credentials() {
    let scenario = Scenario::new();
    let localhost = scenario.server.localhost_host();
    let tree = publish_widget(&scenario);
    let platform = support::current_platform();
    let download = scenario.site.path().join(Registry::download_path(
        "acme", "widget", "1.0.0", &platform,
    ));
    let host = scenario.host();
    edit_json(&download, |doc| {
        for key in ["shasums_url", "shasums_signature_url"] {
            let url = doc[key].as_str().unwrap().replace(&host, &localhost);
            doc[key] = serde_json::Value::String(url);
        }
    });
    scenario.server.require_basic(".zip", LOGIN, PASSWORD);
    let address = format!("{host}/acme/widget");
    scenario.project.require(&[("widget", &address, "")]);
    scenario.project.write_home(
        ".netrc",
        &format!("default login {LOGIN} password {PASSWORD}\n"),
    );

    scenario.project.init(&[]).assert_success();
    let (_, downloads) = widget_paths(&tree);
    for (path, sent) in downloads.iter().zip([false, false, true]) {
        let request = &scenario.server.requests_to(path)[0];
        assert_eq!(request.header("authorization").is_some(), sent, "{path}");
    }
}
