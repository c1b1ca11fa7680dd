//! Who is watching what: a run's (or a goal's) event streams wait on its channel, and
//! the journal of a run this service runs bumps it each time a commit point is on record
//! (see [`Notifier`]), so a stream looks when there is something new instead of every
//! 100 ms. A run of another process has no channel: its streams read on a timer.
//!
//! A run on the service's writer (`plan_runs::Writer`: the runs submitted to it and those
//! it took from a queue) also hands its streams what the writer wrote ([`Handed`]): the
//! journal entries, numbered as the store numbers them, and the run's end. A stream
//! folds them in as it would the same entries read from the store, without reading it.
//! The writer keeps them only while a stream follows the run, up to [`MAX_HANDED`]
//! bytes; a stream that finds an entry it was not handed reads the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use plan_host::{Durable, Journal, TraceEvent};
use plan_store::{JournalFold, RunStatus, Written};
use serde_json::Value;
use tokio::sync::watch;

/// The most bytes of entries kept for a run's streams: past it, they read the store.
const MAX_HANDED: usize = 1 << 20;

/// The channels of the runs and goals this service is running, by id.
#[derive(Default)]
pub(crate) struct Live {
    channels: Mutex<HashMap<String, Arc<LiveRun>>>,
}

/// A run (or goal) this service is running.
struct LiveRun {
    tx: watch::Sender<u64>,
    /// What the writer handed; None for a run whose points it does not write.
    handed: Option<Mutex<Handed>>,
}

/// What the writer handed of a run's journal.
#[derive(Default)]
struct Handed {
    /// The number of the last entry written.
    last: Option<i64>,
    /// The entries kept, in order and without a gap, up to `last`: (number, time, text).
    entries: Vec<(i64, i64, Box<str>)>,
    bytes: usize,
    /// The run's end, once written.
    end: Option<Ended>,
}

/// A run's end as its row says it.
struct Ended {
    status: RunStatus,
    final_answer: Option<Value>,
    error: Option<Value>,
    question: Option<Value>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // NB: nothing panics while holding these locks; a poisoned one is still consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Live {
    /// A receiver for `id`'s changes, if this service is running it.
    pub(crate) fn watch(&self, id: &str) -> Option<watch::Receiver<u64>> {
        lock(&self.channels).get(id).map(|run| run.tx.subscribe())
    }

    /// `id` is running here from now on: its journal's notifier.
    pub(crate) fn start(self: &Arc<Self>, id: &str) -> Notifier {
        self.begin(id, false)
    }

    /// `id` is running here from now on, its points written by the service's writer,
    /// which hands them to its streams through [`Notifier::on_written`].
    pub(crate) fn start_written(self: &Arc<Self>, id: &str) -> Notifier {
        self.begin(id, true)
    }

    fn begin(self: &Arc<Self>, id: &str, written: bool) -> Notifier {
        let run = Arc::new(LiveRun {
            tx: watch::channel(0).0,
            handed: written.then(Mutex::default),
        });
        lock(&self.channels).insert(id.to_owned(), run.clone());
        Notifier {
            live: self.clone(),
            id: id.to_owned(),
            run,
        }
    }

    /// Folds into `fold` the entries of run `id` the writer handed after the last one
    /// `fold` holds, and gives the run's row as `row` was read, brought up to what was
    /// handed (its end, if written). None when the store must be read instead: the run
    /// is not on this service's writer (or no longer running here), or an entry after
    /// `fold`'s was written but not kept.
    pub(crate) fn handed(
        &self,
        id: &str,
        fold: &mut JournalFold,
        row: &mut crate::events::RunView,
    ) -> Option<()> {
        let run = lock(&self.channels).get(id).cloned()?;
        let handed = lock(run.handed.as_ref()?);
        let next = fold.head().map_or(0, |h| h + 1);
        if handed.last.is_some_and(|l| l >= next)
            && handed.entries.first().is_none_or(|(seq, ..)| *seq > next)
        {
            return None;
        }
        for (seq, at, text) in handed.entries.iter().filter(|(seq, ..)| *seq >= next) {
            fold.apply_text(*seq, *at, text).ok()?;
        }
        if let Some(end) = &handed.end {
            row.status = end.status;
            row.final_answer.clone_from(&end.final_answer);
            row.error.clone_from(&end.error);
            row.question.clone_from(&end.question);
        }
        Some(())
    }
}

impl LiveRun {
    fn bump(&self) {
        self.tx.send_modify(|n| *n += 1);
    }

    /// Keeps what the writer wrote, for the streams that follow the run.
    fn hand(&self, written: &Written<'_>) {
        let Some(handed) = &self.handed else { return };
        let mut h = lock(handed);
        if let Some((seq, at)) = written.row {
            h.last = Some(seq);
            // NB: kept only while a stream follows the run (it subscribed before it read
            // the store), and kept without a gap: past a gap, a stream reads the store.
            let text = (self.tx.receiver_count() > 0)
                .then(|| written.text())
                .flatten()
                .filter(|text| h.bytes + text.len() <= MAX_HANDED);
            match text {
                Some(text) => {
                    h.bytes += text.len();
                    h.entries.push((seq, at, text.into()));
                }
                None => {
                    h.entries = Vec::new();
                    h.bytes = 0;
                }
            }
        }
        if let Some(end) = written.end {
            let status = match end.status() {
                "ok" => RunStatus::Ok,
                "needs_input" => RunStatus::NeedsInput,
                _ => RunStatus::Failed,
            };
            h.end = Some(Ended {
                status,
                final_answer: end.ok.then(|| end.final_answer.clone()),
                error: end.error.clone(),
                question: end.question.as_deref().cloned(),
            });
        }
    }
}

/// A journal that records nothing and bumps its run's channel once a commit point is on
/// record: put beside the store's journal, it is asked whether everything is durable after
/// the store's journal wrote the point ([`Journal::durable`]). Dropped when the run ends
/// (its end is on record by then): a last bump, and the channel goes.
pub(crate) struct Notifier {
    live: Arc<Live>,
    id: String,
    run: Arc<LiveRun>,
}

impl Notifier {
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// A receiver for the run's changes, as [`Live::watch`] gives.
    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.run.tx.subscribe()
    }

    /// What tells the watchers, and hands them what was written, for a journal that
    /// knows when its points are written (`plan_runs::Writer`).
    pub(crate) fn on_written(&self) -> plan_runs::OnWritten {
        let run = self.run.clone();
        Arc::new(move |written: &Written<'_>| {
            run.hand(written);
            run.bump();
        })
    }
}

impl Journal for Notifier {
    fn record(&mut self, _: &TraceEvent<'_>) -> Result<(), String> {
        Ok(())
    }

    fn durable(&mut self) -> Option<Durable> {
        self.run.bump();
        None
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        let mut channels = lock(&self.live.channels);
        // NB: only its own: the run may be running here again (answered, resumed).
        if channels
            .get(&self.id)
            .is_some_and(|run| Arc::ptr_eq(run, &self.run))
        {
            channels.remove(&self.id);
        }
        drop(channels);
        self.run.bump();
    }
}
