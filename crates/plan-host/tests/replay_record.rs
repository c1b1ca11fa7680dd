//! Replay timing, record → replay round trip, backend selection, and the `http` backend.

mod common;

use std::time::Duration;

use common::*;
use plan_host::{
    CONDITION_INSTRUCTION, Cassette, Host, HostErrorKind, HostOptions, ToolErrorKind, Tracer,
    keys_instruction, run_machine,
};
use plan_manifest::{BackendConfig, Manifest};
use plan_vm::RequestKind;
use serde_json::{Value, json};
use wiremock::matchers::{body_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// On paused time: two 300 ms replays of one yield take exactly 300 ms together.
#[tokio::test(start_paused = true)]
async fn latency_does_not_block_other_calls() {
    let dir = tempfile::tempdir().unwrap();
    let cassette = write(
        &dir,
        "c.jsonl",
        concat!(
            r#"{"tool":"vector_search","args":{"query":"a","top_k":1},"output":"A","latency_ms":300}"#,
            "\n",
            r#"{"tool":"vector_search","args":{"query":"b","top_k":1},"output":"B","latency_ms":300}"#,
            "\n"
        ),
    );
    let host = Host::new(
        Manifest::builtin(),
        HostOptions {
            replay: Some(cassette),
            ..opts()
        },
    )
    .unwrap();
    let ra = req(
        1,
        "vector_search",
        json!({"query": "a", "top_k": 1}),
        plain(),
    );
    let rb = req(
        2,
        "vector_search",
        json!({"top_k": 1, "query": "b"}),
        plain(),
    );
    let t0 = tokio::time::Instant::now();
    let (a, b) = tokio::join!(host.call(&ra), host.call(&rb));
    assert_eq!((a.unwrap(), b.unwrap()), (json!("A"), json!("B")));
    assert_eq!(
        t0.elapsed(),
        Duration::from_millis(300),
        "one after the other?"
    );
}

#[tokio::test]
async fn record_then_replay_gives_the_same_answers_and_no_key() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(completion("TiDB is a distributed SQL database.")),
        )
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/search"))
        .and(body_json(json!({"query": "TiDB", "top_k": 2})))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"data": {"chunks": ["c1", "c2"]}})),
        )
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let cassette = dir.path().join("rec.jsonl");
    let mut m = manifest_with(
        "llm_generate",
        openai(&server.uri(), Some("TEST_KEY"), None, None),
    );
    if let Some(t) = m.tools.iter_mut().find(|t| t.name == "vector_search") {
        t.backend = Some(BackendConfig::Http {
            url: format!("{}/search", server.uri()),
            pointer: Some("/data/chunks".into()),
            api_key_env: Some("TEST_KEY".into()),
            timeout_secs: None,
            max_retries: None,
            concurrency: None,
        });
    }
    let calls = [
        req(
            1,
            "vector_search",
            json!({"query": "TiDB", "top_k": 2}),
            plain(),
        ),
        req(
            2,
            "llm_generate",
            json!({"prompt": "What is TiDB?", "context": null}),
            plain(),
        ),
    ];
    // Recorded by the driver as the run commits the calls.
    let recorded = {
        let host = Host::new(
            m,
            HostOptions {
                record: Some(cassette.clone()),
                ..opts()
            },
        )
        .unwrap();
        let report =
            run_machine(&host, &mut Script::new(calls.to_vec()), &mut Tracer::none()).await;
        assert!(report.is_ok(), "{report:?}");
        assert_eq!(report.tool_calls, 2);
        report.final_answer
    };
    assert_eq!(
        recorded,
        json!("[\"c1\",\"c2\"]+TiDB is a distributed SQL database.")
    );
    let text = std::fs::read_to_string(&cassette).unwrap();
    assert!(!text.contains(KEY), "key leaked into the cassette");
    let parsed = Cassette::parse(&text, "rec").unwrap();
    assert_eq!(parsed.entries.len(), 2);
    assert!(parsed.entries.iter().all(|e| e.latency_ms.is_some()));
    let steps: Vec<Option<u64>> = parsed.entries.iter().map(|e| e.step).collect();
    assert_eq!(
        steps,
        [Some(1), Some(2)],
        "each entry records its call's step"
    );

    // Replay with no network configuration at all.
    let host = Host::new(
        Manifest::builtin(),
        HostOptions {
            replay: Some(cassette),
            ..opts()
        },
    )
    .unwrap();
    let report = run_machine(&host, &mut Script::new(calls.to_vec()), &mut Tracer::none()).await;
    assert_eq!(report.final_answer, recorded);
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

#[tokio::test]
async fn http_pointer_missing_names_the_pointer() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"results": []})))
        .mount(&server)
        .await;
    let m = manifest_with(
        "retrieve_knowledge_graph",
        BackendConfig::Http {
            url: server.uri(),
            pointer: Some("/data/graph".into()),
            api_key_env: None,
            timeout_secs: None,
            max_retries: None,
            concurrency: None,
        },
    );
    let host = Host::new(m, opts()).unwrap();
    let err = host
        .call(&req(
            1,
            "retrieve_knowledge_graph",
            json!({"query": "q"}),
            plain(),
        ))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::BadResponse);
    assert!(
        err.message
            .contains("nothing at JSON pointer `/data/graph`"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn http_text_body_becomes_a_string() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_string("chunk one\nchunk two"))
        .mount(&server)
        .await;
    let m = manifest_with(
        "vector_search",
        BackendConfig::Http {
            url: server.uri(),
            pointer: None,
            api_key_env: None,
            timeout_secs: None,
            max_retries: None,
            concurrency: None,
        },
    );
    let host = Host::new(m, opts()).unwrap();
    let out = host
        .call(&req(
            1,
            "vector_search",
            json!({"query": "q", "top_k": 2}),
            plain(),
        ))
        .await
        .unwrap();
    assert_eq!(out, json!("chunk one\nchunk two"));
}

/// An LLM behind an `http` backend gets the format instruction the `openai` backend
/// adds: the keys of a call with several output vars, a condition's answer shape.
#[tokio::test]
async fn http_llm_prompts_get_the_format_instruction() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"a": 1, "b": 2})))
        .mount(&server)
        .await;
    let m = manifest_with(
        "llm_generate",
        BackendConfig::Http {
            url: server.uri(),
            pointer: None,
            api_key_env: None,
            timeout_secs: None,
            max_retries: None,
            concurrency: None,
        },
    );
    let host = Host::new(m, opts()).unwrap();
    let keys = RequestKind::Tool {
        output_keys: Some(vec!["a".into(), "b".into()]),
    };
    let calls = [
        (json!({"prompt": "Q?", "context": "C"}), keys.clone()),
        (json!({"prompt": "Q?", "context": null}), plain()),
        (
            json!({"prompt": "Holds?", "context": null}),
            RequestKind::Condition,
        ),
        (json!({"query": "no prompt"}), keys),
    ];
    for (i, (args, kind)) in calls.into_iter().enumerate() {
        host.call(&req(i as u64 + 1, "llm_generate", args, kind))
            .await
            .unwrap();
    }
    let sent: Vec<Value> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    assert_eq!(
        sent,
        [
            json!({"prompt": format!("Q?{}", keys_instruction(&["a".into(), "b".into()])), "context": "C"}),
            json!({"prompt": "Q?", "context": null}),
            json!({"prompt": format!("Holds?{CONDITION_INSTRUCTION}"), "context": null}),
            json!({"query": "no prompt"}),
        ]
    );
}

#[tokio::test]
async fn backend_selection_and_its_errors() {
    // Nothing configured.
    let host = Host::new(Manifest::builtin(), opts()).unwrap();
    let err = host.prepare(["llm_generate", "vector_search"]).unwrap_err();
    assert_eq!(err.kind, HostErrorKind::Config);
    assert_eq!(
        err.message,
        "no backend for tools `llm_generate`, `vector_search`: pass --replay CASSETTE, \
         or configure [tool.backend] (or [defaults.backend]) in the --tools file"
    );
    // One tool alone is named in the singular, on the call path too.
    let err = host
        .call(&req(
            1,
            "vector_search",
            json!({"query": "q", "top_k": 1}),
            plain(),
        ))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Config);
    assert!(
        err.message
            .starts_with("no backend for tool `vector_search`: pass --replay"),
        "{}",
        err.message
    );

    // The default backend serves unconfigured tools; a replay backend with a cassette works.
    let dir = tempfile::tempdir().unwrap();
    let c = write(
        &dir,
        "d.jsonl",
        r#"{"tool":"custom","args":{"x":1},"output":{"y":2}}"#,
    );
    let m = Manifest {
        tools: Manifest::builtin().tools,
        default_backend: Some(BackendConfig::Replay {
            cassette: Some(c.display().to_string()),
        }),
        planner: None,
        grounding: None,
        mcp: Vec::new(),
        eval: None,
        pricing: Default::default(),
    };
    let host = Host::new(m, opts()).unwrap();
    let out = host
        .call(&req(1, "custom", json!({"x": 1}), plain()))
        .await
        .unwrap();
    assert_eq!(out, json!({"y": 2}));

    // A replay backend without a cassette.
    let m = manifest_with("vector_search", BackendConfig::Replay { cassette: None });
    let err = Host::new(m, opts())
        .unwrap()
        .prepare(["vector_search"])
        .unwrap_err();
    assert!(err.message.contains("names no cassette"), "{}", err.message);
}

#[tokio::test]
async fn malformed_cassette_fails_host_setup_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let c = write(
        &dir,
        "bad.jsonl",
        "{\"tool\":\"t\",\"args\":{},\"output\":1}\n{\"tool\": \"t\", \"args\": {}\n",
    );
    let err = Host::new(
        Manifest::builtin(),
        HostOptions {
            replay: Some(c.clone()),
            ..opts()
        },
    )
    .unwrap_err();
    assert_eq!(err.kind, HostErrorKind::InvalidInput);
    assert!(
        err.message
            .starts_with(&format!("{}:2: not a JSON object", c.display())),
        "{}",
        err.message
    );

    let err = Host::new(
        Manifest::builtin(),
        HostOptions {
            replay: Some(dir.path().join("missing.jsonl")),
            ..opts()
        },
    )
    .unwrap_err();
    assert_eq!(err.kind, HostErrorKind::Io);
}
