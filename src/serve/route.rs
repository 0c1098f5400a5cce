//! What a request to `serve` asks for. Every path is parsed strictly into
//! one of the provider network mirror protocol's three documents (or the
//! server's own pages: health, readiness, metrics), each part checked as Terraform checks an address, and
//! nothing else is answered: no percent-escapes, no empty or dot segments,
//! no other files, so a request can never name a path outside the store or
//! a host the server was not told about in a form it did not expect.

use crate::addr::{
    Hostname, Platform, ProviderAddr, parse_provider_namespace, parse_provider_part,
};
use crate::version::Version;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// `GET /healthz`.
    Health,
    /// `GET /readyz`.
    Ready,
    /// `GET /metrics`.
    Metrics,
    /// `GET /HOST/NS/TYPE/index.json`.
    Index(ProviderAddr),
    /// `GET /HOST/NS/TYPE/VERSION.json`.
    Version(ProviderAddr, Version),
    /// `GET /HOST/NS/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip`, the
    /// archive URL the version document gives (relative to itself).
    Archive(ProviderAddr, Version, Platform),
}

impl Route {
    /// The provider the request is about; `None` for the server's own
    /// pages.
    pub fn provider(&self) -> Option<&ProviderAddr> {
        match self {
            Route::Health | Route::Ready | Route::Metrics => None,
            Route::Index(p) | Route::Version(p, _) | Route::Archive(p, _, _) => Some(p),
        }
    }
}

/// The route `path` names, or `None` for anything else (a 404).
pub fn route(path: &str) -> Option<Route> {
    match path {
        "/healthz" => return Some(Route::Health),
        "/readyz" => return Some(Route::Ready),
        "/metrics" => return Some(Route::Metrics),
        _ => {}
    }
    let rest = path.strip_prefix('/')?;
    if rest.contains('%') || rest.contains('\\') {
        return None;
    }
    let parts: Vec<&str> = rest.split('/').collect();
    let [host, namespace, type_name, last] = parts[..] else {
        return None;
    };
    let provider = provider(host, namespace, type_name)?;
    if last == "index.json" {
        return Some(Route::Index(provider));
    }
    if let Some(version) = last.strip_suffix(".json") {
        return Some(Route::Version(provider, canonical_version(version)?));
    }
    let package = last
        .strip_prefix(&format!("terraform-provider-{}_", provider.type_name))?
        .strip_suffix(".zip")?;
    let mut parts = package.rsplitn(3, '_');
    let (arch, os, version) = (parts.next()?, parts.next()?, parts.next()?);
    let lower = |part: &str| {
        part.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    if !lower(os) || !lower(arch) {
        return None;
    }
    let platform = Platform::parse(&format!("{os}_{arch}")).ok()?;
    Some(Route::Archive(
        provider,
        canonical_version(version)?,
        platform,
    ))
}

/// The provider the three segments name, only when each is already in the
/// normalized form Terraform requests (lower-case, punycode hostnames), so
/// that one provider has exactly one path.
fn provider(host: &str, namespace: &str, type_name: &str) -> Option<ProviderAddr> {
    let hostname = Hostname::parse(host).ok()?;
    let namespace_ok = parse_provider_namespace(namespace).ok()? == namespace;
    let type_ok = parse_provider_part(type_name).ok()? == type_name;
    (hostname.to_string() == host && namespace_ok && type_ok)
        .then(|| ProviderAddr::new(hostname, namespace, type_name))
}

fn canonical_version(given: &str) -> Option<Version> {
    let version = Version::parse(given).ok()?;
    (version.to_string() == given).then_some(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn null() -> ProviderAddr {
        ProviderAddr::new(Hostname::default_registry(), "hashicorp", "null")
    }

    #[test]
    fn the_protocols_paths_are_routed() {
        assert_eq!(route("/healthz"), Some(Route::Health));
        assert_eq!(route("/readyz"), Some(Route::Ready));
        assert_eq!(route("/metrics"), Some(Route::Metrics));
        assert_eq!(
            route("/registry.terraform.io/hashicorp/null/index.json"),
            Some(Route::Index(null()))
        );
        assert_eq!(
            route("/registry.terraform.io/hashicorp/null/3.2.1.json"),
            Some(Route::Version(null(), Version::new(3, 2, 1)))
        );
        assert_eq!(
            route(
                "/registry.terraform.io/hashicorp/null/terraform-provider-null_3.2.1_linux_amd64.zip"
            ),
            Some(Route::Archive(
                null(),
                Version::new(3, 2, 1),
                Platform::parse("linux_amd64").unwrap()
            ))
        );
        assert_eq!(
            route("/registry.test:8443/acme/widget/1.0.0-beta.1.json")
                .map(|r| matches!(r, Route::Version(..))),
            Some(true)
        );
    }

    #[test]
    fn anything_else_is_not_found() {
        for path in [
            "",
            "/",
            "/healthz/",
            "/metrics/",
            "/Metrics",
            "/index.json",
            "/registry.terraform.io/hashicorp/index.json",
            "/registry.terraform.io/hashicorp/null/index.json/",
            "/registry.terraform.io/hashicorp/null/extra/index.json",
            "/registry.terraform.io/hashicorp/null/../index.json",
            "/registry.terraform.io/hashicorp/../null/index.json",
            "/../../etc/passwd",
            "/registry.terraform.io/hashicorp/null/%2e%2e.json",
            "/registry.terraform.io//null/index.json",
            "/Registry.Terraform.IO/hashicorp/null/index.json",
            "/registry.terraform.io/HashiCorp/null/index.json",
            "/registry.terraform.io/hashicorp/null/v3.2.1.json",
            "/registry.terraform.io/hashicorp/null/03.2.1.json",
            "/registry.terraform.io/hashicorp/null/latest.json",
            "/registry.terraform.io/hashicorp/null/terraform-provider-other_3.2.1_linux_amd64.zip",
            "/registry.terraform.io/hashicorp/null/terraform-provider-null_3.2.1_linux.zip",
            "/registry.terraform.io/hashicorp/null/terraform-provider-null_3.2.1_linux_amd64.tar.gz",
            "/registry.terraform.io/hashicorp/null/terraform-provider-null_3.2.1_Linux_amd64.zip",
            "/registry.terraform.io/hashicorp/null/SHA256SUMS",
            "/registry.terraform.io\\hashicorp/null/index.json",
        ] {
            assert_eq!(route(path), None, "{path}");
        }
    }
}
