//! `planvm batch`: many runs in one process, concurrently, sharing one `Host` (its HTTP
//! client, connection pools and per-tool concurrency limits).
//!
//! Input is a directory (every `*.json`, `*.txt`, `*.pbc` in it, sorted by name, each
//! with the cassette beside it if there is one) or a list file (one run per line:
//! `PLAN [CASSETTE] [NAME=VALUE]...`). Output is one JSON line per run, in order of
//! completion, written as each run finishes; `--record DIR` and `--trace DIR` add a
//! cassette and a trace file per run, named after the run.
//!
//! Why the pieces are shaped this way:
//! - Plans and cassettes are loaded once per path (a list of 10,000 lines naming one plan
//!   compiles it once), lazily, and dropped after their last run: memory follows the
//!   distinct inputs in flight, not the length of the list.
//! - A replay cassette's cursors ("entries with the same key are served in recorded
//!   order") are per run: every run gets `ReplayBackend::fresh` over the shared parse,
//!   behind a small per-run `Host`, so no run's answers depend on another's. Runs without
//!   a cassette use the one shared network `Host`.
//! - Runs are tokio tasks on a multi-threaded runtime; `--jobs` bounds how many are in
//!   flight. Loading happens on the driving thread while the workers run the VMs.

use std::collections::{HashMap, HashSet};
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{ArgGroup, Args};
use indicatif::{ProgressBar, ProgressStyle};
use plan_bytecode::ValidatedProgram;
use plan_host::{
    Backend, CONDITION_TOOL, Host, HostErrorKind, HostOptions, Pool, RecordJournal, Recorder,
    ReplayBackend, RunReport, Tracer,
};
use plan_manifest::Manifest;
use plan_store::{
    GroupStore, OwnedNewRun, Owner, RunStore, SqliteStore, StoreErrorKind, StoreJournal,
};
use plan_value::json;
use plan_vm::Limits;
use serde_json::{Map, Value};

use plan_render::exit;

use crate::args::parse_var;
use crate::load;
use crate::session::fail;
use plan_runs::{ErrorKind, Taken};

/// A list file larger than this is refused (it is read whole).
const MAX_LIST_BYTES: u64 = 256 << 20;
/// Plan files a directory input picks up, by extension.
const PLAN_EXTENSIONS: &[&str] = &["json", "txt", "pbc"];
/// Suffix of the cassette beside a plan.
const CASSETTE_SUFFIX: &str = ".cassette.jsonl";

pub(crate) const BATCH_HELP: &str = "\
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
that is one of the run's own inputs (its plan or cassette) is refused (exit 64).

Exit codes:
  0   every run finished with a final answer
  1   some run failed
  2   usage error, including an unreadable or malformed --tools or --list file, and a
      --store that holds a run of this --batch-id already (continue it with --resume)
  65  some plan or cassette could not be loaded (unreadable, invalid plan, corrupted
      .pbc, malformed cassette), or with --resume what the store holds of a run is
      damaged: those runs are reported as failed lines, the others still run; also a
      malformed --replay cassette (nothing runs)
  66  DIR or the --replay cassette cannot be read, or DIR holds no plan; with --resume,
      no run of the batch is in the store
  75  with --resume, a run of the batch is being run by another live process
  64  --output is one of the inputs, or a run's --record/--trace file would overwrite
      one of its inputs (that run is reported as a failed line)
  73  the --output file cannot be created or written, or a --record/--trace directory
      or one of its per-run files cannot be created (those runs are reported as failed
      lines)";

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
    limits: crate::args::LimitArgs,
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
    #[arg(long, value_name = "ID", requires = "store", value_parser = crate::args::parse_run_id)]
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
    durability: crate::args::DurabilityArg,
}

/// One run to do.
#[derive(Clone, Debug, PartialEq)]
struct Job {
    plan: PathBuf,
    cassette: Option<PathBuf>,
    vars: Vec<(String, Value)>,
    /// Line in the list file (1-based), for list input.
    line: Option<usize>,
    /// The run's name: its --record and --trace files are named after it.
    name: String,
}

pub(crate) fn batch(args: BatchArgs) -> u8 {
    let manifest = match &args.tools {
        Some(path) => match Manifest::load(path) {
            Ok(m) => m,
            Err(e) => return fail(exit::USAGE, format_args!("cannot load tools file: {e}")),
        },
        None => Manifest::builtin(),
    };
    let jobs = match (&args.dir, &args.list) {
        (_, Some(list)) => match read_list(list) {
            Ok(jobs) => jobs,
            Err(msg) => return fail(exit::USAGE, msg),
        },
        (Some(dir), None) => match scan_dir(dir, args.replay.is_none()) {
            Ok(jobs) => jobs,
            Err(msg) => return fail(exit::NO_INPUT, msg),
        },
        // clap's required group makes this unreachable; still, no panic.
        (None, None) => return fail(exit::USAGE, "give a DIR or --list FILE"),
    };
    let mut jobs = jobs;
    name_runs(&mut jobs);
    for dir in [&args.record, &args.trace].into_iter().flatten() {
        if let Err(e) = std::fs::create_dir_all(dir) {
            return fail(
                exit::CANT_CREATE,
                format_args!("cannot create directory {}: {e}", dir.display()),
            );
        }
    }
    let replay = match &args.replay {
        Some(p) => match ReplayBackend::load(p) {
            Ok(r) => {
                for w in r.warnings() {
                    eprintln!("warning: {w}");
                }
                Some(Arc::new(r))
            }
            Err(e) => {
                let code = match e.kind {
                    HostErrorKind::Io => exit::NO_INPUT,
                    _ => exit::DATA_ERR,
                };
                return fail(code, e);
            }
        },
        None => None,
    };
    if let Some(output) = &args.output {
        let mut inputs: Vec<(&str, &Path)> = Vec::new();
        inputs.extend(args.list.as_deref().map(|p| ("the --list file", p)));
        inputs.extend(args.tools.as_deref().map(|p| ("the --tools file", p)));
        inputs.extend(args.replay.as_deref().map(|p| ("the --replay cassette", p)));
        let store_files = args.store.as_deref().map(plan_runs::open::files);
        inputs.extend(
            store_files
                .iter()
                .flatten()
                .map(|p| (crate::session::STORE_FILE, &**p)),
        );
        for j in &jobs {
            inputs.push(("a plan", &j.plan));
            inputs.extend(j.cassette.as_deref().map(|p| ("a cassette", p)));
        }
        if let Err(msg) = crate::session::check_outputs(&[("--output", output)], &inputs) {
            return fail(exit::OUTPUT_IS_INPUT, msg);
        }
    }
    let times = args.limits.times();
    let opts = HostOptions {
        tool_timeout: times.tool_timeout,
        deadline: times.deadline,
        ..HostOptions::default()
    };
    let shared = match Host::new(manifest.clone(), opts.clone()) {
        Ok(h) => Arc::new(h),
        Err(e) => return fail(exit::RUN_FAILED, e),
    };
    for w in shared.warnings() {
        eprintln!("warning: {w}");
    }
    let limits = args.limits.limits();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            return fail(
                exit::RUN_FAILED,
                format_args!("cannot start the async runtime: {e}"),
            );
        }
    };
    let (store, _lease) = match &args.store {
        None => (None, None),
        Some(path) => {
            let durability = args.durability.get();
            let mut store =
                match plan_runs::open::open(path, durability, plan_runs::open::Access::Create)
                    .map_err(crate::session::failed)
                {
                    Ok(s) => s,
                    Err(code) => return code,
                };
            let batch = args.batch_id.clone().unwrap_or_else(plan_store::new_run_id);
            let mut ids = run_ids(&batch, &jobs);
            if args.resume {
                // NB: a list edited since (a comment added at its top) moves every line.
                match store.runs_under(&format!("{batch}.")) {
                    Ok(runs) => pair_by_content(&mut ids, &batch, &jobs, &args.vars, &runs),
                    Err(e) => return crate::session::failed(e),
                }
            }
            // NB: refused up front: a run whose id exists would fail only at its end.
            match store.first_taken(ids.values().map(String::as_str)) {
                Ok(Some(_)) if args.resume => {}
                Ok(None) if args.resume => {
                    return fail(
                        exit::NO_INPUT,
                        format_args!(
                            "no run of batch `{batch}` in {}: nothing to resume (a batch \
                             prints its id, `batch ID`, when it starts)",
                            path.display()
                        ),
                    );
                }
                Ok(None) => {}
                Ok(Some(id)) => {
                    return fail(
                        exit::USAGE,
                        format_args!(
                            "run `{id}` already exists in {}: choose another --batch-id, or \
                             continue that batch with --resume",
                            path.display()
                        ),
                    );
                }
                Err(e) => return crate::session::failed(e),
            }
            // NB: a connection of its own, to read and take each stored run as its turn
            // comes, while the writer thread has the other.
            let resume = if args.resume {
                let store =
                    match plan_runs::open::open(path, durability, plan_runs::open::Access::Create)
                        .map_err(crate::session::failed)
                    {
                        Ok(store) => store,
                        Err(code) => return code,
                    };
                // NB: a batch still going would create the runs this one starts, and
                // fail them at its end: refused as a whole, before anything runs.
                if let Some(run) = ids
                    .values()
                    .filter_map(|id| store.run(id).ok())
                    .find(|run| run.status == plan_store::RunStatus::Running)
                {
                    return fail(
                        exit::TEMP_FAIL,
                        format_args!(
                            "batch `{batch}` is still being run: {}",
                            plan_runs::held_elsewhere(&run)
                        ),
                    );
                }
                Some(Resume {
                    store,
                    retry_unknown_writes: args.retry_unknown_writes,
                })
            } else {
                None
            };
            eprintln!("batch {batch}");
            let owner = Owner::this_process();
            let lease = plan_runs::open::lease(
                path,
                durability,
                owner.clone(),
                crate::session::lease_warning,
            );
            let store = StoreCtx {
                store: GroupStore::spawn(store),
                ids,
                owner,
                resume,
            };
            (Some(store), Some(lease))
        }
    };
    // NB: created only now: a batch refused above leaves an earlier --output file alone.
    let (out, out_name): (Box<dyn Write + Send>, String) = match &args.output {
        Some(p) => match std::fs::File::create(p) {
            Ok(f) => (
                Box::new(std::io::BufWriter::new(f)),
                p.display().to_string(),
            ),
            Err(e) => {
                return fail(
                    exit::CANT_CREATE,
                    format_args!("cannot create {}: {e}", p.display()),
                );
            }
        },
        None => (
            Box::new(std::io::BufWriter::new(std::io::stdout())),
            String::new(),
        ),
    };
    let ctx = Ctx {
        store,
        manifest,
        shared,
        opts,
        limits,
        global_vars: args.vars,
        replay,
        replay_path: args.replay.clone(),
        store_files: args
            .store
            .as_deref()
            .map(plan_runs::open::files)
            .unwrap_or_default(),
        record_dir: args.record.clone(),
        trace_dir: args.trace.clone(),
        jobs: args.jobs as usize,
    };
    let mut sink = Sink {
        out,
        name: out_name,
        error: None,
        text: Vec::new(),
    };
    let writer = ctx.store.as_ref().map(|s| s.store.clone());
    let tally = runtime.block_on(drive(ctx, jobs, &mut sink));
    // NB: every run is written by now; the store's connections are closed before the
    // process exits (the writer's here, the lease's when it is dropped), so that the last
    // one copies the WAL back and removes it (docs/durability.md). The runtime goes first:
    // closing waits for every handle on the store, a task's included.
    drop(runtime);
    if let Some(writer) = writer {
        writer.close();
    }
    if let Err(e) = sink.out.flush() {
        sink.failed(&e);
    }
    let secs = tally.elapsed.as_secs_f64();
    let rate = if secs > 0.0 {
        tally.runs as f64 / secs
    } else {
        0.0
    };
    eprintln!(
        "batch: {} runs, {} ok, {} failed ({} not loaded) in {secs:.2} s ({rate:.1} runs/s)",
        tally.runs,
        tally.ok,
        tally.runs - tally.ok,
        tally.invalid
    );
    if let Some(e) = sink.error {
        return fail(exit::CANT_CREATE, e);
    }
    if tally.over_input > 0 {
        exit::OUTPUT_IS_INPUT
    } else if tally.unwritable > 0 {
        exit::CANT_CREATE
    } else if tally.invalid > 0 {
        exit::DATA_ERR
    } else if tally.ok < tally.runs {
        exit::RUN_FAILED
    } else {
        exit::OK
    }
}

/// The store every run of a `--store` batch is journaled in (group commit: the runs'
/// commit points share transactions).
struct StoreCtx {
    store: GroupStore,
    /// Run name → stored run id.
    ids: HashMap<String, String>,
    owner: Owner,
    /// `--resume`: the batch's runs already in the store are taken up, not created.
    resume: Option<Resume>,
}

struct Resume {
    /// Reads each run and claims it for this process.
    store: SqliteStore,
    retry_unknown_writes: bool,
}

/// What `--resume` does with one run of the batch.
enum Prior {
    /// Not in the store: it runs as a new run.
    New,
    /// Nothing runs: the stored report of a finished run, or why it cannot go on.
    Report(Box<RunReport>),
    /// Nothing runs: what the store holds of it is damaged (the batch exits 65).
    Damaged(Box<RunReport>),
    /// It goes on from its saved state, once claimed.
    Resumed(Box<Resumed>),
}

/// A run about to start: a new one with its loaded plan, or one taken up.
enum Start {
    New(Arc<Plan>),
    Resumed(Box<Resumed>),
}

/// A stored run taken up: where it goes on from (not claimed yet), under its own limits.
struct Resumed {
    going: plan_runs::Going,
    limits: Limits,
}

impl Resume {
    /// What to do with run `id` of the batch, which runs `plan` with `presets` (checked
    /// against what the store holds: a list edited since would pair runs with the wrong
    /// lines).
    fn take_up(&mut self, id: &str, plan: &str, presets: &Map<String, Value>) -> Prior {
        let failed = |why: String| {
            Prior::Report(Box::new(RunReport::failed_before_start(
                why,
                Duration::ZERO,
            )))
        };
        let damaged = |why: String| {
            Prior::Damaged(Box::new(RunReport::failed_before_start(
                why,
                Duration::ZERO,
            )))
        };
        let run = match self.store.run(id) {
            Ok(run) => run,
            Err(e) if e.kind == StoreErrorKind::UnknownRun => return Prior::New,
            Err(e) if e.kind == StoreErrorKind::Damaged => return damaged(e.to_string()),
            Err(e) => return failed(e.to_string()),
        };
        if run.plan != plan || run.parent.is_some() || run.presets != *presets {
            return failed(format!(
                "run `{id}` in the store is not this line's run (it ran {} with its own \
                 variables): resume a batch with the list or directory it ran",
                run.plan
            ));
        }
        let limits = run.limits.clone();
        match plan_runs::take_up(&self.store, &run, &limits, self.retry_unknown_writes) {
            Ok(Taken::Finished(report)) => Prior::Report(report),
            Ok(Taken::Going(going)) => Prior::Resumed(Box::new(Resumed {
                going: *going,
                limits,
            })),
            Err(e) if e.kind == ErrorKind::Damaged => damaged(e.message),
            Err(e) => failed(e.message),
        }
    }
}

/// Everything the runs share.
struct Ctx {
    store: Option<StoreCtx>,
    manifest: Manifest,
    shared: Arc<Host>,
    opts: HostOptions,
    limits: Limits,
    global_vars: Vec<(String, Value)>,
    replay: Option<Arc<ReplayBackend>>,
    /// Where `replay` came from (a run's outputs must not overwrite it).
    replay_path: Option<PathBuf>,
    /// The `--store` file and its sidecars (a run's outputs must not overwrite them).
    store_files: Vec<PathBuf>,
    /// `--record DIR` and `--trace DIR`.
    record_dir: Option<PathBuf>,
    trace_dir: Option<PathBuf>,
    jobs: usize,
}

/// Where the JSON lines go; remembers the first write failure.
struct Sink {
    out: Box<dyn Write + Send>,
    /// The --output file's name (empty for stdout).
    name: String,
    error: Option<String>,
    /// A line's text, kept from one line to the next.
    text: Vec<u8>,
}

impl Sink {
    fn line(&mut self, plan: &Path, line: Option<usize>, run_id: Option<&str>, report: &RunReport) {
        if self.error.is_some() {
            return;
        }
        // NB: written straight into the line, the report's fields after the job's: the
        // same text as building a JSON object of both and printing it, which was a tenth
        // of a batch of replayed runs' instructions.
        let text = &mut self.text;
        text.clear();
        text.extend_from_slice(b"{\"plan\":");
        json::write_str(text, &plan.to_string_lossy());
        if let Some(l) = line {
            let _ = write!(text, ",\"line\":{l}");
        }
        if let Some(id) = run_id {
            text.extend_from_slice(b",\"run_id\":");
            json::write_str(text, id);
        }
        let fields = text.len();
        match serde_json::to_writer(&mut *text, report) {
            // `{"status":...}` goes on as `,"status":...}`.
            Ok(()) if text.len() > fields + 2 => text[fields] = b',',
            _ => {
                text.truncate(fields);
                text.push(b'}');
            }
        }
        text.push(b'\n');
        // NB: flushed per line so a consumer (`tail -f`, a pipe) sees each run as it ends.
        if let Err(e) = self.out.write_all(text).and_then(|()| self.out.flush()) {
            self.failed(&e);
        }
    }

    fn failed(&mut self, e: &std::io::Error) {
        // A closed stdout (`| head`) is the reader's choice, not a failure of the batch.
        if self.name.is_empty() && e.kind() == std::io::ErrorKind::BrokenPipe {
            return;
        }
        let to = if self.name.is_empty() {
            "stdout".to_owned()
        } else {
            self.name.clone()
        };
        self.error
            .get_or_insert(format!("cannot write to {to}: {e}"));
    }
}

#[derive(Debug, Default)]
struct Tally {
    runs: u64,
    ok: u64,
    invalid: u64,
    /// Runs whose --record or --trace file could not be created.
    unwritable: u64,
    /// Runs whose --record or --trace file would have overwritten one of their inputs.
    over_input: u64,
    elapsed: Duration,
}

/// Inputs loaded once per path and kept until their last run has started.
struct Cache<T> {
    /// path → (runs still to start, loaded value once loaded)
    map: HashMap<PathBuf, (usize, Option<T>)>,
}

impl<T: Clone> Cache<T> {
    fn new<'a>(paths: impl Iterator<Item = &'a PathBuf>) -> Self {
        let mut map: HashMap<PathBuf, (usize, Option<T>)> = HashMap::new();
        for p in paths {
            map.entry(p.clone()).or_insert((0, None)).0 += 1;
        }
        Cache { map }
    }

    /// Counts one use of `path` (one that needs no value, or whose value was taken).
    fn skip(&mut self, path: &Path) {
        if let Some((left, _)) = self.map.get_mut(path) {
            *left = left.saturating_sub(1);
            if *left == 0 {
                self.map.remove(path);
            }
        }
    }

    /// The value for `path` (loading it on first use), counting one use.
    fn take(&mut self, path: &Path, load: impl FnOnce(&Path) -> T) -> T {
        let Some((_, slot)) = self.map.get_mut(path) else {
            // Not counted up front (cannot happen): load without caching.
            return load(path);
        };
        let value = slot.get_or_insert_with(|| load(path)).clone();
        self.skip(path);
        value
    }
}

/// Why a run could not start: its message (reported as the run's error).
type NotLoaded = String;

async fn drive(mut ctx: Ctx, jobs: Vec<Job>, sink: &mut Sink) -> Tally {
    let start = Instant::now();
    let mut tally = Tally::default();
    let color = plan_render::color_stderr();
    let bar = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(jobs.len() as u64);
        if let Ok(style) = ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} runs · {per_sec} · eta {eta} {msg}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    } else {
        ProgressBar::hidden()
    };

    let mut programs: Cache<Result<Arc<Plan>, NotLoaded>> =
        Cache::new(jobs.iter().map(|j| &j.plan));
    let mut cassettes: Cache<Result<Arc<ReplayBackend>, NotLoaded>> =
        Cache::new(jobs.iter().filter_map(|j| j.cassette.as_ref()));
    // Each run labelled with (plan, list line, run id) for its line.
    let mut tasks: Pool<Label> = Pool::new(ctx.jobs);
    let mut pending = jobs.into_iter();
    let mut exhausted = false;

    let finish = |sink: &mut Sink,
                  tally: &mut Tally,
                  (plan, line, run_id): (&Path, Option<usize>, Option<&str>),
                  report: &RunReport| {
        tally.runs += 1;
        if report.is_ok() {
            tally.ok += 1;
        }
        sink.line(plan, line, run_id, report);
        bar.inc(1);
        let failed = tally.runs - tally.ok;
        if failed > 0 {
            bar.set_message(format!("· {failed} failed"));
        }
    };

    loop {
        while !exhausted && tasks.has_room() {
            let Some(mut job) = pending.next() else {
                exhausted = true;
                break;
            };
            let vars = merge_vars(&ctx.global_vars, std::mem::take(&mut job.vars));
            let plan_name = job.plan.display().to_string();
            let prior = match ctx.store.as_mut() {
                Some(StoreCtx {
                    resume: Some(resume),
                    ids,
                    ..
                }) => {
                    let id = ids.get(&job.name).map_or("", String::as_str);
                    resume.take_up(id, &plan_name, &vars.iter().cloned().collect())
                }
                _ => Prior::New,
            };
            let damaged = matches!(prior, Prior::Damaged(_));
            // NB: a run taken up goes on with its own stored program, whatever the plan
            // file holds now.
            let start = match prior {
                Prior::New => programs
                    .take(&job.plan, |p| {
                        load_plan(p, &ctx.manifest, color, &bar, ctx.store.is_some()).map(Arc::new)
                    })
                    .map(Start::New),
                Prior::Resumed(r) => {
                    programs.skip(&job.plan);
                    Ok(Start::Resumed(r))
                }
                Prior::Report(report) | Prior::Damaged(report) => {
                    if damaged {
                        tally.invalid += 1;
                    }
                    programs.skip(&job.plan);
                    if let Some(c) = &job.cassette {
                        cassettes.skip(c);
                    }
                    let id = ctx.store.as_ref().and_then(|s| s.ids.get(&job.name));
                    finish(
                        sink,
                        &mut tally,
                        (&job.plan, job.line, id.map(String::as_str)),
                        &report,
                    );
                    continue;
                }
            };
            let replay = match (&job.cassette, &ctx.replay) {
                (Some(c), _) => Some(cassettes.take(c, |p| load_cassette(p, &bar))),
                (None, Some(r)) => Some(Ok(r.clone())),
                (None, None) => None,
            };
            let (start, replay) = match (start, replay.transpose()) {
                (Ok(p), Ok(r)) => (p, r),
                (Err(msg), _) | (_, Err(msg)) => {
                    tally.invalid += 1;
                    let report = RunReport::failed_before_start(msg, Duration::ZERO);
                    finish(sink, &mut tally, (&job.plan, job.line, None), &report);
                    continue;
                }
            };
            let (recorder, mut tracer) = match run_outputs(&ctx, &job) {
                Ok(outputs) => outputs,
                Err((over_input, msg)) => {
                    if over_input {
                        tally.over_input += 1;
                    } else {
                        tally.unwritable += 1;
                    }
                    let report = RunReport::failed_before_start(msg, Duration::ZERO);
                    finish(sink, &mut tally, (&job.plan, job.line, None), &report);
                    continue;
                }
            };
            let tools_of = match &start {
                Start::New(p) => &p.program,
                Start::Resumed(r) => &r.going.program,
            };
            let host = match replay {
                Some(r) => replay_host(&ctx.opts, tools_of, &r),
                None => Ok(ctx.shared.clone()),
            };
            let limits = ctx.limits.clone();
            let stored = ctx.store.as_ref().map(|s| {
                let id = s.ids.get(&job.name).cloned().unwrap_or_default();
                (s.store.clone(), s.owner.clone(), id)
            });
            let run_id = stored.as_ref().map(|(_, _, id)| id.clone());
            // NB: a run taken up is claimed only now, once nothing else can refuse it,
            // so that a refusal leaves it in the store as it was. (On this thread: a
            // claim is one short transaction.)
            if let (Start::Resumed(r), Some(sc), Some(id)) = (&start, &mut ctx.store, &run_id) {
                let claimed = match (&host, &mut sc.resume) {
                    (Err(msg), _) => Err(msg.clone()),
                    (Ok(_), Some(resume)) => resume
                        .store
                        .claim(id, &sc.owner, r.going.seen)
                        .map_err(|e| e.to_string()),
                    (Ok(_), None) => Err("a run taken up without --resume".into()),
                };
                if let Err(why) = claimed {
                    let report = RunReport::failed_before_start(why, Duration::ZERO);
                    finish(sink, &mut tally, (&job.plan, job.line, Some(id)), &report);
                    continue;
                }
            }
            let label = (
                job.plan,
                job.line,
                run_id,
                matches!(start, Start::Resumed(_)),
            );
            tasks.spawn(label, async move {
                let host = match host {
                    Ok(h) => h,
                    Err(msg) => return RunReport::failed_before_start(msg, Duration::ZERO),
                };
                let Some((store, owner, id)) = stored else {
                    let Start::New(program) = start else {
                        // Taken up only from a store; still, no panic.
                        return RunReport::failed_before_start(
                            "a resumed run without its store".into(),
                            Duration::ZERO,
                        );
                    };
                    return plan_host::run_plan_recording(
                        &host,
                        &program.program,
                        vars,
                        limits,
                        &mut tracer,
                        recorder.as_ref(),
                    )
                    .await;
                };
                let program = match start {
                    Start::New(p) => p,
                    Start::Resumed(r) => {
                        return Box::pin(go_on(&host, store, owner, &id, *r, tracer, recorder))
                            .await;
                    }
                };
                // NB: boxed: a run without a store (the common case, thousands in
                // flight) should not carry room for the journal's state in its task.
                Box::pin(async move {
                    let new = OwnedNewRun {
                        id: id.clone(),
                        plan: plan_name,
                        source: program.source.clone(),
                        pbc: program.pbc.clone(),
                        presets: vars.iter().cloned().collect(),
                        limits: limits.clone(),
                        parent: None,
                    };
                    // NB: not waited for: the writer takes writes in order, so the run exists
                    // before its first point; a refused creation fails the run at its end.
                    let owner_again = owner.clone();
                    let created = store.create(new, owner);
                    let mut journal = (
                        &mut tracer,
                        StoreJournal::grouped(store, &id, owner_again, 0, &program.program),
                    );
                    let mut report = plan_host::run_plan_recording(
                        &host,
                        &program.program,
                        vars,
                        limits,
                        &mut journal,
                        recorder.as_ref(),
                    )
                    .await;
                    // NB: the run's line is printed only once its end is on record.
                    let written = match journal.1.written() {
                        Some(durable) => durable.await,
                        None => Ok(()),
                    };
                    if let Err(message) = created.await.map_err(|e| e.message).and(written) {
                        record_failed(&mut report, message);
                    }
                    report
                })
                .await
            });
        }
        let Some(((plan, line, run_id, resumed), mut report)) = tasks.next().await else {
            break;
        };
        // NB: a run taken up reports every call it committed, in this process or before.
        if let (
            true,
            Some(id),
            Some(StoreCtx {
                resume: Some(r), ..
            }),
        ) = (resumed, &run_id, &ctx.store)
            && let Ok(run) = r.store.run(id)
        {
            report.tool_calls = run.tool_calls;
        }
        finish(sink, &mut tally, (&plan, line, run_id.as_deref()), &report);
    }
    bar.finish_and_clear();
    tally.elapsed = start.elapsed();
    tally
}

/// A run of the batch taken up from the store (`--resume`), journaled through the
/// writer thread like a new one.
async fn go_on(
    host: &Host,
    store: GroupStore,
    owner: Owner,
    id: &str,
    r: Resumed,
    mut tracer: Tracer,
    recorder: Option<Recorder>,
) -> RunReport {
    let Resumed { going, limits } = r;
    // NB: its earlier process committed calls too: the store counts them at the end.
    let journal =
        StoreJournal::grouped(store, id, owner, going.steps_done, &going.program).continued();
    let mut journal = (
        &mut tracer,
        (journal, recorder.as_ref().map(RecordJournal::new)),
    );
    let known = plan_store::known_answers(&going.calls);
    let mut report = plan_host::resume_plan(
        host,
        &going.program,
        going.state,
        known,
        limits,
        &mut journal,
    )
    .await;
    if let Some(durable) = journal.1.0.written()
        && let Err(message) = durable.await
    {
        record_failed(&mut report, message);
    }
    report
}

/// `report`, failed because its run could not be stored.
fn record_failed(report: &mut RunReport, message: String) {
    report.status = plan_host::RunStatus::Failed;
    report.error = Some(plan_host::ReportError {
        code: plan_vm::ErrorCode::RecordFailed,
        message,
        seq_no: None,
        line: None,
    });
}

/// The run's `--record` cassette and `--trace` writer, each `DIR/<run name>.<kind>.jsonl`,
/// created (emptied if present). Refused when it is one of the run's inputs: a batch
/// recorded into its own directory must not overwrite the cassettes it replays.
/// Why a run's output files could not be opened: (it would overwrite an input, message).
type NotOpened = (bool, String);

fn run_outputs(ctx: &Ctx, job: &Job) -> Result<(Option<Recorder>, Tracer), NotOpened> {
    let mut inputs: Vec<(&str, &Path)> = vec![("its plan", &job.plan)];
    inputs.extend(job.cassette.as_deref().map(|p| ("its cassette", p)));
    inputs.extend(
        ctx.replay_path
            .as_deref()
            .map(|p| ("the --replay cassette", p)),
    );
    inputs.extend(
        ctx.store_files
            .iter()
            .map(|p| (crate::session::STORE_FILE, &**p)),
    );
    let tool_backends = ctx.manifest.tools.iter().filter_map(|t| t.backend.as_ref());
    for b in tool_backends.chain(ctx.manifest.default_backend.as_ref()) {
        if let plan_manifest::BackendConfig::Replay { cassette: Some(c) } = b {
            inputs.push(("a cassette of the --tools file", Path::new(c)));
        }
    }
    let target = |dir: &Path, kind: &str| -> Result<PathBuf, NotOpened> {
        let path = dir.join(format!("{}.{kind}.jsonl", job.name));
        match plan_render::files::clobbered(&path, &inputs) {
            Some((what, i)) => Err((
                true,
                format!(
                    "the {kind} file {} would overwrite this run's input ({what} {}): choose another directory",
                    path.display(),
                    i.display()
                ),
            )),
            None => Ok(path),
        }
    };
    let recorder = match &ctx.record_dir {
        Some(dir) => {
            let path = target(dir, "cassette")?;
            Some(Recorder::overwrite(&path).map_err(|e| (false, e.message))?)
        }
        None => None,
    };
    let tracer = match &ctx.trace_dir {
        Some(dir) => {
            let path = target(dir, "trace")?;
            let f = std::fs::File::create(&path).map_err(|e| {
                (
                    false,
                    format!("cannot create trace file {}: {e}", path.display()),
                )
            })?;
            Tracer::to_writer(Box::new(std::io::BufWriter::new(f)))
        }
        None => Tracer::none(),
    };
    Ok((recorder, tracer))
}

/// Names each run after its plan: the file name without its extension (`a.llm.txt` →
/// `a.llm`), the whole file name when two plans of a directory share that stem, and
/// `<stem>.line<N>` for a list (one plan may be listed many times).
fn name_runs(jobs: &mut [Job]) {
    let mut stems: HashMap<String, usize> = HashMap::new();
    for j in jobs.iter().filter(|j| j.line.is_none()) {
        *stems.entry(stem(&j.plan)).or_default() += 1;
    }
    let mut taken: HashSet<String> = HashSet::new();
    for j in jobs.iter_mut() {
        let s = stem(&j.plan);
        let name = match j.line {
            Some(n) => format!("{s}.line{n}"),
            None if stems.get(&s).copied().unwrap_or(0) > 1 => j
                .plan
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or(s),
            None => s,
        };
        // Names can still meet (`a.json` and `a.txt` are named by their file names, which
        // is the stem of a third plan `a.json.txt`): number the later ones, so no two runs
        // share a file.
        let mut unique = name.clone();
        let mut k = 1;
        while !taken.insert(unique.clone()) {
            k += 1;
            unique = format!("{name}.{k}");
        }
        j.name = unique;
    }
}

/// A plan's file name without its extension.
fn stem(p: &Path) -> String {
    p.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The stored run id of each run: `<batch>.<name>`, made of the characters run ids
/// allow, numbered (`.2`, `.3`, ...) where two names give one id.
fn run_ids(batch: &str, jobs: &[Job]) -> HashMap<String, String> {
    let mut taken = HashSet::new();
    jobs.iter()
        .map(|j| {
            let base = plan_store::run_id_from(&format!("{batch}.{}", j.name));
            (j.name.clone(), free_id(&base, &mut taken))
        })
        .collect()
}

/// `--resume` of a list: pairs the lines with the batch's `stored` runs (oldest first) by
/// what they run, so that lines moved since (a comment added at the top, lines reordered,
/// added or removed) are not paired with other lines' runs: the lines and the runs of
/// the same plan and variables are paired in order (only runs named after a line of that
/// plan: not another batch's whose ids merely start the same way). A line left over runs
/// anew, under its line number's id numbered past every stored run.
fn pair_by_content(
    ids: &mut HashMap<String, String>,
    batch: &str,
    jobs: &[Job],
    global: &[(String, Value)],
    stored: &[plan_store::RunInfo],
) {
    fn key(plan: &str, vars: &Map<String, Value>) -> Vec<u8> {
        let mut k = plan.as_bytes().to_vec();
        k.push(0);
        plan_value::json::write_canonical_object(&mut k, vars);
        k
    }
    let mut lines: HashMap<Vec<u8>, Vec<&Job>> = HashMap::new();
    for j in jobs.iter().filter(|j| j.line.is_some()) {
        let vars: Map<String, Value> = merge_vars(global, j.vars.clone()).into_iter().collect();
        lines
            .entry(key(&j.plan.display().to_string(), &vars))
            .or_default()
            .push(j);
    }
    let mut runs: HashMap<Vec<u8>, Vec<&str>> = HashMap::new();
    for r in stored.iter().filter(|r| r.parent.is_none()) {
        let named = format!("{batch}.{}.line", stem(Path::new(&r.plan)));
        if r.id.starts_with(&plan_store::run_id_from(&named)) {
            runs.entry(key(&r.plan, &r.presets))
                .or_default()
                .push(&r.id);
        }
    }
    let mut paired: HashMap<&str, &str> = HashMap::new();
    for (k, js) in &lines {
        for (j, id) in js.iter().zip(runs.get(k).into_iter().flatten()) {
            paired.insert(&j.name, id);
        }
    }
    let mut taken: HashSet<String> = stored.iter().map(|r| r.id.clone()).collect();
    for j in jobs.iter().filter(|j| j.line.is_some()) {
        let id = match paired.get(j.name.as_str()) {
            Some(id) => (*id).to_owned(),
            None => free_id(ids.get(&j.name).map_or("", String::as_str), &mut taken),
        };
        ids.insert(j.name.clone(), id);
    }
}

/// `base`, or `base.2`, `base.3`, ...: the first not in `taken`, which it joins. NB: run
/// ids are ASCII (`run_id_from`), so any cut is a char boundary; room is left for the
/// number within the 128 bytes.
fn free_id(base: &str, taken: &mut HashSet<String>) -> String {
    let mut id = base.to_owned();
    let mut k = 1;
    while !taken.insert(id.clone()) {
        k += 1;
        id = format!("{}.{k}", &base[..base.len().min(116)]);
    }
    id
}

/// A loaded plan, shared by its runs.
struct Plan {
    program: ValidatedProgram,
    /// For the store: the source (None for a .pbc file) and the `.pbc` bytes.
    source: Option<String>,
    pbc: Vec<u8>,
}

/// (plan, list line, run id in the store, taken up by `--resume`) of a run in flight.
type Label = (PathBuf, Option<usize>, Option<String>, bool);

fn load_plan(
    path: &Path,
    manifest: &Manifest,
    color: bool,
    bar: &ProgressBar,
    for_store: bool,
) -> Result<Plan, NotLoaded> {
    // NB: called once per distinct plan, not once per run. Warnings (LLM-output repairs)
    // are not printed: across thousands of plans they would bury the errors.
    let opts = plan_compiler::CompileOptions {
        manifest: manifest.clone(),
        ..plan_compiler::CompileOptions::default()
    };
    match load::load_program(path, opts, color) {
        Ok(l) => Ok(Plan {
            pbc: if for_store {
                plan_bytecode::encode(&l.program)
            } else {
                Vec::new()
            },
            source: l.source.filter(|_| for_store),
            program: l.program,
        }),
        Err(load::LoadError::Unreadable(msg)) => Err(msg),
        Err(load::LoadError::Invalid(inv)) => {
            bar.suspend(|| eprint!("{}", inv.rendered));
            Err(inv.summary())
        }
    }
}

fn load_cassette(path: &Path, bar: &ProgressBar) -> Result<Arc<ReplayBackend>, NotLoaded> {
    let r = ReplayBackend::load(path).map_err(|e| e.message)?;
    // NB: once per cassette, however many runs replay it.
    for w in r.warnings() {
        bar.suspend(|| eprintln!("warning: {w}"));
    }
    Ok(Arc::new(r))
}

/// A host serving every tool of `program` from a fresh replay of `cassette`: its own
/// cursors, the shared parse. Nothing else in it is used, so its manifest is empty.
fn replay_host(
    opts: &HostOptions,
    program: &ValidatedProgram,
    cassette: &ReplayBackend,
) -> Result<Arc<Host>, NotLoaded> {
    let manifest = Manifest {
        tools: Vec::new(),
        default_backend: None,
        planner: None,
    };
    let host = Host::new(manifest, opts.clone()).map_err(|e| e.message)?;
    let backend: Arc<dyn Backend> = Arc::new(cassette.fresh());
    for t in &program.tools {
        host.set_backend(&t.name, backend.clone());
    }
    host.set_backend(CONDITION_TOOL, backend);
    Ok(Arc::new(host))
}

/// `--var`s, then the line's own pairs; a later pair for the same name wins.
fn merge_vars(global: &[(String, Value)], own: Vec<(String, Value)>) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = global
        .iter()
        .filter(|(n, _)| !own.iter().any(|(m, _)| m == n))
        .cloned()
        .collect();
    out.extend(own);
    out
}

/// Plan files of `dir`, sorted by name, each with its sibling cassette when `siblings`.
fn scan_dir(dir: &Path, siblings: bool) -> Result<Vec<Job>, String> {
    let shown = dir.display();
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot read {shown}: {e}"))?;
        // NB: names that are not UTF-8 cannot be shown faithfully in the JSON output.
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let ext = Path::new(&name).extension().and_then(|e| e.to_str());
        let is_plan = ext.is_some_and(|e| PLAN_EXTENSIONS.contains(&e))
            && !name.starts_with('.')
            && std::fs::metadata(entry.path()).is_ok_and(|m| m.is_file());
        if is_plan {
            names.push(name);
        }
    }
    if names.is_empty() {
        return Err(format!("no plan files (*.json, *.txt, *.pbc) in {shown}"));
    }
    names.sort();
    Ok(names
        .into_iter()
        .map(|name| Job {
            cassette: if siblings {
                sibling_cassette(dir, &name)
            } else {
                None
            },
            plan: dir.join(name),
            vars: Vec::new(),
            line: None,
            name: String::new(),
        })
        .collect())
}

/// `<stem>.cassette.jsonl` beside `name`, trying the longest stem first (`a.llm.txt`:
/// `a.llm.cassette.jsonl`, then `a.cassette.jsonl`), so variants of one plan can share
/// its cassette.
fn sibling_cassette(dir: &Path, name: &str) -> Option<PathBuf> {
    let mut stem = name;
    while let Some((shorter, _)) = stem.rsplit_once('.') {
        if shorter.is_empty() {
            break;
        }
        let candidate = dir.join(format!("{shorter}{CASSETTE_SUFFIX}"));
        if candidate.is_file() {
            return Some(candidate);
        }
        stem = shorter;
    }
    None
}

fn read_list(path: &Path) -> Result<Vec<Job>, String> {
    let shown = path.display().to_string();
    let f = std::fs::File::open(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let mut bytes = Vec::new();
    f.take(MAX_LIST_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if bytes.len() as u64 > MAX_LIST_BYTES {
        return Err(format!("{shown} is larger than {MAX_LIST_BYTES} bytes"));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        format!(
            "{shown}: not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })?;
    let base = path.parent().unwrap_or(Path::new(""));
    parse_list(&text, base, &shown).map_err(|errs| errs.join("\n"))
}

/// Parses a list file; every malformed line is reported (`name:line: message`).
fn parse_list(text: &str, base: &Path, name: &str) -> Result<Vec<Job>, Vec<String>> {
    let mut jobs = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        match parse_line(line, base) {
            Ok(Some(mut job)) => {
                job.line = Some(n);
                jobs.push(job);
            }
            Ok(None) => {}
            Err(msg) => errors.push(format!("{name}:{n}: {msg}")),
        }
    }
    if errors.is_empty() {
        Ok(jobs)
    } else {
        Err(errors)
    }
}

fn parse_line(line: &str, base: &Path) -> Result<Option<Job>, String> {
    let fields = split_fields(line)?;
    let mut fields = fields.into_iter();
    let Some(plan) = fields.next() else {
        return Ok(None);
    };
    if is_var(&plan) {
        return Err(format!(
            "expected the plan's path first, got the variable `{plan}`"
        ));
    }
    let resolve = |field: &str| -> Result<PathBuf, String> {
        let p = PathBuf::from(unquote(field)?);
        Ok(if p.is_absolute() { p } else { base.join(p) })
    };
    let mut job = Job {
        plan: resolve(&plan)?,
        cassette: None,
        vars: Vec::new(),
        line: None,
        name: String::new(),
    };
    for (k, field) in fields.enumerate() {
        if is_var(&field) {
            job.vars.push(parse_var(&field)?);
        } else if field.starts_with('=') {
            return Err(format!("`{field}`: the variable name before `=` is empty"));
        } else if k == 0 {
            job.cassette = Some(resolve(&field)?);
        } else {
            return Err(format!(
                "unexpected `{field}`: expected NAME=VALUE (a cassette comes right after the plan)"
            ));
        }
    }
    Ok(Some(job))
}

/// `NAME=...` with NAME made of ASCII letters, digits and `_` (a path has `/` or `.`).
fn is_var(field: &str) -> bool {
    field.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// A path field: a JSON string when quoted, else as written.
fn unquote(field: &str) -> Result<String, String> {
    if field.starts_with('"') {
        serde_json::from_str::<String>(field).map_err(|e| format!("bad quoted path {field}: {e}"))
    } else {
        Ok(field.to_owned())
    }
}

/// Splits on whitespace outside double quotes (kept, with their backslash escapes, for
/// the field's own parser); a field starting with `#` ends the line.
fn split_fields(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut in_quotes = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if in_quotes {
            cur.push(c);
            match c {
                '\\' => {
                    if let Some(next) = chars.next() {
                        cur.push(next);
                    }
                }
                '"' => in_quotes = false,
                _ => {}
            }
        } else if c.is_whitespace() {
            if !cur.is_empty() {
                fields.push(std::mem::take(&mut cur));
            }
        } else if c == '#' && cur.is_empty() {
            return Ok(fields);
        } else {
            if c == '"' {
                in_quotes = true;
            }
            cur.push(c);
        }
    }
    if in_quotes {
        return Err("unterminated double quote".into());
    }
    if !cur.is_empty() {
        fields.push(cur);
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn list_lines_table() {
        let base = Path::new("/lists");
        // (line, plan, cassette, vars) or the error's start
        let ok: &[(&str, &str, Option<&str>, Value)] = &[
            ("a.json", "/lists/a.json", None, json!([])),
            ("  a.json   # note", "/lists/a.json", None, json!([])),
            (
                "sub/a.json c.jsonl n=3 s=hi",
                "/lists/sub/a.json",
                Some("/lists/c.jsonl"),
                json!([["n", 3], ["s", "hi"]]),
            ),
            (
                "/abs/a.json q=\"two words\" o={\"k\":[1,2]}",
                "/abs/a.json",
                None,
                json!([["q", "two words"], ["o", {"k": [1, 2]}]]),
            ),
            (
                "\"my plan.json\" \"my cassette.jsonl\" t=\"say \\\"hi\\\"\"",
                "/lists/my plan.json",
                Some("/lists/my cassette.jsonl"),
                json!([["t", "say \"hi\""]]),
            ),
            (
                "a.json tag=#1",
                "/lists/a.json",
                None,
                json!([["tag", "#1"]]),
            ),
        ];
        for (line, plan, cassette, vars) in ok {
            let job = parse_line(line, base)
                .unwrap_or_else(|e| panic!("{line}: {e}"))
                .unwrap_or_else(|| panic!("{line}: no job"));
            assert_eq!(job.plan, PathBuf::from(plan), "{line}");
            assert_eq!(job.cassette, cassette.map(PathBuf::from), "{line}");
            let got: Vec<Value> = job.vars.iter().map(|(n, v)| json!([n, v])).collect();
            assert_eq!(Value::Array(got), *vars, "{line}");
        }
        for blank in ["", "   ", "# comment", "  #x y z"] {
            assert_eq!(parse_line(blank, base), Ok(None), "{blank:?}");
        }
        let bad = [
            ("a.json c.jsonl d.jsonl", "unexpected `d.jsonl`"),
            ("n=3 a.json", "expected the plan's path first"),
            ("a.json q=\"open", "unterminated double quote"),
            ("a.json =3", "`=3`: the variable name before `=` is empty"),
        ];
        for (line, want) in bad {
            let err = parse_line(line, base).expect_err(line);
            assert!(err.starts_with(want), "{line}: {err}");
        }
    }

    #[test]
    fn list_errors_name_every_bad_line() {
        let text = "a.json\nb.json x y\n\nc.json \"\n";
        let errs = parse_list(text, Path::new(""), "runs.txt").expect_err("two bad lines");
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].starts_with("runs.txt:2: "), "{errs:?}");
        assert!(errs[1].starts_with("runs.txt:4: "), "{errs:?}");
        let jobs = parse_list("# runs\na.json\n\nb.json\n", Path::new("d"), "l").unwrap();
        let lines: Vec<_> = jobs.iter().map(|j| (j.plan.clone(), j.line)).collect();
        assert_eq!(
            lines,
            vec![
                (PathBuf::from("d/a.json"), Some(2)),
                (PathBuf::from("d/b.json"), Some(4))
            ]
        );
    }

    #[test]
    fn line_vars_override_global_ones() {
        let global = vec![("a".to_owned(), json!(1)), ("b".to_owned(), json!(2))];
        let own = vec![("b".to_owned(), json!(3))];
        assert_eq!(
            merge_vars(&global, own),
            vec![("a".to_owned(), json!(1)), ("b".to_owned(), json!(3))]
        );
    }

    #[test]
    fn cache_loads_once_and_forgets_after_the_last_use() {
        let paths = [PathBuf::from("p"), PathBuf::from("p"), PathBuf::from("q")];
        let mut cache: Cache<u32> = Cache::new(paths.iter());
        let mut loads = 0;
        let mut load = |_: &Path| {
            loads += 1;
            loads
        };
        assert_eq!(cache.take(Path::new("p"), &mut load), 1);
        assert_eq!(cache.take(Path::new("p"), &mut load), 1);
        assert!(!cache.map.contains_key(Path::new("p")));
        assert_eq!(cache.take(Path::new("q"), &mut load), 2);
        assert!(cache.map.is_empty());
    }

    #[test]
    fn run_names_never_meet() {
        let job = |plan: &str, line: Option<usize>| Job {
            plan: PathBuf::from(plan),
            cassette: None,
            vars: Vec::new(),
            line,
            name: String::new(),
        };
        let mut jobs = vec![
            job("d/a.json", None),
            job("d/a.txt", None),
            job("d/a.json.txt", None),
            job("d/b.llm.txt", None),
            job("d/a.json", Some(3)),
        ];
        name_runs(&mut jobs);
        let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, ["a.json", "a.txt", "a.json.2", "b.llm", "a.line3"]);
    }

    #[test]
    fn sibling_cassettes_prefer_the_longest_stem() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for f in [
            "a.json",
            "a.llm.txt",
            "a.cassette.jsonl",
            "b.v2.json",
            "b.v2.cassette.jsonl",
        ] {
            std::fs::write(d.join(f), "").unwrap();
        }
        assert_eq!(
            sibling_cassette(d, "a.json"),
            Some(d.join("a.cassette.jsonl"))
        );
        assert_eq!(
            sibling_cassette(d, "a.llm.txt"),
            Some(d.join("a.cassette.jsonl"))
        );
        assert_eq!(
            sibling_cassette(d, "b.v2.json"),
            Some(d.join("b.v2.cassette.jsonl"))
        );
        assert_eq!(sibling_cassette(d, "c.json"), None);
        assert_eq!(sibling_cassette(d, ".json"), None);
    }
}

#[cfg(test)]
mod run_id_tests {
    use super::{Job, run_ids};

    fn job(name: &str) -> Job {
        Job {
            plan: name.into(),
            cassette: None,
            vars: Vec::new(),
            line: None,
            name: name.into(),
        }
    }

    #[test]
    fn names_that_map_to_one_id_are_numbered() {
        let long = "x".repeat(200);
        let jobs = [
            job("my plan"),
            job("my_plan"),
            job(&format!("{long}a")),
            job(&format!("{long}b")),
        ];
        let ids = run_ids("b", &jobs);
        assert_eq!(ids["my plan"], "b.my_plan");
        assert_eq!(ids["my_plan"], "b.my_plan.2");
        let (a, b) = (&ids[&format!("{long}a")], &ids[&format!("{long}b")]);
        assert_ne!(a, b);
        assert!(a.len() <= 128 && b.len() <= 128);
    }
}
