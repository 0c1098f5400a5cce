//! OpenTofu's `oci_mirror` installation method: providers kept in OCI
//! registries (Harbor, GitLab, Artifactory, ECR, GHCR, CNCF Distribution),
//! in the layout [`layout`] describes, found through a
//! [`template::RepositoryTemplate`].
//!
//! The OCI Distribution API is spoken here over the run's one reqwest client
//! rather than through an OCI client crate: the few calls needed (tags,
//! manifests, blob HEAD/GET, monolithic uploads) are small, while the
//! maintained crates (`oci-client`) bring a second HTTP stack and TLS
//! configuration, and their blob pulls would bypass the downloader that
//! gives every other package its retries, resumption, stall and size limits
//! and its hash computed while the bytes stream in.

pub mod credentials;
pub mod distribution;
pub mod layout;
pub mod publish;
pub mod template;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use reqwest::{Method, StatusCode};

use self::credentials::OciCredentialStore;
use self::distribution::{Access, Call, MAX_MANIFEST_BYTES, Registry, RegistryError};
use self::layout::{
    INDEX_ARTIFACT_TYPE, INDEX_MEDIA_TYPE, IndexDoc, MANIFEST_MEDIA_TYPE, ManifestDoc, Selection,
    TARGET_ARTIFACT_TYPE,
};
use self::template::{RepositoryAddr, RepositoryTemplate};
use crate::addr::{Platform, ProviderAddr};
use crate::fetch::{Destination, DownloadError, DownloadProgress, Downloaded, Downloader};
use crate::source::{
    AvailableVersions, MissingPlatform, PackageAuthentication, PackageLocation, PackageMeta,
    Source, SourceError,
};
use crate::verify::hash::PackageHash;
use crate::version::Version;

/// The registries of a run, one client state (and earned tokens) each.
#[derive(Default)]
pub struct Registries {
    client: Option<reqwest::Client>,
    credentials: Arc<OciCredentialStore>,
    known: Mutex<HashMap<String, Arc<Registry>>>,
}

impl Registries {
    pub fn new(client: reqwest::Client, credentials: Arc<OciCredentialStore>) -> Self {
        Registries {
            client: Some(client),
            credentials,
            known: Mutex::new(HashMap::new()),
        }
    }

    pub fn get(&self, host: &str) -> Arc<Registry> {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        known
            .entry(host.to_string())
            .or_insert_with(|| {
                Arc::new(Registry::new(
                    host,
                    self.client.clone().unwrap_or_default(),
                    self.credentials.clone(),
                ))
            })
            .clone()
    }
}

pub struct OciMirror {
    template: RepositoryTemplate,
    registries: Arc<Registries>,
}

impl OciMirror {
    pub fn new(template: RepositoryTemplate, registries: Arc<Registries>) -> Self {
        OciMirror {
            template,
            registries,
        }
    }

    fn repository(&self, provider: &ProviderAddr) -> Result<RepositoryAddr, SourceError> {
        self.template
            .repository(provider)
            .map_err(|err| SourceError::Other(format!("oci_mirror for {provider}: {err}")))
    }
}

fn source_error(repository: &RepositoryAddr, err: RegistryError) -> SourceError {
    match err {
        RegistryError::Unauthorized(message) => SourceError::Unauthorized { message },
        RegistryError::Other(message) => {
            SourceError::Other(format!("OCI repository {repository}: {message}"))
        }
    }
}

/// The content of a manifest named by `reference`, checked against `digest`
/// when the reference is one; `None` when the registry has no such manifest.
pub async fn fetch_manifest(
    registry: &Registry,
    repository: &str,
    reference: &str,
    accept: &str,
    access: Access,
) -> Result<Option<Vec<u8>>, RegistryError> {
    let url = registry.url(repository, &format!("manifests/{reference}"));
    let headers = [("Accept", accept)];
    let call = Call::new(Method::GET, &url, repository, access).headers(&headers);
    let Some(answer) = fetch_found(registry, &call).await? else {
        return Ok(None);
    };
    if reference.starts_with("sha256:") && layout::sha256_digest(&answer.body) != reference {
        return Err(RegistryError::Other(format!(
            "manifest content does not match digest {reference}"
        )));
    }
    Ok(Some(answer.body))
}

/// A GET of a small document: its answer, `None` for 404, an error for any
/// other status.
async fn fetch_found(
    registry: &Registry,
    call: &Call<'_>,
) -> Result<Option<distribution::Answer>, RegistryError> {
    let answer = registry.fetch(call, MAX_MANIFEST_BYTES).await?;
    match answer.status {
        StatusCode::OK => Ok(Some(answer)),
        StatusCode::NOT_FOUND => Ok(None),
        status => Err(RegistryError::Other(format!(
            "GET {} answered {status}",
            call.url
        ))),
    }
}

#[async_trait]
impl Source for OciMirror {
    async fn available_versions(
        &self,
        provider: &ProviderAddr,
    ) -> Result<AvailableVersions, SourceError> {
        let repository = self.repository(provider)?;
        let registry = self.registries.get(&repository.registry);
        let tags = list_tags(&registry, &repository.name)
            .await
            .map_err(|err| source_error(&repository, err))?;
        let Some(tags) = tags else {
            return Err(SourceError::ProviderNotFound {
                provider: provider.clone(),
                sources: vec![self.for_display(provider)],
            });
        };
        let mut versions: Vec<Version> = tags
            .iter()
            .filter_map(|t| layout::version_of_tag(t))
            .collect();
        versions.sort();
        versions.dedup();
        Ok(AvailableVersions {
            versions,
            ..AvailableVersions::default()
        })
    }

    async fn package_meta(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
    ) -> Result<PackageMeta, SourceError> {
        let repository = self.repository(provider)?;
        let registry = self.registries.get(&repository.registry);
        let invalid = |what: String| {
            SourceError::Other(format!(
                "OCI repository {repository} has no valid provider for {provider} {version}: {what}"
            ))
        };
        let tag = layout::tag_for(version);
        let index_bytes = fetch_manifest(
            &registry,
            &repository.name,
            &tag,
            INDEX_MEDIA_TYPE,
            Access::Pull,
        )
        .await
        .map_err(|err| source_error(&repository, err))?
        .ok_or_else(|| invalid(format!("tag {tag:?} does not exist")))?;
        let index: IndexDoc = crate::go_json::from_slice(&index_bytes)
            .map_err(|err| invalid(format!("tag {tag:?}: invalid index manifest: {err}")))?;
        if index.media_type != INDEX_MEDIA_TYPE {
            return Err(invalid(format!(
                "tag {tag:?} names a {:?} document; providers must be tagged as an image index ({INDEX_MEDIA_TYPE})",
                index.media_type
            )));
        }
        if index.artifact_type != INDEX_ARTIFACT_TYPE {
            return Err(invalid(format!(
                "tag {tag:?} names an index of artifact type {:?}, not {INDEX_ARTIFACT_TYPE:?}",
                index.artifact_type
            )));
        }
        let descriptor = match index.select(platform) {
            Ok(descriptor) => descriptor,
            Err(Selection::Missing(available)) => {
                return Err(SourceError::PlatformNotSupported(Box::new(
                    MissingPlatform {
                        provider: provider.clone(),
                        version: version.clone(),
                        platform: platform.clone(),
                        mirror_url: None,
                        available,
                    },
                )));
            }
            Err(Selection::Invalid(why)) => return Err(invalid(why)),
        };
        layout::parse_sha256(&descriptor.digest).map_err(&invalid)?;
        let manifest_bytes = fetch_manifest(
            &registry,
            &repository.name,
            &descriptor.digest,
            MANIFEST_MEDIA_TYPE,
            Access::Pull,
        )
        .await
        .map_err(|err| source_error(&repository, err))?
        .ok_or_else(|| invalid(format!("manifest {} is missing", descriptor.digest)))?;
        let manifest: ManifestDoc = crate::go_json::from_slice(&manifest_bytes)
            .map_err(|err| invalid(format!("invalid image manifest: {err}")))?;
        if manifest.media_type != MANIFEST_MEDIA_TYPE
            || manifest.artifact_type != TARGET_ARTIFACT_TYPE
        {
            return Err(invalid(format!(
                "manifest {} is a {:?} of artifact type {:?}, not an image manifest of {TARGET_ARTIFACT_TYPE:?}",
                descriptor.digest, manifest.media_type, manifest.artifact_type
            )));
        }
        let layer = manifest.package_layer().map_err(invalid)?;
        let digest = layout::parse_sha256(&layer.digest).map_err(invalid)?;
        Ok(PackageMeta {
            provider: provider.clone(),
            version: version.clone(),
            platform: platform.clone(),
            filename: format!(
                "terraform-provider-{}_{version}_{platform}.zip",
                provider.type_name
            ),
            location: PackageLocation::OciBlob(OciBlob {
                registry,
                repository: repository.name.clone(),
                digest,
            }),
            authentication: PackageAuthentication::ContentAddressed(PackageHash::zh_of_digest(
                &digest,
            )),
        })
    }

    fn for_display(&self, provider: &ProviderAddr) -> String {
        match self.template.repository(provider) {
            Ok(repository) => format!("OCI registry provider mirror {repository}"),
            Err(_) => "OCI registry provider mirror".to_string(),
        }
    }
}

/// Every tag of a repository, following the registry's pagination;
/// `None` when the repository does not exist.
pub async fn list_tags(
    registry: &Registry,
    repository: &str,
) -> Result<Option<Vec<String>>, RegistryError> {
    #[derive(serde::Deserialize)]
    struct TagList {
        tags: Vec<String>,
    }
    let mut url = registry.url(repository, "tags/list");
    let mut tags = Vec::new();
    loop {
        let call = Call::new(Method::GET, &url, repository, Access::Pull);
        let Some(answer) = fetch_found(registry, &call).await? else {
            return Ok(None);
        };
        let page: TagList = crate::go_json::from_slice(&answer.body)
            .map_err(|err| RegistryError::Other(format!("invalid tag list from {url}: {err}")))?;
        tags.extend(page.tags);
        // `Link: </v2/NAME/tags/list?n=…&last=…>; rel="next"`
        let next = answer.header("link").and_then(|link| {
            let target = link.split(';').next()?.trim();
            let target = target.strip_prefix('<')?.strip_suffix('>')?;
            url.join(target).ok()
        });
        match next {
            Some(next) if next != url => url = next,
            _ => return Ok(Some(tags)),
        }
    }
}

/// A provider package as a blob in an OCI repository. Its address is its
/// SHA-256, so the bytes are checked against it while they stream in.
#[derive(Clone)]
pub struct OciBlob {
    registry: Arc<Registry>,
    repository: String,
    digest: [u8; 32],
}

impl OciBlob {
    fn digest_text(&self) -> String {
        format!("sha256:{}", hex::encode(self.digest))
    }

    /// Downloads the blob to `dest` with the registry's credentials (not sent
    /// on when the registry redirects to storage elsewhere), checking that
    /// its SHA-256 is the one the blob is addressed by.
    pub async fn download(
        &self,
        downloader: &Downloader,
        dest: Destination<'_>,
        progress: &(dyn Fn(DownloadProgress) + Sync),
    ) -> Result<Downloaded, DownloadError> {
        let url = self
            .registry
            .url(&self.repository, &format!("blobs/{}", self.digest_text()));
        // A HEAD first earns the authorization (and says whether the blob is
        // there at all) without sending a body through the challenge.
        let refused = |message: String| DownloadError::Refused {
            host: self.registry.host().to_string(),
            message,
        };
        let head = self
            .registry
            .send(
                &Call::new(Method::HEAD, &url, &self.repository, Access::Pull),
                Some(std::time::Duration::from_secs(30)),
            )
            .await
            .map_err(|err| refused(err.to_string()))?;
        if head.status() == StatusCode::NOT_FOUND {
            return Err(refused(format!(
                "blob {} is missing from repository {}",
                self.digest_text(),
                self.repository
            )));
        }
        let authorization = self
            .registry
            .authorization(&self.repository, Access::Pull)
            .await;
        let downloaded = downloader
            .download_authorized(&url, authorization.as_deref(), dest, progress)
            .await?;
        if downloaded.sha256 != self.digest {
            return Err(DownloadError::DigestMismatch {
                host: self.registry.host().to_string(),
                expected: self.digest_text(),
                actual: format!("sha256:{}", hex::encode(downloaded.sha256)),
            });
        }
        Ok(downloaded)
    }
}

impl fmt::Display for OciBlob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}@{}",
            self.registry.host(),
            self.repository,
            self.digest_text()
        )
    }
}

impl fmt::Debug for OciBlob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OciBlob({self})")
    }
}

impl PartialEq for OciBlob {
    fn eq(&self, other: &Self) -> bool {
        self.registry.host() == other.registry.host()
            && self.repository == other.repository
            && self.digest == other.digest
    }
}

impl Eq for OciBlob {}
