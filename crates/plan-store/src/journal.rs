//! The store as a journal of the driver: everything since the last commit point (calls
//! about to be sent, answers, steps, commits, the VM state) is written in one
//! transaction when the driver is about to wait, and when the run ends.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use plan_host::{Durable, Journal, ToolErrorKind, TraceEvent};
use plan_value::value_size;
use plan_vm::MAX_VALUE_DEPTH;
use plan_vm::{CallId, Event, ToolRequest};

use serde_json::{Map, Value};

use plan_bytecode::{Effects, ValidatedProgram};

use crate::{
    CallRow, CallState, CommitPoint, GroupRun, GroupStore, Owner, RunEnd, RunStore, StepRow,
};

/// The largest value a step row keeps (bytes as the VM counts them). Larger values are
/// listed with their size only: copying them at every step of a loop that rewrites them
/// would cost time quadratic in the loop. The checkpoint always has every value.
pub const MAX_KEPT_VALUE_BYTES: u64 = 64 * 1024;

/// Bytes of values the step records of one process's part of a run keep in all (a
/// resumed run starts again from zero); past it, only sizes.
pub const MAX_KEPT_RUN_BYTES: u64 = 16 << 20;

/// A commit point saves the VM state when this much time has passed since the last
/// saved state...
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);
/// ...or this many instructions were committed since. In between, only the calls and
/// steps are written: a resumed run starts from the last saved state (or from the start)
/// and runs again up to where it stopped, answering from the stored calls, which costs
/// microseconds per step, while writing the state at every commit point cost a
/// transaction's worth of pages each time.
pub const CHECKPOINT_STEPS: u64 = 4096;

/// Where a journal's commit points go.
enum Target<'s> {
    /// Committed at once, in the driver's task (one run in a process).
    Direct(&'s mut dyn RunStore),
    /// Handed to a writer thread that commits many runs' points together (a batch);
    /// the driver waits for them through [`Journal::durable`].
    Group(GroupRun),
}

/// Journals one run into a store.
pub struct StoreJournal<'s> {
    target: Target<'s>,
    run: String,
    /// This process: every point is written only while it holds the run.
    owner: Owner,
    /// Instructions committed so far (a resumed run starts from its checkpoint's count).
    steps_done: u64,
    /// What the next commit point writes.
    point: CommitPoint,
    /// Calls answered from saved results: their rows are not touched.
    reused: HashSet<CallId>,
    /// When and at which step count the state was last saved.
    last_checkpoint: (Instant, u64),
    /// Bytes of values kept in step records so far.
    kept_bytes: u64,
    /// Tools with `write` effects (a grouped journal waits before one is sent).
    write_tools: HashSet<String>,
    /// A write call was issued since the last wait.
    must_wait: bool,
}

impl<'s> StoreJournal<'s> {
    /// `steps_done`: 0 for a new run, the checkpoint's count for a resumed one. `program`
    /// is the run's program (its `write` tools are treated with care).
    pub fn new(
        store: &'s mut dyn RunStore,
        run: &str,
        owner: Owner,
        steps_done: u64,
        program: &ValidatedProgram,
    ) -> Self {
        Self::to(Target::Direct(store), run, owner, steps_done, program)
    }

    /// A journal whose commit points go through a group-committing writer. The driver
    /// waits for them ([`Journal::durable`]) only before it sends a call of one of
    /// `program`'s `write` tools, so that a write in flight is always on record; other
    /// points are written while the run goes on, at most a transaction later. The caller
    /// waits for everything at the end ([`StoreJournal::written`]).
    pub fn grouped(
        store: GroupStore,
        run: &str,
        owner: Owner,
        steps_done: u64,
        program: &ValidatedProgram,
    ) -> StoreJournal<'static> {
        let points = store.run(run, owner.clone());
        StoreJournal::to(Target::Group(points), run, owner, steps_done, program)
    }

    /// A wait until every point given so far is written (None: nothing pending).
    pub fn written(&mut self) -> Option<Durable> {
        let Target::Group(points) = &self.target else {
            return None;
        };
        let wait = points.written()?;
        Some(Box::pin(async move { wait.await.map_err(|e| e.message) }))
    }

    fn to(
        target: Target<'s>,
        run: &str,
        owner: Owner,
        steps_done: u64,
        program: &ValidatedProgram,
    ) -> Self {
        StoreJournal {
            target,
            run: run.to_owned(),
            owner,
            steps_done,
            point: CommitPoint::default(),
            reused: HashSet::new(),
            last_checkpoint: (Instant::now(), steps_done),
            write_tools: program
                .tools
                .iter()
                .filter(|t| t.effects == Effects::Write)
                .map(|t| t.name.clone())
                .collect(),
            must_wait: false,
            kept_bytes: 0,
        }
    }

    fn flush(&mut self, state: Option<(u64, String)>, end: Option<RunEnd>) -> Result<(), String> {
        let mut point = std::mem::take(&mut self.point);
        point.state = state;
        point.end = end;
        point.total_steps = self.steps_done;
        match &mut self.target {
            Target::Direct(store) => store
                .commit(&self.run, &self.owner, &point)
                .map_err(|e| e.message),
            Target::Group(points) => points.give(point).map_err(|e| e.message),
        }
    }
}

fn row(req: &ToolRequest, state: CallState) -> CallRow {
    CallRow {
        step: req.instance,
        seq_no: req.seq_no,
        tool: req.tool.to_string(),
        // NB: an answer's journal entry names its call by `step`: the arguments are
        // recorded once, when the call is sent.
        args: match state {
            CallState::Answered => Map::new(),
            _ => req.args.to_map(),
        },
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

    fn durable(&mut self) -> Option<Durable> {
        if !std::mem::take(&mut self.must_wait) {
            return None;
        }
        self.written()
    }

    fn record(&mut self, event: &TraceEvent<'_>) -> Result<(), String> {
        match event {
            TraceEvent::Vm(Event::Step { pc, seq_no, op }) => {
                self.steps_done += 1;
                self.point.steps.push(StepRow {
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
                if let Some(step) = self.point.steps.last_mut() {
                    // NB: a loop rewriting a large value would keep a copy per step: past
                    // the run's budget, only sizes are kept. Another journal of the same
                    // run may have asked the VM for larger values than this one keeps.
                    match value {
                        Some(v)
                            if self.kept_bytes < MAX_KEPT_RUN_BYTES
                                && *bytes <= MAX_KEPT_VALUE_BYTES =>
                        {
                            self.kept_bytes += *bytes;
                            step.writes.insert(name.clone(), v.clone());
                        }
                        _ => {
                            step.omitted.insert(name.clone(), Value::from(*bytes));
                        }
                    }
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
                self.must_wait |= self.write_tools.contains(request.tool.as_str());
                self.point.sent.push(row(request, CallState::Inflight));
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
                    // NB: a write that failed in any way but a refusal (timed out, lost
                    // its connection, a 5xx, an answer of the wrong shape) may have taken
                    // effect: no answer is recorded, so it stays unknown (even once the
                    // run has consumed the failure) and `resume` does not send it again
                    // unasked. Never sent at all (no cassette entry, no backend): failed.
                    Err(e)
                        if self.write_tools.contains(request.tool.as_str())
                            && !matches!(
                                e.kind,
                                ToolErrorKind::Refused
                                    | ToolErrorKind::Replay
                                    | ToolErrorKind::Config
                            ) =>
                    {
                        return Ok(());
                    }
                    Err(e) => call.error = Some(e.message.clone()),
                    // NB: deeper than the VM accepts (it fails the run on it): recorded as
                    // that failure, since the journal could not be read back past
                    // serde_json's nesting limit.
                    Ok(v) if value_size(v).depth > MAX_VALUE_DEPTH => {
                        if self.write_tools.contains(request.tool.as_str()) {
                            // It took effect, but its answer cannot be kept: unknown.
                            return Ok(());
                        }
                        call.error = Some(format!(
                            "the output is nested more than {MAX_VALUE_DEPTH} levels deep"
                        ));
                    }
                    Ok(v) => call.output = Some((*v).clone()),
                }
                call.latency_ms = Some(u64::try_from(took.as_millis()).unwrap_or(u64::MAX));
                self.point.answered.push(call);
            }
            TraceEvent::CallCommitted { request } => self.point.committed.push(request.instance),
            TraceEvent::CallDiscarded { request, .. } => {
                self.point.discarded.push(request.instance);
            }
            TraceEvent::Suspended { state } => {
                let (at, steps) = self.last_checkpoint;
                if at.elapsed() >= CHECKPOINT_INTERVAL
                    || state.steps().saturating_sub(steps) >= CHECKPOINT_STEPS
                {
                    let json = serde_json::to_string(state).map_err(|e| e.to_string())?;
                    self.flush(Some((state.steps(), json)), None)?;
                    self.last_checkpoint = (Instant::now(), state.steps());
                } else {
                    self.flush(None, None)?;
                }
            }
            TraceEvent::Warning { .. } | TraceEvent::Planning { .. } => {}
            TraceEvent::Finished { report } => {
                let error = report
                    .error
                    .as_ref()
                    .map(|e| serde_json::to_value(e).unwrap_or(Value::Null));
                let end = RunEnd {
                    ok: report.is_ok(),
                    final_answer: report.final_answer.clone(),
                    error,
                };
                self.flush(None, Some(end))?;
            }
        }
        Ok(())
    }
}
