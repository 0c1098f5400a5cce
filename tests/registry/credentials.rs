//! Bearer tokens (the CLI configuration docs, "Credentials"): from a
//! `credentials` block, `credentials.tfrc.json` or a `TF_TOKEN_…` variable,
//! sent on discovery and registry API calls only, never on checksum,
//! signature or archive downloads, never to another host after a redirect,
//! and never printed.

use crate::harness::Scenario;
use crate::support::{self, Fault, ProviderSpec, PublishedTree, Registry, TestServer, host_block};

const TOKEN: &str = "s3cr3t-registry-token.abc123";

/// Publishes `acme/widget` 1.0.0 on the scenario's server.
pub fn publish_widget(scenario: &Scenario) -> PublishedTree {
    scenario.publish(
        scenario
            .registry()
            .provider(ProviderSpec::new("acme", "widget", "1.0.0")),
    )
}

/// The paths of one install of `acme/widget` 1.0.0: (API calls, downloads).
pub fn widget_paths(tree: &PublishedTree) -> (Vec<String>, Vec<String>) {
    let platform = support::current_platform();
    let spec = ProviderSpec::new("acme", "widget", "1.0.0");
    let files = Registry::files_path("acme", "widget", "1.0.0");
    (
        vec![
            format!("/{}", Registry::versions_path("acme", "widget")),
            format!(
                "/{}",
                Registry::download_path("acme", "widget", "1.0.0", &platform)
            ),
        ],
        vec![
            format!("/{files}{}", spec.sums_filename()),
            format!("/{files}{}.sig", spec.sums_filename()),
            tree.package("widget", "1.0.0", &platform)
                .url_path
                .clone()
                .unwrap(),
        ],
    )
}

/// Asserts `token` went with every API call and with nothing else.
pub fn assert_token_only_on_api_calls(
    scenario: &Scenario,
    tree: &PublishedTree,
    discovery: bool,
    token: &str,
) {
    let (api, downloads) = widget_paths(tree);
    let mut api = api;
    if discovery {
        api.push("/.well-known/terraform.json".to_owned());
    }
    for path in &api {
        assert_eq!(scenario.authorized(path, token), [true], "{path}");
    }
    for path in &downloads {
        let requests = scenario.server.requests_to(path);
        assert_eq!(requests.len(), 1, "{path}");
        assert_eq!(
            requests[0].header("authorization"),
            None,
            "no credentials on {path}"
        );
        assert_eq!(
            requests[0].header("x-terraform-version"),
            None,
            "no Terraform headers on {path}"
        );
    }
}

#[test]
fn a_credentials_block_authorizes_discovery_and_api_calls_only() {
    let mut scenario = Scenario::new();
    let tree = publish_widget(&scenario);
    scenario.project.cli_config(&format!(
        "credentials \"{}\" {{\n  token = \"{TOKEN}\"\n}}\n",
        scenario.host()
    ));
    let address = format!("{}/acme/widget", scenario.host());
    scenario.project.require(&[("widget", &address, "")]);

    let run = scenario.project.init(&[]);
    run.assert_success().assert_not_contains(TOKEN);
    assert_token_only_on_api_calls(&scenario, &tree, true, TOKEN);
}

#[test]
fn credentials_tfrc_json_authorizes_api_calls_only() {
    let scenario = Scenario::new();
    let localhost = scenario.server.localhost_host();
    let tree = scenario
        .registry()
        .provider(ProviderSpec::new("acme", "widget", "1.0.0"))
        .write(scenario.site.path(), &format!("https://{localhost}/"));
    let config_dir = scenario.project.home.join(".terraform.d");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::write(
        config_dir.join("credentials.tfrc.json"),
        serde_json::to_string(&serde_json::json!({
            "credentials": { localhost.as_str(): { "token": TOKEN } }
        }))
        .unwrap(),
    )
    .unwrap();
    let address = format!("{localhost}/acme/widget");
    scenario.project.require(&[("widget", &address, "")]);

    scenario
        .project
        .init(&[])
        .assert_success()
        .assert_not_contains(TOKEN);
    assert_token_only_on_api_calls(&scenario, &tree, true, TOKEN);
}

/// `TF_TOKEN_` names spell `.` as `_` and `-` as `__`; the variable beats a
/// `credentials` block for the same host, and the token is that of the
/// provider's hostname even though a `host` block sends the API elsewhere.
#[test]
fn a_tf_token_variable_authorizes_api_calls_for_the_provider_host() {
    let mut scenario = Scenario::new();
    let tree = publish_widget(&scenario);
    scenario.project.cli_config(&format!(
        "{}\ncredentials \"my-registry.example.com\" {{\n  token = \"from-the-config-file\"\n}}\n\ncredentials \"{}\" {{\n  token = \"for-the-api-host\"\n}}\n",
        host_block(
            "my-registry.example.com",
            &scenario.server.url_for("/v1/providers/")
        ),
        scenario.host()
    ));
    scenario
        .project
        .env("TF_TOKEN_my__registry_example_com", TOKEN);
    scenario
        .project
        .require(&[("widget", "my-registry.example.com/acme/widget", "")]);

    let run = scenario.project.init(&[]);
    run.assert_success()
        .assert_not_contains(TOKEN)
        .assert_not_contains("from-the-config-file")
        .assert_not_contains("for-the-api-host");
    assert!(
        run.stdout
            .contains("- Installed my-registry.example.com/acme/widget v1.0.0 (self-signed"),
        "{}",
        run.stdout
    );
    assert_token_only_on_api_calls(&scenario, &tree, false, TOKEN);
    assert_eq!(scenario.server.count("/.well-known/terraform.json"), 0);
}

#[test]
fn a_token_does_not_follow_a_redirect_to_another_host() {
    let mut scenario = Scenario::new();
    let tree = publish_widget(&scenario);
    let mirror = TestServer::https(&scenario.ca);
    mirror.serve_dir(scenario.site.path());
    let versions = format!("/{}", Registry::versions_path("acme", "widget"));
    scenario.server.fault(
        &versions,
        Fault::Redirect {
            status: 307,
            location: format!("https://{}{versions}", mirror.localhost_host()),
        },
    );
    scenario.project.cli_config(&format!(
        "credentials \"{}\" {{\n  token = \"{TOKEN}\"\n}}\n",
        scenario.host()
    ));
    let address = format!("{}/acme/widget", scenario.host());
    scenario.project.require(&[("widget", &address, "")]);

    scenario
        .project
        .init(&[])
        .assert_success()
        .assert_not_contains(TOKEN);
    assert_eq!(scenario.authorized(&versions, TOKEN), [true]);
    let redirected = mirror.requests_to(&versions);
    assert_eq!(redirected.len(), 1);
    assert_eq!(redirected[0].header("authorization"), None);
    let (api, _) = widget_paths(&tree);
    assert_eq!(scenario.authorized(&api[1], TOKEN), [true]);
}

#[test]
fn a_rejected_token_fails_cleanly_without_printing_it() {
    let mut scenario = Scenario::new();
    publish_widget(&scenario);
    let versions = format!("/{}", Registry::versions_path("acme", "widget"));
    scenario.server.fault(&versions, Fault::Status(401));
    let address = format!("{}/acme/widget", scenario.host());
    scenario.project.require(&[("widget", &address, "")]);

    let run = scenario.project.init_failing(&[]);
    run.assert_says("Error: Failed to query available provider packages")
        .assert_says(&format!(
            "Could not retrieve the list of available versions for provider {address}: host {} requires authentication credentials",
            scenario.host()
        ));

    scenario.project.cli_config(&format!(
        "credentials \"{}\" {{\n  token = \"{TOKEN}\"\n}}\n",
        scenario.host()
    ));
    let run = scenario.project.init_failing(&[]);
    run.assert_says(&format!(
        "host {} rejected the given authentication credentials",
        scenario.host()
    ))
    .assert_not_contains(TOKEN);
}
