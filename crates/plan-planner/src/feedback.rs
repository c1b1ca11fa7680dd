//! What the planner is told after a round: the errors of a plan that did not verify, or
//! the failure of a plan that did and the variables it had set.

use std::fmt::Write;

use serde_json::Value;

use crate::Diag;
use plan_host::ReportError;

/// Diagnostics listed in one repair message; the rest are counted.
const MAX_LISTED: usize = 30;
/// Characters of one variable's value shown in a re-plan message.
pub const MAX_VALUE_CHARS: usize = 2000;
/// Variables listed in one re-plan message.
const MAX_VARS: usize = 100;

/// The message asking for a corrected plan.
pub fn repair_message(diagnostics: &[Diag]) -> String {
    let errors: Vec<&Diag> = diagnostics
        .iter()
        .filter(|d| d.severity == "error")
        .collect();
    let n = errors.len();
    let mut s = format!(
        "The plan has {n} error{} and was not run:\n\n",
        if n == 1 { "" } else { "s" }
    );
    for d in errors.iter().take(MAX_LISTED) {
        let _ = write!(s, "- error[{}]", d.code);
        let place: Vec<String> = [
            d.seq_no.map(|n| format!("seq_no {n}")),
            d.line.map(|l| format!("line {l}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !place.is_empty() {
            let _ = write!(s, " at {}", place.join(", "));
        }
        let _ = writeln!(s, ": {}", d.message);
        if let Some(help) = &d.help {
            let _ = writeln!(s, "  help: {help}");
        }
    }
    if n > MAX_LISTED {
        let _ = writeln!(s, "- ... and {} more errors", n - MAX_LISTED);
    }
    s.push_str(
        "\nFix every error and answer with the complete corrected plan: the JSON array alone, with no commentary and no code fence.",
    );
    s
}

/// The message asking for an updated plan after a run failed at a step.
pub fn replan_message(error: &ReportError, vars: &[(String, Value)]) -> String {
    let mut s = String::from("The plan ran and failed");
    match (error.seq_no, error.line) {
        (Some(n), Some(l)) => {
            let _ = write!(s, " at seq_no {n} (line {l})");
        }
        (Some(n), None) => {
            let _ = write!(s, " at seq_no {n}");
        }
        _ => {}
    }
    let code = serde_json::to_value(error.code).unwrap_or_default();
    let code = code.as_str().unwrap_or("R0000");
    let _ = writeln!(s, ":\n\nerror[{code}]: {}\n", error.message);
    if vars.is_empty() {
        s.push_str("No variables were set before the failure.\n");
    } else {
        s.push_str("Variables set before the failure (long values are cut):\n");
        for (name, value) in vars.iter().take(MAX_VARS) {
            let text = match value {
                Value::String(t) => Value::String(cut(t)).to_string(),
                other => cut(&other.to_string()),
            };
            let _ = writeln!(s, "- `{name}` = {text}");
        }
        if vars.len() > MAX_VARS {
            let _ = writeln!(s, "- ... and {} more", vars.len() - MAX_VARS);
        }
    }
    s.push_str(
        "\nWrite an updated plan for the same goal that does not fail this way. Keep the instructions that ran before the failure unchanged where they did their job: calls made before the first changed instruction are not made again. Answer with the complete plan: the JSON array alone, with no commentary and no code fence.",
    );
    s
}

fn cut(s: &str) -> String {
    let shown = plan_llm::preview(s, MAX_VALUE_CHARS);
    if shown.len() == s.len() {
        shown
    } else {
        format!("{shown} ({} bytes in all)", s.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plan_vm::ErrorCode;
    use serde_json::json;

    #[test]
    fn repair_lists_errors_with_place_and_help() {
        let d = |sev: &str, code: &str| Diag {
            severity: sev.into(),
            code: code.into(),
            message: "unknown tool `web`".into(),
            seq_no: Some(2),
            line: Some(9),
            column: Some(5),
            help: Some("known tools: vector_search".into()),
        };
        let m = repair_message(&[d("error", "E0203"), d("warning", "W0201")]);
        assert!(
            m.starts_with("The plan has 1 error and was not run:"),
            "{m}"
        );
        assert!(
            m.contains(
                "- error[E0203] at seq_no 2, line 9: unknown tool `web`\n  help: known tools"
            ),
            "{m}"
        );
        assert!(!m.contains("W0201"), "{m}");
    }

    #[test]
    fn replan_shows_the_error_and_cut_values() {
        let e = ReportError {
            code: ErrorCode::ToolFailed,
            message: "tool `vector_search` failed: HTTP 500".into(),
            seq_no: Some(3),
            line: Some(14),
        };
        let long = "x".repeat(5000);
        let m = replan_message(&e, &[("a".into(), json!(1)), ("b".into(), json!(long))]);
        assert!(
            m.contains("failed at seq_no 3 (line 14):\n\nerror[R0005]: tool `vector_search`"),
            "{m}"
        );
        assert!(m.contains("- `a` = 1\n"), "{m}");
        assert!(m.contains("(5000 bytes in all)"), "{m}");
        assert!(m.len() < 3000, "{}", m.len());
    }
}
