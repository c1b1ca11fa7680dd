//! Every store backend against the same scenarios (the `RunStore` contract): SQLite, and
//! PostgreSQL when `PLANRT_TEST_POSTGRES` names a server (`scripts/postgres` starts one;
//! with `PLANRT_REQUIRE_POSTGRES=1`, as in CI, a missing one fails rather than skips).
//! Leases between processes, group writes where one is refused, fencing of a process that
//! lost its run, the journal folded back into calls and steps, evaluations and verdicts.

use plan_store::{
    CallRow, CallState, CommitPoint, Durability, EvalCase, Feedback, JournalFold, NewRun,
    OwnedNewRun, Owner, PgStore, RunEnd, RunStatus, RunStore, Seen, SqliteStore, StepRow,
    StoreErrorKind, StoreWrite,
};
use serde_json::{Map, Value, json};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A fresh store of one backend, and its rows changed or read behind its back.
trait Backend {
    fn open(&self) -> Box<dyn RunStore>;
    fn execute(&self, sql: &str);
    /// The first column of `sql`'s rows, as integers.
    fn numbers(&self, sql: &str) -> Vec<Option<i64>>;
}

struct Sqlite(tempfile::TempDir);

impl Sqlite {
    fn new() -> Sqlite {
        Sqlite(tempfile::tempdir().unwrap())
    }

    fn path(&self) -> std::path::PathBuf {
        self.0.path().join("s.db")
    }
}

impl Backend for Sqlite {
    fn open(&self) -> Box<dyn RunStore> {
        Box::new(SqliteStore::open(&self.path(), Durability::Normal).unwrap())
    }

    fn execute(&self, sql: &str) {
        rusqlite::Connection::open(self.path())
            .unwrap()
            .execute(sql, [])
            .unwrap();
    }

    fn numbers(&self, sql: &str) -> Vec<Option<i64>> {
        rusqlite::Connection::open(self.path())
            .unwrap()
            .prepare(sql)
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }
}

/// A schema of its own in the test server's database, dropped at the end.
struct Postgres {
    admin: String,
    schema: String,
}

impl Postgres {
    /// None (said loudly) when no server is given and none is required.
    fn new() -> Option<Postgres> {
        let Ok(admin) = std::env::var("PLANRT_TEST_POSTGRES") else {
            assert!(
                std::env::var_os("PLANRT_REQUIRE_POSTGRES").is_none(),
                "PLANRT_REQUIRE_POSTGRES is set but PLANRT_TEST_POSTGRES is not"
            );
            eprintln!(
                "SKIPPED: no PostgreSQL (set PLANRT_TEST_POSTGRES, or run under scripts/postgres)"
            );
            return None;
        };
        let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
        let pg = Postgres { admin, schema };
        pg.client()
            .batch_execute(&format!("CREATE SCHEMA {}", pg.schema))
            .unwrap();
        Some(pg)
    }

    /// The store's URL: the server's, its tables in this schema.
    fn url(&self) -> String {
        let sep = if self.admin.contains('?') { '&' } else { '?' };
        format!("{}{sep}options=-csearch_path%3D{}", self.admin, self.schema)
    }

    fn client(&self) -> ::postgres::Client {
        ::postgres::Client::connect(&self.admin, ::postgres::NoTls).unwrap()
    }

    fn in_schema(&self) -> ::postgres::Client {
        let mut c = self.client();
        c.batch_execute(&format!("SET search_path = {}", self.schema))
            .unwrap();
        c
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self
            .client()
            .batch_execute(&format!("DROP SCHEMA {} CASCADE", self.schema));
    }
}

impl Backend for Postgres {
    fn open(&self) -> Box<dyn RunStore> {
        Box::new(PgStore::open(&self.url(), Durability::Normal).unwrap())
    }

    fn execute(&self, sql: &str) {
        self.in_schema().batch_execute(sql).unwrap();
    }

    fn numbers(&self, sql: &str) -> Vec<Option<i64>> {
        self.in_schema()
            .query(sql, &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    }
}

/// Each scenario, once per backend.
macro_rules! on_every_backend {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[test]
            fn $name() {
                super::$name(&super::Sqlite::new());
            })*
        }
        mod postgres {
            $(#[test]
            fn $name() {
                if let Some(pg) = super::Postgres::new() {
                    super::$name(&pg);
                }
            })*
        }
    };
}

on_every_backend!(
    pruning_deletes_old_ended_runs_and_keeps_what_others_need,
    the_queue_gives_each_ready_run_to_one_taker,
    the_queue_gives_each_goal_to_one_asker_that_alone_ends_it,
    outputs_keep_their_key_order_and_runs_their_tokens,
    goals_sessions_and_cancels,
    a_goal_keeps_its_planning_rounds_in_order,
    a_run_held_by_a_live_process_cannot_be_claimed_but_one_of_a_dead_process_can,
    a_refused_write_in_a_group_leaves_the_others,
    a_run_created_and_ended_in_one_group_is_stored_as_one_write_after_another_would,
    an_encoded_entry_that_is_not_utf8_is_never_stored,
    a_process_that_lost_its_run_cannot_write_into_it,
    the_journal_folds_back_into_calls_steps_and_counts,
    a_group_store_writes_every_point_of_every_run_in_order,
    a_refused_point_fails_the_run_s_waits_and_later_points,
    a_finished_run_keeps_its_count_of_calls,
    evaluations_keep_their_cases_and_people_their_latest_verdict_on_a_run,
    pages_of_runs_and_goals_come_newest_first_from_a_cursor,
);

/// Every planning round of a goal, in order; a round asked again replaces the first.
fn a_goal_keeps_its_planning_rounds_in_order(b: &dyn Backend) {
    let mut store = b.open();
    let request = json!({});
    let goal = plan_store::NewGoal {
        id: "g",
        goal: "What is TiDB?",
        response_format: None,
        request: &request,
        session: None,
    };
    store.create_goal(&goal, &Owner::this_process()).unwrap();
    assert_eq!(store.goal_rounds("g").unwrap(), []);
    let round =
        |n: u64, kind: &str, reply: Option<&str>, run: Option<&str>| plan_store::GoalRound {
            round: n,
            kind: kind.into(),
            reply: reply.map(Into::into),
            diagnostics: json!([{"code": "E0202", "message": "unknown tool `x`", "seq_no": 1}]),
            planner_error: reply.is_none().then(|| "HTTP 500".to_owned()),
            run: run.map(Into::into),
            created_at: 7,
        };
    // NB: read back by number, whatever the order they were written in.
    store
        .save_goal_round("g", &round(0, "plan", Some("prose"), None))
        .unwrap();
    store
        .save_goal_round("g", &round(2, "replan", None, None))
        .unwrap();
    store
        .save_goal_round("g", &round(1, "repair", Some("[]"), Some("g")))
        .unwrap();
    let kept = store.goal_rounds("g").unwrap();
    assert_eq!(
        kept,
        [
            round(0, "plan", Some("prose"), None),
            round(1, "repair", Some("[]"), Some("g")),
            round(2, "replan", None, None)
        ]
    );
    // NB: the goal asked again from the start (its process died before a plan ran): the
    // rounds of the first attempt are gone, however far it got.
    let again = round(0, "plan", Some("again"), Some("g"));
    store.save_goal_round("g", &again).unwrap();
    assert_eq!(store.goal_rounds("g").unwrap(), [again]);
    assert_eq!(store.goal_rounds("other").unwrap(), []);
}

/// Runs and goals read a page at a time: newest first, from before a cursor (creation
/// time, then id, as ties of one millisecond are common), to the end.
fn pages_of_runs_and_goals_come_newest_first_from_a_cursor(b: &dyn Backend) {
    let mut store = b.open();
    let me = Owner::this_process();
    let request = json!({});
    for i in 0..7 {
        store
            .create_run(&new_run(&format!("r{i}")).borrow(), &me)
            .unwrap();
        let id = format!("g{i}");
        let goal = plan_store::NewGoal {
            id: &id,
            goal: "What is TiDB?",
            response_format: None,
            request: &request,
            session: None,
        };
        store.create_goal(&goal, &me).unwrap();
    }
    // NB: three runs and goals of one millisecond (the id breaks the tie), two older.
    for table in ["runs", "goals"] {
        let p = &table[..1];
        b.execute(&format!(
            "UPDATE {table} SET created_at = 5 WHERE id IN ('{p}2', '{p}3', '{p}4')"
        ));
        b.execute(&format!(
            "UPDATE {table} SET created_at = 3 WHERE id = '{p}0'"
        ));
        b.execute(&format!(
            "UPDATE {table} SET created_at = 4 WHERE id = '{p}1'"
        ));
    }
    let everything: Vec<(i64, String)> = {
        let mut all: Vec<_> = store
            .runs()
            .unwrap()
            .into_iter()
            .map(|r| (r.created_at, r.id))
            .collect();
        all.sort();
        all.reverse();
        all
    };
    let mut paged = Vec::new();
    let mut cursor: Option<(i64, String)> = None;
    loop {
        let page = store
            .runs_before(cursor.as_ref().map(|(t, id)| (*t, id.as_str())), 3)
            .unwrap();
        assert!(page.len() <= 3);
        let Some(last) = page.last() else { break };
        cursor = Some((last.created_at, last.id.clone()));
        paged.extend(page.into_iter().map(|r| (r.created_at, r.id)));
    }
    assert_eq!(paged, everything);
    let page: Vec<String> = store
        .runs_before(Some((5, "r3")), 10)
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(page, ["r2", "r1", "r0"]);
    let goals: Vec<String> = store
        .goals_before(Some((5, "g4")), 2)
        .unwrap()
        .into_iter()
        .map(|g| g.id)
        .collect();
    assert_eq!(goals, ["g3", "g2"]);
    assert_eq!(store.goals_before(None, 100).unwrap().len(), 7);
    assert!(store.runs_before(Some((0, "")), 100).unwrap().is_empty());
}

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

fn a_run_held_by_a_live_process_cannot_be_claimed_but_one_of_a_dead_process_can(b: &dyn Backend) {
    let mut store = b.open();
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

fn a_refused_write_in_a_group_leaves_the_others(b: &dyn Backend) {
    let mut store = b.open();
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
fn a_run_created_and_ended_in_one_group_is_stored_as_one_write_after_another_would(
    b: &dyn Backend,
) {
    let mut store = b.open();
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
                usage: None,
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
        usage: None,
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
    let leases = b.numbers("SELECT lease_until FROM runs ORDER BY id");
    assert_eq!(leases, vec![None, None, None]);
}

/// An already-encoded entry (what a journal or the group writer hands over) that is not
/// UTF-8 is refused: no row, and the run's journal keeps what it had.
fn an_encoded_entry_that_is_not_utf8_is_never_stored(b: &dyn Backend) {
    let mut store = b.open();
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

fn a_process_that_lost_its_run_cannot_write_into_it(b: &dyn Backend) {
    let mut store = b.open();
    let (host, _) = {
        let me = Owner::this_process();
        let mut parts = me.0.rsplitn(3, ':');
        let (_, _, host) = (parts.next(), parts.next(), parts.next().unwrap().to_owned());
        (host, me)
    };
    // A holder on another machine whose lease lapsed: taken over.
    let paused = Owner("elsewhere:7:abc".into());
    store.create_run(&new_run("r").borrow(), &paused).unwrap();
    b.execute("UPDATE runs SET lease_until = 0");
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
    b.execute("UPDATE runs SET lease_until = 0");
    let e = store
        .claim("s", &Owner("elsewhere:8:def".into()), Seen::default())
        .unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::Busy);
}

fn the_journal_folds_back_into_calls_steps_and_counts(b: &dyn Backend) {
    let mut store = b.open();
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
    // A reader following the run, one look after each point: the journal alone, or with
    // the run's row, in turn.
    let mut fold = JournalFold::default();
    let mut heads = Vec::new();
    let mut look = |store: &dyn RunStore| {
        if heads.len() % 2 == 0 {
            store.fold_journal("r", &mut fold).unwrap();
        } else {
            let row = store.run_journal("r", &mut fold).unwrap();
            assert_eq!(row.id, "r");
        }
        heads.push(fold.head());
    };
    look(&*store);
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
    look(&*store);
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
    look(&*store);
    look(&*store);
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
                    usage: None,
                }),
                total_steps: 1,
                ..CommitPoint::default()
            },
        )
        .unwrap();
    look(&*store);
    let calls = store.calls("r").unwrap();
    assert_eq!(heads, [None, Some(0), Some(1), Some(1), Some(2)]);
    assert_eq!(fold.calls().values().cloned().collect::<Vec<_>>(), calls);
    let steps: Vec<_> = fold.steps().values().cloned().collect();
    assert_eq!(steps, store.steps("r").unwrap());
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

/// Many runs handing points to one group store from several threads at once: every
/// point lands once, in order, whatever transactions they were grouped into; a wait
/// returns once what was given before it is written, and whoever watches a run is told
/// by then.
fn a_group_store_writes_every_point_of_every_run_in_order(b: &dyn Backend) {
    let store = b.open();
    let group = plan_store::GroupStore::spawn(store);
    let me = Owner::this_process();
    const RUNS: usize = 24;
    const POINTS: u64 = 30;
    let all_handed = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..4 {
            let (group, me, all_handed) = (group.clone(), me.clone(), &all_handed);
            s.spawn(move || {
                for r in (t..RUNS).step_by(4) {
                    let id = format!("run{r}");
                    let created = group.create(new_run(&id), me.clone());
                    let run = group.run(&id, me.clone());
                    let told = Arc::new(AtomicU64::new(0));
                    let count = told.clone();
                    let handed = Arc::new(Mutex::new(Handed::default()));
                    let keep = handed.clone();
                    run.on_written(Arc::new(move |w: &plan_store::Written<'_>| {
                        count.fetch_add(1, Ordering::Relaxed);
                        let mut h = keep.lock().unwrap();
                        if let Some((seq, at)) = w.row {
                            h.seqs.push(seq);
                            h.fold.apply_text(seq, at, &w.text().unwrap()).unwrap();
                        }
                        h.ends.extend(w.end.map(|e| e.final_answer.clone()));
                    }));
                    for p in 0..POINTS {
                        let mut point = CommitPoint {
                            sent: vec![call(p, "search")],
                            end: (p + 1 == POINTS).then(|| RunEnd {
                                question: None,
                                ok: true,
                                final_answer: json!(r),
                                error: None,
                                tool_calls: None,
                                usage: None,
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
                            assert!(told.load(Ordering::Relaxed) >= 1);
                        }
                    }
                    futures::executor::block_on(created).unwrap();
                    if let Some(wait) = run.written() {
                        futures::executor::block_on(wait).unwrap();
                    }
                    assert!(run.written().is_none(), "everything given is written");
                    // NB: the points after the wait went in a later transaction.
                    let told = told.load(Ordering::Relaxed);
                    assert!((2..=POINTS).contains(&told), "told {told} times");
                    let h = std::mem::take(&mut *handed.lock().unwrap());
                    all_handed.lock().unwrap().push((id, h));
                }
            });
        }
    });
    let store = b.open();
    for r in 0..RUNS {
        let id = format!("run{r}");
        let steps: Vec<u64> = store.calls(&id).unwrap().iter().map(|c| c.step).collect();
        assert_eq!(steps, (0..POINTS).collect::<Vec<_>>(), "{id}");
        let info = store.run(&id).unwrap();
        assert_eq!(info.status, RunStatus::Ok);
        assert_eq!(info.final_answer, Some(json!(r)));
        assert_eq!(info.steps, POINTS);
    }
    // What each run's watcher was handed is its journal as the store holds it: each entry
    // once, numbered as stored; the end once.
    for (id, handed) in all_handed.into_inner().unwrap() {
        let n = handed.seqs.len() as i64;
        assert_eq!(handed.seqs, (0..n).collect::<Vec<_>>(), "{id}");
        assert_eq!(handed.ends.len(), 1, "{id}");
        let mut stored = JournalFold::default();
        store.fold_journal(&id, &mut stored).unwrap();
        assert_eq!(stored.head(), handed.fold.head(), "{id}");
        assert_eq!(stored.calls(), handed.fold.calls(), "{id}");
    }
}

/// What a run's watcher kept of what the writer handed it.
#[derive(Default)]
struct Handed {
    seqs: Vec<i64>,
    fold: JournalFold,
    ends: Vec<Value>,
}

/// A point the store refuses (here: of a run that was never created) fails the waits for
/// it, and every later point of the run, with the store's message.
fn a_refused_point_fails_the_run_s_waits_and_later_points(b: &dyn Backend) {
    let store = b.open();
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

/// A finished run's row keeps the count of calls and the tokens its journal gave (`runs
/// list` reads no journal for it); a run whose journal could not count (a resumed run) is
/// counted and summed from its journal rows when it ends; a run taken up again is counted
/// from its journal rows until it ends again.
fn a_finished_run_keeps_its_count_of_calls(b: &dyn Backend) {
    let mut store = b.open();
    let me = Owner::this_process();
    let tokens = |input_tokens, output_tokens| plan_llm::Usage {
        input_tokens,
        output_tokens,
        cost: None,
    };
    let ended = |tool_calls: Option<u64>, ok: bool| {
        let mut answered = call(0, "search");
        answered.output = Some(json!("hit"));
        answered.usage = Some(tokens(10, 3));
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
                // NB: unlike the journal's (10, 3), to show which of the two is read.
                usage: tool_calls.map(|_| tokens(20, 6)),
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
    let listed = |store: &dyn RunStore| -> Vec<(String, u64)> {
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
        listed(&*store),
        [("counted".to_owned(), 7), ("recounted".to_owned(), 1)]
    );
    assert_eq!(store.run("counted").unwrap().tool_calls, 7);
    assert_eq!(store.run("counted").unwrap().usage, Some(tokens(20, 6)));
    assert_eq!(store.run("recounted").unwrap().usage, Some(tokens(10, 3)));
    store.claim("counted", &me, Seen::head(Some(0))).unwrap();
    assert_eq!(
        store.run("counted").unwrap().tool_calls,
        1,
        "running: its journal"
    );
}

fn evaluations_keep_their_cases_and_people_their_latest_verdict_on_a_run(b: &dyn Backend) {
    let mut store = b.open();
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

/// What a call answered comes back as it was written (a resumed run is given it again:
/// an object's keys in another order would render differently); a run's tokens are its
/// calls' and its planner's.
fn outputs_keep_their_key_order_and_runs_their_tokens(b: &dyn Backend) {
    let mut store = b.open();
    let me = Owner::this_process();
    store.create_run(&new_run("r").borrow(), &me).unwrap();
    let mut answered = call(0, "search");
    answered.output = Some(json!({"zeta": 1, "alpha": {"b": 2, "a": 3}}));
    answered.usage = Some(plan_llm::Usage {
        input_tokens: 100,
        output_tokens: 10,
        cost: None,
    });
    answered.attempts = Some(2);
    let point = CommitPoint {
        sent: vec![call(0, "search")],
        answered: vec![answered],
        committed: vec![0],
        ..CommitPoint::default()
    };
    store.commit("r", &me, &point).unwrap();
    let calls = store.calls("r").unwrap();
    assert_eq!(
        serde_json::to_string(calls[0].output.as_ref().unwrap()).unwrap(),
        r#"{"zeta":1,"alpha":{"b":2,"a":3}}"#
    );
    assert_eq!(calls[0].attempts, Some(2));
    let running = store.run("r").unwrap().usage.unwrap();
    assert_eq!((running.input_tokens, running.output_tokens), (100, 10));
    store
        .set_planner_usage(
            "r",
            &plan_llm::Usage {
                input_tokens: 1000,
                output_tokens: 50,
                cost: None,
            },
        )
        .unwrap();
    let end = CommitPoint {
        end: Some(RunEnd {
            ok: true,
            question: None,
            final_answer: json!("done"),
            error: None,
            tool_calls: None,
            usage: None,
        }),
        total_steps: 2,
        ..CommitPoint::default()
    };
    store.commit("r", &me, &end).unwrap();
    let ended = store.run("r").unwrap();
    assert_eq!(ended.status, RunStatus::Ok);
    let usage = ended.usage.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (1100, 60));
    assert_eq!(ended.tool_calls, 1);
}

/// Goals submitted wait queued; each is taken by one asker, under a lease its renewals
/// extend; only that asker ends it, until its lease lapses and another takes it.
fn the_queue_gives_each_goal_to_one_asker_that_alone_ends_it(b: &dyn Backend) {
    use plan_store::GoalStatus;
    let mut store = b.open();
    let request = json!({"vars": {"n": 1}});
    let goal = |id| plan_store::NewGoal {
        id,
        goal: "What is TiDB?",
        response_format: None,
        request: &request,
        session: None,
    };
    store.submit_goals(&[goal("q1"), goal("q2")]).unwrap();
    let status = |store: &dyn RunStore, id| store.goal(id).unwrap().unwrap().status;
    assert_eq!(status(&*store, "q1"), GoalStatus::Queued);
    assert_eq!(
        store
            .submit_goals(&[goal("q3"), goal("q1")])
            .unwrap_err()
            .kind,
        StoreErrorKind::DuplicateRun
    );
    assert!(store.goal("q3").unwrap().is_none(), "all or none");
    let mut n = 0;
    let mut token = || {
        n += 1;
        Owner(format!("elsewhere:1:{n}"))
    };
    let first = store.reserve_goals(1, &mut token).unwrap();
    assert_eq!(first.len(), 1);
    let (id, holder) = first[0].clone();
    assert_eq!(id, "q1", "oldest first");
    assert_eq!(status(&*store, "q1"), GoalStatus::Open);
    let rest = store.reserve_goals(5, &mut token).unwrap();
    assert_eq!(
        rest.iter().map(|(i, _)| i.as_str()).collect::<Vec<_>>(),
        ["q2"]
    );
    assert!(store.reserve_goals(5, &mut token).unwrap().is_empty());

    // Its lease lapses: another takes it, and the first can no longer end it.
    let before = b.numbers("SELECT lease_until FROM goals WHERE id = 'q1'")[0];
    store.renew(std::slice::from_ref(&holder)).unwrap();
    assert!(b.numbers("SELECT lease_until FROM goals WHERE id = 'q1'")[0] >= before);
    b.execute("UPDATE goals SET lease_until = 1 WHERE id = 'q1'");
    assert_eq!(status(&*store, "q1"), GoalStatus::Interrupted);
    let taken = store.reserve_goals(5, &mut token).unwrap();
    assert_eq!(taken.len(), 1);
    let (_, second) = &taken[0];
    assert!(
        !store
            .end_goal("q1", Some(&holder), Ok(&json!("stale")))
            .unwrap()
    );
    assert!(
        store
            .end_goal("q1", Some(second), Ok(&json!("fresh")))
            .unwrap()
    );
    let q1 = store.goal("q1").unwrap().unwrap();
    assert_eq!(
        (q1.status, q1.answer),
        (GoalStatus::Answered, Some(json!("fresh")))
    );

    // A goal this process asks is its own while its lease runs.
    let me = Owner::this_process();
    store.create_goal(&goal("mine"), &me).unwrap();
    assert!(store.reserve_goals(5, &mut token).unwrap().is_empty());
    assert!(
        !store
            .take_goal("mine", &Owner("elsewhere:2:x".into()))
            .unwrap()
    );
}

/// Goals, their sessions and summaries; a cancelled run ends failed and is not
/// cancelled twice; branches are found under their parent, a batch's runs by prefix.
fn goals_sessions_and_cancels(b: &dyn Backend) {
    let mut store = b.open();
    let me = Owner::this_process();
    let request = json!({"vars": {}});
    for (id, session) in [("g1", Some("s")), ("g2", Some("s")), ("g3", None)] {
        let goal = plan_store::NewGoal {
            id,
            goal: "What is TiDB?",
            response_format: None,
            request: &request,
            session,
        };
        store.create_goal(&goal, &me).unwrap();
    }
    let again = plan_store::NewGoal {
        id: "g1",
        goal: "x",
        response_format: None,
        request: &request,
        session: None,
    };
    assert_eq!(
        store.create_goal(&again, &me).unwrap_err().kind,
        StoreErrorKind::DuplicateRun
    );
    assert_eq!(
        store.goal("g1").unwrap().unwrap().status,
        plan_store::GoalStatus::Open
    );
    assert!(
        !store
            .take_goal("g1", &Owner("elsewhere:1:x".into()))
            .unwrap(),
        "held here"
    );
    assert!(store.end_goal("g1", None, Ok(&json!("an answer"))).unwrap());
    assert!(
        !store.end_goal("g1", None, Ok(&json!("again"))).unwrap(),
        "ended once"
    );
    let g1 = store.goal("g1").unwrap().unwrap();
    assert_eq!(
        (g1.status, g1.answer),
        (plan_store::GoalStatus::Answered, Some(json!("an answer")))
    );
    assert_eq!(store.session_goals("s").unwrap().len(), 2);
    let sessions = store.sessions().unwrap();
    assert_eq!((sessions.len(), sessions[0].goals), (1, 2));
    store
        .save_summary("s", "g1", "they asked about TiDB")
        .unwrap();
    store.save_summary("s", "g2", "and again").unwrap();
    assert_eq!(
        store.summary("s").unwrap(),
        Some(("g2".to_owned(), "and again".to_owned()))
    );
    assert_eq!(store.goals().unwrap().len(), 3);

    store.create_run(&new_run("b.1").borrow(), &me).unwrap();
    let mut child = new_run("b.2");
    child.parent = Some(("b.1".to_owned(), 3));
    store.create_run(&child.borrow(), &me).unwrap();
    store.create_run(&new_run("c").borrow(), &me).unwrap();
    assert_eq!(store.children("b.1").unwrap(), ["b.2"]);
    let under: Vec<String> = store
        .runs_under("b.")
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(under, ["b.1", "b.2"]);
    assert_eq!(store.first_taken(&["x", "c", "b.1"]).unwrap(), Some(1));
    assert_eq!(store.first_taken(&["x", "y"]).unwrap(), None);
    let error = json!({"code": "R0013", "message": "the run was cancelled"});
    assert!(store.cancel("c", &error).unwrap());
    assert!(!store.cancel("c", &error).unwrap());
    let c = store.run("c").unwrap();
    assert_eq!(
        (c.status, c.error),
        (RunStatus::Failed, Some(error.clone()))
    );
    assert_eq!(
        store.cancel("nope", &error).unwrap_err().kind,
        StoreErrorKind::UnknownRun
    );
    let point = CommitPoint {
        sent: vec![call(0, "search")],
        ..CommitPoint::default()
    };
    assert_eq!(
        store.commit("c", &me, &point).unwrap_err().kind,
        StoreErrorKind::Busy
    );
}

/// PostgreSQL's own refusals: a server that is down (an I/O error naming the URL without
/// its password), and a database a newer planvm wrote.
#[test]
fn a_database_down_or_newer_is_refused_and_no_password_is_said() {
    let e = PgStore::open(
        "postgres://planrt:sekrit-pw@127.0.0.1:1/x",
        Durability::Full,
    )
    .unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::Io);
    assert!(!e.message.contains("sekrit-pw"), "{}", e.message);
    assert!(
        e.message.contains("planrt:***@127.0.0.1:1"),
        "{}",
        e.message
    );
    let e = PgStore::open("postgres://[nonsense", Durability::Normal).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::NotAStore);

    let Some(pg) = Postgres::new() else {
        return;
    };
    drop(pg.open());
    pg.execute(
        "INSERT INTO planrt_migrations (version, name, applied_on, checksum) \
         VALUES (99, 'future', '2030-01-01T00:00:00Z', '0')",
    );
    // NB: a process checks at most once a second (a worker opens the store for each run
    // it takes): one that has not opened it yet at once, one that had within a second.
    let e = PgStore::open(&pg.url(), Durability::Full).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::NotAStore);
    assert!(e.message.contains("newer"), "{}", e.message);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let e = PgStore::open(&pg.url(), Durability::Normal).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::NotAStore);
    assert!(e.message.contains("newer"), "{}", e.message);
}

/// The migrations are applied all or none: a process killed, or a migration refused,
/// part-way leaves the schema as it was, and the database's own reason is said.
#[test]
fn a_schema_is_brought_up_to_date_whole_or_not_at_all() {
    let Some(pg) = Postgres::new() else {
        return;
    };
    // The last migration creates the index `goals_ready`; a table of that name refuses it.
    pg.execute("CREATE TABLE goals_ready (x int)");
    let e = PgStore::open(&pg.url(), Durability::Normal).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::Io);
    assert!(
        e.message
            .contains(r#"relation "goals_ready" already exists"#),
        "{}",
        e.message
    );
    let left = |table: &str| {
        pg.numbers(&format!(
            "SELECT count(*) FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_name = '{table}'"
        ))
    };
    assert_eq!(left("runs"), [Some(0)]);
    assert_eq!(
        pg.numbers("SELECT count(*) FROM planrt_migrations"),
        [Some(0)]
    );
    pg.execute("DROP TABLE goals_ready");
    drop(pg.open());
    assert_eq!(left("runs"), [Some(1)]);
}

/// Runs submitted are queued, held by nobody; each is taken once, oldest first, under a
/// token of its own; a submission with a taken id submits nothing; a run whose holder's
/// lease lapsed is ready again, one let go of too.
fn the_queue_gives_each_ready_run_to_one_taker(b: &dyn Backend) {
    let mut store = b.open();
    let runs = [new_run("q1"), new_run("q2"), new_run("q3")];
    store
        .submit(&runs.iter().map(OwnedNewRun::borrow).collect::<Vec<_>>())
        .unwrap();
    assert!(
        store
            .runs()
            .unwrap()
            .iter()
            .all(|r| r.status == RunStatus::Queued)
    );
    let e = store
        .submit(&[new_run("q4").borrow(), new_run("q1").borrow()])
        .unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::DuplicateRun);
    assert!(
        store.run("q4").is_err(),
        "nothing of a refused submission is kept"
    );

    let mut n = 0;
    let mut token = || {
        n += 1;
        Owner(format!("{}.w{n}", Owner::this_process().0))
    };
    let first = store.reserve(2, &mut token).unwrap();
    let ids: Vec<&str> = first.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["q1", "q2"]);
    assert_ne!(first[0].1, first[1].1, "a token per run");
    assert_eq!(store.run("q1").unwrap().status, RunStatus::Running);
    let rest = store.reserve(5, &mut token).unwrap();
    assert_eq!(rest.len(), 1);
    assert!(store.reserve(5, &mut token).unwrap().is_empty());

    // Held by a process elsewhere whose lease lapsed; let go of by this one.
    b.execute("UPDATE runs SET owner = 'elsewhere:1:x', lease_until = 1 WHERE id = 'q1'");
    store.release("q2", &first[1].1).unwrap();
    assert_eq!(store.run("q2").unwrap().status, RunStatus::Interrupted);
    let again: Vec<String> = store
        .reserve(5, &mut token)
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(again, ["q1", "q2"]);
    // The token a run was taken with fences its commits; an older holder's are refused.
    let point = CommitPoint {
        sent: vec![call(0, "search")],
        ..CommitPoint::default()
    };
    let e = store.commit("q2", &first[1].1, &point).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::Busy);
}

/// Pruning deletes the runs that ended before a time, with their journals; it keeps runs
/// still going, branched from, or given a person's verdict, and failed ones when asked.
fn pruning_deletes_old_ended_runs_and_keeps_what_others_need(b: &dyn Backend) {
    let mut store = b.open();
    let me = Owner::this_process();
    let end = |ok: bool| CommitPoint {
        sent: vec![call(0, "search")],
        end: Some(RunEnd {
            ok,
            question: None,
            final_answer: json!("done"),
            error: (!ok).then(|| json!({"code": "R0003"})),
            tool_calls: None,
            usage: None,
        }),
        ..CommitPoint::default()
    };
    for (id, ok) in [
        ("old", true),
        ("failed", false),
        ("judged", true),
        ("parent", true),
    ] {
        store.create_run(&new_run(id).borrow(), &me).unwrap();
        store.commit(id, &me, &end(ok)).unwrap();
    }
    let mut child = new_run("child");
    child.parent = Some(("parent".to_owned(), 0));
    store.create_run(&child.borrow(), &me).unwrap();
    store.commit("child", &me, &end(true)).unwrap();
    store.create_run(&new_run("going").borrow(), &me).unwrap();
    let verdict = Feedback {
        verdict: "good".into(),
        note: None,
        updated_at: 0,
    };
    store.set_feedback("judged", &verdict).unwrap();
    store.create_run(&new_run("recent").borrow(), &me).unwrap();
    store.commit("recent", &me, &end(true)).unwrap();
    b.execute("UPDATE runs SET updated_at = 1 WHERE id <> 'recent'");

    let ids = |store: &dyn RunStore| -> Vec<String> {
        let mut ids: Vec<String> = store.runs().unwrap().into_iter().map(|r| r.id).collect();
        ids.sort();
        ids
    };
    assert_eq!(store.prune(1_000, true).unwrap(), 2);
    assert_eq!(
        ids(&*store),
        ["failed", "going", "judged", "parent", "recent"]
    );
    assert_eq!(
        b.numbers("SELECT count(*) FROM journal WHERE run = 'old'"),
        [Some(0)]
    );
    // Its branch gone, a parent goes too; failed runs go unless kept.
    assert_eq!(store.prune(1_000, false).unwrap(), 2);
    assert_eq!(ids(&*store), ["going", "judged", "recent"]);
}
