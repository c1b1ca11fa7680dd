//! An evaluation as a face asks for one ([`EvalRequest`]): its dataset read, its
//! cassettes opened and every file it writes checked against what it reads, its engine,
//! judge and store set up ([`Evaluation::prepare`]); its cases asked
//! ([`Evaluation::run`]); how it ended ([`Evaluation::conclude`]). `planvm eval` fills in
//! the request from its arguments and renders what comes back.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use plan_host::{Host, HostOptions};
use plan_planner::AskOptions;
use plan_runs::engine::{Engine, PlanningFiles};
use plan_runs::{Error, ErrorKind, StoreAt};
use plan_telemetry::Telemetry;
use serde_json::Value;

use crate::{Case, CaseReport, Cassettes, CassettesError, Concluded, Setup, Stored};

/// What an evaluation is asked to be.
#[derive(Debug, Default)]
pub struct EvalRequest {
    /// JSON lines of cases (see [`crate::parse`]).
    pub dataset: PathBuf,
    /// The tools file: the tools, their backends, the planner and the judge.
    pub tools: Option<PathBuf>,
    /// Every call answered from recordings: a directory of each case's cassette, or one
    /// cassette for all.
    pub replay: Option<PathBuf>,
    /// Each case's calls kept in a directory of cassettes.
    pub record: Option<PathBuf>,
    /// The tools answered from a directory of cassettes where they have the call.
    pub tools_from: Option<PathBuf>,
    /// What the face writes besides the cassettes (its report), named as in messages.
    pub outputs: Vec<(&'static str, PathBuf)>,
    /// An earlier JSON report to compare with.
    pub baseline: Option<PathBuf>,
    /// Where each case is kept as a stored goal of this evaluation.
    pub store: Option<StoreAt>,
    /// The evaluation's id in the store (default: [`crate::new_eval_id`]).
    pub eval_id: Option<String>,
    /// How each goal is asked (`max_examples` is the tools file's).
    pub options: AskOptions,
    /// Limit on one tool call, retries included.
    pub tool_timeout: Option<Duration>,
    /// Cases asked at once.
    pub jobs: usize,
    /// The pass rate under which the evaluation fails.
    pub fail_under: Option<f64>,
}

/// An evaluation ready to run: everything it needs was read, opened and set up.
pub struct Evaluation {
    setup: Setup,
    cases: Vec<Case>,
    skipped: Vec<String>,
    baseline: Option<Value>,
    jobs: usize,
    fail_under: Option<f64>,
}

/// What an evaluation came to.
pub struct Evaluated {
    pub reports: Vec<CaseReport>,
    /// The dataset's lines skipped, and why.
    pub skipped: Vec<String>,
    pub stored: Option<Stored>,
    pub concluded: Concluded,
    /// Spans that did not reach the collector.
    pub lost_spans: u64,
}

impl Evaluation {
    /// Sets up `request`'s evaluation, `warn` hearing of what it goes on without (a line
    /// of the dataset skipped, an example that cannot be read, a host's warnings). The
    /// store is begun last, once nothing else can refuse it. Refused: the dataset or the
    /// baseline unreadable, a cassette directory that cannot be made or a `--replay`
    /// missing, an output onto an input, a tools file or planner that cannot be set up.
    pub fn prepare(
        request: EvalRequest,
        warn: &mut dyn FnMut(String),
    ) -> Result<Evaluation, Error> {
        let (cases, skipped) = read_cases(&request.dataset, warn)?;
        let cassettes = open_cassettes(&request, &cases)?;
        let baseline = request.baseline.as_deref().map(read_baseline).transpose()?;
        let replay = match &cassettes {
            Cassettes::Shared => request.replay.clone(),
            _ => None,
        };
        let host_options = HostOptions {
            replay,
            tool_timeout: request.tool_timeout,
            ..HostOptions::default()
        };
        let files = PlanningFiles::of_tools(request.tools.as_deref());
        let engine = Engine::open(files, host_options)?;
        let planning = engine.planning();
        planning
            .examples
            .skipped()
            .iter()
            .for_each(|w| warn(w.clone()));
        let host = engine.host()?.clone();
        host.warnings().iter().for_each(|w| warn(w.clone()));
        // NB: made outside any async runtime: its exporter has a blocking client.
        let telemetry = Telemetry::from_env_or_warn(host.redactor().clone(), &mut *warn);
        let telemetry = telemetry.map(Arc::new);
        let options = AskOptions {
            max_examples: planning.max_examples,
            ..request.options
        };
        let planned = (planning.template.clone(), planning.examples.clone());
        let setup = Setup::on(host, cassettes, planned, options)?;
        let stored = match request.store {
            None => None,
            Some(at) => {
                let dataset = request.dataset.display().to_string();
                Some(crate::begin(at, request.eval_id, &dataset)?)
            }
        };
        Ok(Evaluation {
            setup: Setup {
                store: stored,
                telemetry,
                ..setup
            },
            cases,
            skipped,
            baseline,
            jobs: request.jobs,
            fail_under: request.fail_under,
        })
    }

    /// The host every case is asked on (or whose tools each case's own host serves).
    pub fn host(&self) -> &Arc<Host> {
        &self.setup.host
    }

    /// How many cases it asks.
    pub fn len(&self) -> usize {
        self.cases.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cases.is_empty()
    }

    /// Where its cases are stored, if they are.
    pub fn stored(&self) -> Option<&Stored> {
        self.setup.store.as_ref()
    }

    /// Every case asked, `jobs` at once: their reports in the dataset's order, `done`
    /// hearing of each as it ends.
    pub async fn run(&self, done: &mut dyn FnMut(&CaseReport)) -> Vec<CaseReport> {
        crate::run(&self.setup, &self.cases, self.jobs, done).await
    }

    /// Ends the evaluation of `reports` ([`crate::conclude`]) and its traces. Called
    /// outside any async runtime (the exporter's client blocks).
    pub fn conclude(self, reports: Vec<CaseReport>) -> Evaluated {
        let lost_spans = self.setup.telemetry.map_or(0, |t| t.finish());
        let stored = self.setup.store;
        let concluded = crate::conclude(
            &reports,
            stored.as_ref(),
            self.baseline.as_ref(),
            self.fail_under,
        );
        Evaluated {
            reports,
            skipped: self.skipped,
            stored,
            concluded,
            lost_spans,
        }
    }
}

impl Evaluated {
    /// The report as JSON (`{"summary", "cases", "comparison"?, "skipped"}`).
    pub fn json(&self) -> Value {
        let c = &self.concluded;
        let (stored, comparison) = (self.stored.as_ref(), c.comparison.as_ref());
        crate::report_json(&c.summary, &self.reports, &self.skipped, stored, comparison)
    }

    /// The report as text, for people.
    pub fn text(&self) -> String {
        let c = &self.concluded;
        crate::text_report(
            &c.summary,
            &self.reports,
            c.comparison.as_ref(),
            &self.skipped,
        )
    }

    /// Each passing case's goal, labels and plan kept as an example in `dir` (never over
    /// a file there): per case, where it went or why it did not.
    pub fn promote(&self, dir: &Path) -> Vec<(&str, Result<PathBuf, String>)> {
        let passed = self.reports.iter().filter(|r| r.passed());
        let with_plan = passed.filter_map(|r| Some((r, r.plan.as_ref()?)));
        with_plan
            .map(|(r, plan)| {
                let saved = plan_planner::save_example(dir, &r.goal, &r.labels, plan);
                (r.id.as_str(), saved)
            })
            .collect()
    }
}

/// The dataset's cases, each line skipped said to `warn`.
fn read_cases(
    dataset: &Path,
    warn: &mut dyn FnMut(String),
) -> Result<(Vec<Case>, Vec<String>), Error> {
    let text = std::fs::read_to_string(dataset).map_err(|e| {
        let message = format!("cannot read {}: {e}", dataset.display());
        Error::new(ErrorKind::Unreadable, message)
    })?;
    let (cases, skipped) = crate::parse(&text);
    for s in &skipped {
        warn(format!("{}: {s}: skipped", dataset.display()));
    }
    Ok((cases, skipped))
}

/// Where each case's calls are recorded or replayed from; refused when a file written
/// (a cassette, the report) would be one of the inputs or another output.
fn open_cassettes(request: &EvalRequest, cases: &[Case]) -> Result<Cassettes, Error> {
    let r = request;
    let opened = Cassettes::open(
        r.record.as_deref(),
        r.tools_from.as_deref(),
        r.replay.as_deref(),
    );
    let cassettes = opened.map_err(|e| match e {
        CassettesError::Create(m) => Error::new(ErrorKind::CannotCreate, m),
        CassettesError::Missing(m) => Error::new(ErrorKind::Unreadable, m),
    })?;
    let written = match &cassettes {
        Cassettes::Record(dir) => Some(("--record", dir)),
        Cassettes::ToolsFrom(dir) => Some(("--tools-from", dir)),
        Cassettes::Shared | Cassettes::Replay(_) => None,
    };
    let files: Vec<PathBuf> = written.map_or_else(Vec::new, |(_, dir)| {
        let names = crate::cassette_names(cases);
        names.iter().map(|n| dir.join(n)).collect()
    });
    let mut outputs: Vec<(&str, &Path)> = r.outputs.iter().map(|(n, p)| (*n, &**p)).collect();
    if let Some((flag, _)) = written {
        outputs.extend(files.iter().map(|f| (flag, f.as_path())));
    }
    let inputs = plan_runs::open::Inputs {
        named: vec![("the dataset", r.dataset.as_path())],
        tools: r.tools.as_deref(),
        replay: r
            .replay
            .as_deref()
            .filter(|_| matches!(cassettes, Cassettes::Shared)),
        store: r.store.as_ref().map(StoreAt::path),
    };
    inputs.check(&outputs)?;
    Ok(cassettes)
}

/// An earlier report, to compare with.
fn read_baseline(path: &Path) -> Result<Value, Error> {
    std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str::<Value>(&t).map_err(|e| e.to_string()))
        .map_err(|e| {
            let message = format!("cannot read the baseline {}: {e}", path.display());
            Error::new(ErrorKind::Invalid, message)
        })
}
