//! `planvm eval DATASET --tools FILE`: every goal of a dataset asked as `planvm ask` asks
//! it, its answer checked, a report with the pass rate (docs/eval.md). The engine is
//! `plan_eval`; this file sets it up, prints the report and picks the exit code.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use plan_eval::{Cassettes, CassettesError, Setup};
use plan_host::{Host, HostOptions};
use plan_planner::AskOptions;
use plan_render::exit;
use plan_runs::StoreAt;
use serde_json::Value;

use crate::args::{DurabilityArg, Format, LimitArgs};
use crate::session::{self, fail};

/// `eval --help`'s text after the options.
pub(crate) fn help() -> String {
    exit::help(exit::PLANVM_EVAL)
}

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

pub(crate) fn eval(args: EvalArgs) -> u8 {
    let (cases, skipped) = match read_cases(&args) {
        Ok(read) => read,
        Err(code) => return code,
    };
    let (cassettes, single) = match open_cassettes(&args, &cases) {
        Ok(opened) => opened,
        Err(code) => return code,
    };
    let baseline = match read_baseline(&args) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let options = HostOptions {
        replay: single,
        tool_timeout: args.limits.times().tool_timeout,
        ..HostOptions::default()
    };
    let tools = crate::serve::tools(args.tools.as_deref());
    let engine = match session::planning_engine(tools, options) {
        Ok(e) => e,
        Err(code) => return code,
    };
    let host = match session::host(&engine, None) {
        Ok(h) => h,
        Err(code) => return code,
    };
    let planning = engine.planning();
    let (reports, stored) = match ask_cases(&args, &host, (planning, cassettes), &cases) {
        Ok(asked) => asked,
        Err(code) => return code,
    };
    report(
        &args,
        &reports,
        &skipped,
        stored.as_ref(),
        baseline.as_ref(),
    )
}

/// The dataset's cases, and the lines skipped (each said on stderr).
fn read_cases(args: &EvalArgs) -> Result<(Vec<plan_eval::Case>, Vec<String>), u8> {
    let text = std::fs::read_to_string(&args.dataset).map_err(|e| {
        fail(
            exit::NO_INPUT,
            format_args!("cannot read {}: {e}", args.dataset.display()),
        )
    })?;
    let (cases, skipped) = plan_eval::parse(&text);
    for s in &skipped {
        eprintln!("warning: {}: {s}: skipped", args.dataset.display());
    }
    Ok((cases, skipped))
}

/// Where each case's calls are recorded or replayed from, and the one cassette all
/// replay from, if that is what `--replay` names; refused when a cassette written would
/// be one of the inputs.
fn open_cassettes(
    args: &EvalArgs,
    cases: &[plan_eval::Case],
) -> Result<(Cassettes, Option<PathBuf>), u8> {
    let opened = Cassettes::open(
        args.record.as_deref(),
        args.tools_from.as_deref(),
        args.replay.as_deref(),
    );
    let cassettes = match opened {
        Ok(c) => c,
        Err(CassettesError::Create(e)) => return Err(fail(exit::CANT_CREATE, e)),
        Err(CassettesError::Missing(e)) => return Err(fail(exit::NO_INPUT, e)),
    };
    let single = match &cassettes {
        Cassettes::Shared => args.replay.as_deref(),
        _ => None,
    };
    let written = match &cassettes {
        Cassettes::Record(dir) => Some(("--record", dir)),
        Cassettes::ToolsFrom(dir) => Some(("--tools-from", dir)),
        Cassettes::Shared | Cassettes::Replay(_) => None,
    };
    let files: Vec<PathBuf> = written.map_or_else(Vec::new, |(_, dir)| {
        plan_eval::cassette_names(cases)
            .iter()
            .map(|n| dir.join(n))
            .collect()
    });
    let mut outputs: Vec<(&str, &std::path::Path)> = Vec::new();
    if let Some(o) = &args.output {
        outputs.push(("--output", o));
    }
    if let Some((flag, _)) = written {
        outputs.extend(files.iter().map(|f| (flag, f.as_path())));
    }
    session::refuse_clobbering(
        Some(("the dataset", args.dataset.as_path())),
        args.tools.as_deref(),
        single,
        args.store.as_deref(),
        &outputs,
    )?;
    let single = single.map(PathBuf::from);
    Ok((cassettes, single))
}

/// `--compare`'s earlier report.
fn read_baseline(args: &EvalArgs) -> Result<Option<Value>, u8> {
    let Some(path) = &args.compare else {
        return Ok(None);
    };
    std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str::<Value>(&t).map_err(|e| e.to_string()))
        .map(Some)
        .map_err(|e| {
            fail(
                exit::DATA_ERR,
                format_args!("cannot read the baseline {}: {e}", path.display()),
            )
        })
}

/// Every case asked on `host`, `--jobs` at once, with a progress bar; with `--store`, as
/// an evaluation begun there once everything else is ready.
fn ask_cases(
    args: &EvalArgs,
    host: &Host,
    (planning, cassettes): (&plan_runs::goal::Planning, Cassettes),
    cases: &[plan_eval::Case],
) -> Result<(Vec<plan_eval::CaseReport>, Option<plan_eval::Stored>), u8> {
    // NB: made before the runtime: its exporter has a blocking client of its own.
    let telemetry =
        session::telemetry(|| plan_telemetry::Telemetry::from_env(host.redactor().clone()));
    let options = AskOptions {
        max_repairs: args.max_repairs,
        max_replans: args.max_replans,
        max_examples: planning.max_examples,
        limits: args.limits.limits(),
        deadline: args.limits.times().deadline,
        ..AskOptions::default()
    };
    let planned = (planning.template.clone(), planning.examples.clone());
    let setup = Setup::on(host, cassettes, planned, options)
        .map_err(|e| session::failed(plan_runs::Error::from(e)))?;
    let store = match &args.store {
        None => None,
        Some(path) => {
            let at = StoreAt::new(path, args.durability.get());
            let dataset = args.dataset.display().to_string();
            Some(plan_eval::begin(at, args.eval_id.clone(), &dataset).map_err(session::failed)?)
        }
    };
    let setup = Setup {
        store: store.clone(),
        telemetry: telemetry.as_ref(),
        ..setup
    };
    let runtime = session::multi_thread_runtime()?;
    let bar = crate::progress::progress_bar(cases.len(), "cases");
    let reports = session::block_on(&runtime, host, async {
        plan_eval::run(&setup, cases, args.jobs as usize, &mut |r| {
            bar.inc(1);
            if !r.passed() {
                bar.println(format!("fail {}: {}", r.id, r.reason));
            }
        })
        .await
    });
    bar.finish_and_clear();
    if let Some(t) = &telemetry {
        session::lost_spans(t.finish());
    }
    Ok((reports, store))
}

/// Ends the evaluation ([`plan_eval::conclude`]), promotes what passed, writes the
/// report and picks the exit code from the gates.
fn report(
    args: &EvalArgs,
    reports: &[plan_eval::CaseReport],
    skipped: &[String],
    stored: Option<&plan_eval::Stored>,
    baseline: Option<&Value>,
) -> u8 {
    let c = plan_eval::conclude(reports, stored, baseline, args.fail_under);
    if let Some(st) = stored {
        eprintln!("evaluation {} stored in {}", st.eval, st.at.shown());
    }
    for w in &c.warnings {
        eprintln!("warning: {w}");
    }
    if let Some(e) = &c.baseline_error {
        return fail(exit::DATA_ERR, e);
    }
    if let Some(dir) = &args.promote {
        promote(dir, reports);
    }
    let comparison = c.comparison.as_ref();
    let text = match args.format {
        Format::Json => {
            let v = plan_eval::report_json(&c.summary, reports, skipped, stored, comparison);
            format!("{v}\n")
        }
        Format::Text => plan_eval::text_report(&c.summary, reports, comparison, skipped),
    };
    let written = match &args.output {
        Some(path) => std::fs::write(path, &text).map_err(|e| (path.display().to_string(), e)),
        None => std::io::stdout()
            .lock()
            .write_all(text.as_bytes())
            .map_err(|e| ("stdout".to_owned(), e)),
    };
    if let Err((to, e)) = written {
        return fail(
            exit::CANT_CREATE,
            format_args!("cannot write the report to {to}: {e}"),
        );
    }
    if let Some(gate) = c.below {
        eprintln!(
            "pass rate {:.3} is below --fail-under {gate}",
            c.summary.pass_rate
        );
    }
    if c.passed() {
        exit::OK
    } else {
        exit::RUN_FAILED
    }
}

/// Each passing case's plan as an example in `dir`.
fn promote(dir: &std::path::Path, reports: &[plan_eval::CaseReport]) {
    for r in reports.iter().filter(|r| r.passed()) {
        let Some(plan) = &r.plan else { continue };
        match plan_planner::save_example(dir, &r.goal, &r.labels, plan) {
            Ok(path) => eprintln!("promoted {}: {}", r.id, path.display()),
            Err(e) => eprintln!("warning: case {} not promoted: {e}", r.id),
        }
    }
}
