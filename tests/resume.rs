//! Resuming a run from a saved commit point (`plan_host::resume_plan`): the run is cut at
//! every event of a full run in turn (the journal fails there, as a crash would), the
//! last saved state goes through JSON as a store would keep it, and the resumed run must
//! give the same answer without sending again any call whose answer was saved (including
//! answers that arrived after the last saved state).

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{CallKey, Saving};
use plan_bytecode::ValidatedProgram;
use plan_host::{Host, HostOptions, resume_plan, run_plan};
use plan_manifest::Manifest;
use plan_vm::{ErrorCode, Limits, VmState};

fn program() -> ValidatedProgram {
    let src = std::fs::read_to_string("examples/tidb_overview.json").unwrap();
    let compiled = plan_compiler::compile(&src, &plan_compiler::CompileOptions::default());
    plan_bytecode::validate(compiled.program.expect("example compiles")).unwrap()
}

fn host() -> Host {
    let opts = HostOptions {
        replay: Some(Path::new("examples/tidb_overview.cassette.jsonl").into()),
        ..HostOptions::default()
    };
    Host::new(Manifest::builtin(), opts).unwrap()
}

fn limits(max_concurrency: u32) -> Limits {
    Limits {
        max_concurrency,
        ..Limits::default()
    }
}

#[tokio::test(start_paused = true)]
async fn a_run_cut_at_any_event_resumes_to_the_same_answer_without_repeating_saved_calls() {
    let program = program();
    let host = host();
    // How many resumes had saved answers to reuse, and how many asked for calls again:
    // both must happen, or the test proves nothing.
    let (mut reused, mut reissued, mut answered_from_store) = (0, 0, 0);
    for conc in [1, 16] {
        let mut full = Saving::default();
        let want = run_plan(&host, &program, vec![], limits(conc), &mut full).await;
        assert!(want.is_ok(), "{:?}", want.error);
        let total_events = full.events;
        assert!(total_events > 10, "{total_events}");

        for cut in 1..=total_events {
            let ctx = format!("concurrency {conc}, cut at event {cut}");
            let mut first = Saving {
                crash_at: Some(cut),
                ..Saving::default()
            };
            let cut_run = run_plan(&host, &program, vec![], limits(conc), &mut first).await;
            assert_eq!(
                cut_run.error.as_ref().map(|e| e.code),
                Some(ErrorCode::RecordFailed),
                "{ctx}"
            );
            let Some(saved) = &first.state else {
                // Cut before the first commit point: there is nothing to resume from.
                continue;
            };
            let state: VmState = serde_json::from_str(saved).unwrap();
            let known: BTreeSet<CallKey> = first
                .answers
                .iter()
                .map(|e| {
                    let args = serde_json::to_string(&e.args).unwrap();
                    (e.tool.clone(), args, e.step.unwrap())
                })
                .collect();

            let mut second = Saving::default();
            let answers = first.answers.clone();
            let resumed =
                resume_plan(&host, &program, state, answers, limits(conc), &mut second).await;
            assert!(resumed.is_ok(), "{ctx}: {:?}", resumed.error);
            assert_eq!(resumed.final_answer, want.final_answer, "{ctx}");
            assert_eq!(resumed.steps, want.steps, "{ctx}");
            for call in &second.sent {
                assert!(!known.contains(call), "{ctx}: asked again for {call:?}");
            }
            reused += usize::from(!known.is_empty());
            reissued += usize::from(!second.sent.is_empty());
            answered_from_store += second.reused;
        }
    }
    assert!(
        reused > 0 && reissued > 0 && answered_from_store > 0,
        "{reused} {reissued} {answered_from_store}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_state_of_another_program_is_refused() {
    let program = program();
    let host = host();
    let mut first = Saving {
        crash_at: Some(4),
        ..Saving::default()
    };
    run_plan(&host, &program, vec![], limits(16), &mut first).await;
    let state: VmState = serde_json::from_str(first.state.as_ref().unwrap()).unwrap();

    let src = r#"[{"seq_no": 0, "type": "assign", "parameters": {"final_answer": "x"}}]"#;
    let other = plan_compiler::compile(src, &plan_compiler::CompileOptions::default());
    let other = plan_bytecode::validate(other.program.unwrap()).unwrap();
    let report = resume_plan(&host, &other, state, vec![], limits(16), &mut ()).await;
    let err = report.error.expect("refused");
    assert_eq!(err.code, ErrorCode::BadState);
    assert!(
        err.message.contains("belongs to another program"),
        "{}",
        err.message
    );
    assert_eq!(report.tool_calls, 0);
}
