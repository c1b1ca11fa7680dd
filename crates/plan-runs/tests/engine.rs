//! The engine without the binary: a stored run stopped mid-way (its process gone) is taken
//! up and goes on to the uninterrupted answer without asking again for what the store
//! holds; a `write` call in flight is refused unless the caller says to send it again; a
//! finished run is reported, not run; a run a live process holds is refused; resume by
//! id, branch, and reading runs back; a lease renewed holds a run, a lapsed one frees it;
//! a batch resumed reports what finished and goes on with what failed; a cancelled run
//! stops at its next commit point.

mod common;

use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use plan_bytecode::ValidatedProgram;
use plan_host::{Backend, Host, HostOptions, ToolError, ToolErrorKind};
use plan_manifest::{Effects, Manifest, ToolSpec};
use plan_runs::engine::{Engine, Refused};
use plan_runs::load::LoadError;
use plan_runs::{BranchRequest, ErrorKind, GoOn, ResumeRequest, Taken};
use plan_store::{Durability, NewRun, Owner, RunStatus, RunStore, SqliteStore, StoreJournal};
use plan_vm::{Limits, ToolRequest};
use serde_json::{Map, Value, json};

/// Two searches, a note written on them, then the answer.
const PLAN: &str = r#"[
 {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "a"}, "output_vars": ["a"]}},
 {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "${a} b"}, "output_vars": ["b"]}},
 {"seq_no": 2, "type": "calling", "parameters": {"tool_name": "post_note", "tool_params": {"text": "${b}"}, "output_vars": ["note"]}},
 {"seq_no": 3, "type": "assign", "parameters": {"final_answer": "${b} (${note})"}}
]"#;

/// Answers every call with `tool(args)`, counting them; while `hang` names a tool, its
/// calls never answer (the process "dies" waiting for them).
#[derive(Default)]
struct Tools {
    seen: Mutex<Vec<String>>,
    hang: Mutex<Option<&'static str>>,
    /// A call of this tool whose key holds this text is refused.
    refuse: Mutex<Option<(&'static str, &'static str)>>,
}

struct Tool(Arc<Tools>);

impl Backend for Tool {
    fn call<'a>(&'a self, req: &'a ToolRequest) -> BoxFuture<'a, Result<Value, ToolError>> {
        let key = format!(
            "{}({})",
            req.tool,
            serde_json::to_string(&req.args).unwrap()
        );
        self.0.seen.lock().unwrap().push(key.clone());
        let hang = *self.0.hang.lock().unwrap() == Some(req.tool.as_str());
        let refuse = self
            .0
            .refuse
            .lock()
            .unwrap()
            .is_some_and(|(tool, text)| req.tool.as_str() == tool && key.contains(text));
        Box::pin(async move {
            if refuse {
                return Err(ToolError::new(ToolErrorKind::Refused, "refused"));
            }
            if hang {
                futures::future::pending::<()>().await;
            }
            Ok(json!(key))
        })
    }

    fn describe(&self) -> String {
        "in-process tools".into()
    }
}

fn manifest() -> Manifest {
    let mut m = Manifest::builtin();
    m.tools.push(ToolSpec {
        retrieval: false,
        name: "post_note".into(),
        description: String::new(),
        params: vec![plan_manifest::ParamSpec {
            name: "text".into(),
            ty: plan_manifest::ParamType::String,
            required: true,
            default: None,
            description: String::new(),
            choices: None,
        }],
        effects: Effects::Write,
        backend: None,
    });
    m
}

fn program(m: &Manifest) -> ValidatedProgram {
    let opts = plan_compiler::CompileOptions {
        manifest: m.clone(),
        ..Default::default()
    };
    plan_compiler::compile(PLAN, &opts).validate().unwrap()
}

/// Run `id` of `PLAN` compiled to `pbc`, with no presets and the default limits.
fn new_run<'a>(id: &'a str, pbc: &'a [u8]) -> NewRun<'a> {
    static PRESETS: LazyLock<Map<String, Value>> = LazyLock::new(Map::new);
    static LIMITS: LazyLock<Limits> = LazyLock::new(Limits::default);
    NewRun {
        id,
        plan: "plan.json",
        source: Some(PLAN),
        pbc,
        presets: &PRESETS,
        limits: &LIMITS,
        parent: None,
    }
}

fn host(m: &Manifest, tools: &Arc<Tools>) -> Host {
    let host = Host::new(m.clone(), HostOptions::default()).unwrap();
    for t in ["vector_search", "post_note"] {
        host.set_backend(t, Arc::new(Tool(tools.clone())));
    }
    host
}

/// A process of this machine that no longer exists (a pid past any the kernel gives).
fn gone() -> Owner {
    let this = Owner::this_process().0;
    let host = this.rsplitn(3, ':').nth(2).unwrap().to_owned();
    Owner(format!("{host}:4000000000:1.gone"))
}

/// Starts run `id` as `gone()`'s and lets it go until it waits for `hang`, then drops it
/// there, as a kill would.
async fn killed_at(store: &mut SqliteStore, id: &str, hang: &'static str, tools: &Arc<Tools>) {
    let m = manifest();
    let program = program(&m);
    let pbc = plan_bytecode::encode(&program);
    let owner = gone();
    let new = new_run(id, &pbc);
    store.create_run(&new, &owner).unwrap();
    *tools.hang.lock().unwrap() = Some(hang);
    let host = host(&m, tools);
    let mut journal = StoreJournal::new(store, id, owner, 0, &program);
    let run = plan_host::run_plan(&host, &program, Vec::new(), Limits::default(), &mut journal);
    assert!(
        tokio::time::timeout(Duration::from_secs(60), run)
            .await
            .is_err(),
        "the run waits for `{hang}` until it is dropped"
    );
    *tools.hang.lock().unwrap() = None;
}

fn store(dir: &tempfile::TempDir) -> SqliteStore {
    plan_runs::open::open(
        &dir.path().join("s.db"),
        Durability::Normal,
        plan_runs::open::Access::Create,
    )
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_run_whose_process_died_goes_on_without_asking_again_for_stored_answers() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = store(&dir);
    let tools = Arc::new(Tools::default());
    killed_at(&mut store, "r", "post_note", &tools).await;
    let run = store.run("r").unwrap();
    assert_eq!(run.status, RunStatus::Interrupted);
    let before: Vec<String> = tools.seen.lock().unwrap().clone();
    assert_eq!(before.len(), 3, "{before:?}");

    // The note was in flight: it may have been written, so it is not sent unasked.
    let limits = run.limits.clone();
    let refused = plan_runs::take_up(&store, &run, &limits, false, None)
        .err()
        .unwrap();
    assert_eq!(refused.kind, ErrorKind::UnknownWrites, "{refused}");
    assert!(
        refused.message.contains("`post_note` (seq_no 2)"),
        "{refused}"
    );

    let Ok(Taken::Going(going)) = plan_runs::take_up(&store, &run, &limits, true, None) else {
        panic!("the run goes on when asked to");
    };
    let me = Owner::this_process();
    store.claim("r", &me, going.seen).unwrap();
    let m = manifest();
    let report = plan_runs::go_on(
        &mut store,
        me,
        GoOn {
            id: "r",
            steps_done: going.steps_done,
            program: &going.program,
            state: going.state,
            known: plan_store::known_answers(&going.calls),
            input: None,
            limits,
        },
        &host(&m, &tools),
        &mut (),
    )
    .await;
    assert!(report.is_ok(), "{:?}", report.error);
    let after: Vec<String> = tools.seen.lock().unwrap()[before.len()..].to_vec();
    assert_eq!(after, [before[2].clone()], "only the note is sent again");
    assert_eq!(
        report.final_answer,
        json!(format!("{} ({})", before[1], before[2]))
    );
    assert_eq!(report.tool_calls, 3, "the whole run's calls");

    // Finished: reported from its row, nothing runs.
    let run = store.run("r").unwrap();
    assert_eq!(run.status, RunStatus::Ok);
    let Ok(Taken::Finished(stored)) = plan_runs::take_up(&store, &run, &run.limits, false, None)
    else {
        panic!("a finished run is not taken up");
    };
    assert_eq!(stored.final_answer, report.final_answer);
    assert_eq!(stored.elapsed_ms, 0);
}

#[tokio::test(start_paused = true)]
async fn a_run_a_live_process_holds_is_not_taken_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = store(&dir);
    let m = manifest();
    let program = program(&m);
    let pbc = plan_bytecode::encode(&program);
    let new = new_run("held", &pbc);
    store.create_run(&new, &Owner::this_process()).unwrap();
    let run = store.run("held").unwrap();
    assert_eq!(run.status, RunStatus::Running);
    let e = plan_runs::take_up(&store, &run, &run.limits, true, None)
        .err()
        .unwrap();
    assert_eq!(e.kind, ErrorKind::Busy);
    assert_eq!(e.kind.code(), "busy");
}

#[tokio::test(start_paused = true)]
async fn a_run_stopped_on_a_read_goes_on_unasked() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = store(&dir);
    let tools = Arc::new(Tools::default());
    killed_at(&mut store, "s", "vector_search", &tools).await;
    let run = store.run("s").unwrap();
    // A search in flight is sent again without asking: it changes nothing.
    let Ok(Taken::Going(going)) = plan_runs::take_up(&store, &run, &run.limits, false, None) else {
        panic!("a read in flight does not stop a resume");
    };
    assert_eq!(going.calls.len(), 1);
    assert_eq!(going.steps_done, 0);
}

fn at(dir: &tempfile::TempDir) -> plan_runs::StoreAt {
    plan_runs::StoreAt::new(dir.path().join("s.db"), Durability::Normal)
}

fn no_warning(e: &plan_runs::Error) {
    panic!("the lease could not be renewed: {e}");
}

#[tokio::test(start_paused = true)]
async fn resume_by_id_then_branch_then_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let tools = Arc::new(Tools::default());
    killed_at(&mut store(&dir), "r", "vector_search", &tools).await;
    let m = manifest();

    // Resumed by id: read, checked, claimed, journaled to its end.
    let Ok(plan_runs::Resume::Ready(ready)) = plan_runs::resume(&at(&dir), ResumeRequest::new("r"))
    else {
        panic!("an interrupted run on a read is ready to go on");
    };
    assert_eq!(ready.run().status, RunStatus::Interrupted);
    let claimed = ready.claim(no_warning).unwrap();
    assert_eq!(claimed.id(), "r");
    let report = claimed.go(&host(&m, &tools), &mut ()).await;
    assert!(report.is_ok(), "{:?}", report.error);
    assert!(matches!(
        plan_runs::resume(&at(&dir), ResumeRequest::new("r")),
        Ok(plan_runs::Resume::Finished(_))
    ));
    let e = plan_runs::resume(&at(&dir), ResumeRequest::new("nope"))
        .err()
        .unwrap();
    assert_eq!(e.kind, ErrorKind::UnknownRun);

    // A branch at seq_no 2: the parent's `a` and `b` are set, the new plan goes on from
    // there and calls only what it adds.
    let point = plan_runs::branch_point(&at(&dir), "r", 2).unwrap();
    let mut names: Vec<&String> = point.vars().keys().collect();
    names.sort();
    assert_eq!(names, ["a", "b"]);
    let e = plan_runs::branch_point(&at(&dir), "r", 9).err().unwrap();
    assert_eq!(e.kind, ErrorKind::NotReached, "{e}");
    // As a face asks for it: the plan compiled to go on from there, or refused.
    let engine = Engine::new(m.clone(), Default::default(), HostOptions::default());
    let request = |plan: &str, parent: &'static str| BranchRequest {
        parent,
        at: 2,
        name: "branch.json",
        plan: plan.as_bytes().to_vec(),
        limits: Limits::default(),
    };
    let unset =
        r#"[{"seq_no": 2, "type": "assign", "parameters": {"final_answer": "${nowhere}"}}]"#;
    match engine.branch(&at(&dir), request(unset, "r")) {
        Err(Refused::Plan(LoadError::Invalid(invalid))) => {
            assert!(
                invalid.message.contains("branch.json"),
                "{}",
                invalid.message
            );
        }
        _ => panic!("a variable set nowhere is the plan's error"),
    }
    let branch_plan = r#"[
 {"seq_no": 2, "type": "assign", "parameters": {"final_answer": "branched: ${b}"}}
]"#;
    match engine.branch(&at(&dir), request(branch_plan, "nope")) {
        Err(Refused::Engine(e)) => assert_eq!(e.kind, ErrorKind::UnknownRun),
        _ => panic!("no run to branch from"),
    }
    let Ok(branch) = engine.branch(&at(&dir), request(branch_plan, "r")) else {
        panic!("a plan that reads what is set at the point branches");
    };
    let preview = branch.preview().unwrap();
    assert_eq!((preview.at, preview.variables.len()), (2, 2));
    assert_eq!(preview.reused.len(), 2);
    // Nothing called anew; the parent's two calls the new plan leaves out are edits
    // before the point, which have no effect.
    assert_eq!(
        (preview.calls.len(), &preview.ignored[..]),
        (0, &[0, 1][..])
    );
    let calls_before = tools.seen.lock().unwrap().len();
    let b = branch.point.vars()["b"].clone();
    let claimed = branch.start("r.b", no_warning).unwrap();
    let report = claimed.go(&host(&m, &tools), &mut ()).await;
    assert_eq!(
        report.final_answer,
        json!(format!("branched: {}", b.as_str().unwrap()))
    );
    assert_eq!(
        tools.seen.lock().unwrap().len(),
        calls_before,
        "nothing called"
    );

    // Read back: both runs, the branch naming its parent; one with its steps and calls.
    let store = at(&dir).open(plan_runs::open::Access::Read).unwrap();
    let runs = plan_runs::read::list(&*store).unwrap();
    let ids: Vec<(&str, Option<&str>)> = runs
        .iter()
        .map(|r| (r.id.as_str(), r.parent.as_deref()))
        .collect();
    assert_eq!(ids, [("r", None), ("r.b", Some("r"))]);
    let shown = plan_runs::read::show(&*store, "r").unwrap();
    assert_eq!(shown.run.status, RunStatus::Ok);
    assert_eq!(shown.calls.len(), 3);
    let vars = plan_runs::read::variables_at(&*store, "r", 3).unwrap();
    assert_eq!(vars["b"], b);
}

/// A process on another machine, whose liveness this one cannot check: only its lease
/// says whether it still runs.
fn elsewhere(n: u32) -> Owner {
    Owner(format!("elsewhere.invalid:{n}:1.x"))
}

#[test]
fn a_lease_renewed_holds_the_run_and_a_lapsed_one_frees_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = store(&dir);
    let m = manifest();
    let program = program(&m);
    let pbc = plan_bytecode::encode(&program);
    for (id, owner) in [("kept", elsewhere(1)), ("lapsed", elsewhere(2))] {
        let new = new_run(id, &pbc);
        store.create_run(&new, &owner).unwrap();
    }
    let busy = |id: &str| match plan_runs::resume(&at(&dir), ResumeRequest::new(id)) {
        Err(e) => e.kind == ErrorKind::Busy,
        Ok(_) => false,
    };
    assert!(busy("kept") && busy("lapsed"), "both leases are fresh");

    // NB: the store's clock is the wall clock: the lease lapses in real time.
    let lease = at(&dir).lease(elsewhere(1), no_warning);
    std::thread::sleep(Duration::from_millis(
        u64::try_from(plan_store::LEASE_MS).unwrap() + 500,
    ));
    assert!(busy("kept"), "a renewed lease still holds its run");
    assert!(!busy("lapsed"), "a lapsed lease frees its run");
    assert_eq!(store.run("lapsed").unwrap().status, RunStatus::Interrupted);
    drop(lease);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_resumed_reports_what_finished_and_goes_on_with_what_failed() {
    let dir = tempfile::tempdir().unwrap();
    let plans = dir.path().join("plans");
    std::fs::create_dir(&plans).unwrap();
    std::fs::write(plans.join("a.json"), PLAN).unwrap();
    std::fs::write(
        plans.join("b.json"),
        PLAN.replace(r#""query": "a""#, r#""query": "x""#),
    )
    .unwrap();
    let tools = Arc::new(Tools::default());
    // NB: b's note, whose text quotes its first search's query twice over.
    *tools.refuse.lock().unwrap() = Some(("post_note", r#"\\\"x\\\""#));
    let m = manifest();
    let batch = plan_runs::batch::Batch {
        manifest: m.clone(),
        host: Arc::new(host(&m, &tools)),
        host_options: HostOptions::default(),
        limits: Limits::default(),
        vars: Vec::new(),
        replay: None,
        record_dir: None,
        trace_dir: None,
        jobs: 4,
        telemetry: None,
    };
    let pass = |resume: bool| {
        let mut jobs = plan_runs::batch::scan_dir(&plans, false).unwrap();
        plan_runs::batch::name_runs(&mut jobs);
        let setup = plan_runs::batch::BatchStore {
            at: at(&dir),
            batch_id: "B".into(),
            resume,
            retry_unknown_writes: false,
        };
        (jobs, setup)
    };
    let run = |jobs, mut stored: plan_runs::batch::Stored| {
        let batch = &batch;
        async move {
            let mut lines = Vec::new();
            let tally = plan_runs::batch::run(batch, Some(&mut stored), jobs, &mut |e| {
                if let plan_runs::batch::Event::Finished(f) = e {
                    lines.push((f.run_id.unwrap().to_owned(), f.report.clone()));
                }
            })
            .await;
            stored.close();
            lines.sort_by(|x, y| x.0.cmp(&y.0));
            (tally, lines)
        }
    };

    let (jobs, setup) = pass(false);
    let stored = setup.open(&jobs, &[], no_warning).unwrap();
    let (tally, lines) = run(jobs, stored).await;
    assert_eq!((tally.runs, tally.ok), (2, 1));
    assert_eq!(lines[0].0, "B.a");
    assert!(lines[0].1.is_ok() && !lines[1].1.is_ok());
    let (jobs, setup) = pass(false);
    let e = setup.open(&jobs, &[], no_warning).err().unwrap();
    assert_eq!(e.kind, ErrorKind::DuplicateRun, "{e}");

    // Resumed: `a` is reported from the store and calls nothing; `b` goes on with its
    // note, its searches answered from the store.
    *tools.refuse.lock().unwrap() = None;
    let before = tools.seen.lock().unwrap().len();
    let (jobs, setup) = pass(true);
    let stored = setup.open(&jobs, &[], no_warning).unwrap();
    let (tally, again) = run(jobs, stored).await;
    assert_eq!((tally.runs, tally.ok), (2, 2));
    assert_eq!(again[0].1.final_answer, lines[0].1.final_answer);
    let made: Vec<String> = tools.seen.lock().unwrap()[before..].to_vec();
    assert_eq!(made.len(), 1, "{made:?}");
    assert!(made[0].starts_with("post_note("), "{made:?}");

    let (jobs, mut setup) = pass(true);
    setup.batch_id = "C".into();
    let e = setup.open(&jobs, &[], no_warning).err().unwrap();
    assert_eq!(e.kind, ErrorKind::UnknownRun, "nothing to resume: {e}");
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_run_ends_failed_and_its_process_stops_at_its_next_commit_point() {
    let dir = tempfile::tempdir().unwrap();
    let m = manifest();
    let program = program(&m);
    let pbc = plan_bytecode::encode(&program);
    let tools = Arc::new(Tools::default());
    let new = new_run("c", &pbc);
    // Held by this process, cancelled from another connection before it runs. (Its
    // lease thread must not warn: `no_warning` panics.)
    let mut held = plan_runs::Held::create(&at(&dir), &new, no_warning).unwrap();
    assert!(plan_runs::cancel(&at(&dir), "c").unwrap());
    let report = held
        .run(
            &host(&m, &tools),
            &program,
            (Vec::new(), Limits::default()),
            None,
            &mut (),
        )
        .await;
    let error = report.error.expect("the run stops");
    assert_eq!(
        error.code,
        plan_vm::ErrorCode::RecordFailed,
        "{}",
        error.message
    );
    assert!(error.message.contains("cancelled"), "{}", error.message);
    drop(held);
    let run = store(&dir).run("c").unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.error.unwrap()["code"], "R0013");

    // Resumed in this same process while its first run still waits: the first run's
    // commit points are refused from then on; the resumed one goes on.
    let Ok(plan_runs::Resume::Ready(ready)) = plan_runs::resume(&at(&dir), ResumeRequest::new("c"))
    else {
        panic!("a cancelled run can be resumed");
    };
    let claimed = ready.claim(no_warning).unwrap();
    let new = NewRun { id: "d", ..new };
    let mut first = plan_runs::Held::create(&at(&dir), &new, no_warning).unwrap();
    assert!(plan_runs::cancel(&at(&dir), "d").unwrap());
    let Ok(plan_runs::Resume::Ready(again)) = plan_runs::resume(&at(&dir), ResumeRequest::new("d"))
    else {
        panic!("d can be resumed");
    };
    let again = again.claim(no_warning).unwrap();
    let stale = first
        .run(
            &host(&m, &tools),
            &program,
            (Vec::new(), Limits::default()),
            None,
            &mut (),
        )
        .await;
    assert_eq!(stale.error.unwrap().code, plan_vm::ErrorCode::RecordFailed);
    drop(first);
    for c in [claimed, again] {
        let report = c.go(&host(&m, &tools), &mut ()).await;
        assert!(report.is_ok(), "{:?}", report.error);
    }

    // A resume that read a run before it was cancelled does not undo the cancel.
    let new = NewRun { id: "e", ..new };
    let mut e_run = plan_runs::Held::create(&at(&dir), &new, no_warning).unwrap();
    drop(e_run.journal(&program));
    drop(e_run);
    assert_eq!(store(&dir).run("e").unwrap().status, RunStatus::Interrupted);
    let Ok(plan_runs::Resume::Ready(read_before)) =
        plan_runs::resume(&at(&dir), ResumeRequest::new("e"))
    else {
        panic!("a run let go of is interrupted");
    };
    assert!(plan_runs::cancel(&at(&dir), "e").unwrap());
    let refused = read_before.claim(no_warning).err().unwrap();
    assert_eq!(refused.kind, ErrorKind::Busy, "{refused}");
    assert_eq!(
        store(&dir).run("e").unwrap().error.unwrap()["code"],
        "R0013"
    );

    // Finished: left as it was. Unknown: said so.
    assert!(!plan_runs::cancel(&at(&dir), "c").unwrap());
    let e = plan_runs::cancel(&at(&dir), "nope").err().unwrap();
    assert_eq!(e.kind, ErrorKind::UnknownRun);
}

/// A search, a question, a search with its answer.
const ASKS: &str = r#"[
 {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "a"}, "output_vars": ["a"]}},
 {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "ask_user", "tool_params": {"question": "Which?", "choices": ["EU", "US"]}, "output_vars": ["which"]}},
 {"seq_no": 2, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "${which}"}, "output_vars": ["final_answer"]}}
]"#;

/// Run `q` of [`ASKS`] in the store in `dir`, run to its question (its process gone
/// since): the store, and the run's report.
async fn asked(
    dir: &tempfile::TempDir,
    m: &Manifest,
    tools: &Arc<Tools>,
) -> (SqliteStore, plan_host::RunReport) {
    let opts = plan_compiler::CompileOptions {
        manifest: m.clone(),
        ..Default::default()
    };
    let program = plan_compiler::compile(ASKS, &opts).validate().unwrap();
    let pbc = plan_bytecode::encode(&program);
    let mut s = store(dir);
    s.create_run(&new_run("q", &pbc), &gone()).unwrap();
    let mut journal = StoreJournal::new(&mut s, "q", gone(), 0, &program);
    let report = plan_host::run_plan(
        &host(m, tools),
        &program,
        Vec::new(),
        Limits::default(),
        &mut journal,
    )
    .await;
    assert_eq!(report.status, plan_host::RunStatus::NeedsInput);
    (s, report)
}

#[tokio::test(start_paused = true)]
async fn an_answer_whose_process_died_before_it_was_on_record_is_taken_again() {
    let dir = tempfile::tempdir().unwrap();
    let tools = Arc::new(Tools::default());
    let m = manifest();
    let (s, report) = asked(&dir, &m, &tools).await;
    assert_eq!(report.question.unwrap().question, "Which?");
    assert_eq!(s.run("q").unwrap().status, RunStatus::NeedsInput);

    // Answered, claimed, and its process gone before the answer was on record: the run
    // reads as interrupted, its question unanswered.
    let Ok(plan_runs::Resume::Ready(ready)) = plan_runs::resume(&at(&dir), answered("q", "EU"))
    else {
        panic!("a waiting run takes an answer");
    };
    drop(ready.claim(no_warning).unwrap());
    assert_eq!(s.run("q").unwrap().status, RunStatus::Interrupted);
    let e = plan_runs::resume(&at(&dir), answered("q", "Asia"))
        .err()
        .unwrap();
    assert_eq!(e.kind, ErrorKind::BadInput, "{e}");
    assert!(e.message.contains("`EU`, `US`"), "{e}");

    let Ok(plan_runs::Resume::Ready(ready)) = plan_runs::resume(&at(&dir), answered("q", "US"))
    else {
        panic!("the question left unanswered takes the answer again");
    };
    let report = ready
        .claim(no_warning)
        .unwrap()
        .go(&host(&m, &tools), &mut ())
        .await;
    assert!(report.is_ok(), "{:?}", report.error);
    assert_eq!(
        *tools.seen.lock().unwrap(),
        [
            r#"vector_search({"query":"a","top_k":10})"#,
            r#"vector_search({"query":"US","top_k":10})"#
        ],
        "each call once"
    );
    // A finished run takes no answer.
    let e = plan_runs::resume(&at(&dir), answered("q", "EU"))
        .err()
        .unwrap();
    assert_eq!(e.kind, ErrorKind::NotWaiting, "{e}");
}

/// An answer given to a run of a host that is stopping (its service drains): the answer is
/// on record when the run stops at its next call (no call is sent), and the run goes on
/// from there later without asking again.
#[tokio::test(start_paused = true)]
async fn an_answer_given_while_the_host_drains_is_on_record_before_the_run_stops() {
    let dir = tempfile::tempdir().unwrap();
    let tools = Arc::new(Tools::default());
    let m = manifest();
    asked(&dir, &m, &tools).await;

    let Ok(plan_runs::Resume::Ready(ready)) = plan_runs::resume(&at(&dir), answered("q", "EU"))
    else {
        panic!("a waiting run takes an answer");
    };
    let draining = host(&m, &tools);
    draining.drain();
    let report = ready
        .claim(no_warning)
        .unwrap()
        .go(&draining, &mut ())
        .await;
    assert_eq!(report.status, plan_host::RunStatus::Stopped, "{report:?}");
    assert_eq!(
        tools.seen.lock().unwrap().len(),
        1,
        "no call sent while draining"
    );

    // Later, elsewhere: it goes on with the answer on record, asking nothing.
    let Ok(plan_runs::Resume::Ready(ready)) = plan_runs::resume(&at(&dir), ResumeRequest::new("q"))
    else {
        panic!("a stopped run goes on");
    };
    let report = ready
        .claim(no_warning)
        .unwrap()
        .go(&host(&m, &tools), &mut ())
        .await;
    assert!(report.is_ok(), "{:?}", report.error);
    assert_eq!(
        tools.seen.lock().unwrap().last().unwrap(),
        r#"vector_search({"query":"EU","top_k":10})"#
    );
}

/// Runs `PLAN` as stored run `id` in `dir`'s store (this process's, as `planvm run
/// --store` runs it) on `host`: its report.
async fn run_stored(dir: &tempfile::TempDir, id: &str, host: &Host) -> plan_host::RunReport {
    let tracer = &mut plan_host::Tracer::none();
    common::start_plan(host, PLAN, (Some(&at(dir)), id), tracer).await
}

/// Resumes stored run `id` (sending again the writes in flight if `retry`): its report, or
/// why it was refused.
async fn resumed(
    dir: &tempfile::TempDir,
    id: &str,
    retry: bool,
    host: &Host,
) -> Result<plan_host::RunReport, plan_runs::Error> {
    let request = ResumeRequest {
        retry_unknown_writes: retry,
        ..ResumeRequest::new(id)
    };
    match plan_runs::resume(&at(dir), request)? {
        plan_runs::Resume::Ready(ready) => Ok(ready.claim(no_warning)?.go(host, &mut ()).await),
        plan_runs::Resume::Finished(report) => Ok(*report),
    }
}

#[tokio::test(start_paused = true)]
async fn a_failed_run_goes_on_from_its_failed_step_once_its_backend_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let tools = Arc::new(Tools::default());
    let host = host(&manifest(), &tools);
    // The second search is refused: the run fails there.
    *tools.refuse.lock().unwrap() = Some(("vector_search", " b"));
    let failed = run_stored(&dir, "f", &host).await;
    assert_eq!(failed.status, plan_host::RunStatus::Failed);
    assert_eq!(failed.error.as_ref().unwrap().seq_no, Some(1));
    let before = tools.seen.lock().unwrap().len();

    // Back: the stored search is not asked again; the failed step and the rest are.
    *tools.refuse.lock().unwrap() = None;
    let report = resumed(&dir, "f", false, &host).await.unwrap();
    assert!(report.is_ok(), "{:?}", report.error);
    let after = tools.seen.lock().unwrap()[before..].to_vec();
    let tools_of: Vec<&str> = after.iter().map(|c| &c[..c.find('(').unwrap()]).collect();
    assert_eq!(tools_of, ["vector_search", "post_note"], "{after:?}");
    assert_eq!(report.tool_calls, 3, "the whole run's calls");
    let store = at(&dir).open(plan_runs::open::Access::Read).unwrap();
    let row = plan_runs::read::show(&*store, "f").unwrap().run;
    assert_eq!((row.status, row.tool_calls), (RunStatus::Ok, 3));
}

/// Answers after a minute: a call given less than that times out, its outcome unknown.
struct Slow;

impl Backend for Slow {
    fn call<'a>(&'a self, req: &'a ToolRequest) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(json!(format!("{}(slow)", req.tool)))
        })
    }

    fn describe(&self) -> String {
        "a slow tool".into()
    }
}

#[tokio::test(start_paused = true)]
async fn a_write_call_that_timed_out_is_unknown_and_sent_again_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let tools = Arc::new(Tools::default());
    let m = manifest();
    let opts = HostOptions {
        tool_timeout: Some(Duration::from_secs(1)),
        ..HostOptions::default()
    };
    let slow_notes = Host::new(m.clone(), opts).unwrap();
    slow_notes.set_backend("vector_search", Arc::new(Tool(tools.clone())));
    slow_notes.set_backend("post_note", Arc::new(Slow));
    let failed = run_stored(&dir, "t", &slow_notes).await;
    let error = failed.error.expect("the note times out");
    assert!(error.message.contains("timed out"), "{}", error.message);

    // The server may have acted on it: not sent again unasked.
    let host = host(&m, &tools);
    let before = tools.seen.lock().unwrap().len();
    let e = resumed(&dir, "t", false, &host).await.err().unwrap();
    assert_eq!(e.kind, ErrorKind::UnknownWrites, "{e}");
    assert!(e.message.contains("`post_note` (seq_no 2)"), "{e}");
    assert_eq!(
        tools.seen.lock().unwrap().len(),
        before,
        "refused without sending"
    );
    let report = resumed(&dir, "t", true, &host).await.unwrap();
    assert!(report.is_ok(), "{:?}", report.error);
    let sent = tools.seen.lock().unwrap()[before..].to_vec();
    assert!(
        sent.len() == 1 && sent[0].starts_with("post_note("),
        "{sent:?}"
    );
}

/// Run `id` to go on with `input`, the answer to its question.
fn answered<'a>(id: &'a str, input: &'a str) -> ResumeRequest<'a> {
    ResumeRequest {
        input: Some(input),
        ..ResumeRequest::new(id)
    }
}
