//! `Run`: the VM's own suspension, for callers that perform the calls themselves (their
//! own queue, a framework's tool executor, a test). `requests()` runs the VM until it
//! needs answers and lists the calls waiting for one; `resume(id, result)` answers one;
//! `state()` saves the run as bytes, `Run.restore(plan, state)` continues it anywhere.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use plan_vm::{CallId, ErrorCode, Halt, OwnedVm, RequestKind, ToolRequest, VmState};
use pyo3::exceptions::{PyBaseException, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::MutexExt;
use pyo3::types::PyBytes;

use crate::convert;
use crate::outcome::Outcome;
use crate::outcome::{run_error, run_error_of};
use crate::program::Plan;

/// A call the run waits for: answer it with `Run.resume(request.id, result)`.
#[pyclass(frozen, get_all, module = "planrt")]
pub(crate) struct Request {
    id: u64,
    /// The tool (`"jmp_condition"` for a condition, answered with a bool or "yes"/"no").
    tool: String,
    /// The call's parameters (dict).
    args: Py<PyAny>,
    seq_no: Option<i64>,
    /// The source line of its instruction.
    line: Option<u32>,
    /// Which step of the run issued it (program order: the sequential run makes its calls
    /// in this order).
    step: u64,
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
    fn new(py: Python<'_>, r: &ToolRequest, line: Option<u32>) -> PyResult<Request> {
        let (kind, output_keys) = match &r.kind {
            RequestKind::Tool { output_keys } => ("tool", output_keys.clone()),
            RequestKind::Condition => ("condition", None),
        };
        Ok(Request {
            id: r.id.0,
            tool: r.tool.as_str().to_owned(),
            args: convert::dict(py, r.args.iter())?.into_any().unbind(),
            seq_no: r.seq_no,
            line,
            step: r.instance,
            kind: kind.to_owned(),
            output_keys,
        })
    }
}

struct Inner {
    vm: OwnedVm,
    /// When the run must have ended (`timeout`).
    deadline: Option<(Instant, Duration)>,
    /// Answered calls not yet known to be committed.
    answered: Vec<Arc<ToolRequest>>,
    started: Instant,
    /// From `started` to the end, once ended.
    took: Option<Duration>,
    /// Issued, not yet answered.
    pending: Vec<Arc<ToolRequest>>,
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
    pub(crate) fn new(
        mut vm: OwnedVm,
        pending: Vec<Arc<ToolRequest>>,
        timeout: Option<Duration>,
    ) -> Run {
        if timeout.is_some() {
            // NB: so a long computation between calls still meets the deadline.
            vm.with(|vm| vm.set_step_slice(Some(plan_host::STEP_SLICE)));
        }
        Run {
            inner: Arc::new(Mutex::new(Inner {
                vm,
                deadline: timeout.map(|t| (Instant::now() + t, t)),
                answered: Vec::new(),
                started: Instant::now(),
                took: None,
                pending,
                tool_calls: 0,
                end: None,
            })),
        }
    }

    /// NB: waits for the lock without holding the GIL (another thread may hold the lock
    /// while it runs the VM detached, and needs the GIL back to finish). A panic while
    /// holding the lock (which PyO3 turns into an exception) leaves the state as it was
    /// before that call, so the lock stays usable.
    fn lock(&self, py: Python<'_>) -> MutexGuard<'_, Inner> {
        self.inner
            .lock_py_attached(py)
            .unwrap_or_else(|e| e.into_inner())
    }
}

impl Inner {
    fn end(&mut self, end: End) {
        self.took = Some(self.started.elapsed());
        // The calls the run consumed; one answered ahead and never reached was not made
        // by the sequential run and is not counted (as the host counts).
        let st = self.vm.state();
        self.tool_calls += self
            .answered
            .iter()
            .filter(|r| !st.pending().iter().any(|p| p.request.id == r.id))
            .count() as u64;
        self.answered.clear();
        self.pending.clear();
        self.end = Some(end);
    }

    /// The deadline's error, placed at the earliest call still out in program order.
    fn deadline_error(&self, timeout: Duration) -> plan_vm::RunError {
        let head = self.pending.iter().min_by_key(|r| r.instance);
        plan_vm::RunError {
            code: ErrorCode::Deadline,
            message: format!("deadline of {} s exceeded", plan_llm::secs(timeout)),
            pc: head.map(|r| r.pc),
            seq_no: head.and_then(|r| r.seq_no),
            line: head.and_then(|r| self.vm.program().line_at(r.pc)),
        }
    }
}

#[pymethods]
impl Run {
    /// Runs until the plan needs answers; returns every call still waiting for one
    /// (empty once the run has ended). Raises `RunError` when the run fails.
    fn requests(&self, py: Python<'_>) -> PyResult<Vec<Request>> {
        let mut guard = self.lock(py);
        let inner = &mut *guard;
        match &inner.end {
            Some(End::Done(_)) => return Ok(Vec::new()),
            Some(End::Failed(e)) => return Err(run_error_of(e)),
            None => {}
        }
        let deadline = inner.deadline;
        let passed = |now: Instant| deadline.is_some_and(|(at, _)| now >= at);
        let halt = if passed(Instant::now()) {
            None
        } else {
            py.detach(|| {
                inner.vm.with(|vm| {
                    loop {
                        let halt = vm.run();
                        // A slice of a long computation ended: go on, unless it is late.
                        if matches!(&halt, Halt::Yield(r) if r.is_empty()) && vm.paused() {
                            if passed(Instant::now()) {
                                return None;
                            }
                            continue;
                        }
                        return Some(halt);
                    }
                })
            })
        };
        let halt = match (halt, deadline) {
            (Some(h), _) => h,
            (None, Some((_, timeout))) => Halt::Failed(inner.deadline_error(timeout)),
            (None, None) => unreachable!("only a deadline stops a run early"),
        };
        match halt {
            Halt::Yield(new) => inner.pending.extend(new),
            Halt::Done(o) => inner.end(End::Done(o)),
            Halt::Failed(e) => {
                let err = run_error_of(&e);
                inner.end(End::Failed(e));
                return Err(err);
            }
        }
        let program = inner.vm.program().clone();
        inner
            .pending
            .iter()
            .map(|r| Request::new(py, r, program.line_at(r.pc)))
            .collect()
    }

    /// Answers call `call_id` with a JSON-compatible `result`, or with an exception
    /// (the call failed; the run fails at that step when it gets there).
    fn resume(&self, py: Python<'_>, call_id: u64, result: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut inner = self.lock(py);
        let Some(at) = inner.pending.iter().position(|r| r.id.0 == call_id) else {
            return Err(PyValueError::new_err(format!(
                "no call {call_id} is waiting for an answer"
            )));
        };
        let what = format!("the result of tool `{}`", inner.pending[at].tool.as_str());
        let answer = if result.is_instance_of::<PyBaseException>() {
            Err(convert::describe_exception(result))
        } else {
            Ok(convert::from_py(result, &what)?)
        };
        let request = inner.pending.remove(at);
        inner
            .vm
            .with(|vm| vm.resume(CallId(call_id), answer))
            .map_err(|e| PyValueError::new_err(e.message))?;
        inner.answered.push(request);
        Ok(())
    }

    /// Whether the run has ended (answered or failed).
    #[getter]
    fn done(&self, py: Python<'_>) -> bool {
        self.lock(py).end.is_some()
    }

    /// The outcome once the run has answered, else `None`.
    #[getter]
    fn outcome(&self, py: Python<'_>) -> PyResult<Option<Outcome>> {
        let inner = self.lock(py);
        match &inner.end {
            Some(End::Done(o)) => Ok(Some(Outcome::new(
                py,
                &o.final_answer,
                o.vars.iter(),
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
        let inner = self.lock(py);
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
        let limits = crate::setup::limits(max_concurrency, max_steps)?;
        let vm = OwnedVm::from_state(plan.get().program.clone(), state, limits)
            .map_err(|e| run_error_of(&e))?;
        Ok(Run::new(vm, pending, None))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let inner = self.lock(py);
        match &inner.end {
            Some(End::Done(_)) => "<Run answered>".into(),
            Some(End::Failed(e)) => format!("<Run failed: {}>", e.code),
            None => format!("<Run waiting for {} calls>", inner.pending.len()),
        }
    }
}
