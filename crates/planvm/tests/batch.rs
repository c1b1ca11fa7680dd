//! `planvm batch` end to end: a directory of plans with their cassettes, invalid plans
//! among valid ones, a recording refused over an input, and the exit codes. The engine's
//! lists, replays, records and traces per run, and how a thousand runs overlap, are
//! `plan-runs/tests/batch.rs`.

use std::path::Path;

use serde_json::{Value, json};

mod common;

use common::{Out, RESULT_KEYS, examples, expected, json_lines, keys, run, s};

/// `planvm batch ARGS`, and the JSON lines of its stdout.
fn batch(args: &[&str]) -> (Out, Vec<Value>) {
    let r = run(["batch"].iter().chain(args));
    let lines = json_lines(&r.stdout);
    (r, lines)
}

/// The keys of every output line, in order: `plan` (and `line`) first, then the object
/// `planvm run --format json` prints.
fn assert_shape(v: &Value, list: bool) {
    let head: &[&str] = if list { &["plan", "line"] } else { &["plan"] };
    assert_eq!(keys(v), [head, &RESULT_KEYS].concat(), "{v}");
}

/// The line for `plan_name` (by file name).
fn line_for<'a>(lines: &'a [Value], plan_name: &str) -> &'a Value {
    lines
        .iter()
        .find(|v| v["plan"].as_str().is_some_and(|p| p.ends_with(plan_name)))
        .unwrap_or_else(|| panic!("no line for {plan_name}"))
}

fn copy_examples(to: &Path) {
    for entry in std::fs::read_dir(examples()).expect("examples dir") {
        let entry = entry.expect("entry");
        // NB: plans only; `planner/` holds the planner's example plans.
        if entry.path().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
        }
    }
}

#[test]
fn a_directory_runs_every_plan_with_the_cassette_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    copy_examples(dir.path());
    let (r, lines) = batch(&[&s(dir.path())]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    // tidb_overview.llm.txt finds tidb_overview.cassette.jsonl (shorter stem);
    // tools.openai.toml and the cassettes are not plans.
    let want = [
        ("countdown_loop.json", "countdown_loop.txt"),
        ("population_condition.json", "population_condition.txt"),
        ("tidb_overview.json", "tidb_overview.txt"),
        ("tidb_overview.llm.txt", "tidb_overview.txt"),
    ];
    assert_eq!(lines.len(), want.len(), "{}", r.stdout);
    for (plan, answer) in want {
        let v = line_for(&lines, plan);
        assert_shape(v, false);
        assert_eq!(v["status"], "ok", "{v}");
        assert_eq!(
            v["final_answer"].as_str().map(|s| format!("{s}\n")),
            Some(expected(answer)),
            "{plan}"
        );
    }
    assert!(
        r.stderr.contains("batch: 4 runs, 4 ok, 0 failed"),
        "{}",
        r.stderr
    );
    // Warnings (the LLM variant's repairs) are not printed in a batch.
    assert!(!r.stderr.contains("warning["), "{}", r.stderr);
}

#[test]
fn invalid_plans_are_reported_as_failed_lines_and_the_rest_still_run() {
    let dir = tempfile::tempdir().unwrap();
    copy_examples(dir.path());
    let d = dir.path();
    // Invalid source, corrupted bytecode, a malformed sibling cassette.
    std::fs::write(
        d.join("bad.json"),
        r#"[{"seq_no": 0, "type": "assign", "parameters": {"x": 1}}]"#,
    )
    .unwrap();
    std::fs::write(d.join("corrupt.pbc"), b"PLBC\x00\x01garbage").unwrap();
    std::fs::copy(d.join("countdown_loop.json"), d.join("copy.json")).unwrap();
    std::fs::write(d.join("copy.cassette.jsonl"), "not json\n").unwrap();
    let out = d.join("out.jsonl");
    let (r, _) = batch(&[&s(d), "--output", &s(&out)]);
    assert_eq!(r.code, Some(65), "{}", r.stderr);
    assert_eq!(r.stdout, "", "--output takes the lines");
    let lines = common::lines(&out);
    assert_eq!(lines.len(), 7);
    let bad = line_for(&lines, "bad.json");
    assert_shape(bad, false);
    assert_eq!(bad["status"], "failed");
    assert_eq!(bad["steps"], 0);
    let msg = bad["error"]["message"].as_str().unwrap();
    // The summary and each error on its own line.
    assert!(
        msg.contains("bad.json: 1 error; the plan was not run\n"),
        "{msg}"
    );
    assert!(msg.contains("error[E0206]"), "{msg}");
    // The rendered diagnostics go to stderr once.
    assert_eq!(r.stderr.matches("error[E0206]").count(), 1, "{}", r.stderr);
    let corrupt = line_for(&lines, "corrupt.pbc");
    assert_eq!(corrupt["status"], "failed");
    let copy = line_for(&lines, "copy.json");
    assert_eq!(copy["status"], "failed");
    assert!(
        copy["error"]["message"]
            .as_str()
            .unwrap()
            .contains("copy.cassette.jsonl:1"),
        "{copy}"
    );
    for plan in [
        "countdown_loop.json",
        "population_condition.json",
        "tidb_overview.json",
        "tidb_overview.llm.txt",
    ] {
        assert_eq!(line_for(&lines, plan)["status"], "ok", "{plan}");
    }
    assert!(
        r.stderr
            .contains("batch: 7 runs, 4 ok, 3 failed (3 not loaded)"),
        "{}",
        r.stderr
    );
}

/// A one-call plan greeting `${who}`.
const GREET: &str = r#"[{"seq_no": 0, "type": "calling", "parameters": {"tool_name": "llm_generate",
    "tool_params": {"prompt": "Say hi to ${who}"}, "output_vars": ["final_answer"]}}]"#;

/// The flags reach the engine: a list's line variables over `--var`, `--replay` for a
/// line without a cassette, `--trace` into a directory made for it.
#[test]
fn a_list_with_vars_a_replay_and_a_trace_dir() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("greet.json"), GREET).unwrap();
    let entry = |who: &str| {
        json!({"tool": "llm_generate", "args": {"prompt": format!("Say hi to {who}")},
               "output": format!("Hi {who}")})
        .to_string()
    };
    std::fs::write(d.join("en.jsonl"), [entry("Ann"), entry("Bob")].join("\n")).unwrap();
    std::fs::write(d.join("runs.txt"), "greet.json who=Bob\ngreet.json\n").unwrap();
    let traces = d.join("out/traces");
    let (list, en, t) = (s(&d.join("runs.txt")), s(&d.join("en.jsonl")), s(&traces));
    let (r, lines) = batch(&[
        "--list", &list, "--replay", &en, "--var", "who=Ann", "--trace", &t,
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let mut answers: Vec<(u64, &Value)> = lines
        .iter()
        .map(|v| {
            assert_shape(v, true);
            (v["line"].as_u64().unwrap(), &v["final_answer"])
        })
        .collect();
    answers.sort_by_key(|(l, _)| *l);
    assert_eq!(answers, [(1, &json!("Hi Bob")), (2, &json!("Hi Ann"))]);
    assert!(traces.join("greet.line1.trace.jsonl").exists());
}

#[test]
fn recording_over_a_runs_own_cassette_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    copy_examples(dir.path());
    let cassette = dir.path().join("tidb_overview.cassette.jsonl");
    let before = std::fs::read(&cassette).unwrap();
    // DIR is also the record directory: tidb_overview's recording would be its cassette.
    let d = &s(dir.path());
    let (r, lines) = batch(&[d, "--record", d]);
    assert_eq!(r.code, Some(64), "{}", r.stderr);
    let v = line_for(&lines, "tidb_overview.json");
    assert_eq!(v["status"], "failed");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("would overwrite this run's input"), "{msg}");
    assert_eq!(
        std::fs::read(&cassette).unwrap(),
        before,
        "the input was changed"
    );
}

#[test]
fn bad_command_lines_and_inputs_have_their_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("greet.json"), GREET).unwrap();
    std::fs::write(d.join("bad_list.txt"), "greet.json\ngreet.json a b c\n").unwrap();
    let p = |name: &str| s(&d.join(name));
    let (ds, bad_list, greet) = (&s(d), &p("bad_list.txt"), &p("greet.json"));
    let (nope, nope_txt, missing) = (&p("nope"), &p("nope.txt"), &p("missing.jsonl"));
    let no_dir = &p("no/such/dir/out");
    let empty_dir = tempfile::tempdir().unwrap();
    let empty = &s(empty_dir.path());
    let cases: &[(&[&str], i32, &str)] = &[
        (&[], 2, "required"),
        (&[ds, "--list", bad_list], 2, "cannot be used with"),
        (&[ds, "--jobs", "0"], 2, "--jobs"),
        (&["--list", bad_list], 2, "bad_list.txt:2: unexpected `b`"),
        (&["--list", nope_txt], 2, "cannot read"),
        (&[nope], 66, "cannot read"),
        (&[empty], 66, "no plan files"),
        (&[ds, "--replay", greet], 65, "greet.json:1"),
        (&[ds, "--replay", missing], 66, "missing.jsonl"),
        (&[ds, "--output", no_dir], 73, "cannot create"),
    ];
    for &(args, code, needle) in cases {
        let (r, lines) = batch(args);
        assert_eq!(r.code, Some(code), "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(needle), "{args:?}: {}", r.stderr);
        assert!(lines.is_empty(), "{args:?}");
    }
}
