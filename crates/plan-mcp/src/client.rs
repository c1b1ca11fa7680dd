//! `Servers`: one MCP client per `[[mcp]]` table, shared by every run of the process,
//! started at first use, started again when it died, shut down by [`Servers::shutdown`].
//!
//! A server over stdio is a child process in its own process group (a Ctrl-C at the
//! terminal reaches planvm, which shuts it down, not the server half-way through a call;
//! the signals planvm sends it reach its own children too), with an environment of its
//! own: `PATH`, `HOME`, the locale and what the table passes (`env`, `pass_env`), never
//! planvm's whole environment with its API keys. Its stderr is kept (the last lines) for
//! the messages of errors that it explains. One that is never shut down is killed when
//! its client is dropped.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use plan_llm::{CallError, CallErrorKind, EnvLookup, Redactor, secs};
use plan_manifest::McpServer;
use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation, Tool,
};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Map, Value};
use tokio::io::AsyncBufReadExt;

use crate::stdio;

/// How long starting a server, listing its tools or one call may take, unless its table
/// sets `timeout_secs`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Lines of a server's stderr kept for error messages.
const STDERR_LINES: usize = 20;
/// Variables of planvm's environment every stdio server gets (when set).
const BASE_ENV: [&str; 8] = [
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "LANG", "LC_ALL",
];

type Client = RunningService<RoleClient, ClientConfig>;

/// A running server: its client, and the last lines it wrote to stderr.
struct Conn {
    client: Client,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

/// One slot per `[[mcp]]` table; the lock is held while a server starts, so concurrent
/// first calls start it once.
type Slot = tokio::sync::Mutex<Option<Arc<Conn>>>;

/// The MCP servers of a manifest, each started at first use.
pub struct Servers {
    configs: HashMap<String, McpServer>,
    slots: HashMap<String, Slot>,
    env: EnvLookup,
    redactor: Arc<Redactor>,
    http: OnceLock<reqwest::Client>,
}

impl std::fmt::Debug for Servers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Servers")
            .field("servers", &self.configs.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Servers {
    /// Clients for `configs`, none started yet. Secrets (`headers_env`, `api_key_env`,
    /// `pass_env` values) are read through `env` when a server starts, and added to
    /// `redactor`.
    pub fn new(configs: &[McpServer], env: EnvLookup, redactor: Arc<Redactor>) -> Servers {
        Servers {
            configs: configs
                .iter()
                .map(|c| (c.name.clone(), c.clone()))
                .collect(),
            slots: configs
                .iter()
                .map(|c| (c.name.clone(), Slot::default()))
                .collect(),
            env,
            redactor,
            http: OnceLock::new(),
        }
    }

    /// The secrets these clients read (and every other one of the redactor they were
    /// given), to redact from what their servers answer.
    pub fn redactor(&self) -> &Arc<Redactor> {
        &self.redactor
    }

    /// Whether these clients serve exactly `configs` (a process keeps one set per
    /// manifest).
    pub fn serves(&self, configs: &[McpServer]) -> bool {
        configs.len() == self.configs.len()
            && configs.iter().all(|c| self.configs.get(&c.name) == Some(c))
    }

    fn config(&self, server: &str) -> Result<(&McpServer, &Slot), CallError> {
        match (self.configs.get(server), self.slots.get(server)) {
            (Some(c), Some(s)) => Ok((c, s)),
            _ => Err(CallError::new(
                CallErrorKind::Config,
                format!("no [[mcp]] table named `{server}`"),
            )),
        }
    }

    /// Every tool `server` lists (all pages).
    pub async fn list(&self, server: &str) -> Result<Vec<Tool>, CallError> {
        let conn = self.connect(server).await?;
        let listed = conn.client.peer().list_all_tools();
        self.within(server, &conn, "listing its tools", listed)
            .await
    }

    /// Calls `tool` (its name on the server) of `server` with `args`. Dropping the future
    /// cancels the call (`notifications/cancelled`).
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        args: Map<String, Value>,
    ) -> Result<CallToolResult, CallError> {
        let conn = self.connect(server).await?;
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
        let called = conn.client.peer().call_tool(params);
        self.within(server, &conn, &format!("calling `{tool}`"), called)
            .await
    }

    /// `work` (a request to `server` over `conn`, `doing` something) within the server's
    /// time limit, its error explained.
    async fn within<T>(
        &self,
        server: &str,
        conn: &Arc<Conn>,
        doing: &str,
        work: impl std::future::Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, CallError> {
        let t = timeout(self.config(server)?.0);
        match tokio::time::timeout(t, work).await {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(e)) => Err(self.failed(server, conn, doing, e)),
            Err(_) => Err(CallError::new(
                CallErrorKind::Timeout,
                format!(
                    "MCP server `{server}` was {doing} for {} s, its limit; stopped",
                    secs(t)
                ),
            )),
        }
    }

    /// Shuts every started server down, all at once: closes its input and waits for it to
    /// exit (a stdio server that does not is sent SIGTERM, then killed, with its children),
    /// ends HTTP sessions. One a call still holds is told to stop.
    pub async fn shutdown(&self) {
        let stops = self.slots.values().map(|slot| async move {
            let Some(conn) = slot.lock().await.take() else {
                return;
            };
            match Arc::try_unwrap(conn) {
                Ok(conn) => {
                    let mut client = conn.client;
                    let _ = client.close_with_timeout(Duration::from_secs(5)).await;
                }
                Err(shared) => shared.client.cancellation_token().cancel(),
            }
        });
        futures::future::join_all(stops).await;
    }

    /// The running client of `server`, started (again, if it died) when needed. Waiting
    /// for another call that is starting it counts towards the server's time limit.
    async fn connect(&self, server: &str) -> Result<Arc<Conn>, CallError> {
        let (cfg, slot) = self.config(server)?;
        let t = timeout(cfg);
        let connected = async {
            let mut slot = slot.lock().await;
            // NB: a server that died between calls has an open client and a closed
            // transport: started again before anything is sent.
            if let Some(conn) = slot.as_ref()
                && !conn.client.is_closed()
                && !conn.client.peer().is_transport_closed()
            {
                return Ok(conn.clone());
            }
            *slot = None;
            let conn = Arc::new(self.start(cfg).await?);
            *slot = Some(conn.clone());
            Ok(conn)
        };
        match tokio::time::timeout(t, connected).await {
            Ok(r) => r,
            Err(_) => Err(CallError::new(
                CallErrorKind::Timeout,
                format!("MCP server `{server}` did not start within {} s", secs(t)),
            )),
        }
    }

    async fn start(&self, cfg: &McpServer) -> Result<Conn, CallError> {
        let info = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("planvm", env!("CARGO_PKG_VERSION")),
        );
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let started = if let Some(command) = &cfg.command {
            let transport = self.spawn(cfg, command, &stderr)?;
            info.serve(transport).await
        } else if let Some(url) = &cfg.url {
            let transport = self.http(cfg, url)?;
            info.serve(transport).await
        } else {
            return Err(CallError::new(
                CallErrorKind::Config,
                format!("[[mcp]] `{}` has neither command nor url", cfg.name),
            ));
        };
        match started {
            Ok(client) => Ok(Conn { client, stderr }),
            Err(e) => {
                // NB: a server that exits at once leaves its reason on stderr; give the
                // reader a moment to take it.
                tokio::time::sleep(Duration::from_millis(50)).await;
                Err(CallError::new(
                    CallErrorKind::Transport,
                    format!(
                        "MCP server `{}` did not start: {}{}",
                        cfg.name,
                        self.redactor.text(&e.to_string()),
                        self.tail(&stderr)
                    ),
                ))
            }
        }
    }

    fn spawn(
        &self,
        cfg: &McpServer,
        command: &[String],
        stderr: &Arc<Mutex<VecDeque<String>>>,
    ) -> Result<stdio::Child, CallError> {
        let config = |m: String| CallError::new(CallErrorKind::Config, m);
        let mut cmd = tokio::process::Command::new(&command[0]);
        cmd.args(&command[1..])
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for var in BASE_ENV {
            if let Ok(v) = std::env::var(var) {
                cmd.env(var, v);
            }
        }
        for var in &cfg.pass_env {
            match (self.env)(var) {
                Ok(v) => {
                    self.redactor.add(&v);
                    cmd.env(var, v);
                }
                Err(_) => {
                    return Err(config(format!(
                        "[[mcp]] `{}` passes {var} to its server, and {var} is not set",
                        cfg.name
                    )));
                }
            }
        }
        cmd.envs(&cfg.env);
        if let Some(dir) = &cfg.cwd {
            cmd.current_dir(dir);
        }
        let mut cmd = CommandWrap::from(cmd);
        cmd.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
        let cannot = |e: std::io::Error| {
            config(format!(
                "MCP server `{}`: cannot start `{}`: {e}",
                cfg.name, command[0]
            ))
        };
        let mut child = cmd.spawn().map_err(cannot)?;
        let err = child.stderr().take();
        let transport = stdio::Child::new(child).map_err(cannot)?;
        if let Some(err) = err {
            let tail = stderr.clone();
            let redactor = self.redactor.clone();
            tokio::spawn(async move {
                let mut lines = tokio::io::BufReader::new(err).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let mut tail = tail.lock().unwrap_or_else(|p| p.into_inner());
                    if tail.len() == STDERR_LINES {
                        tail.pop_front();
                    }
                    tail.push_back(plan_llm::preview(&redactor.text(&line), 300));
                }
            });
        }
        Ok(transport)
    }

    fn http(
        &self,
        cfg: &McpServer,
        url: &str,
    ) -> Result<StreamableHttpClientTransport<reqwest::Client>, CallError> {
        let config = |m: String| CallError::new(CallErrorKind::Config, m);
        let secret = |var: &str| {
            (self.env)(var)
                .ok()
                .filter(|v| !v.is_empty())
                .inspect(|v| {
                    self.redactor.add(v);
                })
                .ok_or_else(|| {
                    config(format!(
                        "[[mcp]] `{}` reads {var}, and {var} is not set",
                        cfg.name
                    ))
                })
        };
        let mut headers = HashMap::new();
        for (name, var) in &cfg.headers_env {
            let value = secret(var)?;
            let name = reqwest::header::HeaderName::try_from(name.as_str())
                .map_err(|e| config(format!("[[mcp]] `{}`: header `{name}`: {e}", cfg.name)))?;
            let mut value = reqwest::header::HeaderValue::try_from(value).map_err(|_| {
                config(format!(
                    "[[mcp]] `{}`: the value of {var} is not a valid header value",
                    cfg.name
                ))
            })?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        let mut config_ =
            StreamableHttpClientTransportConfig::with_uri(url.to_owned()).custom_headers(headers);
        if let Some(var) = &cfg.api_key_env {
            config_ = config_.auth_header(secret(var)?);
        }
        // NB: the same client as every endpoint's: redirects only within the origin (a
        // header's secret never follows one elsewhere), no link-local addresses.
        let client = match self.http.get() {
            Some(c) => c.clone(),
            None => {
                let c = plan_llm::http_client()?;
                self.http.get_or_init(|| c).clone()
            }
        };
        Ok(StreamableHttpClientTransport::with_client(client, config_))
    }

    /// The error for `e`, met while `doing` something with `server`; a server whose
    /// connection closed is started again at the next call.
    fn failed(&self, server: &str, conn: &Arc<Conn>, doing: &str, e: ServiceError) -> CallError {
        let closed = matches!(
            e,
            ServiceError::TransportClosed | ServiceError::TransportSend(_)
        ) || conn.client.is_closed()
            || conn.client.peer().is_transport_closed();
        let message = self.redactor.text(&e.to_string()).into_owned();
        if closed {
            // NB: a slot that is locked is being started again already.
            if let Ok((_, slot)) = self.config(server)
                && let Ok(mut slot) = slot.try_lock()
                && slot.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn))
            {
                *slot = None;
            }
            // NB: over HTTP, an answer past the transport's cap ends the connection, yet
            // the call had its answer: it failed for its size, not for a lost server.
            if let Some(cap) = message
                .split_once(HTTP_TOO_LARGE)
                .map(|(_, rest)| rest.split(' ').next().unwrap_or_default())
            {
                return CallError::new(
                    CallErrorKind::BadResponse,
                    format!("MCP server `{server}`, {doing}: answer too large, over {cap} bytes"),
                );
            }
            // NB: it may have acted before it died: an unknown outcome.
            return CallError::new(
                CallErrorKind::Transport,
                format!(
                    "MCP server `{server}` stopped while {doing} ({message}); it is started again at the next call{}",
                    self.tail(&conn.stderr)
                ),
            );
        }
        if let ServiceError::McpError(e) = &e
            && let Some(bytes) = stdio::too_large(e)
        {
            return CallError::new(
                CallErrorKind::BadResponse,
                format!(
                    "MCP server `{server}`, {doing}: answer of {bytes} bytes, larger than {} bytes",
                    stdio::MAX_MESSAGE_BYTES
                ),
            );
        }
        let kind = match e {
            ServiceError::McpError(_) => CallErrorKind::Refused,
            ServiceError::Timeout { .. } => CallErrorKind::Timeout,
            _ => CallErrorKind::BadResponse,
        };
        CallError::new(kind, format!("MCP server `{server}`, {doing}: {message}"))
    }

    /// `; its stderr ended with: ...` and its last lines (or nothing).
    fn tail(&self, stderr: &Mutex<VecDeque<String>>) -> String {
        let tail = stderr.lock().unwrap_or_else(|p| p.into_inner());
        if tail.is_empty() {
            return String::new();
        }
        let last: Vec<&str> = tail
            .iter()
            .skip(tail.len().saturating_sub(5))
            .map(String::as_str)
            .collect();
        format!("; its stderr ended with:\n  {}", last.join("\n  "))
    }
}

/// How the streamable HTTP transport says a body was over its cap (16 MiB, as stdio's),
/// followed by the cap.
const HTTP_TOO_LARGE: &str = "exceeded the maximum size of ";

fn timeout(cfg: &McpServer) -> Duration {
    cfg.timeout_secs
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .unwrap_or(DEFAULT_TIMEOUT)
}
