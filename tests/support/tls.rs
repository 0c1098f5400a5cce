//! A private certificate authority made fresh for each test.
//!
//! Tests must prove that the installer trusts exactly the CAs the user
//! configured (`SSL_CERT_FILE`), so servers present a leaf signed by a CA that
//! exists nowhere but in a temp dir.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tempfile::TempDir;

pub struct TestCa {
    dir: TempDir,
    ca_pem: String,
    leaf_der: CertificateDer<'static>,
    leaf_key_der: Vec<u8>,
}

impl TestCa {
    /// A CA whose leaf is valid for `127.0.0.1` and `localhost`, the two names
    /// test servers are reached by.
    pub fn new() -> Self {
        Self::with_names(&["127.0.0.1", "localhost"])
    }

    /// A CA whose leaf names only `names`, for hostname-mismatch tests.
    pub fn with_names(names: &[&str]) -> Self {
        let ca_key = KeyPair::generate().expect("generate CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "tfinstall test CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params.self_signed(&ca_key).expect("self-sign CA");
        let issuer = Issuer::new(ca_params, ca_key);

        let leaf_key = KeyPair::generate().expect("generate leaf key");
        let names: Vec<String> = names.iter().map(|name| name.to_string()).collect();
        // rcgen turns names that parse as IP addresses into IP SANs, which is
        // what lets clients verify https://127.0.0.1:PORT.
        let mut leaf_params = CertificateParams::new(names).expect("leaf params");
        leaf_params
            .distinguished_name
            .push(DnType::CommonName, "tfinstall test server");
        leaf_params.is_ca = IsCa::NoCa;
        leaf_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        leaf_params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let leaf_cert = leaf_params
            .signed_by(&leaf_key, &issuer)
            .expect("sign leaf");

        let dir = tempfile::tempdir().expect("temp dir for CA");
        let ca_pem = ca_cert.pem();
        std::fs::write(dir.path().join("ca.pem"), &ca_pem).expect("write ca.pem");
        TestCa {
            dir,
            ca_pem,
            leaf_der: leaf_cert.der().clone(),
            leaf_key_der: leaf_key.serialize_der(),
        }
    }

    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The file to put in `SSL_CERT_FILE`.
    pub fn ca_pem_path(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Writes the leaf certificate and its key as PEM files in `dir`, for
    /// servers that are separate programs; returns their paths.
    pub fn write_leaf_pem(&self, dir: &Path) -> (PathBuf, PathBuf) {
        let pem = |label: &str, der: &[u8]| {
            use base64::Engine as _;
            let text = base64::engine::general_purpose::STANDARD.encode(der);
            let lines: Vec<&str> = text
                .as_bytes()
                .chunks(64)
                .map(|chunk| std::str::from_utf8(chunk).expect("base64 is ASCII"))
                .collect();
            format!(
                "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
                lines.join("\n")
            )
        };
        let cert = dir.join("leaf.pem");
        let key = dir.join("leaf-key.pem");
        std::fs::write(&cert, pem("CERTIFICATE", &self.leaf_der)).expect("write leaf.pem");
        std::fs::write(&key, pem("PRIVATE KEY", &self.leaf_key_der)).expect("write leaf-key.pem");
        (cert, key)
    }

    /// Makes a command trust this CA and nothing else.
    pub fn configure(&self, command: &mut assert_cmd::Command) {
        trust_only(command, &self.ca_pem_path());
    }

    /// The rustls server configuration for the leaf, advertising `alpn`.
    pub(crate) fn server_config(&self, alpn: &[&[u8]]) -> rustls::ServerConfig {
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.leaf_key_der.clone()));
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default TLS versions")
            .with_no_client_auth()
            .with_single_cert(vec![self.leaf_der.clone()], key)
            .expect("leaf certificate and key match");
        config.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
        config
    }

    /// A rustls client configuration trusting this CA alone, for tests
    /// that drive a TLS connection by hand (to reset it, say).
    pub fn client_config(&self) -> rustls::ClientConfig {
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(self.ca_pem.as_bytes()) {
            roots
                .add(cert.expect("the CA's own PEM"))
                .expect("a valid CA certificate");
        }
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth()
    }
}

impl Default for TestCa {
    fn default() -> Self {
        Self::new()
    }
}

/// Makes a command trust the CA certificate in the PEM file `ca_pem` and
/// nothing else: [`TestCa::configure`] for a holder of the file's path
/// (such as a test project) that cannot keep a borrow of the CA.
pub fn trust_only(command: &mut assert_cmd::Command, ca_pem: &Path) {
    command
        .env("SSL_CERT_FILE", ca_pem)
        .env_remove("SSL_CERT_DIR");
}
