//! The engine every face asks ([`Engine`]: the tools, the host serving them, the planner
//! of goals and the one cache of compiled plans), what a face asks of it, as data, and the
//! calls that do it: a goal asked ([`AskRequest`] → [`ask_goal`]), a plan's run started
//! ([`StartRequest`] → [`start`]), plans submitted to a store's queue ([`SubmitRequest`]
//! → [`Engine::submit`]). The CLI, the service, workers, the Python package and
//! evaluations fill in a request from their own inputs and render what comes back; none
//! of them puts the pipeline together itself.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use plan_bytecode::ValidatedProgram;
use plan_host::{Host, HostOptions, Journal, RunReport, Tracer};
use plan_manifest::Manifest;
use plan_planner::{AskOptions, AskOutcome, Examples, Planner, Template};
use plan_store::{NewRun, OwnedNewRun};
use plan_vm::Limits;
use serde_json::{Map, Value};

use crate::ask::AskStore;
use crate::compiled::CompileCache;
use crate::goal::{GoalPlanner, Planning};
pub use crate::load::load_tools;
use crate::load::{LoadError, Loaded};
use crate::queue::Worker;
use crate::{Branch, BranchRequest, Error, ErrorKind, Held, StoreAt};

/// What a face sets up once and asks everything of: the tools (their manifest), the host
/// that serves them (made when first needed: submitting plans only compiles them), the
/// planner of goals (its prompt and examples; its LLM made when first asked for), and the
/// one cache of compiled plans, by name, source and presets.
pub struct Engine {
    manifest: Manifest,
    host_options: HostOptions,
    host: OnceLock<Result<Arc<Host>, Error>>,
    planning: Arc<Planning>,
    planner: OnceLock<Result<Arc<GoalPlanner>, Error>>,
    compiled: CompileCache<Arc<Compiled>>,
}

/// A plan compiled by [`Engine::compile`]: the program with its diagnostics, and its
/// bytecode as a store keeps it. NB: its text is not kept (`loaded.source` is None):
/// the cache holds no plan's source, which the caller has.
pub struct Compiled {
    pub loaded: Loaded,
    pub pbc: Vec<u8>,
    /// Whether it was read as source (else as bytecode).
    pub from_source: bool,
}

impl Engine {
    /// The engine over `manifest`'s tools, its host to be set up with `host`, its goals
    /// planned with `planning`.
    pub fn new(manifest: Manifest, planning: Planning, host: HostOptions) -> Engine {
        Engine {
            manifest,
            host_options: host,
            host: OnceLock::new(),
            planning: Arc::new(planning),
            planner: OnceLock::new(),
            compiled: CompileCache::default(),
        }
    }

    /// The engine over the tools file `files.tools` names (else the built-in tools), its
    /// planner given `files`' prompt and examples: refused (`bad_input`) when one cannot
    /// be read.
    pub fn open(files: PlanningFiles<'_>, host: HostOptions) -> Result<Engine, Error> {
        let manifest = load_tools(files.tools)?;
        let planning = load_planning(&manifest, files)?;
        Ok(Engine::new(manifest, planning, host))
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// What the planner is given: its prompt's template and examples.
    pub fn planning(&self) -> &Planning {
        &self.planning
    }

    /// The host serving the tools, set up on first use (its warnings in
    /// [`Host::warnings`]); refused when it cannot be (a cassette missing, a backend's
    /// key unset, ...).
    pub fn host(&self) -> Result<&Arc<Host>, Error> {
        let made = self.host.get_or_init(|| {
            let host = Host::new(self.manifest.clone(), self.host_options.clone())?;
            Ok(Arc::new(host))
        });
        made.as_ref().map_err(Clone::clone)
    }

    /// The planner of goals: its LLM on [`Engine::host`], what it is given; refused
    /// (`bad_input`) when the tools file names one wrongly (a replay backend with no
    /// cassette, a temperature that is not a number), (`config`) when it names none or
    /// the one it names cannot be set up.
    pub fn goal_planner(&self) -> Result<&Arc<GoalPlanner>, Error> {
        let made = self.planner.get_or_init(|| {
            let model = plan_planner::model_for(self.host()?)?;
            let planning = self.planning.clone();
            Ok(Arc::new(GoalPlanner { model, planning }))
        });
        made.as_ref().map_err(Clone::clone)
    }

    /// A planner of one goal asked with `options`.
    pub fn planner(&self, options: AskOptions) -> Result<Planner<'_>, Error> {
        let goals = self.goal_planner()?;
        Ok(Planner {
            host: self.host()?,
            model: goals.model.clone(),
            template: goals.planning.template.clone(),
            examples: goals.planning.examples.clone(),
            options,
        })
    }

    /// The prompt the planner would be given for `request` asked with `options`, calling
    /// nothing: a session's earlier rounds as its store holds them (a summary due is made
    /// by the ask itself), the examples chosen, and what grounding shows of the databases
    /// (what it went on without told to `warn`).
    pub fn prompt(
        &self,
        request: &AskRequest<'_>,
        mut options: AskOptions,
        warn: &mut dyn FnMut(&str),
    ) -> Result<String, Error> {
        if let Some(AskAt {
            at,
            session: Some(session),
            ..
        }) = &request.store
        {
            options.conversation = crate::ask::stored_conversation(at, session, None)?;
        }
        let chosen = (self.planning.examples).select(request.goal, options.max_examples);
        // NB: the host serves no call here: it only reads the databases grounding covers.
        let grounded = self.host()?.ground(request.goal);
        grounded.warnings.iter().for_each(|w| warn(w));
        Ok(self.planning.template.render(
            (request.goal, request.response_format),
            &self.manifest,
            &chosen,
            (&options.conversation, &grounded.text),
        ))
    }

    /// What the planner is shown of each database for `question` (`planvm ground`):
    /// refused (`bad_input`) when no `sql` tool has a database to ground, or the host
    /// cannot be set up. Blocking: it reads the schemas that changed.
    pub fn ground(&self, question: &str) -> Result<plan_host::Grounded, Error> {
        if self.manifest.grounded_tools().is_empty() {
            let message = "the tools file has no sql tool for grounding to cover";
            return Err(Error::new(ErrorKind::BadInput, message));
        }
        Ok(self.host()?.ground(question))
    }

    /// `source`, which messages call `name`, compiled against the tools with `presets`
    /// counted as set (once while it comes again: a plan posted or listed many times):
    /// refused when it is not a valid program. `fresh` hears of each plan compiled anew,
    /// not from the cache (its warnings said once), its source still with it.
    pub fn compile(
        &self,
        name: &str,
        source: &[u8],
        presets: Vec<String>,
        fresh: &mut dyn FnMut(&Loaded),
    ) -> Result<Arc<Compiled>, LoadError> {
        self.compiled.get(name, source, presets, |presets| {
            let options = compile_options(&self.manifest, presets);
            let mut loaded = crate::load::load_bytes(name, source.to_vec(), options)?;
            fresh(&loaded);
            let pbc = plan_bytecode::encode(&loaded.program);
            let from_source = loaded.source.take().is_some();
            Ok(Arc::new(Compiled {
                loaded,
                pbc,
                from_source,
            }))
        })
    }

    /// `source`, which messages call `name`, compiled for one run that starts with `vars`
    /// set (not kept: `planvm run`'s plan).
    pub fn load(
        &self,
        name: &str,
        source: Vec<u8>,
        vars: &[(String, Value)],
    ) -> Result<Loaded, LoadError> {
        let options = compile_options(&self.manifest, preset_names(vars));
        crate::load::load_bytes(name, source, options)
    }

    /// `request`'s branch in the store at `at`: its parent's point found (a goal none of
    /// whose plans has run yet is `busy`), its plan compiled to go on from there (verified
    /// with the variables that exist there counted as set, from its own instruction with
    /// the point's seq_no; not kept: no other run starts there) and checked against the
    /// state it starts in. Blocking: it reads the store.
    pub fn branch(&self, at: &StoreAt, request: BranchRequest<'_>) -> Result<Branch, Refused> {
        let BranchRequest {
            parent,
            at: seq_no,
            name,
            plan,
            limits,
        } = request;
        let point = crate::branch::point_of(at, parent, seq_no).map_err(Refused::Engine)?;
        let options = point.compile_options(self.manifest.clone());
        let loaded = crate::load::load_bytes(name, plan, options).map_err(Refused::Plan)?;
        (point.check(&loaded.program, &limits, name)).map_err(Refused::Engine)?;
        Ok(Branch::new(point, loaded, name, limits))
    }

    /// A worker on the host taking runs from the store at `at`, and goals too when the
    /// engine has a planner (else why it takes none, beside it), one run at a time and
    /// polling every second until the caller says otherwise. Refused when the host cannot
    /// be set up or the tools file names its planner wrongly (`bad_input`).
    pub fn worker(&self, at: StoreAt, warn: fn(&Error)) -> Result<(Worker, Option<Error>), Error> {
        let host = self.host()?.clone();
        let (planner, no_goals) = match self.goal_planner() {
            Ok(planner) => (Some(planner.clone()), None),
            Err(e) if e.kind == ErrorKind::BadInput => return Err(e),
            Err(e) => (None, Some(e)),
        };
        let worker = Worker {
            at,
            host,
            concurrency: 1,
            retry_unknown_writes: false,
            poll: std::time::Duration::from_secs(1),
            warn,
            watch: None,
            planner,
        };
        Ok((worker, no_goals))
    }

    /// Puts `request`'s runs into the queue of the store at `at`, in one transaction
    /// (all, or none), once every plan compiled: their ids, in order.
    pub fn submit(
        &self,
        at: &StoreAt,
        request: SubmitRequest,
        fresh: &mut dyn FnMut(&Loaded),
    ) -> Result<Vec<String>, Refused> {
        let mut runs = Vec::with_capacity(request.plans.len());
        for plan in request.plans {
            let mut vars = request.vars.clone();
            for (name, value) in plan.vars {
                vars.retain(|(n, _)| *n != name);
                vars.push((name, value));
            }
            let bytes = match plan.source {
                PlanSource::Bytes(bytes) => bytes,
                PlanSource::File(path) => crate::load::read(&path).map_err(Refused::Plan)?,
            };
            let compiled = self
                .compile(&plan.name, &bytes, preset_names(&vars), fresh)
                .map_err(Refused::Plan)?;
            // NB: a plan read as source is valid UTF-8: its text is its bytes.
            let source = (compiled.from_source).then(|| String::from_utf8_lossy(&bytes));
            runs.push(OwnedNewRun {
                id: request.id.clone().unwrap_or_else(plan_store::new_run_id),
                plan: plan.name,
                source: source.map(String::from),
                pbc: compiled.pbc.clone(),
                presets: vars.into_iter().collect(),
                limits: request.limits.clone(),
                parent: None,
            });
        }
        crate::queue::submit(at, &runs).map_err(Refused::Engine)?;
        Ok(runs.into_iter().map(|r| r.id).collect())
    }
}

/// Plans to put into a store's queue ([`Engine::submit`]).
pub struct SubmitRequest {
    pub plans: Vec<PlanToSubmit>,
    /// The variables every run starts with; a plan's own win.
    pub vars: Vec<(String, Value)>,
    /// The run's id, for one plan (default: a new UUID v7 each).
    pub id: Option<String>,
    pub limits: Limits,
}

/// One plan of a [`SubmitRequest`].
pub struct PlanToSubmit {
    /// What messages and lists call it (its file's name).
    pub name: String,
    pub source: PlanSource,
    /// The variables its run starts with, over the request's.
    pub vars: Vec<(String, Value)>,
}

impl PlanToSubmit {
    /// The plan in the file at `path`, named by it.
    pub fn file(path: PathBuf) -> PlanToSubmit {
        PlanToSubmit {
            name: path.display().to_string(),
            source: PlanSource::File(path),
            vars: Vec::new(),
        }
    }

    /// The runs a list file names (as `planvm batch` reads one): refused (`bad_input`)
    /// when it cannot be read or a line names a cassette (the workers' serves a queue).
    pub fn listed(list: &Path) -> Result<Vec<PlanToSubmit>, Error> {
        let bad = |msg: String| Error::new(ErrorKind::BadInput, msg);
        let jobs = crate::batch::read_list(list).map_err(bad)?;
        if let Some(j) = jobs.iter().find(|j| j.cassette.is_some()) {
            let line = j.line.unwrap_or(0);
            return Err(bad(format!(
                "{}: line {line}: a submitted run takes no cassette (give its worker --replay)",
                list.display(),
            )));
        }
        let plans = jobs.into_iter().map(|j| PlanToSubmit {
            vars: j.vars,
            ..PlanToSubmit::file(j.plan)
        });
        Ok(plans.collect())
    }
}

/// A plan's source (or bytecode): given, or in a file read when its turn comes (a list's
/// plans are read and compiled one after another: the first that fails is the one said).
pub enum PlanSource {
    Bytes(Vec<u8>),
    File(PathBuf),
}

/// Why plans were not submitted or a branch not made: a plan is not a valid program, or
/// the store did not take them.
pub enum Refused {
    Plan(LoadError),
    Engine(Error),
}

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
        if !planner.template.uses("conversation") {
            warnings.push(format!("the prompt template has no {{{{conversation}}}}: the planner is not told session `{s}`"));
        }
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

impl<'a> PlanningFiles<'a> {
    /// The tools file alone: its `[planner]` says the rest (a service's, a worker's).
    pub fn of_tools(tools: Option<&'a Path>) -> PlanningFiles<'a> {
        PlanningFiles {
            tools,
            ..Default::default()
        }
    }
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
