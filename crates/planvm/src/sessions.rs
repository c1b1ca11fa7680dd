//! `planvm sessions list|show`: the conversations of a store (docs/sessions.md).

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use plan_render::exit;
use plan_runs::read;
use serde_json::{Value, json};

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

/// Characters of an answer shown in text form.
const PREVIEW: usize = 200;

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
    let mut out = std::io::stdout().lock();
    match &cmd {
        SessionsCommand::List { .. } => {
            let all = match read::sessions(&*store) {
                Ok(s) => s,
                Err(e) => return failed(e),
            };
            for s in &all {
                let line = match format {
                    Format::Json => json!(s).to_string(),
                    Format::Text => format!(
                        "{}  {} goals  {} .. {}",
                        s.id,
                        s.goals,
                        plan_render::utc(s.created_at),
                        plan_render::utc(s.updated_at)
                    ),
                };
                if writeln!(out, "{line}").is_err() {
                    break;
                }
            }
        }
        SessionsCommand::Show { id, .. } => {
            let shown = match read::session(&*store, id) {
                Ok(s) => s,
                Err(e) => return failed(e),
            };
            let _ = match format {
                Format::Json => writeln!(out, "{}", json!(shown)),
                Format::Text => write!(out, "{}", text(&shown)),
            };
        }
    }
    exit::OK
}

fn text(shown: &read::SessionShown) -> String {
    let mut t = format!("session {}\n", shown.id);
    if let Some(s) = &shown.summary {
        t.push_str(&format!(
            "  summary (up to {}): {}\n",
            s["upto"].as_str().unwrap_or("?"),
            s["summary"].as_str().unwrap_or("")
        ));
    }
    for g in &shown.goals {
        t.push_str(&format!(
            "\n  {}  {}  {}\n",
            g["id"].as_str().unwrap_or("?"),
            g["status"].as_str().unwrap_or("?"),
            g["goal"].as_str().unwrap_or("")
        ));
        match (&g["answer"], &g["error"]) {
            (Value::Null, Value::Null) => {}
            (Value::Null, e) => t.push_str(&format!(
                "    error[{}]: {}\n",
                e["code"].as_str().unwrap_or("?"),
                e["message"].as_str().unwrap_or("")
            )),
            (a, _) => t.push_str(&format!(
                "    answer: {}\n",
                plan_value::preview(a, PREVIEW)
            )),
        }
        if let Some(runs) = g["runs"].as_array().filter(|r| !r.is_empty()) {
            let ids: Vec<&str> = runs.iter().filter_map(Value::as_str).collect();
            t.push_str(&format!("    runs: {}\n", ids.join(", ")));
        }
    }
    t
}
