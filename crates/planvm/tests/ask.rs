//! `planvm ask` against loopback servers: a fake OpenAI-compatible planner scripted by
//! what its requests hold, and HTTP tools. Repair from diagnostics, a planner that never
//! writes a plan, the prompt's contents, record → replay of a whole ask, and sessions as
//! the CLI shows them. (Re-planning, sessions' memory and questions to a person, through
//! the engine: plan-runs' tests/ask.rs.)

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use common::{planvm, root, s};

/// The fake planner: replies with `script(last user message)`.
struct FakePlanner(Arc<dyn Fn(&str) -> String + Send + Sync>);

impl Respond for FakePlanner {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let last = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .unwrap_or("");
        // A server that quotes the request: `{AUTH}` becomes the Authorization header.
        let auth = req
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let reply = (self.0)(last).replace("{AUTH}", auth);
        ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57}
        }))
    }
}

/// Tools: `/search` and `/llm` echo `path(body)`; `/flaky` refuses (HTTP 400, not retried).
struct Tools;

impl Respond for Tools {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let p = req.url.path().to_owned();
        if p == "/flaky" {
            return ResponseTemplate::new(400).set_body_string("flaky is down");
        }
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        ResponseTemplate::new(200).set_body_json(json!({ "text": format!("{p}({body})") }))
    }
}

struct Fixture {
    server: MockServer,
    dir: tempfile::TempDir,
    tools: PathBuf,
}

async fn fixture(script: impl Fn(&str) -> String + Send + Sync + 'static) -> Fixture {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(FakePlanner(Arc::new(script)))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(Tools)
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let base = server.uri();
    let mut text = format!(
        "[planner.backend]\nkind = \"openai\"\nbase_url = \"{base}/v1\"\nmodel = \"planner-model\"\napi_key_env = \"PLANNER_KEY\"\nmax_retries = 0\n\n"
    );
    for (tool, route, extra) in [
        ("vector_search", "/search", ""),
        ("llm_generate", "/llm", ""),
        (
            "flaky_tool",
            "/flaky",
            "description = \"Looks things up in a flaky service.\"\nparams = [ { name = \"q\", type = \"string\", required = true } ]\n",
        ),
    ] {
        text.push_str(&format!(
            "[[tool]]\nname = \"{tool}\"\n{extra}[tool.backend]\nkind = \"http\"\nurl = \"{base}{route}\"\npointer = \"/text\"\nmax_retries = 0\n\n"
        ));
    }
    let tools = dir.path().join("tools.toml");
    std::fs::write(&tools, text).unwrap();
    Fixture { server, dir, tools }
}

impl Fixture {
    async fn requests(&self, route: &str) -> Vec<Value> {
        self.server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .filter(|r| r.url.path() == route)
            .map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null))
            .collect()
    }

    async fn ask(&self, goal: &str, extra: &[&str]) -> (Option<i32>, Value, String) {
        let mut args: Vec<String> = ["ask", goal, "--tools", &s(&self.tools), "--format", "json"]
            .iter()
            .map(|a| (*a).to_owned())
            .collect();
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let out = planvm(args, &[("PLANNER_KEY", "sk-planner-secret")]).await;
        assert!(!out.stdout.contains("sk-planner-secret"), "{}", out.stdout);
        assert!(!out.stderr.contains("sk-planner-secret"), "{}", out.stderr);
        let json = serde_json::from_str(out.stdout.trim()).unwrap_or(Value::Null);
        (out.code, json, out.stderr)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn call(seq: u32, tool: &str, params: Value, out: &str) -> Value {
    json!({"seq_no": seq, "type": "calling", "parameters": {
        "tool_name": tool, "tool_params": params, "output_vars": [out]}})
}

fn plan(steps: Vec<Value>) -> String {
    format!(
        "Here is the plan (you sent {{AUTH}}).\n```json\n{}\n```",
        serde_json::to_string_pretty(&steps).unwrap()
    )
}

/// Two independent searches, then a third step, then the answer.
fn searches_then(third: Value) -> String {
    plan(vec![
        json!({"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "search twice, then answer"}}),
        call(
            1,
            "vector_search",
            json!({"query": "alpha", "top_k": 1}),
            "a",
        ),
        call(
            2,
            "vector_search",
            json!({"query": "beta", "top_k": 1}),
            "b",
        ),
        third,
        call(
            4,
            "llm_generate",
            json!({"prompt": "answer from ${a} and ${c}"}),
            "final_answer",
        ),
    ])
}

#[tokio::test]
async fn an_unknown_tool_is_repaired_from_the_diagnostics_and_the_ask_replays_offline() {
    let f = fixture(|last| {
        let llm = json!({"prompt": "combine ${a} ${b}"});
        if last.contains("error[E0202]") && last.contains("web_search") {
            searches_then(call(3, "llm_generate", llm, "c"))
        } else {
            searches_then(call(3, "web_search", json!({"query": "x"}), "c"))
        }
    })
    .await;
    let cassette = f.path("ask.jsonl");
    let (code, out, stderr) = f
        .ask(
            "What are alpha and beta?",
            &[
                "--response-format",
                r#"{"lang": "Japanese"}"#,
                "--record",
                &s(&cassette),
            ],
        )
        .await;
    assert_eq!(code, Some(0), "{stderr}\n{out}");
    assert_eq!(out["status"], "answered");
    let rounds = out["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 2);
    assert_eq!(rounds[0]["kind"], "plan");
    assert_eq!(rounds[1]["kind"], "repair");
    // Each round's tokens, and their sum.
    assert_eq!(
        rounds[1]["usage"],
        json!({"input_tokens": 50, "output_tokens": 7})
    );
    assert_eq!(
        out["usage"],
        json!({"input_tokens": 100, "output_tokens": 14})
    );
    let codes: Vec<&str> = rounds[0]["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["severity"] == "error")
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["E0202"]);
    let answer = out["answer"].as_str().unwrap().to_owned();
    assert!(answer.starts_with("/llm("), "{answer}");

    // The prompt holds every tool of the manifest and the response format.
    let asks = f.requests("/v1/chat/completions").await;
    assert_eq!(asks.len(), 2);
    let prompt = asks[0]["messages"][0]["content"].as_str().unwrap();
    for needle in [
        "What are alpha and beta?",
        "## vector_search",
        "## retrieve_knowledge_graph",
        "## flaky_tool",
        "Looks things up in a flaky service.",
        "- `q` (string, required)",
        "- `top_k` (int, optional, default 10)",
        "The final answer must be written in Japanese.",
    ] {
        assert!(
            prompt.contains(needle),
            "prompt lacks {needle:?}:\n{prompt}"
        );
    }
    // The repair request is the conversation so far plus the diagnostics.
    let repair = asks[1]["messages"].as_array().unwrap();
    assert_eq!(repair.len(), 3);
    assert_eq!(repair[1]["role"], "assistant");
    assert!(
        repair[2]["content"]
            .as_str()
            .unwrap()
            .contains("unknown tool")
    );

    // The planner quoted the key back: it is in no output.
    let recorded = std::fs::read_to_string(&cassette).unwrap();
    assert!(!recorded.contains("sk-planner-secret"), "{recorded}");
    assert!(
        recorded.contains("you sent Bearer [redacted]"),
        "{recorded}"
    );
    assert!(out["plan"].as_str().unwrap().contains("Bearer [redacted]"));

    // The same ask from the recording: no planner, no tools, the same answer.
    let before = f.server.received_requests().await.unwrap().len();
    let (code, replayed, stderr) = f
        .ask(
            "What are alpha and beta?",
            &[
                "--response-format",
                r#"{"lang": "Japanese"}"#,
                "--replay",
                &s(&cassette),
            ],
        )
        .await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(replayed["answer"], json!(answer));
    assert_eq!(replayed["rounds"].as_array().unwrap().len(), 2);
    assert_eq!(f.server.received_requests().await.unwrap().len(), before);
}

#[tokio::test]
async fn a_planner_that_never_writes_a_plan_fails_clearly_after_the_repairs() {
    let f = fixture(|_| "I am sorry, I cannot help with that.".to_owned()).await;
    let mut args: Vec<String> = [
        "ask",
        "Anything?",
        "--tools",
        &s(&f.tools),
        "--max-repairs",
        "2",
    ]
    .iter()
    .map(|a| (*a).to_owned())
    .collect();
    args.push("--show-plan".into());
    let out = planvm(args, &[("PLANNER_KEY", "k")]).await;
    assert_eq!(out.code, Some(65), "{}", out.stderr);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(
        out.stderr
            .contains("error: the plan still has 1 error after 2 repairs"),
        "{}",
        out.stderr
    );
    assert_eq!(f.requests("/v1/chat/completions").await.len(), 3);
    // Nothing ran.
    assert!(f.requests("/search").await.is_empty());
}

#[tokio::test]
async fn an_empty_goal_is_refused_before_the_planner_is_asked() {
    let f = fixture(|_| "never asked".to_owned()).await;
    for goal in ["", "   ", "\n\t "] {
        let args = vec!["ask".into(), goal.into(), "--tools".into(), s(&f.tools)];
        let out = planvm(args, &[("PLANNER_KEY", "k")]).await;
        assert_eq!(out.code, Some(2), "{goal:?}: {}", out.stderr);
        assert!(out.stderr.contains("the goal is empty"), "{}", out.stderr);
    }
    assert!(f.requests("/v1/chat/completions").await.is_empty());
}

#[tokio::test]
async fn missing_planner_backend_and_key_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("t.toml");
    std::fs::write(&tools, "").unwrap();
    let out = planvm(["ask", "g", "--tools", &s(&tools)], &[]).await;
    assert_eq!(out.code, Some(1));
    assert!(
        out.stderr.contains("no backend for the planner"),
        "{}",
        out.stderr
    );

    let f = fixture(|_| String::new()).await;
    let out = planvm(["ask", "g", "--tools", &s(&f.tools)], &[]).await;
    assert_eq!(out.code, Some(1));
    assert!(
        out.stderr
            .contains("environment variable PLANNER_KEY (the API key for the planner) is not set"),
        "{}",
        out.stderr
    );
    assert!(Path::new(&f.tools).exists());
}

/// The README's main command: the offline ask example, from any directory.
#[test]
fn the_offline_example_answers_in_japanese() {
    let examples = root().join("examples");
    let out = std::process::Command::new(common::BIN)
        .current_dir(std::env::temp_dir())
        .args([
            "ask",
            "Does TiDB support SQL?",
            "--response-format",
            r#"{"lang": "Japanese"}"#,
            "--tools",
            &s(&examples.join("ask.toml")),
            "--replay",
            &s(&examples.join("ask_tidb_sql.cassette.jsonl")),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with("はい、TiDB は SQL をサポートしています。"),
        "{stdout}"
    );
}

/// `--print-prompt` shows the prompt with the examples closest to the goal, and needs no
/// planner; a file of the examples directory that is not an example is skipped with a
/// warning naming it, and the others still go into the prompt.
#[test]
fn the_prompt_holds_the_closest_examples_and_a_bad_one_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(root().join("examples/planner")).unwrap() {
        let p = entry.unwrap().path();
        std::fs::copy(&p, dir.path().join(p.file_name().unwrap())).unwrap();
    }
    let tools = s(&root().join("examples/ask.toml"));
    let goal = "Compare optimistic and pessimistic locking";
    let prompt = [
        "ask",
        goal,
        "--tools",
        &tools,
        "--max-examples",
        "1",
        "--print-prompt",
    ];
    let shipped = common::run(prompt);
    std::fs::write(dir.path().join("broken.json"), "{\"goal\": ").unwrap();
    let with_bad = common::run(prompt.iter().copied().chain(["--examples", &s(dir.path())]));
    for out in [&shipped, &with_bad] {
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        let closest = "## Goal: Compare optimistic and pessimistic transactions";
        assert!(out.stdout.contains(closest), "{}", out.stdout);
        assert_eq!(out.stdout.matches("## Goal: ").count(), 1, "{}", out.stdout);
        assert!(out.stdout.contains(&format!("{goal}\n")));
    }
    let warned = with_bad.stderr.contains("warning: example");
    assert!(
        warned && with_bad.stderr.contains("broken.json"),
        "{}",
        with_bad.stderr
    );
}

/// The goal of a planner request: the line after `# Goal` (the conversation before it holds
/// earlier goals too).
fn goal_of(prompt: &str) -> String {
    prompt
        .split("# Goal\n\n")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .unwrap_or("")
        .to_owned()
}

/// Goals of a session through the binary: `--session`, then `sessions list` and `show`
/// (how the engine keeps and tells a session: plan-runs' tests/ask.rs).
#[tokio::test]
async fn a_session_is_listed_and_shown() {
    let f = fixture(|last| {
        let answer = format!("answer to <{}>", goal_of(last));
        plan(vec![
            json!({"seq_no": 0, "type": "assign", "parameters": {"final_answer": answer}}),
        ])
    })
    .await;
    let db = s(&f.path("s.db"));
    for goal in ["Who sold the most?", "Where?"] {
        let (code, _, stderr) = f.ask(goal, &["--store", &db, "--session", "s1"]).await;
        assert_eq!(code, Some(0), "{stderr}");
    }
    let sessions = |args: &[&str]| {
        let store = ["--store", db.as_str()];
        planvm(["sessions"].iter().chain(args).chain(&store), &[])
    };
    let shown = sessions(&["show", "s1", "--format", "json"]).await;
    assert_eq!(shown.code, Some(0), "{}", shown.stderr);
    let shown: Value = serde_json::from_str(shown.stdout.trim()).unwrap();
    assert_eq!(shown["goals"][1]["goal"], "Where?", "{shown}");
    let listed = sessions(&["list"]).await;
    assert!(
        listed.stdout.starts_with("s1  2 goals"),
        "{}",
        listed.stdout
    );
    assert_eq!(sessions(&["show", "nope"]).await.code, Some(66));
}
