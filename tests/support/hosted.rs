//! A provider registry on an HTTPS server of its own, with a project that
//! trusts it: the setup of every suite that installs from a registry.

use tempfile::TempDir;

use super::fixtures::{ProviderSpec, PublishedTree, Registry};
use super::openpgp::PgpKey;
use super::project::{Project, host_block};
use super::server::TestServer;
use super::tls::TestCa;

pub struct HostedRegistry {
    pub ca: TestCa,
    /// Signs the registry's checksum lists.
    pub key: PgpKey,
    pub server: TestServer,
    pub tree: PublishedTree,
    /// Trusts `ca` and no other CA.
    pub project: Project,
    _site: TempDir,
}

impl HostedRegistry {
    /// The providers `build` adds to a registry signed by a new key,
    /// published at a new server's origin (absolute URLs naming
    /// `127.0.0.1:PORT`).
    pub fn new(build: impl FnOnce(Registry) -> Registry) -> Self {
        Self::signed_by(PgpKey::generate(), build)
    }

    /// The same, signed by `key`.
    pub fn signed_by(key: PgpKey, build: impl FnOnce(Registry) -> Registry) -> Self {
        let ca = TestCa::new();
        let server = TestServer::https(&ca);
        let site = tempfile::tempdir().expect("temp dir for the registry");
        let tree = build(Registry::new(&key)).write(site.path(), &server.url());
        server.serve_dir(site.path());
        let mut project = Project::new();
        project.trust(&ca);
        HostedRegistry {
            ca,
            key,
            server,
            tree,
            project,
            _site: site,
        }
    }

    /// The registry stands in for `hostname` (`registry.terraform.io`, say)
    /// through a `host` block in the project's CLI configuration.
    pub fn standing_in_for(mut self, hostname: &str) -> Self {
        let providers_url = self.server.url_for("/v1/providers/");
        self.project
            .cli_config(&host_block(hostname, &providers_url));
        self
    }

    /// The file below the served root at server path `path` (no leading
    /// `/`), for tests that reshape a document.
    pub fn site_path(&self, path: &str) -> std::path::PathBuf {
        self._site.path().join(path)
    }

    /// The server path of the package archive of `type_name` `version` for
    /// `platform`.
    pub fn zip_path(&self, type_name: &str, version: &str, platform: &str) -> String {
        self.tree
            .package(type_name, version, platform)
            .url_path
            .clone()
            .expect("registry packages are served")
    }

    /// The server path of the `SHA256SUMS` that lists the package of
    /// `type_name` `version` for `platform`.
    pub fn sums_path(&self, type_name: &str, version: &str, platform: &str) -> String {
        let namespace = &self.tree.package(type_name, version, platform).namespace;
        format!(
            "/{}{}",
            Registry::files_path(namespace, type_name, version),
            ProviderSpec::new(namespace, type_name, version).sums_filename()
        )
    }
}
