//! `planrt`: the run engine in one import, over the pipeline crates (each also
//! re-exported whole under its stage's name).
//!
//! - [`load`]: plan bytes, source or `.pbc`, to a [`ValidatedProgram`] (source compiled
//!   with the size cap, then validated like any bytecode), every refusal as data.
//! - [`run_plan`]: one run on a [`Host`] (its tools), to a [`RunReport`].
//! - [`resume_plan`]: a run continued from a saved [`VmState`] and the answers after it.
//! - [`Pool`]: many runs at once, at most N in flight, as `planvm batch` runs them.
//!
//! The CLIs `planc` and `planvm` are argument parsing, rendering and exit codes over these.

pub use plan_bytecode as bytecode;
pub use plan_compiler as compiler;
pub use plan_host as host;
pub use plan_manifest as manifest;
pub use plan_syntax as syntax;
pub use plan_value as value;
pub use plan_vm as vm;

pub use plan_bytecode::ValidatedProgram;
pub use plan_compiler::{CompileOptions, LoadError, Loaded, compile, load, read_capped};
pub use plan_host::{Host, HostOptions, Pool, RunReport, resume_plan, run_plan};
pub use plan_vm::{Limits, VmState};
