//! `tfinstall serve`: a pull-through provider network mirror for fleets.
//!
//! Terraform and OpenTofu clients configured with `network_mirror { url =
//! "https://HOST:PORT/" }` install through it unmodified. It faces the
//! network, so it is never an open proxy: a request names a provider, and
//! only providers of the allowed hosts reach upstream ([`access`]), and
//! with `-policy` only the versions and packages the provider policy
//! allows (a denied one is refused with 403 and the rule); paths
//! are parsed strictly ([`route`]); with `-auth-token-file` every request
//! needs a token; and nothing is served that was not verified as `init`
//! verifies it ([`mirror`]). A client that stalls its connection is cut
//! off ([`connection`]). Operators watch it through [`metrics`], the
//! [`access_log`] and [`readiness`].

pub mod access;
pub mod access_log;
pub mod connection;
pub mod metrics;
pub mod mirror;
pub mod readiness;
pub mod route;

use std::convert::Infallible;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use futures_util::TryStreamExt;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::HeaderValue;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::addr::target_platforms;
use crate::cache::PluginCache;
use crate::cli::{AccessLogFormat, ServeArgs};
use crate::cliconfig::{self, CliEnv};
use crate::diag::{Diagnostic, Diagnostics};
use crate::fetch::{DownloadSettings, Downloader};
use crate::install::installer::CacheUse;
use crate::memo::{Freshness, MemoPolicy};
use crate::output::Output;
use crate::policy::Policy;
use crate::source::configured::{NetworkSources, SourceOptions, build_source};
use crate::source::oci::template::RepositoryTemplate;
use access::{AccessTokens, AllowedProviders};
use access_log::{AccessLog, AccessRecord};
use connection::ConnectionLimits;
use metrics::{CacheOutcome, ServeMetrics};
use mirror::{Mirror, MirrorOptions, Reply, SharedStore};
use readiness::Readiness;
use route::Route;

/// How long a stopping server waits for requests and fills in flight.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

type Body = BoxBody<Bytes, std::io::Error>;

pub async fn run(args: ServeArgs, launch_dir: PathBuf) -> bool {
    let out = Output::new(false, true);
    match serve(&args, &launch_dir, &out).await {
        Ok(()) => true,
        Err(diags) => {
            out.diagnostics(&diags);
            false
        }
    }
}

/// Everything the request handler needs, shared by every connection.
struct Server {
    mirror: Arc<Mirror>,
    allowed: AllowedProviders,
    tokens: Option<AccessTokens>,
    log: RequestLog,
    metrics: Arc<ServeMetrics>,
    /// `-metrics-token-file`.
    metrics_tokens: Option<AccessTokens>,
    /// Whether the main listener answers `/metrics` (no `-metrics-listen`).
    metrics_on_main: bool,
    access_log: AccessLog,
    readiness: Readiness,
    drain_delay: Duration,
}

/// Which of the server's listeners a connection came to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Listener {
    /// The mirror's, HTTPS.
    Main,
    /// `-metrics-listen`'s, plain HTTP: metrics, health and readiness only.
    Metrics,
}

async fn serve(args: &ServeArgs, launch_dir: &Path, out: &Arc<Output>) -> Result<(), Diagnostics> {
    let platforms = if args.platforms.is_empty() {
        None
    } else {
        Some(target_platforms(&args.platforms)?)
    };
    let env = CliEnv::from_process();
    let (cli_config, config_diags) = cliconfig::load(&env);
    out.config_problems(&config_diags);
    let allowed = AllowedProviders::new(&cli_config, &args.allow)?;
    let provider_policy = Policy::from_flag(args.policy.as_deref())?;
    if let Some(policy) = &provider_policy {
        out.diagnostics(policy.warnings());
    }
    let tokens = args
        .auth_token_file
        .as_deref()
        .map(AccessTokens::load)
        .transpose()?;
    let shared_target = args
        .store
        .as_deref()
        .and_then(crate::source::oci::publish::is_oci_target)
        .map(str::to_owned);
    let store_dir = store_dir(args, shared_target.is_none(), &cli_config)?;
    std::fs::create_dir_all(&store_dir).map_err(|err| {
        Diagnostic::error(
            "Cannot create the store",
            format!(
                "Could not create the store directory {}: {err}. Create it, or pass -store=DIR naming a directory you can write.",
                store_dir.display()
            ),
        )
    })?;
    let tls = tls_acceptor(&args.tls_cert, &args.tls_key)?;
    let client = crate::http::build_client()?;
    // Every memo on the way upstream ages, as the server's own version
    // lists do: a failure or an old list must not outlive a restart that
    // never comes.
    let freshness = Freshness {
        answers: args.metadata_max_age,
        failures: args.failure_max_age,
    };
    let network = NetworkSources::with_memo_policy(
        &cli_config,
        &env,
        client.clone(),
        MemoPolicy::Aging(freshness),
    );
    let (source, source_diags) = build_source(&SourceOptions {
        plugin_dirs: &[],
        cli_config: &cli_config,
        env: &env,
        launch_dir,
        work_dir: Path::new("."),
        network: &network,
    });
    if source_diags.has_errors() {
        return Err(source_diags);
    }
    out.diagnostics(&source_diags);
    let shared = match &shared_target {
        Some(target) => Some(SharedStore {
            template: RepositoryTemplate::parse(target, allowed.patterns()).map_err(|err| {
                Diagnostic::error(
                    "Invalid shared store",
                    format!(
                        "Cannot keep packages in oci://{target}: {err}. Write -store=oci://HOST[:PORT]/REPOSITORY, where REPOSITORY uses ${{hostname}}, ${{namespace}} and ${{type}} to tell the allowed providers apart, e.g. 'oci://registry.example.com/tf-providers/${{hostname}}/${{namespace}}/${{type}}'."
                    ),
                )
            })?,
            registries: network.oci_registries(),
        }),
        None => None,
    };
    let mut store = CacheUse::new(PluginCache::new(&store_dir), false);
    store.keep_archives = true;
    let log = RequestLog { json: args.json };
    let metrics = Arc::new(ServeMetrics::new(PluginCache::new(&store_dir)));
    crate::http::traffic::watch(metrics.clone());
    let access_log = AccessLog::open(
        args.access_log_format.unwrap_or(if args.json {
            AccessLogFormat::Json
        } else {
            AccessLogFormat::Combined
        }),
        args.access_log.as_deref(),
    )?;
    let metrics_tokens = args
        .metrics_token_file
        .as_deref()
        .map(AccessTokens::load)
        .transpose()?;
    let readiness = Readiness::new(
        store_dir.clone(),
        shared_target.as_ref().map(|target| {
            let host = target.split('/').next().unwrap_or_default().to_owned();
            (host, client.clone())
        }),
    );
    let downloader = Arc::new(
        Downloader::new(
            client,
            DownloadSettings {
                max_bytes: args.max_package_size,
                ..DownloadSettings::from_env()
            },
        )
        .with_netrc(cli_config.netrc.clone()),
    );
    let mirror = Arc::new(Mirror::new(
        source,
        store,
        downloader,
        MirrorOptions {
            platforms,
            max_package_size: args.max_package_size,
            max_fills: args.max_fills,
            grants: tokens.clone(),
            shared,
            policy: provider_policy,
            freshness,
            metrics: metrics.clone(),
        },
        Arc::new(move |message: String| log.message(&message)),
    ));
    let listener = TcpListener::bind(args.listen).await.map_err(|err| {
        Diagnostic::error(
            "Cannot listen",
            format!(
                "Could not listen on {}: {err}. Choose a free port (or port 0 for any), and an address of this machine.",
                args.listen
            ),
        )
    })?;
    let bound = listener.local_addr().map_err(|err| {
        Diagnostic::error(
            "Cannot listen",
            format!("The listening socket failed: {err}."),
        )
    })?;
    let metrics_listener = match args.metrics_listen {
        Some(address) => Some(TcpListener::bind(address).await.map_err(|err| {
            Diagnostic::error(
                "Cannot listen",
                format!(
                    "Could not listen on -metrics-listen={address}: {err}. Choose a free port, and an address of this machine."
                ),
            )
        })?),
        None => None,
    };
    let server = Arc::new(Server {
        mirror,
        allowed,
        tokens,
        log,
        metrics,
        metrics_tokens,
        metrics_on_main: metrics_listener.is_none(),
        access_log,
        readiness,
        drain_delay: args.drain_delay,
    });
    emit(&format!("Serving providers on https://{bound}/"));
    log.message(&format!("store: {}", store_dir.display()));
    let limits = ConnectionLimits {
        tls_handshake: args.tls_handshake_timeout,
        headers: args.header_timeout,
        idle: args.idle_timeout,
    };
    let metrics_task = metrics_listener.map(|listener| {
        if let Ok(address) = listener.local_addr() {
            log.message(&format!("Serving metrics on http://{address}/metrics"));
        }
        tokio::spawn(accept_metrics(listener, server.clone()))
    });
    let reopening = tokio::spawn(reopen_on_hangup(server.clone()));
    accept_until_stopped(listener, tls, limits, server.clone()).await;
    if let Some(task) = metrics_task {
        task.abort();
    }
    reopening.abort();
    drain_fills(&server.mirror).await;
    log.message("stopped");
    Ok(())
}

/// `-store=DIR`, else (also beside a shared OCI store) the plugin cache,
/// else `tfinstall/store` in the user's cache directory.
fn store_dir(
    args: &ServeArgs,
    store_is_dir: bool,
    cli_config: &cliconfig::CliConfig,
) -> Result<PathBuf, Diagnostic> {
    let given = args.store.as_ref().filter(|_| store_is_dir);
    if let Some(dir) = given.or(cli_config.plugin_cache_dir.as_ref()) {
        return Ok(dir.clone());
    }
    dirs::cache_dir()
        .map(|dir| dir.join("tfinstall").join("store"))
        .ok_or_else(|| {
            Diagnostic::error(
                "No store",
                "This machine has no user cache directory to keep packages in: pass -store=DIR.",
            )
        })
}

fn tls_acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, Diagnostic> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let bad = |what: &str, path: &Path, err: String| {
        Diagnostic::error(
            "Invalid TLS configuration",
            format!(
                "The {what} {} cannot be used: {err}. Pass a PEM certificate chain with -tls-cert and its PEM private key with -tls-key.",
                path.display()
            ),
        )
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|err| bad("certificate file", cert, err.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|err| bad("certificate file", cert, err.to_string()))?;
    if certs.is_empty() {
        return Err(bad(
            "certificate file",
            cert,
            "it holds no certificate".into(),
        ));
    }
    let key_der =
        PrivateKeyDer::from_pem_file(key).map_err(|err| bad("key file", key, err.to_string()))?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|err| bad("certificate file", cert, err.to_string()))?
    .with_no_client_auth()
    .with_single_cert(certs, key_der)
    .map_err(|err| bad("key file", key, err.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Accepts connections until SIGTERM or SIGINT, then waits (a while) for
/// the connections open to finish their requests.
async fn accept_until_stopped(
    listener: TcpListener,
    tls: TlsAcceptor,
    limits: ConnectionLimits,
    server: Arc<Server>,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let stop = async {
        stop_signal().await;
        server.readiness.drain();
        if !server.drain_delay.is_zero() {
            server.log.message(&format!(
                "draining: /readyz answers 503; no new connections in {}",
                crate::units::format_duration(server.drain_delay)
            ));
            tokio::time::sleep(server.drain_delay).await;
        }
    };
    tokio::pin!(stop);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(_) => continue,
            },
            () = &mut stop => break,
        };
        let _ = tcp.set_nodelay(true);
        let tls = tls.clone();
        let server = server.clone();
        let watcher = graceful.watcher();
        tokio::spawn(connection::serve(tcp, peer, tls, limits, watcher, server));
    }
    drop(listener);
    server
        .log
        .message("stopping: no new connections; finishing the requests in flight");
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await;
}

/// `-metrics-listen`: plain HTTP, answered until the server stops.
async fn accept_metrics(listener: TcpListener, server: Arc<Server>) {
    loop {
        let Ok((tcp, peer)) = listener.accept().await else {
            continue;
        };
        let server = server.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let server = server.clone();
                async move { Ok::<_, Infallible>(server.handle(request, peer, Listener::Metrics).await) }
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tcp), service)
                .await;
        });
    }
}

/// SIGHUP reopens the access log file, after logrotate moved it away.
#[cfg(unix)]
async fn reopen_on_hangup(server: Arc<Server>) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hangup) = signal(SignalKind::hangup()) else {
        return;
    };
    while hangup.recv().await.is_some() {
        if let Some(message) = server.access_log.reopen() {
            server.log.message(&message);
        }
    }
}

#[cfg(not(unix))]
async fn reopen_on_hangup(_server: Arc<Server>) {}

/// Fills run on tasks of their own; a stopping server lets them finish, so
/// the next start finds their entries whole rather than redoing them.
async fn drain_fills(mirror: &Mirror) {
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    while mirror.fills_in_flight() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(unix)]
async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = match signal(SignalKind::terminate()) {
        Ok(terminate) => terminate,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = terminate.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

#[cfg(not(unix))]
async fn stop_signal() {
    let _ = tokio::signal::ctrl_c().await;
}

impl Server {
    async fn handle(
        &self,
        request: Request<Incoming>,
        client: SocketAddr,
        listener: Listener,
    ) -> Response<Body> {
        let _in_flight = self.metrics.in_flight();
        let (time, started) = (SystemTime::now(), Instant::now());
        let ((response, logged), upstream) =
            access_log::recording_upstream(self.answer(&request, listener)).await;
        let status = response.status().as_u16();
        // A streamed archive says its length in its headers; hyper adds
        // that header to the other answers only as it sends them.
        let bytes = response
            .headers()
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .or_else(|| hyper::body::Body::size_hint(response.body()).exact())
            .unwrap_or(0);
        self.metrics.request(logged.route_name, status);
        if let Some(outcome) = logged.outcome {
            self.metrics.outcome(outcome);
        }
        let header = |name| {
            request
                .headers()
                .get(name)
                .and_then(|value: &HeaderValue| value.to_str().ok())
        };
        self.access_log.write(&AccessRecord {
            time,
            client,
            method: request.method().as_str(),
            path: request.uri().path(),
            protocol: &format!("{:?}", request.version()),
            status,
            bytes,
            duration: started.elapsed(),
            route: logged.route.as_ref(),
            outcome: logged.outcome,
            token: logged.token.as_deref(),
            upstream: upstream.as_deref(),
            referer: header(hyper::header::REFERER),
            user_agent: header(hyper::header::USER_AGENT),
            error: logged.error.as_deref(),
        });
        if request.method() == Method::HEAD {
            let (parts, _) = response.into_parts();
            return Response::from_parts(parts, empty());
        }
        response
    }

    /// `/healthz`, `/readyz` and `/metrics`, on either listener.
    async fn own_page(&self, request: &Request<Incoming>, route: &Route) -> Response<Body> {
        match route {
            Route::Ready => match self.readiness.check().await {
                Ok(()) => plain(StatusCode::OK, "ready\n"),
                Err(reason) => plain(StatusCode::SERVICE_UNAVAILABLE, &format!("{reason}\n")),
            },
            Route::Metrics => {
                let authorization = request.headers().get(hyper::header::AUTHORIZATION);
                if let Some(tokens) = &self.metrics_tokens
                    && !tokens.admits(authorization)
                {
                    return unauthorized("a bearer token of -metrics-token-file is required\n");
                }
                let mut response = Response::new(full(self.metrics.render().await));
                response.headers_mut().insert(
                    hyper::header::CONTENT_TYPE,
                    HeaderValue::from_static(metrics::CONTENT_TYPE),
                );
                response
            }
            _ => plain(StatusCode::OK, "ok\n"),
        }
    }

    async fn answer(
        &self,
        request: &Request<Incoming>,
        listener: Listener,
    ) -> (Response<Body>, Logged) {
        let mut logged = Logged::default();
        if request.method() != Method::GET && request.method() != Method::HEAD {
            let mut response = plain(
                StatusCode::METHOD_NOT_ALLOWED,
                "only GET and HEAD are served\n",
            );
            response
                .headers_mut()
                .insert(hyper::header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return (response, logged);
        }
        let route = route::route(request.uri().path())
            .filter(|route| listener == Listener::Main || route.provider().is_none());
        let Some(route) = route.filter(|route| {
            *route != Route::Metrics || self.metrics_on_main || listener == Listener::Metrics
        }) else {
            return (plain(StatusCode::NOT_FOUND, "not found\n"), logged);
        };
        logged.route_name = match &route {
            Route::Health => "healthz",
            Route::Ready => "readyz",
            Route::Metrics => "metrics",
            Route::Index(_) => "index",
            Route::Version(..) => "version",
            Route::Archive(..) => "archive",
        };
        let Some(provider) = route.provider() else {
            return (self.own_page(request, &route).await, logged);
        };
        if let Some(tokens) = &self.tokens {
            logged.token = tokens
                .admitted(request.headers().get(hyper::header::AUTHORIZATION))
                .map(str::to_owned);
            if logged.token.is_none()
                && !(matches!(route, Route::Archive(..))
                    && tokens.granted(request.uri().path(), request.uri().query()))
            {
                return (unauthorized("a bearer token is required\n"), logged);
            }
        }
        logged.route = Some(route.clone());
        if !self.allowed.allows(provider) {
            logged.outcome = Some(CacheOutcome::NotAllowed);
            return (
                plain(
                    StatusCode::FORBIDDEN,
                    &format!("{} is not served here\n", provider.for_display()),
                ),
                logged,
            );
        }
        let reply = match &route {
            Route::Index(provider) => self.mirror.index(provider).await,
            Route::Version(provider, version) => self.mirror.version(provider, version).await,
            Route::Archive(provider, version, platform) => {
                self.mirror.archive(provider, version, platform).await
            }
            Route::Health | Route::Ready | Route::Metrics => {
                unreachable!("the server's own pages name no provider")
            }
        };
        let response = match reply {
            Reply::Json(body, outcome) => {
                logged.outcome = Some(CacheOutcome::Answered(outcome));
                json(StatusCode::OK, body)
            }
            Reply::Archive(file, outcome) => {
                logged.outcome = Some(CacheOutcome::Answered(outcome));
                match stream_file(file).await {
                    Ok(response) => response,
                    Err(err) => {
                        logged.error = Some(format!("reading the archive: {err}"));
                        plain(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "the stored archive cannot be read\n",
                        )
                    }
                }
            }
            Reply::Denied(reason) => {
                logged.outcome = Some(CacheOutcome::DeniedByPolicy);
                logged.error = reason["reason"].as_str().map(str::to_owned);
                json(StatusCode::FORBIDDEN, reason.to_string())
            }
            Reply::Failed(status, message) => {
                logged.error = Some(message.clone());
                plain(
                    StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
                    &format!("{message}\n"),
                )
            }
        };
        (response, logged)
    }
}

/// What a request's log line says beyond the request itself.
struct Logged {
    /// The provider route, once the request was admitted.
    route: Option<Route>,
    /// The route's name in the metrics (`other` for none).
    route_name: &'static str,
    outcome: Option<CacheOutcome>,
    /// The name of the token that admitted the request.
    token: Option<String>,
    error: Option<String>,
}

impl Default for Logged {
    fn default() -> Self {
        Logged {
            route: None,
            route_name: "other",
            outcome: None,
            token: None,
            error: None,
        }
    }
}

/// Streams a stored archive: read a chunk at a time, so memory stays flat
/// however large the package and however many clients read it.
async fn stream_file(file: std::fs::File) -> std::io::Result<Response<Body>> {
    let file = tokio::fs::File::from_std(file);
    let length = file.metadata().await?.len();
    let chunks = futures_util::stream::try_unfold(file, |mut file| async move {
        use tokio::io::AsyncReadExt as _;
        let mut buffer = vec![0u8; 64 * 1024];
        let read = file.read(&mut buffer).await?;
        if read == 0 {
            return Ok(None);
        }
        buffer.truncate(read);
        Ok(Some((Frame::data(Bytes::from(buffer)), file)))
    });
    let mut response = Response::new(BodyExt::boxed(StreamBody::new(chunks.into_stream())));
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/zip"),
    );
    headers.insert(hyper::header::CONTENT_LENGTH, length.into());
    Ok(response)
}

fn full(body: String) -> Body {
    Full::new(Bytes::from(body))
        .map_err(|never: Infallible| match never {})
        .boxed()
}

fn empty() -> Body {
    full(String::new())
}

fn json(status: StatusCode, body: String) -> Response<Body> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn unauthorized(message: &str) -> Response<Body> {
    let mut response = plain(StatusCode::UNAUTHORIZED, message);
    response.headers_mut().insert(
        hyper::header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"tfinstall\""),
    );
    response
}

fn plain(status: StatusCode, message: &str) -> Response<Body> {
    let mut response = Response::new(full(message.to_owned()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// The server's log on stdout: a line per event, as text or (`-json`) one
/// JSON object a line. Requests go to the [`AccessLog`].
#[derive(Clone, Copy)]
struct RequestLog {
    json: bool,
}

impl RequestLog {
    fn message(&self, message: &str) {
        let line = if self.json {
            serde_json::json!({
                "@level": "info",
                "@message": message,
                "@timestamp": crate::output::json::timestamp(std::time::SystemTime::now()),
                "type": "log",
            })
            .to_string()
        } else {
            message.to_owned()
        };
        emit(&line);
    }
}

fn emit(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}
