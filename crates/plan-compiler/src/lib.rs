//! `plan-compiler`: plan AST → verified `Program`.
//!
//! API CONTRACT (stable; implementation in progress).

use plan_bytecode::Program;
use plan_manifest::Manifest;
use plan_syntax::{Diagnostic, LineIndex};

/// Options for one compilation.
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// Reader repairs become errors.
    pub strict: bool,
    /// Drop the debug section (seq_no/line map, reasoning text).
    pub strip: bool,
    pub manifest: Manifest,
    /// File name recorded in the debug section.
    pub source_name: Option<String>,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions { strict: false, strip: false, manifest: Manifest::builtin(), source_name: None }
    }
}

/// Result of compiling one plan: the program when there were no errors, and every diagnostic.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub program: Option<Program>,
    pub diagnostics: Vec<Diagnostic>,
    pub line_index: LineIndex,
}

/// Reads, checks and lowers a plan.
pub fn compile(src: &str, opts: &CompileOptions) -> Compiled {
    let _ = opts;
    unimplemented!("compile {}", src.len())
}

/// One step of `planc explain`: a plan instruction and the earlier steps it depends on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExplainStep {
    pub seq_no: i64,
    /// Instruction type as written (`calling`, `assign`, ...).
    pub kind: String,
    /// Short description: tool name and output vars, assigned vars, jump targets, ...
    pub title: String,
    /// seq_nos of the instructions whose outputs this one reads (def-use dataflow).
    pub depends_on: Vec<i64>,
    /// Variables this step reads and writes.
    pub reads: Vec<String>,
    pub writes: Vec<String>,
    /// Nesting depth (older-dialect branches are nested under their `condition`).
    pub depth: u32,
}

/// Dataflow summary of a plan for `planc explain`, or the diagnostics that prevented it.
pub fn explain(src: &str, opts: &CompileOptions) -> Result<Vec<ExplainStep>, Compiled> {
    let _ = (src, opts);
    unimplemented!("explain")
}
