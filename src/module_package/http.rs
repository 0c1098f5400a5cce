//! A module package over HTTP(S), as go-getter's HTTP getter fetches it:
//! an archive URL (known by its suffix or `?archive=`) is downloaded and
//! unpacked; any other URL is asked, with `terraform-get=1`, where the
//! package is, and answers with an `X-Terraform-Get` header (or a
//! `terraform-get` meta tag in an HTML page) naming another source, which
//! may be a git repository, an archive, or a subdirectory of either.
//! `.netrc` credentials go with every request to the hosts it names.

use std::path::Path;

use url::Url;

use super::{
    MAX_HOPS, PackageAddr, PackageError, PackageFetcher, PackageIdentity, take_subdir, with_subdir,
};
use crate::fetch::{Destination, Downloader};
use crate::module_package::addr::HttpAddr;
use crate::package::extract::{ArchiveFormat, ExtractLimits, extract_module_archive};

/// The largest answer to a `terraform-get=1` request read for its meta tag.
const MAX_PAGE_BYTES: usize = 1 << 20;

impl PackageFetcher {
    pub(super) async fn fill_http(
        &self,
        http: &HttpAddr,
        tree: &Path,
        scratch: &Path,
        hops: usize,
    ) -> Result<PackageIdentity, PackageError> {
        match http.archive {
            Some(format) => self.fetch_archive(http, format, tree, scratch).await,
            None => self.follow(http, tree, scratch, hops).await,
        }
    }

    async fn fetch_archive(
        &self,
        http: &HttpAddr,
        format: ArchiveFormat,
        tree: &Path,
        scratch: &Path,
    ) -> Result<PackageIdentity, PackageError> {
        let shown = PackageAddr::Http(http.clone()).to_string();
        // One archive per scratch directory: the package's own staging
        // directory, or that of an `X-Terraform-Get` answer.
        let archive = scratch.join("archive");
        let downloader = Downloader::new(self.client.clone(), self.settings.clone())
            .with_netrc(self.netrc.clone());
        let downloaded = downloader
            .download_with_progress(&http.url, Destination::File(&archive), &|_| {})
            .await
            .map_err(|source| PackageError::Download {
                url: shown.clone(),
                source,
            })?;
        let limits = ExtractLimits {
            max_total_bytes: self.settings.max_bytes,
            ..ExtractLimits::default()
        };
        let (archive_path, tree_path) = (archive.clone(), tree.to_path_buf());
        let extracted = tokio::task::spawn_blocking(move || {
            extract_module_archive(&archive_path, format, &tree_path, &limits)
        })
        .await
        .map_err(|err| PackageError::Io {
            what: "unpack the archive".to_owned(),
            source: std::io::Error::other(err),
        })?;
        extracted.map_err(|source| PackageError::Extract {
            url: shown.clone(),
            source: source.shown_as(Path::new(http.url.as_str())),
        })?;
        Ok(PackageIdentity::Archive {
            url: shown,
            sha256: hex::encode(downloaded.sha256),
        })
    }

    /// Asks `http` where the package is and fetches what it names.
    async fn follow(
        &self,
        http: &HttpAddr,
        tree: &Path,
        scratch: &Path,
        hops: usize,
    ) -> Result<PackageIdentity, PackageError> {
        let shown = http.url.to_string();
        if hops >= MAX_HOPS {
            return Err(PackageError::TooManyHops { url: shown });
        }
        let location = self.ask(&http.url).await?;
        let bad = |reason: String| PackageError::BadLocation {
            url: shown.clone(),
            location: location.clone(),
            reason,
        };
        let resolved = if location.starts_with('/')
            || location.starts_with("./")
            || location.starts_with("../")
        {
            http.url
                .join(&location)
                .map_err(|err| bad(err.to_string()))?
                .to_string()
        } else {
            location.clone()
        };
        let (source, subdir) = split_subdir(&resolved);
        if subdir.split('/').any(|component| component == "..") {
            return Err(bad("its subdirectory leaves the package".to_owned()));
        }
        let next = PackageAddr::parse(&source).map_err(|err| bad(err.to_string()))?;
        if subdir.is_empty() {
            return self.fill(&next, tree, scratch, hops + 1).await;
        }
        let whole = tempfile::Builder::new()
            .prefix("hop-")
            .tempdir_in(scratch)
            .map_err(|source| PackageError::Io {
                what: format!("create a directory in {}", scratch.display()),
                source,
            })?;
        let root = whole.path().join("package");
        let identity = self.fill(&next, &root, whole.path(), hops + 1).await?;
        take_subdir(&root, &subdir, tree, &source)?;
        Ok(match identity {
            PackageIdentity::Git { url, commit } => PackageIdentity::Git {
                url: with_subdir(url, &subdir),
                commit,
            },
            PackageIdentity::Archive { url, sha256 } => PackageIdentity::Archive {
                url: with_subdir(url, &subdir),
                sha256,
            },
        })
    }

    /// The source a `terraform-get=1` request for `url` names.
    async fn ask(&self, url: &Url) -> Result<String, PackageError> {
        let shown = url.to_string();
        let mut asked = url.clone();
        asked.query_pairs_mut().append_pair("terraform-get", "1");
        let mut request = self.client.get(asked);
        if let Some(authorization) = self.netrc.as_ref().and_then(|n| n.authorization_for(url)) {
            request = request.header(reqwest::header::AUTHORIZATION, authorization);
        }
        let transport = |err: reqwest::Error| PackageError::Status {
            url: shown.clone(),
            status: crate::http::error_chain(&err),
        };
        crate::http::start_loading_roots();
        let mut response = request.send().await.map_err(transport)?;
        let status = response.status();
        if !status.is_success() {
            return Err(PackageError::Status {
                url: shown.clone(),
                status: crate::http::status_line(status),
            });
        }
        if let Some(location) = response
            .headers()
            .get("x-terraform-get")
            .and_then(|value| value.to_str().ok())
            .filter(|value| !value.is_empty())
        {
            return Ok(location.to_owned());
        }
        let mut page = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(transport)? {
            page.extend_from_slice(&chunk);
            if page.len() > MAX_PAGE_BYTES {
                break;
            }
        }
        meta_location(&String::from_utf8_lossy(&page))
            .ok_or(PackageError::NoSourceUrl { url: shown })
    }
}

/// go-getter's `SourceDirSubdir`: `SOURCE//SUBDIR`, the first `//` after
/// any `getter::` and `scheme://`, with a query moved back to the source.
fn split_subdir(address: &str) -> (String, String) {
    let mut start = address.find("::").map_or(0, |at| at + 2);
    if let Some(at) = address[start..].find("://") {
        start += at + 3;
    }
    let Some(at) = address[start..].find("//") else {
        return (address.to_owned(), String::new());
    };
    let (source, subdir) = (&address[..start + at], &address[start + at + 2..]);
    match subdir.split_once('?') {
        Some((subdir, query)) => (format!("{source}?{query}"), subdir.to_owned()),
        None => (source.to_owned(), subdir.to_owned()),
    }
}

/// The `content` of a `<meta name="terraform-get" content="…">` tag, which
/// go-getter reads from an HTML answer without the header.
fn meta_location(page: &str) -> Option<String> {
    let lower = page.to_ascii_lowercase();
    let mut rest = 0;
    while let Some(at) = lower[rest..].find("<meta") {
        let start = rest + at;
        let end = start + lower[start..].find('>')?;
        let tag = &page[start..end];
        if attribute(tag, "name").is_some_and(|name| name.eq_ignore_ascii_case("terraform-get")) {
            return attribute(tag, "content");
        }
        rest = end;
    }
    None
}

/// A quoted attribute's value in one tag.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let mut from = 0;
    while let Some(at) = lower[from..].find(name) {
        let after = from + at + name.len();
        let before_ok = lower[..from + at]
            .chars()
            .last()
            .is_some_and(char::is_whitespace);
        let rest = tag[after..].trim_start();
        if before_ok && let Some(rest) = rest.strip_prefix('=') {
            let rest = rest.trim_start();
            let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
            let value = &rest[1..];
            return value.find(quote).map(|end| value[..end].to_owned());
        }
        from = after;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdirectories_split_as_go_getter_splits_them() {
        assert_eq!(
            split_subdir("git::https://h/r.git//modules/a?ref=v1"),
            (
                "git::https://h/r.git?ref=v1".to_owned(),
                "modules/a".to_owned()
            )
        );
        assert_eq!(
            split_subdir("https://h/m.zip"),
            ("https://h/m.zip".to_owned(), String::new())
        );
        assert_eq!(
            split_subdir("https://h/m.tgz//sub"),
            ("https://h/m.tgz".to_owned(), "sub".to_owned())
        );
    }

    #[test]
    fn the_meta_tag_names_the_package() {
        let page =
            r#"<html><head><META name="terraform-get" content="https://h/m.zip"></head></html>"#;
        assert_eq!(meta_location(page).as_deref(), Some("https://h/m.zip"));
        assert_eq!(
            meta_location("<html><meta name=other content='x'></html>"),
            None
        );
    }
}
