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
use plan_store::{GoalInfo, GoalStatus, GroupStore, OwnedNewRun, Owner};
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

/// Where a worker's run writes its points, and who hears once they are written.
type Writing = (GroupStore, Option<crate::OnWritten>);

/// See [`Worker::watch`]: for a run, besides its journal, what hears each time its
/// commit points are in the store (its points go through a writer thread: the journal
/// hears of them before).
pub type Watch =
    Arc<dyn Fn(&str) -> (Box<dyn Journal + Send>, Option<crate::OnWritten>) + Send + Sync>;

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
        // NB: the commit points of every run this worker takes go through one writer
        // thread, in group transactions, as `batch --store`'s do. Joined at the end, after
        // the last run's points.
        let group = GroupStore::spawn(self.at.open(Access::Create)?);
        let woken = Arc::new(tokio::sync::Notify::new());
        if let Some(url) = self.at.url() {
            let woken = woken.clone();
            plan_store::PgStore::listen(url, move || woken.notify_one())?;
        }
        let mut tally = Tally::default();
        let mut running: JoinSet<Done> = JoinSet::new();
        let mut stop = std::pin::pin!(stop);
        let mut stopping = false;
        // NB: one look at the queue takes many runs: under load, slots that free up one
        // by one are gathered (up to GATHER) rather than each costing a look; and once a
        // look found the queue empty, the next waits for a submission or the poll.
        let gather = (self.concurrency / 4).clamp(1, 64);
        let mut empty = false;
        let mut looked = tokio::time::Instant::now() - GATHER;
        // NB: a deadline kept across turns: a timer made anew each turn would never fire
        // while runs keep ending, and runs whose lease lapsed are found only at a poll.
        let mut poll_at = tokio::time::Instant::now() + self.poll;
        loop {
            let free = self.concurrency.saturating_sub(running.len());
            let ripe = free >= gather || looked.elapsed() >= GATHER;
            if !stopping && free > 0 && !empty && ripe {
                let found = self.take(&mut reserver, free, (&group, &mut running), on);
                empty = found < free;
                looked = tokio::time::Instant::now();
            }
            if stopping && running.is_empty() {
                // NB: each run waited for its points: the thread has nothing left to write.
                group.close();
                return Ok(tally);
            }
            let gathering = !stopping && free > 0 && !empty && !ripe;
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
                    while let Some(done) = running.try_join_next() {
                        if let Ok(done) = done {
                            count(&mut tally, &done, on);
                        }
                    }
                }
                () = woken.notified() => empty = false,
                () = tokio::time::sleep_until(poll_at) => {
                    empty = false;
                    poll_at = tokio::time::Instant::now() + self.poll;
                }
                () = tokio::time::sleep_until(looked + GATHER), if gathering => {}
            }
        }
    }

    /// Takes up to `free` ready runs, then goals, from the queue, each going on in a task
    /// of `running`; returns how many it found. A store that cannot be reached is told to
    /// `on` and counts as an empty queue (tried again at the next poll, on a connection
    /// opened again).
    fn take(
        &self,
        reserver: &mut Box<dyn plan_store::RunStore>,
        free: usize,
        (group, running): (&GroupStore, &mut JoinSet<Done>),
        on: &mut (dyn FnMut(Event<'_>) + Send),
    ) -> usize {
        let mut unavailable =
            |e: plan_store::StoreError, reserver: &mut Box<dyn plan_store::RunStore>| {
                on(Event::Unavailable { error: &e.into() });
                if let Ok(fresh) = self.at.open(Access::Create) {
                    *reserver = fresh;
                }
                Vec::new()
            };
        // NB: the runs going meanwhile fail at their next commit if the store is gone.
        let taken = reserver
            .reserve(free, &mut Owner::for_run)
            .unwrap_or_else(|e| unavailable(e, reserver));
        let mut found = taken.len();
        for (id, owner) in taken {
            let (at, host) = (self.at.clone(), self.host.clone());
            let (retry, warn) = (self.retry_unknown_writes, self.warn);
            let (watch, on_written) = self.watch.as_ref().map(|w| w(&id)).unzip();
            let on_written = on_written.flatten();
            let group = (group.clone(), on_written);
            running.spawn(async move {
                let report = go_on(&at, &host, (&id, owner), (retry, warn), (group, watch)).await;
                Done::Run(id, report)
            });
        }
        // NB: runs first: they are further on than goals not yet planned.
        let Some(planner) = self.planner.as_ref().filter(|_| free > found) else {
            return found;
        };
        let goals = reserver
            .reserve_goals(free - found, &mut Owner::for_run)
            .unwrap_or_else(|e| unavailable(e, reserver));
        found += goals.len();
        for (id, owner) in goals {
            let (at, host) = (self.at.clone(), self.host.clone());
            let planner = planner.clone();
            let (retry, warn) = (self.retry_unknown_writes, self.warn);
            let mut also = self.watch.as_ref().map(|w| w(&id).0);
            running.spawn(async move {
                let also: &mut dyn Journal = match &mut also {
                    Some(j) => &mut **j,
                    None => &mut (),
                };
                let planner = (&*host, &*planner);
                let taken = (id.as_str(), &owner);
                let asked = crate::goal::take_up(&at, planner, taken, (retry, warn), also).await;
                Done::Goal(id, asked)
            });
        }
        found
    }
}

/// How long a worker with a few slots free waits for more to free up before it looks at
/// the queue (see [`Worker::work`]).
const GATHER: Duration = Duration::from_millis(10);

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
    ((group, on_written), watch): (Writing, Option<Box<dyn Journal + Send>>),
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
    let held = ready.reserved(owner, warn)?;
    Ok(match watch {
        Some(mut j) => held.go_through((group, on_written), host, &mut *j).await,
        None => held.go_through((group, on_written), host, &mut ()).await,
    })
}
