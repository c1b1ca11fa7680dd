//! One planner call has one budget whatever happens to it: all its attempts, streamed or
//! not, and a stream asked for again whole, stop at 3 × `timeout_secs`; and the `ask`'s
//! deadline covers its planner calls as well as its runs. Against real loopback servers
//! (raw HTTP/1.1, so a reply can trickle or never come): one that trickles its reply, one
//! that never answers, one that answers 500.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use plan_host::{Host, HostOptions};
use plan_manifest::Manifest;
use plan_planner::{AskOptions, AskOutcome, AskStatus, Examples, Planner, Template};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the planner's server does with each request.
#[derive(Clone, Copy, Debug)]
enum Behaviour {
    /// Sends a whole plan one byte every 50 ms (10 s in all), streamed or not.
    Trickle,
    /// Reads the request and never answers.
    Silent,
    /// Answers 500 at once.
    Fails,
    /// Answers the plan whole after 700 ms.
    Late,
}

/// The plan every server writes: one call of `llm_generate`.
const PLAN: &str = r#"[{"seq_no": 0, "type": "calling", "parameters": {"tool_name": "llm_generate", "tool_params": {"prompt": "hi"}, "output_vars": ["final_answer"]}}]"#;

/// Starts a server; returns its base URL and how many requests it read.
async fn server(what: Behaviour) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let _ = answer(sock, what, &seen).await;
            });
        }
    });
    (url, count)
}

async fn answer(mut sock: TcpStream, what: Behaviour, seen: &AtomicUsize) -> std::io::Result<()> {
    let body = read_request(&mut sock).await?;
    seen.fetch_add(1, Ordering::SeqCst);
    let streamed = body.contains("\"stream\":true");
    match what {
        Behaviour::Silent => {
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        Behaviour::Fails => {
            sock.write_all(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\nconnection: close\r\n\r\noops")
                .await?;
        }
        Behaviour::Late => {
            tokio::time::sleep(Duration::from_millis(700)).await;
            let reply =
                json!({"choices": [{"message": {"content": PLAN}, "finish_reason": "stop"}]});
            let text = reply.to_string();
            sock.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{text}",
                    text.len()
                )
                .as_bytes(),
            )
            .await?;
        }
        Behaviour::Trickle if streamed => {
            sock.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
                .await?;
            for c in PLAN.chars() {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let event = json!({"choices": [{"delta": {"content": c.to_string()}}]});
                let data = format!("data: {event}\n\n");
                sock.write_all(format!("{:x}\r\n{data}\r\n", data.len()).as_bytes())
                    .await?;
            }
            let done = "data: [DONE]\n\n";
            sock.write_all(format!("{:x}\r\n{done}\r\n0\r\n\r\n", done.len()).as_bytes())
                .await?;
        }
        Behaviour::Trickle => {
            let reply =
                json!({"choices": [{"message": {"content": PLAN}, "finish_reason": "stop"}]});
            let text = reply.to_string();
            sock.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    text.len()
                )
                .as_bytes(),
            )
            .await?;
            for b in text.bytes() {
                tokio::time::sleep(Duration::from_millis(50)).await;
                sock.write_all(&[b]).await?;
            }
        }
    }
    Ok(())
}

/// Reads one request; returns its body.
async fn read_request(sock: &mut TcpStream) -> std::io::Result<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            return Ok(String::new());
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let len = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .and_then(|v| v.trim().parse::<usize>().ok())
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return Ok(text[end + 4..].to_owned());
            }
        }
    }
}

/// A tool server answering `{"text": "done"}` after `delay`.
async fn tool_server(delay: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                if read_request(&mut sock).await.is_err() {
                    return;
                }
                tokio::time::sleep(delay).await;
                let body = r#"{"text": "done"}"#;
                let _ = sock
                    .write_all(
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        )
                        .as_bytes(),
                    )
                    .await;
            });
        }
    });
    url
}

/// Asks for a plan from the planner at `url` (`timeout_secs`, `max_retries`), whose
/// `llm_generate` is served at `tool`, streamed or not, within `deadline`.
async fn ask(
    url: &str,
    timeout_secs: f64,
    max_retries: u32,
    tool: &str,
    stream: bool,
    deadline: Option<Duration>,
) -> AskOutcome {
    let text = format!(
        "[planner.backend]\nkind = \"openai\"\nbase_url = \"{url}/v1\"\nmodel = \"m\"\n\
         timeout_secs = {timeout_secs}\nmax_retries = {max_retries}\n\n\
         [[tool]]\nname = \"llm_generate\"\n[tool.backend]\nkind = \"http\"\nurl = \"{tool}/llm\"\n\
         pointer = \"/text\"\nmax_retries = 0\n"
    );
    let manifest = Manifest::from_toml_str(&text, "tools.toml").unwrap();
    let host = Host::new(
        manifest,
        HostOptions {
            retry_base_delay: Duration::from_millis(10),
            retry_max_delay: Duration::from_millis(20),
            deadline,
            ..HostOptions::default()
        },
    )
    .unwrap();
    let planner = Planner {
        host: &host,
        model: plan_planner::model_for(&host)
            .map_err(|e| e.message)
            .unwrap(),
        template: Template::default(),
        examples: Examples::default(),
        options: AskOptions {
            max_repairs: 0,
            max_replans: 2,
            stream,
            deadline,
            ..AskOptions::default()
        },
    };
    planner.ask("a goal", None, &mut ()).await
}

#[tokio::test]
async fn a_planner_that_trickles_is_cut_at_three_times_its_timeout() {
    let tool = tool_server(Duration::ZERO).await;
    for stream in [true, false] {
        let (url, _) = server(Behaviour::Trickle).await;
        let out = ask(&url, 0.3, 2, &tool, stream, None).await;
        assert_eq!(out.status, AskStatus::PlannerFailed, "stream {stream}");
        let error = out.error.unwrap_or_default();
        assert!(error.contains("within 0.9 s"), "stream {stream}: {error}");
    }
}

#[tokio::test]
async fn a_planner_that_never_answers_gets_one_budget_streamed_or_not() {
    let tool = tool_server(Duration::ZERO).await;
    for stream in [true, false] {
        let (url, count) = server(Behaviour::Silent).await;
        let out = ask(&url, 0.3, 4, &tool, stream, None).await;
        assert_eq!(out.status, AskStatus::PlannerFailed, "stream {stream}");
        // Attempts of 0.3 s each within 0.9 s: three at most, not three more whole.
        let n = count.load(Ordering::SeqCst);
        assert!((1..=3).contains(&n), "stream {stream}: {n} requests");
    }
}

#[tokio::test]
async fn a_planner_that_fails_is_asked_as_often_as_its_retries_say_streamed_or_not() {
    let tool = tool_server(Duration::ZERO).await;
    for stream in [true, false] {
        let (url, count) = server(Behaviour::Fails).await;
        let out = ask(&url, 5.0, 2, &tool, stream, None).await;
        assert_eq!(out.status, AskStatus::PlannerFailed, "stream {stream}");
        assert!(
            out.error.as_deref().unwrap_or("").contains("HTTP 500"),
            "{:?}",
            out.error
        );
        assert_eq!(count.load(Ordering::SeqCst), 3, "stream {stream}");
    }
}

#[tokio::test]
async fn the_deadline_of_an_ask_covers_its_planning_and_its_run() {
    // Planning takes 0.7 s of the 1 s, so a run whose call takes 0.6 s runs out of time,
    // though it would finish within 1 s of its own start; and is not re-planned, with no
    // time left for the planner.
    let tool = tool_server(Duration::from_millis(600)).await;
    let (url, _) = server(Behaviour::Late).await;
    let out = ask(&url, 5.0, 0, &tool, false, Some(Duration::from_secs(1))).await;
    assert_eq!(out.status, AskStatus::RunFailed, "{:?}", out.error);
    let report = out.report.unwrap();
    let error = report.error.unwrap();
    assert_eq!(
        error.code,
        plan_vm::ErrorCode::Deadline,
        "{}",
        error.message
    );
    // With time for both, the same ask answers.
    let out = ask(&url, 5.0, 0, &tool, false, Some(Duration::from_secs(5))).await;
    assert_eq!(out.status, AskStatus::Answered, "{:?}", out.error);
    assert_eq!(out.answer, json!("done"));
    // A planner slower than the whole deadline is cut at it.
    let (silent, _) = server(Behaviour::Silent).await;
    for stream in [true, false] {
        let out = ask(
            &silent,
            5.0,
            0,
            &tool,
            stream,
            Some(Duration::from_millis(500)),
        )
        .await;
        assert_eq!(out.status, AskStatus::PlannerFailed, "stream {stream}");
        let error = out.error.unwrap_or_default();
        assert!(
            error.contains("before the deadline of the whole ask (0.5 s)"),
            "stream {stream}: {error}"
        );
    }
}
