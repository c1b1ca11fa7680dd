//! The planner's LLM with each call a `chat {model}` span under the workflow's: its round,
//! whether it streamed, the tokens it cost, and why it failed.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use opentelemetry::KeyValue;
use opentelemetry::trace::{Span, SpanKind, Status, Tracer};
use plan_llm::{CallError, Reply};
use plan_planner::{PlannerCall, PlannerModel};

use crate::{Shared, to_i64};

pub(crate) struct Traced {
    pub(crate) inner: Arc<dyn PlannerModel>,
    pub(crate) model: String,
    pub(crate) shared: Arc<Shared>,
}

impl Traced {
    fn span(&self, call: &PlannerCall<'_>, streamed: bool) -> opentelemetry_sdk::trace::Span {
        let mut attrs = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.provider.name", "openai"),
            KeyValue::new("gen_ai.request.model", self.model.clone()),
            KeyValue::new("planrt.planner.round", to_i64(call.round)),
            KeyValue::new(
                "planrt.planner.kind",
                if call.round == 0 {
                    "plan"
                } else {
                    "repair_or_replan"
                },
            ),
            KeyValue::new("planrt.planner.streamed", streamed),
        ];
        if self.shared.capture
            && let Some(last) = call.messages.last()
        {
            attrs.push(KeyValue::new(
                "gen_ai.input.messages",
                self.shared.captured(&last.content),
            ));
        }
        self.shared
            .tracer
            .span_builder(format!("chat {}", self.model))
            .with_kind(SpanKind::Client)
            .with_attributes(attrs)
            .start_with_context(&self.shared.tracer, &self.shared.root)
    }

    fn end(&self, mut span: opentelemetry_sdk::trace::Span, reply: &Result<Reply, CallError>) {
        match reply {
            Ok(reply) => {
                if let Some(u) = reply.usage {
                    span.set_attribute(KeyValue::new(
                        "gen_ai.usage.input_tokens",
                        to_i64(u.input_tokens),
                    ));
                    span.set_attribute(KeyValue::new(
                        "gen_ai.usage.output_tokens",
                        to_i64(u.output_tokens),
                    ));
                }
                if self.shared.capture {
                    span.set_attribute(KeyValue::new(
                        "gen_ai.output.messages",
                        self.shared.captured(&reply.text),
                    ));
                }
            }
            Err(e) => {
                span.set_attribute(KeyValue::new("error.type", e.kind.as_str()));
                span.set_status(Status::error(self.shared.captured(&e.message)));
            }
        }
        self.shared.end(&mut span);
    }
}

impl PlannerModel for Traced {
    fn reply<'a>(&'a self, call: &'a PlannerCall<'_>) -> BoxFuture<'a, Result<Reply, CallError>> {
        Box::pin(async move {
            let span = self.span(call, false);
            let reply = self.inner.reply(call).await;
            self.end(span, &reply);
            reply
        })
    }

    fn streams(&self) -> bool {
        self.inner.streams()
    }

    fn reply_streaming<'a>(
        &'a self,
        call: &'a PlannerCall<'_>,
        on_text: &'a mut (dyn FnMut(&str) + Send),
    ) -> BoxFuture<'a, Result<Reply, CallError>> {
        Box::pin(async move {
            let span = self.span(call, true);
            let reply = self.inner.reply_streaming(call, on_text).await;
            self.end(span, &reply);
            reply
        })
    }

    fn budget(&self) -> Option<Duration> {
        self.inner.budget()
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}
