//! The live status line on stderr (only when stderr is a terminal): steps executed, tool
//! calls made and running, the last tool started. Fed by trace events.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use plan_host::Observer;
use serde_json::Value;

pub(crate) struct StatusLine {
    bar: ProgressBar,
}

#[derive(Default)]
struct Counts {
    steps: u64,
    calls: u64,
    running: u64,
    last_tool: String,
}

impl StatusLine {
    pub(crate) fn new() -> Self {
        let bar = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} {elapsed} {msg}") {
            bar.set_style(style);
        }
        bar.enable_steady_tick(Duration::from_millis(120));
        bar.set_message("starting");
        StatusLine { bar }
    }

    pub(crate) fn observer(&self) -> Observer {
        let bar = self.bar.clone();
        let mut c = Counts::default();
        Box::new(move |ev: &Value| {
            match ev.get("event").and_then(Value::as_str) {
                Some("step") => c.steps += 1,
                Some("tool_call_start") => {
                    c.calls += 1;
                    c.running += 1;
                    c.last_tool = ev
                        .get("tool")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned();
                }
                Some("tool_call_end") => c.running = c.running.saturating_sub(1),
                _ => return,
            }
            bar.set_message(format!(
                "step {} · {} tool calls ({} running) · {}",
                c.steps, c.calls, c.running, c.last_tool
            ));
        })
    }

    pub(crate) fn finish(self) {
        self.bar.finish_and_clear();
    }
}

/// A progress bar of `n` things (`unit`: `runs`, `cases`) on stderr, for people watching
/// a terminal (hidden when stderr is not one).
pub(crate) fn progress_bar(n: usize, unit: &str) -> ProgressBar {
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(n as u64);
    if let Ok(style) = ProgressStyle::with_template(&format!(
        "{{elapsed_precise}} [{{bar:30}}] {{pos}}/{{len}} {unit} · {{per_sec}} · eta {{eta}} {{msg}}"
    )) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}
