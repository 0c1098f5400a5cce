//! A signed registry of `registry.test/acme/TYPE` packages for this
//! platform on loopback HTTPS, an empty plugin cache, and a CLI
//! configuration that sends `registry.test` to the registry and names the
//! cache: where the tests of processes sharing one cache start.

use std::path::PathBuf;

use super::{PgpKey, ProviderSpec, PublishedTree, Registry, TestCa, TestServer, current_platform};

pub const HOST: &str = "registry.test";
pub const NS: &str = "acme";

pub struct CacheWorld {
    pub ca: TestCa,
    pub server: TestServer,
    pub tmp: tempfile::TempDir,
    pub tree: PublishedTree,
    /// `(type, version)` of every package published.
    pub packages: Vec<(String, String)>,
    pub cache: PathBuf,
    pub config: PathBuf,
}

impl CacheWorld {
    pub fn new(packages: &[(&str, &str)]) -> Self {
        let ca = TestCa::new();
        let server = TestServer::https(&ca);
        let tmp = tempfile::tempdir().unwrap();
        let site = tmp.path().join("site");
        server.serve_dir(&site);
        let platform = current_platform();
        let registry = packages
            .iter()
            .fold(Registry::new(&PgpKey::generate()), |r, (t, v)| {
                r.provider(
                    ProviderSpec::new(NS, t, v)
                        .hostname(HOST)
                        .platforms(&[platform.as_str()]),
                )
            });
        let tree = registry.write(&site, &server.url());
        std::fs::create_dir_all(tmp.path().join("home")).unwrap();
        let cache = tmp.path().join("cache");
        std::fs::create_dir_all(&cache).unwrap();
        let config = tmp.path().join("cli.tfrc");
        std::fs::write(
            &config,
            format!(
                "host \"{HOST}\" {{\n  services = {{\n    \"providers.v1\" = \"{}\"\n  }}\n}}\nplugin_cache_dir = \"{}\"\n",
                server.url_for("/v1/providers/"),
                cache.display()
            ),
        )
        .unwrap();
        CacheWorld {
            ca,
            server,
            tmp,
            tree,
            packages: packages
                .iter()
                .map(|(t, v)| (t.to_string(), v.to_string()))
                .collect(),
            cache,
            config,
        }
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.tmp.path().join(relative)
    }
}
