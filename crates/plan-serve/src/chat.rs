//! `POST /v1/chat/completions`: the service as an OpenAI-compatible model. The last user
//! message is the goal, `response_format` passes through to the planner, and the answer is
//! the goal's final answer; the completion's `id` is the goal's (its runs' are `ID`,
//! `ID.2`, ...), so the run can be looked at afterwards. The goal is stored and goes on
//! when the client goes away, as any other.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use plan_planner::{Conversation, Turn};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::State as Shared;
use crate::api::start_goal;
use crate::error::{ApiError, with_trace_id};
use crate::goals::{Asked, Memory, Request};

/// An OpenAI chat completion request; fields not listed are accepted and ignored (clients
/// send many: `temperature`, `n`, `user`, ...).
#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct ChatRequest {
    /// Named in the answer; any value.
    #[serde(default)]
    model: Option<String>,
    /// `{"role", "content"}` each; the last `user` message is the goal.
    #[schema(value_type = Vec<Object>)]
    messages: Vec<Value>,
    #[serde(default)]
    stream: bool,
    /// `{"include_usage": true}`: a stream ends with an event holding `usage`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    stream_options: Option<Value>,
    #[schema(value_type = Option<Object>)]
    response_format: Option<Value>,
}

#[utoipa::path(post, path = "/v1/chat/completions", request_body = ChatRequest, responses(
    (status = 200, description = "a `chat.completion`, or with `stream`, `chat.completion.chunk` events ending in `data: [DONE]`", body = Object),
    (status = 400, body = crate::schema::ErrorBody), (status = 401, body = crate::schema::ErrorBody),
    (status = 413, body = crate::schema::ErrorBody),
    (status = 422, description = "the goal was not answered (the error says why and names the goal)", body = crate::schema::ErrorBody),
    (status = 503, description = "no planner's LLM is configured, or the service is stopping", body = crate::schema::ErrorBody)))]
pub(crate) async fn completions(
    State(state): State<Arc<Shared>>,
    headers: axum::http::HeaderMap,
    body: Result<Json<ChatRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(req) = body?;
    let (at, goal) = last_user_text(&req.messages).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_body",
            "`messages` holds no user message with text",
        )
    })?;
    let model = req.model.unwrap_or_else(|| "planrt".to_owned());
    // NB: stateless, as OpenAI clients expect: the earlier messages are the conversation
    // (kept with the goal, to ask it again after a crash).
    let given = conversation(&req.messages[..at]);
    let request = Request {
        conversation: Some(given.clone()).filter(|c| !c.is_empty()),
        ..Request::default()
    };
    let asked = (goal, req.response_format, Memory::Given(given));
    let trace = state.trace("ask", Some(&asked.0), &headers);
    let trace_id = trace.as_ref().map(plan_telemetry::Trace::trace_id);
    let (summary, task) = start_goal(&state, None, asked, request, trace).await?;
    let (id, created) = (summary.id, summary.created_at / 1000);
    // NB: the goal goes on in the service whatever becomes of this request; a stopping
    // service stops waiting (the goal is taken up at its next start).
    let ended = {
        let (state, id) = (state.clone(), id.clone());
        async move {
            tokio::select! {
                asked = task => asked.unwrap_or_else(|e| {
                    Err(json!({"code": "internal", "message": e.to_string()})).into()
                }),
                () = state.stopped() => Asked::from(Err(json!({"code": "stopping", "message": format!(
                    "the service is stopping; the goal goes on when it starts again: GET /v1/runs/{id}")}))),
            }
        }
    };
    if !req.stream {
        let asked = ended.await;
        let answer = answered(asked.ended, &id)?;
        let response = Json(json!({
            "id": id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer},
                         "finish_reason": "stop"}],
            "usage": usage(asked.usage),
        }))
        .into_response();
        return Ok(with_trace_id(response, trace_id));
    }
    let include_usage = req
        .stream_options
        .as_ref()
        .is_some_and(|o| o["include_usage"] == json!(true));
    let response = streamed(ended, (id, created, model), include_usage);
    Ok(with_trace_id(response, trace_id))
}

/// What the goal comes to as `chat.completion.chunk` events: the role at once, the
/// answer (or the question it stopped at, or the error) once it ended, the usage last
/// when asked for, then `[DONE]`.
fn streamed(
    ended: impl std::future::Future<Output = Asked> + Send + 'static,
    (id, created, model): (String, i64, String),
    include_usage: bool,
) -> Response {
    let (usage_id, usage_model) = (id.clone(), model.clone());
    let chunk = move |delta: Value, finish: Option<&str>| {
        json!({
            "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    };
    // NB: the role goes out at once, so that a client sees the completion has started
    // while the goal is planned and run; keep-alives hold the connection meanwhile.
    let first = chunk(json!({"role": "assistant", "content": ""}), None);
    let rest = async move {
        let asked = ended.await;
        let mut out = Vec::new();
        match asked.ended {
            Ok(answer) => {
                out.push(chunk(json!({"content": text(&answer)}), None));
                out.push(chunk(json!({}), Some("stop")));
            }
            Err(error) if error["code"] == "needs_input" => {
                let content = question_text(&error["question"]);
                out.push(chunk(json!({"content": content}), None));
                out.push(chunk(json!({}), Some("stop")));
            }
            Err(error) => {
                // NB: OpenAI streams an error as a data event with an `error` object: the
                // same object a request without `stream` is answered with.
                out.push(json!({"error": failure(&error, &usage_id).error()}));
            }
        }
        if include_usage {
            // NB: as OpenAI sends it: an event of its own, with no choices, last.
            out.push(json!({
                "id": usage_id, "object": "chat.completion.chunk", "created": created,
                "model": usage_model, "choices": [], "usage": usage(asked.usage),
            }));
        }
        futures::stream::iter(
            out.into_iter()
                .map(|v| Event::default().data(v.to_string()))
                .chain(std::iter::once(Event::default().data("[DONE]")))
                .map(Ok::<_, Infallible>),
        )
    };
    let stream = futures::StreamExt::chain(
        futures::stream::once(async move { Ok(Event::default().data(first.to_string())) }),
        futures::StreamExt::flatten(futures::stream::once(rest)),
    );
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// The last user message: where it is, and its text.
fn last_user_text(messages: &[Value]) -> Option<(usize, String)> {
    let at = messages.iter().rposition(|m| m["role"] == "user")?;
    Some((at, content_text(&messages[at])?)).filter(|(_, t)| !t.trim().is_empty())
}

/// A message's text: a string, or the text parts of a list of parts.
fn content_text(m: &Value) -> Option<String> {
    Some(match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p["type"] == "text")
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return None,
    })
}

/// Earlier messages as the planner's conversation: each user message with the assistant's
/// reply after it (system and tool messages are not the conversation's).
fn conversation(messages: &[Value]) -> Conversation {
    let mut turns: Vec<Turn> = Vec::new();
    for m in messages {
        let Some(text) = content_text(m) else {
            continue;
        };
        match m["role"].as_str() {
            Some("user") => turns.push(Turn {
                vars: Vec::new(),
                id: String::new(),
                goal: text,
                answer: None,
                error: None,
            }),
            Some("assistant") => {
                if let Some(t) = turns.last_mut().filter(|t| t.answer.is_none()) {
                    t.answer = Some(Value::String(text));
                }
            }
            _ => {}
        }
    }
    Conversation {
        summary: None,
        turns,
    }
}

/// An answer as message content: a string as it is, anything else as JSON.
pub(crate) fn text(answer: &Value) -> String {
    match answer {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A question as message content: its text, then its choices one a line.
pub(crate) fn question_text(q: &Value) -> String {
    let mut text = q["question"].as_str().unwrap_or_default().to_owned();
    for c in q["choices"].as_array().into_iter().flatten() {
        text.push_str("\n- ");
        text.push_str(c.as_str().unwrap_or_default());
    }
    text
}

/// The tokens the goal's planner replies cost, as OpenAI writes them (zeros when its
/// server did not say; the tools' LLM calls are not counted).
fn usage(usage: Option<plan_llm::Usage>) -> Value {
    let u = usage.unwrap_or_default();
    json!({"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
           "total_tokens": u.input_tokens.saturating_add(u.output_tokens)})
}

/// The goal's answer as content, or `422` saying why there is none.
fn answered(ended: crate::goals::Ended, id: &str) -> Result<String, ApiError> {
    match ended {
        Ok(answer) => Ok(text(&answer)),
        // NB: a question back is a reply: the user's next message is the next goal, with
        // this exchange in its conversation (the run that asked stays answerable through
        // `POST /v1/runs/{id}/input`).
        Err(error) if error["code"] == "needs_input" => Ok(question_text(&error["question"])),
        Err(error) => Err(failure(&error, id)),
    }
}

/// Why goal `id` has no answer (`error`: its `{code, message}`), as an error.
fn failure(error: &Value, id: &str) -> ApiError {
    let message = error["message"]
        .as_str()
        .unwrap_or("the goal was not answered");
    let (status, code) = match error["code"].as_str() {
        Some("stopping") => (StatusCode::SERVICE_UNAVAILABLE, "stopping"),
        _ => (StatusCode::UNPROCESSABLE_ENTITY, "not_answered"),
    };
    ApiError::new(status, code, format!("goal `{id}`: {message}"))
}

/// The one model the service is, as `GET /v1/models` lists it.
const MODEL: &str = "planrt";

fn model() -> Value {
    // NB: a fixed creation time: the model is the service's planner, whenever it started.
    json!({"id": MODEL, "object": "model", "created": 0, "owned_by": "planrt"})
}

/// `GET /v1/models`: the models chat completions take, in OpenAI's shape (chat clients
/// list them before anything else). Completions take any model name; this is the one.
#[utoipa::path(get, path = "/v1/models", responses(
    (status = 200, description = "`{\"object\": \"list\", \"data\": [model]}`", body = Object),
    (status = 401, body = crate::schema::ErrorBody)))]
pub(crate) async fn models() -> Json<Value> {
    Json(json!({"object": "list", "data": [model()]}))
}

/// `GET /v1/models/{id}`.
#[utoipa::path(get, path = "/v1/models/{id}", params(("id" = String, Path)), responses(
    (status = 200, description = "the model", body = Object),
    (status = 401, body = crate::schema::ErrorBody), (status = 404, body = crate::schema::ErrorBody)))]
pub(crate) async fn model_by_id(
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Result<Json<Value>, ApiError> {
    if id == MODEL {
        return Ok(Json(model()));
    }
    Err(ApiError::new(
        StatusCode::NOT_FOUND,
        "model_not_found",
        format!("the model `{id}` does not exist here: the one model is `{MODEL}`"),
    ))
}
