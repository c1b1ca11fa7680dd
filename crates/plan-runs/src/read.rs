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

/// What an id names: a run, or a goal none of whose plans has run yet.
pub enum Found {
    Run(Box<Shown>),
    Goal(Box<plan_store::GoalInfo>),
}

/// Run `id` with its steps and calls, else goal `id` (`unknown_run`: neither).
pub fn show_run_or_goal(store: &dyn RunStore, id: &str) -> Result<Found, Error> {
    match show(store, id) {
        Ok(shown) => Ok(Found::Run(Box::new(shown))),
        Err(e) if e.kind == crate::ErrorKind::UnknownRun => match store.goal(id) {
            Ok(Some(goal)) => Ok(Found::Goal(Box::new(goal))),
            _ => Err(e),
        },
        Err(e) => Err(e),
    }
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

/// A plan's source as the compiler reads it: its instructions, with a reply's prose and
/// fences read past, and the repairs the reader made to read it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ReadPlan {
    pub instructions: Vec<Value>,
    /// `[{code, message}]`: the reader's repairs (`W00xx`): prose around the plan, a
    /// Markdown fence, a trailing comma, ...
    pub repairs: Vec<Value>,
}

/// The largest source [`read_plan`] reads, and the largest reply a [`Version`] carries:
/// a plan's tree takes several times its size, and a page reads a run again on every
/// event.
pub const SHOWN_MAX: usize = 1 << 20;

/// `source` read as the compiler reads it, when it holds an array (None: nothing in it
/// reads as one, or it is over [`SHOWN_MAX`]).
pub fn read_plan(source: &str) -> Option<ReadPlan> {
    if source.len() > SHOWN_MAX {
        return None;
    }
    let read = plan_syntax::read(source);
    let Value::Array(instructions) = read.value?.to_value() else {
        return None;
    };
    let repairs = read
        .diagnostics
        .iter()
        .filter(|d| plan_syntax::codes::is_reader_repair(d.code))
        .map(|d| serde_json::json!({"code": d.code, "message": d.message}))
        .collect();
    Some(ReadPlan {
        instructions,
        repairs,
    })
}

/// The longest name [`plan_name`] makes, in characters.
const NAME_CHARS: usize = 120;

/// A name for a plan that came without one: the first line of its first reasoning step
/// (cut at [`NAME_CHARS`]), if it has one.
pub fn plan_name(instructions: &[Value]) -> Option<String> {
    let thought = instructions
        .iter()
        .filter(|i| i["type"] == "reasoning")
        .find_map(|i| i["parameters"]["chain_of_thoughts"].as_str())?;
    let line = thought.lines().map(str::trim).find(|l| !l.is_empty())?;
    // NB: a name is one line of text: a plan's tabs and escapes are not kept in it.
    let line: String = line
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut name: String = line.chars().take(NAME_CHARS).collect();
    if name.len() < line.len() {
        name.push('…');
    }
    Some(name)
}

/// One version of a goal's plan: a planning round's reply, and what became of it.
#[derive(Clone, Debug, Serialize)]
pub struct Version {
    pub round: u64,
    /// `plan`, `repair` (after the compiler's errors) or `replan` (after a failed run).
    pub kind: String,
    /// Its run's status; `invalid` when the plan did not compile, `planner_failed` when
    /// there was no reply, `not_started` when it compiled but its run was never stored.
    pub status: String,
    pub run: Option<String>,
    /// The plan as the compiler read it from the reply.
    pub plan: Option<ReadPlan>,
    /// The planner's whole reply, as it came (redacted); None when there was none, or
    /// when it is over [`SHOWN_MAX`] (`reply_bytes` says how large).
    pub reply: Option<String>,
    pub reply_bytes: usize,
    /// The compiler's diagnostics on it; its errors were sent back for a repair.
    pub diagnostics: Value,
    /// How its run failed (`{code, message, seq_no, ...}`), or why the planner failed.
    pub error: Option<Value>,
}

/// The versions of goal `id`'s plan, in the order the planner wrote them. A goal stored
/// before the rounds were kept shows the versions that ran.
pub fn versions(store: &dyn RunStore, id: &str) -> Result<Vec<Version>, Error> {
    let runs = crate::ask::goal_runs(store, id)?;
    let rounds = store.goal_rounds(id)?;
    let run_of = |run: &Option<String>| runs.iter().find(|r| Some(&r.id) == run.as_ref());
    let versions = if rounds.is_empty() {
        runs.iter()
            .enumerate()
            .map(|(i, r)| {
                let reply = source(store, r);
                Version {
                    round: i as u64,
                    kind: if i == 0 { "plan" } else { "replan" }.to_owned(),
                    status: r.status.as_str().to_owned(),
                    run: Some(r.id.clone()),
                    plan: reply.as_deref().and_then(read_plan),
                    reply_bytes: reply.as_ref().map_or(0, String::len),
                    reply: reply.filter(|r| r.len() <= SHOWN_MAX),
                    diagnostics: Value::Array(Vec::new()),
                    error: r.error.clone(),
                }
            })
            .collect()
    } else {
        rounds
            .into_iter()
            .map(|g| {
                let run = run_of(&g.run);
                let status = match (&g.reply, run) {
                    (None, _) => "planner_failed",
                    (Some(_), Some(r)) => r.status.as_str(),
                    (Some(_), None) if g.run.is_some() => "not_started",
                    (Some(_), None) => "invalid",
                };
                let error = match (run, &g.planner_error) {
                    (Some(r), _) => r.error.clone(),
                    (None, Some(why)) => {
                        Some(serde_json::json!({"code": "planner_failed", "message": why}))
                    }
                    (None, None) => None,
                };
                Version {
                    round: g.round,
                    kind: g.kind,
                    status: status.to_owned(),
                    run: run.map(|r| r.id.clone()),
                    plan: g.reply.as_deref().and_then(read_plan),
                    reply_bytes: g.reply.as_ref().map_or(0, String::len),
                    reply: g.reply.filter(|r| r.len() <= SHOWN_MAX),
                    diagnostics: g.diagnostics,
                    error,
                }
            })
            .collect()
    };
    checked(store, Ok(versions))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_reply_reads_as_the_plan_in_its_fence_with_the_repairs_noted() {
        let reply = "Here is the plan:\n```json\n[{\"seq_no\": 0, \"type\": \"assign\", \
                     \"parameters\": {\"final_answer\": \"hi\"},},]\n```\nDone.";
        let read = read_plan(reply).unwrap();
        assert_eq!(
            read.instructions,
            [json!({"seq_no": 0, "type": "assign", "parameters": {"final_answer": "hi"}})]
        );
        let codes: Vec<&str> = read
            .repairs
            .iter()
            .map(|r| r["code"].as_str().unwrap())
            .collect();
        assert!(
            codes.contains(&"W0003") && codes.contains(&"W0006"),
            "{codes:?}"
        );
        assert_eq!(read_plan("[]").unwrap().repairs, Vec::<Value>::new());
        assert_eq!(read_plan("I cannot help with that."), None);
        assert_eq!(read_plan("{\"seq_no\": 0}"), None);
    }

    #[test]
    fn a_plan_is_named_by_the_first_line_of_its_first_reasoning() {
        let plan = [
            json!({"seq_no": 0, "type": "assign", "parameters": {"x": 1}}),
            json!({"seq_no": 1, "type": "reasoning", "parameters": {"chain_of_thoughts": "\n  Compare the two.\nThen answer."}}),
            json!({"seq_no": 2, "type": "reasoning", "parameters": {"chain_of_thoughts": "Later."}}),
        ];
        assert_eq!(plan_name(&plan).as_deref(), Some("Compare the two."));
        assert_eq!(plan_name(&plan[..1]), None);
        let long =
            [json!({"type": "reasoning", "parameters": {"chain_of_thoughts": "é".repeat(300)}})];
        let name = plan_name(&long).unwrap();
        assert_eq!(name.chars().count(), NAME_CHARS + 1);
        assert!(name.ends_with('…'));
    }
}
