//! An evaluation kept in the run store (`--store`): each case asked as a stored goal
//! `<eval>.<case>` (its runs `ID`, `ID.2`, ...), its verdict kept beside it, the summary
//! once it ends; and the verdicts people gave on a baseline's runs, for `--compare`.

use plan_runs::StoreAt;
use plan_runs::open::Access;
use plan_store::{EvalCase, Feedback};
use serde::Serialize;
use serde_json::Value;

use crate::CaseReport;

/// Where an evaluation's cases are stored.
#[derive(Clone, Debug)]
pub struct Stored {
    pub at: StoreAt,
    /// The evaluation's id: its cases' goals are `<id>.<case>`.
    pub eval: String,
}

/// A new evaluation id: `eval-` and 16 hex digits that sort by time.
pub fn new_eval_id() -> String {
    let id = plan_store::new_run_id().replace('-', "");
    format!("eval-{}", &id[..16])
}

/// Stores evaluation `eval` (a new id when None) of `dataset` as started (the store is
/// created if missing).
pub fn begin(at: StoreAt, eval: Option<String>, dataset: &str) -> Result<Stored, plan_runs::Error> {
    let eval = eval.unwrap_or_else(new_eval_id);
    plan_store::check_run_id(&eval).map_err(|e| {
        plan_runs::Error::new(
            plan_runs::ErrorKind::BadRunId,
            format!("evaluation id `{eval}`: {e}"),
        )
    })?;
    at.open(Access::Create)?.create_eval(&eval, dataset)?;
    Ok(Stored { at, eval })
}

/// Ends evaluation `eval` with its summary.
pub fn end(at: &StoreAt, eval: &str, summary: &Value) -> Result<(), plan_runs::Error> {
    at.open(Access::Existing)?.end_eval(eval, summary)?;
    Ok(())
}

/// The goal id a case is asked as: `<eval>.<name>`, its name from
/// [`crate::cassette_names`] without the suffix.
pub(crate) fn goal_id(eval: &str, name: &str) -> String {
    plan_store::run_id_from(&format!("{eval}.{name}"))
}

/// Keeps `report`'s verdict beside its goal.
pub(crate) fn save(stored: &Stored, report: &CaseReport) -> Result<(), String> {
    let Some(goal) = &report.goal_id else {
        return Ok(());
    };
    let case = EvalCase {
        case_id: report.id.clone(),
        goal: goal.clone(),
        verdict: report.verdict.into(),
        score: report.score,
        reason: report.reason.clone(),
        report: serde_json::to_value(report).unwrap_or(Value::Null),
    };
    stored
        .at
        .open(Access::Existing)
        .and_then(|mut s| Ok(s.save_eval_case(&stored.eval, &case)?))
        .map_err(|e| e.message)
}

/// A person's verdict on a baseline case's run, beside the judge's verdicts then and now.
#[derive(Clone, Debug, Serialize)]
pub struct PersonVerdict {
    pub id: String,
    /// The run it was given on.
    pub run: String,
    #[serde(flatten)]
    pub feedback: Feedback,
    /// The case's verdict in the baseline and now (None: not in this evaluation).
    pub before: String,
    pub after: Option<&'static str>,
}

/// The verdicts people gave on the runs of `baseline`'s cases (a report made with
/// `--store`), the latest per case.
pub fn people(
    at: &StoreAt,
    baseline: &Value,
    cases: &[CaseReport],
) -> Result<Vec<PersonVerdict>, plan_runs::Error> {
    let store = at.open(Access::Existing)?;
    let mut out = Vec::new();
    for c in baseline["cases"].as_array().into_iter().flatten() {
        let (Some(id), Some(runs)) = (c["id"].as_str(), c["runs"].as_array()) else {
            continue;
        };
        let mut latest: Option<(String, Feedback)> = None;
        for run in runs.iter().filter_map(Value::as_str) {
            if let Some(f) = store.feedback(run)?
                && latest
                    .as_ref()
                    .is_none_or(|(_, l)| f.updated_at >= l.updated_at)
            {
                latest = Some((run.to_owned(), f));
            }
        }
        if let Some((run, feedback)) = latest {
            out.push(PersonVerdict {
                id: id.to_owned(),
                run,
                feedback,
                before: c["verdict"].as_str().unwrap_or_default().to_owned(),
                after: cases.iter().find(|r| r.id == id).map(|r| r.verdict),
            });
        }
    }
    Ok(out)
}

/// [`crate::compare`] with `baseline`, and, for an evaluation in the store, the verdicts
/// people gave on the baseline's runs ([`people`]); why those could not be read, if so.
pub fn compare_with_people(
    baseline: &Value,
    cases: &[CaseReport],
    stored: Option<&Stored>,
) -> Result<(crate::Comparison, Option<plan_runs::Error>), String> {
    let mut comparison = crate::compare(baseline, cases)?;
    let mut unread = None;
    if let Some(st) = stored {
        match people(&st.at, baseline, cases) {
            Ok(people) => comparison.people = people,
            Err(e) => unread = Some(e),
        }
    }
    Ok((comparison, unread))
}

/// The JSON report: `{"summary", "cases", "skipped", "eval"?, "comparison"?}`.
pub fn report_json(
    summary: &crate::Summary,
    cases: &[CaseReport],
    skipped: &[String],
    stored: Option<&Stored>,
    comparison: Option<&crate::Comparison>,
) -> Value {
    let mut v = serde_json::json!({"summary": summary, "cases": cases, "skipped": skipped});
    if let Some(st) = stored {
        v["eval"] = serde_json::json!(st.eval);
    }
    if let Some(c) = comparison {
        v["comparison"] = serde_json::json!(c);
    }
    v
}
