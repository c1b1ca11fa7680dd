//! What a run from Python comes to: an `Outcome`, or a `RunError`, and warnings.

use plan_host::RunReport;
use plan_vm::ErrorCode;
use pyo3::prelude::*;
use serde_json::Value;

use crate::tools::Raised;
use crate::{RunError, convert};

/// Each of `messages` as a Python `UserWarning` (a filter that turns warnings into errors
/// raises the first).
pub(crate) fn warn<'a>(
    py: Python<'_>,
    messages: impl IntoIterator<Item = &'a String>,
) -> PyResult<()> {
    let category = py.get_type::<pyo3::exceptions::PyUserWarning>();
    for m in messages {
        let text = std::ffi::CString::new(m.replace('\0', " ")).unwrap_or_default();
        PyErr::warn(py, &category, &text, 1)?;
    }
    Ok(())
}

/// A `RunError` with its attributes: `code` (`R0005`, ...), `seq_no`, `line`.
pub(crate) fn run_error(
    py: Python<'_>,
    code: ErrorCode,
    message: &str,
    seq_no: Option<i64>,
    line: Option<u32>,
) -> PyErr {
    let place = match (seq_no, line) {
        (Some(s), Some(l)) => format!(" (seq_no {s}, line {l})"),
        (Some(s), None) => format!(" (seq_no {s})"),
        _ => String::new(),
    };
    let err = RunError::new_err(format!("{code}{place}: {message}"));
    let v = err.value(py);
    // NB: setting attributes on a fresh exception cannot fail in practice.
    let _ = v.setattr("code", code.as_str());
    let _ = v.setattr("seq_no", seq_no);
    let _ = v.setattr("line", line);
    let _ = v.setattr("run_id", py.None());
    err
}

pub(crate) fn run_error_of(e: &plan_vm::RunError) -> PyErr {
    Python::attach(|py| run_error(py, e.code, &e.message, e.seq_no, e.line))
}

/// The end of a run: its answer, every variable, what it took.
#[pyclass(frozen, get_all, module = "planrt")]
pub(crate) struct Outcome {
    final_answer: Py<PyAny>,
    /// Every variable set at the end (dict).
    variables: Py<PyAny>,
    /// Instructions executed.
    steps: u64,
    tool_calls: u64,
    elapsed_ms: u64,
    /// The stored run's id (a run with `store=`, or resumed), else `None`.
    run_id: Option<String>,
    /// `"ok"`, or `"needs_input"`: the run stopped at a question to a person
    /// (`ask_user`), and goes on with `Store.resume(run_id, input=...)`.
    status: String,
    /// The question, while `needs_input`.
    question: Option<String>,
    /// The answers to choose from, if the question has some.
    choices: Option<Vec<String>>,
}

/// An outcome's fields, in the order `Outcome._restore` takes them.
type OutcomeFields = (
    Py<PyAny>,
    Py<PyAny>,
    u64,
    u64,
    u64,
    Option<String>,
    String,
    Option<String>,
    Option<Vec<String>>,
);

#[pymethods]
impl Outcome {
    /// Pickled as plain data (its answer and variables as the Python values they are).
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, OutcomeFields)> {
        let restore = py.get_type::<Outcome>().getattr("_restore")?;
        let fields = (
            self.final_answer.clone_ref(py),
            self.variables.clone_ref(py),
            self.steps,
            self.tool_calls,
            self.elapsed_ms,
            self.run_id.clone(),
            self.status.clone(),
            self.question.clone(),
            self.choices.clone(),
        );
        Ok((restore, fields))
    }

    /// An outcome unpickled (see `__reduce__`).
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    fn _restore(
        final_answer: Py<PyAny>,
        variables: Py<PyAny>,
        steps: u64,
        tool_calls: u64,
        elapsed_ms: u64,
        run_id: Option<String>,
        status: String,
        question: Option<String>,
        choices: Option<Vec<String>>,
    ) -> Outcome {
        Outcome {
            final_answer,
            variables,
            steps,
            tool_calls,
            elapsed_ms,
            run_id,
            status,
            question,
            choices,
        }
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let answer = self
            .final_answer
            .bind(py)
            .repr()
            .map(|r| r.to_string())
            .unwrap_or_default();
        if let Some(q) = &self.question {
            return format!(
                "<Outcome needs_input question={:?}>",
                plan_llm::preview(q, 80)
            );
        }
        format!(
            "<Outcome final_answer={} steps={} tool_calls={}>",
            plan_llm::preview(&answer, 80),
            self.steps,
            self.tool_calls
        )
    }
}

impl Outcome {
    pub(crate) fn new<'a, K: AsRef<str>>(
        py: Python<'_>,
        final_answer: &Value,
        variables: impl IntoIterator<Item = (K, &'a Value)>,
        steps: u64,
        tool_calls: u64,
        elapsed_ms: u64,
    ) -> PyResult<Outcome> {
        Ok(Outcome {
            final_answer: convert::to_py(py, final_answer)?.unbind(),
            variables: convert::dict(py, variables)?.into_any().unbind(),
            steps,
            tool_calls,
            elapsed_ms,
            run_id: None,
            status: "ok".into(),
            question: None,
            choices: None,
        })
    }
}

/// A report as Python sees it: an `Outcome`, or `RunError` with the tool's exception as
/// its cause; both name the stored run, if any, as `run_id`.
pub(crate) fn outcome(
    report: RunReport,
    raised: &Raised,
    run_id: Option<String>,
) -> PyResult<Outcome> {
    Python::attach(|py| {
        if let Some(e) = &report.error {
            let err = crate::outcome::run_error(py, e.code, &e.message, e.seq_no, e.line);
            // NB: setting an attribute on a fresh exception cannot fail in practice.
            let _ = err.value(py).setattr("run_id", run_id.as_deref());
            if e.code == ErrorCode::ToolFailed
                && let Some(cause) = raised.lock().ok().and_then(|mut r| r.remove(&e.seq_no))
            {
                err.set_cause(py, Some(cause));
            }
            return Err(err);
        }
        // NB: the variables moved out as JSON (a large answer is not copied), then
        // converted.
        let vars = report.vars.into_map();
        let mut outcome = Outcome::new(
            py,
            &report.final_answer,
            &vars,
            report.steps,
            report.tool_calls,
            report.elapsed_ms,
        )?;
        outcome.run_id = run_id;
        if let Some(q) = report.question {
            outcome.status = "needs_input".into();
            outcome.question = Some(q.question);
            outcome.choices = q.choices;
        }
        Ok(outcome)
    })
}
