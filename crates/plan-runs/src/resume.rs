//! Resuming a stored run by id: read and checked first (see `take_up`), claimed only
//! when the caller is ready to go on, so a refusal anywhere before leaves the store as
//! it was.

use plan_host::RunReport;
use plan_store::{Owner, RunInfo, RunStore};
use plan_vm::Limits;

use crate::open::{Access, StoreAt};
use crate::{Claimed, Error, Going, Held, Taken};

/// Limits a resumption sets instead of the run's own.
#[derive(Clone, Debug, Default)]
pub struct LimitsOverride {
    pub max_steps: Option<u64>,
    pub max_total_bytes: Option<u64>,
    pub max_concurrency: Option<u32>,
}

impl LimitsOverride {
    /// `own` with what this sets.
    pub fn apply(&self, own: &Limits) -> Limits {
        Limits {
            max_steps: self.max_steps.unwrap_or(own.max_steps),
            max_total_bytes: self.max_total_bytes.unwrap_or(own.max_total_bytes),
            max_concurrency: self.max_concurrency.unwrap_or(own.max_concurrency),
            ..own.clone()
        }
    }
}

/// What resuming a run found.
pub enum Resume {
    /// It had finished: its stored report (nothing runs).
    Finished(Box<RunReport>),
    /// It goes on once claimed.
    Ready(Box<Ready>),
}

/// A stored run read and checked, not claimed yet.
pub struct Ready {
    at: StoreAt,
    store: Box<dyn RunStore>,
    run: RunInfo,
    going: Going,
    limits: Limits,
}

/// Reads run `id` of the store at `at` to go on under its own limits with `limits` set,
/// with every check first: a run a live process holds, one that stopped with a `write`
/// call in flight (unless `retry_unknown_writes`), damage.
pub fn resume(
    at: &StoreAt,
    id: &str,
    limits: &LimitsOverride,
    retry_unknown_writes: bool,
) -> Result<Resume, Error> {
    let store = at.open(Access::Existing)?;
    let run = store.run(id)?;
    let limits = limits.apply(&run.limits);
    Ok(
        match crate::take_up(&*store, &run, &limits, retry_unknown_writes)? {
            Taken::Finished(report) => Resume::Finished(report),
            Taken::Going(going) => Resume::Ready(Box::new(Ready {
                at: at.clone(),
                store,
                run,
                going: *going,
                limits,
            })),
        },
    )
}

impl Ready {
    pub fn run(&self) -> &RunInfo {
        &self.run
    }

    /// Takes the run for this process; refused when another process went on with it
    /// since it was read. `warn` hears about a lease that cannot be renewed.
    pub fn claim(self, warn: fn(&Error)) -> Result<Claimed, Error> {
        let Ready {
            at,
            mut store,
            run,
            going,
            limits,
        } = self;
        let owner = Owner::for_run();
        store.claim(&run.id, &owner, going.seen)?;
        Ok(Claimed {
            held: Held::new(store, &at, &run.id, owner, warn),
            going,
            limits,
        })
    }
}
