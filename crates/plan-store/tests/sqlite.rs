//! The SQLite store on its own: what it refuses to open, its WAL, its migrations, damage
//! (what every backend does is in `conformance.rs`).

use plan_store::{
    Durability, OwnedNewRun, Owner, RunStatus, RunStore, SqliteStore, StoreErrorKind,
};
use serde_json::{Map, json};

fn new_run(id: &str) -> OwnedNewRun {
    OwnedNewRun {
        id: id.to_owned(),
        plan: "plan.json".to_owned(),
        source: Some("[]".to_owned()),
        pbc: vec![1, 2, 3],
        presets: Map::new(),
        limits: plan_vm::Limits::default(),
        parent: None,
    }
}

#[test]
fn refuses_files_that_are_not_planvm_stores_and_newer_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE notes (x TEXT); INSERT INTO notes VALUES ('keep me');")
        .unwrap();
    let e = SqliteStore::open(&other, Durability::Normal).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::NotAStore);
    assert!(e.message.contains("another program"), "{}", e.message);
    let kept: String = rusqlite::Connection::open(&other)
        .unwrap()
        .query_row("SELECT x FROM notes", [], |r| r.get(0))
        .unwrap();
    assert_eq!(kept, "keep me");

    let newer = dir.path().join("newer.db");
    drop(SqliteStore::open(&newer, Durability::Normal).unwrap());
    rusqlite::Connection::open(&newer)
        .unwrap()
        .pragma_update(None, "user_version", 99)
        .unwrap();
    let e = SqliteStore::open(&newer, Durability::Full).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::NotAStore);
    assert!(e.message.contains("newer"), "{}", e.message);

    let e = SqliteStore::open(dir.path(), Durability::Normal).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::NotAStore);
    assert!(e.message.contains("a directory"), "{}", e.message);

    // Opening a store again is fine (the schema is applied once).
    let ok = dir.path().join("ok.db");
    drop(SqliteStore::open(&ok, Durability::Normal).unwrap());
    SqliteStore::open(&ok, Durability::Normal).unwrap();
}

/// The WAL is copied back into the database file by the store's checkpoint thread while
/// the store stays open (no commit waits for it), and dropping the store leaves no WAL.
#[test]
fn the_wal_is_checkpointed_in_the_background_and_gone_when_the_store_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let mut store = SqliteStore::open(&db, Durability::Normal).unwrap();
    let me = Owner::this_process();
    store.create_run(&new_run("r").borrow(), &me).unwrap();
    // NB: a copy of the database file alone (no WAL) has the run only once the WAL was
    // copied back; SQLite's own checkpoint would not run before 8,192 pages.
    let copy = dir.path().join("copy.db");
    let in_file = |copy: &std::path::Path| {
        std::fs::copy(&db, copy).unwrap();
        rusqlite::Connection::open(copy)
            .and_then(|c| c.query_row("SELECT count(*) FROM runs", [], |r| r.get::<_, i64>(0)))
            .unwrap_or(0)
    };
    // NB: waits for the store's checkpoint thread (a thousand looks, 20 ms apart), far
    // beyond what it takes: a wait, not a check of how long.
    let reached = (0..1000).any(|_| {
        let there = in_file(&copy) > 0;
        let _ = std::fs::remove_file(&copy);
        there || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            false
        }
    });
    assert!(reached, "the run never reached the database file");
    drop(store);
    let wal = dir.path().join("s.db-wal");
    assert!(!wal.exists(), "a WAL is left after the store was dropped");
    let store = SqliteStore::open_existing(&db, Durability::Normal).unwrap();
    assert_eq!(store.run("r").unwrap().status, RunStatus::Running);
}

/// A store written by a planvm of schema version 1 (the `runs.status` CHECK as an `IN`
/// list) opens in this one: `runs` is rebuilt with everything in it, the rule still holds,
/// the foreign keys still hold, branches are still found by their parent's index, a run's
/// insert no longer builds a temporary table, and finished runs have their calls counted.
#[test]
fn a_version_1_store_is_migrated_with_its_runs_intact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    {
        let v1 = rusqlite::Connection::open(&path).unwrap();
        v1.execute_batch(include_str!("../src/migrations/001_init.sql"))
            .unwrap();
        v1.execute_batch(
            r#"PRAGMA user_version = 1;
            PRAGMA journal_mode = WAL;
            INSERT INTO programs VALUES ('h', '[]', x'010203');
            INSERT INTO runs (id, program, plan, presets, limits, status, created_at,
                              updated_at, steps, final_answer, owner)
                VALUES ('p', 'h', 'plan.json', '{"n":1}',
                        '{"max_steps":100,"max_total_bytes":1000,"max_value_bytes":100,"max_concurrency":2}',
                        'ok', 10, 20, 3, '"done"', 'gone-host:1');
            INSERT INTO runs (id, program, plan, parent, branch_seq, presets, limits, status,
                              created_at, updated_at, owner, lease_until)
                VALUES ('b', 'h', 'new.json', 'p', 1, '{}',
                        '{"max_steps":100,"max_total_bytes":1000,"max_value_bytes":100,"max_concurrency":2}',
                        'running', 30, 40, 'gone-host:1', 50);
            INSERT INTO journal VALUES ('p', 0, 11,
                '[{"sent":[{"step":1,"seq_no":1,"tool":"search","args":{"q":"a"}}],"answered":[{"step":1,"output":"x","latency_ms":3}],"committed":[1]}]');
            INSERT INTO checkpoints VALUES ('p', 3, '{}');"#,
        )
        .unwrap();
    }
    let store = SqliteStore::open(&path, Durability::Normal).unwrap();
    let p = store.run("p").unwrap();
    assert_eq!(p.status, RunStatus::Ok);
    assert_eq!(p.final_answer, Some(json!("done")));
    assert_eq!(p.presets, json!({"n": 1}).as_object().unwrap().clone());
    assert_eq!(p.limits.max_steps, 100);
    assert_eq!(
        (p.created_at, p.updated_at, p.steps, p.tool_calls),
        (10, 20, 3, 1)
    );
    let b = store.run("b").unwrap();
    assert_eq!(b.parent.as_deref(), Some("p"));
    assert_eq!(b.branch_seq, Some(1));
    assert_eq!(
        b.status,
        RunStatus::Interrupted,
        "its lease lapsed long ago"
    );
    let ids: Vec<String> = store.runs().unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(ids.len(), 2);
    let calls = store.calls("p").unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].output, Some(json!("x")));
    assert_eq!(store.checkpoint("p").unwrap(), Some((3, "{}".to_owned())));
    drop(store);

    let db = rusqlite::Connection::open(&path).unwrap();
    db.pragma_update(None, "foreign_keys", "ON").unwrap();
    let version: i64 = db
        .query_row("SELECT user_version FROM pragma_user_version", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(version, 12);
    let counts: Vec<(String, Option<i64>)> = db
        .prepare("SELECT id, tool_calls FROM runs ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        counts,
        [("b".to_owned(), None), ("p".to_owned(), Some(1))],
        "a finished run is counted once, a running one when it is read"
    );
    let plan: String = db
        .query_row(
            "EXPLAIN QUERY PLAN SELECT id FROM runs WHERE parent = 'p'",
            [],
            |r| r.get(3),
        )
        .unwrap();
    assert!(plan.contains("USING INDEX runs_by_parent"), "{plan}");
    let children: Vec<String> = db
        .prepare("SELECT id FROM runs WHERE parent = 'p'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(children, ["b"]);
    let bad = db.execute("UPDATE runs SET status = 'paused' WHERE id = 'p'", []);
    assert!(
        format!("{bad:?}").contains("CHECK constraint failed"),
        "{bad:?}"
    );
    let orphan = db.execute("INSERT INTO journal VALUES ('no such run', 0, 0, '[]')", []);
    assert!(format!("{orphan:?}").contains("FOREIGN KEY"), "{orphan:?}");
    let mut explain = db
        .prepare(
            "EXPLAIN INSERT INTO runs (id, program, plan, presets, limits, status, created_at, \
             updated_at) VALUES ('n', 'h', 'p', '{}', '{}', 'running', 0, 0)",
        )
        .unwrap();
    let ops: Vec<String> = explain
        .query_map([], |r| r.get::<_, String>(1))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(ops.iter().any(|op| op == "Insert"), "{ops:?}");
    assert!(!ops.iter().any(|op| op == "OpenEphemeral"), "{ops:?}");
}

#[test]
fn a_run_row_or_program_planvm_cannot_have_written_is_reported_as_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let mut store = SqliteStore::open(&path, Durability::Normal).unwrap();
    let mut run = new_run("r");
    run.presets.insert("topic".into(), json!("TiDB"));
    store
        .create_run(&run.borrow(), &Owner::this_process())
        .unwrap();
    let hash = store.run("r").unwrap().program;
    drop(store);
    let stored: (String, String) = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("SELECT presets, limits FROM runs", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();

    // Read as null or as defaults, each would change what a resumed run does or says.
    for (column, value) in [
        ("final_answer", "{bad"),
        ("error", "x"),
        ("presets", "[1]"),
        ("limits", "{}"),
    ] {
        let sql = rusqlite::Connection::open(&path).unwrap();
        sql.execute(&format!("UPDATE runs SET {column} = ?1"), [value])
            .unwrap();
        let store = SqliteStore::open_existing(&path, Durability::Normal).unwrap();
        for e in [store.run("r").unwrap_err(), store.runs().unwrap_err()] {
            assert_eq!(e.kind, StoreErrorKind::Damaged, "{column}: {e}");
            assert!(e.message.contains("run `r`"), "{}", e.message);
            assert!(e.message.contains("the store is damaged"), "{}", e.message);
        }
        sql.execute(
            "UPDATE runs SET final_answer = NULL, error = NULL, presets = ?1, limits = ?2",
            [&stored.0, &stored.1],
        )
        .unwrap();
    }
    let store = SqliteStore::open_existing(&path, Durability::Normal).unwrap();
    assert_eq!(store.run("r").unwrap().presets["topic"], "TiDB");

    let sql = rusqlite::Connection::open(&path).unwrap();
    sql.execute_batch("PRAGMA foreign_keys = OFF; DELETE FROM programs;")
        .unwrap();
    let e = store.program(&hash).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::Damaged);
    assert!(e.message.contains("is missing"), "{}", e.message);
}
