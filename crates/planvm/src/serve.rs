//! `planvm serve`: the HTTP service over a run store (docs/serve.md). The service is
//! `plan_serve`; this module parses, refuses an open service without a token, prints
//! where it listens, and stops it on SIGTERM or SIGINT.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
use plan_render::exit;
use plan_runs::StoreAt;
use plan_runs::engine::PlanningFiles;
use plan_serve::{Config, Notice, Service, StartError};

use crate::args::{DurabilityArg, HostArgs};
use crate::session::{self, Exit, fail};

#[derive(Args, Debug)]
pub(crate) struct ServeArgs {
    /// The run store (an SQLite file, created if missing). Default: $PLANVM_STORE.
    #[arg(long, value_name = "DB", env = "PLANVM_STORE")]
    store: PathBuf,
    /// Tools file: the tools plans may call and the backend serving each.
    #[arg(long, value_name = "FILE.toml")]
    tools: Option<PathBuf>,
    /// Address to listen on. Off loopback, --token-env is required.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8910")]
    listen: SocketAddr,
    /// The environment variable holding the token every request must carry as
    /// `Authorization: Bearer <token>`.
    #[arg(long, value_name = "NAME")]
    token_env: Option<String>,
    /// Runs executing at once; the rest wait in order.
    #[arg(long, value_name = "N", default_value_t = plan_serve::DEFAULT_MAX_RUNS as u32,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_runs: u32,
    /// When resuming interrupted runs at start, send again the `write` calls they left in
    /// flight (their outcome is unknown). Without it, such a run is left as it is.
    #[arg(long)]
    retry_unknown_writes: bool,
    /// A host name the service also answers to (repeat for more): by default only
    /// loopback names and the listening address, against DNS rebinding. With a token,
    /// any name unless some are given.
    #[arg(long = "allowed-host", value_name = "NAME")]
    allowed_hosts: Vec<String>,
    /// Seconds a request's headers may take to arrive (an idle connection is closed
    /// after as long).
    #[arg(long, value_name = "SECS", default_value_t = 10.0, value_parser = positive_secs)]
    header_timeout: f64,
    /// Seconds a request's body may take to arrive, from its headers.
    #[arg(long, value_name = "SECS", default_value_t = 30.0, value_parser = positive_secs)]
    body_timeout: f64,
    /// Connections open at once (default: half the process's file limit, at most 4096);
    /// past it, the oldest connection not in a request is closed for a new one.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_connections: Option<u32>,
    #[command(flatten)]
    host: HostArgs,
    #[command(flatten)]
    durability: DurabilityArg,
}

pub(crate) fn serve(args: ServeArgs) -> Exit {
    let token = plan_serve::token_from_env(args.token_env.as_deref(), &args.listen)
        .map_err(|e| fail(exit::USAGE, e))?;
    let engine = session::planning_engine(
        PlanningFiles::of_tools(args.tools.as_deref()),
        args.host.options(),
    )?;
    let at = StoreAt::new(&args.store, args.durability.get());
    let conn_limits = plan_serve::ConnLimits {
        header_timeout: std::time::Duration::from_secs_f64(args.header_timeout),
        body_timeout: std::time::Duration::from_secs_f64(args.body_timeout),
        max_connections: (args.max_connections)
            .map_or_else(plan_serve::default_max_connections, |n| n as usize),
    };
    let config = Config {
        token,
        max_runs: args.max_runs as usize,
        retry_unknown_writes: args.retry_unknown_writes,
        allowed_hosts: args.allowed_hosts.clone(),
        conn_limits,
        ..Config::new(at, engine, session::lease_warning)
    };
    let runtime = session::multi_thread_runtime()?;
    let code = runtime.block_on(run(config, args.listen));
    // NB: the runs still going are dropped with the runtime (each reads as interrupted
    // once the process is gone, and is resumed at the next start), and with the last of
    // them the store's writer, which writes what it was given and closes the store.
    drop(runtime);
    code
}

/// A positive number of seconds, at most a day.
fn positive_secs(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(t) if t > 0.0 && t <= 86_400.0 => Ok(t),
        _ => Err(format!(
            "`{text}` is not a number of seconds over 0 and at most 86400"
        )),
    }
}

/// The service over `config`, its warnings printed (`refused`: what a service with no
/// planner refuses, for the note that says so).
pub(crate) fn start(config: Config, refused: &str) -> Result<Service, u8> {
    let service = Service::new(config).map_err(|e| match e {
        StartError::Store(e) | StartError::Host(e) => session::failed(e),
    })?;
    for w in service.warnings() {
        eprintln!("warning: {w}");
    }
    if let Some(why) = service.no_planner() {
        eprintln!("note: {refused} will be refused: {why}");
    }
    Ok(service)
}

async fn run(config: Config, listen: SocketAddr) -> Exit {
    let service = start(config, "goals")?;
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(e) => {
            return Err(fail(
                exit::IO_ERR,
                format_args!("cannot listen on {listen}: {e}"),
            ));
        }
    };
    // NB: the handlers are installed before the service says it listens: a SIGTERM right
    // after that line stops it cleanly rather than killing it.
    let signals = match plan_serve::stop_signals() {
        Ok(s) => s,
        Err(e) => {
            return Err(fail(
                exit::RUN_FAILED,
                format_args!("cannot handle SIGTERM: {e}"),
            ));
        }
    };
    let mut say = |notice: Notice<'_>| match notice {
        Notice::TakenUp(id, None) => eprintln!("taken up: {id}"),
        Notice::TakenUp(id, Some(e)) => eprintln!("warning: {id} was not taken up: {e}"),
        Notice::Listening(addr) => eprintln!("listening on http://{addr}"),
        Notice::Stopping(0) => {}
        Notice::Stopping(going) => eprintln!(
            "stopping: {going} run(s) finish the calls they have out (signal again to stop at once)"
        ),
        Notice::StoppedAtOnce => eprintln!(
            "stopped at once: the runs cut go on from their last commit point at the next start"
        ),
    };
    let served = service.run(listener, signals, &mut say).await;
    session::lost_spans(service.finish_telemetry());
    match served {
        Ok(()) => Ok(exit::OK),
        Err(e) => Err(fail(exit::IO_ERR, format_args!("the service stopped: {e}"))),
    }
}
