//! `planvm runs list|show|feedback|cancel|prune`: the runs of a store, for people and for
//! machines.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use plan_render::{SHOW_PREVIEW, exit, utc};
use serde_json::{Value, json};

use plan_runs::open::Access;
use plan_runs::{StoreAt, read};
use plan_store::{Durability, RunStore};

use crate::args::{Format, Verdict, parse_days};
use crate::goal_rows;
use crate::session::failed;

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

pub(crate) fn runs(cmd: RunsCommand) -> u8 {
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
            match plan_runs::feedback(&at, &id, verdict.as_str(), note) {
                Ok(()) => eprintln!("run {id}: {}", verdict.as_str()),
                Err(e) => return failed(e),
            }
            exit::OK
        }
        RunsCommand::Prune {
            store,
            older_than,
            keep_failed,
        } => {
            let at = StoreAt::new(&store, Durability::Normal);
            let days = std::time::Duration::from_secs_f64(older_than * 86_400.0);
            match plan_runs::prune(&at, days, keep_failed) {
                Ok(n) => println!("{n}"),
                Err(e) => return failed(e),
            }
            exit::OK
        }
        RunsCommand::Cancel { id, store } => {
            match plan_runs::cancel(&StoreAt::new(&store, Durability::Normal), &id) {
                Ok(true) => eprintln!("cancelled run {id}"),
                Ok(false) => eprintln!("run {id} had finished: nothing to cancel"),
                Err(e) => return failed(e),
            }
            exit::OK
        }
    }
}

/// Opens the store at `path` to read it, read-only where this process may not write it.
pub(crate) fn open_to_read(path: &Path) -> Result<Box<dyn RunStore>, u8> {
    StoreAt::new(path, Durability::Normal)
        .open(Access::Read)
        .map_err(failed)
}

fn list(path: &Path, format: Format) -> u8 {
    let read = open_to_read(path).and_then(|store| {
        let runs = read::list(&*store).map_err(failed)?;
        let goals = read::goals_without_runs(&*store, &runs).map_err(failed)?;
        Ok((runs, goals))
    });
    let (runs, goals) = match read {
        Ok(r) => r,
        Err(code) => return code,
    };
    let mut out = std::io::stdout().lock();
    let ids = runs
        .iter()
        .map(|r| &r.id)
        .chain(goals.iter().map(|g| &g.id));
    let width = ids.map(String::len).max().unwrap_or(0);
    for g in &goals {
        if writeln!(out, "{}", goal_rows::line(g, width, format)).is_err() {
            return exit::OK;
        }
    }
    for r in &runs {
        let line = match format {
            Format::Json => {
                let mut line = json!({
                    "id": r.id,
                    "status": r.status,
                    "plan": r.plan,
                    "created_at": utc(r.created_at),
                    "updated_at": utc(r.updated_at),
                    "steps": r.steps,
                    "tool_calls": r.tool_calls,
                    "parent": r.parent,
                    "branch_seq": r.branch_seq,
                });
                if let Some(q) = &r.question {
                    line["question"] = q.clone();
                }
                if let Some(u) = &r.usage {
                    line["usage"] = json!(u);
                }
                line.to_string()
            }
            Format::Text => format!(
                "{:<width$}  {:<11}  {:>6} steps  {:>4} calls  {}  {}{}",
                r.id,
                r.status.as_str(),
                r.steps,
                r.tool_calls,
                utc(r.updated_at),
                r.plan,
                match (&r.parent, r.branch_seq) {
                    (Some(p), Some(s)) => format!("  (branch of {p} at seq_no {s})"),
                    _ => String::new(),
                }
            ),
        };
        if writeln!(out, "{line}").is_err() {
            break;
        }
    }
    exit::OK
}

fn show(path: &Path, id: &str, at: Option<i64>, format: Format) -> u8 {
    let store = match open_to_read(path) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let mut out = std::io::stdout().lock();
    if let Some(seq) = at {
        let vars = match read::variables_at(&*store, id, seq) {
            Ok(v) => v,
            Err(e) => return failed(e),
        };
        let _ = match format {
            Format::Json => writeln!(out, "{}", Value::Object(vars)),
            Format::Text => {
                let mut text = String::new();
                for (name, v) in &vars {
                    text.push_str(&format!(
                        "{name} = {}\n",
                        plan_value::preview(v, SHOW_PREVIEW)
                    ));
                }
                write!(out, "{text}")
            }
        };
        return exit::OK;
    }
    let shown = match read::show(&*store, id) {
        Ok(s) => s,
        Err(e) if e.kind == plan_runs::ErrorKind::UnknownRun => {
            return match store.goal(id) {
                Ok(Some(goal)) => goal_rows::show(&mut out, &goal, format),
                _ => failed(e),
            };
        }
        Err(e) => return failed(e),
    };
    let _ = match format {
        Format::Json => writeln!(out, "{}", json!(shown)),
        Format::Text => {
            let mut t = run_text(&shown);
            steps_text(&mut t, &shown.steps);
            calls_text(&mut t, &shown.calls);
            write!(out, "{t}")
        }
    };
    exit::OK
}

/// A shown run's row, its question, error, evaluation and a person's verdict, as text.
fn run_text(shown: &read::Shown) -> String {
    let read::Shown {
        run,
        feedback,
        eval,
        ..
    } = shown;
    let mut t = format!(
        "run {}  {}  {}\n  {} steps, {} tool calls, created {}, updated {}\n",
        run.id,
        run.status.as_str(),
        run.plan,
        run.steps,
        run.tool_calls,
        utc(run.created_at),
        utc(run.updated_at)
    );
    if let (Some(p), Some(s)) = (&run.parent, run.branch_seq) {
        t.push_str(&format!("  branch of {p} at seq_no {s}\n"));
    }
    if let Some(a) = &run.final_answer {
        t.push_str(&format!(
            "  final_answer: {}\n",
            plan_value::preview(a, SHOW_PREVIEW)
        ));
    }
    if let Some(q) = plan_runs::question_of(run) {
        t.push_str(&format!(
            "  asks (seq_no {}): {}\n",
            q.seq_no.unwrap_or(-1),
            q.question
        ));
        if let Some(choices) = &q.choices {
            t.push_str(&format!("  choices: {}\n", choices.join(" | ")));
        }
        t.push_str(&format!(
            "  answer with: planvm resume {} --input TEXT\n",
            run.id
        ));
    }
    if let Some(e) = &run.error {
        t.push_str(&format!(
            "  error[{}]: {}\n",
            e["code"].as_str().unwrap_or("?"),
            e["message"].as_str().unwrap_or("")
        ));
    }
    if let Some(e) = eval {
        let reason = if e.case.reason.is_empty() {
            String::new()
        } else {
            format!(": {}", e.case.reason)
        };
        t.push_str(&format!(
            "  evaluation {}, case {}: {} (score {:.2}){reason}\n",
            e.eval, e.case.case_id, e.case.verdict, e.case.score,
        ));
    }
    if let Some(f) = feedback {
        let note = f
            .note
            .as_deref()
            .map_or(String::new(), |n| format!(": {n}"));
        t.push_str(&format!("  a person's verdict: {}{note}\n", f.verdict));
    }
    t
}

/// A shown run's steps, each with what it wrote, as text.
fn steps_text(t: &mut String, steps: &[plan_store::StepRow]) {
    t.push_str("\nsteps:\n");
    for s in steps {
        let seq = s.seq_no.map_or("-".to_owned(), |n| n.to_string());
        t.push_str(&format!("  {:>5}  seq {seq:>3}  {}\n", s.step, s.op));
        for (name, v) in &s.writes {
            t.push_str(&format!(
                "           {name} = {}\n",
                plan_value::preview(v, SHOW_PREVIEW)
            ));
        }
        for (name, bytes) in &s.omitted {
            t.push_str(&format!("           {name} = ({bytes} bytes, not kept)\n"));
        }
    }
}

/// A shown run's calls, each with its arguments and answer, as text.
fn calls_text(t: &mut String, calls: &[plan_store::CallRow]) {
    t.push_str("\ncalls:\n");
    for c in calls {
        let seq = c.seq_no.map_or("-".to_owned(), |n| n.to_string());
        let result = match (&c.output, &c.error) {
            (Some(v), _) => plan_value::preview(v, SHOW_PREVIEW),
            (None, Some(e)) => format!("error: {e}"),
            (None, None) => "(no answer)".to_owned(),
        };
        let latency = c.latency_ms.map_or(String::new(), |l| format!(" {l} ms"));
        t.push_str(&format!(
            "  step {:>5}  seq {seq:>3}  {} [{}{latency}]\n    args: {}\n    -> {result}\n",
            c.step,
            c.tool,
            c.state.as_str(),
            plan_value::preview(&Value::Object(c.args.clone()), SHOW_PREVIEW),
        ));
    }
}
