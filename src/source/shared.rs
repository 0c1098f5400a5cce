//! One answer per question for the whole run. A run over many working
//! directories asks the same network source about the same providers again
//! and again; wrapped in [`SharedQueries`], each version list and each
//! package's metadata is requested once and every asker shares the answer,
//! including askers that arrive while the request is still in flight.
//! Under `serve` the answers age instead ([`MemoPolicy`]).

use std::sync::Arc;

use async_trait::async_trait;

use crate::addr::{Platform, ProviderAddr};
use crate::memo::{Memo, MemoPolicy};
use crate::source::{AvailableVersions, PackageAuthentication, PackageMeta, Source, SourceError};
use crate::version::Version;

pub struct SharedQueries {
    inner: Arc<dyn Source>,
    versions: Memo<ProviderAddr, AvailableVersions, SourceError>,
    packages: Memo<(ProviderAddr, String, Platform), PackageMeta, SourceError>,
}

impl SharedQueries {
    /// For one run: every answer kept for the run.
    pub fn new(inner: Arc<dyn Source>) -> Self {
        Self::with_policy(inner, MemoPolicy::PerRun)
    }

    pub fn with_policy(inner: Arc<dyn Source>, policy: MemoPolicy) -> Self {
        SharedQueries {
            inner,
            versions: Memo::new(policy),
            packages: Memo::judging(policy, package_failed),
        }
    }
}

/// A package's metadata counts as a failure when its checksum documents,
/// fetched alongside, failed: kept, it would hand every later fill the
/// same failed fetch.
fn package_failed(answer: &Result<PackageMeta, SourceError>) -> bool {
    match answer {
        Err(_) => true,
        Ok(meta) => match &meta.authentication {
            PackageAuthentication::Signed(signed) => {
                signed.documents.settled().is_some_and(|(failed, _)| failed)
            }
            _ => false,
        },
    }
}

#[async_trait]
impl Source for SharedQueries {
    async fn available_versions(
        &self,
        provider: &ProviderAddr,
    ) -> Result<AvailableVersions, SourceError> {
        self.versions
            .get(provider.clone(), || self.inner.available_versions(provider))
            .await
    }

    async fn package_meta(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
    ) -> Result<PackageMeta, SourceError> {
        let key = (provider.clone(), version.to_string(), platform.clone());
        self.packages
            .get(key, || self.inner.package_meta(provider, version, platform))
            .await
    }

    fn for_display(&self, provider: &ProviderAddr) -> String {
        self.inner.for_display(provider)
    }

    async fn platforms(&self, provider: &ProviderAddr, version: &Version) -> Option<Vec<Platform>> {
        self.inner.platforms(provider, version).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A source that counts the questions it is asked and answers slowly,
    /// so that concurrent askers overlap.
    #[derive(Default)]
    struct Counting {
        lists: AtomicUsize,
        metas: AtomicUsize,
    }

    #[async_trait]
    impl Source for Counting {
        async fn available_versions(
            &self,
            _: &ProviderAddr,
        ) -> Result<AvailableVersions, SourceError> {
            self.lists.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            Ok(AvailableVersions {
                versions: vec![Version::new(1, 0, 0)],
                ..AvailableVersions::default()
            })
        }

        async fn package_meta(
            &self,
            provider: &ProviderAddr,
            version: &Version,
            platform: &Platform,
        ) -> Result<PackageMeta, SourceError> {
            self.metas.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            Err(SourceError::platform_not_supported(
                provider, version, platform, None,
            ))
        }

        fn for_display(&self, _: &ProviderAddr) -> String {
            "counting".into()
        }
    }

    #[tokio::test]
    async fn concurrent_askers_share_one_question_and_its_answer() {
        let counting = Arc::new(Counting::default());
        let shared = SharedQueries::new(counting.clone());
        let null = ProviderAddr::parse("hashicorp/null").unwrap();
        let random = ProviderAddr::parse("hashicorp/random").unwrap();
        let platform = Platform::parse("linux_amd64").unwrap();
        let v1 = Version::new(1, 0, 0);
        let lists = futures_util::future::join_all(
            [&null, &null, &random, &null].map(|p| shared.available_versions(p)),
        )
        .await;
        assert!(lists.iter().all(Result::is_ok));
        assert_eq!(counting.lists.load(Ordering::SeqCst), 2);
        let metas = futures_util::future::join_all(
            (0..3).map(|_| shared.package_meta(&null, &v1, &platform)),
        )
        .await;
        assert!(
            metas
                .iter()
                .all(|m| m.as_ref().is_err_and(SourceError::is_not_exist))
        );
        assert_eq!(
            counting.metas.load(Ordering::SeqCst),
            1,
            "errors are shared too"
        );
    }
}
