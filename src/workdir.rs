//! A working directory as Terraform lays it out, for every command that
//! works in one: where its data directory and lock file are, and what its
//! configuration requires.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::addr::ProviderAddr;
use crate::diag::{Diagnostic, Diagnostics};
use crate::lockfile::Locks;
use crate::module;
use crate::version::VersionConstraints;

pub mod engine;
pub mod platforms;

/// The dependency lock file, relative to the working directory.
pub const LOCK_FILE: &str = ".terraform.lock.hcl";

/// Terraform's data directory: `TF_DATA_DIR` if set, else `.terraform`,
/// relative to the working directory (after -chdir).
pub fn data_dir() -> PathBuf {
    match std::env::var_os("TF_DATA_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(".terraform"),
    }
}

/// `path` in the working directory `dir`, spelt as Terraform spells it
/// when `dir` is the current directory (messages name `.terraform.lock.hcl`,
/// not `./.terraform.lock.hcl`).
pub fn in_dir(dir: &Path, path: impl AsRef<Path>) -> PathBuf {
    if dir == Path::new(".") {
        path.as_ref().to_path_buf()
    } else {
        dir.join(path)
    }
}

/// Writes `locks` to the lock file in the working directory, reporting a
/// failure the way Terraform does.
pub fn save_lock_file(locks: &Locks) -> Result<(), Diagnostics> {
    locks.save(Path::new(LOCK_FILE)).map_err(|err| {
        Diagnostics::from(Diagnostic::error(
            "Failed to update dependency lock file",
            format!("Error while writing new dependency lock information to {LOCK_FILE}: {err}."),
        ))
    })
}

/// The providers the configuration in `root` needs, with the warnings found
/// on the way.
pub fn configuration_requirements(
    root: &Path,
    data_dir: &Path,
) -> Result<(BTreeMap<ProviderAddr, VersionConstraints>, Diagnostics), Diagnostics> {
    configuration_requirements_staged(root, data_dir, None)
}

/// [`configuration_requirements`] with the modules being installed read
/// from where they are staged.
pub fn configuration_requirements_staged(
    root: &Path,
    data_dir: &Path,
    staged: Option<&module::StagedModules<'_>>,
) -> Result<(BTreeMap<ProviderAddr, VersionConstraints>, Diagnostics), Diagnostics> {
    let (requirements, diags) = module::load_requirements_staged(root, data_dir, staged)?;
    let requirements = requirements
        .0
        .into_iter()
        .map(|(addr, req)| (addr, req.constraints))
        .collect();
    Ok((requirements, diags))
}
