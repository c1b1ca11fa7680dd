//! Taking a stored run up again: what it goes on from, and the checks that come first.
//! A finished run is reported from its row and calls nothing; a run a live process holds
//! is refused; a run that stopped with a `write` call in flight is refused unless the
//! caller says to send it again; everything read is checked (a program that does not
//! load, a saved state that does not fit it or says the run ended, is damage) before
//! anything is claimed or called, so a refusal leaves the store as it was. A run waiting
//! for a person goes on only with their answer, which must answer its question.

use plan_bytecode::ValidatedProgram;
use plan_host::{Question, ReportError, RunReport, RunStatus as ReportStatus};
use plan_store::{CallRow, CallState, RunInfo, RunStatus, RunStore, Seen};
use plan_vm::{Limits, VmState};
use serde_json::Value;

use crate::{Error, ErrorKind};

/// What taking up a stored run found.
pub enum Taken {
    /// It finished: its stored report (nothing runs).
    Finished(Box<RunReport>),
    /// It goes on, once the caller claims it with `seen` (after its own checks, so that
    /// a refusal leaves the store as it was).
    Going(Box<Going>),
}

/// Where a stored run goes on from, and what it goes on with.
pub struct Going {
    pub program: ValidatedProgram,
    /// What the run was when read: the claim checks it is still so.
    pub seen: Seen,
    pub calls: Vec<CallRow>,
    /// Instructions the saved state had committed.
    pub steps_done: u64,
    pub state: VmState,
    /// The answer to the question the run stopped at, if it was waiting for one.
    pub input: Option<plan_host::PersonsAnswer>,
}

/// Reads what going on with stored `run` under `limits` needs, with the checks above.
/// `input`: the answer to the question the run is waiting for (refused when it waits for
/// none; without one, a waiting run is reported as it stands, nothing run).
pub fn take_up(
    store: &dyn RunStore,
    run: &RunInfo,
    limits: &Limits,
    retry_unknown_writes: bool,
    input: Option<&str>,
) -> Result<Taken, Error> {
    match (run.status, input) {
        // NB: before anything else: what it has in flight is not unknown, it is live.
        (RunStatus::Running, _) => return Err(Error::new(ErrorKind::Busy, held_elsewhere(run))),
        (RunStatus::NeedsInput | RunStatus::Ok, None) => {
            return Ok(Taken::Finished(Box::new(stored_report(run))));
        }
        (RunStatus::Ok | RunStatus::Failed, Some(_)) => return Err(not_waiting(run)),
        _ => {}
    }
    let (program, head, calls) = read_run(store, run)?;
    let input = match input {
        None => None,
        Some(text) => {
            let question = match run.status {
                RunStatus::NeedsInput => question_of(run),
                // NB: answered, then cut short before the answer was on record: the
                // question is the call of a person's tool it left unanswered.
                _ => unanswered_question(&program, &calls),
            };
            let question = question.ok_or_else(|| not_waiting(run))?;
            Some(plan_host::PersonsAnswer {
                answer: answer(run, &question, text)?,
                asked_at: asked_at(&program, &calls),
            })
        }
    };
    let seen = Seen {
        journal_head: head,
        updated_at: Some(run.updated_at),
    };
    if !retry_unknown_writes && let Some(why) = unknown_writes(run, &program, &calls) {
        return Err(Error::new(ErrorKind::UnknownWrites, why));
    }
    let (steps_done, state) = saved_state(store, run, &program, limits)?;
    Ok(Taken::Going(Box::new(Going {
        program,
        seen,
        calls,
        steps_done,
        state,
        input,
    })))
}

/// The question waiting run `run` asks.
pub fn question_of(run: &RunInfo) -> Option<Question> {
    run.question
        .as_ref()
        .and_then(|q| serde_json::from_value(q.clone()).ok())
}

/// When the last call of a `human` tool of `program` was sent: the question a run waits on.
fn asked_at(program: &ValidatedProgram, calls: &[CallRow]) -> Option<std::time::SystemTime> {
    let ms = calls
        .iter()
        .rev()
        .find(|c| asks_a_person(program, c))?
        .sent_at?;
    std::time::UNIX_EPOCH.checked_add(std::time::Duration::from_millis(u64::try_from(ms).ok()?))
}

/// Whether `call` is of a `human` tool of `program`.
fn asks_a_person(program: &ValidatedProgram, call: &CallRow) -> bool {
    program
        .tools
        .iter()
        .any(|t| t.name == call.tool && t.effects == plan_bytecode::Effects::Human)
}

/// The question of the call of a `human` tool of `program` that `calls` leave unanswered.
fn unanswered_question(program: &ValidatedProgram, calls: &[CallRow]) -> Option<Question> {
    calls
        .iter()
        .filter(|c| c.state == CallState::Inflight)
        .find(|c| asks_a_person(program, c))
        .map(|c| Question::from_args(|name| c.args.get(name), c.seq_no))
}

fn not_waiting(run: &RunInfo) -> Error {
    Error::new(
        ErrorKind::NotWaiting,
        format!(
            "run `{}` is not waiting for input (it is {}): an answer is taken only by a run that stopped at a question",
            run.id,
            run.status.as_str()
        ),
    )
}

/// `text` as the answer to `question`, the one run `run` waits on, checked.
fn answer(run: &RunInfo, question: &Question, text: &str) -> Result<Value, Error> {
    match question.refuses(text) {
        Some(why) => Err(Error::new(
            ErrorKind::BadInput,
            format!("run `{}` asks \"{}\": {why}", run.id, question.question),
        )),
        None => Ok(Value::String(text.to_owned())),
    }
}

/// A stored run's program, its journal's last entry, and its calls.
pub type RunParts = (ValidatedProgram, Option<i64>, Vec<CallRow>);

/// What going on with stored `run` needs: its program, its journal's last entry, and its
/// calls, read in that order (a claim with that entry fails if the run moved on since).
pub fn read_run(store: &dyn RunStore, run: &RunInfo) -> Result<RunParts, Error> {
    let program = stored_program(store, run)?;
    let seen = store.journal_head(&run.id)?;
    let calls = store.calls(&run.id)?;
    Ok((program, seen, calls))
}

/// The program `run` runs, from its store.
pub fn stored_program(store: &dyn RunStore, run: &RunInfo) -> Result<ValidatedProgram, Error> {
    let stored = store.program(&run.program)?;
    // NB: bytes from a file: validated like any .pbc.
    plan_bytecode::load(&stored.pbc).map_err(|e| {
        Error::damaged(
            store.name(),
            &run.id,
            &format!("its stored program cannot be loaded ({e})"),
        )
    })
}

/// A finished run's report, from its row (nothing runs).
pub fn stored_report(run: &RunInfo) -> RunReport {
    let error = run
        .error
        .as_ref()
        .and_then(|e| serde_json::from_value::<ReportError>(e.clone()).ok());
    RunReport {
        status: match run.status {
            RunStatus::Ok => ReportStatus::Ok,
            RunStatus::NeedsInput => ReportStatus::NeedsInput,
            _ => ReportStatus::Failed,
        },
        question: question_of(run).filter(|_| run.status == RunStatus::NeedsInput),
        final_answer: run.final_answer.clone().unwrap_or(Value::Null),
        error,
        steps: run.steps,
        tool_calls: run.tool_calls,
        usage: run.usage,
        elapsed_ms: 0,
        vars: Default::default(),
    }
}

/// Why `run` (status `running`) cannot be taken up now.
pub fn held_elsewhere(run: &RunInfo) -> String {
    let holder = run.owner.as_deref().unwrap_or("?");
    let who = if plan_store::Owner(holder.to_owned()).is_this_process() {
        "this process"
    } else {
        "another process"
    };
    format!(
        "run `{}` is being run by {who} ({holder}); wait for it to end",
        run.id
    )
}

/// Why `run` must not go on unasked: the `write` calls of its program it left in flight
/// (they may or may not have taken effect). None when there are none.
pub fn unknown_writes(
    run: &RunInfo,
    program: &ValidatedProgram,
    calls: &[CallRow],
) -> Option<String> {
    let unknown: Vec<String> = calls
        .iter()
        .filter(|c| c.state == CallState::Inflight)
        // NB: the effects compiled into the run's own program, whatever the tools file
        // says now.
        .filter(|c| {
            program
                .tools
                .iter()
                .any(|t| t.name == c.tool && t.effects == plan_bytecode::Effects::Write)
        })
        .map(|c| match c.seq_no {
            Some(s) => format!("`{}` (seq_no {s})", c.tool),
            None => format!("`{}`", c.tool),
        })
        .collect();
    (!unknown.is_empty()).then(|| {
        format!(
            "run `{}` stopped while the write call {} was in flight: it may or may not have taken effect. \
             Check, then resume with --retry-unknown-writes to send it again",
            run.id,
            unknown.join(", ")
        )
    })
}

/// Where a stored run goes on from: its last saved state and the instructions it had
/// committed, or, stopped before its first commit point, its start (its saved answers
/// still count).
pub fn saved_state(
    store: &dyn RunStore,
    run: &RunInfo,
    program: &ValidatedProgram,
    limits: &Limits,
) -> Result<(u64, VmState), Error> {
    let damaged = |why: String| Error::damaged(store.name(), &run.id, &why);
    let Some((steps, json)) = store.checkpoint(&run.id)? else {
        return plan_store::replay::fresh_state(program, &run.presets, limits, run.branch_seq)
            .map(|state| (0, state))
            .map_err(|e| {
                damaged(format!(
                    "its start cannot be made from its stored presets ({e})"
                ))
            });
    };
    let state = serde_json::from_str::<VmState>(&json)
        .map_err(|e| damaged(format!("its saved state cannot be read ({e})")))?;
    // NB: checked here, before the run is claimed or anything is called: a state that
    // does not fit would fail the run as the VM's own error, and one marked done would
    // end it with no answer.
    let vm = plan_vm::Vm::from_state(program, state, limits.clone()).map_err(|e| {
        damaged(format!(
            "its saved state does not fit its program ({})",
            e.message
        ))
    })?;
    if !matches!(vm.state().status(), plan_vm::Status::Running) {
        return Err(damaged(
            "its saved state says the run ended, which only its row may say".into(),
        ));
    }
    Ok((steps, vm.into_state()))
}
