//! Terraform's provider registry protocol (`direct` installation; its
//! sections "List Available Versions" and "Find a Provider Package"):
//! version lists and package metadata from a host's `providers.v1` service.
//! The signed checksum list is fetched alongside the archive; the installer
//! checks the signature before anything unpacked from the archive is used.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::Deserialize;
use url::Url;

use crate::addr::{Platform, ProviderAddr};
use crate::cliconfig::netrc::Netrc;
use crate::cliconfig::token_variable;
use crate::engine::Engine;
use crate::go_json;
use crate::http::{ApiClient, ApiResponse, TERRAFORM_COMPAT_VERSION, status_line};
use crate::memo::{Memo, MemoPolicy};
use crate::source::discovery::{Discovery, ServiceLookup};
use crate::source::{
    AvailableVersions, ChecksumDocuments, IncompatibleProtocol, InvalidVersion, MissingPlatform,
    PackageAuthentication, PackageLocation, PackageMeta, PlatformPackage, RegistryPackages,
    SignedChecksums, SignedDocuments, Source, SourceError,
};
use crate::verify::hash::PackageHash;
use crate::verify::signature::SigningKey;
use crate::version::Version;

const SERVICE: &str = "providers.v1";

/// Plugin protocol versions this installer's users can run: Terraform 1.1
/// and later speak protocols 5 and 6.
fn protocol_supported(protocol: &Version) -> bool {
    protocol >= &Version::new(5, 0, 0) && protocol < &Version::new(7, 0, 0)
}

/// The documents below are read with [`go_json`], which gives every field
/// Go's zero value when the key is absent or `null`.
#[derive(Deserialize)]
struct VersionsDoc {
    versions: Vec<VersionEntry>,
    warnings: Vec<String>,
}

#[derive(Clone, Deserialize)]
struct VersionEntry {
    version: String,
    protocols: Vec<String>,
    /// Terraform ignores this list; tfinstall reads it leniently, only to
    /// name the platforms that do exist when the current one is missing.
    platforms: serde_json::Value,
}

/// One entry of a provider's version list.
#[derive(Clone)]
struct ListedVersion {
    version: Version,
    protocols: Vec<String>,
    /// `os_arch` names, sorted.
    platforms: Vec<String>,
}

impl ListedVersion {
    fn from_entry(entry: VersionEntry) -> Result<Self, String> {
        let version = Version::parse(&entry.version).map_err(|_| entry.version.clone())?;
        let mut platforms: Vec<String> = entry
            .platforms
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|platform| {
                let os = platform.get("os")?.as_str()?;
                let arch = platform.get("arch")?.as_str()?;
                Some(format!("{os}_{arch}"))
            })
            .collect();
        platforms.sort();
        platforms.dedup();
        Ok(ListedVersion {
            version,
            protocols: entry.protocols,
            platforms,
        })
    }
}

#[derive(Deserialize)]
struct DownloadDoc {
    protocols: Vec<String>,
    os: String,
    arch: String,
    filename: String,
    download_url: String,
    shasum: String,
    shasums_url: String,
    shasums_signature_url: String,
    signing_keys: SigningKeysDoc,
}

/// OpenTofu 1.12's addition to the download document: each platform's
/// hashes and archive size (opentofu/opentofu
/// `rfc/20251027-provider-registry-hashes.md`). Decoded apart from
/// [`DownloadDoc`] and only for OpenTofu, since Terraform's decoder has no
/// such field and never looks at it, whatever its shape.
#[derive(Deserialize)]
struct PackagesDoc {
    packages: Option<BTreeMap<String, PackageDoc>>,
}

#[derive(Deserialize)]
struct PackageDoc {
    hashes: Vec<String>,
    package_size: i64,
}

#[derive(Deserialize)]
struct SigningKeysDoc {
    gpg_public_keys: Vec<GpgKeyDoc>,
}

#[derive(Deserialize)]
struct GpgKeyDoc {
    ascii_armor: String,
    trust_signature: String,
}

/// A version list as the registry sent it, parsed once per run.
#[derive(Clone)]
struct VersionList {
    listed: Vec<ListedVersion>,
    warnings: Vec<String>,
    /// Entries whose version string does not parse.
    invalid: Vec<InvalidVersion>,
}

type VersionsResult = Result<VersionList, SourceError>;

/// Whether a version list is wanted as new as the memo's policy allows, or
/// any list that was had will do.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ListAge {
    Current,
    Any,
}

pub struct RegistrySource {
    discovery: Arc<Discovery>,
    api: ApiClient,
    /// Basic credentials for checksum documents on the archives' host.
    netrc: Option<Arc<Netrc>>,
    /// Terraform memoizes the direct source for the whole run, errors
    /// included; the protocol suggestion reuses the list too. Under
    /// `serve`, lists age ([`MemoPolicy`]).
    versions: Memo<ProviderAddr, VersionList, SourceError>,
    /// Each release's checksum documents, by their URLs and the credentials
    /// sent with them: every platform's download document names the same
    /// two, and a run that locks several platforms fetches them once. They
    /// are kept as the versions' policy says.
    documents: Mutex<HashMap<DocumentsKey, ChecksumDocuments>>,
}

/// The checksum list's and its signature's URLs and `Authorization` values.
type DocumentsKey = (Url, Url, Option<String>, Option<String>);

impl RegistrySource {
    pub fn new(discovery: Arc<Discovery>, api: ApiClient, netrc: Option<Arc<Netrc>>) -> Self {
        RegistrySource {
            discovery,
            api,
            netrc,
            versions: Memo::new(MemoPolicy::PerRun),
            documents: Mutex::new(HashMap::new()),
        }
    }

    /// The source with its answers kept as `policy` says rather than for
    /// the run.
    pub fn with_memo_policy(mut self, policy: MemoPolicy) -> Self {
        self.versions = Memo::new(policy);
        self
    }

    async fn base_url(&self, provider: &ProviderAddr) -> Result<Url, SourceError> {
        let host = &provider.hostname;
        match self.discovery.service_url(host, SERVICE).await {
            Ok(ServiceLookup::Found(url)) => Ok(url),
            Ok(ServiceLookup::NotProvided) => Err(SourceError::HostNoProviders {
                provider: provider.clone(),
                message: format!(
                    "host {} does not offer a Terraform provider registry",
                    host.for_display()
                ),
                other_version: false,
            }),
            Ok(ServiceLookup::OtherVersion) => Err(SourceError::HostNoProviders {
                provider: provider.clone(),
                message: format!(
                    "host {} does not support the provider registry protocol required by this Terraform version, but may be compatible with a different Terraform version",
                    host.for_display()
                ),
                other_version: true,
            }),
            Err(err) => Err(SourceError::Other(format!(
                "could not connect to {}: {err}",
                host.for_display()
            ))),
        }
    }

    /// The provider host's token. Asked for before discovery, which needs
    /// it too, so that a failing credentials helper is reported as such and
    /// not as whatever discovery without a token runs into.
    async fn token(&self, provider: &ProviderAddr) -> Result<Option<String>, SourceError> {
        self.discovery
            .token(&provider.hostname)
            .await
            .map_err(|err| SourceError::Other(err.to_string()))
    }

    async fn api_get(
        &self,
        provider: &ProviderAddr,
        url: &Url,
        token: Option<&str>,
    ) -> Result<ApiResponse, SourceError> {
        let response = self
            .api
            .get(
                url,
                token,
                &[("X-Terraform-Version", TERRAFORM_COMPAT_VERSION)],
            )
            .await
            .map_err(|err| query_failed(provider, &err))?;
        match response.status.as_u16() {
            401 | 403 => Err(SourceError::Unauthorized {
                message: if token.is_some() {
                    format!(
                        "host {} rejected the given authentication credentials",
                        provider.hostname.as_ascii()
                    )
                } else {
                    credentials_hint(provider)
                },
            }),
            _ => Ok(response),
        }
    }

    /// The version list. The advice and platform lists built from it take
    /// [`ListAge::Any`]: what an earlier list said of a version holds, and
    /// refreshing the list for them would hand the next `available_versions`
    /// an older list than its memo above believes it is getting.
    async fn versions_with_protocols(
        &self,
        provider: &ProviderAddr,
        age: ListAge,
    ) -> VersionsResult {
        let fetch = || self.fetch_versions(provider);
        match age {
            ListAge::Current => self.versions.get(provider.clone(), fetch).await,
            ListAge::Any => self.versions.get_any(provider.clone(), fetch).await,
        }
    }

    /// GETs `path` below the host's `providers.v1` URL. When an earlier
    /// run's discovery answer is remembered, the request goes out at once,
    /// alongside this run's discovery; if discovery now names another URL,
    /// what came back is dropped and the request is made again there, and a
    /// failed discovery fails the request whatever came back.
    async fn registry_get(
        &self,
        provider: &ProviderAddr,
        path: &str,
    ) -> Result<ApiResponse, SourceError> {
        let token = self.token(provider).await?;
        let token = token.as_deref();
        let url_below = |base: &Url| join(base, path).map_err(|err| query_failed(provider, &err));
        let Some(remembered) = self
            .discovery
            .remembered_service_url(&provider.hostname, SERVICE)
        else {
            let url = url_below(&self.base_url(provider).await?)?;
            return self.api_get(provider, &url, token).await;
        };
        let guessed = url_below(&remembered)?;
        let (answer, base) = futures_util::future::join(
            self.api_get(provider, &guessed, token),
            self.base_url(provider),
        )
        .await;
        let url = url_below(&base?)?;
        if url == guessed {
            return answer;
        }
        self.api_get(provider, &url, token).await
    }

    async fn fetch_versions(&self, provider: &ProviderAddr) -> VersionsResult {
        let path = format!("{}/{}/versions", provider.namespace, provider.type_name);
        let response = self.registry_get(provider, &path).await?;
        match response.status.as_u16() {
            200 => {}
            404 => {
                return Err(SourceError::RegistryProviderNotKnown {
                    provider: provider.clone(),
                });
            }
            _ => return Err(query_failed(provider, &status_line(response.status))),
        }
        let doc: VersionsDoc = decode(&response).map_err(|err| query_failed(provider, &err))?;
        let mut list = VersionList {
            listed: Vec::new(),
            warnings: doc.warnings,
            invalid: Vec::new(),
        };
        for entry in doc.versions {
            match ListedVersion::from_entry(entry) {
                Ok(listed) => list.listed.push(listed),
                Err(listed) => list.invalid.push(InvalidVersion {
                    listed,
                    source: self.for_display(provider),
                }),
            }
        }
        Ok(list)
    }

    /// The newest version one of whose protocols is supported, for the
    /// "You need to downgrade" advice.
    async fn protocol_suggestion(&self, provider: &ProviderAddr) -> Option<Version> {
        let list = self
            .versions_with_protocols(provider, ListAge::Any)
            .await
            .ok()?;
        list.listed
            .into_iter()
            .filter(|listed| {
                listed
                    .protocols
                    .iter()
                    .filter_map(|p| Version::parse(p).ok())
                    .any(|p| protocol_supported(&p))
            })
            .map(|listed| listed.version)
            .max()
    }

    /// The platforms the version list names for `version`, for the
    /// missing-platform error; empty when the registry does not say.
    async fn listed_platforms(&self, provider: &ProviderAddr, version: &Version) -> Vec<String> {
        let Ok(list) = self.versions_with_protocols(provider, ListAge::Any).await else {
            return Vec::new();
        };
        list.listed
            .into_iter()
            .find(|listed| listed.version == *version)
            .map(|listed| listed.platforms)
            .unwrap_or_default()
    }
}

#[async_trait]
impl Source for RegistrySource {
    async fn available_versions(
        &self,
        provider: &ProviderAddr,
    ) -> Result<AvailableVersions, SourceError> {
        let list = self
            .versions_with_protocols(provider, ListAge::Current)
            .await?;
        let mut versions: Vec<Version> = list.listed.into_iter().map(|l| l.version).collect();
        versions.sort();
        Ok(AvailableVersions {
            versions,
            warnings: list.warnings,
            invalid: list.invalid,
        })
    }

    async fn package_meta(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
    ) -> Result<PackageMeta, SourceError> {
        let path = format!(
            "{}/{}/{}/download/{}/{}",
            provider.namespace, provider.type_name, version, platform.os, platform.arch
        );
        let response = self.registry_get(provider, &path).await?;
        match response.status.as_u16() {
            200 => {}
            404 => {
                let mut missing = MissingPlatform {
                    provider: provider.clone(),
                    version: version.clone(),
                    platform: platform.clone(),
                    mirror_url: None,
                    available: self.listed_platforms(provider, version).await,
                };
                missing.available.retain(|p| *p != platform.to_string());
                return Err(SourceError::PlatformNotSupported(Box::new(missing)));
            }
            _ => return Err(query_failed(provider, &status_line(response.status))),
        }
        let doc: DownloadDoc = decode(&response).map_err(|err| query_failed(provider, &err))?;

        let mut protocols = Vec::new();
        for p in &doc.protocols {
            protocols.push(Version::parse(p).map_err(|err| {
                query_failed(
                    provider,
                    &format!("registry response includes invalid version string {p:?}: {err}"),
                )
            })?);
        }
        if !protocols.is_empty() && !protocols.iter().any(protocol_supported) {
            return Err(SourceError::ProtocolNotSupported(Box::new(
                IncompatibleProtocol {
                    provider: provider.clone(),
                    version: version.clone(),
                    protocols: doc.protocols.join(", "),
                    suggestion: self.protocol_suggestion(provider).await,
                },
            )));
        }
        if doc.os != platform.os || doc.arch != platform.arch {
            return Err(query_failed(
                provider,
                &format!(
                    "registry response to request for {platform} archive has incorrect target {}_{}",
                    doc.os, doc.arch
                ),
            ));
        }
        let resolve = |what: &str, raw: &str| -> Result<Url, SourceError> {
            match response.url.join(raw) {
                Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(u),
                Ok(u) => Err(query_failed(
                    provider,
                    &format!(
                        "registry response includes invalid {what} URL: must use http or https scheme, not {:?}",
                        u.scheme()
                    ),
                )),
                Err(err) => Err(query_failed(
                    provider,
                    &format!("registry response includes invalid {what} URL: {err}"),
                )),
            }
        };
        let packages = match Engine::current() {
            Engine::OpenTofu => registry_packages(&response, &doc.shasum)
                .map_err(|err| query_failed(provider, &err))?,
            Engine::Terraform => None,
        };
        let download_url = resolve("download", &doc.download_url)?;
        let shasums_url = resolve("SHASUMS", &doc.shasums_url)?;
        let signature_url = resolve("SHASUMS signature", &doc.shasums_signature_url)?;
        let shasum: [u8; 32] = hex::decode(&doc.shasum)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| {
                query_failed(
                    provider,
                    &format!(
                        "registry response includes invalid SHA256 hash {:?}",
                        doc.shasum
                    ),
                )
            })?;
        let (api, owner) = (self.api.clone(), provider.clone());
        // Unlike Terraform, which sends `.netrc` credentials with the archive
        // only: a mirror behind Basic auth guards its checksum files too.
        // Only documents on the archive's own host get them, never the
        // registry's API host for being named by it.
        let netrc_for = |url: &Url| {
            let same_host = url.host_str() == download_url.host_str()
                && url.port_or_known_default() == download_url.port_or_known_default();
            self.netrc
                .as_ref()
                .filter(|_| same_host)
                .and_then(|netrc| netrc.authorization_for(url))
        };
        let (sums_auth, signature_auth) = (netrc_for(&shasums_url), netrc_for(&signature_url));
        let key = (
            shasums_url.clone(),
            signature_url.clone(),
            sums_auth.clone(),
            signature_auth.clone(),
        );
        let policy = self.versions.policy();
        let documents = {
            let mut known = self.documents.lock().unwrap_or_else(|e| e.into_inner());
            if policy != MemoPolicy::PerRun {
                known.retain(|_, documents| {
                    documents
                        .settled()
                        .is_none_or(|(failed, at)| policy.keeps(failed, at))
                });
            }
            known
                .entry(key)
                .or_insert_with(|| {
                    ChecksumDocuments::fetch(async move {
                        let (sha256sums, signature) = futures_util::future::try_join(
                            fetch_document(
                                &api,
                                &owner,
                                &shasums_url,
                                sums_auth.as_deref(),
                                "authentication checksums",
                            ),
                            fetch_document(
                                &api,
                                &owner,
                                &signature_url,
                                signature_auth.as_deref(),
                                "cryptographic signature",
                            ),
                        )
                        .await?;
                        Ok(SignedDocuments {
                            sha256sums,
                            signature,
                        })
                    })
                })
                .clone()
        };
        Ok(PackageMeta {
            provider: provider.clone(),
            version: version.clone(),
            platform: platform.clone(),
            filename: doc.filename,
            location: PackageLocation::Http(download_url),
            authentication: PackageAuthentication::Signed(Box::new(SignedChecksums {
                shasum,
                packages,
                documents,
                keys: doc
                    .signing_keys
                    .gpg_public_keys
                    .into_iter()
                    .map(|k| SigningKey {
                        ascii_armor: k.ascii_armor,
                        trust_signature: k.trust_signature,
                    })
                    .collect(),
            })),
        })
    }

    async fn platforms(&self, provider: &ProviderAddr, version: &Version) -> Option<Vec<Platform>> {
        let listed = self.listed_platforms(provider, version).await;
        Some(
            listed
                .iter()
                .filter_map(|p| Platform::parse(p).ok())
                .collect(),
        )
    }

    fn for_display(&self, provider: &ProviderAddr) -> String {
        format!("registry {}", provider.hostname.for_display())
    }
}

/// Checksums and signatures are release artefacts: no token and no
/// Terraform headers go with them, as with Terraform; `authorization` is
/// the `.netrc` credentials of the archive's host, when they are its too.
async fn fetch_document(
    api: &ApiClient,
    provider: &ProviderAddr,
    url: &Url,
    authorization: Option<&str>,
    what: &str,
) -> Result<Vec<u8>, SourceError> {
    let headers: Vec<(&str, &str)> = authorization
        .map(|value| ("Authorization", value))
        .into_iter()
        .collect();
    let response = api.get(url, None, &headers).await.map_err(|err| {
        query_failed(
            provider,
            &format!("failed to retrieve {what} for provider: {err}"),
        )
    })?;
    if response.status != reqwest::StatusCode::OK {
        return Err(query_failed(
            provider,
            &format!(
                "failed to retrieve {what} for provider: {} returned from {}",
                status_line(response.status),
                url.host_str().unwrap_or_default()
            ),
        ));
    }
    Ok(response.body)
}

/// The `packages` of an OpenTofu download document, parsed with OpenTofu's
/// messages; `None` when it is absent, `null` or empty, which OpenTofu
/// treats as a registry that does not send it.
fn registry_packages(
    response: &ApiResponse,
    shasum: &str,
) -> Result<Option<RegistryPackages>, String> {
    let doc: PackagesDoc = decode(response)?;
    let Some(listed) = doc.packages.filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let mut platforms = BTreeMap::new();
    for (name, package) in listed {
        let platform = Platform::parse(&name).map_err(|err| {
            format!("registry response includes invalid package platform {name:?}: {err}")
        })?;
        let hashes = package
            .hashes
            .iter()
            .map(|raw| {
                PackageHash::parse(raw).map_err(|err| {
                    format!("registry response includes invalid package hash {raw:?}: {err}")
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        platforms.insert(
            platform,
            PlatformPackage {
                hashes,
                size: package.package_size,
            },
        );
    }
    Ok(Some(RegistryPackages {
        shasum: shasum.to_owned(),
        platforms,
    }))
}

fn query_failed(provider: &ProviderAddr, err: &str) -> SourceError {
    SourceError::Other(format!(
        "could not query provider registry for {provider}: {err}"
    ))
}

/// RFC 3986 reference resolution, as Terraform does: a base URL without a
/// trailing slash loses its last segment.
fn join(base: &Url, path: &str) -> Result<Url, String> {
    base.join(path)
        .map_err(|err| format!("invalid registry URL {base}{path}: {err}"))
}

fn decode<T: serde::de::DeserializeOwned>(response: &ApiResponse) -> Result<T, String> {
    go_json::from_slice(&response.body).map_err(|err| {
        format!(
            "the response from {} is not a valid registry document ({err}); the registry or a proxy in front of it returned something unexpected",
            response.url
        )
    })
}

/// Terraform's "requires authentication credentials" with what to do about
/// it. A `TF_TOKEN_…` variable (dots as `_`, dashes as `__`) is suggested
/// only when the hostname has no port: a shell cannot name the `:`.
fn credentials_hint(provider: &ProviderAddr) -> String {
    let host = provider.hostname.as_ascii();
    let variable = token_variable(&provider.hostname)
        .map(|name| format!(", or set {name}"))
        .unwrap_or_default();
    format!(
        "host {host} requires authentication credentials; add a credentials block for it to the CLI configuration{variable}"
    )
}
