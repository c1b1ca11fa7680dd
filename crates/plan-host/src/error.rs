//! Error types of the host. Messages are written for the person running the plan: they name
//! the tool, the file and line, or the environment variable at fault, and never contain a
//! secret's value.

use std::fmt;

/// Why one tool call failed (the HTTP client's error; the name says what it means here).
pub use plan_llm::{CallError as ToolError, CallErrorKind as ToolErrorKind};

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
