//! Which token a host gets (spec §12): a `TF_TOKEN_<host>` variable first,
//! then a `credentials` block. Credentials helpers come third in Terraform;
//! tfinstall cannot run them (loading warns about that).

use std::collections::BTreeMap;

use super::{CliConfig, CliEnv};
use crate::addr::Hostname;

impl CliConfig {
    pub fn token_for(&self, host: &Hostname, env: &CliEnv) -> Option<String> {
        tokens_from_env(env)
            .remove(host)
            .or_else(|| self.credentials.get(host).cloned())
    }
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
                (host("configured.example.com"), "configured".to_string()),
                (
                    host("unused.example.com"),
                    "incorrectly-configured".to_string(),
                ),
            ]),
            ..CliConfig::default()
        }
    }

    fn env_with(name: &str, value: &str) -> CliEnv {
        CliEnv {
            vars: BTreeMap::from([(name.to_string(), value.to_string())]),
            profile_dir: None,
        }
    }

    #[test]
    fn configured_tokens_and_absent_ones() {
        let env = CliEnv::default();
        assert_eq!(
            config()
                .token_for(&host("configured.example.com"), &env)
                .as_deref(),
            Some("configured")
        );
        assert_eq!(
            config().token_for(&host("unavailable.example.com"), &env),
            None
        );
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
                config().token_for(&host(hostname), &env).as_deref(),
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
        };
        assert_eq!(
            config().token_for(&host("example.com"), &env).as_deref(),
            Some("lower")
        );
    }

    #[test]
    fn ports_other_than_443_are_part_of_the_host() {
        assert_eq!(unicode_form("example.com:443"), "example.com");
        assert_eq!(unicode_form("example.com:8443"), "example.com:8443");
        assert_eq!(unicode_form("xn--caf-dma.fr"), "café.fr");
    }
}
