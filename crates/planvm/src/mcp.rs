//! `planvm mcp`: planrt as an MCP server over stdio (docs/mcp.md): the service's tools
//! `ask`, `run_plan` and `run_status`, for agents and IDEs that start planvm themselves.
//! stdout carries the protocol only; everything for people goes to stderr.

use std::path::PathBuf;

use clap::Args;
use plan_render::exit;
use plan_runs::StoreAt;
use plan_serve::Config;

use crate::args::{DurabilityArg, HostArgs};
use crate::session::{self, Exit, fail};

#[derive(Args, Debug)]
pub(crate) struct McpArgs {
    /// Tools file: the tools plans may call and the backend serving each, and the planner
    /// (`[planner]`) for `ask`.
    #[arg(long, value_name = "FILE.toml")]
    tools: Option<PathBuf>,
    /// The run store (created if missing): runs are kept, `run_status` reads them after
    /// a restart, interrupted ones are resumed at start. Default: $PLANVM_STORE, else a
    /// store of this process's own, removed when it exits.
    #[arg(long, value_name = "DB", env = "PLANVM_STORE")]
    store: Option<PathBuf>,
    #[command(flatten)]
    host: HostArgs,
    /// Runs executing at once; the rest wait in order.
    #[arg(long, value_name = "N", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_runs: u32,
    #[command(flatten)]
    durability: DurabilityArg,
}

pub(crate) fn mcp(args: McpArgs) -> Exit {
    let tools = plan_runs::engine::PlanningFiles::of_tools(args.tools.as_deref());
    let engine = session::planning_engine(tools, args.host.options())?;
    // NB: kept until the end: the store of a process that names none lives in it.
    let scratch;
    let store = match &args.store {
        Some(path) => path.clone(),
        None => match tempfile::tempdir() {
            Ok(dir) => {
                scratch = dir;
                scratch.path().join("runs.db")
            }
            Err(e) => {
                return Err(fail(
                    exit::CANT_CREATE,
                    format_args!("cannot make a store for this process: {e}"),
                ));
            }
        },
    };
    let config = Config {
        max_runs: args.max_runs as usize,
        max_body: usize::MAX,
        ..Config::new(
            StoreAt::new(&store, args.durability.get()),
            engine,
            session::lease_warning,
        )
    };
    let runtime = session::multi_thread_runtime()?;
    let code = runtime.block_on(async {
        let service = crate::serve::start(config, "`ask`")?;
        if args.store.is_some() {
            for (id, resumed) in service.resume_interrupted() {
                if let Err(e) = resumed {
                    eprintln!("warning: {id} was not taken up: {e}");
                }
            }
        }
        let served = service.serve_stdio().await;
        session::lost_spans(service.finish_telemetry());
        match served {
            Ok(()) => Ok(exit::OK),
            Err(e) => Err(fail(exit::IO_ERR, e)),
        }
    });
    // NB: as `serve`: runs still going stop with the runtime, and resume at the next start.
    drop(runtime);
    code
}
