//! OpenTelemetry export against a real OTLP/HTTP receiver on loopback (its requests
//! decoded with the OTLP protobuf types): a run of 13 tool calls is one trace, the calls'
//! spans under the run's; no key in any exported byte; a collector that is down or hangs
//! changes no answer and costs the run next to nothing.

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
const CALLS: usize = 13;
/// Each tool call's latency: the run takes about `CALLS` times this.
const CALL_MS: u64 = 250;

/// `vector_search` that answers its query with `+` appended and what it was sent as the
/// key (so a key that leaked into an output would show), after `CALL_MS`.
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
        wiremock::ResponseTemplate::new(200)
            .set_body_json(json!({"text": text}))
            .set_delay(Duration::from_millis(CALL_MS))
    }
}

/// 13 calls, each on the last one's answer, so they run one after another.
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
    steps.insert(
        0,
        json!({"seq_no": -1, "type": "reasoning", "parameters": {
            "chain_of_thoughts": "Search, then search for what was found, 13 times.",
            "dependency_analysis": "Each search needs the last one's answer."}}),
    );
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

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a Any> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn text(attrs: &[KeyValue], key: &str) -> Option<String> {
    match attr(attrs, key) {
        Some(Any::StringValue(s)) => Some(s.clone()),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_one_trace_and_a_collector_that_is_down_or_hangs_costs_it_nothing() {
    let tools = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(Echo)
        .mount(&tools)
        .await;
    let collector = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path("/v1/traces"))
        .respond_with(
            wiremock::ResponseTemplate::new(200)
                .insert_header("content-type", "application/x-protobuf"),
        )
        .mount(&collector)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let tools_file = dir.path().join("tools.toml");
    std::fs::write(
        &tools_file,
        format!(
            "[[tool]]\nname = \"vector_search\"\n[tool.backend]\nkind = \"http\"\nurl = \"{}/search\"\n\
             pointer = \"/text\"\napi_key_env = \"TELEMETRY_TOOL_KEY\"\nmax_retries = 0\n",
            tools.uri()
        ),
    )
    .unwrap();
    let plan_file = dir.path().join("chain.json");
    std::fs::write(&plan_file, plan()).unwrap();
    let args = vec![
        "run".to_owned(),
        s(&plan_file),
        "--tools".to_owned(),
        s(&tools_file),
        "--format".to_owned(),
        "json".to_owned(),
    ];
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

    let (plain, _) = run(&[]).await;
    let expected = answer(&plain);
    assert!(
        expected.as_str().unwrap().starts_with("start+"),
        "{expected}"
    );

    // Exported: one trace, the run's span, a span per call under it, no key anywhere.
    let endpoint = collector.uri();
    let (traced, _) = run(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
        ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
    ])
    .await;
    assert_eq!(answer(&traced), expected);
    let requests = collector.received_requests().await.unwrap();
    assert!(
        !requests.is_empty(),
        "nothing was exported: {}",
        traced.stderr
    );
    let (spans, service) = exported(&collector, &[KEY]).await;
    assert_eq!(service.as_deref(), Some("planvm"));
    let roots: Vec<&Span> = spans
        .iter()
        .filter(|s| s.parent_span_id.is_empty())
        .collect();
    assert_eq!(
        roots.len(),
        1,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let root = roots[0];
    assert_eq!(root.name, "invoke_workflow run");
    assert_eq!(
        text(&root.attributes, "planrt.status").as_deref(),
        Some("ok")
    );
    assert_eq!(
        attr(&root.attributes, "planrt.tool_calls"),
        Some(&Any::IntValue(CALLS as i64))
    );
    let calls: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "retrieval vector_search")
        .collect();
    assert_eq!(calls.len(), CALLS);
    assert_eq!(spans.len(), CALLS + 1);
    for c in &calls {
        assert_eq!(c.trace_id, root.trace_id);
        assert_eq!(c.parent_span_id, root.span_id);
        assert_eq!(
            text(&c.attributes, "gen_ai.operation.name").as_deref(),
            Some("retrieval")
        );
        assert_eq!(
            text(&c.attributes, "gen_ai.tool.name").as_deref(),
            Some("vector_search")
        );
        assert_eq!(
            text(&c.attributes, "planrt.tool.effect").as_deref(),
            Some("read")
        );
        assert!(c.end_time_unix_nano - c.start_time_unix_nano >= CALL_MS * 1_000_000);
    }
    let first = calls
        .iter()
        .find(|c| {
            text(&c.attributes, "gen_ai.tool.call.arguments").is_some_and(|a| a.contains("start"))
        })
        .unwrap();
    let result = text(&first.attributes, "gen_ai.tool.call.result").unwrap();
    assert!(result.starts_with("start+"), "{result}");
    // The tool server was told the run's trace: its own spans can join it.
    let parent = format!("00-{}-{}-01", hex(&root.trace_id), hex(&root.span_id));
    let told = tools
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| {
            r.headers
                .get("traceparent")
                .is_some_and(|v| v.to_str().unwrap_or_default() == parent)
        })
        .count();
    assert_eq!(told, CALLS, "{parent}");

    // A collector that is down (nothing listens), and one that takes the connection and
    // never answers: the same answer, each in about the time of a run without them.
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
    let mut base = Duration::MAX;
    let mut worst = Duration::ZERO;
    for _ in 0..2 {
        base = base.min(run(&[]).await.1);
        for url in [&down, &hung_url] {
            let (out, took) = run(&[("OTEL_EXPORTER_OTLP_ENDPOINT", url)]).await;
            assert_eq!(answer(&out), expected, "{}", out.stderr);
            assert!(
                out.stderr
                    .contains("spans did not reach the OpenTelemetry collector"),
                "{}",
                out.stderr
            );
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

/// `ask`: the planner's call is a `chat {model}` span beside the run's tool calls, all
/// under the `ask`'s span; the goal goes out only as a hash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_traces_its_planner_call_under_the_same_workflow() {
    let server = wiremock::MockServer::start().await;
    let plan = json!([
        {"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "Search.", "dependency_analysis": "None."}},
        {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "vector_search",
         "tool_params": {"query": "start"}, "output_vars": ["final_answer"]}}
    ]);
    wiremock::Mock::given(wiremock::matchers::path("/v1/chat/completions"))
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_json(json!({
            "id": "x", "object": "chat.completion", "created": 0, "model": "planner-model",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": format!("```json\n{plan}\n```")}}],
            "usage": {"prompt_tokens": 321, "completion_tokens": 45}
        })))
        .mount(&server)
        .await;
    wiremock::Mock::given(wiremock::matchers::path("/search"))
        .respond_with(Echo)
        .mount(&server)
        .await;
    wiremock::Mock::given(wiremock::matchers::path("/v1/traces"))
        .respond_with(wiremock::ResponseTemplate::new(200))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.toml");
    std::fs::write(
        &tools,
        format!(
            "[planner.backend]\nkind = \"openai\"\nbase_url = \"{0}/v1\"\nmodel = \"planner-model\"\n\
             api_key_env = \"TELEMETRY_TOOL_KEY\"\nmax_retries = 0\n\
             [[tool]]\nname = \"vector_search\"\n[tool.backend]\nkind = \"http\"\nurl = \"{0}/search\"\npointer = \"/text\"\n",
            server.uri()
        ),
    )
    .unwrap();
    let goal = "What does the first search find?";
    let out = planvm(
        vec![
            "ask".into(),
            goal.into(),
            "--tools".into(),
            s(&tools),
            "--no-stream".into(),
        ],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &server.uri()),
            ("OTEL_SERVICE_NAME", "my-agents"),
            ("TELEMETRY_TOOL_KEY", KEY),
        ],
    )
    .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let (spans, service) = exported(&server, &[KEY, goal]).await;
    assert_eq!(service.as_deref(), Some("my-agents"));
    let root = spans.iter().find(|s| s.parent_span_id.is_empty()).unwrap();
    assert_eq!(root.name, "invoke_workflow ask");
    assert_eq!(
        text(&root.attributes, "planrt.status").as_deref(),
        Some("answered")
    );
    assert!(text(&root.attributes, "planrt.goal.hash").is_some());
    let chat = spans
        .iter()
        .find(|s| s.name == "chat planner-model")
        .unwrap();
    assert_eq!(chat.parent_span_id, root.span_id);
    assert_eq!(
        text(&chat.attributes, "gen_ai.request.model").as_deref(),
        Some("planner-model")
    );
    assert_eq!(
        attr(&chat.attributes, "planrt.planner.round"),
        Some(&Any::IntValue(0))
    );
    assert_eq!(
        attr(&chat.attributes, "gen_ai.usage.input_tokens"),
        Some(&Any::IntValue(321))
    );
    assert_eq!(
        attr(&chat.attributes, "gen_ai.usage.output_tokens"),
        Some(&Any::IntValue(45))
    );
    let tool = spans
        .iter()
        .find(|s| s.name == "retrieval vector_search")
        .unwrap();
    assert_eq!(tool.parent_span_id, root.span_id);
    assert!(tool.start_time_unix_nano >= chat.end_time_unix_nano);
    assert_eq!(spans.len(), 3);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A call retried after a 503 is one span with the failed attempt as an event (and the
/// store keeps its attempts); a tool not declared as retrieval is `execute_tool`, one
/// declared so is `retrieval`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_are_events_of_their_calls_span_and_retrieval_tools_are_retrieval_spans() {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::path("/fetch"))
        .respond_with(wiremock::ResponseTemplate::new(503).insert_header("retry-after", "0"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    wiremock::Mock::given(wiremock::matchers::path("/fetch"))
        .respond_with(Echo)
        .mount(&server)
        .await;
    wiremock::Mock::given(wiremock::matchers::path("/docs"))
        .respond_with(Echo)
        .mount(&server)
        .await;
    wiremock::Mock::given(wiremock::matchers::path("/v1/traces"))
        .respond_with(wiremock::ResponseTemplate::new(200))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.toml");
    let tool = |name: &str, retrieval: bool| {
        format!(
            "[[tool]]\nname = \"{name}\"\nretrieval = {retrieval}\n[[tool.params]]\nname = \"query\"\n\
             type = \"string\"\n[tool.backend]\nkind = \"http\"\nurl = \"{}/{name}\"\npointer = \"/text\"\n",
            server.uri()
        )
    };
    std::fs::write(&tools, tool("fetch", false) + &tool("docs", true)).unwrap();
    let plan = dir.path().join("plan.json");
    let steps = json!([
        {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "docs",
         "tool_params": {"query": "start"}, "output_vars": ["d"]}},
        {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "fetch",
         "tool_params": {"query": "then"}, "output_vars": ["final_answer"]}}
    ]);
    std::fs::write(&plan, steps.to_string()).unwrap();
    let db = dir.path().join("s.db");
    let rec = s(&dir.path().join("rec.jsonl"));
    let args: Vec<String> = ["run", &s(&plan), "--tools", &s(&tools), "--store", &s(&db)]
        .into_iter()
        .chain(["--run-id", "r1", "--record", &rec])
        .map(str::to_owned)
        .collect();
    let out = planvm(args, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &server.uri())]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let spans = exported(&server, &[]).await.0;
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert!(names.contains(&"retrieval docs"), "{names:?}");
    let fetch = spans
        .iter()
        .find(|s| s.name == "execute_tool fetch")
        .unwrap_or_else(|| panic!("{names:?}"));
    assert_eq!(
        attr(&fetch.attributes, "planrt.call.attempts"),
        Some(&Any::IntValue(2))
    );
    assert_eq!(fetch.events.len(), 1, "{:?}", fetch.events);
    let retry = &fetch.events[0];
    assert_eq!(retry.name, "planrt.retry");
    assert_eq!(
        text(&retry.attributes, "error.type").as_deref(),
        Some("transport")
    );
    assert!(retry.time_unix_nano >= fetch.start_time_unix_nano);
    assert!(retry.time_unix_nano <= fetch.end_time_unix_nano);

    let shown = planvm(
        ["runs", "show", "r1", "--store", &s(&db), "--format", "json"]
            .map(str::to_owned)
            .to_vec(),
        &[],
    )
    .await;
    let shown: Value = serde_json::from_str(&shown.stdout).unwrap();
    let attempts: Vec<&Value> = shown["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["attempts"])
        .collect();
    assert_eq!(attempts, [&Value::Null, &json!(2)], "{shown}");

    // Replayed: each call's span says a cassette answered it.
    assert!(
        spans
            .iter()
            .all(|s| attr(&s.attributes, "planrt.call.replayed").is_none())
    );
    let args = ["run", &s(&plan), "--tools", &s(&tools), "--replay", &rec];
    let out = planvm(
        args.map(str::to_owned).to_vec(),
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &server.uri())],
    )
    .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let spans = exported(&server, &[]).await.0;
    let replayed = spans
        .iter()
        .filter(|s| attr(&s.attributes, "planrt.call.replayed") == Some(&Any::BoolValue(true)))
        .count();
    assert_eq!(replayed, 2, "{spans:?}");
}

/// A question to a person: the run that stops at it ends its span waiting; the run that
/// goes on with the answer has a span from when it was asked to the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_to_a_person_is_a_span_from_when_it_was_asked() {
    let collector = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::path("/v1/traces"))
        .respond_with(wiremock::ResponseTemplate::new(200))
        .mount(&collector)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    let steps = json!([
        {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "ask_user",
         "tool_params": {"question": "Which region?"}, "output_vars": ["region"]}},
        {"seq_no": 1, "type": "assign", "parameters": {"final_answer": "sales in ${region}"}}
    ]);
    std::fs::write(&plan, steps.to_string()).unwrap();
    let db = s(&dir.path().join("s.db"));
    let otel = [("OTEL_EXPORTER_OTLP_ENDPOINT", collector.uri())];
    let otel: Vec<(&str, &str)> = otel.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let asked = planvm(
        args(&["run", &s(&plan), "--store", &db, "--run-id", "q"]),
        &otel,
    )
    .await;
    assert_eq!(asked.code, Some(3), "{}", asked.stderr);
    let wait = Duration::from_millis(400);
    tokio::time::sleep(wait).await;
    let answered = planvm(
        args(&["resume", "q", "--store", &db, "--input", "EU"]),
        &otel,
    )
    .await;
    assert_eq!(answered.code, Some(0), "{}", answered.stderr);
    assert!(
        answered.stdout.contains("sales in EU"),
        "{}",
        answered.stdout
    );

    let spans = exported(&collector, &[]).await.0;
    let questions: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "execute_tool ask_user")
        .collect();
    assert_eq!(questions.len(), 2, "{spans:?}");
    let root_of = |span: &Span| {
        spans
            .iter()
            .find(|r| r.span_id == span.parent_span_id)
            .map(|r| r.name.clone())
    };
    let (stopped, went_on): (Vec<&&Span>, Vec<&&Span>) = questions
        .iter()
        .partition(|s| root_of(s).as_deref() == Some("invoke_workflow run"));
    assert_eq!(
        root_of(went_on[0]).as_deref(),
        Some("invoke_workflow resume")
    );
    assert_eq!(
        attr(&stopped[0].attributes, "planrt.call.waits_for_person"),
        Some(&Any::BoolValue(true))
    );
    let waited = went_on[0].end_time_unix_nano - went_on[0].start_time_unix_nano;
    assert!(
        waited >= wait.as_nanos() as u64,
        "the answer's span lasts from the question: {waited} ns"
    );
    // NB: from when the question was on record (in whole milliseconds), which is within
    // moments of the stopped run's span.
    let asked_at = went_on[0].start_time_unix_nano;
    assert!(asked_at + 1_000_000 >= stopped[0].start_time_unix_nano);
    assert!(asked_at <= stopped[0].end_time_unix_nano + 100_000_000);
}

/// `planvm batch`: each run is a trace of its own, its calls under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_run_of_a_batch_is_a_trace() {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::path("/search"))
        .respond_with(Echo)
        .mount(&server)
        .await;
    wiremock::Mock::given(wiremock::matchers::path("/v1/traces"))
        .respond_with(wiremock::ResponseTemplate::new(200))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.toml");
    std::fs::write(
        &tools,
        format!(
            "[[tool]]\nname = \"vector_search\"\n[tool.backend]\nkind = \"http\"\nurl = \"{}/search\"\npointer = \"/text\"\n",
            server.uri()
        ),
    )
    .unwrap();
    let plans = dir.path().join("plans");
    std::fs::create_dir(&plans).unwrap();
    for name in ["a", "b", "c"] {
        let plan = json!([
            {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "vector_search",
             "tool_params": {"query": name}, "output_vars": ["final_answer"]}}
        ]);
        std::fs::write(plans.join(format!("{name}.json")), plan.to_string()).unwrap();
    }
    let args = ["batch", &s(&plans), "--tools", &s(&tools)].map(str::to_owned);
    let out = planvm(
        args.to_vec(),
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &server.uri())],
    )
    .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let spans = exported(&server, &[]).await.0;
    let roots: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "invoke_workflow batch")
        .collect();
    assert_eq!(roots.len(), 3, "{spans:?}");
    let mut traces: Vec<&Vec<u8>> = roots.iter().map(|r| &r.trace_id).collect();
    traces.sort();
    traces.dedup();
    assert_eq!(traces.len(), 3, "a trace per run");
    for root in roots {
        assert_eq!(
            text(&root.attributes, "planrt.status").as_deref(),
            Some("ok")
        );
        let calls = spans
            .iter()
            .filter(|s| s.parent_span_id == root.span_id && s.name == "retrieval vector_search")
            .count();
        assert_eq!(calls, 1);
    }
}

/// `planvm serve`: a run submitted with a `traceparent` is traced as that caller's child,
/// and the response names the trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_continues_a_callers_trace_and_names_it() {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::path("/search"))
        .respond_with(Echo)
        .mount(&server)
        .await;
    wiremock::Mock::given(wiremock::matchers::path("/v1/traces"))
        .respond_with(wiremock::ResponseTemplate::new(200))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.toml");
    std::fs::write(
        &tools,
        format!(
            "[[tool]]\nname = \"vector_search\"\n[tool.backend]\nkind = \"http\"\nurl = \"{}/search\"\npointer = \"/text\"\n",
            server.uri()
        ),
    )
    .unwrap();
    let served = common::serve_with(
        &dir.path().join("s.db"),
        &["--tools", &s(&tools)],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &server.uri()),
            // NB: a service sends its spans every 5 s by default.
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
    let plan = json!([
        {"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "Search.", "dependency_analysis": "None."}},
        {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "vector_search",
         "tool_params": {"query": "start"}, "output_vars": ["final_answer"]}}
    ]);
    let caller = "0af7651916cd43dd8448eb211c80319c";
    plan_host::install_crypto();
    let res = reqwest::Client::new()
        .post(format!("{}/v1/runs", served.base))
        .header("traceparent", format!("00-{caller}-b7ad6b7169203331-01"))
        .json(&json!({"plan": plan, "run_id": "t1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 201);
    assert_eq!(
        res.headers()["x-trace-id"].to_str().unwrap(),
        caller,
        "the response names the caller's trace"
    );
    let mut spans: Vec<Span> = Vec::new();
    for _ in 0..200 {
        spans = exported(&server, &[]).await.0;
        if spans.iter().any(|s| s.name == "invoke_workflow run") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let root = spans
        .iter()
        .find(|s| s.name == "invoke_workflow run")
        .expect("the run's span was exported");
    assert_eq!(hex(&root.trace_id), caller);
    assert_eq!(hex(&root.parent_span_id), "b7ad6b7169203331");
    assert_eq!(
        text(&root.attributes, "planrt.status").as_deref(),
        Some("ok")
    );
    assert_eq!(
        text(&root.attributes, "planrt.run.id").as_deref(),
        Some("t1")
    );
    let tool = spans
        .iter()
        .find(|s| s.name == "retrieval vector_search")
        .unwrap();
    assert_eq!(tool.parent_span_id, root.span_id);
    assert_eq!(hex(&tool.trace_id), caller);
}

/// `planvm eval`: each case is a trace of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_case_of_an_evaluation_is_a_trace() {
    let collector = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::path("/v1/traces"))
        .respond_with(wiremock::ResponseTemplate::new(200))
        .mount(&collector)
        .await;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = planvm(
        vec![
            "eval".into(),
            s(&root.join("examples/eval/tidb.jsonl")),
            "--tools".into(),
            s(&root.join("examples/ask.toml")),
            "--replay".into(),
            s(&root.join("examples/eval/recordings")),
            "--format".into(),
            "json".into(),
        ],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.uri())],
    )
    .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let (spans, _) = exported(&collector, &[]).await;
    let cases: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "invoke_workflow eval")
        .collect();
    assert_eq!(cases.len(), 3);
    let mut traces: Vec<&[u8]> = cases.iter().map(|c| c.trace_id.as_slice()).collect();
    traces.dedup();
    assert_eq!(traces.len(), 3, "a trace per case");
    for c in &cases {
        assert_eq!(
            text(&c.attributes, "planrt.status").as_deref(),
            Some("answered")
        );
        let children = spans.iter().filter(|s| s.parent_span_id == c.span_id);
        assert!(
            children.clone().any(|s| s.name == "chat replay"),
            "the planner's call is in the case's trace"
        );
        assert!(children.clone().any(|s| s.name.starts_with("retrieval ")));
    }
}
