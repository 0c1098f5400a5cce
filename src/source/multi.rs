//! The CLI configuration's `provider_installation` methods combined into one
//! source with the semantics of Terraform's
//! `internal/getproviders/multi_source.go`: available versions are the union
//! over the methods that handle a provider; a version's package comes from
//! the first method, in configuration order, that has it.

use std::sync::Arc;

use async_trait::async_trait;

use crate::addr::pattern::ProviderSelector;
use crate::addr::{Platform, ProviderAddr};
use crate::source::{AvailableVersions, PackageMeta, Source, SourceError};
use crate::version::Version;

pub struct MultiSourceMethod {
    pub source: Arc<dyn Source>,
    pub selector: ProviderSelector,
}

pub struct MultiSource {
    methods: Vec<MultiSourceMethod>,
}

impl MultiSource {
    pub fn new(methods: Vec<MultiSourceMethod>) -> Self {
        MultiSource { methods }
    }

    fn handling<'a>(
        &'a self,
        provider: &'a ProviderAddr,
    ) -> impl Iterator<Item = &'a MultiSourceMethod> + 'a {
        self.methods
            .iter()
            .filter(move |m| m.selector.handles(provider))
    }

    /// The display names of the methods that handle `provider`, for the
    /// "was not found in any of the search locations" list.
    pub fn sources_for(&self, provider: &ProviderAddr) -> Vec<String> {
        self.handling(provider)
            .map(|m| m.source.for_display(provider))
            .collect()
    }
}

#[async_trait]
impl Source for MultiSource {
    async fn available_versions(
        &self,
        provider: &ProviderAddr,
    ) -> Result<AvailableVersions, SourceError> {
        let mut result = AvailableVersions::default();
        let mut registry_not_known = None;
        for method in self.handling(provider) {
            match method.source.available_versions(provider).await {
                Ok(found) => {
                    result.versions.extend(found.versions);
                    result.warnings.extend(found.warnings);
                    result.invalid.extend(found.invalid);
                }
                Err(err @ SourceError::RegistryProviderNotKnown { .. }) => {
                    registry_not_known = Some(err);
                }
                Err(SourceError::ProviderNotFound { .. }) => {}
                Err(err) => return Err(err),
            }
        }
        result.versions.sort();
        result.versions.dedup();
        // Only a source with no methods at all answers "no versions" quietly;
        // methods that exist but do not handle the provider still count as
        // searched, which is why Terraform's error can list no locations.
        if !self.methods.is_empty() && result.versions.is_empty() {
            return Err(
                registry_not_known.unwrap_or_else(|| SourceError::ProviderNotFound {
                    provider: provider.clone(),
                    sources: self.sources_for(provider),
                }),
            );
        }
        Ok(result)
    }

    async fn package_meta(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
    ) -> Result<PackageMeta, SourceError> {
        // A source's own "not for this platform" says more (which mirror,
        // which platforms do exist) than the generic one, so keep the first.
        let mut missing = None;
        for method in self.handling(provider) {
            match method
                .source
                .package_meta(provider, version, platform)
                .await
            {
                Ok(meta) => return Ok(meta),
                Err(err @ SourceError::PlatformNotSupported(_)) => {
                    missing.get_or_insert(err);
                }
                Err(err) if err.is_not_exist() => {}
                Err(err) => return Err(err),
            }
        }
        Err(missing.unwrap_or_else(|| {
            SourceError::platform_not_supported(provider, version, platform, None)
        }))
    }

    fn for_display(&self, provider: &ProviderAddr) -> String {
        self.sources_for(provider).join("\n")
    }

    async fn platforms(&self, provider: &ProviderAddr, version: &Version) -> Option<Vec<Platform>> {
        let mut all: Option<Vec<Platform>> = None;
        for method in self.handling(provider) {
            if let Some(found) = method.source.platforms(provider, version).await {
                all.get_or_insert_with(Vec::new).extend(found);
            }
        }
        all.map(|mut all| {
            all.sort_by_key(Platform::to_string);
            all.dedup();
            all
        })
    }
}
