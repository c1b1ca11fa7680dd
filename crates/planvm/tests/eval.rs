//! `planvm eval` offline, what only the binary does: its arguments, the report as JSON
//! and text, the exit codes of the gates (`--fail-under`, `--compare`), `--promote`, a
//! bad dataset line, `--tools` with a judge, the refusal to record over the dataset,
//! `--store` with `runs feedback`, and the example dataset replayed.
//!
//! The engine is tested in process by crates/plan-eval/tests/eval.rs: how the LLM judge
//! grades (a live judge, a reply that cannot be read), each case's calls recorded,
//! replayed and answered from recordings (`--record`, `--replay DIR`, `--tools-from`),
//! and what an evaluation keeps in the store (each case's goal, runs and verdict, people's
//! latest verdict in a comparison).

mod common;

use std::path::Path;

use common::{Out, planvm, root, s};
use serde_json::{Value, json};

/// A planner reply: a plan whose answer is `answer`.
fn answering(answer: &str) -> String {
    let plan = json!([
        {"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "Answer.", "dependency_analysis": "None."}},
        {"seq_no": 1, "type": "assign", "parameters": {"final_answer": answer}}
    ]);
    format!("```json\n{plan}\n```")
}

fn entry(goal: &str, reply: &str) -> String {
    json!({"tool": "planner", "args": {"goal": goal, "response_format": null, "feedback": null}, "output": reply})
        .to_string()
}

/// Case `id` of report `r`.
fn case(r: &Value, id: &str) -> Value {
    r["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .cloned()
        .unwrap()
}

struct Setup {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_owned();
        let cassette = [
            entry("What is 6 times 7?", &answering("42")),
            entry("Name the capital of France.", &answering("Paris is the capital of France.")),
            entry("What is 7 times 6?", &answering("42")),
            // NB: a plan with an error, and no reply to the repair's request.
            entry("Break.", "```json\n[{\"seq_no\": 0, \"type\": \"calling\", \"parameters\": {\"tool_name\": \"nope\", \"tool_params\": {}, \"output_vars\": [\"final_answer\"]}}]\n```"),
        ]
        .join("\n");
        std::fs::write(root.join("planner.jsonl"), cassette + "\n").unwrap();
        let dataset = [
            r#"{"id": "mult", "goal": "What is 6 times 7?", "expected": "42"}"#,
            r#"{"id": "capital", "goal": "Name the capital of France.", "must_contain": ["paris"], "must_not_contain": ["Lyon"], "labels": ["geo"]}"#,
            r#"{"id": "wrong", "goal": "What is 7 times 6?", "regex": "^43$"}"#,
            r#"this line is not JSON"#,
            r#"{"id": "broken", "goal": "Break."}"#,
        ]
        .join("\n");
        std::fs::write(root.join("set.jsonl"), dataset + "\n").unwrap();
        Setup { _dir: dir, root }
    }

    fn path(&self, name: &str) -> String {
        s(&self.root.join(name))
    }

    async fn eval(&self, extra: &[&str]) -> Out {
        let (set, planner) = (self.path("set.jsonl"), self.path("planner.jsonl"));
        let args = ["eval", &set, "--replay", &planner, "--max-repairs", "1"];
        planvm(args.iter().chain(extra), &[]).await
    }
}

#[tokio::test]
async fn a_dataset_is_graded_and_the_gates_and_promotion_work() {
    let t = Setup::new();
    let report = t.path("report.json");
    let out = t.eval(&["--format", "json", "--output", &report]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("set.jsonl: line 4: expected ident at line 1 column 2: skipped"),
        "{}",
        out.stderr
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let s = &r["summary"];
    assert_eq!(
        (s["cases"].as_u64(), s["passed"].as_u64()),
        (Some(4), Some(2)),
        "{s}"
    );
    assert_eq!(s["failures"], json!({"checks": 1, "planner_failed": 1}));
    assert_eq!(s["pass_rate"], 0.5);
    let case = |id: &str| case(&r, id);
    assert_eq!(case("mult")["verdict"], "pass");
    assert_eq!(case("mult")["answer"], "42");
    assert_eq!(case("capital")["verdict"], "pass");
    assert_eq!(case("wrong")["verdict"], "fail");
    assert_eq!(case("wrong")["reason"], "the answer does not match /^43$/");
    assert_eq!(case("broken")["status"], "planner_failed");
    assert_eq!(case("broken")["rounds"], 2);
    assert_eq!(r["skipped"].as_array().unwrap().len(), 1);

    // The gates.
    assert_eq!(t.eval(&["--fail-under", "0.9"]).await.code, Some(1));
    let text = t.eval(&["--fail-under", "0.5"]).await;
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    assert!(
        text.stdout
            .contains("4 cases: 2 passed, 2 failed; pass rate 50.0%"),
        "{}",
        text.stdout
    );
    let mut baseline = r.clone();
    for c in baseline["cases"].as_array_mut().unwrap() {
        if c["id"] == "wrong" {
            c["verdict"] = json!("pass");
            c["score"] = json!(1.0);
        }
    }
    let base = t.path("baseline.json");
    std::fs::write(&base, baseline.to_string()).unwrap();
    let out = t.eval(&["--compare", &base, "--format", "json"]).await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let cmp: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(cmp["comparison"]["regressions"], 1);
    assert_eq!(cmp["comparison"]["changes"][0]["id"], "wrong");
    assert_eq!(cmp["comparison"]["changes"][0]["change"], "regression");
    // Against itself, nothing changed.
    assert_eq!(t.eval(&["--compare", &report]).await.code, Some(0));
    assert_eq!(
        t.eval(&["--compare", &t.path("set.jsonl")]).await.code,
        Some(65)
    );

    // Each passing case becomes an example, with its labels, never over a file.
    let promoted = t.path("examples");
    for _ in 0..2 {
        let out = t.eval(&["--promote", &promoted]).await;
        assert_eq!(out.code, Some(0), "{}", out.stderr);
    }
    let mut files: Vec<String> = std::fs::read_dir(Path::new(&promoted))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files.len(), 4, "{files:?}");
    let capital: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(&promoted).join("name-the-capital-of-france.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(capital["labels"], json!(["geo"]));

    // An unreadable dataset.
    let out = planvm(vec!["eval".into(), t.path("missing.jsonl")], &[]).await;
    assert_eq!(out.code, Some(66), "{}", out.stderr);
}

/// The tools file's `[eval.judge]` grades each answer beside its checks: here from the
/// replayed cassette, which answers the judge as it answers the planner.
#[tokio::test]
async fn the_tools_files_judge_grades_beside_the_checks() {
    let t = Setup::new();
    let judged = json!({"tool": "judge", "args": {"goal": "What is 7 times 6?", "expected": null, "answer": "42"},
                        "output": "{\"verdict\": \"fail\", \"reason\": \"not 43\"}"});
    let mut cassette = std::fs::read_to_string(t.path("planner.jsonl")).unwrap();
    cassette.push_str(&format!("{judged}\n"));
    std::fs::write(t.path("planner.jsonl"), cassette).unwrap();
    let tools = t.path("tools.toml");
    std::fs::write(&tools, "[eval.judge]\n").unwrap();
    let out = t.eval(&["--tools", &tools, "--format", "json"]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let r: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        case(&r, "wrong")["reason"],
        "the answer does not match /^43$/; the judge: not 43"
    );
}

/// Recording into a directory that holds the dataset would overwrite it: refused before
/// anything is asked.
#[tokio::test]
async fn recording_over_the_dataset_is_refused() {
    let t = Setup::new();
    std::fs::write(t.path("b.cassette.jsonl"), r#"{"id": "b", "goal": "x"}"#).unwrap();
    let args = ["eval", &t.path("b.cassette.jsonl"), "--record", &t.path("")];
    let out = planvm(args.map(String::from).to_vec(), &[]).await;
    assert_eq!(out.code, Some(64), "{}", out.stderr);
}

/// The README's example: the example dataset replayed from its recordings, offline.
#[tokio::test]
async fn the_example_dataset_replays_offline() {
    let [data, tools, recordings] = ["eval/tidb.jsonl", "ask.toml", "eval/recordings"]
        .map(|p| s(&root().join("examples").join(p)));
    let args = ["eval", &data, "--tools", &tools, "--replay", &recordings];
    let out = planvm(args.into_iter().chain(["--format", "json"]), &[]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let r: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(r["summary"]["cases"], 3, "{r}");
    assert_eq!(r["summary"]["passed"], 3, "{r}");
}

/// `--store` and `--eval-id` keep the evaluation (an id already taken is refused), `runs
/// feedback` gives a person's verdict on a case's run, and a later `--compare` with
/// `--store` shows it.
#[tokio::test]
async fn an_evaluation_is_stored_and_peoples_verdicts_show_in_a_comparison() {
    let t = Setup::new();
    let db = t.path("s.db");
    let report = t.path("report.json");
    let stored = ["--store", &db, "--eval-id", "e1", "--format", "json"];
    let out = t
        .eval(&[&stored[..], &["--output", &report]].concat())
        .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stderr.contains("evaluation e1 stored in"),
        "{}",
        out.stderr
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(case(&r, "mult")["runs"], json!(["e1.mult"]));
    // The same id again is refused.
    assert_eq!(t.eval(&stored).await.code, Some(2));

    let feedback = async |run: &str| {
        let args = [
            "runs",
            "feedback",
            run,
            "--verdict",
            "good",
            "--note",
            "42 is right",
        ];
        let args = [&args[..], &["--store", &db]].concat();
        planvm(args, &[]).await.code
    };
    assert_eq!(feedback("e1.wrong").await, Some(0));
    assert_eq!(feedback("nope").await, Some(66));

    let text = t.eval(&["--store", &db, "--compare", &report]).await;
    assert!(
        text.stdout
            .contains("good       wrong                    judged fail then, fail now (run e1.wrong): 42 is right"),
        "{}",
        text.stdout
    );
}
