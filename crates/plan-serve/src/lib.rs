//! `plan-serve`: the HTTP service over a run store (`planvm serve`). A team submits
//! plans over a JSON API, the service runs them in the store through the run engine
//! (`plan-runs`), and anyone with the token lists, shows, branches and cancels them. Runs go on
//! when the client that submitted them goes away; runs the store holds as interrupted
//! (their process died) are resumed when the service starts.
//!
//! Module map: this file holds the service's state and its start (`Service`); `api`
//! the routes, their bodies and errors; `events` a run as server-sent events; `openapi`
//! the OpenAPI document, generated; `evals` evaluations and people's verdicts on runs;
//! `page` a page of the runs list; `queue` the store's queue shared with other services
//! and workers (PostgreSQL);
//! `auth` the bearer token; `origin` the `Host` and `Origin` checks; `listen` the
//! connections and their limits; `trim` memory given back after large plans.

mod api;
mod auth;
mod chat;
mod error;
mod evals;
mod events;
mod goals;
mod listen;
mod live;
mod mcp;
mod openapi;
mod origin;
mod page;
mod queue;
mod routes;
mod schema;
mod trim;
mod web;

use std::net::SocketAddr;
use std::sync::Arc;

use plan_host::Host;
pub use plan_runs::engine::Engine;
use plan_runs::{Error, Resume, ResumeRequest, StoreAt, read};
use plan_store::{RunStatus, RunStore};
use tokio::sync::Semaphore;

pub use listen::{ConnLimits, default_max_connections};

/// How the service runs.
pub struct Config {
    pub store: StoreAt,
    /// The tools plans may call, the host that reaches them (`replay` answers them, and
    /// the planner, from a cassette) and how goals are planned.
    pub engine: Engine,
    /// Every request must carry `Authorization: Bearer <token>` when set.
    pub token: Option<String>,
    /// Runs executing at once; the rest wait in order.
    pub max_runs: usize,
    /// The largest request body, in bytes.
    pub max_body: usize,
    /// Send again, when resuming interrupted runs at start, the `write` calls they left
    /// in flight (else such a run stays failed with its reason).
    pub retry_unknown_writes: bool,
    /// Hears about a lease that cannot be renewed.
    pub warn: fn(&Error),
    /// Host names it answers to beside loopback's and its listening address's (see
    /// `origin`).
    pub allowed_hosts: Vec<String>,
    /// How connections are held.
    pub conn_limits: ConnLimits,
    /// Makes the service's telemetry from the host's redactor (the secrets no span may
    /// carry): `Telemetry::from_env` in a process, `Telemetry::in_memory` in a test.
    pub telemetry: MakeTelemetry,
}

impl Config {
    /// A service over `store` with `engine`, as `planvm serve` starts one by default: no
    /// token, [`DEFAULT_MAX_RUNS`] at once, bodies up to [`DEFAULT_MAX_BODY`], the `write`
    /// calls of interrupted runs not sent again, loopback names only, the default
    /// connection limits, traces exported when the environment asks; `warn` hears of a
    /// lease that cannot be renewed.
    pub fn new(store: StoreAt, engine: Engine, warn: fn(&Error)) -> Config {
        Config {
            store,
            engine,
            token: None,
            max_runs: DEFAULT_MAX_RUNS,
            max_body: DEFAULT_MAX_BODY,
            retry_unknown_writes: false,
            warn,
            allowed_hosts: Vec::new(),
            conn_limits: ConnLimits::default(),
            telemetry: Box::new(plan_telemetry::Telemetry::from_env),
        }
    }
}

/// Runs executing at once by default; the rest wait in order.
pub const DEFAULT_MAX_RUNS: usize = 256;

/// The largest request body by default, in bytes.
pub const DEFAULT_MAX_BODY: usize = 16 << 20;

/// See [`Config::telemetry`]; `Ok(None)`: no trace is exported.
pub type MakeTelemetry = Box<
    dyn FnOnce(Arc<plan_llm::Redactor>) -> Result<Option<plan_telemetry::Telemetry>, String> + Send,
>;

/// What [`Service::run`] says of itself as it goes.
pub enum Notice<'a> {
    /// A run or goal the last process left interrupted was taken up, or why it was not.
    TakenUp(&'a str, Option<&'a Error>),
    /// It serves on this address.
    Listening(SocketAddr),
    /// Told to stop: the runs (this many) finish the calls they have out.
    Stopping(usize),
    /// Told again: it stops at once; the runs cut go on from their last commit point at
    /// the next start.
    StoppedAtOnce,
}

/// Counts the SIGTERMs and SIGINTs the process receives from now on: the stops a
/// [`Service::run`] or a [`plan_runs::queue::Worker`] is given. Call it on a runtime.
pub fn stop_signals() -> std::io::Result<tokio::sync::watch::Receiver<u32>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let (count, counted) = tokio::sync::watch::channel(0);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            count.send_modify(|n| *n += 1);
        }
    });
    Ok(counted)
}

/// Resolves once `counted` reaches `n`: the `n`th stop.
pub async fn nth(mut counted: tokio::sync::watch::Receiver<u32>, n: u32) {
    let _ = counted.wait_for(|c| *c >= n).await;
}

/// The service's state, shared by its requests and its runs.
pub(crate) struct State {
    pub(crate) at: StoreAt,
    /// The tools, their host and the plans compiled lately (a plan posted many times, an
    /// evaluation's, is compiled once).
    pub(crate) engine: Engine,
    pub(crate) host: Arc<Host>,
    pub(crate) token: Option<Vec<u8>>,
    pub(crate) slots: Arc<Semaphore>,
    /// How many slots there are: `--max-runs`.
    pub(crate) max_runs: u32,
    pub(crate) max_body: usize,
    pub(crate) warn: fn(&Error),
    /// How goals are planned: the planner's LLM and what it is given, or why there is no
    /// LLM (goals are refused then).
    pub(crate) planner: Result<Arc<plan_runs::goal::GoalPlanner>, String>,
    /// The runs and goals going here, for their event streams.
    pub(crate) live: Arc<live::Live>,
    /// Writes the new runs, each commit point in a group transaction.
    pub(crate) writer: plan_runs::Writer,
    /// Connections kept to read the store, so that a request does not open one.
    readers: std::sync::Mutex<Vec<Box<dyn RunStore>>>,
    /// Reads going at once: at most one per kept connection (more would open
    /// connections, and take threads from the runs, for no more reads a second).
    reading: Arc<Semaphore>,
    /// Set once the service stops taking requests: streams and waits end then.
    stopping: tokio::sync::watch::Sender<bool>,
    /// Exports each run's trace when the environment asks for it (docs/telemetry.md).
    telemetry: Option<plan_telemetry::Telemetry>,
    /// Runs given a person's answer that have not ended (see `api::spawn_claimed`).
    answering: tokio::sync::watch::Sender<usize>,
    /// Whether runs of plans go into the store's queue (see `queue::shared`).
    pub(crate) queueing: std::sync::atomic::AtomicBool,
    /// Gives memory back after large requests and runs.
    pub(crate) trimmer: trim::Trimmer,
}

/// Counts a run given a person's answer while it goes (see `State::answering`).
pub(crate) struct Answering(Arc<State>);

impl Answering {
    pub(crate) fn start(state: &Arc<State>) -> Answering {
        state.answering.send_modify(|n| *n += 1);
        Answering(state.clone())
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.answering.send_modify(|n| *n -= 1);
    }
}

/// Connections kept for reading, and reads at once.
const READERS: usize = 4;

impl State {
    /// A trace for a run or a goal (`command`: `run`, `ask`, `resume`), the child of the
    /// `traceparent` the request sent if any; None when traces are not exported.
    pub(crate) fn trace(
        &self,
        command: &str,
        goal: Option<&str>,
        headers: &axum::http::HeaderMap,
    ) -> Option<plan_telemetry::Trace> {
        let parent = headers.get("traceparent").and_then(|v| v.to_str().ok());
        let workflow = plan_telemetry::Workflow {
            command,
            plan: None,
            goal,
            run_id: None,
        };
        self.telemetry.as_ref().map(|t| t.start(&workflow, parent))
    }

    /// A slot to run in, once one is free; None once the service stops its runs (the run
    /// waiting for it reads as interrupted when the service is gone, and goes on at the
    /// next start).
    pub(crate) async fn slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let slot = self.slots.clone().acquire_owned().await.ok()?;
        (!self.host.draining()).then_some(slot)
    }

    /// Resolves once the service is stopping.
    pub(crate) async fn stopped(&self) {
        let mut rx = self.stopping.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    /// Stored run `id` read, checked and claimed to go on, as `planvm resume` does (None:
    /// it had finished).
    pub(crate) fn claim(
        &self,
        id: &str,
        retry_unknown_writes: bool,
    ) -> Result<Option<plan_runs::Claimed>, Error> {
        let request = ResumeRequest {
            retry_unknown_writes,
            ..ResumeRequest::new(id)
        };
        match plan_runs::resume(&self.at, request)? {
            Resume::Finished(_) => Ok(None),
            Resume::Ready(ready) => ready.claim(self.warn).map(Some),
        }
    }

    /// `f` on a connection to read the store, off the runtime's threads.
    pub(crate) async fn read<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&dyn RunStore) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, error::ApiError> {
        // NB: never closed; held by the read itself, which goes on when the request that
        // asked for it is dropped.
        let reading = self.reading.clone().acquire_owned().await;
        let state = self.clone();
        error::blocking(move || {
            let _reading = reading;
            let kept = state
                .readers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop();
            let store = match kept {
                Some(s) => s,
                None => state.at.open(plan_runs::open::Access::Read)?,
            };
            let read = f(&*store);
            let mut readers = state.readers.lock().unwrap_or_else(|e| e.into_inner());
            if readers.len() < READERS {
                readers.push(store);
            }
            read
        })
        .await
    }
}

/// Each run or goal taken up at start: `run ID` or `goal ID`, and why it could not go on
/// when it could not.
pub type TakenUp = Vec<(String, Result<(), Error>)>;

/// Why a service could not start.
#[derive(Debug)]
pub enum StartError {
    /// The store cannot be opened or is not one.
    Store(Error),
    /// The tools' host cannot be set up (a cassette, a backend's configuration).
    Host(Error),
}

/// A service ready to take requests.
pub struct Service {
    state: Arc<State>,
    retry_unknown_writes: bool,
    /// What the operator should know before it serves.
    warnings: Vec<String>,
    allowed_hosts: Vec<String>,
    conn_limits: ConnLimits,
    /// Takes runs from the store's queue while the service serves, on a PostgreSQL
    /// store (see `queue`).
    worker: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Whether the service may listen on `addr` without a token: only on loopback.
pub fn needs_token(addr: &SocketAddr) -> bool {
    !addr.ip().is_loopback()
}

/// The token of a service listening on `listen`, from the environment variable `name`
/// (none given: no token, refused off loopback).
pub fn token_from_env(
    name: Option<&str>,
    listen: &SocketAddr,
) -> Result<Option<String>, TokenError> {
    let Some(name) = name else {
        return match needs_token(listen) {
            true => Err(TokenError::Needed(*listen)),
            false => Ok(None),
        };
    };
    match std::env::var(name) {
        Ok(t) if !t.is_empty() => Ok(Some(t)),
        _ => Err(TokenError::Unset(name.to_owned())),
    }
}

/// Why a service cannot have the token it needs (see [`token_from_env`]).
#[derive(Debug)]
pub enum TokenError {
    /// Off loopback with no token: anyone who can reach the address could run plans.
    Needed(SocketAddr),
    /// The variable that should hold the token is unset or empty.
    Unset(String),
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenError::Needed(addr) => write!(
                f,
                "{addr} is not a loopback address: anyone who can reach it could run plans; give --token-env NAME"
            ),
            TokenError::Unset(name) => {
                write!(f, "--token-env {name}: the variable is unset or empty")
            }
        }
    }
}

impl Service {
    /// The service over `config`'s store (opened, or created, now: a file that is not a
    /// store is refused here) and tools.
    pub fn new(config: Config) -> Result<Service, StartError> {
        trim::map_large_blocks();
        let writer =
            plan_runs::Writer::start(&config.store, config.warn).map_err(StartError::Store)?;
        let engine = config.engine;
        let host = engine
            .host()
            .map_err(|e| StartError::Host(e.clone()))?
            .clone();
        let planner = engine.goal_planner().cloned().map_err(|e| e.message);
        let max_runs = u32::try_from(config.max_runs.max(1)).unwrap_or(u32::MAX);
        let mut warnings = host.warnings().to_vec();
        let made = (config.telemetry)(host.redactor().clone());
        let telemetry = plan_telemetry::Telemetry::or_warn(made, |w| warnings.push(w));
        // NB: each database's grounding index is built now, not in a goal's task on the
        // runtime's threads; a goal then only asks SQLite whether the schema moved.
        for w in host.ground("").warnings {
            (config.warn)(&Error::new(plan_runs::ErrorKind::Io, w));
        }
        Ok(Service {
            state: Arc::new(State {
                at: config.store,
                engine,
                host,
                token: config.token.map(String::into_bytes),
                slots: Arc::new(Semaphore::new(max_runs as usize)),
                max_runs,
                max_body: config.max_body,
                warn: config.warn,
                planner,
                live: Arc::default(),
                writer,
                readers: std::sync::Mutex::default(),
                reading: Arc::new(Semaphore::new(READERS)),
                stopping: tokio::sync::watch::Sender::new(false),
                telemetry,
                answering: tokio::sync::watch::Sender::new(0),
                queueing: std::sync::atomic::AtomicBool::new(false),
                trimmer: trim::Trimmer::default(),
            }),
            retry_unknown_writes: config.retry_unknown_writes,
            warnings,
            allowed_hosts: config.allowed_hosts,
            conn_limits: config.conn_limits,
            worker: std::sync::Mutex::default(),
        })
    }

    /// The host's warnings (short keys, ...) and the telemetry's, for the operator.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Resumes every run the store holds as interrupted, with the guarantees of `planvm
    /// resume`, and takes up every goal it was asking (see `goals`); each run's or goal's
    /// id, and why it could not go on when it could not. Call from within the runtime the
    /// service runs on.
    pub fn resume_interrupted(&self) -> TakenUp {
        let (mut resumed, taken) = goals::take_up_goals(&self.state, self.retry_unknown_writes);
        let runs = match self
            .state
            .at
            .open(plan_runs::open::Access::Existing)
            .and_then(|s| read::list(&*s))
        {
            Ok(runs) => runs,
            Err(e) => {
                resumed.push((String::new(), Err(e)));
                return resumed;
            }
        };
        let runs = runs
            .into_iter()
            .filter(|r| r.status == RunStatus::Interrupted && !taken.contains(&r.id))
            .map(|r| {
                let resumed = self
                    .state
                    .claim(&r.id, self.retry_unknown_writes)
                    .map(|claimed| {
                        if let Some(claimed) = claimed {
                            api::spawn_claimed(self.state.clone(), claimed, None);
                        }
                    });
                (format!("run {}", r.id), resumed)
            });
        resumed.extend(runs);
        resumed
    }

    /// Serves the service's MCP tools (`ask`, `run_plan`, `run_status`) over this
    /// process's stdin and stdout until the client closes them (`planvm mcp`).
    pub async fn serve_stdio(&self) -> Result<(), String> {
        let out = mcp::stdio(self.state.clone()).await;
        self.state.stopping.send_replace(true);
        out
    }

    /// Why goals are refused (no planner's LLM configured), if they are.
    pub fn no_planner(&self) -> Option<&str> {
        self.state.planner.as_ref().err().map(String::as_str)
    }

    /// Serves requests on `listener` until `shutdown` resolves. From then on the runs
    /// stop at their next commit point ([`Host::drain`]: no new call is sent, those out
    /// are waited for and their results committed), and no queued run starts;
    /// [`Service::drained`] resolves once they have. Each reads as interrupted once this
    /// process is gone, and is resumed at the next start. Runs cut before that (the
    /// runtime dropped) are resumed too, from their last commit point; the MCP servers
    /// they call are killed with them rather than stopped under a call that would then
    /// fail. The store's writer thread writes what it was given and is joined once the
    /// last of them is gone.
    ///
    /// [`Host::drain`]: plan_host::Host::drain
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        // NB: the server waits for its open connections: event streams and waits for an
        // answer end once told.
        if queue::store_shares(&self.state) {
            let worker = queue::work(self.state.clone(), self.retry_unknown_writes);
            *self.worker.lock().unwrap_or_else(|e| e.into_inner()) = Some(worker);
        }
        let state = self.state.clone();
        let shutdown = async move {
            shutdown.await;
            state.host.drain();
            state.stopping.send_replace(true);
        };
        let hosts = origin::Hosts::new(
            &self.allowed_hosts,
            listener.local_addr()?,
            self.state.token.is_some(),
        );
        let app = routes::router(self.state.clone(), Arc::new(hosts));
        let max_body = self.state.max_body;
        self.state.trimmer.start();
        let trimmer = self.state.trimmer.clone();
        listen::serve(
            listener,
            app,
            (self.conn_limits, max_body),
            trimmer,
            shutdown,
        )
        .await
    }

    /// What a service of its own process does from start to end: takes up what the last
    /// process left interrupted, serves on `listener` until `stops` has counted one
    /// request to stop, then lets the runs finish the calls they have out unless a second
    /// comes. `notice` hears each step, for the people watching.
    pub async fn run(
        &self,
        listener: tokio::net::TcpListener,
        stops: tokio::sync::watch::Receiver<u32>,
        notice: &mut dyn FnMut(Notice<'_>),
    ) -> std::io::Result<()> {
        for (what, taken) in self.resume_interrupted() {
            notice(Notice::TakenUp(&what, taken.as_ref().err()));
        }
        notice(Notice::Listening(listener.local_addr()?));
        let served = self.serve(listener, nth(stops.clone(), 1)).await;
        notice(Notice::Stopping(self.running()));
        tokio::select! {
            () = self.drained() => {}
            () = nth(stops, 2) => notice(Notice::StoppedAtOnce),
        }
        served
    }

    /// How many runs or goals hold a slot now (running, or stopping); runs taken from a
    /// PostgreSQL store's queue, and runs given an answer as the service stops, hold none.
    pub fn running(&self) -> usize {
        (self.state.max_runs as usize).saturating_sub(self.state.slots.available_permits())
    }

    /// Resolves once every run that was going when the service stopped has stopped at
    /// a commit point (see [`Service::serve`]).
    pub async fn drained(&self) {
        self.state.host.drain();
        self.state.stopping.send_replace(true);
        // NB: the semaphore is fair: the runs queued before this get their slot first
        // and give it back at once, refused; this waits for the running ones only.
        let _ = self.state.slots.acquire_many(self.state.max_runs).await;
        let mut answering = self.state.answering.subscribe();
        let _ = answering.wait_for(|n| *n == 0).await;
        let worker = self.worker.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(worker) = worker {
            let _ = worker.await;
        }
    }

    /// Sends the spans left, once the service has stopped (the runs it cut end untraced);
    /// how many spans did not reach the collector.
    pub fn finish_telemetry(&self) -> u64 {
        self.state.telemetry.as_ref().map_or(0, |t| t.finish())
    }
}
