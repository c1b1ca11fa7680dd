//! Durable runs on the command line: `run --store`, `resume`, `runs list|show`. The store
//! itself is `plan_store`; this module opens it, keeps the run's lease alive, and prints.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use plan_bytecode::ValidatedProgram;
pub(crate) use plan_runs::Taken;
use plan_runs::open::Access;
use plan_runs::{ErrorKind, GoOn};
use plan_store::replay::NotBefore;
use plan_store::{
    Durability, NewRun, OwnedNewRun, Owner, RunInfo, RunStore, SqliteStore, StoreError,
    StoreJournal,
};
use plan_vm::{Limits, VmState};
use serde_json::{Map, Value, json};

use crate::{Format, exit, fail, load::Loaded};

/// Store options of `run` (and `batch`).
#[derive(Args, Debug, Clone)]
pub(crate) struct StoreArgs {
    /// Journal the run in this store (an SQLite file, created if missing) so that it can
    /// be resumed after a crash, inspected and branched. Default: $PLANVM_STORE.
    #[arg(long, value_name = "DB", env = "PLANVM_STORE")]
    pub(crate) store: Option<PathBuf>,
    /// The stored run's id (default: a new UUID v7). Letters, digits, `.`, `_`, `-`.
    #[arg(long, value_name = "ID", requires = "store", value_parser = parse_run_id)]
    pub(crate) run_id: Option<String>,
    #[command(flatten)]
    pub(crate) durability: DurabilityArg,
}

#[derive(Args, Debug, Clone, Copy)]
pub(crate) struct DurabilityArg {
    /// What each commit survives: `normal`, a crash of planvm (SQLite synchronous=NORMAL);
    /// `full`, also a power loss (synchronous=FULL, slower).
    #[arg(long, value_enum, default_value_t = DurabilityLevel::Normal)]
    durability: DurabilityLevel,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum DurabilityLevel {
    Normal,
    Full,
}

impl DurabilityArg {
    pub(crate) fn get(self) -> Durability {
        match self.durability {
            DurabilityLevel::Normal => Durability::Normal,
            DurabilityLevel::Full => Durability::Full,
        }
    }
}

pub(crate) fn parse_run_id(s: &str) -> Result<String, String> {
    plan_store::check_run_id(s)?;
    Ok(s.to_owned())
}

#[derive(Args, Debug)]
pub(crate) struct ResumeArgs {
    /// The run to continue.
    #[arg(value_name = "ID")]
    id: String,
    /// The store holding it. Default: $PLANVM_STORE.
    #[arg(long, value_name = "DB", env = "PLANVM_STORE")]
    store: PathBuf,
    /// Tools file (as for `run`); needed when the run used one.
    #[arg(long, value_name = "FILE.toml")]
    tools: Option<PathBuf>,
    /// Serve every tool call the run still has to make from this cassette.
    #[arg(long, value_name = "CASSETTE")]
    replay: Option<PathBuf>,
    /// Re-send `write` calls that were in flight when the run stopped (their outcome is
    /// unknown: they may have taken effect).
    #[arg(long)]
    retry_unknown_writes: bool,
    /// Maximum instructions executed in all (default: the run's own limit).
    #[arg(long, value_name = "N")]
    max_steps: Option<u64>,
    /// Maximum bytes held in all variables together (default: the run's own).
    #[arg(long, value_name = "BYTES")]
    max_bytes: Option<u64>,
    /// Maximum tool calls in flight at once (default: the run's own).
    #[arg(long, value_name = "N")]
    max_concurrency: Option<u32>,
    /// Deadline of this resumption, in seconds.
    #[arg(long, value_name = "SECS", value_parser = crate::parse_secs)]
    timeout: Option<Duration>,
    /// Limit on one tool call, retries included, in seconds.
    #[arg(long, value_name = "SECS", value_parser = crate::parse_secs)]
    tool_timeout: Option<Duration>,
    #[command(flatten)]
    output: crate::OutputArgs,
    #[command(flatten)]
    durability: DurabilityArg,
}

#[derive(Args, Debug)]
pub(crate) struct BranchArgs {
    /// The run to branch from (it is not changed).
    #[arg(value_name = "ID")]
    id: String,
    /// Branch just before the parent first executed this seq_no; the new plan continues
    /// at its own instruction with this seq_no.
    #[arg(long, value_name = "SEQ", allow_negative_numbers = true)]
    at: i64,
    /// The new plan (source or .pbc), verified with the variables that exist at the
    /// branch point counted as set before anything runs.
    #[arg(long, value_name = "NEW_PLAN")]
    plan: PathBuf,
    /// The store holding the parent; the branch is stored there too. Default:
    /// $PLANVM_STORE.
    #[arg(long, value_name = "DB", env = "PLANVM_STORE")]
    store: PathBuf,
    /// The new run's id (default: a new UUID v7).
    #[arg(long, value_name = "ID", value_parser = parse_run_id)]
    run_id: Option<String>,
    /// Tools file (as for `run`).
    #[arg(long, value_name = "FILE.toml")]
    tools: Option<PathBuf>,
    /// Serve every tool call from this cassette (no network).
    #[arg(long, value_name = "CASSETTE")]
    replay: Option<PathBuf>,
    #[command(flatten)]
    limits: crate::LimitArgs,
    #[command(flatten)]
    output: crate::OutputArgs,
    #[command(flatten)]
    durability: DurabilityArg,
}

#[derive(Subcommand, Debug)]
pub(crate) enum RunsCommand {
    /// One line per run: id, status (running, ok, failed, interrupted), steps, tool
    /// calls, last update, plan.
    List {
        /// The store. Default: $PLANVM_STORE.
        #[arg(long, value_name = "DB", env = "PLANVM_STORE")]
        store: PathBuf,
        /// `json`: one JSON object per line.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// A run's committed steps with the variables they wrote, and its tool calls.
    Show {
        #[arg(value_name = "ID")]
        id: String,
        /// The store. Default: $PLANVM_STORE.
        #[arg(long, value_name = "DB", env = "PLANVM_STORE")]
        store: PathBuf,
        /// Print every variable as it was just before the run first executed seq_no SEQ
        /// (found by running the plan again on its stored answers; nothing is sent).
        #[arg(long, value_name = "SEQ", allow_negative_numbers = true)]
        at: Option<i64>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

/// `--trace` as the one output of `resume` and `branch`.
fn trace_output(output: &crate::OutputArgs) -> Vec<(&'static str, &Path)> {
    output
        .trace
        .as_deref()
        .map(|p| ("--trace", p))
        .into_iter()
        .collect()
}

/// The exit code for a failure of the engine.
pub(crate) fn engine_exit(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::NotAStore | ErrorKind::Damaged => exit::DATA_ERR,
        ErrorKind::UnknownRun | ErrorKind::NoStore => exit::NO_INPUT,
        ErrorKind::DuplicateRun | ErrorKind::UnknownWrites => exit::USAGE,
        ErrorKind::Busy => exit::TEMP_FAIL,
        ErrorKind::ReadOnly | ErrorKind::Io => exit::IO_ERR,
    }
}

/// Reports `e` and returns its exit code.
pub(crate) fn failed(e: impl Into<plan_runs::Error>) -> u8 {
    let e = e.into();
    fail(engine_exit(e.kind), e)
}

/// The exit code for a store failure.
pub(crate) fn store_exit(e: &StoreError) -> u8 {
    engine_exit(plan_runs::Error::from(e.clone()).kind)
}

pub(crate) fn open(path: &Path, durability: Durability) -> Result<SqliteStore, u8> {
    plan_runs::open::open(path, durability, Access::Create).map_err(failed)
}

/// The lease of this process's runs in the store at `path`.
pub(crate) fn lease(path: &Path, durability: Durability, owner: Owner) -> plan_runs::Lease {
    plan_runs::open::lease(path, durability, owner, |e| {
        eprintln!("warning: cannot renew the run's lease: {e}");
    })
}

/// A stored run in progress: the store, the run's id, and the thread renewing its lease.
pub(crate) struct StoredRun {
    store: SqliteStore,
    id: String,
    _lease: plan_runs::Lease,
}

impl StoredRun {
    pub(crate) fn journal(&mut self, program: &ValidatedProgram) -> StoreJournal<'_> {
        let owner = Owner::this_process();
        StoreJournal::new(&mut self.store, &self.id, owner, 0, program)
    }
}

/// Creates the stored run for `run --store` and prints `run ID` on stderr.
pub(crate) fn start_run(
    path: &Path,
    args: &StoreArgs,
    plan: &Path,
    loaded: &Loaded,
    presets: &Map<String, Value>,
    limits: &Limits,
) -> Result<StoredRun, u8> {
    let id = args.run_id.clone().unwrap_or_else(plan_store::new_run_id);
    let new = NewRun {
        id: &id,
        plan: &plan.display().to_string(),
        source: loaded.source.as_deref(),
        pbc: &plan_bytecode::encode(&loaded.program),
        presets,
        limits,
        parent: None,
    };
    create_run(path, args.durability.get(), &new).map_err(failed)
}

/// Creates a stored run, prints `run ID` on stderr and starts renewing its lease.
pub(crate) fn create_run(
    path: &Path,
    durability: Durability,
    new: &NewRun<'_>,
) -> Result<StoredRun, plan_runs::Error> {
    let mut store = plan_runs::open::open(path, durability, Access::Create)?;
    let owner = Owner::this_process();
    store.create_run(new, &owner)?;
    eprintln!("run {}", new.id);
    Ok(StoredRun {
        store,
        id: new.id.to_owned(),
        _lease: lease(path, durability, owner),
    })
}

/// The store at `path` and its run `id`.
fn open_run(path: &Path, durability: Durability, id: &str) -> Result<(SqliteStore, RunInfo), u8> {
    let store = plan_runs::open::open(path, durability, Access::Existing).map_err(failed)?;
    let run = store.run(id).map_err(failed)?;
    Ok((store, run))
}

/// A stored run with its program and calls, to branch from.
struct Stored {
    store: SqliteStore,
    run: RunInfo,
    program: ValidatedProgram,
    calls: Vec<plan_store::CallRow>,
}

fn load_run(path: &Path, durability: Durability, id: &str) -> Result<Stored, u8> {
    let (store, run) = open_run(path, durability, id)?;
    let (program, _, calls) = plan_runs::read_run(&store, &run).map_err(failed)?;
    Ok(Stored {
        store,
        run,
        program,
        calls,
    })
}

pub(crate) fn resume(args: ResumeArgs) -> u8 {
    let durability = args.durability.get();
    let (mut store, run) = match open_run(&args.store, durability, &args.id) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let limits = Limits {
        max_steps: args.max_steps.unwrap_or(run.limits.max_steps),
        max_total_bytes: args.max_bytes.unwrap_or(run.limits.max_total_bytes),
        max_concurrency: args.max_concurrency.unwrap_or(run.limits.max_concurrency),
        ..run.limits.clone()
    };
    let going = match plan_runs::take_up(&store, &run, &limits, args.retry_unknown_writes) {
        Ok(Taken::Finished(report)) => {
            crate::print_report(&report, args.output.format);
            return exit::OK;
        }
        Ok(Taken::Going(going)) => going,
        Err(e) => return failed(e),
    };
    if let Err(code) = crate::refuse_clobbering(
        None,
        args.tools.as_deref(),
        args.replay.as_deref(),
        Some(&args.store),
        &trace_output(&args.output),
    ) {
        return code;
    }
    let manifest = match crate::load_manifest(args.tools.as_deref()) {
        Ok(m) => m,
        Err(code) => return code,
    };
    let plan_runs::Going {
        program,
        seen,
        calls,
        steps_done,
        state,
    } = *going;
    // NB: what was read above must still be the run's state when it is claimed.
    let run_id = run.id.clone();
    continue_stored(Continue {
        start: Box::new(move |store: &mut SqliteStore| {
            store.claim(&run_id, &Owner::this_process(), seen)
        }),
        path: &args.store,
        durability,
        store: &mut store,
        id: &run.id,
        steps_done,
        program: &program,
        state,
        known: plan_store::known_answers(&calls),
        limits,
        manifest,
        replay: args.replay.clone(),
        times: crate::Times {
            deadline: args.timeout,
            tool_timeout: args.tool_timeout,
        },
        trace: args.output.trace.as_deref(),
        warnings: &[],
        format: args.output.format,
    })
}

/// Takes the run for this process (claims it, or creates it) once everything else is
/// ready: a command refused before that leaves the store as it was.
type Start<'a> = Box<dyn FnOnce(&mut SqliteStore) -> Result<(), plan_store::StoreError> + 'a>;

/// A stored run about to go on: a resumed run, or a new branch.
struct Continue<'a> {
    start: Start<'a>,
    path: &'a Path,
    durability: Durability,
    store: &'a mut SqliteStore,
    id: &'a str,
    /// Instructions the saved state had committed.
    steps_done: u64,
    program: &'a ValidatedProgram,
    state: VmState,
    known: Vec<plan_host::CassetteEntry>,
    limits: Limits,
    manifest: plan_manifest::Manifest,
    replay: Option<PathBuf>,
    times: crate::Times,
    trace: Option<&'a Path>,
    /// Compiler warnings, for the trace.
    warnings: &'a [String],
    format: Format,
}

/// Runs `c` to its end, journaled in its store, and prints it like `run`.
fn continue_stored(c: Continue<'_>) -> u8 {
    let crate::Session {
        mut tracer,
        status_line,
        host,
        runtime,
    } = match crate::start_session(
        c.manifest,
        c.replay,
        None,
        &c.times,
        (c.trace, c.format),
        c.warnings,
    ) {
        Ok(s) => s,
        Err(code) => return code,
    };
    if let Err(e) = (c.start)(&mut *c.store) {
        return failed(e);
    }
    eprintln!("run {}", c.id);
    let owner = Owner::this_process();
    let _lease = lease(c.path, c.durability, owner.clone());
    let run = GoOn {
        id: c.id,
        steps_done: c.steps_done,
        program: c.program,
        state: c.state,
        known: c.known,
        limits: c.limits,
    };
    let report = runtime.block_on(plan_runs::go_on(
        &mut *c.store,
        owner,
        run,
        &host,
        &mut tracer,
    ));
    crate::finish(report, c.format, &tracer, status_line)
}

/// Fails with why a stored run's variables before a point cannot be given: a damaged
/// store (65, named), or a point the run never reached (2).
fn not_before(store: &SqliteStore, id: &str, e: &NotBefore) -> u8 {
    match e {
        NotBefore::Damaged(_) => fail(
            exit::DATA_ERR,
            format_args!("{}: run `{id}`: {e}", store.name()),
        ),
        NotBefore::NotReached(_) => fail(exit::USAGE, format_args!("run `{id}`: {e}")),
    }
}

pub(crate) fn branch(args: BranchArgs) -> u8 {
    if let Err(code) = crate::refuse_clobbering(
        Some(("the --plan file", &args.plan)),
        args.tools.as_deref(),
        args.replay.as_deref(),
        Some(&args.store),
        &trace_output(&args.output),
    ) {
        return code;
    }
    let durability = args.durability.get();
    let Stored {
        mut store,
        run: parent,
        program: parent_program,
        calls,
        ..
    } = match load_run(&args.store, durability, &args.id) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let vars = match plan_store::replay::variables_before(
        &parent_program,
        &parent.presets,
        &parent.limits,
        parent.branch_seq,
        &calls,
        args.at,
    ) {
        Ok(v) => v,
        Err(e @ NotBefore::Damaged(_)) => return not_before(&store, &parent.id, &e),
        Err(e) => {
            return fail(
                exit::USAGE,
                format_args!(
                    "cannot branch run `{}` at seq_no {}: {e}",
                    parent.id, args.at
                ),
            );
        }
    };
    let manifest = match crate::load_manifest(args.tools.as_deref()) {
        Ok(m) => m,
        Err(code) => return code,
    };
    let entry = plan_compiler::Entry {
        seq_no: args.at,
        vars: vars.keys().cloned().collect(),
    };
    let color = plan_render::color_stderr();
    let opts = plan_compiler::CompileOptions {
        manifest: manifest.clone(),
        entry: Some(entry),
        ..plan_compiler::CompileOptions::default()
    };
    let loaded = match crate::load::load_program(&args.plan, opts, color) {
        Ok(l) => {
            eprint!("{}", l.rendered);
            l
        }
        Err(crate::load::LoadError::Unreadable(msg)) => return fail(exit::NO_INPUT, msg),
        Err(crate::load::LoadError::Invalid(inv)) => {
            eprint!("{}", inv.rendered);
            return fail(exit::DATA_ERR, inv.message);
        }
    };
    let limits = args.limits.limits();
    let state =
        match plan_store::replay::fresh_state(&loaded.program, &vars, &limits, Some(args.at)) {
            Ok(s) => s,
            Err(e) => return fail(exit::DATA_ERR, format_args!("{}: {e}", args.plan.display())),
        };
    let id = args.run_id.clone().unwrap_or_else(plan_store::new_run_id);
    let pbc = plan_bytecode::encode(&loaded.program);
    let new = OwnedNewRun {
        id: id.clone(),
        plan: args.plan.display().to_string(),
        source: loaded.source.clone(),
        pbc,
        presets: vars,
        limits: limits.clone(),
        parent: Some((parent.id.clone(), args.at)),
    };
    continue_stored(Continue {
        start: Box::new(move |store: &mut SqliteStore| {
            store.create_run(&new.borrow(), &Owner::this_process())
        }),
        path: &args.store,
        durability,
        store: &mut store,
        id: &id,
        steps_done: 0,
        program: &loaded.program,
        state,
        known: Vec::new(),
        limits,
        manifest,
        replay: args.replay.clone(),
        times: args.limits.times(),
        trace: args.output.trace.as_deref(),
        warnings: &loaded.warnings,
        format: args.output.format,
    })
}

pub(crate) fn runs(cmd: RunsCommand) -> u8 {
    match cmd {
        RunsCommand::List { store, format } => list(&store, format),
        RunsCommand::Show {
            id,
            store,
            at,
            format,
        } => show(&store, &id, at, format),
    }
}

/// Opens the store at `path` to read it (`runs list`, `runs show`), read-only where this
/// process may not write it.
fn open_to_read(path: &Path) -> Result<SqliteStore, u8> {
    plan_runs::open::open(path, Durability::Normal, Access::Read).map_err(failed)
}

/// Reports `e`, a failure to read `store`, or, when a process wrote the store while this
/// one read it as it is (a read that may mix two states), that.
fn read_failed(store: &SqliteStore, e: StoreError) -> u8 {
    let e = store.unchanged().err().unwrap_or(e);
    fail(store_exit(&e), e)
}

fn list(path: &Path, format: Format) -> u8 {
    let store = match open_to_read(path) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let runs = match store
        .runs()
        .and_then(|runs| store.unchanged().map(|()| runs))
    {
        Ok(r) => r,
        Err(e) => return read_failed(&store, e),
    };
    let mut out = std::io::stdout().lock();
    let width = runs.iter().map(|r| r.id.len()).max().unwrap_or(0);
    for r in &runs {
        let line = match format {
            Format::Json => json!({
                "id": r.id,
                "status": r.status,
                "plan": r.plan,
                "created_at": utc(r.created_at),
                "updated_at": utc(r.updated_at),
                "steps": r.steps,
                "tool_calls": r.tool_calls,
                "parent": r.parent,
                "branch_seq": r.branch_seq,
            })
            .to_string(),
            Format::Text => format!(
                "{:<width$}  {:<11}  {:>6} steps  {:>4} calls  {}  {}{}",
                r.id,
                r.status.as_str(),
                r.steps,
                r.tool_calls,
                utc(r.updated_at),
                r.plan,
                match (&r.parent, r.branch_seq) {
                    (Some(p), Some(s)) => format!("  (branch of {p} at seq_no {s})"),
                    _ => String::new(),
                }
            ),
        };
        if writeln!(out, "{line}").is_err() {
            break;
        }
    }
    exit::OK
}

/// Characters of a value shown by `runs show` in text form.
const SHOW_PREVIEW: usize = 100;

fn show(path: &Path, id: &str, at: Option<i64>, format: Format) -> u8 {
    let store = match open_to_read(path) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let (run, calls) = match store.run(id).and_then(|run| Ok((run, store.calls(id)?))) {
        Ok(x) => x,
        Err(e) => return read_failed(&store, e),
    };
    let mut out = std::io::stdout().lock();
    if let Some(seq) = at {
        let program = match plan_runs::stored_program(&store, &run) {
            Ok(p) => p,
            Err(why) => {
                return match store.unchanged() {
                    Err(e) => failed(e),
                    Ok(()) => failed(why),
                };
            }
        };
        if let Err(e) = store.unchanged() {
            return fail(store_exit(&e), e);
        }
        let vars = match plan_store::replay::variables_before(
            &program,
            &run.presets,
            &run.limits,
            run.branch_seq,
            &calls,
            seq,
        ) {
            Ok(v) => v,
            Err(e) => return not_before(&store, id, &e),
        };
        let _ = match format {
            Format::Json => writeln!(out, "{}", Value::Object(vars)),
            Format::Text => {
                let mut text = String::new();
                for (name, v) in &vars {
                    text.push_str(&format!(
                        "{name} = {}\n",
                        plan_value::preview(v, SHOW_PREVIEW)
                    ));
                }
                write!(out, "{text}")
            }
        };
        return exit::OK;
    }
    let steps = match store.steps(id).and_then(|s| store.unchanged().map(|()| s)) {
        Ok(s) => s,
        Err(e) => return read_failed(&store, e),
    };
    let _ = match format {
        Format::Json => writeln!(
            out,
            "{}",
            json!({"run": run, "steps": steps, "calls": calls})
        ),
        Format::Text => {
            let mut t = format!(
                "run {}  {}  {}\n  {} steps, {} tool calls, created {}, updated {}\n",
                run.id,
                run.status.as_str(),
                run.plan,
                run.steps,
                run.tool_calls,
                utc(run.created_at),
                utc(run.updated_at)
            );
            if let (Some(p), Some(s)) = (&run.parent, run.branch_seq) {
                t.push_str(&format!("  branch of {p} at seq_no {s}\n"));
            }
            if let Some(a) = &run.final_answer {
                t.push_str(&format!(
                    "  final_answer: {}\n",
                    plan_value::preview(a, SHOW_PREVIEW)
                ));
            }
            if let Some(e) = &run.error {
                t.push_str(&format!(
                    "  error[{}]: {}\n",
                    e["code"].as_str().unwrap_or("?"),
                    e["message"].as_str().unwrap_or("")
                ));
            }
            t.push_str("\nsteps:\n");
            for s in &steps {
                let seq = s.seq_no.map_or("-".to_owned(), |n| n.to_string());
                t.push_str(&format!("  {:>5}  seq {seq:>3}  {}\n", s.step, s.op));
                for (name, v) in &s.writes {
                    t.push_str(&format!(
                        "           {name} = {}\n",
                        plan_value::preview(v, SHOW_PREVIEW)
                    ));
                }
                for (name, bytes) in &s.omitted {
                    t.push_str(&format!("           {name} = ({bytes} bytes, not kept)\n"));
                }
            }
            t.push_str("\ncalls:\n");
            for c in &calls {
                let seq = c.seq_no.map_or("-".to_owned(), |n| n.to_string());
                let result = match (&c.output, &c.error) {
                    (Some(v), _) => plan_value::preview(v, SHOW_PREVIEW),
                    (None, Some(e)) => format!("error: {e}"),
                    (None, None) => "(no answer)".to_owned(),
                };
                let latency = c.latency_ms.map_or(String::new(), |l| format!(" {l} ms"));
                t.push_str(&format!(
                    "  step {:>5}  seq {seq:>3}  {} [{}{latency}]\n    args: {}\n    -> {result}\n",
                    c.step,
                    c.tool,
                    c.state.as_str(),
                    plan_value::preview(&Value::Object(c.args.clone()), SHOW_PREVIEW),
                ));
            }
            write!(out, "{t}")
        }
    };
    exit::OK
}

/// Unix milliseconds as `YYYY-MM-DDTHH:MM:SSZ` (UTC).
fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::utc;

    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_795_441_543_000), "2026-11-23T13:45:43Z");
    }
}
