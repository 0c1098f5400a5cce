//! Credentials helpers: with `credentials_helper "test"`, the program
//! `~/.terraform.d/plugins/terraform-credentials-test` is run as
//! `… ARGS get HOST` for a host that no `TF_TOKEN_…` variable or
//! `credentials` block covers, at most once per host per run. Its token goes
//! where other tokens go; when it fails, prints garbage or hangs, providers
//! of that host fail to install with a message that names it.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::credentials::{assert_token_only_on_api_calls, publish_widget};
use crate::harness::Scenario;
use crate::support::{self, CredentialsHelper, ProviderSpec, credentials_helper_block, host_block};

const TOKEN: &str = "h3lper-token.xyz789";
const HELPER: &str = "terraform-credentials-test";

/// A registry that, like most private ones, answers discovery for anyone
/// but API calls only with [`TOKEN`], and a project that requires
/// `acme/widget` from it; returns the provider address.
fn private_widget(scenario: &Scenario) -> String {
    let platform = support::current_platform().replace('_', "/");
    for suffix in ["/versions".to_string(), format!("/download/{platform}")] {
        scenario.server.require_bearer(&suffix, TOKEN);
    }
    let address = format!("{}/acme/widget", scenario.host());
    scenario.project.require(&[("widget", &address, "")]);
    address
}

/// [`private_widget`] with the helper whose script `script` gives (from the
/// HOME it runs in) configured as `credentials_helper "test"`.
fn helper_scenario(script: impl FnOnce(&Path) -> String) -> (Scenario, String, CredentialsHelper) {
    let mut scenario = Scenario::new();
    publish_widget(&scenario);
    let address = private_widget(&scenario);
    let script = script(&scenario.project.home);
    let helper = CredentialsHelper::install(&scenario.project.home, HELPER, &script);
    scenario
        .project
        .cli_config(&credentials_helper_block("test", &[]));
    (scenario, address, helper)
}

fn answers_token() -> String {
    format!("echo '{{\"token\": \"{TOKEN}\"}}'")
}

/// What every helper failure ends with, after the helper's own problem.
fn advice(host: &str) -> String {
    format!(
        "Check that the helper works when run with the args of the credentials_helper block followed by \"get {host}\", or give {host} a token without it: add a credentials block for it to the CLI configuration"
    )
}

#[test]
fn the_helpers_token_authorizes_discovery_and_api_calls_only() {
    let mut scenario = Scenario::new();
    let tree = publish_widget(&scenario);
    let address = private_widget(&scenario);
    let helper = CredentialsHelper::install(&scenario.project.home, HELPER, &answers_token());
    scenario
        .project
        .cli_config(&credentials_helper_block("test", &["--vault", "two words"]));

    let run = scenario.project.init(&[]);
    run.assert_success().assert_not_contains(TOKEN);
    assert!(
        run.stdout
            .contains(&format!("- Installed {address} v1.0.0 (self-signed")),
        "{}",
        run.stdout
    );
    assert_token_only_on_api_calls(&scenario, &tree, true, TOKEN);
    assert_eq!(
        helper.runs(),
        [format!("[--vault][two words][get][{}]", scenario.host())]
    );
}

/// Terraform's order: a `TF_TOKEN_…` variable, then a `credentials` block,
/// and the helper only for hosts neither names. A block without a token
/// still names its host: no credentials, and no helper either.
#[test]
fn variables_and_credentials_blocks_win_and_the_helper_is_not_run() {
    let mut scenario = Scenario::new();
    let tree = publish_widget(&scenario);
    private_widget(&scenario);
    let hostname = "my-registry.example.com";
    scenario
        .project
        .require(&[("widget", &format!("{hostname}/acme/widget"), "")]);
    let helper = CredentialsHelper::install(
        &scenario.project.home,
        HELPER,
        "echo '{\"token\": \"from-the-helper\"}'",
    );
    let config = |credentials: &str| {
        format!(
            "{}\n{}\n{credentials}",
            host_block(hostname, &scenario.server.url_for("/v1/providers/")),
            credentials_helper_block("test", &[])
        )
    };

    scenario.project.cli_config(&config(&format!(
        "credentials \"{hostname}\" {{\n  token = \"{TOKEN}\"\n}}\n"
    )));
    scenario.project.init(&[]).assert_success();
    assert_token_only_on_api_calls(&scenario, &tree, false, TOKEN);

    std::fs::remove_dir_all(scenario.project.data()).unwrap();
    std::fs::remove_file(scenario.project.lock_path()).unwrap();
    scenario.server.clear_log();
    scenario.project.cli_config(&config(""));
    scenario
        .project
        .env("TF_TOKEN_my__registry_example_com", TOKEN);
    scenario.project.init(&[]).assert_success();
    assert_token_only_on_api_calls(&scenario, &tree, false, TOKEN);
    assert!(helper.runs().is_empty(), "{:?}", helper.runs());

    let mut scenario = Scenario::new();
    publish_widget(&scenario);
    let address = private_widget(&scenario);
    let helper = CredentialsHelper::install(&scenario.project.home, HELPER, &answers_token());
    scenario.project.cli_config(&format!(
        "{}\ncredentials \"{}\" {{\n  username = \"no token here\"\n}}\n",
        credentials_helper_block("test", &[]),
        scenario.host()
    ));
    scenario.project.init_failing(&[]).assert_says(&format!(
        "Could not retrieve the list of available versions for provider {address}: host {} requires authentication credentials",
        scenario.host()
    ));
    assert!(helper.runs().is_empty(), "{:?}", helper.runs());
}

#[test]
fn a_helper_that_fails_fails_the_install_before_any_request() {
    let (scenario, address, helper) =
        helper_scenario(|_| "echo 'vault is sealed.' >&2\nexit 1".to_owned());

    let host = scenario.host();
    scenario
        .project
        .init_failing(&[])
        .assert_says("Error: Failed to query available provider packages")
        .assert_says(&format!(
            "Could not retrieve the list of available versions for provider {address}: failed to retrieve credentials for {host}: the credentials helper {} exited with status 1: vault is sealed. {}",
            helper.path.display(),
            advice(&host)
        ));
    assert_eq!(helper.runs().len(), 1);
    // Not treated as "no token": nothing was asked of the registry.
    assert!(scenario.server.requests().is_empty());
}

#[test]
fn a_helper_that_prints_garbage_fails_without_echoing_it() {
    let (scenario, address, helper) = helper_scenario(|_| format!("echo 'Your token is {TOKEN}'"));

    let host = scenario.host();
    scenario
        .project
        .init_failing(&[])
        .assert_says(&format!(
            "Could not retrieve the list of available versions for provider {address}: failed to retrieve credentials for {host}: the credentials helper {} printed something other than a JSON object like {{\"token\": \"…\"}} (expected value at line 1 column 1). {}",
            helper.path.display(),
            advice(&host)
        ))
        .assert_not_contains(TOKEN);
}

#[test]
fn a_helper_that_hangs_is_stopped_after_the_timeout() {
    let (mut scenario, address, helper) = helper_scenario(|home| {
        let pid_file = home.join("helper.pid");
        format!("echo $$ > '{}'\nexec sleep 60", pid_file.display())
    });
    let pid_file = scenario.project.home.join("helper.pid");
    scenario
        .project
        .env("TFINSTALL_CREDENTIALS_HELPER_TIMEOUT", "500ms");

    let host = scenario.host();
    let started = Instant::now();
    let run = scenario.project.init_failing(&[]);
    assert!(started.elapsed() < Duration::from_secs(20));
    run.assert_says(&format!(
        "Could not retrieve the list of available versions for provider {address}: failed to retrieve credentials for {host}: the credentials helper {} did not answer within 500ms and was stopped (set TFINSTALL_CREDENTIALS_HELPER_TIMEOUT to allow it longer). {}",
        helper.path.display(),
        advice(&host)
    ));
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert_ended(pid.trim());
}

/// The process `pid` has ended: it is gone, or a zombie nobody reaped yet.
fn assert_ended(pid: &str) {
    let stat = format!("/proc/{pid}/stat");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let state = std::fs::read_to_string(&stat)
            .ok()
            .and_then(|stat| stat.rsplit_once(") ")?.1.chars().next());
        if matches!(state, None | Some('Z')) {
            return;
        }
        assert!(Instant::now() < deadline, "the helper {pid} still runs");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `{}` is the helper's way to say it has no token for the host; the
/// versioned file in the platform directory is the one Terraform would run.
#[test]
fn a_helper_without_a_token_leaves_the_host_without_credentials() {
    let mut scenario = Scenario::new();
    publish_widget(&scenario);
    let address = private_widget(&scenario);
    let platform = support::current_platform();
    let older = CredentialsHelper::install(&scenario.project.home, HELPER, &answers_token());
    let newer = CredentialsHelper::install(
        &scenario.project.home,
        &format!("{platform}/{HELPER}_v1.2.0"),
        "echo '{}'",
    );
    scenario
        .project
        .cli_config(&credentials_helper_block("test", &[]));

    scenario.project.init_failing(&[]).assert_says(&format!(
        "Could not retrieve the list of available versions for provider {address}: host {} requires authentication credentials; add a credentials block for it to the CLI configuration",
        scenario.host()
    ));
    assert!(older.runs().is_empty());
    assert_eq!(newer.runs(), [format!("[get][{}]", scenario.host())]);
}

/// Two providers with pinned versions: four concurrent requests for the
/// host's token (version lists and package documents), one helper run,
/// whether it succeeds or fails.
#[test]
fn the_helper_is_asked_once_per_host_however_many_providers_need_it() {
    let mut scenario = Scenario::new();
    scenario.publish(
        scenario
            .registry()
            .provider(ProviderSpec::new("acme", "widget", "1.0.0"))
            .provider(ProviderSpec::new("acme", "gadget", "1.0.0")),
    );
    private_widget(&scenario);
    let host = scenario.host();
    let (widget, gadget) = (format!("{host}/acme/widget"), format!("{host}/acme/gadget"));
    scenario
        .project
        .require(&[("widget", &widget, "1.0.0"), ("gadget", &gadget, "1.0.0")]);
    let helper = CredentialsHelper::install(&scenario.project.home, HELPER, &answers_token());
    scenario
        .project
        .cli_config(&credentials_helper_block("test", &[]));

    let run = scenario.project.init(&[]);
    run.assert_success();
    for address in [&widget, &gadget] {
        run.assert_contains(&format!("- Installed {address} v1.0.0"));
    }
    assert_eq!(helper.runs(), [format!("[get][{host}]")]);

    std::fs::remove_dir_all(scenario.project.data()).unwrap();
    std::fs::remove_file(scenario.project.lock_path()).unwrap();
    let helper = CredentialsHelper::install(
        &scenario.project.home,
        &format!("{HELPER}_v2.0.0"),
        "echo 'vault is sealed' >&2\nexit 1",
    );
    let run = scenario.project.init_failing(&[]);
    for address in [&widget, &gadget] {
        run.assert_says(&format!(
            "Could not retrieve the list of available versions for provider {address}: failed to retrieve credentials for {host}: the credentials helper {} exited with status 1: vault is sealed.",
            helper.path.display()
        ));
    }
    assert_eq!(helper.runs(), [format!("[get][{host}]")]);
}
