//! `ChatClient` against loopback servers: wiremock for request shapes and retries, a raw
//! TCP server for what wiremock cannot do (a stream that waits for the client, a stream
//! that breaks off).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use plan_llm::{CallErrorKind, ChatClient, Connector, Message, REDACTED, Redactor};
use plan_manifest::BackendConfig;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "sk-test-key-123";

fn connector() -> Connector {
    Connector::new(
        Arc::new(|name| match name {
            "LLM_KEY" => Ok(KEY.to_owned()),
            _ => Err(std::env::VarError::NotPresent),
        }),
        Arc::new(Redactor::new()),
        Duration::from_millis(5),
        Duration::from_millis(20),
    )
}

fn client(base_url: &str, temperature: Option<f64>) -> ChatClient {
    client_with_timeout(base_url, temperature, 10.0)
}

fn client_with_timeout(base_url: &str, temperature: Option<f64>, timeout: f64) -> ChatClient {
    let cfg = BackendConfig::Openai {
        base_url: base_url.to_owned(),
        model: "m1".into(),
        api_key_env: Some("LLM_KEY".into()),
        temperature,
        timeout_secs: Some(timeout),
        max_retries: Some(2),
        concurrency: None,
    };
    connector().chat("the planner", &cfg).unwrap()
}

fn sse(events: &[Value]) -> String {
    let mut body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    body
}

fn delta(text: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {"content": text}}]})
}

async fn body_of(server: &MockServer, i: usize) -> Value {
    let reqs = server.received_requests().await.unwrap();
    serde_json::from_slice(&reqs[i].body).unwrap()
}

#[tokio::test]
async fn complete_sends_the_conversation_and_returns_the_reply() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"choices": [{"message": {"role": "assistant", "content": "a plan"}}]}),
        ))
        .mount(&server)
        .await;
    let c = client(&format!("{}/v1/", server.uri()), Some(0.2));
    let msgs = [
        Message::system("You plan."),
        Message::user("goal"),
        Message::assistant("[]"),
        Message::user("fix it"),
    ];
    assert_eq!(c.complete(&msgs).await.unwrap(), "a plan");
    assert_eq!(
        body_of(&server, 0).await,
        json!({
            "model": "m1",
            "messages": [
                {"role": "system", "content": "You plan."},
                {"role": "user", "content": "goal"},
                {"role": "assistant", "content": "[]"},
                {"role": "user", "content": "fix it"},
            ],
            "stream": false,
            "temperature": 0.2,
        })
    );
    assert!(!c.describe().contains(KEY));
}

#[tokio::test]
async fn a_streamed_reply_arrives_in_pieces() {
    let server = MockServer::start().await;
    let mut events = vec![json!({"choices": [{"delta": {"role": "assistant"}}]})];
    events.extend(["[{\"seq", "_no\": 0", "}]"].map(delta));
    events.push(json!({"choices": [{"delta": {}, "finish_reason": "stop"}]}));
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(sse(&events), "text/event-stream"))
        .mount(&server)
        .await;
    let c = client(&format!("{}/v1", server.uri()), None);
    let mut pieces = Vec::new();
    let reply = c
        .complete_streaming(&[Message::user("goal")], &mut |t| pieces.push(t.to_owned()))
        .await
        .unwrap();
    assert_eq!(pieces, ["[{\"seq", "_no\": 0", "}]"]);
    assert_eq!(reply, "[{\"seq_no\": 0}]");
    let body = body_of(&server, 0).await;
    assert_eq!(body["stream"], json!(true));
    assert!(body.get("temperature").is_none());
}

#[tokio::test]
async fn a_server_that_does_not_stream_answers_in_one_piece() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"choices": [{"message": {"content": "whole"}}]})),
        )
        .mount(&server)
        .await;
    let c = client(&server.uri(), None);
    let mut pieces = Vec::new();
    let reply = c
        .complete_streaming(&[Message::user("g")], &mut |t| pieces.push(t.to_owned()))
        .await
        .unwrap();
    assert_eq!((reply.as_str(), pieces.len()), ("whole", 1));
}

#[tokio::test]
async fn an_error_event_fails_the_call_without_the_key() {
    let server = MockServer::start().await;
    let body = format!(
        "data: {}\n\ndata: {}\n\n",
        delta("par"),
        json!({"error": {"message": format!("overloaded; your key Bearer {KEY}")}})
    );
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
        .mount(&server)
        .await;
    let c = client(&server.uri(), None);
    let e = c
        .complete_streaming(&[Message::user("g")], &mut |_| {})
        .await
        .unwrap_err();
    assert_eq!(e.kind, CallErrorKind::BadResponse);
    assert!(e.message.contains("overloaded"), "{}", e.message);
    assert!(
        !e.message.contains(KEY) && e.message.contains(REDACTED),
        "{}",
        e.message
    );
    // Not retried: part of the answer was passed on.
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_stream_is_retried_until_it_starts() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).set_body_string("busy"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(sse(&[delta("ok")]), "text/event-stream"),
        )
        .mount(&server)
        .await;
    let c = client(&server.uri(), None);
    let reply = c
        .complete_streaming(&[Message::user("g")], &mut |_| {})
        .await
        .unwrap();
    assert_eq!(reply, "ok");
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

#[tokio::test]
async fn garbage_events_are_a_clear_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw("data: not json\n\n", "text/event-stream"),
        )
        .mount(&server)
        .await;
    let c = client(&server.uri(), None);
    let e = c
        .complete_streaming(&[Message::user("g")], &mut |_| {})
        .await
        .unwrap_err();
    assert_eq!(e.kind, CallErrorKind::BadResponse);
    assert!(e.message.contains("not json"), "{}", e.message);
}

/// A one-connection HTTP/1.1 server: reads one request, then runs `respond` on the socket.
/// Returns the base URL and how many requests it accepted.
async fn raw_server<F, Fut>(respond: F) -> (String, Arc<Mutex<usize>>)
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let count = Arc::new(Mutex::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            *seen.lock().unwrap() += 1;
            read_request(&mut sock).await;
            respond(sock).await;
        }
    });
    (url, count)
}

async fn read_request(sock: &mut tokio::net::TcpStream) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = sock.read(&mut chunk).await.unwrap();
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf);
        if let Some(end) = text.find("\r\n\r\n") {
            let len = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap())
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return;
            }
        }
        if n == 0 {
            return;
        }
    }
}

const STREAM_HEAD: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

fn http_chunk(data: &str) -> String {
    format!("{:x}\r\n{data}\r\n", data.len())
}

#[tokio::test]
async fn pieces_reach_the_caller_before_the_reply_ends() {
    // The server sends the rest only once the client has shown the first piece: a client
    // that waited for the whole body would never finish.
    let (go_tx, go_rx) = tokio::sync::watch::channel(false);
    let (url, _) = raw_server(move |mut sock| {
        let mut go = go_rx.clone();
        async move {
            sock.write_all(STREAM_HEAD.as_bytes()).await.unwrap();
            let first = format!("data: {}\n\n", delta("first "));
            sock.write_all(http_chunk(&first).as_bytes()).await.unwrap();
            go.wait_for(|g| *g).await.unwrap();
            let rest = sse(&[delta("second")]);
            sock.write_all(http_chunk(&rest).as_bytes()).await.unwrap();
            sock.write_all(b"0\r\n\r\n").await.unwrap();
        }
    })
    .await;
    let c = client(&url, None);
    let mut pieces = Vec::new();
    let reply = tokio::time::timeout(
        Duration::from_secs(20),
        c.complete_streaming(&[Message::user("g")], &mut |t| {
            pieces.push(t.to_owned());
            let _ = go_tx.send(true);
        }),
    )
    .await
    .expect("the first piece was held back until the reply ended")
    .unwrap();
    assert_eq!(reply, "first second");
    assert_eq!(pieces, ["first ", "second"]);
}

#[tokio::test]
async fn a_stream_that_breaks_off_fails_and_is_not_sent_again() {
    let (url, count) = raw_server(|mut sock| async move {
        sock.write_all(STREAM_HEAD.as_bytes()).await.unwrap();
        let first = format!("data: {}\n\n", delta("half"));
        sock.write_all(http_chunk(&first).as_bytes()).await.unwrap();
        // Closed without the last chunk.
    })
    .await;
    let c = client(&url, None);
    let mut pieces = Vec::new();
    let e = c
        .complete_streaming(&[Message::user("g")], &mut |t| pieces.push(t.to_owned()))
        .await
        .unwrap_err();
    assert_eq!(e.kind, CallErrorKind::Transport, "{}", e.message);
    assert!(e.message.contains("broke off"), "{}", e.message);
    assert_eq!(pieces, ["half"]);
    assert_eq!(*count.lock().unwrap(), 1);
}

#[tokio::test]
async fn a_stream_that_ends_without_saying_it_is_complete_is_an_error() {
    let server = MockServer::start().await;
    let body = format!("data: {}\n\n", delta("half a pl"));
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
        .mount(&server)
        .await;
    let c = client(&server.uri(), None);
    let e = c
        .complete_streaming(&[Message::user("g")], &mut |_| {})
        .await
        .unwrap_err();
    assert_eq!(e.kind, CallErrorKind::BadResponse);
    assert!(
        e.message.contains("ended before the reply was complete"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn reading_stops_at_done_even_if_the_server_keeps_the_connection() {
    let (url, _) = raw_server(|mut sock| async move {
        sock.write_all(STREAM_HEAD.as_bytes()).await.unwrap();
        sock.write_all(http_chunk(&sse(&[delta("all of it")])).as_bytes())
            .await
            .unwrap();
        // Never ends the body.
        tokio::time::sleep(Duration::from_secs(3600)).await;
    })
    .await;
    let c = client(&url, None);
    let reply = tokio::time::timeout(
        Duration::from_secs(20),
        c.complete_streaming(&[Message::user("g")], &mut |_| {}),
    )
    .await
    .expect("kept reading after [DONE]")
    .unwrap();
    assert_eq!(reply, "all of it");
}

#[tokio::test]
async fn a_stream_that_breaks_before_any_text_is_sent_again() {
    let first = Arc::new(Mutex::new(true));
    let (url, count) = raw_server(move |mut sock| {
        let first = first.clone();
        async move {
            sock.write_all(STREAM_HEAD.as_bytes()).await.unwrap();
            let once = std::mem::replace(&mut *first.lock().unwrap(), false);
            if once {
                let role = json!({"choices": [{"delta": {"role": "assistant"}}]});
                sock.write_all(http_chunk(&format!("data: {role}\n\n")).as_bytes())
                    .await
                    .unwrap();
                // Closed mid-body.
            } else {
                sock.write_all(http_chunk(&sse(&[delta("second try")])).as_bytes())
                    .await
                    .unwrap();
                sock.write_all(b"0\r\n\r\n").await.unwrap();
            }
        }
    })
    .await;
    let c = client(&url, None);
    let reply = c
        .complete_streaming(&[Message::user("g")], &mut |_| {})
        .await
        .unwrap();
    assert_eq!(reply, "second try");
    assert_eq!(*count.lock().unwrap(), 2);
}

/// Keep-alive comments are not progress: a stream that sends only them after its first
/// text times out (and, having passed text on, is not sent again).
#[tokio::test]
async fn keep_alives_do_not_keep_a_stalled_answer_waiting() {
    let (url, count) = raw_server(|mut sock| async move {
        sock.write_all(STREAM_HEAD.as_bytes()).await.unwrap();
        let first = format!("data: {}\n\n", delta("start"));
        if sock.write_all(http_chunk(&first).as_bytes()).await.is_err() {
            return;
        }
        for _ in 0..200 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if sock
                .write_all(http_chunk(": keep-alive\n\n").as_bytes())
                .await
                .is_err()
            {
                return;
            }
        }
    })
    .await;
    let c = client_with_timeout(&url, None, 0.5);
    let e = c
        .complete_streaming(&[Message::user("g")], &mut |_| {})
        .await
        .unwrap_err();
    assert_eq!(e.kind, CallErrorKind::Timeout, "{}", e.message);
    assert!(
        e.message.contains("no more of the answer within 0.5 s"),
        "{}",
        e.message
    );
    assert_eq!(*count.lock().unwrap(), 1);
}

#[test]
fn configuration_errors_name_who_and_never_the_key() {
    let c = connector();
    let bad = |cfg: BackendConfig| c.chat("the planner", &cfg).unwrap_err().message;
    let openai = |url: &str, key: Option<&str>, timeout: Option<f64>| BackendConfig::Openai {
        base_url: url.into(),
        model: "m".into(),
        api_key_env: key.map(Into::into),
        temperature: None,
        timeout_secs: timeout,
        max_retries: None,
        concurrency: None,
    };
    assert_eq!(
        bad(openai("http://x", Some("NOPE"), None)),
        "environment variable NOPE (the API key for the planner) is not set"
    );
    assert!(bad(openai("ftp://x", None, None)).starts_with("the planner: URL"));
    assert!(bad(openai("http://x", None, Some(-1.0))).contains("timeout_secs"));
    assert!(bad(BackendConfig::Replay { cassette: None }).contains("needs an `openai` backend"));
}

#[tokio::test]
async fn the_tokens_a_reply_cost_come_back_plain_and_streamed() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(wiremock::matchers::body_partial_json(
            json!({"stream": false}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"message": {"content": "whole"}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
        })))
        .mount(&server)
        .await;
    // NB: as OpenAI sends it: the usage in an event of its own, with no choices, after the
    // one with the finish reason.
    let mut events = vec![delta("pie"), delta("ces")];
    events.push(json!({"choices": [{"delta": {}, "finish_reason": "stop"}]}));
    events.push(json!({"choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": 2}}));
    Mock::given(method("POST"))
        .and(wiremock::matchers::body_partial_json(
            json!({"stream": true}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_raw(sse(&events), "text/event-stream"))
        .mount(&server)
        .await;
    let c = client(&server.uri(), None);
    let plain = c.reply(&[Message::user("g")]).await.unwrap();
    assert_eq!(plain.text, "whole");
    assert_eq!(
        plain.usage,
        Some(plan_llm::Usage {
            input_tokens: 12,
            output_tokens: 3,
            cost: None
        })
    );
    let streamed = c
        .reply_streaming(&[Message::user("g")], &mut |_| {})
        .await
        .unwrap();
    assert_eq!(streamed.text, "pieces");
    assert_eq!(
        streamed.usage,
        Some(plan_llm::Usage {
            input_tokens: 20,
            output_tokens: 2,
            cost: None
        })
    );
    let body = body_of(&server, 1).await;
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}
