//! The engine's runs traced in this process, their spans kept in memory: each run of a batch a trace of its own; a question to a person a span from
//! when it was asked, across the run that stops at it and the run that goes on with the
//! answer; a call retried after a 503 one span with the failed attempt as an event (and
//! its attempts in the store), a tool not declared as retrieval `execute_tool`, and each
//! call replayed from the run's cassette said so. Tools are HTTP servers on loopback.

mod common;

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use plan_host::{Host, HostOptions, RunReport, RunStatus, Tracer};
use plan_manifest::Manifest;
use plan_runs::StoreAt;
use plan_runs::batch::{Batch, name_runs, scan_dir};
use plan_store::Durability;
use plan_telemetry::opentelemetry;
use plan_telemetry::opentelemetry_sdk::trace::SpanData;
use plan_telemetry::{Ended, Kept, Telemetry, Trace, Workflow};
use serde_json::{Value, json};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Telemetry for `host`'s runs, and what it will have exported.
fn exporting(host: &Host) -> (Telemetry, Kept) {
    Telemetry::in_memory(host.redactor().clone(), false)
}

/// Every span `telemetry` exported, once it has sent them all.
fn exported(telemetry: &Telemetry, kept: &Kept) -> Vec<SpanData> {
    assert_eq!(telemetry.finish(), 0, "every span reached the exporter");
    kept.spans()
}

fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a opentelemetry::Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

/// Answers a call with its query and `+` as `{"text": ...}`.
struct Echo;

impl Respond for Echo {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let args: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let query = args["query"].as_str().unwrap_or_default();
        ResponseTemplate::new(200).set_body_json(json!({"text": format!("{query}+")}))
    }
}

/// A tools file of `tools` (name, whether it retrieves), each taking a `query` and served
/// by `server` at `/<name>`.
fn http_tools(server: &MockServer, tools: &[(&str, bool)]) -> Manifest {
    let text: String = tools
        .iter()
        .map(|(name, retrieval)| {
            format!(
                "[[tool]]\nname = \"{name}\"\nretrieval = {retrieval}\n[[tool.params]]\n\
                 name = \"query\"\ntype = \"string\"\n[tool.backend]\nkind = \"http\"\n\
                 url = \"{}/{name}\"\npointer = \"/text\"\n",
                server.uri()
            )
        })
        .collect();
    Manifest::from_toml_str(&text, "tools.toml").unwrap()
}

fn at(dir: &tempfile::TempDir) -> StoreAt {
    StoreAt::new(dir.path().join("s.db"), Durability::Normal)
}

fn no_warning(e: &plan_runs::Error) {
    panic!("the lease could not be renewed: {e}");
}

/// A `command`'s trace of a run on `host`, and the journal that turns its calls into
/// spans, as `planvm` sets them up.
fn traced(telemetry: &Telemetry, command: &str, host: &Host) -> (Trace, Tracer) {
    let workflow = Workflow {
        command,
        plan: None,
        goal: None,
        run_id: None,
    };
    let trace = telemetry.start(&workflow, None);
    let mut tracer = Tracer::none();
    tracer.also(Box::new(trace.journal(host.manifest())));
    (trace, tracer)
}

/// `plan` run on `host` as `planvm run` does (stored at `at` as `id` when given), traced
/// by `telemetry`: its report.
async fn run(
    telemetry: &Telemetry,
    host: &Host,
    plan: &str,
    (at, id): (Option<&StoreAt>, &str),
) -> RunReport {
    let (trace, mut tracer) = traced(telemetry, "run", host);
    let started = common::start_plan(host, plan, (at, id), &mut tracer);
    let report = plan_telemetry::within(Some(&trace), started).await;
    trace.end(&Ended::run(&report, at.map(|_| id)));
    report
}

/// A batch: each run is a trace of its own, its call under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_run_of_a_batch_is_a_trace() {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::path("/vector_search"))
        .respond_with(Echo)
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    for name in ["a", "b", "c"] {
        let plan = json!([
            {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "vector_search",
             "tool_params": {"query": name}, "output_vars": ["final_answer"]}}
        ]);
        let file = dir.path().join(format!("{name}.json"));
        std::fs::write(file, plan.to_string()).unwrap();
    }
    let manifest = http_tools(&server, &[("vector_search", true)]);
    let host = Host::new(manifest.clone(), HostOptions::default()).unwrap();
    let (telemetry, caught) = exporting(&host);
    let batch = Batch {
        host: Arc::new(host),
        manifest,
        host_options: HostOptions::default(),
        limits: plan_vm::Limits::default(),
        vars: Vec::new(),
        replay: None,
        record_dir: None,
        trace_dir: None,
        jobs: 3,
        telemetry: Some(Arc::new(telemetry)),
    };
    let mut jobs = scan_dir(dir.path(), true).unwrap();
    name_runs(&mut jobs);
    let tally = plan_runs::batch::run(&batch, None, jobs, &mut |_| {}).await;
    assert_eq!((tally.runs, tally.ok), (3, 3));

    let spans = exported(batch.telemetry.as_ref().unwrap(), &caught);
    let roots: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.name == "invoke_workflow batch")
        .collect();
    assert_eq!(roots.len(), 3, "{spans:?}");
    let traces: HashSet<_> = roots.iter().map(|r| r.span_context.trace_id()).collect();
    assert_eq!(traces.len(), 3, "a trace per run");
    for root in roots {
        assert_eq!(attr(root, "planrt.status"), Some(&"ok".into()));
        let calls = spans.iter().filter(|s| {
            s.parent_span_id == root.span_context.span_id() && s.name == "retrieval vector_search"
        });
        assert_eq!(calls.count(), 1);
    }
}

/// A question to a person: the run that stops at it ends its span waiting; the run that
/// goes on with the answer (resumed by id) has a span from when it was asked to the
/// answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_to_a_person_is_a_span_from_when_it_was_asked() {
    let dir = tempfile::tempdir().unwrap();
    let host = Host::new(Manifest::builtin(), HostOptions::default()).unwrap();
    let (telemetry, caught) = exporting(&host);
    let plan = json!([
        {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "ask_user",
         "tool_params": {"question": "Which region?"}, "output_vars": ["region"]}},
        {"seq_no": 1, "type": "assign", "parameters": {"final_answer": "sales in ${region}"}}
    ]);
    let asked = run(&telemetry, &host, &plan.to_string(), (Some(&at(&dir)), "q")).await;
    assert_eq!(asked.status, RunStatus::NeedsInput, "{asked:?}");
    let wait = Duration::from_millis(400);
    tokio::time::sleep(wait).await;

    let answered = plan_runs::ResumeRequest {
        input: Some("EU"),
        ..plan_runs::ResumeRequest::new("q")
    };
    let Ok(plan_runs::Resume::Ready(ready)) = plan_runs::resume(&at(&dir), answered) else {
        panic!("a waiting run takes an answer");
    };
    let claimed = ready.claim(no_warning).unwrap();
    let (trace, mut tracer) = traced(&telemetry, "resume", &host);
    let answered = plan_telemetry::within(Some(&trace), claimed.go(&host, &mut tracer)).await;
    trace.end(&Ended::run(&answered, Some("q")));
    assert_eq!(answered.final_answer, json!("sales in EU"), "{answered:?}");

    let spans = exported(&telemetry, &caught);
    let questions: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.name == "execute_tool ask_user")
        .collect();
    assert_eq!(questions.len(), 2, "{spans:?}");
    let root_of = |span: &SpanData| {
        spans
            .iter()
            .find(|r| r.span_context.span_id() == span.parent_span_id)
            .map(|r| r.name.to_string())
    };
    let (stopped, went_on): (Vec<&SpanData>, Vec<&SpanData>) = questions
        .iter()
        .partition(|s| root_of(s).as_deref() == Some("invoke_workflow run"));
    assert_eq!(
        root_of(went_on[0]).as_deref(),
        Some("invoke_workflow resume")
    );
    assert_eq!(
        attr(stopped[0], "planrt.call.waits_for_person"),
        Some(&true.into())
    );
    let span = went_on[0];
    let waited = span
        .end_time
        .duration_since(span.start_time)
        .unwrap_or_default();
    assert!(
        waited >= wait,
        "the answer's span lasts from the question: {waited:?}"
    );
    // NB: from when the question was on record (in whole milliseconds), which is within
    // moments of the stopped run's span.
    let asked_at = went_on[0].start_time;
    assert!(asked_at + Duration::from_millis(1) >= stopped[0].start_time);
    assert!(asked_at <= stopped[0].end_time + Duration::from_millis(100));
}

/// A call retried after a 503 is one span with the failed attempt as an event (and the
/// store keeps its attempts); a tool not declared as retrieval is `execute_tool`, one
/// declared so is `retrieval`; calls replayed from the run's cassette say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_are_events_of_their_calls_span_and_retrieval_tools_are_retrieval_spans() {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::path("/fetch"))
        .respond_with(ResponseTemplate::new(503).insert_header("retry-after", "0"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    for tool in ["/fetch", "/docs"] {
        Mock::given(wiremock::matchers::path(tool))
            .respond_with(Echo)
            .mount(&server)
            .await;
    }
    let manifest = http_tools(&server, &[("fetch", false), ("docs", true)]);
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("rec.jsonl");
    let plan = json!([
        {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "docs",
         "tool_params": {"query": "start"}, "output_vars": ["d"]}},
        {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "fetch",
         "tool_params": {"query": "then"}, "output_vars": ["final_answer"]}}
    ])
    .to_string();
    let host = with_cassette(&manifest, (None, Some(&rec)));
    let (telemetry, caught) = exporting(&host);
    let report = run(&telemetry, &host, &plan, (Some(&at(&dir)), "r1")).await;
    assert!(report.is_ok(), "{report:?}");
    let spans = exported(&telemetry, &caught);
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
    assert!(names.contains(&"retrieval docs"), "{names:?}");
    let fetch = spans
        .iter()
        .find(|s| s.name == "execute_tool fetch")
        .unwrap_or_else(|| panic!("{names:?}"));
    assert_eq!(attr(fetch, "planrt.call.attempts"), Some(&2i64.into()));
    assert_eq!(fetch.events.len(), 1, "{:?}", fetch.events);
    let retry = &fetch.events[0];
    assert_eq!(retry.name, "planrt.retry");
    let kind = retry
        .attributes
        .iter()
        .find(|kv| kv.key.as_str() == "error.type");
    assert_eq!(kind.map(|kv| kv.value.as_str()), Some("transport".into()));
    assert!(retry.timestamp >= fetch.start_time);
    assert!(retry.timestamp <= fetch.end_time);

    let store = plan_runs::open::open(
        &dir.path().join("s.db"),
        Durability::Normal,
        plan_runs::open::Access::Existing,
    )
    .unwrap();
    let shown = plan_runs::read::show(&store, "r1").unwrap();
    let attempts: Vec<Option<u32>> = shown.calls.iter().map(|c| c.attempts).collect();
    assert_eq!(attempts, [None, Some(2)], "{:?}", shown.calls);

    // Replayed: each call's span says a cassette answered it.
    let replayed_attr = |s: &SpanData| attr(s, "planrt.call.replayed").cloned();
    assert!(spans.iter().all(|s| replayed_attr(s).is_none()));
    let host = with_cassette(&manifest, (Some(&rec), None));
    let (telemetry, caught) = exporting(&host);
    let report = run(&telemetry, &host, &plan, (None, "r2")).await;
    assert!(report.is_ok(), "{report:?}");
    let spans = exported(&telemetry, &caught);
    let replayed = spans
        .iter()
        .filter(|s| replayed_attr(s) == Some(true.into()))
        .count();
    assert_eq!(replayed, 2, "{spans:?}");
}

/// A host of `manifest` replaying and recording the cassettes given.
fn with_cassette(manifest: &Manifest, (replay, record): (Option<&Path>, Option<&Path>)) -> Host {
    let options = HostOptions {
        replay: replay.map(Path::to_owned),
        record: record.map(Path::to_owned),
        ..HostOptions::default()
    };
    Host::new(manifest.clone(), options).unwrap()
}
