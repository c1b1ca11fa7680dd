//! What a run from Python is given: its variables, limits, deadline, and the engine over
//! its tools.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use plan_host::{Host, HostOptions};
use plan_runs::engine::Engine;
use plan_runs::goal::Planning;
use plan_vm::{ErrorCode, Limits};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3_async_runtimes::TaskLocals;
use serde_json::Value;

use crate::convert;
use crate::tools::{self, PyTool, Raised};

/// What `run`, `run_sync` and `start` take besides the tools.
pub(crate) struct RunOptions {
    pub(crate) vars: Vec<(String, Value)>,
    pub(crate) limits: Limits,
    pub(crate) deadline: Option<Duration>,
}

pub(crate) fn run_options(
    vars: Option<&Bound<'_, PyDict>>,
    max_concurrency: u32,
    max_steps: Option<u64>,
    timeout: Option<f64>,
) -> PyResult<RunOptions> {
    Ok(RunOptions {
        vars: presets(vars)?,
        limits: limits(max_concurrency, max_steps)?,
        deadline: deadline(timeout)?,
    })
}

/// `vars=`: the variables a run starts with.
pub(crate) fn presets(vars: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<(String, Value)>> {
    let mut preset = Vec::new();
    for (k, v) in vars.into_iter().flat_map(|d| d.iter()) {
        let name: String = k.extract()?;
        let value = convert::from_py(&v, &format!("vars[{name:?}]"))?;
        preset.push((name, value));
    }
    Ok(preset)
}

/// The VM's limits from `max_concurrency=` and `max_steps=`.
pub(crate) fn limits(max_concurrency: u32, max_steps: Option<u64>) -> PyResult<Limits> {
    if max_concurrency == 0 {
        return Err(PyValueError::new_err("max_concurrency must be at least 1"));
    }
    let mut limits = Limits {
        max_concurrency,
        ..Limits::default()
    };
    if let Some(s) = max_steps {
        limits.max_steps = s;
    }
    Ok(limits)
}

/// `timeout` (seconds) as a duration: positive and finite, or a `ValueError`.
pub(crate) fn deadline(timeout: Option<f64>) -> PyResult<Option<Duration>> {
    let Some(t) = timeout else {
        return Ok(None);
    };
    match Duration::try_from_secs_f64(t) {
        Ok(d) if t > 0.0 => Ok(Some(d)),
        _ => Err(PyValueError::new_err(format!(
            "timeout must be a positive, finite number of seconds, not {t}"
        ))),
    }
}

/// The engine of a run or a goal from Python over `tools`, and its host: `tools`'
/// manifest and backends, its callables on the caller's loop (`locals`), a cassette
/// answering the calls when `replay` names one; the exceptions the callables raise are
/// kept in the last value. `planning`: what a planner of goals is given.
pub(crate) fn engine(
    py: Python<'_>,
    locals: &TaskLocals,
    (tools, planning): (tools::Tools, Planning),
    (deadline, replay): (Option<Duration>, Option<PathBuf>),
) -> PyResult<(Engine, Arc<Host>, Raised)> {
    let mcp = tools::mcp_servers(&tools.manifest);
    let options = HostOptions {
        deadline,
        replay,
        mcp,
        ..HostOptions::default()
    };
    let engine = Engine::new(tools.manifest, planning, options);
    let host = engine.host().map_err(|e| {
        crate::outcome::run_error(py, ErrorCode::NotStarted, &e.message, None, None)
    })?;
    crate::outcome::warn(py, host.warnings())?;
    let raised = Raised::default();
    for (name, func) in tools.callables {
        let tool = PyTool::new(py, func, locals.clone(), raised.clone())?;
        host.set_backend(&name, Arc::new(tool));
    }
    let host = host.clone();
    Ok((engine, host, raised))
}

/// The host of a run from Python (see [`engine`]).
pub(crate) fn host(
    py: Python<'_>,
    locals: &TaskLocals,
    tools: tools::Tools,
    times: (Option<Duration>, Option<PathBuf>),
) -> PyResult<(Arc<Host>, Raised)> {
    let (_, host, raised) = engine(py, locals, (tools, Planning::default()), times)?;
    Ok((host, raised))
}
