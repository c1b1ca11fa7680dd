//! Asks whose planner streams its reply, on tokio's paused clock: a scripted planner
//! writes one piece of its plan every 0.5 s (or the whole reply after the same time when
//! not asked to stream), and in-process tools take 1 s. Calls certain to run start while
//! the plan arrives, and the answer is the same as without streaming; a plan that turns
//! out invalid at its end runs no `write` tool early, and its repair reuses only
//! identical calls made at the same place. Virtual time, so the figures are exact.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use plan_host::{Backend, Host, HostOptions, ToolError, Tracer};
use plan_llm::{CallError, Reply};
use plan_manifest::Manifest;
use plan_planner::{
    AskOptions, AskOutcome, Examples, Planner, PlannerCall, PlannerModel, Template,
};
use plan_vm::ToolRequest;
use serde_json::{Value, json};

const GAP: Duration = Duration::from_millis(500);
const TOOL_LATENCY: Duration = Duration::from_secs(1);

/// The planner's reply to a conversation whose last message is given, as pieces.
type Script = fn(&str) -> Vec<String>;

/// Sends each piece `gap` after the previous one when streaming; else the whole reply
/// after as long as all the pieces would take.
struct Scripted {
    script: Script,
    gap: Duration,
}

impl PlannerModel for Scripted {
    fn reply<'a>(&'a self, call: &'a PlannerCall<'_>) -> BoxFuture<'a, Result<Reply, CallError>> {
        let pieces = (self.script)(&call.messages.last().unwrap().content);
        Box::pin(async move {
            tokio::time::sleep(self.gap * pieces.len() as u32).await;
            Ok(Reply {
                text: pieces.concat(),
                usage: None,
            })
        })
    }

    fn streams(&self) -> bool {
        true
    }

    fn reply_streaming<'a>(
        &'a self,
        call: &'a PlannerCall<'_>,
        on_text: &'a mut (dyn FnMut(&str) + Send),
    ) -> BoxFuture<'a, Result<Reply, CallError>> {
        let pieces = (self.script)(&call.messages.last().unwrap().content);
        Box::pin(async move {
            for p in &pieces {
                tokio::time::sleep(self.gap).await;
                on_text(p);
            }
            Ok(Reply {
                text: pieces.concat(),
                usage: None,
            })
        })
    }

    fn describe(&self) -> String {
        "a scripted planner".into()
    }
}

/// Answers `tool(args)` after the latency (an object of it under each key a call with
/// several outputs needs), keeping every call made.
struct Tools {
    latency: Duration,
    made: Mutex<Vec<(String, Value)>>,
}

struct Tool(Arc<Tools>);

impl Backend for Tool {
    fn call<'a>(&'a self, req: &'a ToolRequest) -> BoxFuture<'a, Result<Value, ToolError>> {
        let args = serde_json::to_value(&req.args).unwrap();
        self.0
            .made
            .lock()
            .unwrap()
            .push((req.tool.to_string(), args.clone()));
        let echo = format!("{}({args})", req.tool);
        // NB: a call with several outputs asks for an object with their keys.
        let answer = match &req.kind {
            plan_vm::RequestKind::Tool {
                output_keys: Some(keys),
            } => Value::Object(keys.iter().map(|k| (k.clone(), json!(echo))).collect()),
            _ => json!(echo),
        };
        Box::pin(async move {
            tokio::time::sleep(self.0.latency).await;
            Ok(answer)
        })
    }

    fn describe(&self) -> String {
        "in-process tools".into()
    }
}

/// A trace written to memory.
#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What one ask came to: its outcome, its trace's events, the calls its tools saw, and
/// the (virtual) time it took.
struct Asked {
    outcome: AskOutcome,
    events: Vec<Value>,
    calls: Vec<(String, Value)>,
    took: Duration,
}

/// Asks `script`'s planner, streamed or not, over tools with `latency`.
async fn ask(script: Script, stream: bool, latency: Duration) -> Asked {
    ask_at(script, GAP, stream, latency).await
}

/// [`ask`], the planner writing a piece every `gap`.
async fn ask_at(script: Script, gap: Duration, stream: bool, latency: Duration) -> Asked {
    let text = "[[tool]]\nname = \"post_note\"\neffects = \"write\"\n\
                params = [ { name = \"text\", type = \"string\", required = true } ]\n";
    let manifest = Manifest::from_toml_str(text, "tools.toml").unwrap();
    let host = Host::new(manifest, HostOptions::default()).unwrap();
    let tools = Arc::new(Tools {
        latency,
        made: Mutex::new(Vec::new()),
    });
    for t in [
        "vector_search",
        "retrieve_knowledge_graph",
        "llm_generate",
        "post_note",
    ] {
        host.set_backend(t, Arc::new(Tool(tools.clone())));
    }
    let planner = Planner {
        host: &host,
        model: Arc::new(Scripted { script, gap }),
        template: Template::default(),
        examples: Examples::default(),
        options: AskOptions {
            stream,
            ..AskOptions::default()
        },
    };
    let buf = Buf::default();
    let mut tracer = Tracer::to_writer(Box::new(buf.clone()));
    let began = tokio::time::Instant::now();
    let outcome = planner.ask("Follow the chain", None, &mut tracer).await;
    let took = began.elapsed();
    drop(tracer);
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let events = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let calls = tools.made.lock().unwrap().clone();
    Asked {
        outcome,
        events,
        calls,
        took,
    }
}

fn ins(seq: u32, tool: &str, params: Value, out: &str) -> String {
    let v = json!({"seq_no": seq, "type": "calling", "parameters": {
        "tool_name": tool, "tool_params": params, "output_vars": [out]}});
    format!("{v},\n")
}

/// `ins`, as the last instruction of a plan.
fn last(seq: u32, tool: &str, params: Value, out: &str) -> String {
    ins(seq, tool, params, out)
        .trim_end_matches(",\n")
        .to_owned()
        + "\n]"
}

/// A reasoning step, then four calls, each on the output of the one before.
fn chain(_: &str) -> Vec<String> {
    vec![
        "```json\n[\n{\"seq_no\": 0, \"type\": \"reasoning\", \"parameters\": {\"chain_of_thoughts\": \"four dependent calls\"}},\n".into(),
        ins(1, "vector_search", json!({"query": "start", "top_k": 1}), "c1"),
        ins(2, "vector_search", json!({"query": "after ${c1}", "top_k": 1}), "c2"),
        ins(3, "vector_search", json!({"query": "after ${c2}", "top_k": 1}), "c3"),
        last(4, "llm_generate", json!({"prompt": "answer from ${c3}"}), "final_answer") + "\n```",
    ]
}

#[tokio::test(start_paused = true)]
async fn calls_start_while_the_plan_arrives_and_the_answer_is_the_same() {
    let plain = ask(chain, false, TOOL_LATENCY).await;
    let streamed = ask(chain, true, TOOL_LATENCY).await;
    assert_eq!(streamed.outcome.answer, plain.outcome.answer);
    assert!(streamed.outcome.report.as_ref().unwrap().is_ok());
    // Each call was made once: the early results were taken, not made again.
    assert_eq!(streamed.calls.len(), 4, "{:?}", streamed.calls);
    let named = |name: &str| {
        streamed
            .events
            .iter()
            .filter(|e| e["event"] == name)
            .count()
    };
    assert_eq!(named("instruction_arrived"), 5);
    // The first search starts while the plan arrives: before its last instruction has.
    let first = |name: &str| streamed.events.iter().position(|e| e["event"] == name);
    let last_arrived = streamed
        .events
        .iter()
        .rposition(|e| e["event"] == "instruction_arrived");
    assert!(
        first("call_started_early") < last_arrived,
        "{:?}",
        streamed.events
    );
    // Not streamed: 2.5 s of planning, then 4 calls of 1 s one after another. Streamed,
    // the first search overlaps the planning. NB: tokio's paused clock (`start_paused`),
    // which moves only by the timers of the planner and the tools: exact under any load.
    assert_eq!(plain.took, Duration::from_millis(6500));
    assert!(
        streamed.took < plain.took,
        "{:?} against {:?}",
        streamed.took,
        plain.took
    );
}

/// First a plan whose last instruction calls an unknown tool (with a `write` call before
/// it), then, asked to repair, one that keeps the first search, changes the second and
/// ends with an answer.
fn invalid_then_repaired(last_message: &str) -> Vec<String> {
    let start = "[\n{\"seq_no\": 0, \"type\": \"reasoning\", \"parameters\": {\"chain_of_thoughts\": \"x\"}},\n";
    let first = ins(
        1,
        "vector_search",
        json!({"query": "alpha", "top_k": 1}),
        "a",
    );
    let note = ins(3, "post_note", json!({"text": "${a}"}), "noted");
    let search = |q: &str| ins(2, "vector_search", json!({"query": q, "top_k": 1}), "b");
    if last_message.contains("error[E0202]") {
        let answer = json!({"prompt": "${a} ${b} ${noted}"});
        vec![
            start.into(),
            first,
            search("gamma"),
            note,
            last(4, "llm_generate", answer, "final_answer"),
        ]
    } else {
        let unknown = last(4, "web_search", json!({"q": "${b}"}), "final_answer");
        vec![start.into(), first, search("beta"), note, unknown]
    }
}

#[tokio::test(start_paused = true)]
async fn a_plan_invalid_at_its_end_runs_no_write_early_and_reuses_only_identical_calls() {
    let streamed = ask(invalid_then_repaired, true, TOOL_LATENCY).await;
    let kinds: Vec<_> = streamed.outcome.rounds.iter().map(|r| r.kind).collect();
    assert_eq!(
        kinds,
        [
            plan_planner::RoundKind::Plan,
            plan_planner::RoundKind::Repair
        ]
    );
    let queries = |q: &str| {
        streamed
            .calls
            .iter()
            .filter(|(_, a)| a["query"] == q)
            .count()
    };
    // `alpha` started early and was taken by the repaired plan; `beta` started early and
    // was not (the repaired plan asks for `gamma`); the note was written once, by the
    // run of the verified plan.
    assert_eq!(
        (queries("alpha"), queries("beta"), queries("gamma")),
        (1, 1, 1)
    );
    let notes = streamed
        .calls
        .iter()
        .filter(|(t, _)| t == "post_note")
        .count();
    assert_eq!(notes, 1);

    let plain = ask(invalid_then_repaired, false, TOOL_LATENCY).await;
    assert_eq!(streamed.outcome.answer, plain.outcome.answer);
    assert!(plain.calls.iter().all(|(_, a)| a["query"] != "beta"));
}

/// First a plan that searches at its second instruction and ends with an unknown tool;
/// then one that writes a note first and makes the same search, at the same place.
fn write_moved_before_the_search(last_message: &str) -> Vec<String> {
    let search = ins(
        1,
        "vector_search",
        json!({"query": "status", "top_k": 1}),
        "s",
    );
    let end = |tool: &str| last(2, tool, json!({"prompt": "${s}"}), "final_answer");
    if last_message.contains("error[E0202]") {
        let note = ins(0, "post_note", json!({"text": "closing"}), "noted");
        vec!["[\n".to_owned() + &note, search, end("llm_generate")]
    } else {
        let assign = "[\n{\"seq_no\": 0, \"type\": \"assign\", \"parameters\": {\"n\": 1}},\n";
        vec![assign.to_owned(), search, end("web_search")]
    }
}

/// A search started early is not taken by a repaired plan that writes before it: the
/// sequential run of that plan searches after the write.
#[tokio::test(start_paused = true)]
async fn an_early_result_is_not_taken_across_a_write_the_repair_put_before_it() {
    let asked = ask(write_moved_before_the_search, true, TOOL_LATENCY).await;
    assert!(asked.outcome.report.as_ref().unwrap().is_ok());
    let order: Vec<&str> = asked.calls.iter().map(|(t, _)| t.as_str()).collect();
    // The early search, then the run's own note and search, in that order.
    assert_eq!(
        order,
        [
            "vector_search",
            "post_note",
            "vector_search",
            "llm_generate"
        ]
    );
}

/// The figures of BENCHMARKS.md ("Streaming execution"): the 14-step example written at
/// 40 tokens a second (a token taken as 4 characters) over tools of 300 ms, and the four
/// dependent calls above; virtual time, so exact.
#[tokio::test(start_paused = true)]
async fn figures_for_streaming() {
    fn tokens(_: &str) -> Vec<String> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let text = std::fs::read_to_string(root.join("examples/tidb_overview.json")).unwrap();
        let chars: Vec<char> = text.chars().collect();
        chars.chunks(4).map(|c| c.iter().collect()).collect()
    }
    let token = Duration::from_millis(25);
    let tools = Duration::from_millis(300);
    let plain = ask_at(tokens, token, false, tools).await;
    let streamed = ask_at(tokens, token, true, tools).await;
    assert!(
        plain.outcome.report.as_ref().unwrap().is_ok(),
        "{:?}",
        plain.outcome.error
    );
    assert_eq!(streamed.outcome.answer, plain.outcome.answer);
    // NB: virtual times (the paused clock), as above.
    assert!(streamed.took < plain.took);
    let chained = (
        ask(chain, false, TOOL_LATENCY).await,
        ask(chain, true, TOOL_LATENCY).await,
    );
    let s = |d: Duration| d.as_secs_f64();
    let ratio = |a: &Asked, b: &Asked| s(b.took) / s(a.took);
    eprintln!(
        "4 dependent calls: {:.2} s not streamed, {:.2} s streamed ({:.2}x)\n\
         14-step plan: {:.2} s not streamed, {:.2} s streamed ({:.2}x)",
        s(chained.0.took),
        s(chained.1.took),
        ratio(&chained.0, &chained.1),
        s(plain.took),
        s(streamed.took),
        ratio(&plain, &streamed),
    );
}
