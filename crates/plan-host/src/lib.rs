//! `plan-host`: the async (tokio) side of running a plan. The VM (`plan-vm`) is pure and
//! suspends at every tool call; this crate performs those calls and feeds the results back.
//!
//! Properties:
//! - Backends per tool, chosen by the tools file: `openai` (OpenAI-compatible chat
//!   completions), `http` (POST args as JSON), `replay` (cassette, no network).
//!   `--replay` serves every tool from one cassette; `--record` appends every call the
//!   run commits to one (in program order; calls issued ahead that the sequential run
//!   would not have made are left out).
//! - Network backends share one pooled `reqwest` client (rustls), retry 429/5xx/connect
//!   errors/timeouts with exponential backoff and jitter, and limit concurrency per tool.
//! - All requests of one VM yield run concurrently; a replay's `latency_ms` is a timer,
//!   so it never blocks other calls.
//! - Secrets: API keys are read from environment variables named in the tools file (through
//!   an injectable lookup), kept in a redacting `Secret`, sent only as the
//!   `Authorization` header, and never written to errors, traces or cassettes; a key a
//!   server echoes back is replaced by `[redacted]` in every output and error (`redact`).
//! - Redirects are followed only within the origin of the configured URL (at most
//!   [`MAX_REDIRECTS`]); host names that resolve to link-local addresses are refused.
//!
//! Module map (start with `driver`):
//! - `driver`: `run_plan` / `resume_plan` / `run_machine`, the run → await → resume loop,
//!   `RunReport`.
//! - `journal`: the `Journal` seam (typed `TraceEvent`s of a run); the trace and the
//!   `--record` cassette are journals.
//! - `host`: `Host`, backend selection, per-call timeout.
//! - `backend`: the `Backend` trait, `Secret`, env lookup.
//! - `openai`, `http`: network backends; `net`: retries, timeouts, limits shared by both.
//! - `prompt`: the user message an LLM sees (context + prompt + format instruction).
//! - `cassette`: cassette format, `ReplayBackend`, `Recorder`.
//! - `trace`: JSON-lines trace events.
//! - `redact`: the host's secrets and their removal from outputs and errors.
//! - `error`: `ToolError`, `HostError`.

mod backend;
mod cassette;
mod driver;
mod error;
mod host;
mod http;
mod journal;
mod net;
mod openai;
mod prompt;
mod redact;
mod trace;

pub use backend::{Backend, EnvLookup, Secret, process_env};
pub use cassette::{Cassette, CassetteEntry, Recorder, ReplayBackend};
pub use driver::{
    CallState, Machine, ReportError, RunReport, RunStatus, resume_plan, run_machine, run_plan,
    run_plan_recording,
};
pub use error::{HostError, HostErrorKind, ToolError, ToolErrorKind};
pub use host::{CONDITION_TOOL, Host, HostOptions};
pub use journal::{Durable, Journal, RecordJournal, TraceEvent};
pub use net::{MAX_REDIRECTS, RetryPolicy, TOTAL_TIMEOUT_FACTOR};
pub use prompt::{CONDITION_INSTRUCTION, keys_instruction, user_message};
pub use redact::{REDACTED, Redactor};
pub use trace::{Observer, Tracer};
