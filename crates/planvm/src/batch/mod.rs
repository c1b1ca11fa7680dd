//! `planvm batch`: many runs in one process (its help is `BATCH_NOTES`). The engine is
//! `plan_runs::batch` (set up by its `BatchRequest`); this module parses, draws the
//! progress bar, writes one JSON line per run and picks the exit code.

use std::path::PathBuf;

use clap::{ArgGroup, Args};
use plan_host::HostOptions;
use plan_render::exit;
use plan_runs::StoreAt;
use plan_runs::batch::{BatchInput, BatchRequest, BatchStore, Prepared};
use serde_json::Value;

use crate::args::{DurabilityArg, LimitArgs, parse_run_id, parse_var};
use crate::session::{self, Exit, fail};

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

pub(crate) fn batch(args: BatchArgs) -> Exit {
    let times = args.limits.times();
    let input = match (&args.dir, &args.list) {
        (_, Some(list)) => BatchInput::List(list.clone()),
        (Some(dir), None) => BatchInput::Dir(dir.clone()),
        // clap's required group makes this unreachable; still, no panic.
        (None, None) => return Err(fail(exit::USAGE, "give a DIR or --list FILE")),
    };
    let store = (args.store.as_ref()).map(|path| BatchStore {
        at: StoreAt::new(path, args.durability.get()),
        batch_id: args.batch_id.clone().unwrap_or_else(plan_store::new_run_id),
        resume: args.resume,
        retry_unknown_writes: args.retry_unknown_writes,
    });
    let batch_id = store.as_ref().map(|s| s.batch_id.clone());
    let request = BatchRequest {
        input,
        tools: args.tools,
        replay: args.replay,
        vars: args.vars,
        limits: args.limits.limits(),
        host: HostOptions {
            tool_timeout: times.tool_timeout,
            deadline: times.deadline,
            ..HostOptions::default()
        },
        jobs: args.jobs as usize,
        output: args.output.clone(),
        record_dir: args.record,
        trace_dir: args.trace,
        store,
        lease_warning: session::lease_warning,
    };
    let Prepared {
        batch,
        jobs,
        mut store,
        lines,
    } = request
        .prepare(&mut |w| eprintln!("warning: {w}"))
        .map_err(session::failed)?;
    if let Some(id) = batch_id {
        eprintln!("batch {id}");
    }
    // NB: made once the batch is set up: with its worker threads already there, setting up
    // the host costs the process about 2 MiB more at its peak.
    let runtime = session::multi_thread_runtime()?;
    let bar = crate::progress::progress_bar(jobs.len(), "runs");
    let mut sink = Sink::new(lines, bar);
    let host = batch.host.clone();
    let tally = session::block_on(
        &runtime,
        &host,
        plan_runs::batch::run(&batch, store.as_mut(), jobs, &mut |e| sink.event(e)),
    );
    let unwritten = sink.finish();
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
    eprintln!("{}", plan_render::runs::batch_summary(&tally));
    if let Some(e) = unwritten {
        return Err(fail(exit::CANT_CREATE, e));
    }
    Ok(exit::of_batch(&tally))
}
