//! The checks of a case on an answer. Text is compared as people read it: case and runs
//! of whitespace do not matter; an answer that is not a string is checked as its JSON.
//! A case passes when it answered and every check it names passes; its score is the share
//! of checks that passed (1 for a case with none that answered).

use serde::Serialize;
use serde_json::Value;

use crate::Case;

/// One check and how it went.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    /// `expected`, `must_contain`, `must_not_contain` or `regex`.
    pub check: &'static str,
    pub passed: bool,
    /// Why not, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// A case's verdict on one answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Grade {
    pub passed: bool,
    pub score: f64,
    /// The failed checks, said in one line (empty when it passed).
    pub reason: String,
    pub checks: Vec<Check>,
}

/// An answer as text: a string as it is, anything else as its JSON.
pub(crate) fn answer_text(answer: &Value) -> String {
    match answer {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Lower case, whitespace runs as one space, trimmed.
fn norm(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// `answer` (the run's final answer; `None`: the case did not answer, `why`) graded
/// against `case`'s checks.
pub fn grade(case: &Case, answer: Result<&Value, &str>) -> Grade {
    let answer = match answer {
        Ok(a) => a,
        Err(why) => {
            return Grade {
                passed: false,
                score: 0.0,
                reason: format!("not answered: {why}"),
                checks: Vec::new(),
            };
        }
    };
    let text = answer_text(answer);
    let said = norm(&text);
    let mut checks = Vec::new();
    let mut check = |check, passed: bool, why: String| {
        checks.push(Check {
            check,
            passed,
            why: (!passed).then_some(why),
        });
    };
    if let Some(e) = &case.expected {
        check(
            "expected",
            said == norm(e),
            format!("the answer is not {e:?}"),
        );
    }
    for s in &case.must_contain {
        check(
            "must_contain",
            said.contains(&norm(s)),
            format!("the answer does not contain {s:?}"),
        );
    }
    for s in &case.must_not_contain {
        check(
            "must_not_contain",
            !said.contains(&norm(s)),
            format!("the answer contains {s:?}"),
        );
    }
    if let Some(r) = &case.regex {
        check(
            "regex",
            r.is_match(&text),
            format!("the answer does not match /{}/", r.as_str()),
        );
    }
    let failed: Vec<&str> = checks.iter().filter_map(|c| c.why.as_deref()).collect();
    let score = if checks.is_empty() {
        1.0
    } else {
        (checks.len() - failed.len()) as f64 / checks.len() as f64
    };
    Grade {
        passed: failed.is_empty(),
        score,
        reason: failed.join("; "),
        checks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn case(line: &str) -> Case {
        crate::parse(line).0.remove(0)
    }

    #[test]
    fn checks_pass_and_fail_as_specified() {
        let c = case(
            r#"{"goal": "g", "must_contain": ["MySQL  compatible"], "must_not_contain": ["Oracle"], "regex": "^Yes"}"#,
        );
        let ok = grade(&c, Ok(&json!("Yes: TiDB is mysql compatible.")));
        assert!(ok.passed && ok.score == 1.0, "{ok:?}");
        let bad = grade(&c, Ok(&json!("No, it is like Oracle.")));
        assert!(!bad.passed);
        assert!((bad.score - 0.0).abs() < 1e-9, "{bad:?}");
        assert_eq!(
            bad.reason,
            "the answer does not contain \"MySQL  compatible\"; the answer contains \"Oracle\"; the answer does not match /^Yes/"
        );
        let e = case(r#"{"goal": "g", "expected": "42"}"#);
        assert!(grade(&e, Ok(&json!(42))).passed);
        assert!(grade(&e, Ok(&json!(" 42 "))).passed);
        assert!(!grade(&e, Ok(&json!("43"))).passed);
        let none = case(r#"{"goal": "g"}"#);
        assert!(grade(&none, Ok(&json!("anything"))).passed);
        let failed = grade(&none, Err("run failed: R0005"));
        assert!(!failed.passed && failed.reason == "not answered: run failed: R0005");
    }
}
