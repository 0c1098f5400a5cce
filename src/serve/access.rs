//! Who may ask `serve` for what: which providers it fetches upstream, and
//! which requests carry a token.

use std::path::Path;

use hyper::header::HeaderValue;
use sha2::{Digest, Sha256};

use crate::addr::pattern::ProviderPattern;
use crate::addr::{Hostname, ProviderAddr};
use crate::cliconfig::CliConfig;
use crate::diag::Diagnostic;

/// The providers served. A request names a provider host, and a server that
/// contacted whatever host it was told would be an open proxy; so only
/// these are ever asked of upstream, and the rest get 403 at once.
#[derive(Clone, Debug)]
pub struct AllowedProviders {
    patterns: Vec<ProviderPattern>,
}

impl AllowedProviders {
    /// `-allow` patterns when given (include syntax); else every provider of
    /// the public registries and of the hosts the CLI configuration names:
    /// `host` and `credentials` blocks, and installation methods' include
    /// patterns that name a host. A `direct {}` with no include names none.
    pub fn new(config: &CliConfig, allow: &[String]) -> Result<Self, Diagnostic> {
        if !allow.is_empty() {
            let patterns = allow
                .iter()
                .map(|given| {
                    ProviderPattern::parse(given).map_err(|err| {
                        Diagnostic::error(
                            "Invalid -allow pattern",
                            format!(
                                "{err}. Write HOST/NAMESPACE/TYPE with * for any namespace or type, as in registry.terraform.io/hashicorp/*."
                            ),
                        )
                    })
                })
                .collect::<Result<_, _>>()?;
            return Ok(AllowedProviders { patterns });
        }
        let mut hosts: Vec<Hostname> = vec![Hostname::default_registry()];
        hosts.extend(Hostname::parse("registry.opentofu.org"));
        hosts.extend(config.hosts.keys().cloned());
        hosts.extend(config.credentials.keys().cloned());
        for method in config.provider_installation.iter().flat_map(|p| &p.methods) {
            hosts.extend(
                method
                    .include
                    .iter()
                    .filter_map(|given| ProviderPattern::parse(given).ok())
                    .filter_map(|pattern| pattern.hostname().cloned()),
            );
        }
        hosts.sort_by_key(ToString::to_string);
        hosts.dedup();
        let patterns = hosts
            .iter()
            .filter_map(|host| ProviderPattern::parse(&format!("{host}/*/*")).ok())
            .collect();
        Ok(AllowedProviders { patterns })
    }

    /// The patterns themselves, which a shared OCI store's repository
    /// template must tell apart.
    pub fn patterns(&self) -> &[ProviderPattern] {
        &self.patterns
    }

    pub fn allows(&self, provider: &ProviderAddr) -> bool {
        self.patterns.iter().any(|p| p.matches(provider))
    }
}

/// `-auth-token-file`: the bearer tokens a request may carry, as Terraform
/// sends them from a `credentials "HOST"` block.
///
/// Terraform sends a mirror's token with its JSON documents only, never
/// with archive downloads (checked with 1.0.3). So the version document,
/// which needs a token, hands out archive URLs that carry a grant for that
/// one archive: an HMAC of its path under a key derived from the tokens.
/// Replicas with the same token file agree on grants; changing the tokens
/// revokes every grant.
///
/// A line `NAME TOKEN` names its token, and the access log shows that name
/// (a line with the token alone is named `line N`): the log says which
/// client asked without holding anything that would let a reader ask.
#[derive(Clone)]
pub struct AccessTokens {
    /// Each token with its name.
    tokens: Vec<(String, String)>,
    grant_key: [u8; 32],
}

impl AccessTokens {
    /// One token a line, after its name and a space if it has one; blank
    /// lines and `#` comments are skipped.
    pub fn load(path: &Path) -> Result<Self, Diagnostic> {
        let text = std::fs::read_to_string(path).map_err(|err| {
            Diagnostic::error(
                "Cannot read the token file",
                format!(
                    "Could not read the -auth-token-file {}: {err}.",
                    path.display()
                ),
            )
        })?;
        let mut tokens: Vec<(String, String)> = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            let named = match words[..] {
                [token] => (format!("line {}", number + 1), token.to_owned()),
                [name, token] => (name.to_owned(), token.to_owned()),
                _ => {
                    return Err(Diagnostic::error(
                        "Invalid token file",
                        format!(
                            "Line {} of the -auth-token-file {} has more than a name and a token. Write one token a line, alone or after its name and a space.",
                            number + 1,
                            path.display()
                        ),
                    ));
                }
            };
            tokens.push(named);
        }
        if tokens.is_empty() {
            return Err(Diagnostic::error(
                "No tokens",
                format!(
                    "The -auth-token-file {} holds no token; write one a line, or leave the flag out to serve without tokens.",
                    path.display()
                ),
            ));
        }
        let mut sorted: Vec<&str> = tokens.iter().map(|(_, token)| token.as_str()).collect();
        sorted.sort();
        let grant_key =
            Sha256::digest(format!("tfinstall serve grant\n{}", sorted.join("\n")).as_bytes())
                .into();
        Ok(AccessTokens { tokens, grant_key })
    }

    /// The grant for the archive at `path`, as the query `grant=HEX`.
    pub fn grant(&self, path: &str) -> String {
        hex::encode(hmac_sha256(&self.grant_key, path.as_bytes()))
    }

    /// Whether `query` carries the grant for `path`.
    pub fn granted(&self, path: &str, query: Option<&str>) -> bool {
        let Some(given) = query
            .into_iter()
            .flat_map(|q| q.split('&'))
            .find_map(|pair| pair.strip_prefix("grant="))
        else {
            return false;
        };
        constant_time_eq(self.grant(path).as_bytes(), given.as_bytes())
    }

    /// Whether `Authorization` carries one of the tokens.
    pub fn admits(&self, authorization: Option<&HeaderValue>) -> bool {
        self.admitted(authorization).is_some()
    }

    /// The name of the token `Authorization` carries, if it is one of
    /// these. Every token is compared, each in time independent of where
    /// the bytes differ, so timing tells nothing.
    pub fn admitted(&self, authorization: Option<&HeaderValue>) -> Option<&str> {
        let given = authorization
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))?;
        self.tokens.iter().fold(None, |found, (name, token)| {
            let matches = constant_time_eq(token.as_bytes(), given.trim().as_bytes());
            found.or(matches.then_some(name.as_str()))
        })
    }
}

/// HMAC-SHA-256 (RFC 2104), written out over `sha2`, which the crate
/// already has, rather than adding a crate for ten lines.
fn hmac_sha256(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let mut inner_pad = [0x36u8; 64];
    let mut outer_pad = [0x5cu8; 64];
    for (i, byte) in key.iter().enumerate() {
        inner_pad[i] ^= byte;
        outer_pad[i] ^= byte;
    }
    let inner = Sha256::new()
        .chain_update(inner_pad)
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(outer_pad)
        .chain_update(inner)
        .finalize()
        .into()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(addr: &str) -> ProviderAddr {
        ProviderAddr::parse(addr).unwrap()
    }

    #[test]
    fn by_default_the_public_registries_and_the_configured_hosts_are_served() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cli.tfrc");
        std::fs::write(
            &file,
            "host \"registry.example.com\" {\n  services = {}\n}\n\
             credentials \"private.example.com\" {\n  token = \"x\"\n}\n\
             provider_installation {\n  direct {\n    include = [\"mirror.example.com/*/*\"]\n  }\n  direct {}\n}\n",
        )
        .unwrap();
        let env = crate::cliconfig::CliEnv {
            vars: [("TF_CLI_CONFIG_FILE".to_owned(), file.display().to_string())].into(),
            ..Default::default()
        };
        let (config, diags) = crate::cliconfig::load(&env);
        assert!(!diags.has_errors(), "{diags}");
        let allowed = AllowedProviders::new(&config, &[]).unwrap();
        for addr in [
            "hashicorp/null",
            "registry.opentofu.org/hashicorp/null",
            "registry.example.com/acme/widget",
            "private.example.com/acme/widget",
            "mirror.example.com/acme/widget",
        ] {
            assert!(allowed.allows(&provider(addr)), "{addr}");
        }
        assert!(!allowed.allows(&provider("evil.example.com/acme/widget")));
    }

    #[test]
    fn allow_patterns_replace_the_default_list() {
        let config = CliConfig::default();
        let allowed =
            AllowedProviders::new(&config, &["registry.terraform.io/hashicorp/*".into()]).unwrap();
        assert!(allowed.allows(&provider("hashicorp/null")));
        assert!(!allowed.allows(&provider("acme/null")));
        assert!(!allowed.allows(&provider("registry.opentofu.org/hashicorp/null")));
        assert!(AllowedProviders::new(&config, &["not a pattern".into()]).is_err());
    }

    #[test]
    fn tokens_are_bearer_tokens_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(&path, "# fleet\nfirst\n\n  second  \n").unwrap();
        let tokens = AccessTokens::load(&path).unwrap();
        let header = |v: &str| HeaderValue::from_str(v).unwrap();
        assert!(tokens.admits(Some(&header("Bearer first"))));
        assert!(tokens.admits(Some(&header("Bearer second"))));
        assert!(!tokens.admits(Some(&header("Bearer third"))));
        assert!(!tokens.admits(Some(&header("Basic first"))));
        assert!(!tokens.admits(Some(&header("Bearer firs"))));
        assert!(!tokens.admits(None));
        let archive =
            "/registry.terraform.io/hashicorp/null/terraform-provider-null_1.0.0_linux_amd64.zip";
        let grant = tokens.grant(archive);
        assert!(tokens.granted(archive, Some(&format!("grant={grant}"))));
        assert!(!tokens.granted(archive, None));
        assert!(!tokens.granted(archive, Some("grant=00")));
        assert!(!tokens.granted(
            &archive.replace("linux", "darwin"),
            Some(&format!("grant={grant}"))
        ));
        std::fs::write(&path, "ci  first\nsecond\n").unwrap();
        let named = AccessTokens::load(&path).unwrap();
        assert_eq!(named.admitted(Some(&header("Bearer first"))), Some("ci"));
        assert_eq!(
            named.admitted(Some(&header("Bearer second"))),
            Some("line 2")
        );
        assert_eq!(named.admitted(Some(&header("Bearer ci"))), None);
        // Names are not part of the grant key.
        assert_eq!(named.grant(archive), grant);
        std::fs::write(&path, "a b c\n").unwrap();
        assert!(AccessTokens::load(&path).is_err());
        std::fs::write(&path, "other\n").unwrap();
        assert_ne!(AccessTokens::load(&path).unwrap().grant(archive), grant);
        std::fs::write(&path, "# none\n").unwrap();
        assert!(AccessTokens::load(&path).is_err());
    }
}

#[cfg(test)]
mod hmac_tests {
    /// RFC 4231's test case 1 with a 32-byte key (the only size used
    /// here); the expected value is Python's `hmac.new(b"\x0b" * 32, b"Hi
    /// There", hashlib.sha256)`.
    #[test]
    fn matches_a_reference_hmac() {
        let key = [0x0bu8; 32];
        assert_eq!(
            hex::encode(super::hmac_sha256(&key, b"Hi There")),
            "198a607eb44bfbc69903a0f1cf2bbdc5ba0aa3f3d9ae3c1c7a3b1696a0b68cf7"
        );
    }
}
