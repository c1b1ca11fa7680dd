//! Redaction of secrets from everything a run writes out.
//!
//! Keys never go into errors, traces or cassettes by construction (headers are never
//! formatted), but a server may echo them back: a proxy answering `401 {"error": "bad key
//! Bearer sk-..."}`, or a 200 body that quotes the request. Every secret the host reads
//! is registered here, and every tool output and tool error passes through
//! [`Redactor::value`] / [`Redactor::text`] before the VM, the trace or the recorder sees
//! it, so the key is replaced by [`REDACTED`] whatever path the text takes afterwards
//! (run errors, `--format json`, trace events, cassettes). Error bodies are redacted
//! whole, before they are shortened to a preview, so no partial key survives a cut.

use std::borrow::Cow;
use std::sync::RwLock;

use serde_json::{Map, Value};

/// What a secret is replaced by.
pub const REDACTED: &str = "[redacted]";

/// Values shorter than this are not redacted: a key such as `x` or `-` (common for local
/// servers that check none) would turn every such letter of every output into
/// [`REDACTED`], mangling answers and growing them without bound. Such a key is not
/// protected; the host warns about it.
pub const MIN_SECRET_BYTES: usize = 8;

/// The secrets of one host (API keys of every backend, planner keys later).
#[derive(Debug, Default)]
pub struct Redactor {
    secrets: RwLock<Vec<String>>,
}

impl Redactor {
    pub fn new() -> Self {
        Redactor::default()
    }

    /// Registers a secret value; one shorter than [`MIN_SECRET_BYTES`] is not, and
    /// `false` says so.
    pub fn add(&self, secret: &str) -> bool {
        if secret.len() < MIN_SECRET_BYTES {
            return false;
        }
        let mut s = self.secrets.write().unwrap_or_else(|p| p.into_inner());
        if !s.iter().any(|k| k == secret) {
            s.push(secret.to_owned());
            // Longest first, so a key that contains another is replaced whole.
            s.sort_by_key(|k| std::cmp::Reverse(k.len()));
        }
        true
    }

    fn secrets(&self) -> std::sync::RwLockReadGuard<'_, Vec<String>> {
        self.secrets.read().unwrap_or_else(|p| p.into_inner())
    }

    /// `text` with every secret replaced by [`REDACTED`] (borrowed when there is none).
    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let secrets = self.secrets();
        redact_str(&secrets, text)
    }

    /// `v` with every secret replaced in every string and object key.
    pub fn value(&self, v: Value) -> Value {
        let secrets = self.secrets();
        if secrets.is_empty() {
            return v;
        }
        redact_value(&secrets, v)
    }
}

fn redact_str<'a>(secrets: &[String], text: &'a str) -> Cow<'a, str> {
    let mut out = Cow::Borrowed(text);
    for s in secrets {
        if out.contains(s.as_str()) {
            out = Cow::Owned(out.replace(s.as_str(), REDACTED));
        }
    }
    out
}

fn redact_value(secrets: &[String], v: Value) -> Value {
    match v {
        Value::String(s) => match redact_str(secrets, &s) {
            Cow::Borrowed(_) => Value::String(s),
            Cow::Owned(r) => Value::String(r),
        },
        Value::Array(a) => Value::Array(a.into_iter().map(|x| redact_value(secrets, x)).collect()),
        Value::Object(m) => {
            let mut out = Map::with_capacity(m.len());
            for (k, x) in m {
                out.insert(
                    redact_str(secrets, &k).into_owned(),
                    redact_value(secrets, x),
                );
            }
            Value::Object(out)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_replaced_everywhere_in_a_value() {
        let r = Redactor::new();
        assert_eq!(r.value(json!("sk-1")), json!("sk-1"), "nothing registered");
        assert!(r.add("sk-1-abcd"));
        assert!(r.add("sk-1-abcd-long"));
        assert!(!r.add(""));
        assert_eq!(
            r.text("a sk-1-abcd-long b sk-1-abcd"),
            "a [redacted] b [redacted]"
        );
        assert!(matches!(r.text("clean"), Cow::Borrowed(_)));
        assert_eq!(
            r.value(json!({"Bearer sk-1-abcd": ["x sk-1-abcd y", 3, {"k": "sk-1-abcd-long"}], "n": null})),
            json!({"Bearer [redacted]": ["x [redacted] y", 3, {"k": "[redacted]"}], "n": null})
        );
    }

    #[test]
    fn a_value_too_short_to_be_a_secret_is_not_redacted() {
        let r = Redactor::new();
        assert!(!r.add("x"));
        assert!(!r.add("1234567"));
        assert_eq!(
            r.text("x marks the spot, 1234567"),
            "x marks the spot, 1234567"
        );
        assert!(r.add("12345678"));
        assert_eq!(r.text("12345678"), "[redacted]");
    }
}
