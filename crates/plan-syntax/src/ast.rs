//! The plan AST: instructions of either dialect, with spans, before any checking of
//! references or tools. Produced by `plan::parse_plan` from a reader `Node`.
//!
//! Values stay as `Node`s: the compiler decides what a string means (template,
//! single reference, arithmetic) with `template::parse_template` and `template::parse_arith`.

use std::borrow::Cow;

use crate::json::Node;
use crate::span::Span;

/// Which plan language a plan is written in, detected per plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// Seeds 000/002: `assign` objects, `jmp`, `calling`, `${var}` references.
    Current,
    /// Seed 001: `assign {value, var_name}`, tool-typed instructions, nested `condition`,
    /// `{"var": name}` and `{{var}}` references.
    Older,
}

#[derive(Clone, Debug)]
pub struct Plan {
    pub dialect: Dialect,
    /// Top-level instructions in source order (older-dialect branches are nested inside).
    pub instructions: Vec<Instruction>,
    /// Span of the whole array.
    pub span: Span,
}

/// An instruction's `type` as written. NB: the known types are shared static strings, not
/// a copy per instruction (a large plan is mostly `"assign"`, one allocation each).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeName {
    pub text: Cow<'static, str>,
    pub span: Span,
}

/// A name with the span it was written at (variable names, tool names, param names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Name {
    pub text: String,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Instruction {
    /// `None` when missing or not an integer (an error has been reported).
    pub seq_no: Option<i64>,
    /// Span of the `seq_no` value, else of the whole instruction.
    pub seq_span: Span,
    /// The `type` string as written (`None` if missing: error reported).
    pub ty: Option<TypeName>,
    /// Span of the whole instruction object.
    pub span: Span,
    pub kind: InstrKind,
}

#[derive(Clone, Debug)]
pub enum InstrKind {
    /// `reasoning`: free text, kept for `planc explain` and the debug section.
    Reasoning(Box<Reasoning>),
    /// Current `assign` (object of var → value) or older `assign {value, var_name}`
    /// (one pair). Values are all computed before any is stored.
    Assign { vars: Vec<(Name, Node)> },
    /// `jmp`. NB: every kind but `assign` is boxed: an instruction is as large as its
    /// largest kind, and large plans are mostly assignments.
    Jmp(Box<Jmp>),
    /// A tool call: `calling`, an older tool-typed instruction (`llm_generate`, …), or an
    /// instruction of unknown type that has a `tool_name`.
    Call(Box<Call>),
    /// Older `condition` with nested branches (lowered to jumps by the compiler).
    Condition(Box<Condition>),
    /// Something the AST builder could not make sense of (an error has been reported).
    Invalid,
}

#[derive(Clone, Debug)]
pub struct Reasoning {
    pub chain_of_thoughts: Option<String>,
    pub dependency_analysis: Option<String>,
}

#[derive(Clone, Debug)]
pub struct Call {
    pub tool: Name,
    /// Params as written (older dialect: all parameters but `output_var`).
    pub params: Vec<(Name, Node)>,
    /// Variables receiving the output. One name: whole output; several: keys.
    pub output_vars: Vec<Name>,
    /// Where the call came from, for messages.
    pub form: CallForm,
}

/// `jmp`: conditional (`condition_prompt`, `context`, `jump_if_true`, `jump_if_false`) or
/// unconditional (`target_seq`).
#[derive(Clone, Debug)]
pub struct Jmp {
    pub condition_prompt: Option<Node>,
    pub context: Option<Node>,
    pub jump_if_true: Option<SeqRef>,
    pub jump_if_false: Option<SeqRef>,
    pub target_seq: Option<SeqRef>,
}

/// Older `condition` with nested branches.
#[derive(Clone, Debug)]
pub struct Condition {
    pub prompt: Option<Node>,
    pub context: Option<Node>,
    pub true_branch: Vec<Instruction>,
    pub false_branch: Vec<Instruction>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallForm {
    /// `{"type": "calling", "parameters": {"tool_name": ..}}`
    Calling,
    /// Older dialect `{"type": "llm_generate", ...}`.
    ToolTyped,
    /// Unknown `type` with a `tool_name` parameter (the reference VM accepts this).
    UnknownTypeWithToolName,
}

/// A `seq_no` named as a jump target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqRef {
    pub seq_no: i64,
    pub span: Span,
}
