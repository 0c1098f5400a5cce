//! The requests tfinstall sends to registries, mirrors and archive hosts,
//! and the body bytes their answers bring, told to whoever watches: `serve`
//! counts them by host for its metrics and names the last one in its access
//! log.
//!
//! The two places that send such requests (the registry and mirror API
//! client, and the package downloader) report here. They sit deep below the
//! sources and the installer that `init` shares with `serve`; a watcher set
//! once for the process reaches them without threading a recorder through
//! every source, fetch and fill for the one command that looks. Nothing is
//! told when no watcher is set, as in every command but `serve`; each
//! request is also logged at debug level (`TFINSTALL_LOG=debug`).

use std::sync::{Arc, OnceLock};

use url::Url;

/// What a watcher is told.
pub trait TrafficWatcher: Send + Sync {
    /// A request is about to be sent to `url` (each attempt of a retry).
    fn request(&self, url: &Url);
    /// `bytes` more of the body of an answer from `url` arrived.
    fn received(&self, url: &Url, bytes: u64);
}

static WATCHER: OnceLock<Arc<dyn TrafficWatcher>> = OnceLock::new();

/// Sets the process's watcher; false when one was set already (it stays).
pub fn watch(watcher: Arc<dyn TrafficWatcher>) -> bool {
    WATCHER.set(watcher).is_ok()
}

pub(crate) fn request(url: &Url) {
    tracing::debug!(%url, "request");
    if let Some(watcher) = WATCHER.get() {
        watcher.request(url);
    }
}

pub(crate) fn received(url: &Url, bytes: usize) {
    if let Some(watcher) = WATCHER.get() {
        watcher.received(url, bytes as u64);
    }
}
