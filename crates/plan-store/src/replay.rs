//! A stored run, executed again from its start with its stored answers (nothing is sent):
//! the VM is deterministic, so this gives its exact variables at any point, which is what
//! `runs show --at` prints and where `branch` starts.

use std::collections::HashMap;

use plan_bytecode::{Pc, ValidatedProgram};
use plan_vm::{Halt, Limits, Status, Vm, VmState};
use serde_json::{Map, Value};

use crate::CallRow;

/// The first instruction of `seq` in `program` (programs without debug info have none).
pub fn pc_of_seq(program: &ValidatedProgram, seq: i64) -> Option<Pc> {
    (0..program.code.len() as Pc).find(|&pc| program.seq_no_at(pc) == Some(seq))
}

/// A fresh run of `program` with `presets` set, starting at `start` (a branch's seq_no)
/// or at the first instruction.
pub fn fresh_state(
    program: &ValidatedProgram,
    presets: &Map<String, Value>,
    limits: &Limits,
    start: Option<i64>,
) -> Result<VmState, String> {
    Ok(fresh_vm(program, presets, limits.clone(), start)?.into_state())
}

fn fresh_vm<'p>(
    program: &'p ValidatedProgram,
    presets: &Map<String, Value>,
    limits: Limits,
    start: Option<i64>,
) -> Result<Vm<'p>, String> {
    let mut vm = Vm::new(program, limits);
    for (name, value) in presets {
        vm.set_var(name, value.clone())
            .map_err(|e| format!("variable `{name}`: {}", e.message))?;
    }
    if let Some(seq) = start {
        let pc = pc_of_seq(program, seq)
            .ok_or_else(|| format!("the program has no instruction with seq_no {seq}"))?;
        vm.start_at(pc).map_err(|e| e.message)?;
    }
    Ok(vm)
}

/// Why [`variables_before`] gives no variables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotBefore {
    /// The plan has no such instruction, or the run never got there.
    NotReached(String),
    /// What the store holds cannot be this run's (a stored call unlike the one the plan
    /// makes there, presets or answers the VM refuses): the store is damaged.
    Damaged(String),
}

impl std::fmt::Display for NotBefore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotBefore::NotReached(m) => f.write_str(m),
            NotBefore::Damaged(m) => write!(f, "{m}: the store is damaged"),
        }
    }
}

/// The variables just before the run first executed an instruction of `seq` (its
/// presets, if that is the first instruction). Fails when the run never got there: it
/// ended before, or its stored calls stop before (a run still going, or interrupted).
/// `start`: a branch's own starting seq_no.
pub fn variables_before(
    program: &ValidatedProgram,
    presets: &Map<String, Value>,
    limits: &Limits,
    start: Option<i64>,
    calls: &[CallRow],
    seq: i64,
) -> Result<Map<String, Value>, NotBefore> {
    let not_reached =
        |why: &str| NotBefore::NotReached(format!("the run never reached seq_no {seq} ({why})"));
    if pc_of_seq(program, seq).is_none() {
        return Err(NotBefore::NotReached(format!(
            "the plan has no instruction with seq_no {seq}"
        )));
    }
    // NB: one call at a time and one instruction per `run()`, so the head is seen at
    // every instruction before it executes.
    let limits = Limits {
        max_concurrency: 1,
        ..limits.clone()
    };
    let mut vm = fresh_vm(program, presets, limits, start)
        .map_err(|e| NotBefore::Damaged(format!("its start cannot be made again ({e})")))?;
    vm.set_step_slice(Some(1));
    let by_step: HashMap<u64, &CallRow> = calls.iter().map(|c| (c.step, c)).collect();
    // NB: requests are answered only after the head has been looked at: a run stopped
    // while waiting for the call at `seq` has no answer for it, and needs none.
    let mut issued: Vec<std::sync::Arc<plan_vm::ToolRequest>> = Vec::new();
    loop {
        let st = vm.state();
        if matches!(st.status(), Status::Running) && program.seq_no_at(st.pc()) == Some(seq) {
            return Ok(st.variables(program));
        }
        for req in issued.drain(..) {
            let Some(call) = by_step.get(&req.instance) else {
                return Err(not_reached("its stored calls end before"));
            };
            if call.tool != req.tool.as_str() {
                return Err(NotBefore::Damaged(format!(
                    "its stored call at step {} is of `{}`, where its plan calls `{}`",
                    req.instance, call.tool, req.tool
                )));
            }
            if req.args != call.args {
                return Err(NotBefore::Damaged(format!(
                    "its stored call of `{}` at step {} has other arguments than its plan gives there",
                    call.tool, req.instance
                )));
            }
            let result = match (&call.output, &call.error) {
                (Some(v), _) => Ok(v.clone()),
                (None, Some(e)) => Err(e.clone()),
                (None, None) => return Err(not_reached("a call before it has no answer")),
            };
            vm.resume(req.id, result).map_err(|e| {
                NotBefore::Damaged(format!(
                    "its stored answer at step {} is refused ({})",
                    req.instance, e.message
                ))
            })?;
        }
        match vm.run() {
            Halt::Yield(reqs) => issued = reqs,
            Halt::Done(_) => return Err(not_reached("it ended before")),
            Halt::Failed(e) => {
                return Err(not_reached(&format!("it failed before: {}", e.message)));
            }
        }
    }
}
