//! The corpus of attempts to get past the `sql` tool's guards (`tests/bypass.txt`), each
//! run through both guards against SQLite and against a real PostgreSQL server
//! (PLANRT_TEST_POSTGRES; scripts/postgres starts one): each must be refused with a
//! message holding the text its case gives, and leave the database as it was. On
//! PostgreSQL the tool connects as a role that may read more than the tool allows (every
//! table, `staff.salary`, server files), so that the parser alone stands between the query
//! and what the tool's constraints refuse.

use std::path::{Path, PathBuf};

use plan_sql::{Constraints, Database, QueryError};
use postgres::NoTls;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// One case of the corpus.
struct Case {
    line: usize,
    sqlite: bool,
    postgres: bool,
    /// allow_tables set (else every table but the database's own).
    listed: bool,
    why: String,
    sql: String,
}

/// `{{N*TEXT}}` in `sql` as TEXT N times.
fn expand(sql: &str) -> String {
    let mut out = String::new();
    let mut rest = sql;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("}}").expect("an unclosed {{") + start;
        let (n, text) = rest[start + 2..end].split_once('*').expect("{{N*TEXT}}");
        out.push_str(&text.repeat(n.parse().expect("a count")));
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

fn corpus() -> Vec<Case> {
    let text = include_str!("bypass.txt");
    let mut cases: Vec<Case> = Vec::new();
    let mut open = false;
    for (i, line) in text.lines().enumerate() {
        if let Some(header) = line.strip_prefix("## ") {
            let (head, why) = header
                .split_once(" :: ")
                .expect("## TARGETS TABLES :: TEXT");
            let (targets, tables) = head.split_once(' ').expect("## TARGETS TABLES");
            assert!(
                ["sqlite", "postgres", "both"].contains(&targets),
                "line {}",
                i + 1
            );
            assert!(["listed", "open"].contains(&tables), "line {}", i + 1);
            cases.push(Case {
                line: i + 1,
                sqlite: targets != "postgres",
                postgres: targets != "sqlite",
                listed: tables == "listed",
                why: why.to_owned(),
                sql: String::new(),
            });
            open = true;
        } else if line.trim().is_empty() {
            open = false;
        } else if open && !line.starts_with('#') {
            let case = cases.last_mut().unwrap();
            if !case.sql.is_empty() {
                case.sql.push('\n');
            }
            case.sql.push_str(line);
        }
    }
    for case in &mut cases {
        assert!(!case.sql.is_empty(), "line {}: no query", case.line);
        case.sql = expand(&case.sql);
    }
    cases
}

fn constraints(listed: bool) -> Constraints {
    Constraints {
        allow_tables: listed.then(|| {
            ["stores", "staff", "orders", "notes"]
                .map(String::from)
                .to_vec()
        }),
        deny_columns: Constraints::deny(&["staff.salary".into()]).unwrap(),
        ..Constraints::default()
    }
}

/// Queries any tool of the corpus runs: what the guards must not refuse.
const ALLOWED: &[&str] = &[
    "SELECT count(*) AS t FROM stores",
    "SELECT s.name, upper(s.name), length(s.name) FROM staff s ORDER BY s.name",
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5) SELECT count(*) FROM c",
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5) SELECT sum(x) FROM c",
    "WITH stores AS (SELECT 1 AS id) SELECT count(*) FROM stores",
    "SELECT o.id, s.name FROM orders o JOIN staff s ON s.id = o.staff_id ORDER BY o.id",
];

fn sqlite_db(dir: &Path) -> PathBuf {
    let path = dir.join("shop.db");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "CREATE TABLE stores (id INTEGER PRIMARY KEY, name TEXT, city TEXT);
             CREATE TABLE staff (id INTEGER PRIMARY KEY, name TEXT, salary INTEGER, store INTEGER);
             CREATE INDEX staff_salary ON staff(salary);
             CREATE INDEX staff_less ON staff(-salary);
             CREATE TABLE orders (id INTEGER PRIMARY KEY, staff_id INTEGER, total REAL);
             CREATE TABLE salaries (staff_id INTEGER, amount INTEGER);
             CREATE TABLE notes (id INTEGER PRIMARY KEY AUTOINCREMENT, text TEXT);
             CREATE VIEW pay AS SELECT name, salary FROM staff;
             INSERT INTO stores VALUES (1, 'Navigli', 'Milan'), (2, 'Mitte', 'Berlin');
             INSERT INTO staff VALUES (1, 'Elena', 4200, 1), (2, 'Jonas', 3900, 2);
             INSERT INTO orders VALUES (1, 1, 10.5), (2, 2, 20);
             INSERT INTO salaries VALUES (1, 4200);
             INSERT INTO notes (text) VALUES ('first');
             ANALYZE;",
        )
        .unwrap();
    path
}

fn checksum(path: &Path) -> Vec<u8> {
    Sha256::digest(std::fs::read(path).unwrap()).to_vec()
}

/// Runs `case` on `db`; Err says how it was not refused as its case says.
fn refused(db: &Database, case: &Case) -> Result<(), String> {
    match db.query(&case.sql) {
        Err(QueryError::Refused(m)) if m.contains(&case.why) => Ok(()),
        other => Err(format!(
            "line {}: {}\n  wanted a refusal saying {:?}, got {other:?}",
            case.line,
            case.sql.chars().take(200).collect::<String>(),
            case.why
        )),
    }
}

#[test]
fn every_bypass_of_the_corpus_is_refused_by_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = sqlite_db(dir.path());
    let url = format!("sqlite:{}", path.display());
    let dbs = [true, false].map(|listed| Database::open(&url, constraints(listed)).unwrap());
    for sql in ALLOWED {
        for db in &dbs {
            db.query(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    }
    let before = checksum(&path);
    let mut failures = Vec::new();
    for case in corpus().iter().filter(|c| c.sqlite) {
        let db = &dbs[usize::from(!case.listed)];
        if let Err(e) = refused(db, case) {
            failures.push(e);
        }
        assert_eq!(
            checksum(&path),
            before,
            "line {} changed the file",
            case.line
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

const PG_SETUP: &str = "
CREATE TABLE stores (id int PRIMARY KEY, name text, city text);
CREATE TABLE staff (id int PRIMARY KEY, name text, salary int, store int);
CREATE INDEX staff_salary ON staff (salary);
CREATE TABLE orders (id int PRIMARY KEY, staff_id int, total numeric(10, 2));
CREATE TABLE salaries (staff_id int, amount int);
CREATE TABLE notes (id serial PRIMARY KEY, text text);
CREATE SCHEMA hidden;
CREATE TABLE hidden.orders (id int);
CREATE VIEW pay AS SELECT name, salary FROM staff;
INSERT INTO stores VALUES (1, 'Navigli', 'Milan'), (2, 'Mitte', 'Berlin');
INSERT INTO staff VALUES (1, 'Elena', 4200, 1), (2, 'Jonas', 3900, 2);
INSERT INTO orders VALUES (1, 1, 10.5), (2, 2, 20);
INSERT INTO salaries VALUES (1, 4200);
INSERT INTO notes (text) VALUES ('first');
ANALYZE;
";

/// Every table's rows, the sequence's state and the large objects, as the admin reads
/// them.
fn pg_checksum(admin: &str) -> String {
    let mut client = postgres::Client::connect(admin, NoTls).unwrap();
    let mut sum = String::new();
    for t in [
        "stores",
        "staff",
        "orders",
        "salaries",
        "notes",
        "hidden.orders",
    ] {
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
    let row = client
        .query_one(
            "SELECT (SELECT last_value::text || is_called::text FROM notes_id_seq) || \
             (SELECT count(*)::text FROM pg_largeobject_metadata)",
            &[],
        )
        .unwrap();
    sum.push_str(row.get::<_, &str>(0));
    sum
}

#[test]
fn every_bypass_of_the_corpus_is_refused_by_postgresql() {
    let Ok(url) = std::env::var("PLANRT_TEST_POSTGRES") else {
        let why = "SKIPPED: no PostgreSQL server (PLANRT_TEST_POSTGRES; scripts/test starts one)";
        assert!(
            std::env::var_os("PLANRT_REQUIRE_POSTGRES").is_none(),
            "{why}"
        );
        eprintln!("{why}");
        return;
    };
    let (db, role) = ("planrt_sql_bypass", "planrt_sql_wide");
    let mut admin = postgres::Client::connect(&url, NoTls).expect("connect to PostgreSQL");
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
    client.batch_execute(PG_SETUP).unwrap();
    // NB: more than any tool of the corpus may read: the parser is its only guard.
    client
        .batch_execute(&format!(
            "GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}; \
             GRANT USAGE ON SCHEMA hidden TO {role}; \
             GRANT SELECT ON ALL TABLES IN SCHEMA hidden TO {role}; \
             GRANT ALL ON SEQUENCE notes_id_seq TO {role}; \
             GRANT pg_read_server_files TO {role}; \
             GRANT EXECUTE ON FUNCTION pg_read_file(text) TO {role}"
        ))
        .unwrap();
    let reader = admin_url.replacen("://planrt@", &format!("://{role}@"), 1);
    assert_ne!(reader, admin_url, "{url} names no user `planrt`");
    // The role reads what the tools may not: only the parser refuses these.
    let wide = Database::open(&reader, Constraints::default()).unwrap();
    let Database::Postgres(server) = &wide else {
        panic!("a postgres:// URL is PostgreSQL")
    };
    let rows = server
        .execute("SELECT salary FROM staff ORDER BY id")
        .unwrap();
    assert_eq!(json!(rows.rows), json!([[4200], [3900]]));
    assert!(
        server
            .execute("SELECT pg_read_file('/etc/hostname')")
            .is_ok()
    );

    let dbs = [true, false].map(|listed| Database::open(&reader, constraints(listed)).unwrap());
    for sql in ALLOWED {
        for db in &dbs {
            db.query(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    }
    let rows = dbs[0].query(ALLOWED[0]).unwrap();
    assert_eq!(
        (rows.columns, rows.rows),
        (vec!["t".to_owned()], vec![vec![Value::from(2)]])
    );

    let before = pg_checksum(&admin_url);
    let mut failures = Vec::new();
    for case in corpus().iter().filter(|c| c.postgres) {
        let db = &dbs[usize::from(!case.listed)];
        if let Err(e) = refused(db, case) {
            failures.push(e);
        }
    }
    assert_eq!(
        pg_checksum(&admin_url),
        before,
        "a refused query changed the database"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
