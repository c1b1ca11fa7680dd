//! The scheduler: runs in flight up to the batch's bound, inputs loaded once per path
//! and dropped after their last run, each run journaled in the store through its writer
//! thread (group commit), or taken up from it (`--resume`).

use futures::future::Either;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::writer::record_failed;
use plan_bytecode::ValidatedProgram;
use plan_host::{
    Host, HostOptions, Pool, RecordJournal, Recorder, ReplayBackend, RunReport, Tracer,
};
use plan_manifest::Manifest;
use plan_store::{GroupStore, OwnedNewRun, Owner, RunStore, StoreErrorKind, StoreJournal};
use plan_vm::Limits;
use serde_json::{Map, Value};

use super::list::Job;
use super::{Batch, Event, Finished};
use crate::load;
use crate::{ErrorKind, Taken};

/// The store every run of a `--store` batch is journaled in (group commit: the runs'
/// commit points share transactions).
pub(crate) struct StoreCtx {
    pub(crate) store: GroupStore,
    /// Run name → stored run id.
    pub(crate) ids: HashMap<String, String>,
    pub(crate) owner: Owner,
    /// `--resume`: the batch's runs already in the store are taken up, not created.
    pub(crate) resume: Option<Resume>,
    /// The store's files (a run's outputs must not overwrite them).
    pub(crate) files: Vec<PathBuf>,
}

pub(crate) struct Resume {
    /// Reads each run and claims it for this process.
    pub(crate) store: Box<dyn RunStore>,
    pub(crate) retry_unknown_writes: bool,
}

/// What `--resume` does with one run of the batch.
enum Prior {
    /// Not in the store: it runs as a new run.
    New,
    /// Nothing runs: the stored report of a finished run, or why it cannot go on.
    Report(Box<RunReport>),
    /// Nothing runs: what the store holds of it is damaged (the batch exits 65).
    Damaged(Box<RunReport>),
    /// It goes on from its saved state, once claimed.
    Resumed(Box<Resumed>),
}

/// A run about to start: a new one with its loaded plan, or one taken up.
enum Start {
    New(Arc<Plan>),
    Resumed(Box<Resumed>),
}

/// A stored run taken up: where it goes on from (not claimed yet), under its own limits.
struct Resumed {
    going: crate::Going,
    limits: Limits,
}

impl Resume {
    /// What to do with run `id` of the batch, which runs `plan` with `presets` (checked
    /// against what the store holds: a list edited since would pair runs with the wrong
    /// lines).
    fn take_up(&mut self, id: &str, plan: &str, presets: &Map<String, Value>) -> Prior {
        let failed = |why: String| {
            Prior::Report(Box::new(RunReport::failed_before_start(
                why,
                Duration::ZERO,
            )))
        };
        let damaged = |why: String| {
            Prior::Damaged(Box::new(RunReport::failed_before_start(
                why,
                Duration::ZERO,
            )))
        };
        let run = match self.store.run(id) {
            Ok(run) => run,
            Err(e) if e.kind == StoreErrorKind::UnknownRun => return Prior::New,
            Err(e) if e.kind == StoreErrorKind::Damaged => return damaged(e.to_string()),
            Err(e) => return failed(e.to_string()),
        };
        if run.plan != plan || run.parent.is_some() || run.presets != *presets {
            return failed(format!(
                "run `{id}` in the store is not this line's run (it ran {} with its own \
                 variables): resume a batch with the list or directory it ran",
                run.plan
            ));
        }
        let limits = run.limits.clone();
        match crate::take_up(&*self.store, &run, &limits, self.retry_unknown_writes, None) {
            Ok(Taken::Finished(report)) => Prior::Report(report),
            Ok(Taken::Going(going)) => Prior::Resumed(Box::new(Resumed {
                going: *going,
                limits,
            })),
            Err(e) if e.kind == ErrorKind::Damaged => damaged(e.message),
            Err(e) => failed(e.message),
        }
    }
}

/// How a batch's runs ended.
#[derive(Debug, Default)]
pub struct Tally {
    pub runs: u64,
    pub ok: u64,
    /// Runs that stopped at a question to a person (not failed, not ok).
    pub needs_input: u64,
    /// Runs whose plan or cassette could not be loaded, or whose stored state is damaged.
    pub invalid: u64,
    /// Runs whose record or trace file could not be created.
    pub unwritable: u64,
    /// Runs whose record or trace file would have overwritten one of their inputs.
    pub over_input: u64,
    pub elapsed: Duration,
}

/// Inputs loaded once per path and kept until their last run has started.
struct Cache<T> {
    /// path → (runs still to start, loaded value once loaded)
    map: HashMap<PathBuf, (usize, Option<T>)>,
}

impl<T: Clone> Cache<T> {
    fn new<'a>(paths: impl Iterator<Item = &'a PathBuf>) -> Self {
        let mut map: HashMap<PathBuf, (usize, Option<T>)> = HashMap::new();
        for p in paths {
            map.entry(p.clone()).or_insert((0, None)).0 += 1;
        }
        Cache { map }
    }

    /// Counts one use of `path` (one that needs no value, or whose value was taken).
    fn skip(&mut self, path: &Path) {
        if let Some((left, _)) = self.map.get_mut(path) {
            *left = left.saturating_sub(1);
            if *left == 0 {
                self.map.remove(path);
            }
        }
    }

    /// The value for `path` (loading it on first use), counting one use.
    fn take(&mut self, path: &Path, load: impl FnOnce(&Path) -> T) -> T {
        let Some((_, slot)) = self.map.get_mut(path) else {
            // Not counted up front (cannot happen): load without caching.
            return load(path);
        };
        let value = slot.get_or_insert_with(|| load(path)).clone();
        self.skip(path);
        value
    }
}

/// Why a run could not start: its message (reported as the run's error).
type NotLoaded = String;

/// The scheduler's state: the inputs loaded so far, the tally, where the lines go.
struct Driver<'a> {
    batch: &'a Batch,
    store: Option<&'a mut StoreCtx>,
    /// The store's files (no run's output may overwrite them).
    store_files: Vec<PathBuf>,
    programs: Cache<Result<Arc<Plan>, NotLoaded>>,
    cassettes: Cache<Result<Arc<ReplayBackend>, NotLoaded>>,
    /// The manifest of every replayed run's host: none of their tools is configured.
    replay_manifest: Arc<Manifest>,
    tally: Tally,
    on: &'a mut (dyn FnMut(Event<'_>) + Send),
}

/// A run of the batch ready to start, with everything its task owns.
struct OneRun {
    host: Result<Arc<Host>, NotLoaded>,
    start: Start,
    /// Its store's writer, the owner it runs as, and its id there.
    stored: Option<(GroupStore, Owner, String)>,
    plan_name: String,
    vars: Vec<(String, Value)>,
    limits: Limits,
    tracer: Tracer,
    recorder: Option<Recorder>,
    /// Its trace, when the batch exports them; its tool spans come from `tracer`.
    trace: Option<plan_telemetry::Trace>,
}

pub(crate) async fn drive(
    batch: &Batch,
    store: Option<&mut StoreCtx>,
    jobs: Vec<Job>,
    on: &mut (dyn FnMut(Event<'_>) + Send),
) -> Tally {
    let start = Instant::now();
    let mut d = Driver {
        batch,
        store_files: store.as_ref().map_or(Vec::new(), |s| s.files.clone()),
        store,
        programs: Cache::new(jobs.iter().map(|j| &j.plan)),
        cassettes: Cache::new(jobs.iter().filter_map(|j| j.cassette.as_ref())),
        replay_manifest: Arc::new(Manifest {
            tools: Vec::new(),
            default_backend: None,
            planner: None,
            grounding: None,
            mcp: Vec::new(),
            eval: None,
            pricing: Default::default(),
        }),
        tally: Tally::default(),
        on,
    };
    // Each run labelled with (plan, list line, run id) for its line.
    let mut tasks: Pool<Label> = Pool::new(batch.jobs);
    let mut pending = jobs.into_iter();
    let mut exhausted = false;
    loop {
        while !exhausted && tasks.has_room() {
            let Some(job) = pending.next() else {
                exhausted = true;
                break;
            };
            if let Some((label, run)) = d.prepare(job) {
                tasks.spawn(label, run_one(run));
            }
        }
        let Some((label, report)) = tasks.next().await else {
            break;
        };
        d.ended(label, report);
    }
    d.tally.elapsed = start.elapsed();
    d.tally
}

impl Driver<'_> {
    /// The line of a run that ended.
    fn finish(
        &mut self,
        (plan, line, run_id): (&Path, Option<usize>, Option<&str>),
        report: &RunReport,
    ) {
        self.tally.runs += 1;
        match report.status {
            plan_host::RunStatus::Ok => self.tally.ok += 1,
            plan_host::RunStatus::NeedsInput => self.tally.needs_input += 1,
            plan_host::RunStatus::Failed | plan_host::RunStatus::Stopped => {}
        }
        (self.on)(Event::Finished(Finished {
            plan,
            line,
            run_id,
            report,
        }));
    }

    /// A run that could not start: its line, with why.
    fn refuse(&mut self, job: &Job, run_id: Option<&str>, why: String) {
        let report = RunReport::failed_before_start(why, Duration::ZERO);
        self.finish((&job.plan, job.line, run_id), &report);
    }

    /// The run of `job`, ready to start; None when it ended before it started (its line
    /// is out).
    fn prepare(&mut self, mut job: Job) -> Option<(Label, OneRun)> {
        let vars = merge_vars(&self.batch.vars, std::mem::take(&mut job.vars));
        let plan_name = job.plan.display().to_string();
        let start = self.start(&job, &plan_name, &vars)?;
        let replay = match (&job.cassette, &self.batch.replay) {
            (Some(c), _) => Some(self.cassettes.take(c, |p| load_cassette(p, &mut *self.on))),
            (None, Some((_, r))) => Some(Ok(r.clone())),
            (None, None) => None,
        };
        let (start, replay) = match (start, replay.transpose()) {
            (Ok(p), Ok(r)) => (p, r),
            (Err(msg), _) | (_, Err(msg)) => {
                self.tally.invalid += 1;
                self.refuse(&job, None, msg);
                return None;
            }
        };
        let (recorder, mut tracer) = match run_outputs(self.batch, &self.store_files, &job) {
            Ok(outputs) => outputs,
            Err((over_input, msg)) => {
                if over_input {
                    self.tally.over_input += 1;
                } else {
                    self.tally.unwritable += 1;
                }
                self.refuse(&job, None, msg);
                return None;
            }
        };
        let host = match replay {
            Some(r) => replay_host(&self.replay_manifest, &self.batch.host_options, &r),
            None => Ok(self.batch.host.clone()),
        };
        let stored = self.store.as_ref().map(|s| {
            let id = s.ids.get(&job.name).cloned().unwrap_or_default();
            (s.store.clone(), s.owner.clone(), id)
        });
        let run_id = stored.as_ref().map(|(_, _, id)| id.clone());
        if let (Start::Resumed(r), Some(id)) = (&start, &run_id)
            && let Err(why) = self.claim(id, r, &host)
        {
            self.refuse(&job, Some(id), why);
            return None;
        }
        let trace = self.batch.telemetry.as_ref().map(|t| {
            let workflow = plan_telemetry::Workflow {
                command: "batch",
                plan: Some(&plan_name),
                goal: None,
                run_id: run_id.as_deref(),
            };
            let trace = t.start(&workflow, None);
            tracer.also(Box::new(trace.journal(&self.batch.manifest)));
            trace
        });
        let label = (
            job.plan,
            job.line,
            run_id,
            matches!(start, Start::Resumed(_)),
        );
        let run = OneRun {
            host,
            start,
            stored,
            plan_name,
            vars,
            limits: self.batch.limits.clone(),
            tracer,
            recorder,
            trace,
        };
        Some((label, run))
    }

    /// What `job` starts from: its plan, loaded (once per plan), or, resuming, its run
    /// taken up from the store (which goes on with its own stored program, whatever the
    /// plan file holds now). None when its line is out already.
    fn start(
        &mut self,
        job: &Job,
        plan_name: &str,
        vars: &[(String, Value)],
    ) -> Option<Result<Start, NotLoaded>> {
        let prior = match self.store.as_deref_mut() {
            Some(StoreCtx {
                resume: Some(resume),
                ids,
                ..
            }) => {
                let id = ids.get(&job.name).map_or("", String::as_str);
                resume.take_up(id, plan_name, &vars.iter().cloned().collect())
            }
            _ => Prior::New,
        };
        let damaged = matches!(prior, Prior::Damaged(_));
        Some(match prior {
            Prior::New => {
                let (batch, for_store) = (self.batch, self.store.is_some());
                self.programs
                    .take(&job.plan, |p| {
                        load_plan(p, &batch.manifest, &mut *self.on, for_store).map(Arc::new)
                    })
                    .map(Start::New)
            }
            Prior::Resumed(r) => {
                self.programs.skip(&job.plan);
                Ok(Start::Resumed(r))
            }
            Prior::Report(report) | Prior::Damaged(report) => {
                if damaged {
                    self.tally.invalid += 1;
                }
                self.programs.skip(&job.plan);
                if let Some(c) = &job.cassette {
                    self.cassettes.skip(c);
                }
                let id = self
                    .store
                    .as_ref()
                    .and_then(|s| s.ids.get(&job.name))
                    .cloned();
                self.finish((&job.plan, job.line, id.as_deref()), &report);
                return None;
            }
        })
    }

    /// Claims run `id`, taken up, for this process. NB: only once nothing else can
    /// refuse it, so that a refusal leaves it in the store as it was; on this thread (a
    /// claim is one short transaction).
    fn claim(
        &mut self,
        id: &str,
        r: &Resumed,
        host: &Result<Arc<Host>, NotLoaded>,
    ) -> Result<(), String> {
        let Some(sc) = self.store.as_deref_mut() else {
            return Err("a run taken up without its store".into());
        };
        match (host, &mut sc.resume) {
            (Err(msg), _) => Err(msg.clone()),
            (Ok(_), Some(resume)) => resume
                .store
                .claim(id, &sc.owner, r.going.seen)
                .map_err(|e| e.to_string()),
            (Ok(_), None) => Err("a run taken up without --resume".into()),
        }
    }

    /// A run's task ended: its line.
    fn ended(&mut self, (plan, line, run_id, resumed): Label, mut report: RunReport) {
        // NB: a run taken up reports every call it committed, in this process or before.
        if let (
            true,
            Some(id),
            Some(StoreCtx {
                resume: Some(r), ..
            }),
        ) = (resumed, &run_id, self.store.as_deref())
            && let Ok(run) = r.store.run(id)
        {
            report.tool_calls = run.tool_calls;
        }
        self.finish((&plan, line, run_id.as_deref()), &report);
    }
}

/// A run's task: the run, journaled in the store when the batch has one, and traced
/// when the batch exports traces.
///
/// NB: a function that picks a future, not an `async fn`: one would keep the run's parts
/// twice (as its argument and as the future it awaits), and room for the traced run
/// beside the untraced one (the compiler does not overlap them), in every run's task.
fn run_one(mut run: OneRun) -> impl Future<Output = RunReport> + Send {
    match run.trace.take() {
        None => Either::Left(run_untraced(run)),
        Some(trace) => Either::Right(Box::pin(async move {
            let run_id = run.stored.as_ref().map(|(_, _, id)| id.clone());
            let report = plan_telemetry::within(Some(&trace), run_untraced(run)).await;
            trace.end(&plan_telemetry::Ended::run(&report, run_id.as_deref()));
            report
        })),
    }
}

/// NB: the run taken apart before its future is made, which so holds its parts once.
fn run_untraced(run: OneRun) -> impl Future<Output = RunReport> + Send {
    let OneRun {
        host,
        start,
        stored,
        plan_name,
        vars,
        limits,
        mut tracer,
        recorder,
        trace: _,
    } = run;
    async move {
        let host = match host {
            Ok(h) => h,
            Err(msg) => return RunReport::failed_before_start(msg, Duration::ZERO),
        };
        let Some((store, owner, id)) = stored else {
            let Start::New(program) = start else {
                // Taken up only from a store; still, no panic.
                return RunReport::failed_before_start(
                    "a resumed run without its store".into(),
                    Duration::ZERO,
                );
            };
            return plan_host::run_plan_recording(
                &host,
                &program.program,
                vars,
                limits,
                &mut tracer,
                recorder.as_ref(),
            )
            .await;
        };
        // NB: boxed: a run without a store (the common case, thousands in flight) should not
        // carry room for the journal's state in its task.
        match start {
            Start::Resumed(r) => {
                Box::pin(go_on(&host, store, owner, &id, *r, tracer, recorder)).await
            }
            Start::New(program) => {
                let new = OwnedNewRun {
                    id: id.clone(),
                    plan: plan_name,
                    source: program.source.clone(),
                    pbc: program.pbc.clone(),
                    presets: vars.iter().cloned().collect(),
                    limits: limits.clone(),
                    parent: None,
                };
                let run = (&*host, &program.program, vars, limits);
                Box::pin(run_new(run, (store, owner, &id), new, tracer, recorder)).await
            }
        }
    }
}

/// A new run of the batch, created and journaled through the store's writer thread.
async fn run_new(
    (host, program, vars, limits): (&Host, &ValidatedProgram, Vec<(String, Value)>, Limits),
    (store, owner, id): (GroupStore, Owner, &str),
    new: OwnedNewRun,
    mut tracer: Tracer,
    recorder: Option<Recorder>,
) -> RunReport {
    // NB: not waited for: the writer takes writes in order, so the run exists before its
    // first point; a refused creation fails the run at its end.
    let created = store.create(new, owner.clone());
    let mut journal = (
        &mut tracer,
        StoreJournal::grouped(store, (id, owner), 0, program, None),
    );
    let mut report =
        plan_host::run_plan_recording(host, program, vars, limits, &mut journal, recorder.as_ref())
            .await;
    // NB: the run's line is printed only once its end is on record.
    let written = match journal.1.written() {
        Some(durable) => durable.await,
        None => Ok(()),
    };
    if let Err(message) = created.await.map_err(|e| e.message).and(written) {
        record_failed(&mut report, message);
    }
    report
}

/// A run of the batch taken up from the store (`--resume`), journaled through the
/// writer thread like a new one.
async fn go_on(
    host: &Host,
    store: GroupStore,
    owner: Owner,
    id: &str,
    r: Resumed,
    mut tracer: Tracer,
    recorder: Option<Recorder>,
) -> RunReport {
    let Resumed { going, limits } = r;
    // NB: its earlier process committed calls too: the store counts them at the end.
    let journal = StoreJournal::grouped(store, (id, owner), going.steps_done, &going.program, None)
        .continued();
    let mut journal = (
        &mut tracer,
        (journal, recorder.as_ref().map(RecordJournal::new)),
    );
    let known = plan_store::known_answers(&going.calls);
    let mut report = plan_host::resume_plan(
        host,
        &going.program,
        going.state,
        known,
        limits,
        &mut journal,
    )
    .await;
    if let Some(durable) = journal.1.0.written()
        && let Err(message) = durable.await
    {
        record_failed(&mut report, message);
    }
    report
}

/// The run's `--record` cassette and `--trace` writer, each `DIR/<run name>.<kind>.jsonl`,
/// created (emptied if present). Refused when it is one of the run's inputs: a batch
/// recorded into its own directory must not overwrite the cassettes it replays.
/// Why a run's output files could not be opened: (it would overwrite an input, message).
type NotOpened = (bool, String);

fn run_outputs(
    batch: &Batch,
    store_files: &[PathBuf],
    job: &Job,
) -> Result<(Option<Recorder>, Tracer), NotOpened> {
    let mut inputs: Vec<(&str, &Path)> = vec![("its plan", &job.plan)];
    inputs.extend(job.cassette.as_deref().map(|p| ("its cassette", p)));
    inputs.extend(
        batch
            .replay
            .as_ref()
            .map(|(p, _)| ("the --replay cassette", p.as_path())),
    );
    inputs.extend(store_files.iter().map(|p| (crate::open::STORE_FILE, &**p)));
    let tool_backends = batch
        .manifest
        .tools
        .iter()
        .filter_map(|t| t.backend.as_ref());
    for b in tool_backends.chain(batch.manifest.default_backend.as_ref()) {
        if let plan_manifest::BackendConfig::Replay { cassette: Some(c) } = b {
            inputs.push(("a cassette of the --tools file", Path::new(c)));
        }
    }
    let target = |dir: &Path, kind: &str| -> Result<PathBuf, NotOpened> {
        let path = dir.join(format!("{}.{kind}.jsonl", job.name));
        match plan_compiler::files::clobbered(&path, &inputs) {
            Some((what, i)) => Err((
                true,
                format!(
                    "the {kind} file {} would overwrite this run's input ({what} {}): choose another directory",
                    path.display(),
                    i.display()
                ),
            )),
            None => Ok(path),
        }
    };
    let recorder = match &batch.record_dir {
        Some(dir) => {
            let path = target(dir, "cassette")?;
            Some(Recorder::overwrite(&path).map_err(|e| (false, e.message))?)
        }
        None => None,
    };
    let tracer = match &batch.trace_dir {
        Some(dir) => {
            let path = target(dir, "trace")?;
            let f = std::fs::File::create(&path).map_err(|e| {
                (
                    false,
                    format!("cannot create trace file {}: {e}", path.display()),
                )
            })?;
            Tracer::to_writer(Box::new(std::io::BufWriter::new(f)))
        }
        None => Tracer::none(),
    };
    Ok((recorder, tracer))
}

/// A loaded plan, shared by its runs.
struct Plan {
    program: ValidatedProgram,
    /// For the store: the source (None for a .pbc file) and the `.pbc` bytes.
    source: Option<String>,
    pbc: Vec<u8>,
}

/// (plan, list line, run id in the store, taken up by `--resume`) of a run in flight.
type Label = (PathBuf, Option<usize>, Option<String>, bool);

fn load_plan(
    path: &Path,
    manifest: &Manifest,
    on: &mut (dyn FnMut(Event<'_>) + Send),
    for_store: bool,
) -> Result<Plan, NotLoaded> {
    // NB: called once per distinct plan, not once per run. Warnings (LLM-output repairs)
    // are not printed: across thousands of plans they would bury the errors.
    let opts = plan_compiler::CompileOptions {
        manifest: manifest.clone(),
        ..plan_compiler::CompileOptions::default()
    };
    match load::load_program(path, opts) {
        Ok(l) => Ok(Plan {
            pbc: if for_store {
                plan_bytecode::encode(&l.program)
            } else {
                Vec::new()
            },
            source: l.source.filter(|_| for_store),
            program: l.program,
        }),
        Err(load::LoadError::Unreadable(msg)) => Err(msg),
        Err(load::LoadError::Invalid(inv)) => {
            on(Event::Invalid(&inv));
            Err(inv.summary())
        }
    }
}

fn load_cassette(
    path: &Path,
    on: &mut (dyn FnMut(Event<'_>) + Send),
) -> Result<Arc<ReplayBackend>, NotLoaded> {
    let r = ReplayBackend::load(path).map_err(|e| e.message)?;
    // NB: once per cassette, however many runs replay it.
    for w in r.warnings() {
        on(Event::Warning(w));
    }
    Ok(Arc::new(r))
}

/// A host serving every call from a fresh replay of `cassette`: its own cursors, the
/// shared parse. Nothing else in it is used, so its manifest is empty.
fn replay_host(
    manifest: &Arc<Manifest>,
    opts: &HostOptions,
    cassette: &ReplayBackend,
) -> Result<Arc<Host>, NotLoaded> {
    Host::replaying(manifest.clone(), opts.clone(), Arc::new(cassette.fresh()))
        .map(Arc::new)
        .map_err(|e| e.message)
}

/// `--var`s, then the line's own pairs; a later pair for the same name wins.
pub(crate) fn merge_vars(
    global: &[(String, Value)],
    own: Vec<(String, Value)>,
) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = global
        .iter()
        .filter(|(n, _)| !own.iter().any(|(m, _)| m == n))
        .cloned()
        .collect();
    out.extend(own);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn line_vars_override_global_ones() {
        let global = vec![("a".to_owned(), json!(1)), ("b".to_owned(), json!(2))];
        let own = vec![("b".to_owned(), json!(3))];
        assert_eq!(
            merge_vars(&global, own),
            vec![("a".to_owned(), json!(1)), ("b".to_owned(), json!(3))]
        );
    }

    #[test]
    fn cache_loads_once_and_forgets_after_the_last_use() {
        let paths = [PathBuf::from("p"), PathBuf::from("p"), PathBuf::from("q")];
        let mut cache: Cache<u32> = Cache::new(paths.iter());
        let mut loads = 0;
        let mut load = |_: &Path| {
            loads += 1;
            loads
        };
        assert_eq!(cache.take(Path::new("p"), &mut load), 1);
        assert_eq!(cache.take(Path::new("p"), &mut load), 1);
        assert!(!cache.map.contains_key(Path::new("p")));
        assert_eq!(cache.take(Path::new("q"), &mut load), 2);
        assert!(cache.map.is_empty());
    }
}
