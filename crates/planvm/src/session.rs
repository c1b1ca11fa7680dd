//! What every command that runs plans shares: refusing outputs onto inputs, the tools
//! file, the trace, the live status line, the host and runtime, printing a report, and
//! the exit code of each failure.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use plan_host::{
    Host, HostErrorKind, HostOptions, Question, RunReport, RunStatus, Tracer, process_env,
};
use plan_manifest::Manifest;
use plan_mcp::Listing;
use plan_render::exit;
use plan_runs::ErrorKind;
use plan_telemetry::CommandTrace;
use serde_json::Value;

use crate::args::{Format, Times};
use crate::progress;

/// Prints `error: ...` to stderr and returns `code`.
pub(crate) fn fail(code: u8, message: impl std::fmt::Display) -> u8 {
    eprintln!("error: {message}");
    code
}

/// Refuses (exit 64) `outputs` that are one of a run's inputs (the plan, `--tools`,
/// `--replay`, the store and the files SQLite keeps beside it) or one another.
pub(crate) fn refuse_clobbering(
    plan: Option<(&str, &Path)>,
    tools: Option<&Path>,
    replay: Option<&Path>,
    store: Option<&Path>,
    outputs: &[(&str, &Path)],
) -> Result<(), u8> {
    let store_files = store.map(plan_runs::open::files);
    let mut inputs: Vec<(&str, &Path)> = plan.into_iter().collect();
    inputs.extend(tools.map(|p| ("the --tools file", p)));
    inputs.extend(replay.map(|p| ("the --replay cassette", p)));
    inputs.extend(
        store_files
            .iter()
            .flatten()
            .map(|p| (plan_runs::open::STORE_FILE, &**p)),
    );
    plan_render::files::check_outputs(outputs, &inputs)
        .map_err(|msg| fail(exit::OUTPUT_IS_INPUT, msg))
}

/// The `--tools` file, or the built-in tools.
pub(crate) fn load_manifest(tools: Option<&Path>) -> Result<Manifest, u8> {
    match tools {
        Some(path) => plan_mcp::load(path, process_env(), Listing::Cached)
            .map_err(|e| fail(exit::USAGE, format_args!("cannot load tools file: {e}"))),
        None => Ok(Manifest::builtin()),
    }
}

/// Opens `--trace FILE` (or traces nothing).
fn open_trace(path: Option<&Path>) -> Result<Tracer, u8> {
    match path {
        Some(path) => match std::fs::File::create(path) {
            Ok(f) => Ok(Tracer::to_writer(Box::new(std::io::BufWriter::new(f)))),
            Err(e) => Err(fail(
                exit::CANT_CREATE,
                format_args!("cannot create trace file {}: {e}", path.display()),
            )),
        },
        None => Ok(Tracer::none()),
    }
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
    pub(crate) host: Host,
    pub(crate) runtime: tokio::runtime::Runtime,
}

/// Runs `fut` to its end on `runtime`, then shuts down the MCP servers `host` started
/// (cleanly, rather than killed when the process exits).
pub(crate) fn block_on<T>(
    runtime: &tokio::runtime::Runtime,
    host: &Host,
    fut: impl std::future::Future<Output = T>,
) -> T {
    runtime.block_on(async {
        // NB: the servers run in process groups of their own, which a Ctrl-C at the
        // terminal does not reach: planvm stops them, then exits as interrupted.
        let interrupted = async {
            if host.manifest().mcp.is_empty() || tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let out = tokio::select! {
            out = fut => out,
            () = interrupted => {
                eprintln!("interrupted: stopping the MCP servers");
                host.shutdown().await;
                std::process::exit(130);
            }
        };
        host.shutdown().await;
        out
    })
}

/// Sets up a [`Session`]; `output` is where the trace goes and the output format.
pub(crate) fn start_session(
    manifest: Manifest,
    replay: Option<PathBuf>,
    record: Option<PathBuf>,
    times: &Times,
    output: (Option<&Path>, Format),
    warnings: &[String],
) -> Result<Session, u8> {
    let mut tracer = open_trace(output.0)?;
    for w in warnings {
        tracer.warning(w);
    }
    let status_line = status_line(output.1, &mut tracer);
    let host = make_host(manifest, replay, record, times, &mut tracer)?;
    let runtime = runtime()?;
    Ok(Session {
        tracer,
        status_line,
        host,
        runtime,
    })
}

/// The process's telemetry, when the environment asks for it (docs/telemetry.md), made
/// by `make`; why it cannot be set up is a warning, never a failure. Made outside any
/// async runtime (its exporter has a blocking client of its own).
pub(crate) fn telemetry<T>(make: impl FnOnce() -> Result<Option<T>, String>) -> Option<T> {
    make().unwrap_or_else(|e| {
        eprintln!("warning: {e}: no trace is exported");
        None
    })
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

/// A host that could not be set up: its error printed, its exit code.
pub(crate) fn host_failed(e: plan_host::HostError) -> u8 {
    let code = match e.kind {
        HostErrorKind::InvalidInput => exit::DATA_ERR,
        HostErrorKind::Io => exit::NO_INPUT,
        HostErrorKind::Create => exit::CANT_CREATE,
        HostErrorKind::Config => exit::RUN_FAILED,
    };
    fail(code, e)
}

fn make_host(
    manifest: Manifest,
    replay: Option<PathBuf>,
    record: Option<PathBuf>,
    times: &Times,
    tracer: &mut Tracer,
) -> Result<Host, u8> {
    let opts = HostOptions {
        replay,
        record,
        tool_timeout: times.tool_timeout,
        deadline: times.deadline,
        ..HostOptions::default()
    };
    let host = Host::new(manifest, opts).map_err(host_failed)?;
    for w in host.warnings() {
        eprintln!("warning: {w}");
        tracer.warning(w);
    }
    Ok(host)
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
pub(crate) fn loaded(
    result: Result<plan_runs::load::Loaded, plan_runs::load::LoadError>,
) -> Result<plan_runs::load::Loaded, u8> {
    match result {
        Ok(l) => {
            eprint!("{}", rendered(&l.found, l.source.as_deref()));
            Ok(l)
        }
        Err(plan_runs::load::LoadError::Unreadable(msg)) => Err(fail(exit::NO_INPUT, msg)),
        Err(plan_runs::load::LoadError::Invalid(inv)) => {
            eprint!("{}", rendered(&inv.found, inv.source.as_deref()));
            Err(fail(exit::DATA_ERR, inv.message))
        }
    }
}

/// What the compiler `found` in a plan of `source`, rendered rustc-style for stderr
/// (nothing when it found nothing, or the plan was bytecode).
pub(crate) fn rendered(found: &plan_runs::load::Found, source: Option<&str>) -> String {
    match source {
        Some(src) if !found.diagnostics.is_empty() => {
            let color = plan_render::color_stderr();
            plan_render::render_human(&found.shown, src, &found.diagnostics, color)
        }
        _ => String::new(),
    }
}

/// Prints the report of run `run_id` (None: not stored) and returns the exit code.
pub(crate) fn finish(
    report: RunReport,
    (format, run_id): (Format, Option<&str>),
    tracer: &Tracer,
    status_line: Option<progress::StatusLine>,
) -> u8 {
    if let Some(line) = status_line {
        line.finish();
    }
    if let Some(e) = tracer.write_error() {
        eprintln!("warning: writing the trace failed: {e}");
    }
    print_report(&report, format, run_id);
    report_exit(&report)
}

/// The exit code of a run that ended with `report`.
pub(crate) fn report_exit(report: &RunReport) -> u8 {
    match report.status {
        RunStatus::Ok => exit::OK,
        RunStatus::NeedsInput => exit::NEEDS_INPUT,
        // NB: a command's host never drains; only the service stops its runs.
        RunStatus::Failed | RunStatus::Stopped => exit::RUN_FAILED,
    }
}

/// Prints a run's report: the answer on stdout (or the question it stopped at), its
/// error on stderr; with `--format json`, the report (and `run_id` when stored).
pub(crate) fn print_report(report: &RunReport, format: Format, run_id: Option<&str>) {
    let mut out = std::io::stdout().lock();
    // NB: a closed stdout (`planvm run ... | head -0`) is not the run's failure: the exit
    // code still reports the run.
    match format {
        Format::Json => {
            let mut json = serde_json::to_value(report).unwrap_or_default();
            if let (Some(id), Some(obj)) = (run_id, json.as_object_mut()) {
                obj.insert("run_id".into(), id.into());
            }
            let _ = writeln!(out, "{json}");
        }
        Format::Text => {
            if let Some(e) = &report.error {
                let mut msg = format!("error[{}]: {}", e.code, e.message);
                match (e.seq_no, e.line) {
                    (Some(s), Some(l)) => msg.push_str(&format!("\n  --> seq_no {s}, line {l}")),
                    (Some(s), None) => msg.push_str(&format!("\n  --> seq_no {s}")),
                    (None, Some(l)) => msg.push_str(&format!("\n  --> line {l}")),
                    (None, None) => {}
                }
                eprintln!("{msg}");
                return;
            }
            if let Some(q) = &report.question {
                print_question(&mut out, q, run_id);
                return;
            }
            let text = match &report.final_answer {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let _ = out.write_all(text.as_bytes());
            if !text.ends_with('\n') {
                let _ = out.write_all(b"\n");
            }
        }
    }
    let _ = out.flush();
}

/// A run's question on stdout (its choices one a line), and on stderr how to answer it.
fn print_question(out: &mut impl Write, q: &Question, run_id: Option<&str>) {
    let _ = writeln!(out, "{}", q.question.trim_end());
    for c in q.choices.iter().flatten() {
        let _ = writeln!(out, "  - {c}");
    }
    let _ = out.flush();
    match run_id {
        Some(id) => eprintln!(
            "run {id} is waiting for input: answer with `planvm resume {id} --input TEXT`"
        ),
        None => eprintln!(
            "the run is waiting for input: with --store it can be answered later (`planvm resume ID --input TEXT`)"
        ),
    }
}

/// The exit code for a failure of the engine.
pub(crate) fn engine_exit(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::NotAStore | ErrorKind::Damaged | ErrorKind::Invalid => exit::DATA_ERR,
        ErrorKind::UnknownRun | ErrorKind::NoStore => exit::NO_INPUT,
        ErrorKind::DuplicateRun
        | ErrorKind::BadRunId
        | ErrorKind::UnknownWrites
        | ErrorKind::BadInput
        | ErrorKind::NotWaiting
        | ErrorKind::NotReached => exit::USAGE,
        ErrorKind::Busy => exit::TEMP_FAIL,
        ErrorKind::Cancelled => exit::RUN_FAILED,
        ErrorKind::ReadOnly | ErrorKind::Io => exit::IO_ERR,
    }
}

/// Reports `e` and returns its exit code.
pub(crate) fn failed(e: impl Into<plan_runs::Error>) -> u8 {
    let e = e.into();
    fail(engine_exit(e.kind), e)
}

/// What a run's lease that cannot be renewed prints (see [`plan_runs::Lease::start`]).
pub(crate) fn lease_warning(e: &plan_runs::Error) {
    eprintln!("warning: cannot renew the run's lease: {e}");
}
