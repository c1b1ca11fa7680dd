//! planrt as an MCP server: agents and IDEs hand it a goal or a plan. Three tools over the
//! service's state, so a run started here is a run of the store like any other (listed,
//! shown, resumed, answered through the HTTP API and the pages):
//!
//! - `ask` (goal, response_format?, session?): planned, run, repaired and re-planned as
//!   `POST /v1/runs` with a goal does; the answer, or the question the run stopped at.
//! - `run_plan` (plan, vars?, max_steps?): compiled (a plan with errors is a tool error
//!   with every diagnostic, for the caller to repair), run, answered.
//! - `run_status` (id): a run's or a goal's status, answer, steps and question.
//!
//! Served at `/mcp` by `planvm serve` (streamable HTTP, behind its token) and over stdio by
//! `planvm mcp`. A call whose client goes away stops waiting; its run goes on in the
//! service, as a run submitted over HTTP does.

use std::sync::Arc;

use plan_store::RunInfo;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use crate::State as Shared;
use crate::api;
use crate::chat::text;
use crate::error::ApiError;
use crate::goals::{Memory, Request};

/// The MCP face of a service.
#[derive(Clone)]
pub(crate) struct Planrt {
    pub(crate) state: Arc<Shared>,
}

fn schema(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(o) => Arc::new(o),
        _ => Arc::default(),
    }
}

/// The streamable HTTP endpoint (`/mcp`), one MCP session per client. `Host` is checked
/// as on every route (see `origin`). It stops when the service does, so that no open
/// event stream holds the shutdown.
pub(crate) fn http(state: &Arc<Shared>) -> StreamableHttpService<Planrt, LocalSessionManager> {
    let mut config = StreamableHttpServerConfig::default();
    config.max_request_body_bytes = state.max_body;
    config = config.disable_allowed_hosts();
    let stop = config.cancellation_token.clone();
    let watched = state.clone();
    tokio::spawn(async move {
        watched.stopped().await;
        stop.cancel();
    });
    let state = state.clone();
    StreamableHttpService::new(
        move || {
            Ok(Planrt {
                state: state.clone(),
            })
        },
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// Serves MCP over this process's stdin and stdout until the client closes them.
pub(crate) async fn stdio(state: Arc<Shared>) -> Result<(), String> {
    let running = Planrt { state }
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| format!("MCP over stdio: {e}"))?;
    running
        .waiting()
        .await
        .map(|_| ())
        .map_err(|e| format!("MCP over stdio: {e}"))
}

/// The tools it offers.
fn tools() -> Vec<Tool> {
    let runs = ToolAnnotations::new()
        .read_only(false)
        .destructive(true)
        .open_world(true);
    vec![
        Tool::new(
            "ask",
            "Answers a goal: an LLM writes a plan over the tools configured here, the plan is \
             checked, run, repaired and re-planned until it answers. Returns the answer and the \
             run's id; or, when a step asks the user, the question (answer it through the \
             service's API or `planvm resume ID --input TEXT`).",
            schema(json!({
                "type": "object",
                "properties": {
                    "goal": {"type": "string", "description": "What the answer should achieve, in words."},
                    "response_format": {"description": "What the answer must look like (JSON, or text), e.g. {\"lang\": \"English\"}."},
                    "session": {"type": "string", "description": "A conversation this goal is a round of: its earlier goals and answers are the planner's context."}
                },
                "required": ["goal"]
            })),
        )
        .annotate(runs.clone()),
        Tool::new(
            "run_plan",
            "Runs a plan (a JSON array of instructions: assign, jmp, calling, reasoning) and \
             returns its final_answer and the run's id. A plan with errors is not run: the \
             result lists every diagnostic.",
            schema(json!({
                "type": "object",
                "properties": {
                    "plan": {"description": "The plan: its instructions (an array), or its text."},
                    "vars": {"type": "object", "description": "Variables the run starts with."},
                    "max_steps": {"type": "integer", "minimum": 1, "description": "At most this many steps."}
                },
                "required": ["plan"]
            })),
        )
        .annotate(runs),
        Tool::new(
            "run_status",
            "A run's (or an asked goal's) status, final answer, steps and tool calls, and the \
             question it waits on, if any.",
            schema(json!({
                "type": "object",
                "properties": {"id": {"type": "string", "description": "The run's (or goal's) id."}},
                "required": ["id"]
            })),
        )
        .annotate(ToolAnnotations::new().read_only(true).open_world(false)),
    ]
}

impl ServerHandler for Planrt {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info = Implementation::new("planrt", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(
            "planrt runs LLM-written plans over its configured tools: `ask` a goal, or \
             `run_plan` a plan you wrote; `run_status` reads a run back."
                .into(),
        );
        info
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        let work = async {
            match &*request.name {
                "ask" => self.ask(args).await,
                "run_plan" => self.run_plan(args).await,
                "run_status" => self.status(args).await,
                other => Err(ErrorData::invalid_params(
                    format!("no tool `{other}`: this server has ask, run_plan and run_status"),
                    None,
                )),
            }
        };
        // NB: a caller that stops waiting leaves the run going in the service.
        tokio::select! {
            out = work => out.map(CallToolResponse::from),
            () = context.ct.cancelled() => Err(ErrorData::internal_error("cancelled by the client", None)),
            () = self.state.stopped() => Ok(failed(&json!({"error": {"code": "stopping",
                "message": "the service is stopping; the run goes on when it starts again"}})).into()),
        }
    }
}

/// `args[key]` as a string, or an invalid-params error.
fn string(args: &Value, key: &str) -> Result<String, ErrorData> {
    match &args[key] {
        Value::String(s) => Ok(s.clone()),
        Value::Null => Err(ErrorData::invalid_params(
            format!("`{key}` is required"),
            None,
        )),
        _ => Err(ErrorData::invalid_params(
            format!("`{key}` must be a string"),
            None,
        )),
    }
}

/// A tool error whose text is the body's message, with the whole body as structured
/// content (a plan's diagnostics).
fn failed(body: &Value) -> CallToolResult {
    let mut message = body["error"]["message"]
        .as_str()
        .unwrap_or("failed")
        .to_owned();
    // NB: an agent may read only the text: a plan's errors go into it, to be repaired.
    for d in body["diagnostics"].as_array().into_iter().flatten() {
        if d["severity"] == "error" {
            message.push_str(&format!(
                "\n{} at seq_no {}: {}",
                text(&d["code"]),
                d["seq_no"],
                text(&d["message"])
            ));
            if let Some(help) = d["help"].as_str() {
                message.push_str(&format!(" (help: {help})"));
            }
        }
    }
    let mut r = CallToolResult::structured_error(body.clone());
    r.content = vec![ContentBlock::text(message)];
    r
}

fn api_failed(e: &ApiError) -> CallToolResult {
    failed(&e.body())
}

/// `value` (with its `answer`, or its question) as a result: the text an agent reads, and
/// the object.
fn answered(value: Value) -> CallToolResult {
    let shown = if value["status"] == "needs_input" {
        format!(
            "needs_input: {}",
            crate::chat::question_text(&value["question"])
        )
    } else if value["status"] == "ok" {
        text(&value["answer"])
    } else {
        let message = value["error"]["message"]
            .as_str()
            .unwrap_or("the run failed");
        let mut r = CallToolResult::structured_error(value.clone());
        r.content = vec![ContentBlock::text(message.to_owned())];
        return r;
    };
    let mut r = CallToolResult::structured(value);
    r.content = vec![ContentBlock::text(shown)];
    r
}

/// A run as the tools report it.
fn run_view(run: &RunInfo) -> Value {
    let mut v = json!({
        "id": run.id,
        "status": run.status.as_str(),
        "answer": run.final_answer,
        "steps": run.steps,
        "tool_calls": run.tool_calls,
    });
    if let Some(e) = &run.error {
        v["error"] = e.clone();
    }
    if let Some(q) = &run.question {
        v["question"] = q.clone();
    }
    v
}

impl Planrt {
    async fn ask(&self, args: Value) -> Result<CallToolResult, ErrorData> {
        let goal = string(&args, "goal")?;
        let memory = match &args["session"] {
            Value::String(s) => Memory::Session(s.clone()),
            _ => Memory::None,
        };
        let rf = Some(args["response_format"].clone()).filter(|v| !v.is_null());
        let trace = self.state.trace("ask", Some(&goal), &Default::default());
        let started = api::start_goal(
            &self.state,
            None,
            (goal, rf, memory),
            Request::default(),
            trace,
        )
        .await;
        let (summary, task) = match started {
            Ok(s) => s,
            Err(e) => return Ok(api_failed(&e)),
        };
        let id = summary.id;
        let ended = task.await.map_or_else(
            |e| Err(json!({"code": "internal", "message": e.to_string()})),
            |asked| asked.ended,
        );
        Ok(answered(match ended {
            Ok(answer) => json!({"id": id, "status": "ok", "answer": answer}),
            Err(e) if e["code"] == "needs_input" => {
                json!({"id": id, "status": "needs_input", "question": e["question"]})
            }
            Err(e) => json!({"id": id, "status": "failed", "error": e}),
        }))
    }

    async fn run_plan(&self, args: Value) -> Result<CallToolResult, ErrorData> {
        let mut submit = json!({"plan": args["plan"]});
        if args["plan"].is_null() {
            return Err(ErrorData::invalid_params("`plan` is required", None));
        }
        for k in ["vars", "max_steps"] {
            if !args[k].is_null() {
                submit[k] = args[k].clone();
            }
        }
        let submit = serde_json::from_value(submit)
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let trace = self.state.trace("run", None, &Default::default());
        // NB: run here, not queued: the caller waits for its answer on this service.
        let id = match api::start(&self.state, submit, trace, false).await {
            Ok(api::Started::Row(s)) => s.id,
            Ok(api::Started::Streamed(id) | api::Started::Created((id, ..))) => id,
            Err(e) => return Ok(api_failed(&e)),
        };
        // NB: the run's channel closes when it ends (none: it has already).
        if let Some(mut changes) = self.state.live.watch(&id) {
            while changes.changed().await.is_ok() {}
        }
        match self.state.read(move |store| Ok(store.run(&id)?)).await {
            Ok(run) => Ok(answered(run_view(&run))),
            Err(e) => Ok(api_failed(&e)),
        }
    }

    async fn status(&self, args: Value) -> Result<CallToolResult, ErrorData> {
        let id = string(&args, "id")?;
        let read = self
            .state
            .read(move |store| {
                let goal = store.goal(&id)?;
                let run = match &goal {
                    // NB: a goal's latest run is its answer's.
                    Some(g) => plan_runs::ask::goal_runs(store, &g.id)?.pop(),
                    None => Some(store.run(&id)?),
                };
                Ok((goal, run))
            })
            .await;
        let (goal, run) = match read {
            Ok(r) => r,
            Err(e) => return Ok(api_failed(&e)),
        };
        let mut v = match (&run, &goal) {
            (Some(run), _) => run_view(run),
            (None, Some(g)) => json!({"id": g.id, "status": "planning"}),
            (None, None) => json!({}),
        };
        if let Some(g) = goal {
            v["goal"] = json!({"id": g.id, "goal": g.goal, "status": g.status, "answer": g.answer});
        }
        let mut r = CallToolResult::structured(v.clone());
        r.content = vec![ContentBlock::text(v.to_string())];
        Ok(r)
    }
}
