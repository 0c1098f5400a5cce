//! Proxies chosen as Terraform (Go's `ProxyFromEnvironment`) chooses them:
//! `tfinstall init` behind a CONNECT proxy that logs every target, one run
//! per row of a table of environments, and the log checked against the
//! targets Go would send through the proxy. Loopback downloads never go
//! through it; a registry named by a host name does unless `NO_PROXY`
//! names it.
//!
//! The registry and its downloads are one HTTPS server on 127.0.0.1 under
//! several names: `registry.test` and `downloads.test` reach it only
//! through the proxy (which dials 127.0.0.1 for any name); `0.0.0.0` is not
//! a loopback address to Go, yet Linux connects it to the local host, so a
//! run that goes direct to it succeeds too. A host name that goes direct
//! has no address and fails the run; only the log is checked for those.

mod support;

use std::path::Path;

use support::*;

/// Where the download URLs of each registry tree point.
const DOWNLOAD_HOSTS: [&str; 4] = ["127.0.0.1", "localhost", "downloads.test", "0.0.0.0"];

struct World {
    tmp: tempfile::TempDir,
    ca: TestCa,
    server: TestServer,
    proxy: ConnectProxy,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let ca = TestCa::with_names(&[
            "127.0.0.1",
            "localhost",
            "0.0.0.0",
            "registry.test",
            "downloads.test",
        ]);
        let server = TestServer::https(&ca);
        let root = tmp.path().join("served");
        let key = PgpKey::generate_ecdsa();
        let registry = Registry::new(&key).provider(ProviderSpec::new("acme", "alpha", "1.0.0"));
        for host in DOWNLOAD_HOSTS {
            registry.write(
                &root.join(host),
                &format!("https://{host}:{}/{host}/", server.port()),
            );
        }
        server.serve_dir(&root);
        World {
            tmp,
            ca,
            server,
            proxy: ConnectProxy::start(),
        }
    }

    /// `tfinstall init` in a fresh directory, with the registry reached as
    /// `https://REGISTRY_HOST:PORT/`, its downloads at `DOWNLOAD_HOST`, and
    /// `env` (each `{proxy}` the proxy's URL); whether it succeeded.
    fn init(
        &self,
        row: usize,
        registry_host: &str,
        download_host: &str,
        env: &[(&str, &str)],
    ) -> std::process::Output {
        let dir = self.tmp.path().join(format!("row-{row}"));
        let home = dir.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let providers_url = format!(
            "https://{registry_host}:{}/{download_host}/v1/providers/",
            self.server.port()
        );
        std::fs::write(
            home.join(".terraformrc"),
            host_block("registry.test", &providers_url),
        )
        .unwrap();
        std::fs::write(
            dir.join("main.tf"),
            "terraform {\n  required_providers {\n    alpha = { source = \"registry.test/acme/alpha\" }\n  }\n}\n",
        )
        .unwrap();
        let mut command = tfinstall_command(&home);
        self.ca.configure(&mut command);
        command.current_dir(&dir).arg("init");
        for (name, value) in env {
            command.env(name, value.replace("{proxy}", &self.proxy.url()));
        }
        command.output().unwrap()
    }
}

/// One run: the environment, the registry's host, the downloads' host, and
/// the targets Go sends through the proxy (`{port}` the server's port).
struct Row {
    env: &'static [(&'static str, &'static str)],
    registry: &'static str,
    downloads: &'static str,
    proxied: &'static [&'static str],
}

const PROXY: (&str, &str) = ("HTTPS_PROXY", "{proxy}");

const ROWS: &[Row] = &[
    // The registry by name through the proxy; loopback downloads direct,
    // whatever NO_PROXY says (here nothing).
    Row {
        env: &[PROXY],
        registry: "registry.test",
        downloads: "127.0.0.1",
        proxied: &["registry.test:{port}"],
    },
    Row {
        env: &[PROXY],
        registry: "registry.test",
        downloads: "localhost",
        proxied: &["registry.test:{port}"],
    },
    Row {
        env: &[PROXY],
        registry: "registry.test",
        downloads: "downloads.test",
        proxied: &["registry.test:{port}", "downloads.test:{port}"],
    },
    Row {
        env: &[PROXY],
        registry: "0.0.0.0",
        downloads: "0.0.0.0",
        proxied: &["0.0.0.0:{port}"],
    },
    // The lower-case variable; the upper case winning over it; a value
    // without a scheme; HTTP_PROXY, which is not for https.
    Row {
        env: &[("https_proxy", "{proxy}")],
        registry: "registry.test",
        downloads: "127.0.0.1",
        proxied: &["registry.test:{port}"],
    },
    Row {
        env: &[PROXY, ("https_proxy", "http://127.0.0.1:9")],
        registry: "registry.test",
        downloads: "127.0.0.1",
        proxied: &["registry.test:{port}"],
    },
    Row {
        env: &[("HTTPS_PROXY", "127.0.0.1:{proxy_port}")],
        registry: "registry.test",
        downloads: "127.0.0.1",
        proxied: &["registry.test:{port}"],
    },
    Row {
        env: &[("HTTP_PROXY", "{proxy}")],
        registry: "0.0.0.0",
        downloads: "0.0.0.0",
        proxied: &[],
    },
    // NO_PROXY: `*`, the exact name, `.domain`, `domain`, `*.domain`,
    // `name:port` (matching and not), entries that do not match, the lower
    // case variable, and a list.
    Row {
        env: &[PROXY, ("NO_PROXY", "*")],
        registry: "0.0.0.0",
        downloads: "downloads.test",
        proxied: &[],
    },
    Row {
        env: &[PROXY, ("NO_PROXY", "registry.test")],
        registry: "registry.test",
        downloads: "127.0.0.1",
        proxied: &[],
    },
    Row {
        env: &[PROXY, ("NO_PROXY", ".test")],
        registry: "registry.test",
        downloads: "127.0.0.1",
        proxied: &[],
    },
    Row {
        env: &[PROXY, ("NO_PROXY", "test")],
        registry: "registry.test",
        downloads: "127.0.0.1",
        proxied: &[],
    },
    Row {
        env: &[PROXY, ("NO_PROXY", "*.test")],
        registry: "registry.test",
        downloads: "127.0.0.1",
        proxied: &[],
    },
    Row {
        env: &[PROXY, ("NO_PROXY", "registry.test:{port}")],
        registry: "registry.test",
        downloads: "127.0.0.1",
        proxied: &[],
    },
    Row {
        env: &[PROXY, ("NO_PROXY", "registry.test:1")],
        registry: "registry.test",
        downloads: "127.0.0.1",
        proxied: &["registry.test:{port}"],
    },
    Row {
        env: &[
            PROXY,
            ("NO_PROXY", ".registry.test,other.test,test.example"),
        ],
        registry: "registry.test",
        downloads: "127.0.0.1",
        proxied: &["registry.test:{port}"],
    },
    Row {
        env: &[PROXY, ("no_proxy", "downloads.test")],
        registry: "registry.test",
        downloads: "downloads.test",
        proxied: &["registry.test:{port}"],
    },
    Row {
        env: &[PROXY, ("NO_PROXY", "other.example, Registry.Test ")],
        registry: "registry.test",
        downloads: "127.0.0.1",
        proxied: &[],
    },
    // NO_PROXY addresses: the address, a network, `address:port` (matching
    // and not), and a network it is not in.
    Row {
        env: &[PROXY, ("NO_PROXY", "0.0.0.0")],
        registry: "0.0.0.0",
        downloads: "0.0.0.0",
        proxied: &[],
    },
    Row {
        env: &[PROXY, ("NO_PROXY", "0.0.0.0/8")],
        registry: "0.0.0.0",
        downloads: "downloads.test",
        proxied: &["downloads.test:{port}"],
    },
    Row {
        env: &[PROXY, ("NO_PROXY", "0.0.0.0:{port}")],
        registry: "0.0.0.0",
        downloads: "0.0.0.0",
        proxied: &[],
    },
    Row {
        env: &[PROXY, ("NO_PROXY", "0.0.0.0:1")],
        registry: "0.0.0.0",
        downloads: "0.0.0.0",
        proxied: &["0.0.0.0:{port}"],
    },
    Row {
        env: &[PROXY, ("NO_PROXY", "10.0.0.0/8,::1")],
        registry: "0.0.0.0",
        downloads: "127.0.0.1",
        proxied: &["0.0.0.0:{port}"],
    },
];

#[test]
fn the_proxy_sees_exactly_what_go_would_send_it() {
    let world = World::new();
    let port = world.server.port().to_string();
    let proxy_port = world.proxy.port().to_string();
    let fill = |text: &str| {
        text.replace("{port}", &port)
            .replace("{proxy_port}", &proxy_port)
    };
    for (index, row) in ROWS.iter().enumerate() {
        let env: Vec<(&str, String)> = row
            .env
            .iter()
            .map(|(name, value)| (*name, fill(value)))
            .collect();
        let env_refs: Vec<(&str, &str)> = env.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let output = world.init(index, row.registry, row.downloads, &env_refs);
        let mut logged = world.proxy.take_log();
        logged.sort();
        logged.dedup();
        let mut expected: Vec<String> = row
            .proxied
            .iter()
            .map(|target| format!("CONNECT {}", fill(target)))
            .collect();
        expected.sort();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            logged, expected,
            "row {index}: {env:?}, registry {}, downloads {}\n{stderr}",
            row.registry, row.downloads
        );
        // A run whose every host is reachable succeeds: through the proxy,
        // or direct to a loopback address or 0.0.0.0.
        let direct_names = [row.registry, row.downloads]
            .iter()
            .any(|host| host.ends_with(".test") && !expected.iter().any(|t| t.contains(*host)));
        if !direct_names {
            assert!(output.status.success(), "row {index}: {env:?}\n{stderr}");
            assert!(
                installed(&world.tmp.path().join(format!("row-{index}"))),
                "row {index}"
            );
        }
    }
}

fn installed(dir: &Path) -> bool {
    dir.join(".terraform/plugins/registry.test/acme/alpha/1.0.0")
        .join(current_platform())
        .is_dir()
}
