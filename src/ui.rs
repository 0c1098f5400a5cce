//! Turns installer events and diagnostics into the lines Terraform users
//! already know. It only renders; it never decides anything.

use std::io::IsTerminal;

use crate::addr::Platform;
use crate::diag::{Diagnostic, Diagnostics, Severity, Snippet};
use crate::engine::Engine;
use crate::install::events::InstallEvent;
use crate::verify::AuthResult;

const RESET: &str = "\x1b[0m";
const BOLD: &str = "\x1b[1m";
const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const YELLOW: &str = "\x1b[33m";
const UNDERLINE: &str = "\x1b[4m";

#[derive(Clone, Copy, Debug)]
pub struct Ui {
    pub color: bool,
}

impl Ui {
    /// Colour only on a terminal, and never when the user asked for none
    /// (`-no-color`, or the `NO_COLOR` convention).
    pub fn detect(no_color_flag: bool) -> Ui {
        let no_color_env = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Ui {
            color: !no_color_flag && !no_color_env && std::io::stdout().is_terminal(),
        }
    }

    pub fn heading(&self, text: &str) -> String {
        if self.color {
            format!("{RESET}{BOLD}{text}{RESET}")
        } else {
            text.to_string()
        }
    }

    pub fn bold(&self, text: &str) -> String {
        if self.color {
            format!("{BOLD}{text}{RESET}")
        } else {
            text.to_string()
        }
    }

    pub fn event_line(&self, event: &InstallEvent) -> Option<String> {
        Some(match event {
            InstallEvent::BuiltIn { provider } => {
                format!("- {provider} is built in to {}", Engine::current().name())
            }
            InstallEvent::ReusingLocked { provider } => format!(
                "- Reusing previous version of {} from the dependency lock file",
                provider.for_display()
            ),
            InstallEvent::FindingMatching {
                provider,
                constraints,
            } => format!(
                "- Finding {} versions matching \"{constraints}\"...",
                provider.for_display()
            ),
            InstallEvent::FindingLatest { provider } => {
                format!("- Finding latest version of {}...", provider.for_display())
            }
            InstallEvent::UsingInstalled { provider, version } => format!(
                "- Using previously-installed {} v{version}",
                provider.for_display()
            ),
            InstallEvent::CacheHit { provider, version } => format!(
                "- Using {} v{version} from the shared cache directory",
                provider.for_display()
            ),
            InstallEvent::WaitingForCache { provider, version } => format!(
                "- Waiting for another tfinstall to finish installing {} v{version} into the shared cache directory...",
                provider.for_display()
            ),
            InstallEvent::Installing { provider, version } => {
                format!("- Installing {} v{version}...", provider.for_display())
            }
            InstallEvent::Installed {
                provider,
                version,
                auth: AuthResult::SigningSkipped,
            } => format!(
                "- Installed {} v{version}. Signature validation was skipped due to the registry not containing GPG keys for this provider",
                provider.for_display()
            ),
            InstallEvent::Installed {
                provider,
                version,
                auth,
            } => format!(
                "- Installed {} v{version} ({})",
                provider.for_display(),
                self.auth_words(auth)
            ),
            InstallEvent::PlatformHashes {
                provider,
                version,
                platforms,
            } => format!(
                "- Recorded checksums of {} v{version} for {}",
                provider.for_display(),
                platforms
                    .iter()
                    .map(|(platform, _)| platform.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            // The policy's decisions are for `-json`; a refusal comes as an
            // error of its own.
            InstallEvent::Warning(_)
            | InstallEvent::Selected { .. }
            | InstallEvent::Verified { .. }
            | InstallEvent::PolicyScreened { .. }
            | InstallEvent::PolicyDecided { .. }
            | InstallEvent::Progress { .. } => return None,
        })
    }

    /// Terraform's `providers lock` lines, which name the platform because
    /// one package of each provider is fetched for every platform asked for.
    pub fn platform_event_line(&self, platform: &Platform, event: &InstallEvent) -> Option<String> {
        Some(match event {
            InstallEvent::Installing { provider, version } => format!(
                "- Fetching {} {version} for {platform}...",
                provider.for_display()
            ),
            InstallEvent::Installed {
                provider,
                version,
                auth,
            } => format!(
                "- Retrieved {} {version} for {platform} ({})",
                provider.for_display(),
                self.auth_words(auth)
            ),
            InstallEvent::UsingInstalled { provider, version } => format!(
                "- Using previously-installed {} {version} for {platform}",
                provider.for_display()
            ),
            InstallEvent::PlatformHashes {
                provider,
                version,
                platforms,
            } => {
                let (_, found) = platforms.first()?;
                format!(
                    "- Using {} {version} checksums for {platform} from {} ({})",
                    provider.for_display(),
                    found.h1_source()?,
                    self.auth_words(&found.auth)
                )
            }
            _ => return None,
        })
    }

    /// Terraform's closing line of a command that succeeded: the headline
    /// in bold green, the rest in bold.
    pub fn success(&self, headline: &str, text: &str) -> String {
        if self.color {
            format!("{BOLD}{GREEN}{headline}{RESET} {BOLD}{text}{RESET}")
        } else {
            format!("{headline} {text}")
        }
    }

    pub fn auth_words(&self, auth: &AuthResult) -> String {
        match auth {
            AuthResult::Signed(check) if auth.is_third_party_signed() => {
                format!("{auth}, key ID {}", self.bold(&check.key_id))
            }
            _ => auth.to_string(),
        }
    }

    /// Terraform's diagnostic layout: a framed block on a colour terminal,
    /// plain paragraphs otherwise.
    pub fn render_diagnostic(&self, diag: &Diagnostic) -> String {
        let word = match diag.severity {
            Severity::Error => "Error",
            Severity::Warning => "Warning",
        };
        let mut body = Vec::new();
        let title = if self.color {
            let colour = match diag.severity {
                Severity::Error => RED,
                Severity::Warning => YELLOW,
            };
            format!("{colour}{BOLD}{word}: {RESET}{BOLD}{}{RESET}", diag.summary)
        } else {
            format!("{word}: {}", diag.summary)
        };
        body.push(title);
        body.push(String::new());
        if let Some(pos) = &diag.subject {
            match diag.snippet() {
                Some(snippet) => {
                    let context = snippet
                        .context
                        .as_ref()
                        .map_or(String::new(), |block| format!(", in {block}"));
                    body.push(format!(
                        "  on {} line {}{context}:",
                        pos.file.display(),
                        pos.line
                    ));
                    body.extend(self.snippet_lines(&snippet));
                }
                None => body.push(format!("  on {} line {}:", pos.file.display(), pos.line)),
            }
            body.push(String::new());
        }
        if !diag.detail.is_empty() {
            body.extend(diag.detail.lines().map(str::to_string));
        }
        while body.last().is_some_and(|l| l.is_empty()) {
            body.pop();
        }
        if self.color {
            let colour = match diag.severity {
                Severity::Error => RED,
                Severity::Warning => YELLOW,
            };
            let mut out = format!("{colour}╷{RESET}\n");
            for line in body {
                if line.is_empty() {
                    out.push_str(&format!("{colour}│{RESET}\n"));
                } else {
                    out.push_str(&format!("{colour}│{RESET} {line}\n"));
                }
            }
            out.push_str(&format!("{colour}╵{RESET}\n"));
            out
        } else {
            format!("\n{}\n", body.join("\n"))
        }
    }

    /// The quoted lines, numbered as Terraform numbers them, with the range
    /// underlined on a terminal.
    fn snippet_lines(&self, snippet: &Snippet) -> Vec<String> {
        let code = &snippet.code;
        let start = snippet.highlight_start.min(code.len());
        let end = snippet.highlight_end.clamp(start, code.len());
        let (Some(before), Some(marked), Some(after)) =
            (code.get(..start), code.get(start..end), code.get(end..))
        else {
            return Vec::new();
        };
        let marked = if self.color && !marked.is_empty() {
            marked
                .split('\n')
                .map(|part| format!("{UNDERLINE}{part}{RESET}"))
                .collect::<Vec<_>>()
                .join("\n")
        } else {
            marked.to_owned()
        };
        format!("{before}{marked}{after}")
            .split('\n')
            .enumerate()
            .map(|(i, line)| format!("{:4}: {line}", snippet.start_line + i))
            .collect()
    }

    /// Warnings go to stdout and errors to stderr, warnings first, as
    /// Terraform shows them.
    pub fn print_diagnostics(&self, diags: &Diagnostics) {
        for (severity, text) in self.render_diagnostics(diags) {
            match severity {
                Severity::Warning => crate::stdio::print(&text, false),
                Severity::Error => crate::stdio::print(&text, true),
            }
        }
    }

    pub fn render_diagnostics(&self, diags: &Diagnostics) -> Vec<(Severity, String)> {
        let mut sorted: Vec<&Diagnostic> = diags.iter().collect();
        sorted.sort_by_key(|d| d.severity);
        sorted
            .into_iter()
            .map(|diag| (diag.severity, self.render_diagnostic(diag)))
            .collect()
    }
}
