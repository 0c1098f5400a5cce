//! Terraform's remote service discovery (§5.3): which URL serves
//! `providers.v1` for a hostname. Looked up once per host per run; CLI-config
//! `host` blocks answer without any request.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::OnceCell;
use url::Url;

use crate::addr::Hostname;
use crate::cliconfig::{Credentials, CredentialsError};
use crate::go_json;
use crate::http::{ApiClient, status_line};

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

#[derive(Clone, Debug)]
struct HostServices {
    /// The discovery document's final URL, the base for relative service URLs.
    base: Url,
    services: serde_json::Map<String, serde_json::Value>,
}

type DiscoveryResult = Result<HostServices, String>;

pub struct Discovery {
    api: ApiClient,
    tokens: TokenLookup,
    forced: BTreeMap<Hostname, BTreeMap<String, String>>,
    cache: Mutex<HashMap<Hostname, Arc<OnceCell<DiscoveryResult>>>>,
}

impl Discovery {
    /// Discovery has its own fixed policy in Terraform: 11 s, no retries.
    pub fn new(
        api: &ApiClient,
        tokens: TokenLookup,
        forced: BTreeMap<Hostname, BTreeMap<String, String>>,
    ) -> Self {
        Discovery {
            api: api.with_policy(Duration::from_secs(11), 0),
            tokens,
            forced,
            cache: Mutex::new(HashMap::new()),
        }
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
        let cell = {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            cache.entry(host.clone()).or_default().clone()
        };
        let services = cell.get_or_init(|| self.discover(host)).await.clone()?;
        // As in Terraform, a value that is not a string (`null` included)
        // is no service of that version.
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
        Ok(HostServices {
            base: response.url,
            services,
        })
    }
}
