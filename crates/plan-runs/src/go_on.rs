//! A stored run going on: journaled in its store commit point by commit point, as a
//! resumed run or a new branch.

use plan_bytecode::ValidatedProgram;
use plan_host::{CassetteEntry, Host, Journal, RunReport};
use plan_store::{Owner, RunStore, StoreJournal};
use plan_vm::{Limits, VmState};

/// A stored run about to go on.
pub struct GoOn<'a> {
    pub id: &'a str,
    /// Instructions its saved state had committed.
    pub steps_done: u64,
    pub program: &'a ValidatedProgram,
    pub state: VmState,
    /// Answers it has already: the calls they answer are not sent again.
    pub known: Vec<CassetteEntry>,
    /// The answer to the question it stopped at, if it is going on with one.
    pub input: Option<plan_host::PersonsAnswer>,
    pub limits: Limits,
}

/// Runs `run` to its end on `host`, journaled in `store` as `owner`'s (the caller has
/// claimed or created it, and holds its lease), each event also to `also` (a trace);
/// returns its report, counting the calls of the whole run, not only of this part.
pub async fn go_on(
    store: &mut dyn RunStore,
    owner: Owner,
    run: GoOn<'_>,
    host: &Host,
    also: &mut dyn Journal,
) -> RunReport {
    let mut report = {
        // NB: a resumed run may commit again calls its earlier process committed: the
        // store counts them at the end (a new branch has no earlier calls; counting its
        // own costs one query).
        let journal =
            StoreJournal::new(&mut *store, run.id, owner, run.steps_done, run.program).continued();
        let mut journal = (also, journal);
        plan_host::resume_plan_answering(
            host,
            run.program,
            run.state,
            (run.known, run.input),
            run.limits,
            &mut journal,
        )
        .await
    };
    if let Ok(r) = store.run(run.id) {
        report.tool_calls = r.tool_calls;
    }
    report
}
