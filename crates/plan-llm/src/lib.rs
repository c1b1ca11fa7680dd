//! `plan-llm`: the HTTP client of tools and LLMs, apart from any plan or VM type, so the
//! tool host (`plan-host`), the planner and language bindings share one.
//!
//! - [`Connector`] checks backend configuration and builds [`Endpoint`]s and
//!   [`ChatClient`]s on one pooled `reqwest` client (rustls).
//! - [`Endpoint`]: POST JSON, retry 429/5xx/connect errors/timeouts with exponential
//!   backoff and jitter, a per-attempt and a total timeout, a concurrency limit, a cap on
//!   response size; read the answer whole or as server-sent events.
//! - [`ChatClient`]: OpenAI-compatible chat completions, whole or streamed.
//! - Secrets: API keys are read from environment variables (through an injectable
//!   lookup), kept in a [`Secret`], sent only as the `Authorization` header and never
//!   formatted; a key a server echoes back is replaced by [`REDACTED`] in every error
//!   ([`Redactor`]).
//! - Redirects are followed only within the origin of the configured URL (at most
//!   [`MAX_REDIRECTS`]); host names that resolve to link-local addresses are refused.
//!
//! Module map: `connect` (configuration → endpoints), `net` (`Endpoint`, retries),
//! `chat` (completions), `sse` (the event-stream decoder), `secret`, `redact`, `error`.

mod chat;
mod connect;
mod error;
mod net;
mod redact;
mod secret;
mod sse;

pub use chat::{ChatClient, Message, Reply, Role, Usage};
pub use connect::{
    Connector, DEFAULT_CHAT_CONCURRENCY, DEFAULT_CHAT_TIMEOUT, EndpointConfig, completions_url,
    http_client, install_crypto,
};
pub use error::{CallError, CallErrorKind, preview, secs};
pub use net::{
    CallNotes, Endpoint, EventSink, MAX_REDIRECTS, Retry, RetryPolicy, TOTAL_TIMEOUT_FACTOR,
    TRAILER_WAIT, Taken, current_traceparent, note_replayed, noting, with_traceparent,
};
pub use redact::{MIN_SECRET_BYTES, REDACTED, Redactor};
pub use secret::{EnvLookup, Secret, process_env};
