//! Tools from real MCP servers (installed by scripts/mcp-deps): the reference server
//! `@modelcontextprotocol/server-everything` over stdio, and a server written with the
//! Python SDK (tests/mcp/server.py) over stdio and streamable HTTP. Without them the
//! tests say they are skipped, unless PLANRT_REQUIRE_MCP is set (scripts/test sets it).

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Out, planvm, s};
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

/// A test's directory: its tools files, plans and MCP listing cache.
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

    /// A plan of one call each, `final_answer` joining their outputs.
    fn plan(&self, name: &str, calls: &[(&str, Value)]) -> String {
        let mut steps: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, (tool, args))| {
                json!({"seq_no": i + 1, "type": "calling", "parameters": {
                    "tool_name": tool, "tool_params": args, "output_vars": [format!("out{i}")]
                }})
            })
            .collect();
        steps.insert(
            0,
            json!({"seq_no": 0, "type": "reasoning", "parameters": {
                "chain_of_thoughts": "Call the tools.", "dependency_analysis": "None."
            }}),
        );
        let all: Vec<String> = (0..calls.len()).map(|i| format!("${{out{i}}}")).collect();
        steps.push(json!({"seq_no": calls.len() + 1, "type": "assign",
            "parameters": {"final_answer": all.join(" | ")}}));
        self.write(name, &serde_json::to_string_pretty(&steps).unwrap())
    }

    async fn planvm(&self, args: &[&str], env: &[(&str, &str)]) -> Out {
        let cache = self.path("cache");
        let mut env = env.to_vec();
        env.push(("PLANVM_CACHE_DIR", &cache));
        planvm(args.iter().map(|a| (*a).to_owned()).collect(), &env).await
    }
}

fn everything_toml(everything: &Path) -> String {
    format!(
        "[[mcp]]\nname = \"everything\"\ncommand = [\"node\", \"{}\", \"stdio\"]\nprefix = \"ev_\"\nexclude = [\"get-env\"]\n",
        everything.display()
    )
}

fn python_toml(python: &Path, name: &str) -> String {
    format!(
        "[[mcp]]\nname = \"{name}\"\ncommand = [\"{}\", \"{}\", \"stdio\"]\n",
        python.display(),
        s(&here().join("server.py"))
    )
}

#[tokio::test]
async fn a_server_is_imported_listed_and_checked_against_its_schemas() {
    let Some((everything, _)) = servers("import") else {
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

    // A plan with wrong arguments is refused before anything runs, naming the parameter
    // and what its schema accepts; the text form lists the same tools.
    let bad = dir.plan(
        "bad.json",
        &[
            ("ev_get-sum", json!({"a": "two"})),
            ("ev_get-structured-content", json!({"location": "Paris"})),
        ],
    );
    let out = dir.planvm(&["run", &bad, "--tools", &tools], &[]).await;
    assert_eq!(out.code, Some(65), "{}", out.stderr);
    for want in [
        "`ev_get-sum` requires parameter `b`",
        "parameter `a` of `ev_get-sum` must be a number, found string",
        "parameter `location` of `ev_get-structured-content` must be one of \"New York\", \"Chicago\", \"Los Angeles\", found \"Paris\"",
    ] {
        assert!(out.stderr.contains(want), "{want}\n{}", out.stderr);
    }
    let planc = Path::new(common::BIN).with_file_name("planc");
    if planc.exists() {
        let check = std::process::Command::new(&planc)
            .args(["check", &bad, "--tools", &tools])
            .env("PLANVM_CACHE_DIR", dir.path("cache"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&check.stderr);
        assert_eq!(check.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("`ev_get-sum` requires parameter `b`"),
            "{stderr}"
        );
    } else {
        assert!(
            std::env::var_os("PLANRT_REQUIRE_MCP").is_none(),
            "planc is not built beside planvm"
        );
        eprintln!("planc check: SKIPPED: planc is not built (cargo test --workspace builds it)");
    }
    let text = dir.planvm(&["tools", "list", "--tools", &tools], &[]).await;
    assert!(
        text.stdout.contains(
            "ev_get-structured-content (read, mcp:everything)\n  Returns structured content"
        ),
        "{}",
        text.stdout
    );
}

#[tokio::test]
async fn a_plan_calls_several_mcp_tools_and_two_long_ones_at_once() {
    let Some((everything, _)) = servers("several") else {
        return;
    };
    let dir = Dir::new();
    let tools = dir.write("tools.toml", &everything_toml(&everything));
    let long = || {
        (
            "ev_trigger-long-running-operation",
            json!({"duration": 2, "steps": 2}),
        )
    };
    let one = dir.plan("one.json", &[long()]);
    let plan = dir.plan(
        "plan.json",
        &[
            ("ev_echo", json!({"message": "hello"})),
            ("ev_get-sum", json!({"a": 2, "b": 40})),
            ("ev_get-structured-content", json!({"location": "Chicago"})),
            long(),
            long(),
        ],
    );
    let out = dir.planvm(&["run", &one, "--tools", &tools], &[]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let trace = dir.path("trace.jsonl");
    let out = dir
        .planvm(
            &[
                "run", &plan, "--tools", &tools, "--format", "json", "--trace", &trace,
            ],
            &[],
        )
        .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    let answer = report["final_answer"].as_str().unwrap();
    let parts: Vec<&str> = answer.split(" | ").collect();
    assert_eq!(parts[0], "Echo: hello");
    assert_eq!(parts[1], "The sum of 2 and 40 is 42.");
    // structuredContent is the value, as JSON.
    let weather: Value = serde_json::from_str(parts[2]).unwrap();
    assert!(weather["temperature"].is_number(), "{weather}");
    assert!(
        parts[3].starts_with("Long running operation completed."),
        "{answer}"
    );
    assert_eq!(parts[3], parts[4]);
    // Two 2-second operations at once: both started before either ended (an order, not a
    // time, so a loaded machine cannot fail it).
    let events: Vec<Value> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let long_calls = |event: &str| -> Vec<usize> {
        events
            .iter()
            .enumerate()
            .filter(|(_, e)| {
                e["event"] == event && e["tool"] == "ev_trigger-long-running-operation"
            })
            .map(|(i, _)| i)
            .collect()
    };
    let (started, ended) = (long_calls("tool_call_start"), long_calls("tool_call_end"));
    assert_eq!((started.len(), ended.len()), (2, 2), "{events:?}");
    assert!(
        started[1] < ended[0],
        "the second long call started after the first ended: not run at once"
    );
}

#[tokio::test]
async fn errors_a_dead_server_and_a_restart() {
    let Some((_, python)) = servers("errors") else {
        return;
    };
    let dir = Dir::new();
    let tools = dir.write("tools.toml", &python_toml(&python, "py"));
    // isError: the run fails with the tool's own text.
    let fail = dir.plan(
        "fail.json",
        &[("fail", json!({"reason": "the disk is full"}))],
    );
    let out = dir.planvm(&["run", &fail, "--tools", &tools], &[]).await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("MCP tool `fail` reported an error: Error executing tool fail: cannot do it: the disk is full"),
        "{}",
        out.stderr
    );
    // A server that dies mid-call: a clear error with what it said last, at once; the
    // next run of the same process starts it again.
    let die = dir.plan("die.json", &[("die", json!({}))]);
    let lookup = dir.plan("lookup.json", &[("lookup", json!({"city": "Oslo"}))]);
    let list = dir.write("list.txt", &format!("{die}\n{lookup}\n"));
    let out = dir
        .planvm(
            &["batch", "--list", &list, "--jobs", "1", "--tools", &tools],
            &[],
        )
        .await;
    let runs: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(runs.len(), 2, "{}\n{}", out.stdout, out.stderr);
    let died = runs.iter().find(|r| r["status"] == "failed").unwrap();
    let message = died["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("MCP server `py` stopped while calling `die`")
            && message.contains("dying now"),
        "{message}"
    );
    let ok = runs.iter().find(|r| r["status"] == "ok").unwrap();
    let answer: Value = serde_json::from_str(ok["final_answer"].as_str().unwrap()).unwrap();
    assert_eq!(
        answer,
        json!({"city": "Oslo", "temperature": 21, "unit": "C"})
    );
    // A server that exits between calls is started again before the next one: the
    // lookup waits for a slow call of another server while the first one quits.
    let two = dir.write(
        "two.toml",
        &format!(
            "{}{}prefix = \"p2_\"\n",
            python_toml(&python, "py"),
            python_toml(&python, "py2")
        ),
    );
    let steps = dir.write(
        "quits.json",
        &json!([
            {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "quit_soon", "tool_params": {"seconds": 0.05}, "output_vars": ["q"]}},
            {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "p2_slow", "tool_params": {"seconds": 1}, "output_vars": ["w"]}},
            {"seq_no": 2, "type": "calling", "parameters": {"tool_name": "lookup", "tool_params": {"city": "${w.result}"}, "output_vars": ["final_answer"]}}
        ])
        .to_string(),
    );
    let out = dir.planvm(&["run", &steps, "--tools", &two], &[]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("slept 1"), "{}", out.stdout);
    // A call that outlives its limit is stopped (and cancelled on the server), not waited for.
    let slow = dir.plan("slow.json", &[("slow", json!({"seconds": 600}))]);
    let out = dir
        .planvm(
            &["run", &slow, "--tools", &tools, "--tool-timeout", "1"],
            &[],
        )
        .await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(out.stderr.contains("timed out after 1 s"), "{}", out.stderr);
}

#[tokio::test]
async fn a_server_that_exits_at_start_is_a_clear_error() {
    let Some((_, python)) = servers("exits") else {
        return;
    };
    let dir = Dir::new();
    let tools = dir.write(
        "tools.toml",
        &format!(
            "[[mcp]]\nname = \"broken\"\ncommand = [\"{}\", \"-c\", \"import sys; print('missing GITHUB_TOKEN', file=sys.stderr); sys.exit(2)\"]\n",
            python.display()
        ),
    );
    let out = dir.planvm(&["tools", "list", "--tools", &tools], &[]).await;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("MCP server `broken` did not start")
            && out.stderr.contains("missing GITHUB_TOKEN"),
        "{}",
        out.stderr
    );
    let tools = dir.write(
        "missing.toml",
        "[[mcp]]\nname = \"gone\"\ncommand = [\"/nonexistent/mcp-server\"]\n",
    );
    let out = dir.planvm(&["tools", "list", "--tools", &tools], &[]).await;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("MCP server `gone`: cannot start `/nonexistent/mcp-server`"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn streamable_http_with_a_key_that_never_shows() {
    let Some((_, python)) = servers("http") else {
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = std::process::Command::new(&python)
        .args([
            s(&here().join("server.py")),
            "http".into(),
            port.to_string(),
        ])
        .stderr(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "the HTTP test server did not start"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let dir = Dir::new();
    let tools = dir.write(
        "tools.toml",
        &format!(
            "[[mcp]]\nname = \"web\"\nurl = \"http://127.0.0.1:{port}/mcp\"\napi_key_env = \"WEB_TOKEN\"\nprefix = \"web_\"\ninclude = [\"whoami\", \"lookup\", \"add_note\"]\n"
        ),
    );
    let key = "sk-mcp-test-0123456789abcdef";
    let env = [("WEB_TOKEN", key)];
    let out = dir
        .planvm(
            &["tools", "refresh", "--tools", &tools, "--format", "json"],
            &env,
        )
        .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let names: Vec<String> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["name"].to_string())
        .filter(|n| n.starts_with("\"web_"))
        .collect();
    assert_eq!(
        names,
        ["\"web_lookup\"", "\"web_add_note\"", "\"web_whoami\""]
    );
    let plan = dir.plan(
        "plan.json",
        &[
            ("web_whoami", json!({})),
            ("web_lookup", json!({"city": "Lima", "unit": "F"})),
        ],
    );
    let trace = dir.path("trace.jsonl");
    let out = dir
        .planvm(&["run", &plan, "--tools", &tools, "--trace", &trace], &env)
        .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    // The server saw the key; planvm's output and trace never show it.
    let parts: Vec<Value> = out
        .stdout
        .split(" | ")
        .map(|p| serde_json::from_str(p).unwrap())
        .collect();
    assert_eq!(
        parts,
        [
            json!({"result": "Bearer [redacted]"}),
            json!({"city": "Lima", "temperature": 70, "unit": "F"})
        ]
    );
    let trace = std::fs::read_to_string(&trace).unwrap();
    assert!(!trace.contains(key) && !out.stderr.contains(key));
    // Without the key, the call fails naming the variable.
    let out = dir.planvm(&["run", &plan, "--tools", &tools], &[]).await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("[[mcp]] `web` reads WEB_TOKEN, and WEB_TOKEN is not set"),
        "{}",
        out.stderr
    );
    server.kill().unwrap();
    server.wait().unwrap();
}

#[tokio::test]
async fn a_recorded_mcp_run_replays_with_no_server() {
    let Some((_, python)) = servers("replay") else {
        return;
    };
    let dir = Dir::new();
    // The server is started through a script that is gone once the run is recorded.
    let script = dir.write(
        "server.sh",
        &format!(
            "#!/bin/sh\nexec {} {} stdio\n",
            python.display(),
            s(&here().join("server.py"))
        ),
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tools = dir.write(
        "tools.toml",
        &format!("[[mcp]]\nname = \"py\"\ncommand = [\"{script}\"]\n"),
    );
    let plan = dir.plan(
        "plan.json",
        &[
            ("lookup", json!({"city": "Oslo"})),
            ("add_note", json!({"text": "seen"})),
        ],
    );
    let cassette = dir.path("run.cassette.jsonl");
    let out = dir
        .planvm(
            &["run", &plan, "--tools", &tools, "--record", &cassette],
            &[],
        )
        .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let recorded = out.stdout.clone();
    std::fs::remove_file(&script).unwrap();
    let out = dir
        .planvm(
            &["run", &plan, "--tools", &tools, "--replay", &cassette],
            &[],
        )
        .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, recorded);
    // And without the cassette, the server really is gone.
    let out = dir.planvm(&["run", &plan, "--tools", &tools], &[]).await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(out.stderr.contains("cannot start"), "{}", out.stderr);
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

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
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
