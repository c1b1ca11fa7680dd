//! The web pages: `/` (the runs) and `/runs/{id}` (one run or goal), served from assets
//! built into the binary (`web/`: plain HTML, CSS and JavaScript, no build step and
//! nothing fetched from elsewhere, so the pages work offline). The pages hold no data:
//! they read the JSON API, with the token when the service has one, and are served
//! without it. Everything the API returns is shown as text, never parsed as HTML (plans
//! and tool outputs are untrusted), and the Content-Security-Policy allows scripts from
//! the service only.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// The assets, by name: (bytes, content type).
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "index.html",
        include_str!("../web/index.html"),
        "text/html; charset=utf-8",
    ),
    (
        "run.html",
        include_str!("../web/run.html"),
        "text/html; charset=utf-8",
    ),
    (
        "app.css",
        include_str!("../web/app.css"),
        "text/css; charset=utf-8",
    ),
    (
        "app.js",
        include_str!("../web/app.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "runs.js",
        include_str!("../web/runs.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "versions.js",
        include_str!("../web/versions.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "run.js",
        include_str!("../web/run.js"),
        "text/javascript; charset=utf-8",
    ),
    ("icon.svg", include_str!("../web/icon.svg"), "image/svg+xml"),
];

/// NB: inline `style` attributes are allowed, scripts only from the service.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
                   connect-src 'self'; img-src 'self'; form-action 'self'; \
                   frame-ancestors 'none'; base-uri 'none'";

pub(crate) fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|| async { asset("index.html") }))
        .route("/runs/{id}", get(|| async { asset("run.html") }))
        .route(
            "/assets/{name}",
            get(|Path(name): Path<String>| async move { asset(&name) }),
        )
        // NB: browsers ask for it whatever the page says.
        .route("/favicon.ico", get(|| async { asset("icon.svg") }))
}

fn asset(name: &str) -> Response {
    let Some((_, body, kind)) = ASSETS.iter().find(|(n, _, _)| *n == name) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mut res = (*body).into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    // NB: a new binary may bring new assets: the browser asks again each time.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    res
}
