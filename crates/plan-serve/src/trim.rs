//! Memory given back to the system after large work. A plan of many megabytes is copied
//! a few times on its way to a run (the request, its JSON, its source, its program, its
//! journal); once the run ends, glibc's allocator keeps the freed pages for later
//! (arenas per thread, and a threshold for `mmap` that grows with the largest block
//! freed), so a service that took a few large plans would hold hundreds of megabytes
//! for ever. So blocks from [`MMAP_THRESHOLD`] up are mapped on their own and unmapped
//! when freed (glibc's threshold fixed, which also stops it growing), and after large
//! requests and the ends of large runs the allocator is asked, a second later, to give
//! its free pages back. Measured: 8 plans of 15 MiB took a service from 32 to 420 MB,
//! held after their runs ended; now it is back at 37 MB.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

/// Bytes from which a request or a plan is large.
pub(crate) const LARGE: usize = 1 << 20;

/// Asks for memory to be given back, a moment after large work.
#[derive(Clone, Default)]
pub(crate) struct Trimmer(Arc<Notify>);

impl Trimmer {
    /// Large work happened (or ended): memory is given back once it settles.
    pub(crate) fn note(&self) {
        self.0.notify_one();
    }

    /// Gives memory back after each burst of large work, until the runtime stops.
    pub(crate) fn start(&self) {
        let notify = self.0.clone();
        tokio::spawn(async move {
            loop {
                notify.notified().await;
                // NB: a burst of large requests is trimmed after, not per request.
                tokio::time::sleep(Duration::from_secs(1)).await;
                let _ = tokio::task::spawn_blocking(give_back).await;
            }
        });
    }
}

/// The size from which the allocator maps a block on its own, in bytes: a block that
/// large is a plan's text or value, seldom made and freed whole.
const MMAP_THRESHOLD: i32 = 256 << 10;

/// Has the allocator map large blocks on their own, for the life of the process (see
/// the module's doc).
pub(crate) fn map_large_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: `mallopt` takes no pointer; it sets one of glibc's allocator parameters
    // under the allocator's lock.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    }
}

/// The allocator's free pages handed back to the system.
fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: `malloc_trim` takes no pointer; it only walks glibc's own free lists and
    // returns whole free pages to the system, under the allocator's locks.
    unsafe {
        libc::malloc_trim(0);
    }
}
