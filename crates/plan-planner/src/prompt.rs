//! The planner prompt: a template file (`prompt/planner.md`, replaceable with `--prompt
//! FILE`) whose placeholders `{{goal}}`, `{{response_format}}`, `{{tools}}`,
//! `{{examples}}`, `{{conversation}}` and `{{schema}}` are filled in one pass (text put in is never scanned again, so a goal
//! containing `{{tools}}` stays as written).

use std::fmt::Write;

use serde_json::Value;

use crate::examples::Example;
use crate::memory::Conversation;
use plan_manifest::Manifest;

/// The template the project ships.
pub const DEFAULT_TEMPLATE: &str = include_str!("../prompt/planner.md");

/// The placeholders a template may use; `{{goal}}` is required.
pub const PLACEHOLDERS: [&str; 6] = [
    "goal",
    "response_format",
    "tools",
    "examples",
    "conversation",
    "schema",
];

/// A checked prompt template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    text: String,
}

impl Default for Template {
    fn default() -> Self {
        Template {
            text: DEFAULT_TEMPLATE.to_owned(),
        }
    }
}

impl Template {
    /// A template from text. It must contain `{{goal}}` (a prompt without the goal cannot
    /// be what the user meant).
    pub fn new(text: String) -> Result<Template, String> {
        if !text.contains("{{goal}}") {
            return Err(
                "the prompt template has no {{goal}} placeholder: the goal would not be sent"
                    .into(),
            );
        }
        Ok(Template { text })
    }

    /// Whether the template has placeholder `name` (`goal`, `conversation`, ...).
    pub fn uses(&self, name: &str) -> bool {
        self.text.contains(&format!("{{{{{name}}}}}"))
    }

    /// The prompt for one goal, after `conversation` (a session's earlier goals; empty:
    /// none), with `schema` the parts of the databases that matter for it (empty: none).
    pub fn render(
        &self,
        (goal, response_format): (&str, Option<&Value>),
        manifest: &Manifest,
        examples: &[&Example],
        (conversation, schema): (&Conversation, &str),
    ) -> String {
        let fill = |name: &str| -> Option<String> {
            Some(match name {
                "goal" => goal.trim().to_owned(),
                "response_format" => response_format_text(response_format),
                "tools" => tools_text(manifest),
                "examples" => examples_text(examples),
                "conversation" => conversation.text(),
                "schema" => schema.to_owned(),
                _ => return None,
            })
        };
        let mut out = String::with_capacity(self.text.len() + 4096);
        let mut rest = self.text.as_str();
        while let Some(at) = rest.find("{{") {
            out.push_str(&rest[..at]);
            let after = &rest[at + 2..];
            match after
                .find("}}")
                .and_then(|end| Some((end, fill(&after[..end])?)))
            {
                Some((end, text)) => {
                    out.push_str(&text);
                    rest = &after[end + 2..];
                }
                None => {
                    out.push_str("{{");
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }
}

/// What the answer must look like, from `--response-format`: a JSON object such as
/// `{"lang": "Japanese"}` (the reference's form) or a plain string.
pub fn response_format_text(rf: Option<&Value>) -> String {
    let Some(rf) = rf.filter(|v| !v.is_null()) else {
        return "Response format: none given; answer in the language of the goal.".into();
    };
    let mut s = match rf {
        Value::String(text) => format!("Response format: {text}"),
        other => format!("Response format: {other}"),
    };
    if let Some(lang) = rf.get("lang").and_then(Value::as_str) {
        let _ = write!(s, "\nThe final answer must be written in {lang}.");
    }
    s
}

/// The tools of the manifest, with their parameters, for the prompt.
pub fn tools_text(manifest: &Manifest) -> String {
    let mut s = String::new();
    for t in &manifest.tools {
        let _ = writeln!(s, "## {}\n", t.name);
        if !t.description.trim().is_empty() {
            let _ = writeln!(s, "{}", t.description.trim());
        }
        let effects = match t.effects {
            plan_manifest::Effects::Pure => "pure (no side effects)",
            plan_manifest::Effects::Read => "reads data",
            plan_manifest::Effects::Write => "changes something outside the plan",
            plan_manifest::Effects::Human => "asks the user and waits for the answer",
        };
        let _ = writeln!(s, "Effects: {effects}.");
        if t.params.is_empty() {
            let _ = writeln!(s, "Parameters: any.");
        } else {
            let _ = writeln!(s, "Parameters:");
            for p in &t.params {
                let _ = write!(s, "- `{}` ({})", p.name, p.summary());
                if !p.description.trim().is_empty() {
                    let _ = write!(s, ": {}", p.description.trim());
                }
                s.push('\n');
            }
        }
        s.push('\n');
    }
    s.trim_end().to_owned()
}

fn examples_text(examples: &[&Example]) -> String {
    if examples.is_empty() {
        return "(none)".into();
    }
    let mut s = String::new();
    for e in examples {
        let plan = serde_json::to_string_pretty(&e.plan).unwrap_or_default();
        let _ = write!(s, "## Goal: {}\n\n```json\n{plan}\n```\n\n", e.goal.trim());
    }
    s.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn placeholders_are_filled_once() {
        let t = Template::new("G={{goal}} R={{response_format}} X={{unknown}} {{".into()).unwrap();
        let out = t.render(
            ("why {{tools}}?", Some(&json!({"lang": "Japanese"}))),
            &Manifest::builtin(),
            &[],
            (&Conversation::default(), ""),
        );
        assert_eq!(
            out,
            "G=why {{tools}}? R=Response format: {\"lang\":\"Japanese\"}\nThe final answer must be written in Japanese. X={{unknown}} {{"
        );
        assert!(Template::new("no goal".into()).is_err());
    }

    #[test]
    fn tools_list_params_types_and_defaults() {
        let text = tools_text(&Manifest::builtin());
        assert!(text.contains("## vector_search"), "{text}");
        assert!(
            text.contains("- `top_k` (int, optional, default 10)"),
            "{text}"
        );
        assert!(text.contains("- `prompt` (string, required)"), "{text}");
    }

    #[test]
    fn the_shipped_template_uses_every_placeholder() {
        for p in PLACEHOLDERS {
            assert!(DEFAULT_TEMPLATE.contains(&format!("{{{{{p}}}}}")), "{p}");
        }
    }
}
