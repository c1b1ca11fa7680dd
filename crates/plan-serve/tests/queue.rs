//! Services and workers sharing a PostgreSQL store's queue, in-process: runs submitted to
//! one service are taken by it, by another service and by a queue worker; each is run
//! once, streams its events from any service, and ends with its answer; each service and
//! the worker then stop cleanly. Skipped, saying so, without a PostgreSQL server
//! (`scripts/test` starts one, and requires it).

mod common;
#[path = "../../plan-runs/tests/common/pg.rs"]
mod pg;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{Setup, TWO_SEARCHES, call, post, read_events, serve, slow_search};
use pg::{PgSchema, until};
use plan_host::{Host, HostOptions};
use plan_manifest::Manifest;
use plan_runs::StoreAt;
use plan_runs::queue::{Event, Tally, Worker};
use plan_store::Durability;
use serde_json::{Value, json};

/// How long stopping may take before the test gives up: far beyond what it takes.
const PATIENCE: Duration = Duration::from_secs(60);

/// A queue worker on the store at `url` serving the tools of `tools` (runs only, no
/// planner), as `planvm worker --concurrency 2 --poll 0.2` builds it, working until
/// `stop` is sent: what it tallied, and the ids of the runs it ended `ok`.
fn worker(
    url: &str,
    tools: &Path,
    stop: tokio::sync::oneshot::Receiver<()>,
) -> tokio::task::JoinHandle<(Result<Tally, plan_runs::Error>, Vec<String>)> {
    let text = std::fs::read_to_string(tools).unwrap();
    let manifest = Manifest::from_toml_str(&text, "tools.toml").unwrap();
    let worker = Worker {
        at: StoreAt::new(url, Durability::Full),
        host: Arc::new(Host::new(manifest, HostOptions::default()).unwrap()),
        concurrency: 2,
        retry_unknown_writes: false,
        poll: Duration::from_millis(200),
        warn: |e| eprintln!("warning: {e}"),
        watch: None,
        planner: None,
    };
    tokio::spawn(async move {
        let mut ran = Vec::new();
        let mut on = |e: Event<'_>| {
            if let Event::Finished { id, report } = e
                && report.is_ok()
            {
                ran.push(id.to_owned());
            }
        };
        let stopped = async {
            let _ = stop.await;
        };
        let tally = worker.work(stopped, &mut on).await;
        (tally, ran)
    })
}

/// The answer of `TWO_SEARCHES` against `slow_search`'s tool.
fn two_searches_answer() -> String {
    let first = format!("/search({})", json!({"query": "first", "top_k": 10}));
    format!(
        "/search({})",
        json!({"query": format!("then {first}"), "top_k": 10})
    )
}

/// On a PostgreSQL store, services and workers share one queue: runs submitted to one
/// service are taken by it, by another service and by a worker; each is run once,
/// streams its events from any service, and ends with its answer; each stops cleanly
/// (serving returns, its runs drained; the worker's work returns what it tallied).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_services_and_workers_share_the_queue() {
    let Some(pg) = PgSchema::new() else {
        return;
    };
    const RUNS: usize = 12;
    let (server, _dir, tools) = slow_search().await;
    let setup = || Setup {
        tools: Some(tools.clone()),
        max_runs: Some(2),
        ..Setup::default()
    };
    let a = serve(Path::new(&pg.url), setup());
    let b = serve(Path::new(&pg.url), setup());
    let (stop_worker, stopped) = tokio::sync::oneshot::channel();
    let working = worker(&pg.url, &tools, stopped);
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
    let want = two_searches_answer();
    let last = format!("q{}", RUNS - 1);
    let events = read_events(format!("{}/v1/runs/{last}/events", b.base), None).await;
    let (_, kind, data) = events.last().unwrap();
    assert_eq!(kind, "answer", "{events:?}");
    assert_eq!(data["final_answer"], want, "{data}");
    for i in 0..RUNS {
        let one = format!("{}/v1/runs/q{i}", b.base);
        let mut shown = Value::Null;
        let ended = async || {
            shown = call(reqwest::Method::GET, one.clone(), None, None).await.1;
            shown["run"]["status"] == "ok"
        };
        until(PATIENCE, || format!("run q{i} did not end ok"), ended).await;
        assert_eq!(shown["run"]["final_answer"], want, "{shown}");
    }
    assert_eq!(
        server.received_requests().await.unwrap().len(),
        2 * RUNS,
        "each run's two calls were sent once"
    );
    let _ = stop_worker.send(());
    let (tally, by_worker) = tokio::time::timeout(PATIENCE, working)
        .await
        .expect("the worker stops once told")
        .unwrap();
    let tally = tally.expect("the worker works until told to stop");
    assert!(
        (1..RUNS).contains(&by_worker.len()),
        "the worker ran {by_worker:?} of {RUNS} runs"
    );
    let ended_here = Tally {
        ok: by_worker.len() as u64,
        ..Tally::default()
    };
    assert_eq!(tally, ended_here, "the worker's runs all ended ok");
    let stopped = tokio::task::spawn_blocking(move || [a.stop(PATIENCE), b.stop(PATIENCE)])
        .await
        .unwrap();
    for served in stopped {
        served.expect("the service stops cleanly");
    }
}
