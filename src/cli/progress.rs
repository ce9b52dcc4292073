//! Progress of long commands (`import`, a real `reprocess`) for a person
//! watching: an indicatif bar on stderr, only when stderr is a terminal and
//! the output is for people (never with `--json`). Pipes, files and scripts
//! get exactly the report, without a byte of progress.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar, or nothing at all.
pub struct Progress(Option<ProgressBar>);

impl Progress {
    /// Starts as a spinner saying `what` (the total is not known yet), or
    /// draws nothing when `json` is set or stderr is not a terminal.
    pub fn start(json: bool, what: &str) -> Progress {
        if json || !std::io::stderr().is_terminal() {
            return Progress(None);
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}") {
            bar.set_style(style);
        }
        bar.set_message(what.to_string());
        bar.enable_steady_tick(Duration::from_millis(120));
        Progress(Some(bar))
    }

    /// `done` of `total`: the spinner becomes a bar once the total is known.
    pub fn set(&self, done: usize, total: usize) {
        let Some(bar) = &self.0 else { return };
        let total = total as u64;
        if bar.length() != Some(total) {
            bar.set_length(total);
            if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:32}] {pos}/{len} ({eta})") {
                bar.set_style(style.progress_chars("=> "));
            }
        }
        bar.set_position(done as u64);
    }
}

impl Drop for Progress {
    /// The report follows on a clean line: the bar leaves no trace.
    fn drop(&mut self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}
