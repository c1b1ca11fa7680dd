//! Target `roundtrip`: structured arbitrary plans (the [`PlanModel`] below, in either
//! dialect) → JSON text → compile → encode → decode must give the same program, which
//! must validate; `load` of the bytes must give it too. Compiling twice must give the
//! same program (no hidden nondeterminism such as hash-map order), and `strip` must drop
//! exactly the debug section.

use arbitrary::{Arbitrary, Unstructured};
use plan_compiler::{CompileOptions, compile};
use serde_json::{Map, Value, json};

use crate::generate::{FValue, key, set_var, var};

#[derive(Arbitrary, Debug)]
pub struct PlanModel {
    pub older: bool,
    pub steps: Vec<StepModel>,
    /// What the last step assigns to `final_answer`.
    pub answer: ValModel,
}

#[derive(Arbitrary, Debug)]
pub enum StepModel {
    Reasoning(String),
    Assign(Vec<(u8, ValModel)>),
    Call {
        tool: u8,
        query: ValModel,
        outputs: Vec<u8>,
    },
    Jump(u8),
    Cond {
        prompt: ValModel,
        context: Option<ValModel>,
        if_true: u8,
        if_false: u8,
    },
}

#[derive(Arbitrary, Debug)]
pub enum ValModel {
    Json(FValue),
    Ref(u8, Vec<u8>),
    Template(Vec<(String, u8)>),
    Arith(ArithModel),
    Array(Vec<ValModel>),
    Object(Vec<(u8, ValModel)>),
}

#[derive(Arbitrary, Debug)]
pub enum ArithModel {
    Num(i32),
    Float(u16),
    Ref(u8),
    Neg(Box<ArithModel>),
    Bin(u8, Box<ArithModel>, Box<ArithModel>),
}

pub fn run(data: &[u8]) {
    if let Ok(model) = PlanModel::arbitrary_take_rest(Unstructured::new(data)) {
        check(&to_json(&model).to_string());
    }
}

/// Compiles `src` and checks the round-trip properties of whatever compiles.
pub fn check(src: &str) {
    let full = compile(src, &CompileOptions::default());
    let Some(program) = full.program else {
        return;
    };
    let again = compile(src, &CompileOptions::default());
    assert_eq!(
        again.program.as_ref(),
        Some(&program),
        "compile is not deterministic"
    );

    let bytes = plan_bytecode::encode(&program);
    let decoded = plan_bytecode::decode(&bytes).expect("encoded program decodes");
    assert_eq!(decoded, program, "encode → decode changed the program");
    let loaded = plan_bytecode::load(&bytes).expect("encoded program loads");
    assert_eq!(loaded.program(), &program);

    let stripped = compile(
        src,
        &CompileOptions {
            strip: true,
            ..CompileOptions::default()
        },
    )
    .program
    .expect("strip does not change whether a plan compiles");
    assert!(stripped.debug.is_none(), "strip left a debug section");
    let mut without_debug = program.clone();
    without_debug.debug = None;
    assert_eq!(
        stripped, without_debug,
        "strip changed more than the debug section"
    );
    let sbytes = plan_bytecode::encode(&stripped);
    assert_eq!(
        plan_bytecode::load(&sbytes).map(|p| p.into_inner()),
        Ok(stripped)
    );
}

const TOOLS: &[(&str, &str)] = &[
    ("llm_generate", "prompt"),
    ("retrieve_knowledge_graph", "query"),
    ("vector_search", "query"),
    ("retrieve_embedded_chunks", "embedding_query"),
];

/// The plan as JSON, in the model's dialect. Jump targets are taken modulo the plan's
/// length (+1: one past the end is a valid "fall off" target).
pub fn to_json(m: &PlanModel) -> Value {
    let steps = &m.steps[..m.steps.len().min(24)];
    let n = steps.len() + 2;
    let target = |t: u8| usize::from(t) % (n + 1);
    let mut out: Vec<Value> = vec![json!({"seq_no": 0, "type": "reasoning",
        "parameters": {"chain_of_thoughts": "model", "dependency_analysis": "none"}})];
    for s in steps {
        let seq = out.len();
        let v = match s {
            StepModel::Reasoning(t) => json!({"seq_no": seq, "type": "reasoning",
                "parameters": {"chain_of_thoughts": t, "dependency_analysis": ""}}),
            StepModel::Assign(targets) if m.older => {
                let (name, value) = targets
                    .first()
                    .map_or(("a", Value::Null), |(n, v)| (set_var(*n), val(v, m.older)));
                json!({"seq_no": seq, "type": "assign",
                    "parameters": {"var_name": name, "value": value}})
            }
            StepModel::Assign(targets) => {
                let mut p = Map::new();
                for (name, v) in targets.iter().take(6) {
                    p.insert(set_var(*name).to_owned(), val(v, m.older));
                }
                json!({"seq_no": seq, "type": "assign", "parameters": p})
            }
            StepModel::Call {
                tool,
                query,
                outputs,
            } => {
                let (tool, param) = TOOLS[usize::from(*tool) % TOOLS.len()];
                let mut params = Map::new();
                params.insert(param.to_owned(), val(query, m.older));
                if tool != "llm_generate" && tool != "retrieve_knowledge_graph" {
                    params.insert("top_k".into(), json!(3));
                }
                let outs: Vec<&str> = outputs.iter().take(3).map(|o| set_var(*o)).collect();
                if m.older {
                    let mut p = params;
                    p.insert(
                        "output_var".into(),
                        json!(outs.first().copied().unwrap_or("a")),
                    );
                    json!({"seq_no": seq, "type": tool, "parameters": p})
                } else {
                    json!({"seq_no": seq, "type": "calling", "parameters": {
                        "tool_name": tool, "tool_params": params, "output_vars": outs}})
                }
            }
            StepModel::Jump(t) => json!({"seq_no": seq, "type": "jmp",
                "parameters": {"target_seq": target(*t)}}),
            StepModel::Cond {
                prompt,
                context,
                if_true,
                if_false,
            } if !m.older => json!({"seq_no": seq, "type": "jmp", "parameters": {
                "condition_prompt": val(prompt, false),
                "context": context.as_ref().map_or(Value::Null, |c| val(c, false)),
                "jump_if_true": target(*if_true), "jump_if_false": target(*if_false)}}),
            StepModel::Cond {
                prompt, context, ..
            } => {
                // Older dialect: nested branches, each a single assign.
                let branch = |s: usize, v: &str| {
                    json!([{"seq_no": s, "type": "assign",
                    "parameters": {"var_name": "b", "value": v}}])
                };
                json!({"seq_no": seq, "type": "condition", "parameters": {
                    "prompt": val(prompt, true),
                    "context": context.as_ref().map_or(Value::Null, |c| val(c, true)),
                    "true_branch": branch(1000 + seq * 2, "yes"),
                    "false_branch": branch(1001 + seq * 2, "no")}})
            }
        };
        out.push(v);
    }
    let seq = out.len();
    let answer = val(&m.answer, m.older);
    out.push(if m.older {
        json!({"seq_no": seq, "type": "assign",
            "parameters": {"var_name": "final_answer", "value": answer}})
    } else {
        json!({"seq_no": seq, "type": "assign", "parameters": {"final_answer": answer}})
    });
    Value::Array(out)
}

fn reference(v: u8, path: &[u8], older: bool) -> String {
    if older {
        return format!("{{{{{}}}}}", var(v));
    }
    let mut s = format!("${{{}", var(v));
    for k in path.iter().take(3) {
        s.push('.');
        s.push_str(key(*k));
    }
    s.push('}');
    s
}

fn val(v: &ValModel, older: bool) -> Value {
    val_at(v, older, 0)
}

fn val_at(v: &ValModel, older: bool, depth: u32) -> Value {
    if depth > 4 {
        return Value::Null;
    }
    match v {
        ValModel::Json(j) => j.to_value(),
        ValModel::Ref(r, path) => Value::String(reference(*r, path, older)),
        ValModel::Template(parts) => {
            let mut s = String::new();
            for (text, r) in parts.iter().take(6) {
                s.push_str(text);
                s.push_str(&reference(*r, &[], older));
            }
            Value::String(s)
        }
        ValModel::Arith(a) => Value::String(arith(a, older, 0)),
        ValModel::Array(items) => Value::Array(
            items
                .iter()
                .take(6)
                .map(|i| val_at(i, older, depth + 1))
                .collect(),
        ),
        ValModel::Object(members) => {
            let mut m = Map::new();
            for (k, v) in members.iter().take(6) {
                m.insert(key(*k).to_owned(), val_at(v, older, depth + 1));
            }
            Value::Object(m)
        }
    }
}

fn arith(a: &ArithModel, older: bool, depth: u32) -> String {
    if depth > 6 {
        return "1".into();
    }
    match a {
        ArithModel::Num(n) => n.to_string(),
        ArithModel::Float(f) => format!("{}.{}", f / 100, f % 100),
        ArithModel::Ref(r) => reference(*r, &[], older),
        ArithModel::Neg(x) => format!("-{}", arith(x, older, depth + 1)),
        ArithModel::Bin(op, l, r) => format!(
            "({} {} {})",
            arith(l, older, depth + 1),
            ["+", "-", "*", "/", "**", "%"][usize::from(*op) % 6],
            arith(r, older, depth + 1)
        ),
    }
}
