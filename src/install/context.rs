//! What the install stages share: the installer's settings, and the
//! values that pass from one stage to the next. The stages ([`super::select`],
//! [`super::obtain`], [`super::place`]) each add methods to [`Installer`]
//! and import only this and what lies below them; [`super::installer`]
//! runs them in order.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use crate::addr::{Platform, ProviderAddr};
use crate::fetch::Downloader;
use crate::install::cache_use::CacheUse;
use crate::install::events::EventSink;
use crate::install::layout::InstallLayout;
use crate::install::link::LinkMode;
use crate::package::extract::ExtractLimits;
use crate::platform_hashes::PlatformHashes;
use crate::policy::Policy;
use crate::source::{PackageMeta, Source, SourceError};
use crate::verify::AuthResult;
use crate::verify::hash::PackageHash;
use crate::version::{Version, VersionConstraints};

/// How many providers are fetched at once by default. Each provider's
/// fetch is a chain of round trips (versions, package document, checksums,
/// archive), so anything below the number of providers adds whole chains;
/// beyond it nothing changes but peak memory, which grows a little with
/// each chain in flight. Sixteen covers most configurations in one round;
/// the measurements are in bench/results.md, "Default parallelism".
pub const DEFAULT_PARALLELISM: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstallMode {
    /// The lock file decides the version when it has an entry.
    Normal,
    /// `-upgrade`: the newest acceptable version, lock entries notwithstanding.
    Upgrade,
    /// `providers lock` (Terraform's mode F): versions as in `Normal`, but a
    /// downloaded package need not match the hashes already locked, since
    /// the point is to learn the hashes the source vouches for now.
    Force,
}

impl InstallMode {
    pub(super) fn honours_locked_version(self) -> bool {
        self != InstallMode::Upgrade
    }
}

pub struct Installer {
    pub source: Arc<dyn Source>,
    pub layout: InstallLayout,
    pub platform: Platform,
    pub limits: ExtractLimits,
    pub parallelism: usize,
    pub downloader: Arc<Downloader>,
    /// Providers the CLI configuration's `dev_overrides` replace: not
    /// installed, and their lock entries left alone (Terraform 1.16).
    pub dev_overrides: BTreeSet<ProviderAddr>,
    /// The global plugin cache, when one is configured.
    pub cache: Option<CacheUse>,
    /// How packages from the cache or an unpacked mirror are placed.
    pub link_mode: LinkMode,
    pub events: EventSink,
    /// `init -offline`: the source is local only, and a version it lacks is
    /// reported with the versions it has.
    pub offline: bool,
    /// The provider policy (`-policy`), which every version and package
    /// this installer considers must pass ([`super::admission`]).
    pub policy: Option<Arc<Policy>>,
    /// The other platforms every lock entry this run writes anew must
    /// cover (`init -platform`, the committed list), and where their hashes
    /// are found.
    pub lock_platforms: Option<OtherPlatforms>,
}

/// Platforms besides the installer's whose hashes go into new lock entries.
#[derive(Clone)]
pub struct OtherPlatforms {
    pub platforms: Vec<Platform>,
    /// What listed them, for messages ("the -platform options", a file).
    pub listed_by: String,
    pub hashes: Arc<PlatformHashes>,
}

impl Installer {
    /// An installer with the defaults every command starts from: no plugin
    /// cache, no overrides, default limits and parallelism, hard links
    /// where possible, online, no policy, and events going nowhere.
    /// Commands change what they need with struct update syntax.
    pub fn new(
        source: Arc<dyn Source>,
        layout: InstallLayout,
        platform: Platform,
        downloader: Arc<Downloader>,
    ) -> Self {
        Installer {
            source,
            layout,
            platform,
            limits: ExtractLimits::default(),
            parallelism: DEFAULT_PARALLELISM,
            downloader,
            dev_overrides: BTreeSet::new(),
            cache: None,
            link_mode: LinkMode::Auto,
            events: Arc::new(|_| {}),
            offline: false,
            policy: None,
            lock_platforms: None,
        }
    }
}

/// A cache entry this run may use, with what vouches for it.
#[derive(Clone, Debug)]
pub(super) struct CachedPackage {
    pub(super) dir: PathBuf,
    pub(super) h1: PackageHash,
    pub(super) auth: AuthResult,
    pub(super) signed_hashes: Vec<PackageHash>,
}

pub(super) struct Selected {
    pub(super) provider: ProviderAddr,
    pub(super) version: Version,
    pub(super) constraints: VersionConstraints,
    /// Set when the fast path found the installed package matching the lock,
    /// so no source was asked anything.
    pub(super) already_installed: Option<PackageHash>,
    /// Set when the fast path found a cache entry matching the lock.
    pub(super) cached: Option<CachedPackage>,
    /// The source's answer for this version's package, asked for while the
    /// version list was on its way (see [`Installer::select_one`]).
    pub(super) prefetched: Option<Result<PackageMeta, SourceError>>,
}
