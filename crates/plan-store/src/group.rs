//! Group commit for many runs in one process (`planvm batch --store`): one writer thread
//! owns the store's connection; runs hand it their writes without blocking their task;
//! everything that queued up while a transaction was being written goes into the next
//! one, each run's commit points merged into one journal row. A run waits for its writes
//! only where it must (see `StoreJournal::grouped`).

use std::collections::HashMap;
use std::future::Future;
use std::sync::mpsc;

use futures::channel::oneshot;

use crate::{RunStore, SqliteStore, StoreError, StoreErrorKind, StoreWrite};

/// The most writes one transaction takes (a bound on its size and latency).
const MAX_GROUP: usize = 256;

type Done = oneshot::Sender<Result<(), StoreError>>;

struct Job {
    write: StoreWrite,
    done: Done,
}

/// A handle on the writer thread; clones share it. The thread ends when the last handle
/// is dropped, after writing what was queued.
#[derive(Clone, Debug)]
pub struct GroupStore {
    jobs: mpsc::Sender<Job>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.write.fmt(f)
    }
}

fn closed() -> StoreError {
    StoreError::new(
        StoreErrorKind::Io,
        "internal: the store's writer thread has stopped",
    )
}

/// The group's writes, with each run's commit points merged into its first (one journal
/// row per run and transaction), and who waits for each. (A process's run ids are
/// distinct; a point of a run that was not created, or that another process took over,
/// is refused by the store's ownership check.)
fn merge(group: Vec<Job>) -> (Vec<StoreWrite>, Vec<Vec<Done>>) {
    let mut writes: Vec<StoreWrite> = Vec::with_capacity(group.len());
    let mut done: Vec<Vec<Done>> = Vec::with_capacity(group.len());
    let mut first: HashMap<String, usize> = HashMap::new();
    for job in group {
        if let StoreWrite::Commit(run, owner, point, entry) = job.write {
            if let Some(&i) = first.get(&run)
                && let StoreWrite::Commit(_, _, into, into_entry) = &mut writes[i]
            {
                into.absorb(into_entry, point, entry);
                done[i].push(job.done);
                continue;
            }
            first.insert(run.clone(), writes.len());
            writes.push(StoreWrite::Commit(run, owner, point, entry));
        } else {
            writes.push(job.write);
        }
        done.push(vec![job.done]);
    }
    (writes, done)
}

impl GroupStore {
    pub fn spawn(mut store: SqliteStore) -> GroupStore {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::spawn(move || {
            while let Ok(first) = queue.recv() {
                let mut group = vec![first];
                while group.len() < MAX_GROUP
                    && let Ok(job) = queue.try_recv()
                {
                    group.push(job);
                }
                let (writes, done) = merge(group);
                let results = store.write_group(&writes.iter().collect::<Vec<_>>());
                for (waiting, r) in done.into_iter().zip(results) {
                    for d in waiting {
                        // NB: a run that gave up waiting is not the writer's problem.
                        let _ = d.send(r.clone());
                    }
                }
            }
        });
        GroupStore { jobs }
    }

    /// Queues `write`; the future resolves once it is committed (or failed).
    pub fn submit(
        &self,
        write: StoreWrite,
    ) -> impl Future<Output = Result<(), StoreError>> + Send + 'static {
        let (done, wait) = oneshot::channel();
        let queued = self.jobs.send(Job { write, done });
        async move {
            queued.map_err(|_| closed())?;
            wait.await.map_err(|_| closed())?
        }
    }
}
