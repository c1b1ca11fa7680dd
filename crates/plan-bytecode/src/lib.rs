//! `plan-bytecode`: the `.pbc` instruction set, constant pool, encoder, decoder,
//! load-time validator and disassembler.
//!
//! Properties:
//! - **Never trust bytes.** [`decode`] checks structure (magic, version, checksum, section
//!   framing, tags, lengths, UTF-8) and never panics or allocates more than the input
//!   justifies; [`validate`] checks every index and produces a [`ValidatedProgram`], the
//!   only thing the VM accepts. [`load`] does both. Every error is a [`BytecodeError`]
//!   carrying a byte offset when it comes from the file.
//! - **One source of truth for instructions.** `opcodes.rs` lists each instruction once;
//!   [`Instr`], [`Opcode`], encoder, decoder, validator, disassembler and each
//!   instruction's reads and writes are generated from that list.
//! - **Round trip.** `decode(&encode(p)) == Ok(p)` for every program that validates.
//! - **Compact.** LEB128 varints and a tagged binary encoding of JSON constants; empty
//!   tables are omitted; the debug section is optional (`planc compile --strip`).
//!
//! Module map, in reading order:
//! - `program.rs`: the in-memory data (operands and side tables).
//! - `opcodes.rs`: the instruction table: [`Instr`], [`Opcode`] and all that is generated.
//! - `encode.rs`: the file layout (documented there) and [`encode`].
//! - `wire.rs`: varints, bounds-checked reader, constant encoding.
//! - `decode.rs`: [`decode`]. `limits.rs`: every cap.
//! - `validate.rs`: [`validate`] and the list of what it guarantees; `defuse.rs`: the
//!   per-instruction read/write slot sets a [`ValidatedProgram`] carries.
//! - `disasm.rs`: [`disasm`].

mod decode;
mod defuse;
mod disasm;
mod encode;
pub mod limits;
mod names;
mod opcodes;
mod program;
mod validate;
mod wire;

pub use decode::decode;
pub use disasm::disasm;
pub use encode::{FLAG_DEBUG, FORMAT_VERSION, HEADER_LEN, MAGIC, encode, is_pbc};
pub use names::SlotNames;
pub use opcodes::{Instr, Opcode};
pub use program::*;

// Why: the dispatch loop walks a dense `[Instr]`; growing past 16 bytes would cost cache.
const _: () = assert!(std::mem::size_of::<Instr>() <= 16);

/// Decodes and validates a `.pbc` file: the one call a VM front end needs.
pub fn load(bytes: &[u8]) -> Result<ValidatedProgram, BytecodeError> {
    validate(decode(bytes)?)
}

// API CONTRACT:
// - `encode(&Program) -> Vec<u8>`
// - `decode(&[u8]) -> Result<Program, BytecodeError>` (structure only)
// - `validate(Program) -> Result<ValidatedProgram, BytecodeError>` (every index checked)
// - `load(&[u8]) -> Result<ValidatedProgram, BytecodeError>` = decode + validate
// - `is_pbc(&[u8]) -> bool` (magic check)
// - `disasm(&Program) -> String`

/// A program whose every index, slot, constant and jump target has been checked.
/// The VM accepts only this, so dispatch can index without re-checking.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidatedProgram {
    program: Program,
    /// [`Program::final_answer_slot`] (derived): every run needs it, and finding it is a
    /// search through the names.
    final_slot: Option<Slot>,
    /// Bytes of literal text in each template (derived, not encoded): the VM sizes the
    /// interpolated string once instead of growing it piece by piece.
    template_lit_bytes: Vec<usize>,
    /// Slots each instruction reads and writes (derived, not encoded).
    defuse: defuse::DefUse,
    /// Each tool's name, shared: requests carry it without copying it.
    tool_names: Vec<std::sync::Arc<str>>,
    /// Each call's argument names, shared: requests carry them without copying them.
    /// Built by the first run that needs them (a program only checked never does).
    arg_names: Cached<Vec<Box<[std::sync::Arc<str>]>>>,
    /// The slots' names, shared with every finished run's variables; built on first use.
    slot_names: Cached<std::sync::Arc<SlotNames>>,
    /// [`ValidatedProgram::fingerprint`], computed on first use.
    fingerprint: Cached<u64>,
    /// [`ValidatedProgram::op_name`] of each instruction, built by the first traced run.
    op_names: Cached<Vec<Box<str>>>,
    /// The constants as the VM's values, built by the first run: a run reads a number or
    /// a text from them without decoding a `serde_json::Value` at every use.
    const_vals: Cached<Vec<plan_value::Val>>,
}

/// Data derived from the program on first use; never part of a program's equality (two
/// equal programs are equal whether or not either has computed it yet).
#[derive(Clone, Debug, Default)]
struct Cached<T>(std::sync::OnceLock<T>);

impl<T> PartialEq for Cached<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl ValidatedProgram {
    pub fn program(&self) -> &Program {
        &self.program
    }

    pub fn into_inner(self) -> Program {
        self.program
    }

    /// Slots the instruction at `pc` reads, sorted, without duplicates. Conservative: a
    /// dotted reference `${x.a}` reads all of `x`, and a template or arithmetic operand
    /// reads every slot it references, including those of its text fallback.
    #[inline]
    pub fn reads(&self, pc: Pc) -> &[Slot] {
        self.defuse.reads(pc)
    }

    /// Slots the instruction at `pc` writes, sorted, without duplicates.
    #[inline]
    pub fn writes(&self, pc: Pc) -> &[Slot] {
        self.defuse.writes(pc)
    }

    /// The name of tool `t`, shared (cloning it copies no text); `None` for an unknown
    /// index.
    #[inline]
    pub fn tool_name(&self, t: u32) -> Option<&std::sync::Arc<str>> {
        self.tool_names.get(t as usize)
    }

    /// The argument names of call `c` (in its `args` order), shared; empty for an unknown
    /// index.
    #[inline]
    pub fn arg_names(&self, c: u32) -> &[std::sync::Arc<str>] {
        let names = self.arg_names.0.get_or_init(|| {
            let p = &self.program;
            p.calls
                .iter()
                .map(|c| {
                    c.args
                        .iter()
                        .map(|&(name, _)| p.consts[name as usize].as_str().unwrap_or("").into())
                        .collect()
                })
                .collect()
        });
        names.get(c as usize).map_or(&[], |n| n)
    }

    /// How a trace names instruction `pc`: `call vector_search`, `assign a, b`, `set x`,
    /// or its opcode. NB: built once per program, not formatted at every traced step
    /// (a stored run traces every step for its journal).
    pub fn op_name(&self, pc: Pc) -> &str {
        let names = self.op_names.0.get_or_init(|| {
            let p = &self.program;
            p.code
                .iter()
                .map(|&instr| match instr {
                    Instr::Set { dst, .. } => format!("set {}", p.slots[dst as usize]),
                    Instr::Assign { assign } => {
                        let names: Vec<&str> = p.assigns[assign as usize]
                            .targets
                            .iter()
                            .map(|&(s, _)| p.slots[s as usize].as_str())
                            .collect();
                        format!("assign {}", names.join(", "))
                    }
                    Instr::Call { call } => {
                        format!(
                            "call {}",
                            p.tools[p.calls[call as usize].tool as usize].name
                        )
                    }
                    other => other.opcode().name().to_owned(),
                })
                .map(String::into_boxed_str)
                .collect()
        });
        names.get(pc as usize).map_or("", |n| n)
    }

    /// The names of the slots, shared (a run's [`SlotNames`] handle costs one reference
    /// count, not a copy per name).
    #[inline]
    pub fn slot_names(&self) -> &std::sync::Arc<SlotNames> {
        self.slot_names
            .0
            .get_or_init(|| std::sync::Arc::new(SlotNames::new(self.program.slots.clone())))
    }

    /// Slot of a variable by name (indexed: fast however many slots the program has).
    pub fn slot_of(&self, name: &str) -> Option<Slot> {
        self.slot_names().slot_of(name)
    }

    /// A 64-bit fingerprint of the program's content (FNV-1a of its encoding without
    /// debug info: a stripped and an unstripped `.pbc` of one plan share it), stable
    /// across processes and versions of the same file format. A saved run records it, so
    /// it is never continued against another program. Computed once per program.
    pub fn fingerprint(&self) -> u64 {
        *self.fingerprint.0.get_or_init(|| {
            let mut p = self.program.clone();
            p.debug = None;
            encode(&p).iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
            })
        })
    }

    /// Slot of `final_answer`, if the plan mentions it (found once per program).
    #[inline]
    pub fn final_answer_slot(&self) -> Option<Slot> {
        self.final_slot
    }

    /// The constants as values ([`Program::consts`], same indices).
    pub fn const_vals(&self) -> &[plan_value::Val] {
        self.const_vals.0.get_or_init(|| {
            self.program
                .consts
                .iter()
                .map(plan_value::Val::from)
                .collect()
        })
    }

    /// Bytes of literal text in template `t` (0 for an unknown index).
    #[inline]
    pub fn template_lit_bytes(&self, t: u32) -> usize {
        self.template_lit_bytes
            .get(t as usize)
            .copied()
            .unwrap_or(0)
    }
}

impl std::ops::Deref for ValidatedProgram {
    type Target = Program;
    fn deref(&self) -> &Program {
        &self.program
    }
}

/// A clean error for a malformed `.pbc` file or program (never a panic).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BytecodeError(Box<BytecodeErrorInner>);

#[derive(Clone, Debug, PartialEq, Eq)]
struct BytecodeErrorInner {
    /// Byte offset in the file, when the error comes from decoding.
    offset: Option<usize>,
    message: String,
}

impl BytecodeError {
    #[cold]
    pub fn new(offset: Option<usize>, message: impl Into<String>) -> Self {
        BytecodeError(Box::new(BytecodeErrorInner {
            offset,
            message: message.into(),
        }))
    }

    pub fn offset(&self) -> Option<usize> {
        self.0.offset
    }

    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// A malformed file: what went wrong at byte `offset`.
    #[cold]
    pub(crate) fn at(offset: usize, message: impl Into<String>) -> Self {
        Self::new(Some(offset), message)
    }

    /// The input ended inside `what`.
    #[cold]
    pub(crate) fn truncated(offset: usize, what: &str) -> Self {
        Self::new(Some(offset), format!("truncated {what}"))
    }

    /// A validation failure (no byte offset: the program may not come from a file).
    #[cold]
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(None, message)
    }
}

impl std::fmt::Display for BytecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.offset {
            Some(o) => write!(f, "invalid bytecode at byte {o}: {}", self.0.message),
            None => write!(f, "invalid bytecode: {}", self.0.message),
        }
    }
}

impl std::error::Error for BytecodeError {}

/// Checks every index of `program`. The only way to build a `ValidatedProgram`.
/// See `validate.rs` for the full list of what a `ValidatedProgram` guarantees.
pub fn validate(program: Program) -> Result<ValidatedProgram, BytecodeError> {
    validate::validate(program)
}
