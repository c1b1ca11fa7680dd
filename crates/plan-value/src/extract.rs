//! Finding the JSON object in a tool's (usually an LLM's) output.
//!
//! Order of preference: the whole output as an object; the first ```json fenced block
//! whose content is an object; the first `{` in the text from which a complete JSON
//! object parses. Parsing from a `{` uses serde_json itself, so braces inside JSON strings
//! and escapes are handled exactly as JSON defines them.
//!
//! Cost: each attempt is charged the bytes serde_json read before failing, against a
//! budget linear in the input, so text with many `{` that start long-but-broken prefixes
//! cannot make the search quadratic. When the budget runs out the search gives up.

use serde_json::{Map, Value};

/// Work budget per input byte (plus [`BUDGET_BASE`]), in bytes parsed.
const BUDGET_PER_BYTE: u64 = 8;
const BUDGET_BASE: u64 = 1 << 20;

/// The first JSON object in `text` (see the module docs for the order of preference).
pub fn extract_first_object(text: &str) -> Option<Map<String, Value>> {
    let trimmed = text.trim();
    if trimmed.starts_with('{')
        && let Ok(Value::Object(m)) = serde_json::from_str::<Value>(trimmed)
    {
        return Some(m);
    }
    if let Some(m) = from_fences(text) {
        return Some(m);
    }
    scan(text)
}

/// Content of each ```json fence (the tag case-insensitive), tried in order.
fn from_fences(text: &str) -> Option<Map<String, Value>> {
    let mut rest = text;
    while let Some(i) = rest.find("```") {
        let after = &rest[i + 3..];
        let tag_end = after.find(['\n', '\r']).unwrap_or(after.len());
        let tag = after[..tag_end].trim();
        let body_and_more = &after[tag_end..];
        let close = body_and_more.find("```");
        if tag.eq_ignore_ascii_case("json") {
            let body = &body_and_more[..close.unwrap_or(body_and_more.len())];
            if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(body.trim()) {
                return Some(m);
            }
        }
        match close {
            // Continue after this fence's closing marker.
            Some(c) => rest = &body_and_more[c + 3..],
            None => return None,
        }
    }
    None
}

fn scan(text: &str) -> Option<Map<String, Value>> {
    let bytes = text.as_bytes();
    let mut budget = (bytes.len() as u64)
        .saturating_mul(BUDGET_PER_BYTE)
        .saturating_add(BUDGET_BASE);
    let mut from = 0usize;
    while let Some(off) = memchr_brace(&bytes[from..]) {
        let start = from + off;
        from = start + 1;
        // Cheap filter: an object starts `{` then optional whitespace then `"` or `}`.
        let next = bytes[start + 1..].iter().find(|b| !b.is_ascii_whitespace());
        if !matches!(next, Some(b'"' | b'}')) {
            continue;
        }
        let slice = &text[start..];
        let mut stream = serde_json::Deserializer::from_str(slice).into_iter::<Value>();
        match stream.next() {
            Some(Ok(Value::Object(m))) => return Some(m),
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                let used = error_offset(slice, &e) as u64 + 1;
                budget = budget.checked_sub(used)?;
            }
            None => {}
        }
    }
    None
}

fn memchr_brace(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'{')
}

/// Byte offset in `s` where serde_json reported `e` (its line is 1-based, its column is
/// bytes since the line start).
fn error_offset(s: &str, e: &serde_json::Error) -> usize {
    if e.line() == 0 {
        return s.len();
    }
    let mut line_start = 0usize;
    let mut line = 1usize;
    if e.line() > 1 {
        for (i, b) in s.bytes().enumerate() {
            if b == b'\n' {
                line += 1;
                if line == e.line() {
                    line_start = i + 1;
                    break;
                }
            }
        }
    }
    line_start.saturating_add(e.column()).min(s.len())
}
