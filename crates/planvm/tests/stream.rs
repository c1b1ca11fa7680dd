//! `planvm ask` with a streaming planner (issue: streaming execution): a fake
//! OpenAI-compatible planner on loopback that writes one instruction every 0.5 s
//! (server-sent events when asked to stream, one JSON body after the same time when not),
//! and HTTP tools that take 1 s. Calls certain to run start while the plan arrives; the
//! answer is the same as without streaming; a plan that turns out invalid at its end
//! runs no `write` tool early and its repair reuses only identical calls.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use common::{planvm, s};

const GAP: Duration = Duration::from_millis(500);
const TOOL_LATENCY: Duration = Duration::from_secs(1);

/// Tools: every path answers `path(body)` after the latency; a prompt that asks for
/// JSON keys (the format instruction of a call with several output vars) gets an object
/// with them.
struct Tools(Duration);

impl Respond for Tools {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let echo = format!("{}({body})", req.url.path());
        let prompt = body["prompt"].as_str().unwrap_or("");
        let keys: Option<Vec<String>> = prompt
            .split_once("containing the keys: ")
            .and_then(|(_, rest)| serde_json::from_str(rest.trim_end_matches('.')).ok());
        let text = match keys {
            Some(keys) => Value::Object(keys.into_iter().map(|k| (k, json!(echo))).collect()),
            None => json!(echo),
        };
        ResponseTemplate::new(200)
            .set_body_json(json!({ "text": text }))
            .set_delay(self.0)
    }
}

/// The planner's reply to a conversation whose last message is given, as pieces.
type Script = fn(&str) -> Vec<String>;

/// A planner that sends each piece `gap` after the previous one; returns its base URL
/// and the bodies of the requests it got.
async fn planner(script: Script, gap: Duration) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move { answer(sock, script, gap, log).await });
        }
    });
    (url, seen)
}

async fn answer(
    mut sock: tokio::net::TcpStream,
    script: Script,
    gap: Duration,
    log: Arc<Mutex<Vec<Value>>>,
) {
    let body = read_body(&mut sock).await;
    log.lock().unwrap().push(body.clone());
    let last = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_owned();
    let pieces = script(&last);
    if body["stream"] == json!(true) {
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
        let _ = sock.write_all(head.as_bytes()).await;
        // NB: at fixed times, so that many short gaps add up to the same total as the
        // one wait of a reply that is not streamed.
        let start = tokio::time::Instant::now();
        for (i, p) in pieces.iter().enumerate() {
            tokio::time::sleep_until(start + gap * (i as u32 + 1)).await;
            let event = json!({"choices": [{"index": 0, "delta": {"content": p}}]});
            let _ = sock
                .write_all(chunk(&format!("data: {event}\n\n")).as_bytes())
                .await;
        }
        let _ = sock.write_all(chunk("data: [DONE]\n\n").as_bytes()).await;
        let _ = sock.write_all(b"0\r\n\r\n").await;
    } else {
        tokio::time::sleep(gap * pieces.len() as u32).await;
        let text = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": pieces.concat()}}]}).to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            text.len()
        );
        let _ = sock.write_all(head.as_bytes()).await;
        let _ = sock.write_all(text.as_bytes()).await;
    }
    let _ = sock.shutdown().await;
}

fn chunk(data: &str) -> String {
    format!("{:x}\r\n{data}\r\n", data.len())
}

async fn read_body(sock: &mut tokio::net::TcpStream) -> Value {
    let mut buf = Vec::new();
    let mut part = [0u8; 8192];
    loop {
        let n = sock.read(&mut part).await.unwrap_or(0);
        if n == 0 {
            return Value::Null;
        }
        buf.extend_from_slice(&part[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if buf.len() >= end + 4 + len {
            return serde_json::from_slice(&buf[end + 4..end + 4 + len]).unwrap_or(Value::Null);
        }
    }
}

struct Fixture {
    tools_server: MockServer,
    planner_requests: Arc<Mutex<Vec<Value>>>,
    dir: tempfile::TempDir,
    tools: std::path::PathBuf,
}

async fn fixture(script: Script) -> Fixture {
    fixture_with(script, GAP, TOOL_LATENCY).await
}

async fn fixture_with(script: Script, gap: Duration, tool_latency: Duration) -> Fixture {
    let tools_server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Tools(tool_latency))
        .mount(&tools_server)
        .await;
    let (planner_url, planner_requests) = planner(script, gap).await;
    let base = tools_server.uri();
    let mut text = format!(
        "[planner.backend]\nkind = \"openai\"\nbase_url = \"{planner_url}\"\nmodel = \"m\"\nmax_retries = 0\n\n"
    );
    for (tool, route, effects) in [
        ("vector_search", "/search", "read"),
        ("retrieve_knowledge_graph", "/graph", "read"),
        ("llm_generate", "/llm", "pure"),
        ("post_note", "/note", "write"),
    ] {
        text.push_str(&format!(
            "[[tool]]\nname = \"{tool}\"\neffects = \"{effects}\"\n[tool.backend]\nkind = \"http\"\nurl = \"{base}{route}\"\npointer = \"/text\"\nmax_retries = 0\n\n"
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.toml");
    std::fs::write(&tools, text).unwrap();
    Fixture {
        tools_server,
        planner_requests,
        dir,
        tools,
    }
}

impl Fixture {
    /// Runs the ask; returns the answer, the JSON outcome and the seconds it took.
    async fn ask(&self, extra: &[&str]) -> (Value, f64) {
        // NB: named after the number of extra arguments, so each ask of a test has its own.
        let trace = self.dir.path().join(format!("trace{}.jsonl", extra.len()));
        let mut args: Vec<String> = [
            "ask",
            "Follow the chain",
            "--tools",
            &s(&self.tools),
            "--format",
            "json",
            "--trace",
            &s(&trace),
        ]
        .iter()
        .map(|a| (*a).to_owned())
        .collect();
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let start = Instant::now();
        let out = planvm(args, &[]).await;
        let took = start.elapsed().as_secs_f64();
        assert_eq!(out.code, Some(0), "{}\n{}", out.stderr, out.stdout);
        (serde_json::from_str(out.stdout.trim()).unwrap(), took)
    }

    async fn paths(&self) -> Vec<(String, Value)> {
        self.tools_server
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
}

fn ins(seq: u32, tool: &str, params: Value, out: &str) -> String {
    let v = json!({"seq_no": seq, "type": "calling", "parameters": {
        "tool_name": tool, "tool_params": params, "output_vars": [out]}});
    format!("{v},\n")
}

/// A reasoning step, then four calls, each on the output of the one before.
fn chain(_: &str) -> Vec<String> {
    vec![
        "```json\n[\n{\"seq_no\": 0, \"type\": \"reasoning\", \"parameters\": {\"chain_of_thoughts\": \"four dependent calls\"}},\n".into(),
        ins(1, "vector_search", json!({"query": "start", "top_k": 1}), "c1"),
        ins(2, "vector_search", json!({"query": "after ${c1}", "top_k": 1}), "c2"),
        ins(3, "vector_search", json!({"query": "after ${c2}", "top_k": 1}), "c3"),
        ins(4, "llm_generate", json!({"prompt": "answer from ${c3}"}), "final_answer")
            .trim_end_matches(",\n")
            .to_owned()
            + "\n]\n```",
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_start_while_the_plan_arrives_and_the_answer_is_the_same() {
    let f = fixture(chain).await;
    let (plain, t_plain) = f.ask(&["--no-stream"]).await;
    let cassette = f.dir.path().join("streamed.jsonl");
    let (streamed, t_streamed) = f.ask(&["--record", &s(&cassette)]).await;
    assert_eq!(streamed["answer"], plain["answer"]);
    assert_eq!(streamed["status"], "answered");
    // Each call was made once per ask: the early results were taken, not made again.
    let searches = f
        .paths()
        .await
        .iter()
        .filter(|(p, _)| p == "/search")
        .count();
    assert_eq!(searches, 6);
    // The cassette holds the planner's reply and the four calls of the run, once each:
    // the runs of the partial plan record nothing.
    let recorded: Vec<Value> = std::fs::read_to_string(&cassette)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let tools: Vec<&str> = recorded
        .iter()
        .map(|e| e["tool"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "planner",
            "vector_search",
            "vector_search",
            "vector_search",
            "llm_generate"
        ]
    );
    let asked = f.planner_requests.lock().unwrap().clone();
    assert_eq!(asked.len(), 2);
    assert_eq!(asked[0]["stream"], json!(false));
    assert_eq!(asked[1]["stream"], json!(true));
    // The trace shows each instruction arriving and each call started early.
    let trace = std::fs::read_to_string(f.dir.path().join("trace2.jsonl")).unwrap();
    let events: Vec<Value> = trace
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let named = |name: &str| events.iter().filter(|e| e["event"] == name).count();
    assert_eq!(named("instruction_arrived"), 5, "{trace}");
    // The first searches start while the plan arrives; the ones that wait for them may
    // start only once the plan is whole.
    assert!(named("call_started_early") >= 1, "{trace}");
    // Not streamed: 2.5 s of planning, then 4 × 1 s of calls. Streamed: each call starts
    // when it has arrived and the call before it is done, so the calls overlap the
    // planning: a call started before the plan's last instruction arrived (an order in
    // the trace, not a time, so a loaded machine cannot fail it).
    let first = |name: &str| events.iter().position(|e| e["event"] == name);
    let last_arrived = events
        .iter()
        .rposition(|e| e["event"] == "instruction_arrived");
    assert!(
        first("call_started_early") < last_arrived,
        "no call started while the plan arrived: {trace}"
    );
    eprintln!("streamed {t_streamed:.2} s, not streamed {t_plain:.2} s");
}

/// First a plan whose last instruction calls an unknown tool (with a `write` call before
/// it), then, asked to repair, one that keeps the first search, changes the second and
/// ends with an answer.
fn invalid_then_repaired(last: &str) -> Vec<String> {
    let start = "[\n{\"seq_no\": 0, \"type\": \"reasoning\", \"parameters\": {\"chain_of_thoughts\": \"x\"}},\n".to_owned();
    let first = ins(
        1,
        "vector_search",
        json!({"query": "alpha", "top_k": 1}),
        "a",
    );
    let note = ins(3, "post_note", json!({"text": "${a}"}), "noted");
    if last.contains("error[E0202]") {
        vec![
            start,
            first,
            ins(
                2,
                "vector_search",
                json!({"query": "gamma", "top_k": 1}),
                "b",
            ),
            note,
            ins(
                4,
                "llm_generate",
                json!({"prompt": "${a} ${b} ${noted}"}),
                "final_answer",
            )
            .trim_end_matches(",\n")
            .to_owned()
                + "\n]",
        ]
    } else {
        vec![
            start,
            first,
            ins(
                2,
                "vector_search",
                json!({"query": "beta", "top_k": 1}),
                "b",
            ),
            note,
            ins(4, "web_search", json!({"q": "${b}"}), "final_answer")
                .trim_end_matches(",\n")
                .to_owned()
                + "\n]",
        ]
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_invalid_at_its_end_runs_no_write_early_and_reuses_only_identical_calls() {
    let f = fixture(invalid_then_repaired).await;
    let (streamed, _) = f.ask(&[]).await;
    let kinds: Vec<&str> = streamed["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["plan", "repair"]);
    let calls = f.paths().await;
    let queries = |q: &str| {
        calls
            .iter()
            .filter(|(p, b)| p == "/search" && b["query"] == q)
            .count()
    };
    // `alpha` started early and was taken by the repaired plan; `beta` started early and
    // was not (the repaired plan asks for `gamma`); the note was written once, by the
    // run of the verified plan.
    assert_eq!(
        (queries("alpha"), queries("beta"), queries("gamma")),
        (1, 1, 1)
    );
    assert_eq!(calls.iter().filter(|(p, _)| p == "/note").count(), 1);

    let g = fixture(invalid_then_repaired).await;
    let (plain, _) = g.ask(&["--no-stream"]).await;
    assert_eq!(streamed["answer"], plain["answer"]);
    let plain_calls = g.paths().await;
    assert!(plain_calls.iter().all(|(_, b)| b["query"] != "beta"));
}

/// First a plan that searches at its second instruction and ends with an unknown tool;
/// then one that writes a note first and makes the same search, at the same place.
fn write_moved_before_the_search(last: &str) -> Vec<String> {
    let search = ins(
        1,
        "vector_search",
        json!({"query": "status", "top_k": 1}),
        "s",
    );
    if last.contains("error[E0202]") {
        vec![
            "[\n".to_owned() + &ins(0, "post_note", json!({"text": "closing"}), "noted"),
            search,
            ins(2, "llm_generate", json!({"prompt": "${s}"}), "final_answer")
                .trim_end_matches(",\n")
                .to_owned()
                + "\n]",
        ]
    } else {
        vec![
            "[\n{\"seq_no\": 0, \"type\": \"assign\", \"parameters\": {\"n\": 1}},\n".to_owned(),
            search,
            ins(2, "web_search", json!({"q": "${s}"}), "final_answer")
                .trim_end_matches(",\n")
                .to_owned()
                + "\n]",
        ]
    }
}

/// A search started early is not taken by a repaired plan that writes before it: the
/// sequential run of that plan searches after the write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_early_result_is_not_taken_across_a_write_the_repair_put_before_it() {
    let f = fixture(write_moved_before_the_search).await;
    let (out, _) = f.ask(&[]).await;
    assert_eq!(out["status"], "answered");
    let calls = f.paths().await;
    let order: Vec<&str> = calls.iter().map(|(p, _)| p.as_str()).collect();
    // The early search, then the run's own note and search, in that order.
    assert_eq!(order, ["/search", "/note", "/search", "/llm"]);
}

/// `planvm run -`: a plan piped in slowly starts its first call before its input ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_on_standard_input_runs_as_it_arrives() {
    use std::io::Write;
    let f = fixture(chain).await;
    let mut child = std::process::Command::new(common::BIN)
        .args(["run", "-", "--tools", &s(&f.tools), "--format", "json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let pieces = chain("");
    stdin.write_all(pieces[..2].concat().as_bytes()).unwrap();
    stdin.flush().unwrap();
    // The first search is made while the rest of the plan has not been written.
    let mut seen = false;
    for _ in 0..200 {
        if !f.tools_server.received_requests().await.unwrap().is_empty() {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(seen, "no call started before the input ended");
    stdin.write_all(pieces[2..].concat().as_bytes()).unwrap();
    drop(stdin);
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["status"], "ok");
    assert_eq!(report["tool_calls"], 4);
    // Each call once: the early search was taken by the run.
    assert_eq!(f.paths().await.len(), 4);
}

/// The 14-step example plan written by a planner at 40 tokens/s (a token taken as 4
/// characters), tools at 300 ms: the figures of BENCHMARKS.md. Slow (about two minutes):
/// `cargo test -p planvm --test stream -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn figures_for_the_14_step_plan() {
    fn tokens(_: &str) -> Vec<String> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let text = std::fs::read_to_string(root.join("examples/tidb_overview.json")).unwrap();
        let chars: Vec<char> = text.chars().collect();
        chars.chunks(4).map(|c| c.iter().collect()).collect()
    }
    let f = fixture_with(
        tokens,
        Duration::from_millis(25),
        Duration::from_millis(300),
    )
    .await;
    let (plain, t_plain) = f.ask(&["--no-stream"]).await;
    let (streamed, t_streamed) = f.ask(&[]).await;
    assert_eq!(streamed["answer"], plain["answer"]);
    let f = fixture(chain).await;
    let (_, c_plain) = f.ask(&["--no-stream"]).await;
    let (_, c_streamed) = f.ask(&[]).await;
    eprintln!(
        "14-step plan: {t_plain:.2} s not streamed, {t_streamed:.2} s streamed ({:.2}x)\n4 dependent calls: {c_plain:.2} s not streamed, {c_streamed:.2} s streamed ({:.2}x)",
        t_streamed / t_plain,
        c_streamed / c_plain
    );
}
