//! The module registry protocol (`modules.v1`): a package's versions, and
//! where one version's package is. Discovery, host blocks and credentials
//! are the provider registry's ([`Discovery`]).

use std::sync::Arc;

use serde::Deserialize;
use url::Url;

use crate::go_json;
use crate::http::{ApiClient, status_line};
use crate::source::discovery::{Discovery, ServiceLookup};
use crate::version::Version;

use super::source_addr::RegistryPackage;

const SERVICE: &str = "modules.v1";

/// Why a registry question went unanswered, in the words Terraform's
/// diagnostics wrap.
#[derive(Clone, Debug)]
pub enum RegistryError {
    /// 404 on the version list.
    NotFound,
    Other(String),
}

pub struct ModuleRegistry {
    discovery: Arc<Discovery>,
    api: ApiClient,
}

#[derive(Deserialize)]
struct VersionsDoc {
    #[serde(default)]
    modules: Option<Vec<ModuleVersions>>,
}

#[derive(Deserialize)]
struct ModuleVersions {
    #[serde(default)]
    versions: Option<Vec<ModuleVersion>>,
}

#[derive(Deserialize)]
struct ModuleVersion {
    version: String,
}

#[derive(Deserialize)]
struct DownloadDoc {
    #[serde(default)]
    location: Option<String>,
}

impl ModuleRegistry {
    pub fn new(discovery: Arc<Discovery>, api: ApiClient) -> Self {
        ModuleRegistry { discovery, api }
    }

    async fn base_url(&self, package: &RegistryPackage) -> Result<Url, RegistryError> {
        let host = &package.host;
        match self.discovery.service_url(host, SERVICE).await {
            Ok(ServiceLookup::Found(url)) => Ok(url),
            Ok(_) => Err(RegistryError::Other(format!(
                "host {} does not provide a module registry",
                host.for_display()
            ))),
            Err(err) => Err(RegistryError::Other(format!(
                "could not connect to {}: {err}",
                host.for_display()
            ))),
        }
    }

    async fn get(
        &self,
        package: &RegistryPackage,
        url: &Url,
    ) -> Result<crate::http::ApiResponse, RegistryError> {
        let token = self
            .discovery
            .token(&package.host)
            .await
            .map_err(|err| RegistryError::Other(err.to_string()))?;
        self.api
            .get(url, token.as_deref(), &[("Accept", "application/json")])
            .await
            .map_err(RegistryError::Other)
    }

    /// `GET NS/NAME/SYSTEM/versions`: the versions of the first module in
    /// the answer (Terraform reads no other); those that do not parse are
    /// skipped.
    pub async fn versions(&self, package: &RegistryPackage) -> Result<Vec<Version>, RegistryError> {
        let base = self.base_url(package).await?;
        let url = join(
            &base,
            &format!("{}/versions", package.for_registry_protocol()),
        )?;
        let response = self.get(package, &url).await?;
        match response.status.as_u16() {
            200 => {}
            404 => return Err(RegistryError::NotFound),
            _ => {
                return Err(RegistryError::Other(format!(
                    "{} returned from {}",
                    status_line(response.status),
                    url.host_str().unwrap_or_default()
                )));
            }
        }
        let doc: VersionsDoc = go_json::from_slice(&response.body)
            .map_err(|err| RegistryError::Other(format!("invalid response: {err}")))?;
        let first = doc
            .modules
            .unwrap_or_default()
            .into_iter()
            .next()
            .ok_or(RegistryError::NotFound)?;
        Ok(first
            .versions
            .unwrap_or_default()
            .iter()
            .filter_map(|v| Version::parse(&v.version).ok())
            .collect())
    }

    /// `GET NS/NAME/SYSTEM/VERSION/download`: the go-getter address of the
    /// package, from `X-Terraform-Get` (204 or 200) or OpenTofu's JSON
    /// `location` (200). A location starting with `/`, `./` or `../` is
    /// resolved against the download URL.
    pub async fn location(
        &self,
        package: &RegistryPackage,
        version: &Version,
    ) -> Result<String, RegistryError> {
        let base = self.base_url(package).await?;
        let url = join(
            &base,
            &format!("{}/{version}/download", package.for_registry_protocol()),
        )?;
        let response = self.get(package, &url).await?;
        let status = response.status.as_u16();
        if status != 200 && status != 204 {
            return Err(RegistryError::Other(format!(
                "error getting download location for {:?}: {} resp:{}",
                package.to_string(),
                status_line(response.status),
                String::from_utf8_lossy(&response.body)
            )));
        }
        let location = match response.terraform_get.clone() {
            Some(location) if !location.is_empty() => location,
            _ if status == 200 => go_json::from_slice::<DownloadDoc>(&response.body)
                .ok()
                .and_then(|doc| doc.location)
                .filter(|l| !l.is_empty())
                .ok_or_else(|| {
                    RegistryError::Other(format!(
                        "failed to get download URL for {:?}: 200 OK resp:{}",
                        package.to_string(),
                        String::from_utf8_lossy(&response.body)
                    ))
                })?,
            _ => {
                return Err(RegistryError::Other(format!(
                    "failed to get download URL for {:?}: {} resp:{}",
                    package.to_string(),
                    status_line(response.status),
                    String::from_utf8_lossy(&response.body)
                )));
            }
        };
        if location.starts_with('/') || location.starts_with("./") || location.starts_with("../") {
            let resolved = response.url.join(&location).map_err(|err| {
                RegistryError::Other(format!("invalid relative URL for {location:?}: {err}"))
            })?;
            return Ok(resolved.to_string());
        }
        Ok(location)
    }
}

fn join(base: &Url, path: &str) -> Result<Url, RegistryError> {
    let mut base = base.clone();
    if !base.path().ends_with('/') {
        base.set_path(&format!("{}/", base.path()));
    }
    base.join(path)
        .map_err(|err| RegistryError::Other(format!("invalid registry URL: {err}")))
}
