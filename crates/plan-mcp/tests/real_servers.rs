//! Tools of real MCP servers (installed by scripts/mcp-deps), as the engine uses them, in
//! process: the reference server `@modelcontextprotocol/server-everything` over stdio,
//! and a server written with the Python SDK (planvm's tests/mcp/server.py) over stdio and
//! streamable HTTP. Imported into a manifest, plans checked against their schemas and run
//! by a `plan_host::Host`, recorded and replayed. Without the servers the tests say they
//! are skipped, unless PLANRT_REQUIRE_MCP is set (scripts/test sets it).

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{manifest, real, server_py};
use plan_compiler::CompileOptions;
use plan_host::{Host, HostOptions, RunReport, RunStatus, Tracer, run_plan};
use plan_llm::{CallErrorKind, EnvLookup, Redactor, process_env};
use plan_manifest::Manifest;
use plan_mcp::{Listing, Servers, import};
use serde_json::{Map, Value, json};

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// The JSON an output holds as text (the Python SDK's answer of a `dict`: text only).
fn parsed(output: Value) -> Value {
    serde_json::from_str(output.as_str().unwrap_or_else(|| panic!("{output}"))).unwrap()
}

/// An environment of `pairs` only.
fn env(pairs: &[(&str, &str)]) -> EnvLookup {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Arc::new(move |name| map.get(name).cloned().ok_or(std::env::VarError::NotPresent))
}

/// The manifest of the tools file `text` with its servers' tools imported (listed by the
/// servers, not a cache), and the clients that listed them, still running.
async fn imported(text: &str, env: EnvLookup) -> (Manifest, Arc<Servers>) {
    let mut m = manifest(text);
    let servers = Arc::new(Servers::new(&m.mcp, env, Arc::new(Redactor::new())));
    import(&mut m, &servers, None, Listing::Fresh)
        .await
        .unwrap_or_else(|e| panic!("{}", e.message));
    (m, servers)
}

/// A plan of one call each, `final_answer` joining their outputs.
fn plan(calls: &[(&str, Value)]) -> String {
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
    serde_json::to_string_pretty(&steps).unwrap()
}

/// `plan` compiled against `host`'s manifest and run by it: its report, and every event
/// its trace was told.
async fn run(host: &Host, plan: &str) -> (RunReport, Vec<Value>) {
    let opts = CompileOptions {
        manifest: host.manifest().clone(),
        ..CompileOptions::default()
    };
    let loaded = plan_compiler::load(plan.as_bytes().to_vec(), &opts).unwrap_or_else(|e| {
        panic!("{e:?}");
    });
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let mut tracer =
        Tracer::none().with_observer(Box::new(move |e| seen.lock().unwrap().push(e.clone())));
    let report = run_plan(
        host,
        &loaded.program,
        Vec::new(),
        plan_vm::Limits::default(),
        &mut tracer,
    )
    .await;
    drop(tracer);
    let events = std::mem::take(&mut *events.lock().unwrap());
    (report, events)
}

/// A host calling the servers through `servers` (those that imported its tools).
fn sharing(m: Manifest, servers: Arc<Servers>, opts: HostOptions) -> Host {
    Host::new(
        m,
        HostOptions {
            mcp: Some(servers),
            ..opts
        },
    )
    .unwrap()
}

/// The message a failed run ended with.
fn failure(report: &RunReport) -> &str {
    assert_eq!(report.status, RunStatus::Failed, "{report:?}");
    &report.error.as_ref().unwrap().message
}

#[tokio::test]
async fn a_plan_is_checked_against_the_schemas_of_a_servers_tools() {
    let Some(real) = real("schemas") else {
        return;
    };
    let (m, servers) = imported(&real.everything(), process_env()).await;
    servers.shutdown().await;
    let opts = CompileOptions {
        manifest: m,
        ..CompileOptions::default()
    };
    // Wrong arguments are refused before anything runs, naming the parameter and what
    // its schema accepts.
    let bad = plan(&[
        ("ev_get-sum", json!({"a": "two"})),
        ("ev_get-structured-content", json!({"location": "Paris"})),
    ]);
    let compiled = plan_compiler::compile(&bad, &opts);
    assert!(compiled.program.is_none());
    let errors: Vec<&str> = (compiled.diagnostics.iter())
        .filter(|d| d.is_error())
        .map(|d| d.message.as_str())
        .collect();
    for want in [
        "`ev_get-sum` requires parameter `b`",
        "parameter `a` of `ev_get-sum` must be a number, found string",
        "parameter `location` of `ev_get-structured-content` must be one of \"New York\", \"Chicago\", \"Los Angeles\", found \"Paris\"",
    ] {
        assert!(errors.contains(&want), "{want}\n{errors:#?}");
    }
    // What the schemas accept passes.
    let good = plan(&[
        ("ev_get-sum", json!({"a": 2, "b": 40})),
        ("ev_get-structured-content", json!({"location": "Chicago"})),
    ]);
    let compiled = plan_compiler::compile(&good, &opts);
    assert!(compiled.program.is_some(), "{:#?}", compiled.diagnostics);
}

#[tokio::test]
async fn a_plan_calls_several_mcp_tools_and_two_long_ones_at_once() {
    let Some(real) = real("several") else {
        return;
    };
    let (m, servers) = imported(&real.everything(), process_env()).await;
    let host = sharing(m, servers, HostOptions::default());
    let long = || {
        (
            "ev_trigger-long-running-operation",
            json!({"duration": 2, "steps": 2}),
        )
    };
    let plan = plan(&[
        ("ev_echo", json!({"message": "hello"})),
        ("ev_get-sum", json!({"a": 2, "b": 40})),
        ("ev_get-structured-content", json!({"location": "Chicago"})),
        long(),
        long(),
    ]);
    let (report, events) = run(&host, &plan).await;
    host.shutdown().await;
    assert!(report.is_ok(), "{report:?}");
    let answer = report.final_answer.as_str().unwrap();
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
    let long_calls = |event: &str| -> Vec<usize> {
        (events.iter().enumerate())
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
async fn a_tool_error_and_a_server_dead_mid_call_are_clear_and_it_starts_again() {
    let Some(real) = real("errors") else {
        return;
    };
    let m = manifest(&real.python("py"));
    let servers = Servers::new(&m.mcp, process_env(), Arc::new(Redactor::new()));
    // isError: the call fails with the tool's own text.
    let said = servers
        .call("py", "fail", args(json!({"reason": "the disk is full"})))
        .await
        .unwrap();
    let e = plan_mcp::output("fail", said).unwrap_err();
    assert_eq!(
        e.message,
        "MCP tool `fail` reported an error: Error executing tool fail: cannot do it: the disk is full"
    );
    // A server that dies mid-call: a clear error with what it said last; the next call
    // starts it again.
    let e = servers.call("py", "die", Map::new()).await.unwrap_err();
    assert_eq!(e.kind, CallErrorKind::Transport, "{}", e.message);
    assert!(
        e.message
            .contains("MCP server `py` stopped while calling `die`")
            && e.message.contains("dying now"),
        "{}",
        e.message
    );
    let ok = servers
        .call("py", "lookup", args(json!({"city": "Oslo"})))
        .await
        .unwrap();
    assert_eq!(
        parsed(plan_mcp::output("lookup", ok).unwrap()),
        json!({"city": "Oslo", "temperature": 21, "unit": "C"})
    );
    servers.shutdown().await;
}

#[tokio::test]
async fn a_server_that_exits_between_calls_is_started_again_before_the_next() {
    let Some(real) = real("restart") else {
        return;
    };
    let m = manifest(&format!("{}{}", real.python("py"), real.python("py2")));
    let servers = Servers::new(&m.mcp, process_env(), Arc::new(Redactor::new()));
    let call = |server: &'static str, tool: &'static str, a: Value| {
        let servers = &servers;
        async move {
            let out = servers.call(server, tool, args(a)).await;
            plan_mcp::output(tool, out.unwrap_or_else(|e| panic!("{}", e.message))).unwrap()
        }
    };
    let bye = call("py", "quit_soon", json!({"seconds": 0.05})).await;
    assert_eq!(bye, json!({"result": "bye"}));
    // The first server quits while another's slow call is waited for.
    let slept = call("py2", "slow", json!({"seconds": 1})).await;
    assert_eq!(slept, json!({"result": "slept 1.0"}));
    assert_eq!(
        parsed(call("py", "lookup", json!({"city": "Lima"})).await),
        json!({"city": "Lima", "temperature": 21, "unit": "C"})
    );
    servers.shutdown().await;
}

#[tokio::test]
async fn a_call_that_outlives_its_limit_is_stopped_not_waited_for() {
    let Some(real) = real("limit") else {
        return;
    };
    let (m, servers) = imported(&real.python("py"), process_env()).await;
    let opts = HostOptions {
        tool_timeout: Some(Duration::from_secs(1)),
        ..HostOptions::default()
    };
    let host = sharing(m, servers, opts);
    let (report, _) = run(&host, &plan(&[("slow", json!({"seconds": 600}))])).await;
    let message = failure(&report);
    assert!(message.contains("timed out after 1 s"), "{message}");
    // The call was let go of, not the server: the next one is answered.
    let (report, _) = run(&host, &plan(&[("lookup", json!({"city": "Oslo"}))])).await;
    host.shutdown().await;
    assert!(report.is_ok(), "{report:?}");
}

#[tokio::test]
async fn a_server_that_exits_at_start_is_a_clear_error() {
    // NB: every server's problem is reported, not only the first's.
    let mut m = manifest(concat!(
        "[[mcp]]\nname = \"broken\"\n",
        "command = [\"python3\", \"-c\", \"import sys; print('missing GITHUB_TOKEN', file=sys.stderr); sys.exit(2)\"]\n",
        "[[mcp]]\nname = \"gone\"\ncommand = [\"/nonexistent/mcp-server\"]\n",
    ));
    let servers = Servers::new(&m.mcp, process_env(), Arc::new(Redactor::new()));
    let e = import(&mut m, &servers, None, Listing::Cached)
        .await
        .unwrap_err();
    servers.shutdown().await;
    assert!(
        e.message.contains("MCP server `broken` did not start")
            && e.message.contains("missing GITHUB_TOKEN"),
        "{}",
        e.message
    );
    assert!(
        e.message
            .contains("MCP server `gone`: cannot start `/nonexistent/mcp-server`"),
        "{}",
        e.message
    );
}

/// Waits for a server to accept connections at `port` on the loopback, giving up after
/// a while.
async fn listening(port: u16) {
    for _ in 0..300 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the HTTP test server did not start");
}

#[tokio::test]
async fn streamable_http_with_a_key_that_never_shows() {
    let Some(real) = real("http") else {
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _server = common::Killed(
        std::process::Command::new(&real.python)
            .arg(server_py())
            .args(["http", &port.to_string()])
            .stderr(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    listening(port).await;
    let table = format!(
        "[[mcp]]\nname = \"web\"\nurl = \"http://127.0.0.1:{port}/mcp\"\napi_key_env = \"WEB_TOKEN\"\nprefix = \"web_\"\ninclude = [\"whoami\", \"lookup\", \"add_note\"]\n"
    );
    let key = "sk-mcp-test-0123456789abcdef";
    let (m, servers) = imported(&table, env(&[("WEB_TOKEN", key)])).await;
    servers.shutdown().await;
    let names: Vec<&str> = (m.tools.iter().map(|t| t.name.as_str()))
        .filter(|n| n.starts_with("web_"))
        .collect();
    assert_eq!(names, ["web_lookup", "web_add_note", "web_whoami"]);
    let plan = plan(&[
        ("web_whoami", json!({})),
        ("web_lookup", json!({"city": "Lima", "unit": "F"})),
    ]);
    // The host starts its own clients, as a run of planvm does.
    let keyed = HostOptions {
        env: env(&[("WEB_TOKEN", key)]),
        ..HostOptions::default()
    };
    let host = Host::new(m.clone(), keyed).unwrap();
    let (report, events) = run(&host, &plan).await;
    host.shutdown().await;
    assert!(report.is_ok(), "{report:?}");
    // The server saw the key; the run's answer, variables and trace never show it.
    let parts: Vec<Value> = (report.final_answer.as_str().unwrap().split(" | "))
        .map(|p| serde_json::from_str(p).unwrap())
        .collect();
    assert_eq!(
        parts,
        [
            json!({"result": "Bearer [redacted]"}),
            json!({"city": "Lima", "temperature": 70, "unit": "F"})
        ]
    );
    let shown = format!("{report:?}{}", Value::Array(events));
    assert!(!shown.contains(key), "{shown}");
    // Without the key, the call fails naming the variable.
    let host = Host::new(
        m,
        HostOptions {
            env: env(&[]),
            ..HostOptions::default()
        },
    )
    .unwrap();
    let (report, _) = run(&host, &plan).await;
    host.shutdown().await;
    let message = failure(&report);
    assert!(
        message.contains("[[mcp]] `web` reads WEB_TOKEN, and WEB_TOKEN is not set"),
        "{message}"
    );
}

#[tokio::test]
async fn a_recorded_mcp_run_replays_with_no_server() {
    let Some(real) = real("replay") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The server is started through a script that is gone once the run is recorded.
    let script = dir.path().join("server.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexec {} {} stdio\n",
            real.python.display(),
            server_py().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (m, servers) = imported(
        &format!(
            "[[mcp]]\nname = \"py\"\ncommand = [\"{}\"]\n",
            script.display()
        ),
        process_env(),
    )
    .await;
    let plan = plan(&[
        ("lookup", json!({"city": "Oslo"})),
        ("add_note", json!({"text": "seen"})),
    ]);
    let cassette = dir.path().join("run.cassette.jsonl");
    let recording = HostOptions {
        record: Some(cassette.clone()),
        ..HostOptions::default()
    };
    let host = sharing(m.clone(), servers, recording);
    let (recorded, _) = run(&host, &plan).await;
    host.shutdown().await;
    assert!(recorded.is_ok(), "{recorded:?}");
    std::fs::remove_file(&script).unwrap();
    let replaying = HostOptions {
        replay: Some(cassette),
        ..HostOptions::default()
    };
    let host = Host::new(m.clone(), replaying).unwrap();
    let (replayed, _) = run(&host, &plan).await;
    host.shutdown().await;
    assert!(replayed.is_ok(), "{replayed:?}");
    assert_eq!(replayed.final_answer, recorded.final_answer);
    // And without the cassette, the server really is gone.
    let host = Host::new(m, HostOptions::default()).unwrap();
    let (report, _) = run(&host, &plan).await;
    host.shutdown().await;
    let message = failure(&report);
    assert!(message.contains("cannot start"), "{message}");
}
