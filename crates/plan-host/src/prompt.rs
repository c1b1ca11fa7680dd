//! Turning a tool request into the one user message an LLM sees, in the reference VM's
//! shape: `context + "\n" + prompt` when context is non-null, else `prompt`, plus a
//! response-format instruction when the VM needs a JSON object back.

use std::borrow::Cow;

use serde_json::Value;

use crate::error::{ToolError, ToolErrorKind};
use plan_vm::{RequestKind, ToolRequest};

/// Appended to condition prompts; the VM accepts this object or a bare true/false.
pub const CONDITION_INSTRUCTION: &str = "\n\nRespond with a JSON object in the following format:\n\
{\"result\": boolean, \"explanation\": string}\n\
where \"result\" is true if the condition holds and false otherwise, and \"explanation\" briefly says why.";

/// The response-format instruction for a call with several output vars.
pub fn keys_instruction(keys: &[String]) -> String {
    let list: Vec<String> = keys
        .iter()
        .map(|k| Value::String(k.clone()).to_string())
        .collect();
    format!(
        "\n\nRespond with a JSON object containing the keys: [{}].",
        list.join(", ")
    )
}

/// The user message for an LLM request.
pub fn user_message(req: &ToolRequest) -> Result<String, ToolError> {
    let prompt = match req.args.get("prompt") {
        Some(Value::Null) | None => {
            return Err(ToolError::new(
                ToolErrorKind::Config,
                format!(
                    "tool `{}` is served by an LLM backend but has no `prompt` argument",
                    req.tool
                ),
            ));
        }
        Some(p) => p,
    };
    let mut text = String::new();
    if let Some(ctx) = req.args.get("context").filter(|c| !c.is_null()) {
        render(ctx, &mut text);
        text.push('\n');
    }
    render(prompt, &mut text);
    if let Some(suffix) = format_instruction(&req.kind) {
        text.push_str(&suffix);
    }
    Ok(text)
}

/// What is appended to a prompt so the answer has the shape the VM needs: the keys of a
/// call with several output vars, or a condition's `{"result": ...}`. Every backend that
/// sends a prompt to an LLM appends it.
pub fn format_instruction(kind: &RequestKind) -> Option<Cow<'static, str>> {
    match kind {
        RequestKind::Tool {
            output_keys: Some(keys),
        } if !keys.is_empty() => Some(Cow::Owned(keys_instruction(keys))),
        RequestKind::Tool { .. } => None,
        RequestKind::Condition => Some(Cow::Borrowed(CONDITION_INSTRUCTION)),
    }
}

/// Renders a value the way templates interpolate it (strings raw, numbers as Python
/// prints them, everything else compact JSON), so a non-string context reads the same as
/// it would inside `${...}`.
fn render(v: &Value, out: &mut String) {
    plan_value::write_interpolated(v, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use plan_vm::CallId;
    use serde_json::json;

    fn req(args: Value, kind: RequestKind) -> ToolRequest {
        ToolRequest {
            id: CallId(1),
            tool: "llm_generate".into(),
            args: match args {
                Value::Object(m) => m.into(),
                _ => Default::default(),
            },
            kind,
            pc: 0,
            seq_no: Some(1),
            instance: 1,
        }
    }

    #[test]
    fn shapes() {
        let plain = RequestKind::Tool { output_keys: None };
        let cases = [
            (
                json!({"prompt": "Q?", "context": null}),
                plain.clone(),
                "Q?".to_owned(),
            ),
            (json!({"prompt": "Q?"}), plain.clone(), "Q?".to_owned()),
            (
                json!({"prompt": "Q?", "context": "C"}),
                plain.clone(),
                "C\nQ?".to_owned(),
            ),
            (
                json!({"context": {"a": [1, 2]}, "prompt": "Q?"}),
                plain.clone(),
                "{\"a\":[1,2]}\nQ?".to_owned(),
            ),
            (
                json!({"prompt": "Q?", "context": "C"}),
                RequestKind::Tool {
                    output_keys: Some(vec!["a".into(), "b".into()]),
                },
                "C\nQ?\n\nRespond with a JSON object containing the keys: [\"a\", \"b\"]."
                    .to_owned(),
            ),
            (
                json!({"prompt": "Is it?", "context": null}),
                RequestKind::Condition,
                format!("Is it?{CONDITION_INSTRUCTION}"),
            ),
        ];
        for (args, kind, want) in cases {
            assert_eq!(
                user_message(&req(args.clone(), kind)).unwrap(),
                want,
                "{args}"
            );
        }
    }

    #[test]
    fn missing_prompt_is_an_error() {
        let e = user_message(&req(
            json!({"query": "x"}),
            RequestKind::Tool { output_keys: None },
        ))
        .unwrap_err();
        assert!(e.message.contains("no `prompt` argument"), "{}", e.message);
    }
}
