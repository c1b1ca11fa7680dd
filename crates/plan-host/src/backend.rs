//! The `Backend` trait every tool implementation satisfies.

use futures::future::BoxFuture;
use serde_json::Value;

use crate::error::ToolError;
use plan_llm::Usage;
use plan_vm::ToolRequest;

/// Something that can answer tool requests. Implementations must be cheap to share
/// (`Arc<dyn Backend>`) and safe to call concurrently: the driver issues all requests of
/// one yield at once.
///
/// A boxed future rather than `async fn` keeps the trait object-safe, so tests and the
/// host can mix real backends with stubs behind one `Arc<dyn Backend>`.
pub trait Backend: Send + Sync {
    /// Performs one call. The output is the tool's raw result; the VM does the
    /// output_vars extraction.
    fn call<'a>(&'a self, req: &'a ToolRequest) -> BoxFuture<'a, Result<Value, ToolError>>;

    /// [`Backend::call`], with the tokens the call cost when its server says (an LLM's);
    /// by default none.
    fn call_with_usage<'a>(
        &'a self,
        req: &'a ToolRequest,
    ) -> BoxFuture<'a, Result<(Value, Option<Usage>), ToolError>> {
        Box::pin(async move { self.call(req).await.map(|v| (v, None)) })
    }

    /// One line for traces and errors (never includes secrets).
    fn describe(&self) -> String;
}
