//! The tokio runtime runs go on, and the bridge from a run's future to the asyncio future
//! its caller awaits.
//!
//! NB: the runtime is this crate's own, not pyo3-async-runtimes' (a static that lives
//! until the process ends): its threads attach to the interpreter, to deliver a result,
//! to call a tool or to cancel a call, and a thread that attaches once the interpreter
//! has begun finalizing is ended inside the attach (a fatal error or a crash at exit).
//! The delivery of a result races with the caller, which may go on to exit as soon as
//! the result is on its loop. So an `atexit` hook ([`_shutdown`]), registered when the
//! module is imported, shuts the runtime down before the interpreter finalizes: a run
//! still going is dropped (a stored one is released, and reads as interrupted), and
//! every thread of the runtime has ended, with the interpreter released meanwhile so
//! that those attached can finish.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Mutex;
use std::time::Duration;

use futures::FutureExt;
use pyo3::IntoPyObjectExt;
use pyo3::exceptions::{PyRuntimeError, PySystemError};
use pyo3::prelude::*;
use pyo3::types::{PyCFunction, PyTuple};
use pyo3_async_runtimes::TaskLocals;
use tokio::runtime::{Handle, Runtime};
use tokio::sync::oneshot;

/// How long exiting waits for the runtime's threads: those attached finish their Python
/// call, a dropped run releases its store. Past this, a thread stuck outside Python (a
/// blocking call of a tool's backend) is left behind.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

enum State {
    /// Built at the first run.
    Unstarted,
    /// The runtime, and the process that started it.
    Running(Runtime, u32),
    /// The interpreter is exiting.
    Closed,
}

static STATE: Mutex<State> = Mutex::new(State::Unstarted);

fn handle() -> PyResult<Handle> {
    let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
    if let State::Unstarted = *state {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("planrt")
            .build()
            .map_err(|e| PySystemError::new_err(format!("cannot start the runtime: {e}")))?;
        *state = State::Running(runtime, std::process::id());
    }
    match &*state {
        State::Running(runtime, _) => Ok(runtime.handle().clone()),
        _ => Err(PyRuntimeError::new_err(
            "planrt has shut down: the interpreter is exiting",
        )),
    }
}

/// Shuts the runtime down (the `atexit` hook): every run still going is dropped, and
/// every thread of the runtime has ended when it returns (within [`SHUTDOWN_GRACE`]).
/// Runs started afterwards raise `RuntimeError`.
#[pyfunction]
pub(crate) fn _shutdown(py: Python<'_>) {
    let runtime = {
        let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
        match std::mem::replace(&mut *state, State::Closed) {
            State::Running(runtime, pid) if pid == std::process::id() => runtime,
            // NB: a forked child has none of the runtime's threads, and would wait for
            // them in vain.
            State::Running(runtime, _) => return std::mem::forget(runtime),
            State::Unstarted | State::Closed => return,
        }
    };
    // NB: detached: a thread of the runtime waiting to attach (to deliver a result, or
    // cancel a call of a dropped run) must get the interpreter to end.
    py.detach(|| runtime.shutdown_timeout(SHUTDOWN_GRACE));
}

/// `fut` as an asyncio future on `locals`' loop: it runs on the runtime at once, and its
/// result (or exception) is set on the loop; cancelling the asyncio future drops `fut`.
pub(crate) fn future_into_py<'py, F, T>(
    py: Python<'py>,
    locals: TaskLocals,
    fut: F,
) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = PyResult<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let runtime = handle()?;
    let event_loop = locals.event_loop(py);
    let target = event_loop.call_method0("create_future")?;
    let (cancel, cancelled) = oneshot::channel::<()>();
    let cancel = Mutex::new(Some(cancel));
    let on_done = PyCFunction::new_closure(py, None, None, move |args: &Bound<'_, PyTuple>, _| {
        if args.get_item(0)?.call_method0("cancelled")?.is_truthy()?
            && let Some(cancel) = cancel.lock().ok().and_then(|mut c| c.take())
        {
            let _ = cancel.send(());
        }
        Ok::<(), PyErr>(())
    })?;
    target.call_method1("add_done_callback", (on_done,))?;
    let settle = py.import("planrt._drive")?.getattr("_settle")?.unbind();
    let (to, on) = (target.clone().unbind(), event_loop.unbind());
    let blocking = runtime.clone();
    runtime.spawn(async move {
        let run = pyo3_async_runtimes::tokio::scope(locals, AssertUnwindSafe(fut).catch_unwind());
        let result = tokio::select! {
            r = run => r,
            // NB: cancelled: the run is dropped here, on the runtime's thread (dropping
            // a tool's call attaches, to cancel it on the loop).
            Ok(()) = cancelled => return,
        };
        // NB: from a blocking thread: a worker holding the interpreter would stall the
        // other runs' tasks while it waits for it.
        blocking.spawn_blocking(move || {
            Python::attach(|py| {
                let (value, failed) = match result {
                    Ok(Ok(v)) => match v.into_py_any(py) {
                        Ok(v) => (v, false),
                        Err(e) => (e.into_value(py).into_any(), true),
                    },
                    Ok(Err(e)) => (e.into_value(py).into_any(), true),
                    Err(panic) => {
                        let e = pyo3::panic::PanicException::new_err(panic_message(&*panic));
                        (e.into_value(py).into_any(), true)
                    }
                };
                // NB: a loop already closed has no one left to tell.
                let _ = on.bind(py).call_method1(
                    "call_soon_threadsafe",
                    (settle.bind(py), to.bind(py), value, failed),
                );
            });
        });
    });
    Ok(target)
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let why = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("unknown error");
    format!("rust future panicked: {why}")
}
