//! A tool's database, by its URL: SQLite (`sqlite:PATH`) or PostgreSQL
//! (`postgres://...`), with what grounding reads of it kept between processes.

use std::path::Path;

use crate::ground::Schema;
use crate::{Constraints, DbError, Postgres, QueryError, Rows, Sqlite};

/// A database a tool queries under its constraints.
#[derive(Clone, Debug)]
pub enum Database {
    Sqlite(Sqlite),
    Postgres(Postgres),
}

impl Database {
    /// The database `url` names (`sqlite:PATH`, `postgres://...` or `postgresql://...`),
    /// under `constraints`. A SQLite file must exist; PostgreSQL is not connected yet.
    pub fn open(url: &str, constraints: Constraints) -> Result<Database, DbError> {
        if let Some(path) = url.strip_prefix("sqlite:") {
            return Sqlite::open(Path::new(path), constraints).map(Database::Sqlite);
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Postgres::open(url, constraints).map(Database::Postgres);
        }
        let shown = url.split_once("://").map_or(url, |(scheme, _)| scheme);
        Err(DbError::Config(format!(
            "url `{shown}...`: a sql backend takes `sqlite:PATH` or `postgres://...`"
        )))
    }

    /// The SQL it speaks, as the planner is told: `SQLite` or `PostgreSQL`.
    pub fn dialect(&self) -> &'static str {
        match self {
            Database::Sqlite(_) => "SQLite",
            Database::Postgres(_) => "PostgreSQL",
        }
    }

    pub fn constraints(&self) -> &Constraints {
        match self {
            Database::Sqlite(db) => db.constraints(),
            Database::Postgres(db) => db.constraints(),
        }
    }

    /// Runs `sql` if both guards let it (the parser's, then the database's). Blocking.
    pub fn query(&self, sql: &str) -> Result<Rows, QueryError> {
        match self {
            Database::Sqlite(db) => db.query(sql),
            Database::Postgres(db) => db.query(sql),
        }
    }

    /// A number that moves when the schema changes (SQLite's `schema_version`, a
    /// fingerprint of PostgreSQL's catalog).
    pub fn schema_version(&self) -> Result<i64, DbError> {
        match self {
            Database::Sqlite(db) => db.schema_version(),
            Database::Postgres(db) => db.schema_version(),
        }
    }

    /// The schema grounding sees (read now).
    pub fn schema(&self) -> Result<Schema, DbError> {
        match self {
            Database::Sqlite(db) => db.schema(),
            Database::Postgres(db) => db.schema(),
        }
    }

    /// The schema as [`Database::schema`] reads it, kept in `dir` (a cache: a file per
    /// database and constraints, read back while the schema version is the one it was
    /// read at; written whole or not at all, and a failure to write it is no error).
    pub fn cached_schema(&self, dir: &Path) -> Result<Schema, DbError> {
        use sha2::{Digest, Sha256};
        let version = self.schema_version()?;
        let name = match self {
            Database::Sqlite(db) => db.key(),
            Database::Postgres(db) => db.key().to_owned(),
        };
        let key = Sha256::digest(format!("{name}\n{:?}", self.constraints()));
        let key: String = key.iter().take(16).map(|b| format!("{b:02x}")).collect();
        let file = dir.join(format!("{key}.json"));
        #[derive(serde::Serialize, serde::Deserialize)]
        struct Cached {
            version: i64,
            schema: Schema,
        }
        if let Ok(text) = std::fs::read_to_string(&file)
            && let Ok(cached) = serde_json::from_str::<Cached>(&text)
            && cached.version == version
        {
            return Ok(cached.schema);
        }
        let schema = self.schema()?;
        let cached = Cached { version, schema };
        if let Ok(text) = serde_json::to_string(&cached) {
            keep(dir, &file, text.as_bytes());
        }
        Ok(cached.schema)
    }
}

/// Writes `bytes` to `file` in `dir` whole or not at all (through a file of this
/// process's own, renamed): what a cache keeps, so a failure is only a slower next run.
pub(crate) fn keep(dir: &Path, file: &Path, bytes: &[u8]) {
    let name = file.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!("{name}.{}.tmp", std::process::id()));
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&tmp, bytes))
        .and_then(|()| std::fs::rename(&tmp, file));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}
