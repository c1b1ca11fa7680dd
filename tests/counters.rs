//! Heap counters against the thresholds kept in `benches/counters.json`: allocations per
//! run, per compile and per batch run, and peak heap bytes per batch run in flight. The
//! counts are the same on a busy machine as on a quiet one (paused time, one thread), so
//! a regression of more than the file's tolerance fails here, where a timing would not.
//! `scripts/counters` checks the instruction counts of the same work (cachegrind).
//!
//! A change that moves a figure on purpose updates its threshold in the same commit,
//! with the reason. Figures are of a test build (`cargo test`): a release build's futures
//! are smaller.

#[path = "../benches/common/mod.rs"]
mod common;

use plan_vm::Limits;
use serde_json::{Value, json};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// Allocations made by `work`, once.
fn blocks(work: impl FnOnce()) -> u64 {
    let before = dhat::HeapStats::get().total_blocks;
    work();
    dhat::HeapStats::get().total_blocks - before
}

/// Allocations per unit of `work(n)`: the difference between 2n and n units, over n (what
/// the work does once, whatever its number, cancels out).
fn per_unit(n: usize, work: impl Fn(usize)) -> f64 {
    let one = blocks(|| work(n));
    let two = blocks(|| work(2 * n));
    (two as f64 - one as f64) / n as f64
}

fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
}

/// `runs` runs of the 14-step plan through the batch engine on paused time, `jobs` at a
/// time, `latency_ms` a call; all must end ok.
fn batch(runs: usize, latency_ms: u64, jobs: usize, store: bool) {
    let dir = tempfile::tempdir().unwrap();
    let ok = paused_runtime().block_on(common::batch_of_fourteen_step(
        dir.path(),
        runs,
        latency_ms,
        jobs,
        store,
    ));
    assert_eq!(ok, runs as u64);
}

/// The peak heap of a batch of `runs` runs, all in flight at once (300 ms a call), over
/// the process's peak so far.
fn batch_peak(runs: usize) -> u64 {
    batch(runs, 300, runs, false);
    dhat::HeapStats::get().max_bytes as u64
}

#[test]
fn heap_counters_stay_within_their_thresholds() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let mut figures = Vec::new();
    // NB: first, while the process's peak is still its own: the peak only grows.
    let one = batch_peak(1);
    let many = batch_peak(201);
    figures.push(("peak_bytes_per_run_in_flight", (many - one) as f64 / 200.0));

    let fourteen = common::compile_ok(common::FOURTEEN_STEP, false);
    let thirty = common::compile_ok(&common::thirty_assigns(), false);
    let answer = json!("A short instant tool answer.");
    let runs = |program: &plan_bytecode::ValidatedProgram, n| {
        for _ in 0..n {
            common::run_instant(program, Limits::default(), &answer);
        }
    };
    figures.push((
        "allocations_per_14_step_run",
        per_unit(50, |n| runs(&fourteen, n)),
    ));
    figures.push((
        "allocations_per_30_assigns_run",
        per_unit(50, |n| runs(&thirty, n)),
    ));
    figures.push((
        "allocations_per_14_step_compile",
        per_unit(20, |n| {
            let opts = plan_compiler::CompileOptions::default();
            for _ in 0..n {
                assert!(
                    plan_compiler::compile(common::FOURTEEN_STEP, &opts)
                        .program
                        .is_some()
                );
            }
        }),
    ));
    figures.push((
        "allocations_per_batch_run",
        per_unit(100, |n| batch(n, 0, 64, false)),
    ));
    figures.push((
        "allocations_per_batch_run_stored",
        per_unit(100, |n| batch(n, 0, 64, true)),
    ));
    check(&figures);
}

/// Each figure against its threshold in `benches/counters.json`: all of them printed,
/// and the test failed if any is over its threshold by more than the file's tolerance.
fn check(figures: &[(&str, f64)]) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/counters.json");
    let text = std::fs::read_to_string(path).unwrap();
    let file: Value = serde_json::from_str(&text).unwrap();
    let tolerance = file["tolerance"].as_f64().unwrap();
    let mut over = Vec::new();
    for (name, figure) in figures {
        let limit = file["heap"][name]["threshold"]
            .as_f64()
            .unwrap_or_else(|| panic!("{path}: no heap.{name}.threshold"));
        let tolerance = file["heap"][name]["tolerance"]
            .as_f64()
            .unwrap_or(tolerance);
        let ok = *figure <= limit * (1.0 + tolerance);
        eprintln!(
            "{name:36} {figure:>10.1}  threshold {limit:>10.1}  {}",
            if ok { "ok" } else { "OVER" }
        );
        if !ok {
            over.push(format!("{name}: {figure:.1} > {limit} + {tolerance}"));
        }
    }
    assert!(over.is_empty(), "over their thresholds: {over:?}");
}
