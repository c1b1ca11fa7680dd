//! Every case asked as `planvm ask` asks a goal (planner, repairs, re-plans, the run's
//! limits), `jobs` at once, each graded as it ends.

use std::time::Instant;

use futures::StreamExt;
use plan_planner::{AskStatus, Planner, RoundKind};
use serde_json::Value;

use crate::{Case, CaseReport, Judge, grade};

/// The reports of `cases`, in the dataset's order; `done` hears of each as it ends (a
/// progress bar). `planner` is the planner of every case, each with its own variables;
/// `judge`, if any, grades every answer besides the case's checks.
pub async fn run(
    planner: &Planner<'_>,
    judge: Option<&Judge>,
    cases: &[Case],
    jobs: usize,
    done: &mut dyn FnMut(&CaseReport),
) -> Vec<CaseReport> {
    let asked = cases.iter().enumerate().map(|(i, case)| async move {
        let mut options = planner.options.clone();
        options.vars = case.vars.clone().into_iter().collect();
        let one = Planner {
            host: planner.host,
            model: planner.model.clone(),
            template: planner.template.clone(),
            examples: planner.examples.clone(),
            options,
        };
        let start = Instant::now();
        let outcome = one
            .ask(&case.goal, case.response_format.as_ref(), &mut ())
            .await;
        let latency_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
        let why = outcome.error.clone().unwrap_or_else(|| "no answer".into());
        let mut graded = match outcome.status {
            AskStatus::Answered => grade(case, Ok(&outcome.answer)),
            _ => grade(case, Err(&why)),
        };
        // NB: a case passes when every check and the judge pass; its score is the mean
        // of the checks' and the judge's.
        let verdict = match judge {
            Some(j) if outcome.status == AskStatus::Answered => {
                let v = j.grade(case, &outcome.answer).await;
                graded.score = if graded.checks.is_empty() {
                    v.score
                } else {
                    (graded.score + v.score) / 2.0
                };
                if !v.passed {
                    graded.passed = false;
                    let why = format!("the judge: {}", v.reason);
                    graded.reason = if graded.reason.is_empty() {
                        why
                    } else {
                        format!("{}; {why}", graded.reason)
                    };
                }
                Some(v)
            }
            _ => None,
        };
        let count = |k: RoundKind| outcome.rounds.iter().filter(|r| r.kind == k).count();
        let report = outcome.report.as_ref();
        let status = serde_json::to_value(outcome.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        (
            i,
            CaseReport {
                id: case.id.clone(),
                line: case.line,
                goal: case.goal.clone(),
                labels: case.labels.clone(),
                status,
                verdict: if graded.passed { "pass" } else { "fail" },
                score: graded.score,
                reason: graded.reason,
                checks: graded.checks,
                judge: verdict,
                answer: if outcome.status == AskStatus::Answered {
                    outcome.answer
                } else {
                    Value::Null
                },
                rounds: outcome.rounds.len(),
                repairs: count(RoundKind::Repair),
                replans: count(RoundKind::Replan),
                steps: report.map_or(0, |r| r.steps),
                tool_calls: report.map_or(0, |r| r.tool_calls),
                latency_ms,
                plan: outcome.plan,
            },
        )
    });
    let mut out: Vec<Option<CaseReport>> = vec![None; cases.len()];
    let mut stream = futures::stream::iter(asked).buffer_unordered(jobs.max(1));
    while let Some((i, report)) = stream.next().await {
        done(&report);
        out[i] = Some(report);
    }
    out.into_iter().flatten().collect()
}
