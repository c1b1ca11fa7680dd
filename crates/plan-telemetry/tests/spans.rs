//! A run's trace in this process, its spans caught by an exporter of the test's own: one
//! workflow span with every tool call's span under it, retrieval tools named as such, a
//! failed call's span in error, a caller's `traceparent` continued, the run's end on the
//! workflow's span, and no secret in any exported text, captured or not.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use opentelemetry::Value as OtelValue;
use opentelemetry::trace::{SpanId, Status};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use plan_host::{Backend, Host, HostOptions, ToolError, ToolErrorKind, Tracer};
use plan_manifest::Manifest;
use plan_telemetry::{Ended, Telemetry, Workflow};
use plan_vm::{Limits, ToolRequest};
use serde_json::{Value, json};

const SECRET: &str = "sk-test-0123456789abcdef";

/// Keeps every span exported.
#[derive(Clone, Debug, Default)]
struct Caught(Arc<Mutex<Vec<SpanData>>>);

impl SpanExporter for Caught {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.0.lock().unwrap().extend(batch);
        Ok(())
    }
}

/// Answers a search with its query and the secret (a server that echoes a key); refuses
/// a query that says `fail`.
struct Echo;

impl Backend for Echo {
    fn call<'a>(&'a self, req: &'a ToolRequest) -> BoxFuture<'a, Result<Value, ToolError>> {
        let query = req.args["query"].as_str().unwrap_or_default().to_owned();
        Box::pin(async move {
            if query.contains("fail") {
                return Err(ToolError::new(ToolErrorKind::Refused, "the index is down"));
            }
            Ok(json!(format!("found {query} with {SECRET}")))
        })
    }

    fn describe(&self) -> String {
        "echo".into()
    }
}

/// Two searches, the second on the first's answer, then the answer.
const PLAN: &str = r#"[
 {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "a ${q}"}, "output_vars": ["a"]}},
 {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "b ${a}"}, "output_vars": ["b"]}},
 {"seq_no": 2, "type": "assign", "parameters": {"final_answer": "${b}"}}
]"#;

/// `PLAN` run with `q` preset, traced as `planvm run` would (capturing the text of
/// calls when `capture`), the caller's `parent` continued: the run's status and the
/// spans exported.
async fn traced(q: &str, capture: bool, parent: Option<&str>) -> (String, Vec<SpanData>) {
    let manifest = Manifest::builtin();
    let host = Host::new(manifest.clone(), HostOptions::default()).unwrap();
    host.set_backend("vector_search", Arc::new(Echo));
    host.redactor().add(SECRET);
    let caught = Caught::default();
    let telemetry = Telemetry::with_exporter(caught.clone(), host.redactor().clone(), capture);
    let workflow = Workflow {
        command: "run",
        plan: Some("plan.json"),
        goal: Some(&format!("a goal mentioning {SECRET}")),
        run_id: None,
    };
    let trace = telemetry.start(&workflow, parent);
    let mut tracer = Tracer::none();
    tracer.also(Box::new(trace.journal(&manifest)));
    let opts = plan_compiler::CompileOptions {
        manifest,
        presets: vec!["q".into()],
        ..Default::default()
    };
    let program = plan_compiler::compile(PLAN, &opts).validate().unwrap();
    let vars = vec![("q".to_owned(), json!(q))];
    let run = plan_host::run_plan(&host, &program, vars, Limits::default(), &mut tracer);
    let report = plan_telemetry::within(Some(&trace), run).await;
    trace.end(&Ended::run(&report, None));
    drop(tracer);
    assert_eq!(telemetry.finish(), 0, "every span reached the exporter");
    let spans = caught.0.lock().unwrap().clone();
    (format!("{:?}", report.status), spans)
}

fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a OtelValue> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn root(spans: &[SpanData]) -> &SpanData {
    spans
        .iter()
        .find(|s| s.name.starts_with("invoke_workflow"))
        .expect("a workflow span")
}

#[tokio::test]
async fn a_run_is_one_trace_with_each_call_a_span_under_the_workflows() {
    let (status, spans) = traced("x", false, None).await;
    assert_eq!(status, "Ok");
    let root = root(&spans);
    assert_eq!(root.name, "invoke_workflow run");
    assert_eq!(root.parent_span_id, SpanId::INVALID);
    assert_eq!(attr(root, "planrt.status"), Some(&"ok".into()));
    assert_eq!(attr(root, "planrt.tool_calls"), Some(&2i64.into()));
    assert_eq!(attr(root, "planrt.plan"), Some(&"plan.json".into()));
    let calls: Vec<&SpanData> = spans.iter().filter(|s| s != &root).collect();
    assert_eq!(
        calls.len(),
        2,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    for call in &calls {
        // NB: vector_search is a retrieval tool in the built-in manifest.
        assert_eq!(call.name, "retrieval vector_search");
        assert_eq!(call.span_context.trace_id(), root.span_context.trace_id());
        assert_eq!(call.parent_span_id, root.span_context.span_id());
        assert_eq!(call.status, Status::Unset);
        assert!(call.start_time <= call.end_time);
    }
    // The second call waited for the first's answer.
    let mut by_start = calls.clone();
    by_start.sort_by_key(|s| s.start_time);
    assert!(by_start[0].end_time <= by_start[1].start_time);
}

#[tokio::test]
async fn a_failed_call_is_a_span_in_error_and_the_run_ends_failed() {
    let (status, spans) = traced("fail", false, None).await;
    assert_eq!(status, "Failed");
    let root = root(&spans);
    assert_eq!(attr(root, "planrt.status"), Some(&"failed".into()));
    assert!(
        matches!(root.status, Status::Error { .. }),
        "{:?}",
        root.status
    );
    let failed: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.name == "retrieval vector_search")
        .collect();
    assert_eq!(failed.len(), 1);
    assert!(
        matches!(&failed[0].status, Status::Error { description } if description.contains("index is down")),
        "{:?}",
        failed[0].status
    );
}

#[tokio::test]
async fn a_callers_traceparent_is_continued() {
    let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let (_, spans) = traced("x", false, Some(parent)).await;
    let workflow = root(&spans);
    assert_eq!(
        workflow.span_context.trace_id().to_string(),
        "0af7651916cd43dd8448eb211c80319c"
    );
    assert_eq!(workflow.parent_span_id.to_string(), "b7ad6b7169203331");
    // Not a traceparent: a trace of its own.
    for bad in [
        "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "junk",
        "",
    ] {
        let (_, spans) = traced("x", false, Some(bad)).await;
        assert_eq!(root(&spans).parent_span_id, SpanId::INVALID, "{bad}");
    }
}

#[tokio::test]
async fn no_secret_is_exported_captured_or_not() {
    for capture in [false, true] {
        let (_, spans) = traced("x", capture, None).await;
        let text = format!("{spans:?}");
        assert!(!text.contains(SECRET), "capture={capture}: {text}");
        let goal = attr(root(&spans), "planrt.goal").map(|v| v.as_str().into_owned());
        match capture {
            // The goal's text only when asked for, redacted.
            true => assert!(goal.unwrap().contains("a goal mentioning")),
            false => assert_eq!(goal, None),
        }
        assert!(attr(root(&spans), "planrt.goal.hash").is_some());
    }
}
