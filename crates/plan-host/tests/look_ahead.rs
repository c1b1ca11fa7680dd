//! Record and replay of real plans against loopback HTTP tools, with the VM's look-ahead:
//! a cassette recorded one call at a time replays to the same answer at any concurrency,
//! even when identical calls got different answers; calls issued ahead that the
//! sequential run would not have made are neither counted nor recorded, and the trace
//! marks them.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use plan_bytecode::ValidatedProgram;
use plan_host::{Host, HostOptions, RunReport, Tracer, run_plan};
use plan_manifest::{BackendConfig, Manifest};
use plan_vm::Limits;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

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

fn program(src: &str) -> ValidatedProgram {
    let compiled = plan_compiler::compile(src, &plan_compiler::CompileOptions::default());
    let program = compiled
        .program
        .unwrap_or_else(|| panic!("{:#?}", compiled.diagnostics));
    plan_bytecode::validate(program).unwrap()
}

/// The built-in tools, `tools` (name, path, JSON pointer) served by `base`.
fn served(base: &str, tools: &[(&str, &str, Option<&str>)]) -> Manifest {
    let mut m = Manifest::builtin();
    for (name, route, pointer) in tools {
        let t = m.tools.iter_mut().find(|t| t.name == *name).unwrap();
        t.backend = Some(BackendConfig::Http {
            url: format!("{base}{route}"),
            pointer: pointer.map(str::to_owned),
            api_key_env: None,
            timeout_secs: None,
            max_retries: Some(0),
            concurrency: None,
        });
    }
    m
}

/// Runs `program` on a host of `manifest` (replaying `replay`, recording to `record`)
/// at `max_concurrency`; its report and its trace's events.
async fn run(
    manifest: Manifest,
    program: &ValidatedProgram,
    (replay, record): (Option<&Path>, Option<&Path>),
    max_concurrency: u32,
    dir: &Path,
) -> (RunReport, Vec<Value>) {
    let options = HostOptions {
        replay: replay.map(Path::to_path_buf),
        record: record.map(Path::to_path_buf),
        ..common::opts()
    };
    let host = Host::new(manifest, options).unwrap();
    let trace = dir.join("trace.jsonl");
    let mut tracer = Tracer::to_writer(Box::new(std::fs::File::create(&trace).unwrap()));
    let limits = Limits {
        max_concurrency,
        ..Limits::default()
    };
    let report = run_plan(&host, program, Vec::new(), limits, &mut tracer).await;
    drop(tracer);
    (report, lines(&trace))
}

fn lines(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `t` comes from a slow call, `a` asks for `${t}`, `b` asks for the same text written
/// literally, so `b` is ready first and the look-ahead issues it before `a`. Recorded one
/// call at a time, `a` got `first` and `b` got `second`.
#[tokio::test]
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
    let tools = served(
        &server.uri(),
        &[
            ("retrieve_knowledge_graph", "/kg", Some("/text")),
            ("llm_generate", "/llm", Some("/text")),
        ],
    );
    let plan = program(
        r#"[{"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "c", "dependency_analysis": "d"}},
            {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "retrieve_knowledge_graph", "tool_params": {"query": "q"}, "output_vars": ["t"]}},
            {"seq_no": 2, "type": "calling", "parameters": {"tool_name": "llm_generate", "tool_params": {"prompt": "${t}"}, "output_vars": ["a"]}},
            {"seq_no": 3, "type": "calling", "parameters": {"tool_name": "llm_generate", "tool_params": {"prompt": "same question"}, "output_vars": ["b"]}},
            {"seq_no": 4, "type": "assign", "parameters": {"final_answer": "${a}|${b}"}}]"#,
    );
    let cassette: PathBuf = dir.path().join("rec.jsonl");
    let (rec, _) = run(tools, &plan, (None, Some(&cassette)), 1, dir.path()).await;
    assert_eq!(rec.final_answer, json!("first|second"), "{rec:?}");
    let entries = lines(&cassette);
    let steps: Vec<&Value> = entries.iter().map(|e| &e["step"]).collect();
    assert_eq!(steps, [&json!(1), &json!(2), &json!(3)], "{entries:?}");

    // Replayed at the default concurrency: `b` goes out first, and still gets `second`.
    drop(server);
    let builtin = Manifest::builtin;
    let default = Limits::default().max_concurrency;
    let (rep, events) = run(
        builtin(),
        &plan,
        (Some(&cassette), None),
        default,
        dir.path(),
    )
    .await;
    assert_eq!(rep.final_answer, json!("first|second"), "{rep:?}");
    let llm_starts: Vec<(Value, Value)> = events
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
    let both = (Some(cassette.as_path()), Some(again.as_path()));
    let (rr, _) = run(builtin(), &plan, both, default, dir.path()).await;
    assert!(rr.is_ok(), "{rr:?}");
    let strip = |mut v: Vec<Value>| {
        for e in &mut v {
            e.as_object_mut().unwrap().remove("latency_ms");
        }
        v
    };
    assert_eq!(strip(lines(&again)), strip(entries));
}

/// Step 2 fails after 300 ms; step 3 does not depend on it, so it is issued ahead and
/// answers at once. The sequential run never makes it: not counted, not recorded, traced
/// as discarded.
#[tokio::test]
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
    let tools = served(
        &server.uri(),
        &[
            ("retrieve_knowledge_graph", "/kg", None),
            ("vector_search", "/vs", None),
            ("llm_generate", "/llm", None),
        ],
    );
    let plan = program(
        r#"[{"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "c", "dependency_analysis": "d"}},
            {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "llm_generate", "tool_params": {"prompt": "warm up"}, "output_vars": ["w"]}},
            {"seq_no": 2, "type": "calling", "parameters": {"tool_name": "retrieve_knowledge_graph", "tool_params": {"query": "q"}, "output_vars": ["kg"]}},
            {"seq_no": 3, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "v"}, "output_vars": ["docs"]}},
            {"seq_no": 4, "type": "assign", "parameters": {"final_answer": "${w} ${kg} ${docs}"}}]"#,
    );
    let cassette = dir.path().join("rec.jsonl");
    let default = Limits::default().max_concurrency;
    let (report, events) = run(tools, &plan, (None, Some(&cassette)), default, dir.path()).await;
    let error = report.error.as_ref().expect("the run fails");
    assert_eq!(error.seq_no, Some(2), "{report:?}");
    // The sequential run made two calls: the warm-up and the failing one.
    assert_eq!(report.tool_calls, 2, "{report:?}");
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
