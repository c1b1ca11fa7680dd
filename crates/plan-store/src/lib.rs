//! `plan-store`: durable runs. A run's program, presets and limits, every committed step
//! with the variables it wrote, every tool call from the moment it is sent, and the VM's
//! state at each commit point go into a [`RunStore`], so that a run killed at any moment
//! can continue ([`StoreJournal`] writes it, `plan_host::resume_plan` continues it) and
//! a run can be inspected or branched at any step ([`replay`]).
//!
//! The store sits above the host and below the CLIs: the VM and the host know nothing of
//! it; the driver sees it as one more `plan_host::Journal`.
//!
//! [`RunStore`] is narrow on purpose: [`SqliteStore`] (embedded, the default) implements it
//! for one machine; a server database with leases shared by many machines can implement
//! the same calls.
//!
//! Guarantees (docs/durability.md): a call whose answer was stored is never sent again
//! for the same run; a `write` call that was in flight when the process died has an
//! unknown outcome and is re-sent only when the user says so; everything up to the last
//! commit point survives a process crash (`--durability normal`) or a power loss
//! (`full`).

mod group;
mod journal;
mod pg;
pub mod replay;
mod rows;
mod sqlite;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use group::{GroupRun, GroupStore, OnWritten, Written};
pub use journal::{
    CHECKPOINT_INTERVAL, CHECKPOINT_STEPS, MAX_KEPT_RUN_BYTES, MAX_KEPT_VALUE_BYTES, StoreJournal,
};
pub use pg::{PgStore, is_postgres_url};
pub use rows::{EntryChange, JournalFold};
pub use sqlite::{Durability, SqliteStore};

/// How long a run's lease lasts without renewal, unless the process sets its own
/// ([`set_lease_ms`]): past it, a `running` run whose process stopped renewing is
/// `interrupted` and may be resumed elsewhere.
pub const LEASE_MS: i64 = 10_000;
/// The shortest lease a process may set: renewed every quarter of it, a shorter one
/// would be lost to a pause of the process or a slow commit of the store.
pub const MIN_LEASE_MS: i64 = 2_000;
/// The longest: a run whose process died waits this long to be taken up elsewhere.
pub const MAX_LEASE_MS: i64 = 3_600_000;

static LEASE: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(LEASE_MS);

/// This process's lease ([`LEASE_MS`] unless [`set_lease_ms`] set it): what the leases
/// it takes and renews last.
pub fn lease_ms() -> i64 {
    LEASE.load(std::sync::atomic::Ordering::Relaxed)
}

/// Sets this process's lease to `ms`, before it holds any run (`planvm worker --lease`):
/// refused outside [`MIN_LEASE_MS`]..=[`MAX_LEASE_MS`].
pub fn set_lease_ms(ms: i64) -> Result<(), String> {
    if !(MIN_LEASE_MS..=MAX_LEASE_MS).contains(&ms) {
        return Err(format!(
            "a lease of {ms} ms is outside {MIN_LEASE_MS}..={MAX_LEASE_MS} ms"
        ));
    }
    LEASE.store(ms, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// The `lease_until` of a run submitted to the queue and never held: it reads as
/// `queued` (a run let go of has none, and reads as `interrupted`).
pub(crate) const QUEUED: i64 = 0;

/// The runs [`RunStore::prune`] deletes (`$1`/`?1`: the time, `$2`/`?2`: whether failed
/// runs go too), as SQL both stores read alike.
macro_rules! pruned_runs {
    ($before:literal, $failed:literal) => {
        concat!(
            "SELECT r.id FROM runs r WHERE r.updated_at < ",
            $before,
            " AND (r.status = 'ok' OR (r.status = 'failed' AND ",
            $failed,
            ")) AND NOT EXISTS (SELECT 1 FROM runs c WHERE c.parent = r.id) \
             AND NOT EXISTS (SELECT 1 FROM feedback f WHERE f.run = r.id)"
        )
    };
}
pub(crate) use pruned_runs;

/// Where a run stands, as `runs list` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// A live process is running it.
    Running,
    Ok,
    Failed,
    /// Its process died (or stopped renewing its lease) before the run ended.
    Interrupted,
    /// It stopped at a question to a person (`RunInfo::question`) and goes on once
    /// answered.
    NeedsInput,
    /// Submitted to the queue (`planvm submit`): a worker takes it up.
    Queued,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Ok => "ok",
            RunStatus::Failed => "failed",
            RunStatus::Interrupted => "interrupted",
            RunStatus::NeedsInput => "needs_input",
            RunStatus::Queued => "queued",
        }
    }
}

/// One run's row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunInfo {
    pub id: String,
    pub status: RunStatus,
    pub plan: String,
    /// Content hash of its program.
    pub program: String,
    pub parent: Option<String>,
    pub branch_seq: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
    pub steps: u64,
    pub tool_calls: u64,
    pub final_answer: Option<Value>,
    pub error: Option<Value>,
    pub presets: Map<String, Value>,
    pub limits: plan_vm::Limits,
    /// `host:pid:start.nonce` of the process that runs (or last ran) it.
    pub owner: Option<String>,
    /// What it asks, while `needs_input`: `{question, choices, seq_no}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub question: Option<Value>,
    /// The tokens its LLM calls cost, when their servers said (every call it sent, in
    /// every process that ran it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<plan_llm::Usage>,
}

/// Where a goal stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalStatus {
    /// A live process is planning it or running one of its plans.
    Open,
    Answered,
    Failed,
    /// Its process died before the goal was answered or failed.
    Interrupted,
    /// Its run stopped at a question to a person: it goes on when the run is answered.
    NeedsInput,
    /// Submitted (`planvm submit --goal`): no worker has taken it yet.
    Queued,
}

impl GoalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            GoalStatus::Open => "open",
            GoalStatus::Answered => "answered",
            GoalStatus::Failed => "failed",
            GoalStatus::Interrupted => "interrupted",
            GoalStatus::NeedsInput => "needs_input",
            GoalStatus::Queued => "queued",
        }
    }
}

/// One goal's row. Its runs are `id`, `id.2`, `id.3`, ... ([`goal_run_id`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GoalInfo {
    pub id: String,
    pub goal: String,
    pub response_format: Option<Value>,
    /// The rest of what was asked (variables, limits), as the asker wrote it.
    pub request: Value,
    pub status: GoalStatus,
    pub created_at: i64,
    pub updated_at: i64,
    pub answer: Option<Value>,
    /// `{code, message}`, once failed.
    pub error: Option<Value>,
    #[serde(skip)]
    pub owner: Option<String>,
    /// The session it is a round of.
    pub session: Option<String>,
}

/// One planning round of a goal: the planner's reply and what became of it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GoalRound {
    /// 0 for the first plan; one more for each repair and re-plan.
    pub round: u64,
    /// `plan`, `repair` (after diagnostics) or `replan` (after a failed run).
    pub kind: String,
    /// The planner's reply, redacted (None: the planner failed).
    pub reply: Option<String>,
    /// The compiler's diagnostics on the reply: `[{severity, code, message, seq_no, line,
    /// column, help}]`; its errors were sent back for the next round.
    pub diagnostics: Value,
    pub planner_error: Option<String>,
    /// The run of the reply's plan, when it compiled.
    pub run: Option<String>,
    pub created_at: i64,
}

/// One session: a conversation of goals.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionInfo {
    pub id: String,
    /// Its goals (rounds).
    pub goals: u64,
    /// When its first and latest goals were asked (Unix ms).
    pub created_at: i64,
    pub updated_at: i64,
}

/// One evaluation (`planvm eval --store`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvalInfo {
    pub id: String,
    /// The dataset's path, as given.
    pub dataset: String,
    /// When it started (Unix ms).
    pub created_at: i64,
    /// The report's summary once it ended (None while it runs, or if it was cut short).
    pub summary: Option<Value>,
    /// Its cases stored so far, and how many passed.
    pub cases: u64,
    pub passed: u64,
}

/// One case of an evaluation: the goal it was asked as and its verdict.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvalCase {
    #[serde(rename = "case")]
    pub case_id: String,
    /// The stored goal: its runs are `goal`, `goal.2`, ...
    pub goal: String,
    /// `pass` or `fail`.
    pub verdict: String,
    pub score: f64,
    pub reason: String,
    /// The case's whole report.
    #[serde(skip)]
    pub report: Value,
}

/// A person's verdict on a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Feedback {
    /// `good` or `bad`.
    pub verdict: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// When it was given (Unix ms; ignored when setting it).
    pub updated_at: i64,
}

/// A goal about to be asked./// A goal about to be asked.
#[derive(Clone, Copy, Debug)]
pub struct NewGoal<'a> {
    pub id: &'a str,
    pub goal: &'a str,
    pub response_format: Option<&'a Value>,
    /// The rest of what was asked (variables, limits), kept to ask again after a crash.
    pub request: &'a Value,
    /// The session it is a round of.
    pub session: Option<&'a str>,
}

/// The id of the `n`th run (from 1) of goal `id`: the goal's own id, then `id.2`, ...
pub fn goal_run_id(id: &str, n: usize) -> String {
    match n {
        0 | 1 => id.to_owned(),
        n => format!("{id}.{n}"),
    }
}

/// Whether `run` is one of goal `goal`'s runs, and which (from 1).
pub fn goal_run_number(goal: &str, run: &str) -> Option<usize> {
    let rest = run.strip_prefix(goal)?;
    if rest.is_empty() {
        return Some(1);
    }
    rest.strip_prefix('.')?
        .parse()
        .ok()
        .filter(|n| *n >= 2 && !rest[1..].starts_with('0'))
}

/// A run about to start.
#[derive(Clone, Debug)]
pub struct NewRun<'a> {
    pub id: &'a str,
    pub plan: &'a str,
    /// The plan source (None for a run of a `.pbc` file).
    pub source: Option<&'a str>,
    /// The program as `.pbc` bytes.
    pub pbc: &'a [u8],
    pub presets: &'a Map<String, Value>,
    pub limits: &'a plan_vm::Limits,
    /// For a branch: the parent run and the seq_no the branch starts at.
    pub parent: Option<(&'a str, i64)>,
}

/// A stored program.
#[derive(Clone, Debug)]
pub struct StoredProgram {
    pub hash: String,
    pub source: Option<String>,
    pub pbc: Vec<u8>,
}

/// One committed instruction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRow {
    /// 1 for the first instruction the run executed.
    pub step: u64,
    pub seq_no: Option<i64>,
    pub pc: u32,
    pub op: String,
    /// The variables it wrote and their values.
    pub writes: Map<String, Value>,
    /// Variables it wrote whose values were too large to keep here, with their sizes
    /// (the checkpoint and a replay have them).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub omitted: Map<String, Value>,
}

/// Where a call stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CallState {
    /// Sent, no answer stored: if the process died, its outcome is unknown.
    Inflight,
    /// Answered, not yet consumed by the run.
    Answered,
    /// Consumed: the sequential run made this call.
    Committed,
    /// Issued ahead; the run ended before reaching it.
    Discarded,
    /// Sent, no answer stored, and the run was cancelled meanwhile: its answer, if any
    /// came, was never taken.
    Cancelled,
}

impl CallState {
    pub fn as_str(self) -> &'static str {
        match self {
            CallState::Inflight => "inflight",
            CallState::Answered => "answered",
            CallState::Committed => "committed",
            CallState::Discarded => "discarded",
            CallState::Cancelled => "cancelled",
        }
    }
}

/// One tool call.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CallRow {
    /// The instruction instance that makes it (the cassette's `step`).
    pub step: u64,
    pub seq_no: Option<i64>,
    pub tool: String,
    pub args: Map<String, Value>,
    pub state: CallState,
    pub output: Option<Value>,
    pub error: Option<String>,
    pub latency_ms: Option<u64>,
    /// The tokens it cost (an LLM's), when its server said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<plan_llm::Usage>,
    /// How many attempts it took, when more than one (the others failed and were
    /// retried).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// When it was sent (Unix ms): the time of the journal row that holds it as sent
    /// (None in a commit point being written).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<i64>,
}

/// What a write of a group added to its run's journal ([`RunStore::write_group`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wrote {
    /// A commit point's journal row, when it held calls or steps: its number and the
    /// time written on it. A run's event stream names its events by that number.
    pub entry: Option<(i64, i64)>,
}

/// What one commit point writes, in one transaction: the driver is about to wait for
/// calls (or the run ended). Calls are written as sent here, before the driver sends
/// them (the requests go out only when it waits), and the answers that arrived since the
/// last commit point come with it: a crash loses only the calls in flight.
#[derive(Debug, Default)]
pub struct CommitPoint {
    /// Calls about to be sent (`inflight` rows, replacing an earlier attempt's).
    pub sent: Vec<CallRow>,
    /// Calls answered since the last commit point (output or error, latency).
    pub answered: Vec<CallRow>,
    pub steps: Vec<StepRow>,
    /// Calls the run consumed since the last commit point (by `step`).
    pub committed: Vec<u64>,
    pub discarded: Vec<u64>,
    /// The VM state to continue from, with its step count (only now and then: see
    /// [`CHECKPOINT_INTERVAL`]).
    pub state: Option<(u64, String)>,
    /// Instructions committed in all (written with a state or the end).
    pub total_steps: u64,
    /// The run ended: its final row (the lease is released).
    pub end: Option<RunEnd>,
    /// The calls and steps already encoded as points of a journal entry: one or more
    /// point objects, comma-separated, without the array's brackets (what
    /// [`CommitPoint::write_entry`] writes), by a journal that encodes them as they come
    /// or a writer that joins several points of a run: then the row lists above are
    /// empty.
    pub encoded: Vec<u8>,
}

impl CommitPoint {
    /// The point's calls and steps as a journal entry (a JSON array; the format is in
    /// migrations/001_init.sql), or None when it holds none (a point that only saves the
    /// state or ends the run). Fails on bytes that are not UTF-8: a damaged entry is never
    /// stored (serde_json writes UTF-8 only, so only a bug gets there).
    pub fn journal_entry(&self) -> Result<Option<String>, StoreError> {
        let mut out = Vec::with_capacity(self.encoded.len() + 2);
        out.push(b'[');
        if !self.write_entry(&mut out) {
            return Ok(None);
        }
        out.push(b']');
        String::from_utf8(out).map(Some).map_err(|e| {
            StoreError::new(
                StoreErrorKind::Io,
                format!("internal: a journal entry is not UTF-8: {e}"),
            )
        })
    }

    /// Appends the point's calls and steps to `out` as JSON objects, comma-separated (one
    /// point of a journal entry, or the points [`CommitPoint::encoded`] holds); false,
    /// with nothing appended, when it holds none.
    pub fn write_entry(&self, out: &mut Vec<u8>) -> bool {
        if !self.encoded.is_empty() {
            debug_assert!(
                self.sent.is_empty()
                    && self.answered.is_empty()
                    && self.steps.is_empty()
                    && self.committed.is_empty()
                    && self.discarded.is_empty(),
                "a point holds rows or an encoded entry, not both"
            );
            out.extend_from_slice(&self.encoded);
            return true;
        }
        #[derive(Serialize)]
        struct Sent<'a> {
            step: u64,
            seq_no: Option<i64>,
            tool: &'a str,
            args: &'a Map<String, Value>,
        }
        #[derive(Serialize)]
        struct Answer<'a> {
            step: u64,
            #[serde(skip_serializing_if = "Option::is_none")]
            output: Option<&'a Value>,
            #[serde(skip_serializing_if = "Option::is_none")]
            error: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            latency_ms: Option<u64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            attempts: Option<u32>,
            #[serde(skip_serializing_if = "Option::is_none")]
            usage: Option<plan_llm::Usage>,
        }
        #[derive(Serialize)]
        struct Entry<'a> {
            #[serde(skip_serializing_if = "Vec::is_empty")]
            sent: Vec<Sent<'a>>,
            #[serde(skip_serializing_if = "Vec::is_empty")]
            answered: Vec<Answer<'a>>,
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            steps: &'a [StepRow],
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            committed: &'a [u64],
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            discarded: &'a [u64],
        }
        if self.sent.is_empty()
            && self.answered.is_empty()
            && self.steps.is_empty()
            && self.committed.is_empty()
            && self.discarded.is_empty()
        {
            return false;
        }
        let entry = Entry {
            sent: self
                .sent
                .iter()
                .map(|c| Sent {
                    step: c.step,
                    seq_no: c.seq_no,
                    tool: &c.tool,
                    args: &c.args,
                })
                .collect(),
            answered: self
                .answered
                .iter()
                .map(|c| Answer {
                    step: c.step,
                    output: c.output.as_ref(),
                    error: c.error.as_deref(),
                    latency_ms: c.latency_ms,
                    attempts: c.attempts,
                    usage: c.usage,
                })
                .collect(),
            steps: &self.steps,
            committed: &self.committed,
            discarded: &self.discarded,
        };
        let before = out.len();
        // NB: writing into a vector fails only for a map with non-string keys: none here.
        if serde_json::to_writer(&mut *out, &entry).is_err() {
            out.truncate(before);
            return false;
        }
        true
    }
}

/// How a run ended.
#[derive(Debug)]
pub struct RunEnd {
    pub ok: bool,
    /// Not ok and not failed: stopped at this question to a person (`{question,
    /// choices, seq_no}`), to go on once answered. NB: boxed: every commit point carries
    /// room for an end.
    pub question: Option<Box<Value>>,
    pub final_answer: Value,
    pub error: Option<Value>,
    /// The calls the run committed in all, when its journal knows them (it journaled the
    /// run from its start); None: the store counts them from the run's journal rows.
    pub tool_calls: Option<u64>,
    /// With `tool_calls`, the tokens its answers cost (None: none said); without, the
    /// store sums them from the run's journal rows.
    pub usage: Option<plan_llm::Usage>,
}

impl RunEnd {
    /// The status the run's row takes.
    pub fn status(&self) -> &'static str {
        match (self.ok, &self.question) {
            (true, _) => "ok",
            (false, Some(_)) => "needs_input",
            (false, None) => "failed",
        }
    }
}

/// A run about to start, owned (to hand to another thread).
#[derive(Clone, Debug)]
pub struct OwnedNewRun {
    pub id: String,
    pub plan: String,
    pub source: Option<String>,
    pub pbc: Vec<u8>,
    pub presets: Map<String, Value>,
    pub limits: plan_vm::Limits,
    pub parent: Option<(String, i64)>,
}

impl OwnedNewRun {
    pub fn borrow(&self) -> NewRun<'_> {
        NewRun {
            id: &self.id,
            plan: &self.plan,
            source: self.source.as_deref(),
            pbc: &self.pbc,
            presets: &self.presets,
            limits: &self.limits,
            parent: self.parent.as_ref().map(|(p, s)| (p.as_str(), *s)),
        }
    }
}

/// One write of a group commit ([`GroupStore`]).
#[derive(Debug)]
pub enum StoreWrite {
    Create(OwnedNewRun, Owner),
    /// Run id, its owner, and the point (its entry encoded by the run's own task, so the
    /// writer thread does not: [`CommitPoint::encoded`]).
    Commit(String, Owner, CommitPoint),
}

/// The process running a run: `host:pid:start.nonce`, where `start` is the process's
/// start time (from `/proc`, 0 where there is none) and `nonce` a random per-process
/// number: together they tell a process apart from a later one that got the same host
/// name and pid (a restarted container, a reused pid).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner(pub String);

impl Owner {
    /// This process (the same value for its whole life).
    pub fn this_process() -> Owner {
        Owner(this_process_id().to_owned())
    }

    /// One run of this process: this process, told apart from its other runs, so that a
    /// run it stopped holding (cancelled, then resumed by it) is fenced off from the
    /// later one.
    pub fn for_run() -> Owner {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Owner(format!("{}.{n}", Owner::this_process().0))
    }

    /// Whether this is this process, or one of its runs ([`Owner::for_run`]).
    pub fn is_this_process(&self) -> bool {
        let this = this_process_id();
        self.0 == this
            || self
                .0
                .strip_prefix(this)
                .is_some_and(|rest| rest.starts_with('.'))
    }

    /// Whether the owner is a process of this machine that no longer exists. `false`
    /// when that cannot be known (another machine, no `/proc`): the lease decides then.
    pub fn is_gone(&self) -> bool {
        self.on_this_host() == Some(false)
    }

    /// Whether the owner is certainly alive: a live process of this machine.
    pub fn is_alive_here(&self) -> bool {
        self.on_this_host() == Some(true)
    }

    /// Whether the owner is a live process of this machine (`true`), a process of this
    /// machine that is gone (`false`), or cannot be told (None).
    fn on_this_host(&self) -> Option<bool> {
        // NB: first, and with no system call: a service reads this of every run row.
        if self.is_this_process() {
            return Some(true);
        }
        let mut parts = self.0.rsplitn(3, ':');
        let (tail, pid, host) = (parts.next()?, parts.next()?, parts.next()?);
        if host != host_name() || !std::path::Path::new("/proc/self/stat").exists() {
            return None;
        }
        let Ok(pid) = pid.parse::<u32>() else {
            return Some(false);
        };
        let start: u64 = tail.split('.').next()?.parse().ok()?;
        // NB: the same pid with another start time is a later process.
        Some(pid != std::process::id() && start_time(pid) == Some(start))
    }
}

/// When process `pid` started (clock ticks since boot, `/proc/PID/stat` field 22); None
/// when there is no such process, or it has ended and only waits to be reaped (a
/// zombie: killed, its parent not done with it yet), which runs nothing.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // NB: after the command name, which may itself hold spaces and parentheses.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    if matches!(fields.next()?, "Z" | "X" | "x") {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// This process's [`Owner`] id (the same value for its whole life).
fn this_process_id() -> &'static str {
    static THIS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    THIS.get_or_init(|| {
        let pid = std::process::id();
        let start = start_time(pid).unwrap_or(0);
        let nonce = uuid::Uuid::now_v7().simple().to_string();
        format!("{}:{pid}:{start}.{}", host_name(), &nonce[20..])
    })
}

/// The machine's name as this process first read it: the name its owner id carries.
fn host_name() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|s| s.trim().to_owned())
            .or_else(|| std::env::var("HOSTNAME").ok())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "localhost".to_owned())
    })
}

/// A store failure: what went wrong, in words a user can act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreError {
    pub kind: StoreErrorKind,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreErrorKind {
    /// The file is not a planvm store, or from a newer planvm.
    NotAStore,
    /// What the store holds cannot be what planvm wrote: the file is malformed, or a row,
    /// a journal entry or a program is damaged or missing.
    Damaged,
    /// No run with that id.
    UnknownRun,
    /// The run id is taken.
    DuplicateRun,
    /// Another live process runs it, or took it over from this one.
    Busy,
    /// No store at that path (a command that only reads).
    NoStore,
    /// This process may not write the store (its file or directory is read-only to it).
    ReadOnly,
    /// The store is locked by another process for too long, or the disk failed.
    Io,
}

impl StoreError {
    pub(crate) fn new(kind: StoreErrorKind, message: impl Into<String>) -> StoreError {
        StoreError {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StoreError {}

/// The calls a durable run needs. One store may be shared by several processes; every
/// write is one transaction.
pub trait RunStore: Send {
    /// The store as messages name it (a path; never a secret).
    fn name(&self) -> &str;
    /// Stores the program (once per content hash) and creates run `run.id`, owned by
    /// `owner` and `running`.
    fn create_run(&mut self, run: &NewRun<'_>, owner: &Owner) -> Result<(), StoreError>;
    /// Creates `runs` held by nobody, for a worker to take up (`planvm submit`), in one
    /// transaction: all of them, or none when one's id is taken (`DuplicateRun`).
    fn submit(&mut self, runs: &[NewRun<'_>]) -> Result<(), StoreError>;
    /// Takes up to `n` runs that are ready for a worker (queued, or interrupted: held by
    /// nobody, or by a holder whose lease lapsed or that is gone), oldest first, each
    /// held from now on by a fresh `owner()` (a per-claim token: the run's commits are
    /// fenced with it), with a lease. Two workers never take the same run.
    fn reserve(
        &mut self,
        n: usize,
        owner: &mut dyn FnMut() -> Owner,
    ) -> Result<Vec<(String, Owner)>, StoreError>;
    /// Deletes the runs that ended `ok` (and `failed`, unless `keep_failed`) before
    /// `before` (Unix ms), with their journals and states; a run another was branched
    /// from, or one a person gave a verdict on, is kept. How many went.
    fn prune(&mut self, before: i64, keep_failed: bool) -> Result<u64, StoreError>;
    /// The position in `ids` of the first that names a run of this store, if any (a
    /// batch checks its runs' ids before it starts).
    fn first_taken(&mut self, ids: &[&str]) -> Result<Option<usize>, StoreError>;
    /// Takes over run `id` to continue it. Refused (`Busy`) while another live process
    /// holds it, once it has finished, and when its journal is no longer `seen` (its last
    /// entry's number, [`RunStore::journal_head`], when the caller read the run): another
    /// process went on with the run meanwhile, and what the caller read is stale.
    fn claim(&mut self, id: &str, owner: &Owner, seen: Seen) -> Result<(), StoreError>;
    /// Ends run `id` as failed with `error` unless it has finished: it is no longer any
    /// process's (a process running it has its next commit point refused, which ends its
    /// run there). `false`: it had finished (ok or failed), and is left as it was.
    fn cancel(&mut self, id: &str, error: &Value) -> Result<bool, StoreError>;
    /// The number of the run's last journal entry (None: none yet).
    fn journal_head(&self, id: &str) -> Result<Option<i64>, StoreError>;
    /// Lets go of run `id` if `owner` still holds it unfinished (its process stops running
    /// it): it reads as interrupted at once, not held until the process ends.
    fn release(&mut self, id: &str, owner: &Owner) -> Result<(), StoreError>;
    /// Extends the leases of `owners` on every run they are running and every goal they
    /// are asking, in one statement where the store can.
    fn renew(&mut self, owners: &[Owner]) -> Result<(), StoreError>;
    /// A commit point of `owner`'s, in one transaction; refused (`Busy`) when another
    /// process has taken the run over.
    fn commit(&mut self, id: &str, owner: &Owner, point: &CommitPoint) -> Result<(), StoreError>;
    /// Several writes (of several runs) in one transaction: one result per write, with
    /// the journal row a commit point added. A write refused on its own (a duplicate run
    /// id) leaves the others; a failure of the transaction fails them all.
    fn write_group(&mut self, writes: &[&StoreWrite]) -> Vec<Result<Wrote, StoreError>>;

    fn run(&self, id: &str) -> Result<RunInfo, StoreError>;
    /// Every run, oldest first.
    fn runs(&self) -> Result<Vec<RunInfo>, StoreError>;
    /// At most `limit` runs created before `before` (a run's creation time and id; None:
    /// from the newest), newest first: a page of a long list, read without the rest.
    fn runs_before(
        &self,
        before: Option<(i64, &str)>,
        limit: usize,
    ) -> Result<Vec<RunInfo>, StoreError>;
    /// The runs whose ids start with `prefix` (a batch's runs), oldest first; a damaged
    /// row of another run does not stop it.
    fn runs_under(&self, prefix: &str) -> Result<Vec<RunInfo>, StoreError>;
    /// Fails when what was read through this connection may mix two states of the store
    /// (a store read as it is, that a process wrote meanwhile). A caller that read several
    /// things checks it before it shows them.
    fn unchanged(&self) -> Result<(), StoreError> {
        Ok(())
    }
    fn program(&self, hash: &str) -> Result<StoredProgram, StoreError>;
    fn steps(&self, id: &str) -> Result<Vec<StepRow>, StoreError>;
    /// Every call of the run, in step order.
    fn calls(&self, id: &str) -> Result<Vec<CallRow>, StoreError>;
    /// Folds the entries of run `id`'s journal after the last one `fold` holds into it
    /// (all of them into a new fold): its steps and calls then read as [`RunStore::steps`]
    /// and [`RunStore::calls`] would.
    fn fold_journal(&self, id: &str, fold: &mut JournalFold) -> Result<(), StoreError>;
    /// Run `id`'s row, and its journal folded on into `fold` as
    /// [`RunStore::fold_journal`] does, read as of one moment where the store can (else
    /// the row first): a row read as ended comes with every entry up to its end.
    fn run_journal(&self, id: &str, fold: &mut JournalFold) -> Result<RunInfo, StoreError> {
        let row = self.run(id)?;
        self.fold_journal(id, fold)?;
        Ok(row)
    }
    /// The latest commit point: (instructions committed, VmState JSON).
    fn checkpoint(&self, id: &str) -> Result<Option<(u64, String)>, StoreError>;

    /// Stores goal `goal.id`, open and owned by `owner` under a lease (`DuplicateRun` when
    /// the id is a goal's or a run's already).
    fn create_goal(&mut self, goal: &NewGoal<'_>, owner: &Owner) -> Result<(), StoreError>;
    /// Stores `goals` held by nobody, for a worker to ask (`planvm submit --goal`), in one
    /// transaction: all of them, or none when one's id is taken (`DuplicateRun`).
    fn submit_goals(&mut self, goals: &[NewGoal<'_>]) -> Result<(), StoreError>;
    /// Takes up to `n` goals ready for a worker (queued, or open under a lease that
    /// lapsed), oldest first, each held from now on by a fresh `owner()` with a lease. Two
    /// workers never take the same goal.
    fn reserve_goals(
        &mut self,
        n: usize,
        owner: &mut dyn FnMut() -> Owner,
    ) -> Result<Vec<(String, Owner)>, StoreError>;
    /// Ends open (or waiting) goal `id`: answered with `Ok(answer)`, failed with
    /// `Err({code, message})`; only while `by` holds it, when given (a worker that lost
    /// the goal cannot end it). `false`: it had ended, or `by` no longer holds it, and it
    /// is left as it was.
    fn end_goal(
        &mut self,
        id: &str,
        by: Option<&Owner>,
        outcome: Result<&Value, &Value>,
    ) -> Result<bool, StoreError>;
    /// Takes over open goal `id` whose owner is gone (its process died, or its lease
    /// lapsed): `false` when it has ended or its owner may be alive.
    fn take_goal(&mut self, id: &str, owner: &Owner) -> Result<bool, StoreError>;
    /// Open goal `id` waits for a person, as its run `run` does (stopped at a question);
    /// `false` when the goal was not open or the run no longer waits (answered already).
    fn goal_needs_input(&mut self, id: &str, run: &str) -> Result<bool, StoreError>;
    /// Goal `id`, waiting for a person (or open: its process is gone, or is about to mark
    /// it waiting), is `owner`'s and open (its run goes on); `false` when it has ended.
    fn reopen_goal(&mut self, id: &str, owner: &Owner) -> Result<bool, StoreError>;
    /// Goal `id`, if there is one.
    fn goal(&self, id: &str) -> Result<Option<GoalInfo>, StoreError>;
    /// Every goal, oldest first.
    fn goals(&self) -> Result<Vec<GoalInfo>, StoreError>;
    /// At most `limit` goals created before `before`, newest first (see
    /// [`RunStore::runs_before`]).
    fn goals_before(
        &self,
        before: Option<(i64, &str)>,
        limit: usize,
    ) -> Result<Vec<GoalInfo>, StoreError>;
    /// Stores round `round.round` of goal `goal`, in place of any earlier one of that
    /// number; round 0 first forgets every earlier round (a goal asked again from the
    /// start).
    fn save_goal_round(&mut self, goal: &str, round: &GoalRound) -> Result<(), StoreError>;
    /// The planning rounds of goal `goal`, in order.
    fn goal_rounds(&self, goal: &str) -> Result<Vec<GoalRound>, StoreError>;
    /// The ids of the runs branched from run `id` (re-plans included), oldest first.
    fn children(&self, id: &str) -> Result<Vec<String>, StoreError>;
    /// The goals of session `id`, oldest first.
    fn session_goals(&self, id: &str) -> Result<Vec<GoalInfo>, StoreError>;
    /// Every session, oldest first.
    fn sessions(&self) -> Result<Vec<SessionInfo>, StoreError>;
    /// Session `id`'s summary: the last goal it covers, and its text.
    fn summary(&self, id: &str) -> Result<Option<(String, String)>, StoreError>;
    /// Stores session `id`'s summary of its goals up to `upto`, in place of the last.
    fn save_summary(&mut self, id: &str, upto: &str, summary: &str) -> Result<(), StoreError>;
    /// Stores a new evaluation `id` of `dataset`; a taken id is `DuplicateRun`.
    fn create_eval(&mut self, id: &str, dataset: &str) -> Result<(), StoreError>;
    /// Stores (or replaces) a case of evaluation `eval`.
    fn save_eval_case(&mut self, eval: &str, case: &EvalCase) -> Result<(), StoreError>;
    /// Ends evaluation `id` with its report's summary.
    fn end_eval(&mut self, id: &str, summary: &Value) -> Result<(), StoreError>;
    /// Every evaluation, oldest first.
    fn evals(&self) -> Result<Vec<EvalInfo>, StoreError>;
    /// The cases of evaluation `id`, in the order they were stored.
    fn eval_cases(&self, id: &str) -> Result<Vec<EvalCase>, StoreError>;
    /// The latest evaluation case asked as goal `goal`, with its evaluation's id.
    fn eval_case_of_goal(&self, goal: &str) -> Result<Option<(String, EvalCase)>, StoreError>;
    /// The tokens of the planner's reply that wrote run `run`'s plan: its `usage` counts
    /// them with its calls'.
    fn set_planner_usage(&mut self, run: &str, usage: &plan_llm::Usage) -> Result<(), StoreError>;
    /// A person's verdict on run `run`, in place of any earlier one; `UnknownRun` when
    /// there is no such run.
    fn set_feedback(&mut self, run: &str, feedback: &Feedback) -> Result<(), StoreError>;
    /// The person's verdict on run `run`, if any.
    fn feedback(&self, run: &str) -> Result<Option<Feedback>, StoreError>;
}

/// What a caller read of a run before claiming it: the claim is refused when the run
/// changed since (it went on in another process, ended, or was cancelled).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// The number of its last journal entry ([`RunStore::journal_head`]).
    pub journal_head: Option<i64>,
    /// Its row's `updated_at` (None: not checked).
    pub updated_at: Option<i64>,
}

impl Seen {
    /// A run whose last journal entry was `journal_head`.
    pub fn head(journal_head: Option<i64>) -> Seen {
        Seen {
            journal_head,
            updated_at: None,
        }
    }
}

/// A new sortable run id (UUID v7: ordered by creation time).
pub fn new_run_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// The characters a run id may hold.
fn id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// A run id made of `name`: characters outside `[A-Za-z0-9._-]` become `_`, and it is
/// cut to 128 bytes.
pub fn run_id_from(name: &str) -> String {
    let mut id: String = name
        .chars()
        .map(|c| if id_char(c) { c } else { '_' })
        .collect();
    id.truncate(128);
    if id.is_empty() {
        id.push('_');
    }
    id
}

/// Checks a user-chosen run id: 1 to 128 characters from `[A-Za-z0-9._-]`, so ids are
/// safe in file names and shells.
pub fn check_run_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > 128 {
        return Err("a run id has 1 to 128 characters".into());
    }
    if let Some(c) = id.chars().find(|&c| !id_char(c)) {
        return Err(format!(
            "a run id may contain letters, digits, `.`, `_` and `-`, not {c:?}"
        ));
    }
    Ok(())
}

/// The saved successful answers of a run, as a resumed run reuses them.
pub fn known_answers(calls: &[CallRow]) -> Vec<plan_host::CassetteEntry> {
    calls
        .iter()
        .filter_map(|c| {
            Some(plan_host::CassetteEntry {
                tool: c.tool.clone(),
                args: c.args.clone(),
                output: c.output.clone()?,
                latency_ms: c.latency_ms,
                step: Some(c.step),
                usage: None,
            })
        })
        .collect()
}

/// The time now, in Unix milliseconds (as the store writes times).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_goals_runs_are_its_id_then_numbered_from_2() {
        assert_eq!(goal_run_id("g", 1), "g");
        assert_eq!(goal_run_id("g", 3), "g.3");
        assert_eq!(goal_run_number("g", "g"), Some(1));
        assert_eq!(goal_run_number("g", "g.2"), Some(2));
        for not in ["g.1", "g.02", "g.x", "g2", "h", "g.2.3", "g."] {
            assert_eq!(goal_run_number("g", not), None, "{not}");
        }
    }

    /// A killed process that its parent has not reaped yet holds no run.
    #[test]
    fn a_process_killed_but_not_reaped_is_gone() {
        if start_time(std::process::id()).is_none() {
            return; // no /proc here: the lease decides.
        }
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let start = start_time(pid).unwrap();
        let owner = Owner(format!("{}:{pid}:{start}.0123456789ab", host_name()));
        assert!(owner.is_alive_here());
        child.kill().unwrap();
        // NB: not waited for (a zombie) until the state says so.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !owner.is_gone() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(owner.is_gone(), "a zombie holds its runs");
        child.wait().unwrap();
        assert!(owner.is_gone());
    }
}
