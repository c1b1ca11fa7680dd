//! `check`, `compile`, and `Plan`'s methods: load, save, explain, run.

use std::path::PathBuf;
use std::sync::Arc;

use plan_compiler::CompileOptions;
use plan_host::Tracer;
use plan_manifest::Manifest;
use plan_runs::engine::StartRequest;
use plan_vm::OwnedVm;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use pyo3_async_runtimes::TaskLocals;

use crate::diagnostic::{Diagnostic, diagnostics, load_error, plan_error};
use crate::outcome::outcome;
use crate::program::{Plan, Reduced};
use crate::run::Run;
use crate::setup::{RunOptions, host, run_options};
use crate::store::Store;
use crate::tools::{self};

fn options(manifest: Manifest, strict: bool, presets: Vec<String>) -> CompileOptions {
    CompileOptions {
        manifest,
        strict,
        source_name: Some("<plan>".into()),
        presets,
        ..CompileOptions::default()
    }
}

/// `vars=` of `check` and `compile`: the variables runs will preset (a dict's keys, or
/// names), counted as set by the verifier (no W0201 "never assigned" for them).
fn preset_names(vars: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
    let Some(vars) = vars.filter(|v| !v.is_none()) else {
        return Ok(Vec::new());
    };
    if let Ok(d) = vars.cast::<PyDict>() {
        return d.keys().iter().map(|k| k.extract::<String>()).collect();
    }
    vars.try_iter()?.map(|k| k?.extract::<String>()).collect()
}

/// Every diagnostic of `text` (errors and warnings), without building anything. `vars`:
/// the variables its runs will preset (names, or a dict), counted as set.
#[pyfunction]
#[pyo3(signature = (text, tools = None, *, tools_file = None, strict = false, vars = None))]
pub(crate) fn check(
    py: Python<'_>,
    text: String,
    tools: Option<&Bound<'_, PyAny>>,
    tools_file: Option<PathBuf>,
    strict: bool,
    vars: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<Diagnostic>> {
    let tools = tools::parse(tools, tools_file, &Manifest::builtin())?;
    let opts = options(tools.manifest, strict, preset_names(vars)?);
    Ok(py.detach(|| {
        let c = plan_compiler::compile(&text, &opts);
        diagnostics(&c.diagnostics, &c.line_index)
    }))
}

/// `text` compiled and verified, or `PlanError` with every diagnostic. `vars`: the
/// variables its runs will preset (names, or a dict), counted as set.
#[pyfunction]
#[pyo3(signature = (text, tools = None, *, tools_file = None, strict = false, vars = None))]
pub(crate) fn compile(
    py: Python<'_>,
    text: String,
    tools: Option<&Bound<'_, PyAny>>,
    tools_file: Option<PathBuf>,
    strict: bool,
    vars: Option<&Bound<'_, PyAny>>,
) -> PyResult<Plan> {
    let tools = tools::parse(tools, tools_file, &Manifest::builtin())?;
    let opts = options(tools.manifest.clone(), strict, preset_names(vars)?);
    let loaded = py.detach(|| plan_compiler::load(text.into_bytes(), &opts));
    match loaded {
        Ok(l) => Ok(Plan {
            program: Arc::new(l.program),
            source: l.source,
            manifest: tools.manifest,
            warnings: diagnostics(&l.diagnostics, &l.line_index),
        }),
        Err(e) => Err(load_error(py, e)),
    }
}

#[pymethods]
impl Plan {
    /// A plan from `.pbc` bytes (as `to_pbc` or `planc compile` wrote them).
    #[staticmethod]
    fn from_pbc(py: Python<'_>, data: Vec<u8>) -> PyResult<Plan> {
        if !plan_bytecode::is_pbc(&data) {
            return Err(plan_error(
                py,
                "not .pbc bytecode (no magic bytes): use planrt.compile for plan text".into(),
                Vec::new(),
            ));
        }
        let loaded = py.detach(|| plan_compiler::load(data, &CompileOptions::default()));
        match loaded {
            Ok(l) => Ok(Plan {
                program: Arc::new(l.program),
                source: None,
                manifest: Manifest::builtin(),
                warnings: Vec::new(),
            }),
            Err(e) => Err(load_error(py, e)),
        }
    }

    /// Pickled as its `.pbc` bytes (and its source text, if any): it crosses process
    /// boundaries (multiprocessing, Ray) as plain bytes, verified again when loaded.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Reduced<'py>> {
        let py = slf.py();
        let restore = py.get_type::<Plan>().getattr("_restore")?;
        let plan = slf.get();
        Ok((restore, (plan.to_pbc(py, false), plan.source.clone())))
    }

    /// A plan unpickled (see `__reduce__`).
    #[staticmethod]
    fn _restore(py: Python<'_>, data: Vec<u8>, source: Option<String>) -> PyResult<Plan> {
        let mut plan = Plan::from_pbc(py, data)?;
        plan.source = source;
        Ok(plan)
    }

    /// The `.pbc` bytes; `strip` leaves out the debug section (seq_no and line of each
    /// instruction, reasoning text).
    #[pyo3(signature = (strip = false))]
    fn to_pbc<'py>(&self, py: Python<'py>, strip: bool) -> Bound<'py, PyBytes> {
        let bytes = if strip {
            let mut p = self.program.program().clone();
            p.debug = None;
            plan_bytecode::encode(&p)
        } else {
            plan_bytecode::encode(self.program.program())
        };
        PyBytes::new(py, &bytes)
    }

    /// The plan's source text (`None` for a plan loaded from `.pbc`).
    #[getter]
    fn source(&self) -> Option<&str> {
        self.source.as_deref()
    }

    /// The compiler's warnings.
    #[getter]
    fn warnings(&self) -> Vec<Diagnostic> {
        self.warnings.clone()
    }

    /// The tools the plan calls.
    #[getter]
    fn tools(&self) -> Vec<String> {
        self.program.tools.iter().map(|t| t.name.clone()).collect()
    }

    /// Whether the plan may stop at a question to a person (it calls `ask_user`, or
    /// another tool with effects `human`).
    #[getter]
    fn asks_user(&self) -> bool {
        self.program
            .tools
            .iter()
            .any(|t| t.effects == plan_bytecode::Effects::Human)
    }

    /// What a run must be able to call: the plan's tools, and `jmp_condition` when it has
    /// conditions.
    #[getter]
    fn needs(&self) -> Vec<String> {
        let mut needs = self.tools();
        if !self.program.conds.is_empty() {
            needs.push(plan_host::CONDITION_TOOL.to_owned());
        }
        needs
    }

    /// The bytecode listing, as `planc disasm` prints it.
    fn disasm(&self) -> String {
        plan_bytecode::disasm(self.program.program())
    }

    /// The dataflow, as `planc explain` shows it: one dict per instruction with `seq_no`,
    /// `kind`, `title`, `depends_on` (seq_nos whose outputs it reads), `reads`, `writes`.
    fn explain(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        let Some(src) = &self.source else {
            return Err(PyValueError::new_err(
                "explain needs the plan's source; this plan was loaded from .pbc",
            ));
        };
        let opts = options(self.manifest.clone(), false, Vec::new());
        let steps = py
            .detach(|| plan_compiler::explain(src, &opts))
            .map_err(|_| PyRuntimeError::new_err("the plan no longer compiles"))?;
        steps
            .into_iter()
            .map(|s| {
                let d = PyDict::new(py);
                d.set_item("seq_no", s.seq_no)?;
                d.set_item("kind", s.kind)?;
                d.set_item("title", s.title)?;
                d.set_item("depends_on", s.depends_on)?;
                d.set_item("reads", s.reads)?;
                d.set_item("writes", s.writes)?;
                Ok(d.into_any().unbind())
            })
            .collect()
    }

    /// Runs the plan: a coroutine whose result is an `Outcome` (so `asyncio.run(plan.run(
    /// ...))` works as well as `await`). `tools` maps tool names to callables (`async
    /// def` or plain functions, which run in the loop's thread pool); tools it does not
    /// name are served by the backends of `tools_file`. A failed run raises `RunError`.
    #[pyo3(signature = (tools = None, *, vars = None, max_concurrency = 16, max_steps = None,
                        timeout = None, tools_file = None, store = None, run_id = None))]
    #[allow(clippy::too_many_arguments)]
    fn run<'py>(
        slf: &Bound<'py, Self>,
        tools: Option<&Bound<'py, PyAny>>,
        vars: Option<&Bound<'py, PyDict>>,
        max_concurrency: u32,
        max_steps: Option<u64>,
        timeout: Option<f64>,
        tools_file: Option<PathBuf>,
        store: Option<Py<Store>>,
        run_id: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let kwargs = PyDict::new(py);
        kwargs.set_item("tools", tools)?;
        kwargs.set_item("vars", vars)?;
        kwargs.set_item("max_concurrency", max_concurrency)?;
        kwargs.set_item("max_steps", max_steps)?;
        kwargs.set_item("timeout", timeout)?;
        kwargs.set_item("tools_file", tools_file)?;
        kwargs.set_item("store", store)?;
        kwargs.set_item("run_id", run_id)?;
        // NB: the run starts when the coroutine is awaited, on the loop that awaits it:
        // a plain `plan.run(...)` call may come before any loop runs. `_drive.run`
        // chooses the path (python/planrt/_drive.py).
        py.import("planrt._drive")?
            .getattr("run")?
            .call1((slf, kwargs))
    }

    /// `run` for a caller already on a running loop: the future of the run, started now.
    #[pyo3(signature = (tools = None, *, vars = None, max_concurrency = 16, max_steps = None,
                        timeout = None, tools_file = None, store = None, run_id = None))]
    #[allow(clippy::too_many_arguments)]
    fn _run_now<'py>(
        &self,
        py: Python<'py>,
        tools: Option<&Bound<'py, PyAny>>,
        vars: Option<&Bound<'py, PyDict>>,
        max_concurrency: u32,
        max_steps: Option<u64>,
        timeout: Option<f64>,
        tools_file: Option<PathBuf>,
        store: Option<Py<Store>>,
        run_id: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let locals = pyo3_async_runtimes::tokio::get_current_locals(py).map_err(|_| {
            PyRuntimeError::new_err(
                "Plan.run() needs a running asyncio event loop: await it in async code, or call run_sync()",
            )
        })?;
        let opts = run_options(vars, max_concurrency, max_steps, timeout)?;
        if store.is_none() && run_id.is_some() {
            return Err(PyValueError::new_err(
                "run_id= names a stored run: pass store= too",
            ));
        }
        let store = store.map(|s| (s, run_id.unwrap_or_else(plan_store::new_run_id)));
        self.run_on(py, locals, tools, tools_file, opts, store)
    }

    /// `run` for code without an event loop: runs one of its own until the plan ends.
    #[pyo3(signature = (tools = None, *, vars = None, max_concurrency = 16, max_steps = None,
                        timeout = None, tools_file = None, store = None, run_id = None))]
    #[allow(clippy::too_many_arguments)]
    fn run_sync<'py>(
        slf: &Bound<'py, Self>,
        tools: Option<&Bound<'py, PyAny>>,
        vars: Option<&Bound<'py, PyDict>>,
        max_concurrency: u32,
        max_steps: Option<u64>,
        timeout: Option<f64>,
        tools_file: Option<PathBuf>,
        store: Option<Py<Store>>,
        run_id: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let asyncio = py.import("asyncio")?;
        if !asyncio.call_method0("_get_running_loop")?.is_none() {
            return Err(PyRuntimeError::new_err(
                "run_sync() cannot block a running event loop: use `await plan.run(...)`",
            ));
        }
        let coroutine = Plan::run(
            slf,
            tools,
            vars,
            max_concurrency,
            max_steps,
            timeout,
            tools_file,
            store,
            run_id,
        )?;
        // NB: `asyncio.run` also cancels what is left on the loop and ends the thread pool
        // of plain tools before closing it.
        Ok(asyncio.call_method1("run", (coroutine,))?.unbind())
    }

    /// A run to drive by hand: `requests()`, `resume(id, result)`, `state()`.
    #[pyo3(signature = (*, vars = None, max_concurrency = 16, max_steps = None, timeout = None))]
    fn start(
        &self,
        vars: Option<&Bound<'_, PyDict>>,
        max_concurrency: u32,
        max_steps: Option<u64>,
        timeout: Option<f64>,
    ) -> PyResult<Run> {
        let opts = run_options(vars, max_concurrency, max_steps, timeout)?;
        let mut vm = OwnedVm::new(self.program.clone(), opts.limits);
        for (name, value) in opts.vars {
            vm.with(|vm| vm.set_var(&name, value))
                .map_err(|e| crate::outcome::run_error_of(&e))?;
        }
        Ok(Run::new(vm, Vec::new(), opts.deadline))
    }

    fn __repr__(&self) -> String {
        format!(
            "<Plan: {} instructions, tools {:?}>",
            self.program.code.len(),
            self.tools()
        )
    }
}

impl Plan {
    fn run_on<'py>(
        &self,
        py: Python<'py>,
        locals: TaskLocals,
        tools: Option<&Bound<'py, PyAny>>,
        tools_file: Option<PathBuf>,
        opts: RunOptions,
        store: Option<(Py<Store>, String)>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // NB: the tools the plan was compiled against, unless another file is named.
        let tools = tools::parse(tools, tools_file, &self.manifest)?;
        let (host, raised) = host(py, &locals, tools, (opts.deadline, None))?;
        let program = self.program.clone();
        let RunOptions { vars, limits, .. } = opts;
        let Some((store, id)) = store else {
            return crate::runtime::future_into_py(py, locals, async move {
                let report =
                    plan_host::run_plan(&host, &program, vars, limits, &mut Tracer::none()).await;
                outcome(report, &raised, None)
            });
        };
        let request = StartRequest {
            id: Some(id),
            name: "<python>",
            source: self.source.as_deref(),
            program: &program,
            vars,
            limits,
        };
        let store = store.get();
        let created = py
            .detach(|| plan_runs::engine::create(store.at(), request, Store::lease_warning()))
            .map_err(crate::store::store_error)?;
        crate::runtime::future_into_py(py, locals, async move {
            let id = created.id().to_owned();
            let report = created.run(&host, &program, &mut Tracer::none()).await;
            outcome(report, &raised, Some(id))
        })
    }
}
