//! `GET /readyz`: whether a load balancer should send this replica
//! clients. Not while it drains after SIGTERM, not while its store
//! directory is gone, and not while the shared OCI store it fills from and
//! publishes to cannot be reached (`/healthz` says only that the process
//! answers).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long an OCI registry's answer (or silence) stands for the next
/// checks: a load balancer asking every second costs the registry one
/// request every few seconds.
const PROBE_EVERY: Duration = Duration::from_secs(5);

/// How long the registry has to answer a probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

pub struct Readiness {
    draining: AtomicBool,
    store: PathBuf,
    oci: Option<OciProbe>,
}

/// The shared store's registry, asked `GET /v2/`, which every registry
/// answers (with 401 when it wants credentials: reachable all the same).
struct OciProbe {
    host: String,
    client: reqwest::Client,
    last: tokio::sync::Mutex<Option<(Instant, Result<(), String>)>>,
}

impl Readiness {
    /// `oci`: the shared store's registry `HOST[:PORT]` and the client to
    /// reach it with.
    pub fn new(store: PathBuf, oci: Option<(String, reqwest::Client)>) -> Self {
        Readiness {
            draining: AtomicBool::new(false),
            store,
            oci: oci.map(|(host, client)| OciProbe {
                host,
                client,
                last: tokio::sync::Mutex::new(None),
            }),
        }
    }

    /// From now on, not ready.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Ready, or why not.
    pub async fn check(&self) -> Result<(), String> {
        if self.draining.load(Ordering::SeqCst) {
            return Err("draining: the server is stopping".to_owned());
        }
        if !self.store.is_dir() {
            return Err(format!(
                "the store {} is not a directory",
                self.store.display()
            ));
        }
        match &self.oci {
            Some(probe) => probe.check().await,
            None => Ok(()),
        }
    }
}

impl OciProbe {
    async fn check(&self) -> Result<(), String> {
        let mut last = self.last.lock().await;
        if let Some((at, result)) = &*last
            && at.elapsed() < PROBE_EVERY
        {
            return result.clone();
        }
        let url = format!("https://{}/v2/", self.host);
        crate::http::start_loading_roots();
        let result = match self.client.get(&url).timeout(PROBE_TIMEOUT).send().await {
            Ok(_) => Ok(()),
            Err(err) => Err(format!(
                "the shared OCI store {} cannot be reached: {}",
                self.host,
                crate::http::error_chain(&err)
            )),
        };
        *last = Some((Instant::now(), result.clone()));
        result
    }
}
