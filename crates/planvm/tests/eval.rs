//! `planvm eval` offline: a planner replayed from a cassette, checks that pass and fail,
//! a planner that cannot repair its plan, a bad dataset line, the gates (`--fail-under`,
//! `--compare`) and `--promote`.

mod common;

use std::path::Path;

use common::{Out, planvm, s};
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
        let mut args = vec![
            "eval".to_owned(),
            self.path("set.jsonl"),
            "--replay".to_owned(),
            self.path("planner.jsonl"),
            "--max-repairs".to_owned(),
            "1".to_owned(),
        ];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        planvm(args, &[]).await
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

/// An OpenAI-compatible completion whose content is `text`.
fn completion(text: &str) -> wiremock::ResponseTemplate {
    wiremock::ResponseTemplate::new(200).set_body_json(json!({
        "id": "x", "object": "chat.completion", "created": 0, "model": "judge",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]
    }))
}

#[tokio::test]
async fn an_llm_judge_grades_beside_the_checks_and_a_bad_reply_is_a_failed_grading() {
    use wiremock::matchers::{body_string_contains, method};
    use wiremock::{Mock, MockServer};
    let t = Setup::new();
    let judge = MockServer::start().await;
    Mock::given(method("POST"))
        .and(body_string_contains("What is 6 times 7?"))
        .respond_with(completion(
            "```json\n{\"verdict\": \"pass\", \"score\": 0.9, \"reason\": \"it is 42\"}\n```",
        ))
        .mount(&judge)
        .await;
    Mock::given(method("POST"))
        .and(body_string_contains("Name the capital of France."))
        .respond_with(completion("Looks fine to me."))
        .mount(&judge)
        .await;
    Mock::given(method("POST"))
        .and(body_string_contains("What is 7 times 6?"))
        .respond_with(completion(
            "{\"verdict\": \"fail\", \"score\": 0.2, \"reason\": \"not 43\"}",
        ))
        .mount(&judge)
        .await;
    let tools = t.path("tools.toml");
    std::fs::write(
        &tools,
        format!(
            "[planner.backend]\nkind = \"replay\"\ncassette = \"planner.jsonl\"\n\
             [eval.judge.backend]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"judge\"\nmax_retries = 0\n",
            judge.uri()
        ),
    )
    .unwrap();
    let out = planvm(
        vec![
            "eval".into(),
            t.path("set.jsonl"),
            "--tools".into(),
            tools,
            "--max-repairs".into(),
            "1".into(),
            "--format".into(),
            "json".into(),
        ],
        &[],
    )
    .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let r: Value = serde_json::from_str(&out.stdout).unwrap();
    let case = |id: &str| case(&r, id);
    let mult = case("mult");
    assert_eq!(mult["verdict"], "pass", "{mult}");
    assert_eq!(
        mult["judge"],
        json!({"passed": true, "score": 0.9, "reason": "it is 42"})
    );
    // The mean of the checks' score (1) and the judge's.
    assert_eq!(mult["score"], 0.95);
    let capital = case("capital");
    assert_eq!(capital["verdict"], "fail", "{capital}");
    assert!(
        capital["reason"].as_str().unwrap().starts_with(
            "the judge: the judge's reply could not be read (no JSON object): Looks fine to me."
        ),
        "{capital}"
    );
    let wrong = case("wrong");
    assert_eq!(
        wrong["reason"],
        "the answer does not match /^43$/; the judge: not 43"
    );
    // A case that did not answer is not sent to the judge.
    assert!(case("broken").get("judge").is_none());
    assert_eq!(judge.received_requests().await.unwrap().len(), 3);
}
