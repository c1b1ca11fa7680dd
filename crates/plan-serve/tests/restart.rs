//! What a question to a person outlives: a run stopped at `ask_user` waits in the store,
//! not in a process, so a service stopped and started again over the same store shows
//! it, streams it, takes its answer (refusing one that is not a choice, or one given
//! twice) and goes on; a goal whose plan asks waits with its run and is answered with
//! it, and one cancelled while it waits ends. As a chat model, the question is the reply.

mod common;

use std::time::Duration;

use common::{Setup, call, client, ended_goal, planner, post, serve, slow_search};
use serde_json::{Value, json};

/// A search, a question whose choices are fixed, a search on its answer.
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

/// Polls `GET url` until `field` of what it shows is `status`.
async fn until_shown(url: String, field: &str, status: &str) -> Value {
    let mut shown = Value::Null;
    for _ in 0..400 {
        shown = call(reqwest::Method::GET, url.clone(), None, None).await.1;
        if shown[field]["status"] == status {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    shown
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_asks_waits_across_a_restart_until_its_question_is_answered() {
    let (server, dir, tools) = slow_search().await;
    let db = dir.path().join("s.db");
    let setup = || Setup {
        tools: Some(tools.clone()),
        ..Setup::default()
    };
    let first = serve(&db, setup());
    let runs = format!("{}/v1/runs", first.base);
    let (status, body) = post(runs.clone(), &json!({"plan": ASKS, "run_id": "q"})).await;
    assert_eq!(status, 201, "{body}");
    let shown = until_shown(format!("{runs}/q"), "run", "needs_input").await;
    assert_eq!(
        shown["run"]["question"]["question"], "Which region?",
        "{shown}"
    );
    drop(first);

    // Not taken up at start: it waits for a person, not for a process.
    let again = serve(&db, setup());
    let runs = format!("{}/v1/runs", again.base);
    let get = |url: String| async move { call(reqwest::Method::GET, url, None, None).await.1 };
    let listed = get(format!("{runs}?status=needs_input")).await;
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
    let sent = server.received_requests().await.unwrap().len();
    assert_eq!(sent, 2, "each search once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goal_whose_plan_asks_waits_across_a_restart_and_is_answered_or_cancelled() {
    let (_planner, dir, tools) = planner(Duration::ZERO).await;
    let db = dir.path().join("g.db");
    let setup = || Setup {
        tools: Some(tools.clone()),
        env: vec![("PLANNER_KEY", "a-long-enough-test-key")],
        ..Setup::default()
    };
    let served = serve(&db, setup());
    let runs = format!("{}/v1/runs", served.base);
    for id in ["g", "g2"] {
        let goal = json!({"goal": "the trend of which store?", "run_id": id});
        let (status, body) = post(runs.clone(), &goal).await;
        assert_eq!(status, 201, "{body}");
        let shown = until_shown(format!("{runs}/{id}"), "goal", "needs_input").await;
        assert_eq!(shown["run"]["status"], "needs_input", "{shown}");
    }
    drop(served);
    let served = serve(&db, setup());
    let runs = format!("{}/v1/runs", served.base);
    let shown = until_shown(format!("{runs}/g"), "goal", "needs_input").await;
    assert_eq!(shown["run"]["status"], "needs_input", "{shown}");
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
    let reply = &body["choices"][0]["message"]["content"];
    assert_eq!(reply, "Which store?\n- Berlin\n- Paris");
}
