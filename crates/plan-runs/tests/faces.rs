//! The [`Engine`] as every face calls it, without a binary: one cache compiles a plan once
//! for each name, source and presets (a failure is not kept); plans submitted go into the
//! store's queue all together or not at all; the host and the planner are made once, on
//! first use, and their failures come back typed with the kind a face maps to its exit
//! code or HTTP status; a goal's prompt and a worker come from the engine too.

use std::cell::Cell;

use plan_host::HostOptions;
use plan_manifest::Manifest;
use plan_runs::engine::{Engine, PlanSource, PlanToSubmit, Refused, SubmitRequest};
use plan_runs::goal::Planning;
use plan_runs::load::{LoadError, Loaded};
use plan_runs::open::Access;
use plan_runs::{ErrorKind, StoreAt};
use plan_store::{Durability, RunStatus};
use plan_vm::Limits;
use serde_json::json;

const PLAN: &str = r#"[{"seq_no": 0, "type": "assign", "parameters": {"final_answer": "${who}"}}]"#;
/// Calls a tool the tools do not have.
const BAD: &str = r#"[
 {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "no_such_tool", "tool_params": {}, "output_vars": ["x"]}},
 {"seq_no": 1, "type": "assign", "parameters": {"final_answer": "${x}"}}
]"#;

fn engine(host: HostOptions) -> Engine {
    Engine::new(Manifest::builtin(), Planning::default(), host)
}

fn plan(name: &str, source: &str, vars: &[(&str, &str)]) -> PlanToSubmit {
    PlanToSubmit {
        name: name.to_owned(),
        source: PlanSource::Bytes(source.as_bytes().to_vec()),
        vars: vars
            .iter()
            .map(|(n, v)| ((*n).to_owned(), json!(v)))
            .collect(),
    }
}

#[test]
fn a_plan_is_compiled_once_for_each_name_source_and_presets() {
    let engine = engine(HostOptions::default());
    let fresh = Cell::new(0);
    let mut count = |l: &Loaded| {
        // NB: told with its source, for its warnings to be shown over it.
        assert!(l.source.is_some());
        fresh.set(fresh.get() + 1);
    };
    let who = || vec!["who".to_owned()];
    let first = engine.compile("a.json", PLAN.as_bytes(), who(), &mut count);
    let again = engine.compile("a.json", PLAN.as_bytes(), who(), &mut count);
    let (first, again) = (first.ok().unwrap(), again.ok().unwrap());
    assert!(std::sync::Arc::ptr_eq(&first, &again));
    assert_eq!(first.pbc, plan_bytecode::encode(&first.loaded.program));
    // The cache keeps no plan's text.
    assert!(first.from_source && first.loaded.source.is_none());
    assert_eq!(fresh.get(), 1);

    // Bytecode is compiled as well, and has no text.
    let mut none = |_: &Loaded| {};
    let pbc = engine.compile("a.pbc", &first.pbc, who(), &mut none);
    assert!(!pbc.ok().unwrap().from_source);

    // Another name (its messages say it), or other presets (what the verifier accepts).
    assert!(
        engine
            .compile("b.json", PLAN.as_bytes(), who(), &mut count)
            .is_ok()
    );
    let both = vec!["who".to_owned(), "extra".to_owned()];
    assert!(
        engine
            .compile("a.json", PLAN.as_bytes(), both, &mut count)
            .is_ok()
    );
    assert_eq!(fresh.get(), 3);

    // Without `who` preset, the plan reads a variable nobody set: a warning.
    let unset = engine.compile("a.json", PLAN.as_bytes(), Vec::new(), &mut count);
    let unset = unset.ok().unwrap();
    assert!(unset.loaded.warnings.iter().any(|w| w.contains("W0201")));
    assert!(!first.loaded.warnings.iter().any(|w| w.contains("W0201")));
    assert_eq!(fresh.get(), 4);

    // A plan with errors: refused, each time (a failure is not kept).
    for _ in 0..2 {
        match engine.compile("a.json", BAD.as_bytes(), Vec::new(), &mut count) {
            Err(LoadError::Invalid(invalid)) => {
                assert!(invalid.message.starts_with("a.json"), "{}", invalid.message);
                assert!(!invalid.errors.is_empty());
                assert!(
                    invalid.errors[0].starts_with("a.json:"),
                    "{:?}",
                    invalid.errors
                );
            }
            _ => panic!("a plan calling an unknown tool was compiled"),
        }
    }
    assert_eq!(fresh.get(), 4);
}

/// Plans to submit, every run starting with `vars`, the one run named `id` if given.
fn request(plans: Vec<PlanToSubmit>, vars: &[(&str, &str)], id: Option<String>) -> SubmitRequest {
    SubmitRequest {
        plans,
        vars: vars
            .iter()
            .map(|(n, v)| ((*n).to_owned(), json!(v)))
            .collect(),
        id,
        limits: Limits::default(),
    }
}

/// A plan in a file of `dir` that is not there.
fn missing(dir: &std::path::Path) -> PlanToSubmit {
    PlanToSubmit {
        name: "gone.json".to_owned(),
        source: PlanSource::File(dir.join("gone.json")),
        vars: Vec::new(),
    }
}

/// The message of the plan with errors that `submitted` was refused for.
fn invalid(submitted: Result<Vec<String>, Refused>, what: &str) -> String {
    match submitted {
        Err(Refused::Plan(LoadError::Invalid(invalid))) => invalid.message,
        _ => panic!("{what}"),
    }
}

#[test]
fn plans_submitted_go_into_the_queue_all_together_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let at = StoreAt::new(dir.path().join("runs.db"), Durability::Full);
    let engine = engine(HostOptions::default());
    let fresh = Cell::new(0);
    let mut count = |_: &Loaded| fresh.set(fresh.get() + 1);

    // One plan listed twice with the same presets compiles once; a line's own value of
    // a variable wins over the request's.
    let plans = vec![
        plan("a.json", PLAN, &[]),
        plan("a.json", PLAN, &[("who", "line")]),
    ];
    let ids = match engine.submit(
        &at,
        request(plans, &[("who", "everyone")], None),
        &mut count,
    ) {
        Ok(ids) => ids,
        Err(_) => panic!("the plans were refused"),
    };
    assert_eq!(ids.len(), 2);
    assert_eq!(fresh.get(), 1);
    let store = at.open(Access::Existing).unwrap();
    for (id, who) in ids.iter().zip(["everyone", "line"]) {
        let run = store.run(id).unwrap();
        assert_eq!(run.status, RunStatus::Queued);
        assert_eq!(run.plan, "a.json");
        assert_eq!(run.presets["who"], json!(who));
        let program = store.program(&run.program).unwrap();
        assert_eq!(program.source.as_deref(), Some(PLAN));
    }
    let before = plan_runs::read::list(&*store).unwrap().len();

    // A bad plan after a good one: neither is queued.
    let plans = vec![plan("a.json", PLAN, &[]), plan("bad.json", BAD, &[])];
    let submitted = engine.submit(&at, request(plans, &[("who", "x")], None), &mut count);
    let message = invalid(submitted, "a plan with errors was submitted");
    assert!(message.starts_with("bad.json"), "{message}");
    // Plans are read and compiled one after another: the first that fails is the one
    // said, a bad plan before a file that is not there.
    let plans = vec![plan("bad.json", BAD, &[]), missing(dir.path())];
    let submitted = engine.submit(&at, request(plans, &[], None), &mut count);
    let message = invalid(submitted, "the bad plan was not the one refused");
    assert!(message.starts_with("bad.json"), "{message}");
    let plans = vec![plan("a.json", PLAN, &[("who", "z")]), missing(dir.path())];
    match engine.submit(&at, request(plans, &[], None), &mut count) {
        Err(Refused::Plan(LoadError::Unreadable(why))) => {
            assert!(
                why.starts_with("cannot read ") && why.contains("gone.json"),
                "{why}"
            );
        }
        _ => panic!("a plan that cannot be read was submitted"),
    }
    // An id taken: the store refuses the whole request.
    let plans = vec![plan("a.json", PLAN, &[("who", "y")])];
    match engine.submit(&at, request(plans, &[], Some(ids[0].clone())), &mut count) {
        Err(Refused::Engine(e)) => assert_eq!(e.kind, ErrorKind::DuplicateRun, "{e}"),
        _ => panic!("a run id was taken twice"),
    }
    assert_eq!(plan_runs::read::list(&*store).unwrap().len(), before);
}

#[test]
fn the_host_and_the_planner_are_made_once_and_fail_typed() {
    // A cassette that is not there: the host cannot be set up, and says so each time.
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.cassette.jsonl");
    let engine = engine(HostOptions {
        replay: Some(missing),
        ..HostOptions::default()
    });
    let e = engine.host().err().unwrap();
    assert_eq!(e.kind, ErrorKind::Unreadable, "{e}");
    assert_eq!(engine.host().err(), Some(e.clone()));
    // The planner needs the host first.
    assert_eq!(engine.goal_planner().err(), Some(e));

    // The built-in tools name no LLM: a planner is the configuration's to give.
    let engine = self::engine(HostOptions::default());
    let host = engine.host().unwrap().clone();
    assert!(std::sync::Arc::ptr_eq(&host, engine.host().unwrap()));
    let e = engine.goal_planner().err().unwrap();
    assert_eq!(e.kind, ErrorKind::Config, "{e}");
    assert!(e.message.contains("no backend for the planner"), "{e}");

    // A cassette answers the planner as it answers the tools.
    let cassette = dir.path().join("empty.cassette.jsonl");
    std::fs::write(&cassette, "").unwrap();
    let engine = self::engine(HostOptions {
        replay: Some(cassette),
        ..HostOptions::default()
    });
    let planner = engine.goal_planner().unwrap();
    assert_eq!(
        planner.planning.max_examples,
        plan_planner::DEFAULT_MAX_EXAMPLES
    );
}

#[test]
fn a_tools_file_that_cannot_be_read_is_the_callers_mistake() {
    let dir = tempfile::tempdir().unwrap();
    let nowhere = dir.path().join("nowhere.toml");
    let files = plan_runs::engine::PlanningFiles::of_tools(Some(&nowhere));
    let e = Engine::open(files, HostOptions::default()).err().unwrap();
    assert_eq!(e.kind, ErrorKind::BadInput);
    assert!(e.message.starts_with("cannot load tools file"), "{e}");

    let examples = dir.path().join("examples");
    let files = plan_runs::engine::PlanningFiles {
        examples: Some(examples),
        ..Default::default()
    };
    let e = Engine::open(files, HostOptions::default()).err().unwrap();
    assert_eq!(e.kind, ErrorKind::BadInput, "{e}");
}

/// The prompt a goal would get (`ask --print-prompt`) is the planner's, made without a
/// call: the goal, its answer's format and the tools; a worker is made on the same host,
/// and one whose tools file names no planner's LLM takes runs only, saying why.
#[test]
fn a_goals_prompt_and_a_worker_come_from_the_engine_without_a_call() {
    use plan_runs::engine::AskRequest;
    let engine = engine(HostOptions::default());
    let format = json!({"lang": "Japanese"});
    let request = AskRequest {
        goal: "Does TiDB support SQL?",
        response_format: Some(&format),
        store: None,
    };
    let options = plan_planner::AskOptions::default();
    let prompt = engine
        .prompt(&request, options, &mut |w| panic!("{w}"))
        .unwrap();
    assert!(prompt.contains("Does TiDB support SQL?"), "{prompt}");
    assert!(prompt.contains("Japanese"), "{prompt}");
    assert!(prompt.contains("vector_search"), "{prompt}");
    let dir = tempfile::tempdir().unwrap();
    let at = StoreAt::new(dir.path().join("runs.db"), Durability::Normal);
    let (worker, no_goals) = engine.worker(at, |_| {}).unwrap();
    assert!(worker.planner.is_none());
    assert_eq!(no_goals.map(|e| e.kind), Some(ErrorKind::Config));
    assert!(std::sync::Arc::ptr_eq(&worker.host, engine.host().unwrap()));
}

/// What `planvm ground` and `planvm tools refresh` refuse comes back typed: tools with
/// no `sql` tool to ground, a tools file with no MCP server to list again.
#[test]
fn grounding_and_listing_again_refuse_tools_with_nothing_for_them() {
    let e = engine(HostOptions::default())
        .ground("How many orders were shipped?")
        .err()
        .unwrap();
    assert_eq!(e.kind, ErrorKind::BadInput);
    assert!(e.message.contains("no sql tool"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.toml");
    std::fs::write(&tools, "").unwrap();
    let e = plan_runs::load::refresh_tools(&tools).err().unwrap();
    assert_eq!(e.kind, ErrorKind::BadInput);
    assert!(e.message.ends_with("has no [[mcp]] server to list"), "{e}");
}

/// An id shows its run, else its goal none of whose plans has run yet, else it is
/// unknown (`planvm runs show`).
#[test]
fn an_id_shows_its_run_else_its_goal() {
    use plan_runs::read::{Found, show_run_or_goal};
    let dir = tempfile::tempdir().unwrap();
    let at = StoreAt::new(dir.path().join("runs.db"), Durability::Normal);
    let engine = engine(HostOptions::default());
    let plans = vec![plan("a.json", PLAN, &[])];
    let submitted = engine.submit(
        &at,
        request(plans, &[("who", "Ann")], Some("r1".into())),
        &mut |_| {},
    );
    assert!(submitted.is_ok());
    let asked = plan_runs::goal::Request::new(&[], &Limits::default(), None);
    let goals = [("g1".to_owned(), "Does TiDB support SQL?".to_owned())];
    plan_runs::goal::submit(&at, &goals, (None, None), &asked).unwrap();
    let store = at.open(Access::Read).unwrap();
    match show_run_or_goal(&*store, "r1").unwrap() {
        Found::Run(shown) => assert_eq!(shown.run.status, RunStatus::Queued),
        Found::Goal(_) => panic!("r1 is a run"),
    }
    match show_run_or_goal(&*store, "g1").unwrap() {
        Found::Goal(goal) => assert_eq!(goal.goal, "Does TiDB support SQL?"),
        Found::Run(_) => panic!("g1 is a goal"),
    }
    let e = show_run_or_goal(&*store, "nothing").err().unwrap();
    assert_eq!(e.kind, ErrorKind::UnknownRun);
}
