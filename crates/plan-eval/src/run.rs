//! Every case asked as `planvm ask` asks a goal (planner, repairs, re-plans, the run's
//! limits), `jobs` at once, each graded as it ends; with a cassette directory, each case
//! on a host of its own that records or replays the case's calls.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use plan_host::{Host, HostOptions};
use plan_planner::{
    AskOptions, AskOutcome, AskStatus, Examples, Planner, PlannerModel, RoundKind, Template,
};
use plan_runs::engine::{AskAt, AskRequest, Asked, Hooks, ask_goal};
use serde_json::Value;

use crate::{Case, CaseReport, Grade, Judge, Stored, Verdict, grade};

/// Where each case's planner, tool and judge calls come from and go to: its own cassette
/// in a directory, `<case>.cassette.jsonl` (see [`cassette_names`]).
#[derive(Clone, Debug)]
pub enum Cassettes {
    /// The base host's backends, or the one cassette it replays.
    Shared,
    /// Live calls, each case's kept in its cassette (emptied first).
    Record(PathBuf),
    /// Every call answered from the case's cassette: no network.
    Replay(PathBuf),
    /// The tools answered from the case's cassette where it has the call, else live (and
    /// added to it); the planner and the judge live.
    ToolsFrom(PathBuf),
}

/// Why the cassettes a command names cannot be used.
#[derive(Debug)]
pub enum CassettesError {
    /// A directory to record into cannot be created.
    Create(String),
    /// The `--replay` path does not exist.
    Missing(String),
}

impl Cassettes {
    /// The cassettes `--record DIR`, `--tools-from DIR` or `--replay DIR|FILE` name (at
    /// most one; none: [`Cassettes::Shared`]); a directory to record into is created. A
    /// `--replay` file is [`Cassettes::Shared`]: the host replays it.
    pub fn open(
        record: Option<&Path>,
        tools_from: Option<&Path>,
        replay: Option<&Path>,
    ) -> Result<Cassettes, CassettesError> {
        let create = |dir: &Path| {
            std::fs::create_dir_all(dir).map_err(|e| {
                CassettesError::Create(format!(
                    "cannot create the directory {}: {e}",
                    dir.display()
                ))
            })
        };
        if let Some(dir) = record {
            create(dir)?;
            return Ok(Cassettes::Record(dir.to_owned()));
        }
        if let Some(dir) = tools_from {
            create(dir)?;
            return Ok(Cassettes::ToolsFrom(dir.to_owned()));
        }
        match replay {
            Some(p) if p.is_dir() => Ok(Cassettes::Replay(p.to_owned())),
            Some(p) if !p.exists() => Err(CassettesError::Missing(format!(
                "--replay {}: no such file or directory",
                p.display()
            ))),
            _ => Ok(Cassettes::Shared),
        }
    }
}

/// How the cases are asked and graded.
pub struct Setup {
    /// Serves every case with [`Cassettes::Shared`]; the manifest and options of each
    /// case's own host otherwise.
    pub host: Arc<Host>,
    /// The planner's LLM; None when every case replays its own.
    pub model: Option<Arc<dyn PlannerModel>>,
    pub template: Template,
    pub examples: Examples,
    pub options: AskOptions,
    /// Grades every answer besides the case's checks.
    pub judge: Option<Judge>,
    pub cassettes: Cassettes,
    /// Each case a stored goal of this evaluation (`--store`), begun with
    /// [`crate::store::begin`].
    pub store: Option<Stored>,
    /// Each case a trace of its own, when traces are exported.
    pub telemetry: Option<Arc<plan_telemetry::Telemetry>>,
}

impl Setup {
    /// An evaluation on `host`: the planner's LLM it names (none when every case replays
    /// its own) and the judge its tools file names; no store and no telemetry, which the
    /// caller adds. Refused as the planner's model is (`usage` when the tools file is
    /// wrong, as a judge it cannot make is).
    pub fn on(
        host: Arc<Host>,
        cassettes: Cassettes,
        (template, examples): (Template, Examples),
        options: AskOptions,
    ) -> Result<Setup, plan_planner::ModelError> {
        let replays = matches!(cassettes, Cassettes::Replay(_));
        let judge =
            Judge::for_host(&host, replays).map_err(|message| plan_planner::ModelError {
                usage: true,
                message,
            })?;
        // NB: each case replays its own planner: none is needed here.
        let model = match replays {
            true => None,
            false => Some(plan_planner::model_for(&host)?),
        };
        Ok(Setup {
            host,
            model,
            template,
            examples,
            options,
            judge,
            cassettes,
            store: None,
            telemetry: None,
        })
    }
}

/// What a case's cassette's name ends with.
const SUFFIX: &str = ".cassette.jsonl";

/// The file name of each case's cassette, in the dataset's order (see [`case_names`]).
pub fn cassette_names(cases: &[Case]) -> Vec<String> {
    case_names(cases)
        .into_iter()
        .map(|n| format!("{n}{SUFFIX}"))
        .collect()
}

/// The name of each case, in the dataset's order: its id with every character but ASCII
/// letters, digits, `-` and `_` made `_`, numbered (`-2`, `-3`) where two ids give one
/// name. Its cassette and its stored goal are named after it; with no `.` in it, a
/// goal's id never looks like another goal's later run (`ID.2`).
fn case_names(cases: &[Case]) -> Vec<String> {
    let mut taken = HashSet::new();
    cases
        .iter()
        .map(|c| {
            let base: String =
                c.id.chars()
                    .map(|ch| {
                        if ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_') {
                            ch
                        } else {
                            '_'
                        }
                    })
                    .take(80)
                    .collect();
            let mut name = base.clone();
            let mut k = 1;
            while !taken.insert(name.clone()) {
                k += 1;
                name = format!("{base}-{k}");
            }
            name
        })
        .collect()
}

/// The host of one case: the base host's manifest and options, with the case's cassette.
fn case_host(base: &Host, cassettes: &Cassettes, name: &str) -> Result<Option<Host>, String> {
    let file = format!("{name}{SUFFIX}");
    let mut opts: HostOptions = base.options().clone();
    // NB: one MCP client per server for the whole evaluation, not one per case.
    opts.mcp = Some(base.mcp().clone());
    match cassettes {
        Cassettes::Shared => return Ok(None),
        Cassettes::Record(dir) => {
            let path = dir.join(&file);
            // NB: a recording is of this evaluation alone, not appended to the last one.
            std::fs::write(&path, "")
                .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
            opts.record = Some(path);
        }
        Cassettes::Replay(dir) => {
            let path = dir.join(&file);
            if !path.exists() {
                return Err(format!(
                    "no recording of this case: {} is missing",
                    path.display()
                ));
            }
            opts.replay = Some(path);
        }
        Cassettes::ToolsFrom(dir) => opts.tools_from = Some(dir.join(&file)),
    }
    Host::new(base.manifest().clone(), opts)
        .map(Some)
        .map_err(|e| e.message)
}

/// The reports of `cases`, in the dataset's order; `done` hears of each as it ends (a
/// progress bar).
pub async fn run(
    setup: &Setup,
    cases: &[Case],
    jobs: usize,
    done: &mut dyn FnMut(&CaseReport),
) -> Vec<CaseReport> {
    let names = case_names(cases);
    let asked = cases
        .iter()
        .zip(&names)
        .enumerate()
        .map(|(i, (case, name))| async move { (i, ask_case(setup, case, name).await) });
    let mut out: Vec<Option<CaseReport>> = vec![None; cases.len()];
    let mut stream = futures::stream::iter(asked).buffer_unordered(jobs.max(1));
    while let Some((i, report)) = stream.next().await {
        done(&report);
        out[i] = Some(report);
    }
    out.into_iter().flatten().collect()
}

/// `case` asked as a goal of its own (on a host of its own when it has a cassette),
/// graded, judged, traced and stored.
async fn ask_case(setup: &Setup, case: &Case, name: &str) -> CaseReport {
    let start = Instant::now();
    let own = match case_host(&setup.host, &setup.cassettes, name) {
        Ok(own) => own,
        Err(why) => return not_started(case, why, start),
    };
    let host = own.as_ref().unwrap_or(&setup.host);
    let model = match (&setup.cassettes, &setup.model) {
        (Cassettes::Replay(_), _) | (_, None) => match plan_planner::model_for(host) {
            Ok(m) => m,
            Err(e) => return not_started(case, e.message, start),
        },
        (_, Some(m)) => m.clone(),
    };
    let trace = setup.telemetry.as_ref().map(|t| {
        let workflow = plan_telemetry::Workflow {
            command: "eval",
            plan: None,
            goal: Some(&case.goal),
            run_id: None,
        };
        t.start(&workflow, None)
    });
    let model = match &trace {
        Some(t) => t.model(model, &plan_planner::model_name(host)),
        None => model,
    };
    let mut spans = trace.as_ref().map(|t| t.journal(host.manifest()));
    let mut options = setup.options.clone();
    options.vars = case.vars.clone().into_iter().collect();
    let mut planner = Planner {
        host,
        model,
        template: setup.template.clone(),
        examples: setup.examples.clone(),
        options,
    };
    let goal = setup
        .store
        .as_ref()
        .map(|s| crate::store::goal_id(&s.eval, name));
    let request = AskRequest {
        goal: &case.goal,
        response_format: case.response_format.as_ref(),
        store: setup.store.as_ref().map(|s| AskAt {
            at: s.at.clone(),
            id: goal.as_deref(),
            session: None,
        }),
    };
    // NB: a lease's warning is about a run the report already covers.
    let hooks = Hooks {
        journal: &mut spans,
        warn: |_| {},
        started: |_| {},
    };
    let asked = ask_goal(&mut planner, request, hooks);
    let asked = match plan_telemetry::within(trace.as_ref(), asked).await {
        Ok(asked) => asked,
        Err(e) => return not_started(case, e.message, start),
    };
    let latency_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
    let judged = judged(setup, host, case, &asked.outcome).await;
    if let Some(t) = trace {
        let last = asked.runs.last().map(String::as_str);
        t.end(&plan_telemetry::Ended::ask(&asked.outcome, last));
    }
    let mut store_error = asked.failed.as_ref().map(|e| e.message.clone());
    let mut report = case_report(case, asked, judged, latency_ms);
    if let Some(stored) = &setup.store
        && let Err(e) = crate::store::save(stored, &report)
    {
        store_error = Some(match store_error {
            Some(first) => format!("{first}; {e}"),
            None => e,
        });
    }
    report.store_error = store_error;
    report
}

/// What the checks, and the judge if there is one, say of `outcome`. A case passes when
/// every check and the judge pass; its score is the mean of the checks' and the judge's.
async fn judged(
    setup: &Setup,
    host: &Host,
    case: &Case,
    outcome: &AskOutcome,
) -> (Grade, Option<Verdict>) {
    let why = outcome.error.clone().unwrap_or_else(|| "no answer".into());
    let mut graded = match outcome.status {
        AskStatus::Answered => grade(case, Ok(&outcome.answer)),
        _ => grade(case, Err(&why)),
    };
    let Some(judge) = setup
        .judge
        .as_ref()
        .filter(|_| outcome.status == AskStatus::Answered)
    else {
        return (graded, None);
    };
    let v = judge.grade(host, case, &outcome.answer).await;
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
    (graded, Some(v))
}

/// The report of `case`, asked and judged.
fn case_report(
    case: &Case,
    asked: Asked,
    (graded, verdict): (Grade, Option<Verdict>),
    latency_ms: u64,
) -> CaseReport {
    let outcome = asked.outcome;
    let count = |k: RoundKind| outcome.rounds.iter().filter(|r| r.kind == k).count();
    let report = outcome.report.as_ref();
    let usage = [outcome.usage, verdict.as_ref().and_then(|v| v.usage)]
        .into_iter()
        .flatten()
        .reduce(|mut a, b| {
            a += b;
            a
        });
    CaseReport {
        id: case.id.clone(),
        line: case.line,
        goal: case.goal.clone(),
        labels: case.labels.clone(),
        status: outcome.status.as_str().to_owned(),
        verdict: if graded.passed { "pass" } else { "fail" },
        score: graded.score,
        reason: graded.reason,
        checks: graded.checks,
        judge: verdict,
        rounds: outcome.rounds.len(),
        repairs: count(RoundKind::Repair),
        replans: count(RoundKind::Replan),
        steps: report.map_or(0, |r| r.steps),
        tool_calls: report.map_or(0, |r| r.tool_calls),
        answer: if outcome.status == AskStatus::Answered {
            outcome.answer
        } else {
            Value::Null
        },
        latency_ms,
        usage,
        goal_id: asked.goal_id,
        runs: asked.runs,
        store_error: None,
        plan: outcome.plan,
    }
}

/// The report of a case that could not be asked (its host or planner could not be set
/// up): a failure with the reason.
fn not_started(case: &Case, reason: String, start: Instant) -> CaseReport {
    let graded = grade(case, Err(&reason));
    CaseReport {
        id: case.id.clone(),
        line: case.line,
        goal: case.goal.clone(),
        labels: case.labels.clone(),
        status: "not_started".into(),
        verdict: "fail",
        score: 0.0,
        reason: graded.reason,
        checks: graded.checks,
        judge: None,
        answer: Value::Null,
        rounds: 0,
        repairs: 0,
        replans: 0,
        steps: 0,
        tool_calls: 0,
        latency_ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
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

    #[test]
    fn cassette_names_are_safe_and_distinct() {
        let (cases, _) = crate::parse(
            "{\"id\": \"a/b\", \"goal\": \"g\"}\n\
             {\"id\": \"a_b\", \"goal\": \"g\"}\n\
             {\"id\": \"..\", \"goal\": \"g\"}\n\
             {\"goal\": \"g\"}\n",
        );
        assert_eq!(
            cassette_names(&cases),
            [
                "a_b.cassette.jsonl",
                "a_b-2.cassette.jsonl",
                "__.cassette.jsonl",
                "line-4.cassette.jsonl"
            ]
        );
    }
}
