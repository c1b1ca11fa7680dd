//! A run's trace in this process, its spans kept in memory (`Telemetry::in_memory`): one
//! workflow span with every tool call's span under it, retrieval tools named as such, a
//! failed call's span in error, a caller's `traceparent` continued and the workflow's
//! sent to an HTTP tool on loopback, the run's end on the workflow's span, an `ask`'s
//! planner call a `chat` span beside its run's calls, the service named `planvm` unless
//! the environment names it, and no secret in any exported text, captured or not.

use std::sync::Arc;

use futures::future::BoxFuture;
use opentelemetry::Value as OtelValue;
use opentelemetry::trace::{SpanId, Status};
use opentelemetry_sdk::trace::SpanData;
use plan_host::{Backend, Host, HostOptions, ToolError, ToolErrorKind, Tracer};
use plan_llm::{CallError, Reply, Usage};
use plan_manifest::Manifest;
use plan_planner::{AskOptions, Examples, Planner, PlannerCall, PlannerModel, Template};
use plan_telemetry::{Ended, Telemetry, Workflow};
use plan_vm::{Limits, ToolRequest};
use serde_json::{Value, json};

const SECRET: &str = "sk-test-0123456789abcdef";

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

/// A host of the built-in tools, `vector_search` answered by [`Echo`], its secret known.
fn echo_host() -> Host {
    let host = Host::new(Manifest::builtin(), HostOptions::default()).unwrap();
    host.set_backend("vector_search", Arc::new(Echo));
    host.redactor().add(SECRET);
    host
}

/// `PLAN` run with `q` preset, traced as `planvm run` would (capturing the text of
/// calls when `capture`), the caller's `parent` continued: the run's status and the
/// spans exported.
async fn traced(q: &str, capture: bool, parent: Option<&str>) -> (String, Vec<SpanData>) {
    traced_on(&echo_host(), q, capture, parent).await
}

/// [`traced`] on `host`.
async fn traced_on(
    host: &Host,
    q: &str,
    capture: bool,
    parent: Option<&str>,
) -> (String, Vec<SpanData>) {
    let manifest = host.manifest().clone();
    let (telemetry, caught) = Telemetry::in_memory(host.redactor().clone(), capture);
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
    let run = plan_host::run_plan(host, &program, vars, Limits::default(), &mut tracer);
    let report = plan_telemetry::within(Some(&trace), run).await;
    trace.end(&Ended::run(&report, None));
    drop(tracer);
    assert_eq!(telemetry.finish(), 0, "every span reached the exporter");
    let spans = caught.spans();
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
        assert_eq!(
            attr(call, "gen_ai.operation.name"),
            Some(&"retrieval".into())
        );
        assert_eq!(attr(call, "planrt.tool.effect"), Some(&"read".into()));
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
        // A call's arguments and result only when asked for, redacted.
        let first = spans
            .iter()
            .find(|s| attr(s, "planrt.seq_no") == Some(&0i64.into()))
            .unwrap();
        let args = attr(first, "gen_ai.tool.call.arguments").map(|v| v.as_str().into_owned());
        let result = attr(first, "gen_ai.tool.call.result").map(|v| v.as_str().into_owned());
        match capture {
            true => {
                assert!(args.unwrap().contains("a x"));
                assert!(result.unwrap().starts_with("found a x with"));
            }
            false => assert_eq!((args, result), (None, None)),
        }
    }
}

#[tokio::test]
async fn the_service_is_planvm_unless_the_environment_names_it() {
    let (telemetry, caught) = Telemetry::in_memory(echo_host().redactor().clone(), false);
    let workflow = Workflow {
        command: "run",
        plan: None,
        goal: None,
        run_id: None,
    };
    telemetry
        .start(&workflow, None)
        .end(&Ended::nothing_ran("not_started", None));
    assert_eq!(telemetry.finish(), 0);
    // NB: the SDK names the service from the environment when it says one (the binary's
    // tests set it); else ours.
    let expected = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "planvm".into());
    assert_eq!(caught.service(), Some(expected));
}

/// A tool behind HTTP is told the workflow's span as its parent: its own spans can join
/// the run's trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_tool_is_sent_the_workflows_traceparent() {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::path("/search"))
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_json(json!({"text": "hit"})))
        .mount(&server)
        .await;
    let tools = format!(
        "[[tool]]\nname = \"vector_search\"\n[tool.backend]\nkind = \"http\"\n\
         url = \"{}/search\"\npointer = \"/text\"\nmax_retries = 0\n",
        server.uri()
    );
    let manifest = Manifest::from_toml_str(&tools, "tools.toml").unwrap();
    let host = Host::new(manifest, HostOptions::default()).unwrap();
    let (status, spans) = traced_on(&host, "x", false, None).await;
    assert_eq!(status, "Ok");
    let root = root(&spans);
    let cx = &root.span_context;
    let parent = format!("00-{}-{}-01", cx.trace_id(), cx.span_id());
    let requests = server.received_requests().await.unwrap();
    let told: Vec<Option<&str>> = requests
        .iter()
        .map(|r| r.headers.get("traceparent").and_then(|v| v.to_str().ok()))
        .collect();
    assert_eq!(told, [Some(parent.as_str()); 2]);
}

/// The plan [`Scripted`] writes: one search.
const ASKED: &str = r#"[
 {"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "Search.", "dependency_analysis": "None."}},
 {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "start"}, "output_vars": ["final_answer"]}}
]"#;

/// A planner's LLM that writes [`ASKED`], saying what it cost.
struct Scripted;

impl PlannerModel for Scripted {
    fn reply<'a>(&'a self, _: &'a PlannerCall<'_>) -> BoxFuture<'a, Result<Reply, CallError>> {
        Box::pin(async move {
            Ok(Reply {
                text: format!("```json\n{ASKED}\n```"),
                usage: Some(Usage {
                    input_tokens: 321,
                    output_tokens: 45,
                    cost: None,
                }),
            })
        })
    }

    fn describe(&self) -> String {
        "scripted".into()
    }
}

/// An `ask` traced as `planvm ask` would: the planner's call is a `chat {model}` span
/// beside the run's tool calls, all under the `ask`'s span; the goal goes out only as a
/// hash.
#[tokio::test]
async fn an_ask_traces_its_planner_call_under_the_same_workflow() {
    let host = echo_host();
    let (telemetry, caught) = Telemetry::in_memory(host.redactor().clone(), false);
    let goal = "What does the first search find?";
    let workflow = Workflow {
        command: "ask",
        plan: None,
        goal: Some(goal),
        run_id: None,
    };
    let trace = telemetry.start(&workflow, None);
    let planner = Planner {
        host: &host,
        model: trace.model(Arc::new(Scripted), "planner-model"),
        template: Template::default(),
        examples: Examples::default(),
        options: AskOptions {
            stream: false,
            ..AskOptions::default()
        },
    };
    let mut journal = trace.journal(host.manifest());
    let asked = planner.ask(goal, None, &mut journal);
    let outcome = plan_telemetry::within(Some(&trace), asked).await;
    trace.end(&Ended::ask(&outcome, None));
    drop(journal);
    assert_eq!(telemetry.finish(), 0, "every span reached the exporter");
    let spans = caught.spans();
    let text = format!("{spans:?}");
    assert!(!text.contains(SECRET) && !text.contains(goal), "{text}");

    let root = root(&spans);
    assert_eq!(root.name, "invoke_workflow ask");
    assert_eq!(root.parent_span_id, SpanId::INVALID);
    assert_eq!(attr(root, "planrt.status"), Some(&"answered".into()));
    assert_eq!(attr(root, "planrt.tool_calls"), Some(&1i64.into()));
    assert!(attr(root, "planrt.goal.hash").is_some());
    let chat = spans.iter().find(|s| s.name == "chat planner-model");
    let chat = chat.unwrap_or_else(|| panic!("{text}"));
    assert_eq!(chat.parent_span_id, root.span_context.span_id());
    assert_eq!(
        attr(chat, "gen_ai.request.model"),
        Some(&"planner-model".into())
    );
    assert_eq!(attr(chat, "planrt.planner.round"), Some(&0i64.into()));
    assert_eq!(
        attr(chat, "gen_ai.usage.input_tokens"),
        Some(&321i64.into())
    );
    assert_eq!(
        attr(chat, "gen_ai.usage.output_tokens"),
        Some(&45i64.into())
    );
    let tool = spans.iter().find(|s| s.name == "retrieval vector_search");
    let tool = tool.unwrap_or_else(|| panic!("{text}"));
    assert_eq!(tool.parent_span_id, root.span_context.span_id());
    assert!(tool.start_time >= chat.end_time);
    assert_eq!(spans.len(), 3, "{text}");
}
