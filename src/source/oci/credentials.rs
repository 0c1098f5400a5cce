//! Credentials for OCI registries, found where OCI clients keep them:
//! OpenTofu's `oci_credentials` blocks, then Docker-style configuration
//! files (`docker login`, `oras login`, `podman login` write them), and
//! `docker-credential-NAME` helpers those files or
//! `oci_default_credentials` name. As in OpenTofu, the entry whose
//! `registry[/repository-prefix]` matches the repository most specifically
//! wins, an explicit block before a file at equal specificity.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize;

use crate::cliconfig::{CliConfig, CliEnv, OciCredentials};
use crate::go_json;

/// A helper waiting for a keychain prompt nobody answers would hang the run.
const HELPER_TIMEOUT: Duration = Duration::from_secs(30);

/// A username and its password or token, for Basic authentication or a
/// token endpoint.
#[derive(Clone, PartialEq, Eq)]
pub struct Login {
    pub username: String,
    pub secret: String,
    /// Where it came from, for messages.
    pub origin: String,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Login({} from {})", self.username, self.origin)
    }
}

#[derive(Clone, Debug)]
enum Found {
    Basic { username: String, password: String },
    Helper(String),
}

#[derive(Clone, Debug)]
struct Entry {
    /// `registry` or `registry/prefix`, without scheme.
    key: String,
    found: Found,
    origin: String,
}

/// Every place a registry's credentials may come from, read once per run.
#[derive(Debug, Default)]
pub struct OciCredentialStore {
    /// In priority order at equal specificity.
    entries: Vec<Entry>,
    /// Helpers for registries no entry names (`credsStore`,
    /// `oci_default_credentials`'s `docker_credentials_helper`).
    fallback_helpers: Vec<(String, String)>,
    /// Where credentials were looked for, for messages.
    searched: Vec<String>,
}

/// The parts of a Docker-style file that carry credentials.
#[derive(Deserialize, Default)]
struct DockerConfig {
    auths: std::collections::BTreeMap<String, DockerAuth>,
    #[serde(rename = "credsStore")]
    creds_store: String,
    #[serde(rename = "credHelpers")]
    cred_helpers: std::collections::BTreeMap<String, String>,
}

#[derive(Deserialize, Default)]
struct DockerAuth {
    auth: String,
    username: String,
    password: String,
}

impl OciCredentialStore {
    pub fn new(config: &CliConfig, env: &CliEnv) -> Self {
        let mut store = OciCredentialStore::default();
        if !config.oci_credentials.is_empty() {
            store
                .searched
                .push("oci_credentials blocks of the CLI configuration".to_string());
        }
        for (label, credentials) in &config.oci_credentials {
            let found = match credentials {
                OciCredentials::Basic { username, password } => Found::Basic {
                    username: username.clone(),
                    password: password.clone(),
                },
                OciCredentials::Helper(name) => Found::Helper(name.clone()),
            };
            store.entries.push(Entry {
                key: normalize_key(label),
                found,
                origin: format!("the oci_credentials {label:?} block"),
            });
        }
        let defaults = &config.oci_default_credentials;
        if defaults.discover_ambient_credentials {
            let files = defaults
                .docker_style_config_files
                .clone()
                .unwrap_or_else(|| docker_style_files(env));
            for file in files {
                store.read_docker_file(&file);
            }
        }
        if let Some(helper) = &defaults.docker_credentials_helper {
            store.fallback_helpers.push((
                helper.clone(),
                "oci_default_credentials's docker_credentials_helper".to_string(),
            ));
            store.searched.push(format!("docker-credential-{helper}"));
        }
        store
    }

    fn read_docker_file(&mut self, path: &PathBuf) {
        self.searched.push(path.display().to_string());
        let Ok(bytes) = std::fs::read(path) else {
            return;
        };
        let config: DockerConfig = match go_json::from_slice(&bytes) {
            Ok(config) => config,
            Err(err) => {
                tracing::warn!("ignoring {}: {err}", path.display());
                return;
            }
        };
        let origin = path.display().to_string();
        for (key, helper) in config.cred_helpers {
            self.entries.push(Entry {
                key: normalize_key(&key),
                found: Found::Helper(helper),
                origin: origin.clone(),
            });
        }
        for (key, auth) in config.auths {
            let found = if !auth.auth.is_empty() {
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(auth.auth.trim())
                    .ok()
                    .and_then(|bytes| String::from_utf8(bytes).ok());
                match decoded.as_deref().and_then(|text| text.split_once(':')) {
                    Some((username, password)) => Found::Basic {
                        username: username.to_string(),
                        password: password.to_string(),
                    },
                    None => {
                        tracing::warn!(
                            "ignoring the {key:?} entry of {origin}: its \"auth\" is not base64 of user:password"
                        );
                        continue;
                    }
                }
            } else if !auth.username.is_empty() {
                Found::Basic {
                    username: auth.username,
                    password: auth.password,
                }
            } else if !config.creds_store.is_empty() {
                Found::Helper(config.creds_store.clone())
            } else {
                continue;
            };
            self.entries.push(Entry {
                key: normalize_key(&key),
                found,
                origin: origin.clone(),
            });
        }
        if !config.creds_store.is_empty() {
            self.fallback_helpers
                .push((config.creds_store, format!("credsStore in {origin}")));
        }
    }

    /// Where credentials were looked for, for "rejected" messages.
    pub fn searched(&self) -> String {
        if self.searched.is_empty() {
            "nowhere: oci_default_credentials turns discovery off and there are no oci_credentials blocks".to_string()
        } else {
            self.searched.join(", ")
        }
    }

    /// The login for `repository` on `registry` (`host[:port]`), if any.
    pub async fn lookup(&self, registry: &str, repository: &str) -> Result<Option<Login>, String> {
        let full = format!("{registry}/{repository}");
        let best = self
            .entries
            .iter()
            .filter(|entry| full == entry.key || full.starts_with(&format!("{}/", entry.key)))
            .min_by_key(|entry| std::cmp::Reverse(entry.key.matches('/').count()));
        if let Some(entry) = best {
            return match &entry.found {
                Found::Basic { username, password } => Ok(Some(Login {
                    username: username.clone(),
                    secret: password.clone(),
                    origin: entry.origin.clone(),
                })),
                Found::Helper(helper) => run_helper(helper, registry, &entry.origin).await,
            };
        }
        for (helper, origin) in &self.fallback_helpers {
            if let Some(login) = run_helper(helper, registry, origin).await? {
                return Ok(Some(login));
            }
        }
        Ok(None)
    }
}

/// OpenTofu's default places on Linux and macOS, with the Docker CLI's
/// `$DOCKER_CONFIG` first since `docker login` writes there when it is set.
fn docker_style_files(env: &CliEnv) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if let Some(dir) = env.var("DOCKER_CONFIG").filter(|v| !v.is_empty()) {
        files.push(PathBuf::from(dir).join("config.json"));
    }
    if let Some(dir) = env.var("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
        files.push(PathBuf::from(dir).join("containers/auth.json"));
    }
    let config_home = env
        .var("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| env.profile_dir.as_ref().map(|home| home.join(".config")));
    if let Some(dir) = config_home {
        files.push(dir.join("containers/auth.json"));
    }
    if let Some(home) = &env.profile_dir {
        files.push(home.join(".docker/config.json"));
    }
    files
}

/// Docker writes some keys as URLs (`https://index.docker.io/v1/`).
fn normalize_key(key: &str) -> String {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let key = key.strip_suffix("/v1/").unwrap_or(key);
    key.trim_end_matches('/').to_ascii_lowercase()
}

#[derive(Deserialize)]
struct HelperAnswer {
    #[serde(rename = "Username")]
    username: String,
    #[serde(rename = "Secret")]
    secret: String,
}

/// `docker-credential-NAME get`, the registry on standard input. A helper
/// that knows nothing of the registry says so on standard output and fails;
/// that is "no credentials", not an error.
async fn run_helper(helper: &str, registry: &str, origin: &str) -> Result<Option<Login>, String> {
    use tokio::io::AsyncWriteExt as _;
    let program = format!("docker-credential-{helper}");
    let mut child = tokio::process::Command::new(&program)
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|err| format!("could not run {program} (named by {origin}): {err}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(registry.as_bytes())
            .await
            .map_err(|err| format!("could not talk to {program}: {err}"))?;
    }
    let output = tokio::time::timeout(HELPER_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| format!("{program} did not answer within 30 s and was stopped"))?
        .map_err(|err| format!("could not run {program}: {err}"))?;
    if !output.status.success() {
        let said = String::from_utf8_lossy(&output.stdout);
        if said.contains("credentials not found") {
            return Ok(None);
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "{program} (named by {origin}) failed for {registry}: {}",
            stderr.trim()
        ));
    }
    let answer: HelperAnswer = go_json::from_slice(&output.stdout).map_err(|err| {
        format!("{program} printed something other than {{\"Username\", \"Secret\"}} ({err})")
    })?;
    Ok(Some(Login {
        username: answer.username,
        secret: answer.secret,
        origin: format!("{program} (named by {origin})"),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with_file(content: &str) -> (tempfile::TempDir, OciCredentialStore) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.json");
        std::fs::write(&file, content).unwrap();
        let mut store = OciCredentialStore::default();
        store.read_docker_file(&file);
        (dir, store)
    }

    #[tokio::test]
    async fn the_most_specific_entry_wins() {
        let (_dir, store) = store_with_file(
            r#"{"auths": {
                "https://reg.example:5000/v1/": {"auth": "dXNlcjpwYXNz"},
                "reg.example:5000/team": {"Username": "team", "Password": "secret"}
            }}"#,
        );
        let login = store
            .lookup("reg.example:5000", "team/providers/null")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (login.username.as_str(), login.secret.as_str()),
            ("team", "secret")
        );
        let login = store
            .lookup("reg.example:5000", "other/null")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (login.username.as_str(), login.secret.as_str()),
            ("user", "pass")
        );
        assert_eq!(
            store.lookup("reg.example", "other/null").await.unwrap(),
            None
        );
        // A prefix must end at a path boundary.
        assert_eq!(
            store
                .lookup("reg.example:5000", "teamwork/null")
                .await
                .unwrap()
                .unwrap()
                .username,
            "user"
        );
    }
}
