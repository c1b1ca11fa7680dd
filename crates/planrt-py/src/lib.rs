//! `planrt` for Python: compile, check and run plans with Python tools, from asyncio or
//! plain code. The native module is `planrt._planrt`; `python/planrt/__init__.py`
//! re-exports it with the type stubs beside it.
//!
//! Layering: everything here is conversion. Compiling is `plan_compiler`, loading
//! `plan_compiler::load`, running `plan_host::run_plan` (the same host and VM as
//! `planvm`, so the same concurrency and determinism), stepping by hand `plan_vm::OwnedVm`,
//! runs in a store `plan_runs` (the engine of `planvm --store`, `resume` and `runs`).
//! The GIL is released while Rust compiles or runs; a tool's Python code takes it only for
//! its own call. Runs go on in this module's tokio runtime (`runtime`), shut down at
//! exit before the interpreter finalizes.

mod ask;
mod convert;
mod diagnostic;
mod outcome;
mod plan;
mod program;
mod run;
mod runtime;
mod setup;
mod store;
mod tools;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    planrt,
    PlanError,
    PyException,
    "A plan that does not compile or load. `.diagnostics` lists every problem."
);
create_exception!(
    planrt,
    StoreError,
    PyException,
    "A run store that cannot do what was asked: `.code` says why (`unknown_run`, `busy`, \
     `unknown_writes`, `damaged`, `not_a_store`, ...)."
);
create_exception!(
    planrt,
    RunError,
    PyException,
    "A run that failed. `.code` (R0005, ...), `.seq_no` and `.line` say where; a tool's own \
     exception is the `__cause__`."
);

#[pymodule]
fn _planrt(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("PlanError", py.get_type::<PlanError>())?;
    m.add("RunError", py.get_type::<RunError>())?;
    m.add("StoreError", py.get_type::<StoreError>())?;
    m.add_class::<diagnostic::Diagnostic>()?;
    m.add_class::<program::Plan>()?;
    m.add_class::<outcome::Outcome>()?;
    m.add_class::<run::Run>()?;
    m.add_class::<store::Store>()?;
    m.add_class::<run::Request>()?;
    m.add_class::<ask::Answer>()?;
    m.add_function(wrap_pyfunction!(ask::_ask_now, m)?)?;
    m.add_function(wrap_pyfunction!(plan::check, m)?)?;
    m.add_function(wrap_pyfunction!(plan::compile, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::_shutdown, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // NB: atexit hooks run before the interpreter finalizes, while threads may still
    // attach to it (`runtime` explains why the runtime must be gone by then).
    py.import("atexit")?
        .call_method1("register", (m.getattr("_shutdown")?,))?;
    Ok(())
}
