//! Terraform's provider network mirror protocol: `index.json` lists versions
//! ("List Available Versions"), `VERSION.json` lists archives per platform
//! with their hashes ("List Available Installation Packages").
//! A static web server can serve it, which is what `providers mirror` writes.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use url::Url;

use crate::addr::{Hostname, Platform, ProviderAddr};
use crate::cliconfig::netrc::Netrc;
use crate::go_json;
use crate::http::{ApiClient, ApiResponse, TERRAFORM_COMPAT_VERSION};
use crate::source::discovery::TokenLookup;
use crate::source::{
    AvailableVersions, InvalidVersion, PackageAuthentication, PackageLocation, PackageMeta, Source,
    SourceError,
};
use crate::verify::hash::PackageHash;
use crate::verify::signature_may_be_skipped;
use crate::version::Version;

/// Read with [`go_json`], as Terraform reads them with Go's decoder.
#[derive(Deserialize)]
struct IndexDoc {
    versions: BTreeMap<String, serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct VersionDoc {
    archives: BTreeMap<String, ArchiveDoc>,
}

#[derive(Deserialize)]
struct ArchiveDoc {
    url: String,
    hashes: Vec<String>,
}

pub struct NetworkMirror {
    base: Url,
    api: ApiClient,
    tokens: TokenLookup,
    /// Basic credentials for the mirror's documents; see [`Self::get_json`].
    netrc: Option<Arc<Netrc>>,
    /// OpenTofu's `trust_all_hashes`.
    trust_all_hashes: bool,
}

impl NetworkMirror {
    /// `base` must be an `https:` URL; the caller has checked that with
    /// Terraform's message.
    pub fn new(
        base: Url,
        api: ApiClient,
        tokens: TokenLookup,
        netrc: Option<Arc<Netrc>>,
        trust_all_hashes: bool,
    ) -> Self {
        NetworkMirror {
            base,
            api,
            tokens,
            netrc,
            trust_all_hashes,
        }
    }

    async fn token(&self, provider: &ProviderAddr) -> Result<Option<String>, SourceError> {
        let Some(host) = host_and_port(&self.base).and_then(|host| Hostname::parse(&host).ok())
        else {
            return Ok(None);
        };
        self.tokens
            .token(&host)
            .await
            .map_err(|err| self.failed(provider, err))
    }

    fn failed(&self, provider: &ProviderAddr, err: impl std::fmt::Display) -> SourceError {
        SourceError::Other(format!(
            "failed to query provider mirror {} for {provider}: {err}",
            self.base
        ))
    }

    /// `BASE/HOST/NS/TYPE/FILE`. The leading `./` keeps a hostname with a
    /// port (`example.com:8443`) from parsing as a URL scheme, which would
    /// replace the base instead of extending it.
    fn provider_url(&self, provider: &ProviderAddr, file: &str) -> Result<Url, SourceError> {
        let path = format!(
            "./{}/{}/{}/{file}",
            provider.hostname.as_ascii(),
            provider.namespace,
            provider.type_name
        );
        self.base
            .join(&path)
            .map_err(|err| self.failed(provider, err))
    }

    /// Fetches a JSON document; `None` means 404.
    ///
    /// Terraform 1.11 sends `.netrc` credentials with the archives only, so
    /// a mirror whose whole tree sits behind Basic auth (nginx `auth_basic`,
    /// Artifactory) answers its `index.json` with 401 and cannot be used.
    /// tfinstall sends them with these documents too, unless the CLI
    /// configuration gives the host a token, which then goes instead.
    async fn get_json(
        &self,
        provider: &ProviderAddr,
        url: &Url,
    ) -> Result<Option<ApiResponse>, SourceError> {
        let token = self.token(provider).await?;
        let basic = match &token {
            Some(_) => None,
            None => self.netrc.as_ref().and_then(|n| n.authorization_for(url)),
        };
        let mut headers = vec![("X-Terraform-Version", TERRAFORM_COMPAT_VERSION)];
        if let Some(basic) = &basic {
            headers.push(("Authorization", basic.as_str()));
        }
        let response = self
            .api
            .get(url, token.as_deref(), &headers)
            .await
            .map_err(|err| self.failed(provider, err))?;
        match response.status.as_u16() {
            200 => {}
            404 => return Ok(None),
            401 | 403 => {
                // Terraform names the host that refused, port included.
                let host = host_and_port(&response.url).unwrap_or_default();
                let mut message =
                    format!("host {host} rejected the given authentication credentials");
                let userinfo = !url.username().is_empty() || url.password().is_some();
                if token.is_none() && basic.is_none() && !userinfo {
                    message.push_str(&format!(
                        " (none were sent: add a credentials block for {host} to the CLI configuration, or, for a mirror behind HTTP Basic auth, a \"machine {host}\" entry with login and password to .netrc)"
                    ));
                }
                return Err(SourceError::Unauthorized { message });
            }
            code => {
                return Err(self.failed(
                    provider,
                    format!("server returned unsuccessful status {code}"),
                ));
            }
        }
        if response.media_type().as_deref() != Some("application/json") {
            return Err(self.failed(
                provider,
                format!(
                    "response has invalid Content-Type: must be application/json (got {:?} from {})",
                    response.content_type.clone().unwrap_or_default(),
                    response.url
                ),
            ));
        }
        Ok(Some(response))
    }

    /// The JSON document a [`NetworkMirror::get_json`] response holds.
    fn decode<T: DeserializeOwned>(
        &self,
        provider: &ProviderAddr,
        response: &ApiResponse,
    ) -> Result<T, SourceError> {
        go_json::from_slice(&response.body).map_err(|err| {
            self.failed(
                provider,
                format!(
                    "invalid response content from mirror server at {}: {err}",
                    response.url
                ),
            )
        })
    }
}

/// A mirror configured as `https://user:pass@host/` authenticates its
/// archives with that userinfo too: Go resolves a relative reference
/// against the request URL, userinfo included, so Terraform's archive URL
/// keeps it, while reqwest moves it into a header and reports the URL
/// without it. Restored only for a relative `url` that stays on the
/// requested origin, and when no redirect left it: never to another host.
fn keep_userinfo(requested: &Url, answered: &Url, listed: &str, location: &mut Url) {
    let relative = matches!(
        Url::parse(listed),
        Err(url::ParseError::RelativeUrlWithoutBase)
    );
    if !relative
        || requested.username().is_empty() && requested.password().is_none()
        || requested.origin() != answered.origin()
        || location.origin() != requested.origin()
    {
        return;
    }
    // Both setters fail only for URLs that cannot have userinfo, which an
    // https: URL with a host always can.
    let _ = location.set_username(requested.username());
    let _ = location.set_password(requested.password());
}

/// `host[:port]` of a URL, the form credentials are configured under.
fn host_and_port(url: &Url) -> Option<String> {
    let host = url.host_str()?;
    Some(match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    })
}

#[async_trait]
impl Source for NetworkMirror {
    async fn available_versions(
        &self,
        provider: &ProviderAddr,
    ) -> Result<AvailableVersions, SourceError> {
        let url = self.provider_url(provider, "index.json")?;
        let Some(response) = self.get_json(provider, &url).await? else {
            return Err(SourceError::ProviderNotFound {
                provider: provider.clone(),
                sources: vec![self.for_display(provider)],
            });
        };
        let doc: IndexDoc = self.decode(provider, &response)?;
        let mut available = AvailableVersions::default();
        for listed in doc.versions.into_keys() {
            match Version::parse(&listed) {
                Ok(version) => available.versions.push(version),
                Err(_) => available.invalid.push(InvalidVersion {
                    listed,
                    source: self.for_display(provider),
                }),
            }
        }
        available.versions.sort();
        Ok(available)
    }

    async fn package_meta(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
    ) -> Result<PackageMeta, SourceError> {
        let url = self.provider_url(provider, &format!("{version}.json"))?;
        // Terraform treats a missing VERSION.json as a failed query rather
        // than "not here", so a later installation method is not consulted;
        // tfinstall keeps that quirk so both pick the same source
        // (`internal/getproviders/http_mirror_source.go`).
        let Some(response) = self.get_json(provider, &url).await? else {
            return Err(self.failed(
                provider,
                format!("provider mirror does not have archive index for previously-reported {provider} version {version}"),
            ));
        };
        let doc: VersionDoc = self.decode(provider, &response)?;
        let Some(archive) = doc.archives.get(&platform.to_string()) else {
            return Err(SourceError::platform_not_supported(
                provider,
                version,
                platform,
                Some(self.base.to_string()),
            ));
        };
        let mut location = response.url.join(&archive.url).map_err(|err| {
            self.failed(
                provider,
                format!("invalid archive URL {:?}: {err}", archive.url),
            )
        })?;
        keep_userinfo(&url, &response.url, &archive.url, &mut location);
        let parse = |listed: &[String]| {
            listed
                .iter()
                .map(|h| {
                    PackageHash::parse(h).map_err(|err| {
                        self.failed(
                            provider,
                            format!("provider mirror returned invalid provider hash {h:?}: {err}"),
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        };
        let hashes = parse(&archive.hashes)?;
        // OpenTofu lets a trusted mirror's hashes into the lock file only
        // where it would take its registry's unsigned ones: for providers
        // of registry.opentofu.org without OPENTOFU_ENFORCE_GPG_VALIDATION.
        let mut trusted = Vec::new();
        if self.trust_all_hashes && signature_may_be_skipped(provider) && !hashes.is_empty() {
            for listed in doc.archives.values() {
                trusted.extend(
                    parse(&listed.hashes)?
                        .into_iter()
                        .filter(PackageHash::is_preferred),
                );
            }
        }
        let filename = location
            .path_segments()
            .and_then(|mut s| s.next_back().map(str::to_string))
            .unwrap_or_default();
        Ok(PackageMeta {
            provider: provider.clone(),
            version: version.clone(),
            platform: platform.clone(),
            filename,
            location: PackageLocation::Http(location),
            authentication: if hashes.is_empty() {
                PackageAuthentication::None
            } else {
                PackageAuthentication::Hashes {
                    listed: hashes,
                    trusted,
                }
            },
        })
    }

    fn for_display(&self, _provider: &ProviderAddr) -> String {
        format!("provider mirror at {}", self.base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(requested: &str, answered: &str, listed: &str) -> String {
        let (requested, answered) = (
            Url::parse(requested).unwrap(),
            Url::parse(answered).unwrap(),
        );
        let mut location = answered.join(listed).unwrap();
        keep_userinfo(&requested, &answered, listed, &mut location);
        location.to_string()
    }

    #[test]
    fn a_mirrors_userinfo_reaches_relative_archive_urls_on_its_own_origin_only() {
        let requested = "https://u:p@m.example/h/n/t/1.0.0.json";
        let answered = "https://m.example/h/n/t/1.0.0.json";
        assert_eq!(
            resolved(requested, answered, "x.zip"),
            "https://u:p@m.example/h/n/t/x.zip"
        );
        assert_eq!(
            resolved(requested, answered, "/files/x.zip"),
            "https://u:p@m.example/files/x.zip"
        );
        // Another host, named absolutely or scheme-relatively, or reached
        // through a redirect, never gets it.
        for (answered, listed) in [
            (answered, "https://cdn.example/x.zip"),
            (answered, "//cdn.example/x.zip"),
            ("https://cdn.example/h/n/t/1.0.0.json", "x.zip"),
        ] {
            assert!(
                !resolved(requested, answered, listed).contains("u:p@"),
                "{answered} {listed}"
            );
        }
    }
}
