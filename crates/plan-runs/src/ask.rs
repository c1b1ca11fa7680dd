//! `ask` with a store: each plan the planner writes that runs is a stored run; a
//! re-plan's run is a branch of the run it replaces, from its first instruction (it
//! starts over, answering the calls already made from their stored answers), so the
//! store shows every version of the plan.

use plan_host::{Journal, TraceEvent};
use plan_planner::{AskOutcome, PlanRun, Planner, RunSink};
use plan_store::NewRun;
use serde_json::{Map, Value};

use crate::{Error, ErrorKind, Held, StoreAt};

/// Where the runs of one `ask` go.
pub struct AskStore<'a> {
    pub at: StoreAt,
    /// The first run's id; the next ones get `.2`, `.3`, ... (default: new ids).
    pub run_id: Option<String>,
    /// Hears every event as well (a trace).
    pub also: &'a mut dyn Journal,
    pub warn: fn(&Error),
    /// Hears each run's id as it starts (so that a person can find it while it runs).
    pub started: fn(&str),
}

/// What an `ask` with a store did.
pub struct AskStored {
    pub outcome: AskOutcome,
    /// The ids of its runs, in order.
    pub runs: Vec<String>,
    /// The store could not take a run: the ask ended there.
    pub failed: Option<Error>,
}

/// Asks `planner` for `goal`, each run stored as `store` says.
pub async fn ask(
    planner: &Planner<'_>,
    goal: &str,
    response_format: Option<&Value>,
    store: AskStore<'_>,
) -> AskStored {
    let mut sink = Sink {
        store,
        current: None,
        ids: Vec::new(),
        failed: None,
    };
    let outcome = planner.ask_into(goal, response_format, &mut sink).await;
    AskStored {
        outcome,
        runs: sink.ids,
        failed: sink.failed,
    }
}

struct Sink<'a> {
    store: AskStore<'a>,
    current: Option<Held>,
    ids: Vec<String>,
    failed: Option<Error>,
}

impl Sink<'_> {
    fn next_id(&self) -> Result<String, Error> {
        let id = match (&self.store.run_id, self.ids.len()) {
            (Some(id), 0) => id.clone(),
            (Some(id), n) => format!("{id}.{}", n + 1),
            (None, _) => plan_store::new_run_id(),
        };
        plan_store::check_run_id(&id)
            .map_err(|e| Error::new(ErrorKind::BadRunId, format!("run id `{id}`: {e}")))?;
        Ok(id)
    }
}

impl RunSink for Sink<'_> {
    fn open<'s>(&'s mut self, run: &PlanRun<'_>) -> Result<Box<dyn Journal + 's>, String> {
        // NB: the previous run's lease and connection end here.
        self.current = None;
        let held = self.next_id().and_then(|id| {
            let presets: Map<String, Value> = run.vars.iter().cloned().collect();
            let first_seq = run.program.seq_no_at(0).unwrap_or(0);
            let new = NewRun {
                id: &id,
                plan: &format!("ask round {}", run.round),
                source: Some(run.source),
                pbc: &plan_bytecode::encode(run.program),
                presets: &presets,
                limits: run.limits,
                parent: self.ids.last().map(|p| (p.as_str(), first_seq)),
            };
            Held::create(&self.store.at, &new, self.store.warn)
        });
        match held {
            Ok(held) => {
                (self.store.started)(held.id());
                self.ids.push(held.id().to_owned());
                let held = self.current.insert(held);
                Ok(Box::new((&mut *self.store.also, held.journal(run.program))))
            }
            Err(e) => {
                let message = e.message.clone();
                self.failed = Some(e);
                Err(message)
            }
        }
    }

    fn planning(&mut self, event: &TraceEvent<'_>) {
        let _ = self.store.also.record(event);
    }
}
