//! What both stores read the same way: a run's journal entries as its steps and calls,
//! and the status of a run or a goal from its stored row (`running` is `interrupted` once
//! its holder is gone).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::{CallRow, CallState, GoalStatus, Owner, RunStatus, StepRow, StoreError};

/// One point of a journal entry as read back for its calls (see migrations/001_init.sql
/// and [`crate::CommitPoint::journal_entry`]); its steps are skipped unread.
#[derive(Default, Deserialize)]
pub(crate) struct CallsPoint {
    #[serde(default)]
    sent: Vec<Sent>,
    #[serde(default)]
    answered: Vec<Answer>,
    #[serde(default)]
    committed: Vec<u64>,
    #[serde(default)]
    discarded: Vec<u64>,
    /// The run was cancelled here: its calls in flight end (see [`CANCEL_ENTRY`]).
    #[serde(default)]
    cancelled: bool,
}

/// The journal entry a cancel writes: the run's calls in flight end as cancelled.
pub(crate) const CANCEL_ENTRY: &str = r#"[{"cancelled":true}]"#;

/// One point of a journal entry as read back for its steps.
#[derive(Default, Deserialize)]
pub(crate) struct StepsPoint {
    #[serde(default)]
    steps: Vec<StepRow>,
}

#[derive(Deserialize)]
struct Sent {
    step: u64,
    seq_no: Option<i64>,
    tool: String,
    args: Map<String, Value>,
}

#[derive(Deserialize)]
struct Answer {
    step: u64,
    #[serde(default)]
    output: Option<Value>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    latency_ms: Option<u64>,
    #[serde(default)]
    attempts: Option<u32>,
    #[serde(default)]
    usage: Option<plan_llm::Usage>,
}

/// The points of a run's journal, in order, each with the time of its row: what `read`
/// hands each entry it reads (its number, its time, its points) to.
pub(crate) fn points<P>(
    read: impl FnOnce(&mut dyn FnMut(i64, i64, Vec<P>)) -> Result<(), StoreError>,
) -> Result<Vec<(i64, P)>, StoreError> {
    let mut out = Vec::new();
    read(&mut |_, at, points| out.extend(points.into_iter().map(|p| (at, p))))?;
    Ok(out)
}

/// One point of a journal entry, read whole (see [`JournalFold`]). NB: the fields of
/// [`StepsPoint`] and [`CallsPoint`] together: each of those skips unread the half its
/// reader does not need.
#[derive(Default, Deserialize)]
pub(crate) struct Point {
    #[serde(default)]
    steps: Vec<StepRow>,
    #[serde(default)]
    sent: Vec<Sent>,
    #[serde(default)]
    answered: Vec<Answer>,
    #[serde(default)]
    committed: Vec<u64>,
    #[serde(default)]
    discarded: Vec<u64>,
    #[serde(default)]
    cancelled: bool,
}

/// A run's committed steps from its journal's points in order: a later point about the
/// same step wins (a resumed run re-executes steps after its last saved state).
pub(crate) fn steps(points: Vec<(i64, StepsPoint)>) -> Vec<StepRow> {
    let mut steps: BTreeMap<u64, StepRow> = BTreeMap::new();
    for (_, e) in points {
        fold_steps(&mut steps, e.steps);
    }
    steps.into_values().collect()
}

fn fold_steps(into: &mut BTreeMap<u64, StepRow>, steps: Vec<StepRow>) {
    for s in steps {
        into.insert(s.step, s);
    }
}

/// A run's calls from its journal's points in order, each with the time of its row.
pub(crate) fn calls(points: Vec<(i64, CallsPoint)>) -> Vec<CallRow> {
    let mut calls: BTreeMap<u64, CallRow> = BTreeMap::new();
    for (at, e) in points {
        fold_calls(&mut calls, at, e);
    }
    calls.into_values().collect()
}

fn fold_calls(calls: &mut BTreeMap<u64, CallRow>, at: i64, e: CallsPoint) {
    for c in e.sent {
        calls.insert(
            c.step,
            CallRow {
                step: c.step,
                seq_no: c.seq_no,
                tool: c.tool,
                args: c.args,
                state: CallState::Inflight,
                output: None,
                error: None,
                latency_ms: None,
                usage: None,
                attempts: None,
                sent_at: Some(at),
            },
        );
    }
    for a in e.answered {
        if let Some(c) = calls.get_mut(&a.step) {
            c.state = CallState::Answered;
            c.output = a.output;
            c.error = a.error;
            c.latency_ms = a.latency_ms;
            c.usage = a.usage;
            c.attempts = a.attempts;
        }
    }
    for (steps, state) in [
        (e.committed, CallState::Committed),
        (e.discarded, CallState::Discarded),
    ] {
        for s in steps {
            // NB: a call with no recorded answer stays in flight (unknown), even if the
            // run consumed a failure for it (a write that timed out).
            if let Some(c) = calls.get_mut(&s)
                && c.state != CallState::Inflight
            {
                c.state = state;
            }
        }
    }
    if e.cancelled {
        for c in calls.values_mut() {
            if c.state == CallState::Inflight {
                c.state = CallState::Cancelled;
            }
        }
    }
}

/// A run's steps and calls as [`crate::RunStore::steps`] and [`crate::RunStore::calls`]
/// read them, folded on entry by entry ([`crate::RunStore::fold_journal`]): a reader that
/// follows a run (an event stream) reads and parses only the entries written since its
/// last look, so following a run costs what the run wrote, not that times its looks.
#[derive(Clone, Debug, Default)]
pub struct JournalFold {
    head: Option<i64>,
    steps: BTreeMap<u64, StepRow>,
    calls: BTreeMap<u64, CallRow>,
    /// What each entry folded in since the last [`JournalFold::take_entries`] changed.
    entries: Vec<EntryChange>,
}

/// What one journal entry changed, as a reader that follows the run in journal order
/// (an event stream) needs it: the same entries give the same changes, however many
/// looks they were read in.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EntryChange {
    /// The entry's number: it grows along a run's journal.
    pub seq: i64,
    /// The steps it committed, in order (a resumed run may commit a step again).
    pub steps: Vec<u64>,
    /// The calls it recorded as sent, by the step that made them.
    pub sent: Vec<u64>,
}

impl JournalFold {
    /// The number of the last entry folded in (None: none yet).
    pub fn head(&self) -> Option<i64> {
        self.head
    }

    /// The committed steps, by number.
    pub fn steps(&self) -> &BTreeMap<u64, StepRow> {
        &self.steps
    }

    /// The calls, by the step that made them.
    pub fn calls(&self) -> &BTreeMap<u64, CallRow> {
        &self.calls
    }

    /// What each entry folded in since the last call changed, in journal order.
    pub fn take_entries(&mut self) -> Vec<EntryChange> {
        std::mem::take(&mut self.entries)
    }

    /// Folds in entry `seq`, written at `at`, from its text (a JSON array of points, as
    /// the store holds it and [`crate::Written::text`] makes it). An entry at or before the
    /// last one folded in is left out: it is in already.
    pub fn apply_text(&mut self, seq: i64, at: i64, text: &str) -> Result<(), serde_json::Error> {
        if self.head.is_some_and(|h| seq <= h) {
            return Ok(());
        }
        let points: Vec<Point> = serde_json::from_str(text)?;
        self.apply(seq, at, points);
        Ok(())
    }

    /// Folds in entry `seq`, written at `at`.
    pub(crate) fn apply(&mut self, seq: i64, at: i64, points: Vec<Point>) {
        let mut change = EntryChange {
            seq,
            ..EntryChange::default()
        };
        for p in points {
            change.steps.extend(p.steps.iter().map(|s| s.step));
            change.sent.extend(p.sent.iter().map(|c| c.step));
            fold_steps(&mut self.steps, p.steps);
            let calls = CallsPoint {
                sent: p.sent,
                answered: p.answered,
                committed: p.committed,
                discarded: p.discarded,
                cancelled: p.cancelled,
            };
            fold_calls(&mut self.calls, at, calls);
        }
        self.entries.push(change);
        self.head = Some(seq);
    }
}

/// Whether `holder` (of a `running` run) still holds it: a live process of this machine
/// whatever its lease says, else a holder whose lease runs and that is not known gone.
pub(crate) fn holds(holder: &str, lease: Option<i64>, now: i64) -> bool {
    let holder = Owner(holder.to_owned());
    holder.is_alive_here() || (lease.is_some_and(|l| l >= now) && !holder.is_gone())
}

/// A run's status from its row's `status`, holder and lease, at `now`.
pub(crate) fn run_status(
    stored: &str,
    owner: Option<&str>,
    lease: Option<i64>,
    now: i64,
) -> RunStatus {
    match stored {
        "ok" => RunStatus::Ok,
        "failed" => RunStatus::Failed,
        "needs_input" => RunStatus::NeedsInput,
        _ if owner.is_none() && lease == Some(crate::QUEUED) => RunStatus::Queued,
        _ if owner.is_some_and(|o| holds(o, lease, now)) => RunStatus::Running,
        _ => RunStatus::Interrupted,
    }
}

/// A goal's status from its row's `status`, asker and lease, at `now`. A goal stored
/// without a lease (by an older planrt) is its asker's while that process may be alive.
pub(crate) fn goal_status(
    stored: &str,
    owner: Option<&str>,
    lease: Option<i64>,
    now: i64,
) -> GoalStatus {
    match stored {
        "answered" => GoalStatus::Answered,
        "failed" => GoalStatus::Failed,
        "needs_input" => GoalStatus::NeedsInput,
        _ if owner.is_none() && lease == Some(crate::QUEUED) => GoalStatus::Queued,
        _ if owner.is_some_and(|o| holds_goal(o, lease, now)) => GoalStatus::Open,
        _ => GoalStatus::Interrupted,
    }
}

/// Whether `holder` still asks an open goal (see [`goal_status`]): its lease runs and it
/// is not known gone. Unlike a run's, a goal's lease alone decides for a live process of
/// this machine, as it does for the workers that take goals whose lease lapsed.
pub(crate) fn holds_goal(holder: &str, lease: Option<i64>, now: i64) -> bool {
    let gone = Owner(holder.to_owned()).is_gone();
    !gone && lease.is_none_or(|l| l >= now)
}

/// The tokens of a run's calls and of the planner's replies that wrote it, together.
pub(crate) fn add_usage(
    calls: Option<plan_llm::Usage>,
    planner: Option<plan_llm::Usage>,
) -> Option<plan_llm::Usage> {
    match (calls, planner) {
        (Some(mut a), Some(b)) => {
            a += b;
            Some(a)
        }
        (a, b) => a.or(b),
    }
}
