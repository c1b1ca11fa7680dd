//! Error types of the host. Messages are written for the person running the plan: they name
//! the tool, the file and line, or the environment variable at fault, and never contain a
//! secret's value.

use std::fmt;

/// Why one tool call failed. The message is fed back to the VM (`resume(id, Err(msg))`),
/// which fails the run with it, so it must be self-explanatory on its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolError {
    pub kind: ToolErrorKind,
    pub message: String,
}

/// Broad class of a tool failure, for callers that react differently (tests, retries).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolErrorKind {
    /// The call (or one HTTP attempt that was not retried further) exceeded its timeout.
    Timeout,
    /// Network or HTTP-level failure after all retries (the service may have acted).
    Transport,
    /// The service refused the request (an HTTP 4xx other than 429): it did not act.
    Refused,
    /// The service answered, but not in the expected shape.
    BadResponse,
    /// No cassette entry matches the call.
    Replay,
    /// The host is not configured to serve this tool (no backend, missing env var, ...).
    Config,
}

impl ToolError {
    #[cold]
    pub fn new(kind: ToolErrorKind, message: impl Into<String>) -> Self {
        ToolError {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolError {}

/// A problem found while setting the host up, before any plan instruction runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostError {
    pub kind: HostErrorKind,
    pub message: String,
}

/// Lets the CLI map setup failures to exit codes (see `planvm --help`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostErrorKind {
    /// A file's content is malformed (cassette line that is not a JSON entry, ...).
    InvalidInput,
    /// A file could not be read.
    Io,
    /// A file could not be created or opened for writing (`--record`).
    Create,
    /// Configuration does not allow the run (no backend for a tool, env var unset, ...).
    Config,
}

impl HostError {
    #[cold]
    pub fn new(kind: HostErrorKind, message: impl Into<String>) -> Self {
        HostError {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for HostError {}

impl From<ToolError> for HostError {
    fn from(e: ToolError) -> Self {
        HostError::new(HostErrorKind::Config, e.message)
    }
}

/// Seconds as people write them: `30`, `0.2`, `1.5`.
pub(crate) fn secs(d: std::time::Duration) -> String {
    let s = d.as_secs_f64();
    // NB: round to milliseconds so 0.2 s does not print as 0.20000000000000001.
    let ms = (s * 1000.0).round() / 1000.0;
    format!("{ms}")
}
