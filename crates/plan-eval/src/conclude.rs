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
}

impl Concluded {
    /// Whether it met its gates: the pass rate, and no regression.
    pub fn passed(&self) -> bool {
        self.below.is_none() && !self.regressed
    }
}

/// Ends the evaluation of `reports`: its summary stored with it (when `stored`), compared
/// with `baseline`, and held to `fail_under` (a pass rate). Err: the baseline is not a
/// report.
pub fn conclude(
    reports: &[CaseReport],
    stored: Option<&Stored>,
    baseline: Option<&Value>,
    fail_under: Option<f64>,
) -> Result<Concluded, String> {
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
    let comparison = match baseline {
        None => None,
        Some(b) => {
            let (c, unread) = crate::compare_with_people(b, reports, stored)?;
            if let Some(e) = unread {
                warnings.push(format!("cannot read people's verdicts: {e}"));
            }
            Some(c)
        }
    };
    let below = fail_under.filter(|gate| summary.pass_rate < *gate);
    let regressed = comparison.as_ref().is_some_and(|c| c.regressions > 0);
    Ok(Concluded {
        summary,
        comparison,
        warnings,
        below,
        regressed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample;

    #[test]
    fn an_evaluation_passes_its_gates_or_says_which_it_missed() {
        let reports = [sample("a", true, 10), sample("b", false, 10)];
        let met = conclude(&reports, None, None, Some(0.5)).unwrap();
        assert!(met.passed());
        assert_eq!(met.summary.passed, 1);
        let under = conclude(&reports, None, None, Some(0.75)).unwrap();
        assert_eq!(under.below, Some(0.75));
        assert!(!under.passed());
        let baseline = json!({"cases": [{"id": "a", "verdict": "pass", "score": 1.0},
                                        {"id": "b", "verdict": "pass", "score": 1.0}]});
        let regressed = conclude(&reports, None, Some(&baseline), None).unwrap();
        assert!(regressed.regressed && !regressed.passed());
        assert_eq!(regressed.comparison.unwrap().regressions, 1);
        assert!(conclude(&reports, None, Some(&json!("not a report")), None).is_err());
        let mut unstored = sample("c", true, 10);
        unstored.store_error = Some("disk full".into());
        let warned = conclude(&[unstored], None, None, None).unwrap();
        assert_eq!(warned.warnings, ["case c not stored whole: disk full"]);
    }
}
