//! A real HTTP(S) server on 127.0.0.1 for integration tests.
//!
//! It runs on its own thread with its own tokio runtime so plain `#[test]`
//! functions (and the binary under test, in another process) can use it.
//! Routes, the served directory and faults can all be changed while it runs,
//! which lets fixtures embed the server's URL (known only after binding) into
//! the files it then serves.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::future::Future as _;
use std::net::SocketAddr;
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, oneshot};
use tokio_rustls::TlsAcceptor;

use super::tls::TestCa;

/// Body bytes per frame; small enough that "stall after N bytes" is exact
/// and large bodies stream instead of going out in one write.
const CHUNK: usize = 16 * 1024;

/// How long a truncating response waits before failing; see `ServedBody`.
const ABORT_FLUSH_DELAY: Duration = Duration::from_millis(50);

/// A canned response for an exact path, or what a [`Fault`] answers with.
#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
}

impl Response {
    /// An empty response with `status`.
    pub fn new(status: u16) -> Self {
        Response {
            status,
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }

    /// A 200 `application/json` response.
    pub fn json(body: impl Into<String>) -> Self {
        Self::bytes("application/json", body.into())
    }

    /// A 200 `text/plain` response.
    pub fn text(body: impl Into<String>) -> Self {
        Self::bytes("text/plain; charset=utf-8", body.into())
    }

    /// A 200 response with an explicit content type.
    pub fn bytes(content_type: &str, body: impl Into<Bytes>) -> Self {
        Response::new(200)
            .header("content-type", content_type)
            .body(body)
    }

    pub fn status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }

    /// Adds a header; repeat the name to send it more than once.
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_ascii_lowercase(), value.into()));
        self
    }

    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    fn header_value(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(header, _)| header.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// What goes wrong for one request to a path.
#[derive(Clone, Debug)]
pub enum Fault {
    /// Serve normally; useful inside a sequence ("fail once, then work").
    Pass,
    /// Answer with this status and a short text body.
    Status(u16),
    /// Answer with this response instead of the real one.
    Respond(Response),
    /// Wait this long before sending the response headers, then serve normally.
    Latency(Duration),
    /// Send headers (with the full `Content-Length`) and this many body bytes,
    /// then hang until the client gives up.
    StallAfter(usize),
    /// Send headers (with the full `Content-Length`) and this many body bytes,
    /// then drop the connection (HTTP/2: reset the stream). The reset waits
    /// 50 ms so the bytes get out first; a client that reads slower than that
    /// over HTTP/2 may see fewer, so resume from what was actually received.
    TruncateAfter(usize),
    /// Send headers (with the full `Content-Length`) and this many body bytes,
    /// then reset the TCP connection (`SO_LINGER` 0, then close: an RST), as
    /// a crashing server or a middlebox does. Every request on the
    /// connection fails with it; the reset waits 50 ms, as
    /// [`Fault::TruncateAfter`] does, so the bytes get out first.
    ResetAfter(usize),
    /// Redirect with this 3xx status to `location` (absolute or relative).
    Redirect { status: u16, location: String },
    /// Serve normally but send the body at about this many bytes per second,
    /// like a slow link, so progress displays have something to show.
    Throttle(usize),
    /// Send the body `bytes` at a time with `every` between pieces: a
    /// server that keeps a download alive without ever getting far.
    Trickle { bytes: usize, every: Duration },
    /// Hold the response until a request for `path` has arrived (or
    /// `at_most` has passed, so that a client that never asks cannot hang
    /// the test), then serve normally: a gate that shows, by the order of
    /// the log, whether the client asked for `path` while this was pending.
    AwaitRequest { path: String, at_most: Duration },
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct LoggedRequest {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    /// `"HTTP/1.1"` or `"HTTP/2.0"`.
    pub version: String,
    /// Names are lower-case, in arrival order, repeats kept.
    pub headers: Vec<(String, String)>,
    /// Paths of the requests still waiting for their response headers when
    /// this one arrived. With [`Fault::Latency`] holding the requests of
    /// interest, a non-empty list proves the client sent them concurrently,
    /// without any assertion on time.
    pub overlapping: Vec<String>,
}

impl LoggedRequest {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(header, _)| header.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    fn from_request(request: &hyper::Request<Incoming>, overlapping: Vec<String>) -> Self {
        LoggedRequest {
            overlapping,
            method: request.method().to_string(),
            path: request.uri().path().to_owned(),
            query: request.uri().query().map(str::to_owned),
            version: format!("{:?}", request.version()),
            headers: request
                .headers()
                .iter()
                .map(|(name, value)| {
                    (
                        name.as_str().to_owned(),
                        String::from_utf8_lossy(value.as_bytes()).into_owned(),
                    )
                })
                .collect(),
        }
    }
}

/// A CGI program (RFC 3875) answering every path below `prefix`: it gets
/// the rest of the path as `PATH_INFO`, the request's headers as `HTTP_*`
/// variables and its body on standard input, and its output is the
/// response. What `git http-backend` needs to serve repositories.
#[derive(Clone, Debug)]
pub struct CgiMount {
    /// Starts and ends with `/`.
    pub prefix: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Variables set for every request, beside the CGI ones.
    pub env: Vec<(String, String)>,
    /// Request headers also passed under a name of their own, as a web
    /// server's `SetEnvIf` would (git wants `Git-Protocol` as `GIT_PROTOCOL`).
    pub header_env: Vec<(String, String)>,
}

struct Guard {
    suffix: String,
    authorization: String,
    /// The `WWW-Authenticate` challenge of the 401.
    challenge: &'static str,
}

enum FaultPlan {
    Always(Fault),
    Sequence(VecDeque<Fault>),
}

#[derive(Default)]
struct State {
    routes: HashMap<String, Response>,
    root: Option<PathBuf>,
    faults: HashMap<String, FaultPlan>,
    ranges: bool,
    /// Paths ending in a guard's suffix answer 401 unless the request's
    /// `Authorization` is exactly the guard's.
    guards: Vec<Guard>,
    link: Option<Arc<Link>>,
    /// Programs answering every path below a prefix, as CGI scripts.
    cgi: Vec<CgiMount>,
    /// Response body bytes handed out, over every path.
    bytes_served: u64,
    log: Vec<LoggedRequest>,
    /// Requests whose handler has not produced response headers yet, by id.
    in_flight: Vec<(u64, String)>,
    next_id: u64,
    /// Body bytes handed to the connection, every response's.
    bytes_sent: Arc<AtomicU64>,
    /// TCP connections accepted.
    connections: usize,
}

impl State {
    /// The fault for this request: the path's own plan, else the `"*"` plan.
    fn next_fault(&mut self, path: &str) -> Fault {
        let key = if self.faults.contains_key(path) {
            path
        } else {
            "*"
        };
        match self.faults.get_mut(key) {
            Some(FaultPlan::Always(fault)) => fault.clone(),
            Some(FaultPlan::Sequence(queue)) => queue.pop_front().unwrap_or(Fault::Pass),
            None => Fault::Pass,
        }
    }
}

pub struct TestServer {
    addr: SocketAddr,
    scheme: &'static str,
    state: Arc<Mutex<State>>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl TestServer {
    /// HTTPS with the CA's leaf certificate, offering HTTP/2 and HTTP/1.1 by ALPN.
    pub fn https(ca: &TestCa) -> Self {
        let config = ca.server_config(&[b"h2", b"http/1.1"]);
        Self::start(Some(TlsAcceptor::from(Arc::new(config))), false)
    }

    /// HTTPS that speaks only HTTP/1.1, to cover clients on the older protocol.
    pub fn https_http1_only(ca: &TestCa) -> Self {
        let config = ca.server_config(&[b"http/1.1"]);
        Self::start(Some(TlsAcceptor::from(Arc::new(config))), true)
    }

    /// Plain HTTP, for checking that `http://` URLs are refused.
    pub fn http() -> Self {
        Self::start(None, false)
    }

    fn start(tls: Option<TlsAcceptor>, http1_only: bool) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("listener address");
        let scheme = if tls.is_some() { "https" } else { "http" };
        let state = Arc::new(Mutex::new(State::default()));
        let (shutdown, shutdown_signal) = oneshot::channel();
        let thread_state = Arc::clone(&state);
        let thread = std::thread::Builder::new()
            .name(format!("test-server-{}", addr.port()))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("test server runtime");
                runtime.block_on(accept_loop(
                    listener,
                    tls,
                    http1_only,
                    thread_state,
                    shutdown_signal,
                ));
                // Dropping the runtime here cancels every connection task,
                // including ones parked in a stalled body.
            })
            .expect("spawn test server thread");
        TestServer {
            addr,
            scheme,
            state,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    /// The origin with a trailing slash, e.g. `https://127.0.0.1:40123/`,
    /// ready to be a mirror base URL or a fixture's `base_url`.
    pub fn url(&self) -> String {
        format!("{}://{}/", self.scheme, self.host())
    }

    /// The absolute URL of `path` (which starts with `/`) on this server.
    pub fn url_for(&self, path: &str) -> String {
        format!("{}://{}{}", self.scheme, self.host(), path)
    }

    /// `127.0.0.1:PORT`: the host part of URLs and of provider addresses.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// `localhost:PORT`, the same server under a DNS name (also in the cert).
    pub fn localhost_host(&self) -> String {
        format!("localhost:{}", self.addr.port())
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Serves files below `root` for paths with no exact route; the
    /// directory is read at request time, so it may be filled in later.
    pub fn serve_dir(&self, root: &Path) {
        self.state().root = Some(root.to_path_buf());
    }

    /// Sends every response body through one link of `bytes_per_second`
    /// shared by all connections, as a real network bottleneck is: unlike
    /// [`Fault::Throttle`] (one pace per response), concurrent downloads
    /// split the bandwidth instead of each getting all of it.
    pub fn limit_bandwidth(&self, bytes_per_second: usize) {
        self.state().link = Some(Arc::new(Link {
            seconds_per_byte: 1.0 / bytes_per_second.max(1) as f64,
            free_at: Mutex::new(Instant::now()),
        }));
    }

    /// Answers requests for exactly `path` (query ignored, any method).
    pub fn route(&self, path: &str, response: Response) {
        self.state().routes.insert(path.to_owned(), response);
    }

    /// Applies `fault` to every request for `path` (`"*"`: any path without
    /// a fault of its own).
    pub fn fault(&self, path: &str, fault: Fault) {
        self.state()
            .faults
            .insert(path.to_owned(), FaultPlan::Always(fault));
    }

    /// Applies the faults to successive requests for `path`, one each;
    /// later requests are served normally.
    pub fn fault_sequence(&self, path: &str, faults: impl IntoIterator<Item = Fault>) {
        self.state().faults.insert(
            path.to_owned(),
            FaultPlan::Sequence(faults.into_iter().collect()),
        );
    }

    /// Successive requests for `path` get these statuses; `200` means "serve
    /// normally", e.g. `&[500, 200]`.
    pub fn status_sequence(&self, path: &str, statuses: &[u16]) {
        self.fault_sequence(
            path,
            statuses.iter().map(|&status| match status {
                200 => Fault::Pass,
                other => Fault::Status(other),
            }),
        );
    }

    /// Answers 401 to requests for paths ending in `suffix` (e.g. `.json`)
    /// unless they carry `Authorization: Bearer TOKEN`, as a private mirror
    /// or registry does; other paths stay open.
    pub fn require_bearer(&self, suffix: &str, token: &str) {
        self.state().guards.push(Guard {
            suffix: suffix.to_owned(),
            authorization: format!("Bearer {token}"),
            challenge: "Bearer",
        });
    }

    /// Answers 401 to requests for paths ending in `suffix` (`""`: every
    /// path) unless they carry HTTP Basic credentials `login:password`, as
    /// an nginx with `auth_basic` or an Artifactory does.
    pub fn require_basic(&self, suffix: &str, login: &str, password: &str) {
        self.state().guards.push(Guard {
            suffix: suffix.to_owned(),
            authorization: super::basic_auth(login, password),
            challenge: "Basic realm=\"mirror\"",
        });
    }

    /// Runs `mount.program` as a CGI script for every path below its prefix.
    pub fn mount_cgi(&self, mount: CgiMount) {
        assert!(mount.prefix.starts_with('/') && mount.prefix.ends_with('/'));
        self.state().cgi.push(mount);
    }

    /// Response body bytes sent so far (whole bodies, as the handlers made
    /// them), over every path: what a fetch cost the server.
    pub fn bytes_served(&self) -> u64 {
        self.state().bytes_served
    }

    pub fn clear_faults(&self) {
        self.state().faults.clear();
    }

    /// Honours single `Range: bytes=…` requests with 206 (or 416) on every
    /// 200 response; off by default, like servers without range support.
    pub fn enable_ranges(&self) {
        self.state().ranges = true;
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.state().log.clone()
    }

    /// The requests for exactly `path`.
    pub fn requests_to(&self, path: &str) -> Vec<LoggedRequest> {
        self.state()
            .log
            .iter()
            .filter(|request| request.path == path)
            .cloned()
            .collect()
    }

    /// How many requests arrived for exactly `path`.
    pub fn count(&self, path: &str) -> usize {
        self.state()
            .log
            .iter()
            .filter(|request| request.path == path)
            .count()
    }

    /// The body bytes of every response so far, as handed to the
    /// connection (a cut body counts up to its cut), for comparing with
    /// what a client says it received.
    pub fn bytes_sent(&self) -> u64 {
        self.state().bytes_sent.load(Ordering::Relaxed)
    }

    /// How many TCP connections clients opened so far.
    pub fn connections(&self) -> usize {
        self.state().connections
    }

    pub fn clear_log(&self) {
        self.state().log.clear();
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("test server state")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(
    listener: std::net::TcpListener,
    tls: Option<TlsAcceptor>,
    http1_only: bool,
    state: Arc<Mutex<State>>,
    mut shutdown: oneshot::Receiver<()>,
) {
    let listener = TcpListener::from_std(listener).expect("register listener with tokio");
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    state.lock().expect("test server state").connections += 1;
                    // As Go's net/http (every real registry here) and nginx
                    // do: with Nagle's algorithm on, a response's last small
                    // segment waited for the client's delayed ACK, 40 ms.
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(serve_connection(stream, tls.clone(), http1_only, Arc::clone(&state)));
                }
            }
        }
    }
}

async fn serve_connection(
    stream: TcpStream,
    tls: Option<TlsAcceptor>,
    http1_only: bool,
    state: Arc<Mutex<State>>,
) {
    // A second descriptor of the socket, to reset it by: the connection's
    // own is buried in the TLS and HTTP layers.
    let socket = stream
        .as_fd()
        .try_clone_to_owned()
        .map(std::net::TcpStream::from);
    let reset = Arc::new(Notify::new());
    let service = {
        let reset = Arc::clone(&reset);
        service_fn(move |request| handle(request, Arc::clone(&state), Arc::clone(&reset)))
    };
    let mut builder = auto::Builder::new(TokioExecutor::new());
    if http1_only {
        builder = builder.http1_only();
    }
    // Connection errors are what fault injection provokes; nothing to report.
    let serving = async {
        match tls {
            Some(acceptor) => {
                if let Ok(stream) = acceptor.accept(stream).await {
                    let _ = builder
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                }
            }
            None => {
                let _ = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            }
        }
    };
    tokio::select! {
        () = serving => {}
        () = reset.notified() => {
            // With a zero linger the last close of the socket (this
            // descriptor's, or the connection's as it is dropped on return)
            // sends an RST instead of a FIN.
            if let Ok(socket) = socket.and_then(TcpStream::from_std) {
                let _ = socket.set_zero_linger();
            }
        }
    }
}

/// Ends a request's in-flight entry however its handler finishes, including
/// when the client goes away during injected latency.
struct InFlight {
    state: Arc<Mutex<State>>,
    id: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.in_flight.retain(|(id, _)| *id != self.id);
    }
}

/// [`respond`], with the response's body counted in [`TestServer::bytes_sent`].
async fn handle(
    request: hyper::Request<Incoming>,
    state: Arc<Mutex<State>>,
    reset: Arc<Notify>,
) -> Result<hyper::Response<ServedBody>, Infallible> {
    let counter = Arc::clone(&state.lock().expect("test server state").bytes_sent);
    let mut served = respond(request, state, reset).await?;
    served.body_mut().counted = Some(counter);
    Ok(served)
}

async fn respond(
    request: hyper::Request<Incoming>,
    state: Arc<Mutex<State>>,
    reset: Arc<Notify>,
) -> Result<hyper::Response<ServedBody>, Infallible> {
    let path = request.uri().path().to_owned();
    let head_only = request.method() == hyper::Method::HEAD;
    let (fault, ranges, route, root, link, cgi, _in_flight) = {
        let mut guard = state.lock().expect("test server state");
        let current = &mut *guard;
        let overlapping = current.in_flight.iter().map(|(_, p)| p.clone()).collect();
        current
            .log
            .push(LoggedRequest::from_request(&request, overlapping));
        let authorization = request
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok());
        let refused = current.guards.iter().find(|guard| {
            path.ends_with(guard.suffix.as_str())
                && authorization != Some(guard.authorization.as_str())
        });
        if let Some(guard) = refused {
            let response = Response::text("unauthorized\n")
                .status(401)
                .header("www-authenticate", guard.challenge);
            return Ok(finish(response, None, head_only));
        }
        let id = current.next_id;
        current.next_id += 1;
        current.in_flight.push((id, path.clone()));
        let fault = current.next_fault(&path);
        (
            fault,
            current.ranges,
            current.routes.get(&path).cloned(),
            current.root.clone(),
            current.link.clone(),
            current
                .cgi
                .iter()
                .find(|mount| path.starts_with(&mount.prefix))
                .cloned(),
            InFlight {
                state: Arc::clone(&state),
                id,
            },
        )
    };

    let range = request
        .headers()
        .get(hyper::header::RANGE)
        .map(|range| range.to_str().unwrap_or("").to_owned());
    let mut cut = None;
    let mut pace = None;
    let mut chunk = CHUNK;
    match fault {
        Fault::Pass => {}
        Fault::Status(status) => {
            let response = Response::text(format!("injected status {status}\n")).status(status);
            return Ok(finish(response, None, head_only));
        }
        Fault::Respond(response) => return Ok(finish(response, None, head_only)),
        Fault::Latency(delay) => tokio::time::sleep(delay).await,
        Fault::AwaitRequest { path, at_most } => {
            let deadline = tokio::time::Instant::now() + at_most;
            while tokio::time::Instant::now() < deadline
                && !state
                    .lock()
                    .expect("test server state")
                    .log
                    .iter()
                    .any(|logged| logged.path == path)
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        Fault::StallAfter(at) => {
            cut = Some(Cut {
                at,
                ending: Ending::Stall,
            })
        }
        Fault::TruncateAfter(at) => {
            cut = Some(Cut {
                at,
                ending: Ending::Abort,
            })
        }
        Fault::ResetAfter(at) => {
            cut = Some(Cut {
                at,
                ending: Ending::Reset(reset),
            })
        }
        Fault::Redirect { status, location } => {
            let response = Response::new(status).header("location", location);
            return Ok(finish(response, None, head_only));
        }
        Fault::Throttle(bytes_per_second) => {
            pace = Some(Duration::from_secs_f64(
                CHUNK as f64 / bytes_per_second.max(1) as f64,
            ))
        }
        Fault::Trickle { bytes, every } => {
            pace = Some(every);
            chunk = bytes.max(1);
        }
    }

    let mut response = match cgi {
        Some(mount) => run_cgi(&mount, request).await,
        None => route
            .or_else(|| root.and_then(|root| file_response(&root, &path)))
            .unwrap_or_else(|| Response::text("not found\n").status(404)),
    };
    if !head_only {
        state.lock().expect("test server state").bytes_served += response.body.len() as u64;
    }
    if ranges && response.status == 200 {
        response = response.header("accept-ranges", "bytes");
        if let Some(range) = &range {
            response = apply_range(response, range);
        }
    }
    let mut served = finish(response, cut, head_only);
    served.body_mut().pace = pace;
    served.body_mut().chunk = chunk;
    served.body_mut().link = link;
    Ok(served)
}

/// Runs a CGI program for one request. Bodies are small here (test
/// repositories), so the request and the answer are read whole.
async fn run_cgi(mount: &CgiMount, request: hyper::Request<Incoming>) -> Response {
    use http_body_util::BodyExt as _;
    use tokio::io::AsyncWriteExt as _;
    let (parts, body) = request.into_parts();
    let Ok(body) = body.collect().await.map(|body| body.to_bytes()) else {
        return Response::text("request body cut short\n").status(400);
    };
    let path = parts.uri.path();
    let path_info = &path[mount.prefix.len() - 1..];
    let mut command = tokio::process::Command::new(&mount.program);
    command
        .args(&mount.args)
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("SERVER_PROTOCOL", format!("{:?}", parts.version))
        .env("SERVER_SOFTWARE", "tfinstall-test-server")
        .env("REQUEST_METHOD", parts.method.as_str())
        .env("PATH_INFO", percent_decode(path_info).unwrap_or_default())
        .env("QUERY_STRING", parts.uri.query().unwrap_or(""))
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("CONTENT_LENGTH", body.len().to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (name, value) in &parts.headers {
        let Ok(value) = value.to_str() else { continue };
        if name == hyper::header::CONTENT_TYPE {
            command.env("CONTENT_TYPE", value);
        }
        let variable = format!(
            "HTTP_{}",
            name.as_str().to_ascii_uppercase().replace('-', "_")
        );
        command.env(variable, value);
        for (header, variable) in &mount.header_env {
            if name.as_str().eq_ignore_ascii_case(header) {
                command.env(variable, value);
            }
        }
    }
    for (name, value) in &mount.env {
        command.env(name, value);
    }
    let Ok(mut child) = command.spawn() else {
        return Response::text("cannot start the CGI program\n").status(500);
    };
    let mut stdin = child.stdin.take().expect("piped stdin");
    // Written beside the read of the output, which a large answer needs.
    let writing = async move {
        let _ = stdin.write_all(&body).await;
    };
    let (_, output) = tokio::join!(writing, child.wait_with_output());
    let Ok(output) = output else {
        return Response::text("the CGI program failed\n").status(500);
    };
    parse_cgi_output(&output.stdout).unwrap_or_else(|| {
        Response::text(format!(
            "bad CGI output; stderr: {}\n",
            String::from_utf8_lossy(&output.stderr)
        ))
        .status(500)
    })
}

/// A CGI program's output: header lines (`Status:` among them), a blank
/// line, the body.
fn parse_cgi_output(output: &[u8]) -> Option<Response> {
    let (head_len, body_start) = [&b"\r\n\r\n"[..], b"\n\n"]
        .iter()
        .filter_map(|end| {
            output
                .windows(end.len())
                .position(|window| window == *end)
                .map(|at| (at, at + end.len()))
        })
        .min()?;
    let head = std::str::from_utf8(&output[..head_len]).ok()?;
    let mut response = Response::new(200).body(Bytes::copy_from_slice(&output[body_start..]));
    for line in head.lines() {
        let (name, value) = line.split_once(':')?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            response.status = value.split(' ').next()?.parse().ok()?;
        } else {
            response = response.header(name.trim(), value);
        }
    }
    Some(response)
}

fn finish(response: Response, cut: Option<Cut>, head_only: bool) -> hyper::Response<ServedBody> {
    let mut builder = hyper::Response::builder().status(response.status);
    for (name, value) in &response.headers {
        builder = builder.header(name, value);
    }
    // Always explicit so truncation and stalls are visible as a short body.
    if response.header_value("content-length").is_none() {
        builder = builder.header("content-length", response.body.len());
    }
    let body = if head_only {
        Bytes::new()
    } else {
        response.body
    };
    builder
        .body(ServedBody::new(body, cut))
        .expect("fixture responses have valid status and headers")
}

/// Applies a single `bytes=` range per RFC 9110; anything else is ignored
/// and the full body served, as real servers do.
fn apply_range(response: Response, range: &str) -> Response {
    let len = response.body.len();
    let Some(spec) = range.trim().strip_prefix("bytes=") else {
        return response;
    };
    if spec.contains(',') {
        return response;
    }
    let Some((start, end)) = spec.split_once('-') else {
        return response;
    };
    let (start, end) = match (start.trim(), end.trim()) {
        ("", suffix) => match suffix.parse::<usize>() {
            Ok(suffix) if suffix > 0 => (len.saturating_sub(suffix), len.saturating_sub(1)),
            _ => return response,
        },
        (start, "") => match start.parse::<usize>() {
            Ok(start) => (start, len.saturating_sub(1)),
            Err(_) => return response,
        },
        (start, end) => match (start.parse::<usize>(), end.parse::<usize>()) {
            (Ok(start), Ok(end)) if start <= end => (start, end.min(len.saturating_sub(1))),
            _ => return response,
        },
    };
    if start >= len {
        return Response::new(416)
            .header("content-range", format!("bytes */{len}"))
            .header("accept-ranges", "bytes");
    }
    let body = response.body.slice(start..=end);
    let mut partial = Response::new(206).body(body);
    partial.headers = response
        .headers
        .into_iter()
        .filter(|(name, _)| name != "content-length")
        .collect();
    partial.header("content-range", format!("bytes {start}-{end}/{len}"))
}

/// A file below `root` for a URL path, or `None` if there is none or the
/// path tries to leave `root`.
fn file_response(root: &Path, url_path: &str) -> Option<Response> {
    let decoded = percent_decode(url_path)?;
    let mut path = root.to_path_buf();
    for segment in decoded.split('/').filter(|segment| !segment.is_empty()) {
        if segment == "." || segment == ".." || segment.contains(['\\', '\0']) {
            return None;
        }
        path.push(segment);
    }
    if !path.is_file() {
        return None;
    }
    let body = std::fs::read(&path).ok()?;
    Some(Response::bytes(content_type_for(&path, &body), body))
}

/// Content types a static web host would send. Registry endpoints such as
/// `…/versions` have no extension, so JSON is recognised by content too.
fn content_type_for(path: &Path, body: &[u8]) -> &'static str {
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy())
        .unwrap_or_default();
    match path.extension().and_then(|extension| extension.to_str()) {
        Some("json") => "application/json",
        Some("zip") => "application/zip",
        Some("sig") => "application/pgp-signature",
        _ if name.ends_with("SHA256SUMS") => "text/plain; charset=utf-8",
        _ if body.first() == Some(&b'{')
            && serde_json::from_slice::<serde_json::Value>(body).is_ok() =>
        {
            "application/json"
        }
        _ => "application/octet-stream",
    }
}

fn percent_decode(path: &str) -> Option<String> {
    let bytes = path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = path.get(index + 1..index + 3)?;
            decoded.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            decoded.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(decoded).ok()
}

#[derive(Clone, Debug)]
enum Ending {
    Stall,
    Abort,
    /// Reset the whole connection, by waking its task.
    Reset(Arc<Notify>),
}

#[derive(Clone, Debug)]
struct Cut {
    at: usize,
    ending: Ending,
}

/// A response body that can stop early, either hanging or failing, after
/// the headers promised the full length.
pub struct ServedBody {
    data: Bytes,
    sent: usize,
    cut: Option<Cut>,
    /// Delays the injected failure so the bytes before it reach the client:
    /// HTTP/2 discards a stream's queued frames when it is reset.
    abort_delay: Option<Pin<Box<tokio::time::Sleep>>>,
    /// With [`Fault::Throttle`]: the pause after each chunk, and the pause
    /// being waited out.
    pace: Option<Duration>,
    pause: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Bytes per frame: [`CHUNK`], or less with [`Fault::Trickle`].
    chunk: usize,
    /// With [`TestServer::limit_bandwidth`]: the link each chunk waits for,
    /// and whether the next chunk has booked its slot already.
    link: Option<Arc<Link>>,
    booked: bool,
    /// The server's count of body bytes sent.
    counted: Option<Arc<AtomicU64>>,
}

/// A link every response body shares: each chunk books the next free slot
/// of transmission time and is sent when that slot ends.
struct Link {
    seconds_per_byte: f64,
    free_at: Mutex<Instant>,
}

/// Timers fire in whole milliseconds, far coarser than one chunk's slot on
/// a fast link (16 KiB at 100 MB/s is 0.16 ms): chunks go out at once until
/// the link is booked this far ahead, and then wait.
const LINK_TIMER_SLACK: Duration = Duration::from_millis(2);

/// Time lost to a timer that fired late is made up for, up to this much, so
/// the average rate is the configured one.
const LINK_CATCH_UP: Duration = Duration::from_millis(20);

impl Link {
    /// Books a chunk of `len` bytes; when it may be sent, if not at once.
    fn book(&self, len: usize) -> Option<Instant> {
        let now = Instant::now();
        let mut free_at = self.free_at.lock().unwrap_or_else(|e| e.into_inner());
        let start = (*free_at).max(now.checked_sub(LINK_CATCH_UP).unwrap_or(now));
        *free_at = start + Duration::from_secs_f64(len as f64 * self.seconds_per_byte);
        (*free_at > now + LINK_TIMER_SLACK).then_some(*free_at)
    }
}

impl ServedBody {
    fn new(data: Bytes, cut: Option<Cut>) -> Self {
        ServedBody {
            data,
            sent: 0,
            cut,
            abort_delay: None,
            pace: None,
            pause: None,
            chunk: CHUNK,
            link: None,
            booked: false,
            counted: None,
        }
    }
}

impl Body for ServedBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        if let Some(pause) = self.pause.as_mut() {
            if pause.as_mut().poll(context).is_pending() {
                return Poll::Pending;
            }
            self.pause = None;
        }
        let len = self.data.len();
        let stop = self.cut.as_ref().map_or(len, |cut| cut.at.min(len));
        if self.sent < stop {
            let start = self.sent;
            let end = (start + self.chunk).min(stop);
            if let Some(link) = &self.link
                && !self.booked
            {
                // The chunk goes out once its time on the link has passed.
                let through = link.book(end - start);
                self.booked = true;
                if let Some(through) = through {
                    let mut wait = Box::pin(tokio::time::sleep_until(through.into()));
                    if wait.as_mut().poll(context).is_pending() {
                        self.pause = Some(wait);
                        return Poll::Pending;
                    }
                }
            }
            self.booked = false;
            self.sent = end;
            if let Some(counted) = &self.counted {
                counted.fetch_add((end - start) as u64, Ordering::Relaxed);
            }
            if let Some(pace) = self.pace {
                self.pause = Some(Box::pin(tokio::time::sleep(pace)));
            }
            return Poll::Ready(Some(Ok(Frame::data(self.data.slice(start..end)))));
        }
        let ending = match &self.cut {
            Some(cut) if cut.at < len => cut.ending.clone(),
            _ => return Poll::Ready(None),
        };
        match ending {
            // Never woken: the connection hangs until the client or the
            // server's shutdown drops it.
            Ending::Stall => Poll::Pending,
            Ending::Abort | Ending::Reset(_) => {
                let delay = self
                    .abort_delay
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(ABORT_FLUSH_DELAY)));
                if delay.as_mut().poll(context).is_pending() {
                    return Poll::Pending;
                }
                match ending {
                    // The connection's task drops the body with the socket.
                    Ending::Reset(reset) => {
                        reset.notify_one();
                        Poll::Pending
                    }
                    _ => Poll::Ready(Some(Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionAborted,
                        "injected truncation",
                    )))),
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.cut.is_none() && self.sent >= self.data.len()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact((self.data.len() - self.sent) as u64)
    }
}
