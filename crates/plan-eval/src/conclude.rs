//! How an evaluation ends: its summary stored, the comparison with a baseline report
//! (people's verdicts on the baseline's runs included), and the gates that pick whether
//! it passed. Every face that runs an evaluation ends it here; it only says the outcome.

use serde_json::{Value, json};

use crate::{CaseReport, Comparison, Stored, Summary};

/// What an evaluation came to.
#[derive(Clone, Debug)]
pub struct Concluded {
    pub summary: Summary,
    /// Against the baseline, when one was given.
    pub comparison: Option<Comparison>,
    /// What went wrong on the way that the report still stands without: the summary or a
    /// case not stored whole, people's verdicts that could not be read.
    pub warnings: Vec<String>,
    /// The pass rate gate it fell under, if any.
    pub below: Option<f64>,
    /// Cases that passed in the baseline and fail now.
    pub regressed: bool,
    /// Why the baseline could not be compared with (it is not a report).
    pub baseline_error: Option<String>,
}

impl Concluded {
    /// Whether it met its gates: the pass rate, and no regression from a baseline that
    /// could be read.
    pub fn passed(&self) -> bool {
        self.below.is_none() && !self.regressed && self.baseline_error.is_none()
    }
}

/// Ends the evaluation of `reports`: its summary stored with it (when `stored`), compared
/// with `baseline`, and held to `fail_under` (a pass rate).
pub fn conclude(
    reports: &[CaseReport],
    stored: Option<&Stored>,
    baseline: Option<&Value>,
    fail_under: Option<f64>,
) -> Concluded {
    let summary = crate::summarize(reports);
    let mut warnings = Vec::new();
    if let Some(st) = stored
        && let Err(e) = crate::end(&st.at, &st.eval, &json!(summary))
    {
        warnings.push(format!("cannot store the evaluation's summary: {e}"));
    }
    for r in reports {
        if let Some(e) = &r.store_error {
            warnings.push(format!("case {} not stored whole: {e}", r.id));
        }
    }
    let mut baseline_error = None;
    let comparison = match baseline.map(|b| crate::compare_with_people(b, reports, stored)) {
        None => None,
        Some(Ok((c, unread))) => {
            if let Some(e) = unread {
                warnings.push(format!("cannot read people's verdicts: {e}"));
            }
            Some(c)
        }
        Some(Err(e)) => {
            baseline_error = Some(e);
            None
        }
    };
    let below = fail_under.filter(|gate| summary.pass_rate < *gate);
    let regressed = comparison.as_ref().is_some_and(|c| c.regressions > 0);
    Concluded {
        summary,
        comparison,
        warnings,
        below,
        regressed,
        baseline_error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample;

    #[test]
    fn an_evaluation_passes_its_gates_or_says_which_it_missed() {
        let reports = [sample("a", true, 10), sample("b", false, 10)];
        let met = conclude(&reports, None, None, Some(0.5));
        assert!(met.passed());
        assert_eq!(met.summary.passed, 1);
        let under = conclude(&reports, None, None, Some(0.75));
        assert_eq!(under.below, Some(0.75));
        assert!(!under.passed());
        let baseline = json!({"cases": [{"id": "a", "verdict": "pass", "score": 1.0},
                                        {"id": "b", "verdict": "pass", "score": 1.0}]});
        let regressed = conclude(&reports, None, Some(&baseline), None);
        assert!(regressed.regressed && !regressed.passed());
        assert_eq!(regressed.comparison.unwrap().regressions, 1);
        let mut unstored = sample("c", true, 10);
        unstored.store_error = Some("disk full".into());
        let unread = conclude(&[unstored], None, Some(&json!("not a report")), None);
        assert!(unread.baseline_error.is_some() && !unread.passed());
        assert_eq!(unread.warnings, ["case c not stored whole: disk full"]);
    }
}
