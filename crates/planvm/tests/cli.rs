//! `planvm` end to end: the built binary on the shipped examples (offline, from their
//! cassettes), the output formats, and the documented exit code for each kind of bad input.

use serde_json::{Value, json};

mod common;

use common::{Out, RESULT_KEYS, ex, examples, expected, keys, planvm, run, s};

/// `planvm run PLAN --replay CASSETTE EXTRA...`.
fn replayed(plan: &str, cassette: &str, extra: &[&str]) -> Out {
    run(["run", plan, "--replay", cassette].iter().chain(extra))
}

/// The shipped example `name` replayed from its own cassette (`STEM.cassette.jsonl`).
fn example(name: &str, extra: &[&str]) -> Out {
    let stem = name.split('.').next().unwrap();
    replayed(&ex(name), &ex(&format!("{stem}.cassette.jsonl")), extra)
}

/// (plan file, expected answer file)
const EXAMPLES: &[(&str, &str)] = &[
    ("tidb_overview.json", "tidb_overview.txt"),
    ("tidb_overview.llm.txt", "tidb_overview.txt"),
    ("countdown_loop.json", "countdown_loop.txt"),
    ("population_condition.json", "population_condition.txt"),
];

#[test]
fn every_example_runs_offline_and_prints_its_answer() {
    for (plan, answer) in EXAMPLES {
        // Independent calls concurrently (default) and one at a time: same answer.
        for concurrency in ["16", "1"] {
            let r = example(plan, &["--max-concurrency", concurrency]);
            assert_eq!(r.code, Some(0), "{plan}: {}", r.stderr);
            assert_eq!(r.stdout, expected(answer), "{plan}");
        }
    }
}

#[test]
fn the_llm_variant_reports_its_repairs_as_warnings_on_stderr() {
    let r = example("tidb_overview.llm.txt", &[]);
    assert_eq!(r.code, Some(0));
    assert!(r.stderr.contains("warning[W0003]"), "{}", r.stderr);
}

#[test]
fn json_format_has_the_documented_shape() {
    let r = example("tidb_overview.json", &["--format", "json"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout.lines().count(), 1);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(keys(&v), RESULT_KEYS);
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

/// A cassette without the entry of a call (the TiDB one without its final synthesis) fails
/// the run on that tool: on stderr naming the tool, its args and the closest recorded ones;
/// with `--format json`, as an error with its code and location.
#[test]
fn missing_cassette_entry_fails_naming_the_tool_and_closest_args_and_json_has_location() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(ex("tidb_overview.cassette.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let c = s(&dir.path().join("partial.jsonl"));
    std::fs::write(&c, lines[..lines.len() - 1].join("\n")).unwrap();
    let plan = ex("tidb_overview.json");

    let r = replayed(&plan, &c, &[]);
    assert_eq!(r.code, Some(1));
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

    let r = replayed(&plan, &c, &["--format", "json"]);
    assert_eq!(r.code, Some(1));
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["status"], "failed");
    assert_eq!(v["final_answer"], Value::Null);
    assert_eq!(keys(&v["error"]), ["code", "message", "seq_no", "line"]);
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
    let r = replayed(&s(&p), &ex("countdown_loop.cassette.jsonl"), &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
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
    let (p, cassette) = (
        dir.path().join("bad.pbc"),
        ex("population_condition.cassette.jsonl"),
    );
    for (what, data) in cases {
        std::fs::write(&p, &data).unwrap();
        let r = replayed(&s(&p), &cassette, &[]);
        assert_eq!(r.code, Some(65), "{what}: {}", r.stderr);
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
    let p = dir.path().join("plan.json");
    for (what, data, needle) in cases {
        std::fs::write(&p, data).unwrap();
        let r = run(["run", &s(&p)]);
        assert_eq!(r.code, Some(65), "{what}: {}", r.stderr);
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
        let r = run(*args);
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.stderr);
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
    let r = run(["run", &ex("countdown_loop.json"), "--tools", &s(&t)]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
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
    let plan = ex("countdown_loop.json");
    let r = replayed(&plan, &s(&c), &[]);
    assert_eq!(r.code, Some(65), "{}", r.stderr);
    assert!(
        r.stderr.contains("bad.jsonl:2: not a JSON object"),
        "{}",
        r.stderr
    );

    let r = replayed(&plan, &s(&dir.path().join("none.jsonl")), &[]);
    assert_eq!(r.code, Some(66), "{}", r.stderr);

    let r = run(["run", &s(&dir.path().join("missing-plan.json"))]);
    assert_eq!(r.code, Some(66), "{}", r.stderr);
    assert!(r.stderr.contains("cannot read"), "{}", r.stderr);
}

#[test]
fn no_backend_fails_the_run_before_it_starts() {
    let r = run(["run", &ex("population_condition.json")]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
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
    let r = example("countdown_loop.json", &["--max-steps", "6"]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("6"), "{}", r.stderr);

    let r = example("tidb_overview.json", &["--max-bytes", "2000"]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("2000"), "{}", r.stderr);

    let dir = tempfile::tempdir().unwrap();
    let c = s(&dir.path().join("slow.jsonl"));
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
    let plan = ex("countdown_loop.json");
    let r = replayed(&plan, &c, &["--timeout", "0.3"]);
    // NB: the first call alone would take a minute: the error (not the clock) shows the
    // deadline ended it.
    assert_eq!(r.code, Some(1));
    assert!(
        r.stderr.contains("deadline of 0.3 s exceeded"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("seq_no 2"), "{}", r.stderr);

    let r = replayed(&plan, &c, &["--tool-timeout", "0.2"]);
    assert_eq!(r.code, Some(1));
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
    let inputs = || [&plan, &cassette].map(|p| std::fs::read(p).unwrap());
    let before = inputs();
    let (p, c) = (&s(&plan), &s(&cassette));
    let dotted = s(&dir.path().join(".").join("tidb_overview.cassette.jsonl"));
    let f = &s(&dir.path().join("out.jsonl"));
    let cases: [(&[&str], &str); 3] = [
        (&["--trace", &dotted], "--trace"),
        (&["--record", p], "--record"),
        (&["--trace", f, "--record", f], "--record"),
    ];
    for (extra, says) in cases {
        let r = replayed(p, c, extra);
        assert_eq!(r.code, Some(64), "{extra:?}: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!("error: {says} ")),
            "{}",
            r.stderr
        );
        assert!(r.stderr.contains("would be overwritten"), "{}", r.stderr);
    }
    assert_eq!(inputs(), before, "an input was changed");

    let list = s(&dir.path().join("runs.txt"));
    std::fs::write(&list, "tidb_overview.json tidb_overview.cassette.jsonl\n").unwrap();
    for output in [&list, c] {
        let r = run(["batch", "--list", &list, "--output", output]);
        assert_eq!(r.code, Some(64), "{output}");
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
    let ps = &s(&p);
    let r = run([
        "run",
        ps,
        "--var",
        "n=41",
        "--var",
        "who=Ada Lovelace",
        "--var",
        r#"cfg={"mode":"fast"}"#,
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout, "Ada Lovelace asked for 42 (fast)\n");
    // The variables given are set: no warning that they are never assigned.
    assert!(!r.stderr.contains("never assigned"), "{}", r.stderr);
    let r = run(["run", ps, "--var", "n=41"]);
    assert!(r.stderr.contains("`who` is never assigned"), "{}", r.stderr);
    assert!(!r.stderr.contains("`n` is never assigned"), "{}", r.stderr);

    // A non-string final answer prints as compact JSON.
    std::fs::write(
        &p,
        r#"[{"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "c", "dependency_analysis": "d"}},
            {"seq_no": 1, "type": "assign", "parameters": {"final_answer": "${cfg}"}}]"#,
    )
    .unwrap();
    let r = run(["run", ps, "--var", r#"cfg={"mode": "fast", "n": [1, 2]}"#]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout, "{\"mode\":\"fast\",\"n\":[1,2]}\n");
}

#[test]
fn trace_file_has_every_event_kind() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("trace.jsonl");
    let r = example("countdown_loop.json", &["--trace", &s(&t)]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let text = std::fs::read_to_string(&t).unwrap();
    let events = common::json_lines(&text);
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
    let args = ["run", &ex("countdown_loop.json"), "--tools", &s(&tools)];
    let r = planvm(args, &[("PLANVM_TEST_KEY", KEY)]).await;
    let stderr = r.stderr;
    assert_eq!(r.code, Some(1), "{stderr}");
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
