//! Python callables as tools: the `tools=` argument, and the backend that calls them.
//!
//! An `async def` tool is called on the caller's event loop; a plain function runs in the
//! loop's default executor (a thread pool), so a slow one never blocks the loop. Calls
//! start on the loop's own thread (asyncio is not thread-safe) and are cancelled there
//! when the run stops waiting for them. Either
//! receives the call's parameters as keyword arguments and returns a JSON-compatible
//! value. Calls of one run overlap exactly as in `planvm` (the same VM and host): the
//! host issues every ready call at once and commits results in program order.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use plan_host::{Backend, ToolError, ToolErrorKind};
use plan_manifest::{Effects, Manifest, ToolSpec};
use plan_vm::ToolRequest;
use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyCFunction, PyDict, PyString};
use pyo3_async_runtimes::TaskLocals;
use serde_json::Value;

use crate::convert;

/// What `tools=` (and `tools_file=`) gave: the tools a plan may call, and the Python
/// callables that serve some of them.
pub(crate) struct Tools {
    pub(crate) manifest: Manifest,
    /// The tools file the manifest was read from, if any.
    pub(crate) file: Option<PathBuf>,
    pub(crate) callables: Vec<(String, Py<PyAny>)>,
}

/// `tools`: `None` (the tools of `base`), a path to a tools file, or a dict of name →
/// callable; `tools_file`: a tools file whose backends serve the tools the dict does not
/// name (else `base` does). A callable for a tool the manifest does not declare declares
/// it, with any parameters and `read` effects.
pub(crate) fn parse(
    tools: Option<&Bound<'_, PyAny>>,
    tools_file: Option<PathBuf>,
    base: &Manifest,
) -> PyResult<Tools> {
    let mut file = tools_file;
    let mut callables = Vec::new();
    if let Some(t) = tools.filter(|t| !t.is_none()) {
        if let Ok(d) = t.cast::<PyDict>() {
            for (k, v) in d.iter() {
                let Ok(name) = k.cast::<PyString>() else {
                    return Err(PyTypeError::new_err(
                        "tools: every key must be a tool name (str)",
                    ));
                };
                let name: String = name.extract()?;
                if !v.is_callable() {
                    return Err(PyTypeError::new_err(format!(
                        "tools[{name:?}] is not callable: pass a function or an `async def`"
                    )));
                }
                callables.push((name, v.unbind()));
            }
        } else if let Ok(path) = t.extract::<PathBuf>() {
            if file.is_some() {
                return Err(PyTypeError::new_err(
                    "tools is a tools file and tools_file is given too: pass the file once",
                ));
            }
            file = Some(path);
        } else {
            return Err(PyTypeError::new_err(
                "tools must be a dict of name -> callable, or the path of a tools file",
            ));
        }
    }
    let mut manifest = match &file {
        Some(path) => plan_mcp::load(path, plan_host::process_env(), plan_mcp::Listing::Cached)
            .map_err(|e| Python::attach(|py| crate::diagnostic::plan_error(py, e, Vec::new())))?,
        None => base.clone(),
    };
    for (name, _) in &callables {
        if manifest.get(name).is_none() {
            manifest.tools.push(ToolSpec {
                retrieval: false,
                name: name.clone(),
                description: String::new(),
                params: Vec::new(),
                effects: Effects::Read,
                backend: None,
            });
        }
    }
    Ok(Tools {
        manifest,
        file,
        callables,
    })
}

/// The exceptions tools raised in one run, by `seq_no` (the first for each), so the
/// run's error can carry the one that failed it as `__cause__`.
pub(crate) type Raised = Arc<Mutex<HashMap<Option<i64>, PyErr>>>;

/// Serves one tool with a Python callable.
pub(crate) struct PyTool {
    func: Py<PyAny>,
    is_async: bool,
    locals: TaskLocals,
    raised: Raised,
    /// `planrt._drive._call` and `asyncio.run_coroutine_threadsafe`, looked up once.
    call: Py<PyAny>,
    submit: Py<PyAny>,
}

impl PyTool {
    pub(crate) fn new(
        py: Python<'_>,
        func: Py<PyAny>,
        locals: TaskLocals,
        raised: Raised,
    ) -> PyResult<PyTool> {
        let inspect = py.import("inspect")?;
        let is_async = inspect
            .call_method1("iscoroutinefunction", (func.bind(py),))?
            .is_truthy()?;
        Ok(PyTool {
            func,
            is_async,
            locals,
            raised,
            call: py.import("planrt._drive")?.getattr("_call")?.unbind(),
            submit: py
                .import("asyncio")?
                .getattr("run_coroutine_threadsafe")?
                .unbind(),
        })
    }

    fn failed(&self, req: &ToolRequest, e: PyErr) -> ToolError {
        let message = Python::attach(|py| convert::describe_exception(e.value(py)));
        if let Ok(mut raised) = self.raised.lock() {
            raised.entry(req.seq_no).or_insert(e);
        }
        ToolError::new(ToolErrorKind::Transport, message)
    }
}

/// Cancels the call's task on the loop when the host stops waiting for it (the run
/// failed, its deadline passed, or a call issued ahead is no longer needed).
struct CancelOnDrop(Option<Py<PyAny>>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(fut) = self.0.take() {
            // NB: `concurrent.futures.Future.cancel` is thread-safe and cancels the task
            // on the loop; on a finished call it does nothing.
            Python::attach(|py| {
                let _ = fut.bind(py).call_method0("cancel");
            });
        }
    }
}

impl Backend for PyTool {
    fn call<'a>(&'a self, req: &'a ToolRequest) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let (tx, rx) = tokio::sync::oneshot::channel::<PyResult<Py<PyAny>>>();
            // The call runs on the loop's thread (`_drive._call`: the coroutine, or the
            // plain function in the loop's thread pool); its end comes back here through
            // a done-callback.
            let started = Python::attach(|py| -> PyResult<Py<PyAny>> {
                let kwargs = convert::dict(py, req.args.iter())?;
                let coroutine =
                    self.call
                        .bind(py)
                        .call1((self.func.bind(py), kwargs, self.is_async))?;
                let fut = self
                    .submit
                    .bind(py)
                    .call1((coroutine, self.locals.event_loop(py)))?;
                let tx = std::sync::Mutex::new(Some(tx));
                let done = PyCFunction::new_closure(py, None, None, move |args, _| {
                    let fut = args.get_item(0)?;
                    let result = match fut.call_method0("result") {
                        Ok(v) => Ok(v.unbind()),
                        Err(e) => Err(e),
                    };
                    if let Some(tx) = tx.lock().ok().and_then(|mut t| t.take()) {
                        let _ = tx.send(result);
                    }
                    Ok::<(), PyErr>(())
                })?;
                fut.call_method1("add_done_callback", (done,))?;
                Ok(fut.unbind())
            });
            let result = match started {
                Ok(fut) => {
                    let mut guard = CancelOnDrop(Some(fut));
                    let result = rx.await.unwrap_or_else(|_| {
                        Err(PyRuntimeError::new_err("the tool's call was dropped"))
                    });
                    guard.0 = None;
                    result
                }
                Err(e) => Err(e),
            };
            let what = format!("the result of tool `{}`", req.tool.as_str());
            result
                .and_then(|obj| Python::attach(|py| convert::from_py(obj.bind(py), &what)))
                .map_err(|e| self.failed(req, e))
        })
    }

    fn describe(&self) -> String {
        "python".into()
    }
}

/// The MCP clients of `manifest`'s servers: one set per process for each set of `[[mcp]]`
/// tables, so that a Python program's runs share the server processes (each started at
/// first use; at exit their input closes, and they end).
pub(crate) fn mcp_servers(manifest: &Manifest) -> Option<Arc<plan_mcp::Servers>> {
    static SHARED: Mutex<Vec<Arc<plan_mcp::Servers>>> = Mutex::new(Vec::new());
    if manifest.mcp.is_empty() {
        return None;
    }
    let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(s) = shared.iter().find(|s| s.serves(&manifest.mcp)) {
        return Some(s.clone());
    }
    let servers = Arc::new(plan_mcp::Servers::new(
        &manifest.mcp,
        plan_host::process_env(),
        Arc::new(plan_host::Redactor::new()),
    ));
    shared.push(servers.clone());
    Some(servers)
}
