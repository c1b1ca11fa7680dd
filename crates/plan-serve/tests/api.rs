//! The service in this process over real HTTP on loopback: the token, every endpoint
//! and its errors, a run submitted and finished, its events live and from where a
//! client left, goals planned, re-planned and answered, and the chat endpoint over them.

mod common;

use std::time::Duration;

use common::{
    HELLO, Setup, TOKEN, TWO_SEARCHES, call, client, ended_goal, parse_events, planner, post,
    read_events, serve, slow_search,
};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_answers_and_refuses_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let setup = Setup {
        token: true,
        ..Setup::default()
    };
    let s = serve(&dir.path().join("s.db"), setup);
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
    // Runs named: as given, else by their first reasoning line; found by their name.
    let named =
        json!({"plan": HELLO, "vars": {"name": "n"}, "run_id": "named", "name": "Nightly check"});
    let (status, body) = call(Method::POST, runs.clone(), Some(named.to_string()), ok).await;
    assert_eq!(
        (status, &body["plan"]),
        (201, &json!("Nightly check")),
        "{body}"
    );
    let steps = json!([
        {"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "Say hi.\nThen stop."}},
        {"seq_no": 1, "type": "assign", "parameters": {"final_answer": "hi"}}]);
    let reasoned = json!({"plan": format!("Plan:\n```json\n{steps}\n```"), "run_id": "reasoned"});
    let (status, body) = call(Method::POST, runs.clone(), Some(reasoned.to_string()), ok).await;
    assert_eq!((status, &body["plan"]), (201, &json!("Say hi.")), "{body}");
    assert_eq!(
        call(Method::GET, one.clone(), None, ok).await.1["run"]["plan"],
        "Greet."
    );
    for (bad, why) in [
        (json!(" "), "empty"),
        (json!("a\u{7}b"), "control"),
        (json!("x".repeat(201)), "over 200"),
    ] {
        let body = json!({"plan": HELLO, "vars": {"name": "n"}, "name": bad});
        let (status, body) = call(Method::POST, runs.clone(), Some(body.to_string()), ok).await;
        assert_eq!(status, 400, "{body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(why),
            "{body}"
        );
    }
    // A large plan is shown by its source alone (its tree would cost each request).
    let long = "x".repeat(1 << 20);
    let large = json!({"plan": format!("[{{\"seq_no\": 0, \"type\": \"assign\", \"parameters\": {{\"final_answer\": \"{long}\"}}}}]"), "run_id": "large"});
    let (status, body) = call(Method::POST, runs.clone(), Some(large.to_string()), ok).await;
    assert_eq!(
        (status, &body["plan"]),
        (201, &json!("submitted")),
        "{}",
        &body.to_string()[..200.min(body.to_string().len())]
    );
    let shown = call(Method::GET, format!("{runs}/large"), None, ok).await.1;
    assert_eq!(shown["plan"], Value::Null);
    assert!(shown["source"].as_str().unwrap().len() > 1 << 20);
    let (_, body) = call(Method::GET, format!("{runs}?q=nIGHTLY"), None, ok).await;
    let found: Vec<&Value> = body["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["id"])
        .collect();
    assert_eq!(found, [&json!("named")], "{body}");
    let (_, body) = call(
        Method::GET,
        format!("{runs}?q=nothing-like-it&status=ok"),
        None,
        ok,
    )
    .await;
    assert_eq!(body["runs"], json!([]), "{body}");
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

/// `"stream": true`: one request, answered with the run's events as its events stream
/// sends them, the run's id in a header and in the first event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_submitted_to_stream_answers_with_its_events() {
    let (_server, dir, tools) = slow_search().await;
    let setup = Setup {
        tools: Some(tools),
        ..Setup::default()
    };
    let s = serve(&dir.path().join("s.db"), setup);
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
    let setup = Setup {
        tools: Some(tools),
        ..Setup::default()
    };
    let s = serve(&dir.path().join("s.db"), setup);
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
    let (status, body) = post(runs.clone(), &bad).await;
    assert_eq!(status, 400, "{body}");
    // NB: over what the document says (int64), for a goal too.
    for over in [
        json!({"plan": TWO_SEARCHES, "max_steps": 1u64 << 63}),
        json!({"goal": "x", "max_steps": 1u64 << 63}),
    ] {
        let (status, body) = post(runs.clone(), &over).await;
        assert_eq!(status, 400, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("max_steps"),
            "{body}"
        );
    }
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
    let setup = Setup {
        tools: Some(tools),
        env: vec![("PLANNER_KEY", "k")],
        ..Setup::default()
    };
    let s = serve(&dir.path().join("s.db"), setup);
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
        shown["goal"]["versions"][0]["reply"]
            .as_str()
            .unwrap()
            .contains("flaky_tool")
    );
    // A goal's run number that is none is no run.
    let (status, body) = call(Method::GET, format!("{runs}/g1.9"), None, None).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(shown["run"]["status"], "failed");
    assert_eq!(shown["children"], json!(["g1.2"]));
    // Its versions: each round, its plan as the compiler read it and why it ended; any
    // run of the goal shows them.
    let version = |v: &Value| (v["kind"].clone(), v["status"].clone(), v["run"].clone());
    let versions: Vec<_> = shown["goal"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(version)
        .collect();
    assert_eq!(
        versions,
        [
            (json!("plan"), json!("failed"), json!("g1")),
            (json!("replan"), json!("ok"), json!("g1.2"))
        ],
        "{shown}"
    );
    let first = &shown["goal"]["versions"][0];
    assert_eq!(
        first["plan"]["instructions"][0]["parameters"]["tool_name"],
        "flaky_tool"
    );
    assert_eq!(first["error"]["code"], "R0005", "{first}");
    assert_eq!(shown["plan"]["instructions"], first["plan"]["instructions"]);
    let second = call(Method::GET, format!("{runs}/g1.2"), None, None)
        .await
        .1;
    assert_eq!(second["goal"]["id"], "g1", "{second}");
    assert_eq!(second["goal"]["versions"], shown["goal"]["versions"]);
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
    // Every reply that never ran is kept, with the diagnostics sent back.
    let versions = shown["goal"]["versions"].as_array().unwrap();
    assert!(versions.len() >= 2, "{shown}");
    assert_eq!(versions[0]["kind"], "plan");
    assert_eq!(versions[1]["kind"], "repair");
    for v in versions {
        assert_eq!(v["status"], "invalid", "{v}");
        assert_eq!(v["reply"], "I cannot help with that.", "{v}");
        assert_eq!(v["plan"], Value::Null, "{v}");
        assert!(
            v["diagnostics"].as_array().is_some_and(|d| !d.is_empty()),
            "{v}"
        );
    }
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
    let (status, session) = call(
        Method::GET,
        format!("{}/v1/sessions/chat-7", s.base),
        None,
        None,
    )
    .await;
    assert_eq!(status, 200, "{session}");
    let rounds: Vec<(&str, &str)> = session["goals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["goal"].as_str().unwrap(), g["answer"].as_str().unwrap()))
        .collect();
    assert_eq!(
        rounds,
        [
            ("greet them", "hello from a goal"),
            ("greet them again", "hello from a goal")
        ]
    );
    assert_eq!(session["goals"][1]["runs"], json!(["s-2"]));
    let (status, body) = call(
        Method::GET,
        format!("{}/v1/sessions/none", s.base),
        None,
        None,
    )
    .await;
    assert_eq!(status, 404, "{body}");

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
