//! Cancelling a stored run: it ends as failed with `R0013`, and is no longer any
//! process's, so a process running it stops at its next commit point (the store refuses
//! it, which fails its run there; calls already out are not waited for).

use plan_host::ReportError;
use plan_vm::ErrorCode;

use crate::Error;
use crate::open::{Access, StoreAt};

/// Cancels run `id` of the store at `at`. `false`: it had finished, and is left as it was.
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
    Ok(store.cancel(id, &error)?)
}
