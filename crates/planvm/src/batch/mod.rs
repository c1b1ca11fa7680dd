//! `planvm batch`: many runs in one process (its help is `BATCH_NOTES`). The engine is
//! `plan_runs::batch`; this module parses, checks the outputs, draws the progress bar,
//! writes one JSON line per run and picks the exit code.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{ArgGroup, Args};
use plan_host::{HostOptions, ReplayBackend};
use plan_render::exit;
use plan_runs::StoreAt;
use plan_runs::batch::{Batch, BatchStore, Job, Stored};
use serde_json::Value;

use crate::args::{DurabilityArg, LimitArgs, parse_run_id, parse_var};
use crate::session::{self, fail};

mod output;

use output::Sink;

/// `batch --help`'s text after the options.
pub(crate) fn help() -> String {
    format!("{BATCH_NOTES}\n\n{}", exit::help(exit::PLANVM_BATCH))
}

const BATCH_NOTES: &str = "\
Input:
  DIR          every *.json, *.txt and *.pbc file in DIR (not recursive), sorted by name;
               the cassette beside a plan, <stem>.cassette.jsonl (for a.llm.txt:
               a.llm.cassette.jsonl, else a.cassette.jsonl), serves it unless --replay
               is given.
  --list FILE  one run per line: PLAN [CASSETTE] [NAME=VALUE]...
               Whitespace separates fields; \"double quotes\" (JSON string syntax) keep
               whitespace in a path or value; a field starting with # starts a comment.
               Relative paths are resolved against the list file's directory. A line's
               NAME=VALUE pairs override --var; a line's cassette overrides --replay.

Output: one JSON line per run, in order of completion: the object `planvm run --format
json` prints, preceded by \"plan\" (and \"line\", the list line). A summary goes to
stderr; a progress bar too when stderr is a terminal. An invalid plan's diagnostics go
to stderr once per plan; compiler warnings are not printed.

Per-run files: --record DIR writes each run's cassette to DIR/<run>.cassette.jsonl and
--trace DIR its trace to DIR/<run>.trace.jsonl (both created, or emptied if present).
<run> is the plan's file name without its extension (a.llm.txt: a.llm), the whole file
name when two plans of DIR share that stem, and <stem>.line<N> for list input (.2, .3,
... added if names still meet). A file
that is one of the run's own inputs (its plan or cassette) is refused (exit 64).";

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("input").required(true).args(["dir", "list"])))]
pub(crate) struct BatchArgs {
    /// Run every plan file in this directory.
    #[arg(value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Run the runs listed in this file, one per line: PLAN [CASSETTE] [NAME=VALUE]...
    #[arg(long, value_name = "FILE")]
    list: Option<PathBuf>,
    /// Tools file: tool declarations and the backend serving each.
    #[arg(long, value_name = "FILE.toml")]
    tools: Option<PathBuf>,
    /// Serve every run that has no cassette of its own from this cassette (each run
    /// replays it from the start).
    #[arg(long, value_name = "CASSETTE")]
    replay: Option<PathBuf>,
    /// Preset a variable in every run; VALUE is parsed as JSON when it parses, else taken
    /// as a string.
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
    vars: Vec<(String, Value)>,
    #[command(flatten)]
    limits: LimitArgs,
    /// Runs in flight at once.
    #[arg(long, value_name = "N", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    jobs: u32,
    /// Write the JSON lines here instead of stdout.
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Record each run's tool calls to DIR/<run>.cassette.jsonl (DIR is created).
    #[arg(long, value_name = "DIR")]
    record: Option<PathBuf>,
    /// Write each run's trace events to DIR/<run>.trace.jsonl (DIR is created).
    #[arg(long, value_name = "DIR")]
    trace: Option<PathBuf>,
    /// Journal every run in this store, as `run --store` does; run ids are
    /// `<batch id>.<run name>`. Default: $PLANVM_STORE.
    #[arg(long, value_name = "DB", env = "PLANVM_STORE")]
    store: Option<PathBuf>,
    /// The batch's id in its runs' ids (default: a new UUID v7).
    #[arg(long, value_name = "ID", requires = "store", value_parser = parse_run_id)]
    batch_id: Option<String>,
    /// Continue the batch --batch-id in its store after a crash or a kill, from the same
    /// list or directory: a run it finished is reported from the store and calls nothing;
    /// one it left interrupted or failed goes on from its last commit point, as `planvm
    /// resume` does (no stored answer is asked again); one it never started runs now. A
    /// list's lines are paired with the stored runs by plan and variables, in order,
    /// wherever they have moved; a line left over runs anew.
    #[arg(long, requires = "batch_id")]
    resume: bool,
    /// With --resume: send again the `write` calls that were in flight when the batch
    /// stopped (their outcome is unknown). Without it, such a run is reported failed.
    #[arg(long, requires = "resume")]
    retry_unknown_writes: bool,
    #[command(flatten)]
    durability: DurabilityArg,
}

pub(crate) fn batch(args: BatchArgs) -> u8 {
    let times = args.limits.times();
    let host_options = HostOptions {
        tool_timeout: times.tool_timeout,
        deadline: times.deadline,
        ..HostOptions::default()
    };
    let engine = match session::engine(args.tools.as_deref(), host_options.clone()) {
        Ok(e) => e,
        Err(code) => return code,
    };
    let jobs = match read_jobs(&args) {
        Ok(jobs) => jobs,
        Err(code) => return code,
    };
    let replay = match load_replay(args.replay.as_deref()) {
        Ok(r) => r,
        Err(code) => return code,
    };
    if let Some(output) = &args.output
        && let Err(code) = check_output(output, &args, &jobs)
    {
        return code;
    }
    let host = match session::host(&engine, None) {
        Ok(h) => h,
        Err(code) => return code,
    };
    let runtime = match session::multi_thread_runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let mut store = match open_store(&args, &jobs) {
        Ok(s) => s,
        Err(code) => return code,
    };
    // NB: created only now: a batch refused above leaves an earlier --output file alone.
    let (out, out_name) = match open_output(args.output.as_deref()) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let mut sink = Sink::new(
        out,
        out_name,
        crate::progress::progress_bar(jobs.len(), "runs"),
    );
    let batch = Batch {
        manifest: engine.manifest().clone(),
        host: host.clone(),
        host_options,
        limits: args.limits.limits(),
        vars: args.vars,
        replay,
        record_dir: args.record,
        trace_dir: args.trace,
        jobs: args.jobs as usize,
        telemetry: session::telemetry(|| {
            plan_telemetry::Telemetry::from_env(host.redactor().clone())
        })
        .map(Arc::new),
    };
    let tally = session::block_on(
        &runtime,
        &host,
        plan_runs::batch::run(&batch, store.as_mut(), jobs, &mut |e| sink.event(e)),
    );
    sink.clear_bar();
    // NB: every run is written by now; the store's connections are closed before the
    // process exits (the writer's here, the lease's when it is dropped), so that the last
    // one copies the WAL back and removes it (docs/durability.md). The runtime goes first:
    // closing waits for every handle on the store, a task's included.
    drop(runtime);
    if let Some(store) = store {
        store.close();
    }
    if let Some(t) = &batch.telemetry {
        session::lost_spans(t.finish());
    }
    let unwritten = sink.finish();
    eprintln!("{}", plan_render::runs::batch_summary(&tally));
    if let Some(e) = unwritten {
        return fail(exit::CANT_CREATE, e);
    }
    exit::of_batch(&tally)
}

/// The runs of the list or directory, named, with the `--record` and `--trace`
/// directories they write to made.
fn read_jobs(args: &BatchArgs) -> Result<Vec<Job>, u8> {
    let mut jobs = match (&args.dir, &args.list) {
        (_, Some(list)) => {
            plan_runs::batch::read_list(list).map_err(|msg| fail(exit::USAGE, msg))?
        }
        (Some(dir), None) => plan_runs::batch::scan_dir(dir, args.replay.is_none())
            .map_err(|msg| fail(exit::NO_INPUT, msg))?,
        // clap's required group makes this unreachable; still, no panic.
        (None, None) => return Err(fail(exit::USAGE, "give a DIR or --list FILE")),
    };
    plan_runs::batch::name_runs(&mut jobs);
    for dir in [&args.record, &args.trace].into_iter().flatten() {
        std::fs::create_dir_all(dir).map_err(|e| {
            fail(
                exit::CANT_CREATE,
                format_args!("cannot create directory {}: {e}", dir.display()),
            )
        })?;
    }
    Ok(jobs)
}

/// The `--replay` cassette, loaded once for every run that replays it.
fn load_replay(path: Option<&Path>) -> Result<Option<(PathBuf, Arc<ReplayBackend>)>, u8> {
    let Some(p) = path else {
        return Ok(None);
    };
    match ReplayBackend::load(p) {
        Ok(r) => {
            for w in r.warnings() {
                eprintln!("warning: {w}");
            }
            Ok(Some((p.to_owned(), Arc::new(r))))
        }
        Err(e) => Err(session::failed(e)),
    }
}

/// The `--store`, set up for the batch (`batch ID` printed once it is).
fn open_store(args: &BatchArgs, jobs: &[Job]) -> Result<Option<Stored>, u8> {
    let Some(path) = &args.store else {
        return Ok(None);
    };
    let setup = BatchStore {
        at: StoreAt::new(path, args.durability.get()),
        batch_id: args.batch_id.clone().unwrap_or_else(plan_store::new_run_id),
        resume: args.resume,
        retry_unknown_writes: args.retry_unknown_writes,
    };
    let stored = setup
        .open(jobs, &args.vars, session::lease_warning)
        .map_err(session::failed)?;
    eprintln!("batch {}", setup.batch_id);
    Ok(Some(stored))
}

/// Where the lines go: `--output`, created (emptied), or stdout; and its name for
/// messages (empty for stdout).
fn open_output(path: Option<&Path>) -> Result<(Box<dyn Write + Send>, String), u8> {
    Ok(match path {
        Some(p) => {
            let f = std::fs::File::create(p).map_err(|e| {
                fail(
                    exit::CANT_CREATE,
                    format_args!("cannot create {}: {e}", p.display()),
                )
            })?;
            (
                Box::new(std::io::BufWriter::new(f)),
                p.display().to_string(),
            )
        }
        None => (
            Box::new(std::io::BufWriter::new(std::io::stdout())),
            String::new(),
        ),
    })
}

/// Refuses an `--output` that is one of the batch's inputs.
fn check_output(output: &Path, args: &BatchArgs, jobs: &[Job]) -> Result<(), u8> {
    let mut inputs: Vec<(&str, &Path)> = Vec::new();
    inputs.extend(args.list.as_deref().map(|p| ("the --list file", p)));
    inputs.extend(args.tools.as_deref().map(|p| ("the --tools file", p)));
    inputs.extend(args.replay.as_deref().map(|p| ("the --replay cassette", p)));
    let store_files = args.store.as_deref().map(plan_runs::open::files);
    inputs.extend(
        store_files
            .iter()
            .flatten()
            .map(|p| (plan_runs::open::STORE_FILE, &**p)),
    );
    // NB: each file once: a list runs the same few plans and cassettes many times, and
    // each check of a path asks the file system (two calls a path, four a run).
    let mut seen = std::collections::HashSet::new();
    for j in jobs {
        let files = std::iter::once(("a plan", j.plan.as_path()))
            .chain(j.cassette.as_deref().map(|p| ("a cassette", p)));
        inputs.extend(files.filter(|(_, p)| seen.insert(*p)));
    }
    plan_compiler::files::check_outputs(&[("--output", output)], &inputs)
        .map_err(|msg| fail(exit::OUTPUT_IS_INPUT, msg))
}
