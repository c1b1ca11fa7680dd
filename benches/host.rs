//! Host overhead per tool call with the replay backend: a plan of 100 tool calls run by
//! `plan_host::run_plan` on a tokio runtime from a zero-latency cassette, next to the
//! same program run in-process with an instant host (the difference is the host's cost),
//! and the same run journaled in a run store (SQLite, WAL, synchronous=NORMAL, a file in
//! a temporary directory): the difference is the store's cost per committed step.
//! Run: `cargo bench --bench host`.

mod common;

use std::io::Write;
use std::time::Duration;

use common::*;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use plan_host::{Host, HostOptions, Tracer, run_plan};
use plan_manifest::Manifest;
use plan_vm::Limits;
use serde_json::{Value, json};

const CALLS: usize = 100;

/// `CALLS` calls of `retrieve_knowledge_graph`, each reading the previous output (a
/// chain, so they run one after another as in the worst case), then `final_answer`.
fn chain_plan() -> String {
    let mut steps = Vec::new();
    for i in 0..CALLS {
        let query = if i == 0 {
            "q0".to_owned()
        } else {
            format!("q{i} ${{r{}}}", i - 1)
        };
        steps.push(json!({"seq_no": i, "type": "calling", "parameters": {
            "tool_name": "retrieve_knowledge_graph", "tool_params": {"query": query},
            "output_vars": [format!("r{i}")]}}));
    }
    steps.push(json!({"seq_no": CALLS, "type": "assign",
        "parameters": {"final_answer": format!("${{r{}}}", CALLS - 1)}}));
    Value::Array(steps).to_string()
}

fn host_overhead(c: &mut Criterion) {
    let program = compile_ok(&chain_plan(), true);
    let answer = json!("a");
    // The cassette: what the chain asks when every call answers "a".
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chain.cassette.jsonl");
    let mut f = std::fs::File::create(&path).unwrap();
    for i in 0..CALLS {
        let query = if i == 0 {
            "q0".to_owned()
        } else {
            format!("q{i} a")
        };
        let e = json!({"tool": "retrieve_knowledge_graph", "args": {"query": query},
            "output": answer, "latency_ms": 0});
        writeln!(f, "{e}").unwrap();
    }
    drop(f);
    let host = Host::new(
        Manifest::builtin(),
        HostOptions {
            replay: Some(path),
            ..HostOptions::default()
        },
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = rt.block_on(run_plan(
        &host,
        &program,
        vec![],
        Limits::default(),
        &mut Tracer::none(),
    ));
    assert!(report.is_ok(), "{:?}", report.error);
    assert_eq!(report.tool_calls, CALLS as u64);

    let mut g = c.benchmark_group("host_per_call");
    g.throughput(Throughput::Elements(CALLS as u64));
    g.bench_function("replay_run_plan", |b| {
        b.iter(|| {
            let mut tracer = Tracer::none();
            let r = rt.block_on(run_plan(
                &host,
                &program,
                vec![],
                Limits::default(),
                &mut tracer,
            ));
            debug_assert!(r.is_ok());
            r
        })
    });
    // NB: the same with each commit point in a store: an SQLite file, and PostgreSQL over
    // loopback at either durability (`full`: `synchronous_commit` on) when
    // PLANRT_TEST_POSTGRES names a server (`. scripts/postgres`).
    let pbc = plan_bytecode::encode(&program);
    let owner = plan_store::Owner::this_process();
    let presets = serde_json::Map::new();
    let limits = Limits::default();
    let db = dir.path().join("runs.db");
    let mut stores: Vec<(&str, Box<dyn plan_store::RunStore>)> = vec![(
        "replay_run_plan_store",
        Box::new(plan_store::SqliteStore::open(&db, plan_store::Durability::Normal).unwrap()),
    )];
    if let Ok(url) = std::env::var("PLANRT_TEST_POSTGRES") {
        for (durability, name) in [
            (
                plan_store::Durability::Normal,
                "replay_run_plan_store_postgres",
            ),
            (
                plan_store::Durability::Full,
                "replay_run_plan_store_postgres_full",
            ),
        ] {
            stores.push((
                name,
                Box::new(plan_store::PgStore::open(&url, durability).unwrap()),
            ));
        }
    }
    let batch = plan_store::new_run_id();
    let mut n = 0u64;
    for (name, mut store) in stores {
        g.bench_function(name, |b| {
            b.iter(|| {
                n += 1;
                let id = format!("{batch}.{n}");
                let new = plan_store::NewRun {
                    id: &id,
                    plan: "chain.json",
                    source: None,
                    pbc: &pbc,
                    presets: &presets,
                    limits: &limits,
                    parent: None,
                };
                store.create_run(&new, &owner).unwrap();
                let mut journal =
                    plan_store::StoreJournal::new(&mut *store, &id, owner.clone(), 0, &program);
                let r = rt.block_on(run_plan(
                    &host,
                    &program,
                    vec![],
                    Limits::default(),
                    &mut journal,
                ));
                debug_assert!(r.is_ok());
                r
            })
        });
    }
    g.bench_function("instant_in_process", |b| {
        b.iter(|| run_instant(&program, Limits::default(), &answer))
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50)
}

criterion_group! {
    name = benches;
    config = config();
    targets = host_overhead
}
criterion_main!(benches);
