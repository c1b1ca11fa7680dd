//! Many runs of one process through one writer thread of a store (a service's runs): the
//! writer creates them and writes their commit points in group transactions, as `batch
//! --store` does, so that a run costs no connection, no thread and no transaction of its
//! own. The runs are held by this process (one lease for all of them), and read as
//! interrupted once it is gone.

use plan_bytecode::ValidatedProgram;
use plan_host::{Deadline, Host, Journal, RunReport};
use plan_store::{GroupStore, OnWritten, OwnedNewRun, Owner, StoreJournal};
use plan_vm::Limits;
use serde_json::Value;

use crate::open::Access;
use crate::{Error, ErrorKind, Lease, StoreAt};

/// A store's writer thread, and this process's lease on the runs written through it. The
/// thread is joined when this is dropped (after every run through it): the last
/// connection to close copies the WAL back into the database file.
pub struct Writer {
    group: Option<GroupStore>,
    owner: Owner,
    _lease: Lease,
}

impl Writer {
    /// The writer of the store at `at` (created if missing). `warn` hears about a lease
    /// that cannot be renewed.
    pub fn start(at: &StoreAt, warn: fn(&Error)) -> Result<Writer, Error> {
        let store = at.open(Access::Create)?;
        let owner = Owner::this_process();
        Ok(Writer {
            group: Some(GroupStore::spawn(store)),
            _lease: at.lease(owner.clone(), warn),
            owner,
        })
    }

    fn group(&self) -> &GroupStore {
        // NB: taken only when dropped.
        self.group.as_ref().expect("the writer is open")
    }

    /// Creates run `new` (held by this process); resolves once it is in the store.
    pub async fn create(&self, new: OwnedNewRun) -> Result<(), Error> {
        plan_store::check_run_id(&new.id)
            .map_err(|e| Error::new(ErrorKind::BadRunId, format!("run id `{}`: {e}", new.id)))?;
        Ok(self.group().create(new, self.owner.clone()).await?)
    }

    /// Runs created run `id` from its start, each event also to `also`, by `within` if
    /// given; `on_written` hears each commit point once it is in the store. Resolves once
    /// the run's end is in the store (a run that could not be stored fails with the
    /// record error).
    pub async fn run(
        &self,
        id: &str,
        (host, program): (&Host, &ValidatedProgram),
        (presets, limits): (Vec<(String, Value)>, Limits),
        within: Option<Deadline>,
        (also, on_written): (&mut dyn Journal, Option<OnWritten>),
    ) -> RunReport {
        let owner = self.owner.clone();
        let journal =
            StoreJournal::grouped(self.group().clone(), (id, owner), 0, program, on_written);
        let mut journal = (also, journal);
        let mut report = plan_host::run_plan_reusing(
            host,
            program,
            presets,
            Vec::new(),
            limits,
            &mut journal,
            within,
        )
        .await;
        wait_written(&mut journal.1, &mut report).await;
        report
    }
}

/// Waits until every point `journal` was given is in the store; `report` failed (its run
/// could not be stored) when one was not. True when they all are.
pub(crate) async fn wait_written(journal: &mut StoreJournal<'_>, report: &mut RunReport) -> bool {
    let written = match journal.written() {
        Some(wait) => wait.await,
        None => Ok(()),
    };
    match written {
        Ok(()) => true,
        Err(message) => {
            record_failed(report, message);
            false
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if let Some(group) = self.group.take() {
            group.close();
        }
    }
}

/// `report`, failed because its run could not be stored.
pub(crate) fn record_failed(report: &mut RunReport, message: String) {
    report.status = plan_host::RunStatus::Failed;
    report.error = Some(plan_host::ReportError {
        code: plan_vm::ErrorCode::RecordFailed,
        message,
        seq_no: None,
        line: None,
    });
}
