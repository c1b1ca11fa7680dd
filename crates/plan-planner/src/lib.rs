//! `plan-planner`: from a goal to an answer. An LLM writes the plan; the compiler checks
//! it; a plan with errors goes back to the LLM with its diagnostics (repair); a plan that
//! verifies runs on the host; a run that fails at a step goes back to the LLM with the
//! error and the variables set so far (re-plan), and the updated plan runs with the
//! answers of the calls already made, so a call the new plan makes in the same place with
//! the same arguments is not made again. Prints nothing: the CLI (`planvm ask`), bindings
//! and servers render [`AskOutcome`] as they need.
//!
//! Module map: `prompt` (the template and its parts), `examples` (example plans and their
//! selection by BM25), `feedback` (the repair and re-plan messages); this file is the
//! loop ([`Planner::ask`]) and the planner's LLM ([`PlannerModel`]).
//!
//! Planner calls are recorded and replayed like tool calls: a `--record` cassette gets
//! one entry per round under tool [`PLANNER_TOOL`], keyed by what decides the answer
//! (`goal`, `response_format`, and the `feedback` message of a repair or re-plan round;
//! `step` is the round), not by the rendered prompt, so a cassette keeps working when the
//! template or the examples change.

mod early;
mod examples;
mod feedback;
mod memory;
mod prompt;
mod scan;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::{Map, Value, json};

pub use examples::{Example, Examples, plan_value, save_example};
pub use feedback::{MAX_VALUE_CHARS, repair_message, replan_message};
pub use memory::{Conversation, DEFAULT_MEMORY_TOKENS, Summary, Turn, tokens};
pub use prompt::{DEFAULT_TEMPLATE, PLACEHOLDERS, Template, response_format_text, tools_text};
pub use scan::{Arrived, Scanner};

use plan_bytecode::ValidatedProgram;
use plan_compiler::CompileOptions;
use plan_host::{
    CassetteEntry, Deadline, Host, Journal, ReplayBackend, ReportError, RunReport, TraceEvent,
    run_plan_reusing,
};
use plan_llm::{CallError, CallErrorKind, ChatClient, Message, Reply, Usage};
use plan_syntax::Diagnostic;
use plan_vm::{ErrorCode, Event, Limits};

pub use early::Streamer;

/// The tool name planner calls are recorded under in cassettes.
pub const PLANNER_TOOL: &str = "planner";
pub const DEFAULT_MAX_REPAIRS: u32 = 3;
pub const DEFAULT_MAX_REPLANS: u32 = 2;
pub const DEFAULT_MAX_EXAMPLES: usize = 2;
/// Values up to this size are kept for a re-plan message (larger ones show a preview):
/// the message shows [`MAX_VALUE_CHARS`] of each, and the VM copies what is asked for.
const KEPT_VALUE_BYTES: u64 = 4 * MAX_VALUE_CHARS as u64;
/// Rounds an `ask` may take: the repairs and re-plans asked for are capped by this.
pub const MAX_ROUNDS: u32 = 50;

/// One call to the planner's LLM.
#[derive(Clone, Debug)]
pub struct PlannerCall<'a> {
    /// 0 for the first plan, then one more for each repair or re-plan.
    pub round: u64,
    /// What the cassette keys this call by (see the crate docs).
    pub key: Map<String, Value>,
    /// The conversation: the prompt; after the first round, the last reply and the
    /// feedback on it (earlier rounds are left out, so a request stays the size of one
    /// prompt, one plan and one message however many rounds there were).
    pub messages: &'a [Message],
}

/// The LLM that writes plans.
pub trait PlannerModel: Send + Sync {
    /// The reply, with the tokens it cost when the server says.
    fn reply<'a>(&'a self, call: &'a PlannerCall<'_>) -> BoxFuture<'a, Result<Reply, CallError>>;

    /// Whether [`PlannerModel::reply_streaming`] delivers the reply in pieces.
    fn streams(&self) -> bool {
        false
    }

    /// The reply, with `on_text` called on each piece as it arrives (by default, once
    /// with the whole reply).
    fn reply_streaming<'a>(
        &'a self,
        call: &'a PlannerCall<'_>,
        on_text: &'a mut (dyn FnMut(&str) + Send),
    ) -> BoxFuture<'a, Result<Reply, CallError>> {
        Box::pin(async move {
            let reply = self.reply(call).await?;
            on_text(&reply.text);
            Ok(reply)
        })
    }

    /// How long one reply may take in all (every attempt, streamed or not, and a
    /// stream asked for again whole); `None`: no bound of its own.
    fn budget(&self) -> Option<Duration> {
        None
    }

    /// One line for errors (never includes secrets).
    fn describe(&self) -> String;
}

impl PlannerModel for ChatClient {
    fn reply<'a>(&'a self, call: &'a PlannerCall<'_>) -> BoxFuture<'a, Result<Reply, CallError>> {
        Box::pin(ChatClient::reply(self, call.messages))
    }

    fn streams(&self) -> bool {
        true
    }

    fn reply_streaming<'a>(
        &'a self,
        call: &'a PlannerCall<'_>,
        on_text: &'a mut (dyn FnMut(&str) + Send),
    ) -> BoxFuture<'a, Result<Reply, CallError>> {
        Box::pin(ChatClient::reply_streaming(self, call.messages, on_text))
    }

    fn budget(&self) -> Option<Duration> {
        ChatClient::budget(self)
    }

    fn describe(&self) -> String {
        ChatClient::describe(self)
    }
}

/// Answers planner calls from a cassette (`--replay`).
pub struct ReplayPlanner(pub Arc<ReplayBackend>);

impl PlannerModel for ReplayPlanner {
    fn reply<'a>(&'a self, call: &'a PlannerCall<'_>) -> BoxFuture<'a, Result<Reply, CallError>> {
        Box::pin(async move {
            let text = match self
                .0
                .answer(PLANNER_TOOL, &call.key.clone().into(), Some(call.round))
                .await?
            {
                Value::String(s) => s,
                // A plan recorded as JSON rather than as the reply's text.
                other => other.to_string(),
            };
            Ok(Reply { text, usage: None })
        })
    }

    fn describe(&self) -> String {
        "the --replay cassette".into()
    }
}

/// Why no planner model could be set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelError {
    /// The configuration itself is wrong (a usage error), rather than a model being
    /// unavailable (no backend, no key).
    pub usage: bool,
    pub message: String,
}

/// The planner's model on `host` as traces name it: `[planner.backend]`'s (or
/// `[defaults.backend]`'s) `model`, or `replay` for a cassette.
pub fn model_name(host: &Host) -> String {
    if host.replay().is_some() {
        return "replay".to_owned();
    }
    let manifest = host.manifest();
    let backend = manifest
        .planner
        .as_ref()
        .and_then(|p| p.backend.as_ref())
        .or(manifest.default_backend.as_ref());
    match backend {
        Some(plan_manifest::BackendConfig::Openai { model, .. }) => model.clone(),
        _ => "replay".to_owned(),
    }
}

/// The planner's LLM for a run on `host`: the host's replay cassette when it has one
/// (`--replay`), else `[planner.backend]` of its tools file (or `[defaults.backend]`) with
/// `[planner] temperature`.
pub fn model_for(host: &Host) -> Result<Arc<dyn PlannerModel>, ModelError> {
    if let Some(cassette) = host.replay() {
        return Ok(Arc::new(ReplayPlanner(cassette.clone())));
    }
    let cfg = host.manifest().planner.clone().unwrap_or_default();
    let backend = cfg
        .backend
        .as_ref()
        .or(host.manifest().default_backend.as_ref());
    let Some(backend) = backend else {
        return Err(ModelError {
            usage: false,
            message: "no backend for the planner: configure [planner.backend] (or [defaults.backend]) in the tools file, or replay a cassette".into(),
        });
    };
    // NB: the planner replayed from a cassette of its own; the tools keep their backends.
    if let plan_manifest::BackendConfig::Replay { cassette } = backend {
        let Some(path) = cassette else {
            return Err(ModelError {
                usage: true,
                message: "the planner's replay backend names no cassette: set `cassette`".into(),
            });
        };
        let cassette = host
            .cassette(std::path::Path::new(path))
            .map_err(|e| ModelError {
                usage: true,
                message: e.to_string(),
            })?;
        return Ok(Arc::new(ReplayPlanner(cassette)));
    }
    if let Some(t) = cfg.temperature.filter(|t| !t.is_finite()) {
        return Err(ModelError {
            usage: true,
            message: format!("[planner] temperature {t} is not a finite number"),
        });
    }
    let client = host
        .connector()
        .chat("the planner", backend)
        .map_err(|e| ModelError {
            usage: false,
            message: e.to_string(),
        })?;
    Ok(Arc::new(match cfg.temperature {
        Some(t) => client.with_temperature(Some(t)),
        None => client,
    }))
}

/// The example directory `[planner] examples` names, relative to the tools file it is
/// written in (as paths in configuration files are).
pub fn examples_dir(
    cfg: &plan_manifest::PlannerConfig,
    tools_file: Option<&std::path::Path>,
) -> Option<std::path::PathBuf> {
    let dir = std::path::PathBuf::from(cfg.examples.as_ref()?);
    Some(match tools_file.and_then(std::path::Path::parent) {
        Some(base) if dir.is_relative() => base.join(dir),
        _ => dir,
    })
}

/// Limits and inputs of one `ask`.
#[derive(Clone, Debug)]
pub struct AskOptions {
    /// Rounds that may follow a plan with errors.
    pub max_repairs: u32,
    /// Rounds that may follow a run that failed at a step.
    pub max_replans: u32,
    /// Examples put into the prompt.
    pub max_examples: usize,
    /// Limits of each run.
    pub limits: Limits,
    /// Variables set before each run.
    pub vars: Vec<(String, Value)>,
    /// Reader repairs (prose around the plan, Python literals, ...) count as errors.
    pub strict: bool,
    /// Read a streaming planner's reply as it arrives and start the calls that are
    /// certain to run (see `early`).
    pub stream: bool,
    /// The whole `ask` (every planner call and every run) ends by then: a planner call
    /// still going is cut, a run fails with the deadline error (R0009).
    pub deadline: Option<Duration>,
    /// A session's earlier goals, for the prompt (empty: none).
    pub conversation: Conversation,
}

impl Default for AskOptions {
    fn default() -> Self {
        AskOptions {
            max_repairs: DEFAULT_MAX_REPAIRS,
            max_replans: DEFAULT_MAX_REPLANS,
            max_examples: DEFAULT_MAX_EXAMPLES,
            limits: Limits::default(),
            vars: Vec::new(),
            strict: false,
            stream: true,
            deadline: None,
            conversation: Conversation::default(),
        }
    }
}

/// A diagnostic as the planner was told it (and as `--format json` prints it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diag {
    pub severity: String,
    pub code: String,
    pub message: String,
    pub seq_no: Option<i64>,
    pub line: Option<u32>,
    pub column: Option<u32>,
    pub help: Option<String>,
}

/// Why a round was asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RoundKind {
    /// The first plan for the goal.
    Plan,
    /// A corrected plan after errors.
    Repair,
    /// An updated plan after a failed run.
    Replan,
}

impl RoundKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RoundKind::Plan => "plan",
            RoundKind::Repair => "repair",
            RoundKind::Replan => "replan",
        }
    }
}

/// One planning round: what the planner answered and what became of it.
#[derive(Clone, Debug, Serialize)]
pub struct Round {
    pub kind: RoundKind,
    /// The planner's reply (the plan source), if it answered.
    pub plan: Option<String>,
    /// The planner's call failed (after its retries).
    pub planner_error: Option<String>,
    /// The compiler's diagnostics on the reply.
    pub diagnostics: Vec<Diag>,
    /// How the run of this plan failed, if it ran and failed.
    pub run_error: Option<ReportError>,
    /// Time the planner took to answer.
    pub planner_ms: u64,
    /// The tokens the planner's reply cost, when its server says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// How an `ask` ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AskStatus {
    /// A plan ran to a final answer.
    Answered,
    /// The last plan still had errors when the repairs ran out.
    InvalidPlan,
    /// The last plan's run failed and no re-plan was left (or the failure was not one a
    /// new plan can fix).
    RunFailed,
    /// The planner's LLM could not be reached or refused.
    PlannerFailed,
    /// A plan's run stopped at a question to the user (`ask_user`): the report has it,
    /// and the run goes on once it is answered.
    NeedsInput,
    /// Its host stopped the plan's run at a commit point ([`Host::drain`]): a stored run
    /// goes on from there when resumed.
    ///
    /// [`Host::drain`]: plan_host::Host::drain
    Stopped,
}

impl AskStatus {
    /// Its name in JSON and traces: `answered`, `invalid_plan`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            AskStatus::Answered => "answered",
            AskStatus::InvalidPlan => "invalid_plan",
            AskStatus::RunFailed => "run_failed",
            AskStatus::PlannerFailed => "planner_failed",
            AskStatus::NeedsInput => "needs_input",
            AskStatus::Stopped => "stopped",
        }
    }
}

/// The result of one `ask`.
#[derive(Clone, Debug, Serialize)]
pub struct AskOutcome {
    pub status: AskStatus,
    /// The final answer (null unless answered).
    pub answer: Value,
    /// The source of the last plan the planner wrote.
    pub plan: Option<String>,
    pub rounds: Vec<Round>,
    /// The report of the last run, if a plan ran.
    pub report: Option<RunReport>,
    /// One line saying why, when not answered.
    pub error: Option<String>,
    /// The tokens the planner's replies cost, summed over the rounds, when its server
    /// says (the tools' LLM calls are not counted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The compiler's diagnostics on the last plan, for renderers (its round lists them
    /// as the planner was told them).
    #[serde(skip)]
    pub diagnostics: Vec<Diagnostic>,
}

/// A plan of an `ask` about to run.
impl AskOutcome {
    /// An ask that has not come to anything yet: failed, unless something else is said.
    fn not_yet() -> AskOutcome {
        AskOutcome {
            status: AskStatus::PlannerFailed,
            answer: Value::Null,
            plan: None,
            rounds: Vec::new(),
            report: None,
            error: None,
            usage: None,
            diagnostics: Vec::new(),
        }
    }
}

/// Ends `out` with a run that answered, stopped at a question or was stopped; gives back
/// the report of a run that failed, to re-plan on.
fn ended(out: &mut AskOutcome, report: RunReport) -> Option<RunReport> {
    let status = match report.status {
        plan_host::RunStatus::Ok => AskStatus::Answered,
        plan_host::RunStatus::NeedsInput => AskStatus::NeedsInput,
        plan_host::RunStatus::Stopped => AskStatus::Stopped,
        plan_host::RunStatus::Failed => return Some(report),
    };
    match status {
        AskStatus::Answered => out.answer = report.final_answer.clone(),
        AskStatus::Stopped => {
            out.error = Some("the run was stopped before its end: it goes on when resumed".into());
        }
        _ => {}
    }
    out.status = status;
    out.report = Some(report);
    None
}

#[derive(Clone, Copy, Debug)]
pub struct PlanRun<'a> {
    /// The planning round that wrote it.
    pub round: u64,
    pub program: &'a ValidatedProgram,
    pub source: &'a str,
    pub vars: &'a [(String, Value)],
    pub limits: &'a Limits,
    /// The tokens the planner's replies that led to it cost (its round's, and those of
    /// the repairs before it), when its server said.
    pub planner_usage: Option<Usage>,
}

/// Where the runs of an `ask` are journalled: one journal per run (a run store makes each
/// re-plan a run of its own, linked to the run it replaces).
pub trait RunSink: Send {
    /// The journal of the run about to start. An error ends the `ask` before the run.
    fn open<'s>(&'s mut self, run: &PlanRun<'_>) -> Result<Box<dyn Journal + 's>, String>;

    /// What happened while a plan was arriving ([`TraceEvent::Planning`]).
    fn planning(&mut self, event: &TraceEvent<'_>);

    /// A round's reply arrived (or the planner failed), before its plan runs, if it does.
    fn planned(&mut self, _round: &Planned<'_>) {}
}

/// A planning round once its reply is read: what the planner answered and what the
/// compiler said of it.
pub struct Planned<'a> {
    pub round: u64,
    pub kind: RoundKind,
    /// The reply, redacted (None: the planner failed).
    pub reply: Option<&'a str>,
    pub diagnostics: &'a [Diag],
    pub planner_error: Option<&'a str>,
    /// Its plan compiled and is about to run ([`RunSink::open`] comes next).
    pub runs: bool,
}

impl<'a> Planned<'a> {
    fn of(round: u64, r: &'a Round, runs: bool) -> Planned<'a> {
        Planned {
            round,
            kind: r.kind,
            reply: r.plan.as_deref(),
            diagnostics: &r.diagnostics,
            planner_error: r.planner_error.as_deref(),
            runs,
        }
    }
}

/// Every run into one journal.
struct OneJournal<'j>(&'j mut dyn Journal);

impl RunSink for OneJournal<'_> {
    fn open<'s>(&'s mut self, _: &PlanRun<'_>) -> Result<Box<dyn Journal + 's>, String> {
        Ok(Box::new(&mut *self.0))
    }

    fn planning(&mut self, event: &TraceEvent<'_>) {
        let _ = self.0.record(event);
    }
}

/// Writes plans for goals and runs them on a host.
pub struct Planner<'h> {
    pub host: &'h Host,
    pub model: Arc<dyn PlannerModel>,
    pub template: Template,
    pub examples: Examples,
    pub options: AskOptions,
}

impl Planner<'_> {
    /// The prompt of the first round.
    pub fn prompt(&self, goal: &str, response_format: Option<&Value>) -> String {
        let examples = self.examples.select(goal, self.options.max_examples);
        // NB: a database that cannot be read is left out; `Host::ground` says why.
        let schema = self.host.ground(goal).text;
        self.template.render(
            (goal, response_format),
            self.host.manifest(),
            &examples,
            (&self.options.conversation, &schema),
        )
    }

    /// Plans, repairs, runs and re-plans until the goal is answered or the rounds run
    /// out. `journal` gets every run's events (one `Finished` per run).
    pub async fn ask(
        &self,
        goal: &str,
        response_format: Option<&Value>,
        journal: &mut dyn Journal,
    ) -> AskOutcome {
        self.ask_into(goal, response_format, &mut OneJournal(journal))
            .await
    }

    /// [`Planner::ask`] with a journal per run from `runs`.
    pub async fn ask_into(
        &self,
        goal: &str,
        response_format: Option<&Value>,
        runs: &mut dyn RunSink,
    ) -> AskOutcome {
        let opts = &self.options;
        // The prompt, then the last reply and the feedback on it.
        let mut messages = vec![Message::user(self.prompt(goal, response_format))];
        let mut out = AskOutcome::not_yet();
        let (mut repairs, mut replans) = (0, 0);
        let mut kind = RoundKind::Plan;
        let mut feedback: Option<String> = None;
        let mut known: Vec<CassetteEntry> = Vec::new();
        // NB: dropped at the end of the ask: the host's backends are put back.
        let streamer = (opts.stream && self.model.streams())
            .then(|| Streamer::new(self.host, opts.vars.clone(), opts.limits.clone()));
        let deadline = opts.deadline.and_then(Deadline::after);
        // The planner's tokens since the last run: the next run counts them.
        let mut unspent: Option<Usage> = None;
        for round in 0.. {
            let call = PlannerCall {
                round,
                key: planner_key(
                    (goal, response_format),
                    feedback.as_deref(),
                    &opts.conversation,
                ),
                messages: &messages,
            };
            let (mut r, reply) = self
                .round_reply(&call, kind, (streamer.as_ref(), deadline), runs)
                .await;
            if let Some(u) = r.usage {
                *out.usage.get_or_insert_with(Usage::default) += u;
                *unspent.get_or_insert_with(Usage::default) += u;
            }
            let reply = match reply {
                Ok(text) => text,
                Err(e) => {
                    self.planner_failed(&mut out, (round, r), &e, runs);
                    return out;
                }
            };
            r.plan = Some(reply.clone());
            out.plan = Some(reply.clone());
            messages.truncate(1);
            messages.push(Message::assistant(reply.clone()));
            let program;
            (program, r.diagnostics, out.diagnostics) = self.compile(&reply, round);
            runs.planned(&Planned::of(round, &r, program.is_some()));
            let Some(program) = program else {
                let message = repair_message(&r.diagnostics);
                if !repairable(&mut out, r, repairs, opts.max_repairs) {
                    return out;
                }
                repairs += 1;
                kind = RoundKind::Repair;
                messages.push(Message::user(message.clone()));
                feedback = Some(message);
                continue;
            };
            if let Some(streamer) = &streamer {
                streamer.settle(&reply);
            }
            let plan_run = PlanRun {
                round,
                program: &program,
                source: &reply,
                vars: &opts.vars,
                limits: &opts.limits,
                planner_usage: unspent.take(),
            };
            let (report, memo) = match self.run(&plan_run, runs, &known, deadline).await {
                Ok(ran) => ran,
                Err(e) => {
                    out.rounds.push(r);
                    out.status = AskStatus::RunFailed;
                    out.error = Some(format!("the run could not be journalled: {e}"));
                    return out;
                }
            };
            r.run_error = report.error.clone();
            out.rounds.push(r);
            let Some(report) = ended(&mut out, report) else {
                return out;
            };
            let Some(error) = replan_on(&mut out, report, replans, opts.max_replans, deadline)
            else {
                return out;
            };
            replans += 1;
            kind = RoundKind::Replan;
            merge_answers(&mut known, memo.answers);
            let message = replan_message(&error, &memo.vars);
            messages.push(Message::user(message.clone()));
            feedback = Some(message);
        }
        unreachable!("the loop returns")
    }

    /// Round `round`'s reply from the planner (redacted and recorded), and the round as
    /// far as it goes: how long the planner took and what it cost.
    async fn round_reply(
        &self,
        call: &PlannerCall<'_>,
        kind: RoundKind,
        (streamer, deadline): (Option<&Streamer<'_>>, Option<Deadline>),
        runs: &mut dyn RunSink,
    ) -> (Round, Result<String, CallError>) {
        let asked = Instant::now();
        let reply = self.reply(call, streamer, runs, deadline).await;
        let took = asked.elapsed();
        let usage = reply
            .as_ref()
            .ok()
            .and_then(|r| r.usage)
            .map(|u| u.priced(self.host.manifest().pricing.get(&model_name(self.host))));
        let r = Round {
            kind,
            plan: None,
            planner_error: None,
            diagnostics: Vec::new(),
            run_error: None,
            planner_ms: millis(took),
            usage,
        };
        // NB: a server may quote the request, key included: redacted before anything
        // keeps the reply.
        let reply = reply.map(|r| self.host.redactor().text(&r.text).into_owned());
        let reply = reply.and_then(|text| self.record(call, text, (took, usage)));
        (r, reply)
    }

    /// The outcome of an ask whose planner failed in round `r` with `e`.
    fn planner_failed(
        &self,
        out: &mut AskOutcome,
        (round, mut r): (u64, Round),
        e: &CallError,
        runs: &mut dyn RunSink,
    ) {
        let message = self.host.redactor().text(&e.message).into_owned();
        let mut why = format!("the planner ({}) failed: {message}", self.model.describe());
        if let Some(run_error) = out.rounds.last().and_then(|r| r.run_error.as_ref()) {
            why = format!("the run failed ({}), and then {why}", run_error.message);
        }
        out.error = Some(why);
        r.planner_error = Some(message);
        runs.planned(&Planned::of(round, &r, false));
        out.rounds.push(r);
        out.status = AskStatus::PlannerFailed;
    }

    /// Runs a round's plan, journaled where `runs` says, taking the answers `known` from
    /// earlier rounds; its report, and what it kept for a re-plan. Err: the journal could
    /// not be opened.
    async fn run(
        &self,
        plan: &PlanRun<'_>,
        runs: &mut dyn RunSink,
        known: &[CassetteEntry],
        deadline: Option<Deadline>,
    ) -> Result<(RunReport, Memo), String> {
        let mut memo = Memo::default();
        let mut journal = runs.open(plan)?;
        let mut both = (&mut *journal, &mut memo);
        let report = run_plan_reusing(
            self.host,
            plan.program,
            plan.vars.to_vec(),
            known.to_vec(),
            plan.limits.clone(),
            &mut both,
            deadline,
        )
        .await;
        Ok((report, memo))
    }

    /// One planner call: streamed when `streamer` is given (a stream that broke off after
    /// its text started is asked for again whole; what started early stays valid), within
    /// one budget however it goes ([`PlannerModel::budget`]) and within the `ask`'s
    /// `deadline`.
    async fn reply(
        &self,
        call: &PlannerCall<'_>,
        streamer: Option<&Streamer<'_>>,
        runs: &mut dyn RunSink,
        deadline: Option<Deadline>,
    ) -> Result<Reply, CallError> {
        let budget = self.model.budget();
        let within = Deadline::earliest(budget.and_then(Deadline::after), deadline);
        let reply = async {
            let Some(streamer) = streamer else {
                return self.model.reply(call).await;
            };
            let (reply, started) = self.streamed_reply(call, streamer, runs).await;
            match reply {
                // NB: a stream that failed before any text came was retried already
                // (the client's retries): asking again whole would only double them.
                // NB: nor once the budget is spent (the stream's own, which ends with it).
                Err(e)
                    if started
                        && matches!(e.kind, CallErrorKind::Transport | CallErrorKind::Timeout)
                        && within.is_none_or(|w| tokio::time::Instant::now() < w.at) =>
                {
                    self.model.reply(call).await
                }
                other => other,
            }
        };
        let Some(within) = within else {
            return reply.await;
        };
        match tokio::time::timeout_at(within.at, reply).await {
            Ok(reply) => reply,
            Err(_) => Err(CallError::new(
                CallErrorKind::Timeout,
                if Some(within) == deadline {
                    format!(
                        "no complete reply before the deadline of the whole ask ({} s)",
                        plan_llm::secs(within.allowed)
                    )
                } else {
                    format!(
                        "no complete reply within {} s ({} × timeout_secs, all attempts together)",
                        plan_llm::secs(within.allowed),
                        plan_llm::TOTAL_TIMEOUT_FACTOR
                    )
                },
            )),
        }
    }

    /// The planner's reply, read as it arrives: each instruction that completes may start
    /// the calls that are certain to run (see [`Streamer`]). Also whether any of its text
    /// arrived.
    async fn streamed_reply(
        &self,
        call: &PlannerCall<'_>,
        streamer: &Streamer<'_>,
        runs: &mut dyn RunSink,
    ) -> (Result<Reply, CallError>, bool) {
        let (tx, pieces) = tokio::sync::mpsc::unbounded_channel::<String>();
        let started = std::sync::atomic::AtomicBool::new(false);
        let mut on_text = |t: &str| {
            started.store(true, std::sync::atomic::Ordering::Relaxed);
            let _ = tx.send(t.to_owned());
        };
        let reply = self.model.reply_streaming(call, &mut on_text);
        let reply = streamer
            .follow(reply, pieces, call.round, &mut |e| runs.planning(e))
            .await;
        (reply, started.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Asks the planner's LLM for a conversation's summary (`prompt`, from
    /// [`Conversation::summary_prompt`]); recorded and replayed like its plans, and bound
    /// by the ask's deadline.
    pub async fn summarize(&self, prompt: String) -> Result<String, String> {
        let mut key = Map::new();
        key.insert("summarize".into(), json!(prompt));
        let messages = [Message::user(prompt)];
        let call = PlannerCall {
            round: 0,
            key,
            messages: &messages,
        };
        let asked = Instant::now();
        let reply = match self.options.deadline {
            Some(limit) => match tokio::time::timeout(limit, self.model.reply(&call)).await {
                Ok(reply) => reply,
                Err(_) => return Err(format!("no summary within {}s", limit.as_secs_f64())),
            },
            None => self.model.reply(&call).await,
        };
        let reply = reply.map(|r| self.host.redactor().text(&r.text).into_owned());
        reply
            .and_then(|text| self.record(&call, text, (asked.elapsed(), None)))
            .map(|text| text.trim().to_owned())
            .map_err(|e| e.to_string())
    }

    /// Appends a live answer to the `--record` cassette.
    fn record(
        &self,
        call: &PlannerCall,
        text: String,
        (took, usage): (Duration, Option<Usage>),
    ) -> Result<String, CallError> {
        if let Some(rec) = self.host.recorder() {
            let entry = CassetteEntry {
                tool: PLANNER_TOOL.into(),
                args: call.key.clone(),
                output: Value::String(text.clone()),
                latency_ms: Some(millis(took)),
                step: Some(call.round),
                usage,
            };
            rec.record(&entry)?;
        }
        Ok(text)
    }

    /// The reply compiled: the program if it has no errors, its diagnostics as the planner
    /// is told them, and as the compiler gave them (for renderers).
    fn compile(
        &self,
        reply: &str,
        round: u64,
    ) -> (Option<ValidatedProgram>, Vec<Diag>, Vec<Diagnostic>) {
        // NB: an over-large reply is the reader's E0005, like any over-large plan.
        let opts = CompileOptions {
            manifest: self.host.manifest().clone(),
            source_name: Some(format!("plan of round {round}")),
            strict: self.options.strict,
            presets: self.options.vars.iter().map(|(n, _)| n.clone()).collect(),
            ..CompileOptions::default()
        };
        let mut compiled = plan_compiler::compile(reply, &opts);
        let program = compiled.validate();
        let diags: Vec<Diag> = compiled
            .diagnostics
            .iter()
            .map(|d| {
                let (line, column) = d.line_col(&compiled.line_index).unzip();
                Diag {
                    severity: d.severity.as_str().into(),
                    code: d.code.into(),
                    message: d.message.clone(),
                    seq_no: d.seq_no,
                    line,
                    column,
                    help: d.help.clone(),
                }
            })
            .collect();
        (program, diags, compiled.diagnostics)
    }
}

/// Whether a new plan can fix the failure: a step failed (a tool, an output, a
/// condition, a limit), not the set-up (no backend, no key) or the record.
fn replannable(e: &ReportError) -> bool {
    !matches!(
        e.code,
        ErrorCode::NotStarted | ErrorCode::RecordFailed | ErrorCode::BadState | ErrorCode::Internal
    )
}

/// Adds a run's answers to those of the runs before it, once each: a later plan may make
/// a call that an earlier run made and the last did not.
fn merge_answers(known: &mut Vec<CassetteEntry>, new: Vec<CassetteEntry>) {
    let key = |e: &CassetteEntry| {
        let args = serde_json::to_string(&e.args).unwrap_or_default();
        (e.tool.clone(), e.step, args)
    };
    let mut seen: std::collections::HashSet<_> = known.iter().map(key).collect();
    for e in new {
        if seen.insert(key(&e)) {
            known.push(e);
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The key of a planner call in a cassette: the goal, the response format, the feedback.
fn planner_key(
    (goal, response_format): (&str, Option<&Value>),
    feedback: Option<&str>,
    conversation: &Conversation,
) -> Map<String, Value> {
    let mut key = Map::new();
    key.insert("goal".into(), json!(goal));
    key.insert(
        "response_format".into(),
        response_format.cloned().unwrap_or(Value::Null),
    );
    key.insert("feedback".into(), json!(feedback));
    conversation.key(&mut key);
    key
}

/// Whether a plan with errors (round `r`) goes back for repair after `repairs` of them;
/// if not, `out` says so.
fn repairable(out: &mut AskOutcome, r: Round, repairs: u32, max_repairs: u32) -> bool {
    let errors = r
        .diagnostics
        .iter()
        .filter(|d| d.severity == "error")
        .count();
    out.rounds.push(r);
    if repairs < max_repairs.min(MAX_ROUNDS) {
        return true;
    }
    out.status = AskStatus::InvalidPlan;
    out.error = Some(format!(
        "the plan still has {errors} error{} after {repairs} repair{}",
        plural(errors as u64),
        plural(repairs)
    ));
    false
}

/// After a failed run (`report`, after `replans` re-plans): the error to re-plan on, or
/// None when the ask ends here (`out` says why): the error is not one a re-plan can fix,
/// the re-plans ran out, or the ask's deadline has passed (the planner would be cut at
/// once).
fn replan_on(
    out: &mut AskOutcome,
    report: RunReport,
    replans: u32,
    max_replans: u32,
    deadline: Option<Deadline>,
) -> Option<ReportError> {
    let error = report.error.clone().unwrap_or_else(|| ReportError {
        code: ErrorCode::Internal,
        message: "the run failed without an error".into(),
        seq_no: None,
        line: None,
    });
    out.report = Some(report);
    out.status = AskStatus::RunFailed;
    let out_of_time = deadline.is_some_and(|d| tokio::time::Instant::now() >= d.at);
    if replannable(&error) && replans < max_replans.min(MAX_ROUNDS) && !out_of_time {
        return Some(error);
    }
    out.error = Some(if replannable(&error) && replans > 0 {
        format!(
            "the run still failed after {replans} re-plan{}",
            plural(replans)
        )
    } else {
        "the run failed".to_owned()
    });
    None
}

/// "s" unless there is one.
fn plural(n: impl Into<u64>) -> &'static str {
    if n.into() == 1 { "" } else { "s" }
}

/// What a run leaves for a re-plan: the answers it got (so the next plan's identical
/// calls are not made again) and the variables it set, last value first seen order.
#[derive(Default)]
struct Memo {
    answers: Vec<CassetteEntry>,
    vars: Vec<(String, Value)>,
}

impl Journal for Memo {
    fn wants_values(&self) -> u64 {
        KEPT_VALUE_BYTES
    }

    fn record(&mut self, event: &TraceEvent<'_>) -> Result<(), String> {
        match event {
            TraceEvent::CallAnswered {
                request,
                result: Ok(output),
                took,
                ..
            } => self.answers.push(CassetteEntry {
                tool: request.tool.to_string(),
                args: request.args.to_map(),
                output: (*output).clone(),
                latency_ms: Some(millis(*took)),
                step: Some(request.instance),
                usage: None,
            }),
            TraceEvent::Vm(Event::VarSet {
                name,
                preview,
                value,
                ..
            }) => {
                let v = value
                    .clone()
                    .unwrap_or_else(|| Value::String(preview.clone()));
                match self.vars.iter_mut().find(|(n, _)| n == name) {
                    Some(slot) => slot.1 = v,
                    None => self.vars.push((name.clone(), v)),
                }
            }
            _ => {}
        }
        Ok(())
    }
}
