//! The run store's own costs, side by side: SQLite (a file in a temporary directory) and,
//! when PLANRT_TEST_POSTGRES names a server (`. scripts/postgres`), PostgreSQL over
//! loopback (a schema of its own per figure), each at `--durability normal` and `full`:
//!
//! - each commit point of a run timed alone (p50, p99, mean): a point as a chain of calls
//!   writes it (the call answered since the last point, the step that consumed it, the
//!   next call as sent; no saved state);
//! - the bytes a point adds, early in a run and late: flat, since a point holds what
//!   changed and never the run's history; and with outputs of one character, as the
//!   anchors' no-op steps (`scripts/anchor-bench`);
//! - claims per second from the queue (`reserve`), at batch sizes 1, 32 and 256, a queue
//!   of `CLAIMED` runs emptied by one taker.
//!
//! Prints one line per figure. Not criterion: percentiles of single commits, and queues
//! emptied once. Run: `cargo bench --bench store [-- POINTS]` (default 2,000 points a
//! run; 200 at `full` on PostgreSQL, whose commits wait for the disk).

mod common;

use std::time::{Duration, Instant};

use plan_store::{
    CallRow, CallState, CommitPoint, Durability, NewRun, Owner, PgStore, RunStore, SqliteStore,
    StepRow,
};
use serde_json::{Map, Value, json};

/// Runs in each queue the claims empty.
const CLAIMED: usize = 4_096;

/// What each call answers: a short retrieval's text, or (`tiny`) one character, as the
/// no-op steps of the anchors' benchmarks (`scripts/anchor-bench`) return.
fn text(i: u64, tiny: bool) -> String {
    if tiny {
        return "a".to_owned();
    }
    format!(
        "{i}: {}",
        "Retrieved passage about the question asked. ".repeat(6)
    )
}

/// Commit point `i` of a chain of calls.
fn point(i: u64, tiny: bool) -> CommitPoint {
    let call = |step: u64, state, output| CallRow {
        step,
        seq_no: i64::try_from(step).ok(),
        tool: "retrieve_knowledge_graph".into(),
        args: json!({"query": format!("q{step} about the question")})
            .as_object()
            .cloned()
            .unwrap_or_default(),
        state,
        output,
        error: None,
        latency_ms: Some(50),
        usage: None,
        attempts: None,
        sent_at: None,
    };
    let mut writes = Map::new();
    writes.insert(format!("r{i}"), Value::String(text(i, tiny)));
    CommitPoint {
        answered: vec![call(
            i,
            CallState::Answered,
            Some(Value::String(text(i, tiny))),
        )],
        steps: vec![StepRow {
            step: i,
            seq_no: i64::try_from(i).ok(),
            pc: u32::try_from(i).unwrap_or(u32::MAX),
            op: "call".into(),
            writes,
            omitted: Map::new(),
        }],
        committed: vec![i],
        sent: vec![call(i + 1, CallState::Inflight, None)],
        total_steps: i,
        ..CommitPoint::default()
    }
}

type EntryBytes = Box<dyn Fn(&str, std::ops::Range<i64>) -> Option<f64>>;

/// A store to measure, and how to read the bytes its journal holds.
struct Measured {
    name: String,
    /// None only while it is opened again.
    store: Option<Box<dyn RunStore>>,
    /// The bytes of the entries of run `id` with `seq` in the range, on average (None:
    /// not told by this backend).
    entry_bytes: EntryBytes,
    /// The bytes the whole store takes now.
    total_bytes: Box<dyn Fn() -> u64>,
    /// Opens the store again (SQLite: the last connection's close merges the WAL into
    /// the file, so that the file's size is what the store holds).
    reopen: Box<dyn Fn() -> Box<dyn RunStore>>,
    /// Removes what the measure left (a PostgreSQL schema), when it is dropped.
    cleanup: Option<Box<dyn FnOnce()>>,
}

impl Drop for Measured {
    fn drop(&mut self) {
        self.store = None;
        if let Some(cleanup) = self.cleanup.take() {
            cleanup();
        }
    }
}

impl Measured {
    fn store(&mut self) -> &mut dyn RunStore {
        &mut **self.store.as_mut().expect("open")
    }

    /// The bytes the store holds, its connection closed and opened again first.
    fn settled_bytes(&mut self) -> u64 {
        self.store = None;
        self.store = Some((self.reopen)());
        (self.total_bytes)()
    }
}

fn sqlite(dir: &std::path::Path, name: &str, durability: Durability) -> Measured {
    let path = dir.join(format!("{name}.db"));
    let files = SqliteStore::files(&path).to_vec();
    let reopen =
        move || -> Box<dyn RunStore> { Box::new(SqliteStore::open(&path, durability).unwrap()) };
    Measured {
        name: format!("sqlite {name}"),
        store: Some(reopen()),
        reopen: Box::new(reopen),
        cleanup: None,
        entry_bytes: Box::new(|_, _| None),
        total_bytes: Box::new(move || {
            files
                .iter()
                .filter_map(|f| std::fs::metadata(f).ok())
                .map(|m| m.len())
                .sum()
        }),
    }
}

/// A schema of its own in the server `admin` names.
fn postgres(admin: &str, name: &str, durability: Durability) -> Measured {
    let schema = format!("bench_{}", uuid_like());
    let mut client = postgres::Client::connect(admin, postgres::NoTls).unwrap();
    client
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .unwrap();
    let sep = if admin.contains('?') { '&' } else { '?' };
    let url = format!("{admin}{sep}options=-csearch_path%3D{schema}");
    let reopen =
        move || -> Box<dyn RunStore> { Box::new(PgStore::open(&url, durability).unwrap()) };
    let client = std::rc::Rc::new(std::cell::RefCell::new(client));
    let (c1, c2, c3) = (client.clone(), client.clone(), client);
    let (s1, s2, s3) = (schema.clone(), schema.clone(), schema);
    Measured {
        name: format!("postgres {name}"),
        store: Some(reopen()),
        reopen: Box::new(reopen),
        cleanup: Some(Box::new(move || {
            let _ = c3
                .borrow_mut()
                .batch_execute(&format!("DROP SCHEMA {s3} CASCADE"));
        })),
        entry_bytes: Box::new(move |id, seqs| {
            let sql = format!(
                "SELECT avg(pg_column_size(entry))::float8 FROM {s1}.journal \
                 WHERE run = $1 AND seq >= $2 AND seq < $3"
            );
            c1.borrow_mut()
                .query_one(&sql, &[&id, &seqs.start, &seqs.end])
                .ok()
                .and_then(|r| r.get(0))
        }),
        total_bytes: Box::new(move || {
            let sql = format!(
                "SELECT sum(pg_total_relation_size(c.oid))::int8 FROM pg_class c \
                 JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = '{s2}' AND c.relkind = 'r'"
            );
            let r = c2.borrow_mut().query_one(&sql, &[]).unwrap();
            u64::try_from(r.get::<_, i64>(0)).unwrap_or(0)
        }),
    }
}

fn uuid_like() -> String {
    plan_store::new_run_id().replace('-', "")
}

fn new_run<'a>(id: &'a str, pbc: &'a [u8], presets: &'a Map<String, Value>) -> NewRun<'a> {
    static LIMITS: std::sync::OnceLock<plan_vm::Limits> = std::sync::OnceLock::new();
    NewRun {
        id,
        plan: "chain.json",
        source: None,
        pbc,
        presets,
        limits: LIMITS.get_or_init(plan_vm::Limits::default),
        parent: None,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at].as_secs_f64() * 1e6
}

/// Commits `points` points of one run, each timed alone; prints the latencies and the
/// bytes per point (only those, for `tiny` outputs).
fn commits(m: &mut Measured, pbc: &[u8], points: u64, tiny: bool) {
    let owner = Owner::this_process();
    let presets = Map::new();
    let id = plan_store::new_run_id();
    m.store()
        .create_run(&new_run(&id, pbc, &presets), &owner)
        .unwrap();
    let before = m.settled_bytes();
    let made: Vec<CommitPoint> = (1..=points).map(|i| point(i, tiny)).collect();
    let mut took = Vec::with_capacity(made.len());
    for p in &made {
        let t = Instant::now();
        m.store().commit(&id, &owner, p).unwrap();
        took.push(t.elapsed());
    }
    let mean = took.iter().sum::<Duration>().as_secs_f64() * 1e6 / took.len() as f64;
    took.sort();
    let what = if tiny { ", outputs of 1 character" } else { "" };
    if !tiny {
        println!(
            "{:<18} commit point: p50 {:>8.1} µs  p99 {:>8.1} µs  mean {:>8.1} µs  ({points} points)",
            m.name,
            percentile(&took, 0.5),
            percentile(&took, 0.99),
            mean,
        );
    }
    let grown = m.settled_bytes().saturating_sub(before);
    let n = i64::try_from(points).unwrap_or(i64::MAX);
    let entries = match (
        (m.entry_bytes)(&id, 0..100),
        (m.entry_bytes)(&id, n - 100..n),
    ) {
        (Some(early), Some(late)) => {
            format!("; an entry {early:.0} B in its first 100 points, {late:.0} B in its last 100")
        }
        _ => String::new(),
    };
    println!(
        "{:<18} bytes a point{what}: {:.0} (the store grew {grown} B){entries}",
        m.name,
        grown as f64 / points as f64,
    );
}

/// Empties a queue of `CLAIMED` runs with `reserve(batch)`; prints claims per second.
fn claims(m: &mut Measured, pbc: &[u8], batch: usize) {
    let presets = Map::new();
    let prefix = plan_store::new_run_id();
    let ids: Vec<String> = (0..CLAIMED).map(|i| format!("{prefix}.{i}")).collect();
    let runs: Vec<NewRun<'_>> = ids.iter().map(|id| new_run(id, pbc, &presets)).collect();
    m.store().submit(&runs).unwrap();
    let mut taken = 0;
    let t = Instant::now();
    loop {
        let got = m.store().reserve(batch, &mut Owner::for_run).unwrap();
        if got.is_empty() {
            break;
        }
        taken += got.len();
    }
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(taken, CLAIMED, "every queued run is claimed once");
    println!(
        "{:<18} claims, batches of {batch:>3}: {:>9.0} runs/s",
        m.name,
        taken as f64 / secs
    );
}

fn main() {
    let points: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2_000)
        .max(200);
    let pbc = plan_bytecode::encode(&common::compile_ok(common::SMALL, true));
    let dir = tempfile::tempdir().unwrap();
    let pg = std::env::var("PLANRT_TEST_POSTGRES").ok();
    if pg.is_none() {
        println!("(PLANRT_TEST_POSTGRES unset: SQLite only; `. scripts/postgres` starts a server)");
    }
    for (name, durability) in [("normal", Durability::Normal), ("full", Durability::Full)] {
        let mut m = sqlite(dir.path(), name, durability);
        commits(&mut m, &pbc, points, false);
        if durability == Durability::Normal {
            commits(&mut m, &pbc, 1_000, true);
        }
        if let Some(admin) = &pg {
            let mut m = postgres(admin, name, durability);
            let n = if durability == Durability::Full {
                points.min(200)
            } else {
                points
            };
            commits(&mut m, &pbc, n, false);
            if durability == Durability::Normal {
                commits(&mut m, &pbc, 1_000, true);
            }
        }
    }
    for batch in [1, 32, 256] {
        claims(
            &mut sqlite(dir.path(), &format!("q{batch}"), Durability::Normal),
            &pbc,
            batch,
        );
        if let Some(admin) = &pg {
            claims(
                &mut postgres(admin, "normal", Durability::Normal),
                &pbc,
                batch,
            );
        }
    }
}
