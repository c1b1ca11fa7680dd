//! `planvm` end to end: the built binary on the shipped examples (offline, from their
//! cassettes), the output formats, and the documented exit code for each kind of bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_planvm");

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn ex(name: &str) -> String {
    examples().join(name).display().to_string()
}

fn planvm(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("run planvm")
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str]) -> Run {
    let out = planvm(args);
    let r = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    // Whatever the input, never a panic.
    assert!(
        !r.stderr.contains("panicked"),
        "{args:?} panicked:\n{}",
        r.stderr
    );
    assert_ne!(r.code, 101, "{args:?}: {}", r.stderr);
    r
}

fn expected(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/expected")
        .join(name);
    std::fs::read_to_string(p).expect("expected answer file")
}

/// (plan file, cassette, expected answer file)
const EXAMPLES: &[(&str, &str, &str)] = &[
    (
        "tidb_overview.json",
        "tidb_overview.cassette.jsonl",
        "tidb_overview.txt",
    ),
    (
        "tidb_overview.llm.txt",
        "tidb_overview.cassette.jsonl",
        "tidb_overview.txt",
    ),
    (
        "countdown_loop.json",
        "countdown_loop.cassette.jsonl",
        "countdown_loop.txt",
    ),
    (
        "population_condition.json",
        "population_condition.cassette.jsonl",
        "population_condition.txt",
    ),
];

#[test]
fn every_example_runs_offline_and_prints_its_answer() {
    for (plan, cassette, answer) in EXAMPLES {
        // Independent calls concurrently (default) and one at a time: same answer.
        for concurrency in ["16", "1"] {
            let r = run(&[
                "run",
                &ex(plan),
                "--replay",
                &ex(cassette),
                "--max-concurrency",
                concurrency,
            ]);
            assert_eq!(r.code, 0, "{plan}: {}", r.stderr);
            assert_eq!(r.stdout, expected(answer), "{plan}");
        }
    }
}

#[test]
fn the_llm_variant_reports_its_repairs_as_warnings_on_stderr() {
    let r = run(&[
        "run",
        &ex("tidb_overview.llm.txt"),
        "--replay",
        &ex("tidb_overview.cassette.jsonl"),
    ]);
    assert_eq!(r.code, 0);
    assert!(r.stderr.contains("warning[W0003]"), "{}", r.stderr);
}

#[test]
fn json_format_has_the_documented_shape() {
    let r = run(&[
        "run",
        &ex("tidb_overview.json"),
        "--replay",
        &ex("tidb_overview.cassette.jsonl"),
        "--format",
        "json",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.lines().count(), 1);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "status",
            "final_answer",
            "error",
            "steps",
            "tool_calls",
            "elapsed_ms"
        ]
    );
    assert_eq!(v["status"], "ok");
    assert_eq!(v["error"], Value::Null);
    assert_eq!(
        v["final_answer"].as_str().map(|s| format!("{s}\n")),
        Some(expected("tidb_overview.txt"))
    );
    assert_eq!(
        (v["steps"].as_u64(), v["tool_calls"].as_u64()),
        (Some(11), Some(10))
    );
    assert!(v["elapsed_ms"].is_u64());
}

#[test]
fn json_format_reports_failures_with_location() {
    let dir = tempfile::tempdir().unwrap();
    let c = write_partial_cassette(&dir);
    let r = run(&[
        "run",
        &ex("tidb_overview.json"),
        "--replay",
        &c,
        "--format",
        "json",
    ]);
    assert_eq!(r.code, 1);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["status"], "failed");
    assert_eq!(v["final_answer"], Value::Null);
    let keys: Vec<&str> = v["error"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["code", "message", "seq_no", "line"]);
    // A missing cassette entry is a tool failure.
    assert_eq!(v["error"]["code"], "R0005");
    assert_eq!(v["error"]["seq_no"], 10);
    assert!(v["error"]["line"].is_u64());
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("llm_generate")
    );
}

/// The TiDB cassette without its last entry (the final synthesis).
fn write_partial_cassette(dir: &tempfile::TempDir) -> String {
    let text = std::fs::read_to_string(ex("tidb_overview.cassette.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let p = dir.path().join("partial.jsonl");
    std::fs::write(&p, lines[..lines.len() - 1].join("\n")).unwrap();
    p.display().to_string()
}

#[test]
fn missing_cassette_entry_fails_naming_the_tool_and_closest_args() {
    let dir = tempfile::tempdir().unwrap();
    let c = write_partial_cassette(&dir);
    let r = run(&["run", &ex("tidb_overview.json"), "--replay", &c]);
    assert_eq!(r.code, 1);
    assert_eq!(r.stdout, "");
    assert!(
        r.stderr
            .contains("for tool `llm_generate` with args {\"prompt\":\"Combine the explanations"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("closest recorded args for `llm_generate`"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("seq_no 10"), "{}", r.stderr);
}

fn compile_to_pbc(plan: &str) -> Vec<u8> {
    let src = std::fs::read_to_string(ex(plan)).unwrap();
    let compiled = plan_compiler::compile(&src, &plan_compiler::CompileOptions::default());
    plan_bytecode::encode(&compiled.program.expect("example compiles"))
}

#[test]
fn bytecode_is_recognised_by_magic_whatever_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("compiled-plan.txt");
    std::fs::write(&p, compile_to_pbc("countdown_loop.json")).unwrap();
    let r = run(&[
        "run",
        p.to_str().unwrap(),
        "--replay",
        &ex("countdown_loop.cassette.jsonl"),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, expected("countdown_loop.txt"));
}

#[test]
fn truncated_or_corrupted_bytecode_exits_65() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = compile_to_pbc("population_condition.json");
    let mut cases: Vec<(String, Vec<u8>)> = Vec::new();
    for cut in [8, bytes.len() / 2, bytes.len() - 1] {
        cases.push((format!("truncated at {cut}"), bytes[..cut].to_vec()));
    }
    let mut flipped = bytes.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x5a;
    cases.push(("one byte flipped".into(), flipped));
    for (what, data) in cases {
        let p = dir.path().join("bad.pbc");
        std::fs::write(&p, &data).unwrap();
        let r = run(&[
            "run",
            p.to_str().unwrap(),
            "--replay",
            &ex("population_condition.cassette.jsonl"),
        ]);
        assert_eq!(r.code, 65, "{what}: {}", r.stderr);
        assert!(
            r.stderr.contains("invalid bytecode"),
            "{what}: {}",
            r.stderr
        );
        assert_eq!(r.stdout, "");
    }
}

#[test]
fn invalid_plans_exit_65_with_rendered_diagnostics() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[u8], &str)] = &[
        ("unknown tool", br#"[{"seq_no": 0, "type": "calling", "parameters": {"tool_name": "nope", "tool_params": {}, "output_vars": ["final_answer"]}}]"#, "error["),
        ("not a plan", b"hello there", "error"),
        ("binary garbage", &[0xff, 0xfe, 0x00, 0x12, 0x80], "neither .pbc bytecode"),
        ("empty file", b"", "error"),
    ];
    for (what, data, needle) in cases {
        let p = dir.path().join("plan.json");
        std::fs::write(&p, data).unwrap();
        let r = run(&["run", p.to_str().unwrap()]);
        assert_eq!(r.code, 65, "{what}: {}", r.stderr);
        assert!(r.stderr.contains(needle), "{what}: {}", r.stderr);
    }
}

#[test]
fn usage_errors_exit_2() {
    let cases: &[&[&str]] = &[
        &[],
        &["run"],
        &["frobnicate"],
        &["run", "x.json", "--var", "no_equals_sign"],
        &["run", "x.json", "--var", "=1"],
        &["run", "x.json", "--format", "yaml"],
        &["run", "x.json", "--timeout", "-1"],
        &["run", "x.json", "--max-steps", "many"],
    ];
    for args in cases {
        let r = run(args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
    }
}

#[test]
fn malformed_tools_file_exits_2_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("tools.toml");
    std::fs::write(
        &t,
        "[[tool]]\nname = \"llm_generate\"\n[tool.backend]\nkind = \"openai\"\nbase_url = 3\n",
    )
    .unwrap();
    let r = run(&[
        "run",
        &ex("countdown_loop.json"),
        "--tools",
        t.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("cannot load tools file"), "{}", r.stderr);
    assert!(r.stderr.contains("tools.toml:"), "{}", r.stderr);
}

#[test]
fn malformed_or_missing_cassette_and_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("bad.jsonl");
    std::fs::write(
        &c,
        "{\"tool\":\"llm_generate\",\"args\":{},\"output\":\"x\"}\nnot json at all\n",
    )
    .unwrap();
    let r = run(&[
        "run",
        &ex("countdown_loop.json"),
        "--replay",
        c.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 65, "{}", r.stderr);
    assert!(
        r.stderr.contains("bad.jsonl:2: not a JSON object"),
        "{}",
        r.stderr
    );

    let r = run(&[
        "run",
        &ex("countdown_loop.json"),
        "--replay",
        dir.path().join("none.jsonl").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 66, "{}", r.stderr);

    let r = run(&[
        "run",
        dir.path().join("missing-plan.json").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 66, "{}", r.stderr);
    assert!(r.stderr.contains("cannot read"), "{}", r.stderr);
}

#[test]
fn no_backend_fails_the_run_before_it_starts() {
    let r = run(&["run", &ex("population_condition.json")]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "error[R0010]: no backend for tools `retrieve_knowledge_graph`, `llm_generate`, `retrieve_embedded_chunks`, \
             `jmp_condition`: pass --replay CASSETTE"
        ),
        "{}",
        r.stderr
    );
}

#[test]
fn limits_fail_the_run() {
    let r = run(&[
        "run",
        &ex("countdown_loop.json"),
        "--replay",
        &ex("countdown_loop.cassette.jsonl"),
        "--max-steps",
        "6",
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("6"), "{}", r.stderr);

    let r = run(&[
        "run",
        &ex("tidb_overview.json"),
        "--replay",
        &ex("tidb_overview.cassette.jsonl"),
        "--max-bytes",
        "2000",
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("2000"), "{}", r.stderr);

    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("slow.jsonl");
    let text = std::fs::read_to_string(ex("countdown_loop.cassette.jsonl")).unwrap();
    let slow: String = text
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            v["latency_ms"] = json!(60_000);
            format!("{v}\n")
        })
        .collect();
    std::fs::write(&c, slow).unwrap();
    let r = run(&[
        "run",
        &ex("countdown_loop.json"),
        "--replay",
        c.to_str().unwrap(),
        "--timeout",
        "0.3",
    ]);
    // NB: the first call alone would take a minute: the error (not the clock) shows the
    // deadline ended it.
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("deadline of 0.3 s exceeded"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("seq_no 2"), "{}", r.stderr);

    let r = run(&[
        "run",
        &ex("countdown_loop.json"),
        "--replay",
        c.to_str().unwrap(),
        "--tool-timeout",
        "0.2",
    ]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("timed out after 0.2 s"), "{}", r.stderr);
}

#[test]
fn outputs_never_overwrite_inputs() {
    let dir = tempfile::tempdir().unwrap();
    for f in ["tidb_overview.json", "tidb_overview.cassette.jsonl"] {
        std::fs::copy(examples().join(f), dir.path().join(f)).unwrap();
    }
    let plan = dir.path().join("tidb_overview.json");
    let cassette = dir.path().join("tidb_overview.cassette.jsonl");
    let before: Vec<Vec<u8>> = [&plan, &cassette]
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    let (p, c) = (plan.to_str().unwrap(), cassette.to_str().unwrap());
    let dotted = dir.path().join(".").join("tidb_overview.cassette.jsonl");
    let fresh = dir.path().join("out.jsonl");
    let f = fresh.to_str().unwrap();
    for (args, says) in [
        (
            vec!["run", p, "--replay", c, "--trace", dotted.to_str().unwrap()],
            "--trace",
        ),
        (vec!["run", p, "--replay", c, "--record", p], "--record"),
        (
            vec!["run", p, "--replay", c, "--trace", f, "--record", f],
            "--record",
        ),
    ] {
        let r = run(&args);
        assert_eq!(r.code, 64, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!("error: {says} ")),
            "{}",
            r.stderr
        );
        assert!(r.stderr.contains("would be overwritten"), "{}", r.stderr);
    }
    let after: Vec<Vec<u8>> = [&plan, &cassette]
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    assert_eq!(after, before, "an input was changed");

    let list = dir.path().join("runs.txt");
    std::fs::write(&list, "tidb_overview.json tidb_overview.cassette.jsonl\n").unwrap();
    for output in [list.to_str().unwrap(), c] {
        let out = planvm(&[
            "batch",
            "--list",
            list.to_str().unwrap(),
            "--output",
            output,
        ]);
        assert_eq!(out.status.code(), Some(64), "{output}");
    }
    assert_eq!(std::fs::read(&cassette).unwrap(), before[1]);
}

#[test]
fn vars_are_parsed_as_json_else_strings() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("plan.json");
    std::fs::write(
        &p,
        r#"[{"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "c", "dependency_analysis": "d"}},
            {"seq_no": 1, "type": "assign", "parameters": {"next": "${n} + 1"}},
            {"seq_no": 2, "type": "assign", "parameters": {"final_answer": "${who} asked for ${next} (${cfg.mode})"}}]"#,
    )
    .unwrap();
    let r = run(&[
        "run",
        p.to_str().unwrap(),
        "--var",
        "n=41",
        "--var",
        "who=Ada Lovelace",
        "--var",
        r#"cfg={"mode":"fast"}"#,
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "Ada Lovelace asked for 42 (fast)\n");
    // The variables given are set: no warning that they are never assigned.
    assert!(!r.stderr.contains("never assigned"), "{}", r.stderr);
    let r = run(&["run", p.to_str().unwrap(), "--var", "n=41"]);
    assert!(r.stderr.contains("`who` is never assigned"), "{}", r.stderr);
    assert!(!r.stderr.contains("`n` is never assigned"), "{}", r.stderr);

    // A non-string final answer prints as compact JSON.
    std::fs::write(
        &p,
        r#"[{"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "c", "dependency_analysis": "d"}},
            {"seq_no": 1, "type": "assign", "parameters": {"final_answer": "${cfg}"}}]"#,
    )
    .unwrap();
    let r = run(&[
        "run",
        p.to_str().unwrap(),
        "--var",
        r#"cfg={"mode": "fast", "n": [1, 2]}"#,
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "{\"mode\":\"fast\",\"n\":[1,2]}\n");
}

#[test]
fn trace_file_has_every_event_kind() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("trace.jsonl");
    let r = run(&[
        "run",
        &ex("countdown_loop.json"),
        "--replay",
        &ex("countdown_loop.cassette.jsonl"),
        "--trace",
        t.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let text = std::fs::read_to_string(&t).unwrap();
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: std::collections::BTreeSet<&str> =
        events.iter().filter_map(|e| e["event"].as_str()).collect();
    for k in [
        "step",
        "var_set",
        "jump",
        "tool_call_start",
        "tool_call_end",
        "done",
    ] {
        assert!(kinds.contains(k), "no {k} event in:\n{text}");
    }
    let taken: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "jump")
        .map(|e| &e["taken"])
        .collect();
    assert_eq!(taken, [&json!(true), &json!(true), &json!(false)]);
    assert!(
        events
            .iter()
            .all(|e| e["ts_ms"].is_u64() && e["t_ms"].is_u64())
    );
}

const KEY: &str = "sk-cli-test-DO-NOT-LEAK-42";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_keeps_failing_exits_1_without_leaking_the_key() {
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_string("model crashed"))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.toml");
    std::fs::write(
        &tools,
        format!(
            "[defaults.backend]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\napi_key_env = \"PLANVM_TEST_KEY\"\nmax_retries = 1\n",
            server.uri()
        ),
    )
    .unwrap();
    let args = [
        "run".to_owned(),
        ex("countdown_loop.json"),
        "--tools".into(),
        tools.display().to_string(),
    ];
    let out = tokio::task::spawn_blocking(move || {
        Command::new(BIN)
            .args(&args)
            .env("PLANVM_TEST_KEY", KEY)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("HTTP 500 Internal Server Error: model crashed (gave up after 2 attempts)"),
        "{stderr}"
    );
    assert!(stderr.contains("seq_no 2"), "{stderr}");
    assert!(!stderr.contains(KEY));
    // Two attempts of seq 2; the VM may also have issued the (independent) condition of
    // seq 5 ahead, which the failed run then cancels.
    assert!(server.received_requests().await.unwrap().len() >= 2);
}
