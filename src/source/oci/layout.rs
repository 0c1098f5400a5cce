//! OpenTofu's provider layout in an OCI repository ("Provider Mirrors in OCI
//! Registries"): a version tag (`+` written `_`) names an image index with
//! artifact type [`INDEX_ARTIFACT_TYPE`]; its descriptors with artifact type
//! [`TARGET_ARTIFACT_TYPE`] name one image manifest per platform, each
//! with exactly one [`PACKAGE_MEDIA_TYPE`] layer: the provider's `.zip`
//! as its origin registry serves it.
//!
//! Documents are decoded with [`crate::go_json`], as OpenTofu's Go decoder
//! reads them; [`IndexDoc`] and [`ManifestDoc`] are also what
//! `providers mirror oci://…` writes, so both ends agree by construction.

use serde::{Deserialize, Serialize};

use crate::addr::Platform;
use crate::version::Version;

pub const INDEX_ARTIFACT_TYPE: &str = "application/vnd.opentofu.provider";
pub const TARGET_ARTIFACT_TYPE: &str = "application/vnd.opentofu.provider-target";
pub const PACKAGE_MEDIA_TYPE: &str = "archive/zip";
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// What `oras push --artifact-type … --artifact-platform …` writes as the
/// config of a platform manifest: the image config type, carrying the
/// platform, which OpenTofu's documentation tells publishers to use.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct Descriptor {
    #[serde(rename = "mediaType")]
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(rename = "artifactType", skip_serializing_if = "String::is_empty")]
    pub artifact_type: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<PlatformDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<std::collections::BTreeMap<String, String>>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct PlatformDoc {
    pub architecture: String,
    pub os: String,
    #[serde(rename = "os.version", skip_serializing_if = "String::is_empty")]
    pub os_version: String,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct IndexDoc {
    #[serde(rename = "schemaVersion")]
    pub schema_version: u32,
    #[serde(rename = "mediaType")]
    pub media_type: String,
    #[serde(rename = "artifactType")]
    pub artifact_type: String,
    pub manifests: Vec<Descriptor>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct ManifestDoc {
    #[serde(rename = "schemaVersion")]
    pub schema_version: u32,
    #[serde(rename = "mediaType")]
    pub media_type: String,
    #[serde(rename = "artifactType")]
    pub artifact_type: String,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
}

/// The config blob of a platform manifest: the platform, as an image
/// config carries it.
#[derive(Serialize)]
pub struct ConfigDoc<'a> {
    pub architecture: &'a str,
    pub os: &'a str,
}

/// OCI tags allow no `+`, so build metadata is written after `_`.
pub fn tag_for(version: &Version) -> String {
    version.to_string().replace('+', "_")
}

/// The version a tag stands for; `None` for tags that are not versions,
/// which OpenTofu ignores.
pub fn version_of_tag(tag: &str) -> Option<Version> {
    Version::parse(&tag.replace('_', "+")).ok()
}

pub fn sha256_digest(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

/// The SHA-256 a `sha256:HEX` digest names.
pub fn parse_sha256(digest: &str) -> Result<[u8; 32], String> {
    let hex_part = digest.strip_prefix("sha256:").ok_or_else(|| {
        format!("unsupported digest {digest:?}: only sha256 digests are supported")
    })?;
    let bytes = hex::decode(hex_part)
        .ok()
        .filter(|b| b.len() == 32 && hex_part.bytes().all(|c| !c.is_ascii_uppercase()))
        .ok_or_else(|| format!("invalid digest {digest:?}"))?;
    let mut out = [0u8; 32];
    out.copy_from_slice(&bytes);
    Ok(out)
}

impl IndexDoc {
    /// The one platform manifest for `platform`; when there is none, the
    /// platforms the index does have. Descriptors of other artifact types
    /// are skipped, and so are those that name an OS version, as OpenTofu
    /// does, so that later formats can sit beside this one.
    pub fn select(&self, platform: &Platform) -> Result<&Descriptor, Selection> {
        let targets: Vec<&Descriptor> = self
            .manifests
            .iter()
            .filter(|d| d.artifact_type == TARGET_ARTIFACT_TYPE)
            .collect();
        let mut available = Vec::new();
        let mut matching = Vec::new();
        for descriptor in &targets {
            if descriptor.media_type != MANIFEST_MEDIA_TYPE {
                return Err(Selection::Invalid(format!(
                    "provider image manifest has unsupported media type {:?}",
                    descriptor.media_type
                )));
            }
            let Some(p) = &descriptor.platform else {
                return Err(Selection::Invalid(
                    "provider image manifest lacks the required platform constraints".to_string(),
                ));
            };
            if p.os_version.is_empty() && p.os == platform.os && p.architecture == platform.arch {
                matching.push(*descriptor);
            } else {
                available.push(format!("{}_{}", p.os, p.architecture));
            }
        }
        match matching.as_slice() {
            [one] => Ok(one),
            [] if !targets.is_empty() => {
                available.sort();
                available.dedup();
                Err(Selection::Missing(available))
            }
            [] => Err(Selection::Invalid(
                "the index lists no manifest with artifact type \"application/vnd.opentofu.provider-target\"; is this a container image rather than an OpenTofu provider?".to_string(),
            )),
            _ => Err(Selection::Invalid(format!(
                "ambiguous manifest has multiple descriptors for platform {platform}"
            ))),
        }
    }
}

#[derive(Debug)]
pub enum Selection {
    /// The index is valid but has no manifest for the platform; these are
    /// the platforms it has.
    Missing(Vec<String>),
    Invalid(String),
}

impl ManifestDoc {
    /// The one `archive/zip` layer.
    pub fn package_layer(&self) -> Result<&Descriptor, String> {
        let zips: Vec<&Descriptor> = self
            .layers
            .iter()
            .filter(|l| l.media_type == PACKAGE_MEDIA_TYPE)
            .collect();
        match zips.as_slice() {
            [one] => Ok(one),
            [] => Err(format!(
                "image manifest contains no layers of type {PACKAGE_MEDIA_TYPE:?}"
            )),
            _ => Err("ambiguous manifest declares multiple eligible provider packages".to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_write_build_metadata_after_an_underscore() {
        let version = Version::parse("1.2.3-beta.1+build.5").unwrap();
        assert_eq!(tag_for(&version), "1.2.3-beta.1_build.5");
        assert_eq!(version_of_tag("1.2.3-beta.1_build.5"), Some(version));
        assert_eq!(version_of_tag("latest"), None);
    }

    #[test]
    fn documents_decode_as_go_reads_them() {
        let index: IndexDoc = crate::go_json::from_slice(
            br#"{"SchemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                 "artifactType": "application/vnd.opentofu.provider", "annotations": null,
                 "manifests": [
                   {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:aa",
                    "size": 3, "artifactType": "application/vnd.opentofu.provider-target",
                    "platform": {"os": "linux", "architecture": "amd64", "extra": 1}},
                   {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:bb",
                    "size": 3, "artifactType": "application/vnd.opentofu.provider-target",
                    "platform": {"os": "darwin", "architecture": "arm64"}},
                   {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:cc",
                    "size": 3, "artifactType": "application/vnd.example.sbom"}
                 ]}"#,
        )
        .unwrap();
        assert_eq!(index.schema_version, 2);
        let linux = Platform::parse("linux_amd64").unwrap();
        assert_eq!(index.select(&linux).unwrap().digest, "sha256:aa");
        match index.select(&Platform::parse("windows_amd64").unwrap()) {
            Err(Selection::Missing(available)) => {
                assert_eq!(available, ["darwin_arm64", "linux_amd64"])
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_manifest_needs_exactly_one_zip_layer() {
        let layer = |media: &str| Descriptor {
            media_type: media.to_string(),
            ..Descriptor::default()
        };
        let mut manifest = ManifestDoc {
            layers: vec![layer("text/plain"), layer(PACKAGE_MEDIA_TYPE)],
            ..ManifestDoc::default()
        };
        assert!(manifest.package_layer().is_ok());
        manifest.layers.push(layer(PACKAGE_MEDIA_TYPE));
        assert!(manifest.package_layer().is_err());
        manifest.layers.clear();
        assert!(manifest.package_layer().is_err());
    }
}
