//! `planrt.ask`: a goal in, an answer out, as `planvm ask` does it (the planner writes a
//! plan, errors go back for repair, a failed step for a re-plan), with Python tools.

use std::path::PathBuf;

use plan_host::Tracer;
use plan_planner::{AskOptions, AskOutcome, Planner};
use plan_runs::engine::{AskAt, AskRequest, Hooks, PlanningFiles, ask_goal, load_planning};
use plan_vm::ErrorCode;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::Value;

use crate::convert;
use crate::outcome::run_error;
use crate::store::Store;
use crate::tools::{self};

/// How an `ask` ended: `status` is `"answered"`, `"invalid_plan"` (the last plan still had
/// errors when the repairs ran out), `"run_failed"`, `"planner_failed"` or `"needs_input"`
/// (the plan asks the user `question`); `answer` is the
/// final answer (None unless answered); `plan` the last plan's source; `rounds` what each
/// planning round produced (dicts: kind, plan, diagnostics, run_error, ...); `error` one
/// line saying why, when not answered; with `store=`, `run_id` (the goal's) and `runs`.
#[pyclass(frozen, get_all, module = "planrt")]
pub(crate) struct Answer {
    status: String,
    answer: Py<PyAny>,
    plan: Option<String>,
    rounds: Py<PyAny>,
    error: Option<String>,
    steps: u64,
    tool_calls: u64,
    /// With `store=`: the goal's id, and its runs (one per plan that ran).
    run_id: Option<String>,
    runs: Vec<String>,
    /// While `needs_input`: the question the last run stopped at, and its choices; the
    /// run (`runs[-1]`) goes on with `Store.resume(id, input=...)`.
    question: Option<String>,
    choices: Option<Vec<String>>,
}

#[pymethods]
impl Answer {
    fn __repr__(&self) -> String {
        format!(
            "<Answer {} after {} rounds>",
            self.status,
            Python::attach(|py| self.rounds.bind(py).len().unwrap_or(0))
        )
    }
}

fn answer(
    py: Python<'_>,
    o: AskOutcome,
    stored: Option<(String, Vec<String>)>,
) -> PyResult<Answer> {
    let (run_id, runs) = stored.map_or((None, Vec::new()), |(id, runs)| (Some(id), runs));
    let status = serde_json::to_value(o.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let rounds = serde_json::to_value(&o.rounds).unwrap_or(Value::Null);
    let (steps, tool_calls) = o
        .report
        .as_ref()
        .map_or((0, 0), |r| (r.steps, r.tool_calls));
    let question = o.report.as_ref().and_then(|r| r.question.clone());
    let (question, choices) = question.map_or((None, None), |q| (Some(q.question), q.choices));
    Ok(Answer {
        status,
        answer: convert::to_py(py, &o.answer)?.unbind(),
        plan: o.plan,
        rounds: convert::to_py(py, &rounds)?.unbind(),
        error: o.error,
        steps,
        tool_calls,
        run_id,
        runs,
        question,
        choices,
    })
}

/// `planrt.ask` once on the running loop (`python/planrt/_drive.py` makes the coroutine).
#[pyfunction]
#[pyo3(signature = (goal, response_format = None, tools = None, *, tools_file = None,
                    replay = None, examples = None, max_examples = None,
                    max_repairs = plan_planner::DEFAULT_MAX_REPAIRS,
                    max_replans = plan_planner::DEFAULT_MAX_REPLANS, vars = None, max_concurrency = 16, max_steps = None,
                    timeout = None, strict = false, store = None, run_id = None, session = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _ask_now<'py>(
    py: Python<'py>,
    goal: String,
    response_format: Option<&Bound<'py, PyAny>>,
    tools: Option<&Bound<'py, PyAny>>,
    tools_file: Option<PathBuf>,
    replay: Option<PathBuf>,
    examples: Option<PathBuf>,
    max_examples: Option<usize>,
    max_repairs: u32,
    max_replans: u32,
    vars: Option<&Bound<'py, PyDict>>,
    max_concurrency: u32,
    max_steps: Option<u64>,
    timeout: Option<f64>,
    strict: bool,
    store: Option<Py<Store>>,
    run_id: Option<String>,
    session: Option<String>,
) -> PyResult<Bound<'py, PyAny>> {
    if store.is_none() && (run_id.is_some() || session.is_some()) {
        return Err(PyValueError::new_err(
            "run_id= and session= name what a store keeps: pass store= too",
        ));
    }
    let locals = pyo3_async_runtimes::tokio::get_current_locals(py)
        .map_err(|_| PyRuntimeError::new_err("planrt.ask needs a running asyncio event loop"))?;
    let tools = tools::parse(tools, tools_file, &plan_manifest::Manifest::builtin())?;
    let response_format = response_format
        .filter(|r| !r.is_none())
        .map(|r| convert::from_py(r, "response_format"))
        .transpose()?;
    let preset = crate::setup::presets(vars)?;
    let deadline = crate::setup::deadline(timeout)?;
    let limits = crate::setup::limits(max_concurrency, max_steps)?;
    let files = PlanningFiles {
        tools: tools.file.as_deref(),
        examples,
        max_examples,
        prompt: None,
    };
    let planning =
        load_planning(&tools.manifest, files).map_err(|e| PyValueError::new_err(e.message))?;
    crate::outcome::warn(py, planning.examples.skipped())?;
    let options = AskOptions {
        max_repairs: max_repairs.min(plan_planner::MAX_ROUNDS),
        max_replans: max_replans.min(plan_planner::MAX_ROUNDS),
        max_examples: planning.max_examples,
        limits,
        vars: preset,
        strict,
        stream: true,
        deadline,
        conversation: plan_planner::Conversation::default(),
    };
    let setup = (tools, planning);
    let (engine, _, _) = crate::setup::engine(py, &locals, setup, (deadline, replay))?;
    let not_planned = |e: plan_runs::Error| match e.kind {
        plan_runs::ErrorKind::BadInput => PyValueError::new_err(e.message),
        _ => Python::attach(|py| run_error(py, ErrorCode::NotStarted, &e.message, None, None)),
    };
    engine.goal_planner().map_err(|e| not_planned(e.clone()))?;
    let at = store.map(|s| s.get().at().clone());
    crate::runtime::future_into_py(py, locals, async move {
        let mut planner = engine.planner(options).map_err(not_planned)?;
        let request = AskRequest {
            goal: &goal,
            response_format: response_format.as_ref(),
            store: at.map(|at| AskAt {
                at,
                id: run_id.as_deref(),
                session: session.as_deref(),
            }),
        };
        asked(&mut planner, request).await
    })
}

/// `request` asked of `planner`: what it came to as Python sees it (the warnings as
/// Python warnings, a store that failed as `StoreError`).
async fn asked(planner: &mut Planner<'_>, request: AskRequest<'_>) -> PyResult<Answer> {
    let hooks = Hooks {
        journal: &mut Tracer::none(),
        warn: Store::lease_warning(),
        started: |_| {},
    };
    let asked = ask_goal(planner, request, hooks)
        .await
        .map_err(crate::store::store_error)?;
    if !asked.warnings.is_empty() {
        Python::attach(|py| crate::outcome::warn(py, &asked.warnings))?;
    }
    if let Some(e) = asked.failed {
        return Err(crate::store::store_error(e));
    }
    let stored = asked.goal_id.map(|id| (id, asked.runs));
    Python::attach(|py| answer(py, asked.outcome, stored))
}
