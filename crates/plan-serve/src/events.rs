//! `GET /v1/runs/{id}/events`: a run as a stream of server-sent events, from what its
//! journal holds: every event journaled so far, then the new ones as the run commits
//! them, until it ends. Each event's `id` is the number of the step it belongs to (0 for
//! the plan), so a client that reconnects with `Last-Event-ID: N` gets what came after
//! step N and nothing twice. A client that goes away changes nothing for the run.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use plan_runs::read::{self, Shown};
use plan_store::RunStatus;
use serde_json::{Value, json};

use crate::State as Shared;
use crate::api::{ApiError, blocking};

/// How often a run still going is read again.
const POLL: Duration = Duration::from_millis(100);

/// Where a stream of one run stands.
struct Cursor {
    state: Arc<Shared>,
    id: String,
    /// The last step sent (0: the plan).
    after: Option<u64>,
    done: bool,
}

#[utoipa::path(get, path = "/v1/runs/{id}/events", params(("id" = String, Path),
    ("Last-Event-ID" = Option<String>, Header, description = "the last event received")),
    responses((status = 200, description = "server-sent events: plan, tool_call, step, answer, failed", content_type = "text/event-stream", body = String),
    (status = 401, body = crate::openapi::ErrorBody), (status = 404, body = crate::openapi::ErrorBody)))]
pub(crate) async fn events(
    State(state): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    // NB: an unknown run is a 404, not an empty stream.
    let first = read_run(&state, &id).await?;
    let cursor = Cursor {
        state,
        id,
        after,
        done: false,
    };
    let stream = futures::stream::unfold((cursor, Some(first)), |(mut c, first)| async move {
        if c.done {
            return None;
        }
        let mut shown = first;
        loop {
            let run = match shown.take() {
                Some(s) => s,
                None => match read_run(&c.state, &c.id).await {
                    Ok(s) => s,
                    Err(_) => {
                        c.done = true;
                        let gone = Event::default().event("failed").data(
                            json!({"error": {"code": "unreadable", "message": "the run can no longer be read"}})
                                .to_string(),
                        );
                        return Some((vec![Ok(gone)], (c, None)));
                    }
                },
            };
            let (batch, done) = new_events(&run, c.after);
            if let Some(last) = batch.last() {
                c.after = Some(last.0);
            }
            c.done = done;
            if !batch.is_empty() || done {
                let events = batch.into_iter().map(|(_, e)| Ok(e)).collect::<Vec<_>>();
                return Some((events, (c, None)));
            }
            tokio::time::sleep(POLL).await;
        }
    });
    let stream = futures::StreamExt::flat_map(stream, futures::stream::iter);
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

async fn read_run(state: &Arc<Shared>, id: &str) -> Result<(Shown, Option<String>), ApiError> {
    let (state, id) = (state.clone(), id.to_owned());
    blocking(move || {
        let store = state.at.open(plan_runs::open::Access::Read)?;
        let shown = read::show(&*store, &id)?;
        let source = store
            .program(&shown.run.program)
            .ok()
            .and_then(|p| p.source);
        Ok((shown, source))
    })
    .await
}

/// The events of `run` after step `after` (all of them when None), each with the step it
/// belongs to, and whether the run has ended (its last event is among them).
fn new_events(
    (run, source): &(Shown, Option<String>),
    after: Option<u64>,
) -> (Vec<(u64, Event)>, bool) {
    let mut out = Vec::new();
    let event = |id: u64, kind: &str, data: Value| {
        (
            id,
            Event::default()
                .id(id.to_string())
                .event(kind)
                .data(data.to_string()),
        )
    };
    if after.is_none() {
        out.push(event(0, "plan", json!({"id": run.run.id, "plan": source})));
    }
    let after = after.unwrap_or(0);
    for s in run.steps.iter().filter(|s| s.step > after) {
        // NB: a call belongs to the step that made it: the one after the `step`
        // instructions executed before it.
        for c in run.calls.iter().filter(|c| c.step + 1 == s.step) {
            out.push(event(s.step, "tool_call", json!(c)));
        }
        out.push(event(s.step, "step", json!(s)));
    }
    // NB: calls still out are not events yet: each comes with the step that takes its
    // answer. The end is the event after the last step, sent once.
    let end = run.steps.last().map_or(0, |s| s.step) + 1;
    let ended = match run.run.status {
        RunStatus::Ok => Some(("answer", json!({"final_answer": run.run.final_answer}))),
        RunStatus::Failed => Some(("failed", json!({"error": run.run.error}))),
        RunStatus::Running | RunStatus::Interrupted => None,
    };
    let done = ended.is_some();
    if let Some((kind, data)) = ended
        && after < end
    {
        out.push(event(end, kind, data));
    }
    (out, done)
}
