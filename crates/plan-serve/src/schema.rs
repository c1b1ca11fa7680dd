//! The bodies the API answers with, as types: what `openapi.rs` describes and the
//! handlers and the page serialize.

use plan_store::{GoalInfo, RunInfo};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// A run as `POST /v1/runs` answers it and `GET /v1/runs` lists it.
#[derive(Serialize, ToSchema)]
pub(crate) struct RunSummary {
    pub(crate) id: String,
    /// `running`, `ok`, `failed`, `interrupted` or `needs_input` (stopped at a question to
    /// a person: answer it with `POST /v1/runs/{id}/input`); `planning` for a goal no plan
    /// of which has run yet; `queued` for a run submitted to the queue of a PostgreSQL
    /// store that no worker has taken up yet.
    pub(crate) status: String,
    pub(crate) plan: String,
    /// Unix milliseconds.
    pub(crate) created_at: i64,
    /// Unix milliseconds.
    pub(crate) updated_at: i64,
    pub(crate) steps: u64,
    pub(crate) tool_calls: u64,
    pub(crate) parent: Option<String>,
    pub(crate) branch_seq: Option<i64>,
    /// The goal, for a run the planner wrote (or a goal not planned yet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) goal: Option<String>,
    /// The tokens its LLM calls cost, `{"input_tokens", "output_tokens"}`, when their
    /// servers said.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub(crate) usage: Option<serde_json::Value>,
}

/// A status to list runs by.
#[derive(ToSchema)]
#[allow(dead_code)]
#[schema(rename_all = "snake_case")]
pub(crate) enum StatusFilter {
    Planning,
    Running,
    Ok,
    Failed,
    Interrupted,
    NeedsInput,
    Queued,
}

/// `GET /v1/runs`.
#[derive(Serialize, ToSchema)]
pub(crate) struct RunList {
    pub(crate) runs: Vec<RunSummary>,
}

/// `GET /v1/runs/{id}`: as `planvm runs show --format json`.
#[derive(Serialize, ToSchema)]
pub(crate) struct RunShown {
    /// The run's row: the fields of a summary, and `final_answer`, `error`, `presets`,
    /// `limits`, `owner`, `program`, `question` (`question`, `choices`, `seq_no`: what a
    /// run that is `needs_input` asks); null for a goal no plan of which has run yet.
    #[schema(value_type = Option<Object>)]
    pub(crate) run: Value,
    /// Each committed step: `step`, `seq_no`, `pc`, `op`, `writes`.
    #[schema(value_type = Vec<Object>)]
    pub(crate) steps: Value,
    /// Each call: `step`, `seq_no`, `tool`, `args`, `state`, `output`, `error`,
    /// `latency_ms`.
    #[schema(value_type = Vec<Object>)]
    pub(crate) calls: Value,
    /// The plan's source text (for a goal's run, the planner's whole reply).
    pub(crate) source: Option<String>,
    /// The plan as the compiler read it from `source`: `instructions` (the JSON array, a
    /// reply's prose and Markdown fence read past) and `repairs` (`code`, `message`: what
    /// the reader mended to read it); null when nothing in the source reads as an array,
    /// or when the source is over 1 MiB.
    #[schema(value_type = Option<Object>)]
    pub(crate) plan: Option<Value>,
    /// The runs branched from this one (re-plans included).
    pub(crate) children: Vec<String>,
    /// A person's verdict on the run: `verdict` (`good` or `bad`), `note`, `updated_at`.
    #[schema(value_type = Option<Object>)]
    pub(crate) feedback: Option<Value>,
    /// The evaluation case its goal was asked for (`planvm eval --store`): `eval`, `case`,
    /// `goal`, `verdict` (`pass` or `fail`), `score`, `reason`.
    #[schema(value_type = Option<Object>)]
    pub(crate) eval: Option<Value>,
    /// For a goal's id, or one of its runs' (`ID.2`, ...): `id`, `goal`, `response_format`, `request`, `status` (`open`,
    /// `answered`, `failed`, `interrupted`, `needs_input`), `answer`, `error`, `created_at`,
    /// `updated_at`, `session`, `runs` (each version of the plan that ran: `id`,
    /// `status`), and `versions`: every planning round in order, those whose plan never
    /// ran included, each with `round`, `kind` (`plan`, `repair`, `replan`), `status` (its
    /// run's, or `invalid`: the plan did not compile; `planner_failed`: no reply;
    /// `not_started`: its run is not in the store), `run`, `plan` (as above), `reply` (the
    /// planner's whole reply; null over 1 MiB), `reply_bytes`, `diagnostics` (the
    /// compiler's, whose errors were sent back) and `error` (how its run failed).
    #[schema(value_type = Option<Object>)]
    pub(crate) goal: Option<Value>,
}

/// `GET /v1/sessions/{id}`: a conversation.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub(crate) struct SessionShown {
    pub(crate) id: String,
    /// The summary that stands for its oldest rounds (`upto`: the last goal it covers,
    /// `summary`), if one was made.
    #[schema(value_type = Option<Object>)]
    summary: Option<Value>,
    /// Its goals (rounds), oldest first, each as `goal` of `GET /v1/runs/{id}` shows it
    /// but with `runs` the ids of its runs.
    #[schema(value_type = Vec<Object>)]
    goals: Vec<Value>,
}

/// `POST /v1/runs/{id}/branch/preview`: what a branch would do, nothing run.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub(crate) struct BranchPreview {
    /// The seq_no the branch starts at.
    at: i64,
    /// The parent's variables at the point: the new run starts with them.
    variables: Vec<String>,
    /// The parent's calls before the point (`seq_no`, `tool`, `step`): their answers live
    /// on in those variables and are not requested again.
    #[schema(value_type = Vec<Object>)]
    reused: Value,
    /// The new plan's calls and LLM conditions (`tool: "condition"`) reachable from the
    /// point (`seq_no`, `tool`, `always`: on every way to the end): made anew.
    #[schema(value_type = Vec<Object>)]
    calls: Value,
    /// The new plan's instructions before the point that differ from the parent's: the
    /// branch does not run them, so those edits have no effect.
    ignored: Vec<i64>,
}

/// `POST /v1/runs/{id}/cancel`.
#[derive(Serialize, ToSchema)]
pub(crate) struct Cancelled {
    pub(crate) id: String,
    /// False: the run had finished, and is left as it was.
    pub(crate) cancelled: bool,
}

/// `GET /v1/evals`: newest first.
#[derive(Serialize, ToSchema)]
pub(crate) struct EvalList {
    /// Each: `id`, `dataset`, `created_at`, `summary` (the report's, once it ended: null
    /// while it runs), `cases` and `passed` (stored so far).
    #[schema(value_type = Vec<Object>)]
    pub(crate) evals: Vec<Value>,
}

/// `GET /v1/evals/{id}`.
#[derive(Serialize, ToSchema)]
pub(crate) struct EvalShown {
    /// As `GET /v1/evals` lists it.
    #[schema(value_type = Object)]
    pub(crate) eval: Value,
    /// Each case, in the order they ended: `case`, `goal` (its runs are `goal`, `goal.2`,
    /// ...), `verdict`, `score`, `reason`, `status`, `answer`, `runs`, `latency_ms`.
    #[schema(value_type = Vec<Object>)]
    pub(crate) cases: Vec<Value>,
}

/// `POST /v1/runs/{id}/feedback`.
#[derive(Serialize, ToSchema)]
pub(crate) struct FeedbackGiven {
    pub(crate) id: String,
    /// `verdict`, `note`, `updated_at`, as stored.
    #[schema(value_type = Object)]
    pub(crate) feedback: Value,
}

/// Every error answer.
#[derive(Serialize, ToSchema)]
pub(crate) struct ErrorBody {
    pub(crate) error: ErrorDetail,
    /// A plan's diagnostics (`invalid_plan`), as `planc check --format json` prints them.
    #[schema(value_type = Option<Vec<Object>>)]
    pub(crate) diagnostics: Option<Value>,
}

#[derive(Serialize, ToSchema)]
pub(crate) struct ErrorDetail {
    /// Stable: `bad_json`, `unauthorized`, `unknown_run`, `invalid_plan`, ...
    pub(crate) code: String,
    pub(crate) message: String,
    /// Whose fault, as OpenAI names it: `invalid_request_error`, `authentication_error`,
    /// `permission_error`, `not_found_error`, `rate_limit_error`, `server_error`.
    #[serde(rename = "type")]
    pub(crate) kind: String,
    /// Always null (OpenAI's field: the parameter at fault).
    #[schema(value_type = Option<String>)]
    pub(crate) param: Option<String>,
}

impl RunSummary {
    /// A run as lists show it.
    pub(crate) fn of_run(r: &RunInfo) -> RunSummary {
        RunSummary {
            id: r.id.clone(),
            status: r.status.as_str().to_owned(),
            plan: r.plan.clone(),
            created_at: r.created_at,
            updated_at: r.updated_at,
            steps: r.steps,
            tool_calls: r.tool_calls,
            parent: r.parent.clone(),
            branch_seq: r.branch_seq,
            goal: None,
            usage: r.usage.map(|u| serde_json::json!(u)),
        }
    }

    /// A goal as lists show it: its own status while no plan of it has run, else its latest
    /// run's.
    pub(crate) fn of_goal(goal: &GoalInfo, latest: Option<&RunInfo>) -> RunSummary {
        let mut s = match latest {
            Some(run) => RunSummary::of_run(run),
            None => RunSummary {
                id: goal.id.clone(),
                status: plan_runs::goal::listed_status(goal.status).to_owned(),
                plan: "goal".to_owned(),
                created_at: goal.created_at,
                updated_at: goal.updated_at,
                steps: 0,
                tool_calls: 0,
                parent: None,
                branch_seq: None,
                goal: None,
                usage: None,
            },
        };
        s.goal = Some(goal.goal.clone());
        s
    }
}
