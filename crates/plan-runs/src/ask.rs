//! `ask` with a store: the goal is a row of its own from the moment it is asked
//! ([`create_goal`]), ended with the ask's outcome; each plan the planner writes that runs
//! is a stored run, `ID`, then `ID.2`, `ID.3`, ... A re-plan's run is a branch of the run
//! it replaces, from its first instruction (it starts over, answering the calls already
//! made from their stored answers), so the store shows every version of the plan. Every
//! round's reply is kept with the goal as well ([`GoalRound`]): those that never ran too.

use plan_host::{Journal, TraceEvent};
use plan_planner::{AskOutcome, AskStatus, Conversation, PlanRun, Planned, Planner, RunSink, Turn};
use plan_store::{GoalInfo, GoalRound, GoalStatus, NewGoal, NewRun, Owner, RunInfo, RunStore};
use serde_json::{Map, Value, json};

use crate::open::Access;
use crate::{Error, ErrorKind, Held, StoreAt};

/// Stores goal `goal` as open under `id` (a new id when None), before anything is asked;
/// its id.
pub fn create_goal(
    at: &StoreAt,
    id: Option<&str>,
    (goal, response_format, session): (&str, Option<&Value>, Option<&str>),
    request: &Value,
) -> Result<String, Error> {
    if let Some(s) = session {
        plan_store::check_run_id(s)
            .map_err(|e| Error::new(ErrorKind::BadRunId, format!("session `{s}`: {e}")))?;
    }
    let id = id.map_or_else(plan_store::new_run_id, str::to_owned);
    plan_store::check_run_id(&id)
        .map_err(|e| Error::new(ErrorKind::BadRunId, format!("run id `{id}`: {e}")))?;
    at.open(Access::Create)?.create_goal(
        &NewGoal {
            id: &id,
            goal,
            response_format,
            request,
            session,
        },
        &Owner::this_process(),
    )?;
    Ok(id)
}

/// Ends goal `id` with `outcome`: answered, or failed with `{code, message}`; a goal that
/// had ended is left as it was.
pub fn end_goal(at: &StoreAt, id: &str, outcome: Result<&Value, &Value>) -> Result<(), Error> {
    end_goal_by(at, id, None, outcome)
}

/// [`end_goal`], only while `by` holds the goal when given.
fn end_goal_by(
    at: &StoreAt,
    id: &str,
    by: Option<&Owner>,
    outcome: Result<&Value, &Value>,
) -> Result<(), Error> {
    at.open(Access::Existing)?.end_goal(id, by, outcome)?;
    Ok(())
}

/// Goal `id` waits for a person, as its run `run` does (stopped at a question).
pub fn goal_needs_input(at: &StoreAt, id: &str, run: &str) -> Result<(), Error> {
    at.open(Access::Existing)?.goal_needs_input(id, run)?;
    Ok(())
}

/// Ends goal `id` (open, this process's, or `by`'s when given) as its run `report`
/// ended: answered, failed, or waiting again for a person.
pub(crate) fn settle_goal(
    store: &mut dyn RunStore,
    (id, run): (&str, &str),
    by: Option<&Owner>,
    report: &plan_host::RunReport,
) -> Result<(), Error> {
    match report.status {
        plan_host::RunStatus::Ok => store.end_goal(id, by, Ok(&report.final_answer))?,
        plan_host::RunStatus::NeedsInput => store.goal_needs_input(id, run)?,
        // NB: left open, this process's: it reads as interrupted once the process is
        // gone, and is taken up with its run.
        plan_host::RunStatus::Stopped => false,
        plan_host::RunStatus::Failed => {
            let message = report
                .error
                .as_ref()
                .map_or("the run failed", |e| e.message.as_str());
            let error = json!({"code": "run_failed", "message": message});
            store.end_goal(id, by, Err(&error))?
        }
    };
    Ok(())
}

/// The goal stored run `run` is a run of (`ID`, `ID.2`, ...), if any.
pub fn goal_of_run(store: &dyn RunStore, run: &str) -> Result<Option<GoalInfo>, Error> {
    let base = match run.rsplit_once('.') {
        Some((base, n)) if n.parse::<usize>().is_ok_and(|n| n >= 2) => base,
        _ => run,
    };
    Ok(store
        .goal(base)?
        .filter(|g| plan_store::goal_run_number(&g.id, run).is_some()))
}

/// Sets what `planner` is told of session `session` before goal `goal` (the goal being
/// asked, if it is stored already): the session's goals before it that ended and what
/// became of them, the oldest summarized (by `planner`'s LLM, once, then stored and
/// reused) when they are over `[planner] memory_tokens`. A summary that cannot be made
/// leaves the rounds whole: the warning says why.
pub async fn remember(
    planner: &mut Planner<'_>,
    at: &StoreAt,
    (session, goal): (&str, Option<&str>),
) -> Result<Option<String>, Error> {
    let budget = planner
        .host
        .manifest()
        .planner
        .as_ref()
        .and_then(|p| p.memory_tokens)
        .unwrap_or(plan_planner::DEFAULT_MEMORY_TOKENS);
    let conversation = stored_conversation(at, session, goal)?;
    let Some(fold) = conversation.over_budget(budget) else {
        planner.options.conversation = conversation;
        return Ok(None);
    };
    match planner.summarize(conversation.summary_prompt(fold)).await {
        Ok(text) => {
            let (folded, summary) = conversation.folded(fold, text);
            at.open(Access::Existing)?
                .save_summary(session, &summary.upto, &summary.text)?;
            planner.options.conversation = folded;
            Ok(None)
        }
        Err(why) => {
            planner.options.conversation = conversation;
            Ok(Some(format!(
                "session `{session}`: its earlier rounds could not be summarized ({why}); \
                 the planner is told them whole"
            )))
        }
    }
}

/// Session `session` as the store holds it before goal `goal` (all of it when None): its
/// stored summary and the ended goals after it (none for a session not begun, or a store
/// not made yet).
pub fn stored_conversation(
    at: &StoreAt,
    session: &str,
    goal: Option<&str>,
) -> Result<Conversation, Error> {
    let store = match at.open(Access::Read) {
        Ok(s) => s,
        Err(e) if e.kind == ErrorKind::NoStore => return Ok(Conversation::default()),
        Err(e) => return Err(e),
    };
    let goals = store.session_goals(session)?;
    let summary = store.summary(session)?;
    let mut conversation = conversation_of(&goals, summary, goal);
    for turn in &mut conversation.turns {
        turn.vars = key_vars(&*store, &turn.id);
    }
    Ok(conversation)
}

/// The key variables of goal `id`'s last plan ([`Turn::key_vars`]), from its run's
/// journal: each variable's last kept value, in the order the plan first set them. None
/// when it cannot be read: the round is still told by its goal and answer.
fn key_vars(store: &dyn RunStore, id: &str) -> Vec<String> {
    let Ok(Some(run)) = goal_runs(store, id).map(|mut runs| runs.pop()) else {
        return Vec::new();
    };
    let Ok(steps) = store.steps(&run.id) else {
        return Vec::new();
    };
    // NB: None: its last value was too large to keep in the journal, so not a key one.
    let mut order: Vec<&str> = Vec::new();
    let mut last: std::collections::HashMap<&str, Option<&Value>> =
        std::collections::HashMap::new();
    for step in &steps {
        let written = step.writes.iter().map(|(n, v)| (n, Some(v)));
        for (name, value) in written.chain(step.omitted.keys().map(|n| (n, None))) {
            if last.insert(name, value).is_none() {
                order.push(name);
            }
        }
    }
    Turn::key_vars(order.into_iter().filter_map(|n| Some((n, last[n]?))))
}

/// A session's conversation from its goals (oldest first) and its stored summary: the
/// goals the summary covers are left out, and it stops at goal `before` and at the first
/// goal still being asked (so that a summary never covers a goal that has not ended; an
/// interrupted one is left out).
fn conversation_of(
    goals: &[GoalInfo],
    summary: Option<(String, String)>,
    before: Option<&str>,
) -> Conversation {
    let after = summary
        .as_ref()
        .and_then(|(upto, _)| goals.iter().position(|g| g.id == *upto))
        .map_or(0, |i| i + 1);
    let turns = goals[after..]
        .iter()
        .take_while(|g| {
            Some(g.id.as_str()) != before
                && !matches!(
                    g.status,
                    GoalStatus::Open | GoalStatus::NeedsInput | GoalStatus::Queued
                )
        })
        .filter(|g| matches!(g.status, GoalStatus::Answered | GoalStatus::Failed))
        .map(|g| Turn {
            vars: Vec::new(),
            id: g.id.clone(),
            goal: g.goal.clone(),
            answer: g.answer.clone(),
            error: g
                .error
                .as_ref()
                .map(|e| e["message"].as_str().unwrap_or("failed").to_owned()),
        })
        .collect();
    Conversation {
        summary: summary.filter(|_| after > 0).map(|(_, text)| text),
        turns,
    }
}

/// The runs of goal `id` in order (`ID`, `ID.2`, ...).
pub fn goal_runs(store: &dyn RunStore, id: &str) -> Result<Vec<RunInfo>, Error> {
    let mut runs: Vec<(usize, RunInfo)> = store
        .runs_under(id)?
        .into_iter()
        .filter_map(|r| Some((plan_store::goal_run_number(id, &r.id)?, r)))
        .collect();
    runs.sort_by_key(|(n, _)| *n);
    Ok(runs.into_iter().map(|(_, r)| r).collect())
}

/// How an ask that did not answer failed, as a goal's `error`: `{code, message}`.
pub fn goal_error(outcome: &AskOutcome) -> Value {
    let code = outcome.status.as_str();
    let message = outcome
        .error
        .as_deref()
        .unwrap_or("the goal was not answered");
    json!({"code": code, "message": message})
}

/// Where the runs of one `ask` go.
pub struct AskStore<'a> {
    pub at: StoreAt,
    /// The goal, stored ([`create_goal`]): its runs are `ID`, `ID.2`, ...; it is ended
    /// with the ask's outcome.
    pub goal_id: String,
    /// Who holds the goal (it is ended, and its plans run, only while that holds): the
    /// token a worker took it from the queue with; None: this process, which stored it.
    pub owner: Option<Owner>,
    /// Hears every event as well (a trace).
    pub also: &'a mut dyn Journal,
    pub warn: fn(&Error),
    /// Hears each run's id as it starts (so that a person can find it while it runs).
    pub started: fn(&str),
}

/// What an `ask` with a store did.
pub struct AskStored {
    pub outcome: AskOutcome,
    /// The ids of its runs, in order.
    pub runs: Vec<String>,
    /// The store could not take a run: the ask ended there.
    pub failed: Option<Error>,
}

/// Asks `planner` for `goal`, each run stored as `store` says, and ends the goal with the
/// outcome.
pub async fn ask(
    planner: &Planner<'_>,
    goal: &str,
    response_format: Option<&Value>,
    store: AskStore<'_>,
) -> AskStored {
    // NB: the goal's lease is renewed while it is asked, so that no worker takes it up
    // meanwhile (a planner may think for minutes with no run going).
    let holder = store.owner.clone().unwrap_or_else(Owner::this_process);
    let _lease = store.at.lease(holder.clone(), store.warn);
    let mut sink = Sink {
        store,
        holder,
        current: None,
        ids: Vec::new(),
        failed: None,
    };
    let outcome = planner.ask_into(goal, response_format, &mut sink).await;
    let Sink {
        store,
        holder,
        ids,
        failed,
        ..
    } = sink;
    let (at, id, by) = (&store.at, store.goal_id.as_str(), Some(&holder));
    let ended = match (&failed, outcome.status) {
        // NB: another process took the goal over: it is theirs to end.
        (Some(e), _) if e.kind == ErrorKind::Busy => Ok(()),
        (Some(e), _) => end_goal_by(at, id, by, Err(&e.to_json())),
        (None, AskStatus::Answered) => end_goal_by(at, id, by, Ok(&outcome.answer)),
        // NB: not ended: it waits with its run, and ends when the run does.
        (None, AskStatus::NeedsInput) => match ids.last() {
            Some(run) => goal_needs_input(&store.at, &store.goal_id, run),
            None => Ok(()),
        },
        // NB: left open with its run: both read as interrupted once this process is
        // gone, and are taken up together.
        (None, AskStatus::Stopped) => Ok(()),
        (None, _) => end_goal_by(at, id, by, Err(&goal_error(&outcome))),
    };
    AskStored {
        outcome,
        runs: ids,
        failed: failed.or(ended.err()),
    }
}

struct Sink<'a> {
    store: AskStore<'a>,
    /// Who holds the goal ([`AskStore::owner`]).
    holder: Owner,
    current: Option<Held>,
    ids: Vec<String>,
    failed: Option<Error>,
}

impl Sink<'_> {
    /// Refused once the goal has ended (it was cancelled), or another process took it
    /// over: no run starts after that.
    fn goal_open(&self) -> Result<(), Error> {
        self.goal_open_in(&*self.store.at.open(Access::Existing)?)
    }

    /// [`Sink::goal_open`], read from `store`.
    fn goal_open_in(&self, store: &dyn RunStore) -> Result<(), Error> {
        match store.goal(&self.store.goal_id)? {
            Some(g) if g.status != plan_store::GoalStatus::Open => Err(Error::new(
                ErrorKind::Cancelled,
                format!("goal `{}` has ended (cancelled)", g.id),
            )),
            Some(g) if g.owner.as_deref() != Some(self.holder.0.as_str()) => Err(Error::new(
                ErrorKind::Busy,
                format!("goal `{}` was taken over by another process", g.id),
            )),
            _ => Ok(()),
        }
    }

    fn next_id(&self) -> Result<String, Error> {
        let id = plan_store::goal_run_id(&self.store.goal_id, self.ids.len() + 1);
        plan_store::check_run_id(&id)
            .map_err(|e| Error::new(ErrorKind::BadRunId, format!("run id `{id}`: {e}")))?;
        Ok(id)
    }
}

impl RunSink for Sink<'_> {
    fn open<'s>(&'s mut self, run: &PlanRun<'_>) -> Result<Box<dyn Journal + 's>, String> {
        // NB: the previous run's lease and connection end here.
        self.current = None;
        let held = self
            .goal_open()
            .and_then(|()| self.next_id())
            .and_then(|id| {
                let presets: Map<String, Value> = run.vars.iter().cloned().collect();
                let first_seq = run.program.seq_no_at(0).unwrap_or(0);
                let new = NewRun {
                    id: &id,
                    plan: &format!("ask round {}", run.round),
                    source: Some(run.source),
                    pbc: &plan_bytecode::encode(run.program),
                    presets: &presets,
                    limits: run.limits,
                    parent: self.ids.last().map(|p| (p.as_str(), first_seq)),
                };
                let mut held = Held::create(&self.store.at, &new, self.store.warn)?;
                if let Some(usage) = &run.planner_usage {
                    held.set_planner_usage(usage)?;
                }
                Ok(held)
            });
        match held {
            Ok(held) => {
                (self.store.started)(held.id());
                self.ids.push(held.id().to_owned());
                let held = self.current.insert(held);
                Ok(Box::new((&mut *self.store.also, held.journal(run.program))))
            }
            Err(e) => {
                // NB: its next run is there already: another process took the goal over
                // between the check and the run's creation.
                let e = match e.kind {
                    ErrorKind::DuplicateRun => Error::new(
                        ErrorKind::Busy,
                        format!(
                            "goal `{}` was taken over by another process ({e})",
                            self.store.goal_id
                        ),
                    ),
                    _ => e,
                };
                let message = e.message.clone();
                self.failed = Some(e);
                Err(message)
            }
        }
    }

    fn planning(&mut self, event: &TraceEvent<'_>) {
        let _ = self.store.also.record(event);
    }

    /// Kept with the goal, so that its plan versions can be shown, those that never ran
    /// too. NB: a round that cannot be kept only warns: the ask goes on.
    fn planned(&mut self, round: &Planned<'_>) {
        let Ok(mut store) = self.store.at.open(Access::Existing) else {
            return;
        };
        // NB: only while the goal is this ask's: a process that lost it (its lease
        // lapsed, another took it up) must not write over the new owner's rounds.
        if self.goal_open_in(&*store).is_err() {
            return;
        }
        let run = if round.runs {
            self.next_id().ok()
        } else {
            None
        };
        let row = GoalRound {
            round: round.round,
            kind: round.kind.as_str().to_owned(),
            reply: round.reply.map(str::to_owned),
            diagnostics: json!(round.diagnostics),
            planner_error: round.planner_error.map(str::to_owned),
            run,
            created_at: plan_store::now_ms(),
        };
        if let Err(e) = store.save_goal_round(&self.store.goal_id, &row) {
            (self.store.warn)(&e.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn goal(id: &str, status: GoalStatus) -> GoalInfo {
        GoalInfo {
            id: id.into(),
            goal: format!("goal {id}"),
            response_format: None,
            request: Value::Null,
            status,
            created_at: 0,
            updated_at: 0,
            answer: (status == GoalStatus::Answered).then(|| json!(format!("answer {id}"))),
            error: None,
            owner: None,
            session: Some("s".into()),
        }
    }

    #[test]
    fn a_conversation_stops_at_the_goal_asked_and_at_one_still_being_asked() {
        use GoalStatus::*;
        let goals = [
            goal("a", Answered),
            goal("b", Interrupted),
            goal("c", Failed),
            goal("d", Open),
            goal("e", Answered),
        ];
        let ids = |c: &Conversation| c.turns.iter().map(|t| t.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&conversation_of(&goals, None, None)), ["a", "c"]);
        assert_eq!(ids(&conversation_of(&goals, None, Some("c"))), ["a"]);
        let summary = Some(("a".to_owned(), "S".to_owned()));
        let c = conversation_of(&goals, summary, None);
        assert_eq!(ids(&c), ["c"]);
        assert_eq!(c.summary.as_deref(), Some("S"));
    }
}
