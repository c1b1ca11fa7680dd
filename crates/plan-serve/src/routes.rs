//! What answers each path: the API's routes under `/v1`, the pages, and the layers every
//! request goes through (the token, the origin guard, errors as JSON).

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};

use crate::State as Shared;
use crate::api::{branch, cancel, input, list, preview, show, submit};
use crate::error::ApiError;

pub(crate) fn router(state: Arc<Shared>, hosts: Arc<crate::origin::Hosts>) -> Router {
    let max_body = state.max_body;
    let mcp = crate::mcp::http(&state);
    let api = Router::new()
        .nest_service("/mcp", mcp)
        .route("/v1/runs", post(submit).get(list))
        .route("/v1/runs/{id}", get(show))
        .route("/v1/runs/{id}/cancel", post(cancel))
        .route("/v1/runs/{id}/input", post(input))
        .route("/v1/runs/{id}/branch", post(branch))
        .route("/v1/runs/{id}/branch/preview", post(preview))
        .route("/v1/runs/{id}/events", get(crate::events::events))
        .route("/v1/runs/{id}/feedback", post(crate::evals::feedback))
        .route("/v1/sessions/{id}", get(crate::goals::session))
        .route("/v1/evals", get(crate::evals::list))
        .route("/v1/evals/{id}", get(crate::evals::show))
        .route("/v1/chat/completions", post(crate::chat::completions))
        .route("/v1/models", get(crate::chat::models))
        .route("/v1/models/{id}", get(crate::chat::model_by_id))
        .route("/openapi.json", get(crate::openapi::openapi_json))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route") })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::auth::require_token,
        ))
        .layer(DefaultBodyLimit::max(max_body));
    // NB: the pages hold no data and are served without the token; they send it.
    crate::web::router()
        .merge(api)
        .layer(axum::middleware::from_fn(json_errors))
        .layer(axum::middleware::from_fn_with_state(
            hosts,
            crate::origin::guard,
        ))
        .with_state(state)
}

/// Every error answered as JSON (`ApiError`'s shape), also those axum and the routes'
/// extractors make: a method a route does not take (405, with `Allow`), a path that does
/// not decode, a page that is not there.
async fn json_errors(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let method = request.method().clone();
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 64 << 10)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let error = match status {
        StatusCode::METHOD_NOT_ALLOWED => {
            let allowed = parts
                .headers
                .get(axum::http::header::ALLOW)
                .and_then(|a| a.to_str().ok())
                .unwrap_or_default();
            ApiError::new(
                status,
                "method_not_allowed",
                format!("`{method}` is not taken here; these are: {allowed}"),
            )
        }
        StatusCode::NOT_FOUND => ApiError::new(status, "not_found", "no such route"),
        StatusCode::BAD_REQUEST => ApiError::new(status, "bad_request", text.trim()),
        _ => ApiError::new(status, "http_error", text.trim()),
    };
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    parts.headers.insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, axum::body::Body::from(error.body().to_string()))
}
