//! A synchronous stub host: the run → answer every request → resume loop, with the
//! progress checks a fuzz target wants.

use plan_vm::{Halt, Limits, Outcome, RunError, ToolRequest, Vm};
use serde_json::Value;

/// How a driven run ended.
#[derive(Debug)]
pub enum Finish {
    Done(Outcome),
    Failed(RunError),
}

/// Runs `vm` to the end, answering every request with `answer` at once.
///
/// Panics (a finding) when the VM breaks its contract: a `Yield` with no new request while
/// nothing is outstanding, a rejected `resume` of a request it just issued, a finished run
/// that executed more than `max_steps` instructions, or more host rounds than instructions
/// allowed (every round executes at least the instruction that issued its requests).
pub fn drive(
    vm: &mut Vm<'_>,
    limits: &Limits,
    mut answer: impl FnMut(&ToolRequest) -> Result<Value, String>,
) -> Finish {
    let max_rounds = limits.max_steps.saturating_add(2);
    for _ in 0..max_rounds {
        match vm.run() {
            Halt::Yield(requests) => {
                assert!(
                    !requests.is_empty(),
                    "VM yielded no request while none was outstanding"
                );
                for r in requests {
                    let a = answer(&r);
                    if let Err(e) = vm.resume(r.id, a) {
                        panic!("resume of request {} just issued failed: {e}", r.id.0);
                    }
                }
            }
            Halt::Done(o) => {
                assert!(
                    o.steps <= limits.max_steps,
                    "run finished after {} steps, over max_steps {}",
                    o.steps,
                    limits.max_steps
                );
                return Finish::Done(o);
            }
            Halt::Failed(e) => return Finish::Failed(e),
        }
    }
    panic!("VM did not finish within {max_rounds} host rounds");
}
