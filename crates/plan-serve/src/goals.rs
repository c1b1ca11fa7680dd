//! Runs from a goal: the planner writes the plan, as `planvm ask` does. The goal is stored
//! before the planner is asked (so a goal whose planner never writes a plan that runs
//! still has its outcome), its runs are `ID`, `ID.2`, ... (a re-plan is the next one),
//! and it ends with the ask's answer or why there is none. A goal the service was asking
//! when it stopped is taken up at the next start: asked again when no plan of it had
//! run, else its last run is resumed and gives the goal its outcome.

use std::sync::Arc;

use plan_planner::AskOutcome;
use plan_runs::ask::AskStore;
use plan_runs::goal::Next;
use plan_runs::open::Access;
use plan_runs::{Claimed, Error, ErrorKind};
use plan_store::{GoalInfo, GoalStatus, Owner, RunStatus, RunStore};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::State;

pub(crate) use plan_runs::goal::Request;

/// How a goal ended, once it has: its answer, or `{code, message}`.
pub(crate) type Ended = Result<Value, Value>;

/// How an ask in the service ended, and the tokens its planner's replies cost (when its
/// server says).
pub(crate) struct Asked {
    pub(crate) ended: Ended,
    pub(crate) usage: Option<plan_llm::Usage>,
}

impl From<Ended> for Asked {
    fn from(ended: Ended) -> Asked {
        Asked { ended, usage: None }
    }
}

pub(crate) use plan_runs::goal::Memory;

/// Asks the planner for goal `id` (stored, open) in the service, once a slot is free; the
/// task ends with the goal's outcome.
pub(crate) fn spawn_ask(
    state: Arc<State>,
    id: String,
    (goal, response_format, memory): (String, Option<Value>, Memory),
    request: Request,
    trace: Option<plan_telemetry::Trace>,
) -> JoinHandle<Asked> {
    let mut notifier = state.live.start(&id);
    // NB: the goal's lease is renewed from now on, while it waits for a slot too: no
    // worker takes it up meanwhile.
    let lease = state.at.lease(Owner::this_process(), state.warn);
    tokio::spawn(async move {
        let _lease = lease;
        let Some(_slot) = state.slot().await else {
            return Err(json!({"code": "stopped", "message": "the service is stopping"})).into();
        };
        let mut planner = match &state.planner {
            Ok(p) => p.planner(&state.host, &request),
            Err(why) => {
                let error = json!({"code": "no_planner", "message": why});
                let _ = plan_runs::ask::end_goal(&state.at, &id, Err(&error));
                return Err(error).into();
            }
        };
        if let Some(t) = &trace {
            planner.model = t.model(planner.model, &plan_planner::model_name(&state.host));
        }
        match memory.tell(&mut planner, &state.at, &id).await {
            Ok(None) => {}
            Ok(Some(why)) => (state.warn)(&Error::new(ErrorKind::Io, why)),
            Err(e) => {
                let _ = plan_runs::ask::end_goal(&state.at, &id, Err(&e.to_json()));
                return Err(e.to_json()).into();
            }
        }
        let spans = trace.as_ref().map(|t| t.journal(state.engine.manifest()));
        let mut also = (&mut notifier, spans);
        let store = AskStore {
            at: state.at.clone(),
            goal_id: id,
            owner: None,
            also: &mut also,
            warn: state.warn,
            started: |_| {},
        };
        let asked = plan_runs::ask::ask(&planner, &goal, response_format.as_ref(), store);
        let stored = plan_telemetry::within(trace.as_ref(), asked).await;
        let ended = match stored.failed {
            Some(e) => Err(e.to_json()),
            None => outcome(&stored.outcome),
        };
        if let Some(t) = trace {
            t.end(&plan_telemetry::Ended::ask(
                &stored.outcome,
                stored.runs.last().map(String::as_str),
            ));
        }
        Asked {
            ended,
            usage: stored.outcome.usage,
        }
    })
}

fn outcome(outcome: &AskOutcome) -> Ended {
    match outcome.status {
        plan_planner::AskStatus::Answered => Ok(outcome.answer.clone()),
        plan_planner::AskStatus::NeedsInput => {
            let question = outcome.report.as_ref().and_then(|r| r.question.clone());
            Err(json!({"code": "needs_input", "question": question,
                       "message": "the plan asks the user a question"}))
        }
        _ => Err(plan_runs::ask::goal_error(outcome)),
    }
}

/// Takes up every goal the store holds as interrupted (its process died): asked again
/// when none of its plans ran, else ended by its last run, resumed first when that run
/// was cut short too. Each goal's id, and why it could not go on when it could not. The
/// runs resumed here are left out of `runs` (the interrupted runs the caller resumes).
pub(crate) fn take_up_goals(
    state: &Arc<State>,
    retry_unknown_writes: bool,
) -> (crate::TakenUp, Vec<String>) {
    let goals = match state.at.open(Access::Existing).and_then(|s| Ok(s.goals()?)) {
        Ok(goals) => goals,
        Err(e) => return (vec![(String::new(), Err(e))], Vec::new()),
    };
    let mut taken_runs = Vec::new();
    let results = goals
        .into_iter()
        .filter(|g| g.status == GoalStatus::Interrupted)
        .map(|g| {
            let what = format!("goal {}", g.id);
            let result = take_up(state, g, retry_unknown_writes, &mut taken_runs);
            (what, result)
        })
        .collect();
    (results, taken_runs)
}

fn take_up(
    state: &Arc<State>,
    goal: GoalInfo,
    retry_unknown_writes: bool,
    taken_runs: &mut Vec<String>,
) -> Result<(), Error> {
    let mut store = state.at.open(Access::Existing)?;
    if !store.take_goal(&goal.id, &plan_store::Owner::this_process())? {
        return Err(Error::new(
            ErrorKind::Busy,
            format!("goal `{}` is being asked by another live process", goal.id),
        ));
    }
    let runs = plan_runs::ask::goal_runs(&*store, &goal.id)?;
    drop(store);
    let last = match plan_runs::goal::next(&runs) {
        Next::Ask => None,
        Next::End(ended) => return plan_runs::ask::end_goal(&state.at, &goal.id, ended.as_ref()),
        // NB: its run waits for a person: so does the goal, until someone answers.
        Next::NeedsInput(run) => {
            return plan_runs::ask::goal_needs_input(&state.at, &goal.id, &run);
        }
        Next::GoOn(run) => Some(run),
    };
    let Some(last) = last else {
        let request: Request = serde_json::from_value(goal.request.clone()).unwrap_or_default();
        let memory = Memory::of(&goal, &request);
        spawn_ask(
            state.clone(),
            goal.id,
            (goal.goal, goal.response_format, memory),
            request,
            state.trace("ask", None, &axum::http::HeaderMap::new()),
        );
        return Ok(());
    };
    taken_runs.push(last.clone());
    let resumed = state.claim(&last, retry_unknown_writes);
    // NB: a goal whose run cannot go on ends with why, rather than staying open; one
    // whose run another live process goes on with (`planvm resume`) is left open.
    let resumed = match resumed {
        Ok(r) => r,
        Err(e) if e.kind == ErrorKind::Busy => return Err(e),
        Err(e) => {
            let error = e.to_json();
            plan_runs::ask::end_goal(&state.at, &goal.id, Err(&error))?;
            return Err(e);
        }
    };
    match resumed {
        None => end_by_run(&state.at, &goal.id, &last),
        Some(claimed) => {
            spawn_goal_run(state.clone(), goal.id, claimed);
            Ok(())
        }
    }
}

/// Ends goal `goal` with how its run `run` ended (or has it wait, as its run does, for a
/// person's answer).
fn end_by_run(at: &plan_runs::StoreAt, goal: &str, run: &str) -> Result<(), Error> {
    let row = at.open(Access::Existing)?.run(run)?;
    if row.status == RunStatus::NeedsInput {
        return plan_runs::ask::goal_needs_input(at, goal, run);
    }
    let ended = plan_runs::goal::ended_by(&row).unwrap_or(Err(
        json!({"code": "run_failed", "message": "the run did not finish"}),
    ));
    plan_runs::ask::end_goal(at, goal, ended.as_ref())
}

/// Runs the resumed last run of goal `goal`, then ends the goal with its outcome (a run
/// resumed after a crash is not re-planned).
fn spawn_goal_run(state: Arc<State>, goal: String, claimed: Claimed) {
    let run = claimed.id().to_owned();
    let mut notifier = state.live.start(&goal);
    // NB: the goal, taken up by this process, is leased with its run.
    let lease = state.at.lease(Owner::this_process(), state.warn);
    tokio::spawn(async move {
        let _lease = lease;
        let Some(_slot) = state.slot().await else {
            return;
        };
        claimed.go(&state.host, &mut notifier).await;
        let at = state.at.clone();
        let _ = tokio::task::spawn_blocking(move || end_by_run(&at, &goal, &run)).await;
    });
}

/// Goal `id` as `GET /v1/runs/{id}` shows it: its row, and its runs (the plan's
/// versions) with each one's source.
pub(crate) fn view(store: &dyn RunStore, goal: &GoalInfo) -> Result<Value, Error> {
    // NB: each run's plan is in `versions`, once.
    let runs = plan_runs::ask::goal_runs(store, &goal.id)?;
    let runs: Vec<Value> = runs
        .iter()
        .map(|r| json!({"id": r.id, "status": r.status}))
        .collect();
    let mut v = json!(goal);
    v["runs"] = Value::Array(runs);
    v["versions"] = json!(plan_runs::read::versions(store, &goal.id)?);
    Ok(v)
}

/// `GET /v1/sessions/{id}`: a conversation's rounds, oldest first, each goal with its
/// answer and its runs.
#[utoipa::path(get, path = "/v1/sessions/{id}", params(("id" = String, Path)), responses(
    (status = 200, body = crate::schema::SessionShown),
    (status = 401, body = crate::schema::ErrorBody), (status = 404, body = crate::schema::ErrorBody)))]
pub(crate) async fn session(
    axum::extract::State(state): axum::extract::State<Arc<State>>,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Result<axum::Json<plan_runs::read::SessionShown>, crate::error::ApiError> {
    let shown = state
        .read(move |store| plan_runs::read::session(store, &id))
        .await?;
    Ok(axum::Json(shown))
}
