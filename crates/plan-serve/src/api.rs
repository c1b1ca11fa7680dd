//! The JSON API's handlers for runs, under `/v1`: runs submitted, listed, shown, answered,
//! branched and cancelled (their routes are in `routes.rs`, their errors in `error.rs`).

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use plan_bytecode::ValidatedProgram;
use plan_host::Deadline;
use plan_runs::engine::Refused;
use plan_runs::{Claimed, ErrorKind, read};
use plan_store::OwnedNewRun;
use plan_vm::Limits;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::State as Shared;
use crate::error::{ApiError, blocking, with_trace_id};
use crate::goals::{Memory, Request};
use crate::schema::{Cancelled, RunList, RunSummary};

type AppState = State<Arc<Shared>>;

/// `POST /v1/runs`: `plan`, or `goal` (with `response_format` if wanted); not both.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Submit {
    /// The plan: its instructions (a JSON array), or its text in any form the reader
    /// accepts (a fence, Python literals, either dialect).
    #[schema(value_type = Option<Object>)]
    plan: Option<Value>,
    /// What the answer should achieve, in words: the planner writes the plan (as `planvm
    /// ask`), repairs it and re-plans after a failed run.
    goal: Option<String>,
    /// With `goal`: what the answer must look like (JSON, or text).
    #[schema(value_type = Option<Object>)]
    response_format: Option<Value>,
    /// With `goal`: the conversation it is a round of. Its earlier goals and their
    /// answers go into the planner's prompt (the oldest summarized over `[planner]
    /// memory_tokens`).
    session: Option<String>,
    /// Variables the run starts with.
    #[serde(default)]
    #[schema(value_type = Object)]
    vars: Map<String, Value>,
    /// With `plan`: what the runs list calls it (at most 200 characters; default: the
    /// first line of its first `reasoning` step, else `submitted`).
    name: Option<String>,
    /// The run's id (default: a new UUID v7).
    run_id: Option<String>,
    max_steps: Option<u64>,
    /// Seconds the run (a goal: all of it) may take, from when it starts; positive.
    timeout: Option<f64>,
    /// Answer with the run's events (`200`, `text/event-stream`, as `GET
    /// /v1/runs/{id}/events` from the start; the run's id in the `x-run-id` and `Location`
    /// headers and in the first event) instead of its summary: one request per run.
    #[serde(default)]
    stream: bool,
}

#[utoipa::path(post, path = "/v1/runs", request_body = Submit, responses(
    (status = 201, description = "stored; it goes on in the service (on a PostgreSQL store, a plan's run goes into the store's queue: `queued`)", body = crate::schema::RunSummary),
    (status = 200, description = "with `stream`: the run's events as `GET /v1/runs/{id}/events` sends them, its id in `x-run-id`", content_type = "text/event-stream", body = Object),
    (status = 400, body = crate::schema::ErrorBody), (status = 401, body = crate::schema::ErrorBody),
    (status = 409, body = crate::schema::ErrorBody), (status = 413, body = crate::schema::ErrorBody),
    (status = 422, description = "the plan has errors; nothing stored", body = crate::schema::ErrorBody),
    (status = 503, description = "a goal, and no planner's LLM is configured", body = crate::schema::ErrorBody)))]
pub(crate) async fn submit(
    State(state): AppState,
    headers: axum::http::HeaderMap,
    body: Result<Json<Submit>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(submit) = body?;
    let command = if submit.goal.is_some() { "ask" } else { "run" };
    let trace = state.trace(command, submit.goal.as_deref(), &headers);
    let trace_id = trace.as_ref().map(plan_telemetry::Trace::trace_id);
    let (id, created) = match start(&state, submit, trace, true).await? {
        Started::Row(run) => {
            return Ok(with_trace_id(
                (StatusCode::CREATED, Json(run)).into_response(),
                trace_id,
            ));
        }
        Started::Streamed(id) => (id, None),
        Started::Created(created) => (created.0.clone(), Some(created)),
    };
    // NB: 200, not 201: an EventSource takes a stream only from a 200.
    let mut response = crate::events::stream(state, id.clone(), None, created).await?;
    if let Ok(id) = axum::http::HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-run-id", id);
    }
    if let Ok(at) = axum::http::HeaderValue::from_str(&format!("/v1/runs/{id}")) {
        response
            .headers_mut()
            .insert(axum::http::header::LOCATION, at);
    }
    Ok(with_trace_id(response, trace_id))
}

/// A run or goal [`start`] stored and started.
pub(crate) enum Started {
    /// Its row as stored.
    Row(RunSummary),
    /// Its id: a goal, or a run queued, whose events are to be streamed.
    Streamed(String),
    /// A plan's run started here, whose events are to be streamed: what its stream starts
    /// from (its row is not read back).
    Created(crate::events::Created),
}

/// Stores a run of `submit`'s plan, or its goal, and starts it in the service (see
/// [`submit`]), traced in `trace` if given; a plan's run goes into the store's queue
/// instead when `may_queue` and the service takes runs from one (see `queue`).
pub(crate) async fn start(
    state: &Arc<Shared>,
    submit: Submit,
    trace: Option<plan_telemetry::Trace>,
    may_queue: bool,
) -> Result<Started, ApiError> {
    let state = state.clone();
    let stream = submit.stream;
    let plan = match (submit.plan, submit.goal) {
        (Some(plan), None) if submit.response_format.is_none() && submit.session.is_none() => plan,
        (_, Some(_)) if submit.name.is_some() => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_body",
                "`name` names a plan; a goal is named by its text",
            ));
        }
        (None, Some(goal)) => {
            limits(submit.max_steps)?;
            let request = Request {
                vars: submit.vars,
                max_steps: submit.max_steps,
                timeout: submit
                    .timeout
                    .map(|t| positive_secs(t).map(|_| t))
                    .transpose()?,
                ..Request::default()
            };
            let memory = submit.session.map_or(Memory::None, Memory::Session);
            let asked = (goal, submit.response_format, memory);
            let (row, _) = start_goal(&state, submit.run_id, asked, request, trace).await?;
            return Ok(match stream {
                true => Started::Streamed(row.id),
                false => Started::Row(row),
            });
        }
        _ => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_body",
                "give either `plan`, or `goal` (with `response_format` and `session` if wanted)",
            ));
        }
    };
    let name = run_name(submit.name, &plan)?;
    let source = plan_text(&plan);
    drop(plan);
    let large = source.len() > crate::trim::LARGE;
    let (program, pbc) = compiled(&state, &source, submit.vars.keys().cloned().collect())?;
    let limits = limits(submit.max_steps)?;
    let timeout = submit.timeout.map(positive_secs).transpose()?;
    let id = run_id(&state, submit.run_id).await?;
    let new = OwnedNewRun {
        id: id.clone(),
        plan: name,
        source: Some(source),
        pbc,
        presets: submit.vars,
        limits: limits.clone(),
        parent: None,
    };
    let presets: Vec<(String, Value)> = new.presets.clone().into_iter().collect();
    // NB: a deadline is not kept with a queued run: a run given one is this service's.
    if may_queue && crate::queue::shared(&state) && timeout.is_none() {
        let row = crate::queue::enqueue(&state, new).await?;
        if let Some(t) = trace {
            t.end(&plan_telemetry::Ended::nothing_ran("queued", Some(&row.id)));
        }
        return Ok(match stream {
            true => Started::Streamed(row.id),
            false => Started::Row(RunSummary::of_run(&row)),
        });
    }
    // NB: its stream starts from the source rather than read it back.
    let source = stream.then(|| new.source.clone().unwrap_or_default());
    // NB: in a task of its own: a run once created is run even when its client goes away
    // before the answer.
    detached(async move {
        state.writer.create(new).await?;
        // NB: watched from before the answer, so that a stream opened at once is woken
        // (and, for a stream, handed every point written).
        let notifier = state.live.start_written(&id);
        let started = match source {
            Some(source) => Started::Created((id, source, notifier.watch())),
            None => Started::Row(RunSummary::of_run(
                &state.read(move |store| Ok(store.run(&id)?)).await?,
            )),
        };
        spawn_new(
            state,
            notifier,
            program,
            (presets, limits, timeout),
            (trace, large),
        );
        Ok(started)
    })
    .await
}

/// A posted plan's `source`, compiled with `presets` preset (once, while it is posted
/// again and again), and its bytecode; `422` with every diagnostic when it is not a
/// valid program.
fn compiled(
    state: &Shared,
    source: &str,
    presets: Vec<String>,
) -> Result<(ValidatedProgram, Vec<u8>), ApiError> {
    let compiled = state
        .engine
        .compile("plan", source.as_bytes(), presets, &mut |_| {});
    let c = compiled.map_err(|e| invalid_plan(e, source))?;
    Ok((c.loaded.program.clone(), c.pbc.clone()))
}

/// `work`, run to its end even when the request that started it is dropped.
async fn detached<T: Send + 'static>(
    work: impl std::future::Future<Output = Result<T, ApiError>> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::spawn(work)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?
}

/// The id of a new run of a plan: `given`, or a new one. Refuses (409) an id given that is
/// a goal's, or one of its runs' (`G`, `G.2`, ...): the goal's runs would not be its own.
/// NB: an id the service makes is new: no goal has it, and none is looked up.
async fn run_id(state: &Arc<Shared>, given: Option<String>) -> Result<String, ApiError> {
    let Some(id) = given else {
        return Ok(plan_store::new_run_id());
    };
    let given = id.clone();
    let goal = state
        .read(move |store| {
            let base = id.rsplit_once('.').map_or(id.as_str(), |(b, _)| b);
            for g in [id.as_str(), base] {
                if store.goal(g)?.is_some() && plan_store::goal_run_number(g, &id).is_some() {
                    return Ok(Some(g.to_owned()));
                }
            }
            Ok(None)
        })
        .await?;
    match goal {
        Some(g) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "duplicate_run",
            format!("run ids `{g}`, `{g}.2`, ... are goal `{g}`'s"),
        )),
        None => Ok(given),
    }
}

/// `t` seconds, when a positive number of them.
fn positive_secs(t: f64) -> Result<Duration, ApiError> {
    Duration::try_from_secs_f64(t)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_timeout",
                format!("timeout must be a positive number of seconds, not {t}"),
            )
        })
}

/// Stores goal `goal` (under `id` if given) and asks the planner for it in the service:
/// its summary (status `planning`), and the task that ends with its outcome.
pub(crate) async fn start_goal(
    state: &Arc<Shared>,
    id: Option<String>,
    (goal, response_format, memory): (String, Option<Value>, Memory),
    request: Request,
    trace: Option<plan_telemetry::Trace>,
) -> Result<(RunSummary, tokio::task::JoinHandle<crate::goals::Asked>), ApiError> {
    // NB: before anything is stored or asked: the planner's reply to nothing is paid for.
    if goal.trim().is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_goal",
            "the goal is empty: say in words what the answer should achieve",
        ));
    }
    if let Err(why) = &state.planner {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "no_planner",
            format!("goals cannot be planned here: {why}"),
        ));
    }
    let state = state.clone();
    // NB: in a task of its own: a goal once stored is asked even when its client goes
    // away before the answer.
    detached(async move {
        let row = {
            let (at, goal, rf) = (state.at.clone(), goal.clone(), response_format.clone());
            let asked = serde_json::to_value(&request).unwrap_or_default();
            let session = match &memory {
                Memory::Session(s) => Some(s.clone()),
                Memory::None | Memory::Given(_) => None,
            };
            blocking(move || {
                let about = (goal.as_str(), rf.as_ref(), session.as_deref());
                let id = plan_runs::ask::create_goal(&at, id.as_deref(), about, &asked)?;
                let store = at.open(plan_runs::open::Access::Existing)?;
                store.goal(&id)?.ok_or_else(|| {
                    plan_runs::Error::new(ErrorKind::UnknownRun, format!("goal `{id}` vanished"))
                })
            })
            .await?
        };
        let task = crate::goals::spawn_ask(
            state,
            row.id.clone(),
            (goal, response_format, memory),
            request,
            trace,
        );
        Ok((RunSummary::of_goal(&row, None), task))
    })
    .await
}

/// The limits of a run: the defaults, with `max_steps` if given (at most `i64::MAX`, as
/// the API's document says: a store keeps it as a signed integer).
fn limits(max_steps: Option<u64>) -> Result<Limits, ApiError> {
    let mut limits = Limits::default();
    if let Some(n) = max_steps {
        if i64::try_from(n).is_err() {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_body",
                format!("`max_steps` {n} is over {}", i64::MAX),
            ));
        }
        limits.max_steps = n;
    }
    Ok(limits)
}

/// A plan given as its instructions (a JSON array) or as text, as text.
/// The longest name a run may be given, in characters.
const MAX_NAME_CHARS: usize = 200;

/// What the runs list calls a run of `plan`: `given` (checked), else the first line of
/// its first reasoning step, else `submitted`.
fn run_name(given: Option<String>, plan: &Value) -> Result<String, ApiError> {
    if let Some(name) = given {
        let bad = |why: &str| {
            Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_body",
                format!("`name` {why}"),
            ))
        };
        if name.trim().is_empty() {
            return bad("is empty");
        }
        if name.chars().count() > MAX_NAME_CHARS {
            return bad(&format!("is over {MAX_NAME_CHARS} characters"));
        }
        if name.chars().any(char::is_control) {
            return bad("holds a control character");
        }
        return Ok(name.trim().to_owned());
    }
    let read;
    let instructions = match plan {
        Value::Array(items) => items.as_slice(),
        // NB: a large plan's text is not read for its name (`read_plan`).
        Value::String(text) => {
            read = read::read_plan(text);
            read.as_ref().map_or(&[][..], |r| r.instructions.as_slice())
        }
        _ => &[],
    };
    Ok(read::plan_name(instructions).unwrap_or_else(|| "submitted".to_owned()))
}

fn plan_text(plan: &Value) -> String {
    match plan {
        Value::String(text) => text.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// `422` for a plan `source` with errors, with every diagnostic.
fn invalid_plan(e: plan_runs::load::LoadError, source: &str) -> ApiError {
    let invalid = match e {
        plan_runs::load::LoadError::Invalid(invalid) => invalid,
        plan_runs::load::LoadError::Unreadable(msg) => {
            return ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_plan", msg);
        }
    };
    // NB: refused before it was read (too large, not text): the message says why.
    if invalid.found.diagnostics.is_empty() {
        return ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_plan",
            invalid.message,
        );
    }
    let index = plan_syntax::LineIndex::new(invalid.source.as_deref().unwrap_or(source));
    let diagnostics: Vec<Value> = (invalid.found.diagnostics.iter())
        .map(|d| plan_render::diagnostic_json("plan", d, &index))
        .collect();
    let errors = diagnostics
        .iter()
        .filter(|d| d["severity"] == "error")
        .count();
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_plan",
        format!("the plan has {errors} error(s); nothing was run"),
    )
    .with("diagnostics", Value::Array(diagnostics))
}

/// `POST /v1/runs/{id}/branch`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Branch {
    /// Branch just before the parent first executed this seq_no.
    at: i64,
    /// The new plan, which goes on at its own instruction with that seq_no.
    #[schema(value_type = Object)]
    plan: Value,
    run_id: Option<String>,
    max_steps: Option<u64>,
}

/// A new run from a point of run `id`, with another plan, as `planvm branch` does; the
/// parent is not changed.
#[utoipa::path(post, path = "/v1/runs/{id}/branch", request_body = Branch,
    params(("id" = String, Path, description = "the parent run")), responses(
    (status = 201, body = crate::schema::RunSummary),
    (status = 400, body = crate::schema::ErrorBody), (status = 401, body = crate::schema::ErrorBody),
    (status = 404, body = crate::schema::ErrorBody), (status = 409, body = crate::schema::ErrorBody),
    (status = 413, body = crate::schema::ErrorBody), (status = 422, body = crate::schema::ErrorBody)))]
pub(crate) async fn branch(
    State(state): AppState,
    Path(parent): Path<String>,
    body: Result<Json<Branch>, JsonRejection>,
) -> Result<(StatusCode, Json<RunSummary>), ApiError> {
    let Json(b) = body?;
    let branch = branched(&state, parent, &b).await?;
    let id = run_id(&state, b.run_id).await?;
    // NB: in a task of its own, as a new run (see `submit`).
    let row = detached(async move {
        let warn = state.warn;
        let (claimed, row) = blocking(move || {
            let claimed = branch.start(&id, warn)?;
            let row = claimed.row();
            Ok((claimed, row))
        })
        .await?;
        spawn_claimed(state, claimed, None);
        Ok(row?)
    })
    .await?;
    Ok((StatusCode::CREATED, Json(RunSummary::of_run(&row))))
}

/// `b`'s branch from run `parent`: its point, and its new plan compiled and checked to go
/// on from there (`422` with its diagnostics otherwise).
async fn branched(
    state: &Arc<Shared>,
    parent: String,
    b: &Branch,
) -> Result<plan_runs::Branch, ApiError> {
    let source = plan_text(&b.plan);
    let limits = limits(b.max_steps)?;
    let (state, at, plan) = (state.clone(), b.at, source.as_bytes().to_vec());
    let branched = blocking(move || {
        let request = plan_runs::BranchRequest {
            parent: &parent,
            at,
            name: "plan",
            plan,
            limits,
        };
        match state.engine.branch(&state.at, request) {
            Ok(branch) => Ok(Ok(branch)),
            Err(Refused::Plan(e)) => Ok(Err(e)),
            Err(Refused::Engine(e)) => Err(e),
        }
    })
    .await?;
    branched.map_err(|e| invalid_plan(e, &source))
}

/// What a branch from run `id` with the body of `POST /v1/runs/{id}/branch` would do,
/// nothing run: the parent's variables and calls it reuses, the calls it would make, and
/// the edits before the point it would ignore.
#[utoipa::path(post, path = "/v1/runs/{id}/branch/preview", request_body = Branch,
    params(("id" = String, Path, description = "the parent run")), responses(
    (status = 200, body = crate::schema::BranchPreview),
    (status = 400, body = crate::schema::ErrorBody), (status = 401, body = crate::schema::ErrorBody),
    (status = 404, body = crate::schema::ErrorBody), (status = 409, body = crate::schema::ErrorBody),
    (status = 413, body = crate::schema::ErrorBody), (status = 422, body = crate::schema::ErrorBody)))]
pub(crate) async fn preview(
    State(state): AppState,
    Path(parent): Path<String>,
    body: Result<Json<Branch>, JsonRejection>,
) -> Result<Json<plan_runs::Preview>, ApiError> {
    let Json(b) = body?;
    let branch = branched(&state, parent, &b).await?;
    Ok(Json(blocking(move || branch.preview()).await?))
}

/// Runs a new run (created through the writer) in the service, once a slot is free.
fn spawn_new(
    state: Arc<Shared>,
    notifier: crate::live::Notifier,
    program: ValidatedProgram,
    (presets, limits, timeout): (Vec<(String, Value)>, Limits, Option<Duration>),
    (trace, large): (Option<plan_telemetry::Trace>, bool),
) {
    tokio::spawn(async move {
        let Some(_slot) = state.slot().await else {
            return;
        };
        // NB: the deadline counts from when the run starts, not while it waits.
        let within = timeout.and_then(Deadline::after);
        let mut spans = trace.as_ref().map(|t| t.journal(state.engine.manifest()));
        let watch = (
            &mut spans as &mut dyn plan_host::Journal,
            Some(notifier.on_written()),
        );
        let run = state.writer.run(
            notifier.id(),
            (&state.host, &program),
            (presets, limits),
            within,
            watch,
        );
        let report = plan_telemetry::within(trace.as_ref(), run).await;
        if let Some(t) = trace {
            t.end(&plan_telemetry::Ended::run(&report, Some(notifier.id())));
        }
        drop((report, program));
        if large {
            state.trimmer.note();
        }
    });
}

/// Runs a claimed run (resumed) in the service, once a slot is free. One given a person's
/// answer (`answering`) goes without a slot once the service stops: the answer is only in
/// memory until the run journals it ([`crate::Service::drained`] waits for these runs).
pub(crate) fn spawn_claimed(
    state: Arc<Shared>,
    claimed: Claimed,
    answering: Option<crate::Answering>,
) {
    let mut notifier = state.live.start(claimed.id());
    tokio::spawn(async move {
        // NB: not `slot()` alone: once stopping, the drain holds every slot.
        let slot = tokio::select! {
            slot = state.slot() => slot,
            () = state.stopped() => None,
        };
        if slot.is_none() && answering.is_none() {
            return;
        }
        let id = claimed.id().to_owned();
        let trace = state.trace("resume", None, &axum::http::HeaderMap::new());
        let spans = trace.as_ref().map(|t| t.journal(state.engine.manifest()));
        let mut journal = (&mut notifier, spans);
        let report =
            plan_telemetry::within(trace.as_ref(), claimed.go(&state.host, &mut journal)).await;
        if let Some(t) = trace {
            t.end(&plan_telemetry::Ended::run(&report, Some(&id)));
        }
        drop((slot, answering));
    });
}

/// `GET /v1/runs?status=&limit=&before=`.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    /// Only runs with this status.
    #[param(value_type = Option<crate::schema::StatusFilter>, inline)]
    status: Option<String>,
    limit: Option<usize>,
    /// Only runs created before this one (the last id of the previous page).
    before: Option<String>,
    /// Only runs whose name or goal holds this text (letter case aside).
    q: Option<String>,
}

#[utoipa::path(get, path = "/v1/runs", params(ListQuery), responses(
    (status = 200, description = "newest first", body = crate::schema::RunList),
    (status = 400, body = crate::schema::ErrorBody), (status = 401, body = crate::schema::ErrorBody)))]
pub(crate) async fn list(
    State(state): AppState,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<RunList>, ApiError> {
    let Query(q) =
        query.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "bad_query", e.body_text()))?;
    let wanted = match q.status.as_deref() {
        None => None,
        Some(s) => Some(parse_status(s).ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_query",
                format!(
                    "status `{s}`: one of planning, running, ok, failed, interrupted, needs_input, queued"
                ),
            )
        })?),
    };
    let limit = q.limit.unwrap_or(100).min(1000);
    let before = q.before;
    let text =
        q.q.map(|t| t.trim().to_lowercase())
            .filter(|t| !t.is_empty());
    let runs = state
        .read(move |store| {
            let wanted = crate::page::Wanted {
                status: wanted,
                text: text.as_deref(),
            };
            crate::page::runs(store, before.as_deref(), wanted, limit)
        })
        .await?;
    Ok(Json(RunList { runs }))
}

fn parse_status(s: &str) -> Option<&'static str> {
    [
        "planning",
        "running",
        "ok",
        "failed",
        "interrupted",
        "needs_input",
        "queued",
    ]
    .into_iter()
    .find(|k| *k == s)
}

/// `GET /v1/runs/{id}`: the run, its committed steps and its calls.
#[utoipa::path(get, path = "/v1/runs/{id}", params(("id" = String, Path)), responses(
    (status = 200, body = crate::schema::RunShown),
    (status = 401, body = crate::schema::ErrorBody), (status = 404, body = crate::schema::ErrorBody)))]
pub(crate) async fn show(
    State(state): AppState,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let shown = state.read(move |store| shown(store, &id)).await?;
    Ok(Json(shown))
}

/// Run (or goal) `id` as `GET /v1/runs/{id}` shows it.
pub(crate) fn shown(store: &dyn plan_store::RunStore, id: &str) -> Result<Value, plan_runs::Error> {
    // NB: any run of a goal (`ID.2`, a re-plan) shows the goal with its versions.
    let goal = match plan_runs::ask::goal_of_run(store, id)? {
        Some(g) => Some(crate::goals::view(store, &g)?),
        None => None,
    };
    let mut shown = match read::show(store, id) {
        Ok(shown) => {
            let source = read::source(store, &shown.run);
            let children = store.children(id)?;
            let mut v = json!(shown);
            // NB: not for a large plan (`read_plan`): the page reads such a plan, a JSON
            // array, from `source`.
            v["plan"] = json!(source.as_deref().and_then(read::read_plan));
            v["source"] = json!(source);
            v["children"] = json!(children);
            v
        }
        // NB: a goal no plan of which has run yet has no run to show (but `ID.9` of a
        // goal with one run is no run at all).
        Err(e)
            if e.kind == ErrorKind::UnknownRun && goal.as_ref().is_some_and(|g| g["id"] == id) =>
        {
            json!({"run": null, "steps": [], "calls": [], "source": null, "plan": null, "children": []})
        }
        Err(e) => return Err(e),
    };
    store.unchanged()?;
    shown["goal"] = json!(goal);
    Ok(shown)
}

/// The body of `POST /v1/runs/{id}/input`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Input {
    /// The answer to the run's question: not empty, and one of its `choices` when it has
    /// some. It becomes the output of the run's `ask_user` call.
    text: String,
}

/// `POST /v1/runs/{id}/input`: answers the question run `id` stopped at, and the run goes
/// on in the service (its events continue); its goal, if it answers one, ends with it.
#[utoipa::path(post, path = "/v1/runs/{id}/input", request_body = Input,
    params(("id" = String, Path)), responses(
    (status = 202, body = crate::schema::RunSummary),
    (status = 400, body = crate::schema::ErrorBody), (status = 401, body = crate::schema::ErrorBody),
    (status = 404, body = crate::schema::ErrorBody),
    (status = 409, description = "the run is not waiting for input (`not_waiting`), or another request answered it first", body = crate::schema::ErrorBody),
    (status = 413, body = crate::schema::ErrorBody),
    (status = 422, description = "an empty answer, or one not among the choices (`bad_input`)", body = crate::schema::ErrorBody),
    (status = 503, description = "the service is stopping (`stopping`): nothing was taken; give the answer again once it is back", body = crate::schema::ErrorBody)))]
pub(crate) async fn input(
    State(state): AppState,
    Path(id): Path<String>,
    body: Result<Json<Input>, JsonRejection>,
) -> Result<(StatusCode, Json<RunSummary>), ApiError> {
    let Json(Input { text }) = body?;
    // NB: counted from before the check, so that a drain starting meanwhile waits for it.
    let answering = crate::Answering::start(&state);
    if state.host.draining() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "stopping",
            "the service is stopping: give the answer again once it is back",
        ));
    }
    // NB: in a task of its own, as a new run (see `submit`): once claimed, it goes on.
    let row = detached(async move {
        let (claimed, row) = blocking({
            let state = state.clone();
            move || {
                let request = plan_runs::ResumeRequest {
                    input: Some(&text),
                    ..plan_runs::ResumeRequest::new(&id)
                };
                let claimed = match plan_runs::resume(&state.at, request)? {
                    plan_runs::Resume::Ready(ready) => ready.claim(state.warn)?,
                    // NB: an answer is never taken by a run that waits for none.
                    plan_runs::Resume::Finished(_) => {
                        return Err(plan_runs::Error::new(
                            ErrorKind::NotWaiting,
                            format!("run `{id}` is not waiting for input"),
                        ));
                    }
                };
                let row = claimed.row();
                Ok((claimed, row))
            }
        })
        .await?;
        spawn_claimed(state, claimed, Some(answering));
        Ok(row?)
    })
    .await?;
    Ok((StatusCode::ACCEPTED, Json(RunSummary::of_run(&row))))
}

/// `POST /v1/runs/{id}/cancel`.
#[utoipa::path(post, path = "/v1/runs/{id}/cancel", params(("id" = String, Path)), responses(
    (status = 200, body = crate::schema::Cancelled),
    (status = 401, body = crate::schema::ErrorBody), (status = 404, body = crate::schema::ErrorBody)))]
pub(crate) async fn cancel(
    State(state): AppState,
    Path(id): Path<String>,
) -> Result<Json<Cancelled>, ApiError> {
    let at = state.at.clone();
    let run_id = id.clone();
    let cancelled = blocking(move || plan_runs::cancel(&at, &run_id)).await?;
    Ok(Json(Cancelled { id, cancelled }))
}
