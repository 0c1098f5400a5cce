//! OpenPGP signing keys made at test time with rPGP.
//!
//! Registry packages are authenticated by a detached signature over
//! `SHA256SUMS` from a key the registry lists; tests need keys whose private
//! half they hold to publish packages that verify (or, with another key,
//! that must not).

use pgp::composed::{
    ArmorOptions, Deserializable, DetachedSignature, KeyType, SecretKeyParamsBuilder,
    SignedPublicKey, SignedSecretKey, SubkeyParamsBuilder,
};
use pgp::crypto::hash::HashAlgorithm;
use pgp::packet::{KeyFlags, SignatureConfig, SignatureType, Subpacket, SubpacketData};
use pgp::ser::Serialize;
use pgp::types::{KeyDetails, Password, Tag, Timestamp};

/// A v4 Ed25519 key: what `gpg --quick-gen-key` makes by default today, and
/// generated in about a millisecond even in debug builds, so every test can
/// have its own.
#[derive(Clone)]
pub struct PgpKey {
    secret: SignedSecretKey,
    public: SignedPublicKey,
    signs_with_subkey: bool,
}

const USER_ID: &str = "tfinstall test signer <tfinstall-test@example.com>";

impl PgpKey {
    /// A key whose primary key makes the signatures.
    pub fn generate() -> Self {
        let mut params = SecretKeyParamsBuilder::default();
        params
            .key_type(KeyType::Ed25519Legacy)
            .can_certify(true)
            .can_sign(true)
            .primary_user_id(USER_ID.into());
        Self::from_params(params, false)
    }

    /// An ECDSA P-256 key: Terraform before 1.1 verifies with Go's old
    /// `x/crypto/openpgp`, which knows RSA, DSA and ECDSA but not EdDSA, so
    /// registries that real Terraform 0.13/1.0 reads must sign with one of those.
    pub fn generate_ecdsa() -> Self {
        let mut params = SecretKeyParamsBuilder::default();
        params
            .key_type(KeyType::ECDSA(pgp::crypto::ecc_curve::ECCCurve::P256))
            .can_certify(true)
            .can_sign(true)
            .primary_user_id(USER_ID.into());
        Self::from_params(params, false)
    }

    /// A key whose signatures come from a signing subkey, as HashiCorp's do:
    /// the verifier must match the issuer against subkeys yet report the
    /// primary key's ID.
    pub fn generate_with_signing_subkey() -> Self {
        let subkey = SubkeyParamsBuilder::default()
            .key_type(KeyType::Ed25519Legacy)
            .can_sign(true)
            .build()
            .expect("signing subkey parameters");
        let mut params = SecretKeyParamsBuilder::default();
        params
            .key_type(KeyType::Ed25519Legacy)
            .can_certify(true)
            .can_sign(false)
            .primary_user_id(USER_ID.into())
            .subkeys(vec![subkey]);
        Self::from_params(params, true)
    }

    /// A key that expired two days ago: made three days ago with a
    /// lifetime of one day. Terraform still accepts its signatures, and
    /// the verifier reports the key as expired.
    pub fn generate_expired() -> Self {
        const DAY: u32 = 86_400;
        let made = Timestamp::from_secs(Timestamp::now().as_secs() - 3 * DAY);
        let mut params = SecretKeyParamsBuilder::default();
        params
            .key_type(KeyType::Ed25519Legacy)
            .can_certify(true)
            .can_sign(true)
            .created_at(made)
            .primary_user_id(USER_ID.into());
        let mut key = Self::from_params(params, false);
        // The builder's self-signature sets no lifetime: replace it with
        // one, made when the key was, that does.
        let primary = &key.public.primary_key;
        let mut flags = KeyFlags::default();
        flags.set_certify(true);
        flags.set_sign(true);
        let lifetime = std::time::Duration::from_secs(u64::from(DAY));
        let subpacket = |data| Subpacket::regular(data).expect("subpacket");
        let mut config = SignatureConfig::v4(
            SignatureType::CertPositive,
            primary.algorithm(),
            HashAlgorithm::Sha256,
        );
        config.hashed_subpackets = vec![
            subpacket(SubpacketData::SignatureCreationTime(made)),
            subpacket(SubpacketData::IssuerFingerprint(primary.fingerprint())),
            subpacket(SubpacketData::KeyFlags(flags)),
            subpacket(SubpacketData::IsPrimary(true)),
            subpacket(SubpacketData::KeyExpirationTime(
                lifetime.try_into().expect("a day fits"),
            )),
        ];
        config.unhashed_subpackets = vec![subpacket(SubpacketData::IssuerKeyId(
            primary.legacy_key_id(),
        ))];
        let user = &key.public.details.users[0];
        let signature = config
            .sign_certification(
                &key.secret.primary_key,
                primary,
                &Password::empty(),
                Tag::UserId,
                &user.id,
            )
            .expect("sign the user ID with a lifetime");
        key.public.details.users[0].signatures = vec![signature];
        key
    }

    fn from_params(params: SecretKeyParamsBuilder, signs_with_subkey: bool) -> Self {
        let secret = params
            .build()
            .expect("key parameters")
            .generate(rand::thread_rng())
            .expect("generate OpenPGP key");
        let public = secret.to_public_key();
        PgpKey {
            secret,
            public,
            signs_with_subkey,
        }
    }

    /// The transferable public key, ASCII-armored, as a registry lists it.
    pub fn public_armor(&self) -> String {
        self.public
            .to_armored_string(ArmorOptions::default())
            .expect("armor public key")
    }

    /// The primary key's 64-bit ID as Terraform prints it (16 upper-case hex).
    pub fn key_id(&self) -> String {
        hex::encode_upper(self.public.primary_key.legacy_key_id())
    }

    /// The ID of the key that actually makes signatures (the subkey, if any).
    pub fn signing_key_id(&self) -> String {
        match self.secret.secret_subkeys.first() {
            Some(subkey) if self.signs_with_subkey => hex::encode_upper(subkey.key.legacy_key_id()),
            _ => self.key_id(),
        }
    }

    /// The primary key's fingerprint, 40 upper-case hex digits.
    pub fn fingerprint(&self) -> String {
        hex::encode_upper(self.public.primary_key.fingerprint().as_bytes())
    }

    /// A binary (not armored) detached signature over `data`, the form
    /// registries serve as `…_SHA256SUMS.sig`.
    pub fn sign_detached(&self, data: &[u8]) -> Vec<u8> {
        self.detached_signature(data)
            .to_bytes()
            .expect("serialize signature")
    }

    /// The same signature, ASCII-armored.
    pub fn sign_detached_armored(&self, data: &[u8]) -> String {
        self.detached_signature(data)
            .to_armored_string(ArmorOptions::default())
            .expect("armor signature")
    }

    /// Checks a binary detached signature against this key with rPGP, the
    /// way the installer will; for the toolkit's own self-test.
    pub fn verifies(&self, data: &[u8], signature: &[u8]) -> bool {
        let Ok(signature) = DetachedSignature::from_bytes(signature) else {
            return false;
        };
        let by_primary = signature.verify(&self.public.primary_key, data).is_ok();
        let by_subkey = self
            .public
            .public_subkeys
            .iter()
            .any(|subkey| signature.verify(&subkey.key, data).is_ok());
        by_primary || by_subkey
    }

    fn detached_signature(&self, data: &[u8]) -> DetachedSignature {
        let password = Password::empty();
        let signed = match self.secret.secret_subkeys.first() {
            Some(subkey) if self.signs_with_subkey => DetachedSignature::sign_binary_data(
                rand::thread_rng(),
                &subkey.key,
                &password,
                HashAlgorithm::Sha256,
                data,
            ),
            _ => DetachedSignature::sign_binary_data(
                rand::thread_rng(),
                &self.secret.primary_key,
                &password,
                HashAlgorithm::Sha256,
                data,
            ),
        };
        signed.expect("sign data")
    }
}
