//! Where one provider's packages live below any directory that holds them
//! unpacked: the plugin cache, the installed tree, unpacked mirrors.

use std::path::{Path, PathBuf};

use crate::addr::{Platform, ProviderAddr};
use crate::version::Version;

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
