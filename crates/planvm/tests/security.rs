//! Hardening against tool servers, through real loopback servers: a key a server echoes
//! back never reaches any output, and redirects never leave the configured origin.

mod common;

use std::path::Path;

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use common::{Out, planvm, s};
const KEY: &str = "sk-sec-test-0123456789abcdef";

/// Answers with `status` and a body quoting the request's Authorization header, as
/// careless proxies do. `pad` characters go before it, so the key straddles the point
/// where error messages cut a body short.
struct Echo {
    status: u16,
    pad: usize,
}

impl Respond for Echo {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let auth = req
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none")
            .to_owned();
        let text = format!("{}bad key {auth}", "x".repeat(self.pad));
        ResponseTemplate::new(self.status).set_body_json(json!({"error": text, auth: "header"}))
    }
}

/// No 8 consecutive characters of the key anywhere in `text`.
fn assert_no_key(what: &str, text: &str) {
    for i in 0..=KEY.len() - 8 {
        assert!(
            !text.contains(&KEY[i..i + 8]),
            "{what} holds part of the key ({}): {text}",
            &KEY[i..i + 8]
        );
    }
}

/// A one-call plan whose `llm_generate` is served by `url` with `key`, recorded and
/// traced, reported as JSON.
async fn run_against(dir: &Path, url: &str, key: &str) -> (Out, String, String) {
    let tools = dir.join("tools.toml");
    std::fs::write(
        &tools,
        format!(
            "[[tool]]\nname = \"llm_generate\"\n[tool.backend]\nkind = \"http\"\nurl = \"{url}\"\napi_key_env = \"SEC_TEST_KEY\"\nmax_retries = 1\n"
        ),
    )
    .unwrap();
    let plan = dir.join("plan.json");
    std::fs::write(
        &plan,
        r#"[{"seq_no": 0, "type": "calling", "parameters": {"tool_name": "llm_generate", "tool_params": {"prompt": "hi"}, "output_vars": ["final_answer"]}}]"#,
    )
    .unwrap();
    let trace = dir.join("trace.jsonl");
    let cassette = dir.join("rec.jsonl");
    let _ = std::fs::remove_file(&cassette);
    let out = planvm(
        vec![
            "run".into(),
            s(&plan),
            "--tools".into(),
            s(&tools),
            "--trace".into(),
            s(&trace),
            "--record".into(),
            s(&cassette),
            "--format".into(),
            "json".into(),
        ],
        &[("SEC_TEST_KEY", key)],
    )
    .await;
    let trace = std::fs::read_to_string(&trace).unwrap();
    let cassette = std::fs::read_to_string(&cassette).unwrap_or_default();
    (out, trace, cassette)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_echoed_key_is_redacted_from_every_output() {
    let server = MockServer::start().await;
    for (route, status, pad) in [
        ("/e401", 401, 0),
        ("/e500", 500, 0),
        ("/e200", 200, 0),
        ("/e401long", 401, 365),
    ] {
        Mock::given(method("POST"))
            .and(path(route))
            .respond_with(Echo { status, pad })
            .mount(&server)
            .await;
    }
    let dir = tempfile::tempdir().unwrap();
    for (route, ok) in [
        ("/e401", false),
        ("/e500", false),
        ("/e200", true),
        ("/e401long", false),
    ] {
        let (out, trace, cassette) =
            run_against(dir.path(), &format!("{}{route}", server.uri()), KEY).await;
        assert_eq!(
            out.code,
            Some(if ok { 0 } else { 1 }),
            "{route}: {}",
            out.stderr
        );
        for (what, text) in [
            ("stdout", &out.stdout),
            ("stderr", &out.stderr),
            ("trace", &trace),
            ("cassette", &cassette),
        ] {
            assert_no_key(&format!("{route} {what}"), text);
        }
        let report: Value = serde_json::from_str(&out.stdout).unwrap();
        let shown = if ok {
            report["final_answer"].to_string()
        } else {
            report["error"]["message"].to_string()
        };
        // The long body is cut inside where the key was: nothing of it is left to show.
        if route != "/e401long" {
            assert!(shown.contains("[redacted]"), "{route}: {shown}");
        }
        if ok {
            assert!(cassette.contains("[redacted]"), "{route}: {cassette}");
        }
    }
    // The key was sent: the server saw it (so the test is not vacuous).
    let sent = server.received_requests().await.unwrap();
    assert!(
        sent.iter()
            .all(|r| r.headers.get("authorization").unwrap() == &format!("Bearer {KEY}")),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_too_short_to_redact_is_warned_about_and_outputs_stay_whole() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Echo {
            status: 200,
            pad: 40,
        })
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    // A local server's key: one letter, found in almost every text.
    let (out, trace, cassette) = run_against(dir.path(), &server.uri(), "x").await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    let answer = report["final_answer"].to_string();
    assert!(answer.contains(&"x".repeat(40)), "{answer}");
    assert!(answer.contains("Bearer x"), "{answer}");
    for (what, text) in [
        ("answer", &answer),
        ("trace", &trace),
        ("cassette", &cassette),
    ] {
        assert!(!text.contains("[redacted]"), "{what}: {text}");
    }
    let warning = "the API key in SEC_TEST_KEY is shorter than 8 bytes";
    assert_eq!(out.stderr.matches(warning).count(), 1, "{}", out.stderr);
    assert!(trace.contains(warning), "{trace}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_stay_within_the_configured_origin() {
    let server = MockServer::start().await;
    let elsewhere = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!("stolen")))
        .mount(&elsewhere)
        .await;
    let other = format!("{}/steal", elsewhere.uri());
    for (route, status, location) in [
        ("/cross307", 307, other.clone()),
        ("/cross302", 302, other.clone()),
        (
            "/metadata",
            307,
            "http://169.254.169.254/latest/meta-data".to_owned(),
        ),
        ("/loop", 307, format!("{}/loop", server.uri())),
        ("/same", 307, "/target".to_owned()),
    ] {
        Mock::given(method("POST"))
            .and(path(route))
            .respond_with(
                ResponseTemplate::new(status).insert_header("location", location.as_str()),
            )
            .mount(&server)
            .await;
    }
    Mock::given(method("POST"))
        .and(path("/target"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!("same origin")))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();

    for (route, refused) in [
        ("/cross307", other.as_str()),
        ("/cross302", other.as_str()),
        ("/metadata", "http://169.254.169.254/latest/meta-data"),
    ] {
        let (out, _, _) = run_against(dir.path(), &format!("{}{route}", server.uri()), KEY).await;
        assert_eq!(out.code, Some(1), "{route}: {}", out.stderr);
        let report: Value = serde_json::from_str(&out.stdout).unwrap();
        let msg = report["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains(&format!("redirect to {refused} refused")),
            "{route}: {msg}"
        );
    }
    assert!(
        elsewhere.received_requests().await.unwrap().is_empty(),
        "a request left the configured origin"
    );

    let (out, _, _) = run_against(dir.path(), &format!("{}/loop", server.uri()), KEY).await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    let msg = report["error"]["message"].as_str().unwrap();
    assert!(msg.contains("more than 3 redirects"), "{msg}");
    let loops = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == "/loop")
        .count();
    assert_eq!(loops, 4, "one request and three redirects, not retried");

    let (out, _, _) = run_against(dir.path(), &format!("{}/same", server.uri()), KEY).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(report["final_answer"], "same origin");
}
