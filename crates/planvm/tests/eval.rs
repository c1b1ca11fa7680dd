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
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
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
        json!({"passed": true, "score": 0.9, "reason": "it is 42",
               "usage": {"input_tokens": 100, "output_tokens": 10}})
    );
    // The mean of the checks' score (1) and the judge's.
    assert_eq!(mult["score"], 0.95);
    // The judge's tokens (the planner is replayed: it cost none).
    assert_eq!(
        mult["usage"],
        json!({"input_tokens": 100, "output_tokens": 10})
    );
    assert_eq!(
        r["summary"]["usage"],
        json!({"input_tokens": 300, "output_tokens": 30})
    );
    assert_eq!(r["summary"]["usage_cases"], 3);
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

/// A planner, a `vector_search` and a judge on one loopback server: the planner answers
/// "Tell me about TOPIC." with a plan that searches for TOPIC and answers what it found.
struct Live;

impl wiremock::Respond for Live {
    fn respond(&self, req: &wiremock::Request) -> wiremock::ResponseTemplate {
        let body = String::from_utf8_lossy(&req.body);
        match req.url.path() {
            "/search" => {
                let args: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
                let query = args["query"].as_str().unwrap_or_default();
                wiremock::ResponseTemplate::new(200)
                    .set_body_json(json!({"text": format!("found: {query}")}))
            }
            "/judge/v1/chat/completions" => {
                completion("{\"verdict\": \"pass\", \"score\": 0.75, \"reason\": \"on topic\"}")
            }
            _ => {
                let topic = ["alpha", "beta", "gamma"]
                    .into_iter()
                    .find(|t| body.contains(&format!("Tell me about {t}.")))
                    .unwrap_or("nothing");
                let plan = json!([
                    {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "vector_search",
                     "tool_params": {"query": topic}, "output_vars": ["found"]}},
                    {"seq_no": 1, "type": "assign", "parameters": {"final_answer": "${found}"}}
                ]);
                completion(&format!("```json\n{plan}\n```"))
            }
        }
    }
}

#[tokio::test]
async fn each_case_is_recorded_then_replayed_with_no_request_and_tools_from_calls_only_what_is_missing()
 {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(Live)
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| s(&dir.path().join(name));
    let base = server.uri();
    std::fs::write(
        path("tools.toml"),
        format!(
            "[planner.backend]\nkind = \"openai\"\nbase_url = \"{base}/planner/v1\"\nmodel = \"p\"\nmax_retries = 0\n\
             [eval.judge.backend]\nkind = \"openai\"\nbase_url = \"{base}/judge/v1\"\nmodel = \"j\"\nmax_retries = 0\n\
             [[tool]]\nname = \"vector_search\"\n[tool.backend]\nkind = \"http\"\nurl = \"{base}/search\"\npointer = \"/text\"\nmax_retries = 0\n"
        ),
    )
    .unwrap();
    let line = |id: &str, topic: &str| {
        json!({"id": id, "goal": format!("Tell me about {topic}."), "must_contain": [format!("found: {topic}")]})
            .to_string()
    };
    std::fs::write(
        path("two.jsonl"),
        [line("a/1", "alpha"), line("b", "beta")].join("\n"),
    )
    .unwrap();
    std::fs::write(
        path("three.jsonl"),
        [line("a/1", "alpha"), line("b", "beta"), line("c", "gamma")].join("\n"),
    )
    .unwrap();
    let requests = async |route: &str| {
        server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .filter(|r| r.url.path() == route)
            .count()
    };
    let routes = [
        "/planner/v1/chat/completions",
        "/search",
        "/judge/v1/chat/completions",
    ];
    let counts = async || {
        let mut n = Vec::new();
        for r in routes {
            n.push(requests(r).await);
        }
        n
    };
    let eval = async |dataset: &str, extra: &[&str]| {
        let mut args = vec![
            "eval".to_owned(),
            path(dataset),
            "--tools".to_owned(),
            path("tools.toml"),
            "--format".to_owned(),
            "json".to_owned(),
        ];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let out = planvm(args, &[]).await;
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        serde_json::from_str::<Value>(&out.stdout).unwrap()
    };
    // What a report says of each case, latency and tokens aside (a replay costs none).
    let graded = |r: &Value| -> Vec<Value> {
        r["cases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let mut c = c.clone();
                let c2 = c.as_object_mut().unwrap();
                c2.remove("latency_ms");
                c2.remove("usage");
                if let Some(j) = c2.get_mut("judge").and_then(Value::as_object_mut) {
                    j.remove("usage");
                }
                c
            })
            .collect()
    };

    let rec = path("rec");
    let recorded = eval("two.jsonl", &["--record", &rec]).await;
    assert_eq!(recorded["summary"]["passed"], 2, "{recorded}");
    // The planner's and the judge's tokens, per case.
    assert_eq!(
        case(&recorded, "b")["usage"],
        json!({"input_tokens": 200, "output_tokens": 20})
    );
    assert_eq!(case(&recorded, "b")["judge"]["reason"], "on topic");
    assert_eq!(counts().await, [2, 2, 2]);
    let mut files: Vec<String> = std::fs::read_dir(&rec)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["a_1.cassette.jsonl", "b.cassette.jsonl"]);

    // The same report again, from the recordings alone.
    let replayed = eval("two.jsonl", &["--replay", &rec]).await;
    assert_eq!(graded(&replayed), graded(&recorded));
    assert_eq!(counts().await, [2, 2, 2]);
    // A case with no recording fails, and says why; the others still run.
    let partial = eval("three.jsonl", &["--replay", &rec]).await;
    let gamma = case(&partial, "c");
    assert_eq!(
        (gamma["status"].as_str(), gamma["verdict"].as_str()),
        (Some("not_started"), Some("fail"))
    );
    assert!(
        gamma["reason"]
            .as_str()
            .unwrap()
            .contains("no recording of this case"),
        "{gamma}"
    );
    assert_eq!(partial["summary"]["passed"], 2);
    assert_eq!(counts().await, [2, 2, 2]);

    // The planner and the judge live, the tools only where nothing was recorded: the
    // new case's search, kept for the next pass.
    let tools_from = eval("three.jsonl", &["--tools-from", &rec]).await;
    assert_eq!(tools_from["summary"]["passed"], 3, "{tools_from}");
    assert_eq!(counts().await, [5, 3, 5]);
    eval("three.jsonl", &["--tools-from", &rec]).await;
    assert_eq!(counts().await, [8, 3, 8]);

    // Recording into a directory that holds the dataset would overwrite it.
    std::fs::write(path("b.cassette.jsonl"), r#"{"id": "b", "goal": "x"}"#).unwrap();
    let out = planvm(
        vec![
            "eval".into(),
            path("b.cassette.jsonl"),
            "--record".into(),
            path(""),
        ],
        &[],
    )
    .await;
    assert_eq!(out.code, Some(64), "{}", out.stderr);
}

/// The README's example: the example dataset replayed from its recordings, offline.
#[tokio::test]
async fn the_example_dataset_replays_offline() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = planvm(
        vec![
            "eval".into(),
            s(&root.join("examples/eval/tidb.jsonl")),
            "--tools".into(),
            s(&root.join("examples/ask.toml")),
            "--replay".into(),
            s(&root.join("examples/eval/recordings")),
            "--format".into(),
            "json".into(),
        ],
        &[],
    )
    .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let r: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(r["summary"]["cases"], 3, "{r}");
    assert_eq!(r["summary"]["passed"], 3, "{r}");
}

/// With `--store`, each case is a stored goal of the evaluation with its verdict beside
/// it; a person's verdict on a run (`runs feedback`) shows in a later `--compare`.
#[tokio::test]
async fn an_evaluation_is_stored_and_peoples_verdicts_show_in_a_comparison() {
    let t = Setup::new();
    let db = t.path("s.db");
    let report = t.path("report.json");
    let out = t
        .eval(&[
            "--store",
            &db,
            "--eval-id",
            "e1",
            "--format",
            "json",
            "--output",
            &report,
        ])
        .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stderr.contains("evaluation e1 stored in"),
        "{}",
        out.stderr
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["eval"], "e1");
    let mult = case(&r, "mult");
    assert_eq!(mult["goal_id"], "e1.mult");
    assert_eq!(mult["runs"], json!(["e1.mult"]));
    // The same id again is refused.
    assert_eq!(
        t.eval(&["--store", &db, "--eval-id", "e1"]).await.code,
        Some(2)
    );

    let shown = planvm(
        vec![
            "runs".into(),
            "show".into(),
            "e1.wrong".into(),
            "--store".into(),
            db.clone(),
            "--format".into(),
            "json".into(),
        ],
        &[],
    )
    .await;
    assert_eq!(shown.code, Some(0), "{}", shown.stderr);
    let shown: Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(shown["eval"]["eval"], "e1");
    assert_eq!(shown["eval"]["case"], "wrong");
    assert_eq!(shown["eval"]["verdict"], "fail");
    assert_eq!(shown["eval"]["reason"], "the answer does not match /^43$/");

    let feedback = async |run: &str, verdict: &str| {
        planvm(
            vec![
                "runs".into(),
                "feedback".into(),
                run.into(),
                "--verdict".into(),
                verdict.into(),
                "--note".into(),
                "42 is right".into(),
                "--store".into(),
                db.clone(),
            ],
            &[],
        )
        .await
        .code
    };
    assert_eq!(feedback("e1.wrong", "bad").await, Some(0));
    assert_eq!(feedback("e1.wrong", "good").await, Some(0));
    assert_eq!(feedback("nope", "good").await, Some(66));

    let out = t
        .eval(&["--store", &db, "--compare", &report, "--format", "json"])
        .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let cmp: Value = serde_json::from_str(&out.stdout).unwrap();
    let people = &cmp["comparison"]["people"];
    assert_eq!(people.as_array().map(Vec::len), Some(1), "{cmp}");
    assert_eq!(people[0]["id"], "wrong");
    assert_eq!(people[0]["run"], "e1.wrong");
    assert_eq!(people[0]["verdict"], "good");
    assert_eq!(people[0]["note"], "42 is right");
    assert_eq!(
        (people[0]["before"].as_str(), people[0]["after"].as_str()),
        (Some("fail"), Some("fail"))
    );
    let text = t.eval(&["--store", &db, "--compare", &report]).await;
    assert!(
        text.stdout
            .contains("good       wrong                    judged fail then, fail now (run e1.wrong): 42 is right"),
        "{}",
        text.stdout
    );
}
