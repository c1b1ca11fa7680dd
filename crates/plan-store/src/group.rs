//! Group commit for many runs in one process (`planvm batch --store`): one writer thread
//! owns the store's connection; runs hand it their writes and wait for them without
//! blocking their task; everything that queued up while a transaction was being written
//! goes into the next one. Sixty-four concurrent runs pay for one transaction where they
//! paid for sixty-four, and each still waits until its own writes are committed.

use std::future::Future;
use std::sync::mpsc;

use futures::channel::oneshot;

use crate::{RunStore, SqliteStore, StoreError, StoreErrorKind, StoreWrite};

/// The most writes one transaction takes (a bound on its size and latency).
const MAX_GROUP: usize = 256;

struct Job {
    write: StoreWrite,
    done: oneshot::Sender<Result<(), StoreError>>,
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
                let (writes, done): (Vec<StoreWrite>, Vec<_>) =
                    group.into_iter().map(|j| (j.write, j.done)).unzip();
                for (d, r) in done.into_iter().zip(store.write_group(&writes)) {
                    // NB: a run that gave up waiting is not the writer's problem.
                    let _ = d.send(r);
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
