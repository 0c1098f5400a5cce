//! One remote module package, fetched into a directory: a git repository
//! at a ref (by the user's `git`, [`git`]), or an archive over HTTP(S),
//! found directly or through `X-Terraform-Get` ([`http`]), or an OpenTofu
//! module package in an OCI registry ([`oci`]). The module
//! installer above decides which packages a configuration needs and where
//! they go; this layer only materialises one, complete or not at all, and
//! says what it was (the commit, or the archive's SHA-256) so a cache can
//! key on it.
//!
//! Archives reuse the provider packages' download (retries, stall and size
//! limits, `.netrc`) and extraction limits (no `..`, no absolute paths, no
//! link out of the package, size and file-count limits).

mod addr;
mod git;
mod http;
mod oci;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use addr::{GitAddr, HttpAddr, OciAddr, OciReference, PackageAddr, PackageAddrError};
pub use git::{RefKind, ResolvedRef};
pub use oci::MODULE_ARTIFACT_TYPE;

use crate::cliconfig::netrc::Netrc;
use crate::fetch::{DownloadError, DownloadSettings};
use crate::package::extract::ExtractError;
use crate::source::oci::Registries;

/// What a fetched package was: the key of a cache of module packages.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PackageIdentity {
    /// A git repository (its URL as git was given it) at a commit.
    Git { url: String, commit: String },
    /// An archive at a URL, by its SHA-256 (hex).
    Archive { url: String, sha256: String },
}

/// The result of [`PackageFetcher::fetch`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedPackage {
    pub identity: PackageIdentity,
}

/// Why a package could not be fetched. Nothing is left at the destination.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    #[error(
        "cannot fetch a module package into {}: it exists already (remove it, or let the installer choose a new directory)", .dest.display()
    )]
    DestinationExists { dest: PathBuf },
    #[error("cannot {what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error(
        "module package {url} is a git repository, and git is not installed or not on PATH; install git (Terraform needs it for these modules too)"
    )]
    GitMissing { url: String },
    #[error(
        "git could not {what} of {url}: {message}\n(git runs as it does for Terraform: your SSH keys and agent, ~/.gitconfig and credential helpers apply; check that the repository exists, that you may read it, and that the ref names a tag, a branch or a commit in it)"
    )]
    Git {
        url: String,
        what: String,
        message: String,
    },
    #[error("failed to download module package {url}: {source}")]
    Download { url: String, source: DownloadError },
    #[error("module package {url} cannot be unpacked: {source}")]
    Extract { url: String, source: ExtractError },
    #[error("module package {url}: the server answered {status}")]
    Status { url: String, status: String },
    #[error(
        "module package {url}: the server's answer names no package (no X-Terraform-Get header and no terraform-get meta tag); if it is an archive, add ?archive=zip (or tar.gz, …) to the source"
    )]
    NoSourceUrl { url: String },
    #[error(
        "module package {url}: more than {MAX_HOPS} X-Terraform-Get answers in a row; the servers send the request round in circles"
    )]
    TooManyHops { url: String },
    #[error(
        "module package {url} sent X-Terraform-Get {location:?}, which is not usable: {reason}"
    )]
    BadLocation {
        url: String,
        location: String,
        reason: String,
    },
    #[error("module package {url} has no directory {subdir:?}")]
    SubdirMissing { url: String, subdir: String },
    #[error("module package {url}: {message}")]
    Oci { url: String, message: String },
}

/// `X-Terraform-Get` answers followed for one package, at most, as
/// go-getter follows them.
pub const MAX_HOPS: usize = 10;

/// Fetches module packages; made once per run and shared.
pub struct PackageFetcher {
    client: reqwest::Client,
    settings: DownloadSettings,
    netrc: Option<Arc<Netrc>>,
    git_env: Vec<(OsString, OsString)>,
    /// OCI registries, with the run's credentials once the caller shares
    /// them ([`with_oci_registries`](Self::with_oci_registries)); else
    /// anonymous pulls, with the tokens public registries hand out.
    oci: Arc<Registries>,
}

impl PackageFetcher {
    pub fn new(
        client: reqwest::Client,
        settings: DownloadSettings,
        netrc: Option<Arc<Netrc>>,
    ) -> PackageFetcher {
        PackageFetcher {
            oci: Arc::new(Registries::new(client.clone(), Arc::default())),
            client,
            settings,
            netrc,
            git_env: Vec::new(),
        }
    }

    /// Fetches `oci://` packages through the run's OCI registries (their
    /// credentials and the tokens already earned).
    pub fn with_oci_registries(mut self, registries: Arc<Registries>) -> PackageFetcher {
        self.oci = registries;
        self
    }

    /// Adds variables to the environment of every `git` this fetcher runs,
    /// over what tfinstall itself was given (a caller fetching on behalf of
    /// another home directory sets `HOME` or `GIT_SSL_CAINFO` here).
    pub fn with_git_env(mut self, env: Vec<(OsString, OsString)>) -> PackageFetcher {
        self.git_env = env;
        self
    }

    /// What the ref of the git package `addr` names now, by one ref
    /// listing (see [`git::resolve_ref`]); `None` when no ref has that name.
    pub async fn resolve_git_ref(
        &self,
        addr: &GitAddr,
    ) -> Result<Option<ResolvedRef>, PackageError> {
        git::resolve_ref(addr, &self.git_env).await
    }

    /// Materialises the package's whole tree at `dest`, which must not
    /// exist: it is made in a directory beside it and renamed into place,
    /// so it appears complete or not at all. A git package is left without
    /// its `.git` metadata.
    pub async fn fetch(
        &self,
        addr: &PackageAddr,
        dest: &Path,
    ) -> Result<FetchedPackage, PackageError> {
        if dest.symlink_metadata().is_ok() {
            return Err(PackageError::DestinationExists {
                dest: dest.to_path_buf(),
            });
        }
        let parent = match dest.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        let io = |what: String| move |source| PackageError::Io { what, source };
        std::fs::create_dir_all(parent).map_err(io(format!("create {}", parent.display())))?;
        let staging = tempfile::Builder::new()
            .prefix(".tfinstall-package-")
            .tempdir_in(parent)
            .map_err(io(format!(
                "create a staging directory in {}",
                parent.display()
            )))?;
        let tree = staging.path().join("package");
        let identity = self.fill(addr, &tree, staging.path(), 0).await?;
        std::fs::rename(&tree, dest)
            .map_err(io(format!("move the package into {}", dest.display())))?;
        Ok(FetchedPackage { identity })
    }

    /// Fills the new directory `tree` with the package; `scratch` holds
    /// downloads and the packages of `X-Terraform-Get` answers that name a
    /// subdirectory; `hops` counts those answers so far.
    async fn fill(
        &self,
        addr: &PackageAddr,
        tree: &Path,
        scratch: &Path,
        hops: usize,
    ) -> Result<PackageIdentity, PackageError> {
        match addr {
            PackageAddr::Git(git) => {
                let fetched = git::Git {
                    addr: git,
                    dir: tree,
                    env: &self.git_env,
                };
                let commit = fetched.fetch().await?;
                git::remove_git_metadata(tree).map_err(|source| PackageError::Io {
                    what: format!("remove the git metadata from {}", tree.display()),
                    source,
                })?;
                Ok(PackageIdentity::Git {
                    url: git.url.to_string(),
                    commit,
                })
            }
            PackageAddr::Http(http) => Box::pin(self.fill_http(http, tree, scratch, hops)).await,
            PackageAddr::Oci(oci) => self.fill_oci(oci, tree, scratch).await,
        }
    }
}

/// Moves `subdir` of the fetched tree `root` to `tree`, refusing a path
/// that leaves it or runs through a link.
fn take_subdir(root: &Path, subdir: &str, tree: &Path, url: &str) -> Result<(), PackageError> {
    let missing = || PackageError::SubdirMissing {
        url: url.to_owned(),
        subdir: subdir.to_owned(),
    };
    let mut path = root.to_path_buf();
    for component in subdir.split('/').filter(|c| !c.is_empty() && *c != ".") {
        if component == ".." || component.contains('\\') {
            return Err(missing());
        }
        path.push(component);
        match path.symlink_metadata() {
            Ok(meta) if meta.is_dir() => {}
            _ => return Err(missing()),
        }
    }
    std::fs::rename(&path, tree).map_err(|source| PackageError::Io {
        what: format!("move {} into place", path.display()),
        source,
    })
}

/// `url` with `//subdir` when the package is a subdirectory of what it names.
fn with_subdir(url: String, subdir: &str) -> String {
    if subdir.is_empty() {
        url
    } else {
        format!("{url}//{subdir}")
    }
}
