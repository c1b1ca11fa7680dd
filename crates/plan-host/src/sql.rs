//! `sql` backend: the call's `sql` runs on a database (SQLite or PostgreSQL) under the
//! tool's constraints (`plan-sql`: checked by a parser, then by the database itself); the output is
//! `{"columns", "rows", "truncated"}`. A refusal is an error that says what was refused
//! and why, so that a re-plan can correct the query; it is never retried.

use std::time::Duration;

use futures::future::BoxFuture;
use plan_llm::{EnvLookup, Redactor};
use plan_manifest::BackendConfig;
use plan_sql::{Constraints, Database, QueryError};
use serde_json::Value;

use crate::backend::Backend;
use crate::error::{ToolError, ToolErrorKind};
use plan_vm::ToolRequest;

#[derive(Debug)]
pub(crate) struct SqlBackend {
    db: Database,
}

impl SqlBackend {
    /// The backend `cfg` (a `sql` one) describes for tool `tool`.
    pub(crate) fn new(
        tool: &str,
        cfg: &BackendConfig,
        env: &EnvLookup,
        redactor: &Redactor,
    ) -> Result<SqlBackend, ToolError> {
        Ok(SqlBackend {
            db: database(tool, cfg, env, redactor)?,
        })
    }
}

/// The database `cfg` (a `sql` backend) names for tool `tool`, under its constraints; its
/// password (PostgreSQL's) read through `env` and added to `redactor`.
pub(crate) fn database(
    tool: &str,
    cfg: &BackendConfig,
    env: &EnvLookup,
    redactor: &Redactor,
) -> Result<Database, ToolError> {
    {
        let BackendConfig::Sql {
            url,
            password_env,
            read_only,
            allow_tables,
            deny_columns,
            max_rows,
            max_result_bytes,
            timeout_secs,
        } = cfg
        else {
            unreachable!("a sql backend's config");
        };
        let config =
            |m: String| ToolError::new(ToolErrorKind::Config, format!("tool `{tool}`: {m}"));
        let timeout = match timeout_secs {
            None => plan_sql::DEFAULT_TIMEOUT,
            Some(s) => Duration::try_from_secs_f64(*s)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| config(format!("timeout_secs {s} is not a positive number")))?,
        };
        let constraints = Constraints {
            read_only: read_only.unwrap_or(true),
            allow_tables: allow_tables
                .as_ref()
                .map(|t| t.iter().map(|t| t.to_ascii_lowercase()).collect()),
            deny_columns: Constraints::deny(deny_columns.as_deref().unwrap_or_default())
                .map_err(config)?,
            max_rows: max_rows.unwrap_or(plan_sql::DEFAULT_MAX_ROWS),
            max_result_bytes: max_result_bytes.unwrap_or(plan_sql::DEFAULT_MAX_RESULT_BYTES),
            timeout,
        };
        // NB: a database that cannot be reached is the tool's setting too: a host is not
        // set up with a tool whose file is not there.
        let db = Database::open(url, constraints).map_err(|e| config(e.to_string()))?;
        match (db, password_env) {
            (db, None) => Ok(db),
            (Database::Postgres(pg), Some(var)) => match env(var) {
                Ok(password) if !password.is_empty() => {
                    redactor.add(&password);
                    Ok(Database::Postgres(pg.with_password(&password)))
                }
                _ => Err(config(format!(
                    "password_env {var}: the variable is unset or empty"
                ))),
            },
            (Database::Sqlite(_), Some(_)) => Err(config(
                "password_env is for PostgreSQL; a SQLite file takes none".into(),
            )),
        }
    }
}

impl Backend for SqlBackend {
    fn call<'a>(&'a self, req: &'a ToolRequest) -> BoxFuture<'a, Result<Value, ToolError>> {
        let sql = match req.args.get("sql") {
            Some(Value::String(s)) => Ok(s.clone()),
            _ => Err(ToolError::new(
                ToolErrorKind::Refused,
                "a sql tool takes its query as `sql`, a string",
            )),
        };
        let db = self.db.clone();
        Box::pin(async move {
            let sql = sql?;
            // NB: SQLite blocks: off the runtime's threads.
            let out = tokio::task::spawn_blocking(move || db.query(&sql))
                .await
                .map_err(|e| ToolError::new(ToolErrorKind::Transport, e.to_string()))?;
            match out {
                Ok(rows) => serde_json::to_value(rows)
                    .map_err(|e| ToolError::new(ToolErrorKind::BadResponse, e.to_string())),
                Err(e @ QueryError::Timeout(_)) => {
                    Err(ToolError::new(ToolErrorKind::Timeout, e.to_string()))
                }
                Err(e @ QueryError::Unavailable(_)) => {
                    Err(ToolError::new(ToolErrorKind::Transport, e.to_string()))
                }
                // NB: the same query fails the same way again: not worth a retry.
                Err(e @ (QueryError::Refused(_) | QueryError::Failed(_))) => {
                    Err(ToolError::new(ToolErrorKind::Refused, e.to_string()))
                }
            }
        })
    }

    fn describe(&self) -> String {
        match self.db {
            Database::Sqlite(_) => "a SQLite database".into(),
            Database::Postgres(_) => "a PostgreSQL database".into(),
        }
    }
}
