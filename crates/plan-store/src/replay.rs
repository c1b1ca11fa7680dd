//! A stored run, executed again from its start with its stored answers (nothing is sent):
//! the VM is deterministic, so this gives its exact variables at any point, which is what
//! `runs show --at` prints and where `branch` starts.

use std::collections::HashMap;

use plan_bytecode::ValidatedProgram;
use plan_vm::{Halt, Limits, Status, Vm};
use serde_json::{Map, Value};

use crate::CallRow;

/// The variables just before the run first executed an instruction of `seq` (its
/// presets, if that is the first instruction). Fails when the run never got there: it
/// ended before, or its stored calls stop before (a run still going, or interrupted).
pub fn variables_before(
    program: &ValidatedProgram,
    presets: &Map<String, Value>,
    limits: &Limits,
    calls: &[CallRow],
    seq: i64,
) -> Result<Map<String, Value>, String> {
    let not_reached = |why: &str| format!("the run never reached seq_no {seq} ({why})");
    if !(0..program.code.len()).any(|pc| program.seq_no_at(pc as u32) == Some(seq)) {
        return Err(format!("the plan has no instruction with seq_no {seq}"));
    }
    // NB: one call at a time and one instruction per `run()`, so the head is seen at
    // every instruction before it executes.
    let limits = Limits {
        max_concurrency: 1,
        ..limits.clone()
    };
    let mut vm = Vm::new(program, limits);
    for (name, value) in presets {
        vm.set_var(name, value.clone())
            .map_err(|e| format!("preset `{name}`: {}", e.message))?;
    }
    vm.set_step_slice(Some(1));
    let by_step: HashMap<u64, &CallRow> = calls.iter().map(|c| (c.step, c)).collect();
    loop {
        let st = vm.state();
        if matches!(st.status(), Status::Running) && program.seq_no_at(st.pc()) == Some(seq) {
            return Ok(st.variables(program));
        }
        match vm.run() {
            Halt::Yield(reqs) => {
                for req in reqs {
                    let Some(call) = by_step.get(&req.instance) else {
                        return Err(not_reached("its stored calls end before"));
                    };
                    if call.tool != req.tool.as_str() || call.args != *req.args {
                        return Err(format!(
                            "the stored call at step {} does not match the plan ({} vs {}): the store was changed",
                            req.instance, call.tool, req.tool
                        ));
                    }
                    let result = match (&call.output, &call.error) {
                        (Some(v), _) => Ok(v.clone()),
                        (None, Some(e)) => Err(e.clone()),
                        (None, None) => return Err(not_reached("a call before it has no answer")),
                    };
                    vm.resume(req.id, result).map_err(|e| e.message)?;
                }
            }
            Halt::Done(_) => return Err(not_reached("it ended before")),
            Halt::Failed(e) => {
                return Err(not_reached(&format!("it failed before: {}", e.message)));
            }
        }
    }
}
