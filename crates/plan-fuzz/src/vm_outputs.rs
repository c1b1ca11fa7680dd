//! Target `vm_outputs`: a fixed set of plans (multiple output vars, conditions, loops,
//! dotted references, tool outputs feeding tool arguments and arithmetic, the older
//! dialect) run with arbitrary tool outputs and condition answers. Every run must end
//! cleanly, `Done` or `Failed`, never a panic, always within the step limit. On the way,
//! a suspended run is sometimes saved to JSON and restored (`VmState`), as a host that
//! moves runs between processes would.

use std::sync::OnceLock;

use arbitrary::{Arbitrary, Unstructured};
use plan_bytecode::ValidatedProgram;
use plan_compiler::{CompileOptions, compile};
use plan_vm::{Halt, Limits, RequestKind, Vm, VmState};
use serde_json::{Map, Value, json};

use crate::generate::FValue;

/// The plans, `(name, source)`. Each must compile without errors.
pub const PLANS: &[(&str, &str)] = &[
    (
        "multi_output",
        r#"[
 {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "llm_generate",
  "tool_params": {"prompt": "Summarise", "context": null}, "output_vars": ["summary", "insights"]}},
 {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "vector_search",
  "tool_params": {"query": "${insights.0}", "top_k": "${summary.k}"}, "output_vars": ["chunks"]}},
 {"seq_no": 2, "type": "assign", "parameters": {"final_answer": "${summary} | ${insights.x.name} | ${chunks.1}"}}
]"#,
    ),
    (
        "condition_loop",
        r#"[
 {"seq_no": 0, "type": "assign", "parameters": {"counter": 3, "log": ""}},
 {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "retrieve_knowledge_graph",
  "tool_params": {"query": "step ${counter}"}, "output_vars": ["kg"]}},
 {"seq_no": 2, "type": "assign", "parameters": {"counter": "${counter} - ${kg.k}", "log": "${log}${kg};", "r": "${kg} * 2 ** ${counter}"}},
 {"seq_no": 3, "type": "jmp", "parameters": {"condition_prompt": "Is ${counter} > 0? ${log}", "context": "${kg}", "jump_if_true": 1, "jump_if_false": 4}},
 {"seq_no": 4, "type": "assign", "parameters": {"final_answer": "${log} ${r}"}}
]"#,
    ),
    (
        "dotted_refs",
        r#"[
 {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "retrieve_knowledge_graph",
  "tool_params": {"query": "q"}, "output_vars": ["g"]}},
 {"seq_no": 1, "type": "assign", "parameters": {"n": "${g.name}", "first": "${g.0.k}", "deep": "${g.a.x.1.name}", "sum": "${g.k} + ${g.x} / 3"}},
 {"seq_no": 2, "type": "calling", "parameters": {"tool_name": "llm_generate",
  "tool_params": {"prompt": "${n} ${first}", "context": {"d": "${deep}", "l": ["${sum}", 1]}}, "output_vars": ["final_answer"]}}
]"#,
    ),
    (
        "branches",
        r#"[
 {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "llm_generate",
  "tool_params": {"prompt": "Pick"}, "output_vars": ["a", "b", "c"]}},
 {"seq_no": 1, "type": "jmp", "parameters": {"condition_prompt": "${a}?", "context": null, "jump_if_true": 2, "jump_if_false": 4}},
 {"seq_no": 2, "type": "assign", "parameters": {"a": "${b}", "b": "${a}"}},
 {"seq_no": 3, "type": "jmp", "parameters": {"target_seq": 1}},
 {"seq_no": 4, "type": "assign", "parameters": {"final_answer": "${a}${b}${c}"}}
]"#,
    ),
    (
        "older_condition",
        r#"[
 {"seq_no": 0, "type": "retrieve_knowledge_graph", "parameters": {"query": "q", "output_var": "facts"}},
 {"seq_no": 1, "type": "llm_generate", "parameters": {"prompt": "From {{facts}}", "context": null, "output_var": "num"}},
 {"seq_no": 2, "type": "condition", "parameters": {"prompt": "Is {{num}} a number?", "context": {"var": "facts"},
  "true_branch": [{"seq_no": 3, "type": "assign", "parameters": {"value": "{{num}}", "var_name": "final_answer"}}],
  "false_branch": [
   {"seq_no": 4, "type": "retrieve_embedded_chunks", "parameters": {"embedding_query": "{{num}}", "top_k": 2, "output_var": "est"}},
   {"seq_no": 5, "type": "assign", "parameters": {"value": "about {{est}}", "var_name": "final_answer"}}]}}
]"#,
    ),
];

pub fn limits() -> Limits {
    Limits {
        max_steps: 200,
        max_total_bytes: 256 << 10,
        max_value_bytes: 64 << 10,
        ..Limits::default()
    }
}

/// The compiled plans, built once per process.
pub fn programs() -> &'static [ValidatedProgram] {
    static P: OnceLock<Vec<ValidatedProgram>> = OnceLock::new();
    P.get_or_init(|| {
        PLANS
            .iter()
            .map(|(name, src)| {
                let c = compile(src, &CompileOptions::default());
                let p = c.program.unwrap_or_else(|| {
                    panic!("fixed plan {name} must compile: {:?}", c.diagnostics)
                });
                plan_bytecode::validate(p).expect("compiler output validates")
            })
            .collect()
    })
}

/// An answer to one request.
#[derive(Arbitrary, Debug)]
pub enum Answer {
    Value(FValue),
    /// A JSON object with the requested output keys (values arbitrary, some keys dropped).
    Keys(Vec<FValue>),
    /// The requested keys' object as text, in prose or a fenced block.
    KeysText(Vec<FValue>, u8),
    Error(String),
    /// A condition answer in one of the accepted forms, or not.
    Cond(bool, u8),
}

pub fn run(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(which) = u.arbitrary::<u8>() else {
        return;
    };
    let programs = programs();
    let program = &programs[usize::from(which) % programs.len()];
    let mut vm = Vm::new(program, limits());
    let max_rounds = limits().max_steps + 2;
    for _ in 0..max_rounds {
        match vm.run() {
            Halt::Yield(requests) => {
                assert!(
                    !requests.is_empty(),
                    "VM yielded nothing with nothing outstanding"
                );
                for r in requests {
                    let a = answer(&mut u, &r.kind);
                    if let Err(e) = vm.resume(r.id, a) {
                        panic!("resume of request {} just issued failed: {e}", r.id.0);
                    }
                }
                if u.arbitrary::<u8>().unwrap_or(0).is_multiple_of(8) {
                    vm = restore(program, &vm);
                }
            }
            Halt::Done(o) => {
                assert!(o.steps <= limits().max_steps);
                // A finished run's outcome serializes (hosts print it as JSON).
                serde_json::to_string(&o).expect("outcome serializes");
                return;
            }
            Halt::Failed(e) => {
                assert!(!e.message.is_empty(), "a failure must say why");
                return;
            }
        }
    }
    panic!("VM did not finish within {max_rounds} host rounds");
}

/// Saves the suspended run to JSON and continues it from there.
fn restore<'p>(program: &'p ValidatedProgram, vm: &Vm<'p>) -> Vm<'p> {
    let text = serde_json::to_string(vm.state()).expect("a suspended run serializes");
    let state: VmState = serde_json::from_str(&text).expect("a saved run parses back");
    Vm::from_state(program, state, limits()).expect("a saved run restores into its own program")
}

fn answer(u: &mut Unstructured<'_>, kind: &RequestKind) -> Result<Value, String> {
    let keys: &[String] = match kind {
        RequestKind::Tool {
            output_keys: Some(k),
        } => k,
        _ => &[],
    };
    let Ok(a) = u.arbitrary::<Answer>() else {
        // Out of input: end loops and calls quickly.
        return Err("fuzz input exhausted".into());
    };
    let object = |vals: &[FValue]| {
        let mut m = Map::new();
        for (k, v) in keys.iter().zip(vals) {
            m.insert(k.clone(), v.to_value());
        }
        Value::Object(m)
    };
    Ok(match a {
        Answer::Value(v) => v.to_value(),
        Answer::Keys(vals) => object(&vals),
        Answer::KeysText(vals, style) => {
            let o = object(&vals).to_string();
            Value::String(match style % 3 {
                0 => o,
                1 => format!("Sure! Here it is:\n```json\n{o}\n```\nanything else?"),
                _ => format!("prefix {{not json}} {o} suffix"),
            })
        }
        Answer::Error(e) => return Err(e),
        Answer::Cond(b, style) => match style % 5 {
            0 => json!({"result": b, "explanation": "fuzz"}),
            1 => json!(b),
            2 => json!(if b { "TRUE" } else { "False" }),
            3 => json!(format!(
                "```json\n{{\"result\": {b}, \"explanation\": \"x\"}}\n```"
            )),
            _ => json!("perhaps"),
        },
    })
}
