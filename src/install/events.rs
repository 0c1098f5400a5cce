//! What the installer reports as it goes, and the order it reports in.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::addr::{Platform, ProviderAddr};
use crate::diag::Diagnostic;
use crate::fetch::DownloadProgress;
use crate::platform_hashes::FoundHashes;
use crate::policy::Decision;
use crate::verify::AuthResult;
use crate::version::Version;

#[derive(Clone, Debug)]
pub enum InstallEvent {
    BuiltIn {
        provider: ProviderAddr,
    },
    ReusingLocked {
        provider: ProviderAddr,
    },
    FindingMatching {
        provider: ProviderAddr,
        constraints: String,
    },
    FindingLatest {
        provider: ProviderAddr,
    },
    UsingInstalled {
        provider: ProviderAddr,
        version: Version,
    },
    Installing {
        provider: ProviderAddr,
        version: Version,
    },
    Installed {
        provider: ProviderAddr,
        version: Version,
        auth: AuthResult,
    },
    Warning(Diagnostic),
    /// The package came from the plugin cache; nothing was downloaded.
    CacheHit {
        provider: ProviderAddr,
        version: Version,
    },
    /// Another process holds the cache entry's lock, installing the same
    /// package; this one waits and then uses its result.
    WaitingForCache {
        provider: ProviderAddr,
        version: Version,
    },
    /// The version to install and where its package is; `locked` when the
    /// lock file already records this version.
    Selected {
        provider: ProviderAddr,
        version: Version,
        locked: bool,
        package: String,
    },
    /// The package passed its source's authentication, before its files
    /// are used.
    Verified {
        provider: ProviderAddr,
        version: Version,
        auth: AuthResult,
    },
    /// The provider policy removed these versions of the provider from the
    /// choice (or refused the one the lock file selects), each with the
    /// decision that removed it.
    PolicyScreened {
        provider: ProviderAddr,
        removed: Vec<(Version, Decision)>,
    },
    /// The provider policy's decision on a package, given how it was
    /// authenticated: one about to be used (fresh, cached or installed),
    /// or one refused.
    PolicyDecided {
        provider: ProviderAddr,
        version: Version,
        decision: Decision,
        auth: AuthResult,
    },
    /// The hashes of other platforms' packages that the new lock entry
    /// records beside this platform's, with what gave each.
    PlatformHashes {
        provider: ProviderAddr,
        version: Version,
        platforms: Vec<(Platform, FoundHashes)>,
    },
    /// How far a package has got; live, see [`InstallEvent::is_live`].
    Progress {
        provider: ProviderAddr,
        version: Version,
        stage: ProgressStage,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressStage {
    Downloading(DownloadProgress),
    Unpacking,
    /// The provider's work ended, successfully or not.
    Done,
}

impl InstallEvent {
    /// Progress events pass through as they happen instead of waiting for
    /// their turn in the stable per-provider order: a progress display
    /// is only useful while the work is going on.
    pub fn is_live(&self) -> bool {
        matches!(self, InstallEvent::Progress { .. })
    }
}

/// Download progress is reported at most this often per package, plus a
/// final event once the download is complete.
pub(super) const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

pub type EventSink = Arc<dyn Fn(InstallEvent) + Send + Sync>;

/// Concurrent installs report in a stable order: events of the provider at
/// the head of the (sorted) list pass straight through; later providers'
/// events wait until every provider before them has finished.
pub(super) struct OrderedEvents {
    sink: EventSink,
    state: Mutex<OrderState>,
}

struct OrderState {
    head: usize,
    finished: Vec<bool>,
    buffered: Vec<Vec<InstallEvent>>,
}

impl OrderedEvents {
    pub(super) fn new(n: usize, sink: EventSink) -> Self {
        OrderedEvents {
            sink,
            state: Mutex::new(OrderState {
                head: 0,
                finished: vec![false; n],
                buffered: vec![Vec::new(); n],
            }),
        }
    }

    pub(super) fn emit(&self, index: usize, event: InstallEvent) {
        if event.is_live() {
            (self.sink)(event);
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if index == state.head {
            (self.sink)(event);
        } else {
            state.buffered[index].push(event);
        }
    }

    pub(super) fn finish(&self, index: usize) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.finished[index] = true;
        while state.head < state.finished.len() && state.finished[state.head] {
            state.head += 1;
            if state.head < state.finished.len() {
                let head = state.head;
                for event in std::mem::take(&mut state.buffered[head]) {
                    (self.sink)(event);
                }
            }
        }
    }
}
