//! `http` backend: POST the call's args as a JSON object to a URL; the output is the JSON
//! response (a non-JSON body becomes a string), or the value at a JSON pointer into it.
//!
//! An LLM served this way gets the same format instruction as through the `openai`
//! backend: a call with several output vars, or a condition, has it appended to its
//! string `prompt` (see `prompt::format_instruction`).

use futures::future::BoxFuture;
use serde_json::Value;

use crate::backend::Backend;
use crate::error::{ToolError, ToolErrorKind};
use crate::prompt::format_instruction;
use plan_llm::Endpoint;
use plan_vm::ToolRequest;

#[derive(Debug)]
pub(crate) struct HttpBackend {
    pub(crate) endpoint: Endpoint,
    pub(crate) pointer: Option<String>,
}

impl HttpBackend {
    async fn post(&self, req: &ToolRequest) -> Result<Value, ToolError> {
        let mut args = req.args.to_map();
        if let Some(suffix) = format_instruction(&req.kind)
            && let Some(Value::String(prompt)) = args.get_mut("prompt")
        {
            prompt.push_str(&suffix);
        }
        let body = Value::Object(args);
        let mut resp = self.endpoint.post_json(&body).await?;
        let Some(ptr) = &self.pointer else {
            return Ok(resp);
        };
        match resp.pointer_mut(ptr) {
            Some(v) => Ok(v.take()),
            None => Err(ToolError::new(
                ToolErrorKind::BadResponse,
                format!(
                    "POST {}: the response has nothing at JSON pointer `{ptr}`: {}",
                    self.endpoint.url(),
                    self.endpoint.preview(&resp.to_string())
                ),
            )),
        }
    }
}

impl Backend for HttpBackend {
    fn call<'a>(&'a self, req: &'a ToolRequest) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(self.post(req))
    }

    fn describe(&self) -> String {
        format!("http POST {}", self.endpoint.url())
    }
}
