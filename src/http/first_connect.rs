//! One connection per HTTP/2 origin, even for a burst of first requests.
//!
//! hyper-util's pool cannot know before a TLS handshake whether the server
//! will speak HTTP/2, so a burst of requests to a host with no connection
//! yet (a run's first registry questions: sixteen for eight modules) opens a
//! connection per request, and all but one are left idle once the first
//! carries them all. Each costs a TLS handshake on both ends, on the
//! runtime's one thread here, at the moment the run is busiest. This layer
//! lets the first connect to an origin go alone: the others wait for it,
//! and when it negotiated HTTP/2 they wait on, so that the pool hands their
//! requests the new connection. A connect the pool no longer needs then
//! runs (if ever) long after, in the background, as hyper-util runs every
//! connect that lost to a pooled connection. An origin that answered
//! with HTTP/1.1 is remembered, and its connects never wait again, since
//! each of its requests needs a connection of its own: its first burst
//! alone pays one connection setup of waiting (an S3 bucket mirror, say),
//! which a burst to an HTTP/2 host (every registry met so far) gets back
//! in handshakes not made.
//!
//! Written by hand: no crate offers this for reqwest, whose connector is
//! reachable only as a tower layer over an opaque request type; the layer
//! keys origins by that type's `Debug` text, which is its URI.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::client::legacy::connect::Connection;
use tokio::sync::watch;

/// How long a connect waits after the origin's first connection came up
/// with HTTP/2 before it connects anyway: its request has long been sent
/// on the shared connection by then, unless that connection failed at
/// once (then this is the delay before a new one).
const SHARED_GRACE: Duration = Duration::from_secs(2);

/// What is known of an origin's first connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum First {
    /// Still connecting.
    Connecting,
    /// Came up speaking HTTP/2: its requests share it.
    Shared,
    /// Failed, or speaks HTTP/1.1: every request connects on its own.
    Alone,
}

type Origins = Arc<Mutex<HashMap<String, watch::Receiver<First>>>>;

/// The tower layer for [`reqwest::ClientBuilder::connector_layer`].
#[derive(Clone, Default)]
pub struct FirstConnectLayer {
    origins: Origins,
}

impl<S> tower_layer::Layer<S> for FirstConnectLayer {
    type Service = FirstConnect<S>;

    fn layer(&self, inner: S) -> FirstConnect<S> {
        FirstConnect {
            inner,
            origins: self.origins.clone(),
        }
    }
}

#[derive(Clone)]
pub struct FirstConnect<S> {
    inner: S,
    origins: Origins,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, R> tower_service::Service<R> for FirstConnect<S>
where
    S: tower_service::Service<R> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Response: Connection + Send + 'static,
    S::Error: Send + 'static,
    R: std::fmt::Debug + Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        // The service made ready is the one that must be called.
        let ready = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, ready);
        let origin = format!("{request:?}");
        let mut origins = self.origins.lock().unwrap_or_else(|e| e.into_inner());
        // A first connect whose future was dropped half-way left its
        // entry `Connecting` with no one to finish it: it counts as none.
        let known = origins
            .get(&origin)
            .map(|first| (*first.borrow(), first.has_changed().is_ok(), first.clone()));
        match known {
            Some((First::Alone, _, _)) => Box::pin(inner.call(request)),
            Some((_, true, mut first)) => {
                drop(origins);
                Box::pin(async move {
                    let outcome = match first.wait_for(|f| *f != First::Connecting).await {
                        Ok(outcome) => *outcome,
                        // The first connect was dropped half-way.
                        Err(_) => First::Alone,
                    };
                    if outcome == First::Shared {
                        tokio::time::sleep(SHARED_GRACE).await;
                    }
                    inner.call(request).await
                })
            }
            _ => {
                let (tell, first) = watch::channel(First::Connecting);
                origins.insert(origin.clone(), first.clone());
                drop(origins);
                let origins = self.origins.clone();
                Box::pin(async move {
                    let connected = inner.call(request).await;
                    let outcome = match &connected {
                        Ok(conn) if conn.connected().is_negotiated_h2() => First::Shared,
                        _ => First::Alone,
                    };
                    let _ = tell.send(outcome);
                    // Only HTTP/1.1 is remembered: a shared connection may
                    // close, and then the next connect goes first again, as
                    // it does after a failure.
                    if outcome == First::Shared || connected.is_err() {
                        let mut origins = origins.lock().unwrap_or_else(|e| e.into_inner());
                        if origins
                            .get(&origin)
                            .is_some_and(|entry| entry.same_channel(&first))
                        {
                            origins.remove(&origin);
                        }
                    }
                    connected
                })
            }
        }
    }
}
