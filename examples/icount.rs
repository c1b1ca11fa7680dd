//! Fixed work for counting instructions (BENCHMARKS.md, "Instruction counts"): runs one
//! bench plan N times in-process with an instant host and prints the steps it took.
//! Under `valgrind --tool=cachegrind` the count is the same whatever else the machine
//! does, where criterion's times are not.
//!
//! `icount 30 N`: the 30-assign plan; `icount 14 N` (or anything else): the 14-step plan;
//! `icount compile N`: compiling the 14-step plan (`planc check`'s work), N times;
//! `icount compile-small N`: the same for the small plan of `compile/planc/small`;
//! `icount batch N` and `icount batch-store N`: N zero-latency replayed runs of the
//! 14-step plan through the batch engine (64 at a time, one thread; with a run store),
//! as `planvm batch --list` runs them.
//!
//! Two inputs that were once quadratic, each per unit of input, so that a quadratic
//! version shows as a per-unit count that grows with N: `icount brackets N` reads a
//! reply of N `[x ` (prose full of candidate plans, each failing at once), and
//! `icount objects N` looks for the first JSON object in texts of N repeats of four
//! unclosed or never-ending openings.

#[path = "../benches/common/mod.rs"]
mod common;

use plan_vm::Limits;
use serde_json::json;

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_default();
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    if let Some(src) = match which.as_str() {
        "compile" => Some(common::FOURTEEN_STEP),
        "compile-small" => Some(common::SMALL),
        _ => None,
    } {
        // NB: as `compile/planc/*` measures it: options made once, no validation.
        let opts = plan_compiler::CompileOptions::default();
        let instrs: usize = (0..n)
            .map(|_| {
                let c = plan_compiler::compile(src, &opts);
                c.program.map_or(0, |p| p.code.len())
            })
            .sum();
        println!("{n} compiles, {instrs} instructions");
        return;
    }
    match which.as_str() {
        "brackets" => {
            let read = plan_syntax::read(&"[x ".repeat(n));
            println!("{n} brackets, a plan found: {}", read.value.is_some());
            return;
        }
        "objects" => {
            let texts = [
                "{".repeat(n),
                "{\"a\":[".repeat(n),
                "{\"".repeat(n),
                format!("{}{{\"found\": 1}}", "{\"k\": \"v\", ".repeat(n)),
            ];
            let found = texts
                .iter()
                .filter(|t| plan_value::extract_first_object(t).is_some())
                .count();
            println!("4 texts of {n} openings, {found} objects found");
            return;
        }
        _ => {}
    }
    if let Some(store) = match which.as_str() {
        "batch" => Some(false),
        "batch-store" => Some(true),
        _ => None,
    } {
        let dir = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let ok = runtime.block_on(common::batch_of_fourteen_step(dir.path(), n, 0, 64, store));
        println!("{n} batch runs, {ok} ok");
        return;
    }
    let src = if which == "30" {
        common::thirty_assigns()
    } else {
        common::FOURTEEN_STEP.to_owned()
    };
    let program = common::compile_ok(&src, false);
    let answer = json!("A short instant tool answer.");
    let steps: u64 = (0..n)
        .map(|_| common::run_instant(&program, Limits::default(), &answer).steps)
        .sum();
    println!("{n} runs, {steps} steps");
}
