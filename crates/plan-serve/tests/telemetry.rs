//! The service's traces, kept in memory: a run submitted with a `traceparent` is traced
//! as that caller's child, its tool call's span under its own, and the response names
//! the trace.

mod common;

use common::{Setup, serve, slow_search};
use plan_telemetry::Telemetry;
use plan_telemetry::opentelemetry_sdk::trace::SpanData;
use serde_json::json;

fn attr(span: &SpanData, key: &str) -> Option<String> {
    let kv = span.attributes.iter().find(|kv| kv.key.as_str() == key)?;
    Some(kv.value.as_str().into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_continues_a_callers_trace_and_names_it() {
    let (_server, dir, tools) = slow_search().await;
    let (tx, rx) = std::sync::mpsc::channel();
    let setup = Setup {
        tools: Some(tools),
        telemetry: Some(Box::new(move |redactor| {
            let (telemetry, kept) = Telemetry::in_memory(redactor, false);
            tx.send(kept).unwrap();
            Ok(Some(telemetry))
        })),
        ..Setup::default()
    };
    let served = serve(&dir.path().join("s.db"), setup);
    let kept = rx.recv().unwrap();
    let plan = json!([
        {"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "Search.", "dependency_analysis": "None."}},
        {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "vector_search",
         "tool_params": {"query": "start"}, "output_vars": ["final_answer"]}}
    ]);
    let caller = "0af7651916cd43dd8448eb211c80319c";
    let res = common::client()
        .post(format!("{}/v1/runs", served.base))
        .header("traceparent", format!("00-{caller}-b7ad6b7169203331-01"))
        .json(&json!({"plan": plan, "run_id": "t1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 201);
    let named = res.headers()["x-trace-id"].to_str().unwrap();
    assert_eq!(named, caller, "the response names the caller's trace");
    let run = format!("{}/v1/runs/t1", served.base);
    let ended = async || {
        common::call(reqwest::Method::GET, run.clone(), None, None)
            .await
            .1["run"]["status"]
            == "ok"
    };
    for _ in 0..400 {
        if ended().await {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    // NB: a stopped service sends the spans it still holds.
    drop(served);
    let spans = kept.spans();
    let root = spans
        .iter()
        .find(|s| s.name == "invoke_workflow run")
        .expect("the run's span was exported");
    assert_eq!(root.span_context.trace_id().to_string(), caller);
    assert_eq!(root.parent_span_id.to_string(), "b7ad6b7169203331");
    assert_eq!(attr(root, "planrt.status").as_deref(), Some("ok"));
    assert_eq!(attr(root, "planrt.run.id").as_deref(), Some("t1"));
    let tool = spans
        .iter()
        .find(|s| s.name == "retrieval vector_search")
        .expect("the call's span was exported");
    assert_eq!(tool.parent_span_id, root.span_context.span_id());
    assert_eq!(tool.span_context.trace_id(), root.span_context.trace_id());
}
