//! The driver loop (rune-style): `run()` the VM; on `Yield`, start every new request at
//! once; as each completes, `resume` the VM with its result and `run()` again; stop on
//! `Done`, `Failed`, or the overall deadline.

use std::collections::BTreeMap;
use std::time::Duration;

// NB: tokio's clock, not the standard one, so tests can run the driver on paused time and
// assert exact durations.
use tokio::time::Instant;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::cassette::{CassetteEntry, Recorder, preview};
use crate::error::{ToolError, secs};
use crate::host::{CONDITION_TOOL, Host};
use crate::trace::Tracer;
use plan_bytecode::{Pc, ValidatedProgram};
use plan_vm::{CallId, ErrorCode, Event, Halt, Limits, RunError, ToolRequest};

/// Instructions the VM runs between two looks at the deadline (about 0.1 ms of work): a
/// plan that loops without calling a tool, or whose calls all answer at once, still
/// stops on `--timeout`.
const STEP_SLICE: u64 = 10_000;

/// How much of a call's args a `tool_call_start` trace event shows.
const ARGS_PREVIEW_CHARS: usize = 200;

/// Where an issued call stands, as far as the sequential run is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallState {
    /// The VM has consumed its result: the sequential run made this call.
    Committed,
    /// The head (the next instruction in program order) waits for it: the sequential run
    /// makes it too.
    Head,
    /// Issued ahead of the head, result not consumed yet. If the run ends now, the
    /// sequential run would not have made it: it is speculative.
    Ahead,
}

/// What the driver needs from a VM. `plan_vm::Vm` implements it; tests drive the loop
/// with scripted machines.
pub trait Machine {
    fn run(&mut self) -> Halt;
    fn resume(&mut self, id: CallId, result: Result<Value, String>) -> Result<(), RunError>;
    /// Drains recorded trace events (empty when tracing is off).
    fn take_events(&mut self) -> Vec<Event>;
    /// Source line of `pc`, for errors the host raises (deadline).
    fn line_of(&self, pc: Pc) -> Option<u32> {
        let _ = pc;
        None
    }
    /// Instructions executed so far, if the machine tracks them.
    fn steps(&self) -> Option<u64> {
        None
    }
    /// Whether the last `run()` returned only to let the driver check its deadline (the
    /// machine is not waiting for a tool: call `run()` again).
    fn paused(&self) -> bool {
        false
    }
    /// Where call `id` stands. Machines that do not look ahead consume every result at
    /// once: the default says so.
    fn call_state(&self, id: CallId) -> CallState {
        let _ = id;
        CallState::Committed
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Ok,
    Failed,
}

/// Where and why a run failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReportError {
    /// Stable code (`R0001`, ...; see `plan_vm::ErrorCode`).
    pub code: ErrorCode,
    pub message: String,
    pub seq_no: Option<i64>,
    pub line: Option<u32>,
}

/// The result of one run, as `planvm --format json` prints it (`vars` is not printed).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunReport {
    pub status: RunStatus,
    pub final_answer: Value,
    pub error: Option<ReportError>,
    pub steps: u64,
    pub tool_calls: u64,
    pub elapsed_ms: u64,
    /// Every variable set at the end (successful runs only).
    #[serde(skip)]
    pub vars: Map<String, Value>,
}

impl RunReport {
    /// A run that failed before the VM started (bad preset variable, unservable tool).
    pub fn failed_before_start(message: String, elapsed: Duration) -> RunReport {
        RunReport {
            status: RunStatus::Failed,
            final_answer: Value::Null,
            error: Some(ReportError {
                code: ErrorCode::NotStarted,
                message,
                seq_no: None,
                line: None,
            }),
            steps: 0,
            tool_calls: 0,
            elapsed_ms: millis(elapsed),
            vars: Map::new(),
        }
    }

    pub fn is_ok(&self) -> bool {
        self.status == RunStatus::Ok
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

struct Completed {
    req: ToolRequest,
    result: Result<Value, ToolError>,
    took: Duration,
}

async fn perform(host: &Host, req: ToolRequest) -> Completed {
    let start = Instant::now();
    let result = host.call(&req).await;
    Completed {
        req,
        result,
        took: start.elapsed(),
    }
}

/// The calls of one run between issue and commit: what counts in `tool_calls` and goes
/// into the cassette is decided at commit, so that a call issued ahead that the sequential
/// run would not have made (past a failure, or past the end) is neither counted nor
/// recorded, and the cassette lists calls in program order.
struct Calls<'r> {
    recorder: Option<&'r Recorder>,
    /// Answered, result not consumed by the VM yet: (request, output if it succeeded and
    /// is to be recorded, latency).
    answered: Vec<(ToolRequest, Option<Value>, Duration)>,
    /// Issued, no answer yet: id → request (for deadline errors and the end of the run).
    inflight: BTreeMap<CallId, ToolRequest>,
    /// Calls committed so far: the report's `tool_calls`.
    committed: u64,
    /// The first recording failure (it fails the run).
    record_error: Option<String>,
}

impl Calls<'_> {
    /// Commits every answered call the VM has consumed since the last look: counts it and
    /// records it (successful outputs only), in program order.
    fn commit<M: Machine>(&mut self, vm: &M) {
        let (mut done, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.answered)
            .into_iter()
            .partition(|(req, _, _)| vm.call_state(req.id) == CallState::Committed);
        self.answered = keep;
        done.sort_by_key(|(req, _, _)| req.instance);
        for (req, output, took) in done {
            self.committed += 1;
            let (Some(rec), Some(output)) = (self.recorder, output) else {
                continue;
            };
            let entry = CassetteEntry {
                tool: req.tool.to_string(),
                args: req.args.into_map(),
                output,
                latency_ms: Some(millis(took)),
                step: Some(req.instance),
            };
            if let Err(e) = rec.record(&entry)
                && self.record_error.is_none()
            {
                self.record_error = Some(e.message);
            }
        }
    }

    /// At the end of the run: every call still uncommitted is either the head's (the
    /// sequential run made it: counted, as a deadline interrupts it) or speculative
    /// (traced as discarded, not counted, not recorded). Returns `tool_calls`.
    fn finish<M: Machine>(&mut self, vm: &M, tracer: &mut Tracer) -> u64 {
        self.commit(vm);
        let answered = self.answered.drain(..).map(|(req, _, _)| (req, true));
        let inflight = std::mem::take(&mut self.inflight)
            .into_values()
            .map(|req| (req, false));
        let mut rest: Vec<(ToolRequest, bool)> = answered.chain(inflight).collect();
        rest.sort_by_key(|(req, _)| req.instance);
        for (req, answered) in rest {
            if vm.call_state(req.id) != CallState::Ahead {
                self.committed += 1;
                continue;
            }
            let mut f = Map::new();
            f.insert("call_id".into(), json!(req.id.0));
            f.insert("tool".into(), json!(req.tool));
            f.insert("seq_no".into(), json!(req.seq_no));
            f.insert("speculative".into(), json!(true));
            f.insert("answered".into(), json!(answered));
            tracer.event("tool_call_discarded", f);
        }
        self.committed
    }
}

/// Runs a validated program to completion against `host`, recording committed calls to
/// the host's `--record` cassette if it has one.
///
/// Every tool the program names (and `jmp_condition` if it has conditions) is checked
/// to be servable before the first instruction runs, so a missing API key fails fast.
pub async fn run_plan(
    host: &Host,
    program: &ValidatedProgram,
    vars: Vec<(String, Value)>,
    limits: Limits,
    tracer: &mut Tracer,
) -> RunReport {
    run_plan_recording(host, program, vars, limits, tracer, host.recorder()).await
}

/// [`run_plan`] recording to `recorder` instead of the host's cassette (a batch records
/// each run to a file of its own while all runs share one host).
pub async fn run_plan_recording(
    host: &Host,
    program: &ValidatedProgram,
    vars: Vec<(String, Value)>,
    limits: Limits,
    tracer: &mut Tracer,
    recorder: Option<&Recorder>,
) -> RunReport {
    let start = Instant::now();
    let mut tools: Vec<&str> = program.tools.iter().map(|t| t.name.as_str()).collect();
    if !program.conds.is_empty() {
        tools.push(CONDITION_TOOL);
    }
    if let Err(e) = host.prepare(tools) {
        return finish_failed_early(tracer, e.message, start);
    }
    let mut vm = plan_vm::Vm::new(program, limits);
    for (name, value) in vars {
        if let Err(e) = vm.set_var(&name, value) {
            return finish_failed_early(tracer, format!("--var {name}: {}", e.message), start);
        }
    }
    vm.set_tracing(tracer.is_active());
    vm.set_step_slice(Some(STEP_SLICE));
    let mut m = VmMachine { vm, program };
    drive(host, &mut m, tracer, recorder).await
}

fn finish_failed_early(tracer: &mut Tracer, message: String, start: Instant) -> RunReport {
    let report = RunReport::failed_before_start(message, start.elapsed());
    trace_end(tracer, &report);
    report
}

struct VmMachine<'p> {
    vm: plan_vm::Vm<'p>,
    program: &'p ValidatedProgram,
}

impl Machine for VmMachine<'_> {
    fn run(&mut self) -> Halt {
        self.vm.run()
    }

    fn resume(&mut self, id: CallId, result: Result<Value, String>) -> Result<(), RunError> {
        self.vm.resume(id, result)
    }

    fn take_events(&mut self) -> Vec<Event> {
        self.vm.take_events()
    }

    fn line_of(&self, pc: Pc) -> Option<u32> {
        self.program.line_at(pc)
    }

    fn steps(&self) -> Option<u64> {
        Some(self.vm.state().steps())
    }

    fn paused(&self) -> bool {
        self.vm.paused()
    }

    fn call_state(&self, id: CallId) -> CallState {
        let st = self.vm.state();
        match st.pending().iter().find(|p| p.request.id == id) {
            None => CallState::Committed,
            Some(p)
                if p.request.instance == st.steps()
                    && matches!(st.status(), plan_vm::Status::Running) =>
            {
                CallState::Head
            }
            Some(_) => CallState::Ahead,
        }
    }
}

/// The driver loop over any `Machine`, recording to the host's `--record` cassette.
pub async fn run_machine<M: Machine>(host: &Host, vm: &mut M, tracer: &mut Tracer) -> RunReport {
    drive(host, vm, tracer, host.recorder()).await
}

async fn drive<M: Machine>(
    host: &Host,
    vm: &mut M,
    tracer: &mut Tracer,
    recorder: Option<&Recorder>,
) -> RunReport {
    let start = Instant::now();
    let deadline = host.options().deadline;
    let deadline_at = deadline.and_then(|d| tokio::time::Instant::now().checked_add(d));
    let mut inflight = FuturesUnordered::new();
    let mut calls = Calls {
        recorder,
        answered: Vec::new(),
        inflight: BTreeMap::new(),
        committed: 0,
        record_error: None,
    };
    let mut steps_seen: u64 = 0;

    // Ends the run with `err`: the calls still out are settled (counted or discarded).
    let fail = |tracer: &mut Tracer, calls: &mut Calls<'_>, vm: &M, steps_seen: u64, err| {
        let steps = vm.steps().unwrap_or(steps_seen);
        let tool_calls = calls.finish(vm, tracer);
        let report = RunReport {
            status: RunStatus::Failed,
            final_answer: Value::Null,
            error: Some(err),
            steps,
            tool_calls,
            elapsed_ms: millis(start.elapsed()),
            vars: Map::new(),
        };
        trace_end(tracer, &report);
        report
    };

    // The deadline error, located at the earliest call in program order still out.
    let deadline_error = |vm: &M, calls: &Calls<'_>| {
        let (seq_no, line) = calls
            .inflight
            .values()
            .min_by_key(|r| r.instance)
            .map(|r| (r.seq_no, vm.line_of(r.pc)))
            .unwrap_or((None, None));
        let message = format!(
            "deadline of {} s exceeded",
            deadline.map(secs).unwrap_or_default()
        );
        ReportError {
            code: ErrorCode::Deadline,
            message,
            seq_no,
            line,
        }
    };

    loop {
        // NB: checked on every turn, not only by the timer below: a timer fires only when
        // the task waits, and calls that answer at once never make it wait.
        if deadline_at.is_some_and(|at| tokio::time::Instant::now() >= at) {
            let err = deadline_error(vm, &calls);
            return fail(tracer, &mut calls, vm, steps_seen, err);
        }
        let halt = vm.run();
        for ev in vm.take_events() {
            if matches!(ev, Event::Step { .. }) {
                steps_seen += 1;
            }
            tracer.tagged(serde_json::to_value(&ev).unwrap_or(Value::Null));
        }
        calls.commit(vm);
        if let Some(message) = calls.record_error.take() {
            let err = ReportError {
                code: ErrorCode::RecordFailed,
                message,
                seq_no: None,
                line: None,
            };
            return fail(tracer, &mut calls, vm, steps_seen, err);
        }
        match halt {
            Halt::Done(outcome) => {
                let tool_calls = calls.finish(vm, tracer);
                let report = RunReport {
                    status: RunStatus::Ok,
                    final_answer: outcome.final_answer,
                    error: None,
                    steps: outcome.steps,
                    tool_calls,
                    elapsed_ms: millis(start.elapsed()),
                    vars: outcome.vars,
                };
                trace_end(tracer, &report);
                return report;
            }
            Halt::Failed(e) => {
                let err = ReportError {
                    code: e.code,
                    message: e.message,
                    seq_no: e.seq_no,
                    line: e.line,
                };
                return fail(tracer, &mut calls, vm, steps_seen, err);
            }
            Halt::Yield(reqs) => {
                for req in reqs {
                    let mut f = Map::new();
                    f.insert("call_id".into(), json!(req.id.0));
                    f.insert("tool".into(), json!(req.tool));
                    f.insert("seq_no".into(), json!(req.seq_no));
                    let args = serde_json::to_string(&*req.args).unwrap_or_default();
                    f.insert(
                        "args".into(),
                        json!(preview_chars(&args, ARGS_PREVIEW_CHARS)),
                    );
                    // Issued ahead of the head: made only if the run gets there.
                    let ahead = vm.call_state(req.id) == CallState::Ahead;
                    f.insert("ahead".into(), json!(ahead));
                    tracer.event("tool_call_start", f);
                    calls.inflight.insert(req.id, req.clone());
                    inflight.push(perform(host, req));
                }
            }
        }

        if vm.paused() {
            // A slice of computation is done: let other tasks (a batch's other runs) go
            // on, then continue, looking at the deadline first.
            tokio::task::yield_now().await;
            continue;
        }
        // NB: suspension point. Wait for the next call to finish (or the deadline).
        let next = match deadline_at {
            Some(at) => tokio::select! {
                c = inflight.next() => c,
                () = tokio::time::sleep_until(at) => {
                    let err = deadline_error(vm, &calls);
                    return fail(tracer, &mut calls, vm, steps_seen, err);
                }
            },
            None => inflight.next().await,
        };
        let Some(done) = next else {
            // The VM yielded nothing new while nothing is in flight: it would wait forever.
            let err = ReportError {
                code: ErrorCode::Internal,
                message: "internal: the VM is waiting for tool results but no call is outstanding"
                    .into(),
                seq_no: None,
                line: None,
            };
            return fail(tracer, &mut calls, vm, steps_seen, err);
        };
        calls.inflight.remove(&done.req.id);
        let mut f = Map::new();
        f.insert("call_id".into(), json!(done.req.id.0));
        f.insert("tool".into(), json!(done.req.tool));
        f.insert("duration_ms".into(), json!(millis(done.took)));
        f.insert("ok".into(), json!(done.result.is_ok()));
        if let Err(e) = &done.result {
            f.insert("error".into(), json!(e.message));
        }
        tracer.event("tool_call_end", f);
        let id = done.req.id;
        let (output, result) = match done.result {
            // NB: the copy is for the cassette only; outputs can be megabytes.
            Ok(v) => (calls.recorder.is_some().then(|| v.clone()), Ok(v)),
            Err(e) => (None, Err(e.message)),
        };
        calls.answered.push((done.req, output, done.took));
        if let Err(e) = vm.resume(id, result) {
            let err = ReportError {
                code: e.code,
                message: e.message,
                seq_no: e.seq_no,
                line: e.line,
            };
            return fail(tracer, &mut calls, vm, steps_seen, err);
        }
    }
}

fn preview_chars(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

fn trace_end(tracer: &mut Tracer, report: &RunReport) {
    if let Some(e) = &report.error {
        let mut f = Map::new();
        f.insert("code".into(), json!(e.code));
        f.insert("message".into(), json!(e.message));
        f.insert("seq_no".into(), json!(e.seq_no));
        f.insert("line".into(), json!(e.line));
        tracer.event("error", f);
    }
    let mut f = Map::new();
    f.insert("status".into(), json!(report.status));
    f.insert("steps".into(), json!(report.steps));
    f.insert("tool_calls".into(), json!(report.tool_calls));
    f.insert("elapsed_ms".into(), json!(report.elapsed_ms));
    f.insert(
        "final_answer".into(),
        json!(preview(&plan_value::interpolated(&report.final_answer))),
    );
    tracer.event("done", f);
}
