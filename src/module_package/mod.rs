//! STAND-IN until the module package layer lands: fetches a `git::`
//! package with the `git` command, nothing else. Replaced wholesale by the
//! real layer (same names and signatures).

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use crate::cliconfig::netrc::Netrc;
use crate::fetch::DownloadSettings;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PackageAddr(String);

impl PackageAddr {
    pub fn parse(addr: &str) -> Result<PackageAddr, PackageError> {
        Ok(PackageAddr(addr.to_string()))
    }
}

impl fmt::Display for PackageAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Clone, Debug)]
pub enum PackageIdentity {
    Git { url: String, commit: String },
    Archive { url: String, sha256: String },
}

#[derive(Clone, Debug)]
pub struct FetchedPackage {
    pub identity: PackageIdentity,
}

#[derive(Debug)]
pub struct PackageError(String);

impl fmt::Display for PackageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub struct PackageFetcher {
    _client: reqwest::Client,
}

impl PackageFetcher {
    pub fn new(
        client: reqwest::Client,
        _settings: DownloadSettings,
        _netrc: Option<Arc<Netrc>>,
    ) -> Self {
        PackageFetcher { _client: client }
    }

    pub async fn fetch(
        &self,
        addr: &PackageAddr,
        dest: &Path,
    ) -> Result<FetchedPackage, PackageError> {
        let Some(rest) = addr.0.strip_prefix("git::") else {
            return Err(PackageError(format!("unsupported package {}", addr.0)));
        };
        let (url, query) = rest.split_once('?').unwrap_or((rest, ""));
        let reference = url::form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == "ref")
            .map(|(_, v)| v.into_owned());
        let run = |args: &[&str], dir: Option<&Path>| {
            let mut cmd = std::process::Command::new("git");
            cmd.args(args);
            if let Some(dir) = dir {
                cmd.current_dir(dir);
            }
            let out = cmd
                .output()
                .map_err(|e| PackageError(format!("git: {e}")))?;
            if !out.status.success() {
                return Err(PackageError(format!(
                    "git {} failed: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr)
                )));
            }
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        };
        let dest_s = dest.to_string_lossy().to_string();
        run(&["clone", "-q", url, &dest_s], None)?;
        if let Some(reference) = &reference {
            run(&["checkout", "-q", reference], Some(dest))?;
        }
        let commit = run(&["rev-parse", "HEAD"], Some(dest))?;
        let _ = std::fs::remove_dir_all(dest.join(".git"));
        Ok(FetchedPackage {
            identity: PackageIdentity::Git {
                url: url.to_string(),
                commit,
            },
        })
    }
}
