//! Scheduling: wall time against the critical path when independent tool calls run
//! concurrently, through the real host (`plan_host::run_plan`, replay backend, tokio).
//!
//! Two plans, every call answered from a cassette after `LATENCY_MS`:
//! - `aspects`: the 14-step plan (`common::FOURTEEN_STEP`): 4 aspects × (knowledge graph,
//!   vector search → synthesis) → final synthesis: 13 calls, critical path 3 calls.
//! - `chains`: 2 independent chains of 6 dependent calls: 12 calls, critical path 6.
//!
//! Each is run concurrently (default `max_concurrency`) and one call at a time
//! (`max_concurrency = 1`). Before criterion's samples, a direct measurement prints
//! wall / critical path for both. Latencies are short (20 ms) so criterion's 10 samples
//! stay quick; the ratio, not the absolute time, is the result.
//! Run: `cargo bench --bench schedule`.

use std::path::Path;
use std::time::{Duration, Instant};

mod common;

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use plan_bytecode::ValidatedProgram;
use plan_compiler::{CompileOptions, compile};
use plan_host::{Host, HostOptions, Tracer, run_plan};
use plan_manifest::Manifest;
use plan_vm::{Halt, Limits, ToolRequest, Vm};
use serde_json::{Value, json};

const LATENCY_MS: u64 = 20;
const CHAINS: usize = 2;
const CHAIN_LEN: usize = 6;

/// `CHAINS` chains, interleaved in program order, each call reading its predecessor.
fn chains_plan() -> String {
    let mut instrs = vec![json!({"seq_no": 0, "type": "reasoning", "parameters": {
        "chain_of_thoughts": "Follow two independent lines of inquiry step by step.",
        "dependency_analysis": "Each step needs the previous step of its own chain."}})];
    let mut seq = 1;
    for j in 0..CHAIN_LEN {
        for c in 0..CHAINS {
            let query = if j == 0 {
                format!("chain {c} start")
            } else {
                format!("chain {c} step {j} after ${{c{c}_{}}}", j - 1)
            };
            instrs.push(json!({"seq_no": seq, "type": "calling", "parameters": {
                "tool_name": "retrieve_knowledge_graph",
                "tool_params": {"query": query},
                "output_vars": [format!("c{c}_{j}")]}}));
            seq += 1;
        }
    }
    let last: Vec<String> = (0..CHAINS)
        .map(|c| format!("${{c{c}_{}}}", CHAIN_LEN - 1))
        .collect();
    instrs.push(json!({"seq_no": seq, "type": "assign",
        "parameters": {"final_answer": last.join(" | ")}}));
    Value::Array(instrs).to_string()
}

fn program(src: &str) -> ValidatedProgram {
    let compiled = compile(src, &CompileOptions::default());
    let program = compiled
        .program
        .unwrap_or_else(|| panic!("plan does not compile: {:#?}", compiled.diagnostics));
    plan_bytecode::validate(program).expect("compiled program validates")
}

fn output(r: &ToolRequest) -> Value {
    json!(format!("{} answer {:?}", r.tool, r.seq_no))
}

/// Runs the program in memory one call at a time and writes its calls as a cassette
/// with `LATENCY_MS` each; returns the number of calls.
fn write_cassette(prog: &ValidatedProgram, path: &Path) -> usize {
    let mut vm = Vm::new(
        prog,
        Limits {
            max_concurrency: 1,
            ..Limits::default()
        },
    );
    let mut lines = String::new();
    let mut calls = 0;
    loop {
        match vm.run() {
            Halt::Yield(reqs) => {
                for r in reqs {
                    calls += 1;
                    let e = json!({"tool": r.tool, "args": r.args, "output": output(&r),
                                   "latency_ms": LATENCY_MS});
                    lines.push_str(&format!("{e}\n"));
                    vm.resume(r.id, Ok(output(&r))).expect("known request");
                }
            }
            Halt::Done(_) => break,
            Halt::Failed(e) => panic!("{e}"),
        }
    }
    std::fs::write(path, lines).expect("write cassette");
    calls
}

struct Case {
    name: &'static str,
    program: ValidatedProgram,
    host: Host,
    calls: usize,
    /// Calls on the longest dependency chain.
    critical: usize,
}

fn case(name: &'static str, src: &str, critical: usize, dir: &Path) -> Case {
    let program = program(src);
    let cassette = dir.join(format!("{name}.cassette.jsonl"));
    let calls = write_cassette(&program, &cassette);
    let host = Host::new(
        Manifest::builtin(),
        HostOptions {
            replay: Some(cassette),
            ..HostOptions::default()
        },
    )
    .expect("host");
    Case {
        name,
        program,
        host,
        calls,
        critical,
    }
}

fn run_once(rt: &tokio::runtime::Runtime, c: &Case, max_concurrency: u32) -> Duration {
    let limits = Limits {
        max_concurrency,
        ..Limits::default()
    };
    let start = Instant::now();
    let r = rt.block_on(run_plan(
        &c.host,
        &c.program,
        vec![],
        limits,
        &mut Tracer::none(),
    ));
    let took = start.elapsed();
    assert!(r.is_ok(), "{}: {:?}", c.name, r.error);
    assert_eq!(r.tool_calls, c.calls as u64);
    took
}

fn median(rt: &tokio::runtime::Runtime, c: &Case, max_concurrency: u32) -> Duration {
    let mut t: Vec<Duration> = (0..7).map(|_| run_once(rt, c, max_concurrency)).collect();
    t.sort();
    t[t.len() / 2]
}

fn schedule(cr: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        case("aspects", common::FOURTEEN_STEP, 3, dir.path()),
        case("chains", &chains_plan(), CHAIN_LEN, dir.path()),
    ];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let default = Limits::default().max_concurrency;

    for c in &cases {
        let critical = Duration::from_millis(c.critical as u64 * LATENCY_MS);
        let all = Duration::from_millis(c.calls as u64 * LATENCY_MS);
        let conc = median(&rt, c, default);
        let seq = median(&rt, c, 1);
        eprintln!(
            "schedule/{}: {} calls × {LATENCY_MS} ms, critical path {} calls = {} ms; \
             concurrent {:.1} ms (wall / critical path {:.3}); \
             sequential {:.1} ms (wall / sum of calls {:.3}, {:.2}× the concurrent wall)",
            c.name,
            c.calls,
            c.critical,
            critical.as_millis(),
            conc.as_secs_f64() * 1e3,
            conc.as_secs_f64() / critical.as_secs_f64(),
            seq.as_secs_f64() * 1e3,
            seq.as_secs_f64() / all.as_secs_f64(),
            seq.as_secs_f64() / conc.as_secs_f64(),
        );
    }

    let mut g = cr.benchmark_group("schedule");
    g.sampling_mode(SamplingMode::Flat);
    for c in &cases {
        g.bench_function(format!("{}/concurrent", c.name), |b| {
            b.iter(|| run_once(&rt, c, default))
        });
        g.bench_function(format!("{}/sequential", c.name), |b| {
            b.iter(|| run_once(&rt, c, 1))
        });
    }
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(10)
}

criterion_group! {
    name = benches;
    config = config();
    targets = schedule
}
criterion_main!(benches);
