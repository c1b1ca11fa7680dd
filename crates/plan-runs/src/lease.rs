//! Leases: renewed while their runs and goals go on, so that a run waiting minutes for
//! one call still shows as `running`, and a run whose process died shows as `interrupted`
//! within [`plan_store::lease_ms`]. One thread per store renews, in one statement, the
//! leases of every run and goal this process holds there, on a connection of its own: a
//! process running many runs at once (Python, a service, a worker) has one renewer per
//! store, not one per run.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::Duration;

use plan_store::{Owner, RunStore, lease_ms};

use crate::Error;

/// Opens the renewer's own connection to the store, in its thread: at its first renewal,
/// and again after a renewal failed.
pub type Opener = Box<dyn Fn() -> Result<Box<dyn RunStore>, Error> + Send>;

/// Renews `owner`'s leases until dropped.
pub struct Lease {
    renewer: Arc<Renewer>,
    owner: Owner,
}

/// The thread renewing the leases of one store, and the owners it renews.
struct Renewer {
    key: String,
    owners: Mutex<Vec<Owner>>,
    stop: Mutex<Option<mpsc::Sender<()>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// The renewer of each store this process holds runs in, by store.
fn renewers() -> &'static Mutex<HashMap<String, Arc<Renewer>>> {
    static RENEWERS: OnceLock<Mutex<HashMap<String, Arc<Renewer>>>> = OnceLock::new();
    RENEWERS.get_or_init(Default::default)
}

impl Lease {
    /// Renews `owner`'s leases in the store `key` names (opened with `open` when this
    /// process has no renewer there yet) every quarter of [`lease_ms`]. `warn` hears, once per
    /// renewer, that the store could not be opened or a renewal failed: not the run's
    /// failure (at worst another process takes the run over once the lease lapses, and
    /// from then on this one's commit points are refused, which fails the run).
    pub fn start(key: String, open: Opener, owner: Owner, warn: fn(&Error)) -> Lease {
        let mut all = renewers().lock().unwrap_or_else(|e| e.into_inner());
        let renewer = all
            .entry(key.clone())
            .or_insert_with(|| Renewer::spawn(key, open, warn))
            .clone();
        lock(&renewer.owners).push(owner.clone());
        Lease { renewer, owner }
    }
}

impl Renewer {
    fn spawn(key: String, open: Opener, warn: fn(&Error)) -> Arc<Renewer> {
        let (tx, rx) = mpsc::channel::<()>();
        let renewer = Arc::new(Renewer {
            key,
            owners: Mutex::new(Vec::new()),
            stop: Mutex::new(Some(tx)),
            thread: Mutex::new(None),
        });
        let every = Duration::from_millis(u64::try_from(lease_ms() / 4).unwrap_or(2_500));
        let shared = Arc::downgrade(&renewer);
        let thread = std::thread::spawn(move || {
            let mut store = None;
            let mut warned = false;
            let mut warn_once = |e: Error| {
                if !std::mem::replace(&mut warned, true) {
                    warn(&e);
                }
            };
            // NB: the connection is opened at the first renewal: runs shorter than that
            // never open one.
            while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(every) {
                if let Err(e) = renew_all(&mut store, &open, &shared) {
                    warn_once(e);
                }
            }
        });
        *lock(&renewer.thread) = Some(thread);
        renewer
    }
}

/// Renews the leases of every owner `renewer` holds, in one statement on `store` (opened
/// when there is none). NB: a renewal that fails lets go of the connection, for a new one next time (a
/// PostgreSQL store already tries again on a new connection when the server closed one).
fn renew_all(
    store: &mut Option<Box<dyn RunStore>>,
    open: &Opener,
    renewer: &std::sync::Weak<Renewer>,
) -> Result<(), Error> {
    let Some(renewer) = renewer.upgrade() else {
        return Ok(());
    };
    let mut owners = lock(&renewer.owners).clone();
    drop(renewer);
    owners.sort_by(|a, b| a.0.cmp(&b.0));
    owners.dedup();
    let held = match store {
        Some(s) => s,
        None => store.insert(open()?),
    };
    if let Err(e) = held.renew(&owners) {
        *store = None;
        return Err(e.into());
    }
    Ok(())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Drop for Lease {
    fn drop(&mut self) {
        let last = {
            let mut all = renewers().lock().unwrap_or_else(|e| e.into_inner());
            let mut owners = lock(&self.renewer.owners);
            if let Some(i) = owners.iter().position(|o| *o == self.owner) {
                owners.swap_remove(i);
            }
            let last = owners.is_empty();
            if last {
                all.remove(&self.renewer.key);
            }
            last
        };
        if last {
            // NB: outside the registry's lock: a new lease of this store starts a new
            // renewer meanwhile rather than waiting for this one to end.
            drop(lock(&self.renewer.stop).take());
            if let Some(t) = lock(&self.renewer.thread).take() {
                let _ = t.join();
            }
        }
    }
}
