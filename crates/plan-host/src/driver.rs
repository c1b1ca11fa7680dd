//! The driver loop (rune-style): `run()` the VM; on `Yield`, start every new request at
//! once; as each completes, `resume` the VM with its result and `run()` again; stop on
//! `Done`, `Failed`, or the overall deadline.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

// NB: tokio's clock, not the standard one, so tests can run the driver on paused time and
// assert exact durations.
use tokio::time::Instant;

use futures::StreamExt;
use futures::future::{self, Either};
use futures::stream::FuturesUnordered;
use serde_json::{Map, Value};

use crate::cassette::{CassetteEntry, Recorder};
use crate::error::ToolError;
use crate::host::{CONDITION_TOOL, Host};
use crate::journal::{Journal, RecordJournal, TraceEvent};
use crate::report::{Question, ReportError, RunReport, RunStatus, millis};
use plan_bytecode::{Effects, Pc, ValidatedProgram};
use plan_llm::secs;
use plan_vm::{CallId, ErrorCode, Event, Halt, Limits, RunError, ToolRequest, VmState};

/// Instructions the VM runs between two looks at the deadline (about 0.1 ms of work): a
/// plan that loops without calling a tool, or whose calls all answer at once, still
/// stops on `--timeout`.
pub const STEP_SLICE: u64 = 10_000;

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
    /// The whole state of the run, for journals that save commit points.
    fn state(&self) -> Option<&VmState> {
        None
    }
    /// Whether `req` calls a tool a person answers (`ask_user`): the run stops at it.
    fn asks_a_person(&self, req: &ToolRequest) -> bool {
        let _ = req;
        false
    }
}

/// A finished call. The request is shared with the run's in-flight map: a run with many
/// calls out holds each request once, not once per place that tracks it.
struct Completed {
    req: Arc<ToolRequest>,
    result: Result<Value, ToolError>,
    took: Duration,
    usage: Option<plan_llm::Usage>,
    /// Its attempts that failed and were tried again.
    retries: Vec<plan_llm::Retry>,
    /// Answered from a cassette.
    replayed: bool,
}

/// Sends `req` and times its answer.
async fn perform(host: &Host, req: Arc<ToolRequest>) -> Completed {
    let start = Instant::now();
    let (answer, (retries, replayed)) = host.call_noted(&req).await;
    let (result, usage) = match answer {
        Ok((v, usage)) => (Ok(v), usage),
        Err(e) => (Err(e), None),
    };
    Completed {
        req,
        result,
        took: start.elapsed(),
        usage,
        retries,
        replayed,
    }
}

/// The calls of one run between issue and commit: what counts in `tool_calls` and what
/// journals see as committed is decided at commit, so that a call issued ahead that the
/// sequential run would not have made (past a failure, or past the end) is neither counted
/// nor recorded, and commits come in program order.
struct Calls<'j> {
    journal: &'j mut dyn Journal,
    /// Answered, result not consumed by the VM yet.
    answered: Vec<Arc<ToolRequest>>,
    /// Issued, no answer yet: id → request (for deadline errors and the end of the run).
    inflight: BTreeMap<CallId, Arc<ToolRequest>>,
    /// Calls committed so far: the report's `tool_calls`.
    committed: u64,
    /// The first journal failure (it fails the run).
    journal_error: Option<String>,
    /// A call of a `human` tool at the head, with no answer: the run stops for it once
    /// nothing else is in flight.
    asking: Option<Arc<ToolRequest>>,
    /// The tokens of the calls answered so far.
    usage: Option<plan_llm::Usage>,
}

impl<'j> Calls<'j> {
    /// No call yet, each event heard by `journal`.
    fn new(journal: &'j mut dyn Journal) -> Calls<'j> {
        Calls {
            journal,
            answered: Vec::new(),
            inflight: BTreeMap::new(),
            committed: 0,
            journal_error: None,
            asking: None,
            usage: None,
        }
    }
}

impl Calls<'_> {
    /// The run is suspended in `state`: the journal hears it, and, writing in the
    /// background, gets it on record. NB: the calls just issued go out only when the
    /// driver waits next: a journal writing in the background must have them on record
    /// first.
    async fn suspended(&mut self, state: &VmState) -> Result<(), String> {
        self.emit(&TraceEvent::Suspended { state });
        if let Some(durable) = self.journal.durable()
            && let Err(e) = durable.await
            && self.journal_error.is_none()
        {
            self.journal_error = Some(e);
        }
        match self.journal_error.take() {
            Some(message) => Err(message),
            None => Ok(()),
        }
    }

    fn emit(&mut self, event: &TraceEvent<'_>) {
        if let Err(e) = self.journal.record(event)
            && self.journal_error.is_none()
        {
            self.journal_error = Some(e);
        }
    }

    /// Commits every answered call the VM has consumed since the last look: counts it and
    /// tells the journal, in program order.
    fn commit<M: Machine>(&mut self, vm: &M) {
        if self.answered.is_empty() {
            return;
        }
        let (mut done, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.answered)
            .into_iter()
            .partition(|req| vm.call_state(req.id) == CallState::Committed);
        self.answered = keep;
        done.sort_by_key(|req| req.instance);
        for request in &done {
            self.committed += 1;
            self.emit(&TraceEvent::CallCommitted { request });
        }
    }

    /// At the end of the run: every call still uncommitted is either the head's (the
    /// sequential run made it: counted, as a deadline interrupts it) or speculative
    /// (discarded: not counted, not recorded). Returns `tool_calls`.
    fn finish<M: Machine>(&mut self, vm: &M) -> u64 {
        self.commit(vm);
        let answered = self.answered.drain(..).map(|req| (req, true));
        let inflight = std::mem::take(&mut self.inflight)
            .into_values()
            .map(|req| (req, false));
        let mut rest: Vec<(Arc<ToolRequest>, bool)> = answered.chain(inflight).collect();
        rest.sort_by_key(|(req, _)| req.instance);
        for (request, answered) in &rest {
            if vm.call_state(request.id) != CallState::Ahead {
                self.committed += 1;
                continue;
            }
            self.emit(&TraceEvent::CallDiscarded {
                request,
                answered: *answered,
            });
        }
        self.committed
    }
}

/// Runs a validated program to completion against `host`, telling `journal` what
/// happens and recording committed calls to the host's `--record` cassette if it has one.
///
/// Every tool the program names (and `jmp_condition` if it has conditions) is checked
/// to be servable before the first instruction runs, so a missing API key fails fast.
// NB: these wrappers return `start_plan`'s future itself rather than awaiting it in a
// future of their own: each level of `async fn` would add its copy of the arguments to
// every run's task (a batch holds thousands of them).
pub fn run_plan(
    host: &Host,
    program: &ValidatedProgram,
    vars: Vec<(String, Value)>,
    limits: Limits,
    journal: &mut dyn Journal,
) -> impl Future<Output = RunReport> {
    run_plan_recording(host, program, vars, limits, journal, host.recorder())
}

/// [`run_plan`] recording to `recorder` instead of the host's cassette (a batch records
/// each run to a file of its own while all runs share one host).
pub fn run_plan_recording(
    host: &Host,
    program: &ValidatedProgram,
    vars: Vec<(String, Value)>,
    limits: Limits,
    journal: &mut dyn Journal,
    recorder: Option<&Recorder>,
) -> impl Future<Output = RunReport> {
    let run = Start {
        vars,
        known: Vec::new(),
        limits,
        within: None,
    };
    start_plan(host, program, run, journal, recorder)
}

/// [`run_plan`] with saved results: a call the run makes is answered from `known` when an
/// entry has its tool, args and step (as in [`resume_plan`]), and only the others are
/// sent. A re-planned run passes the answers of the run it replaces, so the calls the new
/// plan makes in the same place with the same arguments are not made again.
///
/// `within`: a deadline of a larger task the run is part of (an `ask`, whose planner
/// calls take time from it too); the run stops at it or at the host's own deadline,
/// whichever comes first.
pub fn run_plan_reusing(
    host: &Host,
    program: &ValidatedProgram,
    vars: Vec<(String, Value)>,
    known: Vec<CassetteEntry>,
    limits: Limits,
    journal: &mut dyn Journal,
    within: Option<Deadline>,
) -> impl Future<Output = RunReport> {
    let run = Start {
        vars,
        known,
        limits,
        within,
    };
    start_plan(host, program, run, journal, host.recorder())
}

/// A point in time a run must end by, and the time it allowed in all (for the error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline {
    pub at: tokio::time::Instant,
    pub allowed: Duration,
}

impl Deadline {
    /// `allowed` from now.
    pub fn after(allowed: Duration) -> Option<Deadline> {
        let at = tokio::time::Instant::now().checked_add(allowed)?;
        Some(Deadline { at, allowed })
    }

    /// The earlier of two deadlines.
    pub fn earliest(a: Option<Deadline>, b: Option<Deadline>) -> Option<Deadline> {
        match (a, b) {
            (Some(a), Some(b)) => Some(if b.at < a.at { b } else { a }),
            (a, b) => a.or(b),
        }
    }
}

/// How a new run starts.
struct Start {
    vars: Vec<(String, Value)>,
    known: Vec<CassetteEntry>,
    limits: Limits,
    within: Option<Deadline>,
}

async fn start_plan(
    host: &Host,
    program: &ValidatedProgram,
    run: Start,
    journal: &mut dyn Journal,
    recorder: Option<&Recorder>,
) -> RunReport {
    let Start {
        vars,
        known,
        limits,
        within,
    } = run;
    let start = Instant::now();
    let mut journal = (journal, recorder.map(RecordJournal::new));
    // NB: the VM made in a block of its own: a local of the body (even one moved from)
    // keeps its room in the run's future across every await, beside the machine.
    let mut m = {
        let vm = prepare(host, program).and_then(|()| new_vm(program, limits, vars));
        match vm {
            Ok(vm) => VmMachine::new(vm, program, &journal),
            Err(e) => return finish_failed_early(&mut journal, e, start),
        }
    };
    drive(
        host,
        &mut m,
        &mut journal,
        Vec::new(),
        Known::new(known),
        within,
    )
    .await
}

/// A VM for `program` with `vars` set. NB: made outside the run's `async fn`, whose
/// future would otherwise keep room for the VM beside the machine it moves into.
fn new_vm<'p>(
    program: &'p ValidatedProgram,
    limits: Limits,
    vars: Vec<(String, Value)>,
) -> Result<plan_vm::Vm<'p>, String> {
    let mut vm = plan_vm::Vm::new(program, limits);
    for (name, value) in vars {
        if let Err(e) = vm.set_var(&name, value) {
            return Err(format!("--var {name}: {}", e.message));
        }
    }
    Ok(vm)
}

/// Continues a saved run: `state` as saved at a commit point ([`TraceEvent::Suspended`]),
/// `known` the successful results saved since the run began (or at least since `state`).
/// A call the resumed run makes is answered from `known` when an entry has its tool, args
/// and step; only the others are sent. The caller must have decided that sending them is
/// safe: a call with side effects that was in flight may have happened already (see
/// `VmState::unanswered`). `steps` in the report counts the whole run; `tool_calls` the
/// calls committed by this resumption.
pub async fn resume_plan(
    host: &Host,
    program: &ValidatedProgram,
    state: VmState,
    known: Vec<CassetteEntry>,
    limits: Limits,
    journal: &mut dyn Journal,
) -> RunReport {
    resume_plan_answering(host, program, state, (known, None), limits, journal).await
}

/// [`resume_plan`] of a run that stopped at a question to a person, with `input` their
/// answer: the first call of a `human` tool the run makes that has no saved answer
/// gets it, as a call's answer (journaled as one, so it is never asked again).
pub async fn resume_plan_answering(
    host: &Host,
    program: &ValidatedProgram,
    state: VmState,
    (known, input): (Vec<CassetteEntry>, Option<PersonsAnswer>),
    limits: Limits,
    journal: &mut dyn Journal,
) -> RunReport {
    let start = Instant::now();
    let mut journal = (journal, host.recorder().map(RecordJournal::new));
    if let Err(e) = prepare(host, program) {
        return finish_failed_early(&mut journal, e, start);
    }
    // NB: in a block of its own, as in `start_plan`.
    let (mut m, reissue) = {
        let vm = match plan_vm::Vm::from_state(program, state, limits) {
            Ok(vm) => vm,
            Err(e) => return finish_refused(&mut journal, e.code, e.message, start),
        };
        let reissue = vm.state().unanswered();
        (VmMachine::new(vm, program, &journal), reissue)
    };
    let mut known = Known::new(known);
    known.input = input;
    drive(host, &mut m, &mut journal, reissue, known, None).await
}

/// Checks that every tool the program calls can be served.
fn prepare(host: &Host, program: &ValidatedProgram) -> Result<(), String> {
    // NB: a person answers a `human` tool: nothing serves it.
    let mut tools: Vec<&str> = program
        .tools
        .iter()
        .filter(|t| t.effects != Effects::Human)
        .map(|t| t.name.as_str())
        .collect();
    if !program.conds.is_empty() {
        tools.push(CONDITION_TOOL);
    }
    host.prepare(tools).map_err(|e| e.message)
}

fn finish_failed_early(journal: &mut dyn Journal, message: String, start: Instant) -> RunReport {
    finish_refused(journal, ErrorCode::NotStarted, message, start)
}

fn finish_refused(
    journal: &mut dyn Journal,
    code: ErrorCode,
    message: String,
    start: Instant,
) -> RunReport {
    let mut report = RunReport::failed_before_start(message, start.elapsed());
    if let Some(err) = &mut report.error {
        err.code = code;
    }
    if let Err(e) = journal.record(&TraceEvent::Finished { report: &report })
        && let Some(err) = &mut report.error
    {
        err.message = format!("{}; also: {e}", err.message);
    }
    report
}

struct VmMachine<'p> {
    vm: plan_vm::Vm<'p>,
    program: &'p ValidatedProgram,
}

impl<'p> VmMachine<'p> {
    fn new(mut vm: plan_vm::Vm<'p>, program: &'p ValidatedProgram, journal: &dyn Journal) -> Self {
        vm.set_tracing(journal.wants_vm_events() || journal.wants_values() > 0);
        vm.set_trace_values(journal.wants_values());
        // NB: only a journal that reads the VM's events as a trace reads their previews.
        vm.set_trace_previews(journal.wants_vm_events());
        vm.set_step_slice(Some(STEP_SLICE));
        VmMachine { vm, program }
    }
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

    fn state(&self) -> Option<&VmState> {
        Some(self.vm.state())
    }

    fn asks_a_person(&self, req: &ToolRequest) -> bool {
        self.program
            .tools
            .iter()
            .any(|t| t.effects == Effects::Human && *t.name == *req.tool.as_str())
    }
}

/// The driver loop over any `Machine`, recording to the host's `--record` cassette.
pub async fn run_machine<M: Machine>(
    host: &Host,
    vm: &mut M,
    journal: &mut dyn Journal,
) -> RunReport {
    let mut journal = (journal, host.recorder().map(RecordJournal::new));
    drive(host, vm, &mut journal, Vec::new(), Known::default(), None).await
}

/// Saved results a resumed run reuses: by tool and step, then args; and a person's
/// answer to the question the run stopped at.
#[derive(Default)]
struct Known {
    saved: HashMap<(String, u64), Vec<SavedResult>>,
    input: Option<PersonsAnswer>,
}

/// A person's answer to the question a run stopped at.
#[derive(Clone, Debug)]
pub struct PersonsAnswer {
    pub answer: Value,
    /// When the question was asked, if known: the call's latency is then the time the
    /// answer was waited for.
    pub asked_at: Option<std::time::SystemTime>,
}

/// A saved call's args and output.
type SavedResult = (Map<String, Value>, Value);

impl Known {
    fn new(entries: Vec<CassetteEntry>) -> Self {
        let mut map: HashMap<_, Vec<_>> = HashMap::new();
        for e in entries {
            if let Some(step) = e.step {
                map.entry((e.tool, step))
                    .or_default()
                    .push((e.args, e.output));
            }
        }
        Known {
            saved: map,
            input: None,
        }
    }

    /// The saved result of `req`, used at most once.
    fn take(&mut self, req: &ToolRequest) -> Option<Value> {
        if self.saved.is_empty() {
            return None;
        }
        let list = self.saved.get_mut(&(req.tool.to_string(), req.instance))?;
        let i = list.iter().position(|(args, _)| req.args == *args)?;
        Some(list.swap_remove(i).1)
    }
}

/// The loop: `reissue` are calls a restored VM issued before it was saved and that have
/// no answer yet; `known` answers calls without sending them.
// NB: not an `async fn` on purpose (see the body).
#[allow(clippy::manual_async_fn)]
fn drive<M: Machine>(
    host: &Host,
    vm: &mut M,
    journal: &mut dyn Journal,
    reissue: Vec<Arc<ToolRequest>>,
    mut known: Known,
    within: Option<Deadline>,
) -> impl Future<Output = RunReport> {
    // NB: a future made by a block, not an `async fn`: one keeps each argument twice
    // (as its argument and as the local it is moved into) in every run's future.
    async move {
        let start = Instant::now();
        let deadline =
            Deadline::earliest(host.options().deadline.and_then(Deadline::after), within);
        let deadline_at = deadline.map(|d| d.at);
        // One timer for the run, on the heap: a run without a deadline carries no room for
        // one, and a run with one does not register a new timer at every wait.
        let mut deadline_timer = deadline_at.map(|at| Box::pin(tokio::time::sleep_until(at)));
        let wants_states = journal.wants_states();
        let mut inflight = FuturesUnordered::new();
        let mut calls = Calls::new(journal);
        let mut steps_seen: u64 = 0;
        // Ends the run with `err`: the calls still out are settled (counted or discarded).
        let fail = |calls: &mut Calls<'_>, vm: &M, steps_seen: u64, err| {
            failed(calls, vm, vm.steps().unwrap_or(steps_seen), start, err)
        };
        let deadline_error = |vm: &M, calls: &Calls<'_>| deadline_error(vm, calls, deadline);

        // NB: while the host drains, no call is sent: those the VM asks for are held back
        // (the run stops once the calls out are in, and a resumed run asks for them again),
        // all but those answered here (a saved answer, a person's, or a question to one,
        // which stops the run for its answer): a person's answer given while the service
        // stops is so on record. True when some were held back.
        let mut issue = |calls: &mut Calls<'_>,
                         inflight: &mut FuturesUnordered<_>,
                         vm: &M,
                         reqs: Vec<Arc<ToolRequest>>| {
            let hold = host.draining();
            issue(calls, inflight, vm, &mut known, (reqs, hold), |r| {
                perform(host, r)
            })
        };
        let mut held_back = issue(&mut calls, &mut inflight, vm, reissue);

        loop {
            // NB: checked on every turn, not only by the timer below: a timer fires only when
            // the task waits, and calls that answer at once never make it wait.
            if deadline_at.is_some_and(|at| tokio::time::Instant::now() >= at) {
                let err = deadline_error(vm, &calls);
                return fail(&mut calls, vm, steps_seen, err);
            }
            let halt = vm.run();
            steps_seen += calls.heard(vm);
            if let Some(message) = calls.journal_error.take() {
                return fail(&mut calls, vm, steps_seen, journal_failed(message));
            }
            match halt {
                Halt::Done(outcome) => return done(&mut calls, vm, outcome, start, steps_seen),
                Halt::Failed(e) => return fail(&mut calls, vm, steps_seen, e.into()),
                Halt::Yield(reqs) => held_back |= issue(&mut calls, &mut inflight, vm, reqs),
            }

            if vm.paused() {
                // A slice of computation is done: let other tasks (a batch's other runs) go
                // on, then continue, looking at the deadline first.
                tokio::task::yield_now().await;
                continue;
            }
            if wants_states
                && let Some(state) = vm.state()
                && let Err(message) = calls.suspended(state).await
            {
                return fail(&mut calls, vm, steps_seen, journal_failed(message));
            }
            if held_back && inflight.is_empty() && calls.asking.is_none() {
                return stopped(&mut calls, vm, start, steps_seen);
            }
            // NB: suspension point. Wait for the next call to finish (or the deadline).
            let next = match &mut deadline_timer {
                Some(timer) => tokio::select! {
                    c = inflight.next() => c,
                    () = timer.as_mut() => {
                        let err = deadline_error(vm, &calls);
                        return fail(&mut calls, vm, steps_seen, err);
                    }
                },
                None => inflight.next().await,
            };
            let Some(done) = next else {
                if let Some(request) = calls.asking.take() {
                    return needs_input(&mut calls, vm, request, start, steps_seen);
                }
                return fail(&mut calls, vm, steps_seen, stuck());
            };
            if let Err(e) = calls.answered(vm, done) {
                return fail(&mut calls, vm, steps_seen, e.into());
            }
        }
    }
}

/// The VM yielded nothing new while nothing is in flight: it would wait forever.
#[cold]
fn stuck() -> ReportError {
    ReportError {
        code: ErrorCode::Internal,
        message: "internal: the VM is waiting for tool results but no call is outstanding".into(),
        seq_no: None,
        line: None,
    }
}

impl Calls<'_> {
    /// Hears what the VM did since it last ran and commits what it may; the steps it
    /// took.
    fn heard<M: Machine>(&mut self, vm: &mut M) -> u64 {
        let mut steps = 0;
        for ev in vm.take_events() {
            if matches!(ev, Event::Step { .. }) {
                steps += 1;
            }
            self.emit(&TraceEvent::Vm(&ev));
        }
        self.commit(vm);
        steps
    }

    /// Call `done` answered: heard, its tokens counted, its answer given to the VM.
    fn answered<M: Machine>(&mut self, vm: &mut M, done: Completed) -> Result<(), RunError> {
        self.inflight.remove(&done.req.id);
        self.emit(&TraceEvent::CallAnswered {
            request: &done.req,
            result: done.result.as_ref(),
            took: done.took,
            usage: done.usage,
            retries: &done.retries,
            replayed: done.replayed,
        });
        if let Some(u) = done.usage {
            *self.usage.get_or_insert_with(plan_llm::Usage::default) += u;
        }
        let id = done.req.id;
        self.answered.push(done.req);
        vm.resume(id, done.result.map_err(|e| e.message))
    }
}

/// Sends `reqs`, or answers them from `known`, recording each.
fn issue<M: Machine, F>(
    calls: &mut Calls<'_>,
    inflight: &mut FuturesUnordered<Either<future::Ready<Completed>, F>>,
    vm: &M,
    known: &mut Known,
    (reqs, hold): (Vec<Arc<ToolRequest>>, bool),
    perform: impl Fn(Arc<ToolRequest>) -> F,
) -> bool {
    let mut held = false;
    for request in reqs {
        // Issued ahead of the head: made only if the run gets there.
        let ahead = vm.call_state(request.id) == CallState::Ahead;
        let saved = known.take(&request);
        if hold && saved.is_none() && !vm.asks_a_person(&request) {
            held = true;
            continue;
        }
        calls.emit(&TraceEvent::CallIssued {
            request: &request,
            ahead,
            reused: saved.is_some(),
        });
        let mut waited = Duration::ZERO;
        let given = if saved.is_none() && vm.asks_a_person(&request) {
            match known.input.take() {
                Some(given) => {
                    waited = given
                        .asked_at
                        .and_then(|at| at.elapsed().ok())
                        .unwrap_or_default();
                    Some(given.answer)
                }
                None => {
                    // NB: on record as sent, like any call: the run stops here, and its
                    // answer comes with the resumption that continues it.
                    calls.asking = Some(request);
                    continue;
                }
            }
        } else {
            None
        };
        calls.inflight.insert(request.id, request.clone());
        // NB: one queue for both, polled in issue order: a call sent next to saved answers
        // starts on the same turn.
        inflight.push(match saved.or(given) {
            Some(v) => Either::Left(future::ready(Completed {
                req: request,
                result: Ok(v),
                took: waited,
                usage: None,
                retries: Vec::new(),
                replayed: false,
            })),
            None => Either::Right(perform(request)),
        });
    }
    held
}

/// A run that failed with `err` after `steps` instructions: the calls still out are
/// settled (counted or discarded).
fn failed<M: Machine>(
    calls: &mut Calls<'_>,
    vm: &M,
    steps: u64,
    start: Instant,
    err: ReportError,
) -> RunReport {
    let tool_calls = calls.finish(vm);
    let report = RunReport {
        status: RunStatus::Failed,
        final_answer: Value::Null,
        error: Some(err),
        steps,
        tool_calls,
        usage: calls.usage,
        elapsed_ms: millis(start.elapsed()),
        question: None,
        vars: Default::default(),
    };
    calls.emit(&TraceEvent::Finished { report: &report });
    report
}

/// A run its host stopped ([`Host::drain`]) with nothing in flight: the calls answered
/// ahead of the head stay answered (a journal keeps them for the resumed run).
fn stopped<M: Machine>(
    calls: &mut Calls<'_>,
    vm: &M,
    start: Instant,
    steps_seen: u64,
) -> RunReport {
    calls.commit(vm);
    let steps = vm.steps().unwrap_or(steps_seen);
    if let Some(message) = calls.journal_error.take() {
        return failed(calls, vm, steps, start, journal_failed(message));
    }
    let mut report = RunReport {
        status: RunStatus::Stopped,
        final_answer: Value::Null,
        error: None,
        steps,
        tool_calls: calls.committed,
        usage: calls.usage,
        elapsed_ms: millis(start.elapsed()),
        question: None,
        vars: Default::default(),
    };
    calls.emit(&TraceEvent::Finished { report: &report });
    if let Some(message) = calls.journal_error.take() {
        report.status = RunStatus::Failed;
        report.error = Some(journal_failed(message));
    }
    report
}

/// A run that stopped at `request`, a question to a person, with nothing else in flight.
fn needs_input<M: Machine>(
    calls: &mut Calls<'_>,
    vm: &M,
    request: Arc<ToolRequest>,
    start: Instant,
    steps_seen: u64,
) -> RunReport {
    let tool_calls = calls.finish(vm);
    let steps = vm.steps().unwrap_or(steps_seen);
    if let Some(message) = calls.journal_error.take() {
        return failed(calls, vm, steps, start, journal_failed(message));
    }
    let mut report = RunReport {
        status: RunStatus::NeedsInput,
        final_answer: Value::Null,
        error: None,
        steps,
        tool_calls,
        usage: calls.usage,
        elapsed_ms: millis(start.elapsed()),
        question: Some(Question::of(&request)),
        vars: Default::default(),
    };
    calls.emit(&TraceEvent::Finished { report: &report });
    if let Some(message) = calls.journal_error.take() {
        // Not on record: nobody could answer it.
        report.status = RunStatus::Failed;
        report.question = None;
        report.error = Some(journal_failed(message));
    }
    report
}

/// A run that ended with `outcome`, once its journal has it all.
fn done<M: Machine>(
    calls: &mut Calls<'_>,
    vm: &M,
    outcome: plan_vm::Outcome,
    start: Instant,
    steps_seen: u64,
) -> RunReport {
    let tool_calls = calls.finish(vm);
    if let Some(message) = calls.journal_error.take() {
        let steps = vm.steps().unwrap_or(steps_seen);
        return failed(calls, vm, steps, start, journal_failed(message));
    }
    let mut report = RunReport {
        status: RunStatus::Ok,
        final_answer: outcome.final_answer,
        error: None,
        steps: outcome.steps,
        tool_calls,
        usage: calls.usage,
        elapsed_ms: millis(start.elapsed()),
        question: None,
        vars: outcome.vars,
    };
    calls.emit(&TraceEvent::Finished { report: &report });
    if let Some(message) = calls.journal_error.take() {
        // The answer is computed but not kept: the run is not what it claims.
        report.status = RunStatus::Failed;
        report.error = Some(journal_failed(message));
    }
    report
}

/// The deadline error, located at the earliest call in program order still out.
fn deadline_error<M: Machine>(
    vm: &M,
    calls: &Calls<'_>,
    deadline: Option<Deadline>,
) -> ReportError {
    let (seq_no, line) = calls
        .inflight
        .values()
        .min_by_key(|r| r.instance)
        .map(|r| (r.seq_no, vm.line_of(r.pc)))
        .unwrap_or((None, None));
    let message = format!(
        "deadline of {} s exceeded",
        deadline.map(|d| secs(d.allowed)).unwrap_or_default()
    );
    ReportError {
        code: ErrorCode::Deadline,
        message,
        seq_no,
        line,
    }
}

/// A journal that could not be written.
fn journal_failed(message: String) -> ReportError {
    ReportError {
        code: ErrorCode::RecordFailed,
        message,
        seq_no: None,
        line: None,
    }
}

impl From<RunError> for ReportError {
    fn from(e: RunError) -> ReportError {
        ReportError {
            code: e.code,
            message: e.message,
            seq_no: e.seq_no,
            line: e.line,
        }
    }
}
