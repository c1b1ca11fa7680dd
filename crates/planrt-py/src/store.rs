//! `Store`: runs journaled in a store file, resumed after a crash or a failed tool
//! without making again the calls that completed, listed and shown. The engine is
//! `plan_runs`, as for `planvm --store`, `resume` and `runs`: a store either writes is
//! read by the other.

use std::path::PathBuf;

use plan_host::Tracer;
use plan_manifest::Manifest;
use plan_runs::open::Access;
use plan_runs::{LimitsOverride, Resume, StoreAt, read};
use plan_store::Durability;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::{StoreError, convert, tools};

/// A run store: an SQLite file, created when missing (the same file `planvm --store`
/// uses). Pass it to `Plan.run(store=...)` to journal a run; `resume` continues a run
/// that failed or was interrupted; `runs` and `run` read what is stored.
#[pyclass(frozen, module = "planrt")]
pub(crate) struct Store {
    at: StoreAt,
}

/// A `StoreError` with `.code`, the engine's stable name for what went wrong
/// (`unknown_run`, `busy`, `unknown_writes`, `damaged`, ...).
pub(crate) fn store_error(e: plan_runs::Error) -> PyErr {
    let err = StoreError::new_err(e.message);
    Python::attach(|py| {
        // NB: setting an attribute on a fresh exception cannot fail in practice.
        let _ = err.value(py).setattr("code", e.kind.code());
    });
    err
}

fn lease_warning(e: &plan_runs::Error) {
    // NB: from the lease's own thread, which holds no interpreter; the run goes on.
    eprintln!("planrt: warning: cannot renew a run's lease: {e}");
}

impl Store {
    pub(crate) fn at(&self) -> &StoreAt {
        &self.at
    }

    pub(crate) fn lease_warning() -> fn(&plan_runs::Error) {
        lease_warning
    }
}

#[pymethods]
impl Store {
    /// Opens the store at `path`, creating it when missing. `durability`: `"normal"`
    /// (each commit survives a crash of the process) or `"full"` (also a power loss;
    /// slower).
    #[new]
    #[pyo3(signature = (path, *, durability = "normal"))]
    fn new(py: Python<'_>, path: PathBuf, durability: &str) -> PyResult<Store> {
        let durability = match durability {
            "normal" => Durability::Normal,
            "full" => Durability::Full,
            other => {
                return Err(PyValueError::new_err(format!(
                    "durability must be \"normal\" or \"full\", not {other:?}"
                )));
            }
        };
        let at = StoreAt::new(path, durability);
        // NB: opened once now, so that a file that is not a store fails here.
        py.detach(|| at.open(Access::Create).map(drop))
            .map_err(store_error)?;
        Ok(Store { at })
    }

    /// The store's path (or PostgreSQL URL, as given).
    #[getter]
    fn path(&self) -> PathBuf {
        self.at.path().to_owned()
    }

    /// Every run, oldest first: dicts with `id`, `status` (`running`, `ok`, `failed`,
    /// `interrupted`), `plan`, `steps`, `tool_calls`, `parent` and `branch_seq` (for a
    /// branch), `created_at` and `updated_at` (Unix milliseconds), `final_answer`,
    /// `error`, `presets`, `limits`.
    fn runs(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        let runs = py
            .detach(|| {
                let store = self.at.open(Access::Read)?;
                read::list(&*store)
            })
            .map_err(store_error)?;
        runs.iter().map(|r| to_py(py, r)).collect()
    }

    /// Run `id` with its committed steps and its calls: a dict with `run` (as in `runs`),
    /// `steps` and `calls` (as `planvm runs show --format json` prints it).
    fn run(&self, py: Python<'_>, id: &str) -> PyResult<Py<PyAny>> {
        let shown = py
            .detach(|| {
                let store = self.at.open(Access::Read)?;
                read::show(&*store, id)
            })
            .map_err(store_error)?;
        to_py(py, &shown)
    }

    /// Cancels run `id`: one that has not finished ends as failed (`R0013`), and a
    /// process running it stops at its next commit point. `False`: it had finished, and
    /// is left as it was.
    fn cancel(&self, py: Python<'_>, id: &str) -> PyResult<bool> {
        py.detach(|| plan_runs::cancel(&self.at, id))
            .map_err(store_error)
    }

    /// Continues run `id` (one that failed or was interrupted) from its last commit
    /// point: a coroutine whose result is an `Outcome`, as `Plan.run`'s. Calls that
    /// completed are not made again; a `write` call that was in flight when the run
    /// stopped is sent again only with `retry_unknown_writes=True` (else `StoreError`
    /// with code `unknown_writes`). A run that had finished returns its stored outcome
    /// (its `variables` empty) and calls nothing. `tools` and `tools_file` as for
    /// `Plan.run`; the limits default to the run's own.
    #[pyo3(signature = (id, tools = None, *, tools_file = None, retry_unknown_writes = false,
                        max_concurrency = None, max_steps = None, timeout = None, input = None))]
    #[allow(clippy::too_many_arguments)]
    fn resume<'py>(
        slf: &Bound<'py, Self>,
        id: String,
        tools: Option<&Bound<'py, PyAny>>,
        tools_file: Option<PathBuf>,
        retry_unknown_writes: bool,
        max_concurrency: Option<u32>,
        max_steps: Option<u64>,
        timeout: Option<f64>,
        input: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let kwargs = PyDict::new(py);
        kwargs.set_item("id", id)?;
        kwargs.set_item("tools", tools)?;
        kwargs.set_item("tools_file", tools_file)?;
        kwargs.set_item("retry_unknown_writes", retry_unknown_writes)?;
        kwargs.set_item("max_concurrency", max_concurrency)?;
        kwargs.set_item("max_steps", max_steps)?;
        kwargs.set_item("timeout", timeout)?;
        kwargs.set_item("input", input)?;
        // NB: as `Plan.run`: the run starts when the coroutine is awaited, on its loop.
        py.import("planrt._drive")?
            .getattr("resume")?
            .call1((slf, kwargs))
    }

    /// `resume` for a caller already on a running loop: the future of the run.
    #[pyo3(signature = (id, tools = None, *, tools_file = None, retry_unknown_writes = false,
                        max_concurrency = None, max_steps = None, timeout = None, input = None))]
    #[allow(clippy::too_many_arguments)]
    fn _resume_now<'py>(
        &self,
        py: Python<'py>,
        id: String,
        tools: Option<&Bound<'py, PyAny>>,
        tools_file: Option<PathBuf>,
        retry_unknown_writes: bool,
        max_concurrency: Option<u32>,
        max_steps: Option<u64>,
        timeout: Option<f64>,
        input: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let locals = pyo3_async_runtimes::tokio::get_current_locals(py).map_err(|_| {
            PyRuntimeError::new_err("Store.resume() needs a running asyncio event loop: await it")
        })?;
        if max_concurrency == Some(0) {
            return Err(PyValueError::new_err("max_concurrency must be at least 1"));
        }
        let deadline = crate::setup::deadline(timeout)?;
        let limits = LimitsOverride {
            max_steps,
            max_concurrency,
            max_total_bytes: None,
        };
        // NB: the tools and the host first: a refusal there opens nothing of the store.
        let tools = tools::parse(tools, tools_file, &Manifest::builtin())?;
        let (host, raised) = crate::setup::host(py, &locals, tools, (deadline, None))?;
        let resumed = py
            .detach(|| {
                let request = plan_runs::ResumeRequest {
                    id: &id,
                    limits,
                    retry_unknown_writes,
                    input: input.as_deref(),
                };
                plan_runs::resume(&self.at, request)
            })
            .map_err(store_error)?;
        let ready = match resumed {
            Resume::Finished(report) => {
                let outcome = crate::outcome::outcome(*report, &Default::default(), Some(id));
                return crate::runtime::future_into_py(py, locals, async move { outcome });
            }
            Resume::Ready(ready) => ready,
        };
        let claimed = py
            .detach(|| ready.claim(lease_warning))
            .map_err(store_error)?;
        crate::runtime::future_into_py(py, locals, async move {
            let report = claimed.go(&host, &mut Tracer::none()).await;
            crate::outcome::outcome(report, &raised, Some(id))
        })
    }

    fn __repr__(&self) -> String {
        format!("<Store {}>", self.at.shown())
    }
}

fn to_py(py: Python<'_>, value: &impl serde::Serialize) -> PyResult<Py<PyAny>> {
    let value = serde_json::to_value(value)
        .map_err(|e| PyRuntimeError::new_err(format!("cannot convert a stored run: {e}")))?;
    Ok(convert::to_py(py, &value)?.unbind())
}
