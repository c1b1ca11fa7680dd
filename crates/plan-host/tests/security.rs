//! Hardening against tool servers, through real loopback servers: a key a server echoes
//! back never reaches a report, a trace or a cassette, and redirects never leave the
//! configured origin.

mod common;

use std::path::Path;

use common::{Script, env, manifest_with, plain, req};
use plan_host::{Host, HostOptions, RunReport, Tracer, run_machine};
use plan_manifest::BackendConfig;
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

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

/// What one `llm_generate` call served by `url` with `key` left behind.
struct Ran {
    report: RunReport,
    /// The report as JSON, as `planvm run --format json` prints it.
    shown: String,
    warnings: Vec<String>,
    trace: String,
    cassette: String,
}

impl Ran {
    /// The answer, or the error's message.
    fn said(&self) -> String {
        match &self.report.error {
            Some(e) => e.message.clone(),
            None => self.report.final_answer.to_string(),
        }
    }
}

/// One call of `llm_generate` served over HTTP by `url` with `key`, recorded and traced.
async fn run_against(dir: &Path, url: &str, key: &str) -> Ran {
    let backend = BackendConfig::Http {
        url: url.to_owned(),
        pointer: None,
        api_key_env: Some("SEC_TEST_KEY".into()),
        timeout_secs: None,
        max_retries: Some(1),
        concurrency: None,
    };
    let cassette = dir.join("rec.jsonl");
    let _ = std::fs::remove_file(&cassette);
    let options = HostOptions {
        env: env(&[("SEC_TEST_KEY", key)]),
        record: Some(cassette.clone()),
        ..common::opts()
    };
    let host = Host::new(manifest_with("llm_generate", backend), options).unwrap();
    let trace = dir.join("trace.jsonl");
    let mut tracer = Tracer::to_writer(Box::new(std::fs::File::create(&trace).unwrap()));
    let call = req(1, "llm_generate", json!({"prompt": "hi"}), plain());
    let report = run_machine(&host, &mut Script::new(vec![call]), &mut tracer).await;
    drop(tracer);
    Ran {
        shown: serde_json::to_string(&report).unwrap(),
        report,
        warnings: host.warnings().to_vec(),
        trace: std::fs::read_to_string(&trace).unwrap(),
        cassette: std::fs::read_to_string(&cassette).unwrap_or_default(),
    }
}

#[tokio::test]
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
        let ran = run_against(dir.path(), &format!("{}{route}", server.uri()), KEY).await;
        assert_eq!(ran.report.is_ok(), ok, "{route}: {}", ran.shown);
        for (what, text) in [
            ("report", &ran.shown),
            ("trace", &ran.trace),
            ("cassette", &ran.cassette),
        ] {
            assert_no_key(&format!("{route} {what}"), text);
        }
        // The long body is cut inside where the key was: nothing of it is left to show.
        if route != "/e401long" {
            assert!(ran.said().contains("[redacted]"), "{route}: {}", ran.said());
        }
        if ok {
            assert!(
                ran.cassette.contains("[redacted]"),
                "{route}: {}",
                ran.cassette
            );
        }
    }
    // The key was sent: the server saw it (so the test is not vacuous).
    let sent = server.received_requests().await.unwrap();
    assert!(
        sent.iter()
            .all(|r| r.headers.get("authorization").unwrap() == &format!("Bearer {KEY}")),
    );
}

#[tokio::test]
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
    let ran = run_against(dir.path(), &server.uri(), "x").await;
    assert!(ran.report.is_ok(), "{}", ran.shown);
    let answer = ran.said();
    assert!(answer.contains(&"x".repeat(40)), "{answer}");
    assert!(answer.contains("Bearer x"), "{answer}");
    for (what, text) in [
        ("answer", &answer),
        ("trace", &ran.trace),
        ("cassette", &ran.cassette),
    ] {
        assert!(!text.contains("[redacted]"), "{what}: {text}");
    }
    let warning = "the API key in SEC_TEST_KEY is shorter than 8 bytes";
    let warned = ran.warnings.iter().filter(|w| w.contains(warning)).count();
    assert_eq!(warned, 1, "{:?}", ran.warnings);
}

#[tokio::test]
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
        let ran = run_against(dir.path(), &format!("{}{route}", server.uri()), KEY).await;
        assert!(!ran.report.is_ok(), "{route}: {}", ran.shown);
        let msg = ran.said();
        assert!(
            msg.contains(&format!("redirect to {refused} refused")),
            "{route}: {msg}"
        );
    }
    assert!(
        elsewhere.received_requests().await.unwrap().is_empty(),
        "a request left the configured origin"
    );

    let ran = run_against(dir.path(), &format!("{}/loop", server.uri()), KEY).await;
    assert!(
        ran.said().contains("more than 3 redirects"),
        "{}",
        ran.said()
    );
    let loops = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == "/loop")
        .count();
    assert_eq!(loops, 4, "one request and three redirects, not retried");

    let ran = run_against(dir.path(), &format!("{}/same", server.uri()), KEY).await;
    assert!(ran.report.is_ok(), "{}", ran.shown);
    assert_eq!(ran.report.final_answer, json!("same origin"));
}
