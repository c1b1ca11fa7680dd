//! The journal seam: everything the driver does to a run, as typed events, to whoever keeps
//! a record of it. The JSON-lines trace ([`crate::Tracer`]) and the `--record` cassette
//! ([`RecordJournal`]) are two journals; a durable run store is a third.
//!
//! Order of events for one call: `CallIssued` → `CallAnswered` (as it completes, in any
//! order) → `CallCommitted` (when the VM consumes its result, in program order) or
//! `CallDiscarded` (issued ahead, the run ended before reaching it). `Suspended` comes
//! each time the driver is about to wait for calls, with the VM's whole state: a commit
//! point from which the run can continue ([`crate::resume_plan`]).
//!
//! A journal that fails to write fails the run (`R0012`): a cassette or a store that
//! silently misses calls would be worse than no record. The trace never fails: it keeps
//! its first write error for the caller to report.

use std::collections::HashMap;
use std::time::Duration;

use plan_vm::{CallId, Event, ToolRequest, VmState};
use serde_json::Value;

use crate::cassette::{CassetteEntry, Recorder};
use crate::error::ToolError;
use crate::report::RunReport;

/// One thing that happened in a run.
#[derive(Debug)]
pub enum TraceEvent<'a> {
    /// The VM's own events (`step`, `var_set`, `jump`), when [`Journal::wants_vm_events`].
    Vm(&'a Event),
    /// A call was sent. `ahead`: issued ahead of the head, made only if the run gets there.
    /// `reused`: not sent, answered from a saved result (a resumed run).
    CallIssued {
        request: &'a ToolRequest,
        ahead: bool,
        reused: bool,
    },
    /// A call completed (successfully or not); the VM has not consumed the result yet.
    CallAnswered {
        request: &'a ToolRequest,
        result: Result<&'a Value, &'a ToolError>,
        took: Duration,
        /// The tokens it cost (an LLM's), when its server said.
        usage: Option<plan_llm::Usage>,
        /// Its attempts that failed and were tried again, oldest first.
        retries: &'a [plan_llm::Retry],
        /// A cassette answered it (`--replay`, `--tools-from`): nothing was sent.
        replayed: bool,
    },
    /// The VM consumed the result of call `request`: the sequential run made this call.
    /// Comes in program order.
    CallCommitted { request: &'a ToolRequest },
    /// A call issued ahead that the run ended before reaching: not counted, not recorded.
    CallDiscarded {
        request: &'a ToolRequest,
        answered: bool,
    },
    /// The driver is about to wait for calls; `state` is where the run stands.
    Suspended { state: &'a VmState },
    /// A warning about the run (a compiler warning, when the caller passes them on).
    Warning { message: &'a str },
    /// The run ended (successfully or not).
    Finished { report: &'a RunReport },
    /// Before a run: a plan arriving from a streaming planner. `what` is
    /// `instruction_arrived` (its `index` in the array and `seq_no`) or
    /// `call_started_early` (its `tool` and `seq_no`).
    Planning {
        what: &'static str,
        round: u64,
        index: Option<u64>,
        seq_no: Option<i64>,
        tool: Option<&'a str>,
    },
}

/// A wait for a journal's writes to be on record (see [`Journal::durable`]).
pub type Durable = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>;

/// Receives a run's events. Returning an error fails the run (`R0012`).
pub trait Journal: Send {
    /// Whether the VM should record its per-instruction events (they cost time: off
    /// unless someone reads them), previews included. A journal that only asks for values
    /// ([`Journal::wants_values`]) gets `var_set` events whose preview is empty when they
    /// carry the value.
    fn wants_vm_events(&self) -> bool {
        false
    }

    /// The largest value (in bytes) that `var_set` events should carry; 0: none. Implies
    /// the VM's events when non-zero.
    fn wants_values(&self) -> u64 {
        0
    }

    /// Whether [`TraceEvent::Suspended`] is wanted (building it costs nothing, but a
    /// journal that saves the state pays for serializing it).
    fn wants_states(&self) -> bool {
        false
    }

    fn record(&mut self, event: &TraceEvent<'_>) -> Result<(), String>;

    /// For a journal that writes in the background: a wait until what it was given so
    /// far is on record. The driver waits for it after each [`TraceEvent::Suspended`],
    /// before it sends the calls just issued; whoever ran the driver waits for it after
    /// the end. `None`: everything is already written.
    fn durable(&mut self) -> Option<Durable> {
        None
    }
}

/// Records nothing.
impl Journal for () {
    fn record(&mut self, _: &TraceEvent<'_>) -> Result<(), String> {
        Ok(())
    }
}

impl<J: Journal + ?Sized> Journal for &mut J {
    fn wants_vm_events(&self) -> bool {
        (**self).wants_vm_events()
    }
    fn wants_values(&self) -> u64 {
        (**self).wants_values()
    }
    fn wants_states(&self) -> bool {
        (**self).wants_states()
    }
    fn record(&mut self, event: &TraceEvent<'_>) -> Result<(), String> {
        (**self).record(event)
    }
    fn durable(&mut self) -> Option<Durable> {
        (**self).durable()
    }
}

impl<J: Journal> Journal for Option<J> {
    fn wants_vm_events(&self) -> bool {
        self.as_ref().is_some_and(J::wants_vm_events)
    }
    fn wants_values(&self) -> u64 {
        self.as_ref().map_or(0, J::wants_values)
    }
    fn wants_states(&self) -> bool {
        self.as_ref().is_some_and(J::wants_states)
    }
    fn record(&mut self, event: &TraceEvent<'_>) -> Result<(), String> {
        match self {
            Some(j) => j.record(event),
            None => Ok(()),
        }
    }
    fn durable(&mut self) -> Option<Durable> {
        self.as_mut().and_then(J::durable)
    }
}

/// Both journals get every event; the first error is returned, after both have seen it.
impl<A: Journal, B: Journal> Journal for (A, B) {
    fn wants_vm_events(&self) -> bool {
        self.0.wants_vm_events() || self.1.wants_vm_events()
    }
    fn wants_values(&self) -> u64 {
        self.0.wants_values().max(self.1.wants_values())
    }
    fn wants_states(&self) -> bool {
        self.0.wants_states() || self.1.wants_states()
    }
    fn record(&mut self, event: &TraceEvent<'_>) -> Result<(), String> {
        let a = self.0.record(event);
        let b = self.1.record(event);
        a.and(b)
    }
    fn durable(&mut self) -> Option<Durable> {
        match (self.0.durable(), self.1.durable()) {
            (Some(a), Some(b)) => Some(Box::pin(async move {
                let (a, b) = futures::join!(a, b);
                a.and(b)
            })),
            (a, b) => a.or(b),
        }
    }
}

/// The `--record` cassette as a journal: a successful call's output is kept from its
/// answer until its commit, then appended with its latency and step, so the cassette lists
/// exactly the calls the sequential run makes, in program order.
pub struct RecordJournal<'r> {
    recorder: &'r Recorder,
    /// Answered, not committed yet: output, latency and tokens.
    answered: HashMap<CallId, (Value, Duration, Option<plan_llm::Usage>)>,
}

impl<'r> RecordJournal<'r> {
    pub fn new(recorder: &'r Recorder) -> Self {
        RecordJournal {
            recorder,
            answered: HashMap::new(),
        }
    }
}

impl Journal for RecordJournal<'_> {
    fn record(&mut self, event: &TraceEvent<'_>) -> Result<(), String> {
        match event {
            TraceEvent::CallAnswered {
                request,
                result: Ok(output),
                took,
                usage,
                ..
            } => {
                // NB: the copy is for the cassette only; outputs can be megabytes, which
                // is why nothing is copied when no cassette is recorded.
                self.answered
                    .insert(request.id, ((*output).clone(), *took, *usage));
            }
            TraceEvent::CallCommitted { request } => {
                let Some((output, took, usage)) = self.answered.remove(&request.id) else {
                    // A failed call: nothing to replay.
                    return Ok(());
                };
                let entry = CassetteEntry {
                    tool: request.tool.to_string(),
                    args: request.args.to_map(),
                    output,
                    latency_ms: Some(crate::report::millis(took)),
                    step: Some(request.instance),
                    usage,
                };
                self.recorder.record(&entry).map_err(|e| e.message)?;
            }
            TraceEvent::CallDiscarded { request, .. } => {
                self.answered.remove(&request.id);
            }
            _ => {}
        }
        Ok(())
    }
}
