//! `planvm` exporting OpenTelemetry as its environment configures it (`OTEL_*`), to a
//! real OTLP/HTTP collector on loopback (its requests decoded with the OTLP protobuf
//! types): a run is one trace under the service the environment names, with no key in any
//! byte sent; a collector that is down or hangs changes no answer and costs the run next
//! to nothing. The spans themselves are tested in-process: a run's, an ask's and a
//! batch's (crates/plan-telemetry/tests, crates/plan-runs/tests/telemetry.rs), the
//! service's (crates/plan-serve/tests/telemetry.rs), an evaluation's
//! (crates/plan-eval/tests/eval.rs).

mod common;

use std::time::{Duration, Instant};

use common::{Out, planvm, s};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{Value, json};

const KEY: &str = "sk-telemetry-secret-0123456789";
const CALLS: usize = 3;

/// `vector_search` that answers its query with `+` appended and what it was sent as the
/// key (so a key that leaked into an output would show).
struct Echo;

impl wiremock::Respond for Echo {
    fn respond(&self, req: &wiremock::Request) -> wiremock::ResponseTemplate {
        let args: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let auth = req
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let query = args["query"].as_str().unwrap_or_default();
        let text = if query == "start" {
            format!("start+ ({auth})")
        } else {
            format!("{}+", query.split(' ').next().unwrap_or_default())
        };
        wiremock::ResponseTemplate::new(200).set_body_json(json!({"text": text}))
    }
}

/// `CALLS` calls, each on the last one's answer, so they run one after another.
fn plan() -> String {
    let mut steps: Vec<Value> = (0..CALLS)
        .map(|i| {
            let query = if i == 0 {
                "start".to_owned()
            } else {
                format!("${{r{}}}", i - 1)
            };
            json!({"seq_no": i, "type": "calling", "parameters": {"tool_name": "vector_search",
                   "tool_params": {"query": query}, "output_vars": [format!("r{i}")]}})
        })
        .collect();
    steps.push(json!({"seq_no": CALLS, "type": "assign",
                      "parameters": {"final_answer": format!("${{r{}}}", CALLS - 1)}}));
    Value::Array(steps).to_string()
}

/// What the collector at `server` received (`/v1/traces`, decoded): the spans, and the
/// service they said they came from. No request holds any of `secrets`.
async fn exported(server: &wiremock::MockServer, secrets: &[&str]) -> (Vec<Span>, Option<String>) {
    let mut spans = Vec::new();
    let mut service = None;
    for r in server.received_requests().await.unwrap() {
        if r.url.path() != "/v1/traces" {
            continue;
        }
        let body = String::from_utf8_lossy(&r.body);
        for secret in secrets {
            assert!(!body.contains(secret), "exported {secret}: {body}");
        }
        let decoded = ExportTraceServiceRequest::decode(r.body.as_slice()).unwrap();
        for rs in decoded.resource_spans {
            if let Some(res) = &rs.resource {
                service = text(&res.attributes, "service.name");
            }
            spans.extend(rs.scope_spans.into_iter().flat_map(|ss| ss.spans));
        }
    }
    (spans, service)
}

fn text(attrs: &[KeyValue], key: &str) -> Option<String> {
    let value = attrs.iter().find(|kv| kv.key == key)?.value.as_ref()?;
    match &value.value {
        Some(Any::StringValue(s)) => Some(s.clone()),
        _ => None,
    }
}

/// A collector on loopback that takes OTLP/HTTP protobuf.
async fn collector() -> wiremock::MockServer {
    let collector = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path("/v1/traces"))
        .respond_with(
            wiremock::ResponseTemplate::new(200)
                .insert_header("content-type", "application/x-protobuf"),
        )
        .mount(&collector)
        .await;
    collector
}

/// `planvm run`'s arguments for [`plan`] in `dir`, its tool served by `tools` (its key
/// read from `TELEMETRY_TOOL_KEY`).
fn chain(dir: &std::path::Path, tools: &wiremock::MockServer) -> Vec<String> {
    let tools_file = dir.join("tools.toml");
    std::fs::write(
        &tools_file,
        format!(
            "[[tool]]\nname = \"vector_search\"\n[tool.backend]\nkind = \"http\"\nurl = \"{}/search\"\n\
             pointer = \"/text\"\napi_key_env = \"TELEMETRY_TOOL_KEY\"\nmax_retries = 0\n",
            tools.uri()
        ),
    )
    .unwrap();
    let plan_file = dir.join("chain.json");
    std::fs::write(&plan_file, plan()).unwrap();
    let args = ["run", &s(&plan_file), "--tools", &s(&tools_file)];
    args.into_iter()
        .chain(["--format", "json"])
        .map(str::to_owned)
        .collect()
}

/// Collectors that fail: one down (nothing listens), one that takes the connection and
/// never answers.
fn bad_collectors() -> [String; 2] {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let down = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let hung = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hung_url = format!("http://{}", hung.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in hung.incoming() {
            held.push(conn);
        }
    });
    [down, hung_url]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_one_trace_and_a_collector_that_is_down_or_hangs_costs_it_nothing() {
    let tools = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(Echo)
        .mount(&tools)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let args = chain(dir.path(), &tools);
    let run = async |env: &[(&str, &str)]| -> (Out, Duration) {
        let mut env = env.to_vec();
        env.push(("TELEMETRY_TOOL_KEY", KEY));
        let start = Instant::now();
        let out = planvm(args.clone(), &env).await;
        (out, start.elapsed())
    };
    let answer = |out: &Out| -> Value {
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        serde_json::from_str::<Value>(&out.stdout).unwrap()["final_answer"].clone()
    };
    let expected = answer(&run(&[]).await.0);
    assert!(
        expected.as_str().unwrap().starts_with("start+"),
        "{expected}"
    );

    // Exported as the environment says, with the calls' text: one trace, the run's span
    // and a span per call under it, under the service it names, no key in any byte.
    let collector = collector().await;
    let (traced, _) = run(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.uri()),
        ("OTEL_SERVICE_NAME", "my-agents"),
        ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
    ])
    .await;
    assert_eq!(answer(&traced), expected);
    let (spans, service) = exported(&collector, &[KEY]).await;
    assert_eq!(service.as_deref(), Some("my-agents"));
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    let root = spans.iter().find(|s| s.parent_span_id.is_empty());
    let root = root.unwrap_or_else(|| panic!("{names:?} {}", traced.stderr));
    assert_eq!(root.name, "invoke_workflow run");
    let status = text(&root.attributes, "planrt.status");
    assert_eq!(status.as_deref(), Some("ok"));
    assert_eq!(spans.len(), CALLS + 1, "{names:?}");
    for call in spans.iter().filter(|s| s.span_id != root.span_id) {
        assert_eq!(call.name, "retrieval vector_search");
        let under = (&call.trace_id, &call.parent_span_id);
        assert_eq!(under, (&root.trace_id, &root.span_id));
    }

    // A collector that is down or hangs: the same answer, each in about the time of a
    // run without one.
    let bad = bad_collectors();
    let mut base = Duration::MAX;
    let mut worst = Duration::ZERO;
    for _ in 0..2 {
        base = base.min(run(&[]).await.1);
        for url in &bad {
            let (out, took) = run(&[("OTEL_EXPORTER_OTLP_ENDPOINT", url)]).await;
            assert_eq!(answer(&out), expected, "{}", out.stderr);
            let lost = "spans did not reach the OpenTelemetry collector";
            assert!(out.stderr.contains(lost), "{}", out.stderr);
            worst = worst.max(took);
        }
    }
    // NB: the slowest run with a bad collector against the fastest without one. A bad
    // collector costs a command its grace for the last spans (3% of its time, at most
    // 5 s), never the exporter's own 10 s timeout for a batch or its connect timeout per
    // span: the bound is far above the grace, so that a loaded machine (runs twice as
    // slow, seconds of spawning) does not fail it, and below what either of those adds.
    assert!(
        worst < base * 2 + Duration::from_secs(6),
        "{worst:?} with a bad collector, {base:?} without"
    );
}
