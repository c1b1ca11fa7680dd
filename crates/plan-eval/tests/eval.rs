//! The evaluation engine in process, against loopback servers and cassettes: an LLM
//! judge grading beside each case's checks, each case's calls recorded then replayed
//! (or only its tools answered from its recording), and an evaluation kept in the run
//! store with people's verdicts on its runs read back for a comparison. What only the
//! binary does (flags, rendering, exit codes, the example dataset) is tested by
//! crates/planvm/tests/eval.rs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use plan_eval::{CaseReport, Cassettes, CassettesError, Setup, Stored};
use plan_host::{Host, HostOptions};
use plan_manifest::Manifest;
use plan_planner::{AskOptions, Examples, Template};
use plan_runs::StoreAt;
use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, method};
use wiremock::{Mock, MockServer, Respond, ResponseTemplate};

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

/// Four cases: two that pass their checks, one that fails them, one whose planner cannot
/// repair its plan.
const DATASET: &str = r#"{"id": "mult", "goal": "What is 6 times 7?", "expected": "42"}
{"id": "capital", "goal": "Name the capital of France.", "must_contain": ["paris"], "must_not_contain": ["Lyon"], "labels": ["geo"]}
{"id": "wrong", "goal": "What is 7 times 6?", "regex": "^43$"}
{"id": "broken", "goal": "Break."}
"#;

/// The planner's replies to [`DATASET`], in `dir/planner.jsonl`.
fn planner_cassette(dir: &Path) -> PathBuf {
    let cassette = [
        entry("What is 6 times 7?", &answering("42")),
        entry(
            "Name the capital of France.",
            &answering("Paris is the capital of France."),
        ),
        entry("What is 7 times 6?", &answering("42")),
        // NB: a plan with an error, and no reply to the repair's request.
        entry(
            "Break.",
            "```json\n[{\"seq_no\": 0, \"type\": \"calling\", \"parameters\": {\"tool_name\": \"nope\", \"tool_params\": {}, \"output_vars\": [\"final_answer\"]}}]\n```",
        ),
    ];
    let path = dir.join("planner.jsonl");
    std::fs::write(&path, cassette.join("\n") + "\n").unwrap();
    path
}

/// The tools file `toml`, written in `dir` (its paths are relative to it) and loaded.
fn tools(dir: &Path, toml: &str) -> Manifest {
    let path = dir.join("tools.toml");
    std::fs::write(&path, toml).unwrap();
    Manifest::load(&path).unwrap()
}

/// The host every case is asked on (or whose manifest each case's own host has);
/// `replay`: the one cassette that serves every case.
fn host(manifest: Manifest, replay: Option<PathBuf>) -> Arc<Host> {
    // NB: no API key of the environment is sent to the loopback servers.
    let env: plan_host::EnvLookup = Arc::new(|_| Err(std::env::VarError::NotPresent));
    let opts = HostOptions {
        replay,
        env,
        ..HostOptions::default()
    };
    Arc::new(Host::new(manifest, opts).unwrap())
}

/// The evaluation `planvm eval` sets up (`Setup::on`), with one repair and `store`.
fn setup(host: &Arc<Host>, cassettes: Cassettes, store: Option<Stored>) -> Setup {
    let options = AskOptions {
        max_repairs: 1,
        ..AskOptions::default()
    };
    let planned = (Template::default(), Examples::default());
    let setup = Setup::on(host.clone(), cassettes, planned, options).map_err(|e| e.message);
    Setup {
        store,
        ..setup.unwrap()
    }
}

/// Every case of `dataset`, two at once; each report is heard of once as it ends.
async fn run(setup: &Setup, dataset: &str) -> Vec<CaseReport> {
    let (cases, skipped) = plan_eval::parse(dataset);
    assert!(skipped.is_empty(), "{skipped:?}");
    let mut heard = Vec::new();
    let reports = plan_eval::run(setup, &cases, 2, &mut |r| heard.push(r.id.clone())).await;
    heard.sort();
    let mut ids: Vec<String> = reports.iter().map(|r| r.id.clone()).collect();
    ids.sort();
    assert_eq!(heard, ids);
    reports
}

fn case<'r>(reports: &'r [CaseReport], id: &str) -> &'r CaseReport {
    reports.iter().find(|c| c.id == id).unwrap()
}

/// An OpenAI-compatible completion whose content is `text`.
fn completion(text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "x", "object": "chat.completion", "created": 0, "model": "judge",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
    }))
}

/// The judge's replies: a verdict in a fence, one with no JSON at all, a failing verdict.
async fn judge_server() -> MockServer {
    let judge = MockServer::start().await;
    let replies = [
        (
            "What is 6 times 7?",
            "```json\n{\"verdict\": \"pass\", \"score\": 0.9, \"reason\": \"it is 42\"}\n```",
        ),
        ("Name the capital of France.", "Looks fine to me."),
        (
            "What is 7 times 6?",
            "{\"verdict\": \"fail\", \"score\": 0.2, \"reason\": \"not 43\"}",
        ),
    ];
    for (goal, reply) in replies {
        Mock::given(method("POST"))
            .and(body_string_contains(goal))
            .respond_with(completion(reply))
            .mount(&judge)
            .await;
    }
    judge
}

#[tokio::test]
async fn an_llm_judge_grades_beside_the_checks_and_a_bad_reply_is_a_failed_grading() {
    let dir = tempfile::tempdir().unwrap();
    planner_cassette(dir.path());
    let judge = judge_server().await;
    let manifest = tools(
        dir.path(),
        &format!(
            "[planner.backend]\nkind = \"replay\"\ncassette = \"planner.jsonl\"\n\
             [eval.judge.backend]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"judge\"\nmax_retries = 0\n",
            judge.uri()
        ),
    );
    let host = host(manifest, None);
    let reports = run(&setup(&host, Cassettes::Shared, None), DATASET).await;

    let mult = case(&reports, "mult");
    assert_eq!(mult.verdict, "pass", "{mult:?}");
    assert_eq!(
        json!(mult.judge),
        json!({"passed": true, "score": 0.9, "reason": "it is 42",
               "usage": {"input_tokens": 100, "output_tokens": 10}})
    );
    // The mean of the checks' score (1) and the judge's.
    assert_eq!(mult.score, 0.95);
    // The judge's tokens (the planner is replayed: it cost none).
    assert_eq!(
        json!(mult.usage),
        json!({"input_tokens": 100, "output_tokens": 10})
    );
    let summary = plan_eval::summarize(&reports);
    assert_eq!(
        json!(summary.usage),
        json!({"input_tokens": 300, "output_tokens": 30})
    );
    assert_eq!(summary.usage_cases, 3);
    let capital = case(&reports, "capital");
    assert_eq!(capital.verdict, "fail", "{capital:?}");
    assert!(
        capital.reason.starts_with(
            "the judge: the judge's reply could not be read (no JSON object): Looks fine to me."
        ),
        "{capital:?}"
    );
    assert_eq!(
        case(&reports, "wrong").reason,
        "the answer does not match /^43$/; the judge: not 43"
    );
    // A case that did not answer is not sent to the judge.
    let broken = case(&reports, "broken");
    assert_eq!(
        (broken.status.as_str(), broken.rounds),
        ("planner_failed", 2)
    );
    assert!(broken.judge.is_none());
    assert_eq!(judge.received_requests().await.unwrap().len(), 3);
}

/// A planner, a `vector_search` and a judge on one loopback server: the planner answers
/// "Tell me about TOPIC." with a plan that searches for TOPIC and answers what it found.
struct Live;

impl Respond for Live {
    fn respond(&self, req: &wiremock::Request) -> ResponseTemplate {
        let body = String::from_utf8_lossy(&req.body);
        match req.url.path() {
            "/search" => {
                let args: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
                let query = args["query"].as_str().unwrap_or_default();
                ResponseTemplate::new(200).set_body_json(json!({"text": format!("found: {query}")}))
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

/// The requests [`Live`] has had: the planner's, the search's, the judge's.
async fn counts(server: &MockServer) -> [usize; 3] {
    let got = server.received_requests().await.unwrap();
    let n = |route: &str| got.iter().filter(|r| r.url.path() == route).count();
    [
        n("/planner/v1/chat/completions"),
        n("/search"),
        n("/judge/v1/chat/completions"),
    ]
}

/// What a report says of each case, latency and tokens aside (a replay costs none).
fn graded(reports: &[CaseReport]) -> Vec<Value> {
    reports
        .iter()
        .map(|c| {
            let mut c = json!(c);
            let o = c.as_object_mut().unwrap();
            o.remove("latency_ms");
            o.remove("usage");
            if let Some(j) = o.get_mut("judge").and_then(Value::as_object_mut) {
                j.remove("usage");
            }
            c
        })
        .collect()
}

/// "Tell me about TOPIC." for each `(id, topic)`, passing when the search found it.
fn topics(cases: &[(&str, &str)]) -> String {
    cases
        .iter()
        .map(|(id, topic)| {
            json!({"id": id, "goal": format!("Tell me about {topic}."), "must_contain": [format!("found: {topic}")]})
                .to_string() + "\n"
        })
        .collect()
}

#[tokio::test]
async fn each_case_is_recorded_then_replayed_with_no_request_and_tools_from_calls_only_what_is_missing()
 {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Live)
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let base = server.uri();
    let manifest = tools(
        dir.path(),
        &format!(
            "[planner.backend]\nkind = \"openai\"\nbase_url = \"{base}/planner/v1\"\nmodel = \"p\"\nmax_retries = 0\n\
             [eval.judge.backend]\nkind = \"openai\"\nbase_url = \"{base}/judge/v1\"\nmodel = \"j\"\nmax_retries = 0\n\
             [[tool]]\nname = \"vector_search\"\n[tool.backend]\nkind = \"http\"\nurl = \"{base}/search\"\npointer = \"/text\"\nmax_retries = 0\n"
        ),
    );
    let host = host(manifest, None);
    let two = topics(&[("a/1", "alpha"), ("b", "beta")]);
    let three = topics(&[("a/1", "alpha"), ("b", "beta"), ("c", "gamma")]);
    let rec = dir.path().join("rec");
    let rec = rec.as_path();
    let eval = async |dataset: &str,
                      record: Option<&Path>,
                      tools_from: Option<&Path>,
                      replay: Option<&Path>| {
        let cassettes = Cassettes::open(record, tools_from, replay).unwrap();
        run(&setup(&host, cassettes, None), dataset).await
    };

    let recorded = eval(&two, Some(rec), None, None).await;
    assert!(recorded.iter().all(CaseReport::passed), "{recorded:?}");
    // The planner's and the judge's tokens, per case.
    let b = case(&recorded, "b");
    assert_eq!(
        json!(b.usage),
        json!({"input_tokens": 200, "output_tokens": 20})
    );
    assert_eq!(b.judge.as_ref().unwrap().reason, "on topic");
    assert_eq!(counts(&server).await, [2, 2, 2]);
    let mut files: Vec<String> = std::fs::read_dir(rec)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["a_1.cassette.jsonl", "b.cassette.jsonl"]);

    // The same reports again, from the recordings alone.
    let replayed = eval(&two, None, None, Some(rec)).await;
    assert_eq!(graded(&replayed), graded(&recorded));
    assert_eq!(counts(&server).await, [2, 2, 2]);
    // A case with no recording fails, and says why; the others still run.
    let partial = eval(&three, None, None, Some(rec)).await;
    let gamma = case(&partial, "c");
    assert_eq!(
        (gamma.status.as_str(), gamma.verdict),
        ("not_started", "fail")
    );
    assert!(
        gamma.reason.contains("no recording of this case"),
        "{gamma:?}"
    );
    assert_eq!(partial.iter().filter(|r| r.passed()).count(), 2);
    assert_eq!(counts(&server).await, [2, 2, 2]);

    // The planner and the judge live, the tools only where nothing was recorded: the
    // new case's search, kept for the next pass.
    let tools_from = eval(&three, None, Some(rec), None).await;
    assert!(tools_from.iter().all(CaseReport::passed), "{tools_from:?}");
    assert_eq!(counts(&server).await, [5, 3, 5]);
    eval(&three, None, Some(rec), None).await;
    assert_eq!(counts(&server).await, [8, 3, 8]);

    let missing = Cassettes::open(None, None, Some(&dir.path().join("nowhere")));
    assert!(
        matches!(missing, Err(CassettesError::Missing(_))),
        "{missing:?}"
    );
}

/// Run `id`'s evaluation case in the store at `at`: its evaluation, case, verdict, reason.
fn eval_of_run(at: &StoreAt, id: &str) -> (String, String, String, String) {
    let store = at.open(plan_runs::open::Access::Read).unwrap();
    let shown = plan_runs::read::show(store.as_ref(), id).unwrap();
    let found = shown.eval.unwrap();
    let c = found.case;
    (found.eval, c.case_id, c.verdict, c.reason)
}

/// Each case is a stored goal of the evaluation with its verdict beside it; a person's
/// verdict on a run shows when a later evaluation is compared with this one.
#[tokio::test]
async fn an_evaluation_is_stored_and_peoples_verdicts_show_in_a_comparison() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(Manifest::builtin(), Some(planner_cassette(dir.path())));
    let at = StoreAt::new(dir.path().join("s.db"), plan_store::Durability::default());
    let stored = plan_eval::begin(at.clone(), Some("e1".into()), "set.jsonl").unwrap();
    let reports = run(
        &setup(&host, Cassettes::Shared, Some(stored.clone())),
        DATASET,
    )
    .await;
    let summary = plan_eval::summarize(&reports);
    plan_eval::end(&at, "e1", &json!(summary)).unwrap();
    assert!(
        reports.iter().all(|r| r.store_error.is_none()),
        "{reports:?}"
    );
    let mult = case(&reports, "mult");
    assert_eq!(mult.goal_id.as_deref(), Some("e1.mult"));
    assert_eq!(mult.runs, ["e1.mult"]);
    let baseline = plan_eval::report_json(&summary, &reports, &[], Some(&stored), None);
    assert_eq!(baseline["eval"], "e1");
    insta::assert_snapshot!("report", timeless(&baseline, dir.path()));
    // The same id again is refused.
    let again = plan_eval::begin(at.clone(), Some("e1".into()), "set.jsonl").unwrap_err();
    assert_eq!(again.kind, plan_runs::ErrorKind::DuplicateRun, "{again:?}");
    assert_eq!(
        eval_of_run(&at, "e1.wrong"),
        (
            "e1".into(),
            "wrong".into(),
            "fail".into(),
            "the answer does not match /^43$/".into()
        )
    );

    // A later verdict on a run replaces the earlier one; a run must exist to get one.
    let note = || Some("42 is right".to_owned());
    plan_runs::feedback(&at, "e1.wrong", "bad", note()).unwrap();
    plan_runs::feedback(&at, "e1.wrong", "good", note()).unwrap();
    let unknown = plan_runs::feedback(&at, "nope", "good", None).unwrap_err();
    assert_eq!(
        unknown.kind,
        plan_runs::ErrorKind::UnknownRun,
        "{unknown:?}"
    );

    // A second evaluation, in the same store, compared with the first.
    let second = plan_eval::begin(at.clone(), None, "set.jsonl").unwrap();
    assert_ne!(second.eval, "e1");
    let now = run(
        &setup(&host, Cassettes::Shared, Some(second.clone())),
        DATASET,
    )
    .await;
    let (cmp, unread) = plan_eval::compare_with_people(&baseline, &now, Some(&second)).unwrap();
    assert!(unread.is_none(), "{unread:?}");
    assert_eq!(cmp.regressions, 0);
    let [person] = cmp.people.as_slice() else {
        panic!("{:?}", cmp.people)
    };
    assert_eq!(
        (person.id.as_str(), person.run.as_str()),
        ("wrong", "e1.wrong")
    );
    assert_eq!(person.feedback.verdict, "good");
    assert_eq!(person.feedback.note, note());
    assert_eq!(
        (person.before.as_str(), person.after),
        ("fail", Some("fail"))
    );
    // With no store, nobody's verdicts.
    let (cmp, _) = plan_eval::compare_with_people(&baseline, &now, None).unwrap();
    assert!(cmp.people.is_empty());
}

/// The example dataset replayed from its recordings, traced in memory: each case is a
/// trace of its own, the planner's call and the run's calls in it.
#[tokio::test]
async fn each_case_of_an_evaluation_is_a_trace() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let host = host(
        Manifest::load(root.join("examples/ask.toml")).unwrap(),
        None,
    );
    let recordings = root.join("examples/eval/recordings");
    let cassettes = Cassettes::open(None, None, Some(&recordings)).unwrap();
    let (telemetry, kept) = plan_telemetry::Telemetry::in_memory(host.redactor().clone(), false);
    let telemetry = Arc::new(telemetry);
    let setup = Setup {
        telemetry: Some(telemetry.clone()),
        ..setup(&host, cassettes, None)
    };
    let dataset = std::fs::read_to_string(root.join("examples/eval/tidb.jsonl")).unwrap();
    let reports = run(&setup, &dataset).await;
    assert!(reports.iter().all(CaseReport::passed), "{reports:?}");
    assert_eq!(telemetry.finish(), 0, "every span reached the exporter");
    let spans = kept.spans();
    let cases: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "invoke_workflow eval")
        .collect();
    assert_eq!(cases.len(), 3);
    let traces: std::collections::HashSet<_> =
        cases.iter().map(|c| c.span_context.trace_id()).collect();
    assert_eq!(traces.len(), 3, "a trace per case");
    for c in &cases {
        let status = c
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == "planrt.status");
        assert_eq!(
            status.map(|kv| kv.value.as_str().into_owned()).as_deref(),
            Some("answered")
        );
        let mut children = spans
            .iter()
            .filter(|s| s.parent_span_id == c.span_context.span_id());
        let names: Vec<&str> = children.by_ref().map(|s| s.name.as_ref()).collect();
        assert!(
            names.contains(&"chat replay"),
            "the planner's call is in the case's trace: {names:?}"
        );
        assert!(
            names.iter().any(|n| n.starts_with("retrieval ")),
            "{names:?}"
        );
    }
}

/// An evaluation asked for refuses, before any case is asked or anything stored, what it
/// cannot read or would write over, each with its kind; the lines of the dataset it
/// skips are said once.
#[test]
fn an_evaluation_refuses_what_it_cannot_read_or_would_write_over() {
    use plan_eval::{EvalRequest, Evaluation};
    use plan_runs::ErrorKind;
    let dir = tempfile::tempdir().unwrap();
    let dataset = dir.path().join("cases.jsonl");
    let store = dir.path().join("runs.db");
    let prepared = |change: &dyn Fn(&mut EvalRequest)| {
        let mut request = EvalRequest {
            dataset: dataset.clone(),
            jobs: 1,
            ..EvalRequest::default()
        };
        change(&mut request);
        let mut warned = Vec::new();
        let kind = Evaluation::prepare(request, &mut |w| warned.push(w))
            .err()
            .map(|e| e.kind);
        (kind, warned)
    };
    assert_eq!(prepared(&|_| {}).0, Some(ErrorKind::Unreadable));
    std::fs::write(
        &dataset,
        "{\"id\": \"one\", \"goal\": \"Say hello.\"}\nnot json\n",
    )
    .unwrap();
    let over_dataset = |r: &mut EvalRequest| r.outputs = vec![("--output", dataset.clone())];
    assert_eq!(prepared(&over_dataset).0, Some(ErrorKind::OutputIsInput));
    let over_store = |r: &mut EvalRequest| {
        r.store = Some(StoreAt::new(&store, plan_store::Durability::Normal));
        r.outputs = vec![("--output", store.clone())];
    };
    assert_eq!(prepared(&over_store).0, Some(ErrorKind::OutputIsInput));
    // A case's cassette recorded over the dataset itself.
    let cassettes = |r: &mut EvalRequest| {
        r.record = Some(dir.path().to_owned());
        r.outputs = vec![("--output", dir.path().join("one.cassette.jsonl"))];
    };
    assert_eq!(prepared(&cassettes).0, Some(ErrorKind::OutputIsInput));
    let missing = |r: &mut EvalRequest| r.replay = Some(dir.path().join("missing"));
    assert_eq!(prepared(&missing).0, Some(ErrorKind::Unreadable));
    let not_a_report = |r: &mut EvalRequest| r.baseline = Some(dataset.clone());
    assert_eq!(prepared(&not_a_report).0, Some(ErrorKind::Invalid));
    // The built-in tools name no planner's LLM: nothing to ask the cases with.
    let with_store =
        |r: &mut EvalRequest| r.store = Some(StoreAt::new(&store, plan_store::Durability::Normal));
    let (kind, warned) = prepared(&with_store);
    assert_eq!(kind, Some(ErrorKind::Config));
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(warned[0].contains("line 2"), "{warned:?}");
    assert!(
        !store.exists(),
        "nothing is stored for an evaluation refused"
    );
}

/// `report` as pretty JSON, its times and durations and the test's directory (`dir`)
/// redacted: what a test's run of it shares with every other.
fn timeless(report: &Value, dir: &Path) -> String {
    fn walk(v: &mut Value, dir: &str) {
        match v {
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    match k.ends_with("_ms") || k.ends_with("_at") {
                        true => *v = json!("[varies]"),
                        false => walk(v, dir),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| walk(v, dir)),
            Value::String(s) => *s = s.replace(dir, "[dir]"),
            _ => {}
        }
    }
    let mut report = report.clone();
    walk(&mut report, &dir.display().to_string());
    serde_json::to_string_pretty(&report).unwrap()
}
