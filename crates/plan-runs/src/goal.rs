//! Goals taken up: a goal submitted to the queue (`planvm submit --goal`), or one whose
//! asker died, is asked by whoever takes it (a worker, a service at start) as its asker
//! would have: asked again when none of its plans ran, else ended by its last run, which
//! goes on first when it was cut short. [`next`] says which; [`take_up`] does it for a
//! worker.

use std::sync::Arc;
use std::time::Duration;

use plan_host::{Host, Journal};
use plan_planner::{AskOptions, Conversation, Examples, Planner, PlannerModel, Template};
use plan_store::{GoalInfo, GoalStatus, Owner, RunInfo, RunStatus};
use serde_json::{Map, Value, json};

use crate::ask::AskStore;
use crate::open::{Access, StoreAt};
use crate::{Error, ErrorKind, Resume};

/// What a goal was asked with besides its text: stored with it (`goals.request`), to ask
/// it again in another process.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Request {
    #[serde(default)]
    pub vars: Map<String, Value>,
    pub max_steps: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    /// Seconds the whole ask may take, from when it starts.
    pub timeout: Option<f64>,
    /// The conversation the asker gave (a chat's earlier messages), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<Conversation>,
}

/// What a goal was asked with besides its text, as stored with it (to ask it again after
/// a crash): the variables and the limits of its runs.
pub fn request_of(options: &plan_planner::AskOptions) -> Value {
    serde_json::json!(Request::new(
        &options.vars,
        &options.limits,
        options.deadline
    ))
}

impl Request {
    /// What was asked: `vars` and `limits` for every run, `timeout` for the whole ask.
    pub fn new(
        vars: &[(String, Value)],
        limits: &plan_vm::Limits,
        timeout: Option<Duration>,
    ) -> Request {
        Request {
            vars: vars.iter().cloned().collect(),
            max_steps: Some(limits.max_steps),
            max_bytes: Some(limits.max_total_bytes),
            max_concurrency: Some(limits.max_concurrency),
            timeout: timeout.map(|d| d.as_secs_f64()),
            conversation: None,
        }
    }

    /// The options of an ask of this request, `max_examples` examples in each prompt.
    pub fn options(&self, max_examples: usize) -> AskOptions {
        let mut options = AskOptions {
            max_examples,
            vars: self.vars.clone().into_iter().collect(),
            deadline: self
                .timeout
                .and_then(|t| Duration::try_from_secs_f64(t).ok()),
            ..AskOptions::default()
        };
        let limits = &mut options.limits;
        limits.max_steps = self.max_steps.unwrap_or(limits.max_steps);
        limits.max_total_bytes = self.max_bytes.unwrap_or(limits.max_total_bytes);
        limits.max_concurrency = self.max_concurrency.unwrap_or(limits.max_concurrency);
        options
    }
}

/// What the planner of goals taken up is given.
pub struct Planning {
    pub template: Template,
    pub examples: Examples,
    /// Examples put into each prompt.
    pub max_examples: usize,
}

impl Default for Planning {
    /// The built-in prompt, no examples.
    fn default() -> Planning {
        Planning {
            template: Template::default(),
            examples: Examples::default(),
            max_examples: plan_planner::DEFAULT_MAX_EXAMPLES,
        }
    }
}

/// The planner of the goals a worker takes: its LLM and what it is given.
pub struct GoalPlanner {
    pub model: Arc<dyn PlannerModel>,
    pub planning: Arc<Planning>,
}

impl GoalPlanner {
    /// The planner of one goal asked with `request`, on `host`.
    pub fn planner<'h>(&self, host: &'h Host, request: &Request) -> Planner<'h> {
        Planner {
            host,
            model: self.model.clone(),
            template: self.planning.template.clone(),
            examples: self.planning.examples.clone(),
            options: request.options(self.planning.max_examples),
        }
    }
}

/// What the planner is told of the conversation before a goal.
pub enum Memory {
    None,
    /// A stored session's earlier goals (summarized over the budget).
    Session(String),
    /// Given whole by the asker (a chat's earlier messages).
    Given(Conversation),
}

impl Memory {
    /// What a stored goal was asked with: the conversation its request gave, else its
    /// session's.
    pub fn of(goal: &GoalInfo, request: &Request) -> Memory {
        match (&request.conversation, &goal.session) {
            (Some(given), _) => Memory::Given(given.clone()),
            (None, Some(session)) => Memory::Session(session.clone()),
            (None, None) => Memory::None,
        }
    }

    /// Tells `planner` this conversation before goal `goal` (see
    /// [`crate::ask::remember`]); a warning when a session's summary could not be made.
    pub async fn tell(
        self,
        planner: &mut Planner<'_>,
        at: &StoreAt,
        goal: &str,
    ) -> Result<Option<String>, Error> {
        match self {
            Memory::None => Ok(None),
            Memory::Given(c) => {
                planner.options.conversation = c;
                Ok(None)
            }
            Memory::Session(s) => crate::ask::remember(planner, at, (&s, Some(goal))).await,
        }
    }
}

/// What becomes of a goal taken up, from its runs.
#[derive(Debug, PartialEq)]
pub enum Next {
    /// None of its plans ran: ask the planner.
    Ask,
    /// Its last run ended: so does the goal, with the answer or `{code, message}`.
    End(Result<Value, Value>),
    /// Its last run waits for a person: so does the goal.
    NeedsInput(String),
    /// Its last run was cut short: it goes on, and the goal ends with it.
    GoOn(String),
}

/// What becomes of a goal whose runs are `runs` (in order), taken up.
pub fn next(runs: &[RunInfo]) -> Next {
    let Some(last) = runs.last() else {
        return Next::Ask;
    };
    match ended_by(last) {
        Some(ended) => Next::End(ended),
        None if last.status == RunStatus::NeedsInput => Next::NeedsInput(last.id.clone()),
        None => Next::GoOn(last.id.clone()),
    }
}

/// How a goal's run `run` ended, as the goal's outcome (None: it has not).
pub fn ended_by(run: &RunInfo) -> Option<Result<Value, Value>> {
    match run.status {
        RunStatus::Ok => Some(Ok(run.final_answer.clone().unwrap_or(Value::Null))),
        RunStatus::Failed => {
            let message = run
                .error
                .as_ref()
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .unwrap_or("the run failed");
            Some(Err(json!({"code": "run_failed", "message": message})))
        }
        // NB: a run waiting for a person is not over: its goal waits with it.
        RunStatus::Running | RunStatus::Interrupted | RunStatus::NeedsInput | RunStatus::Queued => {
            None
        }
    }
}

/// A goal's status as lists of runs show it while none of its plans has run: `queued`,
/// `planning`, `interrupted`, `failed`, `needs_input`, or `ok` once answered.
pub fn listed_status(status: GoalStatus) -> &'static str {
    match status {
        GoalStatus::Queued => "queued",
        GoalStatus::Open => "planning",
        GoalStatus::Answered => "ok",
        GoalStatus::Failed => "failed",
        GoalStatus::Interrupted => "interrupted",
        GoalStatus::NeedsInput => "needs_input",
    }
}

/// Submits `goals` (each its id and text, all asked with `request`) to the queue of the
/// store at `at`, in one transaction: all, or none when one's id is taken.
pub fn submit(
    at: &StoreAt,
    goals: &[(String, String)],
    (response_format, session): (Option<&Value>, Option<&str>),
    request: &Request,
) -> Result<(), Error> {
    if let Some(s) = session {
        plan_store::check_run_id(s)
            .map_err(|e| Error::new(ErrorKind::BadRunId, format!("session `{s}`: {e}")))?;
    }
    let request = json!(request);
    let mut new = Vec::with_capacity(goals.len());
    for (id, goal) in goals {
        plan_store::check_run_id(id)
            .map_err(|e| Error::new(ErrorKind::BadRunId, format!("goal id `{id}`: {e}")))?;
        new.push(plan_store::NewGoal {
            id,
            goal,
            response_format,
            request: &request,
            session,
        });
    }
    at.open(Access::Create)?.submit_goals(&new)?;
    Ok(())
}

/// Goal `id`, which this process took from the queue as `owner`, asked or gone on with
/// as [`next`] says, each event to `also` too; the goal as it stands after.
pub(crate) async fn take_up(
    at: &StoreAt,
    (host, planner): (&Host, &GoalPlanner),
    (id, owner): (&str, &Owner),
    (retry_unknown_writes, warn): (bool, fn(&Error)),
    also: &mut dyn Journal,
) -> Result<GoalInfo, Error> {
    // NB: the goal stays this worker's while it is asked (its runs hold leases of their
    // own), and is ended only while it is.
    let _lease = at.lease(owner.clone(), warn);
    let (goal, runs) = {
        let store = at.open(Access::Existing)?;
        let goal = store
            .goal(id)?
            .ok_or_else(|| Error::new(ErrorKind::UnknownRun, format!("there is no goal `{id}`")))?;
        let runs = crate::ask::goal_runs(&*store, id)?;
        (goal, runs)
    };
    if goal.owner.as_deref() != Some(owner.0.as_str()) {
        return Err(taken_over(id));
    }
    match next(&runs) {
        Next::Ask => ask(at, (host, planner), (&goal, owner), warn, also).await?,
        Next::End(ended) => {
            at.open(Access::Existing)?
                .end_goal(id, Some(owner), ended.as_ref())?;
        }
        Next::NeedsInput(run) => {
            at.open(Access::Existing)?.goal_needs_input(id, &run)?;
        }
        Next::GoOn(run) => {
            // NB: `Busy`: another process goes on with the run; this goal's lease lapses
            // and it is taken up again once the run has ended.
            let request = crate::ResumeRequest {
                retry_unknown_writes,
                ..crate::ResumeRequest::new(&run)
            };
            let resumed = crate::resume(at, request);
            let report = match resumed? {
                Resume::Finished(report) => *report,
                Resume::Ready(ready) => ready.claim(warn)?.go(host, also).await,
            };
            let mut store = at.open(Access::Existing)?;
            crate::ask::settle_goal(&mut *store, (id, &run), Some(owner), &report)?;
        }
    }
    at.open(Access::Existing)?
        .goal(id)?
        .ok_or_else(|| taken_over(id))
}

fn taken_over(id: &str) -> Error {
    Error::new(
        ErrorKind::Busy,
        format!("goal `{id}` was taken over by another process"),
    )
}

/// Asks the planner for stored goal `goal`, held by `owner`, as it was asked.
async fn ask(
    at: &StoreAt,
    (host, planner): (&Host, &GoalPlanner),
    (goal, owner): (&GoalInfo, &Owner),
    warn: fn(&Error),
    also: &mut dyn Journal,
) -> Result<(), Error> {
    // NB: a request this planvm cannot read is asked with none (the goal's text is what
    // matters), rather than never.
    let request: Request = serde_json::from_value(goal.request.clone()).unwrap_or_default();
    let mut planner = planner.planner(host, &request);
    let memory = Memory::of(goal, &request);
    if let Some(why) = memory.tell(&mut planner, at, &goal.id).await? {
        warn(&Error::new(ErrorKind::Io, why));
    }
    let store = AskStore {
        at: at.clone(),
        goal_id: goal.id.clone(),
        owner: Some(owner.clone()),
        also,
        warn,
        started: |_| {},
    };
    let rf = goal.response_format.as_ref();
    // NB: an ask that failed otherwise has ended the goal with why: the goal tells.
    match crate::ask::ask(&planner, &goal.goal, rf, store)
        .await
        .failed
    {
        Some(e) if e.kind == ErrorKind::Busy => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str, status: RunStatus) -> RunInfo {
        RunInfo {
            id: id.into(),
            status,
            plan: "p".into(),
            program: "h".into(),
            parent: None,
            branch_seq: None,
            created_at: 0,
            updated_at: 0,
            steps: 0,
            tool_calls: 0,
            final_answer: None,
            error: None,
            presets: Map::new(),
            limits: plan_vm::Limits::default(),
            owner: None,
            question: None,
            usage: None,
        }
    }

    #[test]
    fn a_goal_goes_on_as_its_last_run_stands() {
        assert_eq!(next(&[]), Next::Ask);
        let mut ok = run("g", RunStatus::Ok);
        ok.final_answer = Some(json!("yes"));
        assert_eq!(next(&[ok]), Next::End(Ok(json!("yes"))));
        let runs = [
            run("g", RunStatus::Failed),
            run("g.2", RunStatus::Interrupted),
        ];
        assert_eq!(next(&runs), Next::GoOn("g.2".into()));
        assert_eq!(
            next(&[run("g", RunStatus::NeedsInput)]),
            Next::NeedsInput("g".into())
        );
        let Next::End(Err(e)) = next(&[run("g", RunStatus::Failed)]) else {
            panic!("a failed run ends its goal failed");
        };
        assert_eq!(e["code"], "run_failed");
    }
}
