//! A run's tool calls as spans: one `execute_tool {tool}` span from the moment a call is
//! sent to its answer, under the workflow's span. Calls answered from a saved result (a
//! resumed run) are events on the workflow's span; a call issued ahead that the run ended
//! before answering ends with `planrt.call.discarded`.

use std::collections::HashMap;
use std::sync::Arc;

use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue};
use plan_host::{Journal, TraceEvent};
use plan_vm::CallId;

use crate::{Shared, to_i64};

/// Turns a run's events into tool spans (see the module docs). Add it to the run's
/// journal; it never fails a run.
pub struct ToolSpans {
    shared: Arc<Shared>,
    /// Each tool's effect (`pure`, `read`, `write`, `human`), from the manifest.
    effects: HashMap<String, &'static str>,
    /// The spans of the calls in flight.
    open: HashMap<CallId, Context>,
}

impl ToolSpans {
    pub(crate) fn new(shared: Arc<Shared>, manifest: &plan_manifest::Manifest) -> ToolSpans {
        let effects = manifest
            .tools
            .iter()
            .map(|t| {
                let effect = match t.effects {
                    plan_manifest::Effects::Pure => "pure",
                    plan_manifest::Effects::Read => "read",
                    plan_manifest::Effects::Write => "write",
                    plan_manifest::Effects::Human => "human",
                };
                (t.name.clone(), effect)
            })
            .collect();
        ToolSpans {
            shared,
            effects,
            open: HashMap::new(),
        }
    }

    fn end(&mut self, id: CallId, attrs: Vec<KeyValue>) {
        if let Some(cx) = self.open.remove(&id) {
            let span = cx.span();
            span.set_attributes(attrs);
            span.end();
            self.shared.count_end();
        }
    }
}

impl Journal for ToolSpans {
    fn record(&mut self, event: &TraceEvent<'_>) -> Result<(), String> {
        match event {
            TraceEvent::CallIssued {
                request,
                ahead,
                reused,
            } => {
                let tool = request.tool.as_str();
                if *reused {
                    self.shared.root.span().add_event(
                        "planrt.call.reused",
                        vec![
                            KeyValue::new("gen_ai.tool.name", tool.to_owned()),
                            KeyValue::new("planrt.step", to_i64(request.instance)),
                        ],
                    );
                    return Ok(());
                }
                let mut attrs = vec![
                    KeyValue::new("gen_ai.operation.name", "execute_tool"),
                    KeyValue::new("gen_ai.tool.name", tool.to_owned()),
                    KeyValue::new("gen_ai.tool.call.id", request.id.0.to_string()),
                    KeyValue::new("planrt.step", to_i64(request.instance)),
                    KeyValue::new("planrt.call.ahead", *ahead),
                ];
                if let Some(seq) = request.seq_no {
                    attrs.push(KeyValue::new("planrt.seq_no", seq));
                }
                if let Some(effect) = self.effects.get(tool) {
                    attrs.push(KeyValue::new("planrt.tool.effect", *effect));
                }
                if self.shared.capture {
                    let args = serde_json::to_string(&request.args).unwrap_or_default();
                    attrs.push(KeyValue::new(
                        "gen_ai.tool.call.arguments",
                        self.shared.captured(&args),
                    ));
                }
                let span = self
                    .shared
                    .tracer
                    .span_builder(format!("execute_tool {tool}"))
                    .with_kind(SpanKind::Internal)
                    .with_attributes(attrs)
                    .start_with_context(&self.shared.tracer, &self.shared.root);
                self.open
                    .insert(request.id, self.shared.root.with_span(span));
            }
            TraceEvent::CallAnswered {
                request,
                result,
                took,
                usage,
            } => {
                let Some(cx) = self.open.get(&request.id) else {
                    return Ok(());
                };
                let span = cx.span();
                if let Some(u) = usage {
                    span.set_attribute(KeyValue::new(
                        "gen_ai.usage.input_tokens",
                        to_i64(u.input_tokens),
                    ));
                    span.set_attribute(KeyValue::new(
                        "gen_ai.usage.output_tokens",
                        to_i64(u.output_tokens),
                    ));
                }
                span.set_attribute(KeyValue::new(
                    "planrt.latency_ms",
                    i64::try_from(took.as_millis()).unwrap_or(i64::MAX),
                ));
                match result {
                    Ok(output) => {
                        if self.shared.capture {
                            let text = match output {
                                serde_json::Value::String(s) => s.clone(),
                                other => other.to_string(),
                            };
                            span.set_attribute(KeyValue::new(
                                "gen_ai.tool.call.result",
                                self.shared.captured(&text),
                            ));
                        }
                    }
                    Err(e) => {
                        span.set_attribute(KeyValue::new("error.type", e.kind.as_str()));
                        span.set_status(Status::error(self.shared.captured(&e.message)));
                    }
                }
                self.end(request.id, Vec::new());
            }
            TraceEvent::CallDiscarded { request, .. } => {
                self.end(
                    request.id,
                    vec![KeyValue::new("planrt.call.discarded", true)],
                );
            }
            TraceEvent::Finished { .. } => {
                // NB: every call of a run has ended with it.
                let ids: Vec<CallId> = self.open.keys().copied().collect();
                for id in ids {
                    self.end(id, Vec::new());
                }
            }
            _ => {}
        }
        Ok(())
    }
}
