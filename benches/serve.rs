//! `planvm serve` as a whole system, over real HTTP on loopback, against the same work done
//! without it: runs per second through `POST /v1/runs` with `"stream": true` (one request
//! a run, its events to their end), against `planvm batch --store` on the same plans (alternated rounds), and against
//! a bare HTTP server answering the same requests from memory (what HTTP alone costs:
//! this bench, re-run as that server); the latency a run's submitter sees, against the
//! same run started in-process through the engine as the service starts it
//! (`plan_runs::Writer`); and memory per queued and per running run (the service's RSS).
//! The plan is `scripts/batch-bench-data.py`'s 13-call plan, its calls answered from a
//! cassette (0 ms, or 300 ms for memory).
//!
//! Run: `cargo build --release -p planvm && cargo bench --bench serve` (the binary is
//! `target/release/planvm`, or `$PLANVM_BIN`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

const RUNS: usize = 1000;
const CLIENTS: usize = 64;
const ROUNDS: usize = 5;
const LATENCY_RUNS: usize = 300;

fn main() {
    if let Some(events) = std::env::var_os("PLANRT_BENCH_FLOOR") {
        return floor_server(&PathBuf::from(events));
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let bin = std::env::var_os("PLANVM_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/release/planvm"));
    assert!(
        bin.exists(),
        "{} is missing: cargo build --release -p planvm",
        bin.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let made = Command::new("python3")
        .arg(root.join("scripts/batch-bench-data.py"))
        .current_dir(data)
        .status()
        .unwrap();
    assert!(made.success());
    let plan = std::fs::read_to_string(data.join("aspects.json")).unwrap();
    // NB: streamed: one request a run, answered with its events.
    let body = Arc::new(serde_json::json!({ "plan": plan, "stream": true }).to_string());
    let unstreamed = serde_json::json!({ "plan": plan }).to_string();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    // The floor: the same requests answered by a bare HTTP server from memory (one run's
    // events as the service sent them), no store and no VM.
    let events = {
        let svc = Service::start(&bin, data, "floor.db", "aspects.0ms.jsonl", &[]);
        rt.block_on(async {
            let client = client();
            let id = submit(&client, &svc.base, &unstreamed).await;
            let url = format!("{}/v1/runs/{id}/events", svc.base);
            client.get(url).send().await.unwrap().text().await.unwrap()
        })
    };
    std::fs::write(data.join("events.txt"), &events).unwrap();
    let mut floor = Vec::new();

    // Throughput, alternated with the batch.
    let (mut batch, mut served) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let db = data.join(format!("b{round}.db"));
        let t = Instant::now();
        let out = Command::new(&bin)
            .args([
                "batch",
                "--list",
                "runs.1000x0ms.txt",
                "--jobs",
                "64",
                "--output",
            ])
            .arg("/dev/null")
            .arg("--store")
            .arg(&db)
            .current_dir(data)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        batch.push(t.elapsed());
        let svc = Service::start(
            &bin,
            data,
            &format!("s{round}.db"),
            "aspects.0ms.jsonl",
            &[],
        );
        served.push(rt.block_on(throughput(&svc.base, body.clone())));
        drop(svc);
        let bare = Floor::start(&data.join("events.txt"));
        floor.push(rt.block_on(throughput(&bare.0.base, body.clone())));
    }
    let (b, s) = (median(&mut batch), median(&mut served));
    let rate = |d: Duration| RUNS as f64 / d.as_secs_f64();
    println!(
        "throughput, {RUNS} runs, {CLIENTS} at once, median of {ROUNDS}: batch --store {:.0} ms ({:.0} runs/s); \
         serve POST streamed {:.0} ms ({:.0} runs/s): {:.2}x",
        b.as_secs_f64() * 1e3,
        rate(b),
        s.as_secs_f64() * 1e3,
        rate(s),
        rate(s) / rate(b)
    );
    println!("  batch rounds: {batch:?}\n  serve rounds: {served:?}");
    println!(
        "  the HTTP alone (a bare server answering from memory): {:.0} ms, rounds {floor:?}",
        median(&mut floor).as_secs_f64() * 1e3
    );

    // Latency, one run at a time.
    let svc = Service::start(&bin, data, "lat.db", "aspects.0ms.jsonl", &[]);
    let mut through = rt.block_on(async {
        let client = client();
        let mut all = Vec::new();
        for _ in 0..LATENCY_RUNS {
            let t = Instant::now();
            one_run(&client, &svc.base, &body).await;
            all.push(t.elapsed());
        }
        all
    });
    drop(svc);
    let mut direct = in_process(&rt, data, &plan);
    let (tp, dp) = (percentiles(&mut through), percentiles(&mut direct));
    println!(
        "submit to answer, {LATENCY_RUNS} runs one at a time: serve p50 {:.2} ms p99 {:.2} ms; \
         in-process p50 {:.2} ms p99 {:.2} ms; added p50 {:.2} ms p99 {:.2} ms",
        ms(tp.0),
        ms(tp.1),
        ms(dp.0),
        ms(dp.1),
        ms(tp.0.saturating_sub(dp.0)),
        ms(tp.1.saturating_sub(dp.1)),
    );

    // Memory: runs waiting for a slot, and runs executing (300 ms calls).
    for (what, max_runs) in [("queued", "1"), ("running", "1000")] {
        let svc = Service::start(
            &bin,
            data,
            &format!("mem-{what}.db"),
            "aspects.300ms.jsonl",
            &["--max-runs", max_runs],
        );
        let per = rt.block_on(memory(&svc, (&body, &unstreamed)));
        println!(
            "memory per {what} run ({RUNS} runs): {:.1} KB",
            per / 1024.0
        );
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn percentiles(v: &mut [Duration]) -> (Duration, Duration) {
    v.sort();
    (v[v.len() / 2], v[(v.len() * 99 / 100).min(v.len() - 1)])
}

/// A service on a free loopback port, stopped when dropped.
struct Service {
    child: Child,
    base: String,
}

impl Service {
    fn start(bin: &Path, dir: &Path, db: &str, cassette: &str, extra: &[&str]) -> Service {
        use std::io::BufRead;
        let mut child = Command::new(bin)
            .args([
                "serve",
                "--store",
                db,
                "--listen",
                "127.0.0.1:0",
                "--replay",
                cassette,
            ])
            .args(extra)
            .current_dir(dir)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let base = loop {
            let line = lines.next().expect("the service starts").unwrap();
            if let Some(addr) = line.strip_prefix("listening on ") {
                break addr.to_owned();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Service { child, base }
    }

    /// The service's resident memory, and its peak, in bytes.
    fn rss(&self) -> (f64, f64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<f64>().ok())
                .unwrap()
                * 1024.0
        };
        (field("VmRSS:"), field("VmHWM:"))
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The bench itself as a bare HTTP server on a free loopback port: `POST /v1/runs` reads
/// the body as JSON and answers an id; `GET /v1/runs/{id}/events` sends the events in
/// `events` (one run's, as the service sent them). Stopped when dropped.
struct Floor(Service);

impl Floor {
    fn start(events: &Path) -> Floor {
        use std::io::BufRead;
        let mut child = Command::new(std::env::current_exe().unwrap())
            .env("PLANRT_BENCH_FLOOR", events)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let line = lines.next().expect("the server starts").unwrap();
        let base = line.strip_prefix("listening on ").unwrap().to_owned();
        Floor(Service { child, base })
    }
}

fn floor_server(events: &Path) {
    use axum::response::IntoResponse;
    use axum::response::sse::{Event, Sse};
    use axum::serve::ListenerExt;
    let text = std::fs::read_to_string(events).unwrap();
    let events: Arc<Vec<(String, String, String)>> = Arc::new(
        text.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let field = |name: &str| {
                    e.lines()
                        .find_map(|l| l.strip_prefix(name))
                        .unwrap_or_default()
                        .to_owned()
                };
                (field("id: "), field("event: "), field("data: "))
            })
            .collect(),
    );
    assert!(events.iter().any(|(_, kind, _)| kind == "answer"));
    let next = Arc::new(AtomicUsize::new(0));
    let streamed = events.clone();
    let sse = |events: &[(String, String, String)]| {
        let all = events.iter().map(|(id, kind, data)| {
            Ok::<_, std::convert::Infallible>(Event::default().id(id).event(kind).data(data))
        });
        Sse::new(futures::stream::iter(all.collect::<Vec<_>>()))
    };
    let app = axum::Router::new()
        .route(
            "/v1/runs",
            axum::routing::post(move |axum::Json(body): axum::Json<Value>| async move {
                assert!(body["plan"].is_string());
                if body["stream"] == true {
                    return sse(&streamed).into_response();
                }
                let id = next.fetch_add(1, Ordering::Relaxed);
                let created = serde_json::json!({"id": format!("run-{id}"), "status": "running"});
                (axum::http::StatusCode::CREATED, axum::Json(created)).into_response()
            }),
        )
        .route(
            "/v1/runs/{id}/events",
            axum::routing::get(move || async move { sse(&events) }),
        );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        eprintln!("listening on http://{}", listener.local_addr().unwrap());
        // NB: as the service does: without it a small write waits for a delayed ACK.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, app).await.unwrap();
    });
}

/// Submits a run to stream (`body` says so) and reads its events to the end; its answer
/// event must be there.
async fn one_run(client: &reqwest::Client, base: &str, body: &str) {
    let res = client
        .post(format!("{base}/v1/runs"))
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let events = res.text().await.unwrap();
    assert!(events.contains("event: answer"), "{events}");
}

async fn submit(client: &reqwest::Client, base: &str, body: &str) -> String {
    let res = client
        .post(format!("{base}/v1/runs"))
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 201);
    let v: Value = res.json().await.unwrap();
    v["id"].as_str().unwrap().to_owned()
}

/// `RUNS` runs through the service, `CLIENTS` at once: the time until the last one's
/// stream ended.
async fn throughput(base: &str, body: Arc<String>) -> Duration {
    let client = client();
    let next = Arc::new(AtomicUsize::new(0));
    let t = Instant::now();
    let workers: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (client, base, body, next) =
                (client.clone(), base.to_owned(), body.clone(), next.clone());
            tokio::spawn(async move {
                while next.fetch_add(1, Ordering::Relaxed) < RUNS {
                    one_run(&client, &base, &body).await;
                }
            })
        })
        .collect();
    for w in workers {
        w.await.unwrap();
    }
    t.elapsed()
}

/// The same run, started in-process through the engine as the service starts it (created
/// and journaled through the store's writer thread), one at a time.
fn in_process(rt: &tokio::runtime::Runtime, dir: &Path, plan: &str) -> Vec<Duration> {
    let opts = plan_compiler::CompileOptions::default();
    let program = plan_compiler::compile(plan, &opts).validate().unwrap();
    let host = plan_host::Host::new(
        plan_manifest::Manifest::builtin(),
        plan_host::HostOptions {
            replay: Some(dir.join("aspects.0ms.jsonl")),
            ..plan_host::HostOptions::default()
        },
    )
    .unwrap();
    let at = plan_runs::StoreAt::new(dir.join("direct.db"), plan_store::Durability::Normal);
    let writer = plan_runs::Writer::start(&at, |_| {}).unwrap();
    let limits = plan_vm::Limits::default();
    let mut all = Vec::new();
    for _ in 0..LATENCY_RUNS {
        let t = Instant::now();
        let id = plan_store::new_run_id();
        let new = plan_store::OwnedNewRun {
            id: id.clone(),
            plan: "direct".into(),
            source: Some(plan.to_owned()),
            pbc: plan_bytecode::encode(&program),
            presets: serde_json::Map::new(),
            limits: limits.clone(),
            parent: None,
        };
        let report = rt.block_on(async {
            writer.create(new).await.unwrap();
            let start = (Vec::new(), limits.clone());
            writer
                .run(&id, (&host, &program), start, None, (&mut (), None))
                .await
        });
        assert!(report.error.is_none());
        all.push(t.elapsed());
    }
    all
}

/// The service's memory per run while `RUNS` runs are queued or running: its resident
/// memory once they all are, less before (after one run, so that caches are warm), over
/// `RUNS`.
async fn memory(svc: &Service, (streamed, body): (&str, &str)) -> f64 {
    let client = client();
    one_run(&client, &svc.base, streamed).await;
    let (before, _) = svc.rss();
    // NB: submitted 64 at a time, in ≈ 0.2 s: well within a run's 0.9 s of calls, so
    // that every run is queued or running at once.
    let submitted = futures::StreamExt::buffer_unordered(
        futures::stream::iter((0..RUNS).map(|_| submit(&client, &svc.base, body))),
        CLIENTS,
    );
    let ids: Vec<String> = futures::StreamExt::collect(submitted).await;
    assert_eq!(ids.len(), RUNS);
    let (now, _) = svc.rss();
    (now - before) / RUNS as f64
}

fn client() -> reqwest::Client {
    plan_host::install_crypto();
    reqwest::Client::new()
}
