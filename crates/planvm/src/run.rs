//! `planvm run`: one plan, from a file or as it streams in on standard input, journaled
//! in a store when `--store` names one.

use std::path::PathBuf;

use clap::Args;
use plan_host::{Host, RunReport, Tracer};
use plan_render::exit;

use crate::args::{LimitArgs, OutputArgs, StoreArgs, ToolArgs};
use plan_runs::StoreAt;
use plan_runs::engine::{Engine, Hooks, StartRequest};

use crate::session::{self, Exit, fail};
use plan_runs::load;
use plan_runs::open::Inputs;

#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    /// The plan: a .pbc file (recognised by its magic bytes, whatever its name) or plan
    /// source in any form the reader accepts (JSON, LLM output with a ```json fence,
    /// Python literals, ...), compiled on the fly. `-` reads it from standard input and
    /// starts the calls certain to run before the input ends.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    #[command(flatten)]
    io: ToolArgs,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    store: StoreArgs,
}

pub(crate) fn run(args: RunArgs) -> Exit {
    let stdin = args.file.as_os_str() == "-";
    let outputs = args.io.outputs(&args.output);
    let inputs = Inputs {
        named: (!stdin)
            .then_some(("the plan FILE", args.file.as_path()))
            .into_iter()
            .collect(),
        tools: args.io.tools.as_deref(),
        replay: args.io.replay.as_deref(),
        store: args.store.store.as_deref(),
    };
    inputs.check(&outputs).map_err(session::failed)?;
    let host = session::host_options(
        args.io.replay.clone(),
        args.io.record.clone(),
        &args.limits.times(),
    );
    let engine = session::engine(args.io.tools.as_deref(), host)?;
    if stdin {
        return run_stdin(args, engine);
    }

    let plan = args.file.display().to_string();
    let read = load::read(&args.file);
    let loaded = session::loaded(read.and_then(|src| engine.load(&plan, src, &args.io.vars)))?;
    let output = (&args.output, &loaded.warnings[..]);
    session::run_one(
        &engine,
        ("run", Some(&plan)),
        output,
        async |host, tracer| run_loaded(host, &loaded, &args, tracer).await,
    )
}

/// Runs a loaded plan for `run`, in the store if `--store` names one.
async fn run_loaded(
    host: &Host,
    loaded: &load::Loaded,
    args: &RunArgs,
    tracer: &mut Tracer,
) -> Result<(RunReport, Option<String>), u8> {
    let request = StartRequest {
        id: args.store.run_id.clone(),
        name: &args.file.display().to_string(),
        source: loaded.source.as_deref(),
        program: &loaded.program,
        vars: args.io.vars.clone(),
        limits: args.limits.limits(),
    };
    let at = (args.store.store.as_ref()).map(|p| StoreAt::new(p, args.store.durability.get()));
    let hooks = Hooks {
        journal: tracer,
        warn: session::lease_warning,
        started: |id| eprintln!("run {id}"),
    };
    plan_runs::engine::start(host, at.as_ref(), request, hooks)
        .await
        .map_err(session::failed)
}

/// `planvm run -`: the plan comes from standard input and runs as it arrives: calls that
/// are certain to run start before the input ends (docs/planner.md, streaming). The whole
/// plan is then compiled and run as any plan is, taking the early results.
fn run_stdin(args: RunArgs, engine: Engine) -> Exit {
    let output = (&args.output, &[][..]);
    session::run_one(
        &engine,
        ("run", Some("<stdin>")),
        output,
        async |host, tracer| {
            let streamer =
                plan_planner::Streamer::new(host, args.io.vars.clone(), args.limits.limits());
            let stdin = tokio::io::stdin();
            let bytes = (streamer.follow_reader(stdin, "standard input", &mut |e| {
                let _ = plan_host::Journal::record(&mut *tracer, e);
            }))
            .await
            .map_err(|msg| fail(exit::NO_INPUT, msg))?;
            let loaded = session::loaded(engine.load("<stdin>", bytes, &args.io.vars))?;
            for w in &loaded.warnings {
                tracer.warning(w);
            }
            if let Some(src) = &loaded.source {
                streamer.settle(src);
            }
            run_loaded(host, &loaded, &args, tracer).await
        },
    )
}
