//! `planvm sessions list|show`: the conversations of a store (docs/sessions.md).

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use plan_render::exit;
use plan_render::runs as text;
use plan_runs::read;

use crate::args::Format;
use crate::session::failed;

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

pub(crate) fn sessions(cmd: SessionsCommand) -> u8 {
    let (path, format) = match &cmd {
        SessionsCommand::List { store, format } | SessionsCommand::Show { store, format, .. } => {
            (store, *format)
        }
    };
    let store = match crate::runs::open_to_read(path) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let json = format.is_json();
    let mut out = std::io::stdout().lock();
    match &cmd {
        SessionsCommand::List { .. } => {
            let all = match read::sessions(&*store) {
                Ok(s) => s,
                Err(e) => return failed(e),
            };
            for s in &all {
                if writeln!(out, "{}", text::session_line(s, json)).is_err() {
                    break;
                }
            }
        }
        SessionsCommand::Show { id, .. } => match read::session(&*store, id) {
            Ok(shown) => _ = write!(out, "{}", text::session_shown(&shown, json)),
            Err(e) => return failed(e),
        },
    }
    exit::OK
}
