//! Property tests over every parser of untrusted input: the archive reader,
//! the version-constraint parser, the lock-file and CLI-configuration
//! readers and the registry and network-mirror protocol decoders. Arbitrary
//! input must give a result or an error, never a panic; a few round-trip
//! and containment properties ride along.
//!
//! Case counts are modest so the suite stays quick in debug builds; raise
//! them with `PROPTEST_CASES` for a longer soak.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};
use support::{Compression, RawZip, Response, Snapshot, TestCa, TestServer, ZipEntry, build_zip};
use tfinstall::addr::{Platform, ProviderAddr};
use tfinstall::cliconfig::{self, CliEnv};
use tfinstall::lockfile::Locks;
use tfinstall::package::extract::{ExtractLimits, extract_package, unpack_stream};
use tfinstall::source::Source;
use tfinstall::source::discovery::Discovery;
use tfinstall::source::network_mirror::NetworkMirror;
use tfinstall::source::registry::RegistrySource;
use tfinstall::version::{Version, VersionConstraints};

/// A runner with `cases` cases (unless `PROPTEST_CASES` says otherwise) that
/// writes no regression files into the source tree.
fn runner(cases: u32) -> TestRunner {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

/// Strings that exercise the corners of the formats: versions, operators,
/// platforms, URLs, hashes, escapes, control and non-ASCII characters.
const INTERESTING: &[&str] = &[
    "",
    " ",
    "1.0.0",
    "2.0.0-beta.1+meta",
    "v1.0",
    "01.2.3",
    "18446744073709551616.0.0",
    "~> 1.2",
    ">= 1.0, < 2",
    "!= 1.0.0",
    "= ",
    "5.0",
    "6.0",
    "linux",
    "amd64",
    "linux_amd64",
    "registry.terraform.io/hashicorp/null",
    "hashicorp/null",
    "xn--",
    "h1:",
    "h1:AAAA",
    "h1:2cjN6T1lBNJRp+9SCAZgTR7xEbrQs4IXb2XpmMw5GlU=",
    "zh:0000000000000000000000000000000000000000000000000000000000000000",
    "zh:zz",
    "https://example.com/x.zip",
    "https://127.0.0.1:1/",
    "http://example.com/",
    "file:///etc/passwd",
    "../../../x.zip",
    "//evil.example/x",
    "%zz%00",
    "a\u{0}b",
    "\u{feff}",
    "ü.example",
    "${HOME}",
    "$(x)",
    "\\",
    "\"",
    "\n",
];

fn interesting() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(INTERESTING).prop_map(str::to_owned),
        1 => any::<String>(),
    ]
}

/// A string made of the tokens of a language, so that the parser gets past
/// its first byte more often than with uniformly random text.
fn token_soup(tokens: &'static [&'static str], max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            8 => prop::sample::select(tokens).prop_map(str::to_owned),
            1 => interesting().prop_map(|s| format!("{s:?}")),
            1 => any::<String>(),
        ],
        0..max,
    )
    .prop_map(|parts| parts.concat())
}

// ---------------------------------------------------------------- archives

const EXE: &str = "terraform-provider-null_v1.0.0";

fn valid_zips() -> Vec<Vec<u8>> {
    vec![
        build_zip(
            &[
                ZipEntry::executable(EXE, b"#!/bin/sh\necho provider\n".repeat(20)),
                ZipEntry::file("docs/README.md", b"readme\n".to_vec()),
            ],
            Compression::Deflated,
        ),
        build_zip(
            &[ZipEntry::executable(EXE, b"#!/bin/sh\n".to_vec())],
            Compression::Stored,
        ),
        RawZip::new()
            .file(EXE, b"#!/bin/sh\n", 0o755)
            .dir("docs/")
            .file("docs/a", b"a", 0o644)
            .deflate_bomb("zeros", 4096)
            .build(),
    ]
}

/// Extracts `bytes` into a fresh directory and checks that, whatever the
/// outcome, nothing appeared outside it and no link was created.
fn extract_contained(bytes: &[u8]) {
    let scratch = tempfile::tempdir().unwrap();
    let zip = scratch.path().join("package.zip");
    let dest = scratch.path().join("dest");
    std::fs::write(&zip, bytes).unwrap();
    std::fs::create_dir(&dest).unwrap();
    let limits = ExtractLimits {
        max_total_bytes: 1 << 20,
        max_entries: 100,
        max_ratio: 200,
    };
    let result = extract_package(&zip, &dest, "null", &limits);
    let mut top: Vec<_> = std::fs::read_dir(scratch.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    top.sort();
    assert_eq!(top, ["dest", "package.zip"], "written outside dest");
    assert_no_links(&dest);
    if let Ok(files) = &result {
        for file in files {
            let path = dest.join(&file.name);
            assert!(path.starts_with(&dest) && path.is_file(), "{}", file.name);
        }
    }

    // The streaming unpacker, on the same bytes, either declines or makes
    // exactly what the full extractor made; it never takes what the full
    // extractor refuses.
    let streamed_scratch = tempfile::tempdir().unwrap();
    let streamed_dest = streamed_scratch.path().join("dest");
    std::fs::create_dir(&streamed_dest).unwrap();
    let mut pieces = bytes
        .chunks(61)
        .map(bytes::Bytes::copy_from_slice)
        .collect::<Vec<_>>()
        .into_iter();
    let streamed = unpack_stream(&mut pieces, &streamed_dest, "null", &limits);
    let top: Vec<_> = std::fs::read_dir(streamed_scratch.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(top, ["dest"], "the streaming unpacker wrote outside dest");
    assert_no_links(&streamed_dest);
    if let Ok(streamed_files) = streamed {
        let files = result.expect("the streaming unpacker took a refused archive");
        assert_eq!(files, streamed_files);
        Snapshot::of(&streamed_dest)
            .without_times()
            .assert_same(&Snapshot::of(&dest).without_times(), "the streamed tree");
    }
}

fn assert_no_links(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        assert!(kind.is_dir() || kind.is_file(), "{:?}", entry.path());
        if kind.is_dir() {
            assert_no_links(&entry.path());
        }
    }
}

#[test]
fn the_archive_reader_survives_arbitrary_bytes() {
    runner(64)
        .run(&prop::collection::vec(any::<u8>(), 0..2048), |bytes| {
            extract_contained(&bytes);
            Ok(())
        })
        .unwrap();
}

#[test]
fn the_archive_reader_survives_mutated_zips() {
    let zips = valid_zips();
    let strategy = (
        0..zips.len(),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        prop::option::of(any::<prop::sample::Index>()),
    );
    runner(192)
        .run(&strategy, |(which, writes, truncate)| {
            let mut bytes = zips[which].clone();
            for (at, value) in writes {
                let at = at.index(bytes.len());
                bytes[at] = value;
            }
            if let Some(len) = truncate {
                bytes.truncate(len.index(bytes.len()));
            }
            extract_contained(&bytes);
            Ok(())
        })
        .unwrap();
}

// ------------------------------------------------------------- constraints

const CONSTRAINT_TOKENS: &[&str] = &[
    "0",
    "1",
    "2",
    "10",
    "999999999999999999999",
    ".",
    ",",
    " ",
    "=",
    "!=",
    ">",
    ">=",
    "<",
    "<=",
    "~>",
    "^",
    "~",
    "v",
    "-",
    "+",
    "beta",
    "rc.1",
    "*",
    "x",
    "X",
    "||",
];

#[test]
fn the_constraint_parser_survives_arbitrary_text() {
    let strategy = prop_oneof![
        token_soup(CONSTRAINT_TOKENS, 12),
        any::<String>(),
        interesting()
    ];
    let versions: Vec<Version> = ["0.0.0", "1.0.0", "1.2.3-beta", "10.20.30"]
        .iter()
        .map(|v| Version::parse(v).unwrap())
        .collect();
    runner(512)
        .run(&strategy, |text| {
            let _ = Version::parse(&text);
            let _ = VersionConstraints::parse_config(&text);
            if let Ok(constraints) = VersionConstraints::parse(&text) {
                for version in &versions {
                    let _ = constraints.allows(version);
                }
                let _ = constraints.newest_allowed(&versions);
                // What was accepted prints as something accepted again.
                let printed = constraints.to_string();
                prop_assert!(
                    VersionConstraints::parse(&printed).is_ok(),
                    "{text:?} printed as {printed:?}, which does not parse"
                );
            }
            Ok(())
        })
        .unwrap();
}

// ---------------------------------------------------------------- lock file

const HCL_TOKENS: &[&str] = &[
    "provider",
    "\"registry.terraform.io/hashicorp/null\"",
    "\"hashicorp/null\"",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    "=",
    ",",
    "\n",
    " ",
    "version",
    "constraints",
    "hashes",
    "\"1.0.0\"",
    "\"~> 1.0\"",
    "\"h1:2cjN6T1lBNJRp+9SCAZgTR7xEbrQs4IXb2XpmMw5GlU=\"",
    "\"zh:0000000000000000000000000000000000000000000000000000000000000000\"",
    "#",
    "//",
    "/*",
    "*/",
    "<<EOT\n",
    "EOT\n",
    "${",
    "%{",
    "\"",
    "\\",
    "null",
    "true",
    "1",
    "terraform",
    "module",
];

/// A lock file with plausible structure and fuzzed values.
fn lock_file() -> impl Strategy<Value = String> {
    let block = (
        interesting(),
        prop::option::of(interesting()),
        prop::option::of(interesting()),
        prop::option::of(prop::collection::vec(interesting(), 0..4)),
    )
        .prop_map(|(addr, version, constraints, hashes)| {
            let mut text = format!("provider {addr:?} {{\n");
            if let Some(version) = version {
                text.push_str(&format!("  version = {version:?}\n"));
            }
            if let Some(constraints) = constraints {
                text.push_str(&format!("  constraints = {constraints:?}\n"));
            }
            if let Some(hashes) = hashes {
                let list: Vec<String> = hashes.iter().map(|h| format!("{h:?}")).collect();
                text.push_str(&format!("  hashes = [{}]\n", list.join(", ")));
            }
            text + "}\n"
        });
    prop::collection::vec(block, 0..4).prop_map(|blocks| blocks.concat())
}

#[test]
fn the_lock_file_parser_survives_arbitrary_text() {
    let strategy = prop_oneof![lock_file(), token_soup(HCL_TOKENS, 40), any::<String>()];
    let name = Path::new(".terraform.lock.hcl");
    runner(256)
        .run(&strategy, |text| {
            let (locks, diags) = Locks::parse(&text, name);
            if !diags.has_errors() {
                // What was accepted is written back so that it reads the same.
                let rendered = locks.render();
                let (again, diags) = Locks::parse(&rendered, name);
                prop_assert!(
                    !diags.has_errors(),
                    "{text:?} rendered as {rendered:?}, which has errors"
                );
                prop_assert!(again.equivalent(&locks), "{text:?} did not round-trip");
            }
            Ok(())
        })
        .unwrap();
}

// ------------------------------------------------------ module configuration

const CONFIGURATION_TOKENS: &[&str] = &[
    "terraform",
    "required_providers",
    "provider",
    "resource",
    "module",
    "locals",
    "source",
    "version",
    "alias",
    "for",
    "in",
    "if",
    "for_each",
    "=",
    "=>",
    ":",
    "::",
    "?",
    "...",
    ".",
    "*",
    "[*]",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    ",",
    "\n",
    " ",
    "\t",
    "\"",
    "${",
    "%{",
    "~}",
    "$${",
    "\\",
    "\\u",
    "#",
    "//",
    "/*",
    "*/",
    "<<EOT\n",
    "<<-EOT\n",
    "EOT\n",
    "x",
    "1",
    "1.2.3",
    "\"hashicorp/null\"",
    "\"./child\"",
    "\"~> 1.0\"",
    "endif",
    "endfor",
];

/// `.tf` files are read by tfinstall's own reader of HCL's native syntax,
/// and a module downloaded from anywhere is such a file: nothing in it
/// may crash the reader or make it loop.
#[test]
fn the_configuration_reader_survives_arbitrary_text() {
    let strategy = prop_oneof![token_soup(CONFIGURATION_TOKENS, 60), any::<String>()];
    let dir = tempfile::tempdir().unwrap();
    runner(256)
        .run(&strategy, |text| {
            std::fs::write(dir.path().join("main.tf"), &text).unwrap();
            let _ =
                tfinstall::module::load_requirements(dir.path(), &dir.path().join(".terraform"));
            Ok(())
        })
        .unwrap();
}

// ---------------------------------------------------------- CLI config file

const CLI_CONFIG_TOKENS: &[&str] = &[
    "provider_installation",
    "filesystem_mirror",
    "network_mirror",
    "direct",
    "dev_overrides",
    "credentials",
    "credentials_helper",
    "plugin_cache_dir",
    "disable_checkpoint",
    "host",
    "path",
    "url",
    "include",
    "exclude",
    "token",
    "\"registry.terraform.io/*/*\"",
    "\"example.com\"",
    "\"https://mirror.example/\"",
    "\"/tmp/mirror\"",
    "\"$HOME/x\"",
    "\"${HOME}\"",
    "{",
    "}",
    "[",
    "]",
    "=",
    ",",
    ":",
    "\n",
    " ",
    "\"",
    "#",
    "//",
    "/*",
    "*/",
    "<<EOF\n",
    "EOF\n",
    "true",
    "1",
    "1.5e3",
    "0x1F",
    "-",
];

#[test]
fn the_cli_config_reader_survives_arbitrary_text() {
    let strategy = prop_oneof![
        3 => token_soup(CLI_CONFIG_TOKENS, 40),
        1 => any::<String>(),
        1 => json_value().prop_map(|v| v.to_string()),
    ];
    let dir = tempfile::tempdir().unwrap();
    runner(256)
        .run(&strategy, |text| {
            for name in ["config.tfrc", "config.tfrc.json"] {
                let file = dir.path().join(name);
                std::fs::write(&file, &text).unwrap();
                let env = CliEnv {
                    vars: BTreeMap::from([
                        ("TF_CLI_CONFIG_FILE".to_owned(), file.display().to_string()),
                        ("HOME".to_owned(), dir.path().display().to_string()),
                    ]),
                    profile_dir: Some(dir.path().to_path_buf()),
                    engine: Default::default(),
                };
                let _ = cliconfig::load(&env);
            }
            Ok(())
        })
        .unwrap();
}

// ------------------------------------------------------- protocol documents

/// Any JSON value, keys drawn mostly from the protocols' own vocabulary.
fn json_value() -> impl Strategy<Value = Value> {
    const KEYS: &[&str] = &[
        "versions",
        "version",
        "protocols",
        "platforms",
        "os",
        "arch",
        "archives",
        "url",
        "hashes",
        "warnings",
        "providers.v1",
        "download_url",
        "shasum",
        "linux_amd64",
        "1.0.0",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        interesting().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        3 => prop::sample::select(KEYS).prop_map(str::to_owned),
                        1 => interesting()
                    ],
                    inner
                ),
                0..5
            )
            .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// A field value: mostly a telling string, sometimes any JSON at all.
fn field() -> impl Strategy<Value = Value> {
    prop_oneof![4 => interesting().prop_map(Value::String), 1 => json_value()]
}

/// A document body: shaped like the real one with fuzzed fields, any JSON,
/// or arbitrary bytes.
fn body(shaped: impl Strategy<Value = Value>) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => shaped.prop_map(|v| v.to_string().into_bytes()),
        1 => json_value().prop_map(|v| v.to_string().into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..256),
    ]
}

fn mirror_index() -> impl Strategy<Value = Value> {
    prop::collection::vec((interesting(), json_value()), 0..4).prop_map(
        |versions| json!({ "versions": versions.into_iter().collect::<serde_json::Map<_, _>>() }),
    )
}

fn mirror_version() -> impl Strategy<Value = Value> {
    let archive = (field(), prop::collection::vec(field(), 0..3))
        .prop_map(|(url, hashes)| json!({ "url": url, "hashes": hashes }));
    let platform = prop_oneof![3 => Just("linux_amd64".to_owned()), 1 => interesting()];
    prop::collection::vec((platform, archive), 0..3).prop_map(
        |archives| json!({ "archives": archives.into_iter().collect::<serde_json::Map<_, _>>() }),
    )
}

fn registry_versions() -> impl Strategy<Value = Value> {
    let platform = (field(), field()).prop_map(|(os, arch)| json!({ "os": os, "arch": arch }));
    let entry = (
        field(),
        prop::collection::vec(field(), 0..3),
        prop::collection::vec(platform, 0..3),
    )
        .prop_map(|(version, protocols, platforms)| {
            json!({ "version": version, "protocols": protocols, "platforms": platforms })
        });
    (
        prop::collection::vec(entry, 0..4),
        prop::collection::vec(field(), 0..2),
    )
        .prop_map(|(versions, warnings)| json!({ "versions": versions, "warnings": warnings }))
}

fn registry_download() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(field(), 0..3),
        (field(), field(), field()),
        (field(), field(), field(), field()),
        (field(), field()),
    )
        .prop_map(
            |(protocols, (os, arch, filename), (download, sums, sig, shasum), (key_id, armor))| {
                json!({
                    "protocols": protocols,
                    "os": os,
                    "arch": arch,
                    "filename": filename,
                    "download_url": download,
                    "shasums_url": sums,
                    "shasums_signature_url": sig,
                    "shasum": shasum,
                    "signing_keys": { "gpg_public_keys": [{ "key_id": key_id, "ascii_armor": armor }] },
                })
            },
        )
}

fn discovery() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => Just(json!({ "providers.v1": "/v1/providers/" })),
        1 => field().prop_map(|f| json!({ "providers.v1": f })),
    ]
}

/// An HTTPS server and a client trusting it, for in-process source calls.
struct Protocol {
    _ca: TestCa,
    server: TestServer,
    client: reqwest::Client,
    runtime: tokio::runtime::Runtime,
}

impl Protocol {
    fn new() -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca = TestCa::new();
        let server = TestServer::https(&ca);
        let certificate = reqwest::Certificate::from_pem(ca.ca_pem().as_bytes()).unwrap();
        let client = reqwest::Client::builder()
            .tls_certs_only([certificate])
            .build()
            .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Protocol {
            _ca: ca,
            server,
            client,
            runtime,
        }
    }

    fn serve(&self, path: &str, body: &[u8]) {
        self.server
            .route(path, Response::bytes("application/json", body.to_vec()));
    }

    fn api(&self) -> tfinstall::http::ApiClient {
        tfinstall::http::ApiClient::new(self.client.clone(), Duration::from_secs(5), 0)
    }
}

fn no_tokens() -> tfinstall::source::discovery::TokenLookup {
    Arc::new(tfinstall::cliconfig::Credentials::default())
}

#[test]
fn the_network_mirror_decoder_survives_arbitrary_documents() {
    let protocol = Protocol::new();
    let provider = ProviderAddr::parse("hashicorp/null").unwrap();
    let platform = Platform::parse("linux_amd64").unwrap();
    let version = Version::parse("1.0.0").unwrap();
    let base = url::Url::parse(&protocol.server.url()).unwrap();
    runner(96)
        .run(
            &(body(mirror_index()), body(mirror_version())),
            |(index, version_doc)| {
                let dir = "/registry.terraform.io/hashicorp/null/";
                protocol.serve(&format!("{dir}index.json"), &index);
                protocol.serve(&format!("{dir}1.0.0.json"), &version_doc);
                let mirror =
                    NetworkMirror::new(base.clone(), protocol.api(), no_tokens(), None, false);
                protocol.runtime.block_on(async {
                    let _ = mirror.available_versions(&provider).await;
                    let _ = mirror.package_meta(&provider, &version, &platform).await;
                });
                Ok(())
            },
        )
        .unwrap();
}

#[test]
fn the_registry_decoder_survives_arbitrary_documents() {
    let protocol = Protocol::new();
    let host = protocol.server.localhost_host();
    let provider = ProviderAddr::parse(&format!("{host}/hashicorp/null")).unwrap();
    let platform = Platform::parse("linux_amd64").unwrap();
    let version = Version::parse("1.0.0").unwrap();
    let strategy = (
        body(discovery()),
        body(registry_versions()),
        body(registry_download()),
        prop::collection::vec(any::<u8>(), 0..128),
    );
    runner(96)
        .run(&strategy, |(discovery_doc, versions, download, sums)| {
            protocol.serve("/.well-known/terraform.json", &discovery_doc);
            protocol.serve("/v1/providers/hashicorp/null/versions", &versions);
            protocol.serve(
                "/v1/providers/hashicorp/null/1.0.0/download/linux/amd64",
                &download,
            );
            protocol.serve("/x.zip", b"");
            protocol.serve("/SHA256SUMS", &sums);
            protocol.serve("/SHA256SUMS.sig", &sums);
            let api = protocol.api();
            let discovery = Arc::new(Discovery::new(&api, no_tokens(), BTreeMap::new(), None));
            let registry = RegistrySource::new(discovery, api, None);
            protocol.runtime.block_on(async {
                let _ = registry.available_versions(&provider).await;
                let _ = registry.package_meta(&provider, &version, &platform).await;
            });
            Ok(())
        })
        .unwrap();
}
