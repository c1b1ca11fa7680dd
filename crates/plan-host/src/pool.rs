//! Many runs at once, at most N in flight: the pool under `planvm batch`, and under any
//! front end that runs many plans (a regression suite, plan search from Python). A run is
//! a future that ends with its [`RunReport`]; the pool runs each on the tokio runtime and
//! hands the reports back as they finish, each with the label it was spawned with. A run
//! that panics ends as a failed report (code `Internal`), never as a lost line.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use tokio::task::{Id, JoinSet};

use crate::RunReport;

/// Runs in flight, labelled with an `L` each (a plan's name, a list line, a run id).
pub struct Pool<L> {
    tasks: JoinSet<RunReport>,
    labels: HashMap<Id, L>,
    max: usize,
}

impl<L> Pool<L> {
    /// A pool that holds at most `max_in_flight` runs (at least one).
    pub fn new(max_in_flight: usize) -> Self {
        Pool {
            tasks: JoinSet::new(),
            labels: HashMap::new(),
            max: max_in_flight.max(1),
        }
    }

    /// Whether another run may start now.
    pub fn has_room(&self) -> bool {
        self.tasks.len() < self.max
    }

    /// Runs in flight.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Starts `run` on the current tokio runtime. Callers keep to [`Pool::has_room`]; the
    /// pool does not queue, so a caller can decide what to load only when a place is free.
    pub fn spawn(&mut self, label: L, run: impl Future<Output = RunReport> + Send + 'static) {
        let handle = self.tasks.spawn(run);
        self.labels.insert(handle.id(), label);
    }

    /// The next run to finish, with its label; `None` when none is in flight.
    pub async fn next(&mut self) -> Option<(L, RunReport)> {
        loop {
            let (id, report) = match self.tasks.join_next_with_id().await? {
                Ok(done) => done,
                Err(e) => {
                    let msg = format!("internal: the run ended without a report: {e}");
                    let mut report = RunReport::failed_before_start(msg, Duration::ZERO);
                    if let Some(err) = &mut report.error {
                        err.code = plan_vm::ErrorCode::Internal;
                    }
                    (e.id(), report)
                }
            };
            // NB: every task was spawned with a label; a missing one cannot happen, and
            // skipping it keeps the pool total.
            if let Some(label) = self.labels.remove(&id) {
                return Some((label, report));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_run_is_a_failed_report_with_its_label() {
        let mut pool = Pool::new(2);
        pool.spawn("ok", async {
            RunReport::failed_before_start("not really".into(), Duration::ZERO)
        });
        pool.spawn("boom", async { panic!("the run broke") });
        assert!(!pool.has_room());
        let mut got = Vec::new();
        while let Some((label, report)) = pool.next().await {
            got.push((label, report.error.map(|e| (e.code, e.message))));
        }
        got.sort_by_key(|(l, _)| *l);
        let (label, err) = &got[0];
        assert_eq!(*label, "boom");
        let (code, message) = err.clone().unwrap();
        assert_eq!(code, plan_vm::ErrorCode::Internal);
        assert!(
            message.contains("the run ended without a report"),
            "{message}"
        );
        assert_eq!(got[1].0, "ok");
        assert!(pool.is_empty());
    }

    #[tokio::test]
    async fn at_most_max_runs_are_in_flight() {
        let mut pool = Pool::new(0);
        assert!(pool.has_room());
        pool.spawn(1, std::future::pending());
        assert!(!pool.has_room(), "a pool of 0 holds one run");
        assert_eq!(pool.len(), 1);
    }
}
