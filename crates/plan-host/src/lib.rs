//! `plan-host`: the async (tokio) side of running a plan. The VM (`plan-vm`) is pure and
//! suspends at every tool call; this crate performs those calls and feeds the results back.
//!
//! Properties:
//! - Backends per tool, chosen by the tools file: `openai` (OpenAI-compatible chat
//!   completions), `http` (POST args as JSON), `replay` (cassette, no network), `sql` (a
//!   query under constraints, `plan-sql`),
//!   `mcp` (a tool of an MCP server, `plan-mcp`).
//!   `--replay` serves every tool from one cassette; `--record` appends every call the
//!   run commits to one (in program order; calls issued ahead that the sequential run
//!   would not have made are left out).
//! - Network backends are built by `plan-llm`'s `Connector`: one pooled `reqwest` client
//!   (rustls), retries of 429/5xx/connect errors/timeouts with exponential backoff and
//!   jitter, a concurrency limit per tool.
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
//! - `pool`: `Pool`, many runs at once (at most N in flight), as `planvm batch` runs them.
//! - `journal`: the `Journal` seam (typed `TraceEvent`s of a run); the trace and the
//!   `--record` cassette are journals.
//! - `host`: `Host`, backend selection, per-call timeout.
//! - `backend`: the `Backend` trait.
//! - `openai`, `http`: network backends over `plan-llm`'s `ChatClient` and `Endpoint`.
//! - `sql`, `mcp`: a database under constraints; a tool of an MCP server.
//! - `prompt`: the user message an LLM sees (context + prompt + format instruction).
//! - `cassette`: cassette format, `ReplayBackend`, `Recorder`.
//! - `trace`: JSON-lines trace events.
//! - `error`: `HostError`; `ToolError` is `plan-llm`'s `CallError`.

mod backend;
mod cassette;
mod driver;
mod error;
mod grounding;
mod host;
mod http;
mod journal;
mod mcp;
mod openai;
mod pool;
mod prompt;
mod report;
mod sql;
mod trace;

pub use backend::Backend;
pub use cassette::{Cassette, CassetteEntry, Recorder, ReplayBackend};
pub use driver::{
    CallState, Deadline, Machine, PersonsAnswer, STEP_SLICE, resume_plan, resume_plan_answering,
    run_machine, run_plan, run_plan_recording, run_plan_reusing,
};
pub use error::{HostError, HostErrorKind, ToolError, ToolErrorKind};
pub use grounding::Grounded;
pub use host::{CONDITION_TOOL, Host, HostOptions};
pub use journal::{Durable, Journal, RecordJournal, TraceEvent};
pub use plan_llm::{
    EnvLookup, MAX_REDIRECTS, REDACTED, Redactor, RetryPolicy, Secret, TOTAL_TIMEOUT_FACTOR,
    install_crypto, process_env,
};
pub use pool::Pool;
pub use prompt::{CONDITION_INSTRUCTION, format_instruction, keys_instruction, user_message};
pub use report::{Question, ReportError, RunReport, RunStatus};
pub use trace::{Observer, Tracer};
