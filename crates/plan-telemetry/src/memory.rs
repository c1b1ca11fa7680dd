//! Spans kept in memory instead of sent: for tests, and for embedders that read their
//! own traces ([`Telemetry::in_memory`]).

use std::sync::{Arc, Mutex};

use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

use crate::Telemetry;

/// Every span a [`Telemetry::in_memory`] exported so far, and the service its resource
/// names.
#[derive(Clone, Debug, Default)]
pub struct Kept {
    spans: Arc<Mutex<Vec<SpanData>>>,
    service: Arc<Mutex<Option<String>>>,
}

impl Kept {
    /// The spans exported so far (all of them once [`Telemetry::finish`] returned).
    pub fn spans(&self) -> Vec<SpanData> {
        self.spans.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The `service.name` of the traces' resource.
    pub fn service(&self) -> Option<String> {
        self.service
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl SpanExporter for Kept {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.spans
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(batch);
        Ok(())
    }

    fn set_resource(&mut self, resource: &Resource) {
        let name = resource.get(&opentelemetry::Key::new("service.name"));
        *self.service.lock().unwrap_or_else(|e| e.into_inner()) =
            name.map(|v| v.as_str().into_owned());
    }
}

impl Telemetry {
    /// Telemetry whose spans stay in this process, in the [`Kept`] returned with it;
    /// `redactor` and `capture` as for [`Telemetry::with_exporter`].
    pub fn in_memory(redactor: Arc<plan_llm::Redactor>, capture: bool) -> (Telemetry, Kept) {
        let kept = Kept::default();
        (
            Telemetry::with_exporter(kept.clone(), redactor, capture),
            kept,
        )
    }
}
