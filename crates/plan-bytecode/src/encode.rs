//! The `.pbc` file format and its encoder.
//!
//! ```text
//! header (16 bytes, fixed):
//!   magic    8 bytes   89 'P' 'B' 'C' 0d 0a 1a 0a   (see MAGIC)
//!   version  u16 LE    FORMAT_VERSION
//!   flags    u16 LE    bit 0 = FLAG_DEBUG (a debug section follows); other bits must be 0
//!   crc32    u32 LE    CRC-32 (IEEE) of every byte after the header
//! sections, in strictly increasing id order, each:
//!   id u8, length varint, payload (exactly `length` bytes)
//! ```
//!
//! All integers inside sections are unsigned LEB128 varints unless noted (zigzag for
//! signed). A section whose table is empty is omitted; a missing section means "empty".
//! Section ids are not skippable: an unknown id is an error, because a reader that skipped
//! a section it does not understand could run a program with different meaning. Format
//! changes bump `FORMAT_VERSION` instead.
//!
//! | id | section   | payload                                                              |
//! |----|-----------|----------------------------------------------------------------------|
//! | 1  | consts    | n, n × constant (tagged, see `wire.rs`)                              |
//! | 2  | slots     | n, n × string                                                        |
//! | 3  | code      | n, n × (opcode u8, fields per `opcodes.rs`)                          |
//! | 4  | refs      | n, n × (slot, path: k × const, raw const)                            |
//! | 5  | templates | n, n × (k × piece: tag u8 0=lit 1=ref, index)                        |
//! | 6  | ariths    | n, n × (k × op: u8 code [, index for const/ref], fallback template)  |
//! | 7  | arrays    | n, n × (k × operand)                                                 |
//! | 8  | objects   | n, n × (k × (key const, operand))                                    |
//! | 9  | assigns   | n, n × (k × (slot, operand))                                         |
//! | 10 | calls     | n, n × (tool, k × (name const, operand), m × slot)                   |
//! | 11 | conds     | n, n × (prompt operand, u8 has_context [, context operand])          |
//! | 12 | tools     | n, n × (name string, effects u8 0=pure 1=read 2=write)               |
//! | 13 | debug     | u8 has_source [, source string], entries, reasoning                  |
//!
//! An operand is a tag byte (0 const, 1 ref, 2 template, 3 arith, 4 array, 5 object)
//! followed by its index. Debug entries are (seq_no zigzag, line, column) per instruction;
//! reasoning is (pc, chain_of_thoughts string, dependency_analysis string).

use crate::opcodes::put_instr;
use crate::wire::{Writer, put_value};
use crate::{ArithOp, DebugInfo, Effects, Operand, Piece, Program};
use plan_value::{Op1, Op2};

/// File magic. The high first byte keeps it from being mistaken for text (a JSON plan can
/// never start with it); the CR LF / SUB / LF tail detects newline-translating transfers,
/// as in PNG.
pub const MAGIC: [u8; 8] = *b"\x89PBC\r\n\x1a\n";
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u16 = 1;
/// Header flag: the file carries a debug section.
pub const FLAG_DEBUG: u16 = 1;
/// Size of the fixed header (magic, version, flags, checksum).
pub const HEADER_LEN: usize = 16;

pub(crate) const SEC_CONSTS: u8 = 1;
pub(crate) const SEC_SLOTS: u8 = 2;
pub(crate) const SEC_CODE: u8 = 3;
pub(crate) const SEC_REFS: u8 = 4;
pub(crate) const SEC_TEMPLATES: u8 = 5;
pub(crate) const SEC_ARITHS: u8 = 6;
pub(crate) const SEC_ARRAYS: u8 = 7;
pub(crate) const SEC_OBJECTS: u8 = 8;
pub(crate) const SEC_ASSIGNS: u8 = 9;
pub(crate) const SEC_CALLS: u8 = 10;
pub(crate) const SEC_CONDS: u8 = 11;
pub(crate) const SEC_TOOLS: u8 = 12;
pub(crate) const SEC_DEBUG: u8 = 13;

/// Section name for error messages.
pub(crate) fn section_name(id: u8) -> &'static str {
    match id {
        SEC_CONSTS => "consts",
        SEC_SLOTS => "slots",
        SEC_CODE => "code",
        SEC_REFS => "refs",
        SEC_TEMPLATES => "templates",
        SEC_ARITHS => "ariths",
        SEC_ARRAYS => "arrays",
        SEC_OBJECTS => "objects",
        SEC_ASSIGNS => "assigns",
        SEC_CALLS => "calls",
        SEC_CONDS => "conds",
        SEC_TOOLS => "tools",
        SEC_DEBUG => "debug",
        _ => "unknown",
    }
}

pub(crate) const OPERAND_CONST: u8 = 0;
pub(crate) const OPERAND_REF: u8 = 1;
pub(crate) const OPERAND_TEMPLATE: u8 = 2;
pub(crate) const OPERAND_ARITH: u8 = 3;
pub(crate) const OPERAND_ARRAY: u8 = 4;
pub(crate) const OPERAND_OBJECT: u8 = 5;

pub(crate) const PIECE_LIT: u8 = 0;
pub(crate) const PIECE_REF: u8 = 1;

/// Byte code of an arithmetic op and its index operand, if any.
pub(crate) fn arith_code(op: ArithOp) -> (u8, Option<u32>) {
    match op {
        ArithOp::Const(i) => (0, Some(i)),
        ArithOp::Ref(i) => (1, Some(i)),
        ArithOp::Un(Op1::Neg) => (2, None),
        ArithOp::Un(Op1::Pos) => (3, None),
        ArithOp::Bin(Op2::Add) => (4, None),
        ArithOp::Bin(Op2::Sub) => (5, None),
        ArithOp::Bin(Op2::Mul) => (6, None),
        ArithOp::Bin(Op2::Div) => (7, None),
        ArithOp::Bin(Op2::Pow) => (8, None),
        ArithOp::Bin(Op2::Mod) => (9, None),
    }
}

pub(crate) fn effects_code(e: Effects) -> u8 {
    match e {
        Effects::Pure => 0,
        Effects::Read => 1,
        Effects::Write => 2,
        Effects::Human => 3,
    }
}

pub(crate) fn put_operand(w: &mut Writer, op: Operand) {
    let (tag, idx) = match op {
        Operand::Const(i) => (OPERAND_CONST, i),
        Operand::Ref(i) => (OPERAND_REF, i),
        Operand::Template(i) => (OPERAND_TEMPLATE, i),
        Operand::Arith(i) => (OPERAND_ARITH, i),
        Operand::Array(i) => (OPERAND_ARRAY, i),
        Operand::Object(i) => (OPERAND_OBJECT, i),
    };
    w.u8(tag);
    w.u32v(idx);
}

/// Writes one section if its table is non-empty.
fn section<T>(out: &mut Writer, id: u8, items: &[T], mut put: impl FnMut(&mut Writer, &T)) {
    if items.is_empty() {
        return;
    }
    let mut body = Writer::default();
    body.len(items.len());
    for item in items {
        put(&mut body, item);
    }
    out.u8(id);
    out.len(body.buf.len());
    out.bytes(&body.buf);
}

fn put_debug(w: &mut Writer, d: &DebugInfo) {
    match &d.source {
        Some(s) => {
            w.u8(1);
            w.str(s);
        }
        None => w.u8(0),
    }
    w.len(d.entries.len());
    for e in &d.entries {
        w.iv(e.seq_no);
        w.u32v(e.line);
        w.u32v(e.column);
    }
    w.len(d.reasoning.len());
    for (pc, thoughts, deps) in &d.reasoning {
        w.u32v(*pc);
        w.str(thoughts);
        w.str(deps);
    }
}

/// Encodes `program` as a `.pbc` file. Infallible: any in-memory program can be written;
/// whether it is *valid* is [`crate::validate`]'s business (and `decode` of the output
/// gives back an equal program whenever it passes validation).
pub fn encode(program: &Program) -> Vec<u8> {
    let p = program;
    let mut body = Writer::default();
    section(&mut body, SEC_CONSTS, &p.consts, put_value);
    section(&mut body, SEC_SLOTS, &p.slots, |w, s| w.str(s));
    section(&mut body, SEC_CODE, &p.code, put_instr);
    section(&mut body, SEC_REFS, &p.refs, |w, r| {
        w.u32v(r.slot);
        w.len(r.path.len());
        for k in &r.path {
            w.u32v(*k);
        }
        w.u32v(r.raw);
    });
    section(&mut body, SEC_TEMPLATES, &p.templates, |w, pieces| {
        w.len(pieces.len());
        for piece in pieces {
            let (tag, idx) = match *piece {
                Piece::Lit(i) => (PIECE_LIT, i),
                Piece::Ref(i) => (PIECE_REF, i),
            };
            w.u8(tag);
            w.u32v(idx);
        }
    });
    section(&mut body, SEC_ARITHS, &p.ariths, |w, a| {
        w.len(a.code.len());
        for op in &a.code {
            let (code, idx) = arith_code(*op);
            w.u8(code);
            if let Some(i) = idx {
                w.u32v(i);
            }
        }
        w.u32v(a.fallback);
    });
    section(&mut body, SEC_ARRAYS, &p.arrays, |w, items| {
        w.len(items.len());
        for op in items {
            put_operand(w, *op);
        }
    });
    section(&mut body, SEC_OBJECTS, &p.objects, |w, entries| {
        w.len(entries.len());
        for (k, op) in entries {
            w.u32v(*k);
            put_operand(w, *op);
        }
    });
    section(&mut body, SEC_ASSIGNS, &p.assigns, |w, a| {
        w.len(a.targets.len());
        for (slot, op) in &a.targets {
            w.u32v(*slot);
            put_operand(w, *op);
        }
    });
    section(&mut body, SEC_CALLS, &p.calls, |w, c| {
        w.u32v(c.tool);
        w.len(c.args.len());
        for (name, op) in &c.args {
            w.u32v(*name);
            put_operand(w, *op);
        }
        w.len(c.outputs.len());
        for s in &c.outputs {
            w.u32v(*s);
        }
    });
    section(&mut body, SEC_CONDS, &p.conds, |w, c| {
        put_operand(w, c.prompt);
        match c.context {
            Some(ctx) => {
                w.u8(1);
                put_operand(w, ctx);
            }
            None => w.u8(0),
        }
    });
    section(&mut body, SEC_TOOLS, &p.tools, |w, t| {
        w.str(&t.name);
        w.u8(effects_code(t.effects));
    });
    if let Some(d) = &p.debug {
        let mut dbg = Writer::default();
        put_debug(&mut dbg, d);
        body.u8(SEC_DEBUG);
        body.len(dbg.buf.len());
        body.bytes(&dbg.buf);
    }

    let flags = if p.debug.is_some() { FLAG_DEBUG } else { 0 };
    let mut out = Vec::with_capacity(HEADER_LEN + body.buf.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&body.buf).to_le_bytes());
    out.extend_from_slice(&body.buf);
    out
}

/// Whether `bytes` starts with the `.pbc` magic (cheap sniffing; says nothing about validity).
pub fn is_pbc(bytes: &[u8]) -> bool {
    bytes.starts_with(&MAGIC)
}
