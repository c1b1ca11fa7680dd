//! Record and replay against loopback HTTP tools: a cassette recorded sequentially replays
//! to the same answer at any concurrency, even when identical calls got different answers;
//! calls issued ahead that the sequential run would not have made are neither counted nor
//! recorded, and the trace marks them.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use common::{http_tools, lines, planvm, s};

/// Answers `first`, `second`, ... in the order calls arrive, whatever they ask: identical
/// calls get different answers, as LLM calls do.
struct Counting(AtomicUsize);

impl Respond for Counting {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        const WORDS: [&str; 4] = ["first", "second", "third", "fourth"];
        let n = self.0.fetch_add(1, Ordering::SeqCst);
        ResponseTemplate::new(200).set_body_json(json!({ "text": WORDS[n.min(3)] }))
    }
}

/// The issue's reproduction: `t` comes from a slow call, `a` asks for `${t}`, `b` asks for
/// the same text written literally, so `b` is ready first and the look-ahead issues it
/// before `a`. Recorded one call at a time, `a` got `first` and `b` got `second`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_calls_replay_in_program_order_at_any_concurrency() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/kg"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"text": "same question"}))
                .set_delay(Duration::from_millis(300)),
        )
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/llm"))
        .respond_with(Counting(AtomicUsize::new(0)))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let tools = http_tools(
        dir.path(),
        &server.uri(),
        &[
            ("retrieve_knowledge_graph", "/kg", Some("/text")),
            ("llm_generate", "/llm", Some("/text")),
        ],
    );
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        r#"[{"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "c", "dependency_analysis": "d"}},
            {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "retrieve_knowledge_graph", "tool_params": {"query": "q"}, "output_vars": ["t"]}},
            {"seq_no": 2, "type": "calling", "parameters": {"tool_name": "llm_generate", "tool_params": {"prompt": "${t}"}, "output_vars": ["a"]}},
            {"seq_no": 3, "type": "calling", "parameters": {"tool_name": "llm_generate", "tool_params": {"prompt": "same question"}, "output_vars": ["b"]}},
            {"seq_no": 4, "type": "assign", "parameters": {"final_answer": "${a}|${b}"}}]"#,
    )
    .unwrap();
    let cassette = dir.path().join("rec.jsonl");
    let rec = planvm(
        vec![
            "run".into(),
            s(&plan),
            "--tools".into(),
            s(&tools),
            "--record".into(),
            s(&cassette),
            "--max-concurrency".into(),
            "1".into(),
        ],
        &[],
    )
    .await;
    assert_eq!(rec.code, Some(0), "{}", rec.stderr);
    assert_eq!(rec.stdout, "first|second\n");
    let entries = lines(&cassette);
    let steps: Vec<&Value> = entries.iter().map(|e| &e["step"]).collect();
    assert_eq!(steps, [&json!(1), &json!(2), &json!(3)], "{entries:?}");

    // Replayed at the default concurrency: `b` goes out first, and still gets `second`.
    drop(server);
    let trace = dir.path().join("trace.jsonl");
    let rep = planvm(
        vec![
            "run".into(),
            s(&plan),
            "--replay".into(),
            s(&cassette),
            "--trace".into(),
            s(&trace),
        ],
        &[],
    )
    .await;
    assert_eq!(rep.code, Some(0), "{}", rep.stderr);
    assert_eq!(rep.stdout, "first|second\n");
    let llm_starts: Vec<(Value, Value)> = lines(&trace)
        .into_iter()
        .filter(|e| e["event"] == "tool_call_start" && e["tool"] == "llm_generate")
        .map(|e| (e["seq_no"].clone(), e["ahead"].clone()))
        .collect();
    assert_eq!(
        llm_starts,
        [(json!(3), json!(true)), (json!(2), json!(false))],
        "the replay must issue the later identical call first, or it tests nothing"
    );

    // Re-recording the replay gives the same cassette, up to latencies.
    let again = dir.path().join("again.jsonl");
    let rr = planvm(
        vec![
            "run".into(),
            s(&plan),
            "--replay".into(),
            s(&cassette),
            "--record".into(),
            s(&again),
        ],
        &[],
    )
    .await;
    assert_eq!(rr.code, Some(0), "{}", rr.stderr);
    let strip = |mut v: Vec<Value>| {
        for e in &mut v {
            e.as_object_mut().unwrap().remove("latency_ms");
        }
        v
    };
    assert_eq!(strip(lines(&again)), strip(entries));
}

/// Step 1 fails after 300 ms; step 2 does not depend on it, so it is issued ahead and
/// answers at once. The sequential run never makes it: not counted, not recorded, traced
/// as discarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_issued_ahead_of_a_failure_are_not_counted_nor_recorded() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/kg"))
        .respond_with(
            ResponseTemplate::new(400)
                .set_body_string("bad query")
                .set_delay(Duration::from_millis(300)),
        )
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/vs"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!(["chunk"])))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/llm"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!("fine")))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let tools = http_tools(
        dir.path(),
        &server.uri(),
        &[
            ("retrieve_knowledge_graph", "/kg", None),
            ("vector_search", "/vs", None),
            ("llm_generate", "/llm", None),
        ],
    );
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        r#"[{"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "c", "dependency_analysis": "d"}},
            {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "llm_generate", "tool_params": {"prompt": "warm up"}, "output_vars": ["w"]}},
            {"seq_no": 2, "type": "calling", "parameters": {"tool_name": "retrieve_knowledge_graph", "tool_params": {"query": "q"}, "output_vars": ["kg"]}},
            {"seq_no": 3, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "v"}, "output_vars": ["docs"]}},
            {"seq_no": 4, "type": "assign", "parameters": {"final_answer": "${w} ${kg} ${docs}"}}]"#,
    )
    .unwrap();
    let cassette = dir.path().join("rec.jsonl");
    let trace = dir.path().join("trace.jsonl");
    let out = planvm(
        vec![
            "run".into(),
            s(&plan),
            "--tools".into(),
            s(&tools),
            "--record".into(),
            s(&cassette),
            "--trace".into(),
            s(&trace),
            "--format".into(),
            "json".into(),
        ],
        &[],
    )
    .await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(report["error"]["seq_no"], json!(2), "{report}");
    // The sequential run made two calls: the warm-up and the failing one.
    assert_eq!(report["tool_calls"], json!(2), "{report}");
    let vs_requests = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == "/vs")
        .count();
    assert_eq!(vs_requests, 1, "the test needs the call issued ahead");

    let recorded: Vec<Value> = lines(&cassette).iter().map(|e| e["tool"].clone()).collect();
    assert_eq!(
        recorded,
        [json!("llm_generate")],
        "only committed successes"
    );
    let events = lines(&trace);
    let discarded: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "tool_call_discarded")
        .collect();
    assert_eq!(discarded.len(), 1, "{events:?}");
    assert_eq!(discarded[0]["tool"], json!("vector_search"));
    assert_eq!(discarded[0]["seq_no"], json!(3));
    assert_eq!(discarded[0]["speculative"], json!(true));
    assert_eq!(discarded[0]["answered"], json!(true));
    let done = events.iter().find(|e| e["event"] == "done").unwrap();
    assert_eq!(done["tool_calls"], json!(2));
}
