//! `planvm ground QUESTION --tools FILE`: what the planner would be shown of each database
//! `[grounding]` covers for a question (docs/sql.md, grounding).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use plan_render::exit;
use serde_json::json;

use crate::args::Format;
use crate::session::{Exit, failed};

#[derive(Args, Debug)]
pub(crate) struct GroundArgs {
    /// The question (a goal).
    #[arg(value_name = "QUESTION")]
    question: String,
    /// The tools file whose `sql` tools' databases are grounded.
    #[arg(long, value_name = "FILE.toml")]
    tools: PathBuf,
    /// `json`: one object per database, `{"tool", "tables", "columns", "values"}`, best
    /// first (and `series`: the tables a shown one stands for); `text`: the prompt's
    /// section.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

pub(crate) fn ground(args: GroundArgs) -> Exit {
    let engine = crate::session::engine(Some(&args.tools), Default::default())?;
    let grounded = engine.ground(&args.question).map_err(failed)?;
    for w in &grounded.warnings {
        eprintln!("error: {w}");
    }
    let mut out = std::io::stdout().lock();
    match args.format {
        Format::Json => {
            for (tool, s) in &grounded.selections {
                let mut line = json!(s);
                line["tool"] = json!(tool);
                let _ = writeln!(out, "{line}");
            }
        }
        Format::Text => {
            let _ = write!(out, "{}", grounded.text);
        }
    }
    if grounded.warnings.is_empty() {
        Ok(exit::OK)
    } else {
        Ok(exit::NO_INPUT)
    }
}
