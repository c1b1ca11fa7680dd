//! On a PostgreSQL store the service shares its work with the other services and the
//! `planvm worker`s of that store: a run of a plan submitted here goes into the store's
//! queue, and the service takes runs from the queue as a worker does (its own and those
//! others submitted, or left when they died), at most `--max-runs` at once. Its streams
//! are woken by the commits of the runs it took; a run another process took is read on
//! a timer (see `live`).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use plan_runs::queue::{Event, Worker};
use plan_runs::{Error, ErrorKind};
use plan_store::{OwnedNewRun, RunInfo};

use crate::State;
use crate::error::ApiError;

/// How often the service looks for runs besides being told of new ones: runs whose
/// process died are found so, once their lease lapses.
const POLL: Duration = Duration::from_secs(1);

/// Whether the service takes runs from the store's queue (see [`work`]).
pub(crate) fn shared(state: &State) -> bool {
    state.queueing.load(Ordering::Relaxed)
}

/// Whether the service's store has a queue to share: PostgreSQL.
pub(crate) fn store_shares(state: &State) -> bool {
    state.at.url().is_some()
}

/// Puts `new` into the store's queue; its row as stored.
pub(crate) async fn enqueue(state: &Arc<State>, new: OwnedNewRun) -> Result<RunInfo, ApiError> {
    let at = state.at.clone();
    let id = new.id.clone();
    crate::error::blocking(move || plan_runs::queue::submit(&at, &[new])).await?;
    state.read(move |store| Ok(store.run(&id)?)).await
}

/// Takes runs from the store's queue until the service stops; then its runs stop at
/// their next commit point and are ready for another process at once. Runs of plans
/// submitted to the service go into the queue from now on, until the worker ends.
pub(crate) fn work(state: Arc<State>, retry_unknown_writes: bool) -> tokio::task::JoinHandle<()> {
    let live = state.live.clone();
    let worker = Worker {
        at: state.at.clone(),
        host: state.host.clone(),
        concurrency: state.max_runs as usize,
        retry_unknown_writes,
        poll: POLL,
        warn: state.warn,
        watch: Some(Arc::new(move |id| {
            let notifier = live.start_written(id);
            let on_written = notifier.on_written();
            (Box::new(notifier) as _, Some(on_written))
        })),
        planner: state.planner.as_ref().ok().cloned(),
    };
    state.queueing.store(true, Ordering::Relaxed);
    tokio::spawn(async move {
        let warn = state.warn;
        let stopped = state.clone();
        let worked = worker
            .work(async move { stopped.stopped().await }, &mut |e| match e {
                // NB: another process has it: not this service's concern.
                Event::Refused { error, .. } if error.kind == ErrorKind::Busy => {}
                Event::Refused { id, goal, error } => warn(&Error::new(
                    error.kind,
                    format!(
                        "{} {id} was not taken up: {error}",
                        if goal { "goal" } else { "run" }
                    ),
                )),
                Event::Unavailable { error } => warn(&Error::new(
                    error.kind,
                    format!("cannot take runs now (tried again): {error}"),
                )),
                Event::Finished { .. } | Event::Asked { .. } => {}
            })
            .await;
        // NB: runs are queued only while this service takes them.
        state.queueing.store(false, Ordering::Relaxed);
        if let Err(e) = worked {
            warn(&e);
        }
    })
}
