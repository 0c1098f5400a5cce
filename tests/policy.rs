//! The provider policy (issue 33) end to end: a signed registry on
//! loopback HTTPS standing in for registry.terraform.io, a policy file in
//! the working directory, and the built binary's `init` (also `DIR…` and
//! `-offline`), `providers lock`, `providers mirror`, `cache warm` and
//! `providers check` held to each rule kind. Archive requests are counted
//! at the registry; `serve` is in tests/serve.rs, with real Terraform.

mod support;

use std::path::Path;

use serde_json::Value;
use support::*;

const WIDGET: &str = "registry.terraform.io/acme/widget";

/// Every rule kind but trust: `default` (line 1), an `allow` block (line
/// 3) with `versions` (line 4), a `deny` block (line 6).
const RULES: &str = r#"default = "deny"

allow "registry.terraform.io/acme/*" {
  versions = "< 2.0.0"
}
deny "registry.terraform.io/acme/widget" {
  versions = "1.1.0"
}
"#;

/// A minimum above what the registry's self-signed packages have.
const PARTNERS_ONLY: &str = "min_trust = \"signed by a HashiCorp partner\"\n";

/// `acme/widget` 1.0.0, 1.1.0 and 2.0.0, and `beta/thing` 1.0.0 (which no
/// allow block of [`RULES`] names), signed by `key` and served as
/// registry.terraform.io.
fn registry(key: PgpKey) -> HostedRegistry {
    HostedRegistry::signed_by(key, |registry| {
        ["1.0.0", "1.1.0", "2.0.0"]
            .into_iter()
            .fold(registry, |registry, version| {
                registry.provider(ProviderSpec::new("acme", "widget", version))
            })
            .provider(ProviderSpec::new("beta", "thing", "1.0.0"))
    })
    .standing_in_for("registry.terraform.io")
}

fn downloads(hosted: &HostedRegistry, version: &str) -> usize {
    hosted
        .server
        .count(&hosted.zip_path("widget", version, &current_platform()))
}

fn all_downloads(hosted: &HostedRegistry) -> usize {
    hosted
        .server
        .requests()
        .iter()
        .filter(|r| r.path.ends_with(".zip"))
        .count()
}

/// Writes `policy.hcl` in the working directory.
fn policy(project: &Project, text: &str) {
    project.write("policy.hcl", text);
}

/// What the lock file records for `provider`.
fn locked_version(project: &Project, provider: &str) -> Option<String> {
    let lock = std::fs::read_to_string(project.lock_path()).ok()?;
    let start = lock.find(&format!("provider \"{provider}\""))?;
    let version = lock[start..].split("version").nth(1)?;
    Some(version.split('"').nth(1)?.to_owned())
}

fn policy_lines(stdout: &str) -> Vec<Value> {
    validated_stream(stdout.as_bytes())
        .into_iter()
        .filter(|m| m["type"] == "policy")
        .collect()
}

/// The newest allowed version is chosen; every decision is in `-json`,
/// with the rule, the trust and the signing key; and a re-run that uses
/// the installed package decides on the trust recorded when it was
/// installed.
#[test]
fn init_installs_the_newest_allowed_version_and_reports_every_decision() {
    let hosted = registry(PgpKey::generate());
    let project = &hosted.project;
    project.require(&[("widget", "acme/widget", ">= 1.0.0")]);
    policy(project, RULES);

    let run = project.init(&["-policy=policy.hcl", "-json"]);
    run.assert_success();
    assert_eq!(locked_version(project, WIDGET).as_deref(), Some("1.0.0"));
    assert!(project.installed_dir(WIDGET, "1.0.0").is_dir());
    assert_eq!(downloads(&hosted, "2.0.0") + downloads(&hosted, "1.1.0"), 0);

    let lines = policy_lines(&run.stdout);
    let removed: Vec<(&Value, &Value, &Value)> = lines
        .iter()
        .filter(|l| l["versions"].is_array())
        .map(|l| (&l["versions"], &l["rule"]["kind"], &l["rule"]["line"]))
        .collect();
    assert_eq!(
        removed,
        [
            (
                &serde_json::json!(["1.1.0"]),
                &Value::from("deny"),
                &Value::from(6)
            ),
            (
                &serde_json::json!(["2.0.0"]),
                &Value::from("allow"),
                &Value::from(4)
            ),
        ],
        "{lines:#?}"
    );
    let package = lines.iter().find(|l| l["version"] == "1.0.0").unwrap();
    assert_eq!(package["allowed"], true);
    assert_eq!(package["trust"], "self-signed");
    assert_eq!(package["key_id"], hosted.key.key_id());
    assert_eq!(
        package["rule"],
        serde_json::json!({"kind": "allow", "pattern": "registry.terraform.io/acme/*", "file": "policy.hcl", "line": 3})
    );

    // Nothing fetched, and the installed package still known as self-signed.
    let again = project.init(&["-policy=policy.hcl", "-json"]);
    again.assert_success();
    assert_eq!(downloads(&hosted, "1.0.0"), 1);
    let reused = policy_lines(&again.stdout);
    assert_eq!(reused.len(), 1, "{reused:#?}");
    assert_eq!(reused[0]["trust"], "self-signed");
    assert_eq!(reused[0]["key_id"], hosted.key.key_id());

    // Without -policy, TFINSTALL_POLICY names it; and no policy, no lines.
    let mut by_env = project.command(&["init", "-json"]);
    by_env.env("TFINSTALL_POLICY", "policy.hcl");
    let output = by_env.output().unwrap();
    assert_eq!(
        policy_lines(&String::from_utf8_lossy(&output.stdout)).len(),
        1
    );
    assert!(policy_lines(&project.init(&["-json"]).stdout).is_empty());
}

/// When the policy removes every version the constraints allow, the run
/// names each rule and the versions it removed, fetches nothing and
/// changes nothing.
#[test]
fn no_version_allowed_names_the_rules_and_nothing_is_fetched() {
    let hosted = registry(PgpKey::generate());
    let project = &hosted.project;
    project.require(&[
        ("widget", "acme/widget", "1.1.0"),
        ("thing", "beta/thing", ""),
    ]);
    policy(project, RULES);
    project
        .init_failing(&["-policy=policy.hcl"])
        .assert_says("No version allowed by the provider policy")
        .assert_says("Versions of acme/widget matching \"1.1.0\" exist, but the provider policy policy.hcl allows none of them: - 1.1.0: denied by deny \"registry.terraform.io/acme/widget\" at policy.hcl:6")
        .assert_says("Versions of beta/thing exist, but the provider policy policy.hcl allows none of them: - 1.0.0: denied by default = \"deny\" at policy.hcl:1: no allow block names the provider");
    assert_eq!(all_downloads(&hosted), 0);
}

/// A lock entry the policy now denies is not used: `init` fails saying
/// so, and `init -upgrade` moves to the newest allowed version.
#[test]
fn a_locked_version_the_policy_denies_is_not_used() {
    let hosted = registry(PgpKey::generate());
    let project = &hosted.project;
    project.require(&[("widget", "acme/widget", "< 2.0.0")]);
    project.init(&[]).assert_success();
    assert_eq!(locked_version(project, WIDGET).as_deref(), Some("1.1.0"));
    policy(project, RULES);

    project
        .init_failing(&["-policy=policy.hcl"])
        .assert_says("Locked provider version denied by policy")
        .assert_says("The dependency lock file selects acme/widget v1.1.0, which the provider policy does not allow: denied by deny \"registry.terraform.io/acme/widget\" at policy.hcl:6.")
        .assert_says("tfinstall init -upgrade");
    project
        .init(&["-policy=policy.hcl", "-upgrade"])
        .assert_success();
    assert_eq!(locked_version(project, WIDGET).as_deref(), Some("1.0.0"));
}

/// A package below the minimum trust fails once authenticated, with
/// Terraform's words for its trust and the rule, before anything is
/// installed or cached; an installed package or cache entry the policy
/// refuses is not used (the package is fetched again, and refused again).
#[test]
fn a_package_below_the_minimum_trust_is_refused_and_nothing_is_kept() {
    let mut hosted = registry(PgpKey::generate());
    let cache = hosted.project.dir("cache");
    hosted.project.env("TF_PLUGIN_CACHE_DIR", &cache);
    let project = &hosted.project;
    project.require(&[("widget", "acme/widget", "1.0.0")]);
    policy(project, PARTNERS_ONLY);
    let refusal = format!(
        "Error while installing acme/widget v1.0.0: refused: the package is \"self-signed\" (key ID {}), and min_trust = \"signed by a HashiCorp partner\" at policy.hcl:1 requires at least \"signed by a HashiCorp partner\". Nothing was installed or cached.",
        hosted.key.key_id()
    );
    project
        .init_failing(&["-policy=policy.hcl"])
        .assert_says("Provider package refused by policy")
        .assert_says(&refusal);
    let entry = cache.join(WIDGET).join("1.1.0").join(current_platform());
    assert!(!entry.exists(), "a refused package was cached");

    // Installed and cached without the policy, each records how it was
    // verified…
    project.init(&[]).assert_success();
    let cached = Snapshot::of(&entry);
    assert_eq!(downloads(&hosted, "1.0.0"), 2);
    // …and the policy uses neither: the installed package,
    project
        .init_failing(&["-policy=policy.hcl"])
        .assert_says(&refusal);
    assert_eq!(downloads(&hosted, "1.0.0"), 3);
    // nor, with nothing installed, the cache entry.
    std::fs::remove_dir_all(project.data()).unwrap();
    project
        .init_failing(&["-policy=policy.hcl"])
        .assert_says(&refusal);
    assert_eq!(downloads(&hosted, "1.0.0"), 4);
    assert_eq!(Snapshot::of(&entry), cached, "the cache entry changed");
}

/// `key_ids` refuses a package signed by any other key, though the
/// registry lists it; the pinned key's packages install.
#[test]
fn only_pinned_keys_may_sign() {
    let hosted = registry(PgpKey::generate());
    let project = &hosted.project;
    project.require(&[("widget", "acme/widget", "1.0.0")]);
    let pinned = |key_id: &str| {
        format!("allow \"registry.terraform.io/acme/*\" {{\n  key_ids = [\"{key_id}\"]\n}}\n")
    };
    policy(project, &pinned("0123456789ABCDEF"));
    project.init_failing(&["-policy=policy.hcl"]).assert_says(&format!(
        "refused: the package is signed by key {} (fingerprint {}), which key_ids in allow \"registry.terraform.io/acme/*\" at policy.hcl:2 does not list",
        hosted.key.key_id(),
        hosted.key.fingerprint()
    ));
    policy(project, &pinned(&hosted.key.key_id().to_lowercase()));
    project.init(&["-policy=policy.hcl"]).assert_success();
}

/// `key_ids` pins a key by its full fingerprint. A fingerprint that ends
/// in the signing key's 64-bit ID but is another key's refuses the package,
/// where a pin by that ID would take it: a real key with a chosen key ID
/// takes a 2^64 search to make, so the other key is named by a fingerprint
/// made in the test, which is all the policy ever compares. A second real
/// key's fingerprint is refused too; a signing subkey's packages pass by
/// their primary key's fingerprint; a pin by ID still works, with a warning.
#[test]
fn keys_are_pinned_by_fingerprint() {
    let hosted = registry(PgpKey::generate());
    let project = &hosted.project;
    project.require(&[("widget", "acme/widget", "1.0.0")]);
    let pinned = |key: &str| {
        format!("allow \"registry.terraform.io/acme/*\" {{\n  key_ids = [\"{key}\"]\n}}\n")
    };
    let key_id = hosted.key.key_id();
    let fingerprint = hosted.key.fingerprint();
    let twin = format!("{}{key_id}", "0".repeat(24));
    assert_ne!(twin, fingerprint);
    policy(project, &pinned(&twin));
    project.init_failing(&["-policy=policy.hcl"]).assert_says(&format!(
        "refused: the package is signed by key {key_id} (fingerprint {fingerprint}), which key_ids in allow \"registry.terraform.io/acme/*\" at policy.hcl:2 does not list"
    ));
    policy(project, &pinned(&PgpKey::generate().fingerprint()));
    project
        .init_failing(&["-policy=policy.hcl"])
        .assert_says("does not list");

    policy(project, &pinned(&fingerprint.to_lowercase()));
    let run = project.init(&["-policy=policy.hcl"]);
    run.assert_success();
    assert!(
        !run.joined().contains("64-bit"),
        "a fingerprint pin draws no warning"
    );

    policy(project, &pinned(&key_id));
    project
        .init(&["-policy=policy.hcl", "-upgrade"])
        .assert_success()
        .assert_says("Warning: Key pinned by its 64-bit ID")
        .assert_says(&format!(
            "key_ids pins the key {key_id} by its 64-bit key ID"
        ));

    let subkeyed = registry(PgpKey::generate_with_signing_subkey());
    let project = &subkeyed.project;
    project.require(&[("widget", "acme/widget", "1.0.0")]);
    policy(project, &pinned(&subkeyed.key.fingerprint()));
    project.init(&["-policy=policy.hcl"]).assert_success();
}

/// A package signed by an expired key installs as Terraform installs it,
/// unless the policy sets `accept_expired_keys = false`.
#[test]
fn an_expired_key_is_refused_only_when_the_policy_says_so() {
    let hosted = registry(PgpKey::generate_expired());
    let project = &hosted.project;
    project.require(&[("widget", "acme/widget", "1.0.0")]);
    policy(project, "accept_expired_keys = false\n");
    project.init_failing(&["-policy=policy.hcl"]).assert_says(&format!(
        "refused: the package is signed by key {}, which has expired, and accept_expired_keys = false at policy.hcl:1 refuses expired keys",
        hosted.key.key_id()
    ));
    policy(project, "accept_expired_keys = true\n");
    project.init(&["-policy=policy.hcl"]).assert_success();
}

/// Packages nobody signed meet no minimum above their own: OpenTofu's
/// registry without keys (`signing skipped`), and a filesystem mirror
/// (`unauthenticated`).
#[test]
fn unsigned_packages_are_refused_by_a_minimum_above_them() {
    let mut hosted = registry(PgpKey::generate());
    let url = hosted.server.url_for("/v1/providers/");
    hosted
        .project
        .cli_config(&host_block("registry.opentofu.org", &url));
    let doc = hosted.site_path(&Registry::download_path(
        "acme",
        "widget",
        "1.0.0",
        &current_platform(),
    ));
    edit_json(&doc, |doc| {
        doc["signing_keys"]["gpg_public_keys"] = Value::Null
    });
    let project = &hosted.project;
    project.require(&[("widget", "acme/widget", "1.0.0")]);
    policy(project, "min_trust = \"self-signed\"\n");
    let mut tofu = project.command(&["init", "-policy=policy.hcl"]);
    tofu.env("TFINSTALL_ENGINE", "opentofu");
    Run::of(tofu).assert_failure().assert_says(
        "refused: the package is \"signing skipped\", and min_trust = \"self-signed\" at policy.hcl:1 requires at least \"self-signed\"",
    );

    let mut mirrored = Project::requiring(&[("widget", "acme/widget", "1.0.0")]);
    let mirror = mirrored.dir("mirror");
    FsMirror::new()
        .provider(ProviderSpec::new("acme", "widget", "1.0.0"), Layout::Packed)
        .write(&mirror);
    mirrored.cli_config(&filesystem_mirror_config(&mirror));
    policy(&mirrored, "min_trust = \"verified checksum\"\n");
    mirrored
        .init_failing(&["-policy=policy.hcl"])
        .assert_says("refused: the package is \"unauthenticated\", and min_trust = \"verified checksum\" at policy.hcl:1");
}

/// `init DIR…`: each directory decided on its own, under one policy.
#[test]
fn init_of_several_directories_holds_each_to_the_policy() {
    let hosted = registry(PgpKey::generate());
    let project = &hosted.project;
    project.write(
        "allowed/main.tf",
        &required_providers(&[("widget", "acme/widget", ">= 1.0.0")]),
    );
    project.write(
        "unnamed/main.tf",
        &required_providers(&[("thing", "beta/thing", "")]),
    );
    policy(project, RULES);
    project
        .init(&["-policy=policy.hcl", "allowed", "unnamed"])
        .assert_failure()
        .assert_says("denied by default = \"deny\" at policy.hcl:1");
    assert!(
        project
            .work
            .join("allowed/.terraform/plugins")
            .join(WIDGET)
            .join("1.0.0")
            .is_dir()
    );
    assert!(!project.work.join("unnamed/.terraform").exists());
}

/// `cache warm`, `init -offline`, `providers lock` and `providers mirror`
/// under the same rules: each takes 1.0.0 (the newest version allowed),
/// and each refuses the self-signed package a minimum trust is above.
#[test]
fn every_command_that_installs_holds_to_the_policy() {
    let mut hosted = registry(PgpKey::generate());
    let cache = hosted.project.dir("cache");
    hosted.project.env("TF_PLUGIN_CACHE_DIR", &cache);
    let project = &hosted.project;
    project.require(&[("widget", "acme/widget", ">= 1.0.0")]);
    policy(project, RULES);
    let cached = |version: &str| {
        cache
            .join(WIDGET)
            .join(version)
            .join(current_platform())
            .is_dir()
    };

    project
        .run(&["cache", "warm", "-policy=policy.hcl"])
        .assert_success();
    assert!(cached("1.0.0") && !cached("1.1.0") && !cached("2.0.0"));

    // The cache now also holds 1.1.0, which -offline must pass over.
    project.write(
        "newer/main.tf",
        &required_providers(&[("widget", "acme/widget", "1.1.0")]),
    );
    project.run(&["cache", "warm", "newer"]).assert_success();
    assert!(cached("1.1.0"));
    let before = hosted.server.requests().len();
    project
        .init(&["-policy=policy.hcl", "-offline"])
        .assert_success();
    assert_eq!(locked_version(project, WIDGET).as_deref(), Some("1.0.0"));
    assert_eq!(
        hosted.server.requests().len(),
        before,
        "offline asked the registry"
    );

    std::fs::remove_file(project.lock_path()).unwrap();
    project
        .run(&["providers", "lock", "-policy=policy.hcl"])
        .assert_success();
    assert_eq!(locked_version(project, WIDGET).as_deref(), Some("1.0.0"));

    let mirror = project.dir("mirror");
    std::fs::remove_file(project.lock_path()).unwrap();
    project
        .run(&[
            "providers",
            "mirror",
            "-policy=policy.hcl",
            mirror.to_str().unwrap(),
        ])
        .assert_success();
    let mirrored: Vec<String> = std::fs::read_dir(mirror.join(WIDGET))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".zip"))
        .collect();
    assert_eq!(
        mirrored,
        [format!(
            "terraform-provider-widget_1.0.0_{}.zip",
            current_platform()
        )]
    );

    // A minimum above self-signed: the same commands refuse the package.
    policy(project, PARTNERS_ONLY);
    let refused = "refused: the package is \"self-signed\"";
    let empty_cache = project.dir("empty-cache");
    let mut warm = project.command(&["cache", "warm", "-policy=policy.hcl"]);
    warm.env("TF_PLUGIN_CACHE_DIR", &empty_cache);
    Run::of(warm).assert_failure().assert_says(refused);
    assert!(
        !empty_cache
            .join(WIDGET)
            .join("1.0.0")
            .join(current_platform())
            .exists()
    );
    // Offline, the cache entry whose record the policy refused is offered
    // again as an unpacked directory: the refusal names the entry, says
    // why it cannot be trusted offline and what to do.
    let entry = cache.join(WIDGET).join("1.1.0").join(current_platform());
    project
        .init_failing(&["-policy=policy.hcl", "-offline"])
        .assert_says(&format!(
            "Error while installing acme/widget v1.1.0: the plugin cache entry {} cannot be authenticated. An unpacked copy holds no checksums or signature to check it against, so it counts as \"unauthenticated\"",
            entry.display()
        ))
        .assert_says("With -offline nothing is downloaded, so this entry cannot be authenticated again against its registry's checksums and signature")
        .assert_says("Run init without -offline");
    project
        .run(&["providers", "lock", "-policy=policy.hcl"])
        .assert_failure()
        .assert_says(refused);
    let second = project.dir("mirror-2");
    project
        .run(&[
            "providers",
            "mirror",
            "-policy=policy.hcl",
            second.to_str().unwrap(),
        ])
        .assert_failure()
        .assert_says(refused);
    assert!(
        !second.join(WIDGET).exists(),
        "a refused package was mirrored"
    );
}

/// `providers check`: a committed lock file holding a denied version, and
/// an installed package whose recorded trust is below the minimum, each a
/// line and a non-zero exit, all without the network; `-json` has every
/// decision.
#[test]
fn providers_check_reports_each_violation_without_the_network() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/policy");
    let project = Project::new();
    std::fs::copy(fixture.join("policy.hcl"), project.work.join("policy.hcl")).unwrap();
    std::fs::create_dir_all(project.work.join("committed")).unwrap();
    std::fs::copy(
        fixture.join("committed.terraform.lock.hcl"),
        project.work.join("committed/.terraform.lock.hcl"),
    )
    .unwrap();
    let run = project.run(&["providers", "check", "-policy=policy.hcl", "committed"]);
    run.assert_failure();
    assert_eq!(
        run.stdout.lines().collect::<Vec<_>>(),
        [
            "committed/.terraform.lock.hcl: registry.terraform.io/hashicorp/aws 5.31.0: denied by deny \"registry.terraform.io/hashicorp/aws\" at policy.hcl:10"
        ],
        "{}",
        run.stderr
    );
    run.assert_says(
        "1 of the 2 lock entries and installed packages checked break the provider policy",
    );

    let json = project.run(&[
        "providers",
        "check",
        "-policy=policy.hcl",
        "-json",
        "committed",
    ]);
    json.assert_failure();
    let stream = validated_stream(json.stdout.as_bytes());
    let decisions: Vec<(&Value, &Value, &Value)> = stream
        .iter()
        .filter(|m| m["type"] == "policy")
        .map(|m| (&m["provider"], &m["allowed"], &m["subject"]))
        .collect();
    assert_eq!(decisions.len(), 2, "{stream:#?}");
    assert!(decisions.contains(&(
        &Value::from("registry.terraform.io/hashicorp/aws"),
        &Value::from(false),
        &Value::from("lock_entry")
    )));
    let result = stream.iter().find(|m| m["type"] == "policy_check").unwrap();
    assert_eq!(
        (&result["checked"], &result["violations"]),
        (&Value::from(2), &Value::from(1))
    );

    // An installed package is held to the trust tfinstall recorded for it.
    let hosted = registry(PgpKey::generate());
    let project = &hosted.project;
    project.require(&[("widget", "acme/widget", "1.0.0")]);
    project.init(&[]).assert_success();
    policy(project, PARTNERS_ONLY);
    hosted.server.clear_log();
    let run = project.run(&["providers", "check", "-policy=policy.hcl"]);
    run.assert_failure();
    assert_eq!(
        run.stdout.trim(),
        format!(
            ".terraform/plugins/{WIDGET}/1.0.0/{}: {WIDGET} 1.0.0: refused: the package is \"self-signed\" (key ID {}), and min_trust = \"signed by a HashiCorp partner\" at policy.hcl:1 requires at least \"signed by a HashiCorp partner\"",
            current_platform(),
            hosted.key.key_id()
        )
    );
    assert!(
        hosted.server.requests().is_empty(),
        "check used the network"
    );
    policy(project, RULES);
    project
        .run(&["providers", "check", "-policy=policy.hcl"])
        .assert_success()
        .assert_stdout_has("Checked 2 lock entries and installed packages against the provider policy: no violations.")
        .assert_not_contains("No lock file");
    // A directory with nothing to check passes, but says so.
    std::fs::create_dir_all(project.work.join("elsewhere")).unwrap();
    project
        .run(&["providers", "check", "-policy=policy.hcl", "elsewhere"])
        .assert_success()
        .assert_says("Warning: No lock file")
        .assert_says("elsewhere has no .terraform.lock.hcl");
}

/// A policy file that cannot be read fails every command before anything
/// is asked or written, naming the file, the line and what was expected.
#[test]
fn a_malformed_policy_fails_before_anything_is_done() {
    let hosted = registry(PgpKey::generate());
    let project = &hosted.project;
    project.require(&[("widget", "acme/widget", "1.0.0")]);
    policy(
        project,
        "default = \"deny\"\nmin_trust = \"trusted\"\nallow \"acme\" {}\n",
    );
    let expected = [
        "on policy.hcl line 2",
        "\"trusted\" is not a trust level. min_trust takes one of, lowest first: \"unauthenticated\",",
        "on policy.hcl line 3",
        "invalid provider matching pattern \"acme\"",
    ];
    let run = project.init_failing(&["-policy=policy.hcl"]);
    for text in expected {
        run.assert_says(text);
    }
    for args in [
        &["providers", "lock", "-policy=policy.hcl"][..],
        &["cache", "warm", "-policy=policy.hcl"],
        &["providers", "check", "-policy=policy.hcl"],
    ] {
        let run = project.run(args);
        run.assert_failure().assert_says(expected[1]);
    }
    assert!(hosted.server.requests().is_empty(), "a request was made");
    project
        .init_failing(&["-policy=missing.hcl"])
        .assert_says("Could not read the policy file missing.hcl:");
}
