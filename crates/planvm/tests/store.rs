//! Durable runs against a loopback HTTP tool server: `planvm run --store` killed with
//! SIGKILL at many points, then `planvm resume`, must give the uninterrupted answer, and
//! no call whose answer the store holds is requested again. Also: a loop killed mid-loop,
//! a `write` call in flight, questions to a person, two resumes of one run, bad and
//! damaged stores and ids, stores this process may not write. (What the engine does with
//! a stored run, without a process to kill: plan-runs' tests/engine.rs and damaged.rs.)

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use common::{BIN, Out, files, json_lines, planvm, s};

/// Tool latency of the loopback server.
const LATENCY: Duration = Duration::from_millis(250);

/// Answers every tool from its request: `/cond` says whether the number in the prompt is
/// greater than zero; every other path echoes `path(body)`. While `down` is set, `/llm`
/// answers 400 (not retried).
struct Echo {
    down: Arc<AtomicBool>,
}

impl Respond for Echo {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let path = req.url.path().to_owned();
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        if path == "/llm" && self.down.load(Ordering::SeqCst) {
            return ResponseTemplate::new(400).set_body_string("backend is down");
        }
        let text = if path == "/cond" {
            let prompt = body["prompt"].as_str().unwrap_or("");
            let n: i64 = prompt
                .split(|c: char| !c.is_ascii_digit() && c != '-')
                .find_map(|w| w.parse().ok())
                .unwrap_or(0);
            (if n > 0 { "true" } else { "false" }).to_owned()
        } else {
            format!("{path}({body})")
        };
        ResponseTemplate::new(200)
            .set_body_json(json!({ "text": text }))
            .set_delay(LATENCY)
    }
}

struct Fixture {
    server: MockServer,
    down: Arc<AtomicBool>,
    dir: tempfile::TempDir,
    tools: PathBuf,
    /// The runs' store is this PostgreSQL schema rather than a file per run.
    pg: Option<common::PgSchema>,
}

async fn fixture() -> Fixture {
    let server = MockServer::start().await;
    let down = Arc::new(AtomicBool::new(false));
    Mock::given(method("POST"))
        .respond_with(Echo { down: down.clone() })
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let base = server.uri();
    let mut text = String::new();
    for (tool, route) in [
        ("vector_search", "/search"),
        ("llm_generate", "/llm"),
        ("jmp_condition", "/cond"),
    ] {
        text.push_str(&format!(
            "[[tool]]\nname = \"{tool}\"\n[tool.backend]\nkind = \"http\"\nurl = \"{base}{route}\"\npointer = \"/text\"\n\n"
        ));
    }
    text.push_str(&format!(
        "[[tool]]\nname = \"post_note\"\neffects = \"write\"\nparams = [ {{ name = \"text\", type = \"string\", required = true }} ]\n\
         [tool.backend]\nkind = \"http\"\nurl = \"{base}/note\"\npointer = \"/text\"\n"
    ));
    let tools = dir.path().join("tools.toml");
    std::fs::write(&tools, text).unwrap();
    Fixture {
        server,
        down,
        dir,
        tools,
        pg: None,
    }
}

impl Fixture {
    fn plan(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// Every request so far: (path, body).
    async fn requests(&self) -> Vec<(String, Value)> {
        self.server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r.url.path().to_owned(),
                    serde_json::from_slice(&r.body).unwrap_or(Value::Null),
                )
            })
            .collect()
    }

    /// `planvm run PLAN --run-id ID` with the fixture's tools and the store `db`.
    fn run_as(&self, id: &str, plan: &Path, db: &Path) -> Vec<String> {
        let mut args = self.args(&["run"], Some(plan), db);
        args.extend(["--run-id".into(), id.into()]);
        args
    }

    fn args(&self, cmd: &[&str], plan: Option<&Path>, db: &Path) -> Vec<String> {
        let mut a: Vec<String> = cmd.iter().map(|s| (*s).to_owned()).collect();
        if let Some(p) = plan {
            a.push(s(p));
        }
        a.extend(["--tools".into(), s(&self.tools), "--store".into(), s(db)]);
        a
    }
}

/// Three independent searches, an LLM call on them, a dependent search, a last LLM call.
const DAG: &str = r#"[
 {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "a", "top_k": 1}, "output_vars": ["a"]}},
 {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "b", "top_k": 1}, "output_vars": ["b"]}},
 {"seq_no": 2, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "c", "top_k": 1}, "output_vars": ["c"]}},
 {"seq_no": 3, "type": "calling", "parameters": {"tool_name": "llm_generate", "tool_params": {"prompt": "sum ${a} ${b} ${c}"}, "output_vars": ["d"]}},
 {"seq_no": 4, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "more on ${d}", "top_k": 1}, "output_vars": ["e"]}},
 {"seq_no": 5, "type": "calling", "parameters": {"tool_name": "llm_generate", "tool_params": {"prompt": "answer from ${e}"}, "output_vars": ["final_answer"]}}
]"#;

/// A loop of three LLM calls, counted down with arithmetic and an LLM condition.
const LOOP: &str = r#"[
 {"seq_no": 0, "type": "assign", "parameters": {"n": 3, "log": "log"}},
 {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "llm_generate", "tool_params": {"prompt": "line ${n}"}, "output_vars": ["line"]}},
 {"seq_no": 2, "type": "assign", "parameters": {"log": "${log}|${line}", "n": "${n} - 1"}},
 {"seq_no": 3, "type": "jmp", "parameters": {"condition_prompt": "left: ${n}", "jump_if_true": 1, "jump_if_false": 4}},
 {"seq_no": 4, "type": "assign", "parameters": {"final_answer": "${log}"}}
]"#;

/// The calls the store holds an answer for: (path, body) as the server saw them. None
/// when the run is not in the store (killed before it was created).
async fn answered_in_store(db: &Path, id: &str) -> Option<Vec<(String, Value)>> {
    let args = ["runs", "show", id, "--store", &s(db), "--format", "json"];
    let out = planvm(args, &[]).await;
    if out.code == Some(66) || out.code == Some(65) {
        // Killed before the run (or the store) was created.
        return None;
    }
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let shown: Value = serde_json::from_str(&out.stdout).unwrap();
    let route = |tool: &str| match tool {
        "vector_search" => "/search",
        "llm_generate" => "/llm",
        "jmp_condition" => "/cond",
        _ => "/note",
    };
    let calls = shown["calls"].as_array().unwrap().iter();
    Some(
        calls
            .filter(|c| !c["output"].is_null())
            .map(|c| {
                (
                    route(c["tool"].as_str().unwrap()).to_owned(),
                    c["args"].clone(),
                )
            })
            .collect(),
    )
}

/// `planvm runs show ID --format json`.
async fn show_json(db: &Path, id: &str) -> Value {
    let args = ["runs", "show", id, "--store", &s(db), "--format", "json"];
    let out = planvm(args, &[]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

/// `planvm runs list --format json`: one object per run.
async fn runs_json(db: &Path) -> Vec<Value> {
    let args = ["runs", "list", "--store", &s(db), "--format", "json"];
    let out = planvm(args, &[]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    json_lines(&out.stdout)
}

/// Starts planvm in the background, its output discarded.
fn spawn_planvm(args: &[String]) -> std::process::Child {
    Command::new(BIN)
        .args(args)
        .env_remove("PLANVM_STORE")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Starts `planvm run --store`, kills it with SIGKILL after `after`, and waits for it.
async fn run_and_kill(args: Vec<String>, after: Duration) {
    let mut child = spawn_planvm(&args);
    tokio::time::sleep(after).await;
    let _ = child.kill();
    tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
}

/// The uninterrupted answer of `plan`, without a store.
async fn uninterrupted(f: &Fixture, plan: &Path) -> String {
    let out = planvm(["run", &s(plan), "--tools", &s(&f.tools)], &[]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    out.stdout
}

async fn resume(f: &Fixture, db: &Path, id: &str, extra: &[&str]) -> Out {
    let mut args = f.args(&["resume", id], None, db);
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    planvm(args, &[]).await
}

/// Kills a run at `cut` and resumes it: the same answer, and no call answered in the
/// store is requested again. Returns (calls answered in the store, calls the resume sent).
async fn kill_and_resume(
    f: &Fixture,
    plan: &Path,
    want: &str,
    cut: Duration,
    id: &str,
) -> (usize, usize) {
    let db = match &f.pg {
        Some(pg) => PathBuf::from(&pg.url),
        None => f.dir.path().join(format!("{id}.db")),
    };
    let args = f.args(&["run"], Some(plan), &db);
    let mut args = args;
    args.extend(["--run-id".into(), id.into()]);
    run_and_kill(args, cut).await;
    let Some(saved) = answered_in_store(&db, id).await else {
        return (0, 0);
    };
    let before = f.requests().await.len();
    let out = resume(f, &db, id, &[]).await;
    assert_eq!(out.code, Some(0), "cut at {cut:?}: {}", out.stderr);
    assert_eq!(out.stdout, want, "cut at {cut:?}");
    let again = f.requests().await;
    for req in &again[before..] {
        assert!(
            !saved.contains(req),
            "cut at {cut:?}: {req:?} was answered and stored, but requested again"
        );
    }
    let counts = (saved.len(), again.len() - before);
    // The count of calls its row keeps (the store counts a resumed run's at its end) is
    // the journal's, folded by `runs show`: a call committed again by the resume counts
    // once.
    let listed = runs_json(&db).await;
    let shown = show_json(&db, id).await;
    let committed = shown["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["state"] == "committed")
        .count();
    assert_eq!(listed[0]["tool_calls"], committed, "cut at {cut:?}");
    // A finished run prints its stored answer and calls nothing.
    let before = f.requests().await.len();
    let out = resume(f, &db, id, &[]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, want);
    assert_eq!(f.requests().await.len(), before);
    counts
}

/// [`kill_and_resume`] at each cut (ms after the start), runs `<prefix><i>`. The cuts must
/// include some after which the store held answers and some after which the resume had
/// calls left to make, or the test proves nothing.
async fn kill_at_each(f: &Fixture, plan: &Path, want: &str, cuts: &[u64], prefix: &str) {
    let mut counts = Vec::new();
    for (i, ms) in cuts.iter().enumerate() {
        let cut = Duration::from_millis(*ms);
        counts.push(kill_and_resume(f, plan, want, cut, &format!("{prefix}{i}")).await);
    }
    assert!(counts.iter().any(|&(saved, _)| saved > 0), "{counts:?}");
    assert!(counts.iter().any(|&(_, sent)| sent > 0), "{counts:?}");
    assert!(
        counts.iter().any(|&(saved, sent)| saved > 0 && sent > 0),
        "{counts:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_at_any_point_resumes_to_the_same_answer_without_repeating_stored_calls() {
    let f = fixture().await;
    let plan = f.plan("dag.json", DAG);
    let want = uninterrupted(&f, &plan).await;
    // The run takes about 4 × LATENCY: cuts before, during and between its levels.
    kill_at_each(
        &f,
        &plan,
        &want,
        &[30, 150, 300, 420, 560, 700, 850, 1000],
        "dag",
    )
    .await;
}

/// The same in a PostgreSQL store (every run of the test in one schema).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_at_any_point_in_postgresql_resumes_to_the_same_answer() {
    let Some(pg) = common::PgSchema::new() else {
        return;
    };
    let mut f = fixture().await;
    f.pg = Some(pg);
    let plan = f.plan("dag.json", DAG);
    let want = uninterrupted(&f, &plan).await;
    kill_at_each(&f, &plan, &want, &[30, 300, 560, 850], "pgdag").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_killed_mid_loop_resumes_to_the_same_answer() {
    let f = fixture().await;
    let plan = f.plan("loop.json", LOOP);
    let want = uninterrupted(&f, &plan).await;
    assert_eq!(want.matches("/llm(").count(), 3, "{want}");
    kill_at_each(&f, &plan, &want, &[400, 900, 1300], "loop").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_call_in_flight_is_resent_only_when_asked() {
    let f = fixture().await;
    let plan = f.plan(
        "write.json",
        r#"[{"seq_no": 0, "type": "calling", "parameters": {"tool_name": "post_note", "tool_params": {"text": "hello"}, "output_vars": ["final_answer"]}}]"#,
    );
    let db = f.dir.path().join("write.db");
    let args = f.run_as("w", &plan, &db);
    run_and_kill(args, LATENCY / 2 + Duration::from_millis(50)).await;
    let sent = f.requests().await.len();
    assert_eq!(sent, 1, "the write call was sent before the kill");

    let out = resume(&f, &db, "w", &[]).await;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("--retry-unknown-writes"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("`post_note` (seq_no 0)"),
        "{}",
        out.stderr
    );
    assert_eq!(f.requests().await.len(), 1, "refused without sending");

    let out = resume(&f, &db, "w", &["--retry-unknown-writes"]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout.trim(), r#"/note({"text":"hello"})"#);
}

/// Two searches, a question whose choices come from them, a search after it that
/// depends on the answer and one that does not, and an answer from both.
const ASKS: &str = r#"[
 {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "regions", "top_k": 1}, "output_vars": ["r"]}},
 {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "years", "top_k": 1}, "output_vars": ["y"]}},
 {"seq_no": 2, "type": "calling", "parameters": {"tool_name": "ask_user", "tool_params": {"question": "Which region? (${r})", "choices": ["EU", "US"]}, "output_vars": ["region"]}},
 {"seq_no": 3, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "other", "top_k": 1}, "output_vars": ["o"]}},
 {"seq_no": 4, "type": "calling", "parameters": {"tool_name": "llm_generate", "tool_params": {"prompt": "sales in ${region} ${y} ${o}"}, "output_vars": ["final_answer"]}}
]"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_stops_the_run_until_another_process_answers_it_and_nothing_is_sent_twice() {
    let f = fixture().await;
    let plan = f.plan("asks.json", ASKS);
    let db = f.dir.path().join("asks.db");
    let args = f.run_as("q", &plan, &db);
    let out = planvm(args, &[]).await;
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    let question = r#"Which region? (/search({"query":"regions","top_k":1}))"#;
    assert_eq!(out.stdout, format!("{question}\n  - EU\n  - US\n"));
    assert!(
        out.stderr.contains("planvm resume q --input"),
        "{}",
        out.stderr
    );
    // Nothing after the question was sent, not even the search that does not need it.
    let paths: Vec<String> = f.requests().await.into_iter().map(|(p, _)| p).collect();
    assert_eq!(paths, ["/search", "/search"]);
    let listed = runs_json(&db).await;
    assert_eq!(listed[0]["status"], "needs_input");
    assert_eq!(listed[0]["question"]["question"], question);

    // Without an answer, or with one that does not answer it: asked again, nothing run.
    let out = resume(&f, &db, "q", &["--format", "json"]).await;
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    let asked: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(asked["status"], "needs_input");
    assert_eq!(asked["question"], question);
    assert_eq!(asked["choices"], json!(["EU", "US"]));
    assert_eq!(asked["run_id"], "q");
    for (bad, why) in [("", "empty"), ("Asia", "`EU`, `US`")] {
        let out = resume(&f, &db, "q", &["--input", bad]).await;
        assert_eq!(out.code, Some(2), "{}", out.stderr);
        assert!(out.stderr.contains(why), "{}", out.stderr);
    }
    assert_eq!(f.requests().await.len(), 2);

    let out = resume(&f, &db, "q", &["--input", "EU"]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.starts_with("/llm("), "{}", out.stdout);
    assert!(out.stdout.contains("sales in EU"), "{}", out.stdout);
    let requests = f.requests().await;
    let paths: Vec<&str> = requests.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        ["/search", "/search", "/search", "/llm"],
        "each call once"
    );
    // The answer is the call's output, on record: a second answer is refused.
    let shown = show_json(&db, "q").await;
    let asked = shown["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["tool"] == "ask_user")
        .unwrap();
    assert_eq!(asked["output"], "EU");
    let out = resume(&f, &db, "q", &["--input", "US"]).await;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("not waiting for input"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_before_or_at_its_question_is_answered_once_and_repeats_nothing() {
    let f = fixture().await;
    let plan = f.plan("asks.json", ASKS);
    // Killed while the searches are out, just after they answered, and after the run
    // stopped at the question (its process is gone either way).
    for (i, ms) in [100u64, 300, 1500].into_iter().enumerate() {
        let id = format!("k{i}");
        let db = f.dir.path().join(format!("{id}.db"));
        let args = f.run_as(&id, &plan, &db);
        run_and_kill(args, Duration::from_millis(ms)).await;
        let Some(saved) = answered_in_store(&db, &id).await else {
            continue;
        };
        let before = f.requests().await.len();
        // An interrupted run goes on to its question; one at it is asked again.
        let out = resume(&f, &db, &id, &[]).await;
        assert_eq!(out.code, Some(3), "cut {ms}: {}", out.stderr);
        let out = resume(&f, &db, &id, &["--input", "US"]).await;
        assert_eq!(out.code, Some(0), "cut {ms}: {}", out.stderr);
        assert!(out.stdout.contains("sales in US"), "{}", out.stdout);
        for req in &f.requests().await[before..] {
            assert!(
                !saved.contains(req),
                "cut {ms}: {req:?} was stored, sent again"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_held_by_a_live_process_is_not_resumed_twice() {
    let f = fixture().await;
    let plan = f.plan("dag.json", DAG);
    let db = f.dir.path().join("busy.db");
    let args = f.run_as("b", &plan, &db);
    let mut child = spawn_planvm(&args);
    tokio::time::sleep(LATENCY).await;
    let out = resume(&f, &db, "b", &[]).await;
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(out.code, Some(75), "{}", out.stderr);
    assert!(
        out.stderr.contains("being run by another process"),
        "{}",
        out.stderr
    );
    // Its process is gone now: the run is interrupted and can be resumed at once.
    let list = planvm(["runs", "list", "--store", &s(&db)], &[]).await;
    assert!(list.stdout.contains("interrupted"), "{}", list.stdout);
    let out = resume(&f, &db, "b", &[]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cancelled_while_it_runs_stops_at_its_next_commit_point() {
    let f = fixture().await;
    let plan = f.plan("dag.json", DAG);
    let db = f.dir.path().join("cancel.db");
    let args = f.run_as("c", &plan, &db);
    let mut child = spawn_planvm(&args);
    tokio::time::sleep(LATENCY).await;
    let cancel = || planvm(["runs", "cancel", "c", "--store", &s(&db)], &[]);
    let out = cancel().await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stderr.contains("cancelled run c"), "{}", out.stderr);
    // Its process stops on its own, at its next commit point, with a failed run.
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(1));
    let shown = show_json(&db, "c").await;
    assert_eq!(shown["run"]["status"], "failed", "{shown}");
    assert_eq!(shown["run"]["error"]["code"], "R0013", "{shown}");
    let out = cancel().await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stderr.contains("had finished"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_stores_and_ids_get_clear_errors() {
    let f = fixture().await;
    let dir = f.dir.path();
    let not_sqlite = dir.join("notes.txt");
    std::fs::write(
        &not_sqlite,
        "just text, long enough to look like a file header........",
    )
    .unwrap();
    let out = planvm(["runs", "list", "--store", &s(&not_sqlite)], &[]).await;
    assert_eq!(out.code, Some(65), "{}", out.stderr);
    assert!(
        out.stderr.contains("is not a planvm run store"),
        "{}",
        out.stderr
    );
    assert_eq!(
        std::fs::read_to_string(&not_sqlite).unwrap(),
        "just text, long enough to look like a file header........",
        "nothing written"
    );

    // Commands that read do not create a store.
    let db = dir.join("runs.db");
    let out = resume(&f, &db, "nope", &[]).await;
    assert_eq!(out.code, Some(66), "{}", out.stderr);
    assert!(out.stderr.contains("no store at"), "{}", out.stderr);
    assert!(!db.exists());

    let plan = f.plan(
        "one.json",
        r#"[{"seq_no": 0, "type": "assign", "parameters": {"final_answer": "x"}}]"#,
    );
    let args = f.run_as("x", &plan, &db);
    let out = planvm(args.clone(), &[]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stderr.contains("run x"), "{}", out.stderr);
    let out = resume(&f, &db, "nope", &[]).await;
    assert_eq!(out.code, Some(66), "{}", out.stderr);
    assert!(out.stderr.contains("no run `nope`"), "{}", out.stderr);

    // The store is an input: no output may overwrite it.
    let mut clobber = args.clone();
    clobber.extend(["--trace".into(), s(&db)]);
    let out = planvm(clobber, &[]).await;
    assert_eq!(out.code, Some(64), "{}", out.stderr);
    let out = planvm(args, &[]).await;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("already exists"), "{}", out.stderr);

    let args = f.run_as("a/b", &plan, &db);
    let out = planvm(args, &[]).await;
    assert_eq!(out.code, Some(2), "{}", out.stderr);

    // PLANVM_STORE sets the default store.
    let out = planvm(["runs", "list"], &[("PLANVM_STORE", db.to_str().unwrap())]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.starts_with("x "), "{}", out.stdout);
}

/// `PRAGMA integrity_check` of the store at `db`.
fn integrity(db: &Path) -> String {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_output_may_be_written_onto_a_file_sqlite_keeps_beside_the_store() {
    let f = fixture().await;
    let dir = f.dir.path();
    let db = dir.join("s.db");
    let plan = f.plan("one.json", LOOP);
    let first = f.run_as("A", &plan, &db);
    let out = planvm(first, &[]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    // A failed run, which `resume` would go on with (a finished one writes nothing).
    f.down.store(true, Ordering::SeqCst);
    let failed = f.run_as("F", &plan, &db);
    let out = planvm(failed, &[]).await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    f.down.store(false, Ordering::SeqCst);
    // The files beside the store exist only while a process has it open: refused by
    // name, however spelled, as well as by identity.
    let dotted = dir.join(".").join("s.db");
    for base in [&db, &dotted] {
        for suffix in ["-wal", "-shm", "-journal"] {
            let target = format!("{}{suffix}", s(base));
            for (cmd, flag) in [
                ("run", "--trace"),
                ("run", "--record"),
                ("resume", "--trace"),
                ("branch", "--trace"),
            ] {
                let mut args = match cmd {
                    "run" => f.args(&["run"], Some(&plan), &db),
                    "resume" => f.args(&["resume", "F"], None, &db),
                    _ => f.args(&["branch", "A", "--at", "2", "--plan"], Some(&plan), &db),
                };
                args.extend([flag.into(), target.clone()]);
                let out = planvm(args, &[]).await;
                assert_eq!(out.code, Some(64), "{cmd} {flag} {target}: {}", out.stderr);
                assert!(
                    out.stderr.contains("a file SQLite keeps beside it"),
                    "{}",
                    out.stderr
                );
            }
        }
    }
    // A store named through a symbolic link, even to a store not created yet: SQLite
    // keeps its files beside the link's target.
    #[cfg(unix)]
    {
        let link = dir.join("link.db");
        std::os::unix::fs::symlink(dir.join("elsewhere.db"), &link).unwrap();
        let mut args = f.args(&["run"], Some(&plan), &link);
        args.extend(["--trace".into(), s(&dir.join("elsewhere.db-wal"))]);
        let out = planvm(args, &[]).await;
        assert_eq!(out.code, Some(64), "{}", out.stderr);
        assert!(!dir.join("elsewhere.db").exists());
    }
    assert_eq!(integrity(&db), "ok");
    let listed: Vec<String> = runs_json(&db)
        .await
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed, ["A", "F"]);
    assert!(!dir.join("s.db-shm").exists() && !dir.join("s.db-wal").exists());
}

/// A damaged store exits 65 naming the store, and prints nothing on stdout; a file that
/// is not a store is not written over. (Each kind of damage, through the engine:
/// plan-runs' tests/damaged.rs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_store_exits_65_naming_it() {
    let f = fixture().await;
    let plan = f.plan("dag.json", DAG);
    let db = f.dir.path().join("s.db");
    let args = f.run_as("A", &plan, &db);
    let out = planvm(args, &[]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            "UPDATE journal SET entry = '[{\"sent\": ' WHERE seq = 0; \
             UPDATE runs SET tool_calls = NULL",
        )
        .unwrap();
    for cmd in [&["runs", "list"][..], &["runs", "show", "A", "--at", "3"]] {
        let mut args: Vec<String> = cmd.iter().map(|a| (*a).to_owned()).collect();
        args.extend(["--store".into(), s(&db)]);
        let out = planvm(args, &[]).await;
        assert_eq!(out.code, Some(65), "{cmd:?}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{}", out.stdout);
        for name in [s(&db).as_str(), "the store is damaged"] {
            assert!(out.stderr.contains(name), "{cmd:?}: {}", out.stderr);
        }
    }
    let one = f.dir.path().join("one.db");
    std::fs::write(&one, "x").unwrap();
    let out = planvm(f.args(&["run"], Some(&plan), &one), &[]).await;
    assert_eq!(out.code, Some(65), "{}", out.stderr);
    assert_eq!(std::fs::read(&one).unwrap(), b"x");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_from_a_middle_step_makes_only_the_calls_from_that_step_on() {
    let f = fixture().await;
    let plan = f.plan("dag.json", DAG);
    let db = f.dir.path().join("branch.db");
    let args = f.run_as("parent", &plan, &db);
    let out = planvm(args, &[]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let parent_answer = out.stdout;

    // The new plan asks something else from seq 4 on.
    let new = f.plan(
        "new.json",
        &DAG.replace("more on ${d}", "other ${d} ${a}")
            .replace("answer from ${e}", "new answer from ${e}"),
    );
    let before = f.requests().await.len();
    let mut args = f.args(&["branch", "parent", "--at", "4", "--plan"], None, &db);
    args.insert(5, s(&new));
    args.extend(["--run-id".into(), "child".into()]);
    let out = planvm(args, &[]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stderr.contains("run child"), "{}", out.stderr);
    assert!(
        !out.stderr.contains("warning"),
        "no false warnings: {}",
        out.stderr
    );
    assert!(
        out.stdout.starts_with(
            "/llm({\"prompt\":\"new answer from /search({\\\"query\\\":\\\"other /llm("
        ),
        "{}",
        out.stdout
    );
    let made: Vec<String> = f.requests().await[before..]
        .iter()
        .map(|(p, _)| p.clone())
        .collect();
    assert_eq!(made, ["/search", "/llm"]);

    // The parent is untouched; the branch names it.
    let out = resume(&f, &db, "parent", &[]).await;
    assert_eq!(out.stdout, parent_answer);
    let rows = runs_json(&db).await;
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["id"], "child");
    assert_eq!(rows[1]["parent"], "parent");
    assert_eq!(rows[1]["branch_seq"], 4);
    assert_eq!(rows[1]["tool_calls"], 2);

    // `runs show --at` sees the branch point's variables.
    let store = s(&db);
    let show = [
        "runs", "show", "parent", "--store", &store, "--at", "4", "--format", "json",
    ];
    let out = planvm(show, &[]).await;
    let vars: Value = serde_json::from_str(&out.stdout).unwrap();
    let names: Vec<&str> = vars
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(names, ["a", "b", "c", "d"]);

    // A variable that neither exists at the branch point nor is assigned: an error, and
    // nothing runs or is stored.
    let bad = f.plan(
        "bad.json",
        r#"[{"seq_no": 4, "type": "assign", "parameters": {"final_answer": "${nowhere}"}}]"#,
    );
    let mut args = f.args(&["branch", "parent", "--at", "4", "--plan"], None, &db);
    args.insert(5, s(&bad));
    let out = planvm(args, &[]).await;
    assert_eq!(out.code, Some(65), "{}", out.stderr);
    assert!(out.stderr.contains("E0211"), "{}", out.stderr);

    // A branch point the run never reached.
    let mut args = f.args(&["branch", "parent", "--at", "9", "--plan"], None, &db);
    args.insert(5, s(&new));
    let out = planvm(args, &[]).await;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("no instruction with seq_no 9"),
        "{}",
        out.stderr
    );
    assert_eq!(runs_json(&db).await.len(), 2, "nothing stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_journals_every_run_under_ids_from_the_batch_and_run_names() {
    let f = fixture().await;
    let plans = f.dir.path().join("plans");
    std::fs::create_dir(&plans).unwrap();
    std::fs::write(plans.join("dag.json"), DAG).unwrap();
    std::fs::write(plans.join("loop.json"), LOOP).unwrap();
    let db = f.dir.path().join("batch.db");
    let mut args = f.args(&["batch"], Some(&plans), &db);
    args.extend(["--batch-id".into(), "nightly".into()]);
    let out = planvm(args.clone(), &[]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines = json_lines(&out.stdout);
    let ids: Vec<&str> = lines
        .iter()
        .map(|l| l["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["nightly.dag", "nightly.loop"]);
    // The store was closed before the batch exited: its WAL is copied back and gone, so
    // the database file alone holds every run.
    let wal = f.dir.path().join("batch.db-wal");
    assert!(!wal.exists(), "the batch left its WAL behind");
    for (line, id) in lines.iter().zip(&ids) {
        let out = resume(&f, &db, id, &["--format", "json"]).await;
        let stored: Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(stored["final_answer"], line["final_answer"], "{id}");
        assert_eq!(stored["tool_calls"], line["tool_calls"], "{id}");
    }

    // The same batch id again: refused before anything runs.
    let before = f.requests().await.len();
    let out = planvm(args, &[]).await;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("choose another --batch-id"),
        "{}",
        out.stderr
    );
    assert_eq!(f.requests().await.len(), before);
}

/// Runs planvm as a process that may read `dir`'s store but not write it: as this user
/// when the directory's permissions stop it, else (root) as `nobody`, from a copy of the
/// binary `nobody` may run. Gives the directory back its permissions when dropped.
struct Reader {
    bin: PathBuf,
    as_nobody: bool,
    dir: PathBuf,
}

impl Reader {
    /// `dir`'s files (in `base`) made read-only, and `dir` given `dir_mode`. None (the
    /// test is skipped, and says so) where this process may write anyway and cannot run
    /// anything as `nobody`.
    fn new(base: &Path, dir: &Path, dir_mode: u32) -> Option<Reader> {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path, m: u32| std::fs::set_permissions(p, PermissionsExt::from_mode(m));
        for entry in std::fs::read_dir(dir).unwrap() {
            mode(&entry.unwrap().path(), 0o444).unwrap();
        }
        mode(dir, dir_mode).unwrap();
        mode(base, 0o755).unwrap();
        let store = dir.join("runs.db");
        let as_nobody = std::fs::OpenOptions::new().write(true).open(&store).is_ok();
        let mut reader = Reader {
            bin: PathBuf::from(BIN),
            as_nobody,
            dir: dir.to_owned(),
        };
        if !as_nobody {
            return Some(reader);
        }
        reader.bin = base.join("planvm");
        std::fs::copy(BIN, &reader.bin).unwrap();
        mode(&reader.bin, 0o755).unwrap();
        match reader.command().arg("--version").output() {
            Ok(out) if out.status.success() => Some(reader),
            other => {
                eprintln!("skipped: cannot run planvm as nobody here: {other:?}");
                None
            }
        }
    }

    fn command(&self) -> Command {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(&self.bin);
        cmd.env_remove("PLANVM_STORE");
        if self.as_nobody {
            cmd.uid(65534).gid(65534);
        }
        cmd
    }

    async fn planvm(&self, args: &[&str]) -> Out {
        let mut cmd = self.command();
        cmd.args(args);
        let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap();
        Out::of(out)
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&self.dir, PermissionsExt::from_mode(0o755));
    }
}

/// A directory `shared` of the fixture's, holding a store with one finished run, `done`,
/// of [`DAG`]: (the directory, the store, the plan).
async fn a_finished_run_in_shared(f: &Fixture) -> (PathBuf, PathBuf, PathBuf) {
    let shared = f.dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let db = shared.join("runs.db");
    let plan = f.plan("dag.json", DAG);
    let args = f.run_as("done", &plan, &db);
    let out = planvm(args, &[]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    (shared, db, plan)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_this_process_may_not_write_is_still_listed_and_shown() {
    let f = fixture().await;
    let (shared, db, _) = a_finished_run_in_shared(&f).await;
    let listed = runs_json(&db).await;
    let shown = show_json(&db, "done").await;
    let db_arg = s(&db);
    let before = files(&shared);
    assert_eq!(before, ["runs.db"], "the last process merged the WAL");

    let Some(reader) = Reader::new(f.dir.path(), &shared, 0o555) else {
        return;
    };
    let out = reader
        .planvm(&["runs", "list", "--store", &db_arg, "--format", "json"])
        .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(json_lines(&out.stdout), listed);
    let out = reader
        .planvm(&[
            "runs", "show", "done", "--store", &db_arg, "--format", "json",
        ])
        .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(serde_json::from_str::<Value>(&out.stdout).unwrap(), shown);
    let out = reader
        .planvm(&[
            "runs", "show", "done", "--store", &db_arg, "--at", "4", "--format", "json",
        ])
        .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let vars: Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(vars.get("d").is_some() && vars.get("e").is_none(), "{vars}");
    let out = reader
        .planvm(&["runs", "show", "nope", "--store", &db_arg])
        .await;
    assert_eq!(out.code, Some(66), "{}", out.stderr);

    // Continuing a run writes: refused, by name.
    let tools = s(&f.tools);
    let out = reader
        .planvm(&["resume", "done", "--store", &db_arg, "--tools", &tools])
        .await;
    assert_eq!(out.code, Some(74), "{}", out.stderr);
    assert!(
        out.stderr.contains("may not write the store"),
        "{}",
        out.stderr
    );
    assert_eq!(
        files(&shared),
        before,
        "a reader leaves nothing beside the store"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_going_on_is_listed_by_a_process_that_may_not_write_its_store() {
    let f = fixture().await;
    let shared = f.dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let db = shared.join("runs.db");
    // Twenty rounds of two calls: ten seconds (it is killed once listed).
    let plan = f.plan("loop.json", &LOOP.replace("\"n\": 3", "\"n\": 20"));
    let args = f.run_as("going", &plan, &db);
    let mut child = spawn_planvm(&args);
    let wal = shared.join("runs.db-wal");
    for _ in 0..200 {
        if wal.exists() && runs_json(&db).await.len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // NB: the running process keeps its WAL and index; the reader reads through them.
    let Some(reader) = Reader::new(f.dir.path(), &shared, 0o555) else {
        let _ = child.kill();
        let _ = child.wait();
        return;
    };
    let out = reader
        .planvm(&["runs", "list", "--store", &s(&db), "--format", "json"])
        .await;
    let still_running = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let run: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(run["id"], "going");
    assert!(still_running, "the run went on while it was listed");
    assert_eq!(run["status"], "running", "{run}");
}

/// [`DAG`] on a topic preset per run, so that each run's calls are its own.
fn topic_dag() -> String {
    DAG.replace("\"query\": \"a\"", "\"query\": \"${topic} a\"")
        .replace("\"query\": \"b\"", "\"query\": \"${topic} b\"")
        .replace("\"query\": \"c\"", "\"query\": \"${topic} c\"")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_killed_mid_way_is_resumed_without_asking_again_for_stored_answers() {
    let f = fixture().await;
    f.plan("topic.json", &topic_dag());
    let list = f.dir.path().join("runs.txt");
    let lines: Vec<String> = (1..=6).map(|i| format!("topic.json topic=t{i}")).collect();
    std::fs::write(&list, lines.join("\n")).unwrap();
    let db = f.dir.path().join("batch.db");
    let batch = |extra: &[&str]| {
        let mut a = f.args(&["batch", "--list", &s(&list), "--jobs", "2"], None, &db);
        a.extend(extra.iter().map(|e| (*e).to_owned()));
        a
    };
    let answers = |stdout: &str| -> Vec<(u64, Value)> {
        let mut got: Vec<(u64, Value)> = stdout
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .map(|l| (l["line"].as_u64().unwrap(), l["final_answer"].clone()))
            .collect();
        got.sort_by_key(|(line, _)| *line);
        got
    };
    // The answers of an uninterrupted batch, from a server of its own.
    let g = fixture().await;
    let alone = [
        "batch",
        "--list",
        &s(&list),
        "--jobs",
        "2",
        "--tools",
        &s(&g.tools),
    ];
    let out = planvm(alone, &[]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let want = answers(&out.stdout);
    assert_eq!(want.len(), 6);

    // Killed once two runs are done and a third has answers stored: two runs at a time,
    // four levels of calls each, so some runs are done, some going, some not started.
    let ids: Vec<String> = (1..=6).map(|i| format!("b.topic.line{i}")).collect();
    let mut child = spawn_planvm(&batch(&["--batch-id", "b"]));
    let mut saved: Vec<(String, Value)> = Vec::new();
    let mut done_before = Vec::new();
    let mut cut = false;
    for _ in 0..400 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if !db.exists() {
            continue;
        }
        let list = ["runs", "list", "--store", &s(&db), "--format", "json"];
        let out = planvm(list, &[]).await;
        let runs: Vec<Value> = match out.code {
            Some(0) => json_lines(&out.stdout),
            // The store still being created.
            _ => continue,
        };
        done_before = runs
            .iter()
            .filter(|r| r["status"] == "ok")
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect();
        let going = runs.iter().find(|r| r["status"] == "running");
        if let (true, Some(run)) = (done_before.len() >= 2, going)
            && answered_in_store(&db, run["id"].as_str().unwrap())
                .await
                .is_some_and(|a| !a.is_empty())
        {
            cut = true;
            break;
        }
    }
    // Not while the batch is still going: it would fail the runs this one starts.
    let out = planvm(batch(&["--batch-id", "b", "--resume"]), &[]).await;
    assert_eq!(out.code, Some(75), "{}", out.stderr);
    assert!(out.stderr.contains("still being run"), "{}", out.stderr);
    let _ = child.kill();
    tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    for id in &ids {
        saved.extend(answered_in_store(&db, id).await.unwrap_or_default());
    }
    assert!(
        cut,
        "the batch ended before it could be cut: {done_before:?}"
    );
    assert!(
        done_before.len() >= 2 && done_before.len() < 6,
        "{done_before:?}"
    );
    let sent_before = f.requests().await.len();

    // Without --resume, the batch's ids are taken.
    let out = planvm(batch(&["--batch-id", "b"]), &[]).await;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("--resume"), "{}", out.stderr);
    // A batch id with no run in the store has nothing to resume.
    let out = planvm(batch(&["--batch-id", "nope", "--resume"]), &[]).await;
    assert_eq!(out.code, Some(66), "{}", out.stderr);

    let out = planvm(batch(&["--batch-id", "b", "--resume"]), &[]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(answers(&out.stdout), want);
    let after = f.requests().await;
    for req in &after[sent_before..] {
        assert!(
            !saved.contains(req),
            "{req:?} was answered and stored, but requested again"
        );
    }
    for line in out.stdout.lines() {
        let line: Value = serde_json::from_str(line).unwrap();
        assert_eq!(line["tool_calls"], 6, "{line}");
        let id = line["run_id"].as_str().unwrap();
        if done_before.iter().any(|d| d == id) {
            assert_eq!(
                line["elapsed_ms"], 0,
                "a finished run is reported, not run: {line}"
            );
        }
    }
    // Each call of each run was asked once, but for those in flight at the kill: at most
    // the three searches of each of the two runs going.
    let unique: std::collections::HashSet<String> =
        after.iter().map(|(p, b)| format!("{p} {b}")).collect();
    eprintln!(
        "{} answers stored, {} runs done, {} requests before the resume, {} after, {} distinct",
        saved.len(),
        done_before.len(),
        sent_before,
        after.len(),
        unique.len()
    );
    assert!(
        after.len() - unique.len() <= 6,
        "{} requests, {} distinct",
        after.len(),
        unique.len()
    );
    assert!(runs_json(&db).await.iter().all(|r| r["status"] == "ok"));

    // Resumed again: every run is reported from the store, nothing is asked.
    let out = planvm(batch(&["--batch-id", "b", "--resume"]), &[]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(answers(&out.stdout), want);
    assert_eq!(f.requests().await.len(), after.len());
    // (Lines edited since, paired with their runs by content: plan-runs' tests/batch.rs.)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_file_read_only_to_this_process_gets_no_files_beside_it() {
    let f = fixture().await;
    let (shared, db, plan) = a_finished_run_in_shared(&f).await;
    let listed = runs_json(&db).await;
    // NB: a directory anyone may write (as /tmp): SQLite could create the WAL's files.
    let Some(reader) = Reader::new(f.dir.path(), &shared, 0o777) else {
        return;
    };
    let db_arg = s(&db);
    let out = reader
        .planvm(&["runs", "list", "--store", &db_arg, "--format", "json"])
        .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(json_lines(&out.stdout), listed);
    assert_eq!(
        files(&shared),
        ["runs.db"],
        "a reader leaves nothing beside the store"
    );

    // A command that writes is refused before it runs anything.
    let sent = f.requests().await.len();
    let (plan_arg, tools) = (s(&plan), s(&f.tools));
    let out = reader
        .planvm(&["run", &plan_arg, "--tools", &tools, "--store", &db_arg])
        .await;
    assert_eq!(out.code, Some(74), "{}", out.stderr);
    assert!(
        out.stderr.contains("may not write the store"),
        "{}",
        out.stderr
    );
    assert_eq!(f.requests().await.len(), sent, "no tool was called");
    assert_eq!(files(&shared), ["runs.db"]);
}
