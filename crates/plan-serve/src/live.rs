//! Who is watching what: a run's (or a goal's) event streams wait on its channel, and
//! the journal of a run this service runs bumps it each time a commit point is on record
//! (see [`Notifier`]), so a stream reads the store when there is something new instead of
//! every 100 ms. A run of another process has no channel: its streams read on a timer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use plan_host::{Durable, Journal, TraceEvent};
use tokio::sync::watch;

/// The channels of the runs and goals this service is running, by id.
#[derive(Default)]
pub(crate) struct Live {
    channels: Mutex<HashMap<String, watch::Sender<u64>>>,
}

impl Live {
    /// A receiver for `id`'s changes, if this service is running it.
    pub(crate) fn watch(&self, id: &str) -> Option<watch::Receiver<u64>> {
        let channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        channels.get(id).map(watch::Sender::subscribe)
    }

    /// `id` is running here from now on: its journal's notifier.
    pub(crate) fn start(self: &Arc<Self>, id: &str) -> Notifier {
        let (tx, _) = watch::channel(0);
        let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        channels.insert(id.to_owned(), tx);
        Notifier {
            live: self.clone(),
            id: id.to_owned(),
        }
    }

    fn bump(&self, id: &str) {
        let channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = channels.get(id) {
            tx.send_modify(|n| *n += 1);
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
}

impl Notifier {
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// What tells the watchers, for a journal that knows when its points are written
    /// (`plan_runs::Writer`).
    pub(crate) fn on_written(&self) -> plan_runs::OnWritten {
        let (live, id) = (self.live.clone(), self.id.clone());
        Arc::new(move || live.bump(&id))
    }
}

impl Journal for Notifier {
    fn record(&mut self, _: &TraceEvent<'_>) -> Result<(), String> {
        Ok(())
    }

    fn durable(&mut self) -> Option<Durable> {
        self.live.bump(&self.id);
        None
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        let mut channels = self.live.channels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = channels.remove(&self.id) {
            tx.send_modify(|n| *n += 1);
        }
    }
}
