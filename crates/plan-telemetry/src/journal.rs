//! A run's tool calls as spans: one `execute_tool {tool}` span (`retrieval {tool}` for a
//! tool declared as retrieval) from the moment a call is sent to its answer, under the
//! workflow's span, with each failed attempt that was retried as an event. A question to
//! a person (`ask_user`) answered when the run resumed lasts from when it was asked; one
//! the run stopped at ends with it, `planrt.call.waits_for_person`. Calls answered from a
//! saved result (a resumed run) are events on the workflow's span; a call issued ahead
//! that the run ended before answering ends with `planrt.call.discarded`.
//!
//! A span is built when its call ends, with the time it started: one is exported only
//! once ended anyway, and a person's answer says only then how long it was waited for.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use opentelemetry::KeyValue;
use opentelemetry::trace::{Span, SpanKind, Status, TraceContextExt, Tracer};
use plan_host::{Journal, TraceEvent};
use plan_vm::CallId;

use crate::{Shared, to_i64};

/// Turns a run's events into tool spans (see the module docs). Add it to the run's
/// journal; it never fails a run.
pub struct ToolSpans {
    shared: Arc<Shared>,
    /// Each tool's effect (`pure`, `read`, `write`, `human`), and whether it retrieves,
    /// from the manifest.
    effects: HashMap<String, (&'static str, bool)>,
    /// The calls in flight: their span's name, attributes and start.
    open: HashMap<CallId, Open>,
}

/// A call's span, until the call ends.
struct Open {
    name: String,
    attrs: Vec<KeyValue>,
    sent: SystemTime,
    human: bool,
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
                (t.name.clone(), (effect, t.retrieval))
            })
            .collect();
        ToolSpans {
            shared,
            effects,
            open: HashMap::new(),
        }
    }

    /// Ends call `id`'s span now, started at `start` (when it was sent, unless said),
    /// with `attrs` and `status`; `events` are its retries.
    fn end(
        &mut self,
        id: CallId,
        start: Option<SystemTime>,
        (attrs, status): (Vec<KeyValue>, Status),
        events: &[plan_llm::Retry],
    ) {
        let Some(open) = self.open.remove(&id) else {
            return;
        };
        let mut all = open.attrs;
        all.extend(attrs);
        let mut span = self
            .shared
            .tracer
            .span_builder(open.name)
            .with_kind(SpanKind::Internal)
            .with_start_time(start.unwrap_or(open.sent))
            .with_attributes(all)
            .start_with_context(&self.shared.tracer, &self.shared.root);
        span.set_status(status);
        for r in events {
            let wait = i64::try_from(r.wait.as_millis()).unwrap_or(i64::MAX);
            span.add_event_with_timestamp(
                "planrt.retry",
                r.at,
                vec![
                    KeyValue::new("error.type", r.kind.as_str()),
                    KeyValue::new("planrt.retry.wait_ms", wait),
                    KeyValue::new("planrt.retry.reason", self.shared.captured(&r.message)),
                ],
            );
        }
        self.shared.end(&mut span);
    }
}

impl Journal for ToolSpans {
    fn record(&mut self, event: &TraceEvent<'_>) -> Result<(), String> {
        match event {
            TraceEvent::CallIssued {
                request,
                ahead,
                reused,
            } => self.issued(request, *ahead, *reused),
            TraceEvent::CallAnswered {
                request,
                result,
                took,
                usage,
                retries,
                replayed,
            } => {
                let Some(open) = self.open.get(&request.id) else {
                    return Ok(());
                };
                // NB: a person's answer given to a resumed run was waited for since the
                // question was asked, before this process.
                let start = open
                    .human
                    .then(|| SystemTime::now().checked_sub(*took))
                    .flatten();
                let ended = self.answered(result, (*took, *usage, retries.len()), *replayed);
                self.end(request.id, start, ended, retries);
            }
            TraceEvent::CallDiscarded { request, .. } => {
                let attrs = vec![KeyValue::new("planrt.call.discarded", true)];
                self.end(request.id, None, (attrs, Status::Unset), &[]);
            }
            TraceEvent::Finished { .. } => {
                // NB: every call of a run has ended with it; a question to a person
                // waits for them (the run that goes on with the answer has the rest).
                let ids: Vec<(CallId, bool)> =
                    self.open.iter().map(|(id, o)| (*id, o.human)).collect();
                for (id, human) in ids {
                    let attrs = if human {
                        vec![KeyValue::new("planrt.call.waits_for_person", true)]
                    } else {
                        Vec::new()
                    };
                    self.end(id, None, (attrs, Status::Unset), &[]);
                }
            }
            _ => {}
        }
        Ok(())
    }
}

impl ToolSpans {
    /// A call sent (`ahead` of its turn): its span opened; a call answered from a saved
    /// result (`reused`) is an event on the workflow's span instead.
    fn issued(&mut self, request: &plan_vm::ToolRequest, ahead: bool, reused: bool) {
        let tool = request.tool.as_str();
        if reused {
            self.shared.root.span().add_event(
                "planrt.call.reused",
                vec![
                    KeyValue::new("gen_ai.tool.name", tool.to_owned()),
                    KeyValue::new("planrt.step", to_i64(request.instance)),
                ],
            );
            return;
        }
        let (effect, retrieval) = self.effects.get(tool).copied().unzip();
        let operation = if retrieval == Some(true) {
            "retrieval"
        } else {
            "execute_tool"
        };
        let mut attrs = vec![
            KeyValue::new("gen_ai.operation.name", operation),
            KeyValue::new("gen_ai.tool.name", tool.to_owned()),
            KeyValue::new("gen_ai.tool.call.id", request.id.0.to_string()),
            KeyValue::new("planrt.step", to_i64(request.instance)),
            KeyValue::new("planrt.call.ahead", ahead),
        ];
        if let Some(seq) = request.seq_no {
            attrs.push(KeyValue::new("planrt.seq_no", seq));
        }
        if let Some(effect) = effect {
            attrs.push(KeyValue::new("planrt.tool.effect", effect));
        }
        if retrieval == Some(true) {
            attrs.push(KeyValue::new("gen_ai.data_source.id", tool.to_owned()));
        }
        if self.shared.capture {
            let args = serde_json::to_string(&request.args).unwrap_or_default();
            attrs.push(KeyValue::new(
                "gen_ai.tool.call.arguments",
                self.shared.captured(&args),
            ));
        }
        let open = Open {
            name: format!("{operation} {tool}"),
            attrs,
            sent: SystemTime::now(),
            human: effect == Some("human"),
        };
        self.open.insert(request.id, open);
    }

    /// What a call's answer adds to its span: its latency, attempts and tokens, its
    /// result when captured, and its status.
    fn answered(
        &self,
        result: &Result<&serde_json::Value, &plan_host::ToolError>,
        (took, usage, retries): (std::time::Duration, Option<plan_llm::Usage>, usize),
        replayed: bool,
    ) -> (Vec<KeyValue>, Status) {
        let mut attrs = vec![
            KeyValue::new(
                "planrt.latency_ms",
                i64::try_from(took.as_millis()).unwrap_or(i64::MAX),
            ),
            KeyValue::new(
                "planrt.call.attempts",
                i64::try_from(retries + 1).unwrap_or(i64::MAX),
            ),
        ];
        if replayed {
            attrs.push(KeyValue::new("planrt.call.replayed", true));
        }
        if let Some(u) = usage {
            attrs.push(KeyValue::new(
                "gen_ai.usage.input_tokens",
                to_i64(u.input_tokens),
            ));
            attrs.push(KeyValue::new(
                "gen_ai.usage.output_tokens",
                to_i64(u.output_tokens),
            ));
        }
        let status = match result {
            Ok(output) => {
                if self.shared.capture {
                    let text = match output {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    attrs.push(KeyValue::new(
                        "gen_ai.tool.call.result",
                        self.shared.captured(&text),
                    ));
                }
                Status::Unset
            }
            Err(e) => {
                attrs.push(KeyValue::new("error.type", e.kind.as_str()));
                Status::error(self.shared.captured(&e.message))
            }
        };
        (attrs, status)
    }
}
