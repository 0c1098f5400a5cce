//! Publishing provider packages to an OCI registry in OpenTofu's layout
//! ([`crate::source::oci::layout`]), where `oci_mirror` (tfinstall's or
//! OpenTofu's) installs them from: what `providers mirror
//! oci://HOST[:PORT]/TEMPLATE` and a `serve` store shared through OCI do.
//!
//! What is pushed has been verified already: `providers mirror` first
//! mirrors the packages into a temporary directory exactly as `providers
//! mirror DIR` would, and `serve` pushes what its store holds. Per provider
//! version, the
//! blobs and platform manifests go up first and the tagged index last, so
//! no reader ever sees a version whose platforms are missing. Whatever the
//! registry already has (blobs by `HEAD`, manifests by digest) is not sent
//! again, so a re-run uploads nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use reqwest::{Method, StatusCode};

use crate::addr::pattern::ProviderPattern;
use crate::addr::{Platform, ProviderAddr};
use crate::diag::{Diagnostic, Diagnostics};
use crate::source::oci::distribution::{Access, Body, Call, Registry, RegistryError};
use crate::source::oci::layout::{
    self, CONFIG_MEDIA_TYPE, ConfigDoc, Descriptor, INDEX_ARTIFACT_TYPE, INDEX_MEDIA_TYPE,
    IndexDoc, MANIFEST_MEDIA_TYPE, ManifestDoc, PACKAGE_MEDIA_TYPE, PlatformDoc,
    TARGET_ARTIFACT_TYPE,
};
use crate::source::oci::template::{RepositoryAddr, RepositoryTemplate};
use crate::source::oci::{Registries, fetch_manifest};
use crate::verify::hash::sha256_file;
use crate::version::Version;

/// The template of an `oci://` target, checked against the providers it
/// will hold: a part of their addresses they do not all share must be
/// interpolated, or two providers would land in one repository.
pub fn parse_target(
    target: &str,
    providers: &[&ProviderAddr],
) -> Result<RepositoryTemplate, Diagnostic> {
    let patterns: Vec<ProviderPattern> = providers.iter().map(|p| (*p).into()).collect();
    RepositoryTemplate::parse(target, &patterns).map_err(|err| {
        Diagnostic::error(
            "Invalid OCI mirror target",
            format!(
                "Cannot publish to oci://{target}: {err}. Write the target as oci://HOST[:PORT]/REPOSITORY, where REPOSITORY may use ${{hostname}}, ${{namespace}} and ${{type}}, e.g. 'oci://registry.example.com/tf-providers/${{namespace}}/${{type}}'."
            ),
        )
    })
}

/// One package, mirrored and verified, waiting in the staging directory.
pub struct Staged {
    pub provider: ProviderAddr,
    pub version: Version,
    pub platform: Platform,
    pub archive: PathBuf,
}

#[derive(Default)]
struct Counts {
    blobs_uploaded: usize,
    blobs_present: usize,
    manifests_pushed: usize,
    manifests_present: usize,
}

/// Pushes every staged package; one line per provider version, then the
/// summary line.
pub async fn push(
    template: &RepositoryTemplate,
    registries: &Registries,
    staged: Vec<Staged>,
    say: &(dyn Fn(String) + Sync),
) -> Result<(), Diagnostics> {
    let mut releases: BTreeMap<(ProviderAddr, Version), Vec<Staged>> = BTreeMap::new();
    for package in staged {
        releases
            .entry((package.provider.clone(), package.version.clone()))
            .or_default()
            .push(package);
    }
    let mut counts = Counts::default();
    for ((provider, version), packages) in releases {
        let repository = template.repository(&provider).map_err(|err| {
            Diagnostics::from(Diagnostic::error("Invalid OCI mirror target", err))
        })?;
        let registry = registries.get(&repository.registry);
        let tag = layout::tag_for(&version);
        push_release(&registry, &repository, &tag, packages, &mut counts)
            .await
            .map_err(|err| {
                Diagnostics::from(Diagnostic::error(
                    "Failed to publish provider",
                    format!(
                        "Could not publish {} v{version} to {repository}:{tag}: {err}",
                        provider.for_display()
                    ),
                ))
            })?;
        say(format!(
            "- Published {} v{version} to {repository}:{tag}",
            provider.for_display()
        ));
    }
    say(format!(
        "\n{} blobs uploaded, {} already present; {} manifests pushed, {} already present.",
        counts.blobs_uploaded,
        counts.blobs_present,
        counts.manifests_pushed,
        counts.manifests_present
    ));
    Ok(())
}

async fn push_release(
    registry: &Registry,
    repository: &RepositoryAddr,
    tag: &str,
    mut packages: Vec<Staged>,
    counts: &mut Counts,
) -> Result<(), RegistryError> {
    packages.sort_by(|a, b| a.platform.cmp(&b.platform));
    let name = repository.name.as_str();
    let mut manifests = Vec::new();
    for package in &packages {
        let (os, arch) = (&package.platform.os, &package.platform.arch);
        let archive = package.archive.clone();
        let (digest, size) = crate::fsutil::blocking(move || {
            let size = std::fs::metadata(&archive)?.len();
            let digest = sha256_file(&archive)?;
            Ok((format!("sha256:{}", hex::encode(digest)), size))
        })
        .await
        .map_err(|err| RegistryError::Other(err.to_string()))?;
        ensure_blob(
            registry,
            name,
            &digest,
            Body::File(package.archive.clone()),
            counts,
        )
        .await?;
        let config = serde_json::to_vec(&ConfigDoc {
            architecture: arch,
            os,
        })
        .map_err(|err| RegistryError::Other(err.to_string()))?;
        let config_digest = layout::sha256_digest(&config);
        let config_size = config.len() as u64;
        ensure_blob(
            registry,
            name,
            &config_digest,
            Body::Bytes(config.into()),
            counts,
        )
        .await?;
        let filename = format!(
            "terraform-provider-{}_{}_{}.zip",
            package.provider.type_name, package.version, package.platform
        );
        let manifest = ManifestDoc {
            schema_version: 2,
            media_type: MANIFEST_MEDIA_TYPE.to_string(),
            artifact_type: TARGET_ARTIFACT_TYPE.to_string(),
            config: Descriptor {
                media_type: CONFIG_MEDIA_TYPE.to_string(),
                digest: config_digest,
                size: config_size,
                ..Descriptor::default()
            },
            layers: vec![Descriptor {
                media_type: PACKAGE_MEDIA_TYPE.to_string(),
                digest,
                size,
                annotations: Some(BTreeMap::from([(
                    "org.opencontainers.image.title".to_string(),
                    filename,
                )])),
                ..Descriptor::default()
            }],
        };
        let bytes =
            serde_json::to_vec(&manifest).map_err(|err| RegistryError::Other(err.to_string()))?;
        let digest = layout::sha256_digest(&bytes);
        ensure_manifest(registry, name, &digest, MANIFEST_MEDIA_TYPE, &bytes, counts).await?;
        manifests.push(Descriptor {
            media_type: MANIFEST_MEDIA_TYPE.to_string(),
            digest,
            size: bytes.len() as u64,
            artifact_type: TARGET_ARTIFACT_TYPE.to_string(),
            platform: Some(PlatformDoc {
                architecture: arch.clone(),
                os: os.clone(),
                os_version: String::new(),
            }),
            annotations: None,
        });
    }
    let mut index = IndexDoc {
        schema_version: 2,
        media_type: INDEX_MEDIA_TYPE.to_string(),
        artifact_type: INDEX_ARTIFACT_TYPE.to_string(),
        manifests,
    };
    // Platforms the tag already has and this run did not mirror stay
    // listed, as a directory mirror's index keeps them.
    if let Some(existing) =
        fetch_manifest(registry, name, tag, INDEX_MEDIA_TYPE, Access::Push).await?
        && let Ok(existing) = crate::go_json::from_slice::<IndexDoc>(&existing)
        && existing.artifact_type == INDEX_ARTIFACT_TYPE
    {
        for descriptor in existing.manifests {
            let same_platform = |d: &Descriptor| d.platform == descriptor.platform;
            if !index.manifests.iter().any(same_platform) {
                index.manifests.push(descriptor);
            }
        }
        index.manifests.sort_by_key(|d| {
            d.platform
                .as_ref()
                .map(|p| (p.os.clone(), p.architecture.clone()))
        });
    }
    let bytes = serde_json::to_vec(&index).map_err(|err| RegistryError::Other(err.to_string()))?;
    ensure_manifest(registry, name, tag, INDEX_MEDIA_TYPE, &bytes, counts).await
}

/// Uploads a blob unless the repository has it (one `POST` then one
/// monolithic `PUT`).
async fn ensure_blob(
    registry: &Registry,
    repository: &str,
    digest: &str,
    body: Body,
    counts: &mut Counts,
) -> Result<(), RegistryError> {
    let url = registry.url(repository, &format!("blobs/{digest}"));
    let head = registry
        .send(
            &Call::new(Method::HEAD, &url, repository, Access::Push),
            None,
        )
        .await?;
    if head.status() == StatusCode::OK {
        counts.blobs_present += 1;
        return Ok(());
    }
    let start_url = registry.url(repository, "blobs/uploads/");
    let started = registry
        .send(
            &Call::new(Method::POST, &start_url, repository, Access::Push),
            None,
        )
        .await?;
    if started.status() != StatusCode::ACCEPTED {
        return Err(RegistryError::Other(format!(
            "POST {start_url} answered {}",
            started.status()
        )));
    }
    let location = started
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| RegistryError::Other("the upload answer has no Location".to_string()))?;
    let mut upload_url = start_url
        .join(location)
        .map_err(|err| RegistryError::Other(format!("upload Location {location:?}: {err}")))?;
    upload_url.query_pairs_mut().append_pair("digest", digest);
    let done = registry
        .send(
            &Call::new(Method::PUT, &upload_url, repository, Access::Push)
                .headers(&[("Content-Type", "application/octet-stream")])
                .body(body),
            None,
        )
        .await?;
    if done.status() != StatusCode::CREATED {
        let status = done.status();
        let text = done.text().await.unwrap_or_default();
        return Err(RegistryError::Other(format!(
            "uploading blob {digest} answered {status}: {}",
            text.trim()
        )));
    }
    counts.blobs_uploaded += 1;
    Ok(())
}

/// Puts a manifest at `reference` unless the registry already has these
/// exact bytes there (compared by digest).
async fn ensure_manifest(
    registry: &Registry,
    repository: &str,
    reference: &str,
    media_type: &str,
    bytes: &[u8],
    counts: &mut Counts,
) -> Result<(), RegistryError> {
    let digest = layout::sha256_digest(bytes);
    let url = registry.url(repository, &format!("manifests/{reference}"));
    let head = registry
        .send(
            &Call::new(Method::HEAD, &url, repository, Access::Push)
                .headers(&[("Accept", media_type)]),
            None,
        )
        .await?;
    let present = head.status() == StatusCode::OK
        && head
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            == Some(digest.as_str());
    if present {
        counts.manifests_present += 1;
        return Ok(());
    }
    let put = registry
        .send(
            &Call::new(Method::PUT, &url, repository, Access::Push)
                .headers(&[("Content-Type", media_type)])
                .body(Body::Bytes(bytes.to_vec().into())),
            None,
        )
        .await?;
    if put.status() != StatusCode::CREATED {
        let status = put.status();
        let text = put.text().await.unwrap_or_default();
        return Err(RegistryError::Other(format!(
            "putting manifest {reference} answered {status}: {}",
            text.trim()
        )));
    }
    counts.manifests_pushed += 1;
    Ok(())
}

/// Where the packages wait before they are pushed.
pub fn staging_dir() -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix("tfinstall-oci-publish-")
        .tempdir()
}

pub fn is_oci_target(target: &Path) -> Option<&str> {
    target.to_str()?.strip_prefix("oci://")
}
