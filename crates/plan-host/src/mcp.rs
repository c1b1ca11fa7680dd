//! `mcp` backend: the call goes to a tool of an MCP server (`plan-mcp`'s [`Servers`],
//! one client per server shared by every run of the host); the result becomes a value by
//! [`plan_mcp::output`]. Dropping the call (a run that stops, a timeout) cancels it on the
//! server.

use std::sync::Arc;

use futures::future::BoxFuture;
use plan_mcp::Servers;
use serde_json::Value;

use crate::backend::Backend;
use crate::error::ToolError;
use plan_vm::ToolRequest;

#[derive(Debug)]
pub(crate) struct McpBackend {
    pub(crate) servers: Arc<Servers>,
    pub(crate) server: String,
    /// The tool's name on the server.
    pub(crate) tool: String,
}

impl Backend for McpBackend {
    fn call<'a>(&'a self, req: &'a ToolRequest) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            // NB: a null argument stands for an absent one (as the compiler reads it):
            // servers that check their schemas strictly refuse a null.
            let mut args = req.args.to_map();
            args.retain(|_, v| !v.is_null());
            let result = self.servers.call(&self.server, &self.tool, args).await?;
            // NB: shared clients may have read secrets this host's redactor never saw.
            let redactor = self.servers.redactor();
            plan_mcp::output(&req.tool, result)
                .map(|v| redactor.value(v))
                .map_err(|mut e| {
                    e.message = redactor.text(&e.message).into_owned();
                    e
                })
        })
    }

    fn describe(&self) -> String {
        format!("MCP tool `{}` of server `{}`", self.tool, self.server)
    }
}
