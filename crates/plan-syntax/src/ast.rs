//! The plan AST: instructions of either dialect, with spans, before any checking of
//! references or tools. Produced by `plan::parse_plan` from a reader `Node`.
//!
//! Values stay as `Node`s: the compiler decides what a string means (template,
//! single reference, arithmetic) with `template::parse_template` and `template::parse_arith`.

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
    pub ty: Option<Name>,
    /// Span of the whole instruction object.
    pub span: Span,
    pub kind: InstrKind,
}

#[derive(Clone, Debug)]
pub enum InstrKind {
    /// `reasoning`: free text, kept for `planc explain` and the debug section.
    Reasoning {
        chain_of_thoughts: Option<String>,
        dependency_analysis: Option<String>,
    },
    /// Current `assign` (object of var → value) or older `assign {value, var_name}`
    /// (one pair). Values are all computed before any is stored.
    Assign { vars: Vec<(Name, Node)> },
    /// `jmp`: conditional (`condition_prompt`, `context`, `jump_if_true`, `jump_if_false`)
    /// or unconditional (`target_seq`).
    Jmp {
        condition_prompt: Option<Node>,
        context: Option<Node>,
        jump_if_true: Option<SeqRef>,
        jump_if_false: Option<SeqRef>,
        target_seq: Option<SeqRef>,
    },
    /// A tool call: `calling`, an older tool-typed instruction (`llm_generate`, …), or an
    /// instruction of unknown type that has a `tool_name`.
    Call {
        tool: Name,
        /// Params as written (older dialect: all parameters but `output_var`).
        params: Vec<(Name, Node)>,
        /// Variables receiving the output. One name: whole output; several: keys.
        output_vars: Vec<Name>,
        /// Where the call came from, for messages.
        form: CallForm,
    },
    /// Older `condition` with nested branches (lowered to jumps by the compiler).
    Condition {
        prompt: Option<Node>,
        context: Option<Node>,
        true_branch: Vec<Instruction>,
        false_branch: Vec<Instruction>,
    },
    /// Something the AST builder could not make sense of (an error has been reported).
    Invalid,
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
