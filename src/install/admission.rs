//! How the install stages ask the provider policy ([`crate::policy`]):
//! which of a source's versions may be chosen, whether the lock file's
//! version may be kept, and whether a package, fresh or found (installed,
//! cached), may be used. The policy decides; this only asks it at each
//! place and reports its decisions as events, for `-json`.

use crate::addr::ProviderAddr;
use crate::diag::Diagnostic;
use crate::install::context::Installer;
use crate::install::events::InstallEvent;
use crate::policy::{Decision, Refusal};
use crate::verify::AuthResult;
use crate::version::Version;

impl Installer {
    /// The versions the policy allows, in the order given, and the others
    /// with what removed each (also reported).
    pub(super) fn screen_versions(
        &self,
        provider: &ProviderAddr,
        versions: Vec<Version>,
    ) -> (Vec<Version>, Vec<(Version, Decision)>) {
        let Some(policy) = &self.policy else {
            return (versions, Vec::new());
        };
        let (allowed, removed) = policy.screen(provider, &versions);
        if !removed.is_empty() {
            (self.events)(InstallEvent::PolicyScreened {
                provider: provider.clone(),
                removed: removed.clone(),
            });
        }
        (allowed, removed)
    }

    /// Whether the version may be selected at all, before anything is
    /// asked of a source: the lock file's, or one an exact constraint pins.
    pub(super) fn version_allowed(&self, provider: &ProviderAddr, version: &Version) -> bool {
        self.policy
            .as_ref()
            .is_none_or(|policy| policy.allows(provider, version))
    }

    /// The lock file's version of `provider`, unless the policy now denies
    /// it: then it is not used, and the run fails saying how to move on.
    pub(super) fn check_locked(
        &self,
        provider: &ProviderAddr,
        version: &Version,
    ) -> Result<(), Diagnostic> {
        let Some((decision, refused)) = self
            .policy
            .as_ref()
            .and_then(|policy| policy.refuse_locked(provider, version))
        else {
            return Ok(());
        };
        (self.events)(InstallEvent::PolicyScreened {
            provider: provider.clone(),
            removed: vec![(version.clone(), decision)],
        });
        Err(refused)
    }

    /// Whether a package found already verified (installed, or in the
    /// plugin cache), authenticated as `auth` back then, may be used. A
    /// refused one is simply not used: the package is obtained afresh and
    /// decided on then.
    pub(super) fn admits_found(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        auth: &AuthResult,
    ) -> bool {
        self.policy
            .as_ref()
            .is_none_or(|policy| policy.decide(provider, version, Some(auth)).allowed())
    }

    /// Reports the decision on a found package now being used.
    pub(super) fn report_found(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        auth: &AuthResult,
        emit: &(dyn Fn(InstallEvent) + Sync),
    ) {
        if let Some(policy) = &self.policy {
            emit(InstallEvent::PolicyDecided {
                provider: provider.clone(),
                version: version.clone(),
                decision: policy.decide(provider, version, Some(auth)),
                auth: auth.clone(),
            });
        }
    }

    /// The decision on a package just authenticated, before it is unpacked
    /// anywhere that lasts: reported either way, and a refusal ends its
    /// install.
    pub(super) fn admit(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        auth: &AuthResult,
        emit: &(dyn Fn(InstallEvent) + Sync),
    ) -> Result<(), Box<Refusal>> {
        let Some(policy) = &self.policy else {
            return Ok(());
        };
        let admitted = policy.admit(provider, version, auth);
        let decision = match &admitted {
            Ok(decision) => decision.clone(),
            Err(refusal) => refusal.decision.clone(),
        };
        emit(InstallEvent::PolicyDecided {
            provider: provider.clone(),
            version: version.clone(),
            decision,
            auth: auth.clone(),
        });
        admitted.map(drop)
    }
}
