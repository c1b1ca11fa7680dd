//! The `planvm serve` process over real HTTP on loopback: an open address refused
//! without a token, SIGTERM (once, twice), runs and goals cut by a killed service taken
//! up at its next start. The API itself is tested in-process: crates/plan-serve/tests,
//! services and workers sharing a PostgreSQL queue among them (tests/queue.rs).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{
    HELLO, Served, TWO_SEARCHES, call, client, ended_goal, planner, post, search_taking,
    slow_search,
};

use serde_json::{Value, json};

const TOKEN: &str = "s3cret-token-for-tests";

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
    assert_eq!(exit.code(), Some(0));
    // The run is left for the next start.
    assert!(listed(&db).contains("\"interrupted\""), "{}", listed(&db));
    let conn = rusqlite::Connection::open(&db).unwrap();
    let entries: Vec<String> = conn
        .prepare("SELECT entry FROM journal WHERE run = 'long' ORDER BY seq")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    // Not waited for: the call is on record as sent, and no answer (20 s away) follows.
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(entries[0].contains("\"sent\""), "{entries:?}");
}
