//! `tfinstall providers lock` and `tfinstall providers mirror`, plus what
//! both need: target platforms, the configuration's requirements, sources
//! built from flags, and output that stays in a stable order although the
//! work runs concurrently.

pub mod lock;
pub mod mirror;
pub mod mirror_oci;
pub mod tree;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

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

/// Credentials for registries and mirrors, exactly as `init` uses them.
/// Prints lines that concurrent tasks produce in the order of their slots:
/// lines of the earliest unfinished slot go straight out, later slots wait
/// until every slot before them has finished. Output therefore reads as if
/// the work had run one slot after another, yet nothing waits for the end.
pub struct OrderedOutput {
    state: Mutex<OutputState>,
}

struct OutputState {
    head: usize,
    finished: Vec<bool>,
    buffered: Vec<Vec<String>>,
}

impl OrderedOutput {
    pub fn new(slots: usize) -> Self {
        OrderedOutput {
            state: Mutex::new(OutputState {
                head: 0,
                finished: vec![false; slots],
                buffered: vec![Vec::new(); slots],
            }),
        }
    }

    pub fn line(&self, slot: usize, line: String) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if slot == state.head {
            print_line(&line);
        } else if let Some(buffer) = state.buffered.get_mut(slot) {
            buffer.push(line);
        }
    }

    pub fn finish(&self, slot: usize) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(done) = state.finished.get_mut(slot) {
            *done = true;
        }
        while state.head < state.finished.len() && state.finished[state.head] {
            state.head += 1;
            let head = state.head;
            if let Some(buffer) = state.buffered.get_mut(head) {
                for line in std::mem::take(buffer) {
                    print_line(&line);
                }
            }
        }
    }
}

fn print_line(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
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
