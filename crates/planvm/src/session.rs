//! What every command that runs plans shares: refusing outputs onto inputs, the engine
//! over the tools file (`plan_runs::engine::Engine`), the trace, the live status line,
//! the runtime, one run from its session to its printed report (`run_one`), and the exit
//! code of each failure.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use plan_host::{Host, HostOptions, RunReport, Tracer};
use plan_render::{exit, runs};
use plan_runs::engine::{Engine, PlanningFiles, Refused};
use plan_runs::goal::Planning;
use plan_runs::load::{LoadError, Loaded};
use plan_telemetry::CommandTrace;

use crate::args::{Format, OutputArgs, Times};
use crate::progress;

/// What a command comes to: its exit code, or (`Err`) the code of what stopped it early,
/// said on stderr already; `?` passes the latter on.
pub(crate) type Exit = Result<u8, u8>;

/// Prints `error: ...` to stderr and returns `code`.
pub(crate) fn fail(code: u8, message: impl std::fmt::Display) -> u8 {
    eprintln!("error: {message}");
    code
}

/// The engine over the `--tools` file, for commands that run plans and ask no goal.
pub(crate) fn engine(tools: Option<&Path>, host: HostOptions) -> Result<Engine, u8> {
    let manifest = plan_runs::engine::load_tools(tools).map_err(failed)?;
    Ok(Engine::new(manifest, Planning::default(), host))
}

/// The engine over the `--tools` file with what its planner is given (`files`), the
/// examples skipped said on stderr.
pub(crate) fn planning_engine(files: PlanningFiles<'_>, host: HostOptions) -> Result<Engine, u8> {
    let engine = Engine::open(files, host).map_err(failed)?;
    for w in engine.planning().examples.skipped() {
        eprintln!("warning: {w}");
    }
    Ok(engine)
}

/// The engine's host, its warnings said on stderr (and in `tracer`, when given).
pub(crate) fn host(engine: &Engine, tracer: Option<&mut Tracer>) -> Result<Arc<Host>, u8> {
    let host = engine.host().map_err(failed)?;
    for w in host.warnings() {
        eprintln!("warning: {w}");
    }
    if let Some(tracer) = tracer {
        for w in host.warnings() {
            tracer.warning(w);
        }
    }
    Ok(host.clone())
}

/// How the host of a command that runs plans is set up: its cassettes and times.
pub(crate) fn host_options(
    replay: Option<PathBuf>,
    record: Option<PathBuf>,
    times: &Times,
) -> HostOptions {
    HostOptions {
        replay,
        record,
        tool_timeout: times.tool_timeout,
        deadline: times.deadline,
        ..HostOptions::default()
    }
}

/// Opens `--trace FILE` (or traces nothing).
fn open_trace(path: Option<&Path>) -> Result<Tracer, u8> {
    let Some(path) = path else {
        return Ok(Tracer::none());
    };
    let file = std::fs::File::create(path).map_err(|e| {
        let message = format_args!("cannot create trace file {}: {e}", path.display());
        fail(exit::CANT_CREATE, message)
    })?;
    Ok(Tracer::to_writer(Box::new(std::io::BufWriter::new(file))))
}

/// The live status line, for people watching a terminal.
fn status_line(format: Format, tracer: &mut Tracer) -> Option<progress::StatusLine> {
    let line = (format == Format::Text && std::io::stderr().is_terminal())
        .then(progress::StatusLine::new)?;
    let t = std::mem::take(tracer);
    *tracer = t.with_observer(line.observer());
    Some(line)
}

/// What every command that runs a plan sets up first: the trace (with the compiler's
/// warnings), the live status line, the host and the async runtime.
pub(crate) struct Session {
    pub(crate) tracer: Tracer,
    pub(crate) status_line: Option<progress::StatusLine>,
    pub(crate) host: Arc<Host>,
    pub(crate) runtime: tokio::runtime::Runtime,
}

/// Runs `fut` to its end on `runtime`, then shuts down the MCP servers `host` started
/// ([`Host::to_end`]); a Ctrl-C stops them and exits as interrupted.
pub(crate) fn block_on<T>(
    runtime: &tokio::runtime::Runtime,
    host: &Host,
    fut: impl std::future::Future<Output = T>,
) -> T {
    runtime.block_on(host.to_end(fut)).unwrap_or_else(|| {
        eprintln!("interrupted: the MCP servers were stopped");
        std::process::exit(130)
    })
}

/// Sets up a [`Session`] on `engine`'s host; `output` is where the trace goes and the
/// output format.
pub(crate) fn start_session(
    engine: &Engine,
    output: (Option<&Path>, Format),
    warnings: &[String],
) -> Result<Session, u8> {
    let mut tracer = open_trace(output.0)?;
    for w in warnings {
        tracer.warning(w);
    }
    let status_line = status_line(output.1, &mut tracer);
    let host = host(engine, Some(&mut tracer))?;
    let runtime = runtime()?;
    Ok(Session {
        tracer,
        status_line,
        host,
        runtime,
    })
}

/// What `run`, `resume` and `branch` share: a [`Session`] on `engine`'s host, `go` run
/// on it (traced when the environment asks: `command` over `plan`) to a report and its
/// stored run's id, the report printed and its exit code returned; `warnings` go into the
/// trace first.
pub(crate) fn run_one(
    engine: &Engine,
    (command, plan): (&str, Option<&str>),
    (output, warnings): (&OutputArgs, &[String]),
    go: impl AsyncFnOnce(&Host, &mut Tracer) -> Result<(RunReport, Option<String>), u8>,
) -> Exit {
    let Session {
        mut tracer,
        status_line,
        host,
        runtime,
    } = start_session(engine, (output.trace.as_deref(), output.format), warnings)?;
    let workflow = plan_telemetry::Workflow {
        command,
        plan,
        goal: None,
        run_id: None,
    };
    let telemetry = CommandTrace::from_env(&workflow, &host, &mut tracer, no_telemetry);
    tracer.restart_clock();
    let outcome = block_on(&runtime, &host, traced(&telemetry, go(&host, &mut tracer)));
    let (report, id) = match outcome {
        Ok(ran) => ran,
        Err(code) => {
            end_trace(
                telemetry,
                &plan_telemetry::Ended::nothing_ran("not_started", None),
            );
            return Err(code);
        }
    };
    end_trace(
        telemetry,
        &plan_telemetry::Ended::run(&report, id.as_deref()),
    );
    finish(report, (output.format, id.as_deref()), &tracer, status_line)
}

/// Says why the process's telemetry cannot be set up: a warning, never a failure.
pub(crate) fn no_telemetry(why: String) {
    eprintln!("warning: {why}");
}

/// Ends the command's trace as `ended` says, sending what is left.
pub(crate) fn end_trace(traced: Option<CommandTrace>, ended: &plan_telemetry::Ended<'_>) {
    if let Some(t) = traced {
        lost_spans(t.end(ended));
    }
}

/// Says how many spans did not reach the collector, if any did not.
pub(crate) fn lost_spans(lost: u64) {
    if lost > 0 {
        eprintln!("warning: {lost} spans did not reach the OpenTelemetry collector");
    }
}

/// `fut`, its requests to tools and LLMs carrying the command's trace (`traceparent`),
/// when there is one.
pub(crate) async fn traced<F: std::future::Future>(
    traced: &Option<CommandTrace>,
    fut: F,
) -> F::Output {
    plan_telemetry::within(traced.as_ref().map(|t| &t.trace), fut).await
}

fn runtime() -> Result<tokio::runtime::Runtime, u8> {
    build(tokio::runtime::Builder::new_current_thread())
}

/// A runtime with a worker per core, for commands that run many things at once (`batch`,
/// `serve`).
pub(crate) fn multi_thread_runtime() -> Result<tokio::runtime::Runtime, u8> {
    build(tokio::runtime::Builder::new_multi_thread())
}

fn build(mut builder: tokio::runtime::Builder) -> Result<tokio::runtime::Runtime, u8> {
    builder.enable_all().build().map_err(|e| {
        fail(
            exit::RUN_FAILED,
            format_args!("cannot start the async runtime: {e}"),
        )
    })
}

/// A plan file loaded (its diagnostics printed on stderr), or the exit code of why not:
/// an unreadable file (66), or a plan with errors (65).
pub(crate) fn loaded(result: Result<Loaded, LoadError>) -> Result<Loaded, u8> {
    let loaded = result.map_err(bad_plan)?;
    found(&loaded);
    Ok(loaded)
}

/// Prints what the compiler found in a plan it loaded (its warnings) on stderr.
pub(crate) fn found(loaded: &Loaded) {
    eprint!("{}", runs::found(&loaded.found, loaded.source.as_deref()));
}

/// Reports why a plan was not loaded and returns the exit code: an unreadable file (66),
/// or a plan with errors (65, its diagnostics printed).
pub(crate) fn bad_plan(e: LoadError) -> u8 {
    match e {
        LoadError::Unreadable(msg) => fail(exit::NO_INPUT, msg),
        LoadError::Invalid(inv) => {
            eprint!("{}", runs::found(&inv.found, inv.source.as_deref()));
            fail(exit::DATA_ERR, inv.message)
        }
    }
}

/// Reports why plans were not submitted or a branch not made, and returns the exit code.
pub(crate) fn refused(r: Refused) -> u8 {
    match r {
        Refused::Plan(e) => bad_plan(e),
        Refused::Engine(e) => failed(e),
    }
}

/// Prints the report of run `run_id` (None: not stored) and returns the exit code.
pub(crate) fn finish(
    report: RunReport,
    (format, run_id): (Format, Option<&str>),
    tracer: &Tracer,
    status_line: Option<progress::StatusLine>,
) -> Exit {
    if let Some(line) = status_line {
        line.finish();
    }
    if let Some(e) = tracer.write_error() {
        eprintln!("warning: writing the trace failed: {e}");
    }
    print(runs::report(&report, format.is_json(), run_id));
    Ok(exit::of_run(report.status))
}

/// Writes what a command prints: stdout, then stderr.
pub(crate) fn print(printed: runs::Printed) {
    // NB: a closed stdout (`planvm run ... | head -0`) is not the command's failure: the
    // exit code still reports what it did.
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(printed.out.as_bytes());
    let _ = out.flush();
    eprint!("{}", printed.err);
}

/// Reports `e` and returns its exit code.
pub(crate) fn failed(e: impl Into<plan_runs::Error>) -> u8 {
    let e = e.into();
    fail(exit::of_engine(e.kind), e)
}

/// What a run's lease that cannot be renewed prints (see [`plan_runs::Lease::start`]).
pub(crate) fn lease_warning(e: &plan_runs::Error) {
    eprintln!("warning: cannot renew the run's lease: {e}");
}
