//! Where a command's output goes: Terraform's text for people (with a
//! progress display on a terminal), or the `-json` stream for machines.
//! Commands say what happened; this module decides how it looks, so the
//! two views can never disagree about the facts.

pub mod json;
pub mod ordered;
pub mod progress;

use std::sync::{Arc, Mutex};

use serde_json::json;

use crate::addr::Platform;
use crate::diag::{Diagnostic, Diagnostics, Severity};
use crate::install::events::{EventSink, InstallEvent};
use crate::module_install::{ModuleEvent, ModuleEventSink};
use crate::ui::Ui;
use crate::workdir::engine::EngineChoice;

use json::JsonLines;
use ordered::OrderedOutput;
use progress::Progress;

pub struct Output {
    ui: Ui,
    view: View,
    tally: Mutex<Tally>,
    /// For one directory of a multi-directory run, the text it would print,
    /// held back so that directories are shown one after another in the
    /// order given however their work interleaves ([`Output::release`]).
    held: Option<Mutex<Vec<HeldText>>>,
}

enum HeldText {
    Stdout(String),
    Stderr(String),
}

enum View {
    Human {
        /// One display for the whole run: a download shared by several
        /// directories is one bar.
        progress: Option<Arc<Progress>>,
        /// Warnings raised during installation, shown with the other
        /// diagnostics at the end as Terraform does.
        pending: Mutex<Diagnostics>,
    },
    Json(JsonLines),
}

#[derive(Default)]
struct Tally {
    installed: usize,
    reused: usize,
    built_in: usize,
    warnings: usize,
    errors: usize,
}

/// What a command did to `.terraform.lock.hcl`, for the summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockFileChange {
    Created,
    Updated,
    Unchanged,
    /// `-lockfile=readonly` kept selections that differ from the file.
    NotSaved,
}

impl LockFileChange {
    fn as_str(self) -> &'static str {
        match self {
            LockFileChange::Created => "created",
            LockFileChange::Updated => "updated",
            LockFileChange::Unchanged => "unchanged",
            LockFileChange::NotSaved => "not_saved",
        }
    }
}

impl Output {
    /// `-json` output, or text with colour decided by [`Ui::detect`] and a
    /// progress display when stderr is a terminal.
    pub fn new(json: bool, no_color: bool) -> Arc<Output> {
        let ui = Ui::detect(no_color);
        let view = if json {
            View::Json(JsonLines::start())
        } else {
            View::Human {
                progress: Progress::for_stderr(ui.color).map(Arc::new),
                pending: Mutex::new(Diagnostics::new()),
            }
        };
        Arc::new(Output {
            ui,
            view,
            tally: Mutex::new(Tally::default()),
            held: None,
        })
    }

    /// The output of one working directory of a multi-directory run:
    /// `-json` lines carry `directory` and go out at once; text is held
    /// until [`Output::release`].
    pub fn for_directory(self: &Arc<Self>, directory: &str) -> Arc<Output> {
        let view = match &self.view {
            View::Json(_) => View::Json(JsonLines::for_directory(directory)),
            View::Human { progress, .. } => View::Human {
                progress: progress.clone(),
                pending: Mutex::new(Diagnostics::new()),
            },
        };
        let held = matches!(view, View::Human { .. }).then(|| Mutex::new(Vec::new()));
        Arc::new(Output {
            ui: self.ui,
            view,
            tally: Mutex::new(Tally::default()),
            held,
        })
    }

    /// Prints the text held back for this directory.
    pub fn release(&self) {
        let Some(held) = &self.held else {
            return;
        };
        let held = std::mem::take(&mut *held.lock().unwrap_or_else(|e| e.into_inner()));
        self.suspended(|| {
            for text in held {
                match text {
                    HeldText::Stdout(text) => crate::stdio::print(&text, false),
                    HeldText::Stderr(text) => crate::stdio::print(&text, true),
                }
            }
        });
    }

    pub fn event_sink(self: &Arc<Self>) -> EventSink {
        let output = Arc::clone(self);
        Arc::new(move |event| output.event(&event))
    }

    pub fn event(&self, event: &InstallEvent) {
        {
            let mut tally = self.tally();
            match event {
                InstallEvent::Installed { .. } => tally.installed += 1,
                InstallEvent::UsingInstalled { .. } | InstallEvent::CacheHit { .. } => {
                    tally.reused += 1
                }
                InstallEvent::BuiltIn { .. } => tally.built_in += 1,
                InstallEvent::Warning(_) => tally.warnings += 1,
                _ => {}
            }
        }
        match &self.view {
            View::Json(lines) => lines.event(event),
            View::Human { progress, pending } => match event {
                InstallEvent::Progress {
                    provider,
                    version,
                    stage,
                } => {
                    if let Some(progress) = progress {
                        progress.update(provider, version, *stage);
                    }
                }
                InstallEvent::Warning(diag) => pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(diag.clone()),
                other => {
                    if let Some(line) = self.ui.event_line(other) {
                        self.print(&line);
                    }
                }
            },
        }
    }

    /// The events of one of several installers that run at once, one per
    /// platform, as `providers lock` runs them: each line names its platform,
    /// and `lines` prints each platform's lines together, in `slot` order.
    pub fn platform_event_sink(
        &self,
        lines: Arc<OrderedOutput>,
        slot: usize,
        platform: Platform,
    ) -> EventSink {
        let ui = self.ui;
        Arc::new(move |event| {
            if let Some(line) = ui.platform_event_line(&platform, &event) {
                lines.line(slot, line);
            }
        })
    }

    /// Text for people that has no `-json` message, from commands that have
    /// no `-json` output.
    pub fn text(&self, render: impl Fn(&Ui) -> String) {
        if let View::Human { .. } = &self.view {
            self.print(&render(&self.ui));
        }
    }

    /// A message of tfinstall's own with a stable `code` for machines;
    /// `render` gives the text (styled when the [`Ui`] has colour, which it
    /// never has for `-json`).
    pub fn message(&self, code: &str, render: impl Fn(&Ui) -> String) {
        match &self.view {
            View::Json(lines) => lines.message(code, &render(&Ui { color: false })),
            View::Human { .. } => self.print(&render(&self.ui)),
        }
    }

    /// Whose rules a directory is installed or read with, when the choice
    /// needs saying ([`EngineChoice::note`]), or `always` (the directories
    /// of one run differ): for people a paragraph, for machines a `message`
    /// with the code `engine` and the `engine` and `chosen_by` fields.
    pub fn engine(&self, choice: &EngineChoice, always: bool) {
        let text = match choice.note() {
            Some(note) => note,
            None if always => format!("Installing as {} does.", choice.engine.name()),
            None => return,
        };
        match &self.view {
            View::Json(lines) => lines.emit(
                "info",
                &text,
                "message",
                json!({
                    "message_code": "engine",
                    "engine": choice.engine.as_str(),
                    "chosen_by": choice.chosen_by.as_str(),
                }),
            ),
            View::Human { .. } => self.print(&format!("\n{text}")),
        }
    }

    /// A paragraph Terraform's `init -json` writes as `init_output` with
    /// this `message_code`. The `-json` line carries `terraform_text` where
    /// given (Terraform's words, for readers that match them, where the text
    /// output speaks as tfinstall), else the text output's words.
    pub fn init_output(
        &self,
        code: &str,
        terraform_text: Option<&str>,
        render: impl Fn(&Ui) -> String,
    ) {
        match &self.view {
            View::Json(lines) => match terraform_text {
                Some(text) => lines.init_output(code, text),
                None => lines.init_output(code, &render(&Ui { color: false })),
            },
            View::Human { .. } => self.print(&render(&self.ui)),
        }
    }

    /// Where the module installation's lines that are shown as they happen
    /// go: here.
    pub fn module_event_sink(self: &Arc<Self>) -> ModuleEventSink {
        let output = Arc::clone(self);
        Arc::new(move |event| output.module_event(&event))
    }

    /// One line of the module installation.
    pub fn module_event(&self, event: &ModuleEvent) {
        match &self.view {
            View::Json(lines) => lines.module_event(event),
            View::Human { .. } => self.print(&event.text()),
        }
    }

    /// Terraform's note on packages signed by a partner or their author,
    /// which its `init -json` writes as a `log` line.
    pub fn third_party_signed(&self, text: &str) {
        match &self.view {
            View::Json(lines) => lines.third_party_signed(text),
            View::Human { .. } => self.print(text),
        }
    }

    /// A command's result: `render` gives the text for people, `fields`
    /// the `-json` message of type `kind` (with `message` as its text).
    pub fn report(
        &self,
        kind: &str,
        message: &str,
        fields: serde_json::Value,
        render: impl Fn(&Ui) -> String,
    ) {
        match &self.view {
            View::Json(lines) => lines.emit("info", message, kind, fields),
            View::Human { .. } => self.print(&render(&self.ui)),
        }
    }

    /// A decision `providers check` made: for machines a `policy` line
    /// each, for people a line per violation.
    pub fn policy_check(&self, allowed: bool, text: &str, fields: serde_json::Value) {
        match &self.view {
            View::Json(lines) => lines.policy(if allowed { "info" } else { "error" }, text, fields),
            View::Human { .. } if !allowed => self.print(text),
            View::Human { .. } => {}
        }
    }

    /// How `providers check` ended: for machines a `policy_check` line;
    /// people are told only of success, since violations end with an
    /// error that counts them.
    pub fn policy_check_result(&self, checked: usize, violations: usize) {
        match &self.view {
            View::Json(lines) => lines.emit(
                if violations == 0 { "info" } else { "error" },
                &format!("{checked} checked, {violations} violations"),
                "policy_check",
                json!({ "success": violations == 0, "checked": checked, "violations": violations }),
            ),
            View::Human { .. } if violations == 0 => self.print(&format!(
                "Checked {checked} lock entries and installed packages against the provider policy: no violations."
            )),
            View::Human { .. } => {}
        }
    }

    /// Prose for people on stderr around diagnostics; machines get the
    /// diagnostics alone.
    pub fn note(&self, text: &str) {
        if let View::Human { .. } = &self.view {
            self.write(HeldText::Stderr(format!("{text}\n")));
        }
    }

    /// Warnings (stdout) before errors (stderr), with any warnings the
    /// installer raised along the way.
    /// Problems with the CLI configuration: Terraform reports its errors
    /// but carries on, since most of the configuration is still usable.
    pub fn config_problems(&self, diags: &Diagnostics) {
        if diags.has_errors() {
            self.note("There are some problems with the CLI configuration:");
            self.diagnostics(diags);
            self.note(
                "\nAs a result of the above problems, Terraform may not behave as intended.\n",
            );
        } else {
            self.diagnostics(diags);
        }
    }

    pub fn diagnostics(&self, diags: &Diagnostics) {
        {
            let mut tally = self.tally();
            for diag in diags.iter() {
                match diag.severity {
                    Severity::Warning => tally.warnings += 1,
                    Severity::Error => tally.errors += 1,
                }
            }
        }
        match &self.view {
            View::Json(lines) => diags.iter().for_each(|d| lines.diagnostic(d)),
            View::Human { pending, .. } => {
                let mut all =
                    std::mem::take(&mut *pending.lock().unwrap_or_else(|e| e.into_inner()));
                all.extend(diags.clone());
                for (severity, text) in self.ui.render_diagnostics(&all) {
                    self.write(match severity {
                        Severity::Warning => HeldText::Stdout(text),
                        Severity::Error => HeldText::Stderr(text),
                    });
                }
            }
        }
    }

    /// After a failed run: packages reported as installed were verified and
    /// staged, but a failed run keeps none of them, which people who read
    /// `- Installed …` lines must be told.
    pub fn nothing_kept(&self) {
        if self.tally().installed > 0 {
            self.note("\nNone of the providers reported as installed above were kept: tfinstall\ninstalls all of them or none, so .terraform and .terraform.lock.hcl are\nexactly as they were before this run. Fix the error above and run init again.");
        }
    }

    /// The last `-json` message: how the run ended and what it changed.
    /// People have already read the banner or the errors.
    pub fn summary(&self, success: bool, lock_file: LockFileChange, empty_directory: bool) {
        let View::Json(lines) = &self.view else {
            return;
        };
        let tally = self.tally();
        let (installed, discarded) = if success {
            (tally.installed, 0)
        } else {
            (0, tally.installed)
        };
        let text = if empty_directory {
            "Nothing to install: the directory has no configuration files".to_owned()
        } else if success {
            format!(
                "Providers installed: {installed} new, {} already installed",
                tally.reused
            )
        } else {
            format!(
                "Provider installation failed with {} error(s); nothing was installed",
                tally.errors
            )
        };
        lines.summary(
            json!({
                "success": success,
                "providers": {
                    "installed": installed,
                    "discarded": discarded,
                    "reused": tally.reused,
                    "built_in": tally.built_in,
                },
                "lock_file": lock_file.as_str(),
                "empty_directory": empty_directory,
                "warnings": tally.warnings,
                "errors": tally.errors,
            }),
            &text,
        );
    }

    /// The end of a run over several working directories: which failed,
    /// each with its first error (their own output said the rest).
    pub fn run_summary(&self, directories: usize, failed: &[(String, Diagnostic)]) {
        let first_line = |diag: &Diagnostic| {
            let detail = diag.detail.lines().next().unwrap_or_default();
            if detail.is_empty() {
                diag.summary.clone()
            } else {
                format!("{}: {detail}", diag.summary)
            }
        };
        match &self.view {
            View::Json(lines) => {
                let text = if failed.is_empty() {
                    format!("All {directories} working directories initialized")
                } else {
                    format!(
                        "tfinstall init failed in {} of {directories} working directories",
                        failed.len()
                    )
                };
                let failures: Vec<serde_json::Value> = failed
                    .iter()
                    .map(|(dir, diag)| {
                        json!({ "directory": dir, "summary": diag.summary, "detail": diag.detail })
                    })
                    .collect();
                let level = if failed.is_empty() { "info" } else { "error" };
                lines.emit(
                    level,
                    &text,
                    "run_summary",
                    json!({
                        "success": failed.is_empty(),
                        "directories": directories,
                        "failed": failures,
                    }),
                );
            }
            View::Human { .. } if failed.is_empty() => self.print(&format!(
                "\n{}",
                self.ui.bold(&format!(
                    "All {directories} working directories were initialized."
                ))
            )),
            View::Human { .. } => {
                let list: String = failed
                    .iter()
                    .map(|(dir, diag)| format!("\n  - {dir}: {}", first_line(diag)))
                    .collect();
                self.diagnostics(&Diagnostic::error(
                    format!(
                        "tfinstall init failed in {} of {directories} working directories",
                        failed.len()
                    ),
                    format!(
                        "These directories kept their .terraform and lock file as they were:{list}\n\nThe other directories were initialized. Fix the errors shown under each directory's heading above and run init again; directories that are already initialized are quick no-ops."
                    ),
                )
                .into());
            }
        }
    }

    fn print(&self, text: &str) {
        self.write(HeldText::Stdout(format!("{text}\n")));
    }

    fn write(&self, text: HeldText) {
        if let Some(held) = &self.held {
            held.lock().unwrap_or_else(|e| e.into_inner()).push(text);
            return;
        }
        self.suspended(|| match text {
            HeldText::Stdout(text) => crate::stdio::print(&text, false),
            HeldText::Stderr(text) => crate::stdio::print(&text, true),
        });
    }

    /// Runs `print` with the progress display (if any) out of the way.
    fn suspended(&self, print: impl FnOnce()) {
        match &self.view {
            View::Human {
                progress: Some(progress),
                ..
            } => progress.suspend(print),
            _ => print(),
        }
    }

    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(|e| e.into_inner())
    }
}
