//! `planvm serve` over real HTTP on loopback: the token, every endpoint and its errors,
//! a run submitted and finished, an open address refused without a token, SIGTERM.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{Served, search_taking};

use serde_json::{Value, json};

const TOKEN: &str = "s3cret-token-for-tests";

const HELLO: &str = r#"[
 {"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "Greet.", "dependency_analysis": "None."}},
 {"seq_no": 1, "type": "assign", "parameters": {"final_answer": "hello ${name}"}}
]"#;

/// Starts `planvm serve` on a free loopback port and waits until it listens.
fn serve(db: &Path, extra: &[&str]) -> Served {
    serve_with(db, extra, &[])
}

/// [`serve`], with these environment variables (and the token's).
fn serve_with(db: &Path, extra: &[&str], env: &[(&str, &str)]) -> Served {
    let mut env = env.to_vec();
    env.push(("PLANVM_TEST_TOKEN", TOKEN));
    common::serve_with(db, extra, &env)
}

fn client() -> reqwest::Client {
    plan_host::install_crypto();
    reqwest::Client::new()
}

/// `POST url` with the JSON `body`, without a token.
async fn post(url: String, body: &Value) -> (u16, Value) {
    call(reqwest::Method::POST, url, Some(body.to_string()), None).await
}

async fn call(
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_answers_and_refuses_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(
        &dir.path().join("s.db"),
        &["--token-env", "PLANVM_TEST_TOKEN"],
    );
    let runs = format!("{}/v1/runs", s.base);
    let ok = Some(TOKEN);
    use reqwest::Method;

    // The token.
    let (status, body) = call(Method::GET, runs.clone(), None, None).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["code"], "unauthorized");
    let (status, _) = call(
        Method::GET,
        runs.clone(),
        None,
        Some("s3cret-token-for-test"),
    )
    .await;
    assert_eq!(status, 401);

    // The pages hold no data: served without the token, scripts from the service only.
    for page in ["/", "/runs/anything", "/assets/app.js", "/favicon.ico"] {
        let res = client()
            .get(format!("{}{page}", s.base))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 200, "{page}");
        let csp = res.headers()["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("script-src 'self'"), "{csp}");
    }
    let (status, _) = call(
        Method::GET,
        format!("{}/assets/nope.js", s.base),
        None,
        None,
    )
    .await;
    assert_eq!(status, 404);

    // Bad bodies.
    let (status, body) = call(Method::POST, runs.clone(), Some("{".into()), ok).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "bad_json");
    let huge = json!({"plan": "x".repeat(17 << 20)}).to_string();
    let (status, _) = call(Method::POST, runs.clone(), Some(huge), ok).await;
    assert_eq!(status, 413);
    let bad = json!({"plan": [{"seq_no": 0, "type": "calling", "parameters":
        {"tool_name": "no_such_tool", "tool_params": {}, "output_vars": ["final_answer"]}}]});
    let (status, body) = call(Method::POST, runs.clone(), Some(bad.to_string()), ok).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "invalid_plan");
    assert!(
        body["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["code"] == "E0202"),
        "{body}"
    );

    // A run submitted goes on in the service, and is read back.
    let submit = json!({"plan": serde_json::from_str::<Value>(HELLO).unwrap(),
                        "vars": {"name": "world"}, "run_id": "hello-1"});
    let (status, body) = call(Method::POST, runs.clone(), Some(submit.to_string()), ok).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["id"], "hello-1");
    let (status, body) = call(Method::POST, runs.clone(), Some(submit.to_string()), ok).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "duplicate_run");
    let one = format!("{runs}/hello-1");
    let mut shown = Value::Null;
    for _ in 0..200 {
        let (status, body) = call(Method::GET, one.clone(), None, ok).await;
        assert_eq!(status, 200, "{body}");
        shown = body;
        if shown["run"]["status"] == "ok" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(shown["run"]["final_answer"], "hello world", "{shown}");
    assert!(!shown["steps"].as_array().unwrap().is_empty(), "{shown}");
    // The plan as text works too.
    let text = json!({"plan": HELLO, "vars": {"name": "text"}});
    let (status, body) = call(Method::POST, runs.clone(), Some(text.to_string()), ok).await;
    assert_eq!(status, 201, "{body}");

    let (status, body) = call(Method::GET, format!("{runs}?status=ok&limit=10"), None, ok).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["runs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == "hello-1"),
        "{body}"
    );
    let (status, body) = call(Method::GET, format!("{runs}?status=bogus"), None, ok).await;
    assert_eq!(status, 400, "{body}");
    // The list a page at a time, each from before the last id of the one before: the
    // whole list, newest first; from an id the store does not hold, nothing.
    for i in 0..5 {
        let more = json!({"plan": HELLO, "vars": {"name": "p"}, "run_id": format!("p{i}")});
        let (status, body) = call(Method::POST, runs.clone(), Some(more.to_string()), ok).await;
        assert_eq!(status, 201, "{body}");
    }
    let ids = |body: &Value| -> Vec<String> {
        body["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let whole = ids(&call(Method::GET, format!("{runs}?limit=1000"), None, ok)
        .await
        .1);
    assert!(whole.len() >= 7, "{whole:?}");
    assert_eq!(whole[0], "p4", "newest first: {whole:?}");
    let mut walked: Vec<String> = Vec::new();
    loop {
        let after = walked
            .last()
            .map_or(String::new(), |id| format!("&before={id}"));
        let page = ids(
            &call(Method::GET, format!("{runs}?limit=2{after}"), None, ok)
                .await
                .1,
        );
        assert!(page.len() <= 2);
        if page.is_empty() {
            break;
        }
        walked.extend(page);
    }
    assert_eq!(walked, whole);
    let (status, body) = call(Method::GET, format!("{runs}?before=nope"), None, ok).await;
    assert_eq!((status, ids(&body).len()), (200, 0), "{body}");
    let (status, body) = call(Method::GET, format!("{runs}/nope"), None, ok).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "unknown_run");
    let (status, body) = call(Method::POST, format!("{one}/cancel"), Some("{}".into()), ok).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["cancelled"], false, "a finished run is left as it was");
    let (status, _) = call(Method::GET, format!("{}/v2/nothing", s.base), None, ok).await;
    assert_eq!(status, 404);

    // A person's verdict on a run: kept, shown with the run; refused for no run, for a
    // verdict other than good or bad, for an over-long note.
    let feedback = format!("{one}/feedback");
    let verdict = json!({"verdict": "bad", "note": "too short"});
    let (status, body) = call(
        Method::POST,
        feedback.clone(),
        Some(verdict.to_string()),
        ok,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["feedback"]["verdict"], "bad");
    assert_eq!(body["feedback"]["note"], "too short");
    let (_, shown) = call(Method::GET, one.clone(), None, ok).await;
    assert_eq!(shown["feedback"]["verdict"], "bad", "{shown}");
    let (status, body) = call(
        Method::POST,
        format!("{runs}/nope/feedback"),
        Some(verdict.to_string()),
        ok,
    )
    .await;
    assert_eq!(status, 404, "{body}");
    let maybe = json!({"verdict": "maybe"}).to_string();
    let (status, body) = call(Method::POST, feedback.clone(), Some(maybe), ok).await;
    assert_eq!(status, 400, "{body}");
    let long = json!({"verdict": "good", "note": "x".repeat(4001)}).to_string();
    let (status, body) = call(Method::POST, feedback, Some(long), ok).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (422, &json!("bad_input")),
        "{body}"
    );
    // No evaluation yet.
    let (status, body) = call(Method::GET, format!("{}/v1/evals", s.base), None, ok).await;
    assert_eq!((status, body), (200, json!({"evals": []})));
    let (status, body) = call(Method::GET, format!("{}/v1/evals/e1", s.base), None, ok).await;
    assert_eq!(status, 404, "{body}");

    // The OpenAPI document, generated from the code: every route in it.
    let (status, doc) = call(Method::GET, format!("{}/openapi.json", s.base), None, ok).await;
    assert_eq!(status, 200, "{doc}");
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."), "{doc}");
    for path in [
        "/v1/runs",
        "/v1/runs/{id}",
        "/v1/runs/{id}/events",
        "/v1/runs/{id}/branch",
        "/v1/runs/{id}/branch/preview",
        "/v1/runs/{id}/cancel",
        "/v1/runs/{id}/feedback",
        "/v1/evals",
        "/v1/evals/{id}",
        "/v1/chat/completions",
        "/openapi.json",
    ] {
        assert!(
            doc["paths"][path].is_object(),
            "{path} is not in the document"
        );
    }
    assert!(doc["components"]["schemas"]["RunSummary"].is_object());

    // A branch from a point of the finished run, with another plan; the parent stays.
    let branch = format!("{one}/branch");
    let bye = json!({"at": 1, "run_id": "bye-1", "plan":
        [{"seq_no": 1, "type": "assign", "parameters": {"final_answer": "bye ${name}"}}]});
    let (status, body) = call(Method::POST, branch.clone(), Some(bye.to_string()), ok).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["parent"], "hello-1");
    let mut shown = Value::Null;
    for _ in 0..200 {
        shown = call(Method::GET, format!("{runs}/bye-1"), None, ok).await.1;
        if shown["run"]["status"] == "ok" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(shown["run"]["final_answer"], "bye world", "{shown}");
    let parent = call(Method::GET, one.clone(), None, ok).await.1;
    assert_eq!(parent["run"]["final_answer"], "hello world");
    let far = json!({"at": 9, "plan": HELLO});
    let (status, body) = call(Method::POST, branch.clone(), Some(far.to_string()), ok).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "not_reached");
    let unset = json!({"at": 1, "plan":
        [{"seq_no": 1, "type": "assign", "parameters": {"final_answer": "${nobody}"}}]});
    let (status, body) = call(Method::POST, branch, Some(unset.to_string()), ok).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "invalid_plan");
    let (status, _) = call(
        Method::POST,
        format!("{runs}/nope/branch"),
        Some(bye.to_string()),
        ok,
    )
    .await;
    assert_eq!(status, 404);
}

#[test]
fn an_address_off_loopback_needs_a_token_and_sigterm_stops_the_service() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let out = Command::new(env!("CARGO_BIN_EXE_planvm"))
        .args([
            "serve",
            "--store",
            db.to_str().unwrap(),
            "--listen",
            "0.0.0.0:0",
        ])
        .env_remove("PLANVM_STORE")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--token-env"), "{stderr}");

    let mut s = serve(&db, &[]);
    let killed = Command::new("kill")
        .args(["-TERM", &s.child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = s.child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

/// A `vector_search` that answers after 300 ms (see [`search_taking`]).
async fn slow_search() -> (wiremock::MockServer, tempfile::TempDir, std::path::PathBuf) {
    search_taking(Duration::from_millis(300)).await
}

const TWO_SEARCHES: &str = r#"[
 {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "first"}, "output_vars": ["a"]}},
 {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "then ${a}"}, "output_vars": ["b"]}},
 {"seq_no": 2, "type": "assign", "parameters": {"final_answer": "${b}"}}
]"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_cut_by_a_killed_service_finish_when_it_starts_again_without_repeating_calls() {
    let (server, dir, tools) = slow_search().await;
    let db = dir.path().join("s.db");
    let with_tools = ["--tools", tools.to_str().unwrap()];
    let mut first = serve(&db, &with_tools);
    let runs = format!("{}/v1/runs", first.base);
    for i in 0..3 {
        let submit = json!({"plan": TWO_SEARCHES, "run_id": format!("r{i}")});
        let (status, body) = post(runs.clone(), &submit).await;
        assert_eq!(status, 201, "{body}");
    }
    // Killed once each run's second search is out and its first is on record (a read
    // call may go out before the answer it depends on is written: the writer commits
    // the points of many runs together, at most a transaction later).
    let seconds = || async {
        server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .filter(|r| String::from_utf8_lossy(&r.body).contains("then "))
            .count()
    };
    for _ in 0..1000 {
        if seconds().await >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(seconds().await, 3);
    for i in 0..3 {
        let one = format!("{runs}/r{i}");
        let mut on_record = false;
        for _ in 0..400 {
            let shown = call(reqwest::Method::GET, one.clone(), None, None).await.1;
            let calls = shown["calls"].as_array().cloned().unwrap_or_default();
            on_record = calls
                .iter()
                .any(|c| c["args"]["query"] == "first" && !c["output"].is_null());
            if on_record {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(on_record, "run r{i}'s first search is not on record");
    }
    first.child.kill().unwrap();
    first.child.wait().unwrap();

    let again = serve(&db, &with_tools);
    let runs = format!("{}/v1/runs", again.base);
    for i in 0..3 {
        let one = format!("{runs}/r{i}");
        let mut shown = Value::Null;
        for _ in 0..200 {
            shown = call(reqwest::Method::GET, one.clone(), None, None).await.1;
            if shown["run"]["status"] == "ok" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let a = format!("/search({})", json!({"query": "first", "top_k": 10}));
        let want = format!(
            "/search({})",
            json!({"query": format!("then {a}"), "top_k": 10})
        );
        assert_eq!(shown["run"]["final_answer"], want, "{shown}");
    }
    let firsts = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| String::from_utf8_lossy(&r.body).contains("\"first\""))
        .count();
    assert_eq!(
        firsts, 3,
        "each run's completed first search is not requested again"
    );
}

/// The events of a server-sent stream, as (id, event, data), until it ends.
async fn read_events(url: String, last_event_id: Option<&str>) -> Vec<(String, String, Value)> {
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
fn parse_events(text: &str) -> Vec<(String, String, Value)> {
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

/// `"stream": true`: one request, answered with the run's events as its events stream
/// sends them, the run's id in a header and in the first event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_submitted_to_stream_answers_with_its_events() {
    let (_server, dir, tools) = slow_search().await;
    let s = serve(
        &dir.path().join("s.db"),
        &["--tools", tools.to_str().unwrap()],
    );
    let runs = format!("{}/v1/runs", s.base);
    let res = client()
        .post(&runs)
        .json(&json!({"plan": TWO_SEARCHES, "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let header = |name: &str| res.headers()[name].to_str().unwrap().to_owned();
    assert!(header("content-type").starts_with("text/event-stream"));
    let id = header("x-run-id");
    assert_eq!(header("location"), format!("/v1/runs/{id}"));
    let text = tokio::time::timeout(Duration::from_secs(30), res.text())
        .await
        .expect("the stream ends with the run")
        .unwrap();
    let streamed = parse_events(&text);
    assert_eq!(streamed[0].1, "plan");
    assert_eq!(streamed[0].2["id"], id.as_str());
    let last = streamed.last().unwrap();
    assert_eq!(last.1, "answer", "{streamed:?}");
    // The same events, under the same ids, as the run's own stream sends once it ended.
    let again = read_events(format!("{runs}/{id}/events"), None).await;
    assert_eq!(streamed, again);
    // Without `stream`, as before: 201 and the run's summary.
    let (status, body) = post(runs.clone(), &json!({"plan": TWO_SEARCHES})).await;
    assert_eq!(status, 201, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_streams_its_events_live_and_from_where_a_client_left() {
    let (_server, dir, tools) = slow_search().await;
    let s = serve(
        &dir.path().join("s.db"),
        &["--tools", tools.to_str().unwrap()],
    );
    let runs = format!("{}/v1/runs", s.base);
    let submit = json!({"plan": TWO_SEARCHES, "run_id": "live"});
    let (status, body) = post(runs.clone(), &submit).await;
    assert_eq!(status, 201, "{body}");
    // Connected while the run goes on: everything, in order, ending with the answer; a
    // call as it starts, then as it finishes; each event under an id of its own.
    let all = read_events(format!("{runs}/live/events"), None).await;
    let seen: Vec<(&str, &str)> = all
        .iter()
        .map(|(_, k, d)| (k.as_str(), d["phase"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        seen,
        [
            ("plan", ""),
            ("tool_call", "started"),
            ("tool_call", "finished"),
            ("step", ""),
            ("tool_call", "started"),
            ("tool_call", "finished"),
            ("step", ""),
            ("step", ""),
            ("answer", "")
        ],
        "{all:?}"
    );
    assert_eq!(all[0].0, "0.0");
    assert_eq!(all[8].0, "end");
    assert!(all[0].2["plan"].as_str().unwrap().contains("then ${a}"));
    assert_eq!(all[1].2["args"]["query"], "first");
    let answer = &all.last().unwrap().2["final_answer"];
    assert!(answer.as_str().unwrap().starts_with("/search("), "{answer}");
    // Read back from the store once the run ended: the same events as those the writer
    // handed to the stream live.
    let again = read_events(format!("{runs}/live/events"), None).await;
    assert_eq!(again, all, "{again:?}");
    // Reconnected after the second step: only what came after, nothing twice.
    let rest = read_events(format!("{runs}/live/events"), Some(&all[6].0)).await;
    assert_eq!(rest, all[7..], "{rest:?}");
    let (status, _) = call(
        reqwest::Method::GET,
        format!("{runs}/nope/events"),
        None,
        None,
    )
    .await;
    assert_eq!(status, 404);
    // The preview of a branch at seq_no 1 with an edited plan: the first search is
    // reused, the second made anew; the edit of seq_no 0, before the point, is ignored.
    let edited = TWO_SEARCHES.replace("\"first\"", "\"FIRST\"");
    let preview = json!({"at": 1, "plan": edited});
    let (status, body) = post(format!("{runs}/live/branch/preview"), &preview).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["variables"], json!(["a"]), "{body}");
    assert_eq!(
        body["reused"],
        json!([{"seq_no": 0, "tool": "vector_search", "step": 0}])
    );
    assert_eq!(
        body["calls"],
        json!([{"seq_no": 1, "tool": "vector_search", "always": true}])
    );
    assert_eq!(body["ignored"], json!([0]));
    let (status, body) = call(
        reqwest::Method::POST,
        format!("{runs}/live/branch/preview"),
        Some(json!({"at": 7, "plan": TWO_SEARCHES}).to_string()),
        None,
    )
    .await;
    assert_eq!(status, 422, "{body}");
    // A timeout: the run fails on its deadline (R0009), seen as its last event.
    let quick = json!({"plan": TWO_SEARCHES, "run_id": "quick", "timeout": 0.1});
    let (status, body) = post(runs.clone(), &quick).await;
    assert_eq!(status, 201, "{body}");
    let events = read_events(format!("{runs}/quick/events"), None).await;
    let (_, kind, data) = events.last().unwrap();
    assert_eq!(kind, "failed", "{events:?}");
    assert_eq!(data["error"]["code"], "R0009", "{data}");
    let bad = json!({"plan": TWO_SEARCHES, "timeout": -1});
    let (status, body) = post(runs, &bad).await;
    assert_eq!(status, 400, "{body}");
}

/// A planner served over loopback (OpenAI's chat API) that writes the plan for the goal
/// in its prompt: `greet` answers at once; `look up` calls `flaky_tool`, which fails, and
/// its re-plan answers without it; `refuse` never writes a plan. It takes `delay` to
/// answer (300 ms for a goal said `slowly`).
struct Planner {
    delay: Duration,
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
async fn planner(delay: Duration) -> (wiremock::MockServer, tempfile::TempDir, std::path::PathBuf) {
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
async fn ended_goal(runs: &str, id: &str) -> Value {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goal_is_planned_replanned_and_answered_in_the_service_and_as_a_chat_model() {
    let (server, dir, tools) = planner(Duration::ZERO).await;
    let prompts = || async {
        server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .filter(|r| r.url.path() == "/v1/chat/completions")
            .map(|r| {
                let body: Value = serde_json::from_slice(&r.body).unwrap();
                body["messages"][0]["content"].as_str().unwrap().to_owned()
            })
            .collect::<Vec<_>>()
    };
    let s = serve_with(
        &dir.path().join("s.db"),
        &["--tools", tools.to_str().unwrap()],
        &[("PLANNER_KEY", "k")],
    );
    let runs = format!("{}/v1/runs", s.base);
    use reqwest::Method;

    // A goal whose first plan fails at a step: re-planned, answered.
    let submit = json!({"goal": "look up x", "run_id": "g1"});
    let (status, body) = post(runs.clone(), &submit).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["id"], "g1");
    assert_eq!(body["status"], "planning");
    assert_eq!(body["goal"], "look up x");
    let events = read_events(format!("{runs}/g1/events"), None).await;
    let seen: Vec<(&str, &str)> = events
        .iter()
        .map(|(id, k, _)| {
            (
                id.split_once('.').map_or(id.as_str(), |(k, _)| k),
                k.as_str(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("1:0", "plan"),
            ("1:1", "tool_call"),
            ("1:2", "tool_call"),
            ("1:2", "step"),
            ("1:end", "failed"),
            ("2:0", "plan"),
            ("2:1", "step"),
            ("2:end", "answer"),
            ("end", "goal")
        ],
        "{events:?}"
    );
    assert_eq!(events[8].2["status"], "answered");
    assert_eq!(events[8].2["answer"], "looked up without it");
    // From where a client left: the rest only, across runs too; a run number that is
    // none, from the start.
    let rest = read_events(format!("{runs}/g1/events"), Some(&events[6].0)).await;
    let kinds: Vec<&str> = rest.iter().map(|(_, k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["answer", "goal"], "{rest:?}");
    let rest = read_events(format!("{runs}/g1/events"), Some("1:end")).await;
    assert_eq!(rest, events[5..], "{rest:?}");
    let again = read_events(format!("{runs}/g1/events"), Some("0:5.0")).await;
    assert_eq!(again.len(), events.len(), "{again:?}");
    // A goal's run ids are its own.
    for taken in ["g1", "g1.3"] {
        let plan = json!({"plan": HELLO, "vars": {"name": "x"}, "run_id": taken});
        let (status, body) = post(runs.clone(), &plan).await;
        assert_eq!(status, 409, "{taken}: {body}");
    }
    let shown = ended_goal(&runs, "g1").await;
    assert_eq!(shown["goal"]["status"], "answered", "{shown}");
    assert_eq!(shown["goal"]["answer"], "looked up without it");
    let versions: Vec<&str> = shown["goal"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["g1", "g1.2"]);
    assert!(
        shown["goal"]["runs"][0]["plan"]
            .as_str()
            .unwrap()
            .contains("flaky_tool")
    );
    assert_eq!(shown["run"]["status"], "failed");
    assert_eq!(shown["children"], json!(["g1.2"]));
    let (_, listed) = call(Method::GET, runs.clone(), None, None).await;
    let goals: Vec<&Value> = listed["runs"].as_array().unwrap().iter().collect();
    assert!(goals.iter().all(|r| r["goal"] == "look up x"), "{listed}");

    // A goal the planner never writes a plan for: failed, with why, and no run.
    let submit = json!({"goal": "refuse this", "run_id": "g2"});
    let (status, body) = post(runs.clone(), &submit).await;
    assert_eq!(status, 201, "{body}");
    let shown = ended_goal(&runs, "g2").await;
    assert_eq!(shown["goal"]["status"], "failed", "{shown}");
    assert_eq!(shown["goal"]["error"]["code"], "invalid_plan", "{shown}");
    assert_eq!(shown["run"], Value::Null);
    let events = read_events(format!("{runs}/g2/events"), None).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].1, "goal");
    let (status, body) = call(
        Method::POST,
        runs.clone(),
        Some(json!({"goal": "x", "plan": []}).to_string()),
        None,
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "bad_body");

    // A goal cancelled while the planner writes its plan: it ends failed, and no run of
    // it starts.
    let (_, body) = call(
        Method::POST,
        runs.clone(),
        Some(json!({"goal": "greet slowly", "run_id": "g3"}).to_string()),
        None,
    )
    .await;
    assert_eq!(body["status"], "planning", "{body}");
    let (status, body) = call(Method::POST, format!("{runs}/g3/cancel"), None, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["cancelled"], true);
    let shown = ended_goal(&runs, "g3").await;
    assert_eq!(shown["goal"]["status"], "failed", "{shown}");
    assert_eq!(shown["goal"]["error"]["code"], "R0013", "{shown}");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let shown = call(Method::GET, format!("{runs}/g3"), None, None).await.1;
    assert_eq!(shown["run"], Value::Null, "{shown}");

    // A session: the second goal's prompt holds the first and its answer.
    for (id, goal) in [("s-1", "greet them"), ("s-2", "greet them again")] {
        let submit = json!({"goal": goal, "run_id": id, "session": "chat-7"});
        let (status, body) = post(runs.clone(), &submit).await;
        assert_eq!(status, 201, "{body}");
        ended_goal(&runs, id).await;
    }
    let last = prompts().await.pop().unwrap();
    assert!(
        last.contains("User: greet them\nAnswer: hello from a goal"),
        "{last}"
    );

    // The service as an OpenAI chat model; the earlier messages are the conversation.
    let chat = format!("{}/v1/chat/completions", s.base);
    let ask = json!({"model": "planrt", "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "who are you?"},
        {"role": "assistant", "content": "a planner"},
        {"role": "user", "content": "please greet"}]});
    let (status, body) = post(chat.clone(), &ask).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "hello from a goal"
    );
    // The planner's tokens (one reply).
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 40, "completion_tokens": 4, "total_tokens": 44})
    );
    let last = prompts().await.pop().unwrap();
    assert!(
        last.contains("User: who are you?\nAnswer: a planner"),
        "{last}"
    );
    assert!(!last.contains("be brief"), "{last}");
    let id = body["id"].as_str().unwrap();
    let shown = ended_goal(&runs, id).await;
    assert_eq!(shown["goal"]["goal"], "please greet");
    let mut streamed = ask.clone();
    streamed["stream"] = json!(true);
    streamed["stream_options"] = json!({"include_usage": true});
    let text = client()
        .post(chat.clone())
        .json(&streamed)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let datas: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(datas.last(), Some(&"[DONE]"), "{text}");
    let chunks: Vec<Value> = datas[..datas.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk"),
        "{text}"
    );
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "hello from a goal");
    // Asked for, the usage comes last, in an event with no choices.
    let (usage, chunks) = chunks.split_last().unwrap();
    assert_eq!(usage["choices"], json!([]), "{text}");
    assert_eq!(usage["usage"]["total_tokens"], 44, "{text}");
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "stop"
    );
    let refused = json!({"messages": [{"role": "user", "content": "refuse me"}]});
    let (status, body) = post(chat.clone(), &refused).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "not_answered");
    let (status, body) = call(
        Method::POST,
        chat,
        Some(json!({"messages": [{"role": "system", "content": "x"}]}).to_string()),
        None,
    )
    .await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goal_cut_by_a_killed_service_is_asked_again_when_it_starts_and_goals_need_a_planner() {
    let (server, dir, tools) = planner(Duration::from_millis(500)).await;
    let db = dir.path().join("s.db");
    let with_tools = ["--tools", tools.to_str().unwrap()];
    let key = [("PLANNER_KEY", "k")];
    let mut first = serve_with(&db, &with_tools, &key);
    let runs = format!("{}/v1/runs", first.base);
    let submit = json!({"goal": "greet", "run_id": "cut"});
    let (status, body) = post(runs, &submit).await;
    assert_eq!(status, 201, "{body}");
    for _ in 0..400 {
        if !server.received_requests().await.unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Killed while the planner is writing the plan.
    first.child.kill().unwrap();
    first.child.wait().unwrap();

    let again = serve_with(&db, &with_tools, &key);
    let runs = format!("{}/v1/runs", again.base);
    let shown = ended_goal(&runs, "cut").await;
    assert_eq!(shown["goal"]["status"], "answered", "{shown}");
    assert_eq!(shown["goal"]["answer"], "hello from a goal");
    drop(again);

    // Without a planner's backend, goals are refused; plans still run.
    let none = serve(&db, &[]);
    let runs = format!("{}/v1/runs", none.base);
    let (status, body) = call(
        reqwest::Method::POST,
        runs.clone(),
        Some(json!({"goal": "greet"}).to_string()),
        None,
    )
    .await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "no_planner");
    let (status, body) = call(
        reqwest::Method::POST,
        runs,
        Some(json!({"plan": HELLO, "vars": {"name": "x"}}).to_string()),
        None,
    )
    .await;
    assert_eq!(status, 201, "{body}");
}

/// Sends SIGTERM to `child`.
fn terminate(child: &std::process::Child) {
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
}

/// Waits until `server` has received `n` requests.
async fn received(server: &wiremock::MockServer, n: usize) {
    for _ in 0..2000 {
        if server.received_requests().await.unwrap().len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the server did not receive {n} requests");
}

/// `planvm runs list --store db --format json`.
fn listed(db: &Path) -> String {
    let listed = Command::new(env!("CARGO_BIN_EXE_planvm"))
        .args([
            "runs",
            "list",
            "--store",
            db.to_str().unwrap(),
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&listed.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_runs_reach_their_next_commit_point_and_they_go_on_at_the_next_start() {
    // A write that takes 1.5 s, out when the service is told to stop: cut there, the
    // next start could not know whether it happened, and would leave the run failed.
    let (server, dir, tools) = search_taking(Duration::from_millis(1500)).await;
    let manifest = std::fs::read_to_string(&tools).unwrap();
    let manifest = manifest.replace("[tool.backend]", "effects = \"write\"\n[tool.backend]");
    std::fs::write(&tools, manifest).unwrap();
    let db = dir.path().join("s.db");
    let with_tools = ["--tools", tools.to_str().unwrap()];
    let mut s = serve(&db, &with_tools);
    let runs = format!("{}/v1/runs", s.base);
    let submit = json!({"plan": TWO_SEARCHES, "run_id": "long"});
    let (status, body) = post(runs.clone(), &submit).await;
    assert_eq!(status, 201, "{body}");
    let open = client()
        .get(format!("{runs}/long/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(open.status().as_u16(), 200);
    let stream = tokio::spawn(async move {
        let text = open.text().await;
        (text, std::time::Instant::now())
    });
    received(&server, 1).await;
    let asked = std::time::Instant::now();
    terminate(&s.child);
    let exit = tokio::task::spawn_blocking(move || {
        let code = s.child.wait().unwrap();
        (code, std::time::Instant::now(), s)
    })
    .await
    .unwrap();
    assert_eq!(exit.0.code(), Some(0));
    let (events, ended) = stream.await.unwrap();
    let events = events.unwrap();
    assert!(events.contains("event: plan"), "{events}");
    assert!(
        ended < exit.1,
        "the event stream ends when the service stops taking requests, not with the runs"
    );
    assert!(
        exit.1 - asked >= Duration::from_millis(500),
        "the service waited for the call out: {:?}",
        exit.1 - asked
    );
    assert_eq!(
        server.received_requests().await.unwrap().len(),
        1,
        "no call is sent once the service stops"
    );
    assert!(listed(&db).contains("\"interrupted\""), "{}", listed(&db));

    let again = serve(&db, &with_tools);
    let one = format!("{}/v1/runs/long", again.base);
    let mut shown = Value::Null;
    for _ in 0..400 {
        shown = call(reqwest::Method::GET, one.clone(), None, None).await.1;
        if shown["run"]["status"] != "running" && shown["run"]["status"] != "interrupted" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let a = format!("/search({})", json!({"query": "first", "top_k": 10}));
    let want = format!(
        "/search({})",
        json!({"query": format!("then {a}"), "top_k": 10})
    );
    assert_eq!(shown["run"]["final_answer"], want, "{shown}");
    assert_eq!(
        server.received_requests().await.unwrap().len(),
        2,
        "the write answered while the service stopped is not sent again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sigterm_stops_the_service_without_waiting_for_calls() {
    // A search that takes 20 s: the run is still going when the service is told to stop.
    let (server, dir, tools) = search_taking(Duration::from_secs(20)).await;
    let db = dir.path().join("s.db");
    let mut s = serve(&db, &["--tools", tools.to_str().unwrap()]);
    let runs = format!("{}/v1/runs", s.base);
    let submit = json!({"plan": TWO_SEARCHES, "run_id": "long"});
    let (status, body) = post(runs.clone(), &submit).await;
    assert_eq!(status, 201, "{body}");
    received(&server, 1).await;
    let asked = std::time::Instant::now();
    terminate(&s.child);
    // NB: the second signal once the service says it is stopping (it has a run to wait
    // for then).
    let said = tokio::task::spawn_blocking({
        let said = s.said.clone();
        move || {
            for _ in 0..2000 {
                if said.lock().unwrap().contains("stopping:") {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            said.lock().unwrap().clone()
        }
    })
    .await
    .unwrap();
    assert!(said.contains("stopping: 1 run(s)"), "{said}");
    terminate(&s.child);
    let exit = tokio::task::spawn_blocking(move || {
        let code = s.child.wait().unwrap();
        (code, s)
    })
    .await
    .unwrap()
    .0;
    let took = asked.elapsed();
    assert_eq!(exit.code(), Some(0));
    assert!(
        took < Duration::from_secs(10),
        "stopping took {took:?}, against a call of 20 s"
    );
    // The run is left for the next start.
    assert!(listed(&db).contains("\"interrupted\""), "{}", listed(&db));
}

const ASKS: &str = r#"[
 {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "regions"}, "output_vars": ["r"]}},
 {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "ask_user", "tool_params": {"question": "Which region?", "choices": ["EU", "US"]}, "output_vars": ["region"]}},
 {"seq_no": 2, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "sales in ${region}"}, "output_vars": ["final_answer"]}}
]"#;

/// Reads the stream `res` on into `text` until that holds `until` (the rest stays to be
/// read).
async fn read_until(res: &mut reqwest::Response, text: &mut String, until: &str) {
    while !text.contains(until) {
        let chunk = tokio::time::timeout(Duration::from_secs(30), res.chunk())
            .await
            .unwrap_or_else(|_| panic!("no `{until}` in: {text}"))
            .unwrap()
            .unwrap_or_else(|| panic!("the stream ended before `{until}`: {text}"));
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_asks_waits_across_a_killed_service_until_its_question_is_answered() {
    let (server, dir, tools) = slow_search().await;
    let db = dir.path().join("s.db");
    let with_tools = ["--tools", tools.to_str().unwrap()];
    let mut first = serve(&db, &with_tools);
    let runs = format!("{}/v1/runs", first.base);
    let (status, body) = post(runs.clone(), &json!({"plan": ASKS, "run_id": "q"})).await;
    assert_eq!(status, 201, "{body}");
    let mut shown = Value::Null;
    for _ in 0..400 {
        shown = call(reqwest::Method::GET, format!("{runs}/q"), None, None)
            .await
            .1;
        if shown["run"]["status"] == "needs_input" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        shown["run"]["question"]["question"], "Which region?",
        "{shown}"
    );
    first.child.kill().unwrap();
    first.child.wait().unwrap();

    // Not taken up at start: it waits for a person, not for a process.
    let again = serve(&db, &with_tools);
    let runs = format!("{}/v1/runs", again.base);
    let listed = call(
        reqwest::Method::GET,
        format!("{runs}?status=needs_input"),
        None,
        None,
    )
    .await
    .1;
    assert_eq!(listed["runs"][0]["id"], "q", "{listed}");
    let mut res = client()
        .get(format!("{runs}/q/events"))
        .send()
        .await
        .unwrap();
    let mut text = String::new();
    read_until(&mut res, &mut text, "event: needs_input").await;
    assert!(text.contains(r#""choices":["EU","US"]"#), "{text}");

    let input = format!("{runs}/q/input");
    let (status, body) = post(input.clone(), &json!({"text": "Asia"})).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (422, &json!("bad_input")),
        "{body}"
    );
    let (status, body) = post(input.clone(), &json!({"text": "EU"})).await;
    assert_eq!(status, 202, "{body}");
    // The same stream goes on with the run to its answer.
    read_until(&mut res, &mut text, "event: answer").await;
    assert!(text.contains("sales in EU"), "{text}");
    let (status, body) = post(input, &json!({"text": "US"})).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (409, &json!("not_waiting")),
        "{body}"
    );
    let bodies: Vec<String> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    assert_eq!(bodies.len(), 2, "each search once: {bodies:?}");

    // A goal whose plan asks: the goal waits with its run, across a restart, and is
    // answered with it; another is cancelled while it waits, and ends.
    drop(again);
    let (_planner, pdir, ptools) = planner(Duration::ZERO).await;
    let gdb = pdir.path().join("g.db");
    let with_planner = ["--tools", ptools.to_str().unwrap()];
    let key = [("PLANNER_KEY", "a-long-enough-test-key")];
    let mut served = serve_with(&gdb, &with_planner, &key);
    let runs = format!("{}/v1/runs", served.base);
    let waiting = |runs: String, id: &'static str| async move {
        let mut goal = Value::Null;
        for _ in 0..400 {
            goal = call(reqwest::Method::GET, format!("{runs}/{id}"), None, None)
                .await
                .1;
            if goal["goal"]["status"] == "needs_input" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert_eq!(goal["run"]["status"], "needs_input", "{goal}");
    };
    for id in ["g", "g2"] {
        let goal = json!({"goal": "the trend of which store?", "run_id": id});
        let (status, body) = post(runs.clone(), &goal).await;
        assert_eq!(status, 201, "{body}");
        waiting(runs.clone(), id).await;
    }
    served.child.kill().unwrap();
    served.child.wait().unwrap();
    let served = serve_with(&gdb, &with_planner, &key);
    let runs = format!("{}/v1/runs", served.base);
    waiting(runs.clone(), "g").await;
    let (status, body) = post(format!("{runs}/g/input"), &json!({"text": "Paris"})).await;
    assert_eq!(status, 202, "{body}");
    let ended = ended_goal(&runs, "g").await;
    assert_eq!(ended["goal"]["status"], "answered", "{ended}");
    assert_eq!(ended["goal"]["answer"], "trend of Paris");
    let (status, body) = post(format!("{runs}/g2/cancel"), &json!({})).await;
    assert_eq!((status, &body["cancelled"]), (200, &json!(true)), "{body}");
    let ended = ended_goal(&runs, "g2").await;
    assert_eq!(ended["goal"]["status"], "failed", "{ended}");
    let (status, body) = post(format!("{runs}/g2/input"), &json!({"text": "Paris"})).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (409, &json!("not_waiting")),
        "{body}"
    );
    // As a chat model, the question is the reply.
    let chat = json!({"model": "planvm", "messages": [{"role": "user", "content": "the trend of which store?"}]});
    let (status, body) = post(format!("{}/v1/chat/completions", served.base), &chat).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "Which store?\n- Berlin\n- Paris"
    );
}

/// On a PostgreSQL store, services and workers share one queue: runs submitted to one
/// service are taken by it, by another service and by a `planvm worker`; each is run once,
/// streams its events from any service, and ends with its answer; SIGTERM stops each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_services_and_workers_share_the_queue() {
    let Some(pg) = common::PgSchema::new() else {
        return;
    };
    const RUNS: usize = 12;
    let (server, _dir, tools) = slow_search().await;
    let store = Path::new(&pg.url);
    let extra = ["--tools", tools.to_str().unwrap(), "--max-runs", "2"];
    let mut a = serve(store, &extra);
    let mut b = serve(store, &extra);
    let mut worker = common::Reaped(
        Command::new(common::BIN)
            .args([
                "worker",
                "--store",
                &pg.url,
                "--concurrency",
                "2",
                "--poll",
                "0.2",
            ])
            .args(&extra[..2])
            .env_remove("PLANVM_STORE")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    for i in 0..RUNS {
        let submit = json!({"plan": TWO_SEARCHES, "run_id": format!("q{i}")});
        let (status, body) = post(format!("{}/v1/runs", a.base), &submit).await;
        assert_eq!(status, 201, "{body}");
        // NB: as read once submitted: a worker may have taken it already.
        assert!(
            ["queued", "running"].contains(&body["status"].as_str().unwrap()),
            "{body}"
        );
    }
    let last = format!("q{}", RUNS - 1);
    let events = read_events(format!("{}/v1/runs/{last}/events", b.base), None).await;
    let (_, kind, data) = events.last().unwrap();
    assert_eq!(kind, "answer", "{events:?}");
    let a_ = format!("/search({})", json!({"query": "first", "top_k": 10}));
    let want = format!(
        "/search({})",
        json!({"query": format!("then {a_}"), "top_k": 10})
    );
    assert_eq!(data["final_answer"], want, "{data}");
    for i in 0..RUNS {
        let one = format!("{}/v1/runs/q{i}", b.base);
        let mut shown = Value::Null;
        for _ in 0..400 {
            shown = call(reqwest::Method::GET, one.clone(), None, None).await.1;
            if shown["run"]["status"] == "ok" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert_eq!(shown["run"]["final_answer"], want, "{shown}");
    }
    assert_eq!(
        server.received_requests().await.unwrap().len(),
        2 * RUNS,
        "each run's two calls were sent once"
    );
    for child in [&a.child, &b.child, &worker.0] {
        terminate(child);
    }
    assert_eq!(worker.wait().unwrap().code(), Some(0));
    let mut out = String::new();
    std::io::Read::read_to_string(&mut worker.stdout.take().unwrap(), &mut out).unwrap();
    let by_worker = out.lines().filter(|l| l.contains("\"ok\"")).count();
    assert!(
        (1..RUNS).contains(&by_worker),
        "the worker ran {by_worker} of {RUNS} runs: {out}"
    );
    assert_eq!(a.child.wait().unwrap().code(), Some(0));
    assert_eq!(b.child.wait().unwrap().code(), Some(0));
}
