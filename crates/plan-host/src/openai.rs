//! `openai` backend: one user message (see `prompt`) to an OpenAI-compatible chat
//! completions server; the output is the reply as a string.

use futures::future::BoxFuture;
use serde_json::Value;

use crate::backend::Backend;
use crate::error::ToolError;
use crate::prompt::user_message;
use plan_llm::{ChatClient, Message};
use plan_vm::ToolRequest;

#[derive(Debug)]
pub(crate) struct OpenAiBackend {
    pub(crate) chat: ChatClient,
}

impl Backend for OpenAiBackend {
    fn call<'a>(&'a self, req: &'a ToolRequest) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let content = user_message(req)?;
            let reply = self.chat.complete(&[Message::user(content)]).await?;
            Ok(Value::String(reply))
        })
    }

    fn describe(&self) -> String {
        self.chat.describe()
    }
}
