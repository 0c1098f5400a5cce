//! Which token a host gets (the CLI configuration docs, "Credentials" and
//! "Environment Variable Credentials"; Terraform's
//! `internal/command/cliconfig/credentials.go`): a `TF_TOKEN_<host>`
//! variable first, then a `credentials` block, then the credentials helper,
//! if one is configured and installed.

use std::collections::BTreeMap;

use super::credentials_helper::HelperProgram;
use super::{CliConfig, CliEnv};
use crate::addr::Hostname;
use crate::memo::{Memo, MemoPolicy};

/// A credentials helper that could not answer for a host. Installing from
/// that host fails with it rather than going on without a token, which
/// would only end in a less helpful "requires authentication credentials".
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CredentialsError(String);

impl CredentialsError {
    /// Terraform's "failed to retrieve credentials for HOST" with the
    /// helper's problem, and the ways around it: helpers are often thin
    /// wrappers whose own messages do not say what runs them or why.
    fn new(host: &Hostname, problem: &str) -> Self {
        // A helper's own message often ends a sentence; this one goes on.
        let problem = problem.trim_end_matches('.');
        let variable = token_variable(host)
            .map(|name| format!(", or set {name}"))
            .unwrap_or_default();
        CredentialsError(format!(
            "failed to retrieve credentials for {host}: {problem}. Check that the helper works when run with the args of the credentials_helper block followed by \"get {host}\", or give {host} a token without it: add a credentials block for it to the CLI configuration{variable}"
        ))
    }
}

type Answer = Result<Option<String>, CredentialsError>;

/// Tokens for one run. Built once from the CLI configuration and the
/// environment, and shared by discovery, registries and mirrors so that the
/// helper is asked at most once per host, however many providers live there.
#[derive(Debug, Default)]
pub struct Credentials {
    from_env: BTreeMap<Hostname, String>,
    /// `None` for a block without a token: like Terraform, the host then
    /// has no credentials, and the helper is not asked either.
    configured: BTreeMap<Hostname, Option<String>>,
    helper: Option<HelperProgram>,
    /// The helper's answers, failures included: a helper that failed once
    /// fails every provider of the host without being run again (for the
    /// run; under `serve`, as its policy says).
    answers: Memo<Hostname, Option<String>, CredentialsError>,
}

impl Credentials {
    pub fn new(config: &CliConfig, env: &CliEnv) -> Self {
        let helper = config.credentials_helper.as_ref().and_then(|helper| {
            let program = HelperProgram::find(helper, env);
            // Terraform, too, only logs this.
            if program.is_none() {
                tracing::warn!(
                    "unable to find credentials helper {:?} in the plugin directories; ignoring it",
                    helper.name
                );
            }
            program
        });
        Credentials {
            from_env: tokens_from_env(env),
            configured: config.credentials.clone(),
            helper,
            answers: Memo::new(MemoPolicy::PerRun),
        }
    }

    /// The credentials with the helper's answers kept as `policy` says
    /// rather than for the run.
    pub fn with_memo_policy(mut self, policy: MemoPolicy) -> Self {
        self.answers = Memo::new(policy);
        self
    }

    /// `Ok(None)` when the host has no credentials: it is then asked
    /// without any, which a public registry expects.
    pub async fn token(&self, host: &Hostname) -> Answer {
        if let Some(token) = self.from_env.get(host) {
            return Ok(Some(token.clone()));
        }
        if let Some(token) = self.configured.get(host) {
            return Ok(token.clone());
        }
        let Some(helper) = &self.helper else {
            return Ok(None);
        };
        self.answers
            .get(host.clone(), || async {
                helper
                    .get(host)
                    .await
                    .map_err(|problem| CredentialsError::new(host, &problem))
            })
            .await
    }
}

/// The variable that gives `host` a token, `TF_TOKEN_` and the name with
/// `.` as `_` and `-` as `__`; `None` when the host has a port, since a
/// shell cannot put `:` in a name.
pub fn token_variable(host: &Hostname) -> Option<String> {
    let name = host.as_ascii();
    (!name.contains(':')).then(|| format!("TF_TOKEN_{}", name.replace('-', "__").replace('.', "_")))
}

/// Shells cannot put `.` or `-` in variable names, so `_` stands for `.`
/// and `__` for `-`; a name may also be given in punycode or upper case.
/// Variables are taken in name order so that, when two spellings name one
/// host, the winner does not depend on anything but the names. Names that
/// do not make a valid hostname are ignored.
fn tokens_from_env(env: &CliEnv) -> BTreeMap<Hostname, String> {
    let mut tokens = BTreeMap::new();
    for (name, value) in &env.vars {
        let Some(raw) = name.strip_prefix("TF_TOKEN_") else {
            continue;
        };
        let raw = raw.replace("__", "-").replace('_', ".");
        if let Ok(host) = Hostname::parse(&unicode_form(&raw)) {
            tokens.insert(host, value.clone());
        }
    }
    tokens
}

/// svchost's `ForDisplay` on a raw string: punycode labels become Unicode
/// (hostname parsing rejects punycode input), `:443` disappears, and the
/// input comes back unchanged when it is not a valid name.
fn unicode_form(raw: &str) -> String {
    let (name, port) = match raw.find(':') {
        Some(colon) => raw.split_at(colon),
        None => (raw, ""),
    };
    let port = match port.strip_prefix(':').map(str::parse::<u16>) {
        Some(Ok(443)) => String::new(),
        Some(Ok(number)) => format!(":{number}"),
        _ => port.to_string(),
    };
    match idna::domain_to_unicode(name) {
        (unicode, Ok(())) => unicode + &port,
        (_, Err(_)) => raw.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str) -> Hostname {
        Hostname::parse(name).unwrap()
    }

    fn config() -> CliConfig {
        CliConfig {
            credentials: BTreeMap::from([
                (
                    host("configured.example.com"),
                    Some("configured".to_string()),
                ),
                (
                    host("unused.example.com"),
                    Some("incorrectly-configured".to_string()),
                ),
            ]),
            ..CliConfig::default()
        }
    }

    fn env_with(name: &str, value: &str) -> CliEnv {
        CliEnv {
            vars: BTreeMap::from([(name.to_string(), value.to_string())]),
            profile_dir: None,
            engine: Default::default(),
        }
    }

    fn block_on<T>(future: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(future)
    }

    fn token_for(config: &CliConfig, env: &CliEnv, hostname: &str) -> Option<String> {
        block_on(Credentials::new(config, env).token(&host(hostname))).unwrap()
    }

    #[test]
    fn configured_tokens_and_absent_ones() {
        let env = CliEnv::default();
        assert_eq!(
            token_for(&config(), &env, "configured.example.com").as_deref(),
            Some("configured")
        );
        assert_eq!(token_for(&config(), &env, "unavailable.example.com"), None);
    }

    #[test]
    fn environment_beats_configuration_in_every_spelling() {
        let cases = [
            ("TF_TOKEN_configured_example_com", "configured.example.com"),
            (
                "TF_TOKEN_env_xn--eckwd4c7cu47r2wf_com",
                "env.ドメイン名例.com",
            ),
            ("TF_TOKEN_env_xn____caf__dma_fr", "env.café.fr"),
            ("TF_TOKEN_configured.example.com", "configured.example.com"),
            (
                "TF_TOKEN_CONFIGUREDUPPERCASE_EXAMPLE_COM",
                "configureduppercase.example.com",
            ),
            (
                "TF_TOKEN_my__registry_example_com",
                "my-registry.example.com",
            ),
        ];
        for (name, hostname) in cases {
            let env = env_with(name, "configured-by-env");
            assert_eq!(
                token_for(&config(), &env, hostname).as_deref(),
                Some("configured-by-env"),
                "{name}"
            );
        }
    }

    #[test]
    fn invalid_names_are_ignored() {
        let env = env_with("TF_TOKEN_a__", "x");
        assert!(tokens_from_env(&env).is_empty());
        let env = env_with("TF_TOKEN_", "x");
        assert!(tokens_from_env(&env).is_empty());
    }

    #[test]
    fn later_name_wins_for_one_host() {
        let env = CliEnv {
            vars: BTreeMap::from([
                ("TF_TOKEN_EXAMPLE_COM".to_string(), "upper".to_string()),
                ("TF_TOKEN_example_com".to_string(), "lower".to_string()),
            ]),
            profile_dir: None,
            engine: Default::default(),
        };
        assert_eq!(
            token_for(&config(), &env, "example.com").as_deref(),
            Some("lower")
        );
    }

    #[test]
    fn ports_other_than_443_are_part_of_the_host() {
        assert_eq!(unicode_form("example.com:443"), "example.com");
        assert_eq!(unicode_form("example.com:8443"), "example.com:8443");
        assert_eq!(unicode_form("xn--caf-dma.fr"), "café.fr");
    }

    #[test]
    fn token_variables_spell_the_host_as_shells_allow() {
        assert_eq!(
            token_variable(&host("my-registry.example.com")).as_deref(),
            Some("TF_TOKEN_my__registry_example_com")
        );
        assert_eq!(
            token_variable(&host("café.fr")).as_deref(),
            Some("TF_TOKEN_xn____caf__dma_fr")
        );
        assert_eq!(token_variable(&host("example.com:8443")), None);
    }

    /// A `terraform-credentials-log` helper that appends each host it is
    /// asked about to `calls` in the home directory, answers `tok-HOST` for
    /// hosts starting with `good`, `{}` for those starting with `none`, and
    /// fails for the rest.
    #[cfg(unix)]
    const SCRIPT: &str = r#"#!/bin/sh
echo "$2" >> "$(dirname "$0")/../../calls"
case "$2" in
  good*) printf '{"token": "tok-%s"}' "$2" ;;
  none*) echo '{}' ;;
  *) echo 'the vault is sealed.' >&2; exit 3 ;;
esac
"#;

    #[cfg(unix)]
    struct HelperHome {
        dir: tempfile::TempDir,
        config: CliConfig,
    }

    #[cfg(unix)]
    impl HelperHome {
        fn new() -> Self {
            use std::os::unix::fs::PermissionsExt;
            let dir = tempfile::tempdir().unwrap();
            let plugins = dir.path().join(".terraform.d/plugins");
            std::fs::create_dir_all(&plugins).unwrap();
            let script = plugins.join("terraform-credentials-log");
            std::fs::write(&script, SCRIPT).unwrap();
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
            let config = CliConfig {
                credentials_helper: Some(super::super::CredentialsHelper {
                    name: "log".to_string(),
                    args: Vec::new(),
                    pos: crate::diag::SourcePos::new("x", 1, 1),
                }),
                ..config()
            };
            HelperHome { dir, config }
        }

        fn env(&self) -> CliEnv {
            CliEnv {
                vars: BTreeMap::from([(
                    "TF_TOKEN_good_env_example".to_string(),
                    "from-env".to_string(),
                )]),
                profile_dir: Some(self.dir.path().to_path_buf()),
                engine: Default::default(),
            }
        }

        fn calls(&self) -> Vec<String> {
            std::fs::read_to_string(self.dir.path().join("calls"))
                .unwrap_or_default()
                .lines()
                .map(str::to_string)
                .collect()
        }
    }

    #[cfg(unix)]
    #[test]
    fn the_helper_answers_only_for_hosts_nothing_else_covers_and_only_once() {
        let mut home = HelperHome::new();
        home.config
            .credentials
            .insert(host("good.blocked.example"), None);
        let credentials = Credentials::new(&home.config, &home.env());
        let token = |name: &str| block_on(credentials.token(&host(name)));
        assert_eq!(token("good.env.example"), Ok(Some("from-env".to_string())));
        assert_eq!(
            token("configured.example.com"),
            Ok(Some("configured".to_string()))
        );
        assert_eq!(token("good.blocked.example"), Ok(None));
        assert!(home.calls().is_empty());

        for _ in 0..2 {
            assert_eq!(
                token("good.example:8443"),
                Ok(Some("tok-good.example:8443".to_string()))
            );
            assert_eq!(token("none.example"), Ok(None));
            assert_eq!(
                token("GOOD.café.example"),
                Ok(Some("tok-good.xn--caf-dma.example".to_string()))
            );
        }
        assert_eq!(
            home.calls(),
            [
                "good.example:8443",
                "none.example",
                "good.xn--caf-dma.example"
            ]
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_failing_helper_is_an_error_that_says_what_to_do_and_is_remembered() {
        let home = HelperHome::new();
        let credentials = Credentials::new(&home.config, &home.env());
        let executable = home
            .dir
            .path()
            .join(".terraform.d/plugins/terraform-credentials-log");
        for _ in 0..2 {
            let err = block_on(credentials.token(&host("bad.example"))).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "failed to retrieve credentials for bad.example: the credentials helper {} exited with status 3: the vault is sealed. Check that the helper works when run with the args of the credentials_helper block followed by \"get bad.example\", or give bad.example a token without it: add a credentials block for it to the CLI configuration, or set TF_TOKEN_bad_example",
                    executable.display()
                )
            );
        }
        assert_eq!(home.calls(), ["bad.example"]);
    }

    #[test]
    fn a_configured_helper_that_is_not_installed_is_ignored() {
        let home = tempfile::tempdir().unwrap();
        let config = CliConfig {
            credentials_helper: Some(super::super::CredentialsHelper {
                name: "absent".to_string(),
                args: Vec::new(),
                pos: crate::diag::SourcePos::new("x", 1, 1),
            }),
            ..CliConfig::default()
        };
        let env = CliEnv {
            vars: BTreeMap::new(),
            profile_dir: Some(home.path().to_path_buf()),
            engine: Default::default(),
        };
        assert_eq!(token_for(&config, &env, "example.com"), None);
    }
}
