//! What a face asks of the engine, as data, and the calls that do it: a goal asked
//! ([`AskRequest`] → [`ask_goal`]), a plan's run started ([`StartRequest`] → [`start`]),
//! the planner's prompt and examples loaded ([`load_planning`]). The CLI, the Python
//! package and evaluations fill in a request from their own inputs and render what comes
//! back; none of them puts the pipeline together itself.

use std::path::{Path, PathBuf};

use plan_bytecode::ValidatedProgram;
use plan_host::{Host, Journal, RunReport, Tracer};
use plan_manifest::Manifest;
use plan_planner::{AskOutcome, Examples, Planner, Template};
use plan_store::NewRun;
use plan_vm::Limits;
use serde_json::{Map, Value};

use crate::ask::AskStore;
use crate::goal::Planning;
use crate::{Error, ErrorKind, Held, StoreAt};

/// A goal to ask.
pub struct AskRequest<'a> {
    pub goal: &'a str,
    /// What the answer must look like (JSON, or text).
    pub response_format: Option<&'a Value>,
    /// Where the goal and its runs are kept; None: nothing is stored.
    pub store: Option<AskAt<'a>>,
}

/// Where a goal asked is stored.
pub struct AskAt<'a> {
    pub at: StoreAt,
    /// The goal's id (default: a new UUID v7); its runs are `ID`, `ID.2`, ...
    pub id: Option<&'a str>,
    /// The conversation it is a round of: its earlier goals go into the prompt.
    pub session: Option<&'a str>,
}

/// What a face hears while a goal is asked or a plan runs.
pub struct Hooks<'a, J> {
    /// Every event (a trace).
    pub journal: &'a mut J,
    /// A stored run's lease that could not be renewed.
    pub warn: fn(&Error),
    /// Each stored run's id as it starts.
    pub started: fn(&str),
}

/// What asking a goal came to.
pub struct Asked {
    pub outcome: AskOutcome,
    /// The stored goal's id, when stored.
    pub goal_id: Option<String>,
    /// The ids of its stored runs, in order.
    pub runs: Vec<String>,
    /// The store could not take a run: the ask ended there.
    pub failed: Option<Error>,
    /// What people should know that did not stop the ask (a session's summary that could
    /// not be made).
    pub warnings: Vec<String>,
}

/// Asks `planner` for `request`'s goal: with a store, the goal is stored first (told its
/// session's earlier rounds), each of its runs is stored, and it is ended with the
/// outcome. An error: the goal could not be stored (nothing was asked).
pub async fn ask_goal(
    planner: &mut Planner<'_>,
    request: AskRequest<'_>,
    hooks: Hooks<'_, impl Journal>,
) -> Result<Asked, Error> {
    let AskRequest {
        goal,
        response_format: rf,
        store,
    } = request;
    let Some(AskAt { at, id, session }) = store else {
        let outcome = planner.ask(goal, rf, hooks.journal).await;
        return Ok(Asked {
            outcome,
            goal_id: None,
            runs: Vec::new(),
            failed: None,
            warnings: Vec::new(),
        });
    };
    let mut warnings = Vec::new();
    if let Some(s) = session {
        warnings.extend(crate::ask::remember(planner, &at, (s, None)).await?);
    }
    let asked_with = crate::goal::request_of(&planner.options);
    let goal_id = crate::ask::create_goal(&at, id, (goal, rf, session), &asked_with)?;
    let store = AskStore {
        at,
        goal_id: goal_id.clone(),
        owner: None,
        also: hooks.journal,
        warn: hooks.warn,
        started: hooks.started,
    };
    let stored = crate::ask::ask(planner, goal, rf, store).await;
    Ok(Asked {
        outcome: stored.outcome,
        goal_id: Some(goal_id),
        runs: stored.runs,
        failed: stored.failed,
        warnings,
    })
}

/// How a plan whose runs preset the variables `presets` is compiled: against `manifest`,
/// those variables counted as set.
pub fn compile_options(manifest: &Manifest, presets: Vec<String>) -> plan_compiler::CompileOptions {
    plan_compiler::CompileOptions {
        manifest: manifest.clone(),
        presets,
        ..plan_compiler::CompileOptions::default()
    }
}

/// The names of `vars`, the variables a run starts with.
pub fn preset_names(vars: &[(String, Value)]) -> Vec<String> {
    vars.iter().map(|(name, _)| name.clone()).collect()
}

/// A plan's run to start.
pub struct StartRequest<'a> {
    /// The run's id, when stored (default: a new UUID v7).
    pub id: Option<String>,
    /// What lists call the plan: its file's name, `<python>`, ...
    pub name: &'a str,
    /// Its text, kept beside its bytecode when stored.
    pub source: Option<&'a str>,
    pub program: &'a ValidatedProgram,
    /// The variables it starts with.
    pub vars: Vec<(String, Value)>,
    pub limits: Limits,
}

/// A run [`create`]d in a store, to be run by [`Created::run`].
pub struct Created {
    held: Held,
    vars: Vec<(String, Value)>,
    limits: Limits,
}

impl Created {
    pub fn id(&self) -> &str {
        self.held.id()
    }

    /// Runs it to its end (or to a question), journaled.
    pub async fn run(
        mut self,
        host: &Host,
        program: &ValidatedProgram,
        tracer: &mut Tracer,
    ) -> RunReport {
        self.held
            .run(host, program, (self.vars, self.limits), None, tracer)
            .await
    }
}

/// Stores `request`'s run as this process's, not started: refused when its id is taken
/// or not a run id, or the store cannot be written.
pub fn create(at: &StoreAt, request: StartRequest<'_>, warn: fn(&Error)) -> Result<Created, Error> {
    let id = request.id.unwrap_or_else(plan_store::new_run_id);
    let presets: Map<String, Value> = request.vars.iter().cloned().collect();
    let new = NewRun {
        id: &id,
        plan: request.name,
        source: request.source,
        pbc: &plan_bytecode::encode(request.program),
        presets: &presets,
        limits: &request.limits,
        parent: None,
    };
    Ok(Created {
        held: Held::create(at, &new, warn)?,
        vars: request.vars,
        limits: request.limits,
    })
}

/// Runs `request`'s plan on `host`: stored in `at` when given (its id with the report),
/// else in memory only.
pub async fn start(
    host: &Host,
    at: Option<&StoreAt>,
    request: StartRequest<'_>,
    hooks: Hooks<'_, Tracer>,
) -> Result<(RunReport, Option<String>), Error> {
    let tracer = hooks.journal;
    let program = request.program;
    let Some(at) = at else {
        let (vars, limits) = (request.vars, request.limits);
        return Ok((
            plan_host::run_plan(host, program, vars, limits, tracer).await,
            None,
        ));
    };
    let run = create(at, request, hooks.warn)?;
    let id = run.id().to_owned();
    (hooks.started)(&id);
    Ok((run.run(host, program, tracer).await, Some(id)))
}

/// Where a planner's prompt and examples come from besides the tools file: files named
/// on the command line or by the caller (each overrides the tools file's `[planner]`).
#[derive(Default)]
pub struct PlanningFiles<'a> {
    /// The tools file, which `[planner] examples` is relative to.
    pub tools: Option<&'a Path>,
    /// A directory of example plans.
    pub examples: Option<PathBuf>,
    /// How many examples go into a prompt.
    pub max_examples: Option<usize>,
    /// A prompt template instead of the built-in one.
    pub prompt: Option<&'a Path>,
}

/// What a planner over `manifest` is given: its prompt's template and its examples, each
/// refused (`bad_input`) when it cannot be read. The examples skipped are in
/// [`Examples::skipped`].
pub fn load_planning(manifest: &Manifest, files: PlanningFiles<'_>) -> Result<Planning, Error> {
    let bad = |msg: String| Error::new(ErrorKind::BadInput, msg);
    let template = match files.prompt {
        None => Template::default(),
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the prompt template {}: {e}", path.display()))
            .and_then(Template::new)
            .map_err(bad)?,
    };
    let cfg = manifest.planner.clone().unwrap_or_default();
    let dir = files
        .examples
        .or_else(|| plan_planner::examples_dir(&cfg, files.tools));
    let examples = match dir {
        None => Examples::default(),
        Some(dir) => Examples::load(&dir).map_err(bad)?,
    };
    Ok(Planning {
        template,
        examples,
        max_examples: files
            .max_examples
            .or(cfg.max_examples)
            .unwrap_or(plan_planner::DEFAULT_MAX_EXAMPLES),
    })
}
