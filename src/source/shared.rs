//! One answer per question for the whole run. A run over many working
//! directories asks the same network source about the same providers again
//! and again; wrapped in [`SharedQueries`], each version list and each
//! package's metadata is requested once and every asker shares the answer,
//! including askers that arrive while the request is still in flight.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::OnceCell;

use crate::addr::{Platform, ProviderAddr};
use crate::source::{AvailableVersions, PackageMeta, Source, SourceError};
use crate::version::Version;

type Answers<K, T> = Mutex<HashMap<K, Arc<OnceCell<Result<T, SourceError>>>>>;

pub struct SharedQueries {
    inner: Arc<dyn Source>,
    versions: Answers<ProviderAddr, AvailableVersions>,
    packages: Answers<(ProviderAddr, String, Platform), PackageMeta>,
}

impl SharedQueries {
    pub fn new(inner: Arc<dyn Source>) -> Self {
        SharedQueries {
            inner,
            versions: Mutex::new(HashMap::new()),
            packages: Mutex::new(HashMap::new()),
        }
    }
}

/// The cell that holds (or will hold) the answer for `key`.
fn cell<K: Eq + Hash, T>(answers: &Answers<K, T>, key: K) -> Arc<OnceCell<Result<T, SourceError>>> {
    let mut answers = answers.lock().unwrap_or_else(|e| e.into_inner());
    answers.entry(key).or_default().clone()
}

#[async_trait]
impl Source for SharedQueries {
    async fn available_versions(
        &self,
        provider: &ProviderAddr,
    ) -> Result<AvailableVersions, SourceError> {
        cell(&self.versions, provider.clone())
            .get_or_init(|| self.inner.available_versions(provider))
            .await
            .clone()
    }

    async fn package_meta(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        platform: &Platform,
    ) -> Result<PackageMeta, SourceError> {
        let key = (provider.clone(), version.to_string(), platform.clone());
        cell(&self.packages, key)
            .get_or_init(|| self.inner.package_meta(provider, version, platform))
            .await
            .clone()
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
