//! The SQLite store on its own: what it refuses to open, leases between processes, group
//! writes where one is refused, the journal folded back into calls and steps, and
//! evaluations and people's verdicts.

use plan_store::{
    CallRow, CallState, CommitPoint, Durability, EvalCase, Feedback, NewRun, OwnedNewRun, Owner,
    RunEnd, RunStatus, RunStore, Seen, SqliteStore, StepRow, StoreErrorKind, StoreWrite,
};
use serde_json::{Map, Value, json};

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

fn call(step: u64, tool: &str) -> CallRow {
    CallRow {
        step,
        seq_no: Some(step as i64),
        tool: tool.to_owned(),
        args: json!({"query": format!("q{step}")})
            .as_object()
            .unwrap()
            .clone(),
        state: CallState::Inflight,
        output: None,
        error: None,
        latency_ms: None,
        usage: None,
        attempts: None,
        sent_at: None,
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

#[test]
fn a_run_held_by_a_live_process_cannot_be_claimed_but_one_of_a_dead_process_can() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SqliteStore::open(&dir.path().join("s.db"), Durability::Normal).unwrap();
    let me = Owner::this_process();
    let run = new_run("r");
    store.create_run(&run.borrow(), &me).unwrap();
    assert_eq!(store.run("r").unwrap().status, RunStatus::Running);

    let other = Owner("another-host:1".into());
    let e = store.claim("r", &other, Seen::default()).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::Busy);

    // A process of this machine that no longer exists holds nothing.
    let host = me.0.rsplitn(3, ':').nth(2).unwrap();
    let dead = Owner(format!("{host}:{}:1.nonce", u32::MAX - 1));
    let run2 = new_run("r2");
    store.create_run(&run2.borrow(), &dead).unwrap();
    assert_eq!(store.run("r2").unwrap().status, RunStatus::Interrupted);
    store.claim("r2", &me, Seen::default()).unwrap();
    assert_eq!(store.run("r2").unwrap().status, RunStatus::Running);

    let e = store.claim("missing", &me, Seen::default()).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::UnknownRun);
}

#[test]
fn a_refused_write_in_a_group_leaves_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SqliteStore::open(&dir.path().join("s.db"), Durability::Normal).unwrap();
    let me = Owner::this_process();
    store.create_run(&new_run("a").borrow(), &me).unwrap();
    let point = CommitPoint {
        sent: vec![call(0, "search")],
        ..CommitPoint::default()
    };
    let writes = [
        StoreWrite::Create(new_run("a"), me.clone()),
        StoreWrite::Create(new_run("b"), me.clone()),
        StoreWrite::Commit("a".into(), me.clone(), point),
    ];
    let results = store.write_group(&writes.iter().collect::<Vec<_>>());
    assert_eq!(
        results[0].as_ref().unwrap_err().kind,
        StoreErrorKind::DuplicateRun
    );
    assert!(results[1].is_ok() && results[2].is_ok(), "{results:?}");
    assert_eq!(store.runs().unwrap().len(), 2);
    assert_eq!(store.calls("a").unwrap().len(), 1);
}

/// A run created and given its points (its end, a state) in one group is written as one
/// row with its end, and its points with no fencing query: what is stored is what the
/// writes one by one store, and a later point of the same group follows it.
#[test]
fn a_run_created_and_ended_in_one_group_is_stored_as_one_write_after_another_would() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SqliteStore::open(&dir.path().join("s.db"), Durability::Normal).unwrap();
    let me = Owner::this_process();
    let points = |end: bool| {
        let first = CommitPoint {
            sent: vec![call(0, "search")],
            state: Some((3, "{\"state\":1}".to_owned())),
            total_steps: 3,
            ..CommitPoint::default()
        };
        let mut answered = call(0, "search");
        answered.output = Some(json!("hit"));
        answered.latency_ms = Some(2);
        let second = CommitPoint {
            answered: vec![answered],
            committed: vec![0],
            total_steps: 5,
            end: end.then(|| RunEnd {
                question: None,
                ok: true,
                final_answer: json!("done"),
                error: None,
                tool_calls: None,
            }),
            ..CommitPoint::default()
        };
        (first, second)
    };
    // One by one.
    store.create_run(&new_run("apart").borrow(), &me).unwrap();
    let (first, second) = points(true);
    store.commit("apart", &me, &first).unwrap();
    store.commit("apart", &me, &second).unwrap();
    // In one group: the creation and first point merged, the second point after them;
    // and a run that ends in its first point.
    let (first, second) = points(true);
    let (mut only, _) = points(true);
    only.end = Some(RunEnd {
        question: None,
        ok: false,
        final_answer: Value::Null,
        error: Some(json!({"code": "R0005"})),
        tool_calls: Some(0),
    });
    let writes = [
        StoreWrite::Create(new_run("grouped"), me.clone()),
        StoreWrite::Create(new_run("ended"), me.clone()),
        StoreWrite::Commit("grouped".into(), me.clone(), first),
        StoreWrite::Commit("ended".into(), me.clone(), only),
        StoreWrite::Commit("grouped".into(), me.clone(), second),
    ];
    let results = store.write_group(&writes.iter().collect::<Vec<_>>());
    assert!(results.iter().all(Result::is_ok), "{results:?}");

    let (apart, grouped) = (store.run("apart").unwrap(), store.run("grouped").unwrap());
    assert_eq!(grouped.status, RunStatus::Ok);
    assert_eq!(
        (
            grouped.steps,
            grouped.tool_calls,
            &grouped.final_answer,
            &grouped.owner
        ),
        (
            apart.steps,
            apart.tool_calls,
            &apart.final_answer,
            &apart.owner
        )
    );
    // NB: the same calls; when each was sent is when its row was written.
    let unsent = |mut calls: Vec<CallRow>| {
        calls.iter_mut().for_each(|c| c.sent_at = None);
        calls
    };
    assert_eq!(
        unsent(store.calls("grouped").unwrap()),
        unsent(store.calls("apart").unwrap())
    );
    assert_eq!(
        store.steps("grouped").unwrap(),
        store.steps("apart").unwrap()
    );
    assert_eq!(
        store.checkpoint("grouped").unwrap(),
        store.checkpoint("apart").unwrap()
    );
    let ended = store.run("ended").unwrap();
    assert_eq!((ended.status, ended.steps), (RunStatus::Failed, 3));
    assert_eq!(ended.error, Some(json!({"code": "R0005"})));
    assert_eq!(store.calls("ended").unwrap().len(), 1);
    // Ended runs hold no lease: a resume finds them finished, not running elsewhere.
    let leases: Vec<Option<i64>> = rusqlite::Connection::open(dir.path().join("s.db"))
        .unwrap()
        .prepare("SELECT lease_until FROM runs ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(leases, vec![None, None, None]);
}

/// An already-encoded entry (what a journal or the group writer hands over) that is not
/// UTF-8 is refused: no row, and the run's journal keeps what it had.
#[test]
fn an_encoded_entry_that_is_not_utf8_is_never_stored() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SqliteStore::open(&dir.path().join("s.db"), Durability::Normal).unwrap();
    let me = Owner::this_process();
    store.create_run(&new_run("a").borrow(), &me).unwrap();
    let good = CommitPoint {
        encoded: br#"{"sent":[{"step":0,"seq_no":0,"tool":"search","args":{}}]}"#.to_vec(),
        ..CommitPoint::default()
    };
    store.commit("a", &me, &good).unwrap();
    let damaged = CommitPoint {
        encoded: b"{\"committed\":[0],\"x\":\"\xff\"}".to_vec(),
        ..CommitPoint::default()
    };
    let e = store.commit("a", &me, &damaged).unwrap_err();
    assert!(e.message.contains("not UTF-8"), "{}", e.message);
    let calls = store.calls("a").unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        calls[0].state,
        CallState::Inflight,
        "the damaged point is not there"
    );
}

#[test]
fn a_process_that_lost_its_run_cannot_write_into_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SqliteStore::open(&dir.path().join("s.db"), Durability::Normal).unwrap();
    let (host, _) = {
        let me = Owner::this_process();
        let mut parts = me.0.rsplitn(3, ':');
        let (_, _, host) = (parts.next(), parts.next(), parts.next().unwrap().to_owned());
        (host, me)
    };
    // A holder on another machine whose lease lapsed: taken over.
    let paused = Owner("elsewhere:7:abc".into());
    store.create_run(&new_run("r").borrow(), &paused).unwrap();
    rusqlite::Connection::open(dir.path().join("s.db"))
        .unwrap()
        .execute("UPDATE runs SET lease_until = 0", [])
        .unwrap();
    let me = Owner::this_process();
    store.claim("r", &me, Seen::default()).unwrap();
    let point = CommitPoint {
        sent: vec![call(0, "search")],
        ..CommitPoint::default()
    };
    let e = store.commit("r", &paused, &point).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::Busy);
    assert!(store.calls("r").unwrap().is_empty());
    store.commit("r", &me, &point).unwrap();
    // A claim by one who read the run before that point: stale, refused.
    let e = store.claim("r", &me, Seen::default()).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::Busy);
    store
        .claim("r", &me, Seen::head(store.journal_head("r").unwrap()))
        .unwrap();

    // A live process of this machine holds its run whatever its lease says (here: the
    // test's parent, whose start time is read like planvm reads its own).
    let parent = std::os::unix::process::parent_id();
    let stat = std::fs::read_to_string(format!("/proc/{parent}/stat")).unwrap();
    let start = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(19)
        .unwrap()
        .to_owned();
    let live = Owner(format!("{host}:{parent}:{start}.zzz"));
    store.create_run(&new_run("s").borrow(), &live).unwrap();
    rusqlite::Connection::open(dir.path().join("s.db"))
        .unwrap()
        .execute("UPDATE runs SET lease_until = 0", [])
        .unwrap();
    let e = store
        .claim("s", &Owner("elsewhere:8:def".into()), Seen::default())
        .unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::Busy);
}

#[test]
fn the_journal_folds_back_into_calls_steps_and_counts() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SqliteStore::open(&dir.path().join("s.db"), Durability::Normal).unwrap();
    let me = Owner::this_process();
    let run = new_run("r");
    let new: NewRun<'_> = run.borrow();
    store.create_run(&new, &me).unwrap();
    let step = |n: u64, var: &str, v: Value| StepRow {
        step: n,
        seq_no: Some(n as i64 - 1),
        pc: n as u32 - 1,
        op: "call search".into(),
        writes: [(var.to_owned(), v)].into_iter().collect(),
        omitted: Map::new(),
    };
    // Two calls sent; the first answered and committed; then a resumed attempt commits
    // the first again and answers the second.
    let mut answered = call(0, "search");
    answered.output = Some(json!("a0"));
    answered.latency_ms = Some(5);
    store
        .commit(
            "r",
            &me,
            &CommitPoint {
                sent: vec![call(0, "search"), call(1, "search")],
                ..CommitPoint::default()
            },
        )
        .unwrap();
    store
        .commit(
            "r",
            &me,
            &CommitPoint {
                answered: vec![answered.clone()],
                steps: vec![step(1, "x", json!("a0"))],
                committed: vec![0],
                ..CommitPoint::default()
            },
        )
        .unwrap();
    let mut second = call(1, "search");
    second.error = Some("down".into());
    store
        .commit(
            "r",
            &me,
            &CommitPoint {
                answered: vec![second],
                steps: vec![step(1, "x", json!("a0"))],
                committed: vec![0],
                end: Some(RunEnd {
                    question: None,
                    ok: false,
                    final_answer: Value::Null,
                    error: Some(json!({"code": "R0003", "message": "down"})),
                    tool_calls: None,
                }),
                total_steps: 1,
                ..CommitPoint::default()
            },
        )
        .unwrap();
    let calls = store.calls("r").unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].state, CallState::Committed);
    assert_eq!(calls[0].output, Some(json!("a0")));
    assert_eq!(calls[0].latency_ms, Some(5));
    assert_eq!(calls[1].state, CallState::Answered);
    assert_eq!(calls[1].error.as_deref(), Some("down"));
    assert_eq!(store.steps("r").unwrap().len(), 1);
    let info = store.run("r").unwrap();
    assert_eq!(info.status, RunStatus::Failed);
    assert_eq!(info.tool_calls, 1, "a call committed twice counts once");
    assert_eq!(info.steps, 1);
    assert_eq!(plan_store::known_answers(&calls).len(), 1);
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
    let t0 = std::time::Instant::now();
    while in_file(&copy) == 0 {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(20),
            "the run never reached the database file"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
        let _ = std::fs::remove_file(&copy);
    }
    drop(store);
    let wal = dir.path().join("s.db-wal");
    assert!(!wal.exists(), "a WAL is left after the store was dropped");
    let store = SqliteStore::open_existing(&db, Durability::Normal).unwrap();
    assert_eq!(store.run("r").unwrap().status, RunStatus::Running);
}

/// Many runs handing points to one group store from several threads at once: every
/// point lands once, in order, whatever transactions they were grouped into; a wait
/// returns once what was given before it is written.
#[test]
fn a_group_store_writes_every_point_of_every_run_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let store = SqliteStore::open(&db, Durability::Normal).unwrap();
    let group = plan_store::GroupStore::spawn(store);
    let me = Owner::this_process();
    const RUNS: usize = 24;
    const POINTS: u64 = 30;
    std::thread::scope(|s| {
        for t in 0..4 {
            let (group, me) = (group.clone(), me.clone());
            s.spawn(move || {
                for r in (t..RUNS).step_by(4) {
                    let id = format!("run{r}");
                    let created = group.create(new_run(&id), me.clone());
                    let run = group.run(&id, me.clone());
                    for p in 0..POINTS {
                        let mut point = CommitPoint {
                            sent: vec![call(p, "search")],
                            end: (p + 1 == POINTS).then(|| RunEnd {
                                question: None,
                                ok: true,
                                final_answer: json!(r),
                                error: None,
                                tool_calls: None,
                            }),
                            total_steps: p + 1,
                            ..CommitPoint::default()
                        };
                        run.give(&mut point).unwrap();
                        if p == POINTS / 2 {
                            // NB: None when the writer was quicker: all written already.
                            if let Some(wait) = run.written() {
                                futures::executor::block_on(wait).unwrap();
                            }
                            assert!(run.written().is_none(), "what was given is written");
                        }
                    }
                    futures::executor::block_on(created).unwrap();
                    if let Some(wait) = run.written() {
                        futures::executor::block_on(wait).unwrap();
                    }
                    assert!(run.written().is_none(), "everything given is written");
                }
            });
        }
    });
    let store = SqliteStore::open(&db, Durability::Normal).unwrap();
    for r in 0..RUNS {
        let id = format!("run{r}");
        let steps: Vec<u64> = store.calls(&id).unwrap().iter().map(|c| c.step).collect();
        assert_eq!(steps, (0..POINTS).collect::<Vec<_>>(), "{id}");
        let info = store.run(&id).unwrap();
        assert_eq!(info.status, RunStatus::Ok);
        assert_eq!(info.final_answer, Some(json!(r)));
        assert_eq!(info.steps, POINTS);
    }
}

/// A point the store refuses (here: of a run that was never created) fails the waits for
/// it, and every later point of the run, with the store's message.
#[test]
fn a_refused_point_fails_the_run_s_waits_and_later_points() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db"), Durability::Normal).unwrap();
    let group = plan_store::GroupStore::spawn(store);
    let run = group.run("ghost", Owner::this_process());
    let point = || CommitPoint {
        sent: vec![call(0, "search")],
        ..CommitPoint::default()
    };
    run.give(&mut point()).unwrap();
    let e = futures::executor::block_on(run.written().unwrap()).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::Busy);
    assert!(e.message.contains("ghost"), "{e:?}");
    assert_eq!(run.give(&mut point()).unwrap_err(), e);
    let again = futures::executor::block_on(run.written().unwrap()).unwrap_err();
    assert_eq!(again, e);
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
    assert_eq!(version, 9);
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

/// A finished run's row keeps the count of calls its journal gave (`runs list` reads no
/// journal for it); a run whose journal could not count (a resumed run) is counted from
/// its journal rows when it ends; a run taken up again is counted from its journal rows
/// until it ends again.
#[test]
fn a_finished_run_keeps_its_count_of_calls() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SqliteStore::open(&dir.path().join("s.db"), Durability::Normal).unwrap();
    let me = Owner::this_process();
    let ended = |tool_calls, ok: bool| {
        let mut answered = call(0, "search");
        answered.output = Some(json!("hit"));
        CommitPoint {
            sent: vec![call(0, "search"), call(1, "search")],
            answered: vec![answered],
            committed: vec![0],
            total_steps: 2,
            end: Some(RunEnd {
                ok,
                question: None,
                final_answer: json!("done"),
                error: (!ok).then(|| json!({"code": "R0003"})),
                tool_calls,
            }),
            ..CommitPoint::default()
        }
    };
    // NB: a count unlike the journal's (1) shows which of the two is read. A failed run
    // can be resumed.
    for (id, count, ok) in [("counted", Some(7), false), ("recounted", None, true)] {
        store.create_run(&new_run(id).borrow(), &me).unwrap();
        store.commit(id, &me, &ended(count, ok)).unwrap();
    }
    let listed = |store: &SqliteStore| -> Vec<(String, u64)> {
        let mut runs: Vec<_> = store
            .runs()
            .unwrap()
            .into_iter()
            .map(|r| (r.id, r.tool_calls))
            .collect();
        runs.sort();
        runs
    };
    assert_eq!(
        listed(&store),
        [("counted".to_owned(), 7), ("recounted".to_owned(), 1)]
    );
    assert_eq!(store.run("counted").unwrap().tool_calls, 7);
    store.claim("counted", &me, Seen::head(Some(0))).unwrap();
    assert_eq!(
        store.run("counted").unwrap().tool_calls,
        1,
        "running: its journal"
    );
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

#[test]
fn evaluations_keep_their_cases_and_people_their_latest_verdict_on_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SqliteStore::open(&dir.path().join("s.db"), Durability::Normal).unwrap();
    store.create_eval("e1", "set.jsonl").unwrap();
    let e = store.create_eval("e1", "other.jsonl").unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::DuplicateRun);
    let case = |id: &str, verdict: &str| EvalCase {
        case_id: id.into(),
        goal: format!("e1.{id}"),
        verdict: verdict.into(),
        score: if verdict == "pass" { 1.0 } else { 0.0 },
        reason: String::new(),
        report: json!({"id": id, "runs": [format!("e1.{id}")]}),
    };
    store.save_eval_case("e1", &case("a", "pass")).unwrap();
    store.save_eval_case("e1", &case("b", "fail")).unwrap();
    // Saved again (a case graded once more): replaced, not doubled.
    store.save_eval_case("e1", &case("b", "pass")).unwrap();
    let listed = store.evals().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].cases, listed[0].passed, &listed[0].summary),
        (2, 2, &None)
    );
    store.end_eval("e1", &json!({"pass_rate": 1.0})).unwrap();
    assert_eq!(
        store.evals().unwrap()[0].summary,
        Some(json!({"pass_rate": 1.0}))
    );
    let cases = store.eval_cases("e1").unwrap();
    assert_eq!(cases.len(), 2);
    assert_eq!(cases[1].report["runs"], json!(["e1.b"]));
    let (eval, found) = store.eval_case_of_goal("e1.a").unwrap().unwrap();
    assert_eq!((eval.as_str(), found.case_id.as_str()), ("e1", "a"));
    assert!(store.eval_case_of_goal("e1.c").unwrap().is_none());

    // A verdict needs a run; a later one replaces the earlier.
    let verdict = |v: &str, note: Option<&str>| Feedback {
        verdict: v.into(),
        note: note.map(str::to_owned),
        updated_at: 0,
    };
    let e = store.set_feedback("r", &verdict("good", None)).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::UnknownRun);
    store
        .create_run(&new_run("r").borrow(), &Owner::this_process())
        .unwrap();
    assert_eq!(store.feedback("r").unwrap(), None);
    store.set_feedback("r", &verdict("good", None)).unwrap();
    store
        .set_feedback("r", &verdict("bad", Some("wrong year")))
        .unwrap();
    let given = store.feedback("r").unwrap().unwrap();
    assert_eq!(
        (given.verdict.as_str(), given.note.as_deref()),
        ("bad", Some("wrong year"))
    );
    assert!(given.updated_at > 0);
}
