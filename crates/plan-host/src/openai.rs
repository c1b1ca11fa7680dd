//! `openai` backend: OpenAI-compatible `POST {base_url}/chat/completions` (OpenAI, Ollama,
//! vLLM, llama.cpp's server). One user message, non-streaming; the output is
//! `choices[0].message.content` as a string.

use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::backend::Backend;
use crate::error::{ToolError, ToolErrorKind};
use crate::net::Endpoint;
use crate::prompt::user_message;
use plan_vm::ToolRequest;

#[derive(Debug)]
pub(crate) struct OpenAiBackend {
    pub(crate) endpoint: Endpoint,
    pub(crate) model: String,
    pub(crate) temperature: Option<f64>,
}

/// `{base_url}/chat/completions`, tolerating a trailing slash on the base.
pub(crate) fn completions_url(base_url: &str) -> String {
    format!("{}/chat/completions", base_url.trim_end_matches('/'))
}

impl OpenAiBackend {
    async fn complete(&self, req: &ToolRequest) -> Result<Value, ToolError> {
        let content = user_message(req)?;
        let mut body = json!({
            "model": self.model,
            "messages": [{"role": "user", "content": content}],
            "stream": false,
        });
        if let (Some(t), Value::Object(m)) = (self.temperature, &mut body) {
            m.insert("temperature".into(), json!(t));
        }
        let resp = self.endpoint.post_json(&body).await?;
        let content = resp.pointer("/choices/0/message/content");
        match content {
            Some(Value::String(s)) => Ok(Value::String(s.clone())),
            // Some servers return content as a list of typed parts.
            Some(Value::Array(parts)) => {
                let text: String = parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect();
                Ok(Value::String(text))
            }
            _ => Err(ToolError::new(
                ToolErrorKind::BadResponse,
                format!(
                    "POST {}: response has no choices[0].message.content string: {}",
                    self.endpoint.url,
                    self.endpoint.preview(&resp.to_string())
                ),
            )),
        }
    }
}

impl Backend for OpenAiBackend {
    fn call<'a>(&'a self, req: &'a ToolRequest) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(self.complete(req))
    }

    fn describe(&self) -> String {
        format!("openai model {} at {}", self.model, self.endpoint.url)
    }
}
