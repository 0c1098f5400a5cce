//! Package verification, after Terraform's `internal/getproviders`: hashes
//! (`providerreqs/hash.go`), the signed SHA256SUMS document and its
//! signature (`package_authentication.go`). The outcome feeds both the UI
//! (what was verified and by whom) and the lock file (which hashes may be
//! trusted).

pub mod hash;
pub mod signature;
pub mod sums;

use std::fmt;

use crate::addr::ProviderAddr;
use crate::engine::Engine;

pub use hash::{HashError, LocalPackage, PackageHash};
pub use signature::{SignatureCheck, SigningKey, Trust, verify_sums_signature};
pub use sums::{acceptable_hashes, checksum_for};

/// How strongly a package was authenticated; `Display` gives Terraform's
/// words for the "Installed ... (<result>)" line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthResult {
    Unauthenticated,
    VerifiedChecksum,
    Signed(SignatureCheck),
    /// OpenTofu's registry listed no key, so only the checksums were
    /// checked ([`signature_may_be_skipped`]).
    SigningSkipped,
}

impl AuthResult {
    /// Partner and self-signed packages get their key ID shown and the
    /// third-party footer printed. OpenTofu trusts no key of its own, so
    /// every signature is a third party's there.
    pub fn is_third_party_signed(&self) -> bool {
        match self {
            AuthResult::Signed(_) if Engine::current() == Engine::OpenTofu => true,
            AuthResult::Signed(check) => matches!(check.trust, Trust::Partner | Trust::SelfSigned),
            _ => false,
        }
    }

    /// Only a signed SHA256SUMS vouches for the other platforms' hashes that
    /// go into the lock file, or for OpenTofu one whose signature it skipped.
    pub fn vouches_for_release(&self) -> bool {
        matches!(self, AuthResult::Signed(_) | AuthResult::SigningSkipped)
    }

    pub fn key_id(&self) -> Option<&str> {
        match self {
            AuthResult::Signed(check) => Some(&check.key_id),
            _ => None,
        }
    }
}

impl fmt::Display for AuthResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthResult::Unauthenticated => f.write_str("unauthenticated"),
            AuthResult::VerifiedChecksum => f.write_str("verified checksum"),
            AuthResult::Signed(_) if Engine::current() == Engine::OpenTofu => f.write_str("signed"),
            AuthResult::Signed(check) => check.trust.fmt(f),
            AuthResult::SigningSkipped => f.write_str("signing skipped"),
        }
    }
}

/// OpenTofu's rule for its own registry, which serves many providers
/// without signing keys (opentofu/opentofu#309): their packages install
/// once the checksums match, unless `OPENTOFU_ENFORCE_GPG_VALIDATION=true`.
/// Other registries, and Terraform, always need a signature.
pub fn signature_may_be_skipped(provider: &ProviderAddr) -> bool {
    Engine::current() == Engine::OpenTofu
        && provider.hostname.as_ascii() == Engine::OpenTofu.default_registry_host()
        && std::env::var("OPENTOFU_ENFORCE_GPG_VALIDATION").as_deref() != Ok("true")
}

/// OpenTofu accepts a signature by an expired key with a warning, and
/// refuses it with `OPENTOFU_ENFORCE_GPG_EXPIRATION=true`; Terraform
/// accepts it silently.
pub fn expired_keys_refused() -> bool {
    Engine::current() == Engine::OpenTofu
        && std::env::var("OPENTOFU_ENFORCE_GPG_EXPIRATION").as_deref() == Ok("true")
}

/// An authentication failure, worded exactly as Terraform words it because
/// users search for these messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthError(pub String);

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AuthError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_words() {
        let signed = |trust| {
            AuthResult::Signed(SignatureCheck {
                trust,
                key_id: "34365D9472D7468F".to_owned(),
                fingerprints: Vec::new(),
                key_expired: false,
            })
        };
        assert_eq!(AuthResult::Unauthenticated.to_string(), "unauthenticated");
        assert_eq!(
            AuthResult::VerifiedChecksum.to_string(),
            "verified checksum"
        );
        assert_eq!(signed(Trust::HashiCorp).to_string(), "signed by HashiCorp");
        assert_eq!(
            signed(Trust::Partner).to_string(),
            "signed by a HashiCorp partner"
        );
        assert_eq!(signed(Trust::SelfSigned).to_string(), "self-signed");

        assert!(!signed(Trust::HashiCorp).is_third_party_signed());
        assert!(signed(Trust::Partner).is_third_party_signed());
        assert!(signed(Trust::SelfSigned).is_third_party_signed());
        assert!(!AuthResult::VerifiedChecksum.is_third_party_signed());
        assert!(signed(Trust::HashiCorp).vouches_for_release());
        assert!(AuthResult::SigningSkipped.vouches_for_release());
        assert!(!AuthResult::VerifiedChecksum.vouches_for_release());
        assert_eq!(signed(Trust::Partner).key_id(), Some("34365D9472D7468F"));
        assert_eq!(AuthResult::Unauthenticated.key_id(), None);
    }
}
