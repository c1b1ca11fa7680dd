//! The `openai` backend against a loopback OpenAI-compatible server (wiremock): request
//! shape, retries, timeouts, and that the API key is sent but never leaks.

mod common;

use std::time::Duration;

use common::*;
use plan_host::{CONDITION_INSTRUCTION, Host, HostErrorKind, ToolErrorKind};
use plan_vm::RequestKind;
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

async fn server_answering(content: &str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(content)))
        .mount(&server)
        .await;
    server
}

fn base(server: &MockServer) -> String {
    format!("{}/v1", server.uri())
}

async fn bodies(server: &MockServer) -> Vec<Value> {
    let reqs = server.received_requests().await.unwrap_or_default();
    reqs.iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null))
        .collect()
}

#[tokio::test]
async fn request_shape_context_prompt_and_key() {
    let server = server_answering("Paris").await;
    let m = manifest_with(
        "llm_generate",
        openai(&base(&server), Some("TEST_KEY"), None, None),
    );
    let host = Host::new(m, opts()).unwrap();
    let out = host
        .call(&req(
            1,
            "llm_generate",
            json!({"prompt": "Capital?", "context": "France facts"}),
            plain(),
        ))
        .await
        .unwrap();
    assert_eq!(out, json!("Paris"));

    let reqs = server.received_requests().await.unwrap();
    assert_eq!(reqs.len(), 1);
    let auth = reqs[0]
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    assert_eq!(auth, Some(format!("Bearer {KEY}").as_str()));
    let body: Value = serde_json::from_slice(&reqs[0].body).unwrap();
    assert_eq!(
        body,
        json!({
            "model": "test-model",
            "messages": [{"role": "user", "content": "France facts\nCapital?"}],
            "stream": false
        })
    );
}

#[tokio::test]
async fn no_key_env_means_no_auth_header_and_null_context_is_dropped() {
    let server = server_answering("ok").await;
    let m = manifest_with(
        "llm_generate",
        openai(&format!("{}/v1/", server.uri()), None, None, None),
    );
    let host = Host::new(m, opts()).unwrap();
    host.call(&req(
        1,
        "llm_generate",
        json!({"prompt": "Hi", "context": null}),
        plain(),
    ))
    .await
    .unwrap();
    let reqs = server.received_requests().await.unwrap();
    assert!(reqs[0].headers.get("authorization").is_none());
    let body: Value = serde_json::from_slice(&reqs[0].body).unwrap();
    assert_eq!(body["messages"], json!([{"role": "user", "content": "Hi"}]));
}

#[tokio::test]
async fn output_keys_and_conditions_get_format_instructions() {
    let server = server_answering("{\"a\": 1, \"b\": 2}").await;
    let m = manifest_with("llm_generate", openai(&base(&server), None, None, None));
    let host = Host::new(m, opts()).unwrap();
    let keys = RequestKind::Tool {
        output_keys: Some(vec!["summary".into(), "insights".into()]),
    };
    host.call(&req(
        1,
        "llm_generate",
        json!({"prompt": "Analyze", "context": "data"}),
        keys,
    ))
    .await
    .unwrap();
    // Conditions go to llm_generate's backend when no `jmp_condition` tool is configured.
    host.call(&req(
        2,
        "jmp_condition",
        json!({"prompt": "Is 4 even?", "context": null}),
        RequestKind::Condition,
    ))
    .await
    .unwrap();
    let b = bodies(&server).await;
    assert_eq!(
        b[0]["messages"][0]["content"],
        json!(
            "data\nAnalyze\n\nRespond with a JSON object containing the keys: [\"summary\", \"insights\"]."
        )
    );
    assert_eq!(
        b[1]["messages"][0]["content"],
        json!(format!("Is 4 even?{CONDITION_INSTRUCTION}"))
    );
}

#[tokio::test]
async fn retries_429_and_500_then_succeeds() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).set_body_string("slow down"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_string("boom"))
        .up_to_n_times(1)
        .with_priority(2)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("third time")))
        .with_priority(3)
        .mount(&server)
        .await;
    let m = manifest_with(
        "llm_generate",
        openai(&server.uri(), Some("TEST_KEY"), None, None),
    );
    let host = Host::new(m, opts()).unwrap();
    let out = host
        .call(&req(1, "llm_generate", json!({"prompt": "x"}), plain()))
        .await
        .unwrap();
    assert_eq!(out, json!("third time"));
    assert_eq!(server.received_requests().await.unwrap().len(), 3);
}

#[tokio::test]
async fn gives_up_after_the_configured_tries_with_a_clear_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).set_body_string("overloaded"))
        .mount(&server)
        .await;
    let m = manifest_with(
        "llm_generate",
        openai(&server.uri(), Some("TEST_KEY"), None, Some(2)),
    );
    let host = Host::new(m, opts()).unwrap();
    let err = host
        .call(&req(1, "llm_generate", json!({"prompt": "x"}), plain()))
        .await
        .unwrap_err();
    assert_eq!(server.received_requests().await.unwrap().len(), 3);
    assert_eq!(err.kind, ToolErrorKind::Transport);
    assert_eq!(
        err.message,
        format!(
            "POST {}/chat/completions: HTTP 503 Service Unavailable: overloaded (gave up after 3 attempts)",
            server.uri()
        )
    );
    assert!(!err.message.contains(KEY));
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_string("{\"error\":\"bad key\"}"))
        .mount(&server)
        .await;
    let m = manifest_with(
        "llm_generate",
        openai(&server.uri(), Some("TEST_KEY"), None, None),
    );
    let host = Host::new(m, opts()).unwrap();
    let err = host
        .call(&req(1, "llm_generate", json!({"prompt": "x"}), plain()))
        .await
        .unwrap_err();
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
    // The service did not act on it (a run store may send a write again after this).
    assert_eq!(err.kind, ToolErrorKind::Refused);
    assert!(
        err.message.contains("HTTP 401 Unauthorized"),
        "{}",
        err.message
    );
    assert!(!err.message.contains(KEY));
}

#[tokio::test]
async fn per_attempt_timeout_is_retried_then_reported() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(completion("late"))
                .set_delay(Duration::from_secs(60)),
        )
        .mount(&server)
        .await;
    let m = manifest_with(
        "llm_generate",
        openai(&server.uri(), Some("TEST_KEY"), Some(0.2), Some(1)),
    );
    let host = Host::new(m, opts()).unwrap();
    // NB: the server answers after a minute: the error below (a timeout, two attempts)
    // shows the 0.2 s limit fired on each, without timing it.
    let err = host
        .call(&req(1, "llm_generate", json!({"prompt": "x"}), plain()))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Timeout);
    assert_eq!(
        err.message,
        format!(
            "POST {}/chat/completions: timed out after 0.2 s (gave up after 2 attempts)",
            server.uri()
        )
    );
}

#[tokio::test]
async fn a_server_that_never_answers_costs_three_attempt_timeouts_at_most() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(completion("late"))
                .set_delay(Duration::from_secs(30)),
        )
        .mount(&server)
        .await;
    // Ten retries of 0.2 s each would be 2.2 s; the call stops at 3 × 0.2 s.
    let m = manifest_with(
        "llm_generate",
        openai(&server.uri(), None, Some(0.2), Some(10)),
    );
    let host = Host::new(m, opts()).unwrap();
    let err = host
        .call(&req(1, "llm_generate", json!({"prompt": "x"}), plain()))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Timeout);
    assert_eq!(
        err.message,
        format!(
            "POST {}/chat/completions: no answer within 0.6 s, all attempts together (3 × timeout_secs)",
            server.uri()
        )
    );
    assert!(server.received_requests().await.unwrap().len() <= 3);
}

#[tokio::test]
async fn waiting_for_a_concurrency_slot_does_not_count_against_the_call() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(completion("ok"))
                .set_delay(Duration::from_millis(100)),
        )
        .mount(&server)
        .await;
    // One call at a time, 0.5 s per attempt (5 × the answer's 0.1 s), so 1.5 s for all of
    // a call's attempts: the last of 20 calls waits about 1.9 s for its slot.
    let mut backend = openai(&server.uri(), None, Some(0.5), Some(0));
    if let plan_manifest::BackendConfig::Openai { concurrency, .. } = &mut backend {
        *concurrency = Some(1);
    }
    let host = Host::new(manifest_with("llm_generate", backend), opts()).unwrap();
    let reqs: Vec<_> = (0..20)
        .map(|i| {
            req(
                i,
                "llm_generate",
                json!({"prompt": format!("q{i}")}),
                plain(),
            )
        })
        .collect();
    let results = futures::future::join_all(reqs.iter().map(|r| host.call(r))).await;
    for r in results {
        assert_eq!(r.unwrap(), json!("ok"));
    }
}

#[tokio::test]
async fn per_call_timeout_covers_retries() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(completion("late"))
                .set_delay(Duration::from_secs(3)),
        )
        .mount(&server)
        .await;
    let m = manifest_with("llm_generate", openai(&server.uri(), None, None, None));
    let host = Host::new(
        m,
        plan_host::HostOptions {
            tool_timeout: Some(Duration::from_millis(300)),
            ..opts()
        },
    )
    .unwrap();
    let err = host
        .call(&req(1, "llm_generate", json!({"prompt": "x"}), plain()))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Timeout);
    assert_eq!(err.message, "timed out after 0.3 s");
}

#[tokio::test]
async fn connection_refused_is_retried_and_keyless() {
    // A port nothing listens on: bind, read the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let m = manifest_with(
        "llm_generate",
        openai(&url, Some("TEST_KEY"), None, Some(1)),
    );
    let host = Host::new(m, opts()).unwrap();
    let err = host
        .call(&req(1, "llm_generate", json!({"prompt": "x"}), plain()))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Transport);
    assert!(
        err.message
            .starts_with(&format!("POST {url}/chat/completions: connection failed: ")),
        "{}",
        err.message
    );
    assert!(
        err.message.ends_with("(gave up after 2 attempts)"),
        "{}",
        err.message
    );
    assert!(!err.message.contains(KEY));
}

#[tokio::test]
async fn missing_key_env_names_the_variable() {
    let m = manifest_with(
        "llm_generate",
        openai(
            "http://127.0.0.1:9/v1",
            Some("NOT_SET_ANYWHERE"),
            None,
            None,
        ),
    );
    let host = Host::new(m, opts()).unwrap();
    let err = host.prepare(["llm_generate"]).unwrap_err();
    assert_eq!(err.kind, HostErrorKind::Config);
    assert_eq!(
        err.message,
        "environment variable NOT_SET_ANYWHERE (the API key for tool `llm_generate`) is not set"
    );
    // Set but unusable: said as it is.
    let cases: [(Result<String, std::env::VarError>, &str); 2] = [
        (Ok(String::new()), "is empty"),
        (
            Err(std::env::VarError::NotUnicode("\u{fffd}".into())),
            "is not valid UTF-8",
        ),
    ];
    for (value, says) in cases {
        let m = manifest_with(
            "llm_generate",
            openai("http://127.0.0.1:9/v1", Some("ODD_KEY"), None, None),
        );
        let env: plan_host::EnvLookup = std::sync::Arc::new(move |_| value.clone());
        let host = Host::new(m, plan_host::HostOptions { env, ..opts() }).unwrap();
        let err = host.prepare(["llm_generate"]).unwrap_err();
        assert_eq!(
            err.message,
            format!("environment variable ODD_KEY (the API key for tool `llm_generate`) {says}")
        );
    }
}

#[tokio::test]
async fn unexpected_response_shape_is_a_clear_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"choices": []})))
        .mount(&server)
        .await;
    let m = manifest_with("llm_generate", openai(&server.uri(), None, None, None));
    let host = Host::new(m, opts()).unwrap();
    let err = host
        .call(&req(1, "llm_generate", json!({"prompt": "x"}), plain()))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::BadResponse);
    assert!(
        err.message.contains("no choices[0].message.content"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn a_separately_configured_condition_tool_wins() {
    let llm = server_answering("gen").await;
    let cond = MockServer::start().await;
    Mock::given(method("POST"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(completion("{\"result\": true, \"explanation\": \"x\"}")),
        )
        .mount(&cond)
        .await;
    let mut m = manifest_with("llm_generate", openai(&llm.uri(), None, None, None));
    m.tools.push(plan_manifest::ToolSpec {
        retrieval: false,
        name: "jmp_condition".into(),
        description: String::new(),
        params: vec![],
        effects: Default::default(),
        backend: Some(openai(&cond.uri(), Some("TEST_KEY"), None, None)),
    });
    let host = Host::new(m, opts()).unwrap();
    let out = host
        .call(&req(
            1,
            "jmp_condition",
            json!({"prompt": "p", "context": null}),
            RequestKind::Condition,
        ))
        .await
        .unwrap();
    assert_eq!(out, json!("{\"result\": true, \"explanation\": \"x\"}"));
    assert_eq!(llm.received_requests().await.unwrap().len(), 0);
}
