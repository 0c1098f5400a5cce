//! One registry scenario: a real HTTPS registry on 127.0.0.1 with a test CA
//! and a [`Project`] that trusts it, plus what registry tests ask of both.

use tempfile::TempDir;

use crate::support::{
    self, PgpKey, Project, ProviderSpec, PublishedTree, Registry, TestCa, TestServer, UrlStyle,
};

pub struct Scenario {
    pub ca: TestCa,
    pub server: TestServer,
    pub key: PgpKey,
    pub site: TempDir,
    /// Trusts `ca`.
    pub project: Project,
}

impl Scenario {
    pub fn new() -> Self {
        let ca = TestCa::new();
        let server = TestServer::https(&ca);
        let site = tempfile::tempdir().unwrap();
        server.serve_dir(site.path());
        let mut project = Project::new();
        project.trust(&ca);
        Scenario {
            ca,
            server,
            key: PgpKey::generate_with_signing_subkey(),
            site,
            project,
        }
    }

    /// `127.0.0.1:PORT`, the registry's hostname in provider addresses.
    pub fn host(&self) -> String {
        self.server.host()
    }

    /// A registry signed by this scenario's key.
    pub fn registry(&self) -> Registry {
        Registry::new(&self.key)
    }

    /// Writes `registry` at the server's origin, with absolute URLs
    /// naming `127.0.0.1:PORT`.
    pub fn publish(&self, registry: Registry) -> PublishedTree {
        registry.write(self.site.path(), &self.server.url())
    }

    pub fn publish_styled(&self, registry: Registry, style: UrlStyle) -> PublishedTree {
        self.publish(registry.url_style(style))
    }

    /// The server log's requests for `path` that carried `token`.
    pub fn authorized(&self, path: &str, token: &str) -> Vec<bool> {
        self.server
            .requests_to(path)
            .iter()
            .map(|request| request.header("authorization") == Some(&format!("Bearer {token}")))
            .collect()
    }
}

/// Every `zh:` a signed `SHA256SUMS` vouches for, plus the `h1:` of the
/// current platform's package: what the lock file must record.
pub fn signed_hashes(tree: &PublishedTree, type_name: &str, version: &str) -> Vec<String> {
    let mut hashes: Vec<String> = tree
        .packages
        .iter()
        .filter(|p| p.type_name == type_name && p.version == version)
        .map(|p| p.zh.clone().unwrap())
        .collect();
    hashes.push(
        tree.package(type_name, version, &support::current_platform())
            .h1
            .clone(),
    );
    hashes
}

/// A provider published for the current platform and one other, so the
/// signed checksum list has more than the installed package in it.
pub fn two_platform_spec(namespace: &str, type_name: &str, version: &str) -> ProviderSpec {
    let platform = support::current_platform();
    let other = if platform == "windows_386" {
        "linux_arm"
    } else {
        "windows_386"
    };
    ProviderSpec::new(namespace, type_name, version).platforms(&[&platform, other])
}

/// The footer Terraform prints after installing a third-party signed provider.
pub const SIGNING_FOOTER: &str = "Partner and community providers are signed by their developers.\nIf you'd like to know more about provider signing, you can read about it here:\nhttps://developer.hashicorp.com/terraform/cli/plugins/signing";
