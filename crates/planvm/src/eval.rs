//! `planvm eval DATASET --tools FILE`: every goal of a dataset asked as `planvm ask` asks
//! it, its answer checked, a report with the pass rate (docs/eval.md). The engine is
//! `plan_eval::Evaluation`; this file fills in its request, draws the progress bar,
//! prints the report and picks the exit code.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use plan_eval::{EvalRequest, Evaluated, Evaluation};
use plan_planner::AskOptions;
use plan_render::exit;
use plan_runs::StoreAt;

use crate::args::{DurabilityArg, Format, LimitArgs};
use crate::session::{self, Exit, fail};

#[derive(Args, Debug)]
pub(crate) struct EvalArgs {
    /// The dataset: one JSON object per line, `{"id"?, "goal", "response_format"?,
    /// "vars"?, "labels"?, "expected"?, "must_contain"?, "must_not_contain"?, "regex"?}`.
    #[arg(value_name = "DATASET.jsonl")]
    dataset: PathBuf,
    /// Tools file: the tools, their backends and the planner (`[planner]`).
    #[arg(long, value_name = "FILE.toml")]
    tools: Option<PathBuf>,
    /// Answer every call from recordings, with no network: a directory that `--record`
    /// filled (each case from its own cassette), or one cassette for all cases.
    #[arg(long, value_name = "DIR|FILE.jsonl", conflicts_with_all = ["record", "tools_from"])]
    replay: Option<PathBuf>,
    /// Keep each case's planner, tool and judge calls in DIR/<case>.cassette.jsonl.
    #[arg(long, value_name = "DIR", conflicts_with = "tools_from")]
    record: Option<PathBuf>,
    /// Answer the tools from DIR/<case>.cassette.jsonl where a recorded call matches,
    /// else call them (and add them there); the planner and the judge are asked live.
    #[arg(long, value_name = "DIR")]
    tools_from: Option<PathBuf>,
    /// Cases asked at once.
    #[arg(long, value_name = "N", default_value_t = 4,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    jobs: u32,
    /// `json`: `{"summary", "cases", "comparison"?, "skipped"}`; `text`: a table.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Write the report here instead of stdout.
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// An earlier JSON report: what changed, regressions first; exit 1 when a case that
    /// passed there fails now.
    #[arg(long, value_name = "BASELINE.json")]
    compare: Option<PathBuf>,
    /// Exit 1 when the pass rate is below RATE (0 to 1).
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    fail_under: Option<f64>,
    /// Write each passing case's goal, labels and plan as an example in DIR (never over
    /// an existing file), for the planner's example selection.
    #[arg(long, value_name = "DIR")]
    promote: Option<PathBuf>,
    /// Keep each case as a stored goal of this evaluation, with its runs and its verdict,
    /// in this store (an SQLite file, created if missing); with `--compare`, show what
    /// people said of the baseline's runs. Default: $PLANVM_STORE.
    #[arg(long, value_name = "DB", env = "PLANVM_STORE")]
    store: Option<PathBuf>,
    /// The evaluation's id in the store (default: `eval-` and 16 hex digits that sort by
    /// time). Letters, digits, `.`, `_`, `-`.
    #[arg(long, value_name = "ID", requires = "store", value_parser = crate::args::parse_run_id)]
    eval_id: Option<String>,
    #[command(flatten)]
    durability: DurabilityArg,
    /// Rounds that may follow a plan with errors.
    #[arg(long, value_name = "N", default_value_t = plan_planner::DEFAULT_MAX_REPAIRS)]
    max_repairs: u32,
    /// Rounds that may follow a run that failed at a step.
    #[arg(long, value_name = "N", default_value_t = plan_planner::DEFAULT_MAX_REPLANS)]
    max_replans: u32,
    #[command(flatten)]
    limits: LimitArgs,
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("`{s}` is not a rate between 0 and 1")),
    }
}

pub(crate) fn eval(args: EvalArgs) -> Exit {
    let request = EvalRequest {
        dataset: args.dataset.clone(),
        tools: args.tools.clone(),
        replay: args.replay.clone(),
        record: args.record.clone(),
        tools_from: args.tools_from.clone(),
        outputs: args
            .output
            .iter()
            .map(|o| ("--output", o.clone()))
            .collect(),
        baseline: args.compare.clone(),
        store: (args.store.as_ref()).map(|p| StoreAt::new(p, args.durability.get())),
        eval_id: args.eval_id.clone(),
        options: AskOptions {
            max_repairs: args.max_repairs,
            max_replans: args.max_replans,
            limits: args.limits.limits(),
            deadline: args.limits.times().deadline,
            ..AskOptions::default()
        },
        tool_timeout: args.limits.times().tool_timeout,
        jobs: args.jobs as usize,
        fail_under: args.fail_under,
    };
    let evaluation = Evaluation::prepare(request, &mut |w| eprintln!("warning: {w}"))
        .map_err(session::failed)?;
    let runtime = session::multi_thread_runtime()?;
    let bar = crate::progress::progress_bar(evaluation.len(), "cases");
    let host = evaluation.host().clone();
    let reports = session::block_on(&runtime, &host, async {
        evaluation
            .run(&mut |r| {
                bar.inc(1);
                if !r.passed() {
                    bar.println(format!("fail {}: {}", r.id, r.reason));
                }
            })
            .await
    });
    bar.finish_and_clear();
    drop(runtime);
    report(&args, &evaluation.conclude(reports))
}

/// Says how the evaluation ended, promotes what passed, writes the report and picks the
/// exit code from the gates.
fn report(args: &EvalArgs, evaluated: &Evaluated) -> Exit {
    let c = &evaluated.concluded;
    session::lost_spans(evaluated.lost_spans);
    if let Some(st) = &evaluated.stored {
        eprintln!("evaluation {} stored in {}", st.eval, st.at.shown());
    }
    for w in &c.warnings {
        eprintln!("warning: {w}");
    }
    if let Some(e) = &c.baseline_error {
        return Err(fail(exit::DATA_ERR, e));
    }
    for (id, promoted) in args
        .promote
        .as_deref()
        .map_or_else(Vec::new, |d| evaluated.promote(d))
    {
        match promoted {
            Ok(path) => eprintln!("promoted {id}: {}", path.display()),
            Err(e) => eprintln!("warning: case {id} not promoted: {e}"),
        }
    }
    let text = match args.format {
        Format::Json => format!("{}\n", evaluated.json()),
        Format::Text => evaluated.text(),
    };
    let written = match &args.output {
        Some(path) => std::fs::write(path, &text).map_err(|e| (path.display().to_string(), e)),
        None => std::io::stdout()
            .lock()
            .write_all(text.as_bytes())
            .map_err(|e| ("stdout".to_owned(), e)),
    };
    if let Err((to, e)) = written {
        return Err(fail(
            exit::CANT_CREATE,
            format_args!("cannot write the report to {to}: {e}"),
        ));
    }
    if let Some(gate) = c.below {
        eprintln!(
            "pass rate {:.3} is below --fail-under {gate}",
            c.summary.pass_rate
        );
    }
    if c.passed() {
        Ok(exit::OK)
    } else {
        Ok(exit::RUN_FAILED)
    }
}
