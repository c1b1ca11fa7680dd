//! Token usage through the engine, against a loopback OpenAI-compatible server that
//! reports `usage`, its model priced in the tools file: a stored run's total (tokens and
//! cost) is the sum of its calls' in its report, its row and its shown calls; the
//! cassette keeps each call's and a replay of it costs nothing; a planned run counts the
//! planner's tokens (a repair's too) with its calls'.

mod common;

use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;
use plan_host::{Host, HostOptions, RunReport, Tracer};
use plan_llm::{CallError, Reply, Usage};
use plan_manifest::Manifest;
use plan_planner::{AskOptions, Examples, Planner, PlannerCall, PlannerModel, Template};
use plan_runs::StoreAt;
use plan_runs::engine::{AskAt, AskRequest, Hooks, ask_goal};
use plan_store::Durability;
use serde_json::{Value, json};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Answers `n` tokens in for a prompt holding the number `n` (and `n / 10` out).
struct Counting;

impl Respond for Counting {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let prompt = body["messages"][0]["content"].as_str().unwrap_or_default();
        let n: u64 = prompt
            .split_whitespace()
            .find_map(|w| w.parse().ok())
            .unwrap_or(0);
        ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": format!("said {n}")}}],
            "usage": {"prompt_tokens": n, "completion_tokens": n / 10, "total_tokens": n + n / 10}
        }))
    }
}

/// `llm_generate` served by `server`, whose model `m` costs 2.5 and 10 a million tokens.
async fn priced(server: &MockServer) -> Manifest {
    Mock::given(wiremock::matchers::method("POST"))
        .respond_with(Counting)
        .mount(server)
        .await;
    let text = format!(
        "[pricing.\"m\"]\ninput_per_mtok = 2.5\noutput_per_mtok = 10\n\
         [[tool]]\nname = \"llm_generate\"\n[tool.backend]\nkind = \"openai\"\n\
         base_url = \"{}/v1\"\nmodel = \"m\"\nmax_retries = 0\n",
        server.uri()
    );
    Manifest::from_toml_str(&text, "tools.toml").unwrap()
}

fn say(seq: u32, n: u32, out: &str) -> Value {
    json!({"seq_no": seq, "type": "calling", "parameters": {"tool_name": "llm_generate",
           "tool_params": {"prompt": format!("say {n}")}, "output_vars": [out]}})
}

/// Runs `plan` on `host`, stored at `at` as `id` when given.
async fn run(host: &Host, plan: &str, at: Option<&StoreAt>, id: &str) -> RunReport {
    common::start_plan(host, plan, (at, id), &mut Tracer::none()).await
}

fn host(manifest: Manifest, record: Option<&Path>, replay: Option<&Path>) -> Host {
    let options = HostOptions {
        record: record.map(Path::to_path_buf),
        replay: replay.map(Path::to_path_buf),
        ..HostOptions::default()
    };
    Host::new(manifest, options).unwrap()
}

#[tokio::test]
async fn a_runs_tokens_are_the_sum_of_its_calls_wherever_it_is_shown() {
    let server = MockServer::start().await;
    let manifest = priced(&server).await;
    let plan = json!([
        {"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "Three calls.", "dependency_analysis": "None."}},
        say(1, 100, "a"),
        say(2, 250, "b"),
        say(3, 40, "c"),
        {"seq_no": 4, "type": "assign", "parameters": {"final_answer": "${a}, ${b}, ${c}"}}
    ])
    .to_string();
    let dir = tempfile::tempdir().unwrap();
    let at = StoreAt::new(dir.path().join("s.db"), Durability::Normal);
    let cassette = dir.path().join("rec.jsonl");
    let report = run(
        &host(manifest, Some(&cassette), None),
        &plan,
        Some(&at),
        "r1",
    )
    .await;
    assert!(report.is_ok(), "{:?}", report.error);
    // Tokens, and what they cost at the model's price: (390 × 2.5 + 39 × 10) / 1e6.
    let same = |usage: &Value| {
        usage["input_tokens"] == 390
            && usage["output_tokens"] == 39
            && (usage["cost"].as_f64().unwrap_or(0.0) - 0.001365).abs() < 1e-12
    };
    let reported = serde_json::to_value(&report).unwrap();
    assert!(same(&reported["usage"]), "{reported}");
    let store = at.open(plan_runs::open::Access::Read).unwrap();
    let shown = serde_json::to_value(plan_runs::read::show(&*store, "r1").unwrap()).unwrap();
    assert!(same(&shown["run"]["usage"]), "{shown}");
    let per_call: Vec<&Value> = shown["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["usage"]["input_tokens"])
        .collect();
    assert_eq!(per_call, [&json!(100), &json!(250), &json!(40)]);
    let rows = plan_runs::read::list(&*store).unwrap();
    assert!(
        same(&serde_json::to_value(&rows[0]).unwrap()["usage"]),
        "{rows:?}"
    );

    // The cassette keeps each call's tokens; a replay of it costs none.
    let kept: u64 = std::fs::read_to_string(&cassette)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["usage"]["input_tokens"]
                .as_u64()
                .unwrap()
        })
        .sum();
    assert_eq!(kept, 390);
    let replayed = run(
        &host(Manifest::builtin(), None, Some(&cassette)),
        &plan,
        None,
        "again",
    )
    .await;
    assert_eq!(replayed.final_answer, report.final_answer);
    assert!(replayed.usage.is_none(), "{:?}", replayed.usage);
}

/// A planner that first writes a plan with an error (1,000 tokens in), then the plan
/// (2,000 in), each a tenth of that out.
struct TwoReplies(std::sync::atomic::AtomicUsize);

impl PlannerModel for TwoReplies {
    fn reply<'a>(&'a self, _: &'a PlannerCall<'_>) -> BoxFuture<'a, Result<Reply, CallError>> {
        let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let plan = json!([
            {"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "One call.", "dependency_analysis": "None."}},
            say(1, 100, "final_answer")
        ]);
        let (text, tokens) = match n {
            0 => ("[{\"seq_no\": 0}]".to_owned(), 1000),
            _ => (format!("```json\n{plan}\n```"), 2000),
        };
        let usage = Usage {
            input_tokens: tokens,
            output_tokens: tokens / 10,
            cost: None,
        };
        Box::pin(async move {
            Ok(Reply {
                text,
                usage: Some(usage),
            })
        })
    }

    fn describe(&self) -> String {
        "a planner of two replies".into()
    }
}

#[tokio::test]
async fn a_planned_runs_tokens_count_the_planners() {
    let server = MockServer::start().await;
    let host = host(priced(&server).await, None, None);
    let dir = tempfile::tempdir().unwrap();
    let at = StoreAt::new(dir.path().join("s.db"), Durability::Normal);
    let mut planner = Planner {
        host: &host,
        model: Arc::new(TwoReplies(Default::default())),
        template: Template::default(),
        examples: Examples::default(),
        options: AskOptions::default(),
    };
    let request = AskRequest {
        goal: "Say it.",
        response_format: None,
        store: Some(AskAt {
            at: at.clone(),
            id: Some("g"),
            session: None,
        }),
    };
    let hooks = Hooks {
        journal: &mut Tracer::none(),
        warn: |e| panic!("{e}"),
        started: |_| {},
    };
    let asked = ask_goal(&mut planner, request, hooks).await.unwrap();
    assert_eq!(asked.outcome.usage.as_ref().unwrap().input_tokens, 3000);
    // The run's: the planner's two replies and its own call.
    let store = at.open(plan_runs::open::Access::Read).unwrap();
    let shown = plan_runs::read::show(&*store, asked.runs.last().unwrap()).unwrap();
    let usage = shown.run.usage.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (3100, 310));
}
