//! `plan-telemetry`: OpenTelemetry traces of what a `planvm` command does, in the GenAI
//! semantic conventions, exported over OTLP (docs/telemetry.md).
//!
//! On only when the environment asks for it (`OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), configured the OpenTelemetry way (the exporter
//! reads `OTEL_EXPORTER_OTLP_PROTOCOL`, `_HEADERS`, `_TIMEOUT`; the resource
//! `OTEL_SERVICE_NAME`, default `planvm`, and `OTEL_RESOURCE_ATTRIBUTES`). Off, nothing
//! here is built and nothing costs anything.
//!
//! One command is one trace: an `invoke_workflow` span for the run or the `ask`, a `chat
//! {model}` span under it per planner call ([`Telemetry::model`]) and an `execute_tool
//! {tool}` span per tool call ([`Telemetry::journal`], from the run's events). Spans go
//! out from a background thread in batches; a collector that is down or slow loses them
//! (counted: [`Telemetry::finish`]), never slows or fails a run.
//!
//! Module map: `journal` turns a run's events into tool spans; `model` wraps the
//! planner's LLM in chat spans.

mod journal;
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

/// What a command exports, from its start to [`Telemetry::finish`].
pub struct Telemetry {
    provider: SdkTracerProvider,
    shared: Arc<Shared>,
    started: Instant,
}

/// What the journal and the model wrapper share with the command's [`Telemetry`].
pub(crate) struct Shared {
    pub(crate) tracer: SdkTracer,
    /// Holds the `invoke_workflow` span: every other span is its child.
    pub(crate) root: Context,
    pub(crate) capture: bool,
    /// Spans ended, and spans the collector took: the difference was lost.
    pub(crate) ended: AtomicU64,
    exported: Arc<AtomicU64>,
    redactor: Arc<plan_llm::Redactor>,
}

impl Shared {
    /// `text` as a span may carry it: secrets removed, cut short.
    pub(crate) fn captured(&self, text: &str) -> String {
        let text = self.redactor.text(text);
        plan_llm::preview(&text, CAPTURE_CHARS)
    }

    pub(crate) fn end(&self, span: &mut impl Span) {
        span.end();
        self.ended.fetch_add(1, Ordering::Relaxed);
    }
}

/// What the command's trace says of it at the start.
pub struct Workflow<'a> {
    /// `run`, `ask`, `resume`, ...
    pub command: &'a str,
    /// The plan file, for a run of one.
    pub plan: Option<&'a str>,
    /// The goal, for an `ask`: only its hash goes out unless content is captured.
    pub goal: Option<&'a str>,
}

/// How the command ended, for its span.
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

impl Telemetry {
    /// Telemetry as the process environment asks for it: None when no OTLP endpoint is
    /// set. `redactor` holds the secrets that must never leave (the host's).
    pub fn from_env(
        workflow: &Workflow<'_>,
        redactor: Arc<plan_llm::Redactor>,
    ) -> Result<Option<Telemetry>, String> {
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
            workflow,
            redactor,
            std::env::var(CAPTURE_VAR).is_ok_and(|v| v.eq_ignore_ascii_case("true")),
        )))
    }

    /// Telemetry exporting through `exporter` (tests, embedders).
    pub fn with_exporter(
        exporter: impl SpanExporter + 'static,
        workflow: &Workflow<'_>,
        redactor: Arc<plan_llm::Redactor>,
        capture: bool,
    ) -> Telemetry {
        let exported = Arc::new(AtomicU64::new(0));
        let mut resource = Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("planvm");
        }
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(Counted {
                inner: exporter,
                exported: exported.clone(),
            })
            .with_resource(resource.build())
            .build();
        let tracer = provider.tracer("planrt");
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
        let span = tracer
            .span_builder(format!("invoke_workflow {}", workflow.command))
            .with_kind(SpanKind::Internal)
            .with_attributes(attrs)
            .start_with_context(&tracer, &Context::new());
        let root = Context::new().with_span(span);
        let shared = Arc::new(Shared {
            tracer,
            root,
            capture,
            ended: AtomicU64::new(0),
            exported,
            redactor,
        });
        if capture && let Some(g) = workflow.goal {
            shared
                .root
                .span()
                .set_attribute(KeyValue::new("planrt.goal", shared.captured(g)));
        }
        Telemetry {
            provider,
            shared,
            started: Instant::now(),
        }
    }

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

    /// The trace id, as W3C trace context writes it (32 hex digits).
    pub fn trace_id(&self) -> String {
        self.shared
            .root
            .span()
            .span_context()
            .trace_id()
            .to_string()
    }

    /// Ends the workflow span as `ended` says and sends what is left, waiting for the
    /// collector at most 3% of the command's time (at least 50 ms, at most 5 s: a
    /// collector that hangs costs no more); the number of spans that did not reach it.
    pub fn finish(self, ended: &Ended<'_>) -> u64 {
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
        self.shared.ended.fetch_add(1, Ordering::Relaxed);
        let grace = (self.started.elapsed() * 3 / 100).clamp(MIN_GRACE, MAX_GRACE);
        // NB: a collector that hangs keeps the exporting thread: it is left behind.
        let _ = self.provider.shutdown_with_timeout(grace);
        let ended = self.shared.ended.load(Ordering::Relaxed);
        ended.saturating_sub(self.shared.exported.load(Ordering::Relaxed))
    }
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
#[derive(Debug)]
struct Counted<E> {
    inner: E,
    exported: Arc<AtomicU64>,
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len() as u64;
        let result = self.inner.export(batch).await;
        if result.is_ok() {
            self.exported.fetch_add(n, Ordering::Relaxed);
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
