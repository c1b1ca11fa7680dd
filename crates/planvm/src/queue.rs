//! `planvm submit` and `planvm worker`: runs and goals put in a store's queue, and
//! processes on any machine sharing the store that take them up (docs/scale-out.md). The
//! engine is `plan_runs::queue` and `plan_runs::goal`; this module parses, compiles the
//! plans, prints ids and lines, and stops a worker on SIGTERM or SIGINT.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, Args};
use plan_host::HostOptions;
use plan_render::exit;
use plan_runs::StoreAt;
use plan_runs::engine::{PlanToSubmit, SubmitRequest};
use plan_runs::load::Loaded;
use plan_runs::queue::{Event, Worker};
use serde_json::Value;

use crate::args::{
    DurabilityArg, HostArgs, LimitArgs, json_or_text, parse_run_id, parse_secs, parse_var,
};
use crate::session::{self, Exit, fail};

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("input").required(true).args(["plan", "list", "goal"])))]
pub(crate) struct SubmitArgs {
    /// The plan to run (source or .pbc).
    #[arg(value_name = "PLAN")]
    plan: Option<PathBuf>,
    /// Submit the runs listed in this file, one per line: PLAN [NAME=VALUE]... (the list
    /// of `planvm batch`, without cassettes: a worker's --replay serves them).
    #[arg(long, value_name = "FILE", conflicts_with = "run_id")]
    list: Option<PathBuf>,
    /// Submit this goal: a worker with a planner (`[planner]` in its tools file) asks it
    /// as `planvm ask --store` would.
    #[arg(long, value_name = "TEXT")]
    goal: Option<String>,
    /// The goal's expected answer format (JSON, or text).
    #[arg(long, value_name = "JSON", requires = "goal", value_parser = json_or_text)]
    response_format: Option<Value>,
    /// The conversation the goal is a round of (see `planvm ask --session`).
    #[arg(long, value_name = "ID", requires = "goal", value_parser = parse_run_id)]
    session: Option<String>,
    /// The store whose queue takes the runs. Default: $PLANVM_STORE.
    #[arg(long, value_name = "DB", env = "PLANVM_STORE")]
    store: PathBuf,
    /// The tools file the plans are checked against (their workers serve them).
    #[arg(long, value_name = "FILE.toml", conflicts_with = "goal")]
    tools: Option<PathBuf>,
    /// The run's id (default: a new UUID v7).
    #[arg(long, value_name = "ID", value_parser = parse_run_id)]
    run_id: Option<String>,
    /// Preset a variable in every run; a list line's own pairs win.
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
    vars: Vec<(String, Value)>,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    durability: DurabilityArg,
}

#[derive(Args, Debug)]
pub(crate) struct WorkerArgs {
    /// The store whose queue this worker takes runs from. Default: $PLANVM_STORE.
    #[arg(long, value_name = "DB", env = "PLANVM_STORE")]
    store: PathBuf,
    /// Tools file: the backend serving each tool.
    #[arg(long, value_name = "FILE.toml")]
    tools: Option<PathBuf>,
    /// Runs executing at once.
    #[arg(long, value_name = "N", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    concurrency: u32,
    /// How often to look for runs besides being told of new ones (a run whose worker died
    /// is found so, once its lease lapses), in seconds.
    #[arg(long, value_name = "SECS", default_value = "1", value_parser = parse_secs)]
    poll: Duration,
    /// How long the lease on each run it holds lasts without renewal, in seconds (2 to
    /// 3600; renewed every quarter of it). Once it lapses, a run whose worker died is
    /// taken up elsewhere: shorter, sooner; longer, a worker may pause longer (a slow
    /// store, a stopped VM) without losing its runs.
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = parse_lease)]
    lease: Duration,
    /// Send again the `write` calls a run taken up left in flight (their outcome is
    /// unknown). Without it, such a run ends failed with its reason.
    #[arg(long)]
    retry_unknown_writes: bool,
    #[command(flatten)]
    host: HostArgs,
    #[command(flatten)]
    durability: DurabilityArg,
}

/// `--lease`: seconds within the store's bounds.
fn parse_lease(s: &str) -> Result<Duration, String> {
    let lease = parse_secs(s)?;
    let ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
    if !(plan_store::MIN_LEASE_MS..=plan_store::MAX_LEASE_MS).contains(&ms) {
        return Err(format!(
            "expected {} to {} seconds, got {s}",
            plan_store::MIN_LEASE_MS / 1000,
            plan_store::MAX_LEASE_MS / 1000
        ));
    }
    Ok(lease)
}

pub(crate) fn submit(args: SubmitArgs) -> Exit {
    if let Some(goal) = &args.goal {
        return submit_goal(&args, goal);
    }
    let engine = session::engine(args.tools.as_deref(), HostOptions::default())?;
    let times = args.limits.times();
    if times.deadline.is_some() || times.tool_timeout.is_some() {
        return Err(fail(
            exit::USAGE,
            "a submitted run keeps no --timeout or --tool-timeout: give its worker --tool-timeout (the queue keeps no deadline for a run)",
        ));
    }
    let plans = match (&args.plan, &args.list) {
        (Some(plan), _) => vec![PlanToSubmit::file(plan.clone())],
        (None, Some(list)) => PlanToSubmit::listed(list).map_err(session::failed)?,
        (None, None) => return Err(fail(exit::USAGE, "give a PLAN or --list FILE")),
    };
    let request = SubmitRequest {
        plans,
        vars: args.vars.clone(),
        id: args.run_id.clone(),
        limits: args.limits.limits(),
    };
    let at = StoreAt::new(&args.store, args.durability.get());
    // NB: a list naming one plan many times compiles it once (for each set of presets,
    // which the verifier counts as set), its warnings said once.
    let mut fresh = |l: &Loaded| session::found(l);
    let ids = (engine.submit(&at, request, &mut fresh)).map_err(session::refused)?;
    let mut out = std::io::stdout().lock();
    for id in &ids {
        let _ = writeln!(out, "{id}");
    }
    Ok(exit::OK)
}

/// `submit --goal`: the goal stored for a worker to ask; its id printed.
fn submit_goal(args: &SubmitArgs, goal: &str) -> Exit {
    let times = args.limits.times();
    if times.tool_timeout.is_some() {
        return Err(fail(
            exit::USAGE,
            "a submitted goal keeps no --tool-timeout: give it to its worker",
        ));
    }
    let request = plan_runs::goal::Request::new(&args.vars, &args.limits.limits(), times.deadline);
    let id = args.run_id.clone().unwrap_or_else(plan_store::new_run_id);
    let at = StoreAt::new(&args.store, args.durability.get());
    let about = (args.response_format.as_ref(), args.session.as_deref());
    let goals = [(id.clone(), goal.to_owned())];
    plan_runs::goal::submit(&at, &goals, about, &request).map_err(session::failed)?;
    println!("{id}");
    Ok(exit::OK)
}

pub(crate) fn worker(args: WorkerArgs) -> Exit {
    // NB: before anything is held: every lease this process takes and renews lasts it.
    let lease = i64::try_from(args.lease.as_millis()).unwrap_or(i64::MAX);
    if let Err(e) = plan_store::set_lease_ms(lease) {
        return Err(fail(exit::USAGE, format_args!("--lease: {e}")));
    }
    let tools = plan_runs::engine::PlanningFiles::of_tools(args.tools.as_deref());
    let engine = session::planning_engine(tools, args.host.options())?;
    let host = session::host(&engine, None)?;
    let at = StoreAt::new(&args.store, args.durability.get());
    let (worker, no_goals) = engine
        .worker(at, session::lease_warning)
        .map_err(session::failed)?;
    if let Some(e) = no_goals {
        eprintln!("worker: taking runs only, no goals: {e}");
    }
    let worker = Worker {
        concurrency: args.concurrency as usize,
        retry_unknown_writes: args.retry_unknown_writes,
        poll: args.poll,
        ..worker
    };
    let runtime = session::multi_thread_runtime()?;
    let what = if worker.planner.is_some() {
        "runs and goals"
    } else {
        "runs"
    };
    let (pid, from) = (std::process::id(), worker.at.shown());
    let mut out = std::io::stdout();
    let tally = session::block_on(&runtime, &host, async {
        let signals = plan_serve::stop_signals()
            .map_err(|e| fail(exit::RUN_FAILED, format_args!("cannot handle SIGTERM: {e}")))?;
        eprintln!("worker {pid}: taking {what} from {from}");
        let stop = plan_serve::nth(signals, 1);
        let mut said = |e: Event<'_>| match &e {
            Event::Unavailable { error } => {
                eprintln!("warning: cannot take runs now (tried again): {error}");
            }
            e => {
                if let Some(line) = plan_render::runs::worker_event(e) {
                    let _ = writeln!(out, "{line}");
                }
            }
        };
        worker.work(stop, &mut said).await.map_err(session::failed)
    });
    drop(runtime);
    eprintln!("{}", plan_render::runs::worker_summary(&tally?));
    Ok(exit::OK)
}
