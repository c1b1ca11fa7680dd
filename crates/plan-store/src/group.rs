//! Group commit for many runs in one process (`planvm batch --store`): one writer thread
//! owns the store's connection, and runs hand it their writes without blocking their task.
//! Everything that queued up while a transaction was being written goes into the next
//! one.
//!
//! A run's commit points do not travel one by one: the run appends each point's journal
//! entry to a buffer it shares with the writer ([`GroupRun`]), and queues the run for the
//! writer only when it is not queued already. The writer takes the whole buffer, as one
//! journal row, in its next transaction. So a point waits only for the transactions queued
//! ahead of it (the one being written, unless more than [`MAX_GROUP`] jobs wait), never
//! for a timer: the writer is never idle while a buffer holds something. A run with many
//! quick points pays for one queue message and one row per transaction, not per point. A
//! run waits for its points only where it must (see `StoreJournal::grouped`).

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError, mpsc};

use futures::channel::oneshot;

use crate::{CommitPoint, Owner, RunEnd, RunStore, StoreError, StoreErrorKind, Wrote};
use crate::{OwnedNewRun, StoreWrite};

/// The most jobs one transaction takes (a bound on its size and latency).
const MAX_GROUP: usize = 256;

/// Bytes reserved for a run's journal entry when its buffer starts anew.
const ENTRY_HINT: usize = 4096;

type Done = oneshot::Sender<Result<(), StoreError>>;

enum Job {
    /// A run to create, and who waits for it.
    Create(Box<OwnedNewRun>, Owner, Done),
    /// A run whose buffer holds points.
    Points(Arc<Shared>),
}

/// A handle on the writer thread; clones share it. The thread ends when the last handle
/// is dropped, after writing what was queued; [`GroupStore::close`] waits for that.
#[derive(Clone, Debug)]
pub struct GroupStore {
    jobs: mpsc::Sender<Job>,
    thread: Arc<Mutex<Option<std::thread::JoinHandle<()>>>>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Job::Create(run, ..) => write!(f, "Create({})", run.id),
            Job::Points(shared) => write!(f, "Points({})", shared.run),
        }
    }
}

fn closed() -> StoreError {
    internal("the store's writer thread has stopped")
}

/// What a run and the writer share.
struct Shared {
    run: String,
    owner: Owner,
    buf: Mutex<Buffer>,
}

/// A run's points not yet taken by the writer, and where its writes stand.
#[derive(Default)]
struct Buffer {
    /// The points' journal entries, comma-separated ([`CommitPoint::encoded`]).
    entry: Vec<u8>,
    /// The latest saved state among the points, the run's end, its step count.
    state: Option<(u64, String)>,
    end: Option<RunEnd>,
    total_steps: u64,
    /// Points given so far; of them, points written.
    given: u64,
    written: u64,
    /// The run is in the writer's queue (the buffer is taken once per queue message).
    queued: bool,
    /// The first write that failed: every later wait and point fails with it.
    failed: Option<StoreError>,
    /// Who waits for which count of points to be written.
    waiters: Vec<(u64, Done)>,
    /// Told from the writer thread each time points of the run are written.
    on_written: Option<OnWritten>,
}

/// Called once points of a run are in the store, from the writer thread, with what was
/// written: it must be quick (keep the entry, wake a task; not do the task's work).
pub type OnWritten = Arc<dyn Fn(&Written<'_>) + Send + Sync>;

/// What one transaction of the writer wrote of a run, as [`OnWritten`] hears it: a
/// reader that follows the run (an event stream) takes it from here instead of reading
/// the store back.
#[derive(Debug)]
pub struct Written<'a> {
    /// The journal row: its number and its time; None when the points held no call or
    /// step.
    pub row: Option<(i64, i64)>,
    /// The run's end, when one of the points ended it (as its row now says).
    pub end: Option<&'a RunEnd>,
    point: Option<&'a CommitPoint>,
}

impl Written<'_> {
    /// The journal row's text (a JSON array of points, as the store holds it), made
    /// when asked: only a reader that keeps it pays for it.
    pub fn text(&self) -> Option<String> {
        self.row?;
        self.point?.journal_entry().ok().flatten()
    }
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Buffer> {
    // NB: no code panics while holding the lock; a poisoned buffer is still consistent.
    shared.buf.lock().unwrap_or_else(PoisonError::into_inner)
}

impl GroupStore {
    pub fn spawn(mut store: Box<dyn RunStore>) -> GroupStore {
        let (jobs, queue) = mpsc::channel::<Job>();
        let thread = std::thread::spawn(move || {
            while let Ok(first) = queue.recv() {
                let mut group = vec![first];
                while group.len() < MAX_GROUP
                    && let Ok(job) = queue.try_recv()
                {
                    group.push(job);
                }
                write(&mut *store, group);
            }
        });
        GroupStore {
            jobs,
            thread: Arc::new(Mutex::new(Some(thread))),
        }
    }

    /// Drops this handle and waits for the writer thread to end: once every other handle
    /// (the runs' included) is gone, it writes what is queued and closes its connection.
    /// NB: the last connection of a store to close copies the WAL back into the database
    /// file and removes it; a process that exits with the thread still running kills it,
    /// possibly in the middle of that copy, leaving the store's pages in its WAL, which a
    /// copy of the database file alone would miss.
    pub fn close(self) {
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(self.jobs);
        if let Some(thread) = thread {
            // NB: the thread does not panic (it reports every failure to the runs); if
            // it did, there is nothing left to wait for.
            let _ = thread.join();
        }
    }

    /// Queues the creation of a run; the future resolves once it is committed (or
    /// failed). Points given afterwards for the run are written after it.
    pub fn create(
        &self,
        run: OwnedNewRun,
        owner: Owner,
    ) -> impl Future<Output = Result<(), StoreError>> + Send + 'static {
        let (done, wait) = oneshot::channel();
        let queued = self.jobs.send(Job::Create(Box::new(run), owner, done));
        async move {
            queued.map_err(|_| closed())?;
            wait.await.map_err(|_| closed())?
        }
    }

    /// Run `run`'s side of the store, for its commit points.
    pub fn run(&self, run: &str, owner: Owner) -> GroupRun {
        GroupRun {
            jobs: self.jobs.clone(),
            shared: Arc::new(Shared {
                run: run.to_owned(),
                owner,
                buf: Mutex::new(Buffer::default()),
            }),
        }
    }
}

/// Who waits for one write of a group.
enum Waiting {
    Create(Done),
    /// The run, and how many of its points the write holds.
    Points(Arc<Shared>, u64),
}

/// Writes one group in one transaction and tells everyone concerned.
fn write(store: &mut dyn RunStore, group: Vec<Job>) {
    let mut writes: Vec<StoreWrite> = Vec::with_capacity(group.len());
    let mut waiting: Vec<Waiting> = Vec::with_capacity(group.len());
    for job in group {
        match job {
            Job::Create(run, owner, done) => {
                writes.push(StoreWrite::Create(*run, owner));
                waiting.push(Waiting::Create(done));
            }
            Job::Points(shared) => {
                let mut buf = lock(&shared);
                buf.queued = false;
                // NB: a run whose write failed writes nothing more: a later point would
                // leave a gap in its journal, or end a run its batch reports as failed.
                if buf.failed.is_some() {
                    continue;
                }
                let point = CommitPoint {
                    encoded: std::mem::take(&mut buf.entry),
                    state: buf.state.take(),
                    end: buf.end.take(),
                    total_steps: buf.total_steps,
                    ..CommitPoint::default()
                };
                let given = buf.given;
                drop(buf);
                writes.push(StoreWrite::Commit(
                    shared.run.clone(),
                    shared.owner.clone(),
                    point,
                ));
                waiting.push(Waiting::Points(shared, given));
            }
        }
    }
    // NB: a panic in the store must not leave runs waiting for ever: the group fails, and
    // the thread goes on with the next one.
    let results = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        store.write_group(&writes.iter().collect::<Vec<_>>())
    }))
    .unwrap_or_else(|_| {
        let e = internal("the store's writer panicked");
        writes.iter().map(|_| Err(e.clone())).collect()
    });
    for ((waiting, result), write) in waiting.into_iter().zip(results).zip(&writes) {
        match waiting {
            // NB: a run that gave up waiting is not the writer's problem.
            Waiting::Create(done) => drop(done.send(result.map(drop))),
            Waiting::Points(shared, upto) => {
                let point = match write {
                    StoreWrite::Commit(.., point) => Some(point),
                    StoreWrite::Create(..) => None,
                };
                settle(&shared, upto, result.map(|wrote| (wrote, point)));
            }
        }
    }
}

fn internal(why: &str) -> StoreError {
    StoreError::new(StoreErrorKind::Io, format!("internal: {why}"))
}

/// Records the result of writing a run's points up to `upto` (what the store wrote of
/// them, and the points) and wakes the waits it answers: all of them, with the error,
/// once a write failed.
fn settle(shared: &Shared, upto: u64, result: Result<(Wrote, Option<&CommitPoint>), StoreError>) {
    let mut buf = lock(shared);
    let mut wrote = None;
    match result {
        Ok(w) => {
            buf.written = buf.written.max(upto);
            wrote = Some(w);
        }
        Err(e) => {
            buf.failed.get_or_insert(e);
        }
    }
    let (written, failed) = (buf.written, buf.failed.clone());
    let mut answered = Vec::new();
    for (want, done) in std::mem::take(&mut buf.waiters) {
        match &failed {
            Some(e) => answered.push((done, Err(e.clone()))),
            None if want <= written => answered.push((done, Ok(()))),
            None => buf.waiters.push((want, done)),
        }
    }
    let tell = buf.on_written.clone().filter(|_| failed.is_none());
    drop(buf);
    // NB: told before the waits end: whoever waited for a run's last point knows that
    // its watchers were told.
    if let (Some(tell), Some((wrote, point))) = (tell, wrote) {
        tell(&Written {
            row: wrote.entry,
            end: point.and_then(|p| p.end.as_ref()),
            point,
        });
    }
    for (done, result) in answered {
        drop(done.send(result));
    }
}

/// One run's side of a [`GroupStore`].
pub struct GroupRun {
    jobs: mpsc::Sender<Job>,
    shared: Arc<Shared>,
}

impl GroupRun {
    /// Hands a commit point to the writer: its journal entry is copied, its state and end
    /// are taken (the caller may reuse the point's buffers). Fails when an earlier point
    /// of the run failed to be written.
    pub fn give(&self, point: &mut CommitPoint) -> Result<(), StoreError> {
        let mut buf = lock(&self.shared);
        if let Some(e) = &buf.failed {
            return Err(e.clone());
        }
        let before = buf.entry.len();
        if before == 0 {
            // NB: room for a run's usual points at once (a few KB), not a doubling per
            // point.
            buf.entry.reserve(ENTRY_HINT);
        } else {
            buf.entry.push(b',');
        }
        if !point.write_entry(&mut buf.entry) {
            buf.entry.truncate(before);
        }
        if let Some(state) = point.state.take() {
            buf.state = Some(state);
        }
        if let Some(end) = point.end.take() {
            buf.end = Some(end);
        }
        buf.total_steps = buf.total_steps.max(point.total_steps);
        buf.given += 1;
        if !std::mem::replace(&mut buf.queued, true) {
            drop(buf);
            if self
                .jobs
                .send(Job::Points(Arc::clone(&self.shared)))
                .is_err()
            {
                let e = closed();
                settle(&self.shared, 0, Err(e.clone()));
                return Err(e);
            }
        }
        Ok(())
    }

    /// `tell` hears each time points given are written (not a failed write: the run's
    /// waits fail with it).
    pub fn on_written(&self, tell: OnWritten) {
        lock(&self.shared).on_written = Some(tell);
    }

    /// A wait until every point given so far is written, or None when they are.
    pub fn written(&self) -> Option<impl Future<Output = Result<(), StoreError>> + Send + 'static> {
        let mut buf = lock(&self.shared);
        if buf.failed.is_none() && buf.written >= buf.given {
            return None;
        }
        let (done, wait) = oneshot::channel();
        match &buf.failed {
            Some(e) => drop(done.send(Err(e.clone()))),
            None => {
                let want = buf.given;
                buf.waiters.push((want, done));
            }
        }
        Some(async move { wait.await.map_err(|_| closed())? })
    }
}
