//! A batch as a face asks for one ([`BatchRequest`]): its runs read from a directory or a
//! list and named, the directories they write made, the shared cassette loaded, the
//! output checked against every input, the engine and store set up
//! ([`BatchRequest::prepare`]). The face then drives [`super::run`] and renders its
//! events.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use plan_host::{Host, HostOptions, ReplayBackend};
use plan_vm::Limits;
use serde_json::Value;

use super::{Batch, BatchStore, Job, Lines, Stored};
use crate::{Error, ErrorKind};

/// Where a batch's runs are listed.
#[derive(Clone, Debug)]
pub enum BatchInput {
    /// Every plan file of a directory, each with the cassette beside it.
    Dir(PathBuf),
    /// One run per line: `PLAN [CASSETTE] [NAME=VALUE]...`.
    List(PathBuf),
}

/// What a batch is asked to be.
pub struct BatchRequest {
    pub input: BatchInput,
    pub tools: Option<PathBuf>,
    /// Serves every run that has no cassette of its own.
    pub replay: Option<PathBuf>,
    pub vars: Vec<(String, Value)>,
    pub limits: Limits,
    /// Each run's host: its deadline and per-call limit.
    pub host: HostOptions,
    /// Runs in flight at once.
    pub jobs: usize,
    /// The file the runs' lines go to (else standard output), checked against every
    /// input and created last.
    pub output: Option<PathBuf>,
    pub record_dir: Option<PathBuf>,
    pub trace_dir: Option<PathBuf>,
    pub store: Option<BatchStore>,
    /// Hears that the lease on the batch's runs cannot be renewed (they go on).
    pub lease_warning: fn(&Error),
}

/// A batch ready to run.
pub struct Prepared {
    pub batch: Batch,
    pub jobs: Vec<Job>,
    pub store: Option<Stored>,
    pub lines: Lines,
}

impl BatchRequest {
    /// Sets up the batch, `warn` hearing of what it goes on without (a cassette's
    /// warnings, the host's, a trace that cannot be exported). Refused: a list that cannot
    /// be read (`bad_input`), a directory (`unreadable`), an output directory that cannot
    /// be made, an output onto an input, a tools file or cassette that cannot be read, a
    /// store that refuses the batch's ids, an output file that cannot be created.
    pub fn prepare(self, warn: &mut dyn FnMut(&str)) -> Result<Prepared, Error> {
        let manifest = crate::load::load_tools(self.tools.as_deref())?;
        let jobs = self.read_jobs()?;
        let replay = match &self.replay {
            None => None,
            Some(p) => {
                let r = ReplayBackend::load(p)?;
                r.warnings().iter().for_each(|w| warn(w));
                Some((p.clone(), Arc::new(r)))
            }
        };
        if let Some(output) = &self.output {
            self.check_output(output, &jobs)?;
        }
        let host = Arc::new(Host::new(manifest.clone(), self.host.clone())?);
        host.warnings().iter().for_each(|w| warn(w));
        let store = match &self.store {
            Some(setup) => Some(setup.open(&jobs, &self.vars, self.lease_warning)?),
            None => None,
        };
        // NB: made outside any async runtime: its exporter has a blocking client.
        let telemetry =
            plan_telemetry::Telemetry::from_env_or_warn(host.redactor().clone(), |w| warn(&w));
        let batch = Batch {
            manifest,
            host,
            host_options: self.host,
            limits: self.limits,
            vars: self.vars,
            replay,
            record_dir: self.record_dir,
            trace_dir: self.trace_dir,
            jobs: self.jobs,
            telemetry: telemetry.map(Arc::new),
        };
        // NB: created last: a batch refused leaves an earlier output file as it was.
        let lines = Lines::create(self.output.as_deref())?;
        Ok(Prepared {
            batch,
            jobs,
            store,
            lines,
        })
    }

    /// The runs of the list or directory, named, with the directories they write to made.
    fn read_jobs(&self) -> Result<Vec<Job>, Error> {
        let mut jobs = match &self.input {
            BatchInput::List(list) => {
                super::read_list(list).map_err(|msg| Error::new(ErrorKind::BadInput, msg))?
            }
            BatchInput::Dir(dir) => super::scan_dir(dir, self.replay.is_none())
                .map_err(|msg| Error::new(ErrorKind::Unreadable, msg))?,
        };
        super::name_runs(&mut jobs);
        for dir in [&self.record_dir, &self.trace_dir].into_iter().flatten() {
            std::fs::create_dir_all(dir).map_err(|e| {
                let message = format!("cannot create directory {}: {e}", dir.display());
                Error::new(ErrorKind::CannotCreate, message)
            })?;
        }
        Ok(jobs)
    }

    /// Refuses an output that is one of the batch's inputs.
    fn check_output(&self, output: &Path, jobs: &[Job]) -> Result<(), Error> {
        let mut inputs = crate::open::Inputs {
            tools: self.tools.as_deref(),
            replay: self.replay.as_deref(),
            store: self.store.as_ref().map(|s| s.at.path()),
            ..Default::default()
        };
        if let BatchInput::List(list) = &self.input {
            inputs.named.push(("the --list file", list));
        }
        // NB: each file once: a list runs the same few plans and cassettes many times,
        // and each check of a path asks the file system (two calls a path, four a run).
        let mut seen = HashSet::new();
        for j in jobs {
            let files = std::iter::once(("a plan", j.plan.as_path()))
                .chain(j.cassette.as_deref().map(|p| ("a cassette", p)));
            inputs.named.extend(files.filter(|(_, p)| seen.insert(*p)));
        }
        inputs.check(&[("--output", output)])
    }
}
