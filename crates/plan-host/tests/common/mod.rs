//! Helpers shared by the host's integration tests.
#![allow(dead_code, unreachable_pub)]

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use plan_host::{EnvLookup, HostOptions, Machine};
use plan_manifest::{BackendConfig, Manifest};
use plan_vm::{CallId, Event, Halt, Outcome, RequestKind, RunError, ToolRequest};
use serde_json::{Value, json};

pub const KEY: &str = "sk-test-SECRET-0123456789";

pub fn env(pairs: &[(&str, &str)]) -> EnvLookup {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Arc::new(move |name| map.get(name).cloned().ok_or(std::env::VarError::NotPresent))
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
            retrieval: false,
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
        instance: id,
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

/// Issues all its requests in the first yield, then finishes with the outputs joined by
/// `+`, or fails with the first tool error (as the VM does).
pub struct Script {
    requests: Vec<ToolRequest>,
    started: bool,
    results: BTreeMap<CallId, Result<Value, String>>,
}

impl Script {
    pub fn new(requests: Vec<ToolRequest>) -> Self {
        Script {
            requests,
            started: false,
            results: BTreeMap::new(),
        }
    }
}

impl Machine for Script {
    fn run(&mut self) -> Halt {
        if !self.started {
            self.started = true;
            return Halt::Yield(
                self.requests
                    .iter()
                    .cloned()
                    .map(std::sync::Arc::new)
                    .collect(),
            );
        }
        if self.results.len() < self.requests.len() {
            return Halt::Yield(vec![]);
        }
        let mut parts = Vec::new();
        for (id, r) in &self.results {
            match r {
                Ok(Value::String(v)) => parts.push(v.clone()),
                Ok(v) => parts.push(v.to_string()),
                Err(e) => {
                    return Halt::Failed(RunError {
                        code: plan_vm::ErrorCode::ToolFailed,
                        message: e.clone(),
                        pc: Some(0),
                        seq_no: Some(id.0 as i64),
                        line: Some(7),
                    });
                }
            }
        }
        Halt::Done(Outcome {
            final_answer: json!(parts.join("+")),
            vars: Default::default(),
            steps: 3,
        })
    }

    fn resume(&mut self, id: CallId, result: Result<Value, String>) -> Result<(), RunError> {
        self.results.insert(id, result);
        Ok(())
    }

    fn take_events(&mut self) -> Vec<Event> {
        vec![Event::Step {
            pc: 0,
            seq_no: Some(0),
            op: "call".into(),
        }]
    }
}
