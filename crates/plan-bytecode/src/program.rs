//! The in-memory program: instruction stream plus side tables. Everything the encoder
//! writes, the decoder reads back, and the validator checks.
//!
//! Layout rationale: `Instr` is `Copy` and ≤ 16 bytes so the dispatch loop walks a dense
//! array; anything variable-sized (argument lists, template pieces, arithmetic code)
//! lives in a side table addressed by a `u32` index.

use crate::Instr;
use plan_value::{Op1, Op2};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Index of a variable slot (register). Every variable name is interned to one slot.
pub type Slot = u32;
/// Index into `Program::consts`.
pub type ConstIdx = u32;
/// Index of an instruction in `Program::code` (a program counter).
pub type Pc = u32;

/// Where a value comes from. Resolved by the VM against the current slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Operand {
    /// A constant from the pool (already folded: literals, constant arithmetic).
    Const(ConstIdx),
    /// A single reference: passes the referenced value unchanged (`refs` index).
    Ref(u32),
    /// A template interpolated in one pass to a string (`templates` index).
    Template(u32),
    /// Arithmetic with a text fallback (`ariths` index). Only produced for `assign` values.
    Arith(u32),
    /// A JSON array with references inside (`arrays` index).
    Array(u32),
    /// A JSON object with references inside (`objects` index).
    Object(u32),
}

/// A variable reference `${slot.path...}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefDef {
    pub slot: Slot,
    /// Dotted keys, each a string constant.
    pub path: Vec<ConstIdx>,
    /// The reference as written (string constant), used when it is unset at run time.
    pub raw: ConstIdx,
}

/// One piece of a compiled template.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Piece {
    /// Literal text (string constant).
    Lit(ConstIdx),
    /// Interpolated reference (`refs` index).
    Ref(u32),
}

/// Postfix arithmetic code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArithOp {
    /// Push a numeric constant.
    Const(ConstIdx),
    /// Push a referenced value (must be numeric or a numeric string at run time).
    Ref(u32),
    /// Pop one value, push the result.
    Un(Op1),
    /// Pop the right operand, then the left, push the result.
    Bin(Op2),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArithDef {
    pub code: Vec<ArithOp>,
    /// Template giving the interpolated text used when evaluation fails (`templates` index).
    pub fallback: u32,
}

/// A multi-variable `assign`: every operand is evaluated before any slot is written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssignDef {
    pub targets: Vec<(Slot, Operand)>,
}

/// A tool call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallDef {
    /// Index into `Program::tools`.
    pub tool: u32,
    /// Arguments in source order: (name string constant, value).
    pub args: Vec<(ConstIdx, Operand)>,
    /// Output variables. One: the whole output; several: keys of a JSON object output,
    /// each stored in the slot of the same name (names from `Program::slots`).
    pub outputs: Vec<Slot>,
}

/// An LLM-evaluated condition (`jmp` with `condition_prompt`, older `condition`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CondDef {
    pub prompt: Operand,
    pub context: Option<Operand>,
}

/// Side effects a tool declares in the manifest (used by the scheduler).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum Effects {
    Pure,
    #[default]
    Read,
    Write,
    /// Answered by a person (`ask_user`): the run stops at the call until someone
    /// answers, so it is never issued ahead.
    Human,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolDef {
    pub name: String,
    pub effects: Effects,
}

/// Per-instruction source mapping (debug section).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DebugEntry {
    /// `seq_no` of the plan instruction this came from (synthetic jumps carry their parent's).
    pub seq_no: i64,
    /// 1-based source line and column.
    pub line: u32,
    pub column: u32,
}

/// Optional debug section, dropped by `planc compile --strip`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct DebugInfo {
    /// One entry per instruction in `code`.
    pub entries: Vec<DebugEntry>,
    /// `reasoning` texts: (pc of its `Nop`, chain_of_thoughts, dependency_analysis).
    pub reasoning: Vec<(Pc, String, String)>,
    /// Source file name, if known.
    pub source: Option<String>,
}

/// A whole compiled plan.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct Program {
    /// Deduplicated constant pool.
    pub consts: Vec<Value>,
    /// Variable name of each slot.
    pub slots: Vec<String>,
    pub code: Vec<Instr>,
    pub refs: Vec<RefDef>,
    pub templates: Vec<Vec<Piece>>,
    pub ariths: Vec<ArithDef>,
    pub arrays: Vec<Vec<Operand>>,
    pub objects: Vec<Vec<(ConstIdx, Operand)>>,
    pub assigns: Vec<AssignDef>,
    pub calls: Vec<CallDef>,
    pub conds: Vec<CondDef>,
    pub tools: Vec<ToolDef>,
    pub debug: Option<DebugInfo>,
}

impl Program {
    /// Slot of `final_answer`, if the plan mentions it.
    pub fn final_answer_slot(&self) -> Option<Slot> {
        self.slots
            .iter()
            .position(|s| s == "final_answer")
            .map(|i| i as Slot)
    }

    /// Slot of a variable by name.
    pub fn slot_of(&self, name: &str) -> Option<Slot> {
        self.slots.iter().position(|s| s == name).map(|i| i as Slot)
    }

    /// `seq_no` of the plan instruction at `pc`, when debug info is present.
    pub fn seq_no_at(&self, pc: Pc) -> Option<i64> {
        self.debug
            .as_ref()?
            .entries
            .get(pc as usize)
            .map(|e| e.seq_no)
    }

    /// Source line of the plan instruction at `pc`, when debug info is present.
    pub fn line_at(&self, pc: Pc) -> Option<u32> {
        self.debug
            .as_ref()?
            .entries
            .get(pc as usize)
            .map(|e| e.line)
    }
}
