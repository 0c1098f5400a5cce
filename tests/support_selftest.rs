//! Proves the shared test toolkit (`tests/support/`) does what other tests
//! rely on: TLS trust, HTTP/2, fault injection, signatures, zips, fixtures.
//! Everything is checked with independent clients (reqwest, rPGP, the zip
//! crate), not with the toolkit's own helpers.

mod support;

use std::io::{Cursor, Read as _};
use std::time::{Duration, Instant};

use support::*;

/// Runs a future on this test's runtime. One runtime per test thread,
/// because reqwest pools connections on the runtime that opened them.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    thread_local! {
        static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
    }
    RUNTIME.with(|runtime| runtime.block_on(future))
}

/// A client that trusts the test CA and nothing else.
fn client_trusting(ca: &TestCa) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certificate = reqwest::Certificate::from_pem(ca.ca_pem().as_bytes()).unwrap();
    reqwest::Client::builder()
        .tls_certs_only([certificate])
        .build()
        .unwrap()
}

fn get(client: &reqwest::Client, url: &str) -> (u16, String, Vec<u8>) {
    block_on(async {
        let response = client.get(url).send().await.unwrap();
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|value| value.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (
            status,
            content_type,
            response.bytes().await.unwrap().to_vec(),
        )
    })
}

#[test]
fn https_is_trusted_through_the_test_ca_only_and_negotiates_http2() {
    let ca = TestCa::new();
    let server = TestServer::https(&ca);
    server.route("/hello", Response::json(r#"{"hello":"world"}"#));

    let client = client_trusting(&ca);
    let response = block_on(async {
        client
            .get(server.url_for("/hello"))
            .header("authorization", "Bearer secret-token")
            .send()
            .await
            .unwrap()
    });
    assert_eq!(response.status(), 200);
    assert_eq!(response.version(), reqwest::Version::HTTP_2);
    let logged = &server.requests_to("/hello")[0];
    assert_eq!(logged.version, "HTTP/2.0");
    assert_eq!(logged.header("Authorization"), Some("Bearer secret-token"));

    // Same name, also in the certificate.
    let via_localhost = format!("https://{}/hello", server.localhost_host());
    assert_eq!(get(&client, &via_localhost).0, 200);

    let stranger = client_trusting(&TestCa::new());
    let refused = block_on(stranger.get(server.url_for("/hello")).send());
    assert!(refused.is_err(), "a client trusting another CA must refuse");
    assert_eq!(server.count("/hello"), 2);
}

#[test]
fn http1_only_and_plain_http_servers_work() {
    let ca = TestCa::new();
    let http1 = TestServer::https_http1_only(&ca);
    http1.route("/x", Response::text("one"));
    let response = block_on(async {
        client_trusting(&ca)
            .get(http1.url_for("/x"))
            .send()
            .await
            .unwrap()
    });
    assert_eq!(response.version(), reqwest::Version::HTTP_11);

    let plain = TestServer::http();
    plain.route("/x", Response::text("two"));
    assert!(plain.url().starts_with("http://127.0.0.1:"));
    let (status, _, body) = get(&client_trusting(&ca), &plain.url_for("/x"));
    assert_eq!((status, body.as_slice()), (200, b"two".as_slice()));
}

#[test]
fn a_status_sequence_fails_then_recovers() {
    let ca = TestCa::new();
    let server = TestServer::https(&ca);
    server.route("/flaky", Response::text("ok"));
    server.status_sequence("/flaky", &[500, 503, 200]);
    let client = client_trusting(&ca);
    let statuses: Vec<u16> = (0..4)
        .map(|_| get(&client, &server.url_for("/flaky")).0)
        .collect();
    assert_eq!(statuses, [500, 503, 200, 200]);

    server.fault("*", Fault::Respond(Response::text("busy").status(429)));
    assert_eq!(get(&client, &server.url_for("/anything")).0, 429);
}

#[test]
fn latency_delays_the_response() {
    let ca = TestCa::new();
    let server = TestServer::https(&ca);
    server.route("/slow", Response::text("late"));
    server.fault("/slow", Fault::Latency(Duration::from_millis(300)));
    let started = Instant::now();
    assert_eq!(get(&client_trusting(&ca), &server.url_for("/slow")).0, 200);
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[test]
fn a_truncated_body_fails_the_download_on_http1_and_http2() {
    let ca = TestCa::new();
    for server in [TestServer::https(&ca), TestServer::https_http1_only(&ca)] {
        server.route(
            "/big",
            Response::bytes("application/zip", vec![7u8; 100_000]),
        );
        server.fault("/big", Fault::TruncateAfter(40_000));
        let client = client_trusting(&ca);
        let outcome = block_on(async {
            let response = client.get(server.url_for("/big")).send().await.unwrap();
            assert_eq!(response.content_length(), Some(100_000));
            response.bytes().await
        });
        assert!(outcome.is_err(), "a short body must be an error");
    }
}

/// A reset is a TCP RST on the whole connection, after exactly the bytes
/// asked for, over TLS (both protocols) and plain HTTP.
#[test]
fn a_reset_connection_fails_the_download_with_connection_reset() {
    let ca = TestCa::new();
    let servers = [
        TestServer::https(&ca),
        TestServer::https_http1_only(&ca),
        TestServer::http(),
    ];
    for server in servers {
        server.route(
            "/big",
            Response::bytes("application/zip", vec![7u8; 100_000]),
        );
        server.fault("/big", Fault::ResetAfter(40_000));
        let client = client_trusting(&ca);
        let (received, error) = block_on(async {
            let mut response = client.get(server.url_for("/big")).send().await.unwrap();
            let mut received = 0;
            loop {
                match response.chunk().await {
                    Ok(Some(chunk)) => received += chunk.len(),
                    Ok(None) => panic!("the body ended instead of failing"),
                    Err(err) => break (received, err),
                }
            }
        });
        assert_eq!(received, 40_000, "{}", server.url());
        let chain = format!("{error:?}").to_lowercase().replace(' ', "");
        assert!(
            chain.contains("connectionreset"),
            "{}: {chain}",
            server.url()
        );
    }
}

#[test]
fn a_stalled_body_hangs_until_the_client_times_out() {
    let ca = TestCa::new();
    let server = TestServer::https(&ca);
    server.route(
        "/stall",
        Response::bytes("application/zip", vec![1u8; 50_000]),
    );
    server.fault("/stall", Fault::StallAfter(20_000));
    let client = client_trusting(&ca);
    let started = Instant::now();
    let (received, error) = block_on(async {
        let mut response = client.get(server.url_for("/stall")).send().await.unwrap();
        let mut received = 0;
        loop {
            match tokio::time::timeout(Duration::from_millis(500), response.chunk()).await {
                Ok(Ok(Some(chunk))) => received += chunk.len(),
                Ok(other) => panic!("stream ended instead of stalling: {other:?}"),
                Err(elapsed) => break (received, elapsed),
            }
        }
    });
    assert_eq!(received, 20_000, "stopped after {error}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn ranges_let_a_client_resume_a_truncated_download() {
    let ca = TestCa::new();
    let server = TestServer::https(&ca);
    let content: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    server.route(
        "/pkg.zip",
        Response::bytes("application/zip", content.clone()),
    );
    server.fault_sequence("/pkg.zip", [Fault::TruncateAfter(30_000)]);
    server.enable_ranges();
    let client = client_trusting(&ca);

    let first = block_on(async {
        let mut response = client.get(server.url_for("/pkg.zip")).send().await.unwrap();
        let mut received = Vec::new();
        while let Ok(Some(chunk)) = response.chunk().await {
            received.extend_from_slice(&chunk);
        }
        received
    });
    assert_eq!(first.len(), 30_000);

    let rest = block_on(async {
        let response = client
            .get(server.url_for("/pkg.zip"))
            .header("range", format!("bytes={}-", first.len()))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 206);
        assert_eq!(
            response.headers()["content-range"],
            "bytes 30000-69999/70000"
        );
        response.bytes().await.unwrap()
    });
    assert_eq!([first, rest.to_vec()].concat(), content);
    assert_eq!(
        server.requests_to("/pkg.zip")[1].header("range"),
        Some("bytes=30000-")
    );

    let tail = block_on(async {
        let response = client
            .get(server.url_for("/pkg.zip"))
            .header("range", "bytes=80000-")
            .send()
            .await
            .unwrap();
        response.status().as_u16()
    });
    assert_eq!(tail, 416);
}

#[test]
fn redirects_are_followed_by_clients() {
    let ca = TestCa::new();
    let server = TestServer::https(&ca);
    server.route("/new/place", Response::text("moved here"));
    server.fault(
        "/old/place",
        Fault::Redirect {
            status: 301,
            location: "../new/place".to_owned(),
        },
    );
    let (status, _, body) = get(&client_trusting(&ca), &server.url_for("/old/place"));
    assert_eq!((status, body.as_slice()), (200, b"moved here".as_slice()));
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/old/place", "/new/place"]);
}

#[test]
fn a_served_directory_gets_static_host_content_types_and_stays_closed() {
    let ca = TestCa::new();
    let server = TestServer::https(&ca);
    let site = tempfile::tempdir().unwrap();
    let root = site.path().join("root");
    std::fs::create_dir_all(root.join("a")).unwrap();
    std::fs::write(root.join("a/index.json"), "{}").unwrap();
    std::fs::write(root.join("a/versions"), r#"{"versions":[]}"#).unwrap();
    std::fs::write(root.join("a/p.zip"), b"PK").unwrap();
    std::fs::write(root.join("a/blob"), b"\x00\x01").unwrap();
    std::fs::write(site.path().join("secret"), b"outside").unwrap();
    server.serve_dir(&root);
    let client = client_trusting(&ca);

    let content_type = |path: &str| get(&client, &server.url_for(path)).1;
    assert_eq!(content_type("/a/index.json"), "application/json");
    assert_eq!(content_type("/a/versions"), "application/json");
    assert_eq!(content_type("/a/p.zip"), "application/zip");
    assert_eq!(content_type("/a/blob"), "application/octet-stream");
    assert_eq!(get(&client, &server.url_for("/a/%69ndex.json")).0, 200);
    assert_eq!(
        get(&client, &server.url_for("/a/%2e%2e/%2e%2e/secret")).0,
        404
    );
    assert_eq!(get(&client, &server.url_for("/a/missing")).0, 404);
    let head = block_on(client.head(server.url_for("/a/versions")).send()).unwrap();
    assert_eq!(head.content_length(), Some(15));
    assert_eq!(get(&client, &server.url_for("/a")).0, 404);
}

/// Verifies like the installer will: parse the armored key, find the
/// issuer among the primary key and subkeys, check bindings, then the
/// signature.
fn rpgp_verifies(armored_key: &str, data: &[u8], signature: &[u8]) -> bool {
    use pgp::composed::{Deserializable as _, DetachedSignature, SignedPublicKey};
    use pgp::types::KeyDetails as _;

    let (key, _) = SignedPublicKey::from_armor_single(Cursor::new(armored_key)).unwrap();
    key.verify_bindings().unwrap();
    let signature = DetachedSignature::from_bytes(signature).unwrap();
    let issuers = signature.signature.issuer_key_id();
    if issuers.contains(&&key.primary_key.legacy_key_id()) {
        return signature.verify(&key.primary_key, data).is_ok();
    }
    key.public_subkeys.iter().any(|subkey| {
        issuers.contains(&&subkey.key.legacy_key_id())
            && subkey.verify_bindings(&key.primary_key).is_ok()
            && signature.verify(&subkey.key, data).is_ok()
    })
}

#[test]
fn generated_keys_make_signatures_that_rpgp_verifies() {
    for key in [PgpKey::generate(), PgpKey::generate_with_signing_subkey()] {
        let data = b"0123abcd  terraform-provider-x_1.0.0_linux_amd64.zip\n";
        let signature = key.sign_detached(data);
        assert!(rpgp_verifies(&key.public_armor(), data, &signature));
        assert!(!rpgp_verifies(&key.public_armor(), b"tampered", &signature));
        assert!(key.verifies(data, &signature));

        let other = PgpKey::generate();
        assert!(!rpgp_verifies(&other.public_armor(), data, &signature));

        assert_eq!(key.key_id().len(), 16);
        assert!(
            key.key_id()
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_lowercase())
        );
        assert!(key.fingerprint().ends_with(&key.key_id()));
        assert!(
            key.public_armor()
                .starts_with("-----BEGIN PGP PUBLIC KEY BLOCK-----")
        );
        assert!(
            key.sign_detached_armored(data)
                .starts_with("-----BEGIN PGP SIGNATURE-----")
        );
    }
    let with_subkey = PgpKey::generate_with_signing_subkey();
    assert_ne!(with_subkey.signing_key_id(), with_subkey.key_id());
}

#[test]
fn h1_matches_go_dirhash_vectors() {
    // golang.org/x/mod sumdb/dirhash's `hash_test.go` recipe.
    let files = [("abc", "data for abc"), ("xyz", "data for xyz")];
    assert_eq!(
        support::h1_hash(&files),
        "h1:EP6WfDoQTSk9klnxcjriWJOGztueJUywHNmWeq+efB8="
    );
    let reversed = [files[1], files[0]];
    assert_eq!(support::h1_hash(&reversed), support::h1_hash(&files));
    let empty: [(&str, &[u8]); 0] = [];
    assert_eq!(
        support::h1_hash(&empty),
        "h1:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
    );
    // Terraform's fake package from `internal/command/init_test.go`.
    let fake = [(
        "terraform-provider-test_1.2.3",
        "This is a fake provider package for registry.terraform.io/hashicorp/test 1.2.3, not a real provider.\n",
    )];
    assert_eq!(
        support::h1_hash(&fake),
        "h1:wlbEC2mChQZ2hhgUhl6SeVLPP7fMqOFUZAQhQ9GIIno="
    );
}

/// One entry as the zip crate reads it back.
struct ReadEntry {
    name: Vec<u8>,
    mode: Option<u32>,
    is_symlink: bool,
    content: Vec<u8>,
}

fn read_zip(bytes: &[u8]) -> Vec<ReadEntry> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).unwrap();
    (0..archive.len())
        .map(|index| {
            let mut entry = archive.by_index(index).unwrap();
            let mut content = Vec::new();
            entry.read_to_end(&mut content).unwrap();
            ReadEntry {
                name: entry.name_raw().to_vec(),
                mode: entry.unix_mode(),
                is_symlink: entry.is_symlink(),
                content,
            }
        })
        .collect()
}

#[test]
fn provider_zips_are_deterministic_and_keep_modes() {
    let entries = [
        ZipEntry::executable("terraform-provider-x_v1.0.0", b"#!/bin/sh\n".to_vec()),
        ZipEntry::file("LICENSE", b"MPL".to_vec()),
    ];
    for compression in [Compression::Deflated, Compression::Stored] {
        let zip = build_zip(&entries, compression);
        assert_eq!(zip, build_zip(&entries, compression), "deterministic");
        let read = read_zip(&zip);
        assert_eq!(read[0].name, b"terraform-provider-x_v1.0.0");
        assert_eq!(read[0].mode, Some(0o100755));
        assert_eq!(read[1].mode, Some(0o100644));
        assert_eq!(read[1].content, b"MPL");
    }

    let spec = ProviderSpec::new("hashicorp", "x", "1.0.0").payload(Payload::Random(300_000));
    let platform = current_platform();
    let zip = spec.package_zip(&platform);
    assert!(zip.len() > 300_000, "random payload must not compress");
    let read = read_zip(&zip);
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].content, spec.executable_content(&platform));
    assert_eq!(support::h1_of_zip(&zip), spec.h1(&platform));
}

/// The benchmark's aws-shaped package: deflated like a Go executable (the
/// aws provider's is 4.6:1) and packed as goreleaser packs releases.
#[test]
fn a_go_release_deflates_like_a_go_executable_with_sizes_after_its_data() {
    let len = 4 << 20;
    let spec = ProviderSpec::new("hashicorp", "aws", "1.0.0").payload(Payload::GoRelease(len));
    let platform = current_platform();
    let zip = spec.package_zip(&platform);
    let ratio = len as f64 / zip.len() as f64;
    assert!((4.2..5.0).contains(&ratio), "ratio {ratio:.2}");
    assert_ne!(zip[6] & 0x08, 0, "sizes should follow the data");
    let read = read_zip(&zip);
    assert_eq!(read.len(), 2);
    assert_eq!(read[0].content, spec.executable_content(&platform));
    assert_eq!(read[1].name, b"LICENSE.txt");
    assert_eq!(support::h1_of_zip(&zip), spec.h1(&platform));
}

/// Every local entry in file order. `ZipArchive` indexes entries by name
/// and so shows only one of several same-named entries.
fn read_zip_stream(bytes: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut reader = Cursor::new(bytes);
    let mut entries = Vec::new();
    while let Some(mut entry) = zip::read::read_zipfile_from_stream(&mut reader).unwrap() {
        let mut content = Vec::new();
        entry.read_to_end(&mut content).unwrap();
        entries.push((entry.name_raw().to_vec(), content));
    }
    entries
}

#[test]
fn raw_zips_keep_hostile_names_symlinks_and_duplicates() {
    let zip = RawZip::new()
        .file("../escape.txt", b"up", 0o644)
        .file("/etc/absolute", b"abs", 0o600)
        .dir("sub/")
        .symlink("sub/link", "/etc/passwd")
        .file("caf\u{e9}", b"utf8", 0o644)
        .file("same", b"first", 0o644)
        .file("same", b"second", 0o755)
        .build();
    let streamed = read_zip_stream(&zip);
    let names: Vec<&[u8]> = streamed.iter().map(|entry| entry.0.as_slice()).collect();
    assert_eq!(
        names,
        [
            b"../escape.txt".as_slice(),
            b"/etc/absolute",
            b"sub/",
            b"sub/link",
            "caf\u{e9}".as_bytes(),
            b"same",
            b"same",
        ]
    );
    assert_eq!(streamed[5].1, b"first");
    assert_eq!(streamed[6].1, b"second");

    let read = read_zip(&zip);
    assert_eq!(read[1].mode, Some(0o100600));
    assert_eq!(read[2].mode, Some(0o040755));
    assert!(read[3].is_symlink, "symlink entry");
    assert_eq!(read[3].content, b"/etc/passwd");
    assert_eq!(read[4].name, "caf\u{e9}".as_bytes());
}

#[test]
fn a_deflate_bomb_inflates_to_zeros_with_a_valid_crc() {
    let len = 8 * 1024 * 1024 + 123;
    let zip = RawZip::new()
        .deflate_bomb("terraform-provider-bomb", len)
        .build();
    assert!(
        zip.len() < 16 * 1024,
        "ratio ~1000:1, got {} bytes",
        zip.len()
    );
    // Reading to the end makes the zip crate check the CRC.
    let read = read_zip(&zip);
    assert_eq!(read[0].content.len() as u64, len);
    assert!(read[0].content.iter().all(|&byte| byte == 0));

    let started = Instant::now();
    let huge = RawZip::new().deflate_bomb("bomb", 3 << 30).build();
    assert!(huge.len() < 4 * 1024 * 1024);
    assert!(started.elapsed() < Duration::from_secs(20));

    let liar = RawZip::new()
        .deflate_bomb("liar", 1 << 20)
        .declared_size(10)
        .build();
    let archive = zip::ZipArchive::new(Cursor::new(liar)).unwrap();
    assert_eq!(archive.decompressed_size(), Some(10));
}

/// Resolves `reference` against `base` as RFC 3986 says (url crate).
fn resolve(base: &str, reference: &str) -> String {
    url::Url::parse(base)
        .unwrap()
        .join(reference)
        .unwrap()
        .to_string()
}

#[test]
fn a_registry_fixture_serves_the_provider_registry_protocol() {
    let ca = TestCa::new();
    let key = PgpKey::generate_with_signing_subkey();
    let platform = current_platform();
    for style in [
        UrlStyle::Absolute,
        UrlStyle::RootRelative,
        UrlStyle::PathRelative,
    ] {
        let server = TestServer::https(&ca);
        let site = tempfile::tempdir().unwrap();
        let tree = Registry::new(&key)
            .provider(
                ProviderSpec::new("hashicorp", "null", "3.2.0")
                    .platforms(&[&platform, "windows_386"]),
            )
            .provider(ProviderSpec::new("hashicorp", "null", "3.1.0").protocols(&["5.0", "6.0"]))
            .url_style(style)
            .write(site.path(), &server.url());
        server.serve_dir(site.path());
        let client = client_trusting(&ca);
        let json = |url: &str| -> serde_json::Value {
            let (status, content_type, body) = get(&client, url);
            assert_eq!(
                (status, content_type.as_str()),
                (200, "application/json"),
                "{url}"
            );
            serde_json::from_slice(&body).unwrap()
        };

        let discovery_url = server.url_for("/.well-known/terraform.json");
        let services = json(&discovery_url);
        let providers_v1 = resolve(&discovery_url, services["providers.v1"].as_str().unwrap());
        let versions = json(&resolve(&providers_v1, "hashicorp/null/versions"));
        let listed: Vec<&str> = versions["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["version"].as_str().unwrap())
            .collect();
        assert_eq!(listed, ["3.2.0", "3.1.0"]);

        let (os, arch) = platform.split_once('_').unwrap();
        let meta_url = resolve(
            &providers_v1,
            &format!("hashicorp/null/3.2.0/download/{os}/{arch}"),
        );
        let meta = json(&meta_url);
        let package = tree.package("null", "3.2.0", &platform);
        assert_eq!(meta["filename"], package.filename.as_str());
        assert_eq!(
            (meta["os"].as_str(), meta["arch"].as_str()),
            (Some(os), Some(arch))
        );

        let zip_url = resolve(&meta_url, meta["download_url"].as_str().unwrap());
        let sums_url = resolve(&meta_url, meta["shasums_url"].as_str().unwrap());
        let sig_url = resolve(&meta_url, meta["shasums_signature_url"].as_str().unwrap());
        if style == UrlStyle::Absolute {
            assert!(
                meta["download_url"]
                    .as_str()
                    .unwrap()
                    .starts_with("https://")
            );
        }
        let (_, zip_type, zip) = get(&client, &zip_url);
        assert_eq!(zip_type, "application/zip");
        let (_, _, sums) = get(&client, &sums_url);
        let (_, _, signature) = get(&client, &sig_url);

        let shasum = meta["shasum"].as_str().unwrap();
        assert_eq!(support::sha256_hex(&zip), shasum);
        assert_eq!(package.zh.as_deref(), Some(format!("zh:{shasum}").as_str()));
        assert_eq!(support::h1_of_zip(&zip), package.h1);
        let sums_text = String::from_utf8(sums.clone()).unwrap();
        assert!(sums_text.contains(&format!("{shasum}  {}\n", package.filename)));
        assert_eq!(sums_text.lines().count(), 2);

        let listed_key = &meta["signing_keys"]["gpg_public_keys"][0];
        assert_eq!(listed_key["key_id"], key.key_id().as_str());
        assert!(rpgp_verifies(
            listed_key["ascii_armor"].as_str().unwrap(),
            &sums,
            &signature
        ));
        assert_eq!(server.count(package.url_path.as_deref().unwrap()), 1);

        let old = json(&resolve(
            &providers_v1,
            &format!("hashicorp/null/3.1.0/download/{os}/{arch}"),
        ));
        assert_eq!(old["protocols"], serde_json::json!(["5.0", "6.0"]));
    }
}

#[test]
fn a_network_mirror_fixture_serves_the_mirror_protocol() {
    let ca = TestCa::new();
    let platform = current_platform();
    let server = TestServer::https(&ca);
    let site = tempfile::tempdir().unwrap();
    let base = server.url_for("/mirror/");
    let tree = NetworkMirror::new()
        .provider(ProviderSpec::new("hashicorp", "random", "3.0.0"))
        .provider(
            ProviderSpec::new("hashicorp", "random", "3.1.0")
                .platforms(&[&platform, "darwin_arm64"]),
        )
        .provider(ProviderSpec::new("corp", "thing", "0.1.0").hostname("example.com:8443"))
        .write(&site.path().join("mirror"), &base);
    server.serve_dir(site.path());
    let client = client_trusting(&ca);
    let json = |url: &str| -> serde_json::Value {
        let (status, content_type, body) = get(&client, url);
        assert_eq!(
            (status, content_type.as_str()),
            (200, "application/json"),
            "{url}"
        );
        serde_json::from_slice(&body).unwrap()
    };

    let index = json(&resolve(
        &base,
        "registry.terraform.io/hashicorp/random/index.json",
    ));
    assert_eq!(
        index,
        serde_json::json!({"versions": {"3.0.0": {}, "3.1.0": {}}})
    );
    let version_url = resolve(&base, "registry.terraform.io/hashicorp/random/3.1.0.json");
    let archives = json(&version_url);
    let archive = &archives["archives"][&platform];
    let package = tree.package("random", "3.1.0", &platform);
    assert_eq!(archive["url"], package.filename.as_str());
    assert_eq!(
        archive["hashes"],
        serde_json::json!([package.h1, package.zh.as_deref().unwrap()])
    );
    assert!(archives["archives"]["darwin_arm64"].is_object());
    let (_, _, zip) = get(
        &client,
        &resolve(&version_url, archive["url"].as_str().unwrap()),
    );
    assert_eq!(support::zh_hash(&zip), package.zh.clone().unwrap());
    assert_eq!(support::h1_of_zip(&zip), package.h1);

    // "./" keeps the host's ":" from reading as a URL scheme (RFC 3986 §4.2).
    let other = json(&resolve(&base, "./example.com:8443/corp/thing/0.1.0.json"));
    assert!(other["archives"][&platform]["url"].is_string());

    let omitted = tempfile::tempdir().unwrap();
    let spec = ProviderSpec::new("hashicorp", "random", "3.0.0");
    NetworkMirror::new()
        .provider(spec.clone())
        .hashes(MirrorHashes::Omitted)
        .url_style(UrlStyle::Absolute)
        .write(omitted.path(), &base);
    let version_doc = omitted
        .path()
        .join("registry.terraform.io/hashicorp/random/3.0.0.json");
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&version_doc).unwrap()).unwrap();
    assert!(doc["archives"][&platform].get("hashes").is_none());
    assert!(
        doc["archives"][&platform]["url"]
            .as_str()
            .unwrap()
            .starts_with(&base)
    );

    edit_json(&version_doc, |doc| {
        doc["archives"][&platform]["hashes"] = serde_json::json!(["zz:x"])
    });
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&version_doc).unwrap()).unwrap();
    assert_eq!(doc["archives"][&platform]["hashes"][0], "zz:x");

    let wrong = tempfile::tempdir().unwrap();
    let tree = NetworkMirror::new()
        .provider(spec)
        .hashes(MirrorHashes::Wrong)
        .write(wrong.path(), &base);
    let doc: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            wrong
                .path()
                .join("registry.terraform.io/hashicorp/random/3.0.0.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let listed = doc["archives"][&platform]["hashes"][0].as_str().unwrap();
    assert!(listed.starts_with("h1:"));
    assert_ne!(listed, tree.packages[0].h1);
}

#[test]
fn a_filesystem_mirror_fixture_uses_both_layouts() {
    use std::os::unix::fs::PermissionsExt as _;

    let dir = tempfile::tempdir().unwrap();
    let tree = FsMirror::new()
        .provider(
            ProviderSpec::new("hashicorp", "null", "2.1.0"),
            Layout::Packed,
        )
        .provider(
            ProviderSpec::new("awesomecorp", "happycloud", "0.1.0-alpha.2")
                .hostname("tfe.example.com"),
            Layout::Unpacked,
        )
        .write(dir.path());
    let platform = current_platform();

    let packed = tree.package("null", "2.1.0", &platform);
    assert_eq!(
        packed.path,
        dir.path()
            .join("registry.terraform.io/hashicorp/null")
            .join(format!("terraform-provider-null_2.1.0_{platform}.zip"))
    );
    let zip = std::fs::read(&packed.path).unwrap();
    assert_eq!(support::h1_of_zip(&zip), packed.h1);

    let unpacked = tree.package("happycloud", "0.1.0-alpha.2", &platform);
    assert_eq!(
        unpacked.path,
        dir.path()
            .join("tfe.example.com/awesomecorp/happycloud/0.1.0-alpha.2")
            .join(&platform)
    );
    assert!(unpacked.zh.is_none());
    let executable = unpacked
        .path
        .join("terraform-provider-happycloud_v0.1.0-alpha.2");
    let mode = std::fs::metadata(&executable).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o755);
    let content = std::fs::read(&executable).unwrap();
    assert_eq!(
        support::h1_hash(&[("terraform-provider-happycloud_v0.1.0-alpha.2", content)]),
        unpacked.h1
    );
}

#[test]
fn the_tfinstall_command_runs_with_a_clean_environment() {
    let ca = TestCa::new();
    let home = tempfile::tempdir().unwrap();
    let mut command = support::tfinstall_command(home.path());
    ca.configure(&mut command);
    let environment: Vec<_> = command
        .get_envs()
        .map(|(name, value)| (name.to_owned(), value.map(|v| v.to_owned())))
        .collect();
    let value_of = |name: &str| {
        environment
            .iter()
            .find(|(key, _)| key == name)
            .and_then(|(_, value)| value.clone())
    };
    assert_eq!(value_of("HOME"), Some(home.path().into()));
    assert_eq!(value_of("SSL_CERT_FILE"), Some(ca.ca_pem_path().into()));
    assert_eq!(value_of("SSL_CERT_DIR"), None);
    command.arg("--help").assert().success();
}

/// A fresh machine has no `docker-registry`: the OCI tests fetch Debian's
/// package into `target/` themselves. Forced here even where the package
/// is installed, so the fetch keeps working.
#[test]
fn the_oci_registry_is_fetched_when_not_installed() {
    let binary = support::oci_registry::fetched_registry_binary();
    assert!(
        binary.starts_with(env!("CARGO_TARGET_TMPDIR")),
        "{}",
        binary.display()
    );
    let output = std::process::Command::new(&binary)
        .arg("--version")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("registry"),
        "{output:?}"
    );
}

/// A git client that trusts the test CA, with no configuration of the user's.
fn git_client(ca: &TestCa, dir: &std::path::Path) -> std::process::Command {
    let mut command = std::process::Command::new("git");
    command
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_SSL_CAINFO", ca.ca_pem_path())
        .env("GIT_TERMINAL_PROMPT", "0");
    command
}

#[test]
fn the_git_server_serves_real_repositories_over_smart_http_version_2() {
    let ca = TestCa::new();
    let server = TestServer::https(&ca);
    let git = GitServer::start(&server);
    let repo = git.create("module");
    let first = repo.history("main", 200, 20);
    repo.tag("v1.0.0", &first);
    let second = repo.commit("main", "readme", &[("README.md", b"# module\n")]);
    repo.branch("feature", &first);
    assert_ne!(first, second);
    assert_eq!(repo.rev_parse("v1.0.0"), first);
    // 200 commits and 20 files: the first tree's 20 blobs, then one new
    // blob, one tree and one commit per later commit (and the readme).
    assert!(repo.object_count() > 600, "{}", repo.object_count());

    let scratch = tempfile::tempdir().unwrap();
    let full = git_client(&ca, scratch.path())
        .args(["clone", "--quiet", "--bare", repo.url(), "full.git"])
        .output()
        .unwrap();
    assert!(
        full.status.success(),
        "{}",
        String::from_utf8_lossy(&full.stderr)
    );
    let full_bytes = server.bytes_served();
    // Version 2, as GitHub speaks it: the client said so and was answered.
    let requests = server.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.header("git-protocol") == Some("version=2"))
    );
    assert!(
        requests
            .iter()
            .any(|r| r.method == "POST" && r.path.ends_with("/git-upload-pack"))
    );

    // A commit that is no branch's tip, fetched alone by its id.
    let shallow = scratch.path().join("shallow");
    let init = git_client(&ca, scratch.path())
        .args(["init", "--quiet", "shallow"])
        .output()
        .unwrap();
    assert!(init.status.success());
    server.clear_log();
    let before = server.bytes_served();
    let fetched = git_client(&ca, &shallow)
        .args(["fetch", "--quiet", "--depth", "1", repo.url(), &first])
        .output()
        .unwrap();
    assert!(
        fetched.status.success(),
        "{}",
        String::from_utf8_lossy(&fetched.stderr)
    );
    let shallow_bytes = server.bytes_served() - before;
    let count = git_client(&ca, &shallow)
        .args(["rev-list", "--count", "FETCH_HEAD"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&count.stdout).trim(), "1");
    assert!(
        shallow_bytes * 5 < full_bytes,
        "one commit's tree ({shallow_bytes} bytes) should cost far less than the history ({full_bytes} bytes)"
    );
}
