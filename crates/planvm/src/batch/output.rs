//! What `planvm batch` shows as it goes: one JSON line per run as it ends, and the
//! progress bar.

use indicatif::ProgressBar;
use plan_runs::batch::{Event, Finished, Lines};

/// The batch's lines and its progress bar.
pub(super) struct Sink {
    lines: Lines,
    /// A line's text, kept from one line to the next.
    text: Vec<u8>,
    bar: ProgressBar,
    /// Runs that failed so far (for the bar).
    failed: u64,
}

impl Sink {
    pub(super) fn new(lines: Lines, bar: ProgressBar) -> Sink {
        Sink {
            lines,
            text: Vec::new(),
            bar,
            failed: 0,
        }
    }

    /// Clears the bar and flushes the lines: the first failure to write them, if any.
    pub(super) fn finish(self) -> Option<String> {
        self.bar.finish_and_clear();
        self.lines.finish()
    }

    pub(super) fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Finished(Finished {
                plan,
                line,
                run_id,
                report,
            }) => {
                plan_render::runs::batch_line(&mut self.text, (plan, line, run_id), report);
                self.lines.write(&self.text);
                self.bar.inc(1);
                if !report.is_ok() {
                    self.failed += 1;
                    self.bar.set_message(format!("· {} failed", self.failed));
                }
            }
            Event::Invalid(invalid) => {
                let rendered = plan_render::runs::found(&invalid.found, invalid.source.as_deref());
                self.bar.suspend(|| eprint!("{rendered}"));
            }
            Event::Warning(w) => self.bar.suspend(|| eprintln!("warning: {w}")),
        }
    }
}
