//! The one HTTP client of a run: connection pooling and HTTP/2 across every
//! registry, mirror and archive request. Credentials are never part of the
//! client; callers add them per request, only where Terraform sends them.

mod first_connect;
mod proxy;
pub mod traffic;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The User-Agent Terraform's registry client sends, so registries that log
/// or gate on it treat tfinstall like the Terraform it stands in for.
pub fn user_agent() -> String {
    let mut agent = format!(
        "tfinstall/{} (+https://github.com/tfinstall/tfinstall)",
        env!("CARGO_PKG_VERSION")
    );
    if let Ok(extra) = std::env::var("TF_APPEND_USER_AGENT") {
        let extra = extra.trim();
        if !extra.is_empty() {
            agent.push(' ');
            agent.push_str(extra);
        }
    }
    agent
}

/// How many bytes of one HTTP/2 response the server may send ahead of what
/// tfinstall has taken. A download cannot go faster than this per round
/// trip. hyper's default of 2 MiB held the aws-sized archive to about
/// 30 MB/s with 50 ms to the server (6 s instead of under 2 s on the
/// benchmark). Go, and so Terraform, allows 4 MiB. 8 MiB keeps one download
/// at the unpacker's pace up to about 45 ms away. It is also what one
/// download may hold in memory when the network outruns the unpacker.
const HTTP2_STREAM_WINDOW: u32 = 8 << 20;

/// The same for all of a connection's responses together (hyper's default
/// is 5 MiB): two large downloads from one host at full speed, and a
/// bound on what ten downloads at once may hold in memory.
const HTTP2_CONNECTION_WINDOW: u32 = 16 << 20;

/// Builds the client. TLS roots come from the platform verifier, which on
/// Linux honours `SSL_CERT_FILE`/`SSL_CERT_DIR` the way Go (and so
/// Terraform) does; each request's proxy is chosen from the environment as
/// Go chooses it ([`proxy`]).
pub fn build_client() -> Result<reqwest::Client, crate::diag::Diagnostic> {
    // reqwest is built without a default crypto provider (ring is half the
    // build time of aws-lc); installing it twice is harmless. AES-128-GCM
    // goes first, as in Go's (and so Terraform's) preference: it is as
    // secure for this use and costs less CPU per byte than AES-256 on both
    // ends of a large download.
    let mut provider = rustls::crypto::ring::default_provider();
    provider
        .cipher_suites
        .sort_by_key(|suite| suite.suite() != rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
    let _ = provider.clone().install_default();
    let provider = Arc::new(provider);
    if let Some(missing) = missing_certificate_paths().first() {
        return Err(https_setup_failure(format!(
            "{} does not exist",
            missing.display()
        )));
    }
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(rustls::DEFAULT_VERSIONS)
        .map_err(|err| https_setup_failure(err.to_string()))?
        // The platform's own verifier, only built later: see LazyVerifier.
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(LazyVerifier::start(provider)))
        .with_no_client_auth();
    // What reqwest offers when it builds the configuration itself.
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let proxies = proxy::ProxyEnv::from_process();
    let builder = match proxies.any() {
        true => reqwest::Client::builder().proxy(reqwest::Proxy::custom(move |url| {
            proxies.proxy_for(url).map(proxy::for_reqwest)
        })),
        false => reqwest::Client::builder().no_proxy(),
    };
    builder
        .tls_backend_preconfigured(tls)
        .user_agent(user_agent())
        .http2_initial_stream_window_size(HTTP2_STREAM_WINDOW)
        .http2_initial_connection_window_size(HTTP2_CONNECTION_WINDOW)
        .connect_timeout(Duration::from_secs(10))
        .pool_idle_timeout(Duration::from_secs(30))
        .connector_layer(first_connect::FirstConnectLayer::default())
        .build()
        .map_err(|err| https_setup_failure(error_chain(&err)))
}

/// Why the client could not be made, naming the certificate variables that
/// are set: the usual cause is one naming nothing usable, which reqwest
/// reports only as "builder error".
fn https_setup_failure(detail: String) -> crate::diag::Diagnostic {
    let named = named_certificate_variables();
    let hint = if named.is_empty() {
        String::new()
    } else {
        format!(
            " Check {}: each must name a readable PEM file or directory of certificates, or be unset.",
            named.join(" and ")
        )
    };
    crate::diag::Diagnostic::error(
        "Failed to set up HTTPS",
        format!("Could not create the HTTP client: {detail}.{hint}"),
    )
}

/// `SSL_CERT_FILE` and `SSL_CERT_DIR` as set, for messages about them.
fn named_certificate_variables() -> Vec<String> {
    ["SSL_CERT_FILE", "SSL_CERT_DIR"]
        .into_iter()
        .filter_map(|name| {
            std::env::var_os(name).map(|value| format!("{name}={:?}", value.to_string_lossy()))
        })
        .collect()
}

/// The paths `SSL_CERT_FILE` and `SSL_CERT_DIR` name that do not exist:
/// checked at start, since the certificates themselves are read only
/// later ([`LazyVerifier`]), and a run that cannot trust any server should
/// say so before it does anything.
fn missing_certificate_paths() -> Vec<std::path::PathBuf> {
    let file = std::env::var_os("SSL_CERT_FILE").map(std::path::PathBuf::from);
    let dirs = std::env::var_os("SSL_CERT_DIR")
        .map(|dirs| std::env::split_paths(&dirs).collect::<Vec<_>>())
        .unwrap_or_default();
    file.into_iter()
        .chain(dirs)
        .filter(|path| !path.as_os_str().is_empty() && !path.exists())
        .collect()
}

/// The verifiers of the clients built so far whose roots nothing has
/// started loading yet.
static UNLOADED_ROOTS: Mutex<Vec<Box<dyn FnOnce() + Send>>> = Mutex::new(Vec::new());

/// Starts loading the trusted roots of every client built so far, on a
/// thread of its own: called just before a request is sent, so that the
/// roots load while its connection is made. Cheap once done.
pub fn start_loading_roots() {
    let unloaded = std::mem::take(&mut *unloaded_roots());
    if !unloaded.is_empty() {
        // Not joined: a process that ends first has no use for it.
        std::thread::spawn(move || unloaded.into_iter().for_each(|load| load()));
    }
}

fn unloaded_roots() -> std::sync::MutexGuard<'static, Vec<Box<dyn FnOnce() + Send>>> {
    UNLOADED_ROOTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The platform's certificate verifier (what reqwest would build), built
/// on a thread of its own from the run's first request on
/// ([`start_loading_roots`]), and waited for at the first handshake (or
/// built there, if no request said it was coming). Building it reads every
/// certificate of the system's store: a few milliseconds of a core that a
/// run making no request (a no-op `init`, which reads its modules on both
/// cores) need not spend, and that a run making one spends while its first
/// connection is made. Every check is the platform verifier's own.
#[derive(Debug)]
struct LazyVerifier {
    provider: Arc<rustls::crypto::CryptoProvider>,
    verifier: Arc<OnceLock<Result<rustls_platform_verifier::Verifier, rustls::Error>>>,
}

impl LazyVerifier {
    fn start(provider: Arc<rustls::crypto::CryptoProvider>) -> Self {
        let verifier = Arc::new(OnceLock::new());
        let (cell, roots_provider) = (verifier.clone(), provider.clone());
        unloaded_roots().push(Box::new(move || {
            cell.get_or_init(|| rustls_platform_verifier::Verifier::new(roots_provider));
        }));
        LazyVerifier { provider, verifier }
    }

    fn verifier(&self) -> Result<&rustls_platform_verifier::Verifier, rustls::Error> {
        let provider = self.provider.clone();
        self.verifier
            .get_or_init(|| rustls_platform_verifier::Verifier::new(provider))
            .as_ref()
            .map_err(|err| {
                rustls::Error::General(format!(
                    "could not load the trusted certificates (the system's, or SSL_CERT_FILE and SSL_CERT_DIR): {err}"
                ))
            })
    }
}

impl rustls::client::danger::ServerCertVerifier for LazyVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        intermediates: &[rustls::pki_types::CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        self.verifier()?.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.verifier()?.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.verifier()?.verify_tls13_signature(message, cert, dss)
    }

    /// Known without the certificates: the platform verifier's are its
    /// crypto provider's, which is this one.
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The Terraform version tfinstall presents itself as to registries
/// (`X-Terraform-Version`) and in compatibility messages: the newest release
/// whose installer behaviour it follows.
pub const TERRAFORM_COMPAT_VERSION: &str = "1.16.0";

/// Bodies of registry and mirror JSON documents are read through this limit,
/// so a hostile server cannot make tfinstall buffer without end.
const MAX_JSON_BODY: usize = 16 << 20;

/// A JSON API response, read whole (they are small) with its final URL, the
/// base that relative links in it resolve against.
#[derive(Debug)]
pub struct ApiResponse {
    pub url: url::Url,
    pub status: reqwest::StatusCode,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
    /// The server's `Retry-After`, for a 429 or 503.
    pub retry_after: Option<Duration>,
    /// The server's `Cache-Control`, for answers worth keeping across runs.
    pub cache_control: Option<String>,
    /// `X-Terraform-Get`, where a module registry says a package is.
    pub terraform_get: Option<String>,
}

impl ApiResponse {
    /// The media type without parameters, lower-cased.
    pub fn media_type(&self) -> Option<String> {
        self.content_type.as_deref().map(|ct| {
            ct.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
    }
}

/// Registry and network-mirror metadata requests, with Terraform's timeout
/// and retry policy (go-retryablehttp as Terraform's
/// `internal/getproviders/registry_client.go` configures it).
#[derive(Clone)]
pub struct ApiClient {
    client: reqwest::Client,
    pub timeout: Duration,
    pub retries: u32,
}

impl ApiClient {
    pub fn new(client: reqwest::Client, timeout: Duration, retries: u32) -> Self {
        ApiClient {
            client,
            timeout,
            retries,
        }
    }

    /// Terraform's defaults: `TF_REGISTRY_CLIENT_TIMEOUT` seconds (10) per
    /// request and `TF_REGISTRY_DISCOVERY_RETRY` retries (1); values that are
    /// not positive integers are ignored, as Terraform ignores them.
    pub fn from_env(client: reqwest::Client) -> Self {
        let positive = |name: &str| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|v| *v > 0)
        };
        let timeout = positive("TF_REGISTRY_CLIENT_TIMEOUT").unwrap_or(10);
        let retries = positive("TF_REGISTRY_DISCOVERY_RETRY").unwrap_or(1);
        ApiClient::new(
            client,
            Duration::from_secs(timeout),
            u32::try_from(retries).unwrap_or(u32::MAX),
        )
    }

    pub fn with_policy(&self, timeout: Duration, retries: u32) -> ApiClient {
        ApiClient::new(self.client.clone(), timeout, retries)
    }

    /// GETs `url`, retrying transport failures, 429 and 5xx (but 501) with
    /// exponential backoff. The error text is Terraform's
    /// (`the request failed after 2 attempts, please try again later: …`).
    pub async fn get(
        &self,
        url: &url::Url,
        token: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Result<ApiResponse, String> {
        let attempts = self.retries.saturating_add(1);
        let mut last_error = String::new();
        let mut asked_wait = None;
        for attempt in 0..attempts {
            if attempt > 0 {
                let backoff = Duration::from_secs(1u64 << (attempt - 1).min(5));
                let wait = asked_wait
                    .take()
                    .unwrap_or(backoff.min(Duration::from_secs(30)));
                tokio::time::sleep(wait).await;
            }
            match self.get_once(url, token, headers).await {
                Ok(response) => {
                    let status = response.status.as_u16();
                    if status == 429 || (status >= 500 && status != 501) {
                        asked_wait = response.retry_after;
                        last_error = format!(
                            "{} returned from {}",
                            status_line(response.status),
                            url.host_str().unwrap_or_default()
                        );
                        continue;
                    }
                    return Ok(response);
                }
                Err(err) => last_error = err,
            }
        }
        Err(if attempts > 1 {
            format!(
                "the request failed after {attempts} attempts, please try again later: {last_error}"
            )
        } else {
            format!("the request failed, please try again later: {last_error}")
        })
    }

    async fn get_once(
        &self,
        url: &url::Url,
        token: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Result<ApiResponse, String> {
        let mut request = self.client.get(url.clone()).timeout(self.timeout);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let describe = |err: reqwest::Error| {
            if err.is_timeout() {
                format!(
                    "Get {:?}: request timed out after {} s (raise TF_REGISTRY_CLIENT_TIMEOUT if the server is just slow)",
                    url.as_str(),
                    self.timeout.as_secs()
                )
            } else {
                format!("Get {:?}: {}", url.as_str(), error_chain(&err))
            }
        };
        traffic::request(url);
        start_loading_roots();
        let mut response = request.send().await.map_err(describe)?;
        let final_url = response.url().clone();
        let status = response.status();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let retry_after = retry_after(status, response.headers());
        let cache_control = response
            .headers()
            .get(reqwest::header::CACHE_CONTROL)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let terraform_get = response
            .headers()
            .get("X-Terraform-Get")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(describe)? {
            if body.len() + chunk.len() > MAX_JSON_BODY {
                return Err(format!(
                    "Get {:?}: response is larger than {} MiB",
                    url.as_str(),
                    MAX_JSON_BODY >> 20
                ));
            }
            traffic::received(url, chunk.len());
            body.extend_from_slice(&chunk);
        }
        Ok(ApiResponse {
            url: final_url,
            status,
            content_type,
            body,
            retry_after,
            cache_control,
            terraform_get,
        })
    }
}

/// The longest `Retry-After` honoured; a server asking for more is waited
/// for this long, and then the usual retry count decides.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// How long a 429 or 503 response asks the client to wait before trying
/// again, as go-retryablehttp (and so Terraform) reads it: whole seconds.
pub fn retry_after(
    status: reqwest::StatusCode,
    headers: &reqwest::header::HeaderMap,
) -> Option<Duration> {
    if !matches!(status.as_u16(), 429 | 503) {
        return None;
    }
    let seconds: u64 = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds).min(MAX_RETRY_AFTER))
}

/// Go's `resp.Status`: "404 Not Found".
pub fn status_line(status: reqwest::StatusCode) -> String {
    match status.canonical_reason() {
        Some(reason) => format!("{} {reason}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}

/// reqwest's top-level error text hides the cause ("error sending request");
/// users need the innermost reason (certificate unknown, connection refused).
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::StatusCode;
    use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};

    #[test]
    fn retry_after_is_whole_seconds_on_429_and_503_only() {
        let asked = |status: u16, value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(RETRY_AFTER, HeaderValue::from_str(value).unwrap());
            retry_after(StatusCode::from_u16(status).unwrap(), &headers)
        };
        assert_eq!(asked(429, "3"), Some(Duration::from_secs(3)));
        assert_eq!(asked(503, " 0 "), Some(Duration::ZERO));
        assert_eq!(asked(503, "86400"), Some(MAX_RETRY_AFTER));
        assert_eq!(asked(500, "3"), None);
        assert_eq!(asked(429, "Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(asked(429, "-1"), None);
        assert_eq!(
            retry_after(StatusCode::TOO_MANY_REQUESTS, &HeaderMap::new()),
            None
        );
    }
}
