//! The compiler and the bytecode loader share one table of limits
//! (`plan_bytecode::limits`): a plan exactly at a limit compiles to a `.pbc` that loads, and
//! one past it gets a coded error (E0210) at its location, never a `.pbc` that will not
//! load. The two limits that take a megabyte-scale plan (constants, side tables) are in
//! `tests/scale.rs`.

use plan_bytecode::limits::{MAX_ARITH_STACK, MAX_LIST, MAX_OPERAND_DEPTH, MAX_SLOTS, MAX_TOOLS};
use plan_compiler::{CompileOptions, compile};
use plan_manifest::{Manifest, ToolSpec};
use serde_json::{Value, json};

/// `a = "v"`, then `x = VALUE` (raw JSON text), then `final_answer = "done"`.
fn with_value(value: &str) -> String {
    format!(
        r#"[{{"seq_no":0,"type":"reasoning","parameters":{{}}}},
{{"seq_no":1,"type":"assign","parameters":{{"a":"v"}}}},
{{"seq_no":2,"type":"assign","parameters":{{"x":{value}}}}},
{{"seq_no":3,"type":"assign","parameters":{{"final_answer":"done"}}}}]"#
    )
}

/// A tool declaring no params: it keeps every argument it is given.
fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        retrieval: false,
        name: name.into(),
        description: String::new(),
        params: vec![],
        effects: plan_manifest::Effects::Read,
        backend: None,
    }
}

/// Compiles `src`: at the limit it must load back from its bytes; past it, E0210.
fn assert_at_limit(case: &str, src: &str, opts: &CompileOptions, over: bool) {
    let c = compile(src, opts);
    let e0210: Vec<_> = c.diagnostics.iter().filter(|d| d.code == "E0210").collect();
    if over {
        assert!(c.program.is_none(), "{case}: compiled past the limit");
        assert!(!e0210.is_empty(), "{case}: no E0210 in {:?}", c.diagnostics);
        assert!(
            e0210.iter().all(|d| d.span.is_some()),
            "{case}: E0210 without a location"
        );
    } else {
        assert!(e0210.is_empty(), "{case}: {:?}", e0210);
        let program = c
            .program
            .unwrap_or_else(|| panic!("{case}: does not compile: {:?}", c.diagnostics));
        let bytes = plan_bytecode::encode(&program);
        let decoded = plan_bytecode::decode(&bytes).unwrap_or_else(|e| panic!("{case}: {e}"));
        plan_bytecode::validate(decoded).unwrap_or_else(|e| panic!("{case}: {e}"));
    }
}

/// `make(n)` is the value of `x` (JSON text) with `n` of something.
fn both(case: &str, make: impl Fn(usize) -> String, n: usize) {
    let opts = CompileOptions::default();
    assert_at_limit(
        &format!("{case} at {n}"),
        &with_value(&make(n)),
        &opts,
        false,
    );
    assert_at_limit(
        &format!("{case} at {}", n + 1),
        &with_value(&make(n + 1)),
        &opts,
        true,
    );
}

#[test]
fn template_parts() {
    // "${a}x${a}x...": references and literals alternate.
    both(
        "template parts",
        |parts| {
            let mut t = "${a}x".repeat(parts / 2);
            if parts % 2 == 1 {
                t.push_str("${a}");
            }
            Value::String(t).to_string()
        },
        MAX_LIST,
    );
}

#[test]
fn dotted_path_keys() {
    // NB: on a thread with a large stack: logos's generated lexer calls itself once per
    // byte of a reference in a debug build (in release those are tail calls: a 14 MB
    // reference lexes on a 1 MB stack).
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(|| {
            both(
                "dotted path keys",
                |keys| Value::String(format!("${{a{}}}", ".k".repeat(keys))).to_string(),
                MAX_LIST,
            );
        })
        .expect("thread")
        .join()
        .expect("no panic");
}

#[test]
fn array_items_and_object_fields() {
    both(
        "array items",
        |items| Value::Array(vec![json!("${a}"); items]).to_string(),
        MAX_LIST,
    );
    both(
        "object fields",
        |fields| {
            let m: serde_json::Map<String, Value> = (0..fields)
                .map(|i| (format!("k{i}"), json!("${a}")))
                .collect();
            Value::Object(m).to_string()
        },
        MAX_LIST,
    );
}

#[test]
fn operand_nesting() {
    both(
        "operand nesting",
        |depth| format!("{}\"${{a}}\"{}", "[".repeat(depth), "]".repeat(depth)),
        MAX_OPERAND_DEPTH,
    );
}

#[test]
fn arithmetic_stack() {
    // `${a} ** ${a} ** ...` is right-associative: every operand is on the stack at once.
    both(
        "arithmetic stack",
        |operands| Value::String(vec!["${a}"; operands].join(" ** ")).to_string(),
        MAX_ARITH_STACK,
    );
}

#[test]
fn call_arguments_assign_targets_and_variables() {
    let mut manifest = Manifest::builtin();
    manifest.tools.push(tool("t"));
    let opts = CompileOptions {
        manifest,
        ..CompileOptions::default()
    };
    let call = |args: usize| {
        let m: serde_json::Map<String, Value> =
            (0..args).map(|i| (format!("p{i}"), json!(i))).collect();
        format!(
            r#"[{{"seq_no":0,"type":"reasoning","parameters":{{}}}},{{"seq_no":1,"type":"calling","parameters":{{"tool_name":"t","tool_params":{},"output_vars":["final_answer"]}}}}]"#,
            Value::Object(m)
        )
    };
    assert_at_limit("call args at N", &call(MAX_LIST), &opts, false);
    assert_at_limit("call args at N+1", &call(MAX_LIST + 1), &opts, true);

    // `vars` variables, all set by one assign with final_answer among them.
    let assign = |vars: usize| {
        let mut m: serde_json::Map<String, Value> =
            (0..vars - 1).map(|i| (format!("v{i}"), json!(1))).collect();
        m.insert("final_answer".into(), json!("x"));
        format!(
            r#"[{{"seq_no":0,"type":"reasoning","parameters":{{}}}},{{"seq_no":1,"type":"assign","parameters":{}}}]"#,
            Value::Object(m)
        )
    };
    let opts = CompileOptions::default();
    assert_eq!(MAX_LIST, MAX_SLOTS, "one plan tests both");
    assert_at_limit(
        "assign targets and variables at N",
        &assign(MAX_SLOTS),
        &opts,
        false,
    );
    assert_at_limit(
        "assign targets and variables at N+1",
        &assign(MAX_SLOTS + 1),
        &opts,
        true,
    );
    // Variables alone: two assigns, neither past the list limit.
    let split = |vars: usize| {
        let half = vars / 2;
        let first: serde_json::Map<String, Value> =
            (0..half).map(|i| (format!("v{i}"), json!(1))).collect();
        let mut second: serde_json::Map<String, Value> = (half..vars - 1)
            .map(|i| (format!("v{i}"), json!(1)))
            .collect();
        second.insert("final_answer".into(), json!("x"));
        format!(
            r#"[{{"seq_no":0,"type":"reasoning","parameters":{{}}}},{{"seq_no":1,"type":"assign","parameters":{}}},{{"seq_no":2,"type":"assign","parameters":{}}}]"#,
            Value::Object(first),
            Value::Object(second)
        )
    };
    assert_at_limit("variables at N", &split(MAX_SLOTS), &opts, false);
    assert_at_limit("variables at N+1", &split(MAX_SLOTS + 1), &opts, true);
}

#[test]
fn tools_at_n_and_n_plus_one() {
    let mut manifest = Manifest::builtin();
    for i in 0..=MAX_TOOLS {
        manifest.tools.push(tool(&format!("t{i}")));
    }
    let opts = CompileOptions {
        manifest,
        ..CompileOptions::default()
    };
    let plan = |tools: usize| {
        let mut steps = vec![json!({"seq_no": 0, "type": "reasoning", "parameters": {}})];
        for i in 0..tools {
            steps.push(json!({"seq_no": i + 1, "type": "calling", "parameters": {
                "tool_name": format!("t{i}"), "tool_params": {}, "output_vars": ["o"]}}));
        }
        steps.push(json!({"seq_no": tools + 1, "type": "assign",
            "parameters": {"final_answer": "${o}"}}));
        Value::Array(steps).to_string()
    };
    assert_at_limit("tools at N", &plan(MAX_TOOLS), &opts, false);
    assert_at_limit("tools at N+1", &plan(MAX_TOOLS + 1), &opts, true);
}

#[test]
fn e0210_points_at_the_value_past_the_limit() {
    let src = with_value(&Value::Array(vec![json!("${a}"); MAX_LIST + 1]).to_string());
    let c = compile(&src, &CompileOptions::default());
    let d = c
        .diagnostics
        .iter()
        .find(|d| d.code == "E0210")
        .expect("E0210");
    assert_eq!(d.seq_no, Some(2));
    let span = d.span.expect("span");
    assert!(src[span.start as usize..].starts_with("[\"${a}\""), "{d:?}");
    assert!(
        d.message.contains(&format!("{} items", MAX_LIST + 1)),
        "{}",
        d.message
    );
}
