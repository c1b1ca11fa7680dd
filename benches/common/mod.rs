//! Plans and helpers shared by the bench targets (included with `mod common;`).
#![allow(dead_code)]

use plan_bytecode::ValidatedProgram;
use plan_compiler::{CompileOptions, compile};
use plan_vm::{Halt, Limits, Outcome, Vm};
use serde_json::{Value, json};

/// The 14-step plan of the issue: reasoning, 4 aspects × (knowledge graph, vector search,
/// llm_generate), then a final llm_generate (the reference Python VM needs ~2.65 ms/run).
pub(crate) const FOURTEEN_STEP: &str =
    include_str!("../../tests/corpus/valid/current_retrieval.json");

/// A small plan: a counted loop with an LLM condition.
pub(crate) const SMALL: &str = include_str!("../../tests/corpus/valid/jmp_loop.json");

/// 30 `assign`s of templates and arithmetic (the reference Python VM needs ~3.27 ms/run).
pub(crate) fn thirty_assigns() -> String {
    let mut steps = vec![json!({"seq_no": 0, "type": "assign",
        "parameters": {"name": "Alice", "n": 1, "t0": "start"}})];
    for i in 1..29 {
        let p = if i % 2 == 1 {
            json!({ "n": format!("${{n}} * 2 + {i}"), "r": format!("(${{n}} + {i}) / 4") })
        } else {
            json!({ format!("t{i}"): format!("Step {i}: ${{name}} has n=${{n}}, r=${{r}}") })
        };
        steps.push(json!({"seq_no": i, "type": "assign", "parameters": p}));
    }
    steps.push(json!({"seq_no": 29, "type": "assign",
        "parameters": {"final_answer": "${t28} (n = ${n})"}}));
    serde_json::to_string_pretty(&Value::Array(steps)).unwrap()
}

/// A plan of about `n` instructions: blocks of a tool call, a multi-variable assign with a
/// template and arithmetic, and a conditional jump, as LLM plans look.
pub(crate) fn generated(n: usize) -> String {
    let mut steps = vec![json!({"seq_no": 0, "type": "reasoning", "parameters": {
        "chain_of_thoughts": "Generated benchmark plan.", "dependency_analysis": "chain"}})];
    let mut seq = 1;
    while seq + 3 < n {
        steps.push(json!({"seq_no": seq, "type": "calling", "parameters": {
            "tool_name": "vector_search",
            "tool_params": {"query": format!("question {seq} about ${{topic_{}}}", seq.saturating_sub(4)), "top_k": 3},
            "output_vars": [format!("topic_{seq}")]}}));
        steps.push(json!({"seq_no": seq + 1, "type": "assign", "parameters": {
            format!("count_{seq}"): format!("{seq} * 2 + 1"),
            format!("label_{seq}"): format!("Result ${{topic_{seq}}} #{seq}")}}));
        steps.push(json!({"seq_no": seq + 2, "type": "jmp", "parameters": {
            "condition_prompt": format!("Is ${{label_{seq}}} enough?"), "context": null,
            "jump_if_true": seq + 3, "jump_if_false": seq + 3}}));
        seq += 3;
    }
    steps.push(json!({"seq_no": seq, "type": "assign",
        "parameters": {"final_answer": format!("${{label_{}}}", seq - 3)}}));
    serde_json::to_string_pretty(&Value::Array(steps)).unwrap()
}

pub(crate) fn compile_ok(src: &str, strip: bool) -> ValidatedProgram {
    let opts = CompileOptions {
        strip,
        ..CompileOptions::default()
    };
    let c = compile(src, &opts);
    let p = c
        .program
        .unwrap_or_else(|| panic!("bench plan must compile: {:?}", c.diagnostics));
    plan_bytecode::validate(p).expect("compiler output validates")
}

/// Runs a program to completion with an instant host answering every request with
/// `answer` (conditions with "true"/"false" from `cond`).
pub(crate) fn run_instant(program: &ValidatedProgram, limits: Limits, answer: &Value) -> Outcome {
    let mut vm = Vm::new(program, limits);
    loop {
        match vm.run() {
            Halt::Yield(reqs) => {
                for r in reqs {
                    let a = match r.kind {
                        plan_vm::RequestKind::Condition => json!(false),
                        plan_vm::RequestKind::Tool { .. } => answer.clone(),
                    };
                    vm.resume(r.id, Ok(a)).expect("resume");
                }
            }
            Halt::Done(o) => return o,
            Halt::Failed(e) => panic!("bench run failed: {e}"),
        }
    }
}

/// The 14-step plan's cassette at `latency_ms` a call: each call answered as
/// [`run_instant`] answers it, recorded in the order a run one call at a time makes them.
pub(crate) fn fourteen_step_cassette(latency_ms: u64) -> String {
    let program = compile_ok(FOURTEEN_STEP, false);
    let limits = Limits {
        max_concurrency: 1,
        ..Limits::default()
    };
    let mut vm = Vm::new(&program, limits);
    let mut lines = String::new();
    loop {
        match vm.run() {
            Halt::Yield(reqs) => {
                for r in reqs {
                    let output = json!(format!("{} answer", r.tool));
                    let entry = json!({"tool": r.tool, "args": r.args, "output": output,
                                       "latency_ms": latency_ms});
                    lines.push_str(&format!("{entry}\n"));
                    vm.resume(r.id, Ok(output)).expect("resume");
                }
            }
            Halt::Done(_) => return lines,
            Halt::Failed(e) => panic!("bench run failed: {e}"),
        }
    }
}

/// `runs` runs of the 14-step plan replayed at `latency_ms` a call, `jobs` at a time,
/// through the batch engine as `planvm batch --list` runs them (in `dir`: the plan, its
/// cassette and, when `store`, a run store); how many ended ok.
pub(crate) async fn batch_of_fourteen_step(
    dir: &std::path::Path,
    runs: usize,
    latency_ms: u64,
    jobs: usize,
    store: bool,
) -> u64 {
    use std::sync::Arc;
    let plan = dir.join("aspects.json");
    let cassette = dir.join(format!("aspects.{latency_ms}ms.jsonl"));
    std::fs::write(&plan, FOURTEEN_STEP).unwrap();
    std::fs::write(&cassette, fourteen_step_cassette(latency_ms)).unwrap();
    let mut list: Vec<plan_runs::batch::Job> = (0..runs)
        .map(|i| plan_runs::batch::Job {
            plan: plan.clone(),
            cassette: Some(cassette.clone()),
            vars: Vec::new(),
            line: Some(i + 1),
            name: String::new(),
        })
        .collect();
    plan_runs::batch::name_runs(&mut list);
    let manifest = plan_manifest::Manifest::builtin();
    let options = plan_host::HostOptions::default();
    let host = plan_host::Host::new(manifest.clone(), options.clone()).unwrap();
    let batch = plan_runs::batch::Batch {
        manifest,
        host: Arc::new(host),
        host_options: options,
        limits: Limits::default(),
        vars: Vec::new(),
        replay: None,
        record_dir: None,
        trace_dir: None,
        jobs,
        telemetry: None,
    };
    let mut stored = store.then(|| {
        let setup = plan_runs::batch::BatchStore {
            at: plan_runs::StoreAt::new(dir.join("s.db"), plan_store::Durability::Normal),
            batch_id: "B".into(),
            resume: false,
            retry_unknown_writes: false,
        };
        setup.open(&list, &[], |e| panic!("{e}")).unwrap()
    });
    let tally = plan_runs::batch::run(&batch, stored.as_mut(), list, &mut |_| {}).await;
    if let Some(s) = stored {
        s.close();
    }
    tally.ok
}
