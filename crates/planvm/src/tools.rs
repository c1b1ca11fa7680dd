//! `planvm tools list|refresh`: the tools of a tools file as resolved (the built-ins, the
//! file's, and those imported from its MCP servers), and listing the MCP servers again
//! (docs/mcp.md).

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use plan_render::exit;

use crate::args::Format;
use crate::session::Exit;

#[derive(Subcommand, Debug)]
pub(crate) enum ToolsCommand {
    /// Every tool with its parameters, effects and what serves it.
    List {
        /// The tools file (default: the built-in tools).
        #[arg(long, value_name = "FILE.toml")]
        tools: Option<PathBuf>,
        /// `json`: one JSON object per line (the tool as the manifest holds it, with
        /// `served_by`).
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Lists the tools of every MCP server of the file again (starting each), and keeps
    /// the listings for the next commands; then prints the tools as `list` does.
    Refresh {
        #[arg(long, value_name = "FILE.toml")]
        tools: PathBuf,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

pub(crate) fn tools(cmd: ToolsCommand) -> Exit {
    let (manifest, format) = match cmd {
        ToolsCommand::List { tools, format } => {
            (plan_runs::load::load_tools(tools.as_deref()), format)
        }
        ToolsCommand::Refresh { tools, format } => (plan_runs::load::refresh_tools(&tools), format),
    };
    let manifest = manifest.map_err(crate::session::failed)?;
    let mut out = std::io::stdout().lock();
    for t in &manifest.tools {
        if writeln!(out, "{}", plan_render::tools::tool(t, format.is_json())).is_err() {
            break;
        }
    }
    Ok(exit::OK)
}
