//! The terminal progress display: one bar per package being downloaded or
//! unpacked, drawn on stderr below the line-oriented output. Lines are
//! printed through [`Progress::suspend`], which lifts the bars off the
//! screen first, so the two never garble each other however many
//! providers download at once.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::addr::ProviderAddr;
use crate::install::events::ProgressStage;
use crate::version::Version;

pub struct Progress {
    multi: MultiProgress,
    bars: Mutex<Bars>,
    color: bool,
}

/// The bars on screen by provider and version, with their labels, padded
/// to the widest label so the bars line up.
#[derive(Default)]
struct Bars {
    shown: HashMap<String, (String, ProgressBar)>,
    label_width: usize,
}

impl Progress {
    /// A display on stderr, or `None` when stderr is not a terminal that
    /// can redraw lines (piped, redirected, or `TERM=dumb`).
    pub fn for_stderr(color: bool) -> Option<Progress> {
        let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
        if dumb || !std::io::stderr().is_terminal() {
            return None;
        }
        Some(Progress {
            multi: MultiProgress::with_draw_target(ProgressDrawTarget::stderr()),
            bars: Mutex::new(Bars::default()),
            color,
        })
    }

    pub fn update(&self, provider: &ProviderAddr, version: &Version, stage: ProgressStage) {
        let key = format!("{provider} {version}");
        let mut bars = self.bars.lock().unwrap_or_else(|e| e.into_inner());
        if stage == ProgressStage::Done {
            if let Some((_, bar)) = bars.shown.remove(&key) {
                bar.finish_and_clear();
                self.multi.remove(&bar);
            }
            return;
        }
        if !bars.shown.contains_key(&key) {
            let label = format!("{} v{version}", provider.for_display());
            let bar = self.multi.add(ProgressBar::no_length());
            bar.set_style(self.style(Look::Waiting));
            bars.label_width = bars.label_width.max(label.chars().count());
            bars.shown.insert(key.clone(), (label, bar));
            let width = bars.label_width;
            for (label, bar) in bars.shown.values() {
                bar.set_prefix(format!("  {label:<width$}"));
            }
        }
        let Some((_, bar)) = bars.shown.get(&key) else {
            return;
        };
        match stage {
            ProgressStage::Downloading(progress) => {
                if let Some(total) = progress.total
                    && bar.length() != Some(total)
                {
                    bar.set_length(total);
                    bar.set_style(self.style(Look::Download));
                } else if progress.total.is_none() && bar.length().is_some() {
                    bar.unset_length();
                    bar.set_style(self.style(Look::Waiting));
                }
                bar.set_position(progress.received);
            }
            ProgressStage::Unpacking => {
                bar.set_style(self.style(Look::Unpacking));
                bar.enable_steady_tick(Duration::from_millis(100));
            }
            ProgressStage::Done => {}
        }
    }

    /// Runs `print` with the bars cleared from the screen, then redraws them.
    pub fn suspend<R>(&self, print: impl FnOnce() -> R) -> R {
        self.multi.suspend(print)
    }

    fn style(&self, look: Look) -> ProgressStyle {
        let chars = if self.color { "━╸─" } else { "=> " };
        ProgressStyle::with_template(template(look, self.color))
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars(chars)
    }
}

fn template(look: Look, color: bool) -> &'static str {
    match (look, color) {
        (Look::Download, true) => {
            "{prefix:.bold} {wide_bar:.cyan/blue} {binary_bytes:>10} / {binary_total_bytes:<10} {binary_bytes_per_sec:>11}  ETA {eta:<3}"
        }
        (Look::Download, false) => {
            "{prefix} [{wide_bar}] {binary_bytes:>10} / {binary_total_bytes:<10} {binary_bytes_per_sec:>11}  ETA {eta:<3}"
        }
        (Look::Waiting, true) => {
            "{prefix:.bold} {spinner:.cyan} downloading {binary_bytes} {binary_bytes_per_sec}"
        }
        (Look::Waiting, false) => {
            "{prefix} {spinner} downloading {binary_bytes} {binary_bytes_per_sec}"
        }
        (Look::Unpacking, true) => "{prefix:.bold} {spinner:.cyan} unpacking",
        (Look::Unpacking, false) => "{prefix} {spinner} unpacking",
    }
}

#[derive(Clone, Copy)]
enum Look {
    /// Size not known (yet): a spinner with the bytes so far.
    Waiting,
    Download,
    Unpacking,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_parses() {
        for color in [true, false] {
            for look in [Look::Waiting, Look::Download, Look::Unpacking] {
                assert!(ProgressStyle::with_template(template(look, color)).is_ok());
            }
        }
    }
}
