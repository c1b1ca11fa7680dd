//! Why one call failed. Messages are written for the person running the plan: they name
//! the URL, the status, the file or the environment variable at fault, and never contain
//! a secret's value.

use std::fmt;

/// Why one call (a tool's, a condition's or the planner's) failed. A tool's message is fed
/// back to the VM, which fails the run with it, so it must be self-explanatory on its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallError {
    pub kind: CallErrorKind,
    pub message: String,
}

/// Broad class of a failure, for callers that react differently (retries, the run store,
/// tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallErrorKind {
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
    /// Nothing is configured to serve the call (no backend, missing env var, ...).
    Config,
}

impl CallErrorKind {
    /// Its name in traces (`error.type`): `timeout`, `transport`, `refused`,
    /// `bad_response`, `replay`, `config`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallErrorKind::Timeout => "timeout",
            CallErrorKind::Transport => "transport",
            CallErrorKind::Refused => "refused",
            CallErrorKind::BadResponse => "bad_response",
            CallErrorKind::Replay => "replay",
            CallErrorKind::Config => "config",
        }
    }
}

impl CallError {
    #[cold]
    pub fn new(kind: CallErrorKind, message: impl Into<String>) -> Self {
        CallError {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CallError {}

/// Seconds as people write them: `30`, `0.2`, `1.5`.
pub fn secs(d: std::time::Duration) -> String {
    let s = d.as_secs_f64();
    // NB: round to milliseconds so 0.2 s does not print as 0.20000000000000001.
    let ms = (s * 1000.0).round() / 1000.0;
    format!("{ms}")
}

/// The first `chars` characters of `s`, with an ellipsis when cut (error messages show
/// the start of a body or of a call's arguments).
pub fn preview(s: &str, chars: usize) -> String {
    match s.char_indices().nth(chars) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}
