//! The batch engine in-process: a list's cassettes and variables per line, a cassette
//! that every run replays from its start, a record and a trace file per run. And on
//! tokio's paused clock, where a replayed call's latency is a timer, the virtual time a
//! batch takes: its critical path when its runs and their calls overlap, their sum when
//! they do not (counted, not timed, whatever the load). A batch asked for refuses what it
//! cannot read or would write over, and a list for a queue refuses cassettes.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use plan_bytecode::ValidatedProgram;
use plan_compiler::{CompileOptions, compile};
use plan_host::RunReport;
use plan_host::{Host, HostOptions, ReplayBackend};
use plan_manifest::Manifest;
use plan_runs::batch::{Batch, Event, Job, name_runs, read_list, run, scan_dir};
use plan_vm::{Halt, Limits, ToolRequest, Vm};
use serde_json::{Value, json};

/// The 14-step plan shared with the workspace tests and benches: 4 aspects × (knowledge
/// graph, vector search → synthesis) → final synthesis: 13 calls, critical path 3 calls.
const ASPECTS_PLAN: &str = include_str!("../../../tests/corpus/valid/current_retrieval.json");

fn program(src: &str) -> ValidatedProgram {
    let compiled = compile(src, &CompileOptions::default());
    let program = compiled
        .program
        .unwrap_or_else(|| panic!("plan does not compile: {:#?}", compiled.diagnostics));
    plan_bytecode::validate(program).expect("compiled program validates")
}

fn output(r: &ToolRequest) -> Value {
    json!(format!("{} answer for seq_no {:?}", r.tool, r.seq_no))
}

/// Runs the program in memory one call at a time and returns its calls as cassette
/// lines with `latency_ms`, and the final answer.
fn cassette_for(prog: &ValidatedProgram, latency_ms: u64) -> (String, Value) {
    let limits = Limits {
        max_concurrency: 1,
        ..Limits::default()
    };
    let mut vm = Vm::new(prog, limits);
    let mut lines = String::new();
    loop {
        match vm.run() {
            Halt::Yield(reqs) => {
                for r in reqs {
                    let e = json!({"tool": r.tool, "args": r.args, "output": output(&r),
                                   "latency_ms": latency_ms});
                    lines.push_str(&format!("{e}\n"));
                    vm.resume(r.id, Ok(output(&r))).expect("known request");
                }
            }
            Halt::Done(o) => return (lines, o.final_answer),
            Halt::Failed(e) => panic!("{e}"),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_thousand_runs_of_thirteen_slow_calls_take_one_critical_path() {
    const RUNS: usize = 1000;
    const LATENCY_MS: u64 = 300;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (cassette, answer) = cassette_for(&program(ASPECTS_PLAN), LATENCY_MS);
    assert_eq!(cassette.lines().count(), 13);
    std::fs::write(d.join("aspects.json"), ASPECTS_PLAN).unwrap();
    let tape = d.join("aspects.cassette.jsonl");
    std::fs::write(&tape, cassette).unwrap();
    std::fs::write(d.join("runs.txt"), "aspects.json\n".repeat(RUNS)).unwrap();
    let mut jobs = read_list(&d.join("runs.txt")).unwrap();
    name_runs(&mut jobs);
    let manifest = Manifest::builtin();
    let batch = Batch {
        host: Arc::new(Host::new(manifest.clone(), HostOptions::default()).unwrap()),
        manifest,
        host_options: HostOptions::default(),
        limits: Limits::default(),
        vars: Vec::new(),
        replay: Some((tape.clone(), Arc::new(ReplayBackend::load(&tape).unwrap()))),
        record_dir: None,
        trace_dir: None,
        jobs: RUNS,
        telemetry: None,
    };
    let mut reports = Vec::new();
    let began = tokio::time::Instant::now();
    let tally = run(&batch, None, jobs, &mut |e| {
        if let Event::Finished(f) = e {
            reports.push(f.report.clone());
        }
    })
    .await;
    let took = began.elapsed();
    assert_eq!((tally.runs, tally.ok), (RUNS as u64, RUNS as u64));
    assert_eq!(reports.len(), RUNS);
    for r in &reports {
        assert!(r.is_ok(), "{:?}", r.error);
        assert_eq!(r.final_answer, answer);
        assert_eq!(r.tool_calls, 13);
        // Each run overlaps its own calls: its three-call critical path, not its 13 calls.
        // NB: the paused clock's time (`start_paused`), moved only by the replay's timers:
        // exact whatever the load.
        assert_eq!(r.elapsed_ms, 3 * LATENCY_MS, "{r:?}");
    }
    // The runs overlap each other too: one critical path for all, where one after another
    // they would take 1,000 of them (900 s).
    assert_eq!(took, Duration::from_millis(3 * LATENCY_MS));
}

/// A batch of the built-in tools, replaying `replay` for runs without a cassette.
fn batch(replay: Option<&Path>, vars: &[(&str, Value)], jobs: usize) -> Batch {
    let manifest = Manifest::builtin();
    Batch {
        host: Arc::new(Host::new(manifest.clone(), HostOptions::default()).unwrap()),
        manifest,
        host_options: HostOptions::default(),
        limits: Limits::default(),
        vars: vars
            .iter()
            .map(|(n, v)| ((*n).to_owned(), v.clone()))
            .collect(),
        replay: replay.map(|p| (p.to_owned(), Arc::new(ReplayBackend::load(p).unwrap()))),
        record_dir: None,
        trace_dir: None,
        jobs,
        telemetry: None,
    }
}

/// Runs `jobs` (named first); each finished run's list line (or plan) and report, sorted.
async fn finished(batch: &Batch, mut jobs: Vec<Job>) -> Vec<(Option<usize>, PathBuf, RunReport)> {
    name_runs(&mut jobs);
    let mut out = Vec::new();
    run(batch, None, jobs, &mut |e| {
        if let Event::Finished(f) = e {
            out.push((f.line, f.plan.to_owned(), f.report.clone()));
        }
    })
    .await;
    out.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    out
}

/// A one-call plan greeting `${who}`, and cassettes answering for some names.
fn write_greeting(d: &Path) {
    std::fs::write(
        d.join("greet.json"),
        r#"[{"seq_no": 0, "type": "calling", "parameters": {"tool_name": "llm_generate",
            "tool_params": {"prompt": "Say hi to ${who}"}, "output_vars": ["final_answer"]}}]"#,
    )
    .unwrap();
    let entry = |who: &str, answer: &str| {
        json!({"tool": "llm_generate", "args": {"prompt": format!("Say hi to {who}")},
               "output": answer})
        .to_string()
    };
    std::fs::create_dir_all(d.join("tapes")).unwrap();
    let tapes = [
        ("en", [entry("Ann", "Hi Ann"), entry("Bob", "Hi Bob")]),
        (
            "fr",
            [
                entry("Ann", "Salut Ann"),
                entry("two words", "Salut vous deux"),
            ],
        ),
    ];
    for (name, entries) in tapes {
        std::fs::write(d.join(format!("tapes/{name}.jsonl")), entries.join("\n")).unwrap();
    }
}

#[tokio::test]
async fn a_list_gives_each_run_its_cassette_and_vars() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_greeting(d);
    // Relative paths are against the list's directory, wherever the batch runs.
    let list = "\
# plan        cassette          vars
greet.json    tapes/en.jsonl    who=Ann
greet.json    tapes/fr.jsonl    who=Ann   # same plan, other cassette

greet.json    tapes/fr.jsonl    who=\"two words\"
greet.json                      who=Bob   # the batch's replay serves lines without one
greet.json                                # the batch's who=Ann
greet.json    tapes/en.jsonl    who=Zed   # not in the cassette: fails
";
    std::fs::write(d.join("runs.txt"), list).unwrap();
    let jobs = read_list(&d.join("runs.txt")).unwrap();
    let b = batch(Some(&d.join("tapes/en.jsonl")), &[("who", json!("Ann"))], 3);
    let ran = finished(&b, jobs).await;
    let got: Vec<(Option<usize>, Value)> = ran
        .iter()
        .map(|(line, plan, r)| {
            assert_eq!(plan, &d.join("greet.json"));
            (*line, r.final_answer.clone())
        })
        .collect();
    let answers = [
        (2, "Hi Ann"),
        (3, "Salut Ann"),
        (5, "Salut vous deux"),
        (6, "Hi Bob"),
    ];
    let mut want: Vec<(Option<usize>, Value)> =
        answers.iter().map(|(l, a)| (Some(*l), json!(a))).collect();
    want.extend([(Some(7), json!("Hi Ann")), (Some(8), Value::Null)]);
    assert_eq!(got, want);
    let failed = ran[5].2.error.as_ref().expect("line 8 fails");
    assert!(
        failed.message.contains("Say hi to Zed"),
        "{}",
        failed.message
    );
}

#[tokio::test]
async fn every_run_replays_its_cassette_from_the_start() {
    // "Entries with the same key are served in recorded order": shared between runs,
    // the 2nd run would get "second". Every run must get "first".
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("ask.json"),
        r#"[{"seq_no": 0, "type": "calling", "parameters": {"tool_name": "llm_generate",
            "tool_params": {"prompt": "q"}, "output_vars": ["final_answer"]}}]"#,
    )
    .unwrap();
    let entry = |out: &str| json!({"tool": "llm_generate", "args": {"prompt": "q"}, "output": out});
    let tape = d.join("ask.cassette.jsonl");
    std::fs::write(&tape, format!("{}\n{}\n", entry("first"), entry("second"))).unwrap();
    let list: String = (0..50)
        .map(|i| match i % 2 {
            0 => "ask.json ask.cassette.jsonl\n",
            _ => "ask.json\n",
        })
        .collect();
    std::fs::write(d.join("runs.txt"), list).unwrap();
    let jobs = read_list(&d.join("runs.txt")).unwrap();
    let ran = finished(&batch(Some(&tape), &[], 7), jobs).await;
    assert_eq!(ran.len(), 50);
    for (line, _, r) in &ran {
        assert_eq!(r.final_answer, json!("first"), "line {line:?}");
    }
}

#[tokio::test]
async fn record_and_trace_dirs_get_one_file_per_run_named_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let plans = dir.path().join("plans");
    std::fs::create_dir(&plans).unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    for entry in std::fs::read_dir(examples).unwrap() {
        let entry = entry.unwrap();
        // NB: plans only; `planner/` holds the planner's example plans.
        if entry.path().is_file() {
            std::fs::copy(entry.path(), plans.join(entry.file_name())).unwrap();
        }
    }
    let listing = |d: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let (rec, traces) = (dir.path().join("rec"), dir.path().join("traces"));
    std::fs::create_dir(&rec).unwrap();
    std::fs::create_dir(&traces).unwrap();
    let mut b = batch(None, &[], 4);
    b.record_dir = Some(rec.clone());
    b.trace_dir = Some(traces.clone());
    let ran = finished(&b, scan_dir(&plans, true).unwrap()).await;
    let names = [
        "countdown_loop",
        "population_condition",
        "tidb_overview",
        "tidb_overview.llm",
    ];
    let want = |kind: &str| -> Vec<String> {
        let mut v: Vec<String> = names.iter().map(|n| format!("{n}.{kind}.jsonl")).collect();
        v.sort();
        v
    };
    assert_eq!(listing(&rec), want("cassette"));
    assert_eq!(listing(&traces), want("trace"));
    for ((_, plan, report), name) in ran.iter().zip(names) {
        assert!(report.is_ok(), "{name}: {report:?}");
        // Each trace is its own run's, start to end.
        let trace = std::fs::read_to_string(traces.join(format!("{name}.trace.jsonl"))).unwrap();
        let last: Value = serde_json::from_str(trace.lines().last().unwrap()).unwrap();
        assert_eq!(
            (&last["event"], &last["status"]),
            (&json!("done"), &json!("ok")),
            "{name}"
        );
        // Each recording replays its plan to the same answer, every entry with its step.
        let cassette = rec.join(format!("{name}.cassette.jsonl"));
        let text = std::fs::read_to_string(&cassette).unwrap();
        assert!(!text.is_empty(), "{name}");
        for l in text.lines() {
            let e: Value = serde_json::from_str(l).unwrap();
            assert!(e["step"].is_u64(), "{name}: {l}");
        }
        let job = Job {
            plan: plan.clone(),
            cassette: Some(cassette),
            vars: Vec::new(),
            line: None,
            name: String::new(),
        };
        let again = finished(&batch(None, &[], 1), vec![job]).await;
        assert_eq!(again[0].2.final_answer, report.final_answer, "{name}");
    }

    // A list names runs by line, so one plan listed twice gets two files.
    let list = dir.path().join("runs.txt");
    let line = "plans/countdown_loop.json plans/countdown_loop.cassette.jsonl\n";
    std::fs::write(&list, format!("{line}\n{line}")).unwrap();
    let rec2 = dir.path().join("rec2");
    std::fs::create_dir(&rec2).unwrap();
    let mut b = batch(None, &[], 4);
    b.record_dir = Some(rec2.clone());
    let ran = finished(&b, read_list(&list).unwrap()).await;
    assert!(ran.iter().all(|(_, _, r)| r.is_ok()), "{ran:?}");
    assert_eq!(
        listing(&rec2),
        [
            "countdown_loop.line1.cassette.jsonl",
            "countdown_loop.line3.cassette.jsonl"
        ]
    );
}

/// Answers each search `vector_search(args)`, keeping every call made.
#[derive(Default)]
struct Searches(std::sync::Mutex<Vec<String>>);

struct Search(Arc<Searches>);

impl plan_host::Backend for Search {
    fn call<'a>(
        &'a self,
        req: &'a ToolRequest,
    ) -> futures::future::BoxFuture<'a, Result<Value, plan_host::ToolError>> {
        let key = format!(
            "{}({})",
            req.tool,
            serde_json::to_string(&req.args).unwrap()
        );
        self.0.0.lock().unwrap().push(key.clone());
        Box::pin(async move { Ok(json!(key)) })
    }

    fn describe(&self) -> String {
        "in-process searches".into()
    }
}

/// Two searches on the run's `topic`, then the answer.
const TOPIC: &str = r#"[
 {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "${topic} a"}, "output_vars": ["a"]}},
 {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "${topic} b ${a}"}, "output_vars": ["b"]}},
 {"seq_no": 2, "type": "assign", "parameters": {"final_answer": "${b}"}}
]"#;

/// Batch `b` of the list `lines` (plan `topic.json` in `dir`) journaled in `dir`'s store,
/// resumed when `resume`: each run's line, id and report.
async fn stored_batch(
    dir: &Path,
    lines: &[String],
    resume: bool,
    searches: &Arc<Searches>,
) -> Vec<(Option<usize>, String, RunReport)> {
    std::fs::write(dir.join("runs.txt"), lines.join("\n")).unwrap();
    let mut jobs = read_list(&dir.join("runs.txt")).unwrap();
    name_runs(&mut jobs);
    let mut b = batch(None, &[], 2);
    let host = Host::new(Manifest::builtin(), HostOptions::default()).unwrap();
    host.set_backend("vector_search", Arc::new(Search(searches.clone())));
    b.host = Arc::new(host);
    let setup = plan_runs::batch::BatchStore {
        at: plan_runs::StoreAt::new(dir.join("s.db"), plan_store::Durability::Normal),
        batch_id: "b".into(),
        resume,
        retry_unknown_writes: false,
    };
    let mut stored = setup.open(&jobs, &[], |e| panic!("{e}")).unwrap();
    let mut out = Vec::new();
    run(&b, Some(&mut stored), jobs, &mut |e| {
        if let Event::Finished(f) = e {
            out.push((f.line, f.run_id.unwrap().to_owned(), f.report.clone()));
        }
    })
    .await;
    stored.close();
    out.sort_by_key(|(line, _, _)| *line);
    out
}

#[tokio::test]
async fn a_resumed_batch_pairs_its_lines_with_their_runs_by_what_they_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("topic.json"), TOPIC).unwrap();
    let searches = Arc::new(Searches::default());
    let lines: Vec<String> = (1..=6).map(|i| format!("topic.json topic=t{i}")).collect();
    let first = stored_batch(d, &lines, false, &searches).await;
    assert!(first.iter().all(|(_, _, r)| r.is_ok()));
    let asked = searches.0.lock().unwrap().len();

    // Lines moved since (a comment at the top, the order reversed) are paired with their
    // runs by what they run, not by their numbers: each is reported from its own run.
    let reversed: Vec<String> = std::iter::once("# the same runs, reversed".to_owned())
        .chain((1..=6).map(|i| format!("topic.json topic=t{}", 7 - i)))
        .collect();
    let again = stored_batch(d, &reversed, true, &searches).await;
    let paired: Vec<(Option<usize>, String)> =
        again.iter().map(|(l, id, _)| (*l, id.clone())).collect();
    let want: Vec<(Option<usize>, String)> = (2..=7)
        .map(|l| (Some(l), format!("b.topic.line{}", 8 - l)))
        .collect();
    assert_eq!(paired, want);
    for ((_, _, now), (_, _, then)) in again.iter().zip(first.iter().rev()) {
        assert_eq!(now.final_answer, then.final_answer);
    }
    let now = searches.0.lock().unwrap().len();
    assert_eq!(
        now, asked,
        "reported from the store, not run: nothing is asked"
    );

    // A line whose content matches no stored run is a new run: under its line number's
    // id, numbered past the run of other content stored there, which is left alone. A
    // line added twice over a stored one is paired once, in order; the other runs.
    let mut changed = lines.clone();
    changed[0] = "topic.json topic=t9".into();
    changed.push(lines[1].clone());
    let ran = stored_batch(d, &changed, true, &searches).await;
    let got: Vec<(Option<usize>, String)> = ran.iter().map(|(l, id, _)| (*l, id.clone())).collect();
    let mut want = vec![(Some(1), "b.topic.line1.2".to_owned())];
    want.extend((2..=6).map(|l| (Some(l), format!("b.topic.line{l}"))));
    want.push((Some(7), "b.topic.line7".into()));
    assert_eq!(got, want);
    // Run: t9's two searches and the second t2's; the rest reported from the store.
    let mut topics: Vec<String> = searches.0.lock().unwrap()[asked..]
        .iter()
        .map(|c| c.split("\"query\":\"").nth(1).unwrap()[..2].to_owned())
        .collect();
    topics.sort();
    assert_eq!(topics, ["t2", "t2", "t9", "t9"]);
}

/// A batch asked for (`BatchRequest`) refuses, before any run starts or anything is
/// created, what it cannot read, make or would write over, each with its kind; one that
/// can run comes back with its runs read and named.
#[test]
fn a_batch_request_refuses_what_it_cannot_read_or_would_write_over() {
    use plan_runs::ErrorKind;
    use plan_runs::batch::{BatchInput, BatchRequest, BatchStore};
    let d = tempfile::tempdir().unwrap();
    write_greeting(d.path());
    let list = d.path().join("runs.txt");
    std::fs::write(&list, "greet.json tapes/en.jsonl who=Ann\n").unwrap();
    let store = d.path().join("runs.db");
    let request = |change: &dyn Fn(&mut BatchRequest)| {
        let mut r = BatchRequest {
            input: BatchInput::List(list.clone()),
            tools: None,
            replay: None,
            vars: Vec::new(),
            limits: Limits::default(),
            host: HostOptions::default(),
            jobs: 1,
            output: None,
            record_dir: None,
            trace_dir: None,
            store: None,
            lease_warning: |_| {},
        };
        change(&mut r);
        r.prepare(&mut |_| {})
    };
    let kind = |change: &dyn Fn(&mut BatchRequest)| request(change).err().map(|e| e.kind);
    let no_list = |r: &mut BatchRequest| r.input = BatchInput::List(d.path().join("no.txt"));
    assert_eq!(kind(&no_list), Some(ErrorKind::BadInput));
    let no_dir = |r: &mut BatchRequest| r.input = BatchInput::Dir(d.path().join("nowhere"));
    assert_eq!(kind(&no_dir), Some(ErrorKind::Unreadable));
    let over_plan = |r: &mut BatchRequest| r.output = Some(d.path().join("greet.json"));
    assert_eq!(kind(&over_plan), Some(ErrorKind::OutputIsInput));
    let over_cassette = |r: &mut BatchRequest| r.output = Some(d.path().join("tapes/en.jsonl"));
    assert_eq!(kind(&over_cassette), Some(ErrorKind::OutputIsInput));
    let over_store = |r: &mut BatchRequest| {
        r.output = Some(store.clone());
        r.store = Some(BatchStore {
            at: plan_runs::StoreAt::new(&store, plan_store::Durability::Normal),
            batch_id: "b1".into(),
            resume: false,
            retry_unknown_writes: false,
        });
    };
    assert_eq!(kind(&over_store), Some(ErrorKind::OutputIsInput));
    assert!(!store.exists(), "a refused batch creates no store");
    let record_on_a_file = |r: &mut BatchRequest| r.record_dir = Some(list.clone());
    assert_eq!(kind(&record_on_a_file), Some(ErrorKind::CannotCreate));
    let no_replay = |r: &mut BatchRequest| r.replay = Some(d.path().join("none.jsonl"));
    assert_eq!(kind(&no_replay), Some(ErrorKind::Unreadable));
    let out = d.path().join("out.jsonl");
    std::fs::write(&out, "an earlier batch's lines\n").unwrap();
    let refused_with_output = |r: &mut BatchRequest| {
        no_replay(r);
        r.output = Some(out.clone());
    };
    assert_eq!(kind(&refused_with_output), Some(ErrorKind::Unreadable));
    let earlier = std::fs::read_to_string(&out).unwrap();
    assert_eq!(
        earlier, "an earlier batch's lines\n",
        "a refused batch leaves its output"
    );
    let onto_a_dir = |r: &mut BatchRequest| r.output = Some(d.path().join("tapes"));
    assert_eq!(kind(&onto_a_dir), Some(ErrorKind::CannotCreate));

    let prepared = request(&|r| r.output = Some(out.clone())).unwrap();
    let plans: Vec<_> = prepared.jobs.iter().map(|j| j.plan.clone()).collect();
    assert_eq!(plans, [d.path().join("greet.json")]);
    assert!(prepared.store.is_none());
    // The output is created (emptied) once nothing refuses the batch, each line written
    // through as it comes.
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "");
    let mut lines = prepared.lines;
    lines.write(b"{\"run\": 1}\n");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "{\"run\": 1}\n");
    assert_eq!(lines.finish(), None);
}

/// A list submitted to a queue takes no cassette: its workers' serve it.
#[test]
fn a_list_submitted_to_a_queue_names_no_cassette() {
    use plan_runs::engine::PlanToSubmit;
    let d = tempfile::tempdir().unwrap();
    write_greeting(d.path());
    let list = d.path().join("runs.txt");
    std::fs::write(&list, "greet.json who=Ann\ngreet.json who=Bob\n").unwrap();
    let plans = PlanToSubmit::listed(&list).unwrap();
    let vars: Vec<_> = plans.iter().map(|p| p.vars.clone()).collect();
    assert_eq!(
        vars,
        [
            vec![("who".into(), json!("Ann"))],
            vec![("who".into(), json!("Bob"))]
        ]
    );
    std::fs::write(&list, "greet.json\ngreet.json tapes/en.jsonl\n").unwrap();
    let e = PlanToSubmit::listed(&list).err().unwrap();
    assert_eq!(e.kind, plan_runs::ErrorKind::BadInput);
    assert!(e.message.contains("line 2"), "{e}");
}
