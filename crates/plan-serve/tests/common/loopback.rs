//! Loopback servers and an HTTP client that the service's tests and the binary's share:
//! tools that answer after a delay, a planner that writes plans for the goals in its
//! prompts, and reading a service's answers and event streams.
#![allow(dead_code, unreachable_pub)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

pub fn client() -> reqwest::Client {
    plan_host::install_crypto();
    reqwest::Client::new()
}

/// `method url` with `body` (JSON text) and `token`: the status and the body as JSON
/// (or as text when it is not JSON).
pub async fn call(
    method: reqwest::Method,
    url: String,
    body: Option<String>,
    token: Option<&str>,
) -> (u16, Value) {
    let mut req = client().request(method, url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(b) = body {
        req = req.header("content-type", "application/json").body(b);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// `POST url` with the JSON `body`, without a token.
pub async fn post(url: String, body: &Value) -> (u16, Value) {
    call(reqwest::Method::POST, url, Some(body.to_string()), None).await
}

/// A tools file in `dir` naming each `(tool, route, pointer)` served over HTTP at
/// `base`.
pub fn http_tools(dir: &Path, base: &str, tools: &[(&str, &str, Option<&str>)]) -> PathBuf {
    let mut text = String::new();
    for (tool, route, pointer) in tools {
        text.push_str(&format!(
            "[[tool]]\nname = \"{tool}\"\n[tool.backend]\nkind = \"http\"\nurl = \"{base}{route}\"\n"
        ));
        if let Some(p) = pointer {
            text.push_str(&format!("pointer = \"{p}\"\n"));
        }
        text.push('\n');
    }
    let path = dir.join("tools.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Echoes `path(body)` after its delay.
pub struct Slow(pub Duration);

impl wiremock::Respond for Slow {
    fn respond(&self, req: &wiremock::Request) -> wiremock::ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        wiremock::ResponseTemplate::new(200)
            .set_body_json(serde_json::json!({"text": format!("{}({body})", req.url.path())}))
            .set_delay(self.0)
    }
}

/// A `vector_search` served over loopback by [`Slow`]: the server, a scratch directory and
/// the tools file in it.
pub async fn search_taking(delay: Duration) -> (wiremock::MockServer, tempfile::TempDir, PathBuf) {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(Slow(delay))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let tools = http_tools(
        dir.path(),
        &server.uri(),
        &[("vector_search", "/search", Some("/text"))],
    );
    (server, dir, tools)
}

/// `GET url` (an events stream, from after `last_event_id` if given) read to its end, as
/// `(id, event, data)`.
pub async fn read_events(url: String, last_event_id: Option<&str>) -> Vec<(String, String, Value)> {
    let mut req = client().get(url);
    if let Some(id) = last_event_id {
        req = req.header("last-event-id", id);
    }
    let res = req.send().await.unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let text = tokio::time::timeout(Duration::from_secs(30), res.text())
        .await
        .expect("the stream ends with the run")
        .unwrap();
    parse_events(&text)
}

/// A stream's text as (id, event, data).
pub fn parse_events(text: &str) -> Vec<(String, String, Value)> {
    text.split("\n\n")
        .filter(|block| block.contains("data:"))
        .map(|block| {
            let field = |name: &str| {
                block
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.trim().to_owned())
                    .unwrap_or_default()
            };
            let data = serde_json::from_str(&field("data:")).unwrap_or(Value::Null);
            (field("id:"), field("event:"), data)
        })
        .collect()
}

/// A planner served over loopback (OpenAI's chat API) that writes the plan for the goal
/// in its prompt: `greet` answers at once; `look up` calls `flaky_tool`, which fails, and
/// its re-plan answers without it; `refuse` never writes a plan. It takes `delay` to
/// answer (300 ms for a goal said `slowly`).
pub struct Planner {
    pub delay: Duration,
}

impl wiremock::Respond for Planner {
    fn respond(&self, req: &wiremock::Request) -> wiremock::ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let last = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .unwrap_or("");
        let plan = if last.contains("error[R0005]") {
            json!([{"seq_no": 0, "type": "assign", "parameters": {"final_answer": "looked up without it"}}])
        } else if last.contains("look up") {
            json!([
                {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "flaky_tool",
                 "tool_params": {"q": "x"}, "output_vars": ["found"]}},
                {"seq_no": 1, "type": "assign", "parameters": {"final_answer": "${found}"}}
            ])
        } else if last.contains("which store") {
            json!([
                {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "ask_user",
                 "tool_params": {"question": "Which store?", "choices": ["Berlin", "Paris"]},
                 "output_vars": ["store"]}},
                {"seq_no": 1, "type": "assign", "parameters": {"final_answer": "trend of ${store}"}}
            ])
        } else if last.contains("greet") {
            json!([{"seq_no": 0, "type": "assign", "parameters": {"final_answer": "hello from a goal"}}])
        } else {
            Value::String("I cannot help with that.".into())
        };
        let reply = match plan {
            Value::String(s) => s,
            plan => plan.to_string(),
        };
        let delay = if last.contains("slowly") {
            Duration::from_millis(300)
        } else {
            self.delay
        };
        wiremock::ResponseTemplate::new(200)
            .set_body_json(json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}],
                                  "usage": {"prompt_tokens": 40, "completion_tokens": 4}}))
            .set_delay(delay)
    }
}

/// A planner (see [`Planner`]) and a `flaky_tool` that always refuses, on one loopback
/// server; the tools file naming both.
pub async fn planner(
    delay: Duration,
) -> (wiremock::MockServer, tempfile::TempDir, std::path::PathBuf) {
    use wiremock::matchers::{method, path};
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Planner { delay })
        .mount(&server)
        .await;
    wiremock::Mock::given(method("POST"))
        .and(path("/flaky"))
        .respond_with(wiremock::ResponseTemplate::new(400).set_body_string("flaky is down"))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.toml");
    let base = server.uri();
    std::fs::write(
        &tools,
        format!(
            "[planner.backend]\nkind = \"openai\"\nbase_url = \"{base}/v1\"\nmodel = \"m\"\napi_key_env = \"PLANNER_KEY\"\nmax_retries = 0\n\n\
             [[tool]]\nname = \"flaky_tool\"\ndescription = \"Looks things up.\"\nparams = [ {{ name = \"q\", type = \"string\", required = true }} ]\n\
             [tool.backend]\nkind = \"http\"\nurl = \"{base}/flaky\"\npointer = \"/text\"\nmax_retries = 0\n"
        ),
    )
    .unwrap();
    (server, dir, tools)
}

/// Polls `GET /v1/runs/{id}` until its goal has ended.
pub async fn ended_goal(runs: &str, id: &str) -> Value {
    for _ in 0..400 {
        let shown = call(reqwest::Method::GET, format!("{runs}/{id}"), None, None)
            .await
            .1;
        if shown["goal"]["status"] != "open" {
            return shown;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("goal `{id}` never ended");
}

/// A response read off a socket: its status, its head and its body as JSON (or text).
pub struct Raw {
    pub status: u16,
    pub head: String,
    pub body: Value,
}

/// `request` (a whole HTTP/1.1 request, sent as it is) to the service at `addr`; the
/// connection is closed by the request's `Connection: close`.
pub fn raw(addr: &str, request: &str) -> Raw {
    let mut tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    tcp.write_all(request.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = tcp.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Raw {
        status,
        head: head.to_owned(),
        body: serde_json::from_str(body).unwrap_or(Value::String(body.to_owned())),
    }
}

/// A request of `method` for `path` with these headers (and `body`), closing after.
pub fn request(method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> String {
    let mut r = format!("{method} {path} HTTP/1.1\r\nconnection: close\r\n");
    for (k, v) in headers {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        r.push_str(&format!(
            "content-type: application/json\r\ncontent-length: {}\r\n",
            body.len()
        ));
    }
    r.push_str("\r\n");
    r.push_str(body);
    r
}

/// The error's code, checking the body has the JSON error shape (OpenAI's too).
pub fn code(r: &Raw) -> &str {
    let e = &r.body["error"];
    assert!(
        e["message"].is_string() && e["type"].is_string() && e.get("param").is_some(),
        "not the JSON error shape: {} {}",
        r.head,
        r.body
    );
    assert!(
        r.head
            .to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{}",
        r.head
    );
    e["code"].as_str().unwrap_or_default()
}

/// A plan that greets `${name}`.
pub const HELLO: &str = r#"[
 {"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "Greet.", "dependency_analysis": "None."}},
 {"seq_no": 1, "type": "assign", "parameters": {"final_answer": "hello ${name}"}}
]"#;

/// Two searches, the second on the first's answer, then the answer.
pub const TWO_SEARCHES: &str = r#"[
 {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "first"}, "output_vars": ["a"]}},
 {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "then ${a}"}, "output_vars": ["b"]}},
 {"seq_no": 2, "type": "assign", "parameters": {"final_answer": "${b}"}}
]"#;

/// A `vector_search` that answers after 300 ms (see [`search_taking`]).
pub async fn slow_search() -> (wiremock::MockServer, tempfile::TempDir, std::path::PathBuf) {
    search_taking(Duration::from_millis(300)).await
}
