//! `plan-runs`: the run engine over a [`plan_store::RunStore`]. Front ends (the `planvm`
//! CLI, the service, the Python package) open a store, take runs up and let them go on
//! through it, and map its typed [`Error`]s to what they show; the engine prints nothing.
//!
//! Module map: `take_up` (what a stored run goes on from, and the checks before it:
//! finished, held, `write` calls in flight, damage), `go_on` (a stored run journaled to
//! its end), `lease` (renewing a run's lease from a thread of its own), `open` (stores
//! from a path: the one place that names the SQLite store), `error`.

mod error;
mod go_on;
mod lease;
pub mod open;
mod take_up;

pub use error::{Error, ErrorKind};
pub use go_on::{GoOn, go_on};
pub use lease::{Lease, Opener};
pub use take_up::{
    Going, RunParts, Taken, held_elsewhere, read_run, saved_state, stored_program, stored_report,
    take_up, unknown_writes,
};
