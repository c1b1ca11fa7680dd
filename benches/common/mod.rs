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
