//! Secrets (API keys) and where they come from.

use std::fmt;
use std::sync::Arc;

/// How environment variables (secrets) are looked up, answering as [`std::env::var`]
/// does. Injectable so tests never touch the process environment.
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
