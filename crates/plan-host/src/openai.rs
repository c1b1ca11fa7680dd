//! `openai` backend: one user message (see `prompt`) to an OpenAI-compatible chat
//! completions server; the output is the reply as a string, and its tokens.

use futures::future::BoxFuture;
use serde_json::Value;

use crate::backend::Backend;
use crate::error::ToolError;
use crate::prompt::user_message;
use plan_llm::{ChatClient, Message, Usage};
use plan_vm::ToolRequest;

#[derive(Debug)]
pub(crate) struct OpenAiBackend {
    pub(crate) chat: ChatClient,
    /// Its model's price (`[pricing]`), if it has one.
    pub(crate) price: Option<plan_manifest::Price>,
}

impl Backend for OpenAiBackend {
    fn call<'a>(&'a self, req: &'a ToolRequest) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move { self.call_with_usage(req).await.map(|(v, _)| v) })
    }

    fn call_with_usage<'a>(
        &'a self,
        req: &'a ToolRequest,
    ) -> BoxFuture<'a, Result<(Value, Option<Usage>), ToolError>> {
        Box::pin(async move {
            let content = user_message(req)?;
            let reply = self.chat.reply(&[Message::user(content)]).await?;
            let usage = reply.usage.map(|u| u.priced(self.price.as_ref()));
            Ok((Value::String(reply.text), usage))
        })
    }

    fn describe(&self) -> String {
        self.chat.describe()
    }
}
