//! Large inputs that once took quadratic time or memory: each must finish in time linear
//! in its size. They take seconds in a debug build, so they are ignored by a plain
//! `cargo test`; `scripts/test` runs them once with `--ignored`. The bounds are an order
//! of magnitude above what they take (BENCHMARKS.md has the release figures), and far
//! below what the quadratic versions took.

use std::time::{Duration, Instant};

use plan_bytecode::validate;
use plan_compiler::{CompileOptions, compile, explain};
use plan_host::{Host, HostOptions, Tracer, run_plan};
use plan_manifest::Manifest;
use plan_vm::Limits;
use serde_json::json;

const BOUND: Duration = Duration::from_secs(60);

fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let t0 = Instant::now();
    let out = f();
    let took = t0.elapsed();
    eprintln!("{what}: {took:?}");
    assert!(took < BOUND, "{what} took {took:?}");
    out
}

/// Variables of [`chain`]: step `i` writes `v<i mod VARS>` (a plan may have at most
/// 65,536 variables).
const VARS: usize = 10_000;

/// `[reasoning, v1 = "a", v2 = "${v1}x", ..., final_answer = "${v<n-1>}"]` (names modulo
/// [`VARS`]), optionally with a conditional jump back to step 1 before the end.
fn chain(n: usize, loop_back: bool) -> String {
    let mut steps = vec![
        r#"{"seq_no":0,"type":"reasoning","parameters":{}}"#.to_owned(),
        r#"{"seq_no":1,"type":"assign","parameters":{"v1":"a"}}"#.to_owned(),
    ];
    for i in 2..n {
        steps.push(format!(
            r#"{{"seq_no":{i},"type":"assign","parameters":{{"v{}":"${{v{}}}x"}}}}"#,
            i % VARS,
            (i - 1) % VARS
        ));
    }
    let mut last = n;
    if loop_back {
        steps.push(format!(
            r#"{{"seq_no":{n},"type":"jmp","parameters":{{"condition_prompt":"again?","jump_if_true":1,"jump_if_false":{}}}}}"#,
            n + 1
        ));
        last = n + 1;
    }
    steps.push(format!(
        r#"{{"seq_no":{last},"type":"assign","parameters":{{"final_answer":"${{v{}}}"}}}}"#,
        (n - 1) % VARS
    ));
    format!("[{}]", steps.join(",\n"))
}

#[test]
#[ignore = "seconds in a debug build: run by scripts/test with --ignored"]
fn one_assign_with_many_keys() {
    let plan = |n: usize| {
        let keys: Vec<String> = (0..n).map(|i| format!(r#""k{i}":"v{i}""#)).collect();
        format!(
            r#"[{{"seq_no":0,"type":"reasoning","parameters":{{}}}},{{"seq_no":1,"type":"assign","parameters":{{{},"final_answer":"x"}}}}]"#,
            keys.join(",")
        )
    };
    let c = timed("check 60k keys", || {
        compile(&plan(60_000), &CompileOptions::default())
    });
    assert!(c.program.is_some());
    // Past the 65,536 targets of one instruction: refused, as fast.
    let c = timed("check 150k keys", || {
        compile(&plan(150_000), &CompileOptions::default())
    });
    assert!(c.diagnostics.iter().any(|d| d.code == "E0210"));
}

#[test]
#[ignore = "seconds in a debug build: run by scripts/test with --ignored"]
fn explain_and_check_100k_steps_with_and_without_a_loop() {
    for loop_back in [false, true] {
        let src = chain(100_000, loop_back);
        let c = timed(&format!("check 100k steps (loop: {loop_back})"), || {
            compile(&src, &CompileOptions::default())
        });
        assert!(c.program.is_some());
        let steps = timed(&format!("explain 100k steps (loop: {loop_back})"), || {
            explain(&src, &CompileOptions::default()).expect("explains")
        });
        assert_eq!(steps[5].depends_on, vec![4]);
    }
}

#[test]
#[ignore = "seconds in a debug build: run by scripts/test with --ignored"]
fn a_loop_growing_a_string_150k_times() {
    let src = json!([
        {"seq_no": 0, "type": "reasoning", "parameters": {}},
        {"seq_no": 1, "type": "assign", "parameters": {"s": "", "n": 0}},
        {"seq_no": 2, "type": "assign", "parameters": {"s": "${s}abcdefghij", "n": "${n} + 1"}},
        {"seq_no": 3, "type": "jmp", "parameters": {"condition_prompt": "stop?", "jump_if_true": 4, "jump_if_false": 2}},
        {"seq_no": 4, "type": "assign", "parameters": {"final_answer": "${n}"}}
    ])
    .to_string();
    let program = validate(
        compile(&src, &CompileOptions::default())
            .program
            .expect("compiles"),
    )
    .expect("validates");
    let dir = tempfile::tempdir().expect("tempdir");
    let cassette = dir.path().join("stop.jsonl");
    std::fs::write(
        &cassette,
        r#"{"tool":"jmp_condition","args":{"prompt":"stop?","context":null},"output":false}"#,
    )
    .expect("cassette");
    let host = Host::new(
        Manifest::builtin(),
        HostOptions {
            replay: Some(cassette),
            ..HostOptions::default()
        },
    )
    .expect("host");
    let limits = Limits {
        max_steps: 450_000,
        max_total_bytes: 1 << 30,
        max_value_bytes: 1 << 30,
        ..Limits::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let report = timed("150k appends", || {
        rt.block_on(run_plan(
            &host,
            &program,
            vec![],
            limits,
            &mut Tracer::none(),
        ))
    });
    // Ends on the step limit, after 150k turns of 10 bytes.
    assert_eq!(report.steps, 450_000, "{report:?}");
}

/// `a = "v"`, then one assign per chunk of `items` array elements (each array also holds
/// `${a}`, so it is not a constant), then `final_answer`.
fn arrays(items: &[String]) -> String {
    let mut steps = vec![
        r#"{"seq_no":0,"type":"reasoning","parameters":{}}"#.to_owned(),
        r#"{"seq_no":1,"type":"assign","parameters":{"a":"v"}}"#.to_owned(),
    ];
    for (k, chunk) in items
        .chunks(plan_bytecode::limits::MAX_LIST - 1)
        .enumerate()
    {
        let mut arr = vec![json!("${a}")];
        arr.extend(chunk.iter().map(|s| json!(s)));
        steps.push(format!(
            r#"{{"seq_no":{},"type":"assign","parameters":{{"x{k}":{}}}}}"#,
            k + 2,
            serde_json::Value::Array(arr)
        ));
    }
    steps.push(format!(
        r#"{{"seq_no":{},"type":"assign","parameters":{{"final_answer":"done"}}}}"#,
        steps.len()
    ));
    format!("[{}]", steps.join(","))
}

/// The two limits that take megabytes of plan to reach: constants, and one side table
/// (templates); each at N (compiles to a `.pbc` that loads) and N + 1 (E0210).
#[test]
#[ignore = "seconds in a debug build: run by scripts/test with --ignored"]
fn constants_and_side_tables_at_n_and_n_plus_one() {
    use plan_bytecode::limits::{MAX_CONSTS, MAX_TABLE};
    let count = |src: &str, f: fn(&plan_bytecode::Program) -> usize| {
        let c = compile(src, &CompileOptions::default());
        c.program.as_ref().map(f)
    };
    type Case = (
        &'static str,
        usize,
        fn(usize) -> String,
        fn(&plan_bytecode::Program) -> usize,
    );
    let cases: [Case; 2] = [
        (
            "constants",
            MAX_CONSTS,
            |k| arrays(&(0..k).map(|i| format!("c{i}")).collect::<Vec<_>>()),
            |p| p.consts.len(),
        ),
        (
            "templates",
            MAX_TABLE,
            |k| arrays(&vec!["${a}x".to_owned(); k]),
            |p| p.templates.len(),
        ),
    ];
    for (what, max, make, size) in cases {
        // What the plan around the items adds, measured on a small one.
        let base = count(&make(10), size).expect("compiles") - 10;
        let at = make(max - base);
        let c = timed(&format!("{what} at N"), || {
            compile(&at, &CompileOptions::default())
        });
        let program = c
            .program
            .unwrap_or_else(|| panic!("{what} at N: {:?}", c.diagnostics));
        assert_eq!(size(&program), max, "{what}");
        let bytes = plan_bytecode::encode(&program);
        validate(plan_bytecode::decode(&bytes).expect("decodes")).expect("loads");
        let over = make(max - base + 1);
        let c = timed(&format!("{what} at N + 1"), || {
            compile(&over, &CompileOptions::default())
        });
        assert!(c.program.is_none(), "{what} at N + 1 compiled");
        assert!(
            c.diagnostics
                .iter()
                .any(|d| d.code == "E0210" && d.span.is_some()),
            "{what}"
        );
    }
}
