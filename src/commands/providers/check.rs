//! `tfinstall providers check [DIR…]`: the lock files and installed
//! packages of working directories against the provider policy, without
//! the network, for a CI step that fails on any violation (issue 33).
//!
//! A lock entry is checked by provider and version, as selection would
//! check it; an installed package also by how tfinstall recorded it was
//! authenticated when it installed it, as `init` would check it before
//! using it again.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::addr::ProviderAddr;
use crate::cli::ProvidersCheckArgs;
use crate::diag::{Diagnostic, Diagnostics};
use crate::install::hash_memo::HashMemo;
use crate::install::layout::{InstallLayout, LayoutKind};
use crate::lockfile::Locks;
use crate::output::Output;
use crate::policy::{Decision, Policy};
use crate::source::PackageLocation;
use crate::source::filesystem::scan_directory;
use crate::verify::AuthResult;
use crate::version::Version;
use crate::workdir::{LOCK_FILE, data_dir, in_dir};

pub fn run(args: ProvidersCheckArgs) -> bool {
    let out = Output::new(args.json, false);
    match check(&args, &out) {
        Ok(Tally {
            checked,
            violations,
        }) => {
            out.policy_check_result(checked, violations);
            if violations > 0 {
                out.diagnostics(
                    &Diagnostic::error(
                        "Provider policy violations",
                        format!(
                            "{violations} of the {checked} lock entries and installed packages checked break the provider policy, each on a line above. Change the configuration's version constraints and run tfinstall init -upgrade (which selects only allowed versions), or ask the policy's owners to allow what is listed."
                        ),
                    )
                    .into(),
                );
            }
            violations == 0
        }
        Err(diags) => {
            out.diagnostics(&diags);
            false
        }
    }
}

#[derive(Default)]
struct Tally {
    checked: usize,
    violations: usize,
}

fn check(args: &ProvidersCheckArgs, out: &Output) -> Result<Tally, Diagnostics> {
    let Some(policy) = Policy::from_flag(args.policy.as_deref())? else {
        return Err(Diagnostic::error(
            "No provider policy",
            "providers check needs the policy to check against: pass -policy=FILE, or set TFINSTALL_POLICY.",
        )
        .into());
    };
    out.diagnostics(policy.warnings());
    let dirs = if args.dirs.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.dirs.clone()
    };
    let mut tally = Tally::default();
    for dir in &dirs {
        if !dir.is_dir() {
            return Err(Diagnostic::error(
                "Invalid working directory",
                format!(
                    "The directory {} does not exist or is not a directory. Check the DIR arguments of tfinstall providers check.",
                    dir.display()
                ),
            )
            .into());
        }
        let lock_path = in_dir(dir, LOCK_FILE);
        if !lock_path.is_file() {
            // A check pointed at the wrong directory must not pass unseen.
            out.diagnostics(
                &Diagnostic::warning(
                    "No lock file",
                    format!(
                        "{} has no {LOCK_FILE}, so only its installed packages (if any) were checked. Run tfinstall init there first, or check the directory that has one.",
                        dir.display()
                    ),
                )
                .into(),
            );
        }
        let (locks, diags) = Locks::load(&lock_path);
        if diags.has_errors() {
            return Err(diags);
        }
        for lock in locks.iter() {
            let decision = policy.decide(&lock.addr, &lock.version, None);
            tally.record(
                out,
                &lock_path,
                "lock_entry",
                &lock.addr,
                &lock.version,
                &decision,
                None,
            );
        }
        let data_dir = in_dir(dir, data_dir());
        let memo = HashMemo::load(&data_dir);
        for kind in [LayoutKind::Plugins, LayoutKind::Providers] {
            let layout = InstallLayout::new(&data_dir, kind);
            for (provider, packages) in scan_directory(&layout.base()) {
                for package in packages {
                    if !matches!(package.location, PackageLocation::LocalDir(_)) {
                        continue;
                    }
                    // Spelt as init spells it, which is how the memo knows it.
                    let installed =
                        layout.package_dir(&provider, &package.version, &package.platform);
                    let auth = match memo.h1_of_dir(&installed) {
                        Ok(h1) => memo.installed_auth(&installed, &h1),
                        Err(_) => AuthResult::Unauthenticated,
                    };
                    let decision = policy.decide(&provider, &package.version, Some(&auth));
                    tally.record(
                        out,
                        &installed,
                        "installed_package",
                        &provider,
                        &package.version,
                        &decision,
                        Some(&auth),
                    );
                }
            }
        }
    }
    Ok(tally)
}

impl Tally {
    /// One decision: a `policy` line for machines; for people, a line per
    /// violation.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        out: &Output,
        path: &Path,
        subject: &str,
        provider: &ProviderAddr,
        version: &Version,
        decision: &Decision,
        auth: Option<&AuthResult>,
    ) {
        self.checked += 1;
        let allowed = decision.allowed();
        if !allowed {
            self.violations += 1;
        }
        let line = format!("{}: {provider} {version}: {decision}", path.display());
        let mut fields: Value = decision.json(provider, Some(version), auth);
        fields["subject"] = subject.into();
        fields["path"] = path.display().to_string().into();
        out.policy_check(allowed, &line, fields);
    }
}
