//! A run's lease: renewed from a thread of its own, on a connection of its own, while the
//! run goes on, so that a run waiting minutes for one call still shows as `running`, and
//! a run whose process died shows as `interrupted` within [`plan_store::LEASE_MS`].

use std::sync::mpsc;
use std::time::Duration;

use plan_store::{LEASE_MS, Owner, RunStore};

use crate::Error;

/// Opens the lease's own connection to the store, in the lease's thread.
pub type Opener = Box<dyn FnOnce() -> Result<Box<dyn RunStore>, Error> + Send>;

/// Renews `owner`'s leases until dropped.
pub struct Lease {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Lease {
    /// Starts renewing every [`LEASE_MS`] / 4. `warn` hears, once, that the store could
    /// not be opened or a renewal failed: not the run's failure (at worst another process
    /// takes the run over once the lease lapses, and from then on this one's commit points
    /// are refused, which fails the run).
    pub fn start(open: Opener, owner: Owner, warn: fn(&Error)) -> Lease {
        let (tx, rx) = mpsc::channel::<()>();
        let every = Duration::from_millis(u64::try_from(LEASE_MS / 4).unwrap_or(2_500));
        let thread = std::thread::spawn(move || {
            let mut store = match open() {
                Ok(s) => s,
                Err(e) => return warn(&e),
            };
            let mut warned = false;
            while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(every) {
                if let Err(e) = store.renew(&owner)
                    && !std::mem::replace(&mut warned, true)
                {
                    warn(&e.into());
                }
            }
        });
        Lease {
            stop: Some(tx),
            thread: Some(thread),
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
