//! Errors as the API answers them: `{"error": {"code", "message", "type", "param"}}` with a
//! status that says whose fault it is.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use plan_runs::ErrorKind;
use serde_json::{Map, Value, json};

/// An error answer: its status, a stable code and a message for people.
pub(crate) struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    /// More fields beside `error` (a plan's diagnostics).
    extra: Map<String, Value>,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            extra: Map::new(),
        }
    }

    /// It with `field` beside `error` in its body.
    pub(crate) fn with(mut self, field: &str, value: Value) -> Self {
        self.extra.insert(field.to_owned(), value);
        self
    }
}

impl ApiError {
    /// The body it answers with: `{"error": {"code", "message", "type", "param"}, ...}`,
    /// which is also OpenAI's shape, so that its clients read the service's errors.
    pub(crate) fn body(&self) -> Value {
        let mut body = self.extra.clone();
        body.insert("error".into(), self.error());
        Value::Object(body)
    }

    /// The `error` object of its body.
    pub(crate) fn error(&self) -> Value {
        json!({"code": self.code, "message": self.message, "type": error_type(self.status),
               "param": null})
    }
}

/// The kind of an error by its status, as OpenAI names them.
fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        500.. => "server_error",
        _ => "invalid_request_error",
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

impl From<plan_runs::Error> for ApiError {
    fn from(e: plan_runs::Error) -> ApiError {
        let status = match e.kind {
            ErrorKind::UnknownRun | ErrorKind::NoStore => StatusCode::NOT_FOUND,
            ErrorKind::BadRunId => StatusCode::BAD_REQUEST,
            ErrorKind::DuplicateRun
            | ErrorKind::Busy
            | ErrorKind::UnknownWrites
            | ErrorKind::Cancelled
            | ErrorKind::NotWaiting => StatusCode::CONFLICT,
            ErrorKind::NotReached
            | ErrorKind::Invalid
            | ErrorKind::BadInput
            | ErrorKind::OutputIsInput => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorKind::NotAStore
            | ErrorKind::Damaged
            | ErrorKind::Unreadable
            | ErrorKind::CannotCreate
            | ErrorKind::Config => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorKind::ReadOnly | ErrorKind::Io => StatusCode::SERVICE_UNAVAILABLE,
        };
        ApiError::new(status, e.kind.code(), e.message)
    }
}

impl From<JsonRejection> for ApiError {
    fn from(e: JsonRejection) -> ApiError {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(c) = cause {
            if c.is::<BodyTimedOut>() {
                return ApiError::new(StatusCode::REQUEST_TIMEOUT, "body_timeout", c.to_string());
            }
            cause = c.source();
        }
        match e.status() {
            StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", e.body_text())
            }
            _ => ApiError::new(StatusCode::BAD_REQUEST, "bad_json", e.body_text()),
        }
    }
}

/// Runs blocking store work off the runtime's threads.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, plan_runs::Error> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?
        .map_err(ApiError::from)
}

/// `response` with the trace its work goes on in, when traces are exported
/// (`x-trace-id`: 32 hex digits).
pub(crate) fn with_trace_id(mut response: Response, trace_id: Option<String>) -> Response {
    if let Some(id) = trace_id.and_then(|id| axum::http::HeaderValue::from_str(&id).ok()) {
        response.headers_mut().insert("x-trace-id", id);
    }
    response
}

/// A request's body did not arrive in time.
#[derive(Debug)]
pub(crate) struct BodyTimedOut;

impl std::fmt::Display for BodyTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request's body did not arrive in time")
    }
}

impl std::error::Error for BodyTimedOut {}
