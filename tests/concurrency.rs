//! Independent tool calls run concurrently through the real host (issue 4): the plan with
//! 4 aspects × (knowledge graph, vector search → synthesis) → final synthesis makes 13
//! calls of 300 ms replay latency each. Its critical path is 3 calls (0.9 s); run one
//! call at a time it takes 3.9 s. On paused time both durations are exact: the concurrent
//! run must take the critical path and give the sequential result.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use plan_bytecode::ValidatedProgram;
use plan_compiler::{CompileOptions, compile};
use plan_host::{CassetteEntry, Host, HostOptions, RunReport, Tracer, run_plan};
use plan_manifest::Manifest;
use plan_vm::{Halt, Limits, ToolRequest, Vm};
use serde_json::{Value, json};

const LATENCY_MS: u64 = 300;
/// The 14-step plan of the seed specification's example, shared with the benches and the
/// batch test: reasoning, 4 aspects × (knowledge graph, vector search, synthesis), then a
/// final synthesis. 13 calls; critical path 3.
const PLAN: &str = include_str!("corpus/valid/current_retrieval.json");

fn program() -> ValidatedProgram {
    let compiled = compile(PLAN, &CompileOptions::default());
    let program = compiled
        .program
        .unwrap_or_else(|| panic!("plan does not compile: {:#?}", compiled.diagnostics));
    plan_bytecode::validate(program).expect("compiled program validates")
}

fn output(r: &ToolRequest) -> Value {
    let n = r.args.values().map(|v| v.to_string().len()).sum::<usize>();
    json!(format!("{} result ({n} bytes of args)", r.tool))
}

/// Runs the plan once in memory, one call at a time, and writes every call it makes as
/// a cassette entry with `LATENCY_MS` of latency.
fn write_cassette(prog: &ValidatedProgram, path: &Path) -> Value {
    let limits = Limits {
        max_concurrency: 1,
        ..Limits::default()
    };
    let mut vm = Vm::new(prog, limits);
    let mut lines = String::new();
    let answer = loop {
        match vm.run() {
            Halt::Yield(reqs) => {
                for r in reqs {
                    let entry = CassetteEntry {
                        tool: r.tool.to_string(),
                        args: r.args.to_map(),
                        output: output(&r),
                        step: Some(r.instance),
                        latency_ms: Some(LATENCY_MS),
                        usage: None,
                    };
                    lines.push_str(&serde_json::to_string(&entry).expect("entry serializes"));
                    lines.push('\n');
                    vm.resume(r.id, Ok(output(&r))).expect("known request");
                }
            }
            Halt::Done(o) => break o.final_answer,
            Halt::Failed(e) => panic!("{e}"),
        }
    };
    assert_eq!(lines.lines().count(), 13);
    std::fs::write(path, lines).expect("write cassette");
    answer
}

async fn timed_run(
    host: &Host,
    prog: &ValidatedProgram,
    max_concurrency: u32,
) -> (RunReport, Duration, Vec<Value>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let mut tracer = Tracer::none().with_observer(Box::new(move |ev: &Value| {
        if let Ok(mut v) = sink.lock() {
            v.push(ev.clone());
        }
    }));
    let limits = Limits {
        max_concurrency,
        ..Limits::default()
    };
    let start = tokio::time::Instant::now();
    let report = run_plan(host, prog, vec![], limits, &mut tracer).await;
    let took = start.elapsed();
    let events = events.lock().map(|v| v.clone()).unwrap_or_default();
    (report, took, events)
}

/// Most calls in flight at once, from the host's start/end events.
fn peak_in_flight(events: &[Value]) -> usize {
    let (mut now, mut peak) = (0usize, 0usize);
    for ev in events {
        match ev["event"].as_str() {
            Some("tool_call_start") => {
                now += 1;
                peak = peak.max(now);
            }
            Some("tool_call_end") => now = now.saturating_sub(1),
            _ => {}
        }
    }
    peak
}

/// On paused time (the driver's clock is tokio's): durations are exact, whatever the
/// machine's load.
#[tokio::test(start_paused = true)]
async fn four_aspects_run_on_the_critical_path() {
    let prog = program();
    let dir = tempfile::tempdir().expect("temp dir");
    let cassette = dir.path().join("aspects.jsonl");
    let want = write_cassette(&prog, &cassette);
    let host = Host::new(
        Manifest::builtin(),
        HostOptions {
            replay: Some(cassette),
            ..HostOptions::default()
        },
    )
    .expect("host");

    let (report, took, events) = timed_run(&host, &prog, 16).await;
    assert!(report.is_ok(), "{:?}", report.error);
    assert_eq!(report.final_answer, want);
    assert_eq!(report.tool_calls, 13);
    assert_eq!(report.steps, 14, "13 calls and the reasoning note");
    eprintln!(
        "concurrent: {} ms wall for 13 calls of {LATENCY_MS} ms (critical path {} ms)",
        took.as_millis(),
        3 * LATENCY_MS
    );
    // Exactly the critical path: retrieval, synthesis, final synthesis.
    assert_eq!(took, Duration::from_millis(3 * LATENCY_MS));
    // The 8 retrievals overlap; then the 4 syntheses.
    assert_eq!(peak_in_flight(&events), 8);
    // The VM's own step events stay in program order.
    let steps: Vec<i64> = events
        .iter()
        .filter(|e| e["event"] == "step")
        .filter_map(|e| e["seq_no"].as_i64())
        .collect();
    assert_eq!(steps, (0..14).collect::<Vec<_>>());

    // One call at a time: the same answer, the sequential time.
    let (seq_report, seq_took, seq_events) = timed_run(&host, &prog, 1).await;
    eprintln!("sequential: {} ms wall", seq_took.as_millis());
    assert_eq!(seq_report.final_answer, report.final_answer);
    assert_eq!(seq_report.vars, report.vars);
    assert_eq!(peak_in_flight(&seq_events), 1);
    assert_eq!(seq_took, Duration::from_millis(13 * LATENCY_MS));
}
