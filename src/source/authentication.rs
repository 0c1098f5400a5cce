//! Package authentication, after Terraform's
//! `internal/getproviders/package_authentication.go`: an archive judged by
//! what its source said of it ([`PackageAuthentication`]), once its SHA-256
//! is known, before anything unpacked from it is used; and a registry's
//! signed checksum list judged on its own, for the hashes it vouches for
//! every platform's archive, whether or not an archive is fetched.

use std::future::Future;

use futures_util::TryFutureExt;

use crate::addr::Platform;
use crate::engine::Engine;
use crate::policy::Refusal;
use crate::source::{
    PackageAuthentication, PackageMeta, RegistryPackages, SignedChecksums, SignedDocuments,
    SourceError,
};
use crate::verify::hash::PackageHash;
use crate::verify::signature::{SignatureCheck, verify_sums_signature};
use crate::verify::sums::{acceptable_hashes, checksum_for};
use crate::verify::{AuthError, AuthResult, expired_keys_refused, signature_may_be_skipped};

/// Why a package could not be staged. A registry's checksum documents fail
/// as a source query does, which is how Terraform (fetching them before the
/// archive) reports it; a refusal by the provider policy says which rule;
/// everything else is a failure of the package itself.
pub enum StageError<E = String> {
    Source(SourceError),
    Package(E),
    /// The provider policy refused the package once it was authenticated.
    Refused(Box<Refusal>),
}

/// Runs `download` while a registry's checksum documents arrive (other
/// sources have none to wait for). A failure of the documents ends the
/// download at once and is the one reported, since it would have come
/// first had they been fetched beforehand.
pub async fn alongside_documents<T, E>(
    authentication: &PackageAuthentication,
    download: impl Future<Output = Result<T, E>>,
) -> Result<T, StageError<E>> {
    let PackageAuthentication::Signed(signed) = authentication else {
        return download.await.map_err(StageError::Package);
    };
    let documents = &signed.documents;
    let download = async {
        match download.await {
            Ok(done) => Ok(done),
            Err(err) => Err(match documents.get().await {
                Err(source) => StageError::Source(source),
                Ok(_) => StageError::Package(err),
            }),
        }
    };
    let (_, done) =
        futures_util::future::try_join(documents.get().map_err(StageError::Source), download)
            .await?;
    Ok(done)
}

/// Runs the source's authentication for an archive whose SHA-256 and size
/// are known (Terraform's `internal/getproviders/package_authentication.go`:
/// the registry chain, or a mirror's hashes). It runs before anything
/// unpacked from the archive is used.
pub async fn authenticate_archive(
    meta: &PackageMeta,
    digest: &[u8; 32],
    zh: &PackageHash,
    size: u64,
) -> Result<(AuthResult, Vec<PackageHash>), String> {
    match &meta.authentication {
        PackageAuthentication::None => Ok((AuthResult::Unauthenticated, Vec::new())),
        PackageAuthentication::Hashes { listed, trusted } => {
            if !listed.iter().any(PackageHash::is_preferred) {
                return Err("this version of Terraform does not support any of the checksum formats given for this provider".to_string());
            }
            let zh_listed = listed.iter().any(|h| h.scheme() == "zh");
            let h1_listed = listed.iter().any(|h| h.scheme() == "h1");
            if zh_listed && !h1_listed && !listed.contains(zh) {
                return Err(mirror_mismatch(listed));
            }
            // OpenTofu records each listed hash the package matched, the
            // archive's `zh:` among them; Terraform only the `h1:`.
            let mut recorded = trusted.clone();
            if Engine::current() == Engine::OpenTofu && listed.contains(zh) {
                recorded.push(zh.clone());
            }
            Ok((AuthResult::VerifiedChecksum, recorded))
        }
        PackageAuthentication::ContentAddressed(address) if address == zh => {
            Ok((AuthResult::VerifiedChecksum, vec![zh.clone()]))
        }
        PackageAuthentication::ContentAddressed(address) => {
            Err(mirror_mismatch(std::slice::from_ref(address)))
        }
        PackageAuthentication::Signed(signed) => {
            authenticate_signed(meta, signed, Some((digest, size))).await
        }
    }
}

/// The checks of a registry's signed checksum list, with the archive they
/// vouch for when it is at hand (its SHA-256 and size), or without it: the
/// list names this package's `shasum` and its signature holds, so its
/// hashes of every platform's archive may go into the lock file, whether
/// or not this platform's archive is ever fetched. Returns the result and
/// those hashes.
pub async fn authenticate_signed(
    meta: &PackageMeta,
    signed: &SignedChecksums,
    archive: Option<(&[u8; 32], u64)>,
) -> Result<(AuthResult, Vec<PackageHash>), String> {
    let digest = archive.map(|(digest, _)| digest);
    let documents = signed.documents.get().await.map_err(|e| e.to_string())?;
    let mut release = acceptable_hashes(&documents.sha256sums, &meta.filename, &meta.platform);
    if let Some(packages) = &signed.packages {
        check_registry_packages(&meta.platform, packages, archive.map(|(_, size)| size))?;
        // OpenTofu records what its registry reports, unsigned, only where
        // it would install without a signature; elsewhere it keeps signed
        // hashes alone, which the checksum list gives.
        if signature_may_be_skipped(&meta.provider) {
            release.extend(
                packages
                    .platforms
                    .values()
                    .flat_map(|p| p.hashes.iter().filter(|h| h.is_preferred()).cloned()),
            );
        }
    }
    if signed.keys.is_empty() && signature_may_be_skipped(&meta.provider) {
        verify_checksums(meta, signed, &documents, digest).map_err(|e| e.to_string())?;
        return Ok((AuthResult::SigningSkipped, release));
    }
    let check = verify_signed(meta, signed, &documents, digest).map_err(|e| e.to_string())?;
    if check.key_expired && expired_keys_refused() {
        return Err("the provider is not signed with a valid signing key; please contact the provider author (authentication signature from unknown issuer)".to_owned());
    }
    Ok((AuthResult::Signed(check), release))
}

/// OpenTofu's checks of a registry's `packages` against the one archive
/// downloaded, in its order and words: this platform is listed with the
/// archive's size (when the archive is at hand), and each `zh:` it lists
/// is the document's `shasum` (which the signed checksum list then vouches
/// for).
fn check_registry_packages(
    platform: &Platform,
    packages: &RegistryPackages,
    size: Option<u64>,
) -> Result<(), String> {
    let Some(package) = packages.platforms.get(platform) else {
        return Err(format!(
            "registry response missing package with platform \"{platform}\""
        ));
    };
    if package.size <= 0 {
        return Err(format!(
            "registry response has invalid package size {}",
            package.size
        ));
    }
    if let Some(size) = size
        && u64::try_from(package.size) != Ok(size)
    {
        return Err(format!(
            "registry response indicates a package of size {}, but received a package of size {size}",
            package.size
        ));
    }
    let mut listed = false;
    for zh in package.hashes.iter().filter(|h| h.scheme() == "zh") {
        if zh.value() != packages.shasum {
            return Err(format!(
                "registry response expected sha256sum is {:?}, which does not match the platform's value of {:?}",
                packages.shasum,
                zh.value()
            ));
        }
        listed = true;
    }
    if !listed {
        return Err(
            "registry response does not contain matching sha256sum package entry and is invalid"
                .to_owned(),
        );
    }
    Ok(())
}

fn verify_signed(
    meta: &PackageMeta,
    signed: &SignedChecksums,
    documents: &SignedDocuments,
    digest: Option<&[u8; 32]>,
) -> Result<SignatureCheck, AuthError> {
    verify_checksums(meta, signed, documents, digest)?;
    verify_sums_signature(&documents.sha256sums, &documents.signature, &signed.keys)
}

/// The registry's `shasum` is the one the checksum list gives the archive,
/// and the archive (when at hand) has it.
fn verify_checksums(
    meta: &PackageMeta,
    signed: &SignedChecksums,
    documents: &SignedDocuments,
    digest: Option<&[u8; 32]>,
) -> Result<(), AuthError> {
    let listed = checksum_for(&documents.sha256sums, &meta.filename)?;
    if listed != signed.shasum {
        return Err(AuthError(format!(
            "checksum list has unexpected SHA-256 hash {} (expected {})",
            hex::encode(listed),
            hex::encode(signed.shasum)
        )));
    }
    if let Some(digest) = digest
        && *digest != signed.shasum
    {
        return Err(AuthError(format!(
            "archive has incorrect checksum zh:{} (expected zh:{})",
            hex::encode(digest),
            hex::encode(signed.shasum)
        )));
    }
    Ok(())
}

/// The check that waits for the package's files to be hashed: a mirror
/// that listed hashes vouches for a package with one of them, the
/// archive's `zh:` or the files' `h1:`.
pub fn authenticate_files(
    meta: &PackageMeta,
    zh: &PackageHash,
    h1: &PackageHash,
) -> Result<(), String> {
    match &meta.authentication {
        PackageAuthentication::Hashes { listed, .. }
            if !listed.contains(zh) && !listed.contains(h1) =>
        {
            Err(mirror_mismatch(listed))
        }
        _ => Ok(()),
    }
}

/// Terraform's words for a package that matches none of the hashes a
/// mirror listed for it.
pub fn mirror_mismatch(listed: &[PackageHash]) -> String {
    let required: Vec<&PackageHash> = listed.iter().filter(|h| h.is_preferred()).collect();
    if required.len() == 1 {
        format!(
            "provider package doesn't match the expected checksum \"{}\"",
            required[0]
        )
    } else {
        "provider package doesn't match the any of the expected checksums".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::{Hostname, ProviderAddr};
    use crate::source::{ChecksumDocuments, PackageLocation};
    use crate::verify::signature::{SigningKey, Trust};
    use crate::version::Version;

    const VECTORS: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/vectors/hashicorp/terraform/extracted/internal/getproviders/package_authentication_test/"
    );

    fn vector(name: &str) -> Vec<u8> {
        std::fs::read(format!("{VECTORS}{name}")).unwrap()
    }

    /// The registry's answer for `hashicorp/null` 3.1.0 on linux_amd64, with
    /// the real HashiCorp-signed checksum list and HashiCorp's key listed.
    fn null_310(shasum_hex: &str) -> PackageMeta {
        let shasum: [u8; 32] = hex::decode(shasum_hex).unwrap().try_into().unwrap();
        PackageMeta {
            provider: ProviderAddr::new(Hostname::default_registry(), "hashicorp", "null"),
            version: Version::new(3, 1, 0),
            platform: Platform::parse("linux_amd64").unwrap(),
            filename: "terraform-provider-null_3.1.0_linux_amd64.zip".to_owned(),
            location: PackageLocation::Http("https://releases.example/null.zip".parse().unwrap()),
            authentication: PackageAuthentication::Signed(Box::new(SignedChecksums {
                shasum,
                packages: None,
                documents: ChecksumDocuments::fetch(std::future::ready(Ok(SignedDocuments {
                    sha256sums: vector("terraform-provider-null_3.1.0_SHA256SUMS"),
                    signature: vector("terraform-provider-null_3.1.0_SHA256SUMS.sig"),
                }))),
                keys: vec![SigningKey {
                    ascii_armor: include_str!("../verify/keys/hashicorp-public-key.asc").to_owned(),
                    trust_signature: String::new(),
                }],
            })),
        }
    }

    const LINUX_AMD64: &str = "53e30545ff8926a8e30ad30648991ca8b93b6fa496272cd23b26763c8ee84515";

    #[tokio::test]
    async fn the_real_hashicorp_checksum_list_authenticates_as_official() {
        let meta = null_310(LINUX_AMD64);
        let digest: [u8; 32] = hex::decode(LINUX_AMD64).unwrap().try_into().unwrap();
        let (auth, hashes) =
            authenticate_archive(&meta, &digest, &PackageHash::zh_of_digest(&digest), 0)
                .await
                .unwrap();
        let AuthResult::Signed(check) = &auth else {
            panic!("not signed: {auth}");
        };
        assert_eq!(check.trust, Trust::HashiCorp);
        assert_eq!(check.key_id, "34365D9472D7468F");
        assert_eq!(auth.to_string(), "signed by HashiCorp");
        assert!(!auth.is_third_party_signed(), "no key ID, no footer");
        // Every platform's zip in the signed list goes into the lock file.
        assert_eq!(hashes.len(), 11);
        assert!(hashes.contains(&PackageHash::parse(&format!("zh:{LINUX_AMD64}")).unwrap()));
    }

    #[tokio::test]
    async fn the_real_checksum_list_still_catches_a_wrong_archive() {
        let meta = null_310(LINUX_AMD64);
        let digest = [7u8; 32];
        let err = authenticate_archive(&meta, &digest, &PackageHash::zh_of_digest(&digest), 0)
            .await
            .unwrap_err();
        assert_eq!(
            err,
            format!(
                "archive has incorrect checksum zh:{} (expected zh:{LINUX_AMD64})",
                hex::encode(digest)
            )
        );

        let other_platform = "02a1675fd8de126a00460942aaae242e65ca3380b5bb192e8773ef3da9073fd2";
        let err = authenticate_archive(
            &null_310(other_platform),
            &digest,
            &PackageHash::zh_of_digest(&digest),
            0,
        )
        .await
        .unwrap_err();
        assert_eq!(
            err,
            format!(
                "checksum list has unexpected SHA-256 hash {LINUX_AMD64} (expected {other_platform})"
            )
        );
    }

    /// The checksum list vouches for the release without any archive:
    /// the signature and the registry's `shasum` are checked, the
    /// archive's own digest is not there to be.
    #[tokio::test]
    async fn the_signed_list_vouches_for_every_platform_without_an_archive() {
        let meta = null_310(LINUX_AMD64);
        let PackageAuthentication::Signed(signed) = &meta.authentication else {
            unreachable!()
        };
        let (auth, hashes) = authenticate_signed(&meta, signed, None).await.unwrap();
        assert_eq!(auth.to_string(), "signed by HashiCorp");
        assert_eq!(hashes.len(), 11);

        let other_platform = "02a1675fd8de126a00460942aaae242e65ca3380b5bb192e8773ef3da9073fd2";
        let meta = null_310(other_platform);
        let PackageAuthentication::Signed(signed) = &meta.authentication else {
            unreachable!()
        };
        let err = authenticate_signed(&meta, signed, None).await.unwrap_err();
        assert!(
            err.starts_with("checksum list has unexpected SHA-256 hash"),
            "{err}"
        );
    }

    /// OpenTofu's `registryPackageAuthentication` cases
    /// (internal/getproviders/package_authentication_test.go), with its
    /// messages.
    #[test]
    fn registry_packages_are_checked_as_opentofu_checks_them() {
        let shasum = LINUX_AMD64.to_owned();
        let here = Platform::parse("linux_amd64").unwrap();
        let packages = |size: i64, hashes: &[&str]| RegistryPackages {
            shasum: shasum.clone(),
            platforms: [(
                here.clone(),
                crate::source::PlatformPackage {
                    hashes: hashes
                        .iter()
                        .map(|h| PackageHash::parse(h).unwrap())
                        .collect(),
                    size,
                },
            )]
            .into(),
        };
        let zh = format!("zh:{LINUX_AMD64}");
        let h1 = "h1:6FG2Xh7Bfp8mN3qvEnNTy39m5ZqtzEQ/BhYhOyyyjn0=";
        assert_eq!(
            check_registry_packages(&here, &packages(294, &[h1, &zh]), Some(294)),
            Ok(())
        );
        let err = |platform: &str, packages: RegistryPackages, size| {
            check_registry_packages(&Platform::parse(platform).unwrap(), &packages, Some(size))
                .unwrap_err()
        };
        assert_eq!(
            err("darwin_arm64", packages(294, &[&zh]), 294),
            "registry response missing package with platform \"darwin_arm64\""
        );
        assert_eq!(
            err("linux_amd64", packages(-200, &[&zh]), 294),
            "registry response has invalid package size -200"
        );
        assert_eq!(
            err("linux_amd64", packages(295, &[&zh]), 294),
            "registry response indicates a package of size 295, but received a package of size 294"
        );
        let other = "zh:02a1675fd8de126a00460942aaae242e65ca3380b5bb192e8773ef3da9073fd2";
        assert_eq!(
            err("linux_amd64", packages(294, &[&zh, other]), 294),
            format!(
                "registry response expected sha256sum is \"{LINUX_AMD64}\", which does not match the platform's value of \"{}\"",
                &other[3..]
            )
        );
        assert_eq!(
            err("linux_amd64", packages(294, &[h1]), 294),
            "registry response does not contain matching sha256sum package entry and is invalid"
        );
        // Without the archive there is no size to compare, and the rest holds.
        assert_eq!(
            check_registry_packages(&here, &packages(295, &[h1, &zh]), None),
            Ok(())
        );
    }
}
