//! `Host`: picks a backend per tool, applies the per-call timeout, and records calls.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::backend::Backend;
use crate::cassette::{Cassette, Recorder, ReplayBackend, ReplayFirst};
use crate::error::{HostError, HostErrorKind, ToolError, ToolErrorKind};
use crate::http::HttpBackend;
use crate::openai::OpenAiBackend;
use plan_llm::{
    Connector, EndpointConfig, EnvLookup, MIN_SECRET_BYTES, Redactor, RetryPolicy, process_env,
    secs,
};
use plan_manifest::{BackendConfig, Manifest};
use plan_vm::ToolRequest;

const NO_BACKEND: &str = "no backend for tool";
const NO_BACKEND_HELP: &str = "pass --replay CASSETTE, or configure [tool.backend] (or [defaults.backend]) in the --tools file";

/// The tool name the VM uses for LLM conditions.
pub const CONDITION_TOOL: &str = "jmp_condition";
/// Per-attempt timeout and concurrency of an `http` backend that sets none.
const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(30);
const DEFAULT_HTTP_CONCURRENCY: usize = 8;

/// A call's answer, with the tokens it cost when its backend says.
type Answer = Result<(Value, Option<plan_llm::Usage>), ToolError>;

/// A call's attempts that failed and were tried again, and whether a recording answered it.
pub(crate) type CallNotes = (Vec<plan_llm::Retry>, bool);

/// How a `Host` is set up. `Default` uses the process environment and no cassettes.
#[derive(Clone)]
pub struct HostOptions {
    /// Serve every tool from this cassette (`--replay`).
    pub replay: Option<PathBuf>,
    /// Append every call the run commits to this cassette (`--record`).
    pub record: Option<PathBuf>,
    /// Serve a tool call from this cassette when it has the call, else from the tool's
    /// backend, appending the live answer to it (`eval --tools-from`). A missing file is
    /// an empty cassette. The planner is not served from it.
    pub tools_from: Option<PathBuf>,
    /// Limit on one tool call, retries included (`--tool-timeout`).
    pub tool_timeout: Option<Duration>,
    /// Limit on the whole run (`--timeout`).
    pub deadline: Option<Duration>,
    /// Where API keys are looked up.
    pub env: EnvLookup,
    /// First retry delay of network backends (doubles each retry, with jitter).
    pub retry_base_delay: Duration,
    /// Ceiling of one retry delay.
    pub retry_max_delay: Duration,
    /// The MCP clients to call the `[[mcp]]` servers through, shared by the hosts of one
    /// process that are made one after another (a Python program's runs); none: the host
    /// starts its own, at first use.
    pub mcp: Option<Arc<plan_mcp::Servers>>,
}

impl Default for HostOptions {
    fn default() -> Self {
        let retry = RetryPolicy::default();
        HostOptions {
            replay: None,
            record: None,
            tools_from: None,
            tool_timeout: None,
            deadline: None,
            env: process_env(),
            retry_base_delay: retry.base_delay,
            retry_max_delay: retry.max_delay,
            mcp: None,
        }
    }
}

impl fmt::Debug for HostOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostOptions")
            .field("replay", &self.replay)
            .field("record", &self.record)
            .field("tools_from", &self.tools_from)
            .field("tool_timeout", &self.tool_timeout)
            .field("deadline", &self.deadline)
            .field("retry_base_delay", &self.retry_base_delay)
            .field("retry_max_delay", &self.retry_max_delay)
            .finish_non_exhaustive()
    }
}

/// A database's grounding index, and the schema version it was built at.
pub(crate) type Cached = (i64, Arc<plan_sql::ground::Index>);

/// Serves a run's tool requests.
pub struct Host {
    warnings: Vec<String>,
    /// NB: shared: a batch makes a host for each replayed run, all of one manifest.
    manifest: Arc<Manifest>,
    opts: HostOptions,
    /// Builds network backends; holds every secret this host has read, removed from
    /// outputs and errors.
    connector: Connector,
    replay: Option<Arc<ReplayBackend>>,
    recorder: Option<Recorder>,
    /// `tools_from`: the cassette and the recorder appending to it.
    tools_from: Option<(Arc<ReplayBackend>, Arc<Recorder>)>,
    /// Backend of each tool, built on first use and shared by all its calls (so the
    /// concurrency limit is per tool).
    backends: Mutex<HashMap<String, Arc<dyn Backend>>>,
    /// Cassettes named by `kind = "replay"` backends, loaded once per file.
    cassettes: Mutex<HashMap<PathBuf, Arc<ReplayBackend>>>,
    /// Each `sql` tool's database index for grounding, by tool.
    pub(crate) grounds: Mutex<HashMap<String, Cached>>,
    /// The `[[mcp]]` servers, each started at first use; [`Host::shutdown`] stops them.
    mcp: Arc<plan_mcp::Servers>,
    /// Set by [`Host::drain`]: runs send no new call, and stop once none is out.
    draining: std::sync::atomic::AtomicBool,
}

impl fmt::Debug for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Host")
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

impl Host {
    /// A host answering every call from `cassette` (a batch's replayed run: a fresh
    /// replay of a cassette parsed once); `opts.replay` is not read.
    pub fn replaying(
        manifest: impl Into<Arc<Manifest>>,
        opts: HostOptions,
        cassette: Arc<ReplayBackend>,
    ) -> Result<Host, HostError> {
        let mut host = Host::new(
            manifest,
            HostOptions {
                replay: None,
                ..opts
            },
        )?;
        host.replay = Some(cassette);
        Ok(host)
    }

    /// Loads the replay cassette and opens the record file, if any. A malformed cassette
    /// is reported here, before anything runs.
    pub fn new(manifest: impl Into<Arc<Manifest>>, opts: HostOptions) -> Result<Host, HostError> {
        let manifest = manifest.into();
        let replay = match &opts.replay {
            Some(p) => Some(Arc::new(ReplayBackend::load(p)?)),
            None => None,
        };
        let recorder = match &opts.record {
            Some(p) => Some(Recorder::create(p)?),
            None => None,
        };
        let tools_from = match &opts.tools_from {
            Some(p) => {
                let cassette = if p.exists() {
                    ReplayBackend::load(p)?
                } else {
                    ReplayBackend::new(Cassette::default(), p.display().to_string())
                };
                Some((Arc::new(cassette), Arc::new(Recorder::create(p)?)))
            }
            None => None,
        };
        let connector = Connector::new(
            opts.env.clone(),
            Arc::new(Redactor::new()),
            opts.retry_base_delay,
            opts.retry_max_delay,
        );
        let mut warnings = replay
            .as_deref()
            .map_or_else(Vec::new, |r| r.warnings().to_vec());
        if replay.is_none() {
            warnings.extend(short_keys(&manifest, &opts.env));
        }
        let mcp = match &opts.mcp {
            Some(shared) => shared.clone(),
            None => Arc::new(plan_mcp::Servers::new(
                &manifest.mcp,
                opts.env.clone(),
                connector.redactor().clone(),
            )),
        };
        Ok(Host {
            mcp,
            warnings,
            manifest,
            opts,
            connector,
            replay,
            recorder,
            tools_from,
            backends: Mutex::new(HashMap::new()),
            cassettes: Mutex::new(HashMap::new()),
            grounds: Mutex::new(HashMap::new()),
            draining: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// From now on, the runs on this host send no new tool call: each waits for the calls
    /// it has out, commits their results, and ends as [`RunStatus::Stopped`] (a stored
    /// run reads as interrupted then, and goes on where it stopped when resumed). A run
    /// that needs no further call runs to its end. Calls answered without sending
    /// anything still go: a stored answer, a person's answer given to the run, a question
    /// to a person (the run stops for its answer).
    ///
    /// [`RunStatus::Stopped`]: crate::RunStatus::Stopped
    pub fn drain(&self) {
        self.draining
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether [`Host::drain`] was called.
    pub fn draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Stops the MCP servers this host started (each closes its input and is given a few
    /// seconds to exit). Call it before the runtime ends; one that was not is killed
    /// when the host is dropped.
    pub async fn shutdown(&self) {
        self.mcp.shutdown().await;
    }

    /// `fut` run to its end, then the MCP servers shut down (cleanly, rather than killed
    /// when the process exits); `None` when a Ctrl-C came first, the servers shut down all
    /// the same, for the process to exit as interrupted.
    pub async fn to_end<T>(&self, fut: impl std::future::Future<Output = T>) -> Option<T> {
        // NB: the servers run in process groups of their own, which a Ctrl-C at the
        // terminal does not reach: they are stopped here.
        let interrupted = async {
            if self.manifest().mcp.is_empty() || tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let out = tokio::select! {
            out = fut => Some(out),
            () = interrupted => None,
        };
        self.shutdown().await;
        out
    }

    /// The clients of the `[[mcp]]` servers, for another host to share
    /// ([`HostOptions::mcp`]).
    pub fn mcp(&self) -> &Arc<plan_mcp::Servers> {
        &self.mcp
    }

    /// The `--replay` cassette, if any (a planner answers from it too).
    pub fn replay(&self) -> Option<&Arc<ReplayBackend>> {
        self.replay.as_ref()
    }

    /// What the CLI should show before anything runs: what loading the `--replay`
    /// cassette tolerated, and API keys too short to be redacted.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    pub fn options(&self) -> &HostOptions {
        &self.opts
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Serves `tool` with `backend` instead of what the configuration says (tests, embedders).
    pub fn set_backend(&self, tool: &str, backend: Arc<dyn Backend>) {
        self.backends
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(tool.to_owned(), backend);
    }

    /// Checks that every tool can be served (backend configured, secrets present),
    /// reporting all problems at once.
    pub fn prepare<'a>(&self, tools: impl IntoIterator<Item = &'a str>) -> Result<(), HostError> {
        let mut unserved = Vec::new();
        let mut problems = Vec::new();
        for t in tools {
            match self.backend_for(t) {
                Ok(_) => {}
                Err(e) if e.kind == ToolErrorKind::Config && e.message.starts_with(NO_BACKEND) => {
                    unserved.push(format!("`{t}`"));
                }
                Err(e) => problems.push(e.message),
            }
        }
        if !unserved.is_empty() {
            // One line for all of them: the fix is the same.
            let s = if unserved.len() == 1 { "" } else { "s" };
            problems.insert(
                0,
                format!("{NO_BACKEND}{s} {}: {NO_BACKEND_HELP}", unserved.join(", ")),
            );
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(HostError::new(HostErrorKind::Config, problems.join("\n")))
        }
    }

    /// The `--record` cassette, if any. The driver records each call when the VM
    /// commits it (see [`crate::run_plan`]), not when it completes.
    pub fn recorder(&self) -> Option<&Recorder> {
        self.recorder.as_ref()
    }

    /// The secrets this host has read (API keys), for redacting other outputs too.
    pub fn redactor(&self) -> &Arc<Redactor> {
        self.connector.redactor()
    }

    /// What builds this host's network backends (a planner shares it, so its key is
    /// redacted from the run's outputs too).
    pub fn connector(&self) -> &Connector {
        &self.connector
    }

    /// Performs one request: backend lookup, per-call timeout. Outputs and errors come
    /// back with every secret of the host redacted, whatever the backend.
    pub async fn call(&self, req: &ToolRequest) -> Result<Value, ToolError> {
        self.call_with_usage(req).await.map(|(v, _)| v)
    }

    /// [`Host::call`], with the tokens the call cost when its backend says (an LLM's).
    pub async fn call_with_usage(
        &self,
        req: &ToolRequest,
    ) -> Result<(Value, Option<plan_llm::Usage>), ToolError> {
        let out = match self.backend_for(&req.tool) {
            Ok(backend) => self.timed(backend.call_with_usage(req)).await,
            Err(e) => Err(e),
        };
        self.redacted(out)
    }

    /// [`Host::call_with_usage`], with the call's notes: its attempts that failed and were
    /// tried again, and whether a recording answered it.
    ///
    /// NB: when the cassette serves the call, its answer is the note: the task-local
    /// notes, which cost each poll of the call a swap, are kept for the backends that
    /// retry (a batch of replayed runs spent about 3% of its time on them).
    pub(crate) async fn call_noted(&self, req: &ToolRequest) -> (Answer, CallNotes) {
        let backend = match self.backend_for(&req.tool) {
            Ok(b) => b,
            Err(e) => return (self.redacted(Err(e)), (Vec::new(), false)),
        };
        let replays = self
            .replay
            .as_ref()
            .is_some_and(|r| std::ptr::addr_eq(Arc::as_ptr(r), Arc::as_ptr(&backend)));
        if replays {
            let out = self.redacted(self.timed(backend.call_with_usage(req)).await);
            let replayed = out.is_ok();
            return (out, (Vec::new(), replayed));
        }
        // NB: boxed: a call that goes out waits for its backend anyway, and room for the
        // notes in the future would be reserved in every replayed call in flight too.
        let mut call = Box::pin(plan_llm::noting(self.timed(backend.call_with_usage(req))));
        let out = call.as_mut().await;
        let notes = call.as_mut().take_value().unwrap_or_default().into_parts();
        (self.redacted(out), notes)
    }

    /// `out` with every secret of the host redacted.
    fn redacted(&self, out: Answer) -> Answer {
        match out {
            Ok((v, usage)) => Ok((self.redactor().value(v), usage)),
            Err(mut e) => {
                if let Cow::Owned(m) = self.redactor().text(&e.message) {
                    e.message = m;
                }
                Err(e)
            }
        }
    }

    /// A backend's answer to `fut`'s call, within the per-call timeout.
    async fn timed(&self, fut: futures::future::BoxFuture<'_, Answer>) -> Answer {
        match self.opts.tool_timeout {
            // NB: boxed: a timer is large, and a future that only might hold one would
            // reserve its room in every call of every run (a batch holds thousands).
            Some(t) => Box::pin(tokio::time::timeout(t, fut)).await.map_err(|_| {
                ToolError::new(
                    ToolErrorKind::Timeout,
                    format!("timed out after {} s", secs(t)),
                )
            })?,
            None => fut.await,
        }
    }

    /// The backend serving `tool`: the replay cassette if one was given, else the tool's
    /// configured backend, else the manifest's default.
    pub fn backend_for(&self, tool: &str) -> Result<Arc<dyn Backend>, ToolError> {
        if let Some(b) = self
            .backends
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(tool)
        {
            return Ok(b.clone());
        }
        if let Some(r) = &self.replay {
            return Ok(r.clone());
        }
        let own = self.manifest.get(tool).and_then(|t| t.backend.as_ref());
        let backend = match own {
            Some(cfg) => self.replay_first(self.build(tool, cfg)?),
            // Conditions go to the same LLM as `llm_generate` unless configured apart;
            // sharing the instance also shares its concurrency limit.
            None if tool == CONDITION_TOOL
                && self
                    .manifest
                    .get("llm_generate")
                    .is_some_and(|t| t.backend.is_some()) =>
            {
                self.backend_for("llm_generate")?
            }
            None => match &self.manifest.default_backend {
                Some(cfg) => self.replay_first(self.build(tool, cfg)?),
                None => {
                    return Err(ToolError::new(
                        ToolErrorKind::Config,
                        format!("{NO_BACKEND} `{tool}`: {NO_BACKEND_HELP}"),
                    ));
                }
            },
        };
        let mut map = self.backends.lock().unwrap_or_else(|p| p.into_inner());
        Ok(map.entry(tool.to_owned()).or_insert(backend).clone())
    }

    /// `live`, or, with `tools_from`, the cassette first and `live` for what it lacks.
    fn replay_first(&self, live: Arc<dyn Backend>) -> Arc<dyn Backend> {
        match &self.tools_from {
            Some((cassette, recorder)) => Arc::new(ReplayFirst {
                cassette: cassette.clone(),
                live,
                recorder: recorder.clone(),
                redactor: self.redactor().clone(),
            }),
            None => live,
        }
    }

    fn build(&self, tool: &str, cfg: &BackendConfig) -> Result<Arc<dyn Backend>, ToolError> {
        let config_err = |msg: String| ToolError::new(ToolErrorKind::Config, msg);
        match cfg {
            BackendConfig::Openai { model, .. } => Ok(Arc::new(OpenAiBackend {
                chat: self.connector.chat(&format!("tool `{tool}`"), cfg)?,
                price: self.manifest.pricing.get(model).copied(),
            })),
            BackendConfig::Http {
                url,
                pointer,
                api_key_env,
                timeout_secs,
                max_retries,
                concurrency,
            } => {
                if let Some(p) = pointer
                    .as_deref()
                    .filter(|p| !p.is_empty() && !p.starts_with('/'))
                {
                    return Err(config_err(format!(
                        "tool `{tool}`: pointer `{p}` is not a JSON pointer (it must be empty or start with `/`)"
                    )));
                }
                let endpoint = self.connector.endpoint(
                    &format!("tool `{tool}`"),
                    &EndpointConfig {
                        url,
                        api_key_env: api_key_env.as_deref(),
                        timeout_secs: *timeout_secs,
                        max_retries: *max_retries,
                        concurrency: *concurrency,
                        default_timeout: DEFAULT_HTTP_TIMEOUT,
                        default_concurrency: DEFAULT_HTTP_CONCURRENCY,
                    },
                )?;
                Ok(Arc::new(HttpBackend {
                    endpoint,
                    pointer: pointer.clone(),
                }))
            }
            BackendConfig::Sql { .. } => {
                // NB: the query is what the backend runs: a tool without it is a mistake.
                let takes_sql = self
                    .manifest
                    .get(tool)
                    .and_then(|t| t.param("sql"))
                    .is_some_and(|p| {
                        matches!(
                            p.ty,
                            plan_manifest::ParamType::String | plan_manifest::ParamType::Any
                        )
                    });
                if !takes_sql {
                    return Err(config_err(format!(
                        "tool `{tool}` has a sql backend but no `sql` param (a string) for its query"
                    )));
                }
                Ok(Arc::new(crate::sql::SqlBackend::new(
                    tool,
                    cfg,
                    &self.opts.env,
                    self.redactor(),
                )?))
            }
            BackendConfig::Mcp {
                server,
                tool: remote,
            } => Ok(Arc::new(crate::mcp::McpBackend {
                servers: self.mcp.clone(),
                server: server.clone(),
                tool: remote.clone().unwrap_or_else(|| tool.to_owned()),
            })),
            BackendConfig::Replay { cassette } => {
                let Some(path) = cassette else {
                    return Err(config_err(format!(
                        "tool `{tool}` uses the replay backend but names no cassette: set `cassette` or pass --replay"
                    )));
                };
                self.cassette(Path::new(path))
                    .map(|r| r as Arc<dyn Backend>)
            }
        }
    }

    /// The cassette at `path`, loaded once per file and shared (a planner replayed from
    /// its own cassette while the tools run for real).
    pub fn cassette(&self, path: &Path) -> Result<Arc<ReplayBackend>, ToolError> {
        let mut map = self.cassettes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = map.get(path) {
            return Ok(r.clone());
        }
        let r = Arc::new(
            ReplayBackend::load(path)
                .map_err(|e| ToolError::new(ToolErrorKind::Config, e.message))?,
        );
        map.insert(path.to_owned(), r.clone());
        Ok(r)
    }
}

/// A warning for each API key (by its variable) that is set but too short to be
/// redacted (see [`plan_llm::MIN_SECRET_BYTES`]).
fn short_keys(manifest: &Manifest, env: &EnvLookup) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    manifest
        .backends()
        .filter_map(|b| b.api_key_env())
        .filter(|var| seen.insert(*var))
        .filter(|var| env(var).is_ok_and(|v| !v.is_empty() && v.len() < MIN_SECRET_BYTES))
        .map(|var| {
            format!(
                "the API key in {var} is shorter than {MIN_SECRET_BYTES} bytes: it is sent, but not \
                 redacted from outputs, traces and errors (a value that short would mangle \
                 every text holding it); use a longer key where it must stay secret"
            )
        })
        .collect()
}
