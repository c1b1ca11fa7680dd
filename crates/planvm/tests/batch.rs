//! `planvm batch` end to end: a directory of plans with their cassettes, a list file with
//! per-line cassettes and variables, invalid plans among valid ones, independent replay
//! cursors per run, and the exit codes. (How a thousand runs overlap is
//! `plan-runs/tests/batch.rs`, on the paused clock.)

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

/// A one-call plan greeting `${who}`, and cassettes answering for some names.
fn write_greeting(d: &Path) {
    std::fs::write(
        d.join("greet.json"),
        r#"[{"seq_no": 0, "type": "calling", "parameters": {"tool_name": "llm_generate",
            "tool_params": {"prompt": "Say hi to ${who}"}, "output_vars": ["final_answer"]}}]"#,
    )
    .unwrap();
    let entry = |who: &str, answer: &str| {
        json!({"tool": "llm_generate", "args": {"prompt": format!("Say hi to {who}")},
               "output": answer})
        .to_string()
    };
    std::fs::create_dir_all(d.join("tapes")).unwrap();
    std::fs::write(
        d.join("tapes/en.jsonl"),
        [entry("Ann", "Hi Ann"), entry("Bob", "Hi Bob")].join("\n"),
    )
    .unwrap();
    std::fs::write(
        d.join("tapes/fr.jsonl"),
        [
            entry("Ann", "Salut Ann"),
            entry("two words", "Salut vous deux"),
        ]
        .join("\n"),
    )
    .unwrap();
}

#[test]
fn a_list_gives_each_run_its_cassette_and_vars() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_greeting(d);
    // Relative paths are against the list's directory, wherever planvm runs.
    let list = "\
# plan        cassette          vars
greet.json    tapes/en.jsonl    who=Ann
greet.json    tapes/fr.jsonl    who=Ann   # same plan, other cassette

greet.json    tapes/fr.jsonl    who=\"two words\"
greet.json                      who=Bob   # --replay serves lines without a cassette
greet.json                                # --var who=Ann
greet.json    tapes/en.jsonl    who=Zed   # not in the cassette: fails
";
    let list_path = d.join("runs.txt");
    std::fs::write(&list_path, list).unwrap();
    let en = d.join("tapes/en.jsonl");
    let r = batch(&[
        "--list",
        list_path.to_str().unwrap(),
        "--replay",
        en.to_str().unwrap(),
        "--var",
        "who=Ann",
        "--jobs",
        "3",
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(r.lines.len(), 6);
    let mut by_line: Vec<(u64, Value, Value)> = r
        .lines
        .iter()
        .map(|v| {
            assert_shape(v, true);
            assert_eq!(v["plan"], json!(d.join("greet.json").display().to_string()));
            (
                v["line"].as_u64().unwrap(),
                v["status"].clone(),
                v["final_answer"].clone(),
            )
        })
        .collect();
    by_line.sort_by_key(|(l, _, _)| *l);
    assert_eq!(
        by_line,
        vec![
            (2, json!("ok"), json!("Hi Ann")),
            (3, json!("ok"), json!("Salut Ann")),
            (5, json!("ok"), json!("Salut vous deux")),
            (6, json!("ok"), json!("Hi Bob")),
            (7, json!("ok"), json!("Hi Ann")),
            (8, json!("failed"), Value::Null),
        ]
    );
    let failed = r.lines.iter().find(|v| v["line"] == 8).unwrap();
    assert!(
        failed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Say hi to Zed"),
        "{failed}"
    );
}

#[test]
fn record_and_trace_dirs_get_one_file_per_run_named_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let plans = dir.path().join("plans");
    std::fs::create_dir(&plans).unwrap();
    copy_examples(&plans);
    let rec = dir.path().join("rec");
    let traces = dir.path().join("out/traces");
    let r = batch(&[
        plans.to_str().unwrap(),
        "--record",
        rec.to_str().unwrap(),
        "--trace",
        traces.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let runs = [
        ("countdown_loop", "countdown_loop.json"),
        ("population_condition", "population_condition.json"),
        ("tidb_overview", "tidb_overview.json"),
        ("tidb_overview.llm", "tidb_overview.llm.txt"),
    ];
    let listing = |d: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let want = |kind: &str| -> Vec<String> {
        let mut v: Vec<String> = runs
            .iter()
            .map(|(n, _)| format!("{n}.{kind}.jsonl"))
            .collect();
        v.sort();
        v
    };
    assert_eq!(listing(&rec), want("cassette"));
    assert_eq!(listing(&traces), want("trace"));
    for (name, plan) in runs {
        // Each trace is its own run's, start to end.
        let trace = std::fs::read_to_string(traces.join(format!("{name}.trace.jsonl"))).unwrap();
        let events: Vec<Value> = trace
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(events.last().unwrap()["event"], "done", "{name}");
        assert_eq!(events.last().unwrap()["status"], "ok", "{name}");
        // Each recording replays its plan to the same answer, every entry with its step.
        let cassette = rec.join(format!("{name}.cassette.jsonl"));
        let text = std::fs::read_to_string(&cassette).unwrap();
        assert!(!text.is_empty(), "{name}");
        for l in text.lines() {
            let e: Value = serde_json::from_str(l).unwrap();
            assert!(e["step"].is_u64(), "{name}: {l}");
        }
        let plan = plans.join(plan);
        let again = Command::new(BIN)
            .args([
                "run",
                plan.to_str().unwrap(),
                "--replay",
                cassette.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert_eq!(again.status.code(), Some(0), "{name}");
        let first = line_for(&r.lines, plan.file_name().unwrap().to_str().unwrap());
        let answer = String::from_utf8_lossy(&again.stdout);
        assert_eq!(
            first["final_answer"].as_str().map(|a| format!("{a}\n")),
            Some(answer.into_owned()),
            "{name}"
        );
    }

    // A list names runs by line, so one plan listed twice gets two files.
    let list = dir.path().join("runs.txt");
    std::fs::write(
        &list,
        "plans/countdown_loop.json plans/countdown_loop.cassette.jsonl\n\nplans/countdown_loop.json plans/countdown_loop.cassette.jsonl\n",
    )
    .unwrap();
    let rec2 = dir.path().join("rec2");
    let r = batch(&[
        "--list",
        list.to_str().unwrap(),
        "--record",
        rec2.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        listing(&rec2),
        [
            "countdown_loop.line1.cassette.jsonl",
            "countdown_loop.line3.cassette.jsonl"
        ]
    );
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
fn every_run_replays_its_cassette_from_the_start() {
    // "Entries with the same key are served in recorded order": shared between runs,
    // the 2nd run would get "second". Every run must get "first".
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("ask.json"),
        r#"[{"seq_no": 0, "type": "calling", "parameters": {"tool_name": "llm_generate",
            "tool_params": {"prompt": "q"}, "output_vars": ["final_answer"]}}]"#,
    )
    .unwrap();
    let entry = |out: &str| json!({"tool": "llm_generate", "args": {"prompt": "q"}, "output": out});
    std::fs::write(
        d.join("ask.cassette.jsonl"),
        format!("{}\n{}\n", entry("first"), entry("second")),
    )
    .unwrap();
    let list: String = (0..50)
        .map(|i| {
            if i % 2 == 0 {
                "ask.json ask.cassette.jsonl\n"
            } else {
                "ask.json\n"
            }
        })
        .collect();
    std::fs::write(d.join("runs.txt"), list).unwrap();
    let replay = d.join("ask.cassette.jsonl");
    let r = batch(&[
        "--list",
        d.join("runs.txt").to_str().unwrap(),
        "--replay",
        replay.to_str().unwrap(),
        "--jobs",
        "7",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.lines.len(), 50);
    for v in &r.lines {
        assert_eq!(v["final_answer"], "first", "{v}");
    }
}

#[test]
fn bad_command_lines_and_inputs_have_their_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_greeting(d);
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
