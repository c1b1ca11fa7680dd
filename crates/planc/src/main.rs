//! `planc`: the plan compiler's command line.
//!
//! ```text
//! planc compile PLAN [-o OUT.pbc] [--strip] [--strict] [--tools FILE.toml] [--quiet]
//! planc check PLAN... [--format human|json] [--deny-warnings] [--strict] [--tools FILE.toml]
//! planc disasm FILE.pbc
//! planc explain PLAN [--dot] [--strict] [--tools FILE.toml]
//! ```
//!
//! Exit codes: `plan_render::exit::PLANC` (printed by `planc --help`). A plan that cannot
//! be read is not 66: it is an `E0000` diagnostic like any other plan error, so `check a b
//! c` checks them all.
//!
//! Module map: this file picks the command; `front` holds what the commands share (the
//! front end's options, reading a plan, printing diagnostics); `compile`, `check` (and
//! `disasm`), `explain` (the dataflow list and graph) and `codes` are the commands;
//! `backend` is the thin seam to the bytecode and manifest crates. Only this crate prints:
//! the compiler returns diagnostics as data.

mod backend;
mod check;
mod codes;
mod compile;
mod explain;
mod front;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use plan_render::exit;

#[derive(Parser, Debug)]
#[command(
    name = "planc",
    version,
    about = "Compile LLM-written JSON plans to verified .pbc bytecode",
    after_help = exit::help(exit::PLANC)
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Compile a plan to bytecode (written only when there are no errors).
    Compile(compile::CompileArgs),
    /// Check plans and report every diagnostic.
    Check(check::CheckArgs),
    /// Print the listing of a .pbc file (after validating it).
    Disasm(check::DisasmArgs),
    /// Show the plan's steps and their dataflow dependencies.
    Explain(explain::ExplainArgs),
    /// List the diagnostic and run error codes, or explain one (`planc codes E0202`,
    /// `planc codes R0005`).
    Codes(codes::CodesArgs),
}

fn main() -> ExitCode {
    // NB: `Cli::parse()` would exit by itself; going through `try_parse` keeps every exit
    // in one place. clap prints help/version with code 0 and usage errors with code 2.
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            });
        }
    };
    let code = match cli.command {
        Command::Compile(a) => compile::cmd_compile(&a),
        Command::Check(a) => check::cmd_check(&a),
        Command::Disasm(a) => check::cmd_disasm(&a),
        Command::Explain(a) => explain::cmd_explain(&a),
        Command::Codes(a) => codes::cmd_codes(&a),
    };
    ExitCode::from(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
