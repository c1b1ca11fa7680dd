//! The second guard, SQLite's own: each query gets a connection opened read-only (for a
//! read-only tool), with an authorizer that SQLite asks about every action of the
//! statement it compiles (each table and column read, each function, each write, pragma
//! or attach) and that denies what the constraints refuse, and a progress handler that
//! stops the query at the time limit. A query the parser let through by mistake fails
//! here, and the file is never written by a read-only tool.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde_json::Value;

use crate::check::DENIED_FUNCTIONS;
use crate::{Constraints, QueryError, Rows};

const SCHEMA: &str = "only queries and writes to rows of allowed tables may run: no schema changes";

/// SQLite instructions between two looks at the clock.
const PROGRESS_OPS: i32 = 10_000;

/// A SQLite database a tool queries under its constraints.
#[derive(Clone, Debug)]
pub struct Sqlite {
    path: PathBuf,
    constraints: Arc<Constraints>,
}

impl Sqlite {
    /// The database at `path` (which must exist: a tool never creates one), queried under
    /// `constraints`.
    pub fn open(path: &Path, constraints: Constraints) -> Result<Sqlite, String> {
        if !path.is_file() {
            return Err(format!("no SQLite database at {}", path.display()));
        }
        Ok(Sqlite {
            path: path.to_owned(),
            constraints: Arc::new(constraints),
        })
    }

    pub fn constraints(&self) -> &Constraints {
        &self.constraints
    }

    /// Runs `sql` if both guards let it: the parser's check first, then the database's.
    /// Blocking: call it off an async runtime's threads.
    pub fn query(&self, sql: &str) -> Result<Rows, QueryError> {
        crate::check(sql, &self.constraints).map_err(QueryError::Refused)?;
        self.execute(sql)
    }

    /// Runs `sql` with the database's guard alone (the parser's check is [`crate::check`]).
    pub fn execute(&self, sql: &str) -> Result<Rows, QueryError> {
        let c = &*self.constraints;
        let flags = if c.read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE
        } | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&self.path, flags).map_err(|e| {
            QueryError::Failed(format!(
                "cannot open the database {}: {e}",
                self.path.display()
            ))
        })?;
        let refused: Arc<Mutex<Option<String>>> = Arc::default();
        let guard = Guard {
            c: self.constraints.clone(),
            refused: refused.clone(),
        };
        let failed = |e: rusqlite::Error| QueryError::Failed(e.to_string());
        conn.authorizer(Some(move |ctx: AuthContext<'_>| guard.authorize(&ctx)))
            .map_err(failed)?;
        let start = Instant::now();
        let timeout = c.timeout;
        conn.progress_handler(PROGRESS_OPS, Some(move || start.elapsed() >= timeout))
            .map_err(failed)?;
        // NB: the authorizer speaks while the statement is compiled: a denial fails it
        // here, with SQLite's "not authorized", which says less than what it saw.
        let why = |e: rusqlite::Error| match refused.lock().ok().and_then(|mut r| r.take()) {
            Some(m) => QueryError::Refused(m),
            None if start.elapsed() >= timeout => QueryError::Timeout(timeout),
            None => failed(e),
        };
        let mut stmt = conn.prepare(sql).map_err(why)?;
        if c.read_only && !stmt.readonly() {
            return Err(QueryError::Refused(
                "the tool is read-only, and the statement would write".into(),
            ));
        }
        let columns: Vec<String> = stmt.column_names().into_iter().map(str::to_owned).collect();
        let width = columns.len();
        let mut rows = stmt.query([]).map_err(why)?;
        let mut out = Rows {
            columns,
            rows: Vec::new(),
            truncated: false,
        };
        let mut bytes = 0usize;
        while let Some(row) = rows.next().map_err(why)? {
            if out.rows.len() == c.max_rows {
                out.truncated = true;
                break;
            }
            let mut values = Vec::with_capacity(width);
            for i in 0..width {
                let v = row.get_ref(i).map_err(failed)?;
                values.push(json(v));
            }
            bytes += Value::Array(values.clone()).to_string().len() + 1;
            if bytes > c.max_result_bytes {
                out.truncated = true;
                break;
            }
            out.rows.push(values);
        }
        Ok(out)
    }
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

/// The authorizer's state: the constraints, and why it denied (for the error).
struct Guard {
    c: Arc<Constraints>,
    refused: Arc<Mutex<Option<String>>>,
}

impl Guard {
    fn authorize(&self, ctx: &AuthContext<'_>) -> Authorization {
        match self.judge(&ctx.action) {
            Ok(()) => Authorization::Allow,
            Err(why) => {
                if let Ok(mut r) = self.refused.lock() {
                    r.get_or_insert(why);
                }
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
                let name = function_name.to_lowercase();
                if DENIED_FUNCTIONS.contains(&name.as_str()) {
                    return Err(format!(
                        "function \"{name}\" reaches outside the database and is not allowed"
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
            AuthAction::Insert { table_name } | AuthAction::Delete { table_name } => {
                written(table_name)
            }
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
        let before = checksum(&path);
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
        ];
        for (q, why) in refused {
            match sql.execute(q) {
                Err(QueryError::Refused(m)) => assert!(m.contains(why), "{q}: {m}"),
                other => panic!("{q}: {other:?}"),
            }
            assert_eq!(checksum(&path), before, "{q} changed the file");
        }
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
        let before = checksum(&path);
        for (q, why) in [
            ("UPDATE staff SET salary = 0", "\"staff.salary\""),
            ("DELETE FROM salaries", "\"salaries\""),
            ("DROP TABLE orders", "schema"),
        ] {
            match sql.execute(q) {
                Err(QueryError::Refused(m)) => assert!(m.contains(why), "{q}: {m}"),
                other => panic!("{q}: {other:?}"),
            }
            assert_eq!(checksum(&path), before, "{q} changed the file");
        }
    }
}
