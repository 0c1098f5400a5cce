use super::*;
use crate::verify::SignatureCheck;

/// The issue's example, as a user would commit it.
const EXAMPLE: &str = r#"default   = "deny"          # "allow" (if absent) or "deny"
min_trust = "self-signed"   # optional global minimum

allow "registry.terraform.io/hashicorp/*" {
  versions  = ">= 5.0.0"
  min_trust = "signed by HashiCorp"
}
allow "registry.terraform.io/acme/*" {
  key_ids = ["38027F80D7FD5FB2"]
}
deny "registry.terraform.io/hashicorp/aws" {
  versions = "5.31.0"
}
accept_expired_keys = true
"#;

fn policy(text: &str) -> Policy {
    file::parse(text, Path::new("policy.hcl")).unwrap_or_else(|diags| panic!("{diags}"))
}

/// Each problem's line and detail.
fn problems(text: &str) -> Vec<(usize, String)> {
    file::parse(text, Path::new("policy.hcl"))
        .unwrap_err()
        .iter()
        .map(|d| {
            let subject = d.subject.as_ref().expect("every problem has a line");
            assert_eq!(subject.file, Path::new("policy.hcl"));
            (subject.line, format!("{}: {}", d.summary, d.detail))
        })
        .collect()
}

fn p(addr: &str) -> ProviderAddr {
    ProviderAddr::parse(addr).unwrap()
}

fn v(text: &str) -> Version {
    Version::parse(text).unwrap()
}

fn signed(trust: Trust, key_id: &str, key_expired: bool) -> AuthResult {
    AuthResult::Signed(SignatureCheck {
        trust,
        key_id: key_id.to_owned(),
        fingerprints: Vec::new(),
        key_expired,
    })
}

/// Signed by the key with this primary fingerprint (and signing subkey).
fn signed_by(primary: &str, subkey: Option<&str>) -> AuthResult {
    AuthResult::Signed(SignatureCheck {
        trust: Trust::SelfSigned,
        key_id: primary[24..].to_owned(),
        fingerprints: std::iter::once(primary)
            .chain(subkey)
            .map(str::to_owned)
            .collect(),
        key_expired: false,
    })
}

fn text(decision: Decision) -> String {
    decision.to_string()
}

#[test]
fn the_issues_example_decides_each_rule_kind() {
    let example = policy(EXAMPLE);
    let aws = p("hashicorp/aws");
    let hashicorp = signed(Trust::HashiCorp, "34365D9472D7468F", false);

    // allow, with its version constraint
    let decision = example.decide(&aws, &v("5.30.0"), Some(&hashicorp));
    assert!(decision.allowed());
    assert_eq!(
        text(decision),
        "allowed by allow \"registry.terraform.io/hashicorp/*\" at policy.hcl:4"
    );
    assert_eq!(
        text(example.decide(&aws, &v("4.67.0"), None)),
        "not allowed by versions in allow \"registry.terraform.io/hashicorp/*\" at policy.hcl:5, which allows only \">= 5.0.0\""
    );
    // deny wins over allow
    assert_eq!(
        text(example.decide(&aws, &v("5.31.0"), Some(&hashicorp))),
        "denied by deny \"registry.terraform.io/hashicorp/aws\" at policy.hcl:11"
    );
    // the default
    assert_eq!(
        text(example.decide(&p("example.com/other/thing"), &v("1.0.0"), None)),
        "denied by default = \"deny\" at policy.hcl:1: no allow block names the provider"
    );
    // a block's minimum trust raises the file's
    let self_signed = signed(Trust::SelfSigned, "38027F80D7FD5FB2", false);
    assert_eq!(
        text(example.decide(&aws, &v("5.30.0"), Some(&self_signed))),
        "refused: the package is \"self-signed\" (key ID 38027F80D7FD5FB2), and min_trust in allow \"registry.terraform.io/hashicorp/*\" at policy.hcl:6 requires at least \"signed by HashiCorp\""
    );
    // the file's minimum for the rest
    let acme = p("acme/widget");
    assert_eq!(
        text(example.decide(&acme, &v("1.0.0"), Some(&AuthResult::VerifiedChecksum))),
        "refused: the package is \"verified checksum\", and min_trust = \"self-signed\" at policy.hcl:2 requires at least \"self-signed\""
    );
    // pinned keys
    assert!(
        example
            .decide(&acme, &v("1.0.0"), Some(&self_signed))
            .allowed()
    );
    let lowercase_pin = signed(Trust::Partner, "38027F80D7FD5FB2", false);
    assert!(
        example
            .decide(&acme, &v("1.0.0"), Some(&lowercase_pin))
            .allowed()
    );
    assert_eq!(
        text(example.decide(
            &acme,
            &v("1.0.0"),
            Some(&signed(Trust::Partner, "AAAAAAAAAAAAAAAA", false))
        )),
        "refused: the package is signed by key AAAAAAAAAAAAAAAA, which key_ids in allow \"registry.terraform.io/acme/*\" at policy.hcl:9 does not list"
    );
    // expired keys are accepted when the file says so
    let expired = signed(Trust::SelfSigned, "38027F80D7FD5FB2", true);
    assert!(example.decide(&acme, &v("1.0.0"), Some(&expired)).allowed());
}

#[test]
fn trust_levels_are_ordered_lowest_first_in_terraforms_words() {
    let words: Vec<&str> = TrustLevel::ALL.iter().map(|l| l.words()).collect();
    assert_eq!(
        words,
        [
            "unauthenticated",
            "verified checksum",
            "signing skipped",
            "self-signed",
            "signed by a HashiCorp partner",
            "signed by HashiCorp"
        ]
    );
    assert!(TrustLevel::ALL.windows(2).all(|pair| pair[0] < pair[1]));
    assert_eq!(
        TrustLevel::of(&AuthResult::SigningSkipped),
        TrustLevel::SigningSkipped
    );
    assert_eq!(
        TrustLevel::of(&signed(Trust::Partner, "A", false)),
        TrustLevel::Partner
    );
    // Every level the file can name is the one `of` gives.
    for level in TrustLevel::ALL {
        assert_eq!(TrustLevel::parse(level.words()), Some(level));
    }
}

#[test]
fn each_minimum_refuses_what_is_below_it() {
    let cases = [
        (AuthResult::Unauthenticated, TrustLevel::Unauthenticated),
        (AuthResult::VerifiedChecksum, TrustLevel::VerifiedChecksum),
        (AuthResult::SigningSkipped, TrustLevel::SigningSkipped),
        (
            signed(Trust::SelfSigned, "1111111111111111", false),
            TrustLevel::SelfSigned,
        ),
        (
            signed(Trust::Partner, "2222222222222222", false),
            TrustLevel::Partner,
        ),
        (
            signed(Trust::HashiCorp, "34365D9472D7468F", false),
            TrustLevel::HashiCorp,
        ),
    ];
    let null = p("hashicorp/null");
    for minimum in TrustLevel::ALL {
        let file = policy(&format!("min_trust = \"{minimum}\"\n"));
        for (auth, level) in &cases {
            let decision = file.decide(&null, &v("3.2.0"), Some(auth));
            assert_eq!(
                decision.allowed(),
                *level >= minimum,
                "{level} against a minimum of {minimum}: {decision}"
            );
        }
        // Without a package, trust decides nothing yet.
        assert!(file.decide(&null, &v("3.2.0"), None).allowed());
    }
}

#[test]
fn a_pinned_key_refuses_unsigned_packages_and_other_keys() {
    let file = policy("allow \"acme/*\" {\n  key_ids = [\"38027f80d7fd5fb2\"]\n}\n");
    let widget = p("acme/widget");
    let decide = |auth: &AuthResult| file.decide(&widget, &v("1.0.0"), Some(auth));
    assert!(decide(&signed(Trust::SelfSigned, "38027F80D7FD5FB2", false)).allowed());
    assert_eq!(
        decide(&AuthResult::SigningSkipped).verdict,
        Verdict::KeyNotPinned {
            key_id: None,
            fingerprint: None
        }
    );
    assert_eq!(
        text(decide(&AuthResult::VerifiedChecksum)),
        "refused: the package is not signed by any key, and key_ids in allow \"acme/*\" at policy.hcl:2 requires one of its keys"
    );
    assert!(!decide(&signed(Trust::HashiCorp, "34365D9472D7468F", false)).allowed());
}

#[test]
fn expired_keys_are_refused_only_when_the_file_says_so() {
    let expired = signed(Trust::SelfSigned, "74860E1B01CFC778", true);
    let fresh = signed(Trust::SelfSigned, "74860E1B01CFC778", false);
    let null = p("hashicorp/null");
    // Absent means OpenTofu's default: accepted (it warns).
    assert!(
        policy("")
            .decide(&null, &v("1.0.0"), Some(&expired))
            .allowed()
    );
    let strict = policy("\naccept_expired_keys = false\n");
    assert_eq!(
        text(strict.decide(&null, &v("1.0.0"), Some(&expired))),
        "refused: the package is signed by key 74860E1B01CFC778, which has expired, and accept_expired_keys = false at policy.hcl:2 refuses expired keys"
    );
    assert!(strict.decide(&null, &v("1.0.0"), Some(&fresh)).allowed());
    assert!(
        strict
            .decide(&null, &v("1.0.0"), Some(&AuthResult::VerifiedChecksum))
            .allowed()
    );
}

#[test]
fn deny_ranges_catch_pre_releases_and_allow_ranges_do_not_grant_them() {
    let file = policy(
        "allow \"hashicorp/*\" {\n  versions = \">= 1.0.0\"\n}\ndeny \"hashicorp/null\" {\n  versions = \">= 3.0.0\"\n}\n",
    );
    let null = p("hashicorp/null");
    assert!(!file.decide(&null, &v("3.1.0-beta1"), None).allowed());
    assert!(file.decide(&null, &v("2.1.0"), None).allowed());
    assert!(
        !file
            .decide(&p("hashicorp/random"), &v("2.0.0-rc1"), None)
            .allowed(),
        "an allow range grants no pre-release, as Terraform's constraints do not"
    );
    // A deny block without versions denies every version.
    let all = policy("deny \"hashicorp/null\" {}\n");
    assert_eq!(
        all.decide(&null, &v("0.1.0"), None).verdict,
        Verdict::Denied
    );
    assert!(
        all.decide(&p("hashicorp/random"), &v("0.1.0"), None)
            .allowed()
    );
}

#[test]
fn any_allow_block_allowing_the_version_grants_it_and_its_requirements_apply() {
    let file = policy(
        "allow \"hashicorp/*\" {\n  versions = \"< 2.0.0\"\n  min_trust = \"signed by HashiCorp\"\n}\nallow \"hashicorp/null\" {\n  versions = \">= 2.0.0\"\n}\n",
    );
    let null = p("hashicorp/null");
    let partner = signed(Trust::Partner, "2222222222222222", false);
    // 3.0.0: only the second block allows it, and it asks no more trust.
    let decision = file.decide(&null, &v("3.0.0"), Some(&partner));
    assert_eq!(
        text(decision),
        "allowed by allow \"hashicorp/null\" at policy.hcl:5"
    );
    // 1.0.0: the first block allows it, and its minimum applies.
    assert!(!file.decide(&null, &v("1.0.0"), Some(&partner)).allowed());
}

#[test]
fn without_a_default_providers_no_allow_block_names_are_allowed() {
    let file = policy("deny \"hashicorp/aws\" {\n  versions = \"5.31.0\"\n}\n");
    let decision = file.decide(&p("hashicorp/aws"), &v("5.30.0"), None);
    assert_eq!(
        text(decision),
        "allowed by default = \"allow\" (the default; policy.hcl does not set it)"
    );
    let decision = policy("default = \"allow\"\n").decide(&p("a/b"), &v("1.0.0"), None);
    assert_eq!(
        text(decision),
        "allowed by default = \"allow\" at policy.hcl:1"
    );
}

#[test]
fn screening_keeps_the_order_and_says_why_each_version_went() {
    let example = policy(EXAMPLE);
    let versions: Vec<Version> = ["4.0.0", "5.30.0", "5.31.0", "5.32.0"]
        .iter()
        .map(|t| v(t))
        .collect();
    let (allowed, removed) = example.screen(&p("hashicorp/aws"), &versions);
    assert_eq!(allowed, [v("5.30.0"), v("5.32.0")]);
    let removed: Vec<(String, RuleKind)> = removed
        .iter()
        .map(|(version, d)| (version.to_string(), d.rule.kind))
        .collect();
    assert_eq!(
        removed,
        [
            ("4.0.0".to_owned(), RuleKind::Allow),
            ("5.31.0".to_owned(), RuleKind::Deny)
        ]
    );
}

#[test]
fn no_version_allowed_names_each_rule_and_the_versions_it_removed() {
    let example = policy(EXAMPLE);
    let aws = p("hashicorp/aws");
    let versions: Vec<Version> = ["4.1.0", "4.2.0", "5.31.0", "6.0.0"]
        .iter()
        .map(|t| v(t))
        .collect();
    let (_, removed) = example.screen(&aws, &versions);
    let constraints = VersionConstraints::parse("< 6.0.0").unwrap();
    let diag = example.none_allowed(&aws, &constraints, &removed).unwrap();
    assert_eq!(diag.summary, "No version allowed by the provider policy");
    assert_eq!(
        diag.detail,
        "Versions of hashicorp/aws matching \"< 6.0.0\" exist, but the provider policy policy.hcl allows none of them:\n  - 4.1.0, 4.2.0: not allowed by versions in allow \"registry.terraform.io/hashicorp/*\" at policy.hcl:5, which allows only \">= 5.0.0\"\n  - 5.31.0: denied by deny \"registry.terraform.io/hashicorp/aws\" at policy.hcl:11\n\nChoose an allowed version in the configuration's version constraints, or ask the policy's owners to allow one."
    );
    // Versions the constraints rule out anyway are not the policy's doing.
    let only_newer = VersionConstraints::parse(">= 6.0.0").unwrap();
    assert!(example.none_allowed(&aws, &only_newer, &removed).is_none());
    let (_, refused) = example.refuse_locked(&aws, &v("5.31.0")).unwrap();
    assert_eq!(refused.summary, "Locked provider version denied by policy");
    assert!(example.refuse_locked(&aws, &v("5.30.0")).is_none());
}

#[test]
fn decisions_render_as_json_with_rule_trust_and_key() {
    let example = policy(EXAMPLE);
    let auth = signed(Trust::SelfSigned, "38027F80D7FD5FB2", false);
    let acme = p("acme/widget");
    let decision = example.decide(&acme, &v("1.0.0"), Some(&auth));
    assert_eq!(
        decision.json(&acme, Some(&v("1.0.0")), Some(&auth)),
        json!({
            "provider": "registry.terraform.io/acme/widget",
            "version": "1.0.0",
            "allowed": true,
            "rule": {"kind": "allow", "pattern": "registry.terraform.io/acme/*", "file": "policy.hcl", "line": 8},
            "reason": "allowed by allow \"registry.terraform.io/acme/*\" at policy.hcl:8",
            "trust": "self-signed",
            "key_id": "38027F80D7FD5FB2",
        })
    );
    let implicit = policy("").decide(&acme, &v("1.0.0"), None);
    assert_eq!(
        implicit.json(&acme, None, None)["rule"],
        json!({"kind": "default", "file": "policy.hcl"})
    );
}

#[test]
fn an_empty_file_allows_everything() {
    let empty = policy("# nothing yet\n");
    assert!(
        empty
            .decide(
                &p("hashicorp/aws"),
                &v("5.31.0"),
                Some(&AuthResult::Unauthenticated)
            )
            .allowed()
    );
}

#[test]
fn a_byte_order_mark_does_not_move_lines() {
    assert_eq!(
        problems("\u{feff}default = \"maybe\"\n"),
        [(
            1,
            "Invalid default: default must be \"allow\" or \"deny\", not \"maybe\": what happens to a provider no allow block names.".to_owned()
        )]
    );
}

#[test]
fn malformed_files_say_where_and_what_was_expected() {
    let found = problems(
        r#"min_trust = "trusted"
allow "hashicorp" {
}
deny "hashicorp/aws" {
  min_trust = "self-signed"
}
allow "acme/*" {
  key_ids  = ["38027F80"]
  versions = "~> 1.0, >= x"
}
allowed "acme/*" {}
accept_expired_keys = "no"
colour = "blue"
allow {}
"#,
    );
    let lines: Vec<usize> = found.iter().map(|(line, _)| *line).collect();
    assert_eq!(lines, [1, 2, 5, 8, 9, 11, 12, 13, 14], "{found:#?}");
    let text = |line: usize| -> &str { &found.iter().find(|(l, _)| *l == line).unwrap().1 };
    assert!(
        text(1).starts_with("Invalid trust level: \"trusted\" is not a trust level. min_trust takes one of, lowest first: \"unauthenticated\", \"verified checksum\", \"signing skipped\", \"self-signed\", \"signed by a HashiCorp partner\", \"signed by HashiCorp\"."),
        "{}",
        text(1)
    );
    assert!(text(2).starts_with("Invalid provider pattern: invalid provider matching pattern \"hashicorp\": must have either two or three slash-separated segments."));
    assert_eq!(
        text(5),
        "Unsupported argument: An argument named \"min_trust\" is not expected in a deny block. A deny block takes versions only: it refuses those versions whatever their trust."
    );
    assert!(text(8).starts_with("Invalid key ID: \"38027F80\" is not a key fingerprint or ID"));
    assert!(
        text(9).starts_with("Invalid version constraints:"),
        "{}",
        text(9)
    );
    assert!(text(11).starts_with("Unsupported block type: Blocks of type \"allowed\""));
    assert_eq!(
        text(12),
        "Invalid value: accept_expired_keys takes true or false, unquoted."
    );
    assert!(text(13).starts_with("Unsupported argument: An argument named \"colour\""));
    assert!(text(14).starts_with("Missing provider pattern:"));
}

#[test]
fn values_must_be_literals() {
    let found = problems(
        "default = var.mode\nmin_trust = \"${x}\"\nallow \"a/b\" {\n  key_ids = \"38027F80D7FD5FB2\"\n}\n",
    );
    let lines: Vec<usize> = found.iter().map(|(line, _)| *line).collect();
    assert_eq!(lines, [1, 2, 4], "{found:#?}");
    assert_eq!(
        found[0].1,
        "Invalid value: default takes a quoted string, written out: a policy file evaluates no expressions."
    );
    assert!(
        found[2]
            .1
            .starts_with("Invalid key_ids: key_ids takes a list")
    );
    let empty = problems("allow \"a/b\" {\n  key_ids = []\n}\n");
    assert!(empty[0].1.contains("lists no key"), "{empty:?}");
}

#[test]
fn a_setting_made_twice_is_refused_where_it_is_repeated() {
    let found = problems("default = \"allow\"\nallow \"a/b\" {}\ndefault = \"deny\"\n");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, 3);
    assert!(found[0].1.contains("redefined attribute"), "{found:?}");
}

#[test]
fn a_syntax_error_names_its_line() {
    let found = problems("default = \"deny\"\nallow \"a/b\" {\n  versions = \n}\n");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, 3);
    assert!(found[0].1.starts_with("Invalid HCL syntax: "), "{found:?}");
}

#[test]
fn an_unreadable_file_is_named() {
    let missing = Policy::load(Path::new("/nonexistent/policy.hcl")).unwrap_err();
    assert!(
        missing.0[0]
            .detail
            .starts_with("Could not read the policy file /nonexistent/policy.hcl: "),
        "{missing}"
    );
    assert!(Policy::from_flag(None).unwrap().is_none());
    assert!(Policy::from_flag(Some(Path::new(""))).unwrap().is_none());
}

/// Two keys whose fingerprints share their low 64 bits have the same key
/// ID; making such a pair takes a brute-force search, so the matcher is
/// tested on the fingerprints themselves.
#[test]
fn a_fingerprint_pin_refuses_another_key_with_the_same_key_id() {
    const PINNED: &str = "C874011F0AB405110D02105534365D9472D7468F";
    const TWIN: &str = "0000000000000000000000003436 5D9472D7468F";
    let twin = TWIN.replace(' ', "");
    let widget = p("acme/widget");
    let by_fingerprint = policy(&format!(
        "allow \"acme/*\" {{\n  key_ids = [\"{}\"]\n}}\n",
        PINNED.to_lowercase()
    ));
    assert!(by_fingerprint.warnings().is_empty());
    let decide = |file: &Policy, auth: &AuthResult| file.decide(&widget, &v("1.0.0"), Some(auth));
    assert!(decide(&by_fingerprint, &signed_by(PINNED, None)).allowed());
    let refused = decide(&by_fingerprint, &signed_by(&twin, None));
    assert_eq!(
        text(refused),
        format!(
            "refused: the package is signed by key 34365D9472D7468F (fingerprint {twin}), which key_ids in allow \"acme/*\" at policy.hcl:2 does not list"
        )
    );
    // A record from before fingerprints were kept matches no fingerprint.
    assert!(
        !decide(
            &by_fingerprint,
            &signed(Trust::SelfSigned, "34365D9472D7468F", false)
        )
        .allowed()
    );

    // By the 64-bit ID, both keys pass: it still works, with a warning.
    let by_id = policy("allow \"acme/*\" {\n  key_ids = [\"34365d9472d7468f\"]\n}\n");
    assert!(decide(&by_id, &signed_by(PINNED, None)).allowed());
    assert!(decide(&by_id, &signed_by(&twin, None)).allowed());
    let warning = by_id.warnings().iter().next().expect("a warning");
    assert_eq!(warning.summary, "Key pinned by its 64-bit ID");
    assert!(warning.detail.contains("Pin its full fingerprint instead"));
    assert_eq!(warning.subject.as_ref().map(|s| s.line), Some(2));
}

#[test]
fn a_signing_subkey_matches_by_its_primary_keys_fingerprint_or_its_own() {
    const PRIMARY: &str = "C874011F0AB405110D02105534365D9472D7468F";
    const SUBKEY: &str = "22D1F2BCDE8CC0D2B43F8E8A2A1CE51D79F6D8A4";
    let widget = p("acme/widget");
    let signature = signed_by(PRIMARY, Some(SUBKEY));
    for pin in [
        PRIMARY,
        SUBKEY,
        "C874 011F 0AB4 0511 0D02  1055 3436 5D94 72D7 468F",
    ] {
        let file = policy(&format!(
            "allow \"acme/*\" {{\n  key_ids = [\"{pin}\"]\n}}\n"
        ));
        assert!(
            file.decide(&widget, &v("1.0.0"), Some(&signature))
                .allowed(),
            "{pin}"
        );
    }
}
