//! The provider policy (issue 33): which providers and versions may be
//! installed, and how trusted their packages must be.
//!
//! One file ([`file`], format in docs/policy.md) and one decision,
//! [`Policy::decide`]: provider, version and, once a package is in hand,
//! how it was authenticated, in; allowed or denied, with the rule that
//! decided, out. Every path a package comes in by asks it and none
//! re-implements a rule: version selection (before anything is fetched),
//! the plugin cache and installed packages (with the authentication
//! recorded when they were verified), a fresh package (once authenticated,
//! before it is unpacked anywhere that lasts), `providers mirror`, `serve`
//! and `providers check`.

mod file;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::addr::ProviderAddr;
use crate::addr::pattern::ProviderPattern;
use crate::diag::{Diagnostic, Diagnostics};
use crate::verify::{AuthResult, Trust};
use crate::version::{Version, VersionConstraints};

/// How far a package was authenticated, lowest first, in Terraform's words
/// (OpenTofu's `signing skipped`, a checksum list its registry vouched for
/// without a signature, sits just above a checksum a mirror vouched for).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TrustLevel {
    Unauthenticated,
    VerifiedChecksum,
    SigningSkipped,
    SelfSigned,
    Partner,
    HashiCorp,
}

impl TrustLevel {
    const ALL: [TrustLevel; 6] = [
        TrustLevel::Unauthenticated,
        TrustLevel::VerifiedChecksum,
        TrustLevel::SigningSkipped,
        TrustLevel::SelfSigned,
        TrustLevel::Partner,
        TrustLevel::HashiCorp,
    ];

    pub fn of(auth: &AuthResult) -> TrustLevel {
        match auth {
            AuthResult::Unauthenticated => TrustLevel::Unauthenticated,
            AuthResult::VerifiedChecksum => TrustLevel::VerifiedChecksum,
            AuthResult::SigningSkipped => TrustLevel::SigningSkipped,
            AuthResult::Signed(check) => match check.trust {
                Trust::SelfSigned => TrustLevel::SelfSigned,
                Trust::Partner => TrustLevel::Partner,
                Trust::HashiCorp => TrustLevel::HashiCorp,
            },
        }
    }

    pub fn words(self) -> &'static str {
        match self {
            TrustLevel::Unauthenticated => "unauthenticated",
            TrustLevel::VerifiedChecksum => "verified checksum",
            TrustLevel::SigningSkipped => "signing skipped",
            TrustLevel::SelfSigned => "self-signed",
            TrustLevel::Partner => "signed by a HashiCorp partner",
            TrustLevel::HashiCorp => "signed by HashiCorp",
        }
    }

    fn parse(words: &str) -> Option<TrustLevel> {
        TrustLevel::ALL
            .into_iter()
            .find(|level| level.words() == words)
    }
}

impl fmt::Display for TrustLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.words())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Effect {
    Allow,
    Deny,
}

/// A value the file sets, with the line that sets it.
#[derive(Clone, Debug)]
struct Setting<T> {
    value: T,
    line: usize,
}

/// An `allow` or `deny` block.
#[derive(Clone, Debug)]
struct Rule {
    effect: Effect,
    pattern: ProviderPattern,
    /// The pattern as written, for messages.
    written: String,
    line: usize,
    versions: Option<Setting<VersionConstraints>>,
    min_trust: Option<Setting<TrustLevel>>,
    /// Upper-case fingerprints (40 digits) or 64-bit key IDs (16 digits,
    /// as Terraform prints them).
    key_ids: Option<Setting<Vec<String>>>,
}

impl Rule {
    fn label(&self) -> String {
        let word = match self.effect {
            Effect::Allow => "allow",
            Effect::Deny => "deny",
        };
        format!("{word} \"{}\"", self.written)
    }

    /// The block itself, or (`attribute`) one of its arguments.
    fn named(&self, file: &Path, attribute: Option<(&str, usize)>) -> RuleRef {
        let kind = match self.effect {
            Effect::Allow => RuleKind::Allow,
            Effect::Deny => RuleKind::Deny,
        };
        let (label, line) = match attribute {
            Some((name, line)) => (format!("{name} in {}", self.label()), line),
            None => (self.label(), self.line),
        };
        RuleRef {
            kind,
            label,
            pattern: Some(self.written.clone()),
            file: file.to_path_buf(),
            line: Some(line),
        }
    }
}

/// A provider policy read from its file.
#[derive(Clone, Debug)]
pub struct Policy {
    /// The file as the user named it: rules are shown as `FILE:LINE`.
    file: PathBuf,
    /// `default = "deny"` (`false`) or `"allow"`; absent is allow.
    default_allows: Option<Setting<bool>>,
    min_trust: Option<Setting<TrustLevel>>,
    accept_expired_keys: Option<Setting<bool>>,
    rules: Vec<Rule>,
    /// What the file should say better (a key pinned by its 64-bit ID),
    /// for the command to show.
    warnings: Diagnostics,
}

/// Whether the key that signed the package is the one `pinned` names: a
/// fingerprint names a primary key or the signing subkey, a 64-bit key ID
/// (which two keys can be made to share) the primary key.
fn pin_matches(pinned: &str, auth: &AuthResult) -> bool {
    if pinned.len() == 40 {
        fingerprints(auth).iter().any(|fp| fp == pinned)
    } else {
        auth.key_id() == Some(pinned)
    }
}

fn fingerprints(auth: &AuthResult) -> &[String] {
    match auth {
        AuthResult::Signed(check) => &check.fingerprints,
        _ => &[],
    }
}

/// Which part of the file decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleKind {
    Allow,
    Deny,
    Default,
    MinTrust,
    AcceptExpiredKeys,
}

impl RuleKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::Allow => "allow",
            RuleKind::Deny => "deny",
            RuleKind::Default => "default",
            RuleKind::MinTrust => "min_trust",
            RuleKind::AcceptExpiredKeys => "accept_expired_keys",
        }
    }
}

/// The rule that decided, and where it is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleRef {
    pub kind: RuleKind,
    /// As a person would point at it: `deny "registry.terraform.io/hashicorp/aws"`,
    /// `min_trust in allow "…"`, `default = "deny"`.
    pub label: String,
    /// An `allow` or `deny` block's provider pattern, as written.
    pub pattern: Option<String>,
    pub file: PathBuf,
    /// `None` for a default the file does not set.
    pub line: Option<usize>,
}

impl fmt::Display for RuleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{} at {}:{line}", self.label, self.file.display()),
            None => write!(
                f,
                "{} (the default; {} does not set it)",
                self.label,
                self.file.display()
            ),
        }
    }
}

/// What the policy says of one provider version, or of one package.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub rule: RuleRef,
    pub verdict: Verdict,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// A `deny` block matched.
    Denied,
    /// `allow` blocks name the provider, but none this version.
    OutsideVersions {
        allowed: String,
    },
    /// No `allow` block names the provider, and `default = "deny"`.
    Unnamed,
    TrustTooLow {
        required: TrustLevel,
        actual: TrustLevel,
        key_id: Option<String>,
    },
    /// The `allow` block pins keys, and another one (or none) signed it.
    KeyNotPinned {
        key_id: Option<String>,
        /// The signing key's primary fingerprint, where known: a pin by
        /// fingerprint can refuse a key whose 64-bit ID it shares.
        fingerprint: Option<String>,
    },
    KeyExpired {
        key_id: String,
    },
}

impl Decision {
    pub fn allowed(&self) -> bool {
        self.verdict == Verdict::Allowed
    }

    /// The decision as `-json` lines and `serve`'s refusals carry it.
    pub fn json(
        &self,
        provider: &ProviderAddr,
        version: Option<&Version>,
        auth: Option<&AuthResult>,
    ) -> Value {
        let mut rule = json!({
            "kind": self.rule.kind.as_str(),
            "file": self.rule.file.display().to_string(),
        });
        if let Some(pattern) = &self.rule.pattern {
            rule["pattern"] = pattern.as_str().into();
        }
        if let Some(line) = self.rule.line {
            rule["line"] = line.into();
        }
        let mut value = json!({
            "provider": provider.to_string(),
            "allowed": self.allowed(),
            "rule": rule,
            "reason": self.to_string(),
        });
        if let Some(version) = version {
            value["version"] = version.to_string().into();
        }
        if let Some(auth) = auth {
            value["trust"] = TrustLevel::of(auth).words().into();
            if let Some(key_id) = auth.key_id() {
                value["key_id"] = key_id.into();
            }
        }
        value
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rule = &self.rule;
        match &self.verdict {
            Verdict::Allowed => write!(f, "allowed by {rule}"),
            Verdict::Denied => write!(f, "denied by {rule}"),
            Verdict::OutsideVersions { allowed } => {
                write!(f, "not allowed by {rule}, which allows only {allowed:?}")
            }
            Verdict::Unnamed => write!(f, "denied by {rule}: no allow block names the provider"),
            Verdict::TrustTooLow {
                required,
                actual,
                key_id,
            } => {
                let key = key_id
                    .as_ref()
                    .map(|k| format!(" (key ID {k})"))
                    .unwrap_or_default();
                write!(
                    f,
                    "refused: the package is \"{actual}\"{key}, and {rule} requires at least \"{required}\""
                )
            }
            Verdict::KeyNotPinned {
                key_id: Some(key),
                fingerprint,
            } => {
                let fingerprint = fingerprint
                    .as_ref()
                    .map(|fp| format!(" (fingerprint {fp})"))
                    .unwrap_or_default();
                write!(
                    f,
                    "refused: the package is signed by key {key}{fingerprint}, which {rule} does not list"
                )
            }
            Verdict::KeyNotPinned { key_id: None, .. } => write!(
                f,
                "refused: the package is not signed by any key, and {rule} requires one of its keys"
            ),
            Verdict::KeyExpired { key_id } => write!(
                f,
                "refused: the package is signed by key {key_id}, which has expired, and {rule} refuses expired keys"
            ),
        }
    }
}

impl Policy {
    /// Reads the policy file at `path`. Any problem fails the whole file,
    /// each with its line and what was expected: a command given a policy
    /// it cannot read installs nothing.
    pub fn load(path: &Path) -> Result<Policy, Diagnostics> {
        let bytes = std::fs::read(path).map_err(|err| {
            Diagnostics::from(Diagnostic::error(
                "Cannot read the provider policy",
                format!(
                    "Could not read the policy file {}: {err}. Check the -policy flag (or TFINSTALL_POLICY).",
                    path.display()
                ),
            ))
        })?;
        let text = String::from_utf8(bytes).map_err(|err| {
            let valid = &err.as_bytes()[..err.utf8_error().valid_up_to()];
            let line = 1 + valid.iter().filter(|&&b| b == b'\n').count();
            Diagnostics::from(
                Diagnostic::error(
                    "Invalid provider policy",
                    "The policy file is not UTF-8 text; save it as UTF-8.",
                )
                .at(path, line, 1),
            )
        })?;
        file::parse(&text, path)
    }

    /// The policy a command was given (`-policy`, or `TFINSTALL_POLICY`
    /// through the same flag), if any; an empty name means none.
    pub fn from_flag(path: Option<&Path>) -> Result<Option<Arc<Policy>>, Diagnostics> {
        match path.filter(|p| !p.as_os_str().is_empty()) {
            Some(path) => Ok(Some(Arc::new(Policy::load(path)?))),
            None => Ok(None),
        }
    }

    /// The file's warnings, for the command to show before it starts.
    pub fn warnings(&self) -> &Diagnostics {
        &self.warnings
    }

    /// Whether `version` of `provider` may be selected at all, before any
    /// package of it is seen.
    pub fn allows(&self, provider: &ProviderAddr, version: &Version) -> bool {
        self.decide(provider, version, None).allowed()
    }

    /// The decision: whether `version` of `provider` may be installed, and,
    /// given `package` (how a package of it was authenticated), whether
    /// that package may. A `deny` block matching the version wins; else an
    /// `allow` block naming the provider and the version allows it (without
    /// one naming the provider, the default decides); then the package
    /// must meet the highest `min_trust` of the file and of the `allow`
    /// blocks that allow it, be signed by a key each of them pins, and not
    /// by an expired key if the file refuses those.
    pub fn decide(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        package: Option<&AuthResult>,
    ) -> Decision {
        let decision = |rule: RuleRef, verdict| Decision { rule, verdict };
        let matching = |effect| {
            self.rules
                .iter()
                .filter(move |r| r.effect == effect && r.pattern.matches(provider))
        };
        // A `deny` range also catches pre-releases within it.
        if let Some(deny) = matching(Effect::Deny).find(|r| {
            r.versions
                .as_ref()
                .is_none_or(|v| v.value.bounds_contain(version))
        }) {
            return decision(deny.named(&self.file, None), Verdict::Denied);
        }
        let naming: Vec<&Rule> = matching(Effect::Allow).collect();
        let granting: Vec<&Rule> = naming
            .iter()
            .copied()
            .filter(|r| r.versions.as_ref().is_none_or(|v| v.value.allows(version)))
            .collect();
        let allowed_by = match (naming.first(), granting.first()) {
            (None, _) => {
                let rule = self.default_rule();
                if !self.default_allows.as_ref().is_none_or(|s| s.value) {
                    return decision(rule, Verdict::Unnamed);
                }
                rule
            }
            (Some(_), Some(first)) => first.named(&self.file, None),
            (Some(first), None) => {
                let versions = first
                    .versions
                    .as_ref()
                    .expect("an allow block without versions grants every version");
                return decision(
                    first.named(&self.file, Some(("versions", versions.line))),
                    Verdict::OutsideVersions {
                        allowed: versions.value.to_string(),
                    },
                );
            }
        };
        let Some(auth) = package else {
            return decision(allowed_by, Verdict::Allowed);
        };
        let actual = TrustLevel::of(auth);
        let key_id = auth.key_id().map(str::to_owned);
        let mut required: Option<(TrustLevel, RuleRef)> = self.min_trust.as_ref().map(|s| {
            (
                s.value,
                self.setting_rule(RuleKind::MinTrust, format!("\"{}\"", s.value), s.line),
            )
        });
        for rule in &granting {
            if let Some(min) = &rule.min_trust
                && required
                    .as_ref()
                    .is_none_or(|(level, _)| min.value > *level)
            {
                required = Some((
                    min.value,
                    rule.named(&self.file, Some(("min_trust", min.line))),
                ));
            }
        }
        if let Some((level, rule)) = required
            && actual < level
        {
            return decision(
                rule,
                Verdict::TrustTooLow {
                    required: level,
                    actual,
                    key_id,
                },
            );
        }
        for rule in &granting {
            if let Some(keys) = &rule.key_ids
                && !keys.value.iter().any(|pinned| pin_matches(pinned, auth))
            {
                return decision(
                    rule.named(&self.file, Some(("key_ids", keys.line))),
                    Verdict::KeyNotPinned {
                        key_id,
                        fingerprint: fingerprints(auth).first().cloned(),
                    },
                );
            }
        }
        if let AuthResult::Signed(check) = auth
            && check.key_expired
            && let Some(setting) = self.accept_expired_keys.as_ref().filter(|s| !s.value)
        {
            return decision(
                self.setting_rule(
                    RuleKind::AcceptExpiredKeys,
                    "false".to_owned(),
                    setting.line,
                ),
                Verdict::KeyExpired {
                    key_id: check.key_id.clone(),
                },
            );
        }
        decision(allowed_by, Verdict::Allowed)
    }

    /// [`Policy::decide`] on a package in hand, authenticated as `auth`:
    /// the decision that allows it, or the refusal.
    pub fn admit(
        &self,
        provider: &ProviderAddr,
        version: &Version,
        auth: &AuthResult,
    ) -> Result<Decision, Box<Refusal>> {
        let decision = self.decide(provider, version, Some(auth));
        if decision.allowed() {
            return Ok(decision);
        }
        Err(Box::new(Refusal {
            provider: provider.clone(),
            version: version.clone(),
            decision,
            auth: auth.clone(),
            unpacked: None,
        }))
    }

    /// The versions of `provider` the policy allows, in the order given,
    /// and the others with the decision that removed each.
    pub fn screen(
        &self,
        provider: &ProviderAddr,
        versions: &[Version],
    ) -> (Vec<Version>, Vec<(Version, Decision)>) {
        let mut allowed = Vec::new();
        let mut removed = Vec::new();
        for version in versions {
            let decision = self.decide(provider, version, None);
            if decision.allowed() {
                allowed.push(version.clone());
            } else {
                removed.push((version.clone(), decision));
            }
        }
        (allowed, removed)
    }

    /// Selection came up empty only because of the policy: versions
    /// meeting the constraints were there before it removed them. The
    /// error names each rule and the versions it removed.
    pub fn none_allowed(
        &self,
        provider: &ProviderAddr,
        constraints: &VersionConstraints,
        removed: &[(Version, Decision)],
    ) -> Option<Diagnostic> {
        let relevant: Vec<&(Version, Decision)> = removed
            .iter()
            .filter(|(version, _)| constraints.allows(version))
            .collect();
        if relevant.is_empty() {
            return None;
        }
        let lines: String = by_decision(relevant)
            .iter()
            .map(|(decision, versions)| {
                let versions: Vec<String> = versions.iter().map(ToString::to_string).collect();
                format!("\n  - {}: {decision}", versions.join(", "))
            })
            .collect();
        let matching = if constraints.is_empty() {
            String::new()
        } else {
            format!(" matching {:?}", constraints.to_string())
        };
        Some(Diagnostic::error(
            "No version allowed by the provider policy",
            format!(
                "Versions of {}{matching} exist, but the provider policy {} allows none of them:{lines}\n\nChoose an allowed version in the configuration's version constraints, or ask the policy's owners to allow one.",
                provider.for_display(),
                self.file.display(),
            ),
        ))
    }

    /// The decision against the lock file's version of `provider`, and the
    /// error to fail with, when the policy now denies it: it is not used.
    pub fn refuse_locked(
        &self,
        provider: &ProviderAddr,
        version: &Version,
    ) -> Option<(Decision, Diagnostic)> {
        let decision = self.decide(provider, version, None);
        if decision.allowed() {
            return None;
        }
        let diag = Diagnostic::error(
            "Locked provider version denied by policy",
            format!(
                "The dependency lock file selects {} v{version}, which the provider policy does not allow: {decision}.\n\nTo select the newest version the policy allows, run:\n  tfinstall init -upgrade\nand commit the updated lock file.",
                provider.for_display()
            ),
        );
        Some((decision, diag))
    }

    fn default_rule(&self) -> RuleRef {
        match &self.default_allows {
            Some(setting) => self.setting_rule(
                RuleKind::Default,
                if setting.value {
                    "\"allow\""
                } else {
                    "\"deny\""
                }
                .to_owned(),
                setting.line,
            ),
            None => RuleRef {
                kind: RuleKind::Default,
                label: "default = \"allow\"".to_owned(),
                pattern: None,
                file: self.file.clone(),
                line: None,
            },
        }
    }

    fn setting_rule(&self, kind: RuleKind, value: String, line: usize) -> RuleRef {
        RuleRef {
            kind,
            label: format!("{} = {value}", kind.as_str()),
            pattern: None,
            file: self.file.clone(),
            line: Some(line),
        }
    }
}

/// Removed versions grouped by the decision that removed them, in the
/// order each decision first comes.
pub fn by_decision<'a>(
    removed: impl IntoIterator<Item = &'a (Version, Decision)>,
) -> Vec<(&'a Decision, Vec<&'a Version>)> {
    let mut groups: Vec<(&Decision, Vec<&Version>)> = Vec::new();
    for (version, decision) in removed {
        match groups.iter_mut().find(|(d, _)| *d == decision) {
            Some((_, versions)) => versions.push(version),
            None => groups.push((decision, vec![version])),
        }
    }
    groups
}

/// A package the policy refused once it was authenticated: it was neither
/// installed nor cached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub provider: ProviderAddr,
    pub version: Version,
    pub decision: Decision,
    pub auth: AuthResult,
    /// The package was an unpacked directory, whose refusal needs its own
    /// explanation: it counts as unauthenticated for what it lacks, not
    /// for anything found wrong with it.
    pub unpacked: Option<UnpackedCopy>,
}

/// An unpacked directory offered as the package.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnpackedCopy {
    pub dir: PathBuf,
    /// The directory is an entry of the plugin cache (re-staged from it
    /// because the entry's own record did not pass).
    pub in_plugin_cache: bool,
    /// The run is `-offline`, so nothing can be downloaded instead.
    pub offline: bool,
}

impl Refusal {
    pub fn diagnostic(&self) -> Diagnostic {
        if let (
            Some(unpacked),
            Verdict::TrustTooLow {
                required, actual, ..
            },
        ) = (&self.unpacked, &self.decision.verdict)
        {
            return self.unpacked_diagnostic(unpacked, *actual, *required);
        }
        Diagnostic::error(
            "Provider package refused by policy",
            format!(
                "Error while installing {} v{}: {}. Nothing was installed or cached.",
                self.provider.for_display(),
                self.version,
                self.decision
            ),
        )
    }

    pub fn json(&self) -> Value {
        self.decision
            .json(&self.provider, Some(&self.version), Some(&self.auth))
    }

    /// Says that the directory is what could not be trusted, and why: an
    /// unpacked copy holds no checksums or signature to check it against.
    fn unpacked_diagnostic(
        &self,
        unpacked: &UnpackedCopy,
        actual: TrustLevel,
        required: TrustLevel,
    ) -> Diagnostic {
        let what = if unpacked.in_plugin_cache {
            "the plugin cache entry"
        } else {
            "the unpacked directory"
        };
        let remedy = match (unpacked.offline, unpacked.in_plugin_cache) {
            (true, true) => {
                "With -offline nothing is downloaded, so this entry cannot be authenticated again against its registry's checksums and signature, and the plugin cache's record of how it was authenticated when it was cached, where it has one, did not pass the policy either. Run init without -offline: the package is then downloaded and its signature checked, and the policy decides on what that finds."
            }
            (true, false) => {
                "With -offline nothing is downloaded, so this copy cannot be authenticated against its registry's checksums and signature. Run init without -offline so that the package is downloaded and its signature checked, or fill the plugin cache from the registry (tfinstall cache warm) beforehand."
            }
            (false, _) => {
                "Install the package from where its archive comes with checksums and a signature (its registry, a network mirror, or a filesystem mirror of the zip archives), or lower min_trust in the policy if unpacked copies are meant to be trusted."
            }
        };
        Diagnostic::error(
            "Provider package refused by policy",
            format!(
                "Error while installing {} v{}: {what} {} cannot be authenticated. An unpacked copy holds no checksums or signature to check it against, so it counts as \"{}\", and {} requires at least \"{required}\". Nothing was installed or cached.\n\n{remedy}",
                self.provider.for_display(),
                self.version,
                unpacked.dir.display(),
                actual,
                self.decision.rule,
            ),
        )
    }
}

#[cfg(test)]
mod tests;
