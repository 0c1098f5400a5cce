//! Where provider packages come from. Every installation method (filesystem
//! mirror, network mirror, origin registry) answers the same three questions,
//! so the installer never knows which kind it talks to; the multi-source that
//! applies the CLI configuration's include/exclude rules is one more `Source`.

pub mod authentication;
pub mod configured;
pub mod discovery;
pub mod filesystem;
pub mod multi;
pub mod network_mirror;
pub mod oci;
pub mod offline;
pub mod registry;
pub mod shared;

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use url::Url;

use crate::addr::{Platform, ProviderAddr};
use crate::fetch::{Destination, DownloadError, DownloadProgress, Downloaded, Downloader};
use crate::verify::hash::PackageHash;
use crate::verify::signature::SigningKey;
use crate::version::Version;

#[async_trait]
pub trait Source: Send + Sync {
    /// Every version this source can offer for `provider`, ascending, plus
    /// warnings the source wants shown (registries send some).
    async fn available_versions(
        &self,
        provider: &ProviderAddr,
    ) -> Result<AvailableVersions, SourceError>;

    /// Where the package for one version and platform is, and what vouches
    /// for it. Documents that vouch for it may still be in flight
    /// ([`ChecksumDocuments`]), so that the archive can be fetched alongside.
    async fn package_meta(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
    ) -> Result<PackageMeta, SourceError>;

    /// How Terraform names this source, for `provider`, in "was not found in
    /// any of the search locations" lists.
    fn for_display(&self, provider: &ProviderAddr) -> String;

    /// The platforms this source offers `version` for, when it can tell
    /// without asking for a package (a registry's version list names them),
    /// so that `serve` can list every platform upstream has.
    async fn platforms(
        &self,
        _provider: &ProviderAddr,
        _version: &Version,
    ) -> Option<Vec<Platform>> {
        None
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AvailableVersions {
    pub versions: Vec<Version>,
    pub warnings: Vec<String>,
    /// Listed version strings that are not versions. Terraform 1.0 fails
    /// the whole list over one; tfinstall chooses among the others and says
    /// which it skipped, so a registry's typo does not block every user.
    pub invalid: Vec<InvalidVersion>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidVersion {
    /// The string as listed.
    pub listed: String,
    /// The source that listed it, as [`Source::for_display`] names it.
    pub source: String,
}

#[derive(Clone, Debug)]
pub struct PackageMeta {
    pub provider: ProviderAddr,
    pub version: Version,
    pub platform: Platform,
    pub filename: String,
    pub location: PackageLocation,
    pub authentication: PackageAuthentication,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PackageLocation {
    LocalArchive(PathBuf),
    LocalDir(PathBuf),
    Http(Url),
    /// A blob in an OCI registry (`oci_mirror`), fetched with the
    /// registry's credentials.
    OciBlob(oci::OciBlob),
}

impl fmt::Display for PackageLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PackageLocation::LocalArchive(p) | PackageLocation::LocalDir(p) => {
                write!(f, "{}", p.display())
            }
            // A password in the URL (userinfo) stays out of messages, `-json`
            // events and the plugin cache's record of where an entry came
            // from, as Go's `URL.Redacted` keeps it out.
            PackageLocation::Http(u) if u.password().is_some() => {
                let mut shown = u.clone();
                let _ = shown.set_password(Some("xxxxx"));
                write!(f, "{shown}")
            }
            PackageLocation::Http(u) => write!(f, "{u}"),
            PackageLocation::OciBlob(blob) => write!(f, "{blob}"),
        }
    }
}

impl PackageLocation {
    /// Downloads the package from wherever it is: a URL, or a blob in an
    /// OCI registry.
    pub async fn download(
        &self,
        downloader: &Downloader,
        dest: Destination<'_>,
        progress: &(dyn Fn(DownloadProgress) + Sync),
    ) -> Result<Downloaded, DownloadError> {
        match self {
            PackageLocation::Http(url) => {
                downloader.download_with_progress(url, dest, progress).await
            }
            PackageLocation::OciBlob(blob) => blob.download(downloader, dest, progress).await,
            PackageLocation::LocalArchive(path) | PackageLocation::LocalDir(path) => {
                Err(DownloadError::Io(std::io::Error::other(format!(
                    "{} is a local package, not a download",
                    path.display()
                ))))
            }
        }
    }
}

/// What the source says about the package before it is fetched. The checks
/// themselves run in the installer, so every source shares one verified path.
#[derive(Clone, Debug)]
pub enum PackageAuthentication {
    /// Filesystem mirrors and hash-less network mirrors vouch for nothing.
    None,
    /// A network mirror's listed `h1:`/`zh:` hashes for this platform
    /// (Terraform's `NewPackageHashAuthentication`), which the package must
    /// match.
    Hashes {
        listed: Vec<PackageHash>,
        /// With OpenTofu's `trust_all_hashes`, what the mirror lists for
        /// every platform: recorded in the lock entry once the package
        /// matched `listed`, as `tofu init` records them.
        trusted: Vec<PackageHash>,
    },
    /// A registry's signed checksum list (Terraform's
    /// `internal/getproviders/package_authentication.go`).
    Signed(Box<SignedChecksums>),
    /// The archive's `zh:`, which is also its address (an OCI blob's
    /// digest): the download already refused other bytes, and the lock
    /// entry records it beside the `h1:`, as OpenTofu records hashes it
    /// verified locally.
    ContentAddressed(PackageHash),
}

#[derive(Clone, Debug)]
pub struct SignedChecksums {
    /// The registry's `shasum` for the archive.
    pub shasum: [u8; 32],
    /// OpenTofu's per-platform hashes and sizes, when the registry sends
    /// them and OpenTofu's rules apply.
    pub packages: Option<RegistryPackages>,
    pub keys: Vec<SigningKey>,
    pub documents: ChecksumDocuments,
}

/// What an OpenTofu registry says of every platform's package of a release
/// (`packages` in the download document, OpenTofu 1.12): checked against
/// the one package downloaded, then recorded for all platforms, so a lock
/// file made on one platform is complete for the others.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistryPackages {
    /// The document's `shasum` as sent, which OpenTofu compares as text
    /// with the current platform's `zh:`.
    pub shasum: String,
    pub platforms: BTreeMap<Platform, PlatformPackage>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlatformPackage {
    pub hashes: Vec<PackageHash>,
    /// `package_size`: signed, as OpenTofu reads it, to report a negative one.
    pub size: i64,
}

/// The checksum list and its signature, which may still be on their way:
/// a registry names them in the same answer as the archive, so the
/// installer fetches all three at once instead of the archive last, one
/// round trip less per provider. Nothing is trusted until both are in.
#[derive(Clone)]
pub struct ChecksumDocuments(Shared<BoxFuture<'static, DocumentsAnswer>>);

/// The documents, or why they could not be had, and when that was known.
type DocumentsAnswer = (Result<Arc<SignedDocuments>, SourceError>, Instant);

#[derive(Debug)]
pub struct SignedDocuments {
    pub sha256sums: Vec<u8>,
    pub signature: Vec<u8>,
}

impl ChecksumDocuments {
    /// Documents that `fetch` will obtain when they are first awaited; every
    /// clone shares the one fetch and its result.
    pub fn fetch(
        fetch: impl Future<Output = Result<SignedDocuments, SourceError>> + Send + 'static,
    ) -> Self {
        ChecksumDocuments(
            fetch
                .map(|r| (r.map(Arc::new), Instant::now()))
                .boxed()
                .shared(),
        )
    }

    pub async fn get(&self) -> Result<Arc<SignedDocuments>, SourceError> {
        self.0.clone().await.0
    }

    /// Whether the fetch has ended, whether it failed, and when: a memo
    /// keeping these documents ages them by it ([`crate::memo::MemoPolicy`]).
    pub fn settled(&self) -> Option<(bool, Instant)> {
        self.0.peek().map(|(answer, at)| (answer.is_err(), *at))
    }
}

impl fmt::Debug for ChecksumDocuments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.settled() {
            None => "pending",
            Some((false, _)) => "fetched",
            Some((true, _)) => "failed",
        };
        write!(f, "ChecksumDocuments({state})")
    }
}

/// Source failures, split the way Terraform's multi-source needs them: the
/// "not here" kinds let the next method try, everything else stops the query.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    #[error("provider {provider} was not found in any of the search locations")]
    ProviderNotFound {
        provider: ProviderAddr,
        sources: Vec<String>,
    },
    #[error("provider registry {} does not have a provider named {provider}", provider.hostname.for_display())]
    RegistryProviderNotKnown { provider: ProviderAddr },
    #[error("provider {} {} is not available for {}", .0.provider, .0.version, .0.platform)]
    PlatformNotSupported(Box<MissingPlatform>),
    #[error("{message}")]
    HostNoProviders {
        provider: ProviderAddr,
        message: String,
        /// The host answers discovery, but with another protocol version.
        other_version: bool,
    },
    #[error("{message}")]
    Unauthorized { message: String },
    #[error(
        "provider {} {} is not supported by this version of tfinstall (plugin protocols {})",
        .0.provider, .0.version, .0.protocols
    )]
    ProtocolNotSupported(Box<IncompatibleProtocol>),
    #[error("{0}")]
    Other(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MissingPlatform {
    pub provider: ProviderAddr,
    pub version: Version,
    pub platform: Platform,
    /// Set when a network mirror is the one missing it, for Terraform's
    /// mirror-specific message.
    pub mirror_url: Option<String>,
    /// `os_arch` names the source says this version does have, so the
    /// error can tell users what exists; empty when the source cannot say.
    pub available: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IncompatibleProtocol {
    pub provider: ProviderAddr,
    pub version: Version,
    pub protocols: String,
    /// The newest version that speaks a supported protocol, if any.
    pub suggestion: Option<Version>,
}

impl SourceError {
    pub fn platform_not_supported(
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
        mirror_url: Option<String>,
    ) -> Self {
        SourceError::PlatformNotSupported(Box::new(MissingPlatform {
            provider: provider.clone(),
            version: version.clone(),
            platform: platform.clone(),
            mirror_url,
            available: Vec::new(),
        }))
    }

    /// Terraform's `ErrIsNotExist`: the multi-source moves on to the next method.
    pub fn is_not_exist(&self) -> bool {
        matches!(
            self,
            SourceError::ProviderNotFound { .. }
                | SourceError::RegistryProviderNotKnown { .. }
                | SourceError::PlatformNotSupported(_)
        )
    }
}
