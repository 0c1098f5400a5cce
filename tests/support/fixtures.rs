//! On-disk trees that a [`TestServer`](super::TestServer) serves as a provider
//! registry or a network mirror, or that the installer reads directly as a
//! filesystem mirror.
//!
//! Everything is a static file, as on a real static-site registry or mirror,
//! so a test can tamper with any of it (see [`edit_json`]) after writing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::openpgp::PgpKey;
use super::zips::{Compression, ZipEntry, build_zip, build_zip_sizes_after};
use super::{h1_hash, sha256_hex, zh_hash};

/// What the provider executable inside a package contains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload {
    /// A short shell script naming the package: distinct per platform, so
    /// every package has its own hashes.
    Small,
    /// This many pseudo-random (incompressible, deterministic) bytes, for
    /// benchmarks and streaming tests.
    Random(usize),
    /// This many pseudo-random bytes of three bits each, which deflate about
    /// 2.6× as Go executables do (2.5–4×): inflating them costs what it
    /// costs for a real provider.
    Compressible(usize),
    /// A provider release as goreleaser packs it: an executable of this
    /// many bytes that deflate and inflate like a Go executable (see
    /// [`go_like_bytes`]) and a `LICENSE.txt`, each entry's sizes written
    /// after its data as Go's `archive/zip` does.
    GoRelease(usize),
}

/// The licence file beside the executable in a [`Payload::GoRelease`].
pub const RELEASE_LICENSE: (&str, &[u8]) = (
    "LICENSE.txt",
    b"Mozilla Public License Version 2.0 (a stand-in for the real text)\n",
);

/// One provider version to publish.
#[derive(Clone, Debug)]
pub struct ProviderSpec {
    /// Only mirrors use it: a registry's host is the server it runs on.
    pub hostname: String,
    pub namespace: String,
    pub type_name: String,
    pub version: String,
    /// `os_arch` strings such as `linux_amd64`.
    pub platforms: Vec<String>,
    pub protocols: Vec<String>,
    pub payload: Payload,
    /// Zips published as they are, by platform, instead of ones built from
    /// `payload` (the bundled example's packages, say).
    pub archives: BTreeMap<String, Vec<u8>>,
}

impl ProviderSpec {
    /// `registry.terraform.io/NAMESPACE/TYPE` at `version`, for the current
    /// platform, protocol 5.0, small payload.
    pub fn new(namespace: &str, type_name: &str, version: &str) -> Self {
        ProviderSpec {
            hostname: "registry.terraform.io".to_owned(),
            namespace: namespace.to_owned(),
            type_name: type_name.to_owned(),
            version: version.to_owned(),
            platforms: vec![super::current_platform()],
            protocols: vec!["5.0".to_owned()],
            payload: Payload::Small,
            archives: BTreeMap::new(),
        }
    }

    /// Publishes the zips in `dir` (`terraform-provider-TYPE_VERSION_OS_ARCH.zip`)
    /// for each of the platforms set so far, as they are: for lock files
    /// compared with ones real Terraform wrote from the very same bytes
    /// (built afresh, a zip changes with the zip crate's version, and its
    /// hashes with it).
    pub fn committed_packages(self, dir: &Path) -> Self {
        let platforms = self.platforms.clone();
        platforms.iter().fold(self, |spec, platform| {
            let path = dir.join(spec.zip_filename(platform));
            let zip = std::fs::read(&path)
                .unwrap_or_else(|err| panic!("reading {}: {err}", path.display()));
            spec.archive(platform, zip)
        })
    }

    pub fn hostname(mut self, hostname: &str) -> Self {
        self.hostname = hostname.to_owned();
        self
    }

    pub fn platforms(mut self, platforms: &[&str]) -> Self {
        self.platforms = platforms.iter().map(|p| p.to_string()).collect();
        self
    }

    pub fn protocols(mut self, protocols: &[&str]) -> Self {
        self.protocols = protocols.iter().map(|p| p.to_string()).collect();
        self
    }

    pub fn payload(mut self, payload: Payload) -> Self {
        self.payload = payload;
        self
    }

    /// Publishes `zip` as the package for `platform`.
    pub fn archive(mut self, platform: &str, zip: Vec<u8>) -> Self {
        self.archives.insert(platform.to_owned(), zip);
        self
    }

    /// `terraform-provider-TYPE_vVERSION`, the name HashiCorp's release
    /// tooling gives the executable inside a package.
    pub fn executable_name(&self) -> String {
        format!("terraform-provider-{}_v{}", self.type_name, self.version)
    }

    /// `terraform-provider-TYPE_VERSION_OS_ARCH.zip`.
    pub fn zip_filename(&self, platform: &str) -> String {
        format!(
            "terraform-provider-{}_{}_{}.zip",
            self.type_name, self.version, platform
        )
    }

    /// `terraform-provider-TYPE_VERSION_SHA256SUMS`.
    pub fn sums_filename(&self) -> String {
        format!(
            "terraform-provider-{}_{}_SHA256SUMS",
            self.type_name, self.version
        )
    }

    pub fn executable_content(&self, platform: &str) -> Vec<u8> {
        let label = format!(
            "{}/{}/{} {} {}",
            self.hostname, self.namespace, self.type_name, self.version, platform
        );
        match self.payload {
            Payload::Small => format!("#!/bin/sh\necho 'fake provider {label}'\n").into_bytes(),
            Payload::Random(len) => pseudo_random_bytes(&label, len),
            Payload::Compressible(len) => pseudo_random_bytes(&label, len)
                .into_iter()
                .map(|byte| byte & 0b111)
                .collect(),
            Payload::GoRelease(len) => go_like_bytes(&label, len),
        }
    }

    /// The package zip: the archive given for `platform`, else the
    /// executable alone, deflated, mode 0755; for [`Payload::GoRelease`],
    /// with its licence and sizes after the data.
    pub fn package_zip(&self, platform: &str) -> Vec<u8> {
        if let Some(zip) = self.archives.get(platform) {
            return zip.clone();
        }
        let executable =
            ZipEntry::executable(self.executable_name(), self.executable_content(platform));
        if let Payload::GoRelease(_) = self.payload {
            let (name, text) = RELEASE_LICENSE;
            return build_zip_sizes_after(&[executable, ZipEntry::file(name, text)]);
        }
        build_zip(&[executable], Compression::Deflated)
    }

    /// The `h1:` hash of the package contents (same for the zip and for its
    /// extraction, since the zip has no directory entries).
    pub fn h1(&self, platform: &str) -> String {
        if let Some(zip) = self.archives.get(platform) {
            return super::h1_of_zip(zip);
        }
        let executable = (self.executable_name(), self.executable_content(platform));
        if let Payload::GoRelease(_) = self.payload {
            let (name, text) = RELEASE_LICENSE;
            return h1_hash(&[executable, (name.to_owned(), text.to_vec())]);
        }
        h1_hash(&[executable])
    }
}

/// One published package, with what tests assert on.
#[derive(Clone, Debug)]
pub struct PackageInfo {
    pub hostname: String,
    pub namespace: String,
    pub type_name: String,
    pub version: String,
    pub platform: String,
    /// The zip's file name (synthetic for an unpacked directory).
    pub filename: String,
    /// The zip file, or the unpacked package directory.
    pub path: PathBuf,
    /// The server path the zip is fetched from (for `TestServer::count`).
    pub url_path: Option<String>,
    /// Hex SHA-256 of the zip; `None` for unpacked packages.
    pub sha256_hex: Option<String>,
    /// `zh:` hash of the zip; `None` for unpacked packages.
    pub zh: Option<String>,
    pub h1: String,
}

/// What a fixture wrote.
#[derive(Clone, Debug)]
pub struct PublishedTree {
    pub root: PathBuf,
    pub packages: Vec<PackageInfo>,
}

impl PublishedTree {
    /// The package for `type_name` `version` on `platform`; panics if the
    /// fixture did not publish it, which is a bug in the test.
    pub fn package(&self, type_name: &str, version: &str, platform: &str) -> &PackageInfo {
        self.packages
            .iter()
            .find(|p| p.type_name == type_name && p.version == version && p.platform == platform)
            .unwrap_or_else(|| panic!("no package {type_name} {version} {platform} in fixture"))
    }
}

/// How fixture documents spell the URLs of the files they point to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UrlStyle {
    /// `https://127.0.0.1:PORT/files/…`
    Absolute,
    /// `/files/…`
    RootRelative,
    /// Relative to the document's own URL, e.g. `../../files/…` or a bare
    /// file name: exercises RFC 3986 resolution against the final URL.
    PathRelative,
}

/// A provider registry (`providers.v1`) as a static tree.
///
/// Layout below the served root (`NS`, `TYPE`, … from each spec):
/// `.well-known/terraform.json`, `v1/providers/NS/TYPE/versions`,
/// `v1/providers/NS/TYPE/VERSION/download/OS/ARCH`, and the zips,
/// `SHA256SUMS` and `SHA256SUMS.sig` in `files/NS/TYPE/VERSION/`.
/// Discovery lives at the root, so serve the tree at the server's origin.
#[derive(Clone)]
pub struct Registry {
    key: PgpKey,
    providers: Vec<ProviderSpec>,
    url_style: UrlStyle,
}

impl Registry {
    /// A registry whose `SHA256SUMS` files are signed by `key`, which is
    /// also the one signing key each download document lists.
    pub fn new(key: &PgpKey) -> Self {
        Registry {
            key: key.clone(),
            providers: Vec::new(),
            url_style: UrlStyle::Absolute,
        }
    }

    pub fn provider(mut self, spec: ProviderSpec) -> Self {
        self.providers.push(spec);
        self
    }

    /// How `download_url`, `shasums_url` and `shasums_signature_url` are
    /// written; absolute by default, like registry.terraform.io.
    pub fn url_style(mut self, style: UrlStyle) -> Self {
        self.url_style = style;
        self
    }

    /// Server path (no leading `/`) of the version list document.
    pub fn versions_path(namespace: &str, type_name: &str) -> String {
        format!("v1/providers/{namespace}/{type_name}/versions")
    }

    /// Server path (no leading `/`) of a package's download document.
    pub fn download_path(
        namespace: &str,
        type_name: &str,
        version: &str,
        platform: &str,
    ) -> String {
        let (os, arch) = split_platform(platform);
        format!("v1/providers/{namespace}/{type_name}/{version}/download/{os}/{arch}")
    }

    /// Server path (no leading `/`) of the directory holding a version's
    /// zips, `SHA256SUMS` and signature.
    pub fn files_path(namespace: &str, type_name: &str, version: &str) -> String {
        format!("files/{namespace}/{type_name}/{version}/")
    }

    /// Writes the tree into `dir`, which will be served at `base_url`
    /// (e.g. `TestServer::url()`, ending in `/`).
    pub fn write(&self, dir: &Path, base_url: &str) -> PublishedTree {
        let base_path = base_path(base_url);
        write_json(
            &dir.join(".well-known/terraform.json"),
            &json!({ "providers.v1": format!("{base_path}v1/providers/") }),
        );

        let mut by_provider: BTreeMap<(&str, &str), Vec<&ProviderSpec>> = BTreeMap::new();
        for spec in &self.providers {
            by_provider
                .entry((&spec.namespace, &spec.type_name))
                .or_default()
                .push(spec);
        }
        for ((namespace, type_name), specs) in &by_provider {
            let versions: Vec<Value> = specs
                .iter()
                .map(|spec| {
                    let platforms: Vec<Value> = spec
                        .platforms
                        .iter()
                        .map(|platform| {
                            let (os, arch) = split_platform(platform);
                            json!({ "os": os, "arch": arch })
                        })
                        .collect();
                    json!({
                        "version": spec.version,
                        "protocols": spec.protocols,
                        "platforms": platforms,
                    })
                })
                .collect();
            write_json(
                &dir.join(Self::versions_path(namespace, type_name)),
                &json!({ "versions": versions }),
            );
        }

        let mut packages = Vec::new();
        for spec in &self.providers {
            packages.extend(self.write_version(dir, base_url, &base_path, spec));
        }
        PublishedTree {
            root: dir.to_path_buf(),
            packages,
        }
    }

    fn write_version(
        &self,
        dir: &Path,
        base_url: &str,
        base_path: &str,
        spec: &ProviderSpec,
    ) -> Vec<PackageInfo> {
        let files_path = Self::files_path(&spec.namespace, &spec.type_name, &spec.version);
        let files_dir = dir.join(&files_path);
        std::fs::create_dir_all(&files_dir).expect("create registry files dir");

        let mut packages = Vec::new();
        let mut sums = Vec::new();
        for platform in &spec.platforms {
            let filename = spec.zip_filename(platform);
            let zip = spec.package_zip(platform);
            let zip_path = files_dir.join(&filename);
            std::fs::write(&zip_path, &zip).expect("write package zip");
            let sha256_hex = sha256_hex(&zip);
            sums.push(format!("{sha256_hex}  {filename}\n"));
            packages.push(PackageInfo {
                hostname: spec.hostname.clone(),
                namespace: spec.namespace.clone(),
                type_name: spec.type_name.clone(),
                version: spec.version.clone(),
                platform: platform.clone(),
                filename: filename.clone(),
                path: zip_path,
                url_path: Some(format!("{base_path}{files_path}{filename}")),
                sha256_hex: Some(sha256_hex),
                zh: Some(zh_hash(&zip)),
                h1: spec.h1(platform),
            });
        }
        // Real SHA256SUMS files are sorted by file name.
        sums.sort();
        let sums = sums.concat();
        let sums_name = spec.sums_filename();
        std::fs::write(files_dir.join(&sums_name), &sums).expect("write SHA256SUMS");
        std::fs::write(
            files_dir.join(format!("{sums_name}.sig")),
            self.key.sign_detached(sums.as_bytes()),
        )
        .expect("write SHA256SUMS.sig");

        let signing_keys = json!({
            "gpg_public_keys": [{
                "key_id": self.key.key_id(),
                "ascii_armor": self.key.public_armor(),
                "trust_signature": "",
                "source": "tfinstall tests",
                "source_url": null,
            }]
        });
        for package in &packages {
            let doc_path = Self::download_path(
                &spec.namespace,
                &spec.type_name,
                &spec.version,
                &package.platform,
            );
            let url = |target: &str| {
                self.link(
                    base_url,
                    base_path,
                    &doc_path,
                    &format!("{files_path}{target}"),
                )
            };
            let (os, arch) = split_platform(&package.platform);
            write_json(
                &dir.join(&doc_path),
                &json!({
                    "protocols": spec.protocols,
                    "os": os,
                    "arch": arch,
                    "filename": package.filename,
                    "download_url": url(&package.filename),
                    "shasums_url": url(&sums_name),
                    "shasums_signature_url": url(&format!("{sums_name}.sig")),
                    "shasum": package.sha256_hex,
                    "signing_keys": signing_keys,
                }),
            );
        }
        packages
    }

    /// The URL of `target` as written in the document at `doc` (both are
    /// server paths below the base, without a leading `/`).
    fn link(&self, base_url: &str, base_path: &str, doc: &str, target: &str) -> String {
        match self.url_style {
            UrlStyle::Absolute => format!("{base_url}{target}"),
            UrlStyle::RootRelative => format!("{base_path}{target}"),
            UrlStyle::PathRelative => {
                let depth = doc.matches('/').count();
                format!("{}{target}", "../".repeat(depth))
            }
        }
    }
}

/// Which hashes a network mirror's `VERSION.json` lists per archive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MirrorHashes {
    /// `[h1, zh]`, as `terraform providers mirror` writes them.
    Both,
    H1Only,
    ZhOnly,
    /// No `hashes` property: the package installs unverified.
    Omitted,
    /// One well-formed `h1:` hash that matches nothing.
    Wrong,
    /// Exactly these strings, e.g. unknown schemes.
    Custom(Vec<String>),
}

/// A provider network mirror as a static tree:
/// `HOST/NS/TYPE/index.json`, `HOST/NS/TYPE/VERSION.json` and the zips
/// beside them.
#[derive(Clone)]
pub struct NetworkMirror {
    providers: Vec<ProviderSpec>,
    hashes: MirrorHashes,
    url_style: UrlStyle,
}

impl Default for NetworkMirror {
    fn default() -> Self {
        Self::new()
    }
}

impl NetworkMirror {
    /// Both hashes listed; archive URLs are bare file names, as
    /// `terraform providers mirror` writes them.
    pub fn new() -> Self {
        NetworkMirror {
            providers: Vec::new(),
            hashes: MirrorHashes::Both,
            url_style: UrlStyle::PathRelative,
        }
    }

    /// Adds a provider; its `hostname` is the first path segment.
    pub fn provider(mut self, spec: ProviderSpec) -> Self {
        self.providers.push(spec);
        self
    }

    pub fn hashes(mut self, hashes: MirrorHashes) -> Self {
        self.hashes = hashes;
        self
    }

    pub fn url_style(mut self, style: UrlStyle) -> Self {
        self.url_style = style;
        self
    }

    /// Server path (no leading `/`, relative to the mirror base) of a
    /// provider's directory.
    pub fn provider_path(hostname: &str, namespace: &str, type_name: &str) -> String {
        format!("{hostname}/{namespace}/{type_name}/")
    }

    /// Writes the tree into `dir`, served at `base_url` (the mirror base
    /// URL, ending in `/`).
    pub fn write(&self, dir: &Path, base_url: &str) -> PublishedTree {
        let base_path = base_path(base_url);
        let mut by_provider: BTreeMap<(&str, &str, &str), Vec<&ProviderSpec>> = BTreeMap::new();
        for spec in &self.providers {
            by_provider
                .entry((&spec.hostname, &spec.namespace, &spec.type_name))
                .or_default()
                .push(spec);
        }
        let mut packages = Vec::new();
        for ((hostname, namespace, type_name), specs) in &by_provider {
            let provider_path = Self::provider_path(hostname, namespace, type_name);
            let provider_dir = dir.join(&provider_path);
            let versions: serde_json::Map<String, Value> = specs
                .iter()
                .map(|spec| (spec.version.clone(), json!({})))
                .collect();
            write_json(
                &provider_dir.join("index.json"),
                &json!({ "versions": versions }),
            );
            for spec in specs {
                let mut archives = serde_json::Map::new();
                for platform in &spec.platforms {
                    let filename = spec.zip_filename(platform);
                    let zip = spec.package_zip(platform);
                    let zip_path = provider_dir.join(&filename);
                    std::fs::write(&zip_path, &zip).expect("write package zip");
                    let package = PackageInfo {
                        hostname: spec.hostname.clone(),
                        namespace: spec.namespace.clone(),
                        type_name: spec.type_name.clone(),
                        version: spec.version.clone(),
                        platform: platform.clone(),
                        filename: filename.clone(),
                        path: zip_path,
                        url_path: Some(format!("{base_path}{provider_path}{filename}")),
                        sha256_hex: Some(sha256_hex(&zip)),
                        zh: Some(zh_hash(&zip)),
                        h1: spec.h1(platform),
                    };
                    let url = match self.url_style {
                        UrlStyle::Absolute => format!("{base_url}{provider_path}{filename}"),
                        UrlStyle::RootRelative => format!("{base_path}{provider_path}{filename}"),
                        UrlStyle::PathRelative => filename.clone(),
                    };
                    let mut archive = json!({ "url": url });
                    if let Some(hashes) = self.hashes_for(&package) {
                        archive["hashes"] = json!(hashes);
                    }
                    archives.insert(platform.clone(), archive);
                    packages.push(package);
                }
                write_json(
                    &provider_dir.join(format!("{}.json", spec.version)),
                    &json!({ "archives": archives }),
                );
            }
        }
        PublishedTree {
            root: dir.to_path_buf(),
            packages,
        }
    }

    fn hashes_for(&self, package: &PackageInfo) -> Option<Vec<String>> {
        let zh = package.zh.clone().expect("mirror packages are zips");
        match &self.hashes {
            MirrorHashes::Both => Some(vec![package.h1.clone(), zh]),
            MirrorHashes::H1Only => Some(vec![package.h1.clone()]),
            MirrorHashes::ZhOnly => Some(vec![zh]),
            MirrorHashes::Omitted => None,
            MirrorHashes::Wrong => Some(vec![h1_hash(&[("wrong", b"not this package")])]),
            MirrorHashes::Custom(hashes) => Some(hashes.clone()),
        }
    }
}

/// The two filesystem-mirror layouts (the CLI configuration docs,
/// "filesystem_mirror").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `HOST/NS/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip`
    Packed,
    /// `HOST/NS/TYPE/VERSION/OS_ARCH/` holding the extracted package.
    Unpacked,
}

/// A filesystem mirror (or `-plugin-dir`, or implied local mirror directory).
#[derive(Clone, Default)]
pub struct FsMirror {
    entries: Vec<(ProviderSpec, Layout)>,
}

impl FsMirror {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn provider(mut self, spec: ProviderSpec, layout: Layout) -> Self {
        self.entries.push((spec, layout));
        self
    }

    pub fn write(&self, dir: &Path) -> PublishedTree {
        let mut packages = Vec::new();
        for (spec, layout) in &self.entries {
            let provider_dir = dir
                .join(&spec.hostname)
                .join(&spec.namespace)
                .join(&spec.type_name);
            for platform in &spec.platforms {
                let filename = spec.zip_filename(platform);
                let (path, sha256, zh) = match layout {
                    Layout::Packed => {
                        let zip = spec.package_zip(platform);
                        let path = provider_dir.join(&filename);
                        std::fs::create_dir_all(&provider_dir).expect("create mirror dir");
                        std::fs::write(&path, &zip).expect("write package zip");
                        (path, Some(sha256_hex(&zip)), Some(zh_hash(&zip)))
                    }
                    Layout::Unpacked => {
                        let package_dir = provider_dir.join(&spec.version).join(platform);
                        std::fs::create_dir_all(&package_dir).expect("create package dir");
                        let executable = package_dir.join(spec.executable_name());
                        std::fs::write(&executable, spec.executable_content(platform))
                            .expect("write provider executable");
                        make_executable(&executable);
                        (package_dir, None, None)
                    }
                };
                packages.push(PackageInfo {
                    hostname: spec.hostname.clone(),
                    namespace: spec.namespace.clone(),
                    type_name: spec.type_name.clone(),
                    version: spec.version.clone(),
                    platform: platform.clone(),
                    filename,
                    path,
                    url_path: None,
                    sha256_hex: sha256,
                    zh,
                    h1: spec.h1(platform),
                });
            }
        }
        PublishedTree {
            root: dir.to_path_buf(),
            packages,
        }
    }
}

/// Rewrites a JSON file in place, for tests that tamper with one field of
/// a fixture (a wrong `shasum`, a missing key, an odd `os`…).
pub fn edit_json(path: &Path, edit: impl FnOnce(&mut Value)) {
    let text = std::fs::read_to_string(path).expect("read fixture JSON");
    let mut value: Value = serde_json::from_str(&text).expect("parse fixture JSON");
    edit(&mut value);
    write_json(path, &value);
}

fn write_json(path: &Path, value: &Value) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create fixture dir");
    }
    let text = serde_json::to_string_pretty(value).expect("serialize fixture JSON");
    std::fs::write(path, text).expect("write fixture JSON");
}

/// The path part of a base URL, e.g. `/` or `/mirror/`.
fn base_path(base_url: &str) -> String {
    assert!(
        base_url.ends_with('/'),
        "base URL {base_url:?} must end with '/'"
    );
    url::Url::parse(base_url)
        .expect("fixture base URL")
        .path()
        .to_owned()
}

fn split_platform(platform: &str) -> (&str, &str) {
    platform
        .split_once('_')
        .unwrap_or_else(|| panic!("platform {platform:?} is not os_arch"))
}

#[cfg(unix)]
fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .expect("chmod provider executable");
}

#[cfg(not(unix))]
fn make_executable(_path: &Path) {}

/// Deterministic incompressible bytes (xorshift64*, seeded from `label`) so
/// large packages are reproducible without storing them.
fn pseudo_random_bytes(label: &str, len: usize) -> Vec<u8> {
    // FNV-1a of the label; `| 1` keeps the xorshift state non-zero.
    let mut state = label.bytes().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    }) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        out.extend_from_slice(&state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Deterministic bytes (seeded from `label`) that deflate about 4.6× at the
/// default level and inflate at the speed a real Go executable does, like
/// the aws provider (172.7 MB zipped, 800 MB unpacked; Python's zlib
/// inflates it at about 340 MB/s, and these bytes too): three parts in ten
/// are copies of 3–258 bytes from up to 32 KiB back (what deflate finds in
/// machine code and tables), the rest six-bit literals.
fn go_like_bytes(label: &str, len: usize) -> Vec<u8> {
    /// Chance, in 2^32, that the next piece is a copy.
    const COPY_CHANCE: u64 = 3 * (1 << 32) / 10;
    /// A copy's mean length; lengths fall off exponentially above 3.
    const MEAN_COPY: f64 = 19.0;
    let mut state = label.bytes().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    }) | 1;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let mut out: Vec<u8> = Vec::with_capacity(len + 258);
    while out.len() < len {
        let draw = next();
        if out.len() < 1 << 15 || draw & 0xffff_ffff >= COPY_CHANCE {
            out.push((draw >> 58) as u8);
            continue;
        }
        let uniform = ((draw >> 32) as f64 + 0.5) / 4_294_967_296.0;
        let copy = (3 + (-uniform.ln() * (MEAN_COPY - 3.0)) as usize).min(258);
        let place = next();
        // Half the copies come from the last KiB, as nearby code repeats.
        let back = if place >> 63 == 1 {
            1 + (place & 0x3ff) as usize
        } else {
            1 + (place & 0x7fff) as usize
        };
        let from = out.len() - back;
        for at in from..from + copy {
            out.push(out[at]);
        }
    }
    out.truncate(len);
    out
}
