//! What the engine reports: a kind with a stable code, and a message for people. Front
//! ends map the kind to what they show (an exit code, an HTTP status, a Python exception).

use std::fmt;

use plan_store::{StoreError, StoreErrorKind};

/// Why an operation of the engine failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    /// Names the store, the run and what is at fault; never a secret.
    pub message: String,
}

/// The class of a failure. Each has a stable [`ErrorKind::code`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The file is not a store of this planvm (another program's, a newer one's).
    NotAStore,
    /// What the store holds cannot be what planvm wrote: a damaged file, row, journal
    /// entry or saved state.
    Damaged,
    /// No store at that path (operations that only read or continue runs).
    NoStore,
    /// No run with that id.
    UnknownRun,
    /// The run id is taken.
    DuplicateRun,
    /// Not a run id (letters, digits, `.`, `_`, `-`, of a bounded length).
    BadRunId,
    /// Another live process runs it, or went on with it meanwhile.
    Busy,
    /// The run stopped with a `write` call in flight: it may or may not have taken
    /// effect, and is sent again only when asked.
    UnknownWrites,
    /// This process may not write the store.
    ReadOnly,
    /// The store is locked for too long, or the disk failed.
    Io,
    /// A point of a run (a seq_no to branch at or show) that the run never reached.
    NotReached,
    /// What the caller gave does not fit the run (a new plan that cannot start at the
    /// branch point).
    Invalid,
    /// The goal was cancelled: no run of it starts.
    Cancelled,
    /// An answer to a run's question that does not answer it: empty, or not one of its
    /// choices.
    BadInput,
    /// An answer given to a run that is not waiting for one.
    NotWaiting,
    /// A file the engine was given cannot be read (a cassette, a plan).
    Unreadable,
    /// A file the engine was to write cannot be created (a cassette recorded).
    CannotCreate,
    /// A file to be written is one the command reads (its plan, tools, cassette, store)
    /// or another it writes.
    OutputIsInput,
    /// The configuration does not allow it: a tool with no backend, a key's variable
    /// unset, no LLM for the planner.
    Config,
}

impl ErrorKind {
    /// A stable name, for machines (JSON, HTTP bodies, Python attributes).
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::NotAStore => "not_a_store",
            ErrorKind::Damaged => "damaged",
            ErrorKind::NoStore => "no_store",
            ErrorKind::UnknownRun => "unknown_run",
            ErrorKind::DuplicateRun => "duplicate_run",
            ErrorKind::BadRunId => "bad_run_id",
            ErrorKind::Busy => "busy",
            ErrorKind::UnknownWrites => "unknown_writes",
            ErrorKind::ReadOnly => "read_only",
            ErrorKind::Io => "io",
            ErrorKind::NotReached => "not_reached",
            ErrorKind::Invalid => "invalid",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::BadInput => "bad_input",
            ErrorKind::NotWaiting => "not_waiting",
            ErrorKind::Unreadable => "unreadable",
            ErrorKind::CannotCreate => "cannot_create",
            ErrorKind::OutputIsInput => "output_is_input",
            ErrorKind::Config => "config",
        }
    }
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }

    /// `{code, message}`, as a goal's error and the service's bodies hold it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"code": self.kind.code(), "message": self.message})
    }

    /// Damage in `store`'s run `id`: `why`.
    pub(crate) fn damaged(store: &str, id: &str, why: &str) -> Error {
        Error::new(
            ErrorKind::Damaged,
            format!("{store}: run `{id}`: {why}: the store is damaged"),
        )
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Error {
        let kind = match e.kind {
            StoreErrorKind::NotAStore => ErrorKind::NotAStore,
            StoreErrorKind::Damaged => ErrorKind::Damaged,
            StoreErrorKind::UnknownRun => ErrorKind::UnknownRun,
            StoreErrorKind::NoStore => ErrorKind::NoStore,
            StoreErrorKind::DuplicateRun => ErrorKind::DuplicateRun,
            StoreErrorKind::Busy => ErrorKind::Busy,
            StoreErrorKind::ReadOnly => ErrorKind::ReadOnly,
            StoreErrorKind::Io => ErrorKind::Io,
        };
        Error::new(kind, e.message)
    }
}

impl From<plan_host::HostError> for Error {
    fn from(e: plan_host::HostError) -> Error {
        use plan_host::HostErrorKind as K;
        let kind = match e.kind {
            K::InvalidInput => ErrorKind::Invalid,
            K::Io => ErrorKind::Unreadable,
            K::Create => ErrorKind::CannotCreate,
            K::Config => ErrorKind::Config,
        };
        Error::new(kind, e.to_string())
    }
}

impl From<plan_planner::ModelError> for Error {
    /// A planner's LLM that cannot be set up: a tools file that names one wrongly is the
    /// caller's mistake (`bad_input`); no LLM, or one that cannot be reached, is the
    /// configuration's.
    fn from(e: plan_planner::ModelError) -> Error {
        let kind = match e.usage {
            true => ErrorKind::BadInput,
            false => ErrorKind::Config,
        };
        Error::new(kind, e.message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}
