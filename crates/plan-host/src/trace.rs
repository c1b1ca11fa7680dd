//! Trace events: one JSON object per line, each with `event`, `ts_ms` (Unix time) and
//! `t_ms` (since the run started). Events: `step`, `var_set`, `jump` (from the VM),
//! `tool_call_start` (with `ahead`: issued ahead of the head), `tool_call_end`,
//! `tool_call_discarded` (a call issued ahead that the run ended before reaching:
//! speculative, not counted, not recorded), `warning`, `error`, `done` (from the host).
//!
//! Only the plan's own data is traced (args previews, variable previews), never backend
//! configuration, so secrets have no path into a trace.

use std::io::Write;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use crate::cassette::preview;
use crate::journal::{Journal, TraceEvent};
use crate::report::millis;

/// How much of a call's args a `tool_call_start` trace event shows.
const ARGS_PREVIEW_CHARS: usize = 200;

/// Receives progress events (the CLI's live status line).
pub type Observer = Box<dyn FnMut(&Value) + Send>;

/// Where trace events go: a JSON-lines writer and/or an observer callback.
pub struct Tracer {
    sink: Option<Box<dyn Write + Send>>,
    observer: Option<Observer>,
    /// Hears every event too (telemetry); what it says is not the run's business.
    also: Option<Box<dyn Journal>>,
    start: Instant,
    write_error: Option<String>,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer")
            .field("sink", &self.sink.is_some())
            .field("observer", &self.observer.is_some())
            .finish()
    }
}

impl Default for Tracer {
    fn default() -> Self {
        Tracer::none()
    }
}

impl Tracer {
    /// Discards everything.
    pub fn none() -> Self {
        Tracer {
            sink: None,
            observer: None,
            also: None,
            start: Instant::now(),
            write_error: None,
        }
    }

    /// Writes JSON lines to `w` (flushed per line, so `tail -f` works).
    pub fn to_writer(w: Box<dyn Write + Send>) -> Self {
        Tracer {
            sink: Some(w),
            ..Tracer::none()
        }
    }

    pub fn with_observer(mut self, f: Observer) -> Self {
        self.observer = Some(f);
        self
    }

    /// Passes every event to `journal` as well; its errors are ignored (a journal of
    /// spans for telemetry must never fail a run).
    pub fn also(&mut self, journal: Box<dyn Journal>) {
        self.also = Some(journal);
    }

    /// Whether anyone listens (the VM's own event recording is switched on only then).
    pub fn is_active(&self) -> bool {
        self.sink.is_some() || self.observer.is_some()
    }

    /// The first write failure, if writing the trace failed (the run goes on regardless).
    pub fn write_error(&self) -> Option<&str> {
        self.write_error.as_deref()
    }

    /// Restarts the `t_ms` clock.
    pub fn restart_clock(&mut self) {
        self.start = Instant::now();
    }

    /// Emits `{"event": name, ...fields}`.
    pub fn event(&mut self, name: &str, fields: Map<String, Value>) {
        if !self.is_active() {
            return;
        }
        let mut obj = Map::with_capacity(fields.len() + 3);
        obj.insert("event".into(), Value::from(name));
        self.stamp(&mut obj);
        obj.extend(fields);
        self.emit(Value::Object(obj));
    }

    /// Emits an already tagged event (a serialized VM `Event`), adding timestamps.
    pub fn tagged(&mut self, ev: Value) {
        if !self.is_active() {
            return;
        }
        let Value::Object(fields) = ev else { return };
        let mut obj = Map::with_capacity(fields.len() + 2);
        if let Some(tag) = fields.get("event") {
            obj.insert("event".into(), tag.clone());
        }
        self.stamp(&mut obj);
        obj.extend(fields);
        self.emit(Value::Object(obj));
    }

    pub fn warning(&mut self, message: &str) {
        let mut m = Map::new();
        m.insert("message".into(), Value::from(message));
        self.event("warning", m);
    }

    fn stamp(&self, obj: &mut Map<String, Value>) {
        let ts = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        obj.insert(
            "ts_ms".into(),
            Value::from(u64::try_from(ts).unwrap_or(u64::MAX)),
        );
        let t = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        obj.insert("t_ms".into(), Value::from(t));
    }

    fn emit(&mut self, v: Value) {
        if let Some(f) = &mut self.observer {
            f(&v);
        }
        if let Some(w) = &mut self.sink {
            let mut line = v.to_string();
            line.push('\n');
            if let Err(e) = w.write_all(line.as_bytes()).and_then(|()| w.flush()) {
                // Keep running: a full disk should not fail the plan. Report once.
                self.write_error.get_or_insert_with(|| e.to_string());
                self.sink = None;
            }
        }
    }
}

/// The trace as a journal: each event becomes one JSON line (commit points and commits
/// are not traced). Never fails: a write error is kept in [`Tracer::write_error`].
impl Tracer {
    /// A run's end: its error as an event of its own, if it failed, and its figures and
    /// answer into `f`, the fields of its `done` event.
    fn finished(&mut self, report: &crate::RunReport, f: &mut Map<String, Value>) {
        if let Some(e) = &report.error {
            let mut f = Map::new();
            f.insert("code".into(), json!(e.code));
            f.insert("message".into(), json!(e.message));
            f.insert("seq_no".into(), json!(e.seq_no));
            f.insert("line".into(), json!(e.line));
            self.event("error", f);
        }
        f.insert("status".into(), json!(report.status));
        f.insert("steps".into(), json!(report.steps));
        f.insert("tool_calls".into(), json!(report.tool_calls));
        f.insert("elapsed_ms".into(), json!(report.elapsed_ms));
        f.insert(
            "final_answer".into(),
            json!(preview(&plan_value::interpolated(&report.final_answer))),
        );
    }
}

impl Journal for Tracer {
    fn wants_vm_events(&self) -> bool {
        self.is_active()
    }

    fn record(&mut self, event: &TraceEvent<'_>) -> Result<(), String> {
        if let Some(also) = &mut self.also {
            let _ = also.record(event);
        }
        if !self.is_active() {
            return Ok(());
        }
        let mut f = Map::new();
        let name = match event {
            TraceEvent::Vm(ev) => {
                self.tagged(serde_json::to_value(ev).unwrap_or(Value::Null));
                return Ok(());
            }
            TraceEvent::CallIssued {
                request,
                ahead,
                reused,
            } => {
                f.insert("call_id".into(), json!(request.id.0));
                f.insert("tool".into(), json!(request.tool));
                f.insert("seq_no".into(), json!(request.seq_no));
                let args = serde_json::to_string(&request.args).unwrap_or_default();
                f.insert(
                    "args".into(),
                    json!(plan_llm::preview(&args, ARGS_PREVIEW_CHARS)),
                );
                f.insert("ahead".into(), json!(ahead));
                if *reused {
                    f.insert("reused".into(), json!(true));
                }
                "tool_call_start"
            }
            TraceEvent::CallAnswered {
                request,
                result,
                took,
                usage,
                retries,
                ..
            } => {
                f.insert("call_id".into(), json!(request.id.0));
                f.insert("tool".into(), json!(request.tool));
                f.insert("duration_ms".into(), json!(millis(*took)));
                f.insert("ok".into(), json!(result.is_ok()));
                if let Some(u) = usage {
                    f.insert("usage".into(), json!(u));
                }
                if !retries.is_empty() {
                    f.insert("attempts".into(), json!(retries.len() + 1));
                }
                if let Err(e) = result {
                    f.insert("error".into(), json!(e.message));
                }
                "tool_call_end"
            }
            TraceEvent::CallDiscarded { request, answered } => {
                f.insert("call_id".into(), json!(request.id.0));
                f.insert("tool".into(), json!(request.tool));
                f.insert("seq_no".into(), json!(request.seq_no));
                f.insert("speculative".into(), json!(true));
                f.insert("answered".into(), json!(answered));
                "tool_call_discarded"
            }
            TraceEvent::Warning { message } => {
                self.warning(message);
                return Ok(());
            }
            TraceEvent::Finished { report } => {
                self.finished(report, &mut f);
                "done"
            }
            TraceEvent::Planning {
                what,
                round,
                index,
                seq_no,
                tool,
            } => {
                f.insert("round".into(), json!(round));
                if let Some(i) = index {
                    f.insert("index".into(), json!(i));
                }
                f.insert("seq_no".into(), json!(seq_no));
                if let Some(t) = tool {
                    f.insert("tool".into(), json!(t));
                }
                what
            }
            TraceEvent::CallCommitted { .. } | TraceEvent::Suspended { .. } => return Ok(()),
        };
        self.event(name, f);
        Ok(())
    }
}
