//! The service started in the test's own process, over real HTTP on loopback: what
//! `planvm serve` does, without the binary. Tools and planners are loopback servers too
//! (`loopback.rs`, which the binary's tests share).
#![allow(dead_code, unreachable_pub)]

mod loopback;
pub use loopback::*;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use plan_host::HostOptions;
use plan_manifest::Manifest;
use plan_runs::StoreAt;
use plan_serve::{Config, Notice, Service};
use plan_store::Durability;

/// The token of services started with [`Setup::token`].
pub const TOKEN: &str = "s3cret-token-for-tests";

/// How a test's service is set up; as `planvm serve`'s defaults unless said.
#[derive(Default)]
pub struct Setup {
    /// The tools file (default: the built-in tools).
    pub tools: Option<PathBuf>,
    /// Every request needs [`TOKEN`].
    pub token: bool,
    /// The environment the tools file's keys are read from.
    pub env: Vec<(&'static str, &'static str)>,
    /// Runs at once (default 256).
    pub max_runs: Option<usize>,
    /// Host names answered to besides loopback's.
    pub allowed_hosts: Vec<String>,
    /// Its runs' traces (default: none).
    pub telemetry: Option<plan_serve::MakeTelemetry>,
}

/// A service listening on a free loopback port, on a runtime of its own (so that a test,
/// async or not, talks to it as a client would); stopped when dropped, its runs cut as a
/// killed process's are, or stopped cleanly by [`Served::stop`].
pub struct Served {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// Counts the requests to stop, as `planvm serve` counts signals: one drains the
    /// runs, two cut them.
    stop: Option<tokio::sync::watch::Sender<u32>>,
    /// How the service stopped when told to drain: what serving returned.
    ended: std::sync::mpsc::Receiver<std::io::Result<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Served {
    /// Stops the service as `planvm serve` does on SIGTERM: it stops taking requests, and
    /// the runs it has (its queue worker's too) stop at their next commit point. What
    /// serving returned; the test fails if the service has not stopped within `patience`
    /// (a give-up, far beyond what stopping takes).
    pub fn stop(mut self, patience: Duration) -> std::io::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(1);
        }
        let ended = self
            .ended
            .recv_timeout(patience)
            .unwrap_or_else(|e| panic!("the service did not stop ({e}; waited {patience:?})"));
        if let Some(thread) = self.thread.take() {
            thread
                .join()
                .expect("the service's thread ends without a panic");
        }
        ended
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(2);
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Starts the service over the store `db` (an SQLite file, or a PostgreSQL URL as a path)
/// as `setup` says and runs it as `planvm serve` does ([`Service::run`]): it takes up
/// what was interrupted, and listens.
pub fn serve(db: &Path, setup: Setup) -> Served {
    plan_host::install_crypto();
    let config = config(db, setup);
    let (stop, stops) = tokio::sync::watch::channel(0);
    let (listening, base) = std::sync::mpsc::channel();
    let (ending, ended) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let service = Service::new(config).unwrap_or_else(|_| panic!("the service starts"));
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            // NB: cut rather than drained (told twice), the runs stop where they are (the
            // runtime goes with them), as a killed process's would.
            let served = service
                .run(listener, stops, &mut |notice| match notice {
                    Notice::TakenUp(id, Some(e)) => panic!("{id} was not taken up: {e}"),
                    Notice::Listening(addr) => {
                        let _ = listening.send(format!("http://{addr}"));
                    }
                    _ => {}
                })
                .await;
            let _ = ending.send(served);
        });
    });
    let base = base.recv().expect("the service listens");
    Served {
        base,
        stop: Some(stop),
        ended,
        thread: Some(thread),
    }
}

/// What `planvm serve` would be given for `setup`.
fn config(db: &Path, setup: Setup) -> Config {
    let vars: std::collections::HashMap<String, String> = setup
        .env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let env: plan_llm::EnvLookup = Arc::new(move |name| {
        vars.get(name)
            .cloned()
            .ok_or(std::env::VarError::NotPresent)
    });
    let manifest = match &setup.tools {
        Some(path) => plan_mcp::load(path, env.clone(), plan_mcp::Listing::Cached).unwrap(),
        None => Manifest::builtin(),
    };
    let files = plan_runs::engine::PlanningFiles::of_tools(setup.tools.as_deref());
    let planning = plan_runs::engine::load_planning(&manifest, files).unwrap();
    let host = HostOptions {
        env,
        ..HostOptions::default()
    };
    let store = StoreAt::new(db, Durability::Full);
    Config {
        token: setup.token.then(|| TOKEN.to_owned()),
        max_runs: setup.max_runs.unwrap_or(plan_serve::DEFAULT_MAX_RUNS),
        allowed_hosts: setup.allowed_hosts,
        telemetry: setup.telemetry.unwrap_or_else(|| Box::new(|_| Ok(None))),
        ..Config::new(
            store,
            plan_serve::Engine::new(manifest, planning, host),
            |_| {},
        )
    }
}
