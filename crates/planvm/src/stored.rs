//! `planvm resume` and `planvm branch`: stored runs going on (docs/durability.md). The
//! engine is `plan_runs`; this module parses, checks the outputs, and prints.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use plan_runs::open::Inputs;
use plan_runs::{BranchRequest, LimitsOverride, Resume, ResumeRequest, StoreAt};

use crate::args::{DurabilityArg, LimitArgs, OutputArgs, parse_run_id, parse_secs};
use crate::session::{self, Exit, failed};

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
    /// The answer to the question the run stopped at (`ask_user`): it becomes the
    /// call's output and the run goes on. Refused when the run waits for none. With it,
    /// ID may be a goal's: its latest run is answered.
    #[arg(long, value_name = "TEXT")]
    input: Option<String>,
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
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    timeout: Option<Duration>,
    /// Limit on one tool call, retries included, in seconds.
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    tool_timeout: Option<Duration>,
    #[command(flatten)]
    output: OutputArgs,
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
    limits: LimitArgs,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    durability: DurabilityArg,
}

/// `--trace` as the one output of `resume` and `branch`.
fn trace_output(output: &OutputArgs) -> Vec<(&'static str, &Path)> {
    output
        .trace
        .as_deref()
        .map(|p| ("--trace", p))
        .into_iter()
        .collect()
}

pub(crate) fn resume(args: ResumeArgs) -> Exit {
    let at = StoreAt::new(&args.store, args.durability.get());
    let limits = LimitsOverride {
        max_steps: args.max_steps,
        max_total_bytes: args.max_bytes,
        max_concurrency: args.max_concurrency,
    };
    let request = ResumeRequest {
        id: &args.id,
        limits,
        retry_unknown_writes: args.retry_unknown_writes,
        input: args.input.as_deref(),
    };
    let ready = match plan_runs::resume(&at, request) {
        Ok(Resume::Finished(report)) => {
            let json = args.output.format.is_json();
            session::print(plan_render::runs::report(&report, json, Some(&args.id)));
            // NB: a run still waiting for input says so again (exit 3), nothing run.
            return Ok(plan_render::exit::of_run(report.status));
        }
        Ok(Resume::Ready(ready)) => ready,
        Err(e) => return Err(failed(e)),
    };
    let inputs = Inputs {
        tools: args.tools.as_deref(),
        replay: args.replay.as_deref(),
        store: Some(&args.store),
        ..Default::default()
    };
    inputs.check(&trace_output(&args.output)).map_err(failed)?;
    let times = crate::args::Times {
        deadline: args.timeout,
        tool_timeout: args.tool_timeout,
    };
    let host = session::host_options(args.replay, None, &times);
    let engine = session::engine(args.tools.as_deref(), host)?;
    go_on(
        "resume",
        &engine,
        &args.output,
        &[],
        // NB: claimed only now: a command refused above leaves the store as it was.
        move || ready.claim(session::lease_warning),
    )
}

/// Claims a stored run (resumed or a new branch) once everything else is ready, runs it
/// to its end journaled in its store, and prints it like `run`.
fn go_on(
    command: &str,
    engine: &plan_runs::engine::Engine,
    output: &OutputArgs,
    warnings: &[String],
    claim: impl FnOnce() -> Result<plan_runs::Claimed, plan_runs::Error>,
) -> Exit {
    session::run_one(
        engine,
        (command, None),
        (output, warnings),
        async |host, tracer| {
            let claimed = claim().map_err(failed)?;
            let id = claimed.id().to_owned();
            eprintln!("run {id}");
            Ok((claimed.go(host, tracer).await, Some(id)))
        },
    )
}

pub(crate) fn branch(args: BranchArgs) -> Exit {
    let inputs = Inputs {
        named: vec![("the --plan file", &args.plan)],
        tools: args.tools.as_deref(),
        replay: args.replay.as_deref(),
        store: Some(&args.store),
    };
    inputs.check(&trace_output(&args.output)).map_err(failed)?;
    let host = session::host_options(args.replay.clone(), None, &args.limits.times());
    let engine = session::engine(args.tools.as_deref(), host)?;
    let plan = args.plan.display().to_string();
    let source = plan_runs::load::read(&args.plan).map_err(session::bad_plan)?;
    let request = BranchRequest {
        parent: &args.id,
        at: args.at,
        name: &plan,
        plan: source,
        limits: args.limits.limits(),
    };
    let at = StoreAt::new(&args.store, args.durability.get());
    // NB: before the session: a refused branch creates no trace file.
    let branch = engine.branch(&at, request).map_err(session::refused)?;
    session::found(&branch.loaded);
    let warnings = branch.loaded.warnings.clone();
    let id = args.run_id.clone().unwrap_or_else(plan_store::new_run_id);
    go_on("branch", &engine, &args.output, &warnings, move || {
        branch.start(&id, session::lease_warning)
    })
}
