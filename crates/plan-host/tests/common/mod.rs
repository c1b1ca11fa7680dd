//! Helpers shared by the host's integration tests.
#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use plan_host::{EnvLookup, HostOptions};
use plan_manifest::{BackendConfig, Manifest};
use plan_vm::{CallId, RequestKind, ToolRequest};
use serde_json::Value;

pub const KEY: &str = "sk-test-SECRET-0123456789";

pub fn env(pairs: &[(&str, &str)]) -> EnvLookup {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Arc::new(move |name| map.get(name).cloned())
}

/// Fast retries so tests do not sleep for seconds.
pub fn opts() -> HostOptions {
    HostOptions {
        env: env(&[("TEST_KEY", KEY)]),
        retry_base_delay: Duration::from_millis(5),
        retry_max_delay: Duration::from_millis(20),
        ..HostOptions::default()
    }
}

pub fn openai(
    base_url: &str,
    key_env: Option<&str>,
    timeout: Option<f64>,
    max_retries: Option<u32>,
) -> BackendConfig {
    BackendConfig::Openai {
        base_url: base_url.to_owned(),
        model: "test-model".into(),
        api_key_env: key_env.map(str::to_owned),
        temperature: None,
        timeout_secs: timeout,
        max_retries,
        concurrency: None,
    }
}

pub fn manifest_with(tool: &str, backend: BackendConfig) -> Manifest {
    let mut m = Manifest::builtin();
    if let Some(t) = m.tools.iter_mut().find(|t| t.name == tool) {
        t.backend = Some(backend);
    } else {
        m.tools.push(plan_manifest::ToolSpec {
            name: tool.to_owned(),
            description: String::new(),
            params: vec![],
            effects: Default::default(),
            backend: Some(backend),
        });
    }
    m
}

pub fn req(id: u64, tool: &str, args: Value, kind: RequestKind) -> ToolRequest {
    ToolRequest {
        id: CallId(id),
        tool: tool.into(),
        args: match args {
            Value::Object(m) => m.into(),
            _ => Default::default(),
        },
        kind,
        pc: 0,
        seq_no: Some(id as i64),
    }
}

pub fn plain() -> RequestKind {
    RequestKind::Tool { output_keys: None }
}

pub fn completion(content: &str) -> Value {
    serde_json::json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]
    })
}
