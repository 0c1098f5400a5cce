//! Where a command's output goes: Terraform's text for people (with a
//! progress display on a terminal), or the `-json` stream for machines.
//! Commands say what happened; this module decides how it looks, so the
//! two views can never disagree about the facts.

pub mod json;
pub mod progress;

use std::sync::{Arc, Mutex};

use serde_json::json;

use crate::diag::{Diagnostics, Severity};
use crate::install::installer::{EventSink, InstallEvent};
use crate::ui::Ui;

use json::JsonLines;
use progress::Progress;

pub struct Output {
    ui: Ui,
    view: View,
    tally: Mutex<Tally>,
}

enum View {
    Human {
        progress: Option<Progress>,
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
                progress: Progress::for_stderr(ui.color),
                pending: Mutex::new(Diagnostics::new()),
            }
        };
        Arc::new(Output {
            ui,
            view,
            tally: Mutex::new(Tally::default()),
        })
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

    /// A message with a stable `code` for machines; `render` gives the text
    /// (styled when the [`Ui`] has colour, which it never has for `-json`).
    pub fn message(&self, code: &str, render: impl Fn(&Ui) -> String) {
        match &self.view {
            View::Json(lines) => lines.message(code, &render(&Ui { color: false })),
            View::Human { .. } => self.print(&render(&self.ui)),
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

    /// Prose for people on stderr around diagnostics; machines get the
    /// diagnostics alone.
    pub fn note(&self, text: &str) {
        if let View::Human { progress, .. } = &self.view {
            match progress {
                Some(progress) => progress.suspend(|| eprintln!("{text}")),
                None => eprintln!("{text}"),
            }
        }
    }

    /// Warnings (stdout) before errors (stderr), with any warnings the
    /// installer raised along the way.
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
            View::Human { progress, pending } => {
                let mut all =
                    std::mem::take(&mut *pending.lock().unwrap_or_else(|e| e.into_inner()));
                all.extend(diags.clone());
                match progress {
                    Some(progress) => progress.suspend(|| self.ui.print_diagnostics(&all)),
                    None => self.ui.print_diagnostics(&all),
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
    pub fn summary(&self, success: bool, lock_file: LockFileChange) {
        let View::Json(lines) = &self.view else {
            return;
        };
        let tally = self.tally();
        let (installed, discarded) = if success {
            (tally.installed, 0)
        } else {
            (0, tally.installed)
        };
        let text = if success {
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
                "warnings": tally.warnings,
                "errors": tally.errors,
            }),
            &text,
        );
    }

    fn print(&self, text: &str) {
        match &self.view {
            View::Human {
                progress: Some(progress),
                ..
            } => progress.suspend(|| println!("{text}")),
            _ => println!("{text}"),
        }
    }

    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(|e| e.into_inner())
    }
}
