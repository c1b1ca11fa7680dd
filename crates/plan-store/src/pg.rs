//! The store in PostgreSQL: the tables of the SQLite store (`pg_migrations/`, applied by
//! `refinery` in one transaction under an advisory lock, so that processes starting at once
//! do not race and one killed part-way leaves nothing half done),
//! with the same meaning and guarantees, for runs shared by processes on many machines.
//!
//! Why it is shaped this way:
//! - Every write that depends on a run's holder locks the run's row first (`FOR UPDATE`):
//!   a claim and a commit of the same run are serialized, so a process that lost its run
//!   (paused past its lease, taken over elsewhere) cannot write another point into it.
//!   The holder is a per-claim token (`Owner`), which fences like an epoch.
//! - A call takes a connection of this process's pool for its duration (`pool`): many
//!   runs at once share a few connections. The `postgres` client runs its own small
//!   runtime and must not be driven from a thread of another one (a run's task calls the
//!   store): a call made from such a thread leaves the runtime first (`off_runtime`).
//! - Times are this machine's clock, as in SQLite; leases assume clocks agree within a
//!   lease (10 s).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use postgres::Client;
use postgres::types::ToSql;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{
    CallRow, CommitPoint, EvalCase, EvalInfo, Feedback, GoalInfo, GoalRound, JournalFold, NewGoal,
    NewRun, Owner, RunEnd, RunInfo, RunStore, Seen, SessionInfo, StepRow, StoreError,
    StoreErrorKind, StoreWrite, StoredProgram, Wrote, now_ms,
};

mod pool;

use pool::{Conn, Pool, Prepared, off_runtime};

mod embedded {
    refinery::embed_migrations!("src/pg_migrations");
}

/// The table that records which migrations a database has had.
const MIGRATION_TABLE: &str = "planrt_migrations";

/// How long a statement waits for a lock another transaction holds (ms).
const LOCK_TIMEOUT_MS: u32 = 10_000;

/// Held while migrating, so that processes opening a new store at once do not race.
const MIGRATION_LOCK: i64 = 0x706c_6e72;

/// Whether `url` names a PostgreSQL store rather than a file: a URL (`postgres://...`), or
/// libpq's key=value settings (`host=db user=app dbname=runs`), which would otherwise be
/// taken for a file's name (created, with a password in it). A file whose name begins
/// like settings is written `./host=...`.
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://") || is_settings(url)
}

/// The keys of libpq's settings that tokio-postgres reads.
const SETTINGS: [&str; 22] = [
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "options",
    "application_name",
    "sslmode",
    "sslnegotiation",
    "sslrootcert",
    "connect_timeout",
    "tcp_user_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_retries",
    "target_session_attrs",
    "channel_binding",
    "load_balance_hosts",
    "passfile",
    "service",
];

/// Whether `s` reads as key=value settings: it begins with a key of theirs, or sets a
/// `password` anywhere.
fn is_settings(s: &str) -> bool {
    let key = |token: &str| token.split_once('=').map(|(k, _)| k.to_ascii_lowercase());
    let mut tokens = s.split_whitespace();
    let first = tokens.next().unwrap_or("");
    // NB: `host = db`: the key, then `=` in a token of its own.
    let first_key = key(first).or_else(|| {
        s.split_whitespace()
            .nth(1)
            .filter(|t| t.starts_with('='))
            .map(|_| first.to_ascii_lowercase())
    });
    first_key.is_some_and(|k| SETTINGS.contains(&k.as_str()))
        || s.split_whitespace()
            .any(|t| key(t).is_some_and(|k| k == "password"))
}

/// A run store in a PostgreSQL database: a handle on this process's connections to it
/// (see `pool`), each call on one of them.
pub struct PgStore {
    pool: Arc<Pool>,
    /// A connection of this store's own, outside the pool ([`PgStore::open_own`]).
    own: Option<Mutex<Conn>>,
    /// Programs known to be in the database (they are never deleted).
    programs: HashSet<String>,
}

/// A connection taken for one call: one of the pool's, given back when dropped (a panic
/// included), or the store's own.
// NB: on the stack for the length of one call; boxed, each call would allocate.
#[allow(clippy::large_enum_variant)]
enum Taken<'a> {
    Pooled(&'a Pool, Option<Conn>),
    Own(std::sync::MutexGuard<'a, Conn>),
}

impl std::ops::Deref for Taken<'_> {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        match self {
            Taken::Pooled(_, conn) => conn.as_ref().expect("taken"),
            Taken::Own(conn) => conn,
        }
    }
}

impl std::ops::DerefMut for Taken<'_> {
    fn deref_mut(&mut self) -> &mut Conn {
        match self {
            Taken::Pooled(_, conn) => conn.as_mut().expect("taken"),
            Taken::Own(conn) => conn,
        }
    }
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        if let Taken::Pooled(pool, conn) = self
            && let Some(conn) = conn.take()
        {
            pool.give(conn);
        }
    }
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("url", &self.pool.shown)
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Connects to the database `url` names (`postgres://user@host/db`; TLS unless
    /// `sslmode=disable`) and brings its schema up to date. Refuses a database whose
    /// schema is newer than this planvm's. No message ever holds the password.
    /// `durability` as in SQLite: `Normal` commits without waiting for the server's disk
    /// (`synchronous_commit = off`: a commit survives planvm dying; the server's crash
    /// may lose its last commits, never half of one), `Full` waits for it.
    pub fn open(url: &str, durability: crate::Durability) -> Result<PgStore, StoreError> {
        let pool = Pool::of(url, durability)?;
        off_runtime(|| pool.check())?;
        Ok(PgStore {
            pool,
            own: None,
            programs: HashSet::new(),
        })
    }

    /// [`PgStore::open`], on a connection of its own outside the process's pool: for
    /// what must not wait for a connection while calls hold every one (leases renewed).
    pub fn open_own(url: &str, durability: crate::Durability) -> Result<PgStore, StoreError> {
        let mut store = PgStore::open(url, durability)?;
        let own = off_runtime(|| store.pool.connect(false))?;
        store.own = Some(Mutex::new(own));
        Ok(store)
    }

    /// Calls `woken` each time runs are submitted to the queue of the database `url`
    /// names (`LISTEN planrt_runs`), from a thread of its own, for as long as the
    /// connection lasts (a worker polls as well).
    pub fn listen(url: &str, woken: impl Fn() + Send + 'static) -> Result<(), StoreError> {
        let store = PgStore::open(url, crate::Durability::Normal)?;
        // NB: a connection that listens is this thread's for good.
        let mut conn = off_runtime(|| store.pool.connect(false))?;
        off_runtime(|| conn.client.batch_execute("LISTEN planrt_runs"))
            .map_err(|e| store.io(&e))?;
        std::thread::Builder::new()
            .name("store listen".to_owned())
            .spawn(move || {
                use postgres::fallible_iterator::FallibleIterator;
                let mut notifications = conn.client.notifications();
                let mut each = notifications.blocking_iter();
                while let Ok(Some(_)) = each.next() {
                    woken();
                }
            })
            .map_err(|e| {
                StoreError::new(
                    StoreErrorKind::Io,
                    format!("cannot start a thread to listen for runs: {e}"),
                )
            })?;
        Ok(())
    }

    /// `f` with a connection, off the runtime.
    fn with<T: Send>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, postgres::Error> + Send,
    ) -> Result<T, StoreError> {
        self.with_conn(|conn| f(&mut conn.client))
    }

    /// A connection for one call: this store's own, or one of the pool's.
    fn take(&self) -> Result<Taken<'_>, StoreError> {
        match &self.own {
            Some(own) => Ok(Taken::Own(own.lock().unwrap_or_else(|e| e.into_inner()))),
            None => self.pool.take().map(|c| Taken::Pooled(&self.pool, Some(c))),
        }
    }

    /// `f` with a connection, off the runtime, and again on a new one while the server had
    /// closed the one taken (a restart closes every connection a pool keeps): for
    /// statements that may run twice (reads, a lease renewed).
    fn again<T: Send>(
        &self,
        f: impl Fn(&mut Conn) -> Result<T, postgres::Error> + Send + Sync,
    ) -> Result<T, StoreError> {
        off_runtime(|| {
            let mut tries = 0;
            loop {
                let mut conn = self.take()?;
                let out = f(&mut conn);
                if out.is_err() && conn.client.is_closed() && tries < pool::MAX_OPEN {
                    tries += 1;
                    if let Taken::Own(own) = &mut conn {
                        **own = self.pool.connect(false)?;
                    }
                    continue;
                }
                return out.map_err(|e| self.io(&e));
            }
        })
    }

    /// `f` with a connection and its prepared statements, off the runtime.
    fn with_conn<T: Send>(
        &self,
        f: impl FnOnce(&mut Conn) -> Result<T, postgres::Error> + Send,
    ) -> Result<T, StoreError> {
        off_runtime(|| f(&mut *self.take()?).map_err(|e| self.io(&e)))
    }

    /// `f` in a transaction, committed when it returns Ok (a refusal it returns rolls back
    /// what it wrote). NB: a transaction that cannot begin wrote nothing: it begins again
    /// on a new connection when the server had closed the one taken.
    fn transaction<T: Send>(
        &self,
        f: impl FnOnce(&mut postgres::Transaction<'_>, &Prepared) -> Result<T, Failed> + Send,
    ) -> Result<T, StoreError> {
        let out = off_runtime(|| {
            let mut tries = 0;
            loop {
                let mut conn = self.take().map_err(Failed::Refused)?;
                let e = {
                    let Conn { client, prepared } = &mut *conn;
                    match client.transaction() {
                        Ok(mut tx) => {
                            let v = f(&mut tx, prepared)?;
                            tx.commit().map_err(Failed::Db)?;
                            return Ok(v);
                        }
                        Err(e) => e,
                    }
                };
                let closed = conn.client.is_closed();
                if !closed || tries == pool::MAX_OPEN {
                    return Err(Failed::Db(e));
                }
                tries += 1;
                if let Taken::Own(own) = &mut conn {
                    **own = self.pool.connect(false).map_err(Failed::Refused)?;
                }
            }
        });
        out.map_err(|e| match e {
            Failed::Db(e) => self.io(&e),
            Failed::Refused(e) => e,
        })
    }

    fn io(&self, e: &postgres::Error) -> StoreError {
        if e.code() == Some(&postgres::error::SqlState::LOCK_NOT_AVAILABLE) {
            return StoreError::new(
                StoreErrorKind::Busy,
                format!(
                    "{}: a run is locked by a transaction of another process that does not end (is it stopped?)",
                    self.pool.shown
                ),
            );
        }
        if e.is_closed() {
            return StoreError::new(
                StoreErrorKind::Io,
                format!(
                    "{}: the connection to the store was lost ({e})",
                    self.pool.shown
                ),
            );
        }
        let message = match e.as_db_error() {
            Some(db) => format!("{}: {}", self.pool.shown, db.message()),
            None => format!("{}: {e}", self.pool.shown),
        };
        StoreError::new(StoreErrorKind::Io, message)
    }

    fn rows(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<postgres::Row>, StoreError> {
        self.again(|c| {
            let st = c.prepared.statement(&mut c.client, sql)?;
            c.client.query(&st, params)
        })
    }

    /// The rows of `select` (of a table with `created_at` and `id`) created before
    /// `before`, newest first, at most `limit` (see [`RunStore::runs_before`]).
    fn newest_before(
        &self,
        select: &str,
        before: Option<(i64, &str)>,
        limit: usize,
    ) -> Result<Vec<postgres::Row>, StoreError> {
        let limit = to_i64(limit as u64);
        match before {
            None => self.rows(
                &format!("{select} ORDER BY created_at DESC, id DESC LIMIT $1"),
                &[&limit],
            ),
            Some((at, id)) => self.rows(
                &format!(
                    "{select} WHERE (created_at, id) < ($1, $2) \
                     ORDER BY created_at DESC, id DESC LIMIT $3"
                ),
                &[&at, &id, &limit],
            ),
        }
    }

    fn runs_where(
        &self,
        filter: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<RunInfo>, StoreError> {
        let now = now_ms();
        let sql = format!("SELECT {RUN_COLUMNS} FROM runs {filter}");
        self.rows(&sql, params)?
            .iter()
            .map(|r| run_info(r, now))
            .collect()
    }

    /// The points of run `id`'s journal, in order, each with the time of its row.
    fn entries<P: serde::de::DeserializeOwned>(
        &self,
        id: &str,
    ) -> Result<Vec<(i64, P)>, StoreError> {
        crate::rows::points(|each| self.entries_after(id, -1, each))
    }

    /// Each entry of run `id`'s journal after entry `after`, in order: (its number, the
    /// time of its row, its points).
    fn entries_after<P: serde::de::DeserializeOwned>(
        &self,
        id: &str,
        after: i64,
        mut each: impl FnMut(i64, i64, Vec<P>),
    ) -> Result<(), StoreError> {
        // NB: the run's row joined: an unknown run has no row at all, a run with nothing
        // journaled one of NULLs (a lookup of its own cost a round trip).
        let rows = self.rows(
            "SELECT j.seq, j.entry::text, j.at FROM runs r \
             LEFT JOIN journal j ON j.run = r.id AND j.seq > $2 WHERE r.id = $1 ORDER BY j.seq",
            &[&id, &after],
        )?;
        if rows.is_empty() {
            return Err(unknown_run(id));
        }
        for r in rows {
            let Some(seq) = r.get::<_, Option<i64>>(0) else {
                continue;
            };
            let (text, at): (String, i64) = (r.get(1), r.get(2));
            let points: Vec<P> = serde_json::from_str(&text).map_err(|e| {
                damaged(format!(
                    "{}: run `{id}`: its journal entry {seq} cannot be read ({e}): the store is damaged",
                    self.pool.shown
                ))
            })?;
            each(seq, at, points);
        }
        Ok(())
    }
}

/// Refuses a database a newer planvm migrated (see [`newer`]).
fn check_version(conn: &mut Conn, shown: &str) -> Result<(), StoreError> {
    let known = embedded::migrations::runner().get_migrations().len();
    let sql = format!("SELECT count(*) FROM {MIGRATION_TABLE}");
    let applied = conn
        .prepared
        .statement(&mut conn.client, &sql)
        .and_then(|st| conn.client.query_one(&st, &[]))
        .map_err(|e| {
            StoreError::new(
                StoreErrorKind::Io,
                format!("{shown}: cannot read the schema's version: {e}"),
            )
        })?;
    let applied = usize::try_from(applied.get::<_, i64>(0)).unwrap_or(usize::MAX);
    if applied > known {
        return Err(newer(shown, applied, known));
    }
    Ok(())
}

/// A database some of whose migrations this planvm does not know.
fn newer(shown: &str, applied: usize, known: usize) -> StoreError {
    StoreError::new(
        StoreErrorKind::NotAStore,
        format!(
            "{shown} is not a store this planvm can use: its schema version {applied} is newer than this planvm's {known}; use a newer planvm"
        ),
    )
}

/// Why a transaction did not commit: the database failed, or a check refused it.
enum Failed {
    Db(postgres::Error),
    Refused(StoreError),
}

/// Applies the migrations this planvm has and the database lacks, one process at a time;
/// refuses a database some of whose migrations this planvm does not know (a newer one).
fn migrate(client: &mut Client, shown: &str) -> Result<(), StoreError> {
    let failed = |what: &str, e: &(dyn std::error::Error + 'static)| {
        StoreError::new(
            StoreErrorKind::Io,
            format!("{shown}: {what}: {}", causes(e)),
        )
    };
    // NB: one transaction for every migration and its record. Ungrouped, refinery commits
    // a migration and its row in the table of migrations apart: a process killed between
    // the two leaves a migration applied but unrecorded, which every later start then
    // fails to apply again ("already exists").
    let mut runner = embedded::migrations::runner().set_grouped(true);
    runner.set_migration_table_name(MIGRATION_TABLE);
    let known = runner.get_migrations().len();
    // NB: a store up to date is opened without the lock (a run's connection, a worker's
    // every claim): only a migration waits for the processes migrating.
    if applied_count(client, &mut runner, &failed)? == known {
        return Ok(());
    }
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .map_err(|e| failed("cannot lock the schema", &e))?;
    let out = applied_count(client, &mut runner, &failed).and_then(|applied| {
        if applied > known {
            return Err(newer(shown, applied, known));
        }
        runner
            .run(client)
            .map(drop)
            .map_err(|e| failed("cannot bring the schema up to date", &e))
    });
    let _ = client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK]);
    out
}

/// How many migrations the database has had.
fn applied_count(
    client: &mut Client,
    runner: &mut refinery::Runner,
    failed: &dyn Fn(&str, &(dyn std::error::Error + 'static)) -> StoreError,
) -> Result<usize, StoreError> {
    // NB: refinery reads the table of migrations only once it exists.
    let exists: Option<String> = client
        .query_one("SELECT to_regclass($1)::text", &[&MIGRATION_TABLE])
        .map_err(|e| failed("cannot read the schema's version", &e))?
        .get(0);
    if exists.is_none() {
        return Ok(0);
    }
    runner
        .get_applied_migrations(client)
        .map(|a| a.len())
        .map_err(|e| failed("cannot read the schema's version", &e))
}

/// An error and its causes, each said once: refinery and the client say "db error" and
/// leave the database's own message (which relation, which column) to a cause.
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut said = String::new();
    let mut next = Some(e);
    while let Some(cause) = next {
        let text = if let Some(db) = cause
            .downcast_ref::<postgres::Error>()
            .and_then(postgres::Error::as_db_error)
        {
            next = None;
            db.message().to_owned()
        } else {
            next = cause.source();
            match cause
                .downcast_ref::<refinery::Error>()
                .map(refinery::Error::kind)
            {
                Some(refinery::error::Kind::Connection(what, _)) => what.clone(),
                _ => cause.to_string(),
            }
        };
        if !said.contains(&text) {
            if !said.is_empty() {
                said.push_str(": ");
            }
            said.push_str(&text);
        }
    }
    said
}

/// A point of run `id` refused: this process no longer holds the run.
fn not_held(id: &str) -> StoreError {
    StoreError::new(
        StoreErrorKind::Busy,
        format!(
            "run `{id}` is no longer held by this process (it was cancelled, another process took it over, or it was not created)"
        ),
    )
}

fn unknown_run(id: &str) -> StoreError {
    StoreError::new(
        StoreErrorKind::UnknownRun,
        format!("no run `{id}` in this store (`planvm runs list` shows them)"),
    )
}

fn damaged(message: String) -> StoreError {
    StoreError::new(StoreErrorKind::Damaged, message)
}

fn json(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".to_owned())
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The calls run `$1`-or-column committed, counted from its journal (distinct steps: a
/// resumed run may commit a call again).
macro_rules! count_calls {
    ($run:literal) => {
        concat!(
            "(SELECT count(DISTINCT c::text) FROM journal j \
              CROSS JOIN LATERAL json_array_elements(j.entry) p \
              CROSS JOIN LATERAL json_array_elements(coalesce(p->'committed', '[]'::json)) c \
              WHERE j.run = ",
            $run,
            ")"
        )
    };
}

/// The tokens the answers in a run's journal cost, as JSON text; NULL when none said.
macro_rules! sum_usage {
    ($run:literal) => {
        concat!(
            "(SELECT CASE WHEN count(*) = 0 THEN NULL ELSE json_build_object(\
              'input_tokens', sum((a->'usage'->>'input_tokens')::numeric), \
              'output_tokens', sum((a->'usage'->>'output_tokens')::numeric), \
              'cost', sum((a->'usage'->>'cost')::float8))::text END \
              FROM journal j \
              CROSS JOIN LATERAL json_array_elements(j.entry) p \
              CROSS JOIN LATERAL json_array_elements(coalesce(p->'answered', '[]'::json)) a \
              WHERE j.run = ",
            $run,
            " AND json_typeof(a->'usage') = 'object')"
        )
    };
}

// NB: as the SQLite store's: a finished run's count and tokens are in its row; a run
// still going is counted from its journal.
const RUN_COLUMNS: &str = concat!(
    "id, status, plan, program, parent, branch_seq, created_at, updated_at, steps, \
     coalesce(tool_calls, ",
    count_calls!("runs.id"),
    "), final_answer, error, presets, limits, owner, lease_until, question, \
     CASE WHEN status = 'running' THEN ",
    sum_usage!("runs.id"),
    " ELSE usage END, planner_usage"
);

/// A JSON column: NULL is None; anything else must parse.
fn json_column<T: serde::de::DeserializeOwned>(
    r: &postgres::Row,
    idx: usize,
    what: &str,
) -> Result<Option<T>, StoreError> {
    let Some(text) = r.get::<_, Option<String>>(idx) else {
        return Ok(None);
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        let id: String = r.try_get(0).unwrap_or_else(|_| "?".to_owned());
        damaged(format!(
            "run `{id}`: its stored {what} cannot be read ({e}): the store is damaged"
        ))
    })
}

fn run_info(r: &postgres::Row, now: i64) -> Result<RunInfo, StoreError> {
    let stored: String = r.get(1);
    let owner: Option<String> = r.get(14);
    let lease: Option<i64> = r.get(15);
    Ok(RunInfo {
        id: r.get(0),
        status: crate::rows::run_status(&stored, owner.as_deref(), lease, now),
        plan: r.get(2),
        program: r.get(3),
        parent: r.get(4),
        branch_seq: r.get(5),
        created_at: r.get(6),
        updated_at: r.get(7),
        steps: u64::try_from(r.get::<_, i64>(8)).unwrap_or(0),
        tool_calls: u64::try_from(r.get::<_, i64>(9)).unwrap_or(0),
        final_answer: json_column(r, 10, "final answer")?,
        error: json_column(r, 11, "error")?,
        presets: json_column(r, 12, "presets")?.unwrap_or_default(),
        limits: json_column(r, 13, "limits")?.unwrap_or_default(),
        owner,
        question: json_column(r, 16, "question")?,
        usage: crate::rows::add_usage(
            json_column(r, 17, "usage")?,
            json_column(r, 18, "planner usage")?,
        ),
    })
}

const GOAL_COLUMNS: &str = "id, goal, response_format, status, created_at, updated_at, answer, \
                            error, owner, request, session, lease_until";

fn goal_info(r: &postgres::Row) -> Result<GoalInfo, StoreError> {
    let owner: Option<String> = r.get(8);
    let stored: String = r.get(3);
    Ok(GoalInfo {
        id: r.get(0),
        goal: r.get(1),
        response_format: json_column(r, 2, "response format")?,
        status: crate::rows::goal_status(&stored, owner.as_deref(), r.get(11), now_ms()),
        created_at: r.get(4),
        updated_at: r.get(5),
        answer: json_column(r, 6, "answer")?,
        error: json_column(r, 7, "error")?,
        owner,
        request: json_column(r, 9, "request")?.unwrap_or_default(),
        session: r.get(10),
    })
}

const EVAL_CASE_COLUMNS: &str = "case_id, goal, verdict, score, reason, report";

/// An `eval_cases` row whose columns ([`EVAL_CASE_COLUMNS`]) start at `at`.
fn eval_case_at(r: &postgres::Row, at: usize) -> EvalCase {
    let report: String = r.get(at + 5);
    EvalCase {
        case_id: r.get(at),
        goal: r.get(at + 1),
        verdict: r.get(at + 2),
        score: r.get(at + 3),
        reason: r.get(at + 4),
        // NB: written by this store from a JSON value; damaged text reads as null.
        report: serde_json::from_str(&report).unwrap_or(Value::Null),
    }
}

/// Stores the program (once per hash) and creates the run, inside `tx`. A taken id is
/// refused with nothing written but the program (content-addressed, shared by any run).
fn create(
    tx: &mut postgres::Transaction<'_>,
    run: &NewRun<'_>,
    owner: &Owner,
    programs: &HashSet<String>,
) -> Result<Option<String>, Failed> {
    create_held_by(tx, run, Some(owner), programs)
}

/// [`create`], held by `owner`, or queued for a worker when there is none.
fn create_held_by(
    tx: &mut postgres::Transaction<'_>,
    run: &NewRun<'_>,
    owner: Option<&Owner>,
    programs: &HashSet<String>,
) -> Result<Option<String>, Failed> {
    let hash = format!("{:x}", Sha256::digest(run.pbc));
    let new = !programs.contains(&hash);
    if new {
        tx.execute(
            "INSERT INTO programs (hash, source, pbc) VALUES ($1, $2, $3) ON CONFLICT (hash) DO NOTHING",
            &[&hash, &run.source, &run.pbc],
        )
        .map_err(Failed::Db)?;
    }
    let now = now_ms();
    let inserted = tx
        .execute(
            "INSERT INTO runs (id, program, plan, parent, branch_seq, presets, limits, status, \
                               created_at, updated_at, owner, lease_until) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, 'running', $8, $8, $9, $10) \
             ON CONFLICT (id) DO NOTHING",
            &[
                &run.id,
                &hash,
                &run.plan,
                &run.parent.map(|(p, _)| p),
                &run.parent.map(|(_, s)| s),
                &json(run.presets),
                &json(run.limits),
                &now,
                &owner.map(|o| o.0.as_str()),
                &owner.map_or(crate::QUEUED, |_| now + crate::lease_ms()),
            ],
        )
        .map_err(Failed::Db)?;
    if inserted == 0 {
        return Err(Failed::Refused(duplicate_run(run.id)));
    }
    Ok(new.then_some(hash))
}

fn duplicate_run(id: &str) -> StoreError {
    StoreError::new(
        StoreErrorKind::DuplicateRun,
        format!("run `{id}` already exists in this store; `planvm resume {id}` continues it"),
    )
}

/// Runs one statement of a submission inserts at most.
const SUBMIT_CHUNK: usize = 1000;

/// Inserts `runs` into the queue (held by nobody), inside `tx`, with the programs of
/// theirs that `programs` (known to be stored) lacks: returns those programs' hashes.
/// Refused, with the first id taken (by the store or earlier in `runs`), when one is.
fn queue_runs(
    tx: &mut postgres::Transaction<'_>,
    runs: &[NewRun<'_>],
    programs: &HashSet<String>,
) -> Result<Vec<String>, Failed> {
    let mut new = Vec::new();
    let mut hashes = Vec::with_capacity(runs.len());
    for run in runs {
        let hash = format!("{:x}", Sha256::digest(run.pbc));
        if !programs.contains(&hash) && !new.contains(&hash) {
            tx.execute(
                "INSERT INTO programs (hash, source, pbc) VALUES ($1, $2, $3) ON CONFLICT (hash) DO NOTHING",
                &[&hash, &run.source, &run.pbc],
            )
            .map_err(Failed::Db)?;
            new.push(hash.clone());
        }
        hashes.push(hash);
    }
    let ids: Vec<&str> = runs.iter().map(|r| r.id).collect();
    let plans: Vec<&str> = runs.iter().map(|r| r.plan).collect();
    let parents: Vec<Option<&str>> = runs.iter().map(|r| r.parent.map(|(p, _)| p)).collect();
    let seqs: Vec<Option<i64>> = runs.iter().map(|r| r.parent.map(|(_, s)| s)).collect();
    let presets: Vec<String> = runs.iter().map(|r| json(r.presets)).collect();
    let limits: Vec<String> = runs.iter().map(|r| json(r.limits)).collect();
    let inserted: HashSet<String> = tx
        .query(
            "INSERT INTO runs (id, program, plan, parent, branch_seq, presets, limits, status, \
                               created_at, updated_at, owner, lease_until) \
             SELECT t.id, t.program, t.plan, t.parent, t.branch_seq, t.presets, t.limits, \
                    'running', $8, $8, NULL, $9 \
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], \
                         $6::text[], $7::text[]) \
                  WITH ORDINALITY AS t(id, program, plan, parent, branch_seq, presets, limits, n) \
             ORDER BY t.n \
             ON CONFLICT (id) DO NOTHING RETURNING id",
            &[
                &ids,
                &hashes,
                &plans,
                &parents,
                &seqs,
                &presets,
                &limits,
                &now_ms(),
                &crate::QUEUED,
            ],
        )
        .map_err(Failed::Db)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if inserted.len() < runs.len() {
        // NB: of an id given twice, the first is inserted: the second is the one taken.
        let mut fresh = inserted;
        if let Some(taken) = ids.iter().find(|id| !fresh.remove(**id)) {
            return Err(Failed::Refused(duplicate_run(taken)));
        }
    }
    Ok(new)
}

/// Writes a commit point of run `id`, inside `tx`; refused, with nothing written, when
/// `owner` no longer holds the run. NB: the run's row is locked first: a claim of it
/// waits for this transaction, or this one sees the claim.
fn commit(
    tx: &mut postgres::Transaction<'_>,
    prepared: &Prepared,
    (id, owner): (&str, &Owner),
    point: &CommitPoint,
) -> Result<Wrote, Failed> {
    let mut wrote = Wrote::default();
    let held = match point.journal_entry().map_err(Failed::Refused)? {
        Some(entry) => {
            let at = now_ms();
            let row = tx
                .query_opt(&prepared.journal, &[&id, &owner.0, &at, &entry])
                .map_err(Failed::Db)?;
            wrote.entry = row.map(|r| (r.get(0), at));
            wrote.entry.is_some()
        }
        None => {
            tx.execute(&prepared.held, &[&id, &owner.0])
                .map_err(Failed::Db)?
                > 0
        }
    };
    if !held {
        return Err(Failed::Refused(not_held(id)));
    }
    if let Some((steps, state)) = &point.state {
        let save = prepared
            .statement(
                tx,
                "INSERT INTO checkpoints (run, steps, state) VALUES ($1, $2, $3) \
                 ON CONFLICT (run) DO UPDATE SET steps = excluded.steps, state = excluded.state",
            )
            .map_err(Failed::Db)?;
        tx.execute(&save, &[&id, &to_i64(*steps), state])
            .map_err(Failed::Db)?;
    }
    let steps = to_i64(point.total_steps);
    if let Some(end) = &point.end {
        end_run(tx, prepared, (id, steps), end)?;
    } else if point.state.is_some() {
        let count = prepared
            .statement(
                tx,
                "UPDATE runs SET steps = $2, updated_at = $3 WHERE id = $1",
            )
            .map_err(Failed::Db)?;
        tx.execute(&count, &[&id, &steps, &now_ms()])
            .map_err(Failed::Db)?;
    }
    Ok(wrote)
}

/// Inserts goal `goal`, held by `owner` under a lease, or queued (held by nobody) when
/// None. A goal's id is its first run's: taken by a run, it is taken.
fn insert_goal(
    tx: &mut postgres::Transaction<'_>,
    goal: &NewGoal<'_>,
    owner: Option<&Owner>,
) -> Result<(), Failed> {
    let now = now_ms();
    let lease = owner.map_or(crate::QUEUED, |_| now + crate::lease_ms());
    let inserted = tx
        .execute(
            "INSERT INTO goals (id, goal, response_format, request, status, created_at, updated_at, owner, session, lease_until) \
             SELECT $1, $2, $3, $6, 'open', $4, $4, $5, $7, $8 \
             WHERE NOT EXISTS (SELECT 1 FROM runs WHERE id = $1) \
             ON CONFLICT (id) DO NOTHING",
            &[
                &goal.id,
                &goal.goal,
                &goal.response_format.map(json),
                &now,
                &owner.map(|o| o.0.as_str()),
                &json(goal.request),
                &goal.session,
                &lease,
            ],
        )
        .map_err(Failed::Db)?;
    if inserted == 0 {
        return Err(Failed::Refused(StoreError::new(
            StoreErrorKind::DuplicateRun,
            format!("`{}` is already a goal or a run of this store", goal.id),
        )));
    }
    Ok(())
}

/// Ends run `$1` (see [`end_run`]).
const END_RUN: &str = concat!(
    "UPDATE runs SET steps = $2, updated_at = $3, status = $4, final_answer = $5, \
                     error = $6, question = $8, lease_until = NULL, \
                     tool_calls = coalesce($7, ",
    count_calls!("$1"),
    "), usage = CASE WHEN $7::bigint IS NULL THEN ",
    sum_usage!("$1"),
    " ELSE $9 END WHERE id = $1"
);

/// Writes run `id`'s end into its row, its calls counted and its tokens summed from its
/// journal when the run did not count them (see [`RunEnd::usage`]).
fn end_run(
    tx: &mut postgres::Transaction<'_>,
    prepared: &Prepared,
    (id, steps): (&str, i64),
    end: &RunEnd,
) -> Result<(), Failed> {
    let end_it = prepared.statement(tx, END_RUN).map_err(Failed::Db)?;
    tx.execute(
        &end_it,
        &[
            &id,
            &steps,
            &now_ms(),
            &end.status(),
            &end.ok.then(|| json(&end.final_answer)),
            &end.error.as_ref().map(json),
            &end.tool_calls.map(to_i64),
            &end.question.as_ref().map(json),
            &end.usage.as_ref().map(json),
        ],
    )
    .map_err(Failed::Db)?;
    Ok(())
}

/// The statements that take the runs ready for a worker: up to `$2` of them at `$1`,
/// oldest first; then each given its token (`$1` ids, `$2` tokens) and lease (`$3`, at
/// `$4`).
const READY_RUNS: (&str, &str) = (
    "SELECT id FROM runs WHERE status = 'running' \
     AND (owner IS NULL OR lease_until IS NULL OR lease_until < $1) \
     ORDER BY created_at, id LIMIT $2 FOR UPDATE SKIP LOCKED",
    "UPDATE runs SET owner = t.owner, lease_until = $3, updated_at = $4 \
     FROM unnest($1::text[], $2::text[]) AS t(id, owner) WHERE runs.id = t.id",
);

/// [`READY_RUNS`] for goals: queued, or open under a lease that lapsed.
const READY_GOALS: (&str, &str) = (
    "SELECT id FROM goals WHERE status = 'open' AND (owner IS NULL OR lease_until < $1) \
     ORDER BY created_at, id LIMIT $2 FOR UPDATE SKIP LOCKED",
    "UPDATE goals SET owner = t.owner, lease_until = $3, updated_at = $4 \
     FROM unnest($1::text[], $2::text[]) AS t(id, owner) WHERE goals.id = t.id",
);

impl PgStore {
    /// Takes up to `n` rows that `(select, update)` find ready ([`READY_RUNS`]), each
    /// held from now on by a fresh `owner()` under a lease.
    fn reserve_from(
        &mut self,
        (select, update): (&str, &str),
        n: usize,
        owner: &mut dyn FnMut() -> Owner,
    ) -> Result<Vec<(String, Owner)>, StoreError> {
        let now = now_ms();
        let limit = i64::try_from(n).unwrap_or(i64::MAX);
        // NB: owners are made before the transaction (the closure need not be Send).
        let owners: Vec<Owner> = (0..n).map(|_| owner()).collect();
        self.transaction(|tx, prepared| {
            let (select, update) = (
                prepared.statement(tx, select).map_err(Failed::Db)?,
                prepared.statement(tx, update).map_err(Failed::Db)?,
            );
            let ready = tx.query(&select, &[&now, &limit]).map_err(Failed::Db)?;
            let ids: Vec<String> = ready.iter().map(|r| r.get(0)).collect();
            let tokens: Vec<&str> = owners[..ids.len()].iter().map(|o| o.0.as_str()).collect();
            tx.execute(&update, &[&ids, &tokens, &(now + crate::lease_ms()), &now])
                .map_err(Failed::Db)?;
            Ok(ids.into_iter().zip(owners.iter().cloned()).collect())
        })
    }
}

impl RunStore for PgStore {
    fn name(&self) -> &str {
        &self.pool.shown
    }

    fn create_run(&mut self, run: &NewRun<'_>, owner: &Owner) -> Result<(), StoreError> {
        let programs = &self.programs;
        let new = self.transaction(|tx, _| create(tx, run, owner, programs))?;
        self.programs.extend(new);
        Ok(())
    }

    fn prune(&mut self, before: i64, keep_failed: bool) -> Result<u64, StoreError> {
        let failed = !keep_failed;
        self.transaction(|tx, _| {
            // NB: locked first, then deleted by id: each statement of a transaction sees
            // the runs as they are then, and one claimed or branched from meanwhile must
            // not lose its journal and keep its row.
            let sql = format!("{} FOR UPDATE", crate::pruned_runs!("$1", "$2"));
            let ids: Vec<String> = tx
                .query(&sql, &[&before, &failed])
                .map_err(Failed::Db)?
                .iter()
                .map(|r| r.get(0))
                .collect();
            for table in ["journal WHERE run", "checkpoints WHERE run"] {
                tx.execute(&format!("DELETE FROM {table} = ANY($1)"), &[&ids])
                    .map_err(Failed::Db)?;
            }
            tx.execute("DELETE FROM runs WHERE id = ANY($1)", &[&ids])
                .map_err(Failed::Db)
        })
    }

    fn submit(&mut self, runs: &[NewRun<'_>]) -> Result<(), StoreError> {
        let programs = &self.programs;
        let mut stored = Vec::new();
        self.transaction(|tx, _| {
            // NB: many rows a statement: a statement per run was most of a submission's
            // time.
            for chunk in runs.chunks(SUBMIT_CHUNK) {
                stored.extend(queue_runs(tx, chunk, programs)?);
            }
            // NB: sent when the transaction commits: workers waiting wake up then.
            tx.batch_execute("NOTIFY planrt_runs").map_err(Failed::Db)?;
            Ok(())
        })?;
        self.programs.extend(stored);
        Ok(())
    }

    fn reserve(
        &mut self,
        n: usize,
        owner: &mut dyn FnMut() -> Owner,
    ) -> Result<Vec<(String, Owner)>, StoreError> {
        self.reserve_from(READY_RUNS, n, owner)
    }

    fn first_taken(&mut self, ids: &[&str]) -> Result<Option<usize>, StoreError> {
        let wanted: Vec<&str> = ids.to_vec();
        let taken: HashSet<String> = self
            .rows("SELECT id FROM runs WHERE id = ANY($1)", &[&wanted])?
            .iter()
            .map(|r| r.get(0))
            .collect();
        Ok(ids.iter().position(|id| taken.contains(*id)))
    }

    fn claim(&mut self, id: &str, owner: &Owner, seen: Seen) -> Result<(), StoreError> {
        self.transaction(|tx, prepared| {
            let mut prepare = |sql| prepared.statement(tx, sql).map_err(Failed::Db);
            let (lock, head, take) = (
                prepare(
                    "SELECT status, owner, lease_until, updated_at FROM runs WHERE id = $1 FOR UPDATE",
                )?,
                prepare("SELECT max(seq) FROM journal WHERE run = $1")?,
                prepare(
                    "UPDATE runs SET status = 'running', owner = $2, lease_until = $3, updated_at = $4, \
                                     final_answer = NULL, error = NULL, tool_calls = NULL, question = NULL \
                     WHERE id = $1",
                )?,
            );
            let row = tx.query_opt(&lock, &[&id]).map_err(Failed::Db)?;
            let Some(row) = row else {
                return Err(Failed::Refused(unknown_run(id)));
            };
            let (status, holder, lease, updated_at): (String, Option<String>, Option<i64>, i64) =
                (row.get(0), row.get(1), row.get(2), row.get(3));
            let busy = |message: String| {
                Err(Failed::Refused(StoreError::new(StoreErrorKind::Busy, message)))
            };
            if status == "ok" {
                return busy(format!(
                    "run `{id}` has finished meanwhile (another process resumed it)"
                ));
            }
            let head: Option<i64> = tx.query_one(&head, &[&id]).map_err(Failed::Db)?.get(0);
            if head != seen.journal_head || seen.updated_at.is_some_and(|at| at != updated_at) {
                return busy(format!(
                    "run `{id}` changed meanwhile (it went on in another process, or was cancelled); resume it again"
                ));
            }
            let now = now_ms();
            if status == "running"
                && let Some(holder) = holder
                && holder != owner.0
                && crate::rows::holds(&holder, lease, now)
            {
                return busy(format!(
                    "run `{id}` is being run by another process ({holder}); wait for it to end, or for its lease to lapse ({} s after it stops)",
                    crate::lease_ms() / 1000
                ));
            }
            tx.execute(&take, &[&id, &owner.0, &(now + crate::lease_ms()), &now])
                .map_err(Failed::Db)?;
            Ok(())
        })
    }

    fn cancel(&mut self, id: &str, error: &Value) -> Result<bool, StoreError> {
        self.transaction(|tx, _| {
            let status = tx
                .query_opt("SELECT status FROM runs WHERE id = $1 FOR UPDATE", &[&id])
                .map_err(Failed::Db)?;
            let Some(status) = status else {
                return Err(Failed::Refused(unknown_run(id)));
            };
            if !matches!(status.get::<_, &str>(0), "running" | "needs_input") {
                return Ok(false);
            }
            tx.execute(
                concat!(
                    "UPDATE runs SET status = 'failed', owner = NULL, lease_until = NULL, \
                                     question = NULL, updated_at = $2, error = $3, tool_calls = ",
                    count_calls!("$1"),
                    " WHERE id = $1"
                ),
                &[&id, &now_ms(), &json(error)],
            )
            .map_err(Failed::Db)?;
            // NB: no commit point of the run's can follow (its holder's is refused): its
            // calls in flight end here.
            tx.execute(
                "INSERT INTO journal (run, seq, at, entry) \
                 SELECT $1, coalesce(max(seq), -1) + 1, $2, $3::text::json FROM journal WHERE run = $1",
                &[&id, &now_ms(), &crate::rows::CANCEL_ENTRY],
            )
            .map_err(Failed::Db)?;
            Ok(true)
        })
    }

    fn journal_head(&self, id: &str) -> Result<Option<i64>, StoreError> {
        let rows = self.rows("SELECT max(seq) FROM journal WHERE run = $1", &[&id])?;
        Ok(rows.first().and_then(|r| r.get(0)))
    }

    fn release(&mut self, id: &str, owner: &Owner) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "UPDATE runs SET owner = NULL, lease_until = NULL \
                 WHERE id = $1 AND owner = $2 AND status = 'running'",
                &[&id, &owner.0],
            )
        })
        .map(drop)
    }

    fn renew(&mut self, owners: &[Owner]) -> Result<(), StoreError> {
        let until = now_ms() + crate::lease_ms();
        let owners: Vec<&str> = owners.iter().map(|o| o.0.as_str()).collect();
        self.again(|Conn { client: c, .. }| {
            // NB: rows a commit has locked are skipped (their holder is committing them):
            // one UPDATE locking many runs in its own order would deadlock with a group
            // commit locking them in another.
            c.execute(
                "WITH held AS (UPDATE runs SET lease_until = $2 WHERE id IN (SELECT id FROM runs \
                 WHERE owner = ANY($1) AND status = 'running' FOR UPDATE SKIP LOCKED)) \
                 UPDATE goals SET lease_until = $2 WHERE id IN (SELECT id FROM goals \
                 WHERE owner = ANY($1) AND status = 'open' FOR UPDATE SKIP LOCKED)",
                &[&owners, &until],
            )
        })
        .map(drop)
    }

    fn commit(&mut self, id: &str, owner: &Owner, point: &CommitPoint) -> Result<(), StoreError> {
        if point.state.is_none() && point.end.is_none() {
            // NB: most points: one statement, its own transaction (one round trip).
            let entry = point.journal_entry()?;
            let held = self.with_conn(|c| match &entry {
                Some(entry) => c
                    .client
                    .query_opt(&c.prepared.journal, &[&id, &owner.0, &now_ms(), entry])
                    .map(|row| u64::from(row.is_some())),
                None => c.client.execute(&c.prepared.held, &[&id, &owner.0]),
            })?;
            if held == 0 {
                return Err(not_held(id));
            }
            return Ok(());
        }
        self.transaction(|tx, prepared| commit(tx, prepared, (id, owner), point).map(drop))
    }

    fn write_group(&mut self, writes: &[&StoreWrite]) -> Vec<Result<Wrote, StoreError>> {
        let programs = &self.programs;
        let mut new_programs = Vec::new();
        // NB: a refusal is found by a query that fails nothing, so the rest of the group
        // goes on in the same transaction; a database error fails the whole group.
        let done = self.transaction(|tx, prepared| {
            let mut results = Vec::with_capacity(writes.len());
            for w in writes {
                let r = match w {
                    StoreWrite::Create(run, owner) => create(tx, &run.borrow(), owner, programs)
                        .map(|new| {
                            new_programs.extend(new);
                            Wrote::default()
                        }),
                    StoreWrite::Commit(id, owner, point) => {
                        commit(tx, prepared, (id, owner), point)
                    }
                };
                match r {
                    Ok(wrote) => results.push(Ok(wrote)),
                    Err(Failed::Refused(e)) => results.push(Err(e)),
                    Err(db) => return Err(db),
                }
            }
            Ok(results)
        });
        match done {
            Ok(results) => {
                self.programs.extend(new_programs);
                results
            }
            Err(e) => writes.iter().map(|_| Err(e.clone())).collect(),
        }
    }

    fn run(&self, id: &str) -> Result<RunInfo, StoreError> {
        self.runs_where("WHERE id = $1", &[&id])?
            .pop()
            .ok_or_else(|| unknown_run(id))
    }

    fn runs(&self) -> Result<Vec<RunInfo>, StoreError> {
        self.runs_where("ORDER BY created_at, id", &[])
    }

    fn runs_before(
        &self,
        before: Option<(i64, &str)>,
        limit: usize,
    ) -> Result<Vec<RunInfo>, StoreError> {
        let now = now_ms();
        let select = format!("SELECT {RUN_COLUMNS} FROM runs");
        self.newest_before(&select, before, limit)?
            .iter()
            .map(|r| run_info(r, now))
            .collect()
    }

    fn runs_under(&self, prefix: &str) -> Result<Vec<RunInfo>, StoreError> {
        // NB: a range of the primary key: ids hold only `[A-Za-z0-9._-]`, all below `~`.
        let end = format!("{prefix}~");
        self.runs_where(
            "WHERE id >= $1 AND id < $2 AND left(id, length($1)) = $1 ORDER BY created_at, id",
            &[&prefix, &end],
        )
    }

    fn program(&self, hash: &str) -> Result<StoredProgram, StoreError> {
        // NB: a program is named by its hash: what this process read once holds.
        if let Some(known) = self.pool.program(hash) {
            return Ok(known);
        }
        let rows = self.rows(
            "SELECT hash, source, pbc FROM programs WHERE hash = $1",
            &[&hash],
        )?;
        let r = rows.first().ok_or_else(|| {
            damaged(format!(
                "{}: the program {hash} of a run is missing: the store is damaged",
                self.pool.shown
            ))
        })?;
        let program = StoredProgram {
            hash: r.get(0),
            source: r.get(1),
            pbc: r.get(2),
        };
        self.pool.keep_program(&program);
        Ok(program)
    }

    fn steps(&self, id: &str) -> Result<Vec<StepRow>, StoreError> {
        Ok(crate::rows::steps(self.entries(id)?))
    }

    fn calls(&self, id: &str) -> Result<Vec<CallRow>, StoreError> {
        Ok(crate::rows::calls(self.entries(id)?))
    }

    fn fold_journal(&self, id: &str, fold: &mut JournalFold) -> Result<(), StoreError> {
        let after = fold.head().unwrap_or(-1);
        self.entries_after(id, after, |seq, at, points| fold.apply(seq, at, points))
    }

    fn checkpoint(&self, id: &str) -> Result<Option<(u64, String)>, StoreError> {
        let rows = self.rows(
            "SELECT c.steps, c.state FROM runs r LEFT JOIN checkpoints c ON c.run = r.id \
             WHERE r.id = $1",
            &[&id],
        )?;
        let row = rows.first().ok_or_else(|| unknown_run(id))?;
        Ok(row
            .get::<_, Option<i64>>(0)
            .map(|steps| (u64::try_from(steps).unwrap_or(0), row.get(1))))
    }

    fn create_goal(&mut self, goal: &NewGoal<'_>, owner: &Owner) -> Result<(), StoreError> {
        self.transaction(|tx, _| insert_goal(tx, goal, Some(owner)))
    }

    fn submit_goals(&mut self, goals: &[NewGoal<'_>]) -> Result<(), StoreError> {
        self.transaction(|tx, _| {
            for goal in goals {
                insert_goal(tx, goal, None)?;
            }
            // NB: sent when the transaction commits: workers waiting wake up then.
            tx.batch_execute("NOTIFY planrt_runs").map_err(Failed::Db)
        })
    }

    fn reserve_goals(
        &mut self,
        n: usize,
        owner: &mut dyn FnMut() -> Owner,
    ) -> Result<Vec<(String, Owner)>, StoreError> {
        self.reserve_from(READY_GOALS, n, owner)
    }

    fn end_goal(
        &mut self,
        id: &str,
        by: Option<&Owner>,
        outcome: Result<&Value, &Value>,
    ) -> Result<bool, StoreError> {
        let (status, answer, error) = match outcome {
            Ok(answer) => ("answered", Some(json(answer)), None),
            Err(error) => ("failed", None, Some(json(error))),
        };
        let now = now_ms();
        let by = by.map(|o| o.0.as_str());
        let changed = self.with(|c| {
            c.execute(
                "UPDATE goals SET status = $2, answer = $3, error = $4, updated_at = $5, \
                 owner = NULL, lease_until = NULL \
                 WHERE id = $1 AND (status = 'open' OR status = 'needs_input') \
                 AND ($6::text IS NULL OR owner = $6)",
                &[&id, &status, &answer, &error, &now, &by],
            )
        })?;
        if changed == 0 && self.goal(id)?.is_none() {
            return Err(unknown_run(id));
        }
        Ok(changed == 1)
    }

    fn take_goal(&mut self, id: &str, owner: &Owner) -> Result<bool, StoreError> {
        self.transaction(|tx, _| {
            let held = tx
                .query_opt(
                    "SELECT owner, lease_until FROM goals WHERE id = $1 AND status = 'open' FOR UPDATE",
                    &[&id],
                )
                .map_err(Failed::Db)?;
            let Some(held) = held else {
                return Ok(false);
            };
            let (held, lease): (Option<String>, Option<i64>) = (held.get(0), held.get(1));
            let now = now_ms();
            if held.is_some_and(|h| crate::rows::holds_goal(&h, lease, now)) {
                return Ok(false);
            }
            tx.execute(
                "UPDATE goals SET owner = $2, updated_at = $3, lease_until = $4 WHERE id = $1",
                &[&id, &owner.0, &now, &(now + crate::lease_ms())],
            )
            .map_err(Failed::Db)?;
            Ok(true)
        })
    }

    fn goal_needs_input(&mut self, id: &str, run: &str) -> Result<bool, StoreError> {
        let now = now_ms();
        let changed = self.with(|c| {
            c.execute(
                "UPDATE goals SET status = 'needs_input', updated_at = $2, owner = NULL, \
                 lease_until = NULL WHERE id = $1 AND status = 'open' \
                 AND EXISTS (SELECT 1 FROM runs WHERE id = $3 AND status = 'needs_input')",
                &[&id, &now, &run],
            )
        })?;
        Ok(changed == 1)
    }

    fn reopen_goal(&mut self, id: &str, owner: &Owner) -> Result<bool, StoreError> {
        let now = now_ms();
        let changed = self.with(|c| {
            c.execute(
                "UPDATE goals SET status = 'open', updated_at = $3, owner = $2, lease_until = $4 \
                 WHERE id = $1 AND (status = 'needs_input' OR status = 'open')",
                &[&id, &owner.0, &now, &(now + crate::lease_ms())],
            )
        })?;
        Ok(changed == 1)
    }

    fn goal(&self, id: &str) -> Result<Option<GoalInfo>, StoreError> {
        let sql = format!("SELECT {GOAL_COLUMNS} FROM goals WHERE id = $1");
        self.rows(&sql, &[&id])?.first().map(goal_info).transpose()
    }

    fn goals(&self) -> Result<Vec<GoalInfo>, StoreError> {
        let sql = format!("SELECT {GOAL_COLUMNS} FROM goals ORDER BY created_at, id");
        self.rows(&sql, &[])?.iter().map(goal_info).collect()
    }

    fn goals_before(
        &self,
        before: Option<(i64, &str)>,
        limit: usize,
    ) -> Result<Vec<GoalInfo>, StoreError> {
        let select = format!("SELECT {GOAL_COLUMNS} FROM goals");
        self.newest_before(&select, before, limit)?
            .iter()
            .map(goal_info)
            .collect()
    }

    fn save_goal_round(&mut self, goal: &str, round: &GoalRound) -> Result<(), StoreError> {
        let number = i64::try_from(round.round).unwrap_or(i64::MAX);
        let diagnostics = serde_json::to_string(&round.diagnostics).unwrap_or_default();
        self.with(|c| {
            if number == 0 {
                c.execute("DELETE FROM goal_rounds WHERE goal = $1", &[&goal])?;
            }
            c.execute(
                "INSERT INTO goal_rounds (goal, round, kind, reply, diagnostics, planner_error, \
                 run, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
                 ON CONFLICT (goal, round) DO UPDATE SET kind = $3, reply = $4, \
                 diagnostics = $5, planner_error = $6, run = $7, created_at = $8",
                &[
                    &goal,
                    &number,
                    &round.kind,
                    &round.reply,
                    &diagnostics,
                    &round.planner_error,
                    &round.run,
                    &round.created_at,
                ],
            )
        })
        .map(drop)
    }

    fn goal_rounds(&self, goal: &str) -> Result<Vec<GoalRound>, StoreError> {
        let rows = self.rows(
            "SELECT round, kind, reply, diagnostics, planner_error, run, created_at \
             FROM goal_rounds WHERE goal = $1 ORDER BY round",
            &[&goal],
        )?;
        Ok(rows
            .iter()
            .map(|r| GoalRound {
                round: u64::try_from(r.get::<_, i64>(0)).unwrap_or(0),
                kind: r.get(1),
                reply: r.get(2),
                diagnostics: serde_json::from_str(r.get::<_, &str>(3)).unwrap_or(Value::Null),
                planner_error: r.get(4),
                run: r.get(5),
                created_at: r.get(6),
            })
            .collect())
    }

    fn children(&self, id: &str) -> Result<Vec<String>, StoreError> {
        let rows = self.rows(
            "SELECT id FROM runs WHERE parent = $1 ORDER BY created_at, id",
            &[&id],
        )?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    fn session_goals(&self, id: &str) -> Result<Vec<GoalInfo>, StoreError> {
        let sql =
            format!("SELECT {GOAL_COLUMNS} FROM goals WHERE session = $1 ORDER BY created_at, id");
        self.rows(&sql, &[&id])?.iter().map(goal_info).collect()
    }

    fn sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        let rows = self.rows(
            "SELECT session, count(*), min(created_at), max(created_at) FROM goals \
             WHERE session IS NOT NULL GROUP BY session ORDER BY min(created_at), session",
            &[],
        )?;
        Ok(rows
            .iter()
            .map(|r| SessionInfo {
                id: r.get(0),
                goals: u64::try_from(r.get::<_, i64>(1)).unwrap_or(0),
                created_at: r.get(2),
                updated_at: r.get(3),
            })
            .collect())
    }

    fn summary(&self, id: &str) -> Result<Option<(String, String)>, StoreError> {
        let rows = self.rows(
            "SELECT upto, summary FROM summaries WHERE session = $1",
            &[&id],
        )?;
        Ok(rows.first().map(|r| (r.get(0), r.get(1))))
    }

    fn save_summary(&mut self, id: &str, upto: &str, summary: &str) -> Result<(), StoreError> {
        let now = now_ms();
        self.with(|c| {
            c.execute(
                "INSERT INTO summaries (session, upto, summary, updated_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (session) DO UPDATE SET upto = $2, summary = $3, updated_at = $4",
                &[&id, &upto, &summary, &now],
            )
        })
        .map(drop)
    }

    fn create_eval(&mut self, id: &str, dataset: &str) -> Result<(), StoreError> {
        let now = now_ms();
        let inserted = self.with(|c| {
            c.execute(
                "INSERT INTO evals (id, dataset, created_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (id) DO NOTHING",
                &[&id, &dataset, &now],
            )
        })?;
        if inserted == 0 {
            return Err(StoreError::new(
                StoreErrorKind::DuplicateRun,
                format!("evaluation `{id}` is already in this store"),
            ));
        }
        Ok(())
    }

    fn save_eval_case(&mut self, eval: &str, case: &EvalCase) -> Result<(), StoreError> {
        let report = case.report.to_string();
        self.with(|c| {
            c.execute(
                "INSERT INTO eval_cases (eval, case_id, goal, verdict, score, reason, report) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (eval, case_id) DO UPDATE SET \
                 goal = $3, verdict = $4, score = $5, reason = $6, report = $7",
                &[
                    &eval,
                    &case.case_id,
                    &case.goal,
                    &case.verdict,
                    &case.score,
                    &case.reason,
                    &report,
                ],
            )
        })
        .map(drop)
    }

    fn end_eval(&mut self, id: &str, summary: &Value) -> Result<(), StoreError> {
        let summary = summary.to_string();
        self.with(|c| {
            c.execute(
                "UPDATE evals SET summary = $2 WHERE id = $1",
                &[&id, &summary],
            )
        })
        .map(drop)
    }

    fn evals(&self) -> Result<Vec<EvalInfo>, StoreError> {
        let rows = self.rows(
            "SELECT e.id, e.dataset, e.created_at, e.summary, \
             (SELECT count(*) FROM eval_cases c WHERE c.eval = e.id), \
             (SELECT count(*) FROM eval_cases c WHERE c.eval = e.id AND c.verdict = 'pass') \
             FROM evals e ORDER BY e.created_at, e.id",
            &[],
        )?;
        Ok(rows
            .iter()
            .map(|r| EvalInfo {
                id: r.get(0),
                dataset: r.get(1),
                created_at: r.get(2),
                summary: r
                    .get::<_, Option<String>>(3)
                    .and_then(|s| serde_json::from_str(&s).ok()),
                cases: u64::try_from(r.get::<_, i64>(4)).unwrap_or(0),
                passed: u64::try_from(r.get::<_, i64>(5)).unwrap_or(0),
            })
            .collect())
    }

    fn eval_cases(&self, id: &str) -> Result<Vec<EvalCase>, StoreError> {
        let sql = format!("SELECT {EVAL_CASE_COLUMNS} FROM eval_cases WHERE eval = $1 ORDER BY n");
        Ok(self
            .rows(&sql, &[&id])?
            .iter()
            .map(|r| eval_case_at(r, 0))
            .collect())
    }

    fn eval_case_of_goal(&self, goal: &str) -> Result<Option<(String, EvalCase)>, StoreError> {
        let sql = format!(
            "SELECT eval, {EVAL_CASE_COLUMNS} FROM eval_cases WHERE goal = $1 ORDER BY n DESC LIMIT 1"
        );
        Ok(self
            .rows(&sql, &[&goal])?
            .first()
            .map(|r| (r.get(0), eval_case_at(r, 1))))
    }

    fn set_planner_usage(&mut self, run: &str, usage: &plan_llm::Usage) -> Result<(), StoreError> {
        let usage = serde_json::json!(usage).to_string();
        self.with(|c| {
            c.execute(
                "UPDATE runs SET planner_usage = $2 WHERE id = $1",
                &[&run, &usage],
            )
        })
        .map(drop)
    }

    fn set_feedback(&mut self, run: &str, feedback: &Feedback) -> Result<(), StoreError> {
        let now = now_ms();
        let written = self.with(|c| {
            c.execute(
                "INSERT INTO feedback (run, verdict, note, updated_at) \
                 SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM runs WHERE id = $1) \
                 ON CONFLICT (run) DO UPDATE SET verdict = $2, note = $3, updated_at = $4",
                &[&run, &feedback.verdict, &feedback.note, &now],
            )
        })?;
        if written == 0 {
            return Err(StoreError::new(
                StoreErrorKind::UnknownRun,
                format!("no run `{run}` in this store"),
            ));
        }
        Ok(())
    }

    fn feedback(&self, run: &str) -> Result<Option<Feedback>, StoreError> {
        let rows = self.rows(
            "SELECT verdict, note, updated_at FROM feedback WHERE run = $1",
            &[&run],
        )?;
        Ok(rows.first().map(|r| Feedback {
            verdict: r.get(0),
            note: r.get(1),
            updated_at: r.get(2),
        }))
    }
}
