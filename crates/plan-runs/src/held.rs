//! A run this process holds in a store: created, or claimed to go on, and journaled there
//! commit point by commit point while a thread renews its lease.

use plan_bytecode::ValidatedProgram;
use plan_host::{Deadline, Host, Journal, RunReport};
use plan_store::{GroupStore, NewRun, Owner, RunStore, StoreJournal};
use plan_vm::Limits;
use serde_json::Value;

use crate::open::{Access, StoreAt};
use crate::{Error, ErrorKind, Going, Lease};

/// A run this process holds: its store, its id, and its lease, renewed until dropped.
pub struct Held {
    store: Box<dyn RunStore>,
    id: String,
    owner: Owner,
    /// The run's end is in the store (its row holds no lease): nothing to let go of.
    ended: bool,
    _lease: Lease,
}

impl Held {
    /// Creates run `new` in the store at `at`, held by this process. `warn` hears about
    /// a lease that cannot be renewed (see [`Lease::start`]).
    pub fn create(at: &StoreAt, new: &NewRun<'_>, warn: fn(&Error)) -> Result<Held, Error> {
        plan_store::check_run_id(new.id)
            .map_err(|e| Error::new(ErrorKind::BadRunId, format!("run id `{}`: {e}", new.id)))?;
        let mut store = at.open(Access::Create)?;
        let owner = Owner::for_run();
        store.create_run(new, &owner)?;
        Ok(Held::new(store, at, new.id, owner, warn))
    }

    /// `id`, which this process has just created or claimed in `store`.
    pub(crate) fn new(
        store: Box<dyn RunStore>,
        at: &StoreAt,
        id: &str,
        owner: Owner,
        warn: fn(&Error),
    ) -> Held {
        Held {
            store,
            id: id.to_owned(),
            _lease: at.lease(owner.clone(), warn),
            owner,
            ended: false,
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Ends `goal`, the goal this run answers if any, with the run's `report`. NB: a
    /// failure here leaves the goal open with its owner gone: it reads as interrupted,
    /// and the run's row has the outcome.
    fn settle(&mut self, goal: Option<(String, Lease)>, report: &RunReport) {
        if let Some((goal, _lease)) = goal {
            let _ = crate::ask::settle_goal(&mut *self.store, (&goal, &self.id), None, report);
        }
    }

    /// Counts in the run's tokens those of the planner's replies that wrote its plan.
    pub fn set_planner_usage(&mut self, usage: &plan_llm::Usage) -> Result<(), Error> {
        Ok(self.store.set_planner_usage(&self.id, usage)?)
    }

    /// The run's row, read on the run's own connection.
    pub fn row(&self) -> Result<plan_store::RunInfo, Error> {
        Ok(self.store.run(&self.id)?)
    }

    /// The journal of the run from its start, for a driver of the caller's (a plan read
    /// as it streams in).
    pub fn journal(&mut self, program: &ValidatedProgram) -> StoreJournal<'_> {
        StoreJournal::new(&mut *self.store, &self.id, self.owner.clone(), 0, program)
    }

    /// Runs the new run from its start, with `presets`, each event also to `also`, by
    /// `within` if given (besides the host's own deadline).
    pub async fn run(
        &mut self,
        host: &Host,
        program: &ValidatedProgram,
        (presets, limits): (Vec<(String, Value)>, Limits),
        within: Option<Deadline>,
        also: &mut dyn Journal,
    ) -> RunReport {
        let mut journal = (also, self.journal(program));
        plan_host::run_plan_reusing(
            host,
            program,
            presets,
            Vec::new(),
            limits,
            &mut journal,
            within,
        )
        .await
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // NB: a run dropped before its end (its task cancelled) reads as interrupted at
        // once; one that ended is left as it is. A failure here changes nothing: the
        // lease lapses.
        if !self.ended {
            let _ = self.store.release(&self.id, &self.owner);
        }
    }
}

/// A stored run this process has claimed (or created as a branch), about to go on.
pub struct Claimed {
    pub(crate) held: Held,
    pub(crate) going: Going,
    pub(crate) limits: Limits,
    /// The goal this run answers, when it went on after a question or was taken up after
    /// its asker died: it ends with the run, and is leased by this process meanwhile.
    pub(crate) goal: Option<(String, crate::Lease)>,
}

impl Claimed {
    pub fn id(&self) -> &str {
        self.held.id()
    }

    pub fn program(&self) -> &ValidatedProgram {
        &self.going.program
    }

    /// The run's row, as claimed or created.
    pub fn row(&self) -> Result<plan_store::RunInfo, Error> {
        self.held.row()
    }

    /// Runs it to its end on `host`, each event also to `also`; its report counts the
    /// calls of the whole run, not only of this part.
    pub async fn go(self, host: &Host, also: &mut dyn Journal) -> RunReport {
        let Claimed {
            mut held,
            going,
            limits,
            goal,
        } = self;
        let run = crate::GoOn {
            id: &held.id,
            steps_done: going.steps_done,
            program: &going.program,
            state: going.state,
            known: plan_store::known_answers(&going.calls),
            input: going.input,
            limits,
        };
        let report = crate::go_on(&mut *held.store, held.owner.clone(), run, host, also).await;
        held.settle(goal, &report);
        report
    }

    /// [`Claimed::go`], its commit points handed to `group`, the writer a worker shares
    /// among its runs (one transaction for many runs' points, as `batch --store`);
    /// `on_written` hears, from the writer's thread, each time some are in the store.
    pub async fn go_through(
        self,
        (group, on_written): (GroupStore, Option<plan_store::OnWritten>),
        host: &Host,
        also: &mut dyn Journal,
    ) -> RunReport {
        let Claimed {
            mut held,
            going,
            limits,
            goal,
        } = self;
        // NB: a run with an earlier part may commit again calls that part committed: the
        // store counts them at its end.
        let continued = going.steps_done > 0 || !going.calls.is_empty();
        let owned = (held.id.as_str(), held.owner.clone());
        let mut journal =
            StoreJournal::grouped(group, owned, going.steps_done, &going.program, on_written);
        if continued {
            journal = journal.continued();
        }
        let mut journal = (also, journal);
        let known = plan_store::known_answers(&going.calls);
        let mut report = plan_host::resume_plan_answering(
            host,
            &going.program,
            going.state,
            (known, going.input),
            limits,
            &mut journal,
        )
        .await;
        // NB: stopped (the worker draining) is not an end: the run is let go of, for
        // another worker at once.
        held.ended = crate::writer::wait_written(&mut journal.1, &mut report).await
            && report.status != plan_host::RunStatus::Stopped;
        if continued && let Ok(r) = held.store.run(&held.id) {
            report.tool_calls = r.tool_calls;
        }
        held.settle(goal, &report);
        report
    }
}
