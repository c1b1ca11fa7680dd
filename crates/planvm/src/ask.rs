//! `planvm ask GOAL`: the planner writes a plan, the compiler checks it (errors go back
//! for repair), the host runs it (a failed step goes back for a re-plan). The loop is
//! `plan_planner::Planner::ask`; this file sets it up from the options and prints the
//! outcome (docs/planner.md).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use plan_host::HostOptions;
use plan_planner::{AskOptions, AskStatus, Planner, model_name};
use plan_telemetry::CommandTrace;
use serde_json::Value;

use crate::args::{LimitArgs, OutputArgs, StoreArgs, ToolArgs, json_or_text, parse_run_id};
use crate::session::{self, Exit};
use plan_render::exit;
use plan_runs::StoreAt;
use plan_runs::engine::{AskAt, AskRequest, Asked, Engine, Hooks, PlanningFiles, ask_goal};

/// `ask --help`'s text after the options.
pub(crate) fn help() -> String {
    format!("{}\n\n{ASK_NOTES}", exit::help(exit::PLANVM_ASK))
}

const ASK_NOTES: &str = "\
The planner's LLM is [planner.backend] of the --tools file (else [defaults.backend]);
with --replay it answers from the cassette, as the tools do. See docs/planner.md.";

#[derive(Args, Debug)]
pub(crate) struct AskArgs {
    /// What the answer should achieve, in words.
    #[arg(value_name = "GOAL", value_parser = goal_text)]
    goal: String,
    /// What the answer must look like: JSON such as '{"lang": "Japanese"}', or text.
    #[arg(long, value_name = "JSON", value_parser = json_or_text)]
    response_format: Option<Value>,
    /// Directory of example plans (default: [planner] examples of the tools file, relative
    /// to that file).
    #[arg(long, value_name = "DIR")]
    examples: Option<PathBuf>,
    /// How many examples go into the prompt (default: [planner] max_examples, else 2).
    #[arg(long, value_name = "N")]
    max_examples: Option<usize>,
    /// The prompt template (placeholders {{goal}}, {{response_format}}, {{tools}},
    /// {{examples}}) instead of the built-in one.
    #[arg(long, value_name = "FILE")]
    prompt: Option<PathBuf>,
    /// Print the prompt the planner would get, and stop.
    #[arg(long)]
    print_prompt: bool,
    /// Rounds that may follow a plan with errors (in all, re-plans included).
    #[arg(long, value_name = "N", default_value_t = plan_planner::DEFAULT_MAX_REPAIRS,
          value_parser = clap::value_parser!(u32).range(0..=i64::from(plan_planner::MAX_ROUNDS)))]
    max_repairs: u32,
    /// Rounds that may follow a run that failed at a step.
    #[arg(long, value_name = "N", default_value_t = plan_planner::DEFAULT_MAX_REPLANS,
          value_parser = clap::value_parser!(u32).range(0..=i64::from(plan_planner::MAX_ROUNDS)))]
    max_replans: u32,
    /// Reader repairs of the planner's reply (prose around the plan, a fence, Python
    /// literals) count as errors to repair.
    #[arg(long)]
    strict: bool,
    /// Print the final plan on stderr before the answer.
    #[arg(long)]
    show_plan: bool,
    /// Save the goal and the plan that answered it as a new example in DIR.
    #[arg(long, value_name = "DIR")]
    save_example: Option<PathBuf>,
    /// Read the planner's reply whole before anything runs (by default a streaming
    /// planner's reply is read as it arrives, and calls certain to run start early).
    #[arg(long)]
    no_stream: bool,
    /// The conversation this goal is a round of (with --store): the session's earlier
    /// goals and their answers go into the prompt, the oldest summarized over [planner]
    /// memory_tokens (docs/sessions.md).
    #[arg(long, value_name = "ID", requires = "store", value_parser = parse_run_id)]
    session: Option<String>,
    #[command(flatten)]
    io: ToolArgs,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    store: StoreArgs,
}

pub(crate) fn ask(args: AskArgs) -> Exit {
    let outputs = args.io.outputs(&args.output);
    let inputs = plan_runs::open::Inputs {
        tools: args.io.tools.as_deref(),
        replay: args.io.replay.as_deref(),
        store: args.store.store.as_deref(),
        ..Default::default()
    };
    inputs.check(&outputs).map_err(session::failed)?;
    let files = PlanningFiles {
        tools: args.io.tools.as_deref(),
        examples: args.examples.clone(),
        max_examples: args.max_examples,
        prompt: args.prompt.as_deref(),
    };
    // NB: a prompt printed calls nothing: its host needs no cassette.
    let host = match args.print_prompt {
        true => HostOptions::default(),
        false => {
            let (replay, record) = (args.io.replay.clone(), args.io.record.clone());
            session::host_options(replay, record, &args.limits.times())
        }
    };
    let engine = session::planning_engine(files, host)?;
    let options = AskOptions {
        max_repairs: args.max_repairs,
        max_replans: args.max_replans,
        max_examples: engine.planning().max_examples,
        limits: args.limits.limits(),
        vars: args.io.vars.clone(),
        strict: args.strict,
        stream: !args.no_stream,
        deadline: args.limits.times().deadline,
        conversation: plan_planner::Conversation::default(),
    };
    let request = AskRequest {
        goal: &args.goal,
        response_format: args.response_format.as_ref(),
        store: args.store.store.as_ref().map(|path| AskAt {
            at: StoreAt::new(path, args.store.durability.get()),
            id: args.store.run_id.as_deref(),
            session: args.session.as_deref(),
        }),
    };
    if args.print_prompt {
        return print_prompt(&engine, options, &request);
    }
    ask_planned(&args, &engine, options, request)
}

/// Asks the planner for the goal and prints what came of it.
fn ask_planned(args: &AskArgs, engine: &Engine, options: AskOptions, request: AskRequest) -> Exit {
    let session::Session {
        mut tracer,
        status_line,
        host,
        runtime,
    } = session::start_session(
        engine,
        (args.output.trace.as_deref(), args.output.format),
        engine.planning().examples.skipped(),
    )?;
    let mut planner = engine.planner(options).map_err(session::failed)?;
    let telemetry = traced(args, &mut planner, &mut tracer);
    // NB: also builds each database's index once, which the prompt then reuses.
    for w in host.ground(&args.goal).warnings {
        eprintln!("warning: {w}");
    }
    tracer.restart_clock();
    let hooks = Hooks {
        journal: &mut tracer,
        warn: session::lease_warning,
        started: |id| eprintln!("run {id}"),
    };
    let asked = session::block_on(
        &runtime,
        &host,
        session::traced(&telemetry, ask_goal(&mut planner, request, hooks)),
    );
    let asked = asked.map_err(session::failed)?;
    for w in &asked.warnings {
        eprintln!("warning: {w}");
    }
    if let Some(line) = status_line {
        line.finish();
    }
    let last_run = asked.runs.last().map(String::as_str);
    session::end_trace(
        telemetry,
        &plan_telemetry::Ended::ask(&asked.outcome, last_run),
    );
    if let Some(e) = tracer.write_error() {
        eprintln!("warning: writing the trace failed: {e}");
    }
    finish(args, &asked)
}

/// Keeps the plan as an example when asked to, prints what the ask came to and picks
/// the exit code (the store's failure's, if it failed).
fn finish(args: &AskArgs, asked: &Asked) -> Exit {
    let outcome = &asked.outcome;
    if outcome.status == AskStatus::Answered
        && let (Some(dir), Some(plan)) = (&args.save_example, &outcome.plan)
    {
        match plan_planner::save_example(dir, &args.goal, &[], plan) {
            Ok(path) => eprintln!("saved example {}", path.display()),
            Err(msg) => eprintln!("warning: the example was not saved: {msg}"),
        }
    }
    let json = args.output.format.is_json();
    if args.show_plan
        && !json
        && let Some(plan) = &outcome.plan
    {
        eprintln!("{}", plan.trim_end());
    }
    let run_id = asked.runs.last().map(String::as_str);
    session::print(plan_render::runs::ask_outcome(outcome, json, run_id));
    let store_failed = asked.failed.as_ref().map(|e| exit::of_engine(e.kind));
    Ok(store_failed.unwrap_or(exit::of_ask(outcome.status)))
}

/// The command's trace, when the environment asks for one, with the calls of `planner`'s
/// LLM as spans in it.
fn traced(
    args: &AskArgs,
    planner: &mut Planner<'_>,
    tracer: &mut plan_host::Tracer,
) -> Option<CommandTrace> {
    let workflow = plan_telemetry::Workflow {
        command: "ask",
        plan: None,
        goal: Some(&args.goal),
        run_id: None,
    };
    let t = CommandTrace::from_env(&workflow, planner.host, tracer, session::no_telemetry)?;
    planner.model = (t.trace).model(planner.model.clone(), &model_name(planner.host));
    Some(t)
}

/// `--print-prompt`: the prompt the planner would get, on stdout.
fn print_prompt(engine: &Engine, options: AskOptions, request: &AskRequest) -> Exit {
    // NB: a host serves no call here: its warnings are said all the same.
    session::host(engine, None)?;
    match engine.prompt(request, options, &mut |w| eprintln!("warning: {w}")) {
        Ok(prompt) => {
            let _ = writeln!(std::io::stdout().lock(), "{prompt}");
            Ok(exit::OK)
        }
        Err(e) => Err(session::failed(e)),
    }
}

/// A goal, refused when empty: the planner's reply to nothing would be paid for.
fn goal_text(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err("the goal is empty: say in words what the answer should achieve".into());
    }
    Ok(text.to_owned())
}
