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

use serde_json::{Map, Value};

/// Receives progress events (the CLI's live status line).
pub type Observer = Box<dyn FnMut(&Value) + Send>;

/// Where trace events go: a JSON-lines writer and/or an observer callback.
pub struct Tracer {
    sink: Option<Box<dyn Write + Send>>,
    observer: Option<Observer>,
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
