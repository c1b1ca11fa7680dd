//! The second guard, SQLite's own: each query gets a connection opened read-only (for a
//! read-only tool), with an authorizer that SQLite asks about every action of the
//! statement it compiles (each table and column read, each function, each write, pragma
//! or attach) and that denies what the constraints refuse, and a progress handler that
//! stops the query at the time limit. A query the parser let through by mistake fails
//! here, and the file is never written by a read-only tool.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Once, mpsc};
use std::time::{Duration, Instant};

use rusqlite::ffi::ErrorCode;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::limits::Limit;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde_json::Value;

use crate::check::sqlite_function_allowed;
use crate::{Constraints, DbError, QueryError, Rows};

const SCHEMA: &str = "only queries and writes to rows of allowed tables may run: no schema changes";

/// The largest string or blob a query may make or read, at least.
const MAX_VALUE_BYTES: usize = 64 << 20;

/// SQLite instructions between two looks at the clock.
const PROGRESS_OPS: i32 = 10_000;

/// Bytes SQLite may hold in this process, all connections together. SQLite has no limit
/// per connection, and a query can make it allocate far more than it returns (a CTE read
/// twice by each of twenty others is expanded into a million copies; a row of sixty
/// 60 MB blobs is 3.6 GB before its first value is looked at): past this, an allocation
/// fails and so does the query, with "out of memory". NB: SQLite enforces it only with
/// its memory statistics on (`SQLITE_DEFAULT_MEMSTATUS`, its default): the build must not
/// turn them off.
const SQLITE_HEAP_LIMIT: i64 = 1 << 30;

/// Sets [`SQLITE_HEAP_LIMIT`] for the process, through `conn`, unless a lower limit is
/// set already (the pragma only lowers it).
fn limit_sqlite_heap(conn: &Connection) -> rusqlite::Result<()> {
    static SET: Once = Once::new();
    let mut done = Ok(());
    SET.call_once(|| {
        done = conn.execute_batch(&format!("PRAGMA hard_heap_limit = {SQLITE_HEAP_LIMIT}"));
    });
    done
}

/// Interrupts a connection at its deadline from a thread of its own, unless dropped
/// first. NB: SQLite calls the progress handler while a statement runs, seldom while it
/// is prepared, and preparing a query of a few hundred bytes can take minutes (each use
/// of a CTE is a copy of it).
struct Alarm {
    _disarm: mpsc::Sender<()>,
}

impl Alarm {
    fn set(conn: &Connection, timeout: Duration) -> Option<Alarm> {
        let handle = conn.get_interrupt_handle();
        let (disarm, disarmed) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("sql-timeout".into())
            .stack_size(64 << 10)
            .spawn(move || {
                if let Err(mpsc::RecvTimeoutError::Timeout) = disarmed.recv_timeout(timeout) {
                    handle.interrupt();
                }
            })
            .ok()?;
        Some(Alarm { _disarm: disarm })
    }
}

/// A SQLite database a tool queries under its constraints.
#[derive(Clone, Debug)]
pub struct Sqlite {
    path: PathBuf,
    constraints: Arc<Constraints>,
}

impl Sqlite {
    /// The database at `path` (which must exist: a tool never creates one), queried under
    /// `constraints`.
    pub fn open(path: &Path, constraints: Constraints) -> Result<Sqlite, DbError> {
        if !path.is_file() {
            let why = format!("no SQLite database at {}", path.display());
            return Err(DbError::Unavailable(why));
        }
        // NB: a table's INTEGER PRIMARY KEY is its rowid, which SQLite reads by other
        // means than its columns: it cannot be denied as one.
        if !constraints.deny_columns.is_empty() {
            let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
                .map_err(|e| {
                    let why = format!("cannot open the database {}: {e}", path.display());
                    DbError::Unavailable(why)
                })?;
            for (table, column) in &constraints.deny_columns {
                let quoted = format!("\"{}\"", table.replace('"', "\"\""));
                let Ok(mut stmt) = conn.prepare(&format!("PRAGMA table_info({quoted})")) else {
                    continue;
                };
                let info: Vec<(String, String, i64)> = stmt
                    .query_map([], |r| Ok((r.get(1)?, r.get(2)?, r.get(5)?)))
                    .and_then(|rows| rows.collect())
                    .unwrap_or_default();
                let pks = info.iter().filter(|(_, _, pk)| *pk > 0).count();
                if info.iter().any(|(name, ty, pk)| {
                    name.eq_ignore_ascii_case(column)
                        && *pk > 0
                        && pks == 1
                        && ty.eq_ignore_ascii_case("INTEGER")
                }) {
                    return Err(DbError::Config(format!(
                        "deny_columns `{table}.{column}`: it is the table's INTEGER PRIMARY KEY (its rowid), which cannot be denied apart from the table: leave the table out of allow_tables instead"
                    )));
                }
            }
        }
        Ok(Sqlite {
            path: path.to_owned(),
            constraints: Arc::new(constraints),
        })
    }

    pub fn constraints(&self) -> &Constraints {
        &self.constraints
    }

    /// What names this database in a cache key: its path, resolved.
    pub(crate) fn key(&self) -> String {
        let path = std::fs::canonicalize(&self.path).unwrap_or_else(|_| self.path.clone());
        path.display().to_string()
    }

    /// SQLite's count of the database's schema changes: an index of its schema is stale
    /// once this moves.
    pub fn schema_version(&self) -> Result<i64, DbError> {
        let path = self.path.display();
        let conn = Connection::open_with_flags(&self.path, OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| DbError::Unavailable(format!("cannot open the database {path}: {e}")))?;
        conn.query_row("PRAGMA schema_version", [], |r| r.get(0))
            .map_err(|e| DbError::Unavailable(format!("reading {path}: {e}")))
    }

    /// Runs `sql` if both guards let it: the parser's check first, then the database's.
    /// Blocking: call it off an async runtime's threads.
    pub fn query(&self, sql: &str) -> Result<Rows, QueryError> {
        crate::check(sql, &self.constraints)?;
        self.execute(sql)
    }

    /// Runs `sql` with the database's guard alone (the parser's check is [`crate::check`]).
    pub fn execute(&self, sql: &str) -> Result<Rows, QueryError> {
        let c = &*self.constraints;
        let conn = self.connect()?;
        let start = Instant::now();
        let timeout = c.timeout;
        // NB: held until the rows are read; the progress handler below stops a running
        // statement sooner, the alarm one being prepared.
        let _alarm = Alarm::set(&conn, timeout);
        let failed = move |e: rusqlite::Error| match e.sqlite_error_code() {
            Some(ErrorCode::OperationInterrupted) if start.elapsed() >= timeout => {
                QueryError::Timeout(timeout)
            }
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
                QueryError::Unavailable(e.to_string())
            }
            _ => QueryError::Failed(e.to_string()),
        };
        // NB: a bound on any string or blob: `zeroblob(1e9)` fails in SQLite rather than
        // in this process's memory. Larger than a result, so that a long value a query
        // only filters on does not fail it.
        let length = i32::try_from(c.max_result_bytes.max(MAX_VALUE_BYTES)).unwrap_or(i32::MAX);
        conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, length)
            .map_err(failed)?;
        limit_sqlite_heap(&conn).map_err(failed)?;
        // NB: read before the authorizer, which would deny reading the schema.
        let layout = Layout::needed(&conn, c).map_err(|e| match e {
            Ok(why) => QueryError::Refused(why),
            Err(e) => failed(e),
        })?;
        let seen = guard(
            &conn,
            &self.constraints,
            layout.as_ref(),
            Some(start + timeout),
        )
        .map_err(failed)?;
        conn.progress_handler(PROGRESS_OPS, Some(move || start.elapsed() >= timeout))
            .map_err(failed)?;
        // NB: the authorizer speaks while the statement is compiled: a denial fails it
        // here, with SQLite's "not authorized", which says less than what it saw.
        let why = |e: rusqlite::Error| {
            let mut seen = seen.lock().ok();
            if seen.as_ref().is_some_and(|s| s.timed_out) {
                return QueryError::Timeout(timeout);
            }
            match seen.as_mut().and_then(|r| r.refused.take()) {
                Some(m) => QueryError::Refused(m),
                None if start.elapsed() >= timeout => QueryError::Timeout(timeout),
                None => failed(e),
            }
        };
        let mut stmt = conn.prepare(sql).map_err(why)?;
        if c.read_only && !stmt.readonly() {
            return Err(QueryError::Refused(
                "the tool is read-only, and the statement would write".into(),
            ));
        }
        // NB: VACUUM and its kind compile without asking the authorizer anything.
        if !seen.lock().map(|s| s.statement).unwrap_or(false) {
            return Err(QueryError::Refused(
                "only queries and writes to rows may run".into(),
            ));
        }
        if let Some(layout) = &layout {
            program_check(&conn, sql, c, layout).map_err(|e| match e {
                Ok(refused) => QueryError::Refused(refused),
                Err(e) => why(e),
            })?;
        }
        read_rows(&mut stmt, (c.max_rows, c.max_result_bytes), (&why, &failed))
    }

    /// A connection to the database, read-only when the tool is.
    fn connect(&self) -> Result<Connection, QueryError> {
        let flags = if self.constraints.read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE
        } | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        Connection::open_with_flags(&self.path, flags).map_err(|e| {
            QueryError::Unavailable(format!(
                "cannot open the database {}: {e}",
                self.path.display()
            ))
        })
    }
}

/// The rows `stmt` gives, at most `max_rows` of them and `max_bytes` of values (then
/// `truncated`); `why` says why the statement failed, `failed` why a value did.
fn read_rows(
    stmt: &mut rusqlite::Statement<'_>,
    (max_rows, max_bytes): (usize, usize),
    (why, failed): (
        &dyn Fn(rusqlite::Error) -> QueryError,
        &dyn Fn(rusqlite::Error) -> QueryError,
    ),
) -> Result<Rows, QueryError> {
    let columns: Vec<String> = stmt.column_names().into_iter().map(str::to_owned).collect();
    let width = columns.len();
    let mut rows = stmt.query([]).map_err(why)?;
    let mut out = Rows {
        columns,
        rows: Vec::new(),
        truncated: false,
    };
    let mut bytes = 0usize;
    'rows: while let Some(row) = rows.next().map_err(why)? {
        if out.rows.len() == max_rows {
            out.truncated = true;
            break;
        }
        let mut values = Vec::with_capacity(width);
        for i in 0..width {
            let v = row.get_ref(i).map_err(failed)?;
            // NB: measured before it is converted: a large value is never copied.
            bytes += json_len(v) + 1;
            if bytes > max_bytes {
                out.truncated = true;
                break 'rows;
            }
            values.push(json(v));
        }
        out.rows.push(values);
    }
    Ok(out)
}

/// What the authorizer saw of a statement being compiled.
#[derive(Default)]
struct Seen {
    /// A SELECT, INSERT, UPDATE or DELETE: a statement that reads or writes rows.
    statement: bool,
    /// Why it denied, the first time.
    refused: Option<String>,
    /// It denied because the time limit had passed.
    timed_out: bool,
}

/// A b-tree of the database: the table it holds or indexes, and for an index, the denied
/// column it holds, if any.
struct Tree {
    table: String,
    index: Option<Option<String>>,
}

/// The b-trees of the database, by root page, and for each table with denied columns,
/// its columns in the order its rows store them (what `Column` counts).
struct Layout {
    roots: HashMap<i64, Tree>,
    stored: HashMap<String, Vec<String>>,
    /// The names of the database's tables and views (lowercase), its own included.
    names: std::collections::HashSet<String>,
}

/// Installs the tool's authorizer on `conn`: what it sees and why it denied.
fn guard(
    conn: &Connection,
    c: &Arc<Constraints>,
    layout: Option<&Layout>,
    deadline: Option<Instant>,
) -> rusqlite::Result<Arc<Mutex<Seen>>> {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let guard = Guard {
        c: c.clone(),
        seen: seen.clone(),
        names: layout.map(|l| l.names.clone()),
        deadline,
    };
    conn.authorizer(Some(move |ctx: AuthContext<'_>| guard.authorize(&ctx)))?;
    Ok(seen)
}

impl Layout {
    /// The layout, when the constraints name tables or columns (else nothing to check).
    fn needed(
        conn: &Connection,
        c: &Constraints,
    ) -> Result<Option<Layout>, Result<String, rusqlite::Error>> {
        if c.allow_tables.is_none() && c.deny_columns.is_empty() {
            return Ok(None);
        }
        Layout::read(conn, c).map(Some)
    }

    fn read(conn: &Connection, c: &Constraints) -> Result<Layout, Result<String, rusqlite::Error>> {
        let mut roots = HashMap::new();
        let mut stored = HashMap::new();
        // NB: the schema table itself, which no row of it lists.
        roots.insert(
            1,
            Tree {
                table: "sqlite_schema".into(),
                index: None,
            },
        );
        let mut names: std::collections::HashSet<String> = [
            "sqlite_schema",
            "sqlite_master",
            "sqlite_temp_schema",
            "sqlite_temp_master",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        let mut stmt = conn
            .prepare(
                "SELECT type, name, tbl_name, rootpage, coalesce(sql, '') FROM sqlite_schema \
                 WHERE type IN ('table', 'index', 'view')",
            )
            .map_err(Err)?;
        let mut listed: Vec<(String, String, String, i64)> = Vec::new();
        let mut index_sql: HashMap<String, String> = HashMap::new();
        let rows = stmt
            .query_map([], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .map_err(Err)?;
        for row in rows {
            let (kind, name, table, root, sql): (String, String, String, i64, String) =
                row.map_err(Err)?;
            if kind != "index" {
                names.insert(name.to_ascii_lowercase());
            }
            if kind == "index" {
                index_sql.insert(name.clone(), sql);
            }
            if root > 0 && kind != "view" {
                listed.push((kind, name, table, root));
            }
        }
        // Declared columns (cid order) and their storage order, per table with denied
        // columns.
        let mut declared: HashMap<String, Vec<String>> = HashMap::new();
        for (kind, _, table, _) in &listed {
            let key = table.to_ascii_lowercase();
            if kind != "table" || c.denied_column_of(table).is_none() || declared.contains_key(&key)
            {
                continue;
            }
            let without_rowid: bool = conn
                .query_row(
                    "SELECT wr FROM pragma_table_list WHERE name = ?1",
                    [table],
                    |r| r.get(0),
                )
                .map_err(Err)?;
            if without_rowid {
                return Err(Ok(format!(
                    "table \"{table}\" has denied columns and no rowid: its columns cannot be told apart, so it cannot be read"
                )));
            }
            let (names, order) = columns(conn, table).map_err(Err)?;
            declared.insert(key.clone(), names);
            stored.insert(key, order);
        }
        for (kind, name, table, root) in listed {
            let index = (kind == "index").then(|| {
                let columns = declared.get(&table.to_ascii_lowercase())?;
                let cids = pragma_cids(conn, &name).ok()?;
                let by_column = cids
                    .iter()
                    .filter_map(|&cid| columns.get(usize::try_from(cid).ok()?))
                    .find(|col| c.column_denied(&table, col));
                // NB: an index on an expression of a denied column (`-salary`), or one
                // whose WHERE names it, orders or picks rows by it as surely as an index
                // on the column: its text is searched for the column's name.
                let by_expression = || {
                    let sql = index_sql.get(&name)?;
                    identifiers(sql).find(|word| c.column_denied(&table, word))
                };
                by_column
                    .cloned()
                    .or_else(by_expression)
                    .map(|col| format!("index \"{name}\" holds \"{table}.{col}\""))
            });
            roots.insert(root, Tree { table, index });
        }
        Ok(Layout {
            roots,
            stored,
            names,
        })
    }

    fn stored_column(&self, table: &str, p2: i64) -> Option<&str> {
        let names = self.stored.get(&table.to_ascii_lowercase())?;
        names.get(usize::try_from(p2).ok()?).map(String::as_str)
    }
}

/// A table's columns in declared order (what an index's cids count), and in the order its
/// rows store them: generated VIRTUAL columns are not stored, and count last.
fn columns(conn: &Connection, table: &str) -> rusqlite::Result<(Vec<String>, Vec<String>)> {
    let quoted = format!("\"{}\"", table.replace('"', "\"\""));
    let mut stmt = conn.prepare(&format!("PRAGMA table_xinfo({quoted})"))?;
    let rows: Vec<(String, i64)> = stmt
        .query_map([], |r| Ok((r.get(1)?, r.get(6)?)))?
        .collect::<Result<_, _>>()?;
    let names: Vec<String> = rows.iter().map(|(n, _)| n.clone()).collect();
    let virtual_last = rows
        .iter()
        .filter(|(_, hidden)| *hidden != 2)
        .chain(rows.iter().filter(|(_, hidden)| *hidden == 2))
        .map(|(n, _)| n.clone())
        .collect();
    Ok((names, virtual_last))
}

/// The words of SQL text `sql` that may name a column, unquoted: a conservative reading
/// (a word in a string literal counts too).
fn identifiers(sql: &str) -> impl Iterator<Item = String> + '_ {
    sql.split(|ch: char| !(ch.is_alphanumeric() || ch == '_' || ch == '$'))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
}

/// The table column (cid) of each column of index `index`, in the index's order.
fn pragma_cids(conn: &Connection, index: &str) -> rusqlite::Result<Vec<i64>> {
    let quoted = format!("\"{}\"", index.replace('"', "\"\""));
    let mut stmt = conn.prepare(&format!("PRAGMA index_info({quoted})"))?;
    let cids = stmt.query_map([], |r| r.get::<_, i64>(1))?;
    cids.collect()
}

/// The guard that does not trust the authorizer to be told everything (a `USING` join
/// compares columns it never hears of, an index seek compares keys without reading them):
/// the compiled program itself (`EXPLAIN`). Each b-tree it opens must be an allowed
/// table's, and no index it opens may hold a denied column; no column it reads from a
/// table (rows it only rewrites aside) may be denied, and no row of a table with denied
/// columns is copied whole. Err(Ok(why)): refused; Err(Err): SQLite failed.
fn program_check(
    conn: &Connection,
    sql: &str,
    c: &Constraints,
    layout: &Layout,
) -> Result<(), Result<String, rusqlite::Error>> {
    let mut stmt = conn.prepare(&format!("EXPLAIN {sql}")).map_err(Err)?;
    let program: Vec<(String, i64, i64, i64)> = stmt
        .query_map([], |r| Ok((r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .map_err(Err)?
        .collect::<Result<_, _>>()
        .map_err(Err)?;
    // NB: every cursor first, then its uses: a loop's body may come before its open.
    let mut cursors: HashMap<i64, (&str, bool)> = HashMap::new();
    for (op, p1, p2, p3) in &program {
        let write = match op.as_str() {
            "OpenRead" | "ReopenIdx" => false,
            "OpenWrite" => true,
            _ => continue,
        };
        if *p3 != 0 {
            return Err(Ok("a query may use only the tool's database".into()));
        }
        let Some(tree) = layout.roots.get(p2) else {
            return Err(Ok(format!(
                "the statement opens b-tree {p2}, which is no table or index of the database"
            )));
        };
        // NB: AUTOINCREMENT keeps its counters in SQLite's own table.
        let internal = write && tree.table.eq_ignore_ascii_case("sqlite_sequence");
        if !internal && !c.table_allowed(&tree.table) {
            return Err(Ok(c.not_allowed(&tree.table)));
        }
        if let Some(Some(why)) = &tree.index {
            return Err(Ok(format!("{why}, which is in deny_columns")));
        }
        cursors.insert(*p1, (tree.table.as_str(), write || tree.index.is_some()));
    }
    for (op, p1, p2, _) in &program {
        let Some(&(table, skip)) = cursors.get(p1) else {
            continue;
        };
        match op.as_str() {
            "Column" if !skip => {
                if let Some(name) = layout.stored_column(table, *p2)
                    && c.column_denied(table, name)
                {
                    return Err(Ok(format!("column \"{table}.{name}\" is in deny_columns")));
                }
            }
            "RowData" | "RowCell" if c.denied_column_of(table).is_some() => {
                return Err(Ok(format!(
                    "rows of \"{table}\" may not be copied whole: it has a column in deny_columns"
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Bytes `v` takes as JSON (about: escapes are not counted).
fn json_len(v: ValueRef<'_>) -> usize {
    match v {
        ValueRef::Null => 4,
        ValueRef::Integer(_) | ValueRef::Real(_) => 24,
        ValueRef::Text(t) => t.len() + 2,
        ValueRef::Blob(b) => 2 * b.len() + 2,
    }
}

/// Distinct values kept per text column, at most; a column with more is sampled.
pub(crate) const MAX_VALUES: usize = 50;
/// Rows a column's values are sampled from (a bound on the work per column).
pub(crate) const VALUE_SAMPLE_ROWS: usize = 10_000;
/// Characters of a value kept for grounding, at most (longer ones are prose, not names).
pub(crate) const MAX_VALUE_CHARS: usize = 40;

impl Sqlite {
    /// The schema grounding sees: the tables and views the tool may query (`allow_tables`),
    /// their columns (denied ones left out) with types, primary keys and the comments
    /// of the CREATE TABLE text, foreign keys, and distinct short text values sampled from
    /// each text column. Reads the database, off the tool's guard but read-only.
    pub fn schema(&self) -> Result<crate::ground::Schema, DbError> {
        self.read_schema().map_err(DbError::Unavailable)
    }

    fn read_schema(&self) -> Result<crate::ground::Schema, String> {
        use crate::ground::Schema;
        let c = &*self.constraints;
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| format!("cannot open the database {}: {e}", self.path.display()))?;
        let err =
            |e: rusqlite::Error| format!("reading the schema of {}: {e}", self.path.display());
        let mut stmt = conn
            .prepare(
                "SELECT name, coalesce(sql, '') FROM sqlite_schema \
                 WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name",
            )
            .map_err(err)?;
        let listed: Vec<(String, String)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(err)?
            .collect::<Result<_, _>>()
            .map_err(err)?;
        drop(stmt);
        let mut schema = Schema::default();
        for (name, sql) in listed.into_iter().filter(|(n, _)| c.table_allowed(n)) {
            schema
                .tables
                .push(table(&conn, c, name, &sql).map_err(err)?);
        }
        primary_keys_named(&mut schema);
        // Values, sampled under the tool's own guards: what a query of the tool could not
        // read (a view over a denied column) is never shown, and that column is dropped.
        let layout = Layout::needed(&conn, c).map_err(|e| match e {
            Ok(why) => why,
            Err(e) => err(e),
        })?;
        let seen = guard(&conn, &self.constraints, layout.as_ref(), None).map_err(err)?;
        let started = Arc::new(Mutex::new(Instant::now()));
        let (clock, timeout) = (started.clone(), c.timeout);
        conn.progress_handler(
            PROGRESS_OPS,
            Some(move || clock.lock().map(|t| t.elapsed() >= timeout).unwrap_or(true)),
        )
        .map_err(err)?;
        for table in &mut schema.tables {
            let columns = std::mem::take(&mut table.columns);
            let sampler = (&conn, c, layout.as_ref(), &*seen, &*started);
            table.columns = readable_columns(sampler, &table.name, columns);
        }
        // NB: a view over a denied column cannot be read at all (SQLite checks its whole
        // definition): it is not shown.
        schema.tables.retain(|t| !t.columns.is_empty());
        Ok(schema)
    }
}

/// Table (or view) `name`, created by `sql`, as grounding sees it: its columns that are
/// not denied, with their types, keys and comments, and its foreign keys to tables the
/// tool may read.
fn table(
    conn: &Connection,
    c: &Constraints,
    name: String,
    sql: &str,
) -> rusqlite::Result<crate::ground::Table> {
    use crate::ground::{Column, ForeignKey, Table};
    let quoted = format!("\"{}\"", name.replace('"', "\"\""));
    let comments = column_comments(sql);
    let mut info = conn.prepare(&format!("PRAGMA table_info({quoted})"))?;
    let rows: Vec<(String, String, i64)> = info
        .query_map([], |r| Ok((r.get(1)?, r.get(2)?, r.get(5)?)))?
        .collect::<Result<_, _>>()?;
    let columns = rows
        .into_iter()
        .filter(|(col, _, _)| !c.column_denied(&name, col))
        .map(|(col, ty, pk)| Column {
            comment: comments.get(&col.to_lowercase()).cloned(),
            name: col,
            ty,
            primary_key: pk == 1,
            values: Vec::new(),
        })
        .collect();
    let mut fks = conn.prepare(&format!("PRAGMA foreign_key_list({quoted})"))?;
    let foreign_keys: Vec<ForeignKey> = fks
        .query_map([], |r| {
            Ok(ForeignKey {
                ref_table: r.get(2)?,
                column: r.get(3)?,
                ref_column: r.get::<_, Option<String>>(4)?.unwrap_or_default(),
            })
        })?
        .collect::<Result<_, _>>()?;
    Ok(Table {
        name,
        comment: None,
        columns,
        // NB: a join to a table the tool may not read is not shown.
        foreign_keys: foreign_keys
            .into_iter()
            .filter(|fk| c.table_allowed(&fk.ref_table))
            .collect(),
    })
}

/// Names the column of each foreign key that names none: the parent's primary key (its
/// rowid when it has none).
fn primary_keys_named(schema: &mut crate::ground::Schema) {
    let keys: HashMap<String, String> = schema
        .tables
        .iter()
        .filter_map(|t| {
            let pk = t.columns.iter().find(|c| c.primary_key)?;
            Some((t.name.to_ascii_lowercase(), pk.name.clone()))
        })
        .collect();
    for fk in schema.tables.iter_mut().flat_map(|t| &mut t.foreign_keys) {
        if fk.ref_column.is_empty() {
            fk.ref_column = keys
                .get(&fk.ref_table.to_ascii_lowercase())
                .cloned()
                .unwrap_or_else(|| "rowid".into());
        }
    }
}

/// What samples a schema's values: the connection, the tool's constraints and layout,
/// what its guard refused, and when the current column's read started (for the time
/// limit).
type Sampler<'a> = (
    &'a Connection,
    &'a Constraints,
    Option<&'a Layout>,
    &'a Mutex<Seen>,
    &'a Mutex<Instant>,
);

/// The `columns` of `table` that a query of the tool can read, each text column with its
/// sampled values. NB: every column is read once as a query of the tool would: one it
/// could not read is not shown (a column of a view over a denied one).
fn readable_columns(
    (conn, c, layout, seen, started): Sampler<'_>,
    table: &str,
    columns: Vec<crate::ground::Column>,
) -> Vec<crate::ground::Column> {
    let quoted = format!("\"{}\"", table.replace('"', "\"\""));
    let mut readable = Vec::with_capacity(columns.len());
    for mut column in columns {
        let textual = column.ty.is_empty()
            || ["CHAR", "CLOB", "TEXT"]
                .iter()
                .any(|k| column.ty.to_uppercase().contains(k));
        if let Ok(mut t) = started.lock() {
            *t = Instant::now();
        }
        let sql = if textual {
            sample_sql(&quoted, &column.name)
        } else {
            let col = format!("\"{}\"", column.name.replace('"', "\"\""));
            format!("SELECT {col} FROM {quoted} LIMIT 0")
        };
        let checked = layout.map_or(Ok(()), |l| {
            program_check(conn, &sql, c, l).map_err(|e| e.is_ok())
        });
        let sampled = match checked {
            Err(true) => None,
            _ => sample_values(conn, &sql),
        };
        let refused = seen.lock().ok().and_then(|mut s| s.refused.take());
        match (refused, checked, sampled) {
            (Some(_), _, _) | (_, Err(true), _) => continue,
            (None, _, Some(values)) => column.values = values,
            // NB: a broken view or a slow one: its values are left out.
            (None, _, None) => {}
        }
        readable.push(column);
    }
    readable
}

/// The query that samples column `col` of `table` (quoted): its distinct short text
/// values.
fn sample_sql(table: &str, col: &str) -> String {
    let col = format!("\"{}\"", col.replace('"', "\"\""));
    format!(
        "SELECT DISTINCT {col} FROM (SELECT {col} FROM {table} LIMIT {VALUE_SAMPLE_ROWS}) \
         WHERE typeof({col}) = 'text' AND length({col}) BETWEEN 1 AND {MAX_VALUE_CHARS} LIMIT {MAX_VALUES}"
    )
}

/// The values `sql` (a [`sample_sql`]) gives, words only: a value without a letter (a
/// date, a code) matches any number. None when it fails.
fn sample_values(conn: &Connection, sql: &str) -> Option<Vec<String>> {
    let mut stmt = conn.prepare(sql).ok()?;
    let values = stmt.query_map([], |r| r.get::<_, String>(0)).ok()?;
    let values: Vec<String> = values.collect::<rusqlite::Result<_>>().ok()?;
    Some(
        values
            .into_iter()
            .filter(|v| v.chars().any(char::is_alphabetic))
            .collect(),
    )
}

/// The `-- comment` after each column of a CREATE TABLE text, by the column's name
/// (lowercase): SQLite keeps the text as written.
fn column_comments(sql: &str) -> std::collections::HashMap<String, String> {
    let mut out = std::collections::HashMap::new();
    for line in sql.lines() {
        let Some((code, comment)) = line.split_once("--") else {
            continue;
        };
        let name: String = code
            .trim_start()
            .trim_start_matches(['"', '`', '['])
            .chars()
            .take_while(|ch| ch.is_alphanumeric() || *ch == '_')
            .collect();
        let comment = comment.trim();
        if !name.is_empty() && !comment.is_empty() {
            out.insert(name.to_lowercase(), comment.to_owned());
        }
    }
    out
}

/// A value as JSON: text as a string, a blob as its hexadecimal digits, a non-finite
/// float as null.
fn json(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::from(i),
        ValueRef::Real(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::String(b.iter().map(|x| format!("{x:02x}")).collect()),
    }
}

/// The authorizer's state: the constraints, and what it saw (for the error).
struct Guard {
    c: Arc<Constraints>,
    seen: Arc<Mutex<Seen>>,
    /// The database's tables and views, when the tool names tables: a name that is none
    /// of them is a CTE's.
    names: Option<std::collections::HashSet<String>>,
    /// NB: SQLite asks the authorizer about every use of every CTE while it prepares a
    /// statement, and calls neither the progress handler nor looks at an interrupt then:
    /// the authorizer is the one to stop a preparation that runs past the time limit.
    deadline: Option<Instant>,
}

impl Guard {
    fn authorize(&self, ctx: &AuthContext<'_>) -> Authorization {
        let verdict = self.judge(&ctx.action);
        let Ok(mut seen) = self.seen.lock() else {
            return Authorization::Deny;
        };
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            seen.timed_out = true;
            return Authorization::Deny;
        }
        if matches!(
            ctx.action,
            AuthAction::Select
                | AuthAction::Insert { .. }
                | AuthAction::Update { .. }
                | AuthAction::Delete { .. }
        ) {
            seen.statement = true;
        }
        match verdict {
            Ok(()) => Authorization::Allow,
            Err(why) => {
                seen.refused.get_or_insert(why);
                Authorization::Deny
            }
        }
    }

    fn judge(&self, action: &AuthAction<'_>) -> Result<(), String> {
        let c = &*self.c;
        let table = |t: &str| {
            if c.table_allowed(t) {
                Ok(())
            } else {
                Err(c.not_allowed(t))
            }
        };
        // NB: a schema change writes SQLite's own tables first.
        let written = |t: &str| {
            if t.starts_with("sqlite_") {
                Err(SCHEMA.to_owned())
            } else {
                table(t)
            }
        };
        match *action {
            AuthAction::Select | AuthAction::Recursive => Ok(()),
            // NB: `count(*)` over a CTE is a read of no column from a table of the CTE's
            // name; over a table, the compiled program's check sees the table opened.
            AuthAction::Read {
                table_name,
                column_name: "",
            } if self
                .names
                .as_ref()
                .is_some_and(|n| !n.contains(&table_name.to_ascii_lowercase())) =>
            {
                Ok(())
            }
            AuthAction::Read {
                table_name,
                column_name,
            } => {
                table(table_name)?;
                if c.column_denied(table_name, column_name) {
                    return Err(format!(
                        "column \"{table_name}.{column_name}\" is in deny_columns"
                    ));
                }
                Ok(())
            }
            AuthAction::Function { function_name } => {
                if !sqlite_function_allowed(function_name) {
                    let name = function_name.to_lowercase();
                    return Err(format!(
                        "function \"{name}\" is not allowed: a query may call only SQLite's own functions of values"
                    ));
                }
                Ok(())
            }
            AuthAction::Attach { .. } | AuthAction::Detach { .. } => {
                Err("a query may not attach other databases".into())
            }
            AuthAction::Pragma { pragma_name, .. } => {
                Err(format!("PRAGMA {pragma_name} is not allowed"))
            }
            _ if c.read_only => {
                Err("the tool is read-only: only a query (SELECT ...) may run".into())
            }
            // NB: an insert is not told which columns it sets.
            AuthAction::Insert { table_name } => {
                written(table_name)?;
                match c.denied_column_of(table_name) {
                    Some(col) => Err(format!(
                        "rows of \"{table_name}\" may not be inserted: its column \"{table_name}.{col}\" is in deny_columns"
                    )),
                    None => Ok(()),
                }
            }
            AuthAction::Delete { table_name } => written(table_name),
            AuthAction::Update {
                table_name,
                column_name,
            } => {
                written(table_name)?;
                if c.column_denied(table_name, column_name) {
                    return Err(format!(
                        "column \"{table_name}.{column_name}\" is in deny_columns"
                    ));
                }
                Ok(())
            }
            AuthAction::Transaction { .. } | AuthAction::Savepoint { .. } => Ok(()),
            _ => Err(SCHEMA.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};
    use std::time::Duration;

    fn db(dir: &Path) -> PathBuf {
        let path = dir.join("shop.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, staff_id INTEGER, total REAL);
             CREATE TABLE staff (id INTEGER PRIMARY KEY, name TEXT, salary INTEGER);
             CREATE TABLE salaries (staff_id INTEGER, amount INTEGER);
             CREATE VIEW pay AS SELECT name, salary FROM staff;
             INSERT INTO staff VALUES (1, 'Alice', 100), (2, 'Bob', 90);
             INSERT INTO orders VALUES (1, 1, 10.5), (2, 2, 20), (3, 1, 7);
             INSERT INTO salaries VALUES (1, 100);",
        )
        .unwrap();
        path
    }

    fn checksum(path: &Path) -> Vec<u8> {
        Sha256::digest(std::fs::read(path).unwrap()).to_vec()
    }

    /// Each query refused by the database's guard alone, with a message holding its text,
    /// and the file at `path` byte for byte as it was.
    fn refused_unchanged(sql: &Sqlite, path: &Path, cases: &[(&str, &str)]) {
        let before = checksum(path);
        for (q, why) in cases {
            match sql.execute(q) {
                Err(QueryError::Refused(m)) => assert!(m.contains(why), "{q}: {m}"),
                other => panic!("{q}: {other:?}"),
            }
            assert_eq!(checksum(path), before, "{q} changed the file");
        }
    }

    fn constraints() -> Constraints {
        Constraints {
            allow_tables: Some(vec!["orders".into(), "staff".into(), "pay".into()]),
            deny_columns: Constraints::deny(&["staff.salary".into()]).unwrap(),
            ..Constraints::default()
        }
    }

    /// The database's guard alone (the parser bypassed): what the parser refuses, the
    /// database refuses too, and the file is unchanged after each.
    #[test]
    fn the_database_refuses_on_its_own_what_the_constraints_forbid() {
        let dir = tempfile::tempdir().unwrap();
        let path = db(dir.path());
        let sql = Sqlite::open(&path, constraints()).unwrap();
        let rows = sql
            .execute("SELECT s.name, sum(o.total) FROM orders o JOIN staff s ON s.id = o.staff_id GROUP BY s.name ORDER BY 2 DESC")
            .unwrap();
        assert_eq!(rows.columns, ["name", "sum(o.total)"]);
        assert_eq!(rows.rows[0], [Value::from("Bob"), Value::from(20.0)]);
        assert!(!rows.truncated);
        let refused = [
            ("DELETE FROM orders", "read-only"),
            ("UPDATE orders SET total = 0", "read-only"),
            ("DROP TABLE orders", "read-only"),
            ("CREATE TABLE x (a)", "read-only"),
            ("INSERT INTO orders VALUES (9, 9, 9)", "read-only"),
            ("PRAGMA user_version = 7", "PRAGMA"),
            ("ATTACH DATABASE 'other.db' AS o", "attach"),
            (
                "SELECT * FROM salaries",
                "\"salaries\" is not in allow_tables",
            ),
            (
                "SELECT salary FROM staff",
                "\"staff.salary\" is in deny_columns",
            ),
            ("SELECT * FROM staff", "\"staff.salary\""),
            // A view over a denied column: the parser sees only `pay`; SQLite sees the
            // read of `staff.salary` through it.
            ("SELECT salary FROM pay", "\"staff.salary\""),
            ("SELECT load_extension('x')", "\"load_extension\""),
            // A USING join compares columns the authorizer is never told of; the
            // program check sees them read.
            (
                "WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < 200), \
                 v(salary) AS (SELECT i FROM k) SELECT s.name, v.salary FROM staff AS s JOIN v USING (salary)",
                "\"staff.salary\"",
            ),
            (
                "WITH v(salary) AS (SELECT 100) SELECT s.name FROM staff AS s NATURAL JOIN v",
                "\"staff.salary\"",
            ),
            (
                "WITH RECURSIVE salaries(x) AS (SELECT 1), k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < 200), \
                 a(amount) AS (SELECT i FROM k) SELECT o.id, a.amount FROM orders o JOIN main.salaries USING (staff_id) JOIN a USING (amount)",
                "\"salaries\" is not in allow_tables",
            ),
            ("VACUUM", "read-only"),
        ];
        refused_unchanged(&sql, &path, &refused);
    }

    #[test]
    fn rows_and_bytes_past_the_limits_are_cut_and_said_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = db(dir.path());
        let c = Constraints {
            max_rows: 2,
            ..constraints()
        };
        let rows = Sqlite::open(&path, c)
            .unwrap()
            .query("SELECT id FROM orders")
            .unwrap();
        assert_eq!(rows.rows.len(), 2);
        assert!(rows.truncated);
        let c = Constraints {
            max_result_bytes: 10,
            ..constraints()
        };
        let rows = Sqlite::open(&path, c)
            .unwrap()
            .query("SELECT id, total FROM orders")
            .unwrap();
        assert!(rows.rows.len() < 3 && rows.truncated, "{rows:?}");
        // A value larger than a whole result fails in SQLite, not in this process.
        let sql = Sqlite::open(&path, constraints()).unwrap();
        match sql.query("SELECT zeroblob(1000000000)") {
            Err(QueryError::Failed(m)) => assert!(m.contains("too big"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_slow_query_stops_at_the_time_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = db(dir.path());
        let c = Constraints {
            timeout: Duration::from_millis(200),
            ..Constraints::default()
        };
        let sql = Sqlite::open(&path, c).unwrap();
        let start = Instant::now();
        let endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n";
        assert_eq!(
            sql.query(endless),
            Err(QueryError::Timeout(Duration::from_millis(200)))
        );
        assert!(
            start.elapsed() < Duration::from_millis(1200),
            "{:?}",
            start.elapsed()
        );
    }

    /// What neither the parser nor the authorizer sees: an index seek on a denied column,
    /// generated columns shifting the stored positions, a row copied whole.
    #[test]
    fn the_compiled_program_is_checked_where_the_authorizer_is_not_told() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("people.db");
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT,
                     nick TEXT GENERATED ALWAYS AS (upper(name)) VIRTUAL, salary INTEGER);
                 CREATE INDEX people_salary ON people(salary);
                 CREATE TABLE copy (id INTEGER PRIMARY KEY, name TEXT, salary INTEGER);
                 INSERT INTO people (id, name, salary) VALUES (1, 'ann', 100), (2, 'bo', 90);",
            )
            .unwrap();
        let c = Constraints {
            read_only: false,
            deny_columns: Constraints::deny(&["people.salary".into()]).unwrap(),
            ..Constraints::default()
        };
        let sql = Sqlite::open(&path, c).unwrap();
        let rows = sql.execute("SELECT nick FROM people ORDER BY id").unwrap();
        assert_eq!(rows.rows, [[Value::from("ANN")], [Value::from("BO")]]);
        sql.execute("UPDATE people SET name = 'cy' WHERE id = 2")
            .unwrap();
        refused_unchanged(
            &sql,
            &path,
            &[
                (
                    "WITH v(salary) AS (SELECT 100) SELECT p.name FROM v JOIN people p USING (salary)",
                    "people.salary",
                ),
                ("INSERT INTO copy SELECT * FROM people", "people"),
            ],
        );
    }

    /// A query that takes long and much memory to prepare (each CTE read twice by the
    /// next: SQLite copies each use) stops at the time limit, or at SQLite's heap limit
    /// if it reaches that first (on a loaded machine the two race), before it holds much.
    #[test]
    fn a_query_slow_to_prepare_stops_at_the_time_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = db(dir.path());
        let c = Constraints {
            timeout: Duration::from_secs(1),
            ..Constraints::default()
        };
        let sql = Sqlite::open(&path, c).unwrap();
        let mut q = String::from("WITH c0(x) AS (SELECT 1)");
        for i in 1..=20 {
            q.push_str(&format!(
                ", c{i}(x) AS (SELECT a.x + b.x FROM c{} a, c{} b)",
                i - 1,
                i - 1
            ));
        }
        q.push_str(" SELECT count(*) FROM c20");
        let start = Instant::now();
        let stopped = sql.query(&q);
        assert!(
            matches!(
                &stopped,
                Err(QueryError::Timeout(t)) if *t == Duration::from_secs(1)
            ) || stopped == Err(QueryError::Failed("out of memory".into())),
            "{stopped:?}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{:?}",
            start.elapsed()
        );
        let limit: i64 = Connection::open_in_memory()
            .unwrap()
            .query_row("PRAGMA hard_heap_limit", [], |r| r.get(0))
            .unwrap();
        assert_eq!(limit, SQLITE_HEAP_LIMIT);
    }

    /// The database's guard alone: SQLite's own tables (`sqlite_stat4` holds samples of
    /// the indexed salaries) unless allow_tables names them, an index on an expression of
    /// a denied column, and a recursive CTE counted with `count(*)` is no table.
    #[test]
    fn internal_tables_and_expression_indexes_are_guarded_and_ctes_are_not_tables() {
        let dir = tempfile::tempdir().unwrap();
        let path = db(dir.path());
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "CREATE INDEX staff_salary ON staff(salary);
                 CREATE INDEX staff_less ON staff(-salary);
                 CREATE INDEX staff_rich ON staff(name) WHERE salary > 95;
                 ANALYZE;",
            )
            .unwrap();
        let open = Sqlite::open(
            &path,
            Constraints {
                deny_columns: Constraints::deny(&["staff.salary".into()]).unwrap(),
                ..Constraints::default()
            },
        )
        .unwrap();
        let listed = Sqlite::open(&path, constraints()).unwrap();
        let counted = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5) SELECT count(*) FROM c";
        for sql in [&open, &listed] {
            assert_eq!(sql.execute(counted).unwrap().rows, [[Value::from(5)]]);
            assert_eq!(sql.query(counted).unwrap().rows, [[Value::from(5)]]);
        }
        for sql in [&open, &listed] {
            refused_unchanged(
                sql,
                &path,
                &[
                    ("SELECT * FROM sqlite_stat4", "sqlite_stat4"),
                    ("SELECT * FROM sqlite_stat1", "sqlite_stat1"),
                    ("SELECT sql FROM sqlite_master", "sqlite_master"),
                    (
                        "SELECT name FROM staff INDEXED BY staff_less",
                        "staff.salary",
                    ),
                    (
                        "SELECT name FROM staff INDEXED BY staff_rich WHERE salary > 95",
                        "staff.salary",
                    ),
                ],
            );
        }
        let e = open.execute("SELECT * FROM sqlite_stat4").unwrap_err();
        assert!(e.to_string().contains("the database's own"), "{e}");
        let trusted = Sqlite::open(
            &path,
            Constraints {
                allow_tables: Some(vec!["sqlite_stat1".into()]),
                ..Constraints::default()
            },
        )
        .unwrap();
        assert!(trusted.query("SELECT tbl FROM sqlite_stat1").is_ok());
    }

    #[test]
    fn a_schema_is_read_again_only_when_it_changed() {
        let dir = tempfile::tempdir().unwrap();
        let path = db(dir.path());
        let cache = dir.path().join("cache");
        let sql = crate::Database::Sqlite(Sqlite::open(&path, constraints()).unwrap());
        let first = sql.cached_schema(&cache).unwrap();
        assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 1);
        // New data, same schema: the kept schema (its sampled values) stands.
        let conn = Connection::open(&path).unwrap();
        conn.execute("INSERT INTO staff VALUES (3, 'Cleo', 80)", [])
            .unwrap();
        assert_eq!(sql.cached_schema(&cache).unwrap(), first);
        // A new table: read again.
        conn.execute("CREATE TABLE extra (x TEXT)", []).unwrap();
        let again = sql.cached_schema(&cache).unwrap();
        let staff = again.tables.iter().find(|t| t.name == "staff").unwrap();
        assert_eq!(staff.columns[1].values, ["Alice", "Bob", "Cleo"]);
    }

    #[test]
    fn a_rowid_cannot_be_denied_apart_from_its_table() {
        let dir = tempfile::tempdir().unwrap();
        let path = db(dir.path());
        let c = Constraints {
            deny_columns: Constraints::deny(&["staff.id".into()]).unwrap(),
            ..Constraints::default()
        };
        let e = Sqlite::open(&path, c).unwrap_err();
        assert!(
            matches!(&e, DbError::Config(why) if why.contains("rowid")),
            "{e:?}"
        );
        let e = Sqlite::open(&dir.path().join("none.db"), Constraints::default()).unwrap_err();
        assert!(matches!(e, DbError::Unavailable(_)), "{e:?}");
    }

    #[test]
    fn the_schema_leaves_out_what_the_tool_may_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = db(dir.path());
        let schema = Sqlite::open(&path, constraints())
            .unwrap()
            .schema()
            .unwrap();
        // The view over the denied column is not shown: no query of the tool can read it.
        let names: Vec<&str> = schema.tables.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["orders", "staff"]);
        let staff = &schema.tables[1];
        let cols: Vec<&str> = staff.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(cols, ["id", "name"], "salary is denied");
        assert_eq!(staff.columns[1].values, ["Alice", "Bob"]);
        assert!(staff.columns[0].primary_key);
    }

    #[test]
    fn a_writable_tool_writes_rows_of_its_tables_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = db(dir.path());
        let c = Constraints {
            read_only: false,
            ..constraints()
        };
        let sql = Sqlite::open(&path, c).unwrap();
        sql.query("UPDATE orders SET total = 0 WHERE id = 3")
            .unwrap();
        refused_unchanged(
            &sql,
            &path,
            &[
                ("UPDATE staff SET salary = 0", "\"staff.salary\""),
                ("DELETE FROM salaries", "\"salaries\""),
                ("DROP TABLE orders", "schema"),
                (
                    "INSERT OR REPLACE INTO staff (id, name, salary) VALUES (1, 'Alice', 1000000)",
                    "may not be inserted",
                ),
                ("VACUUM", "only queries and writes to rows"),
            ],
        );
    }

    /// SQLite's heap limit holds (it needs SQLite's memory statistics, which the build
    /// keeps on): a row of sixty 60 MB blobs, each under the length limit, fails as out of
    /// memory instead of taking 3.6 GB.
    #[test]
    fn a_row_too_large_for_the_heap_limit_fails() {
        let dir = tempfile::tempdir().unwrap();
        let path = db(dir.path());
        let sql = Sqlite::open(&path, constraints()).unwrap();
        let blobs = vec!["zeroblob(60000000)"; 60].join(", ");
        match sql.query(&format!("SELECT {blobs}")) {
            Err(QueryError::Failed(m)) => assert!(m.contains("out of memory"), "{m}"),
            other => panic!("{:?}", other.map(|r| r.truncated)),
        }
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let peak_kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0);
        assert!(peak_kb < 2 << 20, "peak {peak_kb} kB");
    }
}
