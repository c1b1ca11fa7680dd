//! `planvm runs list|show|feedback|cancel|prune`: the runs of a store, for people and for
//! machines.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use plan_render::exit;
use plan_render::runs as text;

use plan_runs::open::Access;
use plan_runs::{StoreAt, read};
use plan_store::{Durability, RunStore};

use crate::args::{Format, Verdict, parse_days};
use crate::session::{Exit, failed};

#[derive(Subcommand, Debug)]
pub(crate) enum RunsCommand {
    /// One line per run: id, status (running, ok, failed, interrupted, queued), steps,
    /// tool calls, last update, plan; and one per goal none of whose plans has run yet
    /// (queued, planning, ...), its plan `goal`.
    List {
        /// The store. Default: $PLANVM_STORE.
        #[arg(long, value_name = "DB", env = "PLANVM_STORE")]
        store: PathBuf,
        /// `json`: one JSON object per line.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// A run's committed steps with the variables they wrote, and its tool calls.
    Show {
        #[arg(value_name = "ID")]
        id: String,
        /// The store. Default: $PLANVM_STORE.
        #[arg(long, value_name = "DB", env = "PLANVM_STORE")]
        store: PathBuf,
        /// Print every variable as it was just before the run first executed seq_no SEQ
        /// (found by running the plan again on its stored answers; nothing is sent).
        #[arg(long, value_name = "SEQ", allow_negative_numbers = true)]
        at: Option<i64>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Give a person's verdict on a run (the latest one counts); `planvm eval --compare`
    /// shows it beside the judge's, and `planvm serve` on the run's page.
    Feedback {
        #[arg(value_name = "ID")]
        id: String,
        #[arg(long, value_enum)]
        verdict: Verdict,
        /// Why, in a few words.
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
        /// The store. Default: $PLANVM_STORE.
        #[arg(long, value_name = "DB", env = "PLANVM_STORE")]
        store: PathBuf,
    },
    /// Delete the runs that ended more than DAYS ago, with their journals; prints how
    /// many. Runs still going, branched from, or given a verdict are kept.
    Prune {
        /// The store. Default: $PLANVM_STORE.
        #[arg(long, value_name = "DB", env = "PLANVM_STORE")]
        store: PathBuf,
        /// Runs that ended more than this many days ago go (0: every ended run).
        #[arg(long, value_name = "DAYS", value_parser = parse_days)]
        older_than: f64,
        /// Keep the failed runs.
        #[arg(long)]
        keep_failed: bool,
    },
    /// End a run that has not finished as failed (R0013); a process running it stops at
    /// its next commit point. A finished run is left as it is.
    Cancel {
        #[arg(value_name = "ID")]
        id: String,
        /// The store. Default: $PLANVM_STORE.
        #[arg(long, value_name = "DB", env = "PLANVM_STORE")]
        store: PathBuf,
    },
}

pub(crate) fn runs(cmd: RunsCommand) -> Exit {
    match cmd {
        RunsCommand::List { store, format } => list(&store, format),
        RunsCommand::Show {
            id,
            store,
            at,
            format,
        } => show(&store, &id, at, format),
        RunsCommand::Feedback {
            id,
            verdict,
            note,
            store,
        } => {
            let at = StoreAt::new(&store, Durability::Normal);
            plan_runs::feedback(&at, &id, verdict.as_str(), note).map_err(failed)?;
            eprintln!("run {id}: {}", verdict.as_str());
            Ok(exit::OK)
        }
        RunsCommand::Prune {
            store,
            older_than,
            keep_failed,
        } => {
            let at = StoreAt::new(&store, Durability::Normal);
            let days = std::time::Duration::from_secs_f64(older_than * 86_400.0);
            let n = plan_runs::prune(&at, days, keep_failed).map_err(failed)?;
            println!("{n}");
            Ok(exit::OK)
        }
        RunsCommand::Cancel { id, store } => {
            let at = StoreAt::new(&store, Durability::Normal);
            match plan_runs::cancel(&at, &id).map_err(failed)? {
                true => eprintln!("cancelled run {id}"),
                false => eprintln!("run {id} had finished: nothing to cancel"),
            }
            Ok(exit::OK)
        }
    }
}

/// Opens the store at `path` to read it, read-only where this process may not write it.
pub(crate) fn open_to_read(path: &Path) -> Result<Box<dyn RunStore>, u8> {
    StoreAt::new(path, Durability::Normal)
        .open(Access::Read)
        .map_err(failed)
}

fn list(path: &Path, format: Format) -> Exit {
    let read = open_to_read(path).and_then(|store| {
        let runs = read::list(&*store).map_err(failed)?;
        let goals = read::goals_without_runs(&*store, &runs).map_err(failed)?;
        Ok((runs, goals))
    });
    let (runs, goals) = read?;
    let mut out = std::io::stdout().lock();
    for line in text::listing(&runs, &goals, format.is_json()) {
        // NB: a closed stdout (`| head`) is the reader's choice.
        if writeln!(out, "{line}").is_err() {
            break;
        }
    }
    Ok(exit::OK)
}

fn show(path: &Path, id: &str, at: Option<i64>, format: Format) -> Exit {
    let store = open_to_read(path)?;
    let json = format.is_json();
    let text = match at {
        Some(seq) => text::variables(read::variables_at(&*store, id, seq).map_err(failed)?, json),
        None => match read::show_run_or_goal(&*store, id).map_err(failed)? {
            read::Found::Run(shown) => text::run_shown(&shown, json),
            read::Found::Goal(goal) => text::goal_shown(&goal, json),
        },
    };
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    Ok(exit::OK)
}
