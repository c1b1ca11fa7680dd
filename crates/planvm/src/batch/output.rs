//! What `planvm batch` shows as it goes: one JSON line per run as it ends, and the
//! progress bar.

use std::io::Write;
use std::path::Path;

use indicatif::ProgressBar;
use plan_host::RunReport;
use plan_runs::batch::{Event, Finished};

/// Where the JSON lines go; remembers the first write failure.
pub(super) struct Sink {
    out: Box<dyn Write + Send>,
    /// The --output file's name (empty for stdout).
    name: String,
    error: Option<String>,
    /// A line's text, kept from one line to the next.
    text: Vec<u8>,
    bar: ProgressBar,
    /// Runs that failed so far (for the bar).
    failed: u64,
}

impl Sink {
    pub(super) fn new(out: Box<dyn Write + Send>, name: String, bar: ProgressBar) -> Sink {
        Sink {
            out,
            name,
            error: None,
            text: Vec::new(),
            bar,
            failed: 0,
        }
    }

    pub(super) fn clear_bar(&self) {
        self.bar.finish_and_clear();
    }

    /// Flushes the output: the first failure to write it, if any.
    pub(super) fn finish(mut self) -> Option<String> {
        if let Err(e) = self.out.flush() {
            self.failed(&e);
        }
        self.error
    }

    pub(super) fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Finished(Finished {
                plan,
                line,
                run_id,
                report,
            }) => {
                self.line(plan, line, run_id, report);
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

    fn line(&mut self, plan: &Path, line: Option<usize>, run_id: Option<&str>, report: &RunReport) {
        if self.error.is_some() {
            return;
        }
        plan_render::runs::batch_line(&mut self.text, (plan, line, run_id), report);
        // NB: flushed per line so a consumer (`tail -f`, a pipe) sees each run as it ends.
        if let Err(e) = self
            .out
            .write_all(&self.text)
            .and_then(|()| self.out.flush())
        {
            self.failed(&e);
        }
    }

    fn failed(&mut self, e: &std::io::Error) {
        // A closed stdout (`| head`) is the reader's choice, not a failure of the batch.
        if self.name.is_empty() && e.kind() == std::io::ErrorKind::BrokenPipe {
            return;
        }
        let to = if self.name.is_empty() {
            "stdout".to_owned()
        } else {
            self.name.clone()
        };
        self.error
            .get_or_insert(format!("cannot write to {to}: {e}"));
    }
}
