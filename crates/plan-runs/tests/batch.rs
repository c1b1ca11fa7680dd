//! The batch engine in-process, on tokio's paused clock: a replayed call's latency is a
//! timer, so the virtual time a batch takes is its critical path when its runs and their
//! calls overlap, and their sum when they do not: counted, not timed, whatever the load.

use std::sync::Arc;
use std::time::Duration;

use plan_bytecode::ValidatedProgram;
use plan_compiler::{CompileOptions, compile};
use plan_host::{Host, HostOptions, ReplayBackend};
use plan_manifest::Manifest;
use plan_runs::batch::{Batch, Event, name_runs, read_list, run};
use plan_vm::{Halt, Limits, ToolRequest, Vm};
use serde_json::{Value, json};

/// The 14-step plan shared with the workspace tests and benches: 4 aspects × (knowledge
/// graph, vector search → synthesis) → final synthesis: 13 calls, critical path 3 calls.
const ASPECTS_PLAN: &str = include_str!("../../../tests/corpus/valid/current_retrieval.json");

fn program(src: &str) -> ValidatedProgram {
    let compiled = compile(src, &CompileOptions::default());
    let program = compiled
        .program
        .unwrap_or_else(|| panic!("plan does not compile: {:#?}", compiled.diagnostics));
    plan_bytecode::validate(program).expect("compiled program validates")
}

fn output(r: &ToolRequest) -> Value {
    json!(format!("{} answer for seq_no {:?}", r.tool, r.seq_no))
}

/// Runs the program in memory one call at a time and returns its calls as cassette
/// lines with `latency_ms`, and the final answer.
fn cassette_for(prog: &ValidatedProgram, latency_ms: u64) -> (String, Value) {
    let limits = Limits {
        max_concurrency: 1,
        ..Limits::default()
    };
    let mut vm = Vm::new(prog, limits);
    let mut lines = String::new();
    loop {
        match vm.run() {
            Halt::Yield(reqs) => {
                for r in reqs {
                    let e = json!({"tool": r.tool, "args": r.args, "output": output(&r),
                                   "latency_ms": latency_ms});
                    lines.push_str(&format!("{e}\n"));
                    vm.resume(r.id, Ok(output(&r))).expect("known request");
                }
            }
            Halt::Done(o) => return (lines, o.final_answer),
            Halt::Failed(e) => panic!("{e}"),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_thousand_runs_of_thirteen_slow_calls_take_one_critical_path() {
    const RUNS: usize = 1000;
    const LATENCY_MS: u64 = 300;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (cassette, answer) = cassette_for(&program(ASPECTS_PLAN), LATENCY_MS);
    assert_eq!(cassette.lines().count(), 13);
    std::fs::write(d.join("aspects.json"), ASPECTS_PLAN).unwrap();
    let tape = d.join("aspects.cassette.jsonl");
    std::fs::write(&tape, cassette).unwrap();
    std::fs::write(d.join("runs.txt"), "aspects.json\n".repeat(RUNS)).unwrap();
    let mut jobs = read_list(&d.join("runs.txt")).unwrap();
    name_runs(&mut jobs);
    let manifest = Manifest::builtin();
    let batch = Batch {
        host: Arc::new(Host::new(manifest.clone(), HostOptions::default()).unwrap()),
        manifest,
        host_options: HostOptions::default(),
        limits: Limits::default(),
        vars: Vec::new(),
        replay: Some((tape.clone(), Arc::new(ReplayBackend::load(&tape).unwrap()))),
        record_dir: None,
        trace_dir: None,
        jobs: RUNS,
        telemetry: None,
    };
    let mut reports = Vec::new();
    let began = tokio::time::Instant::now();
    let tally = run(&batch, None, jobs, &mut |e| {
        if let Event::Finished(f) = e {
            reports.push(f.report.clone());
        }
    })
    .await;
    let took = began.elapsed();
    assert_eq!((tally.runs, tally.ok), (RUNS as u64, RUNS as u64));
    assert_eq!(reports.len(), RUNS);
    for r in &reports {
        assert!(r.is_ok(), "{:?}", r.error);
        assert_eq!(r.final_answer, answer);
        assert_eq!(r.tool_calls, 13);
        // Each run overlaps its own calls: its three-call critical path, not its 13 calls.
        assert_eq!(r.elapsed_ms, 3 * LATENCY_MS, "{r:?}");
    }
    // The runs overlap each other too: one critical path for all, where one after another
    // they would take 1,000 of them (900 s).
    assert_eq!(took, Duration::from_millis(3 * LATENCY_MS));
}
