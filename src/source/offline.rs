//! `init -offline`: the installation methods that need no network (the
//! plugin cache, `-plugin-dir` directories, filesystem mirrors and the
//! implied local directories), offering only the versions this platform can
//! install from them, so that "the newest version present" is one that
//! installs. Air-gapped machines and CI images with a warmed cache can then
//! run `init` without a lock file.

use std::sync::Arc;

use async_trait::async_trait;

use crate::addr::{Platform, ProviderAddr};
use crate::source::multi::MultiSource;
use crate::source::{AvailableVersions, PackageMeta, Source, SourceError};
use crate::version::Version;

pub struct OfflineSource {
    local: Arc<MultiSource>,
    platform: Platform,
}

impl OfflineSource {
    pub fn new(local: Arc<MultiSource>, platform: Platform) -> Self {
        OfflineSource { local, platform }
    }
}

#[async_trait]
impl Source for OfflineSource {
    async fn available_versions(
        &self,
        provider: &ProviderAddr,
    ) -> Result<AvailableVersions, SourceError> {
        let mut available = self.local.available_versions(provider).await?;
        let mut installable = Vec::new();
        for version in available.versions {
            // Local lookups only: no method here ever makes a request.
            if self
                .local
                .package_meta(provider, &version, &self.platform)
                .await
                .is_ok()
            {
                installable.push(version);
            }
        }
        available.versions = installable;
        Ok(available)
    }

    async fn package_meta(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
    ) -> Result<PackageMeta, SourceError> {
        self.local.package_meta(provider, version, platform).await
    }

    fn for_display(&self, provider: &ProviderAddr) -> String {
        self.local.for_display(provider)
    }
}
