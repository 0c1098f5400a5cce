//! The `-json` stream: one JSON object per line on stdout, in the envelope
//! Terraform's machine-readable UI uses (`@level`, `@message`, `@module`,
//! `@timestamp`, `type`), so tools that already read `terraform -json`
//! output need no new parser. Where Terraform's `init -json` writes a line
//! for the same moment, tfinstall writes Terraform's line (type, code and
//! text) with its own fields added. The schema is
//! `docs/json-output.schema.json`; its versions are [`UI_VERSION`] and
//! [`TFINSTALL_UI_VERSION`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use crate::diag::{Diagnostic, Severity, SnippetPos};
use crate::engine::Engine;
use crate::install::events::{InstallEvent, ProgressStage};
use crate::module_install::ModuleEvent;
use crate::ui::Ui;
use crate::verify::{AuthResult, Trust};

/// The version of Terraform's machine-readable UI format the stream
/// follows (Terraform 1.11 writes 1.2), so readers of Terraform's stream
/// accept it.
pub const UI_VERSION: &str = "1.2";

/// The version of what tfinstall adds to Terraform's format (its own
/// message types and fields), `MAJOR.MINOR`: a minor bump adds message
/// types or optional fields; a major bump changes or removes something.
/// 2.0: the messages Terraform also writes took Terraform's types, codes
/// and texts. 2.1: the provider policy's `policy` and `policy_check`, and
/// `platform_hashes`. 2.2: the `engine` message, diagnostics' `snippet`,
/// and `end` and `byte` in their `range`. 2.3: `module_cache_wait`.
pub const TFINSTALL_UI_VERSION: &str = "2.3";

/// A machine reading progress needs far fewer updates than a person
/// watching a bar: at most one per download per second, plus the last.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);

pub struct JsonLines {
    /// When each download last reported and how far it had got, keyed by
    /// provider and version.
    last_progress: Mutex<HashMap<String, (Instant, u64)>>,
    /// The working directory every message is about, in a run over several.
    directory: Option<String>,
}

impl JsonLines {
    /// Starts the stream with its `version` message, as Terraform does.
    pub fn start() -> JsonLines {
        let lines = JsonLines {
            last_progress: Mutex::new(HashMap::new()),
            directory: None,
        };
        let version = env!("CARGO_PKG_VERSION");
        lines.emit(
            "info",
            &format!("tfinstall {version}"),
            "version",
            json!({
                "tfinstall": version,
                "ui": UI_VERSION,
                "tfinstall_ui": TFINSTALL_UI_VERSION,
                "engine": Engine::current().as_str(),
            }),
        );
        lines
    }

    /// The messages of one directory of a multi-directory run, in the
    /// stream [`JsonLines::start`] began.
    pub fn for_directory(directory: &str) -> JsonLines {
        JsonLines {
            last_progress: Mutex::new(HashMap::new()),
            directory: Some(directory.to_owned()),
        }
    }

    /// A line of prose of tfinstall's own, by its stable code.
    pub fn message(&self, code: &str, text: &str) {
        self.emit(
            "info",
            text.trim(),
            "message",
            json!({ "message_code": code }),
        );
    }

    /// A paragraph Terraform's `init -json` writes as an `init_output` line
    /// with this `message_code`.
    pub fn init_output(&self, code: &str, text: &str) {
        self.emit(
            "info",
            text.trim(),
            "init_output",
            json!({ "message_code": code }),
        );
    }

    /// A line Terraform's `init -json` writes as a `log` line with this
    /// text; `event` and `fields` say the same for machines, since Terraform's
    /// `log` lines carry nothing but the text.
    fn log(&self, text: &str, event: &str, mut fields: Value) {
        fields["event"] = event.into();
        self.emit("info", text.trim(), "log", fields);
    }

    pub fn diagnostic(&self, diag: &Diagnostic) {
        let (level, severity) = match diag.severity {
            Severity::Error => ("error", "error"),
            Severity::Warning => ("warn", "warning"),
        };
        let mut body = json!({
            "severity": severity,
            "summary": diag.summary,
            "detail": diag.detail,
        });
        if let Some(pos) = &diag.subject {
            let filename = pos.file.display().to_string();
            match diag.snippet() {
                // Terraform's `range` and `snippet`, field for field.
                Some(snippet) => {
                    let at = |p: SnippetPos| json!({ "line": p.line, "column": p.column, "byte": p.byte });
                    body["range"] = json!({
                        "filename": filename,
                        "start": at(snippet.start),
                        "end": at(snippet.end),
                    });
                    body["snippet"] = json!({
                        "context": snippet.context,
                        "code": snippet.code,
                        "start_line": snippet.start_line,
                        "highlight_start_offset": snippet.highlight_start,
                        "highlight_end_offset": snippet.highlight_end,
                        "values": [],
                    });
                }
                None => {
                    body["range"] = json!({
                        "filename": filename,
                        "start": { "line": pos.line, "column": pos.column },
                    });
                }
            }
        }
        let text = format!(
            "{}: {}",
            if diag.is_error() { "Error" } else { "Warning" },
            diag.summary
        );
        self.emit(level, &text, "diagnostic", json!({ "diagnostic": body }));
    }

    pub fn summary(&self, summary: Value, text: &str) {
        let level = if summary["success"] == Value::Bool(true) {
            "info"
        } else {
            "error"
        };
        self.emit(level, text, "summary", summary);
    }

    /// A line of the module installation, as Terraform's `log` line with
    /// the same text; `event` and `module` say which for machines. A wait
    /// for another process's fill of a module cache entry, which Terraform
    /// never writes, is a type of tfinstall's own.
    pub fn module_event(&self, event: &ModuleEvent) {
        let (name, key) = match event {
            ModuleEvent::Downloading { key, .. } => ("module_downloading", key),
            ModuleEvent::Installed { key, .. } => ("module_installed", key),
            ModuleEvent::WaitingForCache { source, version } => {
                let mut fields = json!({ "source": source });
                if let Some(version) = version {
                    fields["version"] = json!(version);
                }
                let text = event.text();
                self.emit(
                    "info",
                    text.trim_start_matches("- "),
                    "module_cache_wait",
                    fields,
                );
                return;
            }
        };
        self.log(&event.text(), name, json!({ "module": key }));
    }

    /// An installer event: Terraform's `log` line where Terraform writes one
    /// (its JSON wording, which differs from its text output's), otherwise a
    /// type of tfinstall's own.
    pub fn event(&self, event: &InstallEvent) {
        let engine = Engine::current().name();
        match event {
            InstallEvent::Warning(diag) => self.diagnostic(diag),
            InstallEvent::BuiltIn { provider } => self.log(
                &format!("{} is built in to {engine}", provider.for_display()),
                "built_in",
                json!({ "provider": provider.to_string() }),
            ),
            InstallEvent::ReusingLocked { provider } => self.log(
                &format!(
                    "{}: Reusing previous version from the dependency lock file",
                    provider.for_display()
                ),
                "query",
                json!({ "provider": provider.to_string(), "selection": "locked" }),
            ),
            InstallEvent::FindingMatching {
                provider,
                constraints,
            } => self.log(
                // Go's %q: constraints never hold what it and Rust's Debug
                // would quote differently.
                &format!(
                    "Finding matching versions for provider: {}, version_constraint: {constraints:?}",
                    provider.for_display()
                ),
                "query",
                json!({ "provider": provider.to_string(), "selection": "newest_matching", "constraints": constraints }),
            ),
            InstallEvent::FindingLatest { provider } => self.log(
                &format!("{}: Finding latest version...", provider.for_display()),
                "query",
                json!({ "provider": provider.to_string(), "selection": "newest" }),
            ),
            InstallEvent::UsingInstalled { provider, version } => self.log(
                &format!(
                    "{} v{version}: Using previously-installed provider version",
                    provider.for_display()
                ),
                "using_installed",
                json!({ "provider": provider.to_string(), "version": version.to_string() }),
            ),
            InstallEvent::CacheHit { provider, version } => self.log(
                &format!(
                    "{} v{version}: Using from the shared cache directory",
                    provider.for_display()
                ),
                "cache_hit",
                json!({ "provider": provider.to_string(), "version": version.to_string() }),
            ),
            InstallEvent::Installing { provider, version } => self.log(
                &format!(
                    "Installing provider version: {} v{version}...",
                    provider.for_display()
                ),
                "installing",
                json!({ "provider": provider.to_string(), "version": version.to_string() }),
            ),
            InstallEvent::Installed {
                provider,
                version,
                auth,
            } => self.log(
                &format!(
                    "Installed provider version: {} v{version} ({auth}{})",
                    provider.for_display(),
                    terraform_key_id(auth)
                ),
                "installed",
                json!({
                    "provider": provider.to_string(),
                    "version": version.to_string(),
                    "authentication": authentication(auth),
                }),
            ),
            InstallEvent::WaitingForCache { provider, version } => {
                let text = Ui { color: false }.event_line(event).unwrap_or_default();
                self.emit(
                    "info",
                    text.trim_start_matches("- "),
                    "cache_wait",
                    json!({ "provider": provider.to_string(), "version": version.to_string() }),
                )
            }
            InstallEvent::Selected {
                provider,
                version,
                locked,
                package,
            } => self.emit(
                "info",
                &format!(
                    "Selected {} v{version} from {package}",
                    provider.for_display()
                ),
                "selected",
                json!({
                    "provider": provider.to_string(),
                    "version": version.to_string(),
                    "locked": locked,
                    "package": package,
                }),
            ),
            InstallEvent::Verified {
                provider,
                version,
                auth,
            } => self.emit(
                "info",
                &format!("Verified {} v{version} ({auth})", provider.for_display()),
                "verified",
                json!({
                    "provider": provider.to_string(),
                    "version": version.to_string(),
                    "authentication": authentication(auth),
                }),
            ),
            InstallEvent::Progress {
                provider,
                version,
                stage: ProgressStage::Downloading(progress),
            } => {
                let key = format!("{provider} {version}");
                let finished = progress.total == Some(progress.received);
                {
                    let mut last = self.last_progress.lock().unwrap_or_else(|e| e.into_inner());
                    let due = match last.get(&key) {
                        None => true,
                        Some((_, received)) if *received == progress.received => false,
                        Some((at, _)) => finished || at.elapsed() >= PROGRESS_INTERVAL,
                    };
                    if !due {
                        return;
                    }
                    last.insert(key, (Instant::now(), progress.received));
                }
                let text = match progress.total {
                    Some(total) => format!(
                        "Downloading {} v{version}: {} of {total} bytes",
                        provider.for_display(),
                        progress.received
                    ),
                    None => format!(
                        "Downloading {} v{version}: {} bytes",
                        provider.for_display(),
                        progress.received
                    ),
                };
                self.emit(
                    "info",
                    &text,
                    "download_progress",
                    json!({
                        "provider": provider.to_string(),
                        "version": version.to_string(),
                        "received_bytes": progress.received,
                        "total_bytes": progress.total,
                    }),
                )
            }
            InstallEvent::PolicyScreened { provider, removed } => {
                for (decision, versions) in crate::policy::by_decision(removed) {
                    let versions: Vec<String> = versions.iter().map(ToString::to_string).collect();
                    let mut fields = decision.json(provider, None, None);
                    fields["versions"] = json!(versions);
                    self.policy(
                        "info",
                        &format!(
                            "Policy: {} {}: {decision}",
                            provider.for_display(),
                            versions.join(", ")
                        ),
                        fields,
                    );
                }
            }
            InstallEvent::PolicyDecided {
                provider,
                version,
                decision,
                auth,
            } => self.policy(
                if decision.allowed() { "info" } else { "error" },
                &format!("Policy: {} v{version}: {decision}", provider.for_display()),
                decision.json(provider, Some(version), Some(auth)),
            ),
            InstallEvent::PlatformHashes {
                provider,
                version,
                platforms,
            } => {
                for (platform, found) in platforms {
                    let hashes: Vec<Value> = found
                        .hashes
                        .iter()
                        .map(|(hash, source)| json!({ "hash": hash.as_str(), "source": source.as_str() }))
                        .collect();
                    self.emit(
                        "info",
                        &format!(
                            "Recorded checksums of {} v{version} for {platform}",
                            provider.for_display()
                        ),
                        "platform_hashes",
                        json!({
                            "provider": provider.to_string(),
                            "version": version.to_string(),
                            "platform": platform.to_string(),
                            "hashes": hashes,
                            "authentication": authentication(&found.auth),
                        }),
                    );
                }
            }
            // Unpacking and completion only drive the terminal display; the
            // `verified` and `installed` messages say the same for machines.
            InstallEvent::Progress { .. } => {}
        }
    }

    /// A decision of the provider policy: on versions (`versions`), on a
    /// package (`version`, `trust`, `key_id`), or (`providers check`) on a
    /// lock entry or an installed package.
    pub fn policy(&self, level: &str, text: &str, fields: Value) {
        self.emit(level, text, "policy", fields);
    }

    /// Terraform's note after installing packages signed by a partner or
    /// their own author, as a `log` line.
    pub fn third_party_signed(&self, text: &str) {
        self.log(text, "partner_and_community_providers", json!({}));
    }

    pub fn emit(&self, level: &str, message: &str, kind: &str, fields: Value) {
        let mut object = Map::new();
        object.insert("@level".into(), level.into());
        object.insert("@message".into(), message.into());
        // Terraform's own types carry its module name, so a reader that
        // filters on it sees them; tfinstall's additions carry its name.
        let module = match kind {
            "version" | "init_output" | "log" | "diagnostic" => "terraform.ui",
            _ => "tfinstall",
        };
        object.insert("@module".into(), module.into());
        object.insert("@timestamp".into(), timestamp(SystemTime::now()).into());
        object.insert("type".into(), kind.into());
        if let Some(directory) = &self.directory {
            object.insert("directory".into(), directory.as_str().into());
        }
        if let Value::Object(fields) = fields {
            object.extend(fields);
        }
        let mut line = Value::Object(object).to_string();
        line.push('\n');
        // One write per line under the lock, so lines from concurrent
        // installs never interleave.
        crate::stdio::print(&line, false);
    }
}

/// What Terraform's JSON view appends to the authentication result of a
/// package signed by a partner or its author: `key_id: ID`, with no
/// separator (Terraform 1.11 writes `(self-signedkey_id: …)`), which readers
/// matching Terraform's text expect verbatim. The key ID is also in
/// `authentication.key_id`.
fn terraform_key_id(auth: &AuthResult) -> String {
    match auth {
        AuthResult::Signed(check) if auth.is_third_party_signed() => {
            format!("key_id: {}", check.key_id)
        }
        _ => String::new(),
    }
}

/// The authentication result in Terraform's words plus its parts.
fn authentication(auth: &AuthResult) -> Value {
    let mut value = json!({ "result": auth.to_string() });
    if let AuthResult::Signed(check) = auth {
        value["trust"] = match check.trust {
            Trust::HashiCorp => "hashicorp",
            Trust::Partner => "partner",
            Trust::SelfSigned => "self_signed",
        }
        .into();
        value["key_id"] = check.key_id.clone().into();
    }
    value
}

/// RFC 3339 in UTC with microseconds, e.g. `2026-05-01T09:30:00.123456Z`.
pub fn timestamp(now: SystemTime) -> String {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since.subsec_micros()
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's
/// algorithm), to avoid a date-time dependency for one timestamp format.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        let at = |secs: u64, micros: u64| {
            timestamp(UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros))
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(at(951_825_600, 7), "2000-02-29T12:00:00.000007Z");
        assert_eq!(at(1_780_000_000, 0), "2026-05-28T20:26:40.000000Z");
        assert_eq!(at(4_107_542_399, 0), "2100-02-28T23:59:59.000000Z");
    }
}
