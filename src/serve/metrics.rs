//! `GET /metrics`: what `serve` has done since it started, in Prometheus'
//! text exposition format (the OpenMetrics flavour Prometheus scrapes), for
//! the operators who watch a shared mirror: the hit rate, what went
//! upstream, how long fills take, whether single-flight holds.
//!
//! Counting and encoding are `prometheus-client`'s, the Prometheus
//! project's own crate for Rust; what it has no collector for (the store's
//! size, the process's memory and files) is read when a scrape asks.

use std::sync::atomic::AtomicU64;
use std::time::{Duration, SystemTime};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use url::Url;

use super::mirror::Outcome;
use crate::cache::PluginCache;
use crate::http::traffic::TrafficWatcher;

/// The media type of the exposition `prometheus-client` writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What a provider request ended as, beyond its status: how the mirror
/// answered it, or why it was refused before the mirror was asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheOutcome {
    Answered(Outcome),
    /// The provider policy denied the version or refused the package.
    DeniedByPolicy,
    /// The provider is not among those served (`-allow`).
    NotAllowed,
}

impl CacheOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheOutcome::Answered(outcome) => outcome.as_str(),
            CacheOutcome::DeniedByPolicy => "denied",
            CacheOutcome::NotAllowed => "not_allowed",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: &'static str,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HostLabels {
    host: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OciLabels {
    operation: &'static str,
    result: &'static str,
}

/// A package taken from, or put into, the shared OCI store.
#[derive(Clone, Copy, Debug)]
pub enum OciOperation {
    /// Taken from it.
    Read,
    /// Not there (or not what upstream signed): fetched from upstream.
    ReadMissed,
    /// Published to it.
    Written,
    /// Publishing failed (logged; the package was served all the same).
    WriteFailed,
}

/// Every counter `serve` keeps, registered once.
pub struct ServeMetrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    outcomes: Family<OutcomeLabels, Counter>,
    upstream_requests: Family<HostLabels, Counter>,
    upstream_bytes: Family<HostLabels, Counter>,
    fill_seconds: Histogram,
    oci: Family<OciLabels, Counter>,
    in_flight: Gauge,
    store_bytes: Gauge,
    store_entries: Gauge,
    resident_bytes: Gauge,
    open_fds: Gauge,
    started: Gauge<f64, AtomicU64>,
    store: PluginCache,
}

impl ServeMetrics {
    /// The metrics of a server whose local store is `store`.
    pub fn new(store: PluginCache) -> Self {
        let metrics = ServeMetrics {
            registry: Registry::default(),
            requests: Family::default(),
            outcomes: Family::default(),
            upstream_requests: Family::default(),
            upstream_bytes: Family::default(),
            // 50 ms to about 14 minutes.
            fill_seconds: Histogram::new(exponential_buckets(0.05, 2.0, 15)),
            oci: Family::default(),
            in_flight: Gauge::default(),
            store_bytes: Gauge::default(),
            store_entries: Gauge::default(),
            resident_bytes: Gauge::default(),
            open_fds: Gauge::default(),
            started: Gauge::default(),
            store,
        };
        metrics.started.set(
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0.0, |since| since.as_secs_f64()),
        );
        let mut registry = Registry::default();
        registry.register(
            "tfinstall_serve_requests",
            "Requests answered, by route and status",
            metrics.requests.clone(),
        );
        registry.register(
            "tfinstall_serve_cache_outcomes",
            "Provider requests by how they were answered: hit, miss, stale, fill (started a fill), joined (waited on a fill in flight), repacked, denied (provider policy), not_allowed (-allow)",
            metrics.outcomes.clone(),
        );
        registry.register(
            "tfinstall_serve_upstream_requests",
            "Requests sent to registries, mirrors and archive hosts, by host",
            metrics.upstream_requests.clone(),
        );
        registry.register(
            "tfinstall_serve_upstream_received_bytes",
            "Body bytes received from registries, mirrors and archive hosts, by host",
            metrics.upstream_bytes.clone(),
        );
        registry.register(
            "tfinstall_serve_fill_duration_seconds",
            "How long each fill of the store took, from its start to the package stored (or refused)",
            metrics.fill_seconds.clone(),
        );
        registry.register(
            "tfinstall_serve_oci_store_operations",
            "Packages read from and written to the shared OCI store, by operation and result",
            metrics.oci.clone(),
        );
        registry.register(
            "tfinstall_serve_requests_in_flight",
            "Requests being answered (until their response headers are sent)",
            metrics.in_flight.clone(),
        );
        registry.register(
            "tfinstall_serve_store_bytes",
            "Bytes the local store takes on disk, as du -s counts them",
            metrics.store_bytes.clone(),
        );
        registry.register(
            "tfinstall_serve_store_entries",
            "Packages (provider, version, platform) in the local store",
            metrics.store_entries.clone(),
        );
        registry.register(
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            metrics.resident_bytes.clone(),
        );
        registry.register(
            "process_open_fds",
            "Number of open file descriptors",
            metrics.open_fds.clone(),
        );
        registry.register(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds",
            metrics.started.clone(),
        );
        ServeMetrics {
            registry,
            ..metrics
        }
    }

    pub fn request(&self, route: &'static str, status: u16) {
        self.requests
            .get_or_create(&RequestLabels { route, status })
            .inc();
    }

    pub fn outcome(&self, outcome: CacheOutcome) {
        self.outcomes
            .get_or_create(&OutcomeLabels {
                outcome: outcome.as_str(),
            })
            .inc();
    }

    pub fn fill_finished(&self, took: Duration) {
        self.fill_seconds.observe(took.as_secs_f64());
    }

    pub fn oci(&self, operation: OciOperation) {
        let (operation, result) = match operation {
            OciOperation::Read => ("read", "ok"),
            OciOperation::ReadMissed => ("read", "missed"),
            OciOperation::Written => ("write", "ok"),
            OciOperation::WriteFailed => ("write", "failed"),
        };
        self.oci
            .get_or_create(&OciLabels { operation, result })
            .inc();
    }

    /// Counts a request in flight until the guard is dropped.
    pub fn in_flight(&self) -> InFlight<'_> {
        self.in_flight.inc();
        InFlight(&self.in_flight)
    }

    /// The exposition, with the store and the process read now. The store
    /// is walked (as `cache stats` walks it): a scrape every few seconds of
    /// a store of thousands of packages costs milliseconds.
    pub async fn render(self: &std::sync::Arc<Self>) -> String {
        let metrics = std::sync::Arc::clone(self);
        let _ = tokio::task::spawn_blocking(move || {
            let stats = metrics.store.stats();
            metrics.store_entries.set(stats.entries.len() as i64);
            metrics.store_bytes.set(stats.bytes_on_disk as i64);
            if let Some(resident) = resident_bytes() {
                metrics.resident_bytes.set(resident as i64);
            }
            if let Some(open) = open_fds() {
                metrics.open_fds.set(open as i64);
            }
        })
        .await;
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// A request being answered; see [`ServeMetrics::in_flight`].
pub struct InFlight<'a>(&'a Gauge);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl TrafficWatcher for ServeMetrics {
    fn request(&self, url: &Url) {
        self.upstream_requests.get_or_create(&host_of(url)).inc();
        super::access_log::upstream_asked(url);
    }

    fn received(&self, url: &Url, bytes: u64) {
        self.upstream_bytes
            .get_or_create(&host_of(url))
            .inc_by(bytes);
    }
}

/// `host[:port]` as the URL gives it (the port only when not the scheme's).
fn host_of(url: &Url) -> HostLabels {
    let host = url.host_str().unwrap_or_default();
    HostLabels {
        host: match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        },
    }
}

/// The process's resident set, from `/proc/self/statm` (Linux); `None`
/// elsewhere, and the metric then stays 0.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

/// The open file descriptors, from `/proc/self/fd` (Linux).
fn open_fds() -> Option<usize> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_names_every_metric_with_its_type() {
        let dir = tempfile::tempdir().unwrap();
        let metrics = std::sync::Arc::new(ServeMetrics::new(PluginCache::new(dir.path())));
        metrics.request("index", 200);
        metrics.outcome(CacheOutcome::Answered(Outcome::Joined));
        metrics.oci(OciOperation::WriteFailed);
        metrics.fill_finished(Duration::from_millis(300));
        let url =
            Url::parse("https://registry.test:8443/v1/providers/acme/alpha/versions").unwrap();
        TrafficWatcher::request(&*metrics, &url);
        TrafficWatcher::received(&*metrics, &url, 42);
        let text = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(metrics.render());
        for line in [
            "# TYPE tfinstall_serve_requests counter",
            "tfinstall_serve_requests_total{route=\"index\",status=\"200\"} 1",
            "tfinstall_serve_cache_outcomes_total{outcome=\"joined\"} 1",
            "tfinstall_serve_oci_store_operations_total{operation=\"write\",result=\"failed\"} 1",
            "tfinstall_serve_upstream_requests_total{host=\"registry.test:8443\"} 1",
            "tfinstall_serve_upstream_received_bytes_total{host=\"registry.test:8443\"} 42",
            "tfinstall_serve_fill_duration_seconds_count 1",
            "tfinstall_serve_store_entries 0",
            "# TYPE process_start_time_seconds gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
