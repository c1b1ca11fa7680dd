//! The queue on a PostgreSQL store (`planvm submit`, `planvm worker`) against a loopback
//! tool server: workers killed mid-way leave their runs to the others, every run ends with
//! the answer of an uninterrupted run, and a completed call is never requested again; a
//! worker paused past its lease cannot write into a run another took; goals submitted are
//! planned once, and end on another worker when theirs dies. Skipped, saying so, without
//! a PostgreSQL server (`scripts/test` starts one, and requires it). A run whose store
//! connections are dropped, which needs no process of its own, is tested in-process:
//! crates/plan-runs/tests/postgres.rs.

mod common;

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{BIN, PgSchema, Reaped, http_tools, planvm, s, until};
use serde_json::{Value, json};

/// Each call's latency.
const LATENCY: Duration = Duration::from_millis(50);
/// Calls per run.
const CALLS: usize = 13;

/// Answers `query` with `query+`.
struct Echo;

impl wiremock::Respond for Echo {
    fn respond(&self, req: &wiremock::Request) -> wiremock::ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let query = body["query"].as_str().unwrap_or_default();
        wiremock::ResponseTemplate::new(200)
            .set_body_json(json!({"text": format!("{query}+")}))
            .set_delay(LATENCY)
    }
}

/// The planner: writes the chain for every goal.
struct Planner;

impl wiremock::Respond for Planner {
    fn respond(&self, _: &wiremock::Request) -> wiremock::ResponseTemplate {
        wiremock::ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": chain()}}]
        }))
    }
}

const PLANNER_PATH: &str = "/v1/chat/completions";

/// A plan of `CALLS` searches, each for what the one before found, from `r${n}`.
fn chain() -> String {
    let mut steps: Vec<Value> = (0..CALLS)
        .map(|i| {
            let query = if i == 0 {
                "r${n}".to_owned()
            } else {
                format!("${{a{}}}", i - 1)
            };
            json!({"seq_no": i, "type": "calling", "parameters": {"tool_name": "vector_search",
                   "tool_params": {"query": query}, "output_vars": [format!("a{i}")]}})
        })
        .collect();
    steps.push(json!({"seq_no": CALLS, "type": "assign",
                      "parameters": {"final_answer": format!("${{a{}}}", CALLS - 1)}}));
    Value::Array(steps).to_string()
}

/// What run `n` answers, uninterrupted.
fn answer(n: usize) -> String {
    format!("r{n}{}", "+".repeat(CALLS))
}

struct Setup {
    server: wiremock::MockServer,
    dir: tempfile::TempDir,
    pg: PgSchema,
}

impl Setup {
    async fn new() -> Option<Setup> {
        let pg = PgSchema::new()?;
        let server = wiremock::MockServer::start().await;
        wiremock::Mock::given(wiremock::matchers::path(PLANNER_PATH))
            .respond_with(Planner)
            .with_priority(1)
            .mount(&server)
            .await;
        wiremock::Mock::given(wiremock::matchers::method("POST"))
            .respond_with(Echo)
            .mount(&server)
            .await;
        let dir = tempfile::tempdir().unwrap();
        let tools = http_tools(
            dir.path(),
            &server.uri(),
            &[("vector_search", "/search", Some("/text"))],
        );
        let planner = format!(
            "[planner.backend]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\nmax_retries = 0\n\n",
            server.uri()
        );
        let text = std::fs::read_to_string(&tools).unwrap();
        std::fs::write(&tools, planner + &text).unwrap();
        std::fs::write(dir.path().join("chain.json"), chain()).unwrap();
        Some(Setup { server, dir, pg })
    }

    fn tools(&self) -> String {
        s(&self.dir.path().join("tools.toml"))
    }

    /// Submits runs `from..to` (`n` preset to each number); their ids in order.
    async fn submit(&self, from: usize, to: usize) -> Vec<String> {
        let list = self.dir.path().join(format!("list{from}.txt"));
        let plan = s(&self.dir.path().join("chain.json"));
        let text: String = (from..to).map(|n| format!("{plan} n=\"{n}\"\n")).collect();
        std::fs::write(&list, text).unwrap();
        let args = ["submit", "--list", &s(&list), "--tools", &self.tools()];
        let out = planvm(self.with_store(&args), &[]).await;
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        let ids: Vec<String> = out.stdout.lines().map(str::to_owned).collect();
        assert_eq!(ids.len(), to - from);
        ids
    }

    fn with_store(&self, args: &[&str]) -> Vec<String> {
        let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        all.extend(["--store".to_owned(), self.pg.url.clone()]);
        all
    }

    fn worker(&self, concurrency: u32) -> Reaped {
        let c = concurrency.to_string();
        let args = [
            "worker",
            "--tools",
            &self.tools(),
            "--concurrency",
            &c,
            "--poll",
            "0.2",
        ];
        Reaped(
            Command::new(BIN)
                .args(self.with_store(&args))
                .env_remove("PLANVM_STORE")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }

    /// Each run's stored (status, final answer, last update), by id.
    fn runs(&self) -> HashMap<String, (String, Value, i64)> {
        self.pg
            .select("SELECT id, status, final_answer, updated_at FROM runs")
            .into_iter()
            .map(|r| {
                let answer = r[2]
                    .as_deref()
                    .map_or(Value::Null, |a| serde_json::from_str(a).unwrap());
                let at = r[3].as_deref().unwrap().parse().unwrap();
                (r[0].clone().unwrap(), (r[1].clone().unwrap(), answer, at))
            })
            .collect()
    }

    fn ok(&self) -> usize {
        self.runs().values().filter(|(s, ..)| s == "ok").count()
    }

    /// Whether every run that has not ended `ok` is locked by a transaction: none is
    /// free to be taken.
    fn unended_all_locked(&self) -> bool {
        let free = "SELECT id FROM runs WHERE status <> 'ok' FOR UPDATE SKIP LOCKED";
        self.pg.select(free).is_empty()
    }

    /// Waits until `n` runs are `ok`.
    async fn until_ok(&self, n: usize, within: Duration) {
        let what = || format!("{} of {n} runs ok", self.ok());
        until(within, what, async || self.ok() >= n).await;
    }

    /// How often each query was sent to the tool server.
    async fn sent(&self) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        let requests = self.server.received_requests().await.unwrap();
        for r in requests.iter().filter(|r| r.url.path() != PLANNER_PATH) {
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            *counts
                .entry(body["query"].as_str().unwrap().to_owned())
                .or_default() += 1;
        }
        counts
    }
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

fn stop(mut child: Reaped) -> Option<i32> {
    signal(&child, "-TERM");
    child.wait().unwrap().code()
}

fn kill(child: Reaped) {
    drop(child);
}

/// Every run of `ids` (run `from + i`) ended `ok` with its uninterrupted answer.
fn all_answered(runs: &HashMap<String, (String, Value, i64)>, ids: &[String], from: usize) {
    for (i, id) in ids.iter().enumerate() {
        let (status, answer_, _) = &runs[id];
        assert_eq!(status, "ok", "run {id}");
        assert_eq!(answer_, &json!(answer(from + i)), "run {id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_killed_mid_way_leave_their_runs_to_the_others_and_repeat_no_completed_call() {
    let Some(q) = Setup::new().await else {
        return;
    };
    const RUNS: usize = 300;
    const CONCURRENCY: u32 = 32;
    let ids = q.submit(0, RUNS).await;
    let listed = planvm(q.with_store(&["runs", "list", "--format", "json"]), &[]).await;
    assert_eq!(
        listed.stdout.matches("\"queued\"").count(),
        RUNS,
        "{}",
        listed.stdout
    );
    let workers = [
        q.worker(CONCURRENCY),
        q.worker(CONCURRENCY),
        q.worker(CONCURRENCY),
    ];
    let [first, second, third] = workers;
    q.until_ok(RUNS / 3, Duration::from_secs(60)).await;
    kill(first);
    q.until_ok(2 * RUNS / 3, Duration::from_secs(60)).await;
    kill(second);
    // NB: the killed workers' runs are ready again once their leases lapse (10 s).
    q.until_ok(RUNS, Duration::from_secs(90)).await;
    assert_eq!(stop(third), Some(0));
    all_answered(&q.runs(), &ids, 0);

    // A call answered and stored is not sent again; one in flight when its worker was
    // killed (at most a worker's concurrency at each kill) is.
    let sent = q.sent().await;
    assert_eq!(sent.len(), RUNS * CALLS, "every call of every run was made");
    let again: usize = sent.values().map(|n| n - 1).sum();
    assert!(
        sent.values().all(|&n| n <= 2),
        "a call sent more than twice"
    );
    assert!(
        again <= 2 * CONCURRENCY as usize,
        "{again} calls sent again, more than were in flight at the kills"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_paused_past_its_lease_cannot_write_into_runs_another_took() {
    let Some(q) = Setup::new().await else {
        return;
    };
    const RUNS: usize = 20;
    let ids = q.submit(0, RUNS).await;
    let paused = q.worker(RUNS as u32);
    // Paused once it holds every run and has calls out.
    let held = async || q.server.received_requests().await.unwrap().len() >= RUNS;
    until(
        Duration::from_secs(30),
        || "the worker took no run".into(),
        held,
    )
    .await;
    signal(&paused, "-STOP");
    let other = q.worker(RUNS as u32);
    // NB: the other takes the paused worker's runs once their leases lapse (10 s), all
    // but those it was stopped in the middle of committing, if any (their rows stay
    // locked by the stopped transaction, which may hold a group of runs): settled once
    // some ended and every run not ended is locked.
    let settled = async || q.ok() > 0 && q.unended_all_locked();
    until(
        Duration::from_secs(90),
        || format!("{} runs ok", q.ok()),
        settled,
    )
    .await;
    let settled = q.runs();
    // Woken again: what it still had to write into runs the other took is refused and
    // changes nothing; a run it was committing, the other could not take: it ends it.
    signal(&paused, "-CONT");
    q.until_ok(RUNS, Duration::from_secs(30)).await;
    assert_eq!(stop(paused), Some(0));
    assert_eq!(stop(other), Some(0));
    let after = q.runs();
    for (id, ended) in &settled {
        if ended.0 == "ok" {
            assert_eq!(
                &after[id], ended,
                "run {id} was written after another took it"
            );
        }
    }
    all_answered(&after, &ids, 0);
}

/// Goals submitted read as queued until a worker asks each of them once; a worker killed
/// while their plans run leaves them to another, which ends each with the answer of an
/// uninterrupted run, sends no completed call again and does not ask the planner again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goals_submitted_are_planned_once_and_end_elsewhere_when_their_worker_dies() {
    let Some(q) = Setup::new().await else {
        return;
    };
    const GOALS: usize = 4;
    let mut ids = Vec::new();
    for n in 0..GOALS {
        let (goal, var) = (format!("goal {n}"), format!("n=\"{n}\""));
        let args = ["submit", "--goal", &goal, "--var", &var];
        let out = planvm(q.with_store(&args), &[]).await;
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        ids.push(out.stdout.trim().to_owned());
    }
    // NB: a goal's plans are checked by its worker's planner, not at submission.
    let args = ["submit", "--goal", "g", "--tools", &q.tools()];
    let out = planvm(q.with_store(&args), &[]).await;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    let listed = planvm(q.with_store(&["runs", "list", "--format", "json"]), &[]).await;
    assert_eq!(
        listed.stdout.matches("\"queued\"").count(),
        GOALS,
        "{}",
        listed.stdout
    );
    let first = q.worker(8);
    // Killed once every goal's plan has its first call out.
    let started = async || q.sent().await.len() >= GOALS;
    let what = || "the goals' plans did not start".into();
    until(Duration::from_secs(30), what, started).await;
    kill(first);
    let second = q.worker(8);
    let goals = || -> HashMap<String, (String, Value)> {
        q.pg.select("SELECT id, status, answer FROM goals")
            .into_iter()
            .map(|r| {
                let answer = r[2]
                    .as_deref()
                    .map_or(Value::Null, |a| serde_json::from_str(a).unwrap());
                (r[0].clone().unwrap(), (r[1].clone().unwrap(), answer))
            })
            .collect()
    };
    let answered = async || goals().values().all(|(status, _)| status == "answered");
    let what = || format!("goals not answered: {:?}", goals());
    until(Duration::from_secs(90), what, answered).await;
    assert_eq!(stop(second), Some(0));
    let ended = goals();
    for (n, id) in ids.iter().enumerate() {
        assert_eq!(
            ended[id],
            ("answered".to_owned(), json!(answer(n))),
            "goal {id}"
        );
    }
    let asked = q.server.received_requests().await.unwrap();
    let planned = asked
        .iter()
        .filter(|r| r.url.path() == PLANNER_PATH)
        .count();
    assert_eq!(planned, GOALS, "each goal planned once");
    let sent = q.sent().await;
    assert_eq!(
        sent.len(),
        GOALS * CALLS,
        "every call of every plan was made"
    );
    let again: usize = sent.values().map(|n| n - 1).sum();
    assert!(
        again <= GOALS,
        "{again} calls sent again, more than were in flight at the kill"
    );
}
