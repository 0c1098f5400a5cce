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
//! verifies it ([`mirror`]).

pub mod access;
pub mod mirror;
pub mod route;

use std::convert::Infallible;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
use crate::cli::ServeArgs;
use crate::cliconfig::{self, CliEnv};
use crate::diag::{Diagnostic, Diagnostics};
use crate::fetch::{DownloadSettings, Downloader};
use crate::install::installer::CacheUse;
use crate::output::Output;
use crate::policy::Policy;
use crate::source::configured::{NetworkSources, SourceOptions, build_source};
use crate::source::oci::template::RepositoryTemplate;
use access::{AccessTokens, AllowedProviders};
use mirror::{Mirror, MirrorOptions, Outcome, Reply, SharedStore};
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
    let network = NetworkSources::new(&cli_config, &env, client.clone());
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
    let server = Arc::new(Server {
        mirror,
        allowed,
        tokens,
        log,
    });
    emit(&format!("Serving providers on https://{bound}/"));
    log.message(&format!("store: {}", store_dir.display()));
    accept_until_stopped(listener, tls, server.clone()).await;
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
async fn accept_until_stopped(listener: TcpListener, tls: TlsAcceptor, server: Arc<Server>) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let stop = stop_signal();
    tokio::pin!(stop);
    loop {
        let (tcp, _) = tokio::select! {
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
        tokio::spawn(async move {
            let Ok(stream) = tls.accept(tcp).await else {
                return;
            };
            let service = service_fn(move |request| {
                let server = server.clone();
                async move { Ok::<_, Infallible>(server.handle(request).await) }
            });
            let builder = auto::Builder::new(TokioExecutor::new());
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            let _ = watcher.watch(connection.into_owned()).await;
        });
    }
    drop(listener);
    server
        .log
        .message("stopping: no new connections; finishing the requests in flight");
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await;
}

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
    async fn handle(&self, request: Request<Incoming>) -> Response<Body> {
        let started = Instant::now();
        let method = request.method().clone();
        let path = request.uri().path().to_owned();
        let (response, logged) = self.answer(&request).await;
        let bytes = response
            .headers()
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        self.log.request(&RequestRecord {
            method: method.as_str(),
            path: &path,
            status: response.status().as_u16(),
            route: logged.route.as_ref(),
            outcome: logged.outcome,
            bytes,
            ms: started.elapsed().as_millis(),
            error: logged.error.as_deref(),
        });
        if method == Method::HEAD {
            let (parts, _) = response.into_parts();
            return Response::from_parts(parts, empty());
        }
        response
    }

    async fn answer(&self, request: &Request<Incoming>) -> (Response<Body>, Logged) {
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
        let Some(route) = route::route(request.uri().path()) else {
            return (plain(StatusCode::NOT_FOUND, "not found\n"), logged);
        };
        if route == Route::Health {
            return (plain(StatusCode::OK, "ok\n"), logged);
        }
        if let Some(tokens) = &self.tokens
            && !tokens.admits(request.headers().get(hyper::header::AUTHORIZATION))
            && !(matches!(route, Route::Archive(..))
                && tokens.granted(request.uri().path(), request.uri().query()))
        {
            let mut response = plain(StatusCode::UNAUTHORIZED, "a bearer token is required\n");
            response.headers_mut().insert(
                hyper::header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"tfinstall\""),
            );
            return (response, logged);
        }
        let provider = route
            .provider()
            .expect("only the health check, answered above, names no provider");
        logged.route = Some(route.clone());
        if !self.allowed.allows(provider) {
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
            Route::Health => unreachable!("answered above"),
        };
        let response = match reply {
            Reply::Json(body, outcome) => {
                logged.outcome = Some(outcome);
                json(StatusCode::OK, body)
            }
            Reply::Archive(file, outcome) => {
                logged.outcome = Some(outcome);
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
#[derive(Default)]
struct Logged {
    route: Option<Route>,
    outcome: Option<Outcome>,
    error: Option<String>,
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

fn plain(status: StatusCode, message: &str) -> Response<Body> {
    let mut response = Response::new(full(message.to_owned()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// One request, as the log records it.
struct RequestRecord<'a> {
    method: &'a str,
    path: &'a str,
    status: u16,
    route: Option<&'a Route>,
    outcome: Option<Outcome>,
    bytes: u64,
    ms: u128,
    error: Option<&'a str>,
}

/// The server's log on stdout: a line per request and per event, as text
/// or (`-json`) one JSON object a line.
#[derive(Clone, Copy)]
struct RequestLog {
    json: bool,
}

impl RequestLog {
    fn request(&self, record: &RequestRecord<'_>) {
        let (provider, version, platform) = match record.route {
            Some(Route::Index(p)) => (Some(p.to_string()), None, None),
            Some(Route::Version(p, v)) => (Some(p.to_string()), Some(v.to_string()), None),
            Some(Route::Archive(p, v, plat)) => (
                Some(p.to_string()),
                Some(v.to_string()),
                Some(plat.to_string()),
            ),
            _ => (None, None, None),
        };
        let cache = record.outcome.map(Outcome::as_str);
        let line = if self.json {
            let mut event = serde_json::json!({
                "@level": if record.status >= 500 { "error" } else { "info" },
                "@message": format!("{} {} {}", record.method, record.path, record.status),
                "@timestamp": crate::output::json::timestamp(std::time::SystemTime::now()),
                "type": "request",
                "method": record.method,
                "path": record.path,
                "status": record.status,
                "bytes": record.bytes,
                "ms": record.ms,
            });
            for (key, value) in [
                ("provider", provider),
                ("version", version),
                ("platform", platform),
                ("cache", cache.map(str::to_owned)),
                ("error", record.error.map(str::to_owned)),
            ] {
                if let Some(value) = value {
                    event[key] = value.into();
                }
            }
            event.to_string()
        } else {
            let mut line = format!(
                "{} {} {} {} bytes {} ms",
                record.method, record.path, record.status, record.bytes, record.ms
            );
            if let Some(cache) = cache {
                line.push_str(&format!(" ({cache})"));
            }
            if let Some(error) = record.error {
                line.push_str(&format!(": {error}"));
            }
            line
        };
        emit(&line);
    }

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
