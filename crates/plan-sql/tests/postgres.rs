//! The `sql` backend on a real PostgreSQL server (PLANRT_TEST_POSTGRES, which
//! scripts/test starts; without it these tests say they are skipped, unless
//! PLANRT_REQUIRE_POSTGRES is set). Every constraint through the parser and through the
//! server alone (a `READ ONLY` transaction, `statement_timeout`, and the grants of a role
//! that may not read `staff.salary`), the database unchanged after every refusal, rows as
//! typed JSON, a writable tool, and the schema grounding reads.

use std::sync::OnceLock;
use std::time::Duration;

use plan_sql::{Constraints, Database, QueryError};
use postgres::NoTls;
use serde_json::{Value, json};

/// The test database: the admin's URL (to change it) and a reader role's (to query it).
struct Pg {
    admin: String,
    reader: String,
}

const SETUP: &str = "
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, city text);
CREATE TABLE staff (id int PRIMARY KEY, name text NOT NULL, salary numeric(10, 2), store text);
COMMENT ON COLUMN staff.store IS 'the store they work in';
CREATE TABLE orders (id int PRIMARY KEY, customer_id int REFERENCES customers (id),
                     total numeric(10, 2), paid bool, placed date);
CREATE TABLE salaries (staff_id int, amount int);
CREATE TABLE notes (id serial PRIMARY KEY, text text);
INSERT INTO customers VALUES (1, 'Ada', 'Berlin'), (2, 'Grace', 'Milan'), (3, 'Linus', 'Berlin');
INSERT INTO staff VALUES (1, 'Elena', 4200, 'Navigli'), (2, 'Jonas', 3900, 'Mitte');
INSERT INTO orders VALUES (1, 1, 10.50, true, '2024-01-02'), (2, 1, 20, false, '2024-02-03'),
                          (3, 2, 7.25, true, '2024-03-04'), (4, 3, 99.99, true, NULL);
INSERT INTO salaries VALUES (1, 4200);
";

/// The test database, and the lock each test holds while it uses it (one changes what
/// another checksums).
fn pg() -> Option<(&'static Pg, std::sync::MutexGuard<'static, ()>)> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let lock = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    database().map(|pg| (pg, lock))
}

fn database() -> Option<&'static Pg> {
    static PG: OnceLock<Option<Pg>> = OnceLock::new();
    PG.get_or_init(|| {
        let Ok(url) = std::env::var("PLANRT_TEST_POSTGRES") else {
            let why =
                "SKIPPED: no PostgreSQL server (PLANRT_TEST_POSTGRES; scripts/test starts one)";
            assert!(
                std::env::var_os("PLANRT_REQUIRE_POSTGRES").is_none(),
                "{why}"
            );
            eprintln!("{why}");
            return None;
        };
        let (db, role) = ("planrt_sql_test", "planrt_sql_reader");
        let mut admin = postgres::Client::connect(&url, NoTls).expect("connect to PostgreSQL");
        // NB: one at a time: several in one string run as one transaction, which
        // DROP DATABASE refuses.
        for sql in [
            format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"),
            format!("DROP ROLE IF EXISTS {role}"),
            format!("CREATE DATABASE {db}"),
            format!("CREATE ROLE {role} LOGIN"),
        ] {
            admin.batch_execute(&sql).unwrap();
        }
        let (base, _) = url.rsplit_once('/').unwrap();
        let admin_url = format!("{base}/{db}");
        let mut client = postgres::Client::connect(&admin_url, NoTls).unwrap();
        client.batch_execute(SETUP).unwrap();
        client
            .batch_execute(&format!(
                "GRANT SELECT ON customers, orders TO {role}; \
                 GRANT SELECT (id, name, store) ON staff TO {role}; \
                 GRANT SELECT, INSERT ON notes TO {role}; \
                 GRANT USAGE ON SEQUENCE notes_id_seq TO {role}"
            ))
            .unwrap();
        // NB: the same server as the admin, as the reader (trust authentication).
        let reader = admin_url.replacen("://planrt@", &format!("://{role}@"), 1);
        assert_ne!(reader, admin_url, "{url} names no user `planrt`");
        Some(Pg {
            admin: admin_url,
            reader,
        })
    })
    .as_ref()
}

fn constraints() -> Constraints {
    Constraints {
        allow_tables: Some(vec![
            "orders".into(),
            "customers".into(),
            "staff".into(),
            "notes".into(),
        ]),
        deny_columns: Constraints::deny(&["staff.salary".into()]).unwrap(),
        max_rows: 3,
        timeout: Duration::from_secs(1),
        ..Constraints::default()
    }
}

/// A checksum of every table's rows (the admin reads them).
fn checksum(pg: &Pg) -> String {
    let mut client = postgres::Client::connect(&pg.admin, NoTls).unwrap();
    let mut sum = String::new();
    for t in ["customers", "staff", "orders", "salaries", "notes"] {
        let row = client
            .query_one(
                &format!(
                    "SELECT coalesce(md5(string_agg(t::text, ',' ORDER BY t::text)), '') FROM {t} t"
                ),
                &[],
            )
            .unwrap();
        sum.push_str(row.get::<_, &str>(0));
    }
    sum
}

fn refused(r: Result<plan_sql::Rows, QueryError>) -> String {
    match r {
        Err(QueryError::Refused(why)) => why,
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn every_constraint_through_the_parser_and_through_the_server() {
    let Some((pg, _lock)) = pg() else { return };
    let db = Database::open(&pg.reader, constraints()).unwrap();
    let Database::Postgres(server) = &db else {
        panic!("a postgres:// URL is PostgreSQL")
    };
    let before = checksum(pg);

    let rows = db
        .query(
            "SELECT c.name, sum(o.total) AS spent, count(*) AS orders FROM orders o \
             JOIN customers c ON c.id = o.customer_id GROUP BY c.name ORDER BY spent DESC",
        )
        .unwrap();
    assert_eq!(rows.columns, ["name", "spent", "orders"]);
    assert_eq!(
        json!(rows.rows),
        json!([["Linus", 99.99, 1], ["Ada", 30.50, 2], ["Grace", 7.25, 1]])
    );
    assert!(!rows.truncated);

    // The parser refuses, naming why.
    for (sql, why) in [
        (
            "SELECT * FROM salaries",
            "table \"salaries\" is not in allow_tables",
        ),
        ("SELECT salary FROM staff", "staff.salary"),
        ("SELECT * FROM staff", "staff.salary"),
        ("INSERT INTO notes (text) VALUES ('x')", "read-only"),
        ("DELETE FROM orders", "read-only"),
        ("SELECT pg_read_file('/etc/passwd')", "pg_read_file"),
        ("SELECT 1; SELECT 2", "one statement at a time"),
        ("SET statement_timeout = 0", "read-only"),
        ("COPY staff TO STDOUT", "read-only"),
        ("SELECT * FROM orders FOR UPDATE", "lock rows"),
    ] {
        let got = refused(db.query(sql));
        assert!(got.contains(why), "{sql}: {got}");
    }

    // The server refuses what the parser was never asked about: its role's grants and the
    // read-only transaction stand alone.
    for (sql, why) in [
        ("SELECT salary FROM staff", "permission denied"),
        ("SELECT * FROM salaries", "permission denied"),
        ("INSERT INTO notes (text) VALUES ('x')", "read-only"),
        ("UPDATE orders SET paid = true", "read-only"),
        ("CREATE TABLE x (a int)", "read-only"),
    ] {
        let got = refused(server.execute(sql));
        assert!(got.contains(why), "{sql}: {got}");
    }
    assert_eq!(checksum(pg), before, "a refused query changed the database");

    // A slow query stops at the time limit (1 s): the error says so; without the limit
    // it would never end.
    let slow = db.query(
        "WITH RECURSIVE r (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r",
    );
    assert_eq!(slow, Err(QueryError::Timeout(Duration::from_secs(1))));
    let slow = server.execute("SELECT pg_sleep(5)");
    assert_eq!(slow, Err(QueryError::Timeout(Duration::from_secs(1))));

    // Rows and bytes over the limits are left out, and said to be.
    let rows = db.query("SELECT id FROM orders ORDER BY id").unwrap();
    assert_eq!(
        (json!(rows.rows), rows.truncated),
        (json!([[1], [2], [3]]), true)
    );
    let small = Database::open(
        &pg.reader,
        Constraints {
            max_result_bytes: 40,
            ..constraints()
        },
    )
    .unwrap();
    let rows = small
        .query("SELECT name, city FROM customers ORDER BY id")
        .unwrap();
    assert!(rows.truncated && rows.rows.len() < 3, "{rows:?}");

    // A failed query says what PostgreSQL said.
    match db.query("SELECT nope FROM orders") {
        Err(QueryError::Failed(m)) => assert!(m.contains("column \"nope\" does not exist"), "{m}"),
        other => panic!("{other:?}"),
    }
}

/// A value far larger than a result is measured by the server and never sent: the
/// process does not grow by its size (with the rows cut only after they arrive, it
/// grows by 590 MB).
#[test]
fn a_huge_value_is_never_read_into_the_process() {
    let Some((pg, _lock)) = pg() else { return };
    let c = Constraints {
        timeout: Duration::from_secs(60),
        ..constraints()
    };
    let db = Database::open(&pg.reader, c).unwrap();
    let before = peak_rss_kb();
    let rows = db
        .query("SELECT 1 AS small, repeat('x', 300000000) AS huge")
        .unwrap();
    let grew = peak_rss_kb() - before;
    assert!(grew < 100 << 10, "the process grew by {grew} kB");
    assert!(rows.truncated && rows.rows.is_empty(), "{:?}", rows.columns);
    // A row that fits is still read whole.
    let rows = db.query("SELECT repeat('x', 1000) AS s").unwrap();
    assert_eq!(rows.rows[0][0].as_str().map(str::len), Some(1000));
}

/// This process's peak resident memory (VmHWM), in kB.
fn peak_rss_kb() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn rows_are_typed_json_in_column_order() {
    let Some((pg, _lock)) = pg() else { return };
    let db = Database::open(&pg.reader, constraints()).unwrap();
    let rows = db
        .query(
            "SELECT 1 AS i, 2.5::numeric AS n, true AS b, NULL AS z, 'x' AS s, \
             DATE '2024-01-02' AS d, '{\"a\": [1]}'::jsonb AS j, 7 AS i",
        )
        .unwrap();
    assert_eq!(rows.columns, ["i", "n", "b", "z", "s", "d", "j", "i"]);
    assert_eq!(
        json!(rows.rows),
        json!([[1, 2.5, true, null, "x", "2024-01-02", {"a": [1]}, 7]])
    );
}

#[test]
fn a_writable_tool_writes_its_tables_and_commits() {
    let Some((pg, _lock)) = pg() else { return };
    let db = Database::open(
        &pg.reader,
        Constraints {
            read_only: false,
            allow_tables: Some(vec!["notes".into()]),
            ..constraints()
        },
    )
    .unwrap();
    let rows = db
        .query("INSERT INTO notes (text) VALUES ('first')")
        .unwrap();
    assert_eq!(
        json!(rows),
        json!({"columns": ["rows_affected"], "rows": [[1]], "truncated": false})
    );
    let rows = db
        .query("INSERT INTO notes (text) VALUES ('second') RETURNING text")
        .unwrap();
    assert_eq!(json!(rows.rows), json!([["second"]]));
    let rows = db
        .query("SELECT text FROM notes WHERE text IN ('first', 'second') ORDER BY id")
        .unwrap();
    assert_eq!(json!(rows.rows), json!([["first"], ["second"]]));
    for sql in ["DROP TABLE notes", "DELETE FROM orders", "TRUNCATE notes"] {
        refused(db.query(sql));
    }
}

#[test]
fn grounding_reads_what_the_tool_may_query() {
    let Some((pg, _lock)) = pg() else { return };
    let db = Database::open(&pg.reader, constraints()).unwrap();
    let schema = db.schema().unwrap();
    let names: Vec<&str> = schema.tables.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["customers", "notes", "orders", "staff"]);
    let table = |n: &str| schema.tables.iter().find(|t| t.name == n).unwrap();
    let staff: Vec<&str> = table("staff")
        .columns
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(staff, ["id", "name", "store"], "salary is denied");
    let store = &table("staff").columns[2];
    assert_eq!(store.comment.as_deref(), Some("the store they work in"));
    assert_eq!(store.values, ["Mitte", "Navigli"]);
    assert!(table("customers").columns[0].primary_key);
    assert_eq!(table("customers").columns[2].values, ["Berlin", "Milan"]);
    assert_eq!(table("orders").columns[2].ty, "numeric(10,2)");
    assert_eq!(
        json!(table("orders").foreign_keys),
        json!([{"column": "customer_id", "ref_table": "customers", "ref_column": "id"}])
    );
    // The version moves when the schema does, not when data does.
    let v = db.schema_version().unwrap();
    let mut admin = postgres::Client::connect(&pg.admin, NoTls).unwrap();
    admin
        .batch_execute("INSERT INTO customers VALUES (9, 'Ken', 'Oslo')")
        .unwrap();
    assert_eq!(db.schema_version().unwrap(), v);
    admin
        .batch_execute("ALTER TABLE customers ADD COLUMN email text; GRANT SELECT ON customers TO planrt_sql_reader")
        .unwrap();
    assert_ne!(db.schema_version().unwrap(), v);
    let _: Value = json!(db.schema().unwrap());
}
