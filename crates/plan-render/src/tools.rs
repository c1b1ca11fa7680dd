//! A tool as `planvm tools list` shows it: for people, its name, effects, what serves it,
//! its description's first line and its parameters; for machines, its declaration with
//! `served_by`.

use plan_manifest::{BackendConfig, Effects, ToolSpec};
use serde_json::json;

/// `t` as a line of JSON (`json`), or as text: `name (effects, served by)`, the
/// description, then one line per parameter.
pub fn tool(t: &ToolSpec, json: bool) -> String {
    if json {
        let mut v = json!(t);
        v["served_by"] = json!(served_by(t));
        return v.to_string();
    }
    text(t)
}

/// What serves `t`: `mcp:SERVER`, its backend's kind, a person, or the default backend.
fn served_by(t: &ToolSpec) -> String {
    match &t.backend {
        Some(BackendConfig::Mcp { server, .. }) => format!("mcp:{server}"),
        Some(b) => json!(b)["kind"].as_str().unwrap_or("?").to_owned(),
        None if t.effects == Effects::Human => "person".into(),
        None => "default".into(),
    }
}

/// `name (effects, served by)`, the description, then one line per param.
fn text(t: &ToolSpec) -> String {
    let effects = json!(t.effects);
    let mut s = format!(
        "{} ({}, {})",
        t.name,
        effects.as_str().unwrap_or("?"),
        served_by(t)
    );
    if let Some(line) = t.description.lines().find(|l| !l.trim().is_empty()) {
        s.push_str(&format!("\n  {}", line.trim()));
    }
    for p in &t.params {
        s.push_str(&format!("\n  - {}: {}", p.name, p.summary()));
        if !p.description.trim().is_empty() {
            s.push_str(&format!(" — {}", p.description.trim()));
        }
    }
    s
}
