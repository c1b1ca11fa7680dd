//! Goals asked through the engine ([`plan_runs::engine::ask_goal`]), with a scripted
//! planner and in-process tools: a failed step re-planned without making earlier calls
//! again, its runs stored as a branch of the failed one; a session's follow-up goals told
//! the earlier rounds, the oldest summarized once when over the budget; a plan that asks
//! a person stopping its goal until the answer comes, and the next round told it.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use plan_host::{Backend, Host, HostOptions, ToolError, ToolErrorKind, Tracer};
use plan_llm::{CallError, Reply, Usage};
use plan_manifest::Manifest;
use plan_planner::{
    AskOptions, AskStatus, Examples, Planner, PlannerCall, PlannerModel, RoundKind, Template,
};
use plan_runs::engine::{AskAt, AskRequest, Asked, Hooks, ask_goal};
use plan_runs::{ErrorKind, Resume, ResumeRequest, StoreAt, open::Access};
use plan_store::{Durability, RunStatus};
use plan_vm::ToolRequest;
use serde_json::{Value, json};

/// A planner that replies `script(the last message)`, and keeps every conversation it
/// was sent. Each reply costs 50 tokens in, 7 out.
struct Scripted {
    script: Box<dyn Fn(&str) -> String + Send + Sync>,
    sent: Mutex<Vec<Vec<String>>>,
}

impl Scripted {
    fn new(script: impl Fn(&str) -> String + Send + Sync + 'static) -> Arc<Scripted> {
        Arc::new(Scripted {
            script: Box::new(script),
            sent: Mutex::new(Vec::new()),
        })
    }

    /// The first message of each conversation sent (the prompt, or a summary's request).
    fn prompts(&self) -> Vec<String> {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .map(|m| m[0].clone())
            .collect()
    }
}

impl PlannerModel for Scripted {
    fn reply<'a>(&'a self, call: &'a PlannerCall<'_>) -> BoxFuture<'a, Result<Reply, CallError>> {
        let messages: Vec<String> = call.messages.iter().map(|m| m.content.clone()).collect();
        let text = (self.script)(messages.last().map_or("", String::as_str));
        self.sent.lock().unwrap().push(messages);
        let usage = Usage {
            input_tokens: 50,
            output_tokens: 7,
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
        "a scripted planner".into()
    }
}

/// Answers each call with `tool(args)`, counting them; `flaky_tool` is refused.
#[derive(Default)]
struct Tools(Mutex<Vec<String>>);

impl Tools {
    fn calls_of(&self, tool: &str) -> usize {
        let made = self.0.lock().unwrap();
        made.iter()
            .filter(|c| c.starts_with(&format!("{tool}(")))
            .count()
    }
}

struct Tool(Arc<Tools>);

impl Backend for Tool {
    fn call<'a>(&'a self, req: &'a ToolRequest) -> BoxFuture<'a, Result<Value, ToolError>> {
        let key = format!(
            "{}({})",
            req.tool,
            serde_json::to_string(&req.args).unwrap()
        );
        self.0.0.lock().unwrap().push(key.clone());
        Box::pin(async move {
            match key.starts_with("flaky_tool(") {
                true => Err(ToolError::new(ToolErrorKind::Refused, "flaky is down")),
                false => Ok(json!(key)),
            }
        })
    }

    fn describe(&self) -> String {
        "in-process tools".into()
    }
}

/// The built-in tools and `flaky_tool`, served by `tools`; `extra` is more of the tools
/// file (a `[planner]` table).
fn host(tools: &Arc<Tools>, extra: &str) -> Host {
    let text = format!(
        "[[tool]]\nname = \"flaky_tool\"\ndescription = \"Looks things up in a flaky service.\"\n\
         params = [ {{ name = \"q\", type = \"string\", required = true }} ]\n{extra}"
    );
    let manifest = Manifest::from_toml_str(&text, "tools.toml").unwrap();
    let host = Host::new(manifest, HostOptions::default()).unwrap();
    for t in ["vector_search", "llm_generate", "flaky_tool"] {
        host.set_backend(t, Arc::new(Tool(tools.clone())));
    }
    host
}

/// Asks `goal` of `model`, stored at `at` as goal `id` of `session`.
async fn ask(
    host: &Host,
    model: &Arc<Scripted>,
    goal: &str,
    (at, id, session): (&StoreAt, Option<&str>, Option<&str>),
) -> Asked {
    let mut planner = Planner {
        host,
        model: model.clone(),
        template: Template::default(),
        examples: Examples::default(),
        options: AskOptions::default(),
    };
    let request = AskRequest {
        goal,
        response_format: None,
        store: Some(AskAt {
            at: at.clone(),
            id,
            session,
        }),
    };
    let hooks = Hooks {
        journal: &mut Tracer::none(),
        warn: |e| panic!("{e}"),
        started: |_| {},
    };
    let asked = ask_goal(&mut planner, request, hooks).await.unwrap();
    assert!(asked.failed.is_none(), "{:?}", asked.failed);
    asked
}

fn call(seq: u32, tool: &str, params: Value, out: &str) -> Value {
    json!({"seq_no": seq, "type": "calling", "parameters": {
        "tool_name": tool, "tool_params": params, "output_vars": [out]}})
}

/// A reply as LLMs write one: prose around a fenced plan.
fn plan(steps: Vec<Value>) -> String {
    let steps = serde_json::to_string_pretty(&steps).unwrap();
    format!("Here is the plan.\n```json\n{steps}\n```")
}

/// Two independent searches, then `third`, then the answer.
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

/// The goal a prompt is for.
fn goal_of(prompt: &str) -> String {
    let rest = prompt.split("# Goal\n\n").nth(1).unwrap_or("");
    rest.lines().next().unwrap_or("").to_owned()
}

fn store_in(dir: &tempfile::TempDir) -> StoreAt {
    StoreAt::new(dir.path().join("s.db"), Durability::Normal)
}

#[tokio::test]
async fn a_failed_step_is_replanned_and_earlier_calls_are_not_made_again() {
    let model = Scripted::new(|last| {
        let third = match last.contains("failed at seq_no 3") {
            true => call(
                3,
                "llm_generate",
                json!({"prompt": "combine ${a} ${b}"}),
                "c",
            ),
            false => call(3, "flaky_tool", json!({"q": "${a}"}), "c"),
        };
        searches_then(third)
    });
    let tools = Arc::new(Tools::default());
    let host = host(&tools, "");
    let dir = tempfile::tempdir().unwrap();
    let at = store_in(&dir);
    let asked = ask(
        &host,
        &model,
        "What are alpha and beta?",
        (&at, Some("q1"), None),
    )
    .await;
    let outcome = &asked.outcome;
    assert_eq!(outcome.status, AskStatus::Answered, "{:?}", outcome.error);
    let kinds: Vec<RoundKind> = outcome.rounds.iter().map(|r| r.kind).collect();
    assert_eq!(kinds, [RoundKind::Plan, RoundKind::Replan]);
    let failed = outcome.rounds[0].run_error.as_ref().unwrap();
    assert_eq!((failed.code.as_str(), failed.seq_no), ("R0005", Some(3)));
    let usage = outcome.usage.as_ref().unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (100, 14));
    // Each search was made once: the updated plan reused their answers.
    assert_eq!(tools.calls_of("vector_search"), 2);
    assert_eq!(tools.calls_of("flaky_tool"), 1);
    // The re-plan request told the planner the error and the variables set.
    let sent = model.sent.lock().unwrap().clone();
    let msg = sent[1].last().unwrap();
    assert!(
        msg.contains("error[R0005]") && msg.contains("flaky is down"),
        "{msg}"
    );
    assert!(msg.contains("- `a` = \"vector_search("), "{msg}");
    assert!(msg.contains("- `b` = \"vector_search("), "{msg}");

    // In the store: the failed plan, and the update as a branch of it from its start,
    // whose stored answer is the ask's.
    assert_eq!(asked.runs, ["q1", "q1.2"]);
    let store = at.open(Access::Existing).unwrap();
    let runs = plan_runs::read::list(&*store).unwrap();
    let by_id = |id: &str| runs.iter().find(|r| r.id == id).unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(by_id("q1").status, RunStatus::Failed);
    let update = by_id("q1.2");
    assert_eq!(update.status, RunStatus::Ok);
    assert_eq!(
        (update.parent.as_deref(), update.branch_seq),
        (Some("q1"), Some(0))
    );
    assert_eq!(update.final_answer.as_ref(), Some(&outcome.answer));
}

#[tokio::test]
async fn a_follow_up_goal_sees_the_session_and_the_oldest_rounds_are_summarized_once() {
    let model = Scripted::new(|last| {
        if last.starts_with("Summarize this conversation") {
            return "SUMMARY: they asked who sold the most (Alice).".to_owned();
        }
        let answer = format!("answer to <{}>", goal_of(last));
        plan(vec![
            json!({"seq_no": 0, "type": "assign", "parameters": {"final_answer": answer}}),
        ])
    });
    let tools = Arc::new(Tools::default());
    // A budget that holds two rounds and not three.
    let host = host(&tools, "[planner]\nmemory_tokens = 100\n");
    let dir = tempfile::tempdir().unwrap();
    let at = store_in(&dir);
    let round = |goal: &'static str| {
        let (host, model, at) = (&host, &model, &at);
        async move { ask(host, model, goal, (at, None, Some("s1"))).await }
    };

    let first = round("Who sold the most?").await;
    assert_eq!(
        first.outcome.answer,
        json!("answer to <Who sold the most?>")
    );
    assert!(!model.prompts()[0].contains("conversation so far"));
    round("Which store does that person work in?").await;
    let second = &model.prompts()[1];
    let told = "User: Who sold the most?\nAnswer: answer to <Who sold the most?>";
    assert!(second.contains(told), "{second}");
    round("And the year before?").await;
    let third = &model.prompts()[2];
    assert!(
        third.contains("Which store does that person work in?"),
        "{third}"
    );
    assert!(!third.contains("SUMMARY"), "{third}");
    // Three rounds are over the budget: the oldest is summarized, once, and the summary
    // stands for it from then on.
    round("Show it as a chart.").await;
    let all = model.prompts();
    let summaries = all
        .iter()
        .filter(|p| p.starts_with("Summarize this conversation"))
        .count();
    assert_eq!(summaries, 1, "{all:#?}");
    let fourth = all.last().unwrap();
    let summary = "Summary of the earlier rounds: SUMMARY: they asked who sold the most";
    assert!(fourth.contains(summary), "{fourth}");
    assert!(!fourth.contains("User: Who sold the most?"), "{fourth}");
    assert!(fourth.contains("User: And the year before?"), "{fourth}");

    // The session as the store keeps it.
    let store = at.open(Access::Existing).unwrap();
    let shown = plan_runs::read::session(&*store, "s1").unwrap();
    assert_eq!(shown.goals.len(), 4);
    assert_eq!(shown.goals[0]["goal"], "Who sold the most?");
    assert_eq!(shown.goals[0]["runs"][0], shown.goals[0]["id"]);
    let text = shown.summary.as_ref().unwrap()["summary"].as_str().unwrap();
    assert!(text.starts_with("SUMMARY"), "{text}");
    let e = plan_runs::read::session(&*store, "nope").err().unwrap();
    assert_eq!(e.kind, ErrorKind::UnknownRun, "{e}");
}

#[tokio::test]
async fn a_plan_that_asks_stops_the_goal_until_its_answer_and_the_session_remembers() {
    let model = Scripted::new(|last| {
        if !goal_of(last).starts_with("Who sold the most") {
            let answer =
                json!({"seq_no": 0, "type": "assign", "parameters": {"final_answer": "Berlin"}});
            return plan(vec![answer]);
        }
        let question = json!({"question": "Which year?", "choices": ["2023", "2024"]});
        plan(vec![
            call(0, "ask_user", question, "year"),
            json!({"seq_no": 1, "type": "assign", "parameters": {
                "top_seller": "Alice Chen", "notes": "n".repeat(500),
                "final_answer": "Alice Chen sold the most in ${year}"}}),
        ])
    });
    let tools = Arc::new(Tools::default());
    let host = host(&tools, "");
    let dir = tempfile::tempdir().unwrap();
    let at = store_in(&dir);
    let asked = ask(
        &host,
        &model,
        "Who sold the most?",
        (&at, Some("g1"), Some("s2")),
    )
    .await;
    let outcome = &asked.outcome;
    assert_eq!(outcome.status, AskStatus::NeedsInput, "{:?}", outcome.error);
    let report = outcome.report.as_ref().unwrap();
    let question = report.question.as_ref().unwrap();
    assert_eq!(question.question, "Which year?");
    assert_eq!(question.choices, Some(vec!["2023".into(), "2024".into()]));
    assert_eq!(asked.runs, ["g1"]);

    // Answered through the goal's id; the planner is not asked again. An answer that is
    // not one of the choices is refused.
    let answer = |input: &str| {
        plan_runs::resume(
            &at,
            ResumeRequest {
                input: Some(input),
                ..ResumeRequest::new("g1")
            },
        )
    };
    let e = answer("2022").err().unwrap();
    assert_eq!(e.kind, ErrorKind::BadInput, "{e}");
    let Resume::Ready(ready) = answer("2024").unwrap() else {
        panic!("the run waits for its answer");
    };
    let claimed = ready.claim(|e| panic!("{e}")).unwrap();
    let report = claimed.go(&host, &mut Tracer::none()).await;
    assert_eq!(
        report.final_answer,
        json!("Alice Chen sold the most in 2024")
    );
    assert_eq!(model.prompts().len(), 1);

    // The goal is answered, and the next round is told it with its plan's key variables.
    let next = ask(
        &host,
        &model,
        "Where does that person work?",
        (&at, None, Some("s2")),
    )
    .await;
    assert_eq!(next.outcome.answer, json!("Berlin"));
    let second = &model.prompts()[1];
    let told = "User: Who sold the most?\nAnswer: Alice Chen sold the most in 2024\n\
                Variables of its plan: year = 2024; top_seller = Alice Chen\n";
    assert!(second.contains(told), "{second}");
}
