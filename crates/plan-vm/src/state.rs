//! The serializable state of a run between yields, and the checks that make restoring it
//! safe: a saved state is untrusted input, exactly like a `.pbc` file.

use std::sync::Arc;

use crate::{RunError, ToolRequest};
use plan_bytecode::{Instr, Pc, ValidatedProgram};
use plan_value::Val;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Where a run is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Status {
    /// Running or suspended at a tool call.
    Running,
    /// Finished: `final_answer` was set.
    Done,
    /// Failed; `run()` keeps returning this error.
    Failed { error: RunError },
}

/// A request the VM issued and has not consumed the result of yet.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pending {
    /// The request as issued (so a restored run can re-issue unanswered requests). Its
    /// `instance` matches it to its instruction however far the head has moved since.
    /// NB: shared with the host that sends it (one copy per call in flight).
    pub request: Arc<ToolRequest>,
    /// The host's answer, once `resume` delivered it (serialized as the JSON it was).
    pub result: Option<Result<Val, String>>,
}

/// The format of [`VmState`] this version writes and reads. Raised whenever a field's
/// meaning changes, so an old planvm refuses a newer state instead of misreading it.
pub const STATE_FORMAT: u32 = 1;

/// Everything a suspended run needs to continue (see [`crate::Vm::from_state`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VmState {
    /// [`STATE_FORMAT`] of the planvm that saved it (0: saved before formats existed).
    #[serde(default)]
    pub(crate) format: u32,
    /// The [`ValidatedProgram::fingerprint`] of the program the run belongs to.
    #[serde(default)]
    pub(crate) program: u64,
    /// The head: the next instruction to commit in program order (while suspended, the
    /// call or condition waiting for its result).
    pub(crate) pc: Pc,
    /// One entry per program slot; `None` = never set.
    pub(crate) slots: Vec<Option<Val>>,
    /// Preset variables whose name has no slot in the program (kept so they show in
    /// `Outcome::vars`; no instruction can read them).
    pub(crate) extra: Map<String, Value>,
    /// Outstanding requests (the head's and those issued ahead of it), in issue order.
    /// The look-ahead window itself is not saved: it is derived again from the head and
    /// these requests.
    pub(crate) pending: Vec<Pending>,
    /// Instructions committed so far (also the instance number of the head).
    pub(crate) steps: u64,
    /// Bytes held in all variables (recomputed and checked on restore).
    pub(crate) bytes: u64,
    pub(crate) next_call: u64,
    pub(crate) status: Status,
}

impl VmState {
    pub(crate) fn new(slot_count: usize, program: u64) -> Self {
        VmState {
            format: STATE_FORMAT,
            program,
            pc: 0,
            slots: vec![None; slot_count],
            extra: Map::new(),
            pending: Vec::new(),
            steps: 0,
            bytes: 0,
            next_call: 0,
            status: Status::Running,
        }
    }

    /// The fingerprint of the program the run belongs to.
    pub fn program_fingerprint(&self) -> u64 {
        self.program
    }

    /// Program counter of the head (the waiting instruction while suspended).
    pub fn pc(&self) -> Pc {
        self.pc
    }

    /// Instructions committed so far (a call counts once its result is consumed).
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Bytes held in variables, as charged against `max_total_bytes`.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn status(&self) -> &Status {
        &self.status
    }

    /// Requests issued and not yet consumed (answered or not).
    pub fn pending(&self) -> &[Pending] {
        &self.pending
    }

    /// Requests still waiting for the host's answer (re-issue these after a restore).
    pub fn unanswered(&self) -> Vec<Arc<ToolRequest>> {
        self.pending
            .iter()
            .filter(|p| p.result.is_none())
            .map(|p| p.request.clone())
            .collect()
    }

    /// Value of slot `slot`, if set.
    pub fn slot(&self, slot: u32) -> Option<&Val> {
        self.slots.get(slot as usize).and_then(Option::as_ref)
    }

    /// Every variable set so far, by name: the program's variables, then presets the
    /// program has no slot for. `program` must be the state's own program.
    pub fn variables(&self, program: &ValidatedProgram) -> Map<String, Value> {
        let mut vars = Map::new();
        for (name, v) in program.slots.iter().zip(&self.slots) {
            if let Some(v) = v {
                vars.insert(name.clone(), v.to_value());
            }
        }
        for (name, v) in &self.extra {
            vars.insert(name.clone(), v.clone());
        }
        vars
    }

    /// Checks a restored state against the program it claims to belong to.
    pub(crate) fn check(&self, program: &ValidatedProgram) -> Result<(), String> {
        if self.format != STATE_FORMAT {
            return Err(if self.format > STATE_FORMAT {
                format!(
                    "it was saved in state format {} by a newer planvm; this one reads format {STATE_FORMAT}",
                    self.format
                )
            } else {
                format!(
                    "it was saved in state format {} by an older planvm; this one reads format {STATE_FORMAT}",
                    self.format
                )
            });
        }
        if self.program != program.fingerprint() {
            return Err(format!(
                "it belongs to another program (fingerprint {:016x}, this program's is {:016x})",
                self.program,
                program.fingerprint()
            ));
        }
        if self.slots.len() != program.slots.len() {
            return Err(format!(
                "state has {} slots, the program has {}",
                self.slots.len(),
                program.slots.len()
            ));
        }
        if self.pc as usize > program.code.len() {
            return Err(format!("state pc {} is beyond the program", self.pc));
        }
        let mut ids = std::collections::BTreeSet::new();
        let mut instances = std::collections::BTreeSet::new();
        for p in &self.pending {
            let pc = p.request.pc as usize;
            if !matches!(
                program.code.get(pc),
                Some(Instr::Call { .. } | Instr::Branch { .. })
            ) {
                return Err(format!(
                    "pending request {} does not point at a call",
                    p.request.id.0
                ));
            }
            if p.request.id.0 >= self.next_call {
                return Err(format!(
                    "pending request id {} was never issued",
                    p.request.id.0
                ));
            }
            if !ids.insert(p.request.id) {
                return Err(format!("request id {} is pending twice", p.request.id.0));
            }
            // Only a running state may hold requests the head has not reached yet; a
            // finished one may keep abandoned requests from anywhere.
            if matches!(self.status, Status::Running) && p.request.instance < self.steps {
                return Err(format!(
                    "pending request {} belongs to an instruction already committed",
                    p.request.id.0
                ));
            }
            if !instances.insert(p.request.instance) {
                return Err(format!(
                    "two pending requests for instruction instance {}",
                    p.request.instance
                ));
            }
        }
        Ok(())
    }
}
