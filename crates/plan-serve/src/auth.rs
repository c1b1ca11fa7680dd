//! The bearer token every request carries when the service has one.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// Refuses (401) a request without the service's token.
pub(crate) async fn require_token(
    State(state): State<Arc<crate::State>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = &state.token else {
        return next.run(request).await;
    };
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
    match given {
        Some(given) if same(given, token) => next.run(request).await,
        _ => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this service needs `Authorization: Bearer <token>`",
        )
        .into_response(),
    }
}

/// `a == b` in time that depends on their lengths only, not on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    #[test]
    fn tokens_are_compared_whole() {
        assert!(super::same(b"secret", b"secret"));
        assert!(!super::same(b"secret", b"secreT"));
        assert!(!super::same(b"secret", b"secret2"));
        assert!(!super::same(b"", b"x"));
    }
}
