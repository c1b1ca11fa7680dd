//! The service in this process against hostile and careless clients, over real sockets
//! on loopback: a web page's requests (another `Host` through DNS rebinding, another
//! `Origin`), errors from every layer, empty goals, event streams cut at every point and
//! cancelled calls. (Slow and oversized requests under a file limit, and memory after
//! large plans, are measured on the `planvm serve` process: crates/planvm/tests.)

mod common;

use std::time::Duration;

use common::{Served, Setup, client, code, raw, request, search_taking, serve};
use serde_json::{Value, json};

/// The `host:port` of a service.
fn addr(s: &Served) -> &str {
    s.base.trim_start_matches("http://")
}

const HELLO: &str = r#"[{"seq_no": 0, "type": "assign", "parameters": {"final_answer": "hello"}}]"#;

/// A service off loopback is not started without a token (anyone who can reach it could
/// run plans), nor with a token variable that holds none.
#[test]
fn a_service_off_loopback_needs_its_token() {
    use plan_serve::{TokenError, token_from_env};
    let loopback: std::net::SocketAddr = "127.0.0.1:8910".parse().unwrap();
    let open: std::net::SocketAddr = "0.0.0.0:8910".parse().unwrap();
    assert!(matches!(token_from_env(None, &loopback), Ok(None)));
    let e = token_from_env(None, &open).err().unwrap();
    assert!(matches!(e, TokenError::Needed(_)));
    assert!(e.to_string().contains("not a loopback address"), "{e}");
    let unset = "PLANRT_TEST_TOKEN_THAT_IS_NEVER_SET";
    let e = token_from_env(Some(unset), &loopback).err().unwrap();
    assert!(matches!(&e, TokenError::Unset(name) if name == unset));
    // A set variable's token: PATH is set wherever the tests run.
    let path = std::env::var("PATH").unwrap();
    assert_eq!(token_from_env(Some("PATH"), &open).ok(), Some(Some(path)));
}

#[test]
fn requests_for_another_host_or_from_another_origin_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let setup = Setup {
        allowed_hosts: vec!["plans.internal".into()],
        ..Setup::default()
    };
    let s = serve(&dir.path().join("s.db"), setup);
    let at = addr(&s).to_owned();
    let port = at.rsplit_once(':').unwrap().1.to_owned();
    let post = json!({"plan": HELLO}).to_string();
    // A page of evil.example whose name now resolves to 127.0.0.1: every route refuses.
    for (method, path) in [
        ("GET", "/v1/runs"),
        ("POST", "/v1/runs"),
        ("GET", "/"),
        ("GET", "/assets/app.js"),
        ("GET", "/openapi.json"),
        ("POST", "/mcp"),
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
        ("GET", "/no/such/route"),
    ] {
        let host = format!("evil.example:{port}");
        let body = if method == "POST" { post.as_str() } else { "" };
        let r = raw(&at, &request(method, path, &[("host", &host)], body));
        assert_eq!(r.status, 403, "{method} {path}: {}", r.body);
        assert_eq!(code(&r), "forbidden_origin", "{method} {path}");
    }
    // Its own names, and the one allowed, are served.
    for host in [
        at.clone(),
        format!("localhost:{port}"),
        "plans.internal".to_owned(),
    ] {
        let r = raw(&at, &request("GET", "/v1/runs", &[("host", &host)], ""));
        assert_eq!(r.status, 200, "{host}: {}", r.body);
    }
    // A page of another origin cannot change anything, even with the right Host (a form
    // posted across origins); the service's own pages can, and so can clients that send
    // no Origin.
    for (origin, status) in [
        ("http://evil.example", 403),
        ("null", 403),
        (&format!("http://{at}") as &str, 201),
    ] {
        let headers = [("host", at.as_str()), ("origin", origin)];
        let r = raw(&at, &request("POST", "/v1/runs", &headers, &post));
        assert_eq!(r.status, status, "{origin}: {}", r.body);
    }
    let r = raw(&at, &request("POST", "/v1/runs", &[("host", &at)], &post));
    assert_eq!(r.status, 201, "{}", r.body);
    let listed = raw(&at, &request("GET", "/v1/runs", &[("host", &at)], ""));
    assert_eq!(
        listed.body["runs"].as_array().unwrap().len(),
        2,
        "{}",
        listed.body
    );
}

#[test]
fn errors_are_json_whatever_refuses_the_request() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(&dir.path().join("s.db"), Setup::default());
    let at = addr(&s).to_owned();
    let host = [("host", at.as_str())];
    for (method, path, status, want) in [
        ("DELETE", "/v1/runs", 405, "method_not_allowed"),
        ("OPTIONS", "/v1/runs", 405, "method_not_allowed"),
        ("PUT", "/v1/runs/x/cancel", 405, "method_not_allowed"),
        ("GET", "/v1/runs/%ff", 400, "bad_request"),
        ("GET", "/v1/runs/%ff/events", 400, "bad_request"),
        ("GET", "/assets/nope.js", 404, "not_found"),
        ("GET", "/nowhere", 404, "not_found"),
        ("GET", "/v1/models/gpt-4o", 404, "model_not_found"),
    ] {
        let r = raw(&at, &request(method, path, &host, ""));
        assert_eq!(r.status, status, "{method} {path}: {} {}", r.head, r.body);
        assert_eq!(code(&r), want, "{method} {path}");
        if status == 405 {
            assert!(
                r.head.to_ascii_lowercase().contains("\r\nallow: "),
                "{}",
                r.head
            );
        }
    }
    let r = raw(&at, &request("POST", "/v1/runs", &host, "{"));
    assert_eq!((r.status, code(&r)), (400, "bad_json"), "{}", r.body);
    // The models, in OpenAI's shape.
    let r = raw(&at, &request("GET", "/v1/models", &host, ""));
    assert_eq!(r.status, 200);
    assert_eq!(r.body["object"], "list");
    assert_eq!(r.body["data"][0]["id"], "planrt");
    assert_eq!(r.body["data"][0]["object"], "model");
}

/// A loopback planner (OpenAI's chat API) that counts its requests, and a tools file
/// naming it.
async fn counting_planner() -> (wiremock::MockServer, tempfile::TempDir, std::path::PathBuf) {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": HELLO}}]
        })))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.toml");
    std::fs::write(
        &tools,
        format!(
            "[planner.backend]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\napi_key_env = \"PLANNER_KEY\"\nmax_retries = 0\n",
            server.uri()
        ),
    )
    .unwrap();
    (server, dir, tools)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_goal_is_refused_before_the_planner_is_asked() {
    let (server, dir, tools) = counting_planner().await;
    let setup = Setup {
        tools: Some(tools),
        env: vec![("PLANNER_KEY", "k")],
        ..Setup::default()
    };
    let s = serve(&dir.path().join("s.db"), setup);
    let http = client();
    for goal in ["", "   ", "\n\t"] {
        let res = http
            .post(format!("{}/v1/runs", s.base))
            .json(&json!({"goal": goal}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 400);
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"]["code"], "bad_goal", "{body}");
        let res = http
            .post(format!("{}/v1/chat/completions", s.base))
            .json(&json!({"messages": [{"role": "user", "content": goal}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 400);
    }
    assert!(server.received_requests().await.unwrap().is_empty());
    let listed: Value = http
        .get(format!("{}/v1/runs", s.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["runs"], json!([]), "nothing stored: {listed}");
    // A goal with words is asked.
    let res = http
        .post(format!("{}/v1/runs", s.base))
        .json(&json!({"goal": "greet"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 201);
}

/// Three searches, the last two at once, then the answer.
const SEARCHES: &str = r#"[
 {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "first"}, "output_vars": ["a"]}},
 {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "${a} one"}, "output_vars": ["b"]}},
 {"seq_no": 2, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "${a} two"}, "output_vars": ["c"]}},
 {"seq_no": 3, "type": "assign", "parameters": {"final_answer": "${b} ${c}"}}
]"#;

/// An event: its id, its kind and its data.
type Ev = (String, String, Value);

/// The events of stream `url` (from `last`), until it ends or `max` have come.
async fn events(url: &str, last: Option<&str>, max: usize) -> Vec<Ev> {
    let mut req = client().get(url);
    if let Some(id) = last {
        req = req.header("last-event-id", id);
    }
    let mut res = req.send().await.unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let mut text = String::new();
    let mut out: Vec<Ev> = Vec::new();
    while out.len() < max {
        let chunk = tokio::time::timeout(Duration::from_secs(60), res.chunk())
            .await
            .expect("the stream goes on")
            .unwrap();
        let Some(chunk) = chunk else { break };
        text.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            if !block.contains("data:") {
                continue;
            }
            let field = |name: &str| {
                block
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.trim().to_owned())
                    .unwrap_or_default()
            };
            let data = serde_json::from_str(&field("data:")).unwrap_or(Value::Null);
            out.push((field("id:"), field("event:"), data));
        }
    }
    out.truncate(max);
    out
}

/// What a client keeps of an event: its id and kind, and the step or call it is about.
fn seen(e: &[Ev]) -> Vec<(String, String, Value)> {
    e.iter()
        .map(|(id, kind, d)| (id.clone(), kind.clone(), json!([d["step"], d["phase"]])))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_reconnected_after_any_event_loses_nothing_and_repeats_nothing() {
    let (_server, dir, tools) = search_taking(Duration::from_millis(400)).await;
    let setup = Setup {
        tools: Some(tools),
        ..Setup::default()
    };
    let s = serve(&dir.path().join("s.db"), setup);
    let runs = format!("{}/v1/runs", s.base);
    let http = client();
    let submit = |id: String| {
        let http = http.clone();
        let runs = runs.clone();
        async move {
            let res = http
                .post(&runs)
                .json(&json!({"plan": SEARCHES, "run_id": id}))
                .send()
                .await
                .unwrap();
            assert_eq!(res.status().as_u16(), 201);
        }
    };
    // A finished run: from every event, the rest exactly.
    submit("whole".into()).await;
    let all = events(&format!("{runs}/whole/events"), None, usize::MAX).await;
    let ids: Vec<&str> = all.iter().map(|e| e.0.as_str()).collect();
    let unique: std::collections::HashSet<&&str> = ids.iter().collect();
    assert_eq!(
        unique.len(),
        ids.len(),
        "every event has its own id: {ids:?}"
    );
    assert_eq!(all.last().unwrap().1, "answer", "{all:?}");
    assert_eq!(all.last().unwrap().0, "end");
    let kinds = |k: &str| all.iter().filter(|e| e.1 == k).count();
    assert_eq!(
        (kinds("plan"), kinds("tool_call"), kinds("step")),
        (1, 6, 4),
        "{all:?}"
    );
    for (i, (id, _, _)) in all.iter().enumerate() {
        let rest = events(&format!("{runs}/whole/events"), Some(id), usize::MAX).await;
        assert_eq!(seen(&rest), seen(&all[i + 1..]), "cut after {id}");
    }
    // Live runs, each cut after its k-th event while it goes on, then reconnected.
    let n = all.len() - 1;
    for k in 1..=n {
        submit(format!("live{k}")).await;
    }
    let cut = (1..=n).map(|k| {
        let url = format!("{runs}/live{k}/events");
        async move {
            let first = events(&url, None, k).await;
            let last = first.last().unwrap().0.clone();
            let rest = events(&url, Some(&last), usize::MAX).await;
            (k, first, rest)
        }
    });
    for (k, first, rest) in futures::future::join_all(cut).await {
        let whole = events(&format!("{runs}/live{k}/events"), None, usize::MAX).await;
        let joined: Vec<Ev> = first.into_iter().chain(rest).collect();
        assert_eq!(seen(&joined), seen(&whole), "live run cut after event {k}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_runs_calls_in_flight_end_cancelled() {
    let (_server, dir, tools) = search_taking(Duration::from_secs(30)).await;
    let setup = Setup {
        tools: Some(tools),
        ..Setup::default()
    };
    let s = serve(&dir.path().join("s.db"), setup);
    let runs = format!("{}/v1/runs", s.base);
    let http = client();
    let res = http
        .post(&runs)
        .json(&json!({"plan": SEARCHES, "run_id": "c"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 201);
    let show = || async {
        http.get(format!("{runs}/c"))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };
    let mut shown = show().await;
    for _ in 0..400 {
        if shown["calls"].as_array().is_some_and(|c| !c.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        shown = show().await;
    }
    assert_eq!(shown["calls"][0]["state"], "inflight", "{shown}");
    let res = http.post(format!("{runs}/c/cancel")).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let shown = show().await;
    assert_eq!(shown["run"]["status"], "failed", "{shown}");
    let states: Vec<&Value> = shown["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["state"])
        .collect();
    assert_eq!(states, [&json!("cancelled")], "{shown}");
}
