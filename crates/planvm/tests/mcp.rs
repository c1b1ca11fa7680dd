//! MCP as only the `planvm` binary shows it, against real MCP software (installed by
//! scripts/mcp-deps): `planvm tools list` of the reference server
//! `@modelcontextprotocol/server-everything`, and `planvm mcp` and `planvm serve`'s
//! endpoint answering the Python SDK's client (tests/mcp/client.py). How the engine
//! imports, calls, records and replays servers' tools is tested in process, by
//! plan-mcp's tests/real_servers.rs. Without the servers the tests say they are skipped,
//! unless PLANRT_REQUIRE_MCP is set (scripts/test sets it).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Out, planvm, root, s};
use serde_json::{Value, json};

fn here() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

/// The server-everything entry point and a Python with the MCP SDK, or `None` (skipped,
/// loudly) when scripts/mcp-deps has not installed them.
fn servers(test: &str) -> Option<(PathBuf, PathBuf)> {
    let everything =
        here().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let python = std::env::var_os("PLANRT_MCP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/mcp-venv/bin/python")
        });
    if everything.exists() && python.exists() {
        return Some((everything, python));
    }
    let why = format!(
        "{test}: SKIPPED: the MCP test servers are not installed (run scripts/mcp-deps): {} {}",
        everything.display(),
        python.display()
    );
    assert!(std::env::var_os("PLANRT_REQUIRE_MCP").is_none(), "{why}");
    eprintln!("{why}");
    None
}

/// A test's directory: its tools file, store and MCP listing cache.
struct Dir(tempfile::TempDir);

impl Dir {
    fn new() -> Dir {
        Dir(tempfile::tempdir().unwrap())
    }

    fn path(&self, name: &str) -> String {
        s(&self.0.path().join(name))
    }

    fn write(&self, name: &str, text: &str) -> String {
        std::fs::write(self.0.path().join(name), text).unwrap();
        self.path(name)
    }

    async fn planvm(&self, args: &[&str], env: &[(&str, &str)]) -> Out {
        let cache = self.path("cache");
        let mut env = env.to_vec();
        env.push(("PLANVM_CACHE_DIR", &cache));
        planvm(args, &env).await
    }
}

fn everything_toml(everything: &Path) -> String {
    format!(
        "[[mcp]]\nname = \"everything\"\ncommand = [\"node\", \"{}\", \"stdio\"]\nprefix = \"ev_\"\nexclude = [\"get-env\"]\n",
        everything.display()
    )
}

#[tokio::test]
async fn planvm_tools_list_shows_a_servers_tools() {
    let Some((everything, _)) = servers("tools list") else {
        return;
    };
    let dir = Dir::new();
    let tools = dir.write("tools.toml", &everything_toml(&everything));
    let out = dir
        .planvm(
            &["tools", "list", "--tools", &tools, "--format", "json"],
            &[],
        )
        .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let listed: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let tool = |name: &str| listed.iter().find(|t| t["name"] == name).cloned();
    assert!(tool("llm_generate").is_some(), "the built-ins stay");
    assert!(tool("ev_get-env").is_none(), "excluded");
    let echo = tool("ev_echo").expect("ev_echo imported");
    assert_eq!(echo["served_by"], "mcp:everything");
    assert_eq!(
        echo["params"],
        json!([{"name": "message", "type": "string", "required": true, "description": "Message to echo"}])
    );
    assert_eq!(
        echo["backend"],
        json!({"kind": "mcp", "server": "everything", "tool": "echo"})
    );
    let sum = tool("ev_get-sum").unwrap();
    assert_eq!(sum["params"][0]["type"], "number");
    assert_eq!(
        tool("ev_get-structured-content").unwrap()["params"][0]["enum"],
        json!(["New York", "Chicago", "Los Angeles"])
    );
    // readOnlyHint: read; no hint: write.
    assert_eq!(echo["effects"], "read");
    assert_eq!(
        tool("ev_toggle-simulated-logging").unwrap()["effects"],
        "write"
    );
    // The text form lists the same tools, each with its effects and server.
    let text = dir.planvm(&["tools", "list", "--tools", &tools], &[]).await;
    assert!(
        text.stdout.contains(
            "ev_get-structured-content (read, mcp:everything)\n  Returns structured content"
        ),
        "{}",
        text.stdout
    );
}

/// `calls` made by the Python SDK's client (tests/mcp/client.py) over `transport`: its
/// `{"tools", "results"}`.
async fn client(python: &Path, transport: &[&str], calls: Value) -> Value {
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg(here().join("client.py"))
        .args(transport)
        .env_remove("PLANVM_STORE")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    use tokio::io::AsyncWriteExt;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(calls.to_string().as_bytes()).await.unwrap();
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("the MCP client finished")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"))
}

/// The calls both transports are tested with: a plan, a plan with an error, a goal from
/// the README's cassette, and a status.
fn server_calls() -> Value {
    json!([
        ["run_plan", {"plan": [
            {"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "Greet.", "dependency_analysis": "None."}},
            {"seq_no": 1, "type": "assign", "parameters": {"final_answer": "hello ${who}"}}
        ], "vars": {"who": "agent"}}],
        ["run_plan", {"plan": "[{\"seq_no\": 0, \"type\": \"calling\", \"parameters\": {\"tool_name\": \"web_serch\", \"tool_params\": {}, \"output_vars\": [\"final_answer\"]}}]"}],
        ["ask", {"goal": "Does TiDB support SQL?", "response_format": {"lang": "Japanese"}}],
        ["ask", {"goal": " \n "}],
    ])
}

/// What both transports must answer to [`server_calls`].
fn check_server(out: &Value) {
    let names: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ask", "run_plan", "run_status"]);
    let r = &out["results"];
    assert_eq!(r[0]["isError"], false, "{}", r[0]);
    assert_eq!(r[0]["text"], "hello agent");
    assert_eq!(r[0]["structured"]["status"], "ok");
    assert_eq!(r[0]["structured"]["steps"], 2);
    // A plan with errors is not run: the text says what to repair.
    assert_eq!(r[1]["isError"], true, "{}", r[1]);
    let text = r[1]["text"].as_str().unwrap();
    assert!(
        text.contains("nothing was run")
            && text.contains("E0202 at seq_no 0: unknown tool `web_serch`"),
        "{text}"
    );
    assert_eq!(r[1]["structured"]["error"]["code"], "invalid_plan");
    assert_eq!(r[2]["isError"], false, "{}", r[2]);
    assert!(
        r[2]["text"]
            .as_str()
            .unwrap()
            .starts_with("はい、TiDB は SQL をサポートしています。"),
        "{}",
        r[2]
    );
    // An empty goal is refused before the planner is asked (the cassette holds no reply
    // to it: asked, it would fail otherwise).
    assert_eq!(r[3]["isError"], true, "{}", r[3]);
    assert_eq!(r[3]["structured"]["error"]["code"], "bad_goal", "{}", r[3]);
}

#[tokio::test]
async fn planvm_mcp_answers_the_python_sdk_over_stdio() {
    let Some((_, python)) = servers("planvm mcp") else {
        return;
    };
    let dir = Dir::new();
    let db = dir.path("runs.db");
    let tools = s(&root().join("examples/ask.toml"));
    let cassette = s(&root().join("examples/ask_tidb_sql.cassette.jsonl"));
    let planvm = common::BIN;
    let transport = [
        "stdio", planvm, "mcp", "--tools", &tools, "--replay", &cassette, "--store", &db,
    ];
    let out = client(&python, &transport, server_calls()).await;
    check_server(&out);
    // The runs are the store's: a second process reads them back.
    let id = out["results"][0]["structured"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let goal = out["results"][2]["structured"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let again = client(
        &python,
        &transport,
        json!([["run_status", {"id": id}], ["run_status", {"id": goal}], ["run_status", {"id": "nope"}]]),
    )
    .await;
    let r = &again["results"];
    assert_eq!(r[0]["structured"]["answer"], "hello agent", "{}", r[0]);
    assert_eq!(r[1]["structured"]["goal"]["status"], "answered", "{}", r[1]);
    assert_eq!(r[1]["structured"]["status"], "ok", "{}", r[1]);
    assert_eq!(r[2]["isError"], true, "{}", r[2]);
    assert_eq!(
        r[2]["structured"]["error"]["code"], "unknown_run",
        "{}",
        r[2]
    );
}

#[tokio::test]
async fn planvm_serve_answers_mcp_at_its_endpoint_behind_its_token() {
    let Some((_, python)) = servers("serve /mcp") else {
        return;
    };
    let dir = Dir::new();
    let db = dir.0.path().join("runs.db");
    let tools = s(&root().join("examples/ask.toml"));
    let cassette = s(&root().join("examples/ask_tidb_sql.cassette.jsonl"));
    let token = "mcp-endpoint-token-0123456789";
    let served = common::serve_with(
        &db,
        &[
            "--tools",
            &tools,
            "--replay",
            &cassette,
            "--token-env",
            "MCP_TOKEN",
        ],
        &[("MCP_TOKEN", token)],
    );
    let url = format!("{}/mcp", served.base);
    let out = client(&python, &["http", &url, token], server_calls()).await;
    check_server(&out);
    // Without the token: 401, as every other endpoint.
    plan_host::install_crypto();
    let status = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status.as_u16(), 401);
}
