//! `plan-runs`: the run engine over a [`plan_store::RunStore`]. Front ends (the `planvm`
//! CLI, the service, the Python package) say where the store is ([`StoreAt`]), start,
//! resume and branch runs through it, read them back, and map its typed [`Error`]s to
//! what they show; the engine prints nothing.
//!
//! Module map: `compiled` (the cache of compiled plans, by source and presets), `engine` (what a face asks, as requests, and the calls that do it: a goal
//! asked, a plan's run started, a planner's prompt and examples loaded), `ask` (a goal's
//! runs, each stored), `batch` (many runs at once, from a
//! directory or a list, stored and resumed as a batch), `writer` (many runs of one
//! process through one writer thread: a service's), `load` (a plan file to a validated
//! program, its diagnostics as data; the tools file), `held` (a run this process holds: created or claimed, journaled, its
//! lease renewed), `resume` (a stored run by id: read, checked, claimed), `branch` (a new
//! run from a point of another, and its preview), `cancel`, `feedback` (a person's verdict
//! on a run), `take_up` (what a stored run goes on from, and the
//! checks before it: finished, held, `write` calls in flight, damage), `go_on` (a stored
//! run journaled to its end), `read` (listing and showing runs and evaluations), `lease` (renewing a
//! run's lease from a thread of its own), `open` (where a store is: the one place that
//! names the SQLite store), `error`.

pub mod ask;
pub mod batch;
mod branch;
mod cancel;
pub mod compiled;
pub mod engine;
mod error;
mod feedback;
mod go_on;
pub mod goal;
mod held;
mod lease;
pub mod load;
pub mod open;
pub mod queue;
pub mod read;
mod resume;
mod take_up;
mod writer;

pub use branch::{
    Branch, BranchPoint, BranchRequest, Preview, PreviewCall, branch_point, variables_before,
};
pub use cancel::{cancel, prune};
pub use error::{Error, ErrorKind};
pub use feedback::feedback;
pub use go_on::{GoOn, go_on};
pub use held::{Claimed, Held};
pub use lease::{Lease, Opener};
pub use open::StoreAt;
pub use plan_store::OnWritten;
pub use resume::{LimitsOverride, Ready, Resume, ResumeRequest, resume};
pub use take_up::{
    Going, RunParts, Taken, held_elsewhere, question_of, read_run, saved_state, stored_program,
    stored_report, take_up, unknown_writes,
};
pub use writer::Writer;
