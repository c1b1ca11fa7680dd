//! `plan-telemetry`: OpenTelemetry traces of what a `planvm` command does, in the GenAI
//! semantic conventions, exported over OTLP (docs/telemetry.md).
//!
//! On only when the environment asks for it (`OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), configured the OpenTelemetry way (the exporter
//! reads `OTEL_EXPORTER_OTLP_PROTOCOL`, `_HEADERS`, `_TIMEOUT`; the resource
//! `OTEL_SERVICE_NAME`, default `planvm`, and `OTEL_RESOURCE_ATTRIBUTES`). Off, nothing
//! here is built and nothing costs anything.
//!
//! A process exports through one [`Telemetry`]; each workflow (a command, or a service's
//! run or goal) is one [`Trace`]: an `invoke_workflow` span, the child of a caller's
//! `traceparent` when there is one, a `chat {model}` span under it per planner call
//! ([`Trace::model`]) and an `execute_tool {tool}` span per tool call ([`Trace::journal`],
//! from the run's events). Spans go out from a background thread in batches; a collector
//! that is down or slow loses them (counted: [`Telemetry::finish`]), never slows or fails
//! a run.
//!
//! Module map: `journal` turns a run's events into tool spans; `model` wraps the
//! planner's LLM in chat spans.

mod journal;
mod memory;
mod model;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use opentelemetry::trace::{Span, SpanKind, Status, TraceContextExt, Tracer, TracerProvider};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider, SpanData, SpanExporter};

pub use journal::ToolSpans;
pub use memory::Kept;
/// The crates whose types a [`Kept`]'s spans are, for whoever reads them.
pub use {opentelemetry, opentelemetry_sdk};

/// The environment variables that turn exporting on.
const ENDPOINT_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];
/// Whether spans carry arguments, outputs and messages (redacted).
const CAPTURE_VAR: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";
/// The longest captured text, in characters.
const CAPTURE_CHARS: usize = 4000;
/// Bounds on the wait for the last spans at the end of a command.
const MIN_GRACE: Duration = Duration::from_millis(50);
const MAX_GRACE: Duration = Duration::from_secs(5);

/// What a process exports, from its start to [`Telemetry::finish`]: a command's one
/// trace, or a service's trace per run.
pub struct Telemetry {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    capture: bool,
    counts: Arc<Counts>,
    redactor: Arc<plan_llm::Redactor>,
    started: Instant,
}

/// Spans ended, and spans the collector took: the difference was lost.
#[derive(Default)]
pub(crate) struct Counts {
    ended: AtomicU64,
    exported: AtomicU64,
}

/// One workflow's trace: what its journal and its model wrapper share.
pub(crate) struct Shared {
    pub(crate) tracer: SdkTracer,
    /// Holds the `invoke_workflow` span: every other span is its child.
    pub(crate) root: Context,
    pub(crate) capture: bool,
    counts: Arc<Counts>,
    redactor: Arc<plan_llm::Redactor>,
}

impl Shared {
    /// `text` as a span may carry it: secrets removed, cut short.
    pub(crate) fn captured(&self, text: &str) -> String {
        let text = self.redactor.text(text);
        plan_llm::preview(&text, CAPTURE_CHARS)
    }

    /// Counts a span that ended.
    pub(crate) fn count_end(&self) {
        self.counts.ended.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn end(&self, span: &mut impl Span) {
        span.end();
        self.count_end();
    }
}

/// What a workflow's trace says of it at the start.
pub struct Workflow<'a> {
    /// `run`, `ask`, `resume`, ...
    pub command: &'a str,
    /// The plan file, for a run of one.
    pub plan: Option<&'a str>,
    /// The goal, for an `ask`: only its hash goes out unless content is captured.
    pub goal: Option<&'a str>,
    /// The run's id, when known at the start.
    pub run_id: Option<&'a str>,
}

/// How a workflow ended, for its span.
pub struct Ended<'a> {
    /// `ok`, `failed`, `needs_input`, or an `ask`'s status.
    pub status: &'a str,
    /// Its stored run, if any.
    pub run_id: Option<&'a str>,
    pub steps: u64,
    pub tool_calls: u64,
    /// The error's code when it failed (`R0003`, `planner_failed`, ...).
    pub error: Option<&'a str>,
}

impl<'a> Ended<'a> {
    /// A workflow that ended as `status` before anything ran.
    pub fn nothing_ran(status: &'a str, run_id: Option<&'a str>) -> Ended<'a> {
        Ended {
            status,
            run_id,
            steps: 0,
            tool_calls: 0,
            error: None,
        }
    }

    /// How run `report` ended (stored as `run_id`, if it is).
    pub fn run(report: &'a plan_host::RunReport, run_id: Option<&'a str>) -> Ended<'a> {
        Ended {
            status: match report.status {
                plan_host::RunStatus::Ok => "ok",
                plan_host::RunStatus::Failed => "failed",
                plan_host::RunStatus::NeedsInput => "needs_input",
                plan_host::RunStatus::Stopped => "stopped",
            },
            run_id,
            steps: report.steps,
            tool_calls: report.tool_calls,
            error: report.error.as_ref().map(|e| e.code.as_str()),
        }
    }
}

impl<'a> Ended<'a> {
    /// How an `ask` ended: its status, and its last run's figures (stored as `run_id`,
    /// if it is).
    pub fn ask(outcome: &'a plan_planner::AskOutcome, run_id: Option<&'a str>) -> Ended<'a> {
        let status = outcome.status.as_str();
        match &outcome.report {
            Some(r) => Ended {
                status,
                ..Ended::run(r, run_id)
            },
            None => Ended::nothing_ran(status, run_id),
        }
    }
}

impl Telemetry {
    /// Telemetry as the process environment asks for it: None when no OTLP endpoint is
    /// set. `redactor` holds the secrets that must never leave (the host's). Made outside
    /// any async runtime: the exporter has a blocking client of its own.
    pub fn from_env(redactor: Arc<plan_llm::Redactor>) -> Result<Option<Telemetry>, String> {
        let set = |v: &str| std::env::var_os(v).is_some_and(|s| !s.is_empty());
        if !ENDPOINT_VARS.iter().any(|v| set(v)) {
            return Ok(None);
        }
        // NB: the exporter's client is reqwest's, with the process's TLS provider.
        plan_llm::install_crypto();
        use opentelemetry_otlp::{Protocol, WithExportConfig};
        let protocol = [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|p| !p.is_empty()));
        let protocol = match protocol.as_deref() {
            None | Some("http/protobuf") => Protocol::HttpBinary,
            Some("http/json") => Protocol::HttpJson,
            Some(other) => {
                return Err(format!(
                    "OpenTelemetry: protocol `{other}` is not supported: use http/protobuf (the default) or http/json"
                ));
            }
        };
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(protocol)
            .build()
            .map_err(|e| format!("OpenTelemetry: cannot set up the OTLP exporter: {e}"))?;
        Ok(Some(Telemetry::with_exporter(
            exporter,
            redactor,
            std::env::var(CAPTURE_VAR).is_ok_and(|v| v.eq_ignore_ascii_case("true")),
        )))
    }

    /// [`Telemetry::from_env`] for a process that goes on without a trace when none can
    /// be set up: why not is said to `warn`.
    pub fn from_env_or_warn(
        redactor: Arc<plan_llm::Redactor>,
        warn: impl FnOnce(String),
    ) -> Option<Telemetry> {
        Telemetry::or_warn(Telemetry::from_env(redactor), warn)
    }

    /// The telemetry `made`, or none when it could not be made, why not said to `warn`
    /// (a service's, made by the maker it was configured with).
    pub fn or_warn(
        made: Result<Option<Telemetry>, String>,
        warn: impl FnOnce(String),
    ) -> Option<Telemetry> {
        made.unwrap_or_else(|e| {
            warn(format!("{e}: no trace is exported"));
            None
        })
    }

    /// Telemetry exporting through `exporter` (tests, embedders).
    pub fn with_exporter(
        exporter: impl SpanExporter + 'static,
        redactor: Arc<plan_llm::Redactor>,
        capture: bool,
    ) -> Telemetry {
        let counts = Arc::new(Counts::default());
        let mut resource = Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("planvm");
        }
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(Counted {
                inner: exporter,
                counts: counts.clone(),
            })
            .with_resource(resource.build())
            .build();
        let tracer = provider.tracer("planrt");
        Telemetry {
            provider,
            tracer,
            capture,
            counts,
            redactor,
            started: Instant::now(),
        }
    }

    /// Starts a workflow's trace: its `invoke_workflow` span, the child of `parent` (a
    /// W3C `traceparent` header a caller sent) when it is one, else a trace of its own.
    pub fn start(&self, workflow: &Workflow<'_>, parent: Option<&str>) -> Trace {
        let mut attrs = vec![
            KeyValue::new("gen_ai.operation.name", "invoke_workflow"),
            KeyValue::new("planrt.command", workflow.command.to_owned()),
        ];
        if let Some(p) = workflow.plan {
            attrs.push(KeyValue::new("planrt.plan", p.to_owned()));
        }
        if let Some(g) = workflow.goal {
            attrs.push(KeyValue::new("planrt.goal.hash", goal_hash(g)));
        }
        if let Some(id) = workflow.run_id {
            attrs.push(KeyValue::new("planrt.run.id", id.to_owned()));
        }
        let parent = parent.and_then(remote_parent).unwrap_or_default();
        let span = self
            .tracer
            .span_builder(format!("invoke_workflow {}", workflow.command))
            .with_kind(SpanKind::Internal)
            .with_attributes(attrs)
            .start_with_context(&self.tracer, &parent);
        let shared = Shared {
            tracer: self.tracer.clone(),
            root: Context::new().with_span(span),
            capture: self.capture,
            counts: self.counts.clone(),
            redactor: self.redactor.clone(),
        };
        if self.capture
            && let Some(g) = workflow.goal
        {
            shared
                .root
                .span()
                .set_attribute(KeyValue::new("planrt.goal", shared.captured(g)));
        }
        Trace {
            shared: Arc::new(shared),
        }
    }

    /// Sends what is left and stops, waiting for the collector at most 3% of the time
    /// since the telemetry was made (at least 50 ms, at most 5 s: a collector that hangs
    /// costs no more); the number of spans that did not reach it.
    pub fn finish(&self) -> u64 {
        let grace = (self.started.elapsed() * 3 / 100).clamp(MIN_GRACE, MAX_GRACE);
        // NB: a collector that hangs keeps the exporting thread: it is left behind.
        let _ = self.provider.shutdown_with_timeout(grace);
        let ended = self.counts.ended.load(Ordering::Relaxed);
        ended.saturating_sub(self.counts.exported.load(Ordering::Relaxed))
    }
}

/// A command's telemetry and its one trace (`planvm run`, `ask`, `resume`, `branch`).
pub struct CommandTrace {
    telemetry: Telemetry,
    pub trace: Trace,
}

impl CommandTrace {
    /// The command's trace on `host`, when the environment asks for one (see
    /// [`Telemetry::from_env_or_warn`]), its tool spans taken from `tracer`'s events.
    pub fn from_env(
        workflow: &Workflow<'_>,
        host: &plan_host::Host,
        tracer: &mut plan_host::Tracer,
        warn: impl FnOnce(String),
    ) -> Option<CommandTrace> {
        let telemetry = Telemetry::from_env_or_warn(host.redactor().clone(), warn)?;
        let trace = telemetry.start(workflow, None);
        tracer.also(Box::new(trace.journal(host.manifest())));
        Some(CommandTrace { telemetry, trace })
    }

    /// Ends the trace as `ended` says and sends what is left; the spans lost (see
    /// [`Telemetry::finish`]).
    pub fn end(self, ended: &Ended<'_>) -> u64 {
        self.trace.end(ended);
        self.telemetry.finish()
    }
}

/// One workflow's trace (see [`Telemetry::start`]).
pub struct Trace {
    shared: Arc<Shared>,
}

impl Trace {
    /// A journal that turns a run's tool calls into spans under the workflow's; `manifest`
    /// gives each tool's effect.
    pub fn journal(&self, manifest: &plan_manifest::Manifest) -> ToolSpans {
        ToolSpans::new(self.shared.clone(), manifest)
    }

    /// The planner's LLM, each call a `chat {model}` span under the workflow's.
    pub fn model(
        &self,
        inner: Arc<dyn plan_planner::PlannerModel>,
        model: &str,
    ) -> Arc<dyn plan_planner::PlannerModel> {
        Arc::new(model::Traced {
            inner,
            model: model.to_owned(),
            shared: self.shared.clone(),
        })
    }

    /// The trace's id, as W3C trace context writes it (32 hex digits).
    pub fn trace_id(&self) -> String {
        self.shared
            .root
            .span()
            .span_context()
            .trace_id()
            .to_string()
    }

    /// The workflow's span as a W3C `traceparent`, for the requests its calls make
    /// ([`plan_llm::with_traceparent`]).
    pub fn traceparent(&self) -> String {
        let span = self.shared.root.span();
        let cx = span.span_context();
        format!(
            "00-{}-{}-{:02x}",
            cx.trace_id(),
            cx.span_id(),
            cx.trace_flags().to_u8()
        )
    }

    /// Ends the workflow's span as `ended` says.
    pub fn end(self, ended: &Ended<'_>) {
        let root = self.shared.root.span();
        root.set_attribute(KeyValue::new("planrt.status", ended.status.to_owned()));
        if let Some(id) = ended.run_id {
            root.set_attribute(KeyValue::new("planrt.run.id", id.to_owned()));
        }
        root.set_attribute(KeyValue::new("planrt.steps", to_i64(ended.steps)));
        root.set_attribute(KeyValue::new("planrt.tool_calls", to_i64(ended.tool_calls)));
        if let Some(e) = ended.error {
            root.set_attribute(KeyValue::new("error.type", e.to_owned()));
            root.set_status(Status::error(e.to_owned()));
        }
        root.end();
        self.shared.count_end();
    }
}

/// `fut`, the requests its calls make to tools and LLMs carrying `trace`'s
/// `traceparent` (none without a trace).
pub async fn within<F: std::future::Future>(trace: Option<&Trace>, fut: F) -> F::Output {
    plan_llm::with_traceparent(trace.map(Trace::traceparent), fut).await
}

/// The context of a W3C `traceparent` (`00-<trace id>-<span id>-<flags>`), if it is one.
fn remote_parent(header: &str) -> Option<Context> {
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    let mut parts = header.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    };
    if version != "00"
        || parts.next().is_some()
        || !hex(trace, 32)
        || !hex(span, 16)
        || !hex(flags, 2)
    {
        return None;
    }
    let trace = TraceId::from_hex(trace)
        .ok()
        .filter(|t| *t != TraceId::INVALID)?;
    let span = SpanId::from_hex(span)
        .ok()
        .filter(|s| *s != SpanId::INVALID)?;
    let flags = TraceFlags::new(u8::from_str_radix(flags, 16).ok()?);
    let context = SpanContext::new(trace, span, flags, true, TraceState::default());
    Some(Context::new().with_remote_span_context(context))
}

/// A goal as traces name it without showing it: the first 16 hex digits of its SHA-256.
fn goal_hash(goal: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(goal.as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Counts the spans the collector took.
struct Counted<E> {
    inner: E,
    counts: Arc<Counts>,
}

impl<E: std::fmt::Debug> std::fmt::Debug for Counted<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len() as u64;
        let result = self.inner.export(batch).await;
        if result.is_ok() {
            self.counts.exported.fetch_add(n, Ordering::Relaxed);
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
