//! Module source addresses as Terraform reads them (`addrs.ParseModuleSource`
//! and go-getter's detection, which Terraform runs on every address that
//! is neither local nor a registry address): one parse, one normalised
//! string (what `modules.json` records), and the package to fetch.

use std::fmt;

use crate::addr::Hostname;

/// The registry that module addresses without a host name are served by.
/// Terraform keeps `registry.terraform.io` for modules whichever engine's
/// rules are chosen for providers; OpenTofu uses its own.
fn default_module_registry() -> Hostname {
    Hostname::default_registry()
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ModuleSource {
    /// `./…` or `../…`, cleaned as Terraform cleans it.
    Local(String),
    Registry(RegistrySource),
    Remote(RemoteSource),
}

/// `[HOST/]NAMESPACE/NAME/SYSTEM`: one module package of a registry.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegistryPackage {
    pub host: Hostname,
    pub namespace: String,
    pub name: String,
    pub system: String,
}

impl RegistryPackage {
    /// `NAMESPACE/NAME/SYSTEM`, the path of the registry API.
    pub fn for_registry_protocol(&self) -> String {
        format!("{}/{}/{}", self.namespace, self.name, self.system)
    }
}

impl fmt::Display for RegistryPackage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}",
            self.host.for_display(),
            self.for_registry_protocol()
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegistrySource {
    pub package: RegistryPackage,
    /// A directory inside the package, cleaned; empty for its root.
    pub subdir: String,
}

/// A go-getter address after detection (`git::https://…?ref=…`,
/// `https://…/m.zip`), without its `//subdir`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RemoteSource {
    pub package: String,
    pub subdir: String,
}

impl fmt::Display for ModuleSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModuleSource::Local(path) => f.write_str(path),
            ModuleSource::Registry(source) if source.subdir.is_empty() => {
                write!(f, "{}", source.package)
            }
            ModuleSource::Registry(source) => write!(f, "{}//{}", source.package, source.subdir),
            ModuleSource::Remote(source) => {
                f.write_str(&with_subdir(&source.package, &source.subdir))
            }
        }
    }
}

/// A package address with a subdirectory put back, before the query as
/// Terraform writes it (`git::https://h/r.git//sub?ref=v1`).
pub fn with_subdir(package: &str, subdir: &str) -> String {
    if subdir.is_empty() {
        return package.to_string();
    }
    match package.split_once('?') {
        Some((base, query)) => format!("{base}//{subdir}?{query}"),
        None => format!("{package}//{subdir}"),
    }
}

/// Why an address could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceError {
    /// `modules/x` without `./`: go-getter cannot tell it is a path.
    MaybeRelativePath(String),
    Invalid(String),
}

/// Terraform's `isModuleSourceLocal`.
pub fn is_local(raw: &str) -> bool {
    ["./", "../", ".\\", "..\\"]
        .iter()
        .any(|prefix| raw.starts_with(prefix))
}

/// Terraform's `addrs.ParseModuleSource`: local, else registry if it
/// parses as one, else whatever go-getter's detection makes of it.
pub fn parse(raw: &str) -> Result<ModuleSource, SourceError> {
    if is_local(raw) {
        return Ok(ModuleSource::Local(clean_local(raw)));
    }
    if let Ok(source) = parse_registry(raw) {
        return Ok(ModuleSource::Registry(source));
    }
    parse_remote(raw).map(ModuleSource::Remote)
}

/// A local path with backslashes turned to slashes and cleaned, keeping a
/// leading `./` so it cannot be read as a registry address: on everything
/// but a `../` path, so `..` itself and `.` become `./..` and `./.`, as
/// Terraform records them in `modules.json`.
fn clean_local(raw: &str) -> String {
    let clean = clean_path(&raw.replace('\\', "/"));
    if clean.starts_with("../") {
        clean
    } else {
        format!("./{clean}")
    }
}

/// Go's `path.Clean`.
pub fn clean_path(path: &str) -> String {
    let rooted = path.starts_with('/');
    let mut out: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if out.last().is_some_and(|last| *last != "..") {
                    out.pop();
                } else if !rooted {
                    out.push("..");
                }
            }
            name => out.push(name),
        }
    }
    let joined = out.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
}

/// Terraform's `ParseModuleSourceRegistry` (terraform-registry-address's
/// `ParseModuleSource`), with its error texts.
pub fn parse_registry(raw: &str) -> Result<RegistrySource, String> {
    if is_local(raw) {
        return Err(format!(
            "can't use local directory {raw:?} as a module registry address"
        ));
    }
    let (raw, subdir) = split_package_subdir(raw);
    if subdir.starts_with("../") {
        return Err(format!(
            "subdirectory path {subdir:?} leads outside of the module package"
        ));
    }
    let mut parts: Vec<&str> = raw.split('/').collect();
    if parts.len() != 3 && parts.len() != 4 {
        return Err("a module registry source address must have either three or four slash-separated components".to_string());
    }
    let mut host = default_module_registry();
    if parts.len() == 4 {
        host = match Hostname::parse(parts[0]) {
            Ok(host) => host,
            Err(_) if parts[0].contains("--") => {
                return Err(format!(
                    "invalid module registry hostname {:?}; internationalized domain names must be given as direct unicode characters, not in punycode",
                    parts[0]
                ));
            }
            Err(_) => return Err(format!("invalid module registry hostname {:?}", parts[0])),
        };
        if !host.as_ascii().contains('.') {
            return Err(
                "invalid module registry hostname: must contain at least one dot".to_string(),
            );
        }
        parts.remove(0);
    }
    if matches!(host.as_ascii(), "github.com" | "bitbucket.org") {
        return Err(format!(
            "can't use {:?} as a module registry host, because it's reserved for installing directly from version control repositories",
            host.as_ascii()
        ));
    }
    if !is_registry_name(parts[0]) {
        if parts[0].contains('.') {
            return Err("source address must have three more components after the hostname: the namespace, the name, and the target system".to_string());
        }
        return Err(format!(
            "invalid namespace {:?}: must be between one and 64 characters, including ASCII letters, digits, dashes, and underscores, where dashes and underscores may not be the prefix or suffix",
            parts[0]
        ));
    }
    if !is_registry_name(parts[1]) {
        return Err(format!(
            "invalid module name {:?}: must be between one and 64 characters, including ASCII letters, digits, dashes, and underscores, where dashes and underscores may not be the prefix or suffix",
            parts[1]
        ));
    }
    let system = parts[2];
    if system.is_empty()
        || system.len() > 64
        || !system
            .bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
    {
        if system.contains('?') {
            return Err(
                "module registry addresses may not include a query string portion".to_string(),
            );
        }
        return Err(format!(
            "invalid target system {system:?}: must be between one and 64 ASCII letters or digits"
        ));
    }
    Ok(RegistrySource {
        package: RegistryPackage {
            host,
            namespace: parts[0].to_string(),
            name: parts[1].to_string(),
            system: system.to_string(),
        },
        subdir,
    })
}

/// `^[0-9A-Za-z](?:[0-9A-Za-z-_]{0,62}[0-9A-Za-z])?$`
fn is_registry_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    let edge = |b: &u8| b.is_ascii_alphanumeric();
    !bytes.is_empty()
        && bytes.len() <= 64
        && bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
}

/// go-getter's `SourceDirSubdir` followed by Terraform's cleaning of the
/// subdirectory.
pub fn split_package_subdir(given: &str) -> (String, String) {
    let (package, subdir) = source_dir_subdir(given);
    let subdir = if subdir.is_empty() {
        subdir
    } else {
        clean_path(&subdir)
    };
    (package, subdir)
}

/// go-getter's `SourceDirSubdir`: the first `//` after any `scheme://` and
/// before the query splits the package from the directory inside it; the
/// query stays with the package.
fn source_dir_subdir(src: &str) -> (String, String) {
    let stop = src.find('?').unwrap_or(src.len());
    let offset = src[..stop].find("://").map_or(0, |i| i + 3);
    let Some(found) = src[offset..stop].find("//") else {
        return (src.to_string(), String::new());
    };
    let idx = offset + found;
    let mut subdir = src[idx + 2..].to_string();
    let mut package = src[..idx].to_string();
    if let Some(q) = subdir.find('?') {
        package.push_str(&subdir[q..]);
        subdir.truncate(q);
    }
    (package, subdir)
}

/// Terraform's `parseModuleSourceRemote`: go-getter's detection, then the
/// subdirectory it found joined with the one written.
pub fn parse_remote(raw: &str) -> Result<RemoteSource, SourceError> {
    let (raw, subdir) = split_package_subdir(raw);
    if subdir.starts_with("../") {
        return Err(SourceError::Invalid(format!(
            "subdirectory path {subdir:?} leads outside of the module package"
        )));
    }
    let detected = detect(&raw)?;
    let (package, more) = split_package_subdir(&detected);
    let subdir = match (more.is_empty(), subdir.is_empty()) {
        (true, _) => subdir,
        (false, true) => more,
        (false, false) => clean_path(&format!("{more}/{subdir}")),
    };
    if subdir.starts_with("../") {
        return Err(SourceError::Invalid(format!(
            "detected subdirectory path {subdir:?} of {package:?} leads outside of the module package"
        )));
    }
    Ok(RemoteSource { package, subdir })
}

/// `getter::` at the start of an address (`^([A-Za-z0-9]+)::(.+)$`).
pub fn forced_getter(src: &str) -> (Option<&str>, &str) {
    if let Some((getter, rest)) = src.split_once("::")
        && !getter.is_empty()
        && getter.bytes().all(|b| b.is_ascii_alphanumeric())
        && !rest.is_empty()
    {
        return (Some(getter), rest);
    }
    (None, src)
}

/// Whether Go's `url.Parse` finds a scheme in `src`.
fn has_url_scheme(src: &str) -> bool {
    for (i, b) in src.bytes().enumerate() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' => return i > 0,
            _ => return false,
        }
    }
    false
}

/// go-getter's `Detect` with Terraform's detectors: an address that is
/// already a URL is kept as written; otherwise the GitHub, git (scp-like
/// SSH), Bitbucket, GCS and S3 shorthands, and absolute file paths.
fn detect(src: &str) -> Result<String, SourceError> {
    let (force, rest) = forced_getter(src);
    if has_url_scheme(rest) {
        return Ok(src.to_string());
    }
    let detected = detect_shorthand(rest)
        .ok_or_else(|| {
            if rest.starts_with('/') {
                SourceError::Invalid(format!("invalid source string: {src}"))
            } else {
                SourceError::MaybeRelativePath(src.to_string())
            }
        })
        .and_then(|found| found.map_err(SourceError::Invalid))?;
    let (detected_force, url) = forced_getter(&detected);
    Ok(match force.or(detected_force) {
        Some(getter) => format!("{getter}::{url}"),
        None => url.to_string(),
    })
}

fn detect_shorthand(src: &str) -> Option<Result<String, String>> {
    if src.starts_with("github.com/") {
        return Some(detect_github(src));
    }
    if let Some(ssh) = detect_scp_like(src) {
        return Some(Ok(ssh));
    }
    if src.starts_with("bitbucket.org/") {
        // go-getter asks Bitbucket's API whether the repository is git or
        // Mercurial; Bitbucket has served only git since 2020.
        let (path, query) = split_query(src);
        let path = if path.ends_with(".git") {
            path.to_string()
        } else {
            format!("{path}.git")
        };
        return Some(Ok(format!("git::https://{path}{query}")));
    }
    if src.contains("googleapis.com/") {
        return Some(Ok(format!("gcs::https://{src}")));
    }
    if src.contains("amazonaws.com/") {
        return Some(Ok(format!("s3::https://{src}")));
    }
    if src.starts_with('/') {
        return Some(Ok(format!("file://{src}")));
    }
    None
}

fn split_query(src: &str) -> (&str, &str) {
    match src.find('?') {
        Some(i) => (&src[..i], &src[i..]),
        None => (src, ""),
    }
}

/// go-getter's GitHub detector: `github.com/OWNER/REPO[/SUB…]` is
/// `git::https://github.com/OWNER/REPO.git[//SUB…]`.
fn detect_github(src: &str) -> Result<String, String> {
    let parts: Vec<&str> = src.split('/').collect();
    if parts.len() < 3 {
        return Err("GitHub URLs should be github.com/username/repo".to_string());
    }
    let (repo, query) = split_query(parts[2]);
    let repo = if repo.ends_with(".git") {
        repo.to_string()
    } else {
        format!("{repo}.git")
    };
    let mut url = format!("https://github.com/{}/{repo}", parts[1]);
    if parts.len() > 3 {
        let (rest, rest_query) = split_query_owned(&parts[3..].join("/"));
        url.push_str("//");
        url.push_str(&rest);
        return Ok(format!("git::{url}{query}{rest_query}"));
    }
    Ok(format!("git::{url}{query}"))
}

fn split_query_owned(src: &str) -> (String, String) {
    let (a, b) = split_query(src);
    (a.to_string(), b.to_string())
}

/// go-getter's git detector: `git@HOST:PATH` (the user must be `git`) is
/// `git::ssh://git@HOST/PATH`, its query re-encoded in key order.
fn detect_scp_like(src: &str) -> Option<String> {
    let (user, rest) = match src.split_once('@') {
        Some((user, rest)) if !user.is_empty() && !user.contains(':') => (user, rest),
        _ => return None,
    };
    if user != "git" {
        return None;
    }
    let (host, path) = rest.split_once(':')?;
    if host.is_empty() || host.contains('/') {
        return None;
    }
    let path = path.strip_prefix('/').unwrap_or(path);
    if path.is_empty() {
        return None;
    }
    let (path, query) = split_query(path);
    let query = query.strip_prefix('?').unwrap_or_default();
    let mut pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    let encoded = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    let query = if encoded.is_empty() {
        String::new()
    } else {
        format!("?{encoded}")
    };
    Some(format!("git::ssh://git@{host}/{path}{query}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(raw: &str) -> String {
        parse(raw).unwrap().to_string()
    }

    #[test]
    fn registry_addresses_name_their_host() {
        assert_eq!(
            norm("hashicorp/consul/aws"),
            format!(
                "{}/hashicorp/consul/aws",
                default_module_registry().as_ascii()
            )
        );
        assert_eq!(
            norm("example.com/a/b/c//sub/../x"),
            "example.com/a/b/c//x".to_string()
        );
        assert!(matches!(
            parse("127.0.0.1:8443/a/b/c"),
            Ok(ModuleSource::Registry(_))
        ));
        assert!(parse_registry("a/b/c//../x").is_err());
        assert!(parse_registry("localhost/a/b/c").is_err());
        assert!(parse_registry("github.com/a/b/c").is_err());
    }

    #[test]
    fn local_paths_are_cleaned() {
        assert_eq!(norm("./modules//a/../b"), "./modules/b");
        assert_eq!(norm("../x/./y"), "../x/y");
        assert_eq!(norm(".\\win\\dir"), "./win/dir");
        // terraform-aws-security-group's wrappers call `source = "../"`:
        // Terraform 1.11 records it as `./..`.
        assert_eq!(norm("../"), "./..");
        assert_eq!(norm("./"), "./.");
        assert_eq!(norm("../../"), "../..");
    }

    #[test]
    fn go_getter_shorthands_are_detected() {
        assert_eq!(
            norm("github.com/hashicorp/example"),
            "git::https://github.com/hashicorp/example.git"
        );
        assert_eq!(
            norm("github.com/hashicorp/example//sub?ref=v1"),
            "git::https://github.com/hashicorp/example.git//sub?ref=v1"
        );
        assert_eq!(
            norm("git@github.com:o/r.git?ref=v1&depth=1"),
            "git::ssh://git@github.com/o/r.git?depth=1&ref=v1"
        );
        assert_eq!(
            norm("git::git@example.com:o/r.git"),
            "git::ssh://git@example.com/o/r.git"
        );
        assert_eq!(
            norm("bitbucket.org/o/r"),
            "git::https://bitbucket.org/o/r.git"
        );
        assert_eq!(
            norm("git::https://h/r.git//a/b?ref=main"),
            "git::https://h/r.git//a/b?ref=main"
        );
        assert_eq!(
            norm("https://h/m.zip?archive=zip"),
            "https://h/m.zip?archive=zip"
        );
        let remote = parse_remote("git::https://h/r.git//sub?ref=v2").unwrap();
        assert_eq!(remote.package, "git::https://h/r.git?ref=v2");
        assert_eq!(remote.subdir, "sub");
    }

    #[test]
    fn bad_addresses_are_refused_as_terraform_refuses_them() {
        assert_eq!(
            parse("modules/foo"),
            Err(SourceError::MaybeRelativePath("modules/foo".to_string()))
        );
        assert!(matches!(
            parse("git::https://h/r.git//../x"),
            Err(SourceError::Invalid(_))
        ));
    }
}
