//! Evaluations (`planvm eval --store`) and people's verdicts: `GET /v1/evals`, `GET
//! /v1/evals/{id}` (its cases, each with its verdict and its goal's runs), `POST
//! /v1/runs/{id}/feedback`.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use plan_runs::read;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::State as Shared;
use crate::error::{ApiError, blocking};
use crate::schema::{EvalList, EvalShown, FeedbackGiven};

type AppState = State<Arc<Shared>>;

/// `GET /v1/evals`: every evaluation, newest first.
#[utoipa::path(get, path = "/v1/evals", responses(
    (status = 200, body = EvalList), (status = 401, body = crate::schema::ErrorBody)))]
pub(crate) async fn list(State(state): AppState) -> Result<Json<EvalList>, ApiError> {
    let mut evals = state.read(|store| read::evals(store)).await?;
    evals.reverse();
    Ok(Json(EvalList {
        evals: evals.into_iter().map(|e| json!(e)).collect(),
    }))
}

/// `GET /v1/evals/{id}`: an evaluation and its cases.
#[utoipa::path(get, path = "/v1/evals/{id}", params(("id" = String, Path)), responses(
    (status = 200, body = EvalShown),
    (status = 401, body = crate::schema::ErrorBody), (status = 404, body = crate::schema::ErrorBody)))]
pub(crate) async fn show(
    State(state): AppState,
    Path(id): Path<String>,
) -> Result<Json<EvalShown>, ApiError> {
    let (eval, cases) = state.read(move |store| read::eval(store, &id)).await?;
    let cases = cases
        .into_iter()
        .map(|c| {
            let mut v = json!(c);
            // NB: what the report said of the case besides its verdict: its status, its
            // answer, its runs.
            for key in ["status", "answer", "runs", "latency_ms"] {
                if let Some(x) = c.report.get(key) {
                    v[key] = x.clone();
                }
            }
            v
        })
        .collect();
    Ok(Json(EvalShown {
        eval: json!(eval),
        cases,
    }))
}

/// The body of `POST /v1/runs/{id}/feedback`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Feedback {
    verdict: Verdict,
    /// Why, in a few words (at most 4,000 characters).
    note: Option<String>,
}

/// A person's verdict.
#[derive(Clone, Copy, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Verdict {
    Good,
    Bad,
}

/// `POST /v1/runs/{id}/feedback`: a person's verdict on a run, in place of any earlier
/// one; `planvm eval --compare` shows it beside the judge's.
#[utoipa::path(post, path = "/v1/runs/{id}/feedback", params(("id" = String, Path)),
    request_body = Feedback, responses(
    (status = 200, body = FeedbackGiven),
    (status = 400, body = crate::schema::ErrorBody), (status = 401, body = crate::schema::ErrorBody),
    (status = 404, body = crate::schema::ErrorBody), (status = 413, body = crate::schema::ErrorBody),
    (status = 422, description = "the note is too long", body = crate::schema::ErrorBody)))]
pub(crate) async fn feedback(
    State(state): AppState,
    Path(id): Path<String>,
    body: Result<Json<Feedback>, JsonRejection>,
) -> Result<Json<FeedbackGiven>, ApiError> {
    let Json(body) = body?;
    let at = state.at.clone();
    let run = id.clone();
    let note = body.note.clone();
    let verdict = match body.verdict {
        Verdict::Good => "good",
        Verdict::Bad => "bad",
    };
    blocking(move || plan_runs::feedback(&at, &run, verdict, note)).await?;
    let given = state
        .read({
            let id = id.clone();
            move |store| Ok(store.feedback(&id)?)
        })
        .await?;
    Ok(Json(FeedbackGiven {
        id,
        feedback: given.map_or(Value::Null, |f| json!(f)),
    }))
}
