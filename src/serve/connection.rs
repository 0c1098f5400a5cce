//! One client connection, bounded in time where the client could stall it:
//! a server facing a network must not let a slow or silent peer hold a
//! descriptor for ever. The TLS handshake has `-tls-handshake-timeout`, an
//! HTTP/1.1 request's headers `-header-timeout` (hyper's own timer, which
//! runs from when the connection is ready for the next request, so it also
//! ends an idle HTTP/1.1 keep-alive), and a connection with no request in
//! flight, HTTP/1.1 or HTTP/2, is closed once it has been so for
//! `-idle-timeout`: hyper has no such limit for HTTP/2, whose requests
//! share a connection. A request in flight is never cut short by these: a
//! client waiting on a fill from a slow upstream is not idle.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::Watcher;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use super::{Body, Listener, Server};

/// `-tls-handshake-timeout`, `-header-timeout`, `-idle-timeout`.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    pub tls_handshake: Duration,
    pub headers: Duration,
    pub idle: Duration,
}

/// Serves one accepted connection until the client closes it, a limit
/// closes it, or a graceful shutdown has let its requests finish.
pub(super) async fn serve(
    tcp: TcpStream,
    peer: SocketAddr,
    tls: TlsAcceptor,
    limits: ConnectionLimits,
    watcher: Watcher,
    server: Arc<Server>,
) {
    let Ok(Ok(stream)) = tokio::time::timeout(limits.tls_handshake, tls.accept(tcp)).await else {
        return;
    };
    let activity = Arc::new(Activity {
        in_flight: AtomicUsize::new(0),
        idle_since: Mutex::new(Instant::now()),
    });
    let service = {
        let activity = activity.clone();
        service_fn(move |request| {
            let server = server.clone();
            let busy = Busy::start(&activity);
            async move {
                let response = server.handle(request, peer, Listener::Main).await;
                Ok::<_, Infallible>(response.map(|body| held_by(body, busy)))
            }
        })
    };
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.headers);
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = watcher.watch(connection.into_owned()) => {}
        () = idle_for(&activity, limits.idle) => {}
    }
}

/// What a connection is doing: requests in flight (each until its
/// response's body is done with), and since when it has had none.
struct Activity {
    in_flight: AtomicUsize,
    idle_since: Mutex<Instant>,
}

/// One request in flight, from its headers until its response body is
/// sent or dropped.
struct Busy(Arc<Activity>);

impl Busy {
    fn start(activity: &Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::SeqCst);
        Busy(activity.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        *self.0.idle_since.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The body, keeping its request counted as in flight until it is dropped:
/// a streamed archive is work, not idleness.
fn held_by(body: Body, busy: Busy) -> Body {
    body.map_frame(move |frame| {
        let _in_flight = &busy;
        frame
    })
    .boxed()
}

/// Ends once the connection has had no request in flight for `limit`.
async fn idle_for(activity: &Activity, limit: Duration) {
    loop {
        if activity.in_flight.load(Ordering::SeqCst) > 0 {
            tokio::time::sleep(limit).await;
            continue;
        }
        let since = || {
            *activity
                .idle_since
                .lock()
                .unwrap_or_else(|e| e.into_inner())
        };
        let deadline = since() + limit;
        if Instant::now() < deadline {
            tokio::time::sleep_until(deadline.into()).await;
            continue;
        }
        // Read again: a request may have come and gone meanwhile.
        if activity.in_flight.load(Ordering::SeqCst) == 0 && since().elapsed() >= limit {
            return;
        }
    }
}
