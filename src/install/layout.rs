//! Where installed packages live inside the data directory.

use std::path::PathBuf;

use crate::addr::{Platform, ProviderAddr};
use crate::package::layout::unpacked_package_dir;
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
