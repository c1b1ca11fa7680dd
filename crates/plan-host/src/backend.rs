//! The `Backend` trait every tool implementation satisfies, and the secret wrapper.

use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

use crate::error::ToolError;
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

    /// One line for traces and errors (never includes secrets).
    fn describe(&self) -> String;
}

/// How the host looks up environment variables (secrets), answering as
/// [`std::env::var`] does. Injectable so tests never touch the process environment.
pub type EnvLookup = Arc<dyn Fn(&str) -> Result<String, std::env::VarError> + Send + Sync>;

/// The process environment.
pub fn process_env() -> EnvLookup {
    Arc::new(|name| std::env::var(name))
}

/// A secret value (API key). `Debug` and `Display` never show it, so it cannot leak
/// through a stray `{:?}` in an error or trace.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: String) -> Self {
        Secret(s)
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}
