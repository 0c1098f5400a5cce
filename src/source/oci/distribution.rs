//! The OCI Distribution API (v1.1) for one registry: tags, manifests and
//! blobs, with the registry's authentication challenges answered the way
//! `docker` and `oras` answer them. A request goes out without credentials
//! (or with what an earlier challenge earned); a `401` names a scheme:
//! `Basic` gets the login directly, `Bearer realm=…,service=…,scope=…`
//! sends it to the token endpoint for a token scoped to one repository and
//! access (`pull`, or `pull,push` when publishing).
//!
//! Credentials go to this registry's host and its token endpoint only:
//! reqwest drops the `Authorization` header when a redirect leaves the host,
//! which is what keeps it from blob storage behind signed URLs.

use std::collections::HashMap;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderMap, WWW_AUTHENTICATE};
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use url::Url;

use super::credentials::{Login, OciCredentialStore};
use crate::go_json;
use crate::http::error_chain;

/// The recommended limit for manifests in the distribution spec; also keeps
/// a hostile registry from making tfinstall buffer without end.
pub const MAX_MANIFEST_BYTES: usize = 4 << 20;

/// Per request, for everything but blob bodies, whose pace the downloader
/// watches instead.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Attempts after the first for a transport failure, a 429 or a 5xx.
const RETRIES: u32 = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    Pull,
    Push,
}

impl Access {
    fn actions(self) -> &'static str {
        match self {
            Access::Pull => "pull",
            Access::Push => "pull,push",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// Credentials missing or refused: the message names the registry and
    /// where credentials were looked for.
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Other(String),
}

/// A response read whole, for documents and other small answers.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A request body that can be sent again after a challenge or a retry.
#[derive(Clone)]
pub enum Body {
    Empty,
    Bytes(bytes::Bytes),
    File(std::path::PathBuf),
}

/// One request to a registry, in words the authentication needs: which
/// repository it touches and with what access.
pub struct Call<'a> {
    pub method: Method,
    pub url: &'a Url,
    pub repository: &'a str,
    pub access: Access,
    pub headers: &'a [(&'a str, &'a str)],
    pub body: Body,
}

impl<'a> Call<'a> {
    pub fn new(method: Method, url: &'a Url, repository: &'a str, access: Access) -> Self {
        Call {
            method,
            url,
            repository,
            access,
            headers: &[],
            body: Body::Empty,
        }
    }

    pub fn headers(mut self, headers: &'a [(&'a str, &'a str)]) -> Self {
        self.headers = headers;
        self
    }

    pub fn body(mut self, body: Body) -> Self {
        self.body = body;
        self
    }
}

pub struct Registry {
    /// `host[:port]`.
    host: String,
    client: reqwest::Client,
    credentials: std::sync::Arc<OciCredentialStore>,
    /// `Authorization` values earned per repository and access.
    authorizations: tokio::sync::Mutex<HashMap<(String, Access), String>>,
}

impl Registry {
    pub fn new(
        host: &str,
        client: reqwest::Client,
        credentials: std::sync::Arc<OciCredentialStore>,
    ) -> Self {
        Registry {
            host: host.to_string(),
            client,
            credentials,
            authorizations: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    /// The `Authorization` value a challenge earned for `repository`, if any.
    pub async fn authorization(&self, repository: &str, access: Access) -> Option<String> {
        self.authorizations
            .lock()
            .await
            .get(&(repository.to_string(), access))
            .cloned()
    }

    /// `https://HOST/v2/REPOSITORY/PATH`.
    pub fn url(&self, repository: &str, path: &str) -> Url {
        let text = format!("https://{}/v2/{repository}/{path}", self.host);
        Url::parse(&text).unwrap_or_else(|_| {
            // The host and repository were validated when the template was
            // read; a URL that still fails to parse means a bug, so fail loudly
            // in a way users can report.
            panic!("invalid OCI registry URL {text:?}")
        })
    }

    /// Whether `url` is on this registry's host and port: upload locations
    /// and tag-list pages may point elsewhere, and credentials stay here.
    fn is_own(&self, url: &Url) -> bool {
        let (host, port) = match self.host.rsplit_once(':') {
            Some((host, port)) => (host, port.parse().ok()),
            None => (self.host.as_str(), Some(443)),
        };
        url.scheme() == "https"
            && url.host_str() == Some(host)
            && url.port_or_known_default() == port
    }

    fn failed(&self, what: &str, err: impl std::fmt::Display) -> RegistryError {
        RegistryError::Other(format!("OCI registry {}: {what}: {err}", self.host))
    }

    /// Sends a request, answering one authentication challenge and retrying
    /// transient failures; the body of the answer is not read.
    pub async fn send(
        &self,
        call: &Call<'_>,
        timeout: Option<Duration>,
    ) -> Result<reqwest::Response, RegistryError> {
        let Call {
            method,
            url,
            repository,
            access,
            headers,
            body,
        } = call;
        let (repository, access) = (*repository, *access);
        let key = (repository.to_string(), access);
        let mut authorization = self.authorizations.lock().await.get(&key).cloned();
        let mut challenged = false;
        loop {
            let response = self
                .send_retrying(
                    method,
                    url,
                    headers,
                    body,
                    authorization.as_deref(),
                    timeout,
                )
                .await?;
            match response.status() {
                StatusCode::UNAUTHORIZED if !challenged => {
                    challenged = true;
                    let challenge = response
                        .headers()
                        .get(WWW_AUTHENTICATE)
                        .and_then(|v| v.to_str().ok())
                        .map(Challenge::parse);
                    let login = self
                        .credentials
                        .lookup(&self.host, repository)
                        .await
                        .map_err(|err| self.failed("finding credentials", err))?;
                    let earned = match challenge {
                        Some(Challenge::Bearer { realm, service }) => {
                            self.token(
                                &realm,
                                service.as_deref(),
                                repository,
                                access,
                                login.as_ref(),
                            )
                            .await?
                        }
                        Some(Challenge::Basic) | None => match &login {
                            Some(login) => basic(login),
                            None => return Err(self.refused(repository, None, response.status())),
                        },
                    };
                    self.authorizations
                        .lock()
                        .await
                        .insert(key.clone(), earned.clone());
                    authorization = Some(earned);
                }
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                    let login = self
                        .credentials
                        .lookup(&self.host, repository)
                        .await
                        .ok()
                        .flatten();
                    return Err(self.refused(repository, login.as_ref(), response.status()));
                }
                _ => return Ok(response),
            }
        }
    }

    /// [`Registry::send`], reading the answer whole (up to `limit` bytes).
    pub async fn fetch(&self, call: &Call<'_>, limit: usize) -> Result<Answer, RegistryError> {
        let url = call.url;
        let mut response = self.send(call, Some(REQUEST_TIMEOUT)).await?;
        let status = response.status();
        let headers = response.headers().clone();
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|err| self.failed(url.as_str(), error_chain(&err)))?
        {
            if bytes.len() + chunk.len() > limit {
                return Err(self.failed(
                    url.as_str(),
                    format!("the answer is larger than {limit} bytes"),
                ));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Answer {
            status,
            headers,
            body: bytes,
        })
    }

    fn refused(
        &self,
        repository: &str,
        login: Option<&Login>,
        status: StatusCode,
    ) -> RegistryError {
        let what = match login {
            Some(login) => format!(
                "rejected the credentials for user {:?} from {}",
                login.username, login.origin
            ),
            None => "requires credentials, and none were found".to_string(),
        };
        RegistryError::Unauthorized(format!(
            "OCI registry {} {what} (HTTP {} for repository {repository}). Credentials were looked for in: {}. Log in with `docker login {}` or `oras login {}`, or add an oci_credentials block to the CLI configuration.",
            self.host,
            status.as_u16(),
            self.credentials.searched(),
            self.host,
            self.host,
        ))
    }

    /// The token endpoint's answer for one repository and access.
    async fn token(
        &self,
        realm: &str,
        service: Option<&str>,
        repository: &str,
        access: Access,
        login: Option<&Login>,
    ) -> Result<String, RegistryError> {
        let mut url =
            Url::parse(realm).map_err(|err| self.failed(&format!("token realm {realm:?}"), err))?;
        {
            let mut query = url.query_pairs_mut();
            if let Some(service) = service {
                query.append_pair("service", service);
            }
            query.append_pair(
                "scope",
                &format!("repository:{repository}:{}", access.actions()),
            );
        }
        if login.is_some() && url.scheme() != "https" {
            return Err(self.failed(
                "token request",
                format!("the token endpoint {realm} is not https:, and credentials are never sent in the clear"),
            ));
        }
        let mut request = self.client.get(url.clone()).timeout(REQUEST_TIMEOUT);
        if let Some(login) = login {
            request = request.basic_auth(&login.username, Some(&login.secret));
        }
        crate::http::start_loading_roots();
        let response = request
            .send()
            .await
            .map_err(|err| self.failed("token request", error_chain(&err)))?;
        let status = response.status();
        if matches!(status.as_u16(), 401 | 403) {
            return Err(self.refused(repository, login, status));
        }
        if !status.is_success() {
            return Err(self.failed(
                "token request",
                format!("{} answered {}", url.host_str().unwrap_or_default(), status),
            ));
        }
        let body = response
            .bytes()
            .await
            .map_err(|err| self.failed("token request", error_chain(&err)))?;
        let token = token_of(&body).map_err(|err| self.failed("token endpoint answer", err))?;
        Ok(format!("Bearer {token}"))
    }

    async fn send_retrying(
        &self,
        method: &Method,
        url: &Url,
        headers: &[(&str, &str)],
        body: &Body,
        authorization: Option<&str>,
        timeout: Option<Duration>,
    ) -> Result<reqwest::Response, RegistryError> {
        let mut attempt = 0;
        loop {
            let mut request = self.client.request(method.clone(), url.clone());
            if let Some(timeout) = timeout {
                request = request.timeout(timeout);
            }
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            if let Some(authorization) = authorization.filter(|_| self.is_own(url)) {
                request = request.header(AUTHORIZATION, authorization);
            }
            request = match body {
                Body::Empty => request,
                Body::Bytes(bytes) => request.body(bytes.clone()),
                Body::File(path) => {
                    let file = tokio::fs::File::open(path)
                        .await
                        .map_err(|err| self.failed(&path.display().to_string(), err))?;
                    let length = file
                        .metadata()
                        .await
                        .map_err(|err| self.failed(&path.display().to_string(), err))?
                        .len();
                    request
                        .header(reqwest::header::CONTENT_LENGTH, length)
                        .body(reqwest::Body::wrap_stream(tokio_util_stream(file)))
                }
            };
            crate::http::start_loading_roots();
            let transient = match request.send().await {
                Ok(response) => {
                    let status = response.status().as_u16();
                    if (status == 429 || (status >= 500 && status != 501)) && attempt < RETRIES {
                        format!("{method} {url}: {}", response.status())
                    } else {
                        return Ok(response);
                    }
                }
                Err(err) if attempt < RETRIES => error_chain(&err),
                Err(err) => return Err(self.failed(&format!("{method} {url}"), error_chain(&err))),
            };
            attempt += 1;
            tracing::debug!("retrying after: {transient}");
            tokio::time::sleep(Duration::from_secs(1 << (attempt - 1))).await;
        }
    }
}

/// A file as a stream of chunks, for uploads whose memory stays flat.
fn tokio_util_stream(
    file: tokio::fs::File,
) -> impl futures_util::Stream<Item = std::io::Result<bytes::Bytes>> {
    use tokio::io::AsyncReadExt as _;
    futures_util::stream::unfold(file, |mut file| async move {
        let mut buffer = vec![0u8; 256 * 1024];
        match file.read(&mut buffer).await {
            Ok(0) => None,
            Ok(n) => {
                buffer.truncate(n);
                Some((Ok(bytes::Bytes::from(buffer)), file))
            }
            Err(err) => Some((Err(err), file)),
        }
    })
}

fn basic(login: &Login) -> String {
    use base64::Engine as _;
    let pair = format!("{}:{}", login.username, login.secret);
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

#[derive(Debug, PartialEq, Eq)]
enum Challenge {
    Basic,
    Bearer {
        realm: String,
        service: Option<String>,
    },
}

impl Challenge {
    /// `Basic realm="…"` or `Bearer realm="…",service="…",scope="…"`. The
    /// scope the registry names is not used: tfinstall asks for exactly the
    /// repository and access it needs.
    fn parse(header: &str) -> Challenge {
        let header = header.trim();
        let (scheme, params) = header.split_once(' ').unwrap_or((header, ""));
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Challenge::Basic;
        }
        let mut realm = String::new();
        let mut service = None;
        for (name, value) in auth_params(params) {
            match name.to_ascii_lowercase().as_str() {
                "realm" => realm = value,
                "service" => service = Some(value),
                _ => {}
            }
        }
        Challenge::Bearer { realm, service }
    }
}

/// `name="value", name=value` pairs; commas inside quotes belong to the value.
fn auth_params(text: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let Some((name, after)) = rest.split_once('=') else {
            break;
        };
        let name = name.trim().trim_start_matches(',').trim().to_string();
        let after = after.trim_start();
        let (value, remaining) = if let Some(quoted) = after.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let mut end = quoted.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, escaped)) = chars.next() {
                            value.push(escaped);
                        }
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    c => value.push(c),
                }
            }
            (value, &quoted[end..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_string(), &after[end..])
        };
        pairs.push((name, value));
        rest = remaining.trim_start().trim_start_matches(',').trim_start();
    }
    pairs
}

/// The token in a token endpoint's answer: `token` (Docker's token
/// specification) or else `access_token` (its OAuth 2 form, all that some
/// registries send), decoded as Go registries' clients decode it.
fn token_of(body: &[u8]) -> Result<String, String> {
    #[derive(Deserialize)]
    struct TokenAnswer {
        token: String,
        access_token: String,
    }
    let answer: TokenAnswer = go_json::from_slice(body).map_err(|err| err.to_string())?;
    let token = if answer.token.is_empty() {
        answer.access_token
    } else {
        answer.token
    };
    if token.is_empty() {
        return Err("it holds no token".to_owned());
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_answers_are_read_in_the_shapes_token_services_send() {
        // Docker Hub's auth service: both names, with expiry details.
        assert_eq!(
            token_of(br#"{"token":"T1","access_token":"T1","expires_in":300,"issued_at":"2026-11-25T21:00:00.123456789Z"}"#),
            Ok("T1".to_owned())
        );
        // An OAuth 2-style answer with only `access_token`, and a `null`
        // `token` from a Go server's empty pointer.
        assert_eq!(
            token_of(br#"{"access_token":"T2","refresh_token":"R","token":null}"#),
            Ok("T2".to_owned())
        );
        // Keys in another case, as Go's decoder accepts them.
        assert_eq!(token_of(br#"{"Token":"T3"}"#), Ok("T3".to_owned()));
        assert_eq!(
            token_of(br#"{"token":"","expires_in":60}"#),
            Err("it holds no token".to_owned())
        );
        assert!(token_of(b"<html>login</html>").is_err());
    }

    #[test]
    fn challenges_are_read_as_registries_send_them() {
        assert_eq!(
            Challenge::parse(
                r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push""#
            ),
            Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("registry.example".into())
            }
        );
        assert_eq!(
            Challenge::parse(r#"Basic realm="Registry Realm""#),
            Challenge::Basic
        );
        assert_eq!(
            auth_params(r#"realm=plain, scope="a,b", x="q\"d""#),
            vec![
                ("realm".to_string(), "plain".to_string()),
                ("scope".to_string(), "a,b".to_string()),
                ("x".to_string(), "q\"d".to_string()),
            ]
        );
    }
}
