//! The `planvm serve` process against hostile and careless clients, over real sockets on
//! loopback: slow and oversized requests under a file limit, and memory after large plans
//! (the rest of the attacks are tried in-process: crates/plan-serve/tests/hostile.rs).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use common::{Served, client, code, raw, request};

const HELLO: &str = r#"[{"seq_no": 0, "type": "assign", "parameters": {"final_answer": "hello"}}]"#;

/// The `host:port` of a service.
fn addr(s: &Served) -> &str {
    s.base.trim_start_matches("http://")
}

/// `planvm serve` started by a shell with a file limit of `files`.
fn serve_limited(db: &Path, files: u32, extra: &[&str]) -> Served {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n {files} && db=\"$1\" && shift && exec \"$0\" serve --store \"$db\" --listen 127.0.0.1:0 \"$@\""
        ))
        .arg(common::BIN)
        .arg(db)
        .args(extra)
        .env_remove("PLANVM_STORE")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::BufRead;
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let base = loop {
        let line = lines.next().expect("the service listens").unwrap();
        if let Some(a) = line.strip_prefix("listening on ") {
            break a.to_owned();
        }
    };
    std::thread::spawn(move || lines.map_while(Result::ok).for_each(drop));
    Served {
        child,
        base,
        said: Default::default(),
    }
}

/// Whether the server closed `tcp` (within its read timeout).
fn closed(mut tcp: &TcpStream) -> bool {
    let mut buf = [0u8; 256];
    loop {
        match tcp.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => {
                return !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                );
            }
        }
    }
}

#[test]
fn slow_and_oversized_requests_do_not_hold_the_service() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve_limited(
        &dir.path().join("s.db"),
        256,
        &["--header-timeout", "2", "--body-timeout", "2"],
    );
    let at = addr(&s).to_owned();
    // A thousand connections trickling their headers, more than the service has files.
    let mut slow: Vec<TcpStream> = Vec::new();
    for _ in 0..1000 {
        match TcpStream::connect(&at) {
            Ok(mut tcp) => {
                let _ = tcp.write_all(b"GET /v1/runs HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: ");
                slow.push(tcp);
            }
            Err(e) => panic!("connect: {e}"),
        }
    }
    // A normal request is answered meanwhile (it waited minutes, or for ever, before).
    let (tx, rx) = std::sync::mpsc::channel();
    let normal = at.clone();
    std::thread::spawn(move || {
        let r = raw(
            &normal,
            &request("GET", "/v1/runs", &[("host", &normal)], ""),
        );
        let _ = tx.send(r.status);
    });
    let status = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("a normal request is answered while slow ones are open");
    assert_eq!(status, 200);
    // The slow ones are closed: evicted for newer ones, or once their headers' time is up.
    for tcp in &mut slow {
        tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    }
    let open = slow.iter().filter(|t| !closed(t)).count();
    assert_eq!(open, 0, "connections still open past the header timeout");
    drop(slow);
    // A body declared over the cap is refused at once, before any of it is sent.
    let head = format!(
        "POST /v1/runs HTTP/1.1\r\nhost: {at}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        17 << 20
    );
    let r = raw(&at, &head);
    assert_eq!(r.status, 413, "{}", r.head);
    assert_eq!(code(&r), "too_large");
    // A body that stops arriving: 408 once its time is up.
    let head = format!(
        "POST /v1/runs HTTP/1.1\r\nhost: {at}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"plan\""
    );
    let r = raw(&at, &head);
    assert_eq!(r.status, 408, "{} {}", r.head, r.body);
    assert_eq!(code(&r), "body_timeout");
    // And the service still answers.
    let r = raw(&at, &request("GET", "/v1/runs", &[("host", &at)], ""));
    assert_eq!(r.status, 200);
}

/// The service's resident memory, in kB.
fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_taken_by_large_plans_is_given_back() {
    let dir = tempfile::tempdir().unwrap();
    let s = common::serve_with(&dir.path().join("s.db"), &[], &[]);
    let runs = format!("{}/v1/runs", s.base);
    let http = client();
    let small = json!({"plan": HELLO});
    for _ in 0..20 {
        let res = http.post(&runs).json(&small).send().await.unwrap();
        assert_eq!(res.status().as_u16(), 201);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_kb(s.child.id());
    // Plans of 15 MiB each: a long text in one step.
    let text = "x".repeat(15 << 20);
    for i in 0..8 {
        let plan = json!([{"seq_no": 0, "type": "assign",
                           "parameters": {"final_answer": format!("{i}{text}")}}]);
        let res = http
            .post(&runs)
            .json(&json!({"plan": plan}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 201, "{:?}", res.text().await);
    }
    // Their runs end.
    for _ in 0..400 {
        let listed: Value = http.get(&runs).send().await.unwrap().json().await.unwrap();
        if listed["runs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["status"] == "ok")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // NB: memory is given back a moment after the last large run ends.
    let mut after = rss_kb(s.child.id());
    for _ in 0..100 {
        if after <= before * 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        after = rss_kb(s.child.id());
    }
    assert!(
        after <= before * 2,
        "the service holds {after} kB after large plans ended, {before} kB before"
    );
}
