//! Cancelling a stored run: it ends as failed with `R0013`, and is no longer any
//! process's, so a process running it stops at its next commit point (the store refuses
//! it, which fails its run there; calls already out are not waited for). Cancelling a
//! goal ends it failed with `R0013` and cancels its run still going; the process asking
//! it starts no run after that (see `ask`).

use plan_host::ReportError;
use plan_vm::ErrorCode;

use crate::Error;
use crate::open::{Access, StoreAt};

/// Cancels run (or goal) `id` of the store at `at`. `false`: it had finished, and is
/// left as it was.
pub fn cancel(at: &StoreAt, id: &str) -> Result<bool, Error> {
    let mut store = at.open(Access::Existing)?;
    let error = ReportError {
        code: ErrorCode::Cancelled,
        message: "the run was cancelled".into(),
        seq_no: None,
        line: None,
    };
    let error = serde_json::to_value(&error)
        .map_err(|e| Error::new(crate::ErrorKind::Io, e.to_string()))?;
    if store.goal(id)?.is_none() {
        let cancelled = store.cancel(id, &error)?;
        // NB: a goal waiting with its run ends with it (no other process holds it).
        if cancelled
            && let Some(goal) = crate::ask::goal_of_run(&*store, id)?
            && goal.status == plan_store::GoalStatus::NeedsInput
        {
            store.end_goal(&goal.id, None, Err(&goal_cancelled(&error)))?;
        }
        return Ok(cancelled);
    }
    let ended = store.end_goal(id, None, Err(&goal_cancelled(&error)))?;
    // NB: at most its last run is still going.
    let mut cancelled = ended;
    for run in crate::ask::goal_runs(&*store, id)? {
        cancelled |= store.cancel(&run.id, &error)?;
    }
    Ok(cancelled)
}

/// Deletes from the store at `at` the runs that ended more than `older_than` ago (see
/// [`plan_store::RunStore::prune`]); how many went.
pub fn prune(
    at: &StoreAt,
    older_than: std::time::Duration,
    keep_failed: bool,
) -> Result<u64, Error> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let before = now.saturating_sub(older_than).as_millis();
    let before = i64::try_from(before).unwrap_or(i64::MAX);
    Ok(at.open(Access::Existing)?.prune(before, keep_failed)?)
}

/// A cancelled goal's error, `{code, message}`.
fn goal_cancelled(run_error: &serde_json::Value) -> serde_json::Value {
    serde_json::json!({"code": run_error["code"], "message": "the goal was cancelled"})
}
