//! `init -offline` and `providers mirror -offline`: the installation
//! methods that need no network (the plugin cache, `-plugin-dir`
//! directories, filesystem mirrors and the implied local directories),
//! offering only the versions they hold for every platform asked for, so
//! that "the newest version present" is one that installs (or mirrors
//! whole). Air-gapped machines and CI images with a warmed cache can then
//! run `init` without a lock file.

use std::sync::Arc;

use async_trait::async_trait;

use crate::addr::{Platform, ProviderAddr};
use crate::source::multi::MultiSource;
use crate::source::{AvailableVersions, PackageMeta, Source, SourceError};
use crate::version::Version;

pub struct OfflineSource {
    local: Arc<MultiSource>,
    platforms: Vec<Platform>,
}

impl OfflineSource {
    pub fn new(local: Arc<MultiSource>, platforms: Vec<Platform>) -> Self {
        OfflineSource { local, platforms }
    }

    /// Every version the local methods hold for `provider`, ascending, each
    /// with those of the platforms asked for that it is held for (maybe
    /// none): what a refusal names, so the user sees what an offline run
    /// could have had.
    pub async fn held(&self, provider: &ProviderAddr) -> Vec<(Version, Vec<Platform>)> {
        match self.local.available_versions(provider).await {
            Ok(available) => self.platforms_held(provider, available.versions).await,
            Err(_) => Vec::new(),
        }
    }

    async fn platforms_held(
        &self,
        provider: &ProviderAddr,
        versions: Vec<Version>,
    ) -> Vec<(Version, Vec<Platform>)> {
        let mut held = Vec::with_capacity(versions.len());
        for version in versions {
            let mut platforms = Vec::new();
            for platform in &self.platforms {
                // Local lookups only: no method here ever makes a request.
                if self
                    .local
                    .package_meta(provider, &version, platform)
                    .await
                    .is_ok()
                {
                    platforms.push(platform.clone());
                }
            }
            held.push((version, platforms));
        }
        held
    }
}

#[async_trait]
impl Source for OfflineSource {
    async fn available_versions(
        &self,
        provider: &ProviderAddr,
    ) -> Result<AvailableVersions, SourceError> {
        let mut available = self.local.available_versions(provider).await?;
        let versions = std::mem::take(&mut available.versions);
        available.versions = self
            .platforms_held(provider, versions)
            .await
            .into_iter()
            .filter(|(_, platforms)| platforms.len() == self.platforms.len())
            .map(|(version, _)| version)
            .collect();
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
