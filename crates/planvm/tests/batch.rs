//! `planvm batch` end to end: a directory of plans with their cassettes, invalid plans
//! among valid ones, a recording refused over an input, and the exit codes. The engine's
//! lists, replays, records and traces per run, and how a thousand runs overlap, are
//! `plan-runs/tests/batch.rs`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_planvm");

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn expected(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/expected")
        .join(name);
    std::fs::read_to_string(p).expect("expected answer file")
}

struct Run {
    code: i32,
    lines: Vec<Value>,
    stdout: String,
    stderr: String,
}

fn batch(args: &[&str]) -> Run {
    let out = Command::new(BIN)
        .arg("batch")
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("run planvm");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{args:?} panicked:\n{stderr}");
    let lines = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    Run {
        code: out.status.code().unwrap_or(-1),
        lines,
        stdout,
        stderr,
    }
}

/// The keys of every output line, in order: `plan` (and `line`) first, then the object
/// `planvm run --format json` prints.
fn assert_shape(v: &Value, list: bool) {
    let keys: Vec<&str> = v
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    let mut want = vec!["plan"];
    if list {
        want.push("line");
    }
    want.extend([
        "status",
        "final_answer",
        "error",
        "steps",
        "tool_calls",
        "elapsed_ms",
    ]);
    assert_eq!(keys, want, "{v}");
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
    let r = batch(&[dir.path().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // tidb_overview.llm.txt finds tidb_overview.cassette.jsonl (shorter stem);
    // tools.openai.toml and the cassettes are not plans.
    let want = [
        ("countdown_loop.json", "countdown_loop.txt"),
        ("population_condition.json", "population_condition.txt"),
        ("tidb_overview.json", "tidb_overview.txt"),
        ("tidb_overview.llm.txt", "tidb_overview.txt"),
    ];
    assert_eq!(r.lines.len(), want.len(), "{}", r.stdout);
    for (plan, answer) in want {
        let v = line_for(&r.lines, plan);
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
    let r = batch(&[d.to_str().unwrap(), "--output", out.to_str().unwrap()]);
    assert_eq!(r.code, 65, "{}", r.stderr);
    assert_eq!(r.stdout, "", "--output takes the lines");
    let lines: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
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
    let (list, replay) = (d.join("runs.txt"), d.join("en.jsonl"));
    let r = batch(&[
        "--list",
        list.to_str().unwrap(),
        "--replay",
        replay.to_str().unwrap(),
        "--var",
        "who=Ann",
        "--trace",
        traces.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut answers: Vec<(u64, &Value)> = r
        .lines
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
    let r = batch(&[
        dir.path().to_str().unwrap(),
        "--record",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(r.code, 64, "{}", r.stderr);
    let v = line_for(&r.lines, "tidb_overview.json");
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
    let ds = d.to_str().unwrap();
    std::fs::write(d.join("bad_list.txt"), "greet.json\ngreet.json a b c\n").unwrap();
    let bad_list = d.join("bad_list.txt");
    let empty = tempfile::tempdir().unwrap();
    let cases: Vec<(Vec<String>, i32, &str)> = vec![
        (vec![], 2, "required"),
        (
            vec![ds.into(), "--list".into(), bad_list.display().to_string()],
            2,
            "cannot be used with",
        ),
        (vec![ds.into(), "--jobs".into(), "0".into()], 2, "--jobs"),
        (
            vec!["--list".into(), bad_list.display().to_string()],
            2,
            "bad_list.txt:2: unexpected `b`",
        ),
        (
            vec!["--list".into(), d.join("nope.txt").display().to_string()],
            2,
            "cannot read",
        ),
        (
            vec![d.join("nope").display().to_string()],
            66,
            "cannot read",
        ),
        (
            vec![empty.path().display().to_string()],
            66,
            "no plan files",
        ),
        (
            vec![
                ds.into(),
                "--replay".into(),
                d.join("greet.json").display().to_string(),
            ],
            65,
            "greet.json:1",
        ),
        (
            vec![
                ds.into(),
                "--replay".into(),
                d.join("missing.jsonl").display().to_string(),
            ],
            66,
            "missing.jsonl",
        ),
        (
            vec![
                ds.into(),
                "--output".into(),
                d.join("no/such/dir/out").display().to_string(),
            ],
            73,
            "cannot create",
        ),
    ];
    for (args, code, needle) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = batch(&args);
        assert_eq!(r.code, code, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(needle), "{args:?}: {}", r.stderr);
        assert!(r.lines.is_empty(), "{args:?}");
    }
}
