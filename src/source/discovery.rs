//! Terraform's remote service discovery protocol (terraform-svchost's
//! `disco`): which URL serves `providers.v1` for a hostname. Looked up once
//! per host per run; CLI-config `host` blocks answer without any request.
//!
//! Answers are also remembered across runs, in the user's cache directory,
//! so that a warm run needs one response in a row instead of two: the
//! registry sends its version-list request to the remembered service URL
//! while discovery is asked again alongside, and redoes the request if the
//! answer has changed (see [`Discovery::remembered_service_url`]). An answer
//! is used without asking again only while its `Cache-Control: max-age`
//! lasts; without one it is always asked again, so a registry that moves
//! its API is followed at once.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use url::Url;

use crate::addr::Hostname;
use crate::cliconfig::{Credentials, CredentialsError};
use crate::go_json;
use crate::http::{ApiClient, status_line};
use crate::memo::{Memo, MemoPolicy};

/// Bearer tokens by hostname, from `TF_TOKEN_…` variables, the CLI
/// configuration and its credentials helper; one per run, shared by every
/// source so that the helper is asked once per host.
pub type TokenLookup = Arc<Credentials>;

const DISCOVERY_PATH: &str = "/.well-known/terraform.json";
const MAX_DISCOVERY_DOC: usize = 1 << 20;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServiceLookup {
    Found(Url),
    /// The host offers some `providers.*` version, but not v1.
    OtherVersion,
    NotProvided,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct HostServices {
    /// The discovery document's final URL, the base for relative service URLs.
    base: Url,
    services: serde_json::Map<String, serde_json::Value>,
}

/// A discovery answer as kept between runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct RememberedAnswer {
    answer: HostServices,
    /// Seconds since the Unix epoch.
    fetched_at: u64,
    /// How long the answer may be used without asking again, from the
    /// response's `Cache-Control: max-age`.
    max_age: u64,
}

impl RememberedAnswer {
    fn fresh(&self) -> bool {
        unix_now() < self.fetched_at.saturating_add(self.max_age)
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// How long an answer may be kept: `None` for `no-store`; `max-age` (0 for
/// `no-cache` or without one) otherwise.
fn keep_for(cache_control: Option<&str>) -> Option<u64> {
    let mut max_age = 0;
    let mut no_cache = false;
    for directive in cache_control.unwrap_or_default().split(',') {
        let directive = directive.trim().to_ascii_lowercase();
        match directive.as_str() {
            "no-store" => return None,
            "no-cache" => no_cache = true,
            _ => {
                if let Some(seconds) = directive.strip_prefix("max-age=") {
                    max_age = seconds.trim_matches('"').parse().unwrap_or(0);
                }
            }
        }
    }
    Some(if no_cache { 0 } else { max_age })
}

pub struct Discovery {
    api: ApiClient,
    tokens: TokenLookup,
    forced: BTreeMap<Hostname, BTreeMap<String, String>>,
    /// This process's answers: for the run, or as `serve`'s policy says.
    cache: Memo<Hostname, HostServices, String>,
    /// Where answers are kept between runs; `None` keeps nothing.
    remembered_dir: Option<PathBuf>,
    /// Answers read from `remembered_dir`, once per host per run.
    remembered: Mutex<HashMap<Hostname, Option<RememberedAnswer>>>,
}

impl Discovery {
    /// Discovery has its own fixed policy in Terraform: 11 s, no retries.
    pub fn new(
        api: &ApiClient,
        tokens: TokenLookup,
        forced: BTreeMap<Hostname, BTreeMap<String, String>>,
        remembered_dir: Option<PathBuf>,
    ) -> Self {
        Discovery {
            api: api.with_policy(Duration::from_secs(11), 0),
            tokens,
            forced,
            cache: Memo::new(MemoPolicy::PerRun),
            remembered_dir,
            remembered: Mutex::new(HashMap::new()),
        }
    }

    /// Discovery with its answers kept as `policy` says rather than for the
    /// run.
    pub fn with_memo_policy(mut self, policy: MemoPolicy) -> Self {
        self.cache = Memo::new(policy);
        self
    }

    /// `service`'s URL as an earlier run's answer gave it, to send a request
    /// to before this run's discovery has answered. The caller must check
    /// the URL against [`Discovery::service_url`] before using what came
    /// back: nothing is installed on a remembered answer alone.
    pub fn remembered_service_url(&self, host: &Hostname, service: &str) -> Option<Url> {
        if self.forced.contains_key(host) {
            return None;
        }
        let remembered = self.remembered_answer(host)?;
        match resolve(&remembered.answer, service) {
            Ok(ServiceLookup::Found(url)) => Some(url),
            _ => None,
        }
    }

    fn remembered_answer(&self, host: &Hostname) -> Option<RememberedAnswer> {
        let dir = self.remembered_dir.as_ref()?;
        let mut known = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
        known
            .entry(host.clone())
            .or_insert_with(|| {
                std::fs::read(remembered_file(dir, host))
                    .ok()
                    .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            })
            .clone()
    }

    /// Keeps a network answer for later runs, written whole or not at all.
    /// Failing to keep it only costs a later run a round trip.
    fn remember(&self, host: &Hostname, answer: &HostServices, cache_control: Option<&str>) {
        let (Some(dir), Some(max_age)) = (&self.remembered_dir, keep_for(cache_control)) else {
            return;
        };
        let remembered = RememberedAnswer {
            answer: answer.clone(),
            fetched_at: unix_now(),
            max_age,
        };
        let Ok(json) = serde_json::to_vec(&remembered) else {
            return;
        };
        let _ = std::fs::create_dir_all(dir).and_then(|()| {
            let mut file = tempfile::NamedTempFile::new_in(dir)?;
            std::io::Write::write_all(&mut file, &json)?;
            file.persist(remembered_file(dir, host))
                .map(drop)
                .map_err(|err| err.error)
        });
    }

    pub async fn token(&self, host: &Hostname) -> Result<Option<String>, CredentialsError> {
        self.tokens.token(host).await
    }

    /// Where `service` lives for `host`, or why it can't be used. The error
    /// is the text after "could not connect to HOST: ".
    pub async fn service_url(
        &self,
        host: &Hostname,
        service: &str,
    ) -> Result<ServiceLookup, String> {
        let services = self.cache.get(host.clone(), || self.discover(host)).await?;
        resolve(&services, service)
    }

    async fn discover(&self, host: &Hostname) -> Result<HostServices, String> {
        let base = Url::parse(&format!("https://{}{DISCOVERY_PATH}", host.as_ascii()))
            .map_err(|err| format!("invalid hostname {host}: {err}"))?;
        if let Some(forced) = self.forced.get(host) {
            return Ok(HostServices {
                base,
                services: forced
                    .iter()
                    .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                    .collect(),
            });
        }
        if let Some(remembered) = self.remembered_answer(host).filter(RememberedAnswer::fresh) {
            return Ok(remembered.answer);
        }
        let token = self.token(host).await.map_err(|err| err.to_string())?;
        let response = self
            .api
            .get(&base, token.as_deref(), &[("Accept", "application/json")])
            .await
            .map_err(|err| format!("failed to request discovery document: {err}"))?;
        if response.status == reqwest::StatusCode::NOT_FOUND {
            return Ok(HostServices {
                base: response.url,
                services: serde_json::Map::new(),
            });
        }
        if response.status != reqwest::StatusCode::OK {
            return Err(format!(
                "failed to request discovery document: {}",
                status_line(response.status)
            ));
        }
        match response.media_type() {
            Some(media) if media == "application/json" => {}
            _ => {
                return Err(format!(
                    "discovery URL returned an unsupported Content-Type {:?}",
                    response.content_type.unwrap_or_default()
                ));
            }
        }
        if response.body.len() > MAX_DISCOVERY_DOC {
            return Err(format!(
                "discovery doc response is too large (got {} bytes; limit {MAX_DISCOVERY_DOC})",
                response.body.len()
            ));
        }
        let services: serde_json::Map<String, serde_json::Value> =
            go_json::from_slice(&response.body)
                .map_err(|err| format!("failed to decode discovery document: {err}"))?;
        let answer = HostServices {
            base: response.url,
            services,
        };
        self.remember(host, &answer, response.cache_control.as_deref());
        Ok(answer)
    }
}

/// The file keeping `host`'s answer: its ASCII name, `:` (before a port)
/// spelled `_`.
fn remembered_file(dir: &Path, host: &Hostname) -> PathBuf {
    dir.join(format!("{}.json", host.as_ascii().replace(':', "_")))
}

/// Where `service` lives according to `services`. As in Terraform, a value
/// that is not a string (`null` included) is no service of that version.
fn resolve(services: &HostServices, service: &str) -> Result<ServiceLookup, String> {
    let Some(text) = services.services.get(service).and_then(|v| v.as_str()) else {
        let family = service.split('.').next().unwrap_or_default();
        let other = services
            .services
            .keys()
            .any(|k| k.split('.').next() == Some(family));
        return Ok(if other {
            ServiceLookup::OtherVersion
        } else {
            ServiceLookup::NotProvided
        });
    };
    let mut url = services
        .base
        .join(text)
        .map_err(|err| format!("failed to parse service URL {text:?}: {err}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "unsupported scheme {:?} in service URL {text:?}",
            url.scheme()
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "service URL {text:?} must not contain user information"
        ));
    }
    url.set_fragment(None);
    Ok(ServiceLookup::Found(url))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_control_decides_how_long_an_answer_is_kept() {
        assert_eq!(keep_for(None), Some(0));
        assert_eq!(keep_for(Some("public, max-age=3600")), Some(3600));
        assert_eq!(keep_for(Some("Max-Age=\"60\"")), Some(60));
        assert_eq!(keep_for(Some("max-age=60, no-cache")), Some(0));
        assert_eq!(keep_for(Some("max-age=60, no-store")), None);
        assert_eq!(keep_for(Some("max-age=soon")), Some(0));
    }

    #[test]
    fn hosts_with_ports_get_a_file_name_of_their_own() {
        let host = Hostname::parse("example.com:8443").unwrap();
        assert_eq!(
            remembered_file(Path::new("/c"), &host),
            Path::new("/c/example.com_8443.json")
        );
    }
}
