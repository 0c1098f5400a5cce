//! Where installed packages live inside the data directory.

use std::path::{Path, PathBuf};

use crate::addr::{Platform, ProviderAddr};
use crate::version::Version;

/// Terraform 0.13 reads `.terraform/plugins` (with `selections.json`);
/// Terraform 0.14 and later read `.terraform/providers`. Both use the same
/// `HOST/NS/TYPE/VERSION/OS_ARCH` tree below that directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LayoutKind {
    Plugins,
    Providers,
}

#[derive(Clone, Debug)]
pub struct InstallLayout {
    pub data_dir: PathBuf,
    pub kind: LayoutKind,
}

impl InstallLayout {
    pub fn new(data_dir: impl Into<PathBuf>, kind: LayoutKind) -> Self {
        InstallLayout {
            data_dir: data_dir.into(),
            kind,
        }
    }

    pub fn base(&self) -> PathBuf {
        self.data_dir.join(match self.kind {
            LayoutKind::Plugins => "plugins",
            LayoutKind::Providers => "providers",
        })
    }

    pub fn package_dir(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
    ) -> PathBuf {
        unpacked_package_dir(&self.base(), provider, version, platform)
    }

    pub fn selections_file(&self) -> Option<PathBuf> {
        match self.kind {
            LayoutKind::Plugins => Some(self.base().join("selections.json")),
            LayoutKind::Providers => None,
        }
    }
}

/// Directory names use the Unicode form of the hostname, as Terraform writes them.
pub fn unpacked_package_dir(
    base: &Path,
    provider: &ProviderAddr,
    version: &Version,
    platform: &Platform,
) -> PathBuf {
    provider_dir(base, provider)
        .join(version.to_string())
        .join(platform.to_string())
}

/// `BASE/HOST/NS/TYPE`, with the Unicode form of the hostname: where both
/// mirror layouts and the installed tree keep one provider's packages.
pub fn provider_dir(base: &Path, provider: &ProviderAddr) -> PathBuf {
    base.join(provider.hostname.for_display())
        .join(&provider.namespace)
        .join(&provider.type_name)
}
