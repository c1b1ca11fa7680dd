//! A compiled plan as Python holds it: `Plan`'s data (its methods are in `plan.rs`).

use std::sync::Arc;

use plan_bytecode::ValidatedProgram;
use plan_manifest::Manifest;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::diagnostic::Diagnostic;

/// A compiled, verified plan. Immutable; any number of runs may use it at once.
#[pyclass(frozen, module = "planrt")]
pub(crate) struct Plan {
    pub(crate) program: Arc<ValidatedProgram>,
    pub(crate) source: Option<String>,
    /// The tools it was compiled against (`explain` compiles the source again).
    pub(crate) manifest: Manifest,
    pub(crate) warnings: Vec<Diagnostic>,
}

/// A plan pickled: what rebuilds it, and its `.pbc` bytes and source.
pub(crate) type Reduced<'py> = (Bound<'py, PyAny>, (Bound<'py, PyBytes>, Option<String>));
