//! What the compiler found, as Python sees it: `Diagnostic`, and `PlanError` with them.

use plan_compiler::LoadError;
use plan_syntax::LineIndex;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::PlanError;

/// One finding of the compiler: `severity` ("error" or "warning"), a stable `code`
/// (`planc codes CODE` documents it), `message`, where (`seq_no`, 1-based `line` and
/// `column`) and what to do (`help`).
#[pyclass(frozen, get_all, module = "planrt")]
#[derive(Clone)]
pub(crate) struct Diagnostic {
    severity: String,
    code: String,
    message: String,
    seq_no: Option<i64>,
    line: Option<u32>,
    column: Option<u32>,
    help: Option<String>,
}

#[pymethods]
impl Diagnostic {
    fn __repr__(&self) -> String {
        let at = match (self.seq_no, self.line) {
            (Some(s), Some(l)) => format!(" (seq_no {s}, line {l})"),
            (None, Some(l)) => format!(" (line {l})"),
            (Some(s), None) => format!(" (seq_no {s})"),
            (None, None) => String::new(),
        };
        format!("<{}[{}]{at}: {}>", self.severity, self.code, self.message)
    }
}

impl Diagnostic {
    fn new(d: &plan_syntax::Diagnostic, index: &LineIndex) -> Diagnostic {
        let (line, column) = d.line_col(index).unzip();
        Diagnostic {
            severity: d.severity.as_str().to_owned(),
            code: d.code.to_owned(),
            message: d.message.clone(),
            seq_no: d.seq_no,
            line,
            column,
            help: d.help.clone(),
        }
    }
}

pub(crate) fn diagnostics(ds: &[plan_syntax::Diagnostic], index: &LineIndex) -> Vec<Diagnostic> {
    ds.iter().map(|d| Diagnostic::new(d, index)).collect()
}

/// A `PlanError` with `message` and `.diagnostics`.
pub(crate) fn plan_error(py: Python<'_>, message: String, diags: Vec<Diagnostic>) -> PyErr {
    let err = PlanError::new_err(message);
    let list = PyList::new(py, diags).map(Bound::into_any);
    if let Ok(list) = list {
        // NB: setting an attribute on a fresh exception cannot fail in practice; if it
        // did, the error would still say what is wrong.
        let _ = err.value(py).setattr("diagnostics", list);
    }
    err
}

pub(crate) fn load_error(py: Python<'_>, e: LoadError) -> PyErr {
    match &e {
        LoadError::Invalid {
            diagnostics: ds,
            line_index,
            ..
        } => {
            let all = diagnostics(ds, line_index);
            let mut message = format!("the plan has {e}");
            for d in all.iter().filter(|d| d.severity == "error").take(3) {
                let at = d
                    .seq_no
                    .map(|s| format!(" at seq_no {s}"))
                    .unwrap_or_default();
                message.push_str(&format!("\n  {}{at}: {}", d.code, d.message));
            }
            plan_error(py, message, all)
        }
        _ => plan_error(py, e.to_string(), Vec::new()),
    }
}
