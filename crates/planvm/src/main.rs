//! `planvm`: runs a plan (source or `.pbc`) against real or recorded tools.
//!
//! ```text
//! planvm ask GOAL [--response-format JSON] [--tools FILE.toml] [--examples DIR]
//!                 [--prompt FILE] [--max-repairs N] [--max-replans N] [--show-plan]
//!                 [--save-example DIR] [run's options]
//! planvm run FILE [--tools FILE.toml] [--replay CASSETTE] [--record CASSETTE]
//!                 [--var NAME=VALUE]... [--max-steps N] [--max-bytes BYTES]
//!                 [--max-concurrency N] [--timeout SECS] [--tool-timeout SECS]
//!                 [--trace FILE] [--format text|json]
//! planvm batch (DIR | --list FILE) [--jobs N] [--output FILE] [run's options]
//! planvm resume ID --store DB [--tools FILE] [--replay FILE] [--retry-unknown-writes] [limits]
//! planvm branch ID --at SEQ --plan NEW_PLAN --store DB [run's options]
//! planvm runs list|show [ID] --store DB [--at SEQ] [--format text|json]
//! ```
//!
//! Exit codes (see [`exit`]) are printed by `planvm run --help`.
//!
//! Module map: this file parses arguments and maps outcomes to exit codes; `load` turns
//! FILE into a validated program (bytecode by magic, else compiled source) and renders
//! diagnostics; `progress` draws the live status line; `batch` runs many plans at once;
//! `stored` is `--store`, `resume`, `branch` and `runs` (docs/durability.md); `ask` is
//! goal → plan → answer (docs/planner.md). The run
//! itself is `plan_host::run_plan` (`resume_plan` to continue one). Only this crate prints.

mod ask;
mod batch;
mod load;
mod progress;
mod stored;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use plan_host::{Host, HostErrorKind, HostOptions, RunReport, Tracer};
use plan_manifest::Manifest;
use plan_vm::Limits;
use serde_json::Value;

use plan_render::exit;

const EXIT_CODES_HELP: &str = "\
Exit codes:
  0   the run finished with a final answer
  1   the run failed (tool error after retries, missing cassette entry, limit or deadline
      exceeded, no backend or API key for a tool, a store write failed, ...)
  2   usage error, including an unreadable or malformed --tools file, a --run-id that
      exists, a branch point the run never reached, a write call in flight on resume
      without --retry-unknown-writes
  64  the --trace or --record file is one of the inputs (FILE, --tools, --replay, the
      --store database or its -wal, -shm or -journal file) or both are one file
  65  the plan has errors, the .pbc file is corrupted or truncated, the --replay
      cassette is malformed, or the --store file is not a planvm store (or is newer),
      or what it holds is damaged
  66  FILE or the --replay cassette cannot be read, or no run has that ID
  73  the --trace or --record file cannot be created
  74  the --store file cannot be read or written (or stays locked)
  75  the stored run is being run by another live process";

#[derive(Parser, Debug)]
#[command(
    name = "planvm",
    version,
    about = "Run LLM-written plans (source or .pbc bytecode) against real or recorded tools",
    after_help = EXIT_CODES_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a plan and print its final answer.
    #[command(after_help = EXIT_CODES_HELP)]
    Run(RunArgs),
    /// From a goal to an answer: an LLM writes the plan, errors go back for repair, a
    /// failed step for a re-plan.
    #[command(after_help = ask::ASK_HELP)]
    Ask(ask::AskArgs),
    /// Run many plans concurrently in one process (a directory of plans or a list file),
    /// printing one JSON line per run.
    #[command(after_help = batch::BATCH_HELP)]
    Batch(batch::BatchArgs),
    /// Continue a stored run from its last commit point (a finished run prints its
    /// stored answer and calls nothing).
    #[command(after_help = EXIT_CODES_HELP)]
    Resume(stored::ResumeArgs),
    /// Start a new run from a stored run's state just before it first executed seq_no
    /// SEQ, continuing with another plan at its instruction SEQ (the parent is untouched).
    #[command(after_help = EXIT_CODES_HELP)]
    Branch(stored::BranchArgs),
    /// List or inspect the runs of a store.
    #[command(subcommand)]
    Runs(stored::RunsCommand),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    /// The final answer on stdout (a string raw, anything else as compact JSON).
    Text,
    /// One JSON object: status, final_answer, error, steps, tool_calls, elapsed_ms.
    Json,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// The plan: a .pbc file (recognised by its magic bytes, whatever its name) or plan
    /// source in any form the reader accepts (JSON, LLM output with a ```json fence,
    /// Python literals, ...), compiled on the fly. `-` reads it from standard input and
    /// starts the calls certain to run before the input ends.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Tools file: tool declarations and the backend serving each (the same file planc uses).
    #[arg(long, value_name = "FILE.toml")]
    tools: Option<PathBuf>,
    /// Serve every tool call from this cassette (no network).
    #[arg(long, value_name = "CASSETTE")]
    replay: Option<PathBuf>,
    /// Append every completed tool call to this cassette (JSON lines).
    #[arg(long, value_name = "CASSETTE")]
    record: Option<PathBuf>,
    /// Preset a variable; VALUE is parsed as JSON when it parses, else taken as a string.
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
    vars: Vec<(String, Value)>,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    store: stored::StoreArgs,
}

/// Where a run's trace and result go (`run`, `resume`, `branch`).
#[derive(Args, Debug)]
pub(crate) struct OutputArgs {
    /// Write trace events (JSON lines) to this file.
    #[arg(long, value_name = "FILE")]
    pub(crate) trace: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
}

/// Limits of one run, shared by `run` and `batch` (in a batch they apply to each run).
#[derive(clap::Args, Debug)]
pub(crate) struct LimitArgs {
    /// Maximum instructions executed.
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_steps)]
    max_steps: u64,
    /// Maximum bytes held in all variables together.
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().max_total_bytes)]
    max_bytes: u64,
    /// Maximum tool calls in flight at once (independent calls run concurrently; 1 runs
    /// them one at a time, like the reference VM).
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_concurrency)]
    max_concurrency: u32,
    /// Overall deadline of the run, in seconds (for `ask`: of the whole ask, its planner
    /// calls included).
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    timeout: Option<Duration>,
    /// Limit on one tool call, retries included, in seconds.
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    tool_timeout: Option<Duration>,
}

impl LimitArgs {
    pub(crate) fn times(&self) -> Times {
        Times {
            deadline: self.timeout,
            tool_timeout: self.tool_timeout,
        }
    }

    pub(crate) fn limits(&self) -> Limits {
        Limits {
            max_steps: self.max_steps,
            max_total_bytes: self.max_bytes,
            max_concurrency: self.max_concurrency,
            ..Limits::default()
        }
    }
}

fn parse_var(s: &str) -> Result<(String, Value), String> {
    let Some((name, value)) = s.split_once('=') else {
        return Err(format!("expected NAME=VALUE, got `{s}`"));
    };
    let name = name.trim();
    if name.is_empty() {
        return Err("the variable name before `=` is empty".into());
    }
    let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()));
    Ok((name.to_owned(), value))
}

fn parse_secs(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(secs > 0.0 && secs <= 1e9) {
        return Err(format!(
            "expected more than 0 and at most 1e9 seconds, got {s}"
        ));
    }
    Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => ExitCode::from(run(args)),
        Command::Ask(args) => ExitCode::from(ask::ask(args)),
        Command::Batch(args) => ExitCode::from(batch::batch(args)),
        Command::Resume(args) => ExitCode::from(stored::resume(args)),
        Command::Branch(args) => ExitCode::from(stored::branch(args)),
        Command::Runs(cmd) => ExitCode::from(stored::runs(cmd)),
    }
}

/// How a plan run with `vars` preset is compiled: against `manifest`, the variables
/// counted as set.
pub(crate) fn compile_options(
    manifest: &Manifest,
    vars: &[(String, Value)],
) -> plan_compiler::CompileOptions {
    plan_compiler::CompileOptions {
        manifest: manifest.clone(),
        presets: vars.iter().map(|(name, _)| name.clone()).collect(),
        ..plan_compiler::CompileOptions::default()
    }
}

/// Prints `error: ...` to stderr and returns `code`.
fn fail(code: u8, message: impl std::fmt::Display) -> u8 {
    eprintln!("error: {message}");
    code
}

/// What the store's files are called in the refusal of an output onto one of them.
pub(crate) const STORE_FILE: &str = "the --store database or a file SQLite keeps beside it";

/// The files of the store at `path` no output may be written onto: its own and, when
/// `path` is a symbolic link (even one to a store not created yet), those of the file it
/// leads to, where SQLite keeps them.
pub(crate) fn store_files(path: &Path) -> Vec<PathBuf> {
    let mut files = plan_store::SqliteStore::files(path).to_vec();
    if let Some(real) = plan_render::files::resolved(path) {
        files.extend(plan_store::SqliteStore::files(&real));
    }
    files
}

/// Refuses outputs that are inputs (by file identity, or by resolved name for files that
/// do not exist yet) or each other.
pub(crate) fn check_outputs(
    outputs: &[(&str, &Path)],
    inputs: &[(&str, &Path)],
) -> Result<(), String> {
    for (i, &(flag, out)) in outputs.iter().enumerate() {
        let others: Vec<(&str, &Path)> = inputs
            .iter()
            .copied()
            .chain(outputs[..i].iter().copied())
            .collect();
        let same_name = outputs[..i].iter().find(|(_, o)| *o == out).copied();
        if let Some((what, p)) = plan_render::files::clobbered(out, &others).or(same_name) {
            return Err(format!(
                "{flag} {} is the same file as {what} ({}): it would be overwritten; choose another path",
                out.display(),
                p.display()
            ));
        }
    }
    Ok(())
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
    let store_files = store.map(store_files);
    let mut inputs: Vec<(&str, &Path)> = plan.into_iter().collect();
    inputs.extend(tools.map(|p| ("the --tools file", p)));
    inputs.extend(replay.map(|p| ("the --replay cassette", p)));
    inputs.extend(
        store_files
            .iter()
            .flatten()
            .map(|p| (crate::STORE_FILE, &**p)),
    );
    check_outputs(outputs, &inputs).map_err(|msg| fail(exit::OUTPUT_IS_INPUT, msg))
}

fn run(args: RunArgs) -> u8 {
    let stdin = args.file.as_os_str() == "-";
    let mut outputs: Vec<(&str, &Path)> = Vec::new();
    outputs.extend(args.output.trace.as_deref().map(|p| ("--trace", p)));
    outputs.extend(args.record.as_deref().map(|p| ("--record", p)));
    if let Err(code) = refuse_clobbering(
        (!stdin).then_some(("the plan FILE", args.file.as_path())),
        args.tools.as_deref(),
        args.replay.as_deref(),
        args.store.store.as_deref(),
        &outputs,
    ) {
        return code;
    }
    let manifest = match load_manifest(args.tools.as_deref()) {
        Ok(m) => m,
        Err(code) => return code,
    };
    if stdin {
        return run_stdin(args, manifest);
    }

    let opts = compile_options(&manifest, &args.vars);
    let loaded = match load::load_program(&args.file, opts, plan_render::color_stderr()) {
        Ok(l) => {
            eprint!("{}", l.rendered);
            l
        }
        Err(load::LoadError::Unreadable(msg)) => return fail(exit::NO_INPUT, msg),
        Err(load::LoadError::Invalid(inv)) => {
            eprint!("{}", inv.rendered);
            return fail(exit::DATA_ERR, inv.message);
        }
    };

    let Session {
        mut tracer,
        status_line,
        host,
        runtime,
    } = match start_session(
        manifest,
        args.replay.clone(),
        args.record.clone(),
        &args.limits.times(),
        (args.output.trace.as_deref(), args.output.format),
        &loaded.warnings,
    ) {
        Ok(s) => s,
        Err(code) => return code,
    };
    tracer.restart_clock();
    match runtime.block_on(run_loaded(&host, &loaded, &args, &mut tracer)) {
        Ok(report) => finish(report, args.output.format, &tracer, status_line),
        Err(code) => code,
    }
}

/// Runs a loaded plan for `run`, in the store if `--store` names one.
async fn run_loaded(
    host: &Host,
    loaded: &load::Loaded,
    args: &RunArgs,
    tracer: &mut Tracer,
) -> Result<RunReport, u8> {
    let limits = args.limits.limits();
    let vars = args.vars.clone();
    let program = &loaded.program;
    Ok(match &args.store.store {
        None => plan_host::run_plan(host, program, vars, limits, tracer).await,
        Some(path) => {
            let presets: serde_json::Map<String, Value> = vars.iter().cloned().collect();
            let mut s =
                stored::start_run(path, &args.store, &args.file, loaded, &presets, &limits)?;
            let mut journal = (tracer, s.journal(program));
            plan_host::run_plan(host, program, vars, limits, &mut journal).await
        }
    })
}

/// `planvm run -`: the plan comes from standard input and runs as it arrives: calls that
/// are certain to run start before the input ends (docs/planner.md, streaming). The whole
/// plan is then compiled and run as any plan is, taking the early results.
fn run_stdin(args: RunArgs, manifest: Manifest) -> u8 {
    let Session {
        mut tracer,
        status_line,
        host,
        runtime,
    } = match start_session(
        manifest.clone(),
        args.replay.clone(),
        args.record.clone(),
        &args.limits.times(),
        (args.output.trace.as_deref(), args.output.format),
        &[],
    ) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let outcome = runtime.block_on(async {
        let streamer = plan_planner::Streamer::new(&host, args.vars.clone(), args.limits.limits());
        let (tx, pieces) = tokio::sync::mpsc::unbounded_channel();
        let bytes = streamer
            .follow(read_stdin(tx), pieces, 0, &mut |e| {
                let _ = plan_host::Journal::record(&mut tracer, e);
            })
            .await
            .map_err(|msg| fail(exit::NO_INPUT, msg))?;
        let color = plan_render::color_stderr();
        let opts = compile_options(&manifest, &args.vars);
        let loaded = match load::load_bytes("<stdin>", bytes, opts, color) {
            Ok(l) => {
                eprint!("{}", l.rendered);
                l
            }
            Err(load::LoadError::Unreadable(msg)) => return Err(fail(exit::NO_INPUT, msg)),
            Err(load::LoadError::Invalid(inv)) => {
                eprint!("{}", inv.rendered);
                return Err(fail(exit::DATA_ERR, inv.message));
            }
        };
        for w in &loaded.warnings {
            tracer.warning(w);
        }
        if let Some(src) = &loaded.source {
            streamer.settle(src);
        }
        run_loaded(&host, &loaded, &args, &mut tracer).await
    });
    match outcome {
        Ok(report) => finish(report, args.output.format, &tracer, status_line),
        Err(code) => code,
    }
}

/// Reads standard input to its end, sending each piece of text as it arrives (a
/// character cut between two reads waits for the rest). At most the size limit of a plan.
async fn read_stdin(pieces: tokio::sync::mpsc::UnboundedSender<String>) -> Result<Vec<u8>, String> {
    use tokio::io::AsyncReadExt;
    let limit = plan_syntax::limits::MAX_SOURCE_BYTES;
    let mut stdin = tokio::io::stdin();
    let mut all: Vec<u8> = Vec::new();
    let mut sent = 0;
    let mut buf = vec![0u8; 16 << 10];
    loop {
        let n = stdin
            .read(&mut buf)
            .await
            .map_err(|e| format!("cannot read the plan from standard input: {e}"))?;
        if n == 0 {
            break;
        }
        if all.len() + n > limit {
            return Err(format!(
                "the plan on standard input is larger than {limit} bytes"
            ));
        }
        all.extend_from_slice(&buf[..n]);
        let upto = match std::str::from_utf8(&all[sent..]) {
            Ok(_) => all.len(),
            Err(e) if e.error_len().is_none() => sent + e.valid_up_to(),
            // Not text (a .pbc, say): nothing to follow; the whole is still loaded.
            Err(_) => sent,
        };
        if upto > sent {
            let _ = pieces.send(String::from_utf8_lossy(&all[sent..upto]).into_owned());
            sent = upto;
        }
    }
    Ok(all)
}

/// The `--tools` file, or the built-in tools.
fn load_manifest(tools: Option<&Path>) -> Result<Manifest, u8> {
    match tools {
        Some(path) => Manifest::load(path)
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

/// The run's deadline and per-call limit.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Times {
    pub(crate) deadline: Option<Duration>,
    pub(crate) tool_timeout: Option<Duration>,
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
    let host = Host::new(manifest, opts).map_err(|e| {
        let code = match e.kind {
            HostErrorKind::InvalidInput => exit::DATA_ERR,
            HostErrorKind::Io => exit::NO_INPUT,
            HostErrorKind::Create => exit::CANT_CREATE,
            HostErrorKind::Config => exit::RUN_FAILED,
        };
        fail(code, e)
    })?;
    for w in host.warnings() {
        eprintln!("warning: {w}");
        tracer.warning(w);
    }
    Ok(host)
}

fn runtime() -> Result<tokio::runtime::Runtime, u8> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            fail(
                exit::RUN_FAILED,
                format_args!("cannot start the async runtime: {e}"),
            )
        })
}

/// Prints the report and returns the exit code.
fn finish(
    report: RunReport,
    format: Format,
    tracer: &Tracer,
    status_line: Option<progress::StatusLine>,
) -> u8 {
    if let Some(line) = status_line {
        line.finish();
    }
    if let Some(e) = tracer.write_error() {
        eprintln!("warning: writing the trace failed: {e}");
    }
    print_report(&report, format);
    if report.is_ok() {
        exit::OK
    } else {
        exit::RUN_FAILED
    }
}

fn print_report(report: &RunReport, format: Format) {
    let mut out = std::io::stdout().lock();
    // NB: a closed stdout (`planvm run ... | head -0`) is not the run's failure: the exit
    // code still reports the run.
    match format {
        Format::Json => {
            let _ = writeln!(out, "{}", serde_json::to_string(report).unwrap_or_default());
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
