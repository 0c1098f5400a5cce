//! `tfinstall providers lock` and `tfinstall providers mirror`, plus what
//! both need: target platforms, the configuration's requirements and
//! sources built from flags.

pub mod lock;
pub mod mirror;
pub mod mirror_oci;
pub mod tree;

use std::collections::BTreeMap;
use std::path::Path;

use crate::addr::{Platform, ProviderAddr};
use crate::diag::{Diagnostic, Diagnostics};
use crate::go_quote::go_quote;
use crate::module;
use crate::version::VersionConstraints;

/// The `-platform` values, parsed and de-duplicated in the order given; the
/// current platform when there are none.
pub fn target_platforms(given: &[String]) -> Result<Vec<Platform>, Diagnostics> {
    if given.is_empty() {
        return Ok(vec![Platform::current()]);
    }
    let mut diags = Diagnostics::new();
    let mut platforms: Vec<Platform> = Vec::new();
    for raw in given {
        match Platform::parse(raw) {
            Ok(platform) if platforms.contains(&platform) => {}
            Ok(platform) => platforms.push(platform),
            Err(err) => diags.push(Diagnostic::error(
                "Invalid target platform",
                format!(
                    "The string {} given in the -platform option is not a valid target platform: {err}.",
                    go_quote(raw)
                ),
            )),
        }
    }
    if diags.has_errors() {
        Err(diags)
    } else {
        Ok(platforms)
    }
}

/// The providers the configuration in `root` needs, with the warnings found
/// on the way.
pub fn configuration_requirements(
    root: &Path,
    data_dir: &Path,
) -> Result<(BTreeMap<ProviderAddr, VersionConstraints>, Diagnostics), Diagnostics> {
    let (requirements, diags) = module::load_requirements(root, data_dir)?;
    let requirements = requirements
        .0
        .into_iter()
        .map(|(addr, req)| (addr, req.constraints))
        .collect();
    Ok((requirements, diags))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platforms_default_to_the_current_one_and_are_deduplicated() {
        assert_eq!(target_platforms(&[]).unwrap(), [Platform::current()]);
        let given = ["linux_amd64", "darwin_arm64", "linux_amd64"].map(String::from);
        let platforms: Vec<String> = target_platforms(&given)
            .unwrap()
            .iter()
            .map(Platform::to_string)
            .collect();
        assert_eq!(platforms, ["linux_amd64", "darwin_arm64"]);
    }

    #[test]
    fn bad_platforms_are_all_reported_in_terraform_words() {
        let given = ["linux", "linux_amd64", "a_b_c"].map(String::from);
        let diags = target_platforms(&given).unwrap_err();
        let details: Vec<&str> = diags.iter().map(|d| d.detail.as_str()).collect();
        assert_eq!(
            details,
            [
                "The string \"linux\" given in the -platform option is not a valid target platform: must be two words separated by an underscore.",
                "The string \"a_b_c\" given in the -platform option is not a valid target platform: must be two words separated by an underscore.",
            ]
        );
        assert!(diags.iter().all(|d| d.summary == "Invalid target platform"));
    }
}
