//! `planvm run -`: a plan piped in slowly starts its first call before its input ends,
//! against HTTP tools on loopback. (Streaming a planner's reply, with its early calls and
//! repairs, is tested through the planner: plan-planner's tests/stream.rs.)

mod common;

use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use common::s;

/// Tools: every path answers `path(body)` after a second.
struct Tools;

impl Respond for Tools {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        ResponseTemplate::new(200)
            .set_body_json(json!({ "text": format!("{}({body})", req.url.path()) }))
            .set_delay(Duration::from_secs(1))
    }
}

fn ins(seq: u32, tool: &str, params: Value, out: &str) -> String {
    let v = json!({"seq_no": seq, "type": "calling", "parameters": {
        "tool_name": tool, "tool_params": params, "output_vars": [out]}});
    format!("{v},\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_on_standard_input_runs_as_it_arrives() {
    use std::io::Write;
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Tools)
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let tools = common::http_tools(
        dir.path(),
        &server.uri(),
        &[
            ("vector_search", "/search", Some("/text")),
            ("llm_generate", "/llm", Some("/text")),
        ],
    );
    // A reasoning step, then four calls, each on the output of the one before.
    let answer = ins(
        4,
        "llm_generate",
        json!({"prompt": "answer from ${c3}"}),
        "final_answer",
    );
    let pieces = [
        "[\n{\"seq_no\": 0, \"type\": \"reasoning\", \"parameters\": {\"chain_of_thoughts\": \"four dependent calls\"}},\n".to_owned(),
        ins(1, "vector_search", json!({"query": "start", "top_k": 1}), "c1"),
        ins(2, "vector_search", json!({"query": "after ${c1}", "top_k": 1}), "c2"),
        ins(3, "vector_search", json!({"query": "after ${c2}", "top_k": 1}), "c3"),
        answer.trim_end_matches(",\n").to_owned() + "\n]",
    ];
    let mut child = std::process::Command::new(common::BIN)
        .args(["run", "-", "--tools", &s(&tools), "--format", "json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(pieces[..2].concat().as_bytes()).unwrap();
    stdin.flush().unwrap();
    // The first search is made while the rest of the plan has not been written.
    let sent = async || !server.received_requests().await.unwrap().is_empty();
    let what = || "no call started before the input ended".to_owned();
    common::until(Duration::from_secs(10), what, sent).await;
    stdin.write_all(pieces[2..].concat().as_bytes()).unwrap();
    drop(stdin);
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["status"], "ok");
    assert_eq!(report["tool_calls"], 4);
    // Each call once: the early search was taken by the run.
    assert_eq!(server.received_requests().await.unwrap().len(), 4);
}
