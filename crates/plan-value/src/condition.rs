//! Reading an LLM's answer to a condition (`jmp` with `condition_prompt`).

use crate::extract::extract_first_object;
use crate::interp::preview;
use serde_json::Value;

/// Accepts a JSON bool; an object with a boolean `result`; a string holding such an object
/// (the first object in the text, fenced or not); or a string that is `true`/`false` in
/// any case after trimming whitespace, surrounding quotes and a trailing period.
/// Anything else is an error showing a preview of the answer.
pub fn parse_condition_answer(answer: &Value) -> Result<bool, String> {
    match answer {
        Value::Bool(b) => return Ok(*b),
        Value::Object(m) => {
            if let Some(Value::Bool(b)) = m.get("result") {
                return Ok(*b);
            }
        }
        Value::String(s) => {
            if let Some(b) = bare_bool(s) {
                return Ok(b);
            }
            if let Some(m) = extract_first_object(s)
                && let Some(Value::Bool(b)) = m.get("result")
            {
                return Ok(*b);
            }
        }
        _ => {}
    }
    Err(format!(
        "condition answer is neither true/false nor a JSON object with a boolean \"result\": {}",
        preview(answer, 200)
    ))
}

fn bare_bool(s: &str) -> Option<bool> {
    let t = s.trim();
    let t = t.strip_suffix('.').unwrap_or(t).trim();
    let t = t.trim_matches(|c| c == '"' || c == '\'' || c == '`').trim();
    let t = t.strip_suffix('.').unwrap_or(t);
    if t.eq_ignore_ascii_case("true") {
        Some(true)
    } else if t.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}
