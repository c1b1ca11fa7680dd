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
    /// The goal the run answers, waiting with it for a person.
    goal: Option<String>,
}

/// A stored run to go on (`planvm resume`, a service's runs taken up at start or
/// answered, `Store.resume` in Python).
#[derive(Clone, Debug)]
pub struct ResumeRequest<'a> {
    /// The run; with `input`, it may be a goal's id: its latest run is the one answered.
    pub id: &'a str,
    /// What is set instead of the run's own limits.
    pub limits: LimitsOverride,
    /// Send again the `write` calls the run left in flight (their outcome is unknown).
    pub retry_unknown_writes: bool,
    /// The answer to the question the run stopped at (`ask_user`).
    pub input: Option<&'a str>,
}

impl<'a> ResumeRequest<'a> {
    /// Run `id` to go on as it was: its own limits, no `write` sent again, no answer.
    pub fn new(id: &'a str) -> ResumeRequest<'a> {
        ResumeRequest {
            id,
            limits: LimitsOverride::default(),
            retry_unknown_writes: false,
            input: None,
        }
    }
}

/// Reads `request`'s run of the store at `at` to go on, with every check first: a run a
/// live process holds, one that stopped with a `write` call in flight (unless
/// `retry_unknown_writes`), damage, an `input` that does not answer the run's question
/// or a run that asks none.
pub fn resume(at: &StoreAt, request: ResumeRequest<'_>) -> Result<Resume, Error> {
    let ResumeRequest {
        id,
        limits,
        retry_unknown_writes,
        input,
    } = request;
    let store = at.open(Access::Existing)?;
    let run = match input {
        Some(_) => waiting_run(&*store, id)?,
        None => store.run(id)?,
    };
    let limits = limits.apply(&run.limits);
    let taken = crate::take_up(&*store, &run, &limits, retry_unknown_writes, input)?;
    ready(at, store, run, taken, limits)
}

/// Run `run`, as [`crate::take_up`] found it: finished, or ready to go on (with the goal
/// it settles, if any).
fn ready(
    at: &StoreAt,
    store: Box<dyn RunStore>,
    run: RunInfo,
    taken: Taken,
    limits: Limits,
) -> Result<Resume, Error> {
    Ok(match taken {
        Taken::Finished(report) => Resume::Finished(report),
        Taken::Going(going) => {
            let goal = goal_to_settle(&*store, &run, going.input.is_some())?;
            Resume::Ready(Box::new(Ready {
                at: at.clone(),
                store,
                run,
                going: *going,
                limits,
                goal,
            }))
        }
    })
}

/// Reads run `id`, which this process has just taken from the queue as `owner`
/// ([`plan_store::RunStore::reserve`]), to go on under its own limits, with the checks of
/// [`resume`]; `Busy` when another process has it since.
pub(crate) fn resume_taken(
    at: &StoreAt,
    id: &str,
    owner: &Owner,
    retry_unknown_writes: bool,
) -> Result<Resume, Error> {
    let store = at.open(Access::Existing)?;
    let mut run = store.run(id)?;
    if run.owner.as_deref() != Some(owner.0.as_str()) {
        return Err(Error::new(
            crate::ErrorKind::Busy,
            format!("run `{id}` was taken over by another process"),
        ));
    }
    // NB: held by this process, as taken: not a run another one goes on with.
    run.status = plan_store::RunStatus::Interrupted;
    let limits = run.limits.clone();
    // NB: a run of a goal whose asker died ends the goal too.
    let taken = crate::take_up(&*store, &run, &limits, retry_unknown_writes, None)?;
    ready(at, store, run, taken, limits)
}

/// The goal that run `run` answers and that goes on with it, if any: the run must be the
/// goal's latest, and the goal waiting for a person, or cut short (its process gone), or,
/// when the run is being answered, still open (its process has not marked it waiting
/// yet: it will find the run going on, and leave the goal alone).
fn goal_to_settle(
    store: &dyn RunStore,
    run: &RunInfo,
    answered: bool,
) -> Result<Option<String>, Error> {
    use plan_store::GoalStatus;
    let Some(goal) = crate::ask::goal_of_run(store, &run.id)? else {
        return Ok(None);
    };
    let latest = crate::ask::goal_runs(store, &goal.id)?
        .last()
        .is_some_and(|r| r.id == run.id);
    let takes = match goal.status {
        GoalStatus::NeedsInput | GoalStatus::Interrupted => true,
        GoalStatus::Open => answered,
        // NB: a queued goal has no run yet: its worker asks it.
        GoalStatus::Answered | GoalStatus::Failed | GoalStatus::Queued => false,
    };
    Ok((latest && takes).then_some(goal.id))
}

/// Run `id`, or the latest run of goal `id` (the one that may be waiting for input).
fn waiting_run(store: &dyn RunStore, id: &str) -> Result<RunInfo, Error> {
    if store.goal(id)?.is_none() {
        return Ok(store.run(id)?);
    }
    match crate::ask::goal_runs(store, id)?.pop() {
        Some(run) => Ok(run),
        None => Err(Error::new(
            crate::ErrorKind::NotWaiting,
            format!("goal `{id}` is not waiting for input: no plan of it has run yet"),
        )),
    }
}

impl Ready {
    pub fn run(&self) -> &RunInfo {
        &self.run
    }

    /// Takes the run for this process; refused when another process went on with it
    /// since it was read. `warn` hears about a lease that cannot be renewed.
    pub fn claim(self, warn: fn(&Error)) -> Result<Claimed, Error> {
        self.claim_as(Owner::for_run(), warn)
    }

    /// [`Ready::claim`], the run held by `owner` (the token it was taken from the queue
    /// with).
    pub(crate) fn claim_as(self, owner: Owner, warn: fn(&Error)) -> Result<Claimed, Error> {
        self.hold(owner, warn, true)
    }

    /// The run, which this process took from the queue as `owner` ([`resume_taken`]), held
    /// to go on. NB: not claimed again: taking it set `owner` on its row, which fences
    /// every commit point, and no other process claims a run whose lease is live.
    pub(crate) fn reserved(self, owner: Owner, warn: fn(&Error)) -> Result<Claimed, Error> {
        self.hold(owner, warn, false)
    }

    fn hold(self, owner: Owner, warn: fn(&Error), claim: bool) -> Result<Claimed, Error> {
        let Ready {
            at,
            mut store,
            run,
            going,
            limits,
            goal,
        } = self;
        if claim {
            store.claim(&run.id, &owner, going.seen)?;
        }
        // NB: the goal is this process's again while its run goes on, and ends with it.
        let goal = match goal {
            Some(g) => {
                let this = Owner::this_process();
                let reopened = store.reopen_goal(&g, &this)?;
                reopened.then(|| (g, at.lease(this, warn)))
            }
            None => None,
        };
        Ok(Claimed {
            held: Held::new(store, &at, &run.id, owner, warn),
            going,
            limits,
            goal,
        })
    }
}
