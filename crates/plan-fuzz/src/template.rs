//! Target `template`: arbitrary template pieces and variable values; the compiled plan's
//! interpolation must equal the plain reference implementation below.
//!
//! The plan sets some variables from tool outputs (so any JSON value can be set, typed),
//! then uses the template twice: as an `llm_generate` prompt (never arithmetic; the
//! request's argument is compared) and as the `final_answer` of an `assign` (compared
//! unless the text parses as arithmetic, which `assign` evaluates instead).
//!
//! The reference is written from the spec (docs/semantics.md), not from the compiler:
//! references are `${name}` / `${name.key...}` (name: ASCII letter, `_` or `-` first, then
//! letters, digits, `_`, `-`; keys the same but may start with a digit); anything else is
//! text; one pass, inserted text is never rescanned; strings insert raw, integers decimal,
//! floats as Python's repr, other values compact JSON; an unset reference stays literal;
//! a string that is exactly one reference passes the value with its type.
//!
//! Also: `plan_value::json` writes the values and the template as serde_json does.

use arbitrary::{Arbitrary, Unstructured};
use plan_compiler::{CompileOptions, compile};
use plan_vm::{Limits, RequestKind, Vm};
use serde_json::{Map, Value, json};

use crate::drive::{Finish, drive};
use crate::generate::{FValue, key, set_var, var};

#[derive(Arbitrary, Debug)]
pub struct Input {
    /// Template pieces, concatenated as text.
    pub pieces: Vec<TPiece>,
    /// Variables set before the template runs (by index into the name list).
    pub values: Vec<(u8, FValue)>,
}

#[derive(Arbitrary, Debug)]
pub enum TPiece {
    /// Raw text, `$` and braces included: it may form or break references with neighbours.
    Lit(String),
    /// `${var.key...}` written out.
    Ref { var: u8, path: Vec<u8> },
    /// Near-miss syntax: `$`, `${`, `}`, `${}`, `${1x}`, `$${`.
    Junk(u8),
}

pub fn run(data: &[u8]) {
    if let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(data)) {
        check(&input);
    }
}

fn limits() -> Limits {
    Limits {
        max_steps: 1000,
        max_total_bytes: 1 << 20,
        max_value_bytes: 1 << 20,
        ..Limits::default()
    }
}

pub fn check(input: &Input) {
    let mut tpl = String::new();
    for p in input.pieces.iter().take(16) {
        match p {
            TPiece::Lit(s) => tpl.push_str(s),
            TPiece::Ref { var: v, path } => {
                tpl.push_str("${");
                tpl.push_str(var(*v));
                for k in path.iter().take(3) {
                    tpl.push('.');
                    tpl.push_str(key(*k));
                }
                tpl.push('}');
            }
            TPiece::Junk(j) => {
                tpl.push_str(["$", "${", "}", "${}", "${1x}", "$${", "{{a}}"][usize::from(*j) % 7])
            }
        }
    }
    // Variables in order of first setting; a later value for the same name wins.
    let mut vars: Vec<(&str, Value)> = Vec::new();
    for (i, v) in input.values.iter().take(4) {
        let name = set_var(*i);
        let value = v.to_value();
        match vars.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => vars.push((name, value)),
        }
    }

    let mut steps = vec![json!({"seq_no": 0, "type": "reasoning",
        "parameters": {"chain_of_thoughts": "fuzz", "dependency_analysis": "fuzz"}})];
    for (name, _) in &vars {
        steps.push(
            json!({"seq_no": steps.len(), "type": "calling", "parameters": {
            "tool_name": "llm_generate",
            "tool_params": {"prompt": format!("value of {name}")},
            "output_vars": [name]}}),
        );
    }
    steps.push(
        json!({"seq_no": steps.len(), "type": "calling", "parameters": {
        "tool_name": "llm_generate", "tool_params": {"prompt": tpl}, "output_vars": ["echo"]}}),
    );
    steps.push(json!({"seq_no": steps.len(), "type": "assign",
        "parameters": {"final_answer": tpl}}));
    let src = Value::Array(steps).to_string();
    // The journal's and the cassettes' JSON writer is serde_json's, byte for byte.
    for v in vars
        .iter()
        .map(|(_, v)| v)
        .chain([&Value::String(tpl.clone())])
    {
        let mut ours = Vec::new();
        plan_value::json::write_value(&mut ours, v);
        assert_eq!(ours, serde_json::to_vec(v).unwrap(), "{v:?}");
    }

    let c = compile(&src, &CompileOptions::default());
    let Some(program) = c.program else {
        // Only a prompt that cannot be a string may fail to compile (a single reference
        // is typed; the compiler may not know its type, so it must accept it).
        panic!("template plan did not compile: {:?}\n{src}", c.diagnostics);
    };
    let program = plan_bytecode::validate(program).expect("compiler output validates");

    let env: Map<String, Value> = vars
        .iter()
        .map(|(n, v)| ((*n).to_owned(), v.clone()))
        .collect();
    let expected = reference(&tpl, &env);

    let mut vm = Vm::new(&program, limits());
    let finish = drive(&mut vm, &limits(), |r| {
        assert!(matches!(r.kind, RequestKind::Tool { .. }));
        // Steps 1..=n set the variables; step n + 1 is the template prompt.
        let seq = r.seq_no.and_then(|s| usize::try_from(s).ok()).unwrap_or(0);
        if let Some((_, v)) = seq.checked_sub(1).and_then(|i| vars.get(i)) {
            return Ok(v.clone());
        }
        let prompt = r.args.get("prompt").cloned().unwrap_or(Value::Null);
        assert_eq!(
            prompt, expected,
            "prompt interpolation differs from the reference for template {tpl:?}"
        );
        Ok(json!("echo"))
    });
    match finish {
        Finish::Done(o) => {
            if plan_syntax::parse_arith(&tpl, plan_syntax::Dialect::Current).is_none() {
                assert_eq!(
                    o.final_answer, expected,
                    "assign interpolation differs from the reference for template {tpl:?}"
                );
            }
        }
        Finish::Failed(e) => panic!("template run failed: {e}\ntemplate {tpl:?}"),
    }
}

/// One reference as written in a template: `${name(.key)*}`.
struct Ref<'a> {
    raw: &'a str,
    name: &'a str,
    path: Vec<&'a str>,
}

/// Parses the reference starting at `s` (which starts with `${`), if well-formed.
fn parse_ref(s: &str) -> Option<Ref<'_>> {
    let body_end = s.find('}')?;
    let body = &s[2..body_end];
    let mut parts = body.split('.');
    let name = parts.next()?;
    let word = |w: &str| {
        !w.is_empty()
            && w.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    if !word(name) || name.as_bytes()[0].is_ascii_digit() {
        return None;
    }
    let path: Vec<&str> = parts.collect();
    if !path.iter().all(|k| word(k)) {
        return None;
    }
    Some(Ref {
        raw: &s[..=body_end],
        name,
        path,
    })
}

enum Part<'a> {
    Text(&'a str),
    Ref(Ref<'a>),
}

fn split(t: &str) -> Vec<Part<'_>> {
    let mut parts = Vec::new();
    let mut text_start = 0;
    let mut i = 0;
    while i < t.len() {
        if t[i..].starts_with("${")
            && let Some(r) = parse_ref(&t[i..])
        {
            if text_start < i {
                parts.push(Part::Text(&t[text_start..i]));
            }
            i += r.raw.len();
            text_start = i;
            parts.push(Part::Ref(r));
            continue;
        }
        i += t[i..].chars().next().map_or(1, char::len_utf8);
    }
    if text_start < t.len() {
        parts.push(Part::Text(&t[text_start..]));
    }
    parts
}

/// Looks up a reference: object keys, decimal indexes into arrays, and strings holding a
/// JSON object or array are parsed and walked into.
fn lookup(env: &Map<String, Value>, r: &Ref<'_>) -> Option<Value> {
    let mut cur = env.get(r.name)?.clone();
    for k in &r.path {
        if let Value::String(s) = &cur {
            let t = s.trim();
            if !(t.starts_with('{') || t.starts_with('[')) {
                return None;
            }
            cur = serde_json::from_str(t).ok()?;
        }
        cur = match cur {
            Value::Object(mut m) => m.remove(*k)?,
            Value::Array(mut a) => {
                if !k.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                let i: usize = k.parse().ok()?;
                if i >= a.len() {
                    return None;
                }
                a.swap_remove(i)
            }
            _ => return None,
        };
    }
    Some(cur)
}

fn text_of(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => out.push_str(s),
        Value::Number(n) if n.is_f64() => {
            out.push_str(&plan_value::python_float_repr(
                n.as_f64().unwrap_or(f64::NAN),
            ));
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The reference one-pass interpolation of template text `t`.
pub fn reference(t: &str, env: &Map<String, Value>) -> Value {
    let parts = split(t);
    if let [Part::Ref(r)] = parts.as_slice() {
        return lookup(env, r).unwrap_or_else(|| Value::String(r.raw.to_owned()));
    }
    let mut out = String::new();
    for p in &parts {
        match p {
            Part::Text(s) => out.push_str(s),
            Part::Ref(r) => match lookup(env, r) {
                Some(v) => text_of(&v, &mut out),
                None => out.push_str(r.raw),
            },
        }
    }
    Value::String(out)
}
