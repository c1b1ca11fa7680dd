//! Batches: many runs in one process, concurrently, sharing one `Host` (its HTTP client,
//! connection pools and per-tool concurrency limits), each run reported as it ends.
//!
//! Input is a directory (every `*.json`, `*.txt`, `*.pbc` in it, sorted by name, each
//! with the cassette beside it if there is one) or a list file (one run per line:
//! `PLAN [CASSETTE] [NAME=VALUE]...`): `list`. A batch's runs may be journaled in a store
//! under `<batch id>.<run name>` and a batch stopped mid-way continued from it
//! (`--resume`): `ids`, [`BatchStore`]. The scheduler is `drive`; what a face asks for,
//! set up, is `request` ([`BatchRequest`]).
//!
//! Why the pieces are shaped this way:
//! - Plans and cassettes are loaded once per path (a list of 10,000 lines naming one plan
//!   compiles it once), lazily, and dropped after their last run: memory follows the
//!   distinct inputs in flight, not the length of the list.
//! - A replay cassette's cursors ("entries with the same key are served in recorded
//!   order") are per run: every run gets `ReplayBackend::fresh` over the shared parse,
//!   behind a small per-run `Host`, so no run's answers depend on another's. Runs without
//!   a cassette use the one shared network `Host`.
//! - Runs are tokio tasks on a multi-threaded runtime; [`Batch::jobs`] bounds how many
//!   are in flight. Loading happens on the driving task while the workers run the VMs.

mod drive;
mod ids;
mod lines;
mod list;
mod request;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use plan_host::{Host, HostOptions, ReplayBackend, RunReport};
use plan_manifest::Manifest;
use plan_store::{GroupStore, Owner, RunStatus};
use plan_vm::Limits;
use serde_json::Value;

pub use drive::Tally;
pub use lines::Lines;
pub use list::{Job, name_runs, parse_var, read_list, scan_dir};
pub use request::{BatchInput, BatchRequest, Prepared};

use crate::open::Access;
use crate::{Error, ErrorKind, Lease, StoreAt};

/// What every run of a batch shares.
pub struct Batch {
    /// The tools file's manifest: plans compile against it.
    pub manifest: Manifest,
    /// Serves the runs that have no cassette.
    pub host: Arc<Host>,
    /// The options of the per-run hosts of runs that replay a cassette.
    pub host_options: HostOptions,
    pub limits: Limits,
    /// Preset in every run; a list line's own pairs win.
    pub vars: Vec<(String, Value)>,
    /// Serves every run that has no cassette of its own (each replays it from its start),
    /// with the path it was loaded from.
    pub replay: Option<(PathBuf, Arc<ReplayBackend>)>,
    /// Each run's cassette goes to `DIR/<run>.cassette.jsonl`.
    pub record_dir: Option<PathBuf>,
    /// Each run's trace goes to `DIR/<run>.trace.jsonl`.
    pub trace_dir: Option<PathBuf>,
    /// Runs in flight at once.
    pub jobs: usize,
    /// Exports each run as a trace of its own (`invoke_workflow batch`), when set.
    pub telemetry: Option<Arc<plan_telemetry::Telemetry>>,
}

/// What a batch tells its caller as it goes.
pub enum Event<'a> {
    /// A run ended, or could not start: its line of the batch's output.
    Finished(Finished<'a>),
    /// A plan that does not load, with its diagnostics (once per plan; its warnings
    /// alone are not told, which across thousands of plans would bury the errors).
    Invalid(&'a crate::load::Invalid),
    /// A cassette's warning (once per cassette).
    Warning(&'a str),
}

/// A run of the batch that ended.
pub struct Finished<'a> {
    pub plan: &'a Path,
    /// Its line in the list file.
    pub line: Option<usize>,
    /// Its id in the store.
    pub run_id: Option<&'a str>,
    pub report: &'a RunReport,
}

/// Where a batch's runs are journaled.
pub struct BatchStore {
    pub at: StoreAt,
    /// The batch's id, the first part of its runs' ids.
    pub batch_id: String,
    /// Continue the batch: a run it finished is reported from the store and calls
    /// nothing; one it left interrupted or failed goes on from its last commit point; one
    /// it never started runs now.
    pub resume: bool,
    /// With `resume`: send again the `write` calls that were in flight when the batch
    /// stopped (else such a run is reported failed).
    pub retry_unknown_writes: bool,
}

/// A store ready for a batch: every run's id chosen, the checks done, the writer thread
/// and the lease running. [`Stored::close`] it once the runs' tasks are gone.
pub struct Stored {
    ctx: drive::StoreCtx,
    _lease: Lease,
}

impl BatchStore {
    /// Opens the store and chooses each run's id, refusing up front what would fail only
    /// at a run's end: an id the store holds already (unless resuming), a batch to resume
    /// that the store does not hold, or one a live process still runs.
    pub fn open(
        &self,
        jobs: &[Job],
        vars: &[(String, Value)],
        warn: fn(&Error),
    ) -> Result<Stored, Error> {
        let mut store = self.at.open(Access::Create)?;
        let batch = &self.batch_id;
        let mut ids = ids::run_ids(batch, jobs);
        if self.resume {
            // NB: a list edited since (a comment added at its top) moves every line.
            let runs = store.runs_under(&format!("{batch}."))?;
            ids::pair_by_content(&mut ids, batch, jobs, vars, &runs);
        }
        let shown = self.at.shown();
        let wanted: Vec<&str> = ids.values().map(String::as_str).collect();
        match store.first_taken(&wanted)?.map(|i| wanted[i]) {
            Some(_) if self.resume => {}
            None if self.resume => {
                return Err(Error::new(
                    ErrorKind::UnknownRun,
                    format!(
                        "no run of batch `{batch}` in {shown}: nothing to resume (a batch \
                         prints its id, `batch ID`, when it starts)"
                    ),
                ));
            }
            None => {}
            Some(id) => {
                return Err(Error::new(
                    ErrorKind::DuplicateRun,
                    format!(
                        "run `{id}` already exists in {shown}: choose another --batch-id, or \
                         continue that batch with --resume"
                    ),
                ));
            }
        }
        // NB: a connection of its own, to read and take each stored run as its turn
        // comes, while the writer thread has the other.
        let resume = if self.resume {
            let store = self.at.open(Access::Create)?;
            // NB: a batch still going would create the runs this one starts, and fail
            // them at its end: refused as a whole, before anything runs.
            if let Some(run) = ids
                .values()
                .filter_map(|id| store.run(id).ok())
                .find(|run| run.status == RunStatus::Running)
            {
                return Err(Error::new(
                    ErrorKind::Busy,
                    format!(
                        "batch `{batch}` is still being run: {}",
                        crate::held_elsewhere(&run)
                    ),
                ));
            }
            Some(drive::Resume {
                store,
                retry_unknown_writes: self.retry_unknown_writes,
            })
        } else {
            None
        };
        let owner = Owner::this_process();
        let lease = self.at.lease(owner.clone(), warn);
        Ok(Stored {
            ctx: drive::StoreCtx {
                store: GroupStore::spawn(store),
                ids,
                owner,
                resume,
                files: self.at.files(),
            },
            _lease: lease,
        })
    }
}

impl Stored {
    /// Closes the writer thread once every run's task is gone (the runtime dropped): it
    /// waits for every handle on the store, so that the last connection copies the WAL
    /// back and removes it.
    pub fn close(self) {
        self.ctx.store.close();
    }
}

/// Runs `jobs` (named by [`name_runs`]), journaled in `store` if given, telling `on` as
/// it goes; the tally at the end.
pub async fn run(
    batch: &Batch,
    store: Option<&mut Stored>,
    jobs: Vec<Job>,
    on: &mut (dyn FnMut(Event<'_>) + Send),
) -> Tally {
    drive::drive(batch, store.map(|s| &mut s.ctx), jobs, on).await
}
