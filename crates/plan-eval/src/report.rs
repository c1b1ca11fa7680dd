//! The report: each case's outcome and verdict, the summary over them, and what changed
//! since an earlier report (`--compare`).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use plan_llm::Usage;

use crate::grade::Check;

/// How one case went.
#[derive(Clone, Debug, Serialize)]
pub struct CaseReport {
    pub id: String,
    pub line: usize,
    pub goal: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// How its `ask` ended: `answered`, `invalid_plan`, `run_failed`, `planner_failed`,
    /// `needs_input`; `not_started` when its host or planner could not be set up.
    pub status: String,
    /// `pass` or `fail`.
    pub verdict: &'static str,
    pub score: f64,
    /// Why it failed (empty when it passed).
    pub reason: String,
    pub checks: Vec<Check>,
    /// What the judge said, when there is one and the case answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge: Option<crate::Verdict>,
    pub answer: Value,
    /// Plans the planner wrote (1 + repairs + re-plans).
    pub rounds: usize,
    pub repairs: usize,
    pub replans: usize,
    pub steps: u64,
    pub tool_calls: u64,
    pub latency_ms: u64,
    /// The tokens the planner's and the judge's replies cost, where their servers say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// With `--store`: the goal it was asked as, and its runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goal_id: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<String>,
    /// With `--store`: what the store could not keep of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store_error: Option<String>,
    /// The last plan, for `--promote` (not in the report).
    #[serde(skip)]
    pub plan: Option<String>,
}

impl CaseReport {
    pub fn passed(&self) -> bool {
        self.verdict == "pass"
    }
}

/// The evaluation at a glance.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub cases: usize,
    pub passed: usize,
    pub failed: usize,
    pub pass_rate: f64,
    /// The pass rate's 95% confidence interval (Wilson score interval).
    pub pass_rate_ci95: [f64; 2],
    pub mean_score: f64,
    pub latency_p50_ms: u64,
    pub latency_p95_ms: u64,
    /// Failed cases by cause: the `ask`'s status, or `checks` for an answer that failed
    /// its checks.
    pub failures: BTreeMap<String, usize>,
    /// The tokens of every case whose servers said (`usage_cases` of them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    pub usage_cases: usize,
}

/// The summary of `cases`.
pub fn summarize(cases: &[CaseReport]) -> Summary {
    let n = cases.len();
    let passed = cases.iter().filter(|c| c.passed()).count();
    let rate = if n == 0 {
        0.0
    } else {
        passed as f64 / n as f64
    };
    let mut latencies: Vec<u64> = cases.iter().map(|c| c.latency_ms).collect();
    latencies.sort_unstable();
    let pct = |p: f64| {
        if latencies.is_empty() {
            0
        } else {
            // NB: nearest rank.
            let rank = ((p * latencies.len() as f64).ceil() as usize).clamp(1, latencies.len());
            latencies[rank - 1]
        }
    };
    let mut failures = BTreeMap::new();
    for c in cases.iter().filter(|c| !c.passed()) {
        let cause = if c.status == "answered" {
            "checks".to_owned()
        } else {
            c.status.clone()
        };
        *failures.entry(cause).or_insert(0) += 1;
    }
    Summary {
        cases: n,
        passed,
        failed: n - passed,
        pass_rate: rate,
        pass_rate_ci95: wilson(passed, n),
        mean_score: if n == 0 {
            0.0
        } else {
            cases.iter().map(|c| c.score).sum::<f64>() / n as f64
        },
        latency_p50_ms: pct(0.5),
        latency_p95_ms: pct(0.95),
        failures,
        usage: cases.iter().filter_map(|c| c.usage).reduce(|mut a, b| {
            a += b;
            a
        }),
        usage_cases: cases.iter().filter(|c| c.usage.is_some()).count(),
    }
}

/// The Wilson score interval of `k` passes in `n` at 95%: better than the normal
/// approximation for the small `n` and extreme rates evaluations have.
fn wilson(k: usize, n: usize) -> [f64; 2] {
    if n == 0 {
        return [0.0, 1.0];
    }
    let (k, n, z) = (k as f64, n as f64, 1.959_963_984_540_054);
    let p = k / n;
    let denom = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denom;
    let half = z * ((p * (1.0 - p) / n) + z * z / (4.0 * n * n)).sqrt() / denom;
    let round = |x: f64| (x.clamp(0.0, 1.0) * 10_000.0).round() / 10_000.0;
    [round(centre - half), round(centre + half)]
}

/// A case whose verdict or score changed since the baseline.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    pub id: String,
    /// `regression` (passed, now fails), `fixed`, `score` (same verdict, another score),
    /// `new` (not in the baseline) or `gone` (only in the baseline).
    pub change: &'static str,
    pub before: Option<String>,
    pub after: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// What changed since a baseline report, regressions first.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Comparison {
    /// With `--store`: what people said of the baseline's runs (`runs feedback`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub people: Vec<crate::PersonVerdict>,
    pub regressions: usize,
    pub changes: Vec<Change>,
}

/// `cases` against `baseline`, an earlier JSON report (`{"cases": [{"id", "verdict",
/// "score"}, ...]}`).
pub fn compare(baseline: &Value, cases: &[CaseReport]) -> Result<Comparison, String> {
    let Some(before) = baseline["cases"].as_array() else {
        return Err("the baseline is not a JSON report of `planvm eval` (no `cases`)".into());
    };
    let before: BTreeMap<&str, (&str, f64)> = before
        .iter()
        .filter_map(|c| {
            Some((
                c["id"].as_str()?,
                (c["verdict"].as_str()?, c["score"].as_f64().unwrap_or(0.0)),
            ))
        })
        .collect();
    let mut changes = Vec::new();
    for c in cases {
        let now = format!("{} ({:.2})", c.verdict, c.score);
        let change = match before.get(c.id.as_str()) {
            None => Some(("new", None)),
            Some(&("pass", _)) if !c.passed() => Some(("regression", Some("pass"))),
            Some(&(v, _)) if v != "pass" && c.passed() => Some(("fixed", Some(v))),
            Some(&(v, s)) if (s - c.score).abs() > 1e-9 => Some(("score", Some(v))),
            Some(_) => None,
        };
        if let Some((change, _)) = change {
            let was = before
                .get(c.id.as_str())
                .map(|(v, s)| format!("{v} ({s:.2})"));
            changes.push(Change {
                id: c.id.clone(),
                change,
                before: was,
                after: Some(now),
                reason: c.reason.clone(),
            });
        }
    }
    for (id, (v, s)) in &before {
        if !cases.iter().any(|c| c.id == *id) {
            changes.push(Change {
                id: (*id).to_owned(),
                change: "gone",
                before: Some(format!("{v} ({s:.2})")),
                after: None,
                reason: String::new(),
            });
        }
    }
    // NB: stable: regressions first, then the rest in the order found.
    changes.sort_by_key(|c| c.change != "regression");
    Ok(Comparison {
        people: Vec::new(),
        regressions: changes.iter().filter(|c| c.change == "regression").count(),
        changes,
    })
}

/// The report for people: one line per case, the summary, what changed.
pub fn text_report(
    s: &Summary,
    cases: &[CaseReport],
    comparison: Option<&Comparison>,
    skipped: &[String],
) -> String {
    let mut out = String::new();
    for c in cases {
        out.push_str(&format!(
            "{:<4} {:<24} {:<14} score {:.2}  rounds {}  {} ms{}\n",
            c.verdict,
            c.id,
            c.status,
            c.score,
            c.rounds,
            c.latency_ms,
            if c.reason.is_empty() {
                String::new()
            } else {
                format!("  {}", c.reason)
            }
        ));
    }
    out.push_str(&format!(
        "\n{} cases: {} passed, {} failed; pass rate {:.1}% (95% CI {:.1}%–{:.1}%), mean score {:.2}, latency p50 {} ms, p95 {} ms\n",
        s.cases,
        s.passed,
        s.failed,
        s.pass_rate * 100.0,
        s.pass_rate_ci95[0] * 100.0,
        s.pass_rate_ci95[1] * 100.0,
        s.mean_score,
        s.latency_p50_ms,
        s.latency_p95_ms
    ));
    if let Some(u) = s.usage {
        let cost = u.cost.map_or(String::new(), |c| format!(", cost {c:.4}"));
        out.push_str(&format!(
            "tokens: {} in, {} out{cost} ({} of {} cases reported them)\n",
            u.input_tokens, u.output_tokens, s.usage_cases, s.cases
        ));
    }
    if !s.failures.is_empty() {
        let causes: Vec<String> = s.failures.iter().map(|(k, v)| format!("{k} {v}")).collect();
        out.push_str(&format!("failures: {}\n", causes.join(", ")));
    }
    if !skipped.is_empty() {
        out.push_str(&format!("{} dataset lines skipped\n", skipped.len()));
    }
    if let Some(c) = comparison {
        out.push_str(&format!(
            "\ncompared with the baseline: {} regressions\n",
            c.regressions
        ));
        for ch in &c.changes {
            out.push_str(&format!(
                "{:<10} {:<24} {} -> {}\n",
                ch.change,
                ch.id,
                ch.before.as_deref().unwrap_or("-"),
                ch.after.as_deref().unwrap_or("-")
            ));
        }
        if !c.people.is_empty() {
            out.push_str("\npeople's verdicts on the baseline's runs:\n");
        }
        for p in &c.people {
            out.push_str(&format!(
                "{:<10} {:<24} judged {} then, {} now (run {}){}\n",
                p.feedback.verdict,
                p.id,
                p.before,
                p.after.unwrap_or("-"),
                p.run,
                p.feedback
                    .note
                    .as_deref()
                    .map_or(String::new(), |n| format!(": {n}"))
            ));
        }
    }
    out
}

/// A case's report with only its verdict and latency told, for tests.
#[cfg(test)]
pub(crate) fn sample(id: &str, pass: bool, latency_ms: u64) -> CaseReport {
    CaseReport {
        id: id.into(),
        line: 1,
        goal: "g".into(),
        labels: Vec::new(),
        status: if pass { "answered" } else { "run_failed" }.into(),
        verdict: if pass { "pass" } else { "fail" },
        score: if pass { 1.0 } else { 0.0 },
        reason: String::new(),
        checks: Vec::new(),
        judge: None,
        answer: Value::Null,
        rounds: 1,
        repairs: 0,
        replans: 0,
        steps: 1,
        tool_calls: 0,
        latency_ms,
        usage: None,
        goal_id: None,
        runs: Vec::new(),
        store_error: None,
        plan: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(id: &str, pass: bool, latency_ms: u64) -> CaseReport {
        sample(id, pass, latency_ms)
    }

    #[test]
    fn the_summary_counts_and_bounds_the_rate() {
        let cases: Vec<CaseReport> = (0..10)
            .map(|i| report(&i.to_string(), i < 8, i * 10))
            .collect();
        let s = summarize(&cases);
        assert_eq!((s.cases, s.passed, s.failed), (10, 8, 2));
        assert!((s.pass_rate - 0.8).abs() < 1e-9);
        // 8 of 10: Wilson 95% is [0.4902, 0.9433].
        assert_eq!(s.pass_rate_ci95, [0.4902, 0.9433]);
        assert_eq!((s.latency_p50_ms, s.latency_p95_ms), (40, 90));
        assert_eq!(s.failures.get("run_failed"), Some(&2));
        assert_eq!(wilson(0, 0), [0.0, 1.0]);
    }

    #[test]
    fn a_comparison_puts_regressions_first() {
        let baseline = json!({"cases": [
            {"id": "a", "verdict": "pass", "score": 1.0},
            {"id": "b", "verdict": "fail", "score": 0.0},
            {"id": "c", "verdict": "pass", "score": 1.0},
            {"id": "gone", "verdict": "pass", "score": 1.0},
        ]});
        let now = [
            report("a", true, 1),
            report("b", true, 1),
            report("c", false, 1),
            report("d", true, 1),
        ];
        let cmp = compare(&baseline, &now).unwrap();
        assert_eq!(cmp.regressions, 1);
        let changes: Vec<(&str, &str)> = cmp
            .changes
            .iter()
            .map(|c| (c.id.as_str(), c.change))
            .collect();
        assert_eq!(
            changes,
            [
                ("c", "regression"),
                ("b", "fixed"),
                ("d", "new"),
                ("gone", "gone")
            ]
        );
        assert!(compare(&json!({"x": 1}), &now).is_err());
    }
}
