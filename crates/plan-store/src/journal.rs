//! The store as a journal of the driver: calls are written as they are sent and as they
//! are answered; steps, commits and the VM state once per commit point, in one
//! transaction.

use std::collections::HashSet;

use plan_host::{Journal, TraceEvent};
use plan_vm::{CallId, Event, ToolRequest};
use serde_json::{Map, Value};

use crate::{CallRow, CallState, CommitPoint, RunEnd, RunStore, StepRow};

/// The largest value a step row keeps (bytes as the VM counts them). Larger values are
/// listed with their size only: copying them at every step of a loop that rewrites them
/// would cost time quadratic in the loop. The checkpoint always has every value.
pub const MAX_KEPT_VALUE_BYTES: u64 = 64 * 1024;

/// Journals one run into a store.
pub struct StoreJournal<'s> {
    store: &'s mut dyn RunStore,
    run: String,
    /// Instructions committed so far (a resumed run starts from its checkpoint's count).
    steps_done: u64,
    /// Steps since the last commit point.
    steps: Vec<StepRow>,
    committed: Vec<u64>,
    discarded: Vec<u64>,
    /// Calls answered from saved results: their rows are not touched.
    reused: HashSet<CallId>,
}

impl<'s> StoreJournal<'s> {
    /// `steps_done`: 0 for a new run, the checkpoint's count for a resumed one.
    pub fn new(store: &'s mut dyn RunStore, run: &str, steps_done: u64) -> Self {
        StoreJournal {
            store,
            run: run.to_owned(),
            steps_done,
            steps: Vec::new(),
            committed: Vec::new(),
            discarded: Vec::new(),
            reused: HashSet::new(),
        }
    }

    fn flush(&mut self, state: Option<(u64, &str)>) -> Result<(), String> {
        let point = CommitPoint {
            steps: &self.steps,
            committed: &self.committed,
            discarded: &self.discarded,
            state,
            total_steps: self.steps_done,
        };
        self.store
            .commit(&self.run, &point)
            .map_err(|e| e.message)?;
        self.steps.clear();
        self.committed.clear();
        self.discarded.clear();
        Ok(())
    }
}

fn row(req: &ToolRequest, state: CallState) -> CallRow {
    CallRow {
        step: req.instance,
        seq_no: req.seq_no,
        tool: req.tool.to_string(),
        args: (*req.args).clone(),
        state,
        output: None,
        error: None,
        latency_ms: None,
    }
}

impl Journal for StoreJournal<'_> {
    fn wants_values(&self) -> u64 {
        MAX_KEPT_VALUE_BYTES
    }

    fn wants_states(&self) -> bool {
        true
    }

    fn record(&mut self, event: &TraceEvent<'_>) -> Result<(), String> {
        match event {
            TraceEvent::Vm(Event::Step { pc, seq_no, op }) => {
                self.steps_done += 1;
                self.steps.push(StepRow {
                    step: self.steps_done,
                    seq_no: *seq_no,
                    pc: *pc,
                    op: op.clone(),
                    writes: Map::new(),
                    omitted: Map::new(),
                });
            }
            TraceEvent::Vm(Event::VarSet {
                name, value, bytes, ..
            }) => {
                if let Some(step) = self.steps.last_mut() {
                    match value {
                        Some(v) => step.writes.insert(name.clone(), v.clone()),
                        None => step.omitted.insert(name.clone(), Value::from(*bytes)),
                    };
                }
            }
            TraceEvent::Vm(Event::Jump { .. }) => {}
            TraceEvent::CallIssued {
                request,
                reused: true,
                ..
            } => {
                self.reused.insert(request.id);
            }
            TraceEvent::CallIssued { request, .. } => {
                self.store
                    .call_sent(&self.run, &row(request, CallState::Inflight))
                    .map_err(|e| e.message)?;
            }
            TraceEvent::CallAnswered {
                request,
                result,
                took,
            } => {
                if self.reused.contains(&request.id) {
                    return Ok(());
                }
                let mut call = row(request, CallState::Answered);
                match result {
                    Ok(v) => call.output = Some((*v).clone()),
                    Err(e) => call.error = Some(e.message.clone()),
                }
                call.latency_ms = Some(u64::try_from(took.as_millis()).unwrap_or(u64::MAX));
                self.store
                    .call_answered(&self.run, &call)
                    .map_err(|e| e.message)?;
            }
            TraceEvent::CallCommitted { request } => self.committed.push(request.instance),
            TraceEvent::CallDiscarded { request, .. } => self.discarded.push(request.instance),
            TraceEvent::Suspended { state } => {
                let json = serde_json::to_string(state).map_err(|e| e.to_string())?;
                self.flush(Some((state.steps(), &json)))?;
            }
            TraceEvent::Warning { .. } => {}
            TraceEvent::Finished { report } => {
                self.flush(None)?;
                let error = report
                    .error
                    .as_ref()
                    .map(|e| serde_json::to_value(e).unwrap_or(Value::Null));
                self.store
                    .finish(
                        &self.run,
                        &RunEnd {
                            ok: report.is_ok(),
                            final_answer: &report.final_answer,
                            error,
                        },
                    )
                    .map_err(|e| e.message)?;
            }
        }
        Ok(())
    }
}
