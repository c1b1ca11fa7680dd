//! A `tools/call` result as the plan's value: `structuredContent` as it is; text alone
//! as one string (parts joined by a newline); anything else as a list of parts, text as
//! strings and the rest as small descriptors (images and audio are never inlined: a
//! plan's variables are not the place for megabytes of base64). `isError` is an error
//! with the tool's text.

use plan_llm::{CallError, CallErrorKind, preview};
use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};

/// Characters of an embedded resource's text kept in its descriptor.
const RESOURCE_TEXT_CHARS: usize = 4_000;

/// The value of `result`, a call of `tool` (as messages name it).
pub fn output(tool: &str, result: CallToolResult) -> Result<Value, CallError> {
    let parts: Vec<Value> = result
        .content
        .iter()
        .map(|c| serde_json::to_value(c).map_or(Value::Null, part))
        .collect();
    if result.is_error == Some(true) {
        let text = text_of(&parts);
        let text = if text.is_empty() {
            "(no message)".to_owned()
        } else {
            preview(&text, 2_000)
        };
        return Err(CallError::new(
            CallErrorKind::Refused,
            format!("MCP tool `{tool}` reported an error: {text}"),
        ));
    }
    if let Some(v) = result.structured_content {
        return Ok(v);
    }
    Ok(match parts.len() {
        0 => Value::Null,
        _ if parts.iter().all(Value::is_string) => Value::String(text_of(&parts)),
        1 => parts.into_iter().next().unwrap_or_default(),
        _ => Value::Array(parts),
    })
}

/// The text parts, joined.
fn text_of(parts: &[Value]) -> String {
    parts
        .iter()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join("\n")
}

/// One content part: text as a string; others as `{"type", ...}` without their payload.
fn part(c: Value) -> Value {
    let Value::Object(mut c) = c else {
        return Value::Null;
    };
    let kind = c
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let mut take = |k: &str| c.remove(k);
    match kind.as_str() {
        "text" => take("text").unwrap_or_default(),
        "image" | "audio" => {
            let data = take("data");
            let bytes = data
                .as_ref()
                .and_then(Value::as_str)
                .map_or(0, |d| d.len() / 4 * 3);
            json!({"type": kind, "mimeType": take("mimeType"), "bytes": bytes})
        }
        "resource" => {
            let mut out = Map::new();
            out.insert("type".into(), json!("resource"));
            if let Some(Value::Object(mut r)) = take("resource") {
                for k in ["uri", "mimeType"] {
                    if let Some(v) = r.remove(k) {
                        out.insert(k.into(), v);
                    }
                }
                match (r.remove("text"), r.remove("blob")) {
                    (Some(Value::String(t)), _) => {
                        out.insert(
                            "text".into(),
                            Value::String(preview(&t, RESOURCE_TEXT_CHARS)),
                        );
                    }
                    (_, Some(Value::String(b))) => {
                        out.insert("bytes".into(), json!(b.len() / 4 * 3));
                    }
                    _ => {}
                }
            }
            Value::Object(out)
        }
        "resource_link" => {
            json!({"type": kind, "uri": take("uri"), "name": take("name"), "mimeType": take("mimeType")})
        }
        _ => json!({ "type": kind }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(v: Value) -> CallToolResult {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn content_becomes_a_value() {
        let text = result(
            json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}),
        );
        assert_eq!(output("t", text).unwrap(), json!("a\nb"));
        let structured = result(json!({
            "content": [{"type": "text", "text": "{\"x\":1}"}],
            "structuredContent": {"x": 1}
        }));
        assert_eq!(output("t", structured).unwrap(), json!({"x": 1}));
        let mixed = result(json!({"content": [
            {"type": "text", "text": "here"},
            {"type": "image", "data": "AAAAAAAA", "mimeType": "image/png"}
        ]}));
        assert_eq!(
            output("t", mixed).unwrap(),
            json!(["here", {"type": "image", "mimeType": "image/png", "bytes": 6}])
        );
        assert_eq!(
            output("t", result(json!({"content": []}))).unwrap(),
            Value::Null
        );
    }

    #[test]
    fn is_error_is_an_error_with_its_text() {
        let e = output(
            "ev_echo",
            result(json!({"content": [{"type": "text", "text": "no such file"}], "isError": true})),
        )
        .unwrap_err();
        assert_eq!(e.kind, CallErrorKind::Refused);
        assert_eq!(
            e.message,
            "MCP tool `ev_echo` reported an error: no such file"
        );
    }
}
