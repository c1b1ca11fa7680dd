//! The dataset: one JSON object per line,
//! `{"id"?, "goal", "response_format"?, "vars"?, "labels"?, "expected"?, "must_contain"?,
//! "must_not_contain"?, "regex"?}`. Blank lines and lines starting with `#` are skipped;
//! a line that is not such an object is reported with its number and skipped, never fatal
//! to the others.

use serde::Deserialize;
use serde_json::{Map, Value};

/// One goal and what its answer must satisfy.
#[derive(Clone, Debug)]
pub struct Case {
    /// Its `id`, else `line-N`.
    pub id: String,
    /// Its 1-based line in the dataset.
    pub line: usize,
    pub goal: String,
    pub response_format: Option<Value>,
    pub vars: Map<String, Value>,
    pub labels: Vec<String>,
    pub expected: Option<String>,
    pub must_contain: Vec<String>,
    pub must_not_contain: Vec<String>,
    pub regex: Option<regex::Regex>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    #[serde(default)]
    id: Option<Value>,
    goal: String,
    #[serde(default)]
    response_format: Option<Value>,
    #[serde(default)]
    vars: Map<String, Value>,
    #[serde(default)]
    labels: Vec<String>,
    #[serde(default)]
    expected: Option<String>,
    #[serde(default)]
    must_contain: Vec<String>,
    #[serde(default)]
    must_not_contain: Vec<String>,
    #[serde(default)]
    regex: Option<String>,
}

/// The cases of `text`, and `line N: why` for each line that is not one. Ids must be
/// unique: a repeated one is a bad line.
pub fn parse(text: &str) -> (Vec<Case>, Vec<String>) {
    let mut cases: Vec<Case> = Vec::new();
    let mut bad = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let raw = raw.trim();
        if raw.is_empty() || raw.starts_with('#') {
            continue;
        }
        let line: Line = match serde_json::from_str(raw) {
            Ok(l) => l,
            Err(e) => {
                bad.push(format!("line {n}: {e}"));
                continue;
            }
        };
        if line.goal.trim().is_empty() {
            bad.push(format!("line {n}: the goal is empty"));
            continue;
        }
        let id = match line.id {
            None => format!("line-{n}"),
            Some(Value::String(s)) if !s.is_empty() => s,
            Some(Value::Number(k)) => k.to_string(),
            Some(other) => {
                bad.push(format!("line {n}: id {other} is not a string or a number"));
                continue;
            }
        };
        if let Some(first) = cases.iter().find(|c| c.id == id) {
            bad.push(format!(
                "line {n}: id `{id}` is line {}'s already",
                first.line
            ));
            continue;
        }
        let regex = match line.regex.as_deref().map(regex::Regex::new).transpose() {
            Ok(r) => r,
            Err(e) => {
                bad.push(format!("line {n}: regex: {e}"));
                continue;
            }
        };
        cases.push(Case {
            id,
            line: n,
            goal: line.goal,
            response_format: line.response_format,
            vars: line.vars,
            labels: line.labels,
            expected: line.expected,
            must_contain: line.must_contain,
            must_not_contain: line.must_not_contain,
            regex,
        });
    }
    (cases, bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_lines_are_reported_with_their_numbers_and_skipped() {
        let text = "{\"goal\": \"a\", \"must_contain\": [\"x\"]}\n\
                    # a comment\n\
                    \n\
                    not json\n\
                    {\"goal\": \"b\", \"id\": 7, \"regex\": \"(\"}\n\
                    {\"goal\": \"\"}\n\
                    {\"goal\": \"c\", \"id\": \"line-1\"}\n\
                    {\"goal\": \"d\", \"colour\": 1}\n\
                    {\"goal\": \"e\", \"id\": 9, \"labels\": [\"sql\"]}\n";
        let (cases, bad) = parse(text);
        let ids: Vec<&str> = cases.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["line-1", "9"]);
        assert_eq!(cases[1].labels, ["sql"]);
        let lines: Vec<&str> = bad.iter().map(|b| b.split(':').next().unwrap()).collect();
        assert_eq!(lines, ["line 4", "line 5", "line 6", "line 7", "line 8"]);
        assert!(bad[4].contains("unknown field `colour`"), "{}", bad[4]);
    }
}
