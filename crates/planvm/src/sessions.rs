//! `planvm sessions list|show`: the conversations of a store (docs/sessions.md).

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use plan_render::exit;
use plan_render::runs as text;
use plan_runs::read;

use crate::args::Format;
use crate::session::{Exit, failed};

#[derive(Subcommand, Debug)]
pub(crate) enum SessionsCommand {
    /// One line per session: id, goals, first and latest.
    List {
        /// The store. Default: $PLANVM_STORE.
        #[arg(long, value_name = "DB", env = "PLANVM_STORE")]
        store: PathBuf,
        /// `json`: one JSON object per line.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// A session's goals, oldest first, with their answers and runs, and the summary
    /// that stands for the oldest.
    Show {
        #[arg(value_name = "ID")]
        id: String,
        /// The store. Default: $PLANVM_STORE.
        #[arg(long, value_name = "DB", env = "PLANVM_STORE")]
        store: PathBuf,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

pub(crate) fn sessions(cmd: SessionsCommand) -> Exit {
    let (path, format) = match &cmd {
        SessionsCommand::List { store, format } | SessionsCommand::Show { store, format, .. } => {
            (store, *format)
        }
    };
    let store = crate::runs::open_to_read(path)?;
    let json = format.is_json();
    let mut out = std::io::stdout().lock();
    match &cmd {
        SessionsCommand::List { .. } => {
            let all = read::sessions(&*store).map_err(failed)?;
            for s in &all {
                if writeln!(out, "{}", text::session_line(s, json)).is_err() {
                    break;
                }
            }
        }
        SessionsCommand::Show { id, .. } => {
            let shown = read::session(&*store, id).map_err(failed)?;
            let _ = write!(out, "{}", text::session_shown(&shown, json));
        }
    }
    Ok(exit::OK)
}
