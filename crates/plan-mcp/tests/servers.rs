//! Servers as real processes: `fake_server.py` (plain Python, no SDK) over stdio, saying
//! what a real server should not (answers over the size cap, tool names no plan can call).

mod common;

use std::sync::Arc;

use common::{Killed, fake, manifest};
use plan_llm::{CallErrorKind, Redactor};
use plan_mcp::{Listing, Servers, import};
use serde_json::{Map, Value, json};

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

#[tokio::test]
async fn an_answer_over_the_size_cap_fails_at_once_naming_its_size() {
    // NB: a call that waited for the dropped answer would end by the server's time limit,
    // a timeout; the limit is far beyond what the answer takes to write.
    let m = manifest(&fake("fake", &[], "timeout_secs = 120\n"));
    let servers = Servers::new(&m.mcp, plan_llm::process_env(), Arc::new(Redactor::new()));
    let e = servers
        .call("fake", "big", args(json!({"bytes": 17_000_000})))
        .await
        .unwrap_err();
    assert_eq!(e.kind, CallErrorKind::BadResponse, "{}", e.message);
    let size = e
        .message
        .strip_prefix("MCP server `fake`, calling `big`: answer of ")
        .and_then(|m| m.strip_suffix(" bytes, larger than 16777216 bytes"))
        .unwrap_or_else(|| panic!("{}", e.message));
    assert!(size.parse::<u64>().unwrap() > 17_000_000, "{}", e.message);
    // The connection stays: the next call is answered, as is one just under the cap.
    let ok = servers
        .call("fake", "echo", args(json!({"text": "still here"})))
        .await
        .unwrap();
    assert_eq!(plan_mcp::output("echo", ok).unwrap(), json!("still here"));
    let ok = servers
        .call("fake", "big", args(json!({"bytes": 16_000_000})))
        .await
        .unwrap();
    assert_eq!(
        plan_mcp::output("big", ok).unwrap().as_str().map(str::len),
        Some(16_000_000)
    );
    servers.shutdown().await;
}

/// The same over streamable HTTP: a JSON answer over the cap fails the call at once,
/// saying it is too large, and the next call is answered.
#[tokio::test]
async fn an_http_answer_over_the_size_cap_fails_at_once() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake_server.py");
    let mut server = Killed(
        std::process::Command::new("python3")
            .arg(script)
            .arg("--http")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut port = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.0.stdout.as_mut().unwrap()),
        &mut port,
    )
    .unwrap();
    let m = manifest(&format!(
        "[[mcp]]\nname = \"web\"\nurl = \"http://127.0.0.1:{}/mcp\"\ntimeout_secs = 600\n",
        port.trim()
    ));
    let servers = Servers::new(&m.mcp, plan_llm::process_env(), Arc::new(Redactor::new()));
    // NB: a client that stopped reading at the cap but kept the connection would leave
    // the server stuck writing, and the call would end on its 600 s limit as a timeout:
    // the kind below, not a clock, shows the answer was refused and the connection let go.
    let e = servers
        .call("web", "big", args(json!({"bytes": 17_000_000})))
        .await
        .unwrap_err();
    assert_eq!(e.kind, CallErrorKind::BadResponse, "{}", e.message);
    assert!(
        e.message.contains("web") && e.message.contains("too large"),
        "{}",
        e.message
    );
    let ok = servers
        .call("web", "echo", args(json!({"text": "still here"})))
        .await
        .unwrap();
    assert_eq!(plan_mcp::output("echo", ok).unwrap(), json!("still here"));
    servers.shutdown().await;
}

#[tokio::test]
async fn a_tool_name_no_plan_can_call_is_refused_naming_its_server() {
    let cache = tempfile::tempdir().unwrap();
    for (bad, why) in [
        ("", "is empty"),
        ("  ", "is empty"),
        ("two\nlines", "holds a control character"),
        ("tab\there", "holds a control character"),
        ("bell\u{7}", "holds a control character"),
    ] {
        let name = serde_json::to_string(bad).unwrap();
        let table = fake("fake", &["--bad-name", &name], "prefix = \"f_\"\n");
        let want = format!(
            "MCP server `fake` lists a tool named {bad:?}, which {why}: `exclude` it, or fix the server"
        );
        // Listed by the server, then from the cache it wrote.
        for listing in [Listing::Fresh, Listing::Cached] {
            let mut m = manifest(&table);
            let servers = Servers::new(&m.mcp, plan_llm::process_env(), Arc::new(Redactor::new()));
            let e = import(&mut m, &servers, Some(cache.path()), listing)
                .await
                .unwrap_err();
            servers.shutdown().await;
            assert_eq!(e.message, want, "{listing:?}");
        }
        // Excluded, the rest of the server is imported.
        let excluded = format!("{table}exclude = [{name}]\n");
        let mut m = manifest(&excluded);
        let servers = Servers::new(&m.mcp, plan_llm::process_env(), Arc::new(Redactor::new()));
        import(&mut m, &servers, Some(cache.path()), Listing::Cached)
            .await
            .unwrap();
        servers.shutdown().await;
        assert!(m.get("f_echo").is_some());
        assert!(
            m.tools
                .iter()
                .all(|t| !t.name.trim_start_matches("f_").trim().is_empty())
        );
    }
}
