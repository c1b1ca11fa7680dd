//! The queue on a store: runs and goals submitted held by nobody ([`submit`],
//! [`crate::goal::submit`]), and workers that take them up ([`Worker`]) on any machine
//! sharing the store, each run with the guarantees of `resume` (completed calls never
//! requested again; a `write` call in flight not sent again unless allowed), each goal
//! asked of the worker's planner (or ended by its runs: [`crate::goal::next`]).
//!
//! A worker takes runs in batches ([`plan_store::RunStore::reserve`]: in PostgreSQL
//! `FOR UPDATE SKIP LOCKED`, so workers never wait for each other), each under a token of
//! its own that fences its commits: a worker that lost a run (paused past its lease, then
//! taken over) cannot write another step into it. A run whose worker died is ready again
//! once its lease lapses; so is a goal. A worker wakes when runs or goals are submitted
//! (PostgreSQL's `LISTEN/NOTIFY`), and polls as well, for those whose lease lapsed.

use std::sync::Arc;
use std::time::Duration;

use plan_host::{Host, Journal, RunReport};
use plan_store::{GoalInfo, GoalStatus, OwnedNewRun, Owner};
use tokio::task::JoinSet;

use crate::open::{Access, StoreAt};
use crate::{Error, ErrorKind, Resume};

/// Submits `runs` to the queue of the store at `at`, in one transaction: all, or none
/// when one's id is taken.
pub fn submit(at: &StoreAt, runs: &[OwnedNewRun]) -> Result<(), Error> {
    for run in runs {
        plan_store::check_run_id(&run.id)
            .map_err(|e| Error::new(ErrorKind::BadRunId, format!("run id `{}`: {e}", run.id)))?;
    }
    let borrowed: Vec<_> = runs.iter().map(OwnedNewRun::borrow).collect();
    at.open(Access::Create)?.submit(&borrowed)?;
    Ok(())
}

/// A worker: takes up runs of a store's queue and runs them on its host, at most
/// `concurrency` at once.
pub struct Worker {
    pub at: StoreAt,
    pub host: Arc<Host>,
    pub concurrency: usize,
    /// Send again the `write` calls a run left in flight (else such a run ends failed,
    /// with its reason).
    pub retry_unknown_writes: bool,
    /// How often to look for ready runs besides being woken (runs whose lease lapsed are
    /// found only so).
    pub poll: Duration,
    pub warn: fn(&Error),
    /// A journal of the caller's for each run and goal taken, beside the store's (a
    /// service's live events), by run or goal id.
    pub watch: Option<Watch>,
    /// Asks the goals of the queue; None: this worker takes runs only.
    pub planner: Option<Arc<crate::goal::GoalPlanner>>,
}

/// See [`Worker::watch`].
pub type Watch = Arc<dyn Fn(&str) -> Box<dyn Journal + Send> + Send + Sync>;

/// What a worker tells its caller as it goes.
pub enum Event<'a> {
    /// A run ended here (or stopped, when the worker was stopping).
    Finished { id: &'a str, report: &'a RunReport },
    /// A goal taken here was asked (or gone on with): as it stands now.
    Asked { goal: &'a GoalInfo },
    /// A run (or, `goal`, a goal) taken could not go on: it was ended failed with this
    /// reason, or (`Busy`) another process has it.
    Refused {
        id: &'a str,
        goal: bool,
        error: &'a Error,
    },
    /// Runs could not be taken this time (the store is unreachable): tried again.
    Unavailable { error: &'a Error },
}

/// Runs a worker ended, by outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub ok: u64,
    pub failed: u64,
    pub refused: u64,
    /// Stopped at their next commit point because the worker was stopping.
    pub stopped: u64,
    /// Goals answered here, ended without an answer, and waiting for a person's.
    pub answered: u64,
    pub unanswered: u64,
    pub waiting: u64,
}

/// What one task of a worker did.
enum Done {
    Run(String, Result<RunReport, Error>),
    Goal(String, Result<GoalInfo, Error>),
}

impl Worker {
    /// Works until `stop` resolves: then no run is taken, and the runs going stop at their
    /// next commit point (see [`Host::drain`]) and are ready for another worker at once.
    /// Err: the store cannot be opened (a failure to take runs later is told to `on`, and
    /// taking is tried again at the next poll).
    pub async fn work(
        &self,
        stop: impl std::future::Future<Output = ()>,
        on: &mut (dyn FnMut(Event<'_>) + Send),
    ) -> Result<Tally, Error> {
        let mut reserver = self.at.open(Access::Create)?;
        let woken = Arc::new(tokio::sync::Notify::new());
        if let Some(url) = self.at.url() {
            let woken = woken.clone();
            plan_store::PgStore::listen(url, move || woken.notify_one())?;
        }
        let mut tally = Tally::default();
        let mut running: JoinSet<Done> = JoinSet::new();
        let mut stop = std::pin::pin!(stop);
        let mut stopping = false;
        loop {
            let free = self.concurrency.saturating_sub(running.len());
            if !stopping && free > 0 {
                // NB: a store gone for a moment (a server restarting) is tried again at
                // the next poll; the runs going meanwhile fail at their next commit.
                let taken = reserver
                    .reserve(free, &mut Owner::for_run)
                    .unwrap_or_else(|e| {
                        on(Event::Unavailable { error: &e.into() });
                        // NB: a connection lost is opened again for the next poll.
                        if let Ok(fresh) = self.at.open(Access::Create) {
                            reserver = fresh;
                        }
                        Vec::new()
                    });
                let free = free - taken.len();
                for (id, owner) in taken {
                    let (at, host) = (self.at.clone(), self.host.clone());
                    let (retry, warn) = (self.retry_unknown_writes, self.warn);
                    let watch = self.watch.as_ref().map(|w| w(&id));
                    running.spawn(async move {
                        let report = go_on(&at, &host, (&id, owner), (retry, warn), watch).await;
                        Done::Run(id, report)
                    });
                }
                // NB: runs first: they are further on than goals not yet planned.
                if let Some(planner) = self.planner.as_ref().filter(|_| free > 0) {
                    let goals = reserver
                        .reserve_goals(free, &mut Owner::for_run)
                        .unwrap_or_else(|e| {
                            on(Event::Unavailable { error: &e.into() });
                            Vec::new()
                        });
                    for (id, owner) in goals {
                        let (at, host) = (self.at.clone(), self.host.clone());
                        let planner = planner.clone();
                        let (retry, warn) = (self.retry_unknown_writes, self.warn);
                        let mut also = self.watch.as_ref().map(|w| w(&id));
                        running.spawn(async move {
                            let also: &mut dyn Journal = match &mut also {
                                Some(j) => &mut **j,
                                None => &mut (),
                            };
                            let planner = (&*host, &*planner);
                            let taken = (id.as_str(), &owner);
                            let asked =
                                crate::goal::take_up(&at, planner, taken, (retry, warn), also)
                                    .await;
                            Done::Goal(id, asked)
                        });
                    }
                }
            }
            if stopping && running.is_empty() {
                return Ok(tally);
            }
            // NB: woken early by a run's end (a slot is free) or a submission.
            tokio::select! {
                () = &mut stop, if !stopping => {
                    stopping = true;
                    self.host.drain();
                }
                done = running.join_next(), if !running.is_empty() => {
                    if let Some(Ok(done)) = done {
                        count(&mut tally, &done, on);
                    }
                }
                () = woken.notified() => {}
                () = tokio::time::sleep(self.poll) => {}
            }
        }
    }
}

/// Tallies what a task did and tells `on`.
fn count(tally: &mut Tally, done: &Done, on: &mut (dyn FnMut(Event<'_>) + Send)) {
    let (id, ended) = match done {
        Done::Run(id, ended) => (id, ended),
        Done::Goal(id, Err(error)) => {
            tally.refused += 1;
            let goal = true;
            on(Event::Refused { id, goal, error });
            return;
        }
        Done::Goal(_, Ok(goal)) => {
            match goal.status {
                GoalStatus::Answered => tally.answered += 1,
                GoalStatus::Failed => tally.unanswered += 1,
                GoalStatus::NeedsInput => tally.waiting += 1,
                // NB: left to go on later (the worker stopping).
                GoalStatus::Open | GoalStatus::Interrupted | GoalStatus::Queued => {
                    tally.stopped += 1;
                }
            }
            on(Event::Asked { goal });
            return;
        }
    };
    match ended {
        Ok(report) => {
            match report.status {
                plan_host::RunStatus::Ok => tally.ok += 1,
                plan_host::RunStatus::Stopped => tally.stopped += 1,
                plan_host::RunStatus::Failed | plan_host::RunStatus::NeedsInput => {
                    tally.failed += 1;
                }
            }
            on(Event::Finished { id, report });
        }
        Err(error) => {
            tally.refused += 1;
            on(Event::Refused {
                id,
                goal: false,
                error,
            });
        }
    }
}

/// Run `id`, which this worker took under `owner`, read and gone on with as `resume`
/// would. A run that cannot go on (a `write` call in flight, damage) is ended failed with
/// its reason, so that no worker takes it again.
async fn go_on(
    at: &StoreAt,
    host: &Host,
    (id, owner): (&str, Owner),
    (retry_unknown_writes, warn): (bool, fn(&Error)),
    watch: Option<Box<dyn Journal + Send>>,
) -> Result<RunReport, Error> {
    let ready = match crate::resume::resume_taken(at, id, &owner, retry_unknown_writes) {
        Ok(Resume::Ready(ready)) => ready,
        Ok(Resume::Finished(report)) => return Ok(*report),
        Err(e) => {
            // NB: a run that can never go on is ended, so that no worker takes it again;
            // one that failed to be read (the store unreachable a moment) is let go of,
            // for the next taker.
            let lasting = matches!(
                e.kind,
                ErrorKind::UnknownWrites | ErrorKind::Damaged | ErrorKind::Invalid
            );
            if let Ok(mut store) = at.open(Access::Existing) {
                if lasting
                    && store
                        .run(id)
                        .is_ok_and(|r| r.owner.as_ref() == Some(&owner.0))
                {
                    let error = serde_json::json!({"code": e.kind.code(), "message": e.message});
                    let _ = store.cancel(id, &error);
                } else {
                    let _ = store.release(id, &owner);
                }
            }
            return Err(e);
        }
    };
    let claimed = ready.claim_as(owner, warn)?;
    Ok(match watch {
        Some(mut j) => claimed.go(host, &mut *j).await,
        None => claimed.go(host, &mut ()).await,
    })
}
