//! [`OwnedVm`]: a run that owns its program, for holders that cannot borrow (a Python
//! object, a server's session table, a task that outlives the caller's stack frame).
//!
//! [`Vm`] borrows its `&ValidatedProgram`, which keeps dispatch free of reference
//! counting; an `OwnedVm` keeps an `Arc` of the program and the `Vm` borrowing it together
//! (with `self_cell`, so no unsafe code of ours), and lends the `Vm` out for each use.
//! Many runs of one program share it.

use std::sync::Arc;

use plan_bytecode::ValidatedProgram;

use crate::{Limits, RunError, Vm, VmState};

self_cell::self_cell!(
    struct Cell {
        owner: Arc<ValidatedProgram>,
        #[covariant]
        dependent: Vm,
    }
);

/// A run that owns (a share of) its program. `Send`, `'static`: it can be kept anywhere.
pub struct OwnedVm(Cell);

impl OwnedVm {
    /// A fresh run of `program`.
    pub fn new(program: Arc<ValidatedProgram>, limits: Limits) -> OwnedVm {
        OwnedVm(Cell::new(program, |p| Vm::new(p, limits)))
    }

    /// A run continued from a saved state (see [`Vm::from_state`]).
    pub fn from_state(
        program: Arc<ValidatedProgram>,
        state: VmState,
        limits: Limits,
    ) -> Result<OwnedVm, RunError> {
        Cell::try_new(program, |p| Vm::from_state(p, state, limits)).map(OwnedVm)
    }

    /// The program this run executes.
    pub fn program(&self) -> &Arc<ValidatedProgram> {
        self.0.borrow_owner()
    }

    /// The VM, for one use: `run`, `resume`, `state`, `take_events`, ...
    pub fn with<R>(&mut self, f: impl FnOnce(&mut Vm<'_>) -> R) -> R {
        self.0.with_dependent_mut(|_, vm| f(vm))
    }

    /// The run's state (to save it, or to continue it elsewhere).
    pub fn state(&self) -> &VmState {
        self.0.borrow_dependent().state()
    }
}

impl std::fmt::Debug for OwnedVm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedVm").finish_non_exhaustive()
    }
}
