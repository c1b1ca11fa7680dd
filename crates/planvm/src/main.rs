//! `planvm`: runs a plan (source or `.pbc`) against real or recorded tools.
//!
//! The commands and their options are in `planvm --help` and `planvm COMMAND --help`,
//! generated from the argument types below and in each command's module.
//!
//! Exit codes (see `plan_render::exit`) are printed by `planvm run --help`.
//!
//! Module map: this file picks the command; `args` holds the argument groups commands
//! share; `session` what every command that runs plans sets up, prints and exits with;
//! `progress` draws the live status line; `run`, `ask` (docs/planner.md), `batch`,
//! `stored` (`resume`, `branch`), `queue` (`submit`, `worker`), `runs`, `sessions`,
//! `ground`, `tools`, `eval`, `serve` and `mcp` are the commands.
//! The engine is in libraries: `plan_host` runs a plan, `plan_planner` writes one,
//! `plan_runs` keeps runs in a store (docs/durability.md). Only this crate prints.

mod args;
mod ask;
mod batch;
mod eval;
mod ground;
mod mcp;
mod progress;
mod queue;
mod run;
mod runs;
mod serve;
mod session;
mod sessions;
mod stored;
mod tools;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use plan_render::exit;

#[derive(Parser, Debug)]
#[command(
    name = "planvm",
    version,
    about = "Run LLM-written plans (source or .pbc bytecode) against real or recorded tools",
    after_help = exit::help(exit::PLANVM)
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a plan and print its final answer.
    #[command(after_help = exit::help(exit::PLANVM))]
    Run(run::RunArgs),
    /// From a goal to an answer: an LLM writes the plan, errors go back for repair, a
    /// failed step for a re-plan.
    #[command(after_help = ask::help())]
    Ask(ask::AskArgs),
    /// Run many plans concurrently in one process (a directory of plans or a list file),
    /// printing one JSON line per run.
    #[command(after_help = batch::help())]
    Batch(batch::BatchArgs),
    /// Continue a stored run from its last commit point (a finished run prints its
    /// stored answer and calls nothing).
    #[command(after_help = exit::help(exit::PLANVM))]
    Resume(stored::ResumeArgs),
    /// Start a new run from a stored run's state just before it first executed seq_no
    /// SEQ, continuing with another plan at its instruction SEQ (the parent is untouched).
    #[command(after_help = exit::help(exit::PLANVM))]
    Branch(stored::BranchArgs),
    /// Serve the run store over HTTP: runs submitted, listed, shown and cancelled
    /// (docs/serve.md).
    #[command(after_help = exit::help(exit::PLANVM_SERVE))]
    Serve(serve::ServeArgs),
    /// Put runs in the queue of a store for workers to take up; prints their ids
    /// (docs/scale-out.md).
    #[command(after_help = exit::help(exit::PLANVM_SUBMIT))]
    Submit(queue::SubmitArgs),
    /// Take runs from the queue of a store and run them, until SIGTERM (docs/scale-out.md).
    #[command(after_help = exit::help(exit::PLANVM_WORKER))]
    Worker(queue::WorkerArgs),
    /// List, inspect or cancel the runs of a store.
    #[command(subcommand)]
    Runs(runs::RunsCommand),
    /// List or show the conversations (`ask --session`) of a store.
    #[command(subcommand)]
    Sessions(sessions::SessionsCommand),
    /// What the planner is shown of each database for a question: the tables, columns and
    /// values that matter (the `sql` tools of the tools file).
    Ground(ground::GroundArgs),
    /// Measure the planner on a dataset of goals: each asked, its answer checked; a report
    /// with the pass rate, compared with a baseline (docs/eval.md).
    #[command(after_help = exit::help(exit::PLANVM_EVAL))]
    Eval(eval::EvalArgs),
    /// planrt as an MCP server over stdio: tools `ask`, `run_plan` and `run_status`
    /// (docs/mcp.md).
    #[command(after_help = exit::help(exit::PLANVM_MCP))]
    Mcp(mcp::McpArgs),
    /// The tools of a tools file as resolved, those of its MCP servers included; or list
    /// the MCP servers' tools again.
    #[command(subcommand)]
    Tools(tools::ToolsCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let exit = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Ask(args) => ask::ask(args),
        Command::Batch(args) => batch::batch(args),
        Command::Resume(args) => stored::resume(args),
        Command::Branch(args) => stored::branch(args),
        Command::Runs(cmd) => runs::runs(cmd),
        Command::Sessions(cmd) => sessions::sessions(cmd),
        Command::Ground(args) => ground::ground(args),
        Command::Tools(cmd) => tools::tools(cmd),
        Command::Mcp(args) => mcp::mcp(args),
        Command::Eval(args) => eval::eval(args),
        Command::Serve(args) => serve::serve(args),
        Command::Submit(args) => queue::submit(args),
        Command::Worker(args) => queue::worker(args),
    };
    ExitCode::from(exit.unwrap_or_else(|code| code))
}
