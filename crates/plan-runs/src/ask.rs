//! `ask` with a store: the goal is a row of its own from the moment it is asked
//! ([`create_goal`]), ended with the ask's outcome; each plan the planner writes that runs
//! is a stored run, `ID`, then `ID.2`, `ID.3`, ... A re-plan's run is a branch of the run
//! it replaces, from its first instruction (it starts over, answering the calls already
//! made from their stored answers), so the store shows every version of the plan.

use plan_host::{Journal, TraceEvent};
use plan_planner::{AskOutcome, AskStatus, Conversation, PlanRun, Planner, RunSink, Turn};
use plan_store::{GoalInfo, GoalStatus, NewGoal, NewRun, Owner, RunInfo, RunStore};
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
    at.open(Access::Existing)?.end_goal(id, outcome)?;
    Ok(())
}

/// What the planner is told of session `session` before its next goal: its ended goals
/// and what became of them, the oldest summarized (by `planner`'s LLM, once, then stored
/// and reused) when they are over `budget` tokens. A summary that cannot be made leaves
/// the rounds whole, and says why.
pub async fn remember(
    planner: &Planner<'_>,
    at: &StoreAt,
    session: &str,
    budget: usize,
) -> Result<(Conversation, Option<String>), Error> {
    let conversation = stored_conversation(at, session)?;
    let Some(fold) = conversation.over_budget(budget) else {
        return Ok((conversation, None));
    };
    match planner.summarize(conversation.summary_prompt(fold)).await {
        Ok(text) => {
            let (folded, summary) = conversation.folded(fold, text);
            at.open(Access::Existing)?
                .save_summary(session, &summary.upto, &summary.text)?;
            Ok((folded, None))
        }
        Err(why) => Ok((
            conversation,
            Some(format!(
                "session `{session}`: its earlier rounds could not be summarized ({why}); \
                 the planner is told them whole"
            )),
        )),
    }
}

/// Session `session` as the store holds it: its stored summary and the ended goals after
/// it (none for a session not begun).
pub fn stored_conversation(at: &StoreAt, session: &str) -> Result<Conversation, Error> {
    let store = at.open(Access::Create)?;
    let goals = store.session_goals(session)?;
    let summary = store.summary(session)?;
    Ok(conversation_of(&goals, summary))
}

/// A session's conversation from its goals (oldest first) and its stored summary: the
/// goals the summary covers are left out, and the ones not ended yet.
fn conversation_of(goals: &[GoalInfo], summary: Option<(String, String)>) -> Conversation {
    let after = summary
        .as_ref()
        .and_then(|(upto, _)| goals.iter().position(|g| g.id == *upto))
        .map_or(0, |i| i + 1);
    let turns = goals[after..]
        .iter()
        .filter(|g| matches!(g.status, GoalStatus::Answered | GoalStatus::Failed))
        .map(|g| Turn {
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
    let code = match outcome.status {
        AskStatus::Answered => "answered",
        AskStatus::InvalidPlan => "invalid_plan",
        AskStatus::RunFailed => "run_failed",
        AskStatus::PlannerFailed => "planner_failed",
    };
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
    let mut sink = Sink {
        store,
        current: None,
        ids: Vec::new(),
        failed: None,
    };
    let outcome = planner.ask_into(goal, response_format, &mut sink).await;
    let Sink {
        store, ids, failed, ..
    } = sink;
    let ended = match (&failed, outcome.status) {
        (Some(e), _) => end_goal(&store.at, &store.goal_id, Err(&e.to_json())),
        (None, AskStatus::Answered) => end_goal(&store.at, &store.goal_id, Ok(&outcome.answer)),
        (None, _) => end_goal(&store.at, &store.goal_id, Err(&goal_error(&outcome))),
    };
    AskStored {
        outcome,
        runs: ids,
        failed: failed.or(ended.err()),
    }
}

struct Sink<'a> {
    store: AskStore<'a>,
    current: Option<Held>,
    ids: Vec<String>,
    failed: Option<Error>,
}

impl Sink<'_> {
    /// Refused once the goal has ended (it was cancelled): no run starts after that.
    fn goal_open(&self) -> Result<(), Error> {
        let goal = self
            .store
            .at
            .open(Access::Existing)?
            .goal(&self.store.goal_id)?;
        match goal {
            Some(g) if g.status != plan_store::GoalStatus::Open => Err(Error::new(
                ErrorKind::Cancelled,
                format!("goal `{}` has ended (cancelled)", g.id),
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
                Held::create(&self.store.at, &new, self.store.warn)
            });
        match held {
            Ok(held) => {
                (self.store.started)(held.id());
                self.ids.push(held.id().to_owned());
                let held = self.current.insert(held);
                Ok(Box::new((&mut *self.store.also, held.journal(run.program))))
            }
            Err(e) => {
                let message = e.message.clone();
                self.failed = Some(e);
                Err(message)
            }
        }
    }

    fn planning(&mut self, event: &TraceEvent<'_>) {
        let _ = self.store.also.record(event);
    }
}
