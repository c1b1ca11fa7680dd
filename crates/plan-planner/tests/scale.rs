//! A long plan streamed in small pieces costs about what it costs read whole: the early
//! start compiles and runs a longer prefix as the plan arrives, and once did so at every
//! instruction (10,000 steps in 16-byte pieces: 158 s, against 0.04 s read whole).
//! Seconds in a debug build, so ignored by a plain `cargo test`; `scripts/test` runs it
//! once with `--ignored`.

use std::time::{Duration, Instant};

use plan_host::{Host, HostOptions};
use plan_manifest::Manifest;
use plan_planner::{AskOptions, AskStatus, Examples, Planner, Template};
use plan_vm::Limits;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A plan of `n` assignments, then the answer.
fn long_plan(n: usize) -> String {
    let mut steps: Vec<serde_json::Value> = (0..n)
        .map(|i| json!({"seq_no": i, "type": "assign", "parameters": {format!("v{i}"): i}}))
        .collect();
    steps.push(json!({"seq_no": n, "type": "assign", "parameters": {"final_answer": "${v7}"}}));
    serde_json::Value::Array(steps).to_string()
}

/// A planner that answers `plan` streamed, `piece` bytes an event, one write per event
/// (or whole, when not asked to stream).
async fn planner(plan: String, piece: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let plan = plan.clone();
            tokio::spawn(async move {
                let _ = sock.set_nodelay(true);
                let body = read_body(&mut sock).await;
                let _ = answer(&mut sock, &plan, piece, body.contains("\"stream\":true")).await;
            });
        }
    });
    url
}

async fn answer(
    sock: &mut TcpStream,
    plan: &str,
    piece: usize,
    streamed: bool,
) -> std::io::Result<()> {
    if !streamed {
        let text = json!({"choices": [{"message": {"content": plan}, "finish_reason": "stop"}]})
            .to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            text.len()
        );
        sock.write_all(head.as_bytes()).await?;
        return sock.write_all(text.as_bytes()).await;
    }
    sock.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
    )
    .await?;
    let chars: Vec<char> = plan.chars().collect();
    for part in chars.chunks(piece) {
        let content: String = part.iter().collect();
        let event = json!({"choices": [{"delta": {"content": content}}]});
        let data = format!("data: {event}\n\n");
        sock.write_all(format!("{:x}\r\n{data}\r\n", data.len()).as_bytes())
            .await?;
    }
    let done = "data: [DONE]\n\n";
    sock.write_all(format!("{:x}\r\n{done}\r\n0\r\n\r\n", done.len()).as_bytes())
        .await
}

async fn read_body(sock: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let Ok(n) = sock.read(&mut chunk).await else {
            return String::new();
        };
        if n == 0 {
            return String::new();
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
                return text[end + 4..].to_owned();
            }
        }
    }
}

/// The time of one `ask` of the planner at `url`, streamed or not.
async fn timed_ask(url: &str, stream: bool) -> Duration {
    let text = format!(
        "[planner.backend]\nkind = \"openai\"\nbase_url = \"{url}/v1\"\nmodel = \"m\"\nmax_retries = 0\n"
    );
    let host = Host::new(
        Manifest::from_toml_str(&text, "tools.toml").unwrap(),
        HostOptions::default(),
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
            stream,
            limits: Limits {
                max_steps: 1_000_000,
                ..Limits::default()
            },
            ..AskOptions::default()
        },
    };
    let began = Instant::now();
    let out = planner.ask("a goal", None, &mut ()).await;
    let took = began.elapsed();
    assert_eq!(out.status, AskStatus::Answered, "{:?}", out.error);
    assert_eq!(out.answer, json!(7));
    took
}

#[tokio::test]
#[ignore = "seconds in a debug build: run by scripts/test with --ignored"]
async fn a_long_plan_streamed_in_small_pieces_costs_a_few_times_its_read_whole() {
    let url = planner(long_plan(10_000), 16).await;
    // NB: the better of two of each, alternated, so one slow moment decides nothing.
    let mut whole = Duration::MAX;
    let mut streamed = Duration::MAX;
    for _ in 0..2 {
        whole = whole.min(timed_ask(&url, false).await);
        streamed = streamed.min(timed_ask(&url, true).await);
    }
    eprintln!("10,000 steps: read whole {whole:?}, streamed in 16-byte pieces {streamed:?}");
    assert!(
        streamed < whole * 6 + Duration::from_millis(500),
        "streamed {streamed:?} against {whole:?} read whole"
    );
}
