//! `plan-fuzz`: the logic of every fuzz target, as plain functions, so that cargo-fuzz
//! (`fuzz/fuzz_targets/*.rs`, one line each) and the corpus replay in `cargo test`
//! (`tests/fuzz_corpus.rs` at the workspace root) run exactly the same code.
//!
//! Each module is one target and exposes `pub fn run(data: &[u8])`. A target panics only
//! when it finds a bug: a panic inside the pipeline, a broken invariant it asserts, or a
//! run that does not finish within its limits. Clean errors (diagnostics, `BytecodeError`,
//! `RunError`) are expected outcomes.
//!
//! Module map:
//! - [`reader`]: bytes → `plan_compiler::compile` (as `planc check` runs it), plus the
//!   template/arithmetic parsers on every string in the input.
//! - [`bytecode`]: bytes → `plan_bytecode::load`; what validates runs under a stub host.
//! - [`template`]: arbitrary template pieces and values → compiled interpolation must equal
//!   the plain reference implementation in that module.
//! - [`roundtrip`]: arbitrary plans from a structured model → JSON → compile → encode →
//!   decode must give the same program, which must validate.
//! - [`vm_outputs`]: a fixed set of plans with arbitrary tool outputs and condition answers
//!   → a clean finish or a clean error within the step limit.
//! - `drive`: the synchronous stub host loop shared by the targets that run programs.
//! - `generate`: `Arbitrary` JSON values and the variable names the models use.

mod drive;
mod generate;

pub mod bytecode;
pub mod reader;
pub mod roundtrip;
pub mod template;
pub mod vm_outputs;

pub use drive::{Finish, drive};
pub use generate::FValue;

/// A target's entry point.
pub type Target = fn(&[u8]);

/// Every target by name, as the corpus directories under `fuzz/corpus/` are named.
pub const TARGETS: &[(&str, Target)] = &[
    ("reader", reader::run),
    ("bytecode", bytecode::run),
    ("template", template::run),
    ("roundtrip", roundtrip::run),
    ("vm_outputs", vm_outputs::run),
];
