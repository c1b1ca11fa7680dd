//! `Run`: the VM's own suspension, for callers that perform the calls themselves (their
//! own queue, a framework's tool executor, a test). `requests()` runs the VM until it
//! needs answers and lists the calls waiting for one; `resume(id, result)` answers one;
//! `state()` saves the run as bytes, `Run.restore(plan, state)` continues it anywhere.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use plan_vm::{CallId, ErrorCode, Halt, Limits, OwnedVm, RequestKind, ToolRequest, VmState};
use pyo3::exceptions::{PyBaseException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::plan::{Outcome, Plan};
use crate::{RunError, convert};

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
    err
}

pub(crate) fn run_error_of(e: &plan_vm::RunError) -> PyErr {
    Python::attach(|py| run_error(py, e.code, &e.message, e.seq_no, e.line))
}

/// A call the run waits for: answer it with `Run.resume(request.id, result)`.
#[pyclass(frozen, get_all, module = "planrt")]
pub(crate) struct Request {
    id: u64,
    /// The tool (`"jmp_condition"` for a condition, answered with a bool or "yes"/"no").
    tool: String,
    /// The call's parameters (dict).
    args: Py<PyAny>,
    seq_no: Option<i64>,
    /// `"tool"` or `"condition"`.
    kind: String,
    /// For a call with several output variables: the keys its result must have.
    output_keys: Option<Vec<String>>,
}

#[pymethods]
impl Request {
    fn __repr__(&self, py: Python<'_>) -> String {
        let args = self
            .args
            .bind(py)
            .repr()
            .map(|r| r.to_string())
            .unwrap_or_default();
        format!("<Request {} {}({args})>", self.id, self.tool)
    }
}

impl Request {
    fn new(py: Python<'_>, r: &ToolRequest) -> PyResult<Request> {
        let (kind, output_keys) = match &r.kind {
            RequestKind::Tool { output_keys } => ("tool", output_keys.clone()),
            RequestKind::Condition => ("condition", None),
        };
        Ok(Request {
            id: r.id.0,
            tool: r.tool.as_str().to_owned(),
            args: convert::dict(py, &r.args)?.into_any().unbind(),
            seq_no: r.seq_no,
            kind: kind.to_owned(),
            output_keys,
        })
    }
}

struct Inner {
    vm: OwnedVm,
    started: Instant,
    /// From `started` to the end, once ended.
    took: Option<Duration>,
    /// Issued, not yet answered.
    pending: Vec<ToolRequest>,
    tool_calls: u64,
    end: Option<End>,
}

enum End {
    Done(plan_vm::Outcome),
    Failed(plan_vm::RunError),
}

/// A run driven by hand. Thread-safe; one call at a time goes through.
#[pyclass(frozen, module = "planrt")]
pub(crate) struct Run {
    inner: Arc<Mutex<Inner>>,
}

impl Run {
    pub(crate) fn new(vm: OwnedVm, pending: Vec<ToolRequest>) -> Run {
        Run {
            inner: Arc::new(Mutex::new(Inner {
                vm,
                started: Instant::now(),
                took: None,
                pending,
                tool_calls: 0,
                end: None,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // NB: a panic while holding the lock (which PyO3 turns into an exception) leaves
        // the state as it was before that call, so the lock stays usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl Run {
    /// Runs until the plan needs answers; returns every call still waiting for one
    /// (empty once the run has ended). Raises `RunError` when the run fails.
    fn requests(&self, py: Python<'_>) -> PyResult<Vec<Request>> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        match &inner.end {
            Some(End::Done(_)) => return Ok(Vec::new()),
            Some(End::Failed(e)) => return Err(run_error_of(e)),
            None => {}
        }
        let halt = py.detach(|| {
            inner.vm.with(|vm| {
                loop {
                    let halt = vm.run();
                    // A slice of a long computation ended: go on.
                    if matches!(&halt, Halt::Yield(r) if r.is_empty()) && vm.paused() {
                        continue;
                    }
                    break halt;
                }
            })
        });
        match halt {
            Halt::Yield(new) => inner.pending.extend(new),
            Halt::Done(o) => {
                inner.took = Some(inner.started.elapsed());
                inner.pending.clear();
                inner.end = Some(End::Done(o));
            }
            Halt::Failed(e) => {
                inner.took = Some(inner.started.elapsed());
                inner.pending.clear();
                let err = run_error_of(&e);
                inner.end = Some(End::Failed(e));
                return Err(err);
            }
        }
        inner.pending.iter().map(|r| Request::new(py, r)).collect()
    }

    /// Answers call `call_id` with a JSON-compatible `result`, or with an exception
    /// (the call failed; the run fails at that step when it gets there).
    fn resume(&self, call_id: u64, result: &Bound<'_, PyAny>) -> PyResult<()> {
        let answer = if result.is_instance_of::<PyBaseException>() {
            let kind = result.get_type().name()?.to_string();
            Err(format!("{kind}: {}", result.str()?))
        } else {
            Ok(convert::from_py(result, "the result")?)
        };
        let mut inner = self.lock();
        let Some(at) = inner.pending.iter().position(|r| r.id.0 == call_id) else {
            return Err(PyValueError::new_err(format!(
                "no call {call_id} is waiting for an answer"
            )));
        };
        let request = inner.pending.remove(at);
        inner
            .vm
            .with(|vm| vm.resume(CallId(call_id), answer))
            .map_err(|e| PyValueError::new_err(e.message))?;
        if matches!(request.kind, RequestKind::Tool { .. }) {
            inner.tool_calls += 1;
        }
        Ok(())
    }

    /// Whether the run has ended (answered or failed).
    #[getter]
    fn done(&self) -> bool {
        self.lock().end.is_some()
    }

    /// The outcome once the run has answered, else `None`.
    #[getter]
    fn outcome(&self, py: Python<'_>) -> PyResult<Option<Outcome>> {
        let inner = self.lock();
        match &inner.end {
            Some(End::Done(o)) => Ok(Some(Outcome::new(
                py,
                &o.final_answer,
                &o.vars,
                o.steps,
                inner.tool_calls,
                inner.took.map_or(0, |d| d.as_millis() as u64),
            )?)),
            _ => Ok(None),
        }
    }

    /// The run saved as bytes (JSON): its variables, position and calls in flight with
    /// any answers already given. `Run.restore` continues it.
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let inner = self.lock();
        let bytes = serde_json::to_vec(inner.vm.state())
            .map_err(|e| PyValueError::new_err(format!("cannot save the state: {e}")))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// A run continued from `state` (bytes from `Run.state()`) of the same `plan`. The
    /// calls that were in flight without an answer are waiting again.
    #[staticmethod]
    #[pyo3(signature = (plan, state, *, max_concurrency = 16, max_steps = None))]
    fn restore(
        plan: &Bound<'_, Plan>,
        state: &[u8],
        max_concurrency: u32,
        max_steps: Option<u64>,
    ) -> PyResult<Run> {
        let state: VmState = serde_json::from_slice(state).map_err(|e| {
            Python::attach(|py| {
                run_error(
                    py,
                    ErrorCode::BadState,
                    &format!("not a saved run: {e}"),
                    None,
                    None,
                )
            })
        })?;
        let pending = state.unanswered();
        let mut limits = Limits {
            max_concurrency: max_concurrency.max(1),
            ..Limits::default()
        };
        if let Some(s) = max_steps {
            limits.max_steps = s;
        }
        let vm = OwnedVm::from_state(plan.get().program.clone(), state, limits)
            .map_err(|e| run_error_of(&e))?;
        Ok(Run::new(vm, pending))
    }

    fn __repr__(&self) -> String {
        let inner = self.lock();
        match &inner.end {
            Some(End::Done(_)) => "<Run answered>".into(),
            Some(End::Failed(e)) => format!("<Run failed: {}>", e.code),
            None => format!("<Run waiting for {} calls>", inner.pending.len()),
        }
    }
}
