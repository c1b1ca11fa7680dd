//! Reading runs to show them: the list, one run with its steps and calls, its variables
//! at a point. What was read is checked to be of one state of the store before it is
//! returned (a store read as it is, that a process wrote meanwhile, fails instead).

use plan_store::{CallRow, RunInfo, RunStore, StepRow, StoreError};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::Error;

/// A run with its committed steps and its calls (`planvm runs show --format json`).
#[derive(Clone, Debug, Serialize)]
pub struct Shown {
    pub run: RunInfo,
    pub steps: Vec<StepRow>,
    pub calls: Vec<CallRow>,
}

/// `what`, once `store` is known to have been read in one state; else why not.
fn checked<T>(store: &dyn RunStore, what: Result<T, StoreError>) -> Result<T, Error> {
    match (what, store.unchanged()) {
        (_, Err(e)) | (Err(e), Ok(())) => Err(e.into()),
        (Ok(x), Ok(())) => Ok(x),
    }
}

/// The source text of `run`'s plan (None for a run of a `.pbc` file, or unreadable).
pub fn source(store: &dyn RunStore, run: &RunInfo) -> Option<String> {
    store.program(&run.program).ok().and_then(|p| p.source)
}

/// Every run, oldest first.
pub fn list(store: &dyn RunStore) -> Result<Vec<RunInfo>, Error> {
    checked(store, store.runs())
}

/// Run `id` with its steps and calls.
pub fn show(store: &dyn RunStore, id: &str) -> Result<Shown, Error> {
    let read = || {
        Ok(Shown {
            run: store.run(id)?,
            steps: store.steps(id)?,
            calls: store.calls(id)?,
        })
    };
    checked(store, read())
}

/// Every variable of run `id` just before it first executed `seq_no`.
pub fn variables_at(
    store: &dyn RunStore,
    id: &str,
    seq_no: i64,
) -> Result<Map<String, Value>, Error> {
    let run = checked(store, store.run(id))?;
    let vars = crate::variables_before(store, &run, seq_no);
    // NB: a read that mixed two states would look like damage: say which it is.
    store.unchanged()?;
    vars
}
