//! What the service answers as JSON, kept as snapshots (`tests/snapshots/`): a run shown
//! and its events; a goal shown, its events across its runs, and its runs listed. What
//! differs from one run of the test to the next (times, durations, the loopback port) is
//! redacted; the ids are the test's own.

mod common;

use std::time::Duration;

use common::{Setup, TWO_SEARCHES, call, planner, post, read_events, search_taking, serve};
use serde_json::{Value, json};

/// The keys whose values are times, durations or the process that ran the run.
const VARYING: &[&str] = &[
    "owner",
    "sent_at",
    "latency_ms",
    "created_at",
    "updated_at",
    "started_at",
    "ended_at",
    "finished_at",
    "elapsed_ms",
    "duration_ms",
    "ms",
    "at_ms",
    "lease_until",
];

/// `v` with what varies between runs of a test replaced by a placeholder.
fn redacted(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    if VARYING.contains(&k.as_str()) && !v.is_null() {
                        *v = json!("[varies]");
                    } else {
                        walk(v);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            Value::String(s) => {
                if let Some(at) = s.find("127.0.0.1:") {
                    let port_end = s[at + 10..]
                        .find(|c: char| !c.is_ascii_digit())
                        .map_or(s.len(), |i| at + 10 + i);
                    s.replace_range(at + 10..port_end, "PORT");
                }
            }
            _ => {}
        }
    }
    walk(&mut v);
    v
}

fn pretty(v: Value) -> String {
    serde_json::to_string_pretty(&redacted(v)).unwrap()
}

/// Events as the snapshot shows them: one per line, its id, kind and data.
fn lines(events: Vec<(String, String, Value)>) -> String {
    let lines = events
        .into_iter()
        .map(|(id, kind, data)| format!("{id} {kind} {}", redacted(data)));
    lines.collect::<Vec<_>>().join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_shown_and_its_events() {
    let (_server, dir, tools) = search_taking(Duration::ZERO).await;
    let setup = Setup {
        tools: Some(tools),
        ..Setup::default()
    };
    let s = serve(&dir.path().join("s.db"), setup);
    let runs = format!("{}/v1/runs", s.base);
    let submit = json!({"plan": TWO_SEARCHES, "run_id": "two"});
    let (status, body) = post(runs.clone(), &submit).await;
    assert_eq!(status, 201, "{body}");
    // NB: the stream ends with the run: what is shown after it is the ended run.
    let events = read_events(format!("{runs}/two/events"), None).await;
    let (status, shown) = call(reqwest::Method::GET, format!("{runs}/two"), None, None).await;
    assert_eq!(status, 200, "{shown}");
    insta::assert_snapshot!("run_shown", pretty(shown));
    insta::assert_snapshot!("run_events", lines(events));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goal_shown_its_events_and_its_runs() {
    let (_server, dir, tools) = planner(Duration::ZERO).await;
    let setup = Setup {
        tools: Some(tools),
        env: vec![("PLANNER_KEY", "k")],
        ..Setup::default()
    };
    let s = serve(&dir.path().join("s.db"), setup);
    let runs = format!("{}/v1/runs", s.base);
    let (status, body) = post(runs.clone(), &json!({"goal": "look up x", "run_id": "g1"})).await;
    assert_eq!(status, 201, "{body}");
    let events = read_events(format!("{runs}/g1/events"), None).await;
    let (status, shown) = call(reqwest::Method::GET, format!("{runs}/g1"), None, None).await;
    assert_eq!(status, 200, "{shown}");
    let (status, listed) = call(reqwest::Method::GET, runs.clone(), None, None).await;
    assert_eq!(status, 200, "{listed}");
    insta::assert_snapshot!("goal_shown", pretty(shown));
    insta::assert_snapshot!("goal_events", lines(events));
    insta::assert_snapshot!("goal_runs_listed", pretty(listed));
}
