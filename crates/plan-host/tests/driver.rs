//! The driver loop, with scripted machines standing in for the VM: concurrency of one
//! yield's calls, tool errors fed back, the overall deadline, and trace content.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use plan_host::{Host, HostOptions, RunStatus, Tracer, run_machine};
use plan_manifest::Manifest;
use plan_vm::ToolRequest;
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buf {
    fn lines(&self) -> Vec<Value> {
        let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

fn cassette(dir: &tempfile::TempDir, latency: u64) -> std::path::PathBuf {
    let p = dir.path().join("c.jsonl");
    let lines = [
        json!({"tool": "vector_search", "args": {"query": "a", "top_k": 1}, "output": "A", "latency_ms": latency}),
        json!({"tool": "vector_search", "args": {"query": "b", "top_k": 1}, "output": "B", "latency_ms": latency}),
    ];
    std::fs::write(
        &p,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
    p
}

fn two_searches() -> Vec<ToolRequest> {
    vec![
        req(
            1,
            "vector_search",
            json!({"query": "a", "top_k": 1}),
            plain(),
        ),
        req(
            2,
            "vector_search",
            json!({"query": "b", "top_k": 1}),
            plain(),
        ),
    ]
}

/// On paused time (the driver's clock is tokio's): the two 300 ms calls take exactly
/// 300 ms together, whatever the machine's load.
#[tokio::test(start_paused = true)]
async fn calls_of_one_yield_run_concurrently_and_are_traced() {
    let dir = tempfile::tempdir().unwrap();
    let host = Host::new(
        Manifest::builtin(),
        HostOptions {
            replay: Some(cassette(&dir, 300)),
            ..opts()
        },
    )
    .unwrap();
    let buf = Buf::default();
    let mut tracer = Tracer::to_writer(Box::new(buf.clone()));
    let t0 = tokio::time::Instant::now();
    let report = run_machine(&host, &mut Script::new(two_searches()), &mut tracer).await;
    assert_eq!(t0.elapsed(), Duration::from_millis(300));
    assert_eq!(report.elapsed_ms, 300);
    assert_eq!(report.status, RunStatus::Ok);
    assert_eq!(report.final_answer, json!("A+B"));
    assert_eq!((report.steps, report.tool_calls), (3, 2));

    let events = buf.lines();
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(names.first(), Some(&"step"));
    assert_eq!(names.iter().filter(|n| **n == "tool_call_start").count(), 2);
    assert_eq!(names.iter().filter(|n| **n == "tool_call_end").count(), 2);
    assert_eq!(names.last(), Some(&"done"));
    for e in &events {
        assert!(e["ts_ms"].is_u64() && e["t_ms"].is_u64(), "{e}");
    }
    let start = events
        .iter()
        .find(|e| e["event"] == "tool_call_start")
        .unwrap();
    assert_eq!(start["tool"], "vector_search");
    assert_eq!(start["args"], "{\"query\":\"a\",\"top_k\":1}");
    let end = events
        .iter()
        .find(|e| e["event"] == "tool_call_end")
        .unwrap();
    assert_eq!(end["duration_ms"], 300);
    assert_eq!(end["ok"], true);
}

#[tokio::test]
async fn tool_errors_reach_the_vm() {
    let dir = tempfile::tempdir().unwrap();
    let host = Host::new(
        Manifest::builtin(),
        HostOptions {
            replay: Some(cassette(&dir, 0)),
            ..opts()
        },
    )
    .unwrap();
    let reqs = vec![req(
        4,
        "vector_search",
        json!({"query": "zzz", "top_k": 1}),
        plain(),
    )];
    let report = run_machine(&host, &mut Script::new(reqs), &mut Tracer::none()).await;
    assert_eq!(report.status, RunStatus::Failed);
    let err = report.error.unwrap();
    assert_eq!((err.seq_no, err.line), (Some(4), Some(7)));
    assert!(
        err.message
            .contains("for tool `vector_search` with args {\"query\":\"zzz\",\"top_k\":1}"),
        "{}",
        err.message
    );
    assert!(
        err.message.contains("closest recorded args"),
        "{}",
        err.message
    );
}

#[tokio::test(start_paused = true)]
async fn the_deadline_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let opts = HostOptions {
        replay: Some(cassette(&dir, 5_000)),
        deadline: Some(Duration::from_millis(200)),
        ..opts()
    };
    let host = Host::new(Manifest::builtin(), opts).unwrap();
    let t0 = tokio::time::Instant::now();
    let report = run_machine(&host, &mut Script::new(two_searches()), &mut Tracer::none()).await;
    assert_eq!(t0.elapsed(), Duration::from_millis(200));
    assert_eq!(report.elapsed_ms, 200);
    assert_eq!(report.status, RunStatus::Failed);
    let err = report.error.unwrap();
    assert_eq!(err.message, "deadline of 0.2 s exceeded");
    assert_eq!(err.seq_no, Some(1));
}

/// A loop whose every call answers at once from a cassette never waits on a timer: the
/// deadline must still end it (it once ran for minutes, past the deadline it reported).
#[tokio::test]
async fn the_deadline_fires_when_every_call_answers_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let cassette = dir.path().join("spin.cassette.jsonl");
    let entries = [
        json!({"tool": "llm_generate", "args": {"prompt": "q"}, "output": "x"}),
        json!({"tool": "jmp_condition", "args": {"prompt": "done?", "context": null}, "output": false}),
    ];
    std::fs::write(&cassette, format!("{}\n{}\n", entries[0], entries[1])).unwrap();
    let src = r#"[{"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "ask forever"}},
        {"seq_no": 1, "type": "assign", "parameters": {"n": 0}},
        {"seq_no": 2, "type": "calling", "parameters": {"tool_name": "llm_generate", "tool_params": {"prompt": "q"}, "output_vars": ["x"]}},
        {"seq_no": 3, "type": "assign", "parameters": {"n": "${n} + 1"}},
        {"seq_no": 4, "type": "jmp", "parameters": {"condition_prompt": "done?", "jump_if_true": 5, "jump_if_false": 2}},
        {"seq_no": 5, "type": "assign", "parameters": {"final_answer": "${n}"}}]"#;
    let compiled = plan_compiler::compile(src, &plan_compiler::CompileOptions::default());
    let program = plan_bytecode::validate(compiled.program.unwrap()).unwrap();
    let opts = HostOptions {
        replay: Some(cassette),
        deadline: Some(Duration::from_secs(1)),
        ..opts()
    };
    let host = Host::new(Manifest::builtin(), opts).unwrap();
    let limits = plan_vm::Limits {
        max_steps: 1_000_000_000,
        ..plan_vm::Limits::default()
    };
    let report =
        plan_host::run_plan(&host, &program, Vec::new(), limits, &mut Tracer::none()).await;
    let err = report.error.expect("the deadline ends the run");
    assert_eq!(
        (err.code.as_str(), err.message.as_str()),
        ("R0009", "deadline of 1 s exceeded")
    );
    assert!(report.steps > 100, "{}", report.steps);
}

#[tokio::test]
async fn the_key_appears_in_no_trace_even_when_calls_fail() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_string("nope"))
        .mount(&server)
        .await;
    let m = manifest_with(
        "llm_generate",
        openai(&server.uri(), Some("TEST_KEY"), None, Some(1)),
    );
    let host = Host::new(m, opts()).unwrap();
    let buf = Buf::default();
    let mut tracer = Tracer::to_writer(Box::new(buf.clone()));
    let reqs = vec![req(
        1,
        "llm_generate",
        json!({"prompt": "hi", "context": null}),
        plain(),
    )];
    let report = run_machine(&host, &mut Script::new(reqs), &mut tracer).await;
    assert_eq!(report.status, RunStatus::Failed);
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    assert!(text.contains("HTTP 500"), "{text}");
    assert!(!text.contains(KEY));
    assert!(!serde_json::to_string(&report).unwrap().contains(KEY));
    // The key did go out.
    let sent = server.received_requests().await.unwrap();
    assert_eq!(
        sent[0]
            .headers
            .get("authorization")
            .unwrap()
            .to_str()
            .unwrap(),
        format!("Bearer {KEY}")
    );
}
