//! OpenTofu 1.10's module packages in OCI registries: `oci://HOST/REPO`
//! with `?tag=` or `?digest=` names an image manifest of artifact type
//! [`MODULE_ARTIFACT_TYPE`] whose one `archive/zip` layer is the package.
//! The manifest and the blob come through the Distribution client of the
//! OCI provider mirror (its credentials and tokens), the blob through the
//! run's downloader, checked against its digest as it streams in.

use std::path::Path;

use reqwest::Method;

use super::addr::{OciAddr, OciReference};
use super::{PackageAddr, PackageError, PackageFetcher, PackageIdentity};
use crate::fetch::{Destination, Downloader};
use crate::package::extract::{ArchiveFormat, ExtractLimits, extract_module_archive};
use crate::source::oci::distribution::Access;
use crate::source::oci::fetch_manifest;
use crate::source::oci::layout::{
    MANIFEST_MEDIA_TYPE, ManifestDoc, PACKAGE_MEDIA_TYPE, parse_sha256,
};

/// The artifact type of a module package's manifest.
pub const MODULE_ARTIFACT_TYPE: &str = "application/vnd.opentofu.modulepkg";

impl PackageFetcher {
    pub(super) async fn fill_oci(
        &self,
        oci: &OciAddr,
        tree: &Path,
        scratch: &Path,
    ) -> Result<PackageIdentity, PackageError> {
        let shown = PackageAddr::Oci(oci.clone()).to_string();
        let refused = |message: String| PackageError::Oci {
            url: shown.clone(),
            message,
        };
        let registry = self.oci.get(&oci.host);
        let reference = match &oci.reference {
            OciReference::Tag(tag) => tag,
            OciReference::Digest(digest) => digest,
        };
        let manifest = fetch_manifest(
            &registry,
            &oci.repository,
            reference,
            MANIFEST_MEDIA_TYPE,
            Access::Pull,
        )
        .await
        .map_err(|err| refused(err.to_string()))?
        .ok_or_else(|| refused(format!("the registry has no manifest {reference}")))?;
        let manifest: ManifestDoc = crate::go_json::from_slice(&manifest)
            .map_err(|err| refused(format!("its manifest is not valid: {err}")))?;
        if manifest.artifact_type != MODULE_ARTIFACT_TYPE {
            return Err(refused(format!(
                "its manifest has artifact type {:?}, not a module package's {MODULE_ARTIFACT_TYPE:?}",
                manifest.artifact_type
            )));
        }
        let layers: Vec<_> = manifest
            .layers
            .iter()
            .filter(|layer| layer.media_type == PACKAGE_MEDIA_TYPE)
            .collect();
        let [layer] = layers[..] else {
            return Err(refused(format!(
                "its manifest has {} {PACKAGE_MEDIA_TYPE} layers; a module package has exactly one",
                layers.len()
            )));
        };
        let digest = parse_sha256(&layer.digest).map_err(refused)?;
        let url = registry.url(&oci.repository, &format!("blobs/{}", layer.digest));
        // The manifest's request earned the pull token, if one is needed.
        let head = registry
            .send(
                &crate::source::oci::distribution::Call::new(
                    Method::HEAD,
                    &url,
                    &oci.repository,
                    Access::Pull,
                ),
                None,
            )
            .await
            .map_err(|err| refused(err.to_string()))?;
        if !head.status().is_success() {
            return Err(refused(format!(
                "blob {} answers {}",
                layer.digest,
                crate::http::status_line(head.status())
            )));
        }
        let authorization = registry.authorization(&oci.repository, Access::Pull).await;
        let archive = scratch.join("archive");
        let downloader = Downloader::new(self.client.clone(), self.settings.clone());
        let downloaded = downloader
            .download_authorized(
                &url,
                authorization.as_deref(),
                Destination::File(&archive),
                &|_| {},
            )
            .await
            .map_err(|source| PackageError::Download {
                url: shown.clone(),
                source,
            })?;
        if downloaded.sha256 != digest {
            return Err(refused(format!(
                "blob {} holds content of digest sha256:{}; the registry's copy is damaged or was tampered with",
                layer.digest,
                hex::encode(downloaded.sha256)
            )));
        }
        let limits = ExtractLimits {
            max_total_bytes: self.settings.max_bytes,
            ..ExtractLimits::default()
        };
        let tree_path = tree.to_path_buf();
        let extracted = tokio::task::spawn_blocking(move || {
            extract_module_archive(&archive, ArchiveFormat::Zip, &tree_path, &limits)
        })
        .await
        .map_err(|err| PackageError::Io {
            what: "unpack the archive".to_owned(),
            source: std::io::Error::other(err),
        })?;
        extracted.map_err(|source| PackageError::Extract {
            url: shown.clone(),
            source,
        })?;
        Ok(PackageIdentity::Archive {
            url: shown,
            sha256: hex::encode(digest),
        })
    }
}
