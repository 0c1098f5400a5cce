//! The address of one remote module package, as go-getter reads it after
//! detection has expanded shorthands and forced the getter where the
//! address alone would not say (`git::`), and after the `//subdir` part
//! has been split off.

use std::fmt;

use url::Url;

use crate::package::extract::ArchiveFormat;

/// One remote module package.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PackageAddr {
    Git(GitAddr),
    Http(HttpAddr),
    Oci(OciAddr),
}

/// A git repository at a ref, fetched by the user's `git`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GitAddr {
    /// What `git` is given: the URL without go-getter's own `ref` and
    /// `depth` arguments.
    pub url: Url,
    /// `?ref=`: a tag, a branch or a commit; none means the remote's HEAD.
    pub reference: Option<String>,
    /// `?depth=`: how many commits to fetch; none means the wanted one only
    /// (go-getter fetches the whole history then, which is never needed).
    pub depth: Option<u32>,
}

/// An HTTP(S) URL: an archive (by its suffix or `?archive=`), or a page
/// whose `X-Terraform-Get` answer names the package.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpAddr {
    /// Without `?archive=`.
    pub url: Url,
    pub archive: Option<ArchiveFormat>,
}

/// An OpenTofu module package in an OCI registry (OpenTofu 1.10).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OciAddr {
    /// `host[:port]`.
    pub host: String,
    pub repository: String,
    pub reference: OciReference,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OciReference {
    Tag(String),
    /// `sha256:<64 hex>`.
    Digest(String),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PackageAddrError {
    #[error(
        "The module source {address:?} uses the {getter}:: getter, which tfinstall does not install yet. Run \"terraform get\" to install this module, then run tfinstall again."
    )]
    UnsupportedGetter { address: String, getter: String },
    #[error("The module source {address:?} is not a valid address: {reason}.")]
    Invalid { address: String, reason: String },
    #[error(
        "The module source {address:?} uses the {scheme}:// transport, which runs or reads what it names on this machine; tfinstall installs git modules over https://, http://, ssh:// and git:// only, and file:// where the address itself is a local repository."
    )]
    UnsafeTransport { address: String, scheme: String },
}

/// The transports a git source may use; submodules get the same list, plus
/// `file` when the source itself is a local repository.
pub(crate) const GIT_TRANSPORTS: [&str; 4] = ["https", "http", "ssh", "git"];

impl PackageAddr {
    /// Reads a go-getter address after detection, without its `//subdir`.
    pub fn parse(address: &str) -> Result<PackageAddr, PackageAddrError> {
        let invalid = |reason: &str| PackageAddrError::Invalid {
            address: address.to_owned(),
            reason: reason.to_owned(),
        };
        let (forced, rest) = match address.split_once("::") {
            Some((getter, rest))
                if !getter.is_empty() && getter.bytes().all(|b| b.is_ascii_alphanumeric()) =>
            {
                (Some(getter), rest)
            }
            _ => (None, address),
        };
        match forced {
            Some("git") => return parse_git(address, rest).map(PackageAddr::Git),
            Some(getter @ ("s3" | "gcs" | "hg")) => {
                return Err(PackageAddrError::UnsupportedGetter {
                    address: address.to_owned(),
                    getter: getter.to_owned(),
                });
            }
            Some("http" | "https") | None => {}
            Some(other) => return Err(invalid(&format!("there is no getter named {other:?}"))),
        }
        let url = Url::parse(rest).map_err(|err| invalid(&err.to_string()))?;
        match url.scheme() {
            "http" | "https" => parse_http(address, url).map(PackageAddr::Http),
            "oci" => parse_oci(address, &url).map(PackageAddr::Oci),
            "s3" | "gcs" | "hg" => Err(PackageAddrError::UnsupportedGetter {
                address: address.to_owned(),
                getter: url.scheme().to_owned(),
            }),
            "git" | "ssh" | "file" => Err(invalid(
                "a git repository's address must start with git:: (as detection adds it)",
            )),
            other => Err(invalid(&format!("unsupported scheme {other:?}"))),
        }
    }
}

fn parse_git(address: &str, rest: &str) -> Result<GitAddr, PackageAddrError> {
    let invalid = |reason: String| PackageAddrError::Invalid {
        address: address.to_owned(),
        reason,
    };
    if let Some((scheme, _)) = rest.split_once("::")
        && !scheme.contains(['/', ':', '@'])
    {
        // git's own `ext::command` and `fd::` transports.
        return Err(PackageAddrError::UnsafeTransport {
            address: address.to_owned(),
            scheme: scheme.to_owned(),
        });
    }
    let mut url = match Url::parse(rest) {
        Ok(url) => url,
        // scp-like `user@host:path`, which detection normally rewrites.
        Err(_) => match scp_like(rest) {
            Some(url) => url,
            None => return Err(invalid("not a URL git can fetch".to_owned())),
        },
    };
    match url.scheme() {
        "https" | "http" | "ssh" | "git" | "file" => {}
        other => {
            return Err(PackageAddrError::UnsafeTransport {
                address: address.to_owned(),
                scheme: other.to_owned(),
            });
        }
    }
    let mut reference = None;
    let mut depth = None;
    let mut kept = Vec::new();
    for (key, value) in url.query_pairs() {
        match &*key {
            "ref" if !value.is_empty() => reference = Some(value.into_owned()),
            "ref" => {}
            "depth" => {
                let parsed = value
                    .parse::<u32>()
                    .map_err(|_| invalid(format!("depth {value:?} is not a whole number")))?;
                depth = (parsed > 0).then_some(parsed);
            }
            "sshkey" => {
                return Err(invalid(
                    "the sshkey argument is not supported; load the key into your SSH agent or name it in ~/.ssh/config instead".to_owned(),
                ));
            }
            _ => kept.push((key.into_owned(), value.into_owned())),
        }
    }
    if let Some(reference) = &reference
        && (reference.starts_with('-') || reference.contains(['\0', ' ', '\n', ':']))
    {
        return Err(invalid(format!("{reference:?} is not a git ref")));
    }
    if kept.is_empty() {
        url.set_query(None);
    } else {
        url.query_pairs_mut().clear().extend_pairs(kept);
    }
    Ok(GitAddr {
        url,
        reference,
        depth,
    })
}

/// `git@host:path` as `ssh://git@host/path`, as go-getter's SSH detector
/// rewrites it.
fn scp_like(rest: &str) -> Option<Url> {
    let (user_host, path) = rest.split_once(':')?;
    let (user, host) = user_host.split_once('@')?;
    if user.is_empty() || host.is_empty() || host.contains('/') || path.starts_with('/') {
        return None;
    }
    Url::parse(&format!("ssh://{user}@{host}/{path}")).ok()
}

fn parse_http(address: &str, mut url: Url) -> Result<HttpAddr, PackageAddrError> {
    let mut archive = None;
    let mut forced = false;
    let mut kept = Vec::new();
    for (key, value) in url.query_pairs() {
        if key == "archive" {
            forced = true;
            archive = match &*value {
                "" | "false" => None,
                name => Some(ArchiveFormat::from_name(name).ok_or_else(|| {
                    PackageAddrError::Invalid {
                        address: address.to_owned(),
                        reason: format!(
                            "archive={name} is not a format a module package comes in (zip, tar, tar.gz, tgz, tar.bz2, tbz2, tar.xz, txz)"
                        ),
                    }
                })?),
            };
        } else {
            kept.push((key.into_owned(), value.into_owned()));
        }
    }
    if !forced {
        archive = ArchiveFormat::from_path(url.path());
    }
    if kept.is_empty() {
        url.set_query(None);
    } else {
        url.query_pairs_mut().clear().extend_pairs(kept);
    }
    Ok(HttpAddr { url, archive })
}

fn parse_oci(address: &str, url: &Url) -> Result<OciAddr, PackageAddrError> {
    let invalid = |reason: &str| PackageAddrError::Invalid {
        address: address.to_owned(),
        reason: reason.to_owned(),
    };
    let host = match (url.host_str(), url.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_owned(),
        (None, _) => return Err(invalid("it names no registry host")),
    };
    let repository = url.path().trim_start_matches('/').to_owned();
    if repository.is_empty() {
        return Err(invalid("it names no repository"));
    }
    let mut reference = None;
    for (key, value) in url.query_pairs() {
        let next = match &*key {
            "tag" => OciReference::Tag(value.into_owned()),
            "digest" => {
                let hex = value.strip_prefix("sha256:").unwrap_or_default();
                if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(invalid("digest must be sha256: and 64 hexadecimal digits"));
                }
                OciReference::Digest(value.into_owned())
            }
            _ => return Err(invalid(&format!("unknown argument {key:?}"))),
        };
        if reference.replace(next).is_some() {
            return Err(invalid("give one tag or one digest"));
        }
    }
    Ok(OciAddr {
        host,
        repository,
        reference: reference.unwrap_or_else(|| OciReference::Tag("latest".to_owned())),
    })
}

impl fmt::Display for PackageAddr {
    /// The address in go-getter's form, for messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PackageAddr::Git(git) => {
                let mut url = git.url.clone();
                if let Some(reference) = &git.reference {
                    url.query_pairs_mut().append_pair("ref", reference);
                }
                if let Some(depth) = git.depth {
                    url.query_pairs_mut()
                        .append_pair("depth", &depth.to_string());
                }
                write!(f, "git::{url}")
            }
            PackageAddr::Http(http) => {
                let explicit = http
                    .archive
                    .filter(|format| ArchiveFormat::from_path(http.url.path()) != Some(*format));
                match explicit {
                    Some(format) => {
                        let mut url = http.url.clone();
                        url.query_pairs_mut().append_pair("archive", format.name());
                        write!(f, "{url}")
                    }
                    None => write!(f, "{}", http.url),
                }
            }
            PackageAddr::Oci(oci) => {
                let (key, value) = match &oci.reference {
                    OciReference::Tag(tag) => ("tag", tag),
                    OciReference::Digest(digest) => ("digest", digest),
                };
                write!(f, "oci://{}/{}?{key}={value}", oci.host, oci.repository)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(address: &str) -> GitAddr {
        match PackageAddr::parse(address) {
            Ok(PackageAddr::Git(git)) => git,
            other => panic!("{address}: {other:?}"),
        }
    }

    #[test]
    fn git_addresses_keep_their_url_and_lose_ref_and_depth() {
        let parsed = git("git::https://example.com/r.git?ref=v1.2.0&depth=1");
        assert_eq!(parsed.url.as_str(), "https://example.com/r.git");
        assert_eq!(parsed.reference.as_deref(), Some("v1.2.0"));
        assert_eq!(parsed.depth, Some(1));
        let parsed = git("git::ssh://git@example.com/r.git?ref=main");
        assert_eq!(parsed.url.as_str(), "ssh://git@example.com/r.git");
        let parsed = git("git::git@example.com:org/r.git?ref=abc");
        assert_eq!(parsed.url.as_str(), "ssh://git@example.com/org/r.git");
        assert_eq!(parsed.reference.as_deref(), Some("abc"));
        let parsed = git("git::https://example.com/r?ref=v1&other=x");
        assert_eq!(parsed.url.as_str(), "https://example.com/r?other=x");
        assert_eq!(
            PackageAddr::parse("git::https://example.com/r.git?depth=1&ref=v1.2.0")
                .unwrap()
                .to_string(),
            "git::https://example.com/r.git?ref=v1.2.0&depth=1"
        );
    }

    #[test]
    fn dangerous_git_transports_and_refs_are_refused() {
        for address in [
            "git::ext::sh -c touch% /tmp/pwned",
            "git::fd::3",
            "git::foo://example.com/r.git",
        ] {
            assert!(
                matches!(
                    PackageAddr::parse(address),
                    Err(PackageAddrError::UnsafeTransport { .. })
                ),
                "{address}"
            );
        }
        assert!(PackageAddr::parse("git::https://example.com/r.git?ref=--upload-pack=x").is_err());
    }

    #[test]
    fn archives_are_known_by_suffix_or_by_the_archive_argument() {
        let http = |address: &str| match PackageAddr::parse(address) {
            Ok(PackageAddr::Http(http)) => http,
            other => panic!("{address}: {other:?}"),
        };
        assert_eq!(
            http("https://example.com/m.zip").archive,
            Some(ArchiveFormat::Zip)
        );
        let forced = http("https://example.com/m?archive=tar.gz&x=1");
        assert_eq!(forced.archive, Some(ArchiveFormat::TarGz));
        assert_eq!(forced.url.as_str(), "https://example.com/m?x=1");
        assert_eq!(http("https://example.com/m").archive, None);
        assert_eq!(
            PackageAddr::parse("https://example.com/m?archive=tgz")
                .unwrap()
                .to_string(),
            "https://example.com/m?archive=tar.gz"
        );
    }

    #[test]
    fn oci_addresses_name_a_tag_or_a_digest() {
        let digest = format!("sha256:{}", "a".repeat(64));
        match PackageAddr::parse(&format!("oci://example.com:5000/org/mod?digest={digest}")) {
            Ok(PackageAddr::Oci(oci)) => {
                assert_eq!(oci.host, "example.com:5000");
                assert_eq!(oci.repository, "org/mod");
                assert_eq!(oci.reference, OciReference::Digest(digest));
            }
            other => panic!("{other:?}"),
        }
        assert!(PackageAddr::parse("oci://example.com/m?tag=1&digest=x").is_err());
    }

    #[test]
    fn other_getters_name_the_source_and_terraform_get() {
        for address in [
            "s3::https://s3.amazonaws.com/b/m.zip",
            "gcs::https://x/y",
            "hg::https://x/y",
        ] {
            let err = PackageAddr::parse(address).unwrap_err();
            assert!(matches!(err, PackageAddrError::UnsupportedGetter { .. }));
            let message = err.to_string();
            assert!(
                message.contains(address) && message.contains("terraform get"),
                "{message}"
            );
        }
    }
}
