//! Token usage: a loopback OpenAI-compatible server that reports `usage` behind
//! `llm_generate`, its model priced in the tools file; a stored run's total (tokens and
//! cost) is the sum of its calls' in every output (the run's report, `runs show`, `runs
//! list`), each call keeps its own, and the cassette too.

mod common;

use common::{planvm, s};
use serde_json::{Value, json};

/// Answers `n` tokens in for a prompt `n` (and `n / 10` out).
struct Counting;

impl wiremock::Respond for Counting {
    fn respond(&self, req: &wiremock::Request) -> wiremock::ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let prompt = body["messages"][0]["content"].as_str().unwrap_or_default();
        let n: u64 = prompt
            .split_whitespace()
            .find_map(|w| w.parse().ok())
            .unwrap_or(0);
        wiremock::ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": format!("said {n}")}}],
            "usage": {"prompt_tokens": n, "completion_tokens": n / 10, "total_tokens": n + n / 10}
        }))
    }
}

#[tokio::test]
async fn a_runs_tokens_are_the_sum_of_its_calls_in_every_output() {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(Counting)
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| s(&dir.path().join(name));
    std::fs::write(
        path("tools.toml"),
        format!(
            "[pricing.\"m\"]\ninput_per_mtok = 2.5\noutput_per_mtok = 10\n\
             [[tool]]\nname = \"llm_generate\"\n[tool.backend]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\nmax_retries = 0\n",
            server.uri()
        ),
    )
    .unwrap();
    let call = |seq: u32, n: u32, out: &str| {
        json!({"seq_no": seq, "type": "calling", "parameters": {"tool_name": "llm_generate",
               "tool_params": {"prompt": format!("say {n}")}, "output_vars": [out]}})
    };
    let plan = json!([
        {"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "Three calls.", "dependency_analysis": "None."}},
        call(1, 100, "a"),
        call(2, 250, "b"),
        call(3, 40, "c"),
        {"seq_no": 4, "type": "assign", "parameters": {"final_answer": "${a}, ${b}, ${c}"}}
    ]);
    std::fs::write(path("plan.json"), plan.to_string()).unwrap();
    let db = path("s.db");
    let out = planvm(
        vec![
            "run".into(),
            path("plan.json"),
            "--tools".into(),
            path("tools.toml"),
            "--store".into(),
            db.clone(),
            "--run-id".into(),
            "r1".into(),
            "--record".into(),
            path("rec.jsonl"),
            "--format".into(),
            "json".into(),
        ],
        &[],
    )
    .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    // Tokens, and what they cost at the model's price: (390 × 2.5 + 39 × 10) / 1e6.
    let cost = 0.001365;
    let same = |usage: &Value| {
        usage["input_tokens"] == 390
            && usage["output_tokens"] == 39
            && (usage["cost"].as_f64().unwrap_or(0.0) - cost).abs() < 1e-12
    };
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(same(&report["usage"]), "{report}");

    let show = planvm(
        vec![
            "runs".into(),
            "show".into(),
            "r1".into(),
            "--store".into(),
            db.clone(),
            "--format".into(),
            "json".into(),
        ],
        &[],
    )
    .await;
    let shown: Value = serde_json::from_str(&show.stdout).unwrap();
    assert!(same(&shown["run"]["usage"]), "{shown}");
    let per_call: Vec<&Value> = shown["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["usage"]["input_tokens"])
        .collect();
    assert_eq!(per_call, [&json!(100), &json!(250), &json!(40)]);
    let list = planvm(
        vec![
            "runs".into(),
            "list".into(),
            "--store".into(),
            db,
            "--format".into(),
            "json".into(),
        ],
        &[],
    )
    .await;
    let row: Value = serde_json::from_str(list.stdout.lines().next().unwrap()).unwrap();
    assert!(same(&row["usage"]), "{row}");

    // The cassette keeps each call's tokens; a replay of it costs none.
    let cassette = std::fs::read_to_string(path("rec.jsonl")).unwrap();
    let kept: u64 = cassette
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["usage"]["input_tokens"]
                .as_u64()
                .unwrap()
        })
        .sum();
    assert_eq!(kept, 390);
    let replayed = planvm(
        vec![
            "run".into(),
            path("plan.json"),
            "--replay".into(),
            path("rec.jsonl"),
            "--format".into(),
            "json".into(),
        ],
        &[],
    )
    .await;
    assert_eq!(replayed.code, Some(0), "{}", replayed.stderr);
    let replayed: Value = serde_json::from_str(&replayed.stdout).unwrap();
    assert!(replayed.get("usage").is_none(), "{replayed}");
    assert_eq!(replayed["final_answer"], report["final_answer"]);
}

/// The planner's tokens count in the run whose plan it wrote (a repair's too), with the
/// run's calls'.
#[tokio::test]
async fn a_planned_runs_tokens_count_the_planners() {
    let server = wiremock::MockServer::start().await;
    let plan = json!([
        {"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "One call.", "dependency_analysis": "None."}},
        {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "llm_generate",
         "tool_params": {"prompt": "say 100"}, "output_vars": ["final_answer"]}}
    ]);
    let reply = |content: String, tokens: u64| {
        wiremock::ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": tokens, "completion_tokens": tokens / 10}
        }))
    };
    // A plan with an error first (repaired), then the plan.
    wiremock::Mock::given(wiremock::matchers::path("/planner/v1/chat/completions"))
        .respond_with(reply("[{\"seq_no\": 0}]".into(), 1000))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    wiremock::Mock::given(wiremock::matchers::path("/planner/v1/chat/completions"))
        .respond_with(reply(format!("```json\n{plan}\n```"), 2000))
        .mount(&server)
        .await;
    wiremock::Mock::given(wiremock::matchers::path("/v1/chat/completions"))
        .respond_with(Counting)
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| s(&dir.path().join(name));
    std::fs::write(
        path("tools.toml"),
        format!(
            "[planner.backend]\nkind = \"openai\"\nbase_url = \"{0}/planner/v1\"\nmodel = \"p\"\nmax_retries = 0\n\
             [[tool]]\nname = \"llm_generate\"\n[tool.backend]\nkind = \"openai\"\nbase_url = \"{0}/v1\"\nmodel = \"m\"\nmax_retries = 0\n",
            server.uri()
        ),
    )
    .unwrap();
    let db = path("s.db");
    let args = [
        "ask",
        "Say it.",
        "--tools",
        &path("tools.toml"),
        "--store",
        &db,
        "--no-stream",
        "--format",
        "json",
    ];
    let out = planvm(args.map(str::to_owned).to_vec(), &[]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let asked: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(asked["usage"]["input_tokens"], 3000, "{asked}");
    let run = asked["run_id"].as_str().unwrap();
    let show = ["runs", "show", run, "--store", &db, "--format", "json"];
    let shown = planvm(show.map(str::to_owned).to_vec(), &[]).await;
    let shown: Value = serde_json::from_str(&shown.stdout).unwrap();
    let usage = &shown["run"]["usage"];
    assert_eq!(usage["input_tokens"], 3100, "{shown}");
    assert_eq!(usage["output_tokens"], 310, "{shown}");
}
