//! Filesystem mirrors (the CLI configuration docs, "filesystem_mirror";
//! Terraform's `internal/getproviders/filesystem_search.go`): a directory
//! holding packages in the packed
//! (`HOST/NS/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip`) or unpacked
//! (`HOST/NS/TYPE/VERSION/OS_ARCH/`) layout, or both. The same scan reads
//! installed trees and the plugin cache, which share the unpacked layout.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use async_trait::async_trait;

use crate::addr::{
    Hostname, Platform, ProviderAddr, parse_provider_namespace, parse_provider_part,
};
use crate::source::{
    AvailableVersions, PackageAuthentication, PackageLocation, PackageMeta, Source, SourceError,
};
use crate::version::Version;

/// One package found by a directory scan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalPackage {
    pub provider: ProviderAddr,
    pub version: Version,
    pub platform: Platform,
    pub filename: String,
    pub location: PackageLocation,
}

/// Scans `base` the way Terraform's `SearchLocalDirectory` does: the base may
/// be a symlink, links below it are not followed except at the package level
/// itself, and anything that does not parse is skipped rather than fatal, so
/// one stray file never hides the rest of a mirror.
pub fn scan_directory(base: &Path) -> BTreeMap<ProviderAddr, Vec<LocalPackage>> {
    let mut found: BTreeMap<ProviderAddr, Vec<LocalPackage>> = BTreeMap::new();
    let Ok(root) = fs::canonicalize(base) else {
        return found;
    };
    for (host_name, host_dir) in real_subdirs(&root) {
        let Ok(hostname) = Hostname::parse(&host_name) else {
            continue;
        };
        for (ns_name, ns_dir) in real_subdirs(&host_dir) {
            for (type_name, type_dir) in real_subdirs(&ns_dir) {
                let Some(provider) = provider_from_dirs(&hostname, &ns_name, &type_name) else {
                    continue;
                };
                let packages = scan_type_dir(&provider, &type_dir, base, &host_name, &ns_name);
                if !packages.is_empty() {
                    found.entry(provider).or_default().extend(packages);
                }
            }
        }
    }
    for packages in found.values_mut() {
        packages.sort_by(|a, b| {
            (&a.platform.os, &a.platform.arch, &a.version).cmp(&(
                &b.platform.os,
                &b.platform.arch,
                &b.version,
            ))
        });
    }
    found
}

fn provider_from_dirs(hostname: &Hostname, ns: &str, ty: &str) -> Option<ProviderAddr> {
    let type_name = parse_provider_part(ty).ok()?;
    let namespace = if ns == "-" {
        if *hostname != Hostname::default_registry() {
            return None;
        }
        ns.to_string()
    } else {
        parse_provider_namespace(ns).ok()?
    };
    Some(ProviderAddr::new(hostname.clone(), namespace, type_name))
}

fn scan_type_dir(
    provider: &ProviderAddr,
    type_dir: &Path,
    base: &Path,
    host_name: &str,
    ns_name: &str,
) -> Vec<LocalPackage> {
    let mut packages = Vec::new();
    let Ok(entries) = fs::read_dir(type_dir) else {
        return packages;
    };
    let type_dir_name = type_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Locations are reported relative to the base as the user wrote it, as
    // Terraform does, so messages name the paths the user knows.
    let shown_type_dir = base.join(host_name).join(ns_name).join(&type_dir_name);
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        if file_type.is_dir() {
            let Ok(version) = Version::parse(&name) else {
                continue;
            };
            let Ok(platform_dirs) = fs::read_dir(entry.path()) else {
                continue;
            };
            for platform_entry in platform_dirs.flatten() {
                let platform_name = platform_entry.file_name().to_string_lossy().into_owned();
                // The platform directory may be a symlink, so follow it here.
                if !platform_entry.path().is_dir() {
                    continue;
                }
                let Ok(platform) = Platform::parse(&platform_name) else {
                    continue;
                };
                packages.push(LocalPackage {
                    provider: provider.clone(),
                    filename: format!(
                        "terraform-provider-{}_{}_{}.zip",
                        provider.type_name, version, platform
                    ),
                    location: PackageLocation::LocalDir(
                        shown_type_dir.join(&name).join(&platform_name),
                    ),
                    version: version.clone(),
                    platform,
                });
            }
        } else if let Some(package) = packed_package(provider, &shown_type_dir, &name)
            && entry.path().is_file()
        {
            packages.push(package);
        }
    }
    packages
}

/// Terraform lower-cases the file name, needs at least three `_`-separated
/// parts after the prefix and ignores any extra ones.
fn packed_package(provider: &ProviderAddr, dir: &Path, name: &str) -> Option<LocalPackage> {
    let lower = name.to_lowercase();
    let prefix = format!("terraform-provider-{}_", provider.type_name);
    let middle = lower.strip_prefix(&prefix)?.strip_suffix(".zip")?;
    let parts: Vec<&str> = middle.split('_').collect();
    if parts.len() < 3 {
        return None;
    }
    let version = Version::parse(parts[0]).ok()?;
    let platform = Platform::parse(&format!("{}_{}", parts[1], parts[2])).ok()?;
    Some(LocalPackage {
        provider: provider.clone(),
        version,
        platform,
        location: PackageLocation::LocalArchive(dir.join(name)),
        filename: lower,
    })
}

/// Subdirectories that are real directories (not symlinks), as Terraform's
/// Lstat-based walk sees them.
fn real_subdirs(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
        .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
        .collect();
    dirs.sort();
    dirs
}

/// A configured `filesystem_mirror` (or `-plugin-dir`, or an implied local
/// directory). Scanned once, lazily, on first use.
pub struct FilesystemMirror {
    base: PathBuf,
    scanned: OnceLock<BTreeMap<ProviderAddr, Vec<LocalPackage>>>,
}

impl FilesystemMirror {
    pub fn new(base: impl Into<PathBuf>) -> Self {
        FilesystemMirror {
            base: base.into(),
            scanned: OnceLock::new(),
        }
    }

    pub fn packages(&self) -> &BTreeMap<ProviderAddr, Vec<LocalPackage>> {
        self.scanned.get_or_init(|| scan_directory(&self.base))
    }
}

#[async_trait]
impl Source for FilesystemMirror {
    async fn available_versions(
        &self,
        provider: &ProviderAddr,
    ) -> Result<AvailableVersions, SourceError> {
        let Some(packages) = self.packages().get(provider) else {
            return Err(SourceError::ProviderNotFound {
                provider: provider.clone(),
                sources: vec![self.for_display(provider)],
            });
        };
        let mut versions: Vec<Version> = packages.iter().map(|p| p.version.clone()).collect();
        versions.sort();
        versions.dedup();
        Ok(AvailableVersions {
            versions,
            ..AvailableVersions::default()
        })
    }

    async fn package_meta(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
    ) -> Result<PackageMeta, SourceError> {
        self.packages()
            .get(provider)
            .and_then(|packages| {
                packages
                    .iter()
                    .find(|p| &p.version == version && &p.platform == platform)
            })
            .map(|p| PackageMeta {
                provider: p.provider.clone(),
                version: p.version.clone(),
                platform: p.platform.clone(),
                filename: p.filename.clone(),
                location: p.location.clone(),
                authentication: PackageAuthentication::None,
            })
            .ok_or_else(|| SourceError::platform_not_supported(provider, version, platform, None))
    }

    fn for_display(&self, _provider: &ProviderAddr) -> String {
        self.base.display().to_string()
    }
}
