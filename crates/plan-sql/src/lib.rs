//! `plan-sql`: the `sql` tool backend's engine. A plan's query (written by an LLM:
//! untrusted) reaches a database only through two guards that each enforce a tool's
//! [`Constraints`] on their own: a parser (`check.rs`, sqlparser) that refuses what a
//! query says before it runs, with a message the planner can correct it from; and the
//! database (`sqlite.rs`: opened read-only, an authorizer that sees every table and column
//! the compiled statement reads, a progress handler for the time limit; `pg.rs`: a
//! `READ ONLY` transaction with `statement_timeout`, and the role's own grants), so a gap
//! in the parser is not a hole. Results are JSON: `{"columns", "rows", "truncated"}`.
//!
//! No async and no tool types here: `plan-host` wraps a [`Database`] as a backend.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

mod check;
mod database;
pub mod embedded;
pub mod ground;
mod pg;
mod sqlite;
mod tls;

pub use pg::without_password;
pub use tls::{connect_postgres, name_connections};

pub use check::{check, check_postgres};
pub use database::Database;
pub use pg::Postgres;
pub use sqlite::Sqlite;

/// Rows a query returns at most by default; more set `truncated`.
pub const DEFAULT_MAX_ROWS: usize = 200;
/// Bytes of a result (as JSON) at most by default.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 1 << 20;
/// How long a query may run by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// What a tool lets its queries do. Names compare ignoring ASCII case, as SQLite's do.
#[derive(Clone, Debug, PartialEq)]
pub struct Constraints {
    /// Only queries; the database is opened read-only.
    pub read_only: bool,
    /// The tables queries may name (lowercase); None: every table.
    pub allow_tables: Option<Vec<String>>,
    /// `(table, column)` pairs no query may read (lowercase).
    pub deny_columns: Vec<(String, String)>,
    pub max_rows: usize,
    pub max_result_bytes: usize,
    pub timeout: Duration,
}

impl Default for Constraints {
    fn default() -> Self {
        Constraints {
            read_only: true,
            allow_tables: None,
            deny_columns: Vec::new(),
            max_rows: DEFAULT_MAX_ROWS,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

impl Constraints {
    /// `deny_columns` as a tools file writes them (`"table.column"`), checked.
    pub fn deny(columns: &[String]) -> Result<Vec<(String, String)>, String> {
        columns
            .iter()
            .map(|c| match c.rsplit_once('.') {
                Some((t, col)) if !t.is_empty() && !col.is_empty() => {
                    Ok((t.to_ascii_lowercase(), col.to_ascii_lowercase()))
                }
                _ => Err(format!("deny_columns entry `{c}` is not `table.column`")),
            })
            .collect()
    }

    /// Whether a query may read `table`. The database's own tables (`sqlite_*`, `pg_*`)
    /// only when `allow_tables` names them: `sqlite_stat4` and `pg_stats` hold samples of
    /// indexed or analyzed values, denied columns' included.
    fn table_allowed(&self, table: &str) -> bool {
        match &self.allow_tables {
            Some(allowed) => allowed.iter().any(|t| t.eq_ignore_ascii_case(table)),
            None => !internal_table(table),
        }
    }

    fn column_denied(&self, table: &str, column: &str) -> bool {
        self.deny_columns
            .iter()
            .any(|(t, c)| t.eq_ignore_ascii_case(table) && c.eq_ignore_ascii_case(column))
    }

    /// The first column of `table` that is denied, if any.
    pub(crate) fn denied_column_of(&self, table: &str) -> Option<&str> {
        self.deny_columns
            .iter()
            .find(|(t, _)| t.eq_ignore_ascii_case(table))
            .map(|(_, c)| c.as_str())
    }

    fn not_allowed(&self, table: &str) -> String {
        match &self.allow_tables {
            Some(allowed) => format!(
                "table \"{table}\" is not in allow_tables [{}]",
                allowed.join(", ")
            ),
            None => format!(
                "table \"{table}\" is the database's own (internal tables are read only when allow_tables names them)"
            ),
        }
    }
}

/// A table the database keeps for itself (SQLite's `sqlite_*`, PostgreSQL's `pg_*`).
fn internal_table(table: &str) -> bool {
    let t = table.to_ascii_lowercase();
    t.starts_with("sqlite_") || t.starts_with("pg_")
}

/// Why a database could not be opened, reached or its schema read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DbError {
    /// The tool's settings are wrong (a URL of no known scheme or that does not parse, a
    /// column that cannot be denied, TLS that cannot be set up): the same call fails
    /// again until they change.
    #[error("{0}")]
    Config(String),
    /// The database cannot be reached or read now (no file, a server down or refusing
    /// the login, a lock): worth trying again later.
    #[error("{0}")]
    Unavailable(String),
}

/// Why a query did not give rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueryError {
    /// A constraint refused it (it did not run, or was stopped before it read what it
    /// may not): the message says what and why. Never worth retrying as it is.
    Refused(String),
    /// It ran past the tool's time limit and was stopped.
    Timeout(Duration),
    /// The database failed it (a syntax error SQLite found, a missing column, a value
    /// over the size limit, ...): the same query fails again.
    Failed(String),
    /// The database could not be opened, or was locked: worth trying again later.
    Unavailable(String),
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueryError::Refused(m) => write!(f, "refused: {m}"),
            QueryError::Timeout(t) => write!(
                f,
                "the query ran over its time limit ({} s) and was stopped",
                t.as_secs_f64()
            ),
            QueryError::Failed(m) | QueryError::Unavailable(m) => f.write_str(m),
        }
    }
}

/// A query's result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rows {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
    /// More rows (or bytes) than the tool returns: the rest were left out.
    pub truncated: bool,
}
