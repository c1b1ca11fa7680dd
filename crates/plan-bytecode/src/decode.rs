//! The decoder: bytes → `Program`, checking structure only (lengths, tags, UTF-8,
//! checksum, section order). Index ranges are the validator's job, so the decoder stays
//! a plain reader of the format described in `encode.rs`.

use crate::encode::*;
use crate::limits::*;
use crate::opcodes::get_instr;
use crate::wire::{Reader, get_value};
use crate::{
    ArithDef, ArithOp, AssignDef, BytecodeError, CallDef, CondDef, DebugEntry, DebugInfo, Effects,
    Operand, Piece, Program, RefDef, ToolDef,
};

use plan_value::{Op1, Op2};

type Result<T> = std::result::Result<T, BytecodeError>;

pub(crate) fn get_operand(r: &mut Reader<'_>, what: &str) -> Result<Operand> {
    let at = r.offset();
    let tag = r.u8(what)?;
    let idx = r.u32v(what)?;
    Ok(match tag {
        OPERAND_CONST => Operand::Const(idx),
        OPERAND_REF => Operand::Ref(idx),
        OPERAND_TEMPLATE => Operand::Template(idx),
        OPERAND_ARITH => Operand::Arith(idx),
        OPERAND_ARRAY => Operand::Array(idx),
        OPERAND_OBJECT => Operand::Object(idx),
        other => {
            return Err(BytecodeError::at(
                at,
                format!("{what}: unknown operand tag {other}"),
            ));
        }
    })
}

fn get_bool(r: &mut Reader<'_>, what: &str) -> Result<bool> {
    let at = r.offset();
    match r.u8(what)? {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(BytecodeError::at(
            at,
            format!("{what}: expected 0 or 1, found {other}"),
        )),
    }
}

/// Reads a counted list: `count` items, each at least `min_bytes` long.
fn list<T>(
    r: &mut Reader<'_>,
    limit: usize,
    min_bytes: usize,
    what: &str,
    mut item: impl FnMut(&mut Reader<'_>) -> Result<T>,
) -> Result<Vec<T>> {
    let n = r.count(limit, min_bytes, what)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(item(r)?);
    }
    Ok(out)
}

fn get_arith_op(r: &mut Reader<'_>) -> Result<ArithOp> {
    let at = r.offset();
    Ok(match r.u8("arith op")? {
        0 => ArithOp::Const(r.u32v("arith const")?),
        1 => ArithOp::Ref(r.u32v("arith ref")?),
        2 => ArithOp::Un(Op1::Neg),
        3 => ArithOp::Un(Op1::Pos),
        4 => ArithOp::Bin(Op2::Add),
        5 => ArithOp::Bin(Op2::Sub),
        6 => ArithOp::Bin(Op2::Mul),
        7 => ArithOp::Bin(Op2::Div),
        8 => ArithOp::Bin(Op2::Pow),
        9 => ArithOp::Bin(Op2::Mod),
        other => return Err(BytecodeError::at(at, format!("unknown arith op {other}"))),
    })
}

fn get_debug(r: &mut Reader<'_>) -> Result<DebugInfo> {
    let source = if get_bool(r, "debug source flag")? {
        Some(r.str("debug source")?.to_owned())
    } else {
        None
    };
    let entries = list(r, MAX_CODE, 3, "debug entries", |r| {
        Ok(DebugEntry {
            seq_no: r.iv("debug seq_no")?,
            line: r.u32v("debug line")?,
            column: r.u32v("debug column")?,
        })
    })?;
    let reasoning = list(r, MAX_CODE, 3, "reasoning texts", |r| {
        Ok((
            r.u32v("reasoning pc")?,
            r.str("reasoning text")?.to_owned(),
            r.str("reasoning text")?.to_owned(),
        ))
    })?;
    Ok(DebugInfo {
        entries,
        reasoning,
        source,
    })
}

/// Decodes the body of section `id` into `p`.
fn get_section(p: &mut Program, id: u8, r: &mut Reader<'_>) -> Result<()> {
    match id {
        SEC_CONSTS => p.consts = list(r, MAX_CONSTS, 1, "constant count", |r| get_value(r, 0))?,
        SEC_SLOTS => {
            p.slots = list(r, MAX_SLOTS, 1, "slot count", |r| {
                Ok(r.str("slot name")?.to_owned())
            })?
        }
        SEC_CODE => p.code = list(r, MAX_CODE, 1, "instruction count", get_instr)?,
        SEC_REFS => {
            p.refs = list(r, MAX_TABLE, 3, "ref count", |r| {
                Ok(RefDef {
                    slot: r.u32v("ref slot")?,
                    path: list(r, MAX_LIST, 1, "ref path length", |r| {
                        r.u32v("ref path key")
                    })?,
                    raw: r.u32v("ref raw text")?,
                })
            })?
        }
        SEC_TEMPLATES => {
            p.templates = list(r, MAX_TABLE, 1, "template count", |r| {
                list(r, MAX_LIST, 2, "template length", get_piece)
            })?
        }
        SEC_ARITHS => {
            p.ariths = list(r, MAX_TABLE, 2, "arith count", |r| {
                Ok(ArithDef {
                    code: list(r, MAX_LIST, 1, "arith length", get_arith_op)?,
                    fallback: r.u32v("arith fallback")?,
                })
            })?
        }
        SEC_ARRAYS => {
            p.arrays = list(r, MAX_TABLE, 1, "array count", |r| {
                list(r, MAX_LIST, 2, "array length", |r| {
                    get_operand(r, "array element")
                })
            })?
        }
        SEC_OBJECTS => {
            p.objects = list(r, MAX_TABLE, 1, "object count", |r| {
                list(r, MAX_LIST, 3, "object length", |r| {
                    Ok((r.u32v("object key")?, get_operand(r, "object value")?))
                })
            })?
        }
        SEC_ASSIGNS => {
            p.assigns = list(r, MAX_TABLE, 1, "assign count", |r| {
                Ok(AssignDef {
                    targets: list(r, MAX_LIST, 3, "assign length", |r| {
                        Ok((r.u32v("assign slot")?, get_operand(r, "assign value")?))
                    })?,
                })
            })?
        }
        SEC_CALLS => p.calls = list(r, MAX_TABLE, 3, "call count", get_call)?,
        SEC_CONDS => p.conds = list(r, MAX_TABLE, 3, "cond count", get_cond)?,
        SEC_TOOLS => p.tools = list(r, MAX_TOOLS, 2, "tool count", get_tool)?,
        SEC_DEBUG => p.debug = Some(get_debug(r)?),
        // Callers check the id first; kept total so no input can reach a panic.
        other => {
            return Err(BytecodeError::at(
                r.offset(),
                format!("unknown section id {other}"),
            ));
        }
    }
    Ok(())
}

/// One piece of a template: a literal's or a reference's index.
fn get_piece(r: &mut Reader<'_>) -> Result<Piece> {
    let at = r.offset();
    let tag = r.u8("piece tag")?;
    let idx = r.u32v("piece index")?;
    match tag {
        PIECE_LIT => Ok(Piece::Lit(idx)),
        PIECE_REF => Ok(Piece::Ref(idx)),
        other => Err(BytecodeError::at(
            at,
            format!("unknown template piece tag {other}"),
        )),
    }
}

/// One call: its tool, arguments and output slots.
fn get_call(r: &mut Reader<'_>) -> Result<CallDef> {
    Ok(CallDef {
        tool: r.u32v("call tool")?,
        args: list(r, MAX_LIST, 3, "argument count", |r| {
            Ok((r.u32v("argument name")?, get_operand(r, "argument value")?))
        })?,
        outputs: list(r, MAX_LIST, 1, "output count", |r| r.u32v("output slot"))?,
    })
}

/// One condition: its prompt and its context, if any.
fn get_cond(r: &mut Reader<'_>) -> Result<CondDef> {
    let prompt = get_operand(r, "cond prompt")?;
    let context = if get_bool(r, "cond context flag")? {
        Some(get_operand(r, "cond context")?)
    } else {
        None
    };
    Ok(CondDef { prompt, context })
}

/// One tool: its name and effects.
fn get_tool(r: &mut Reader<'_>) -> Result<ToolDef> {
    let name = r.str("tool name")?.to_owned();
    let at = r.offset();
    let effects = match r.u8("tool effects")? {
        0 => Effects::Pure,
        1 => Effects::Read,
        2 => Effects::Write,
        3 => Effects::Human,
        other => {
            return Err(BytecodeError::at(
                at,
                format!("unknown tool effects {other}"),
            ));
        }
    };
    Ok(ToolDef { name, effects })
}

fn table_len(p: &Program, id: u8) -> usize {
    match id {
        SEC_CONSTS => p.consts.len(),
        SEC_SLOTS => p.slots.len(),
        SEC_CODE => p.code.len(),
        SEC_REFS => p.refs.len(),
        SEC_TEMPLATES => p.templates.len(),
        SEC_ARITHS => p.ariths.len(),
        SEC_ARRAYS => p.arrays.len(),
        SEC_OBJECTS => p.objects.len(),
        SEC_ASSIGNS => p.assigns.len(),
        SEC_CALLS => p.calls.len(),
        SEC_CONDS => p.conds.len(),
        SEC_TOOLS => p.tools.len(),
        _ => 1,
    }
}

/// Decodes a `.pbc` file into a `Program`, checking its structure (header, checksum,
/// section framing, tags, lengths, UTF-8) but not its indices: run [`crate::validate`]
/// (or use [`crate::load`]) before executing it.
pub fn decode(bytes: &[u8]) -> Result<Program> {
    let mut r = Reader::new(bytes, 0);
    let magic = r.take(MAGIC.len(), "header")?;
    if magic != MAGIC {
        return Err(BytecodeError::at(0, "not a .pbc file (bad magic)"));
    }
    let version_bytes = r.take(2, "header")?;
    let version = u16::from_le_bytes([version_bytes[0], version_bytes[1]]);
    if version != FORMAT_VERSION {
        return Err(BytecodeError::at(
            8,
            format!(
                "unsupported format version {version} (this build reads version {FORMAT_VERSION})"
            ),
        ));
    }
    let flag_bytes = r.take(2, "header")?;
    let flags = u16::from_le_bytes([flag_bytes[0], flag_bytes[1]]);
    if flags & !FLAG_DEBUG != 0 {
        return Err(BytecodeError::at(
            10,
            format!("unknown header flags 0x{flags:04x}"),
        ));
    }
    let crc_bytes = r.take(4, "header")?;
    let stored = u32::from_le_bytes([crc_bytes[0], crc_bytes[1], crc_bytes[2], crc_bytes[3]]);
    let body = r.take(r.remaining(), "body")?;
    let actual = crc32fast::hash(body);
    if stored != actual {
        return Err(BytecodeError::at(
            12,
            format!("checksum mismatch (header says {stored:08x}, contents hash to {actual:08x})"),
        ));
    }

    let mut r = Reader::new(body, HEADER_LEN);
    let mut p = Program::default();
    let mut last_id = 0u8;
    while !r.is_empty() {
        let at = r.offset();
        let id = r.u8("section id")?;
        if !(SEC_CONSTS..=SEC_DEBUG).contains(&id) {
            return Err(BytecodeError::at(at, format!("unknown section id {id}")));
        }
        if id <= last_id {
            return Err(BytecodeError::at(
                at,
                format!(
                    "section {} ({id}) is out of order or repeated",
                    section_name(id)
                ),
            ));
        }
        last_id = id;
        let len = r.u32v("section length")? as usize;
        let what = section_name(id);
        let mut sec = r.sub(len, what)?;
        get_section(&mut p, id, &mut sec)?;
        sec.finish(&format!("section {what}"))?;
        // Keeps the format canonical (one encoding per program): the encoder omits
        // empty tables, so an empty table section can only come from damage.
        if id != SEC_DEBUG && table_len(&p, id) == 0 {
            return Err(BytecodeError::at(
                at,
                format!("empty section {what} (empty tables are omitted)"),
            ));
        }
    }
    let has_debug = flags & FLAG_DEBUG != 0;
    if has_debug != p.debug.is_some() {
        return Err(BytecodeError::at(
            10,
            if has_debug {
                "header flags a debug section but none is present"
            } else {
                "debug section present but not flagged in the header"
            },
        ));
    }
    Ok(p)
}
