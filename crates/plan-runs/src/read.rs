//! Reading runs to show them: the list, one run with its steps and calls, its variables
//! at a point. What was read is checked to be of one state of the store before it is
//! returned (a store read as it is, that a process wrote meanwhile, fails instead).

use plan_store::{CallRow, EvalCase, EvalInfo, Feedback, RunInfo, RunStore, StepRow, StoreError};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::Error;

/// A run with its committed steps and its calls (`planvm runs show --format json`).
#[derive(Clone, Debug, Serialize)]
pub struct Shown {
    pub run: RunInfo,
    pub steps: Vec<StepRow>,
    pub calls: Vec<CallRow>,
    /// A person's verdict on it (`runs feedback`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feedback: Option<Feedback>,
    /// The evaluation case its goal was asked for (`eval --store`), with its verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval: Option<EvalOfRun>,
}

/// The evaluation case a run answered.
#[derive(Clone, Debug, Serialize)]
pub struct EvalOfRun {
    pub eval: String,
    #[serde(flatten)]
    pub case: EvalCase,
}

/// `what`, once `store` is known to have been read in one state; else why not.
fn checked<T>(store: &dyn RunStore, what: Result<T, StoreError>) -> Result<T, Error> {
    match (what, store.unchanged()) {
        (_, Err(e)) | (Err(e), Ok(())) => Err(e.into()),
        (Ok(x), Ok(())) => Ok(x),
    }
}

/// The source text of `run`'s plan (None for a run of a `.pbc` file, or unreadable).
pub fn source(store: &dyn RunStore, run: &RunInfo) -> Option<String> {
    store.program(&run.program).ok().and_then(|p| p.source)
}

/// Every run, oldest first.
pub fn list(store: &dyn RunStore) -> Result<Vec<RunInfo>, Error> {
    checked(store, store.runs())
}

/// Every goal none of whose plans has run yet (queued, being planned, or failed before
/// a plan ran), oldest first: the goals a list of `runs` leaves out.
pub fn goals_without_runs(
    store: &dyn RunStore,
    runs: &[RunInfo],
) -> Result<Vec<plan_store::GoalInfo>, Error> {
    let ran: std::collections::HashSet<&str> = runs.iter().map(|r| r.id.as_str()).collect();
    let goals = checked(store, store.goals())?;
    Ok(goals
        .into_iter()
        .filter(|g| !ran.contains(g.id.as_str()))
        .collect())
}

/// Run `id` with its steps and calls.
pub fn show(store: &dyn RunStore, id: &str) -> Result<Shown, Error> {
    let read = || {
        Ok(Shown {
            run: store.run(id)?,
            steps: store.steps(id)?,
            calls: store.calls(id)?,
            feedback: store.feedback(id)?,
            eval: eval_of(store, id)?,
        })
    };
    checked(store, read())
}

/// The evaluation case run `id`'s goal was asked for, if any.
fn eval_of(store: &dyn RunStore, id: &str) -> Result<Option<EvalOfRun>, StoreError> {
    let mut found = store.eval_case_of_goal(id)?;
    // NB: a later run of the goal (`ID.2`, a re-plan).
    if found.is_none()
        && let Some((goal, n)) = id.rsplit_once('.')
        && n.parse::<usize>().is_ok_and(|n| n >= 2)
    {
        found = store.eval_case_of_goal(goal)?;
    }
    Ok(found.map(|(eval, case)| EvalOfRun { eval, case }))
}

/// Every evaluation, oldest first.
pub fn evals(store: &dyn RunStore) -> Result<Vec<EvalInfo>, Error> {
    checked(store, store.evals())
}

/// Evaluation `id` with its cases; `UnknownRun` when there is none.
pub fn eval(store: &dyn RunStore, id: &str) -> Result<(EvalInfo, Vec<EvalCase>), Error> {
    let read = || -> Result<_, StoreError> {
        let info = store.evals()?.into_iter().find(|e| e.id == id);
        Ok((info, store.eval_cases(id)?))
    };
    match checked(store, read())? {
        (Some(info), cases) => Ok((info, cases)),
        (None, _) => Err(Error::new(
            crate::ErrorKind::UnknownRun,
            format!("no evaluation `{id}` in this store"),
        )),
    }
}

/// Every variable of run `id` just before it first executed `seq_no`.
pub fn variables_at(
    store: &dyn RunStore,
    id: &str,
    seq_no: i64,
) -> Result<Map<String, Value>, Error> {
    let run = checked(store, store.run(id))?;
    let vars = crate::variables_before(store, &run, seq_no);
    // NB: a read that mixed two states would look like damage: say which it is.
    store.unchanged()?;
    vars
}

/// A session with its rounds (`planvm sessions show`).
#[derive(Clone, Debug, Serialize)]
pub struct SessionShown {
    pub id: String,
    /// The summary that stands for its oldest rounds: the last goal it covers, and its text.
    pub summary: Option<Value>,
    /// Each goal, oldest first, with the ids of its runs.
    pub goals: Vec<Value>,
}

/// Every session, oldest first.
pub fn sessions(store: &dyn RunStore) -> Result<Vec<plan_store::SessionInfo>, Error> {
    checked(store, store.sessions())
}

/// Session `id` with its goals and their runs; a session with no goal is unknown.
pub fn session(store: &dyn RunStore, id: &str) -> Result<SessionShown, Error> {
    let goals = store.session_goals(id)?;
    if goals.is_empty() {
        return Err(Error::new(
            crate::ErrorKind::UnknownRun,
            format!("no session `{id}` in this store (`planvm sessions list` shows them)"),
        ));
    }
    let summary = store
        .summary(id)?
        .map(|(upto, text)| serde_json::json!({"upto": upto, "summary": text}));
    let mut shown = Vec::with_capacity(goals.len());
    for g in &goals {
        let runs: Vec<String> = crate::ask::goal_runs(store, &g.id)?
            .into_iter()
            .map(|r| r.id)
            .collect();
        let mut v = serde_json::json!(g);
        v["runs"] = serde_json::json!(runs);
        shown.push(v);
    }
    checked(
        store,
        Ok(SessionShown {
            id: id.to_owned(),
            summary,
            goals: shown,
        }),
    )
}
