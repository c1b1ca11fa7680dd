//! Branching a stored run: a new run that starts at a point of its parent with the
//! variables the parent had there, and runs another plan from there. The parent is not
//! changed.

use plan_bytecode::ValidatedProgram;
use plan_store::replay::{self, NotBefore};
use plan_store::{NewRun, Owner, RunInfo, RunStore, Seen};
use plan_vm::Limits;
use serde_json::{Map, Value};

use crate::open::{Access, StoreAt};
use crate::{Claimed, Error, ErrorKind, Going, Held};

/// A point of a stored run to branch from.
pub struct BranchPoint {
    at: StoreAt,
    store: Box<dyn RunStore>,
    parent: RunInfo,
    seq_no: i64,
    vars: Map<String, Value>,
}

/// The point of run `id` of the store at `at` just before it first executed `seq_no`,
/// with its variables there (found by running the parent again on its stored answers;
/// nothing is sent).
pub fn branch_point(at: &StoreAt, id: &str, seq_no: i64) -> Result<BranchPoint, Error> {
    let store = at.open(Access::Existing)?;
    let parent = store.run(id)?;
    let vars = variables_before(&*store, &parent, seq_no)?;
    Ok(BranchPoint {
        at: at.clone(),
        store,
        parent,
        seq_no,
        vars,
    })
}

/// Every variable of stored `run` just before it first executed `seq_no`.
pub fn variables_before(
    store: &dyn RunStore,
    run: &RunInfo,
    seq_no: i64,
) -> Result<Map<String, Value>, Error> {
    let (program, _, calls) = crate::read_run(store, run)?;
    replay::variables_before(
        &program,
        &run.presets,
        &run.limits,
        run.branch_seq,
        &calls,
        seq_no,
    )
    .map_err(|e| match e {
        NotBefore::Damaged(why) => Error::damaged(store.name(), &run.id, &why),
        NotBefore::NotReached(why) => {
            Error::new(ErrorKind::NotReached, format!("run `{}`: {why}", run.id))
        }
    })
}

impl BranchPoint {
    pub fn parent(&self) -> &RunInfo {
        &self.parent
    }

    /// The variables set at the point: a new plan is verified with them counted as set.
    pub fn vars(&self) -> &Map<String, Value> {
        &self.vars
    }

    /// Whether `program` can start at the point under `limits` (its instruction at the
    /// point's seq_no, with the point's variables), before anything else is set up.
    pub fn check(
        &self,
        program: &ValidatedProgram,
        limits: &Limits,
        plan: &str,
    ) -> Result<(), Error> {
        self.fresh_state(program, limits, plan).map(drop)
    }

    fn fresh_state(
        &self,
        program: &ValidatedProgram,
        limits: &Limits,
        plan: &str,
    ) -> Result<plan_vm::VmState, Error> {
        replay::fresh_state(program, &self.vars, limits, Some(self.seq_no))
            .map_err(|e| Error::new(ErrorKind::Invalid, format!("{plan}: {e}")))
    }

    /// Creates the branch, run `id` of `program` (named `plan`, from `source`) under
    /// `limits`, held by this process; `program` starts at its own instruction with the
    /// point's seq_no.
    pub fn start(
        self,
        id: &str,
        plan: &str,
        source: Option<&str>,
        program: ValidatedProgram,
        limits: Limits,
        warn: fn(&Error),
    ) -> Result<Claimed, Error> {
        let state = self.fresh_state(&program, &limits, plan)?;
        let BranchPoint {
            at,
            mut store,
            parent,
            seq_no,
            vars,
        } = self;
        let new = NewRun {
            id,
            plan,
            source,
            pbc: &plan_bytecode::encode(&program),
            presets: &vars,
            limits: &limits,
            parent: Some((&parent.id, seq_no)),
        };
        plan_store::check_run_id(id)
            .map_err(|e| Error::new(ErrorKind::BadRunId, format!("run id `{id}`: {e}")))?;
        let owner = Owner::for_run();
        store.create_run(&new, &owner)?;
        Ok(Claimed {
            held: Held::new(store, &at, id, owner, warn),
            going: Going {
                program,
                seen: Seen::default(),
                calls: Vec::new(),
                steps_done: 0,
                state,
            },
            limits,
        })
    }
}
