//! The single source of truth for instructions.
//!
//! [`instr_table!`] lists each [`Instr`] variant once, with its opcode byte, its mnemonic
//! and the *kind* of each operand field. Everything else about instructions is generated
//! from that list: the [`Opcode`] enum, the encoder (`put_instr`), the decoder
//! (`get_instr`), the validator (`check_instr`) and the disassembler (`show_instr`). Adding
//! a variant to `Instr` without adding it here fails to compile (the generated matches are
//! exhaustive); the `every_opcode_*` tests walk all 256 opcode bytes.
//!
//! An operand kind ([`Field`] implementor) says how one field is written, read, checked and
//! shown: a slot, an operand, an index into a side table, or a jump target.

use crate::disasm::Lister;
use crate::validate::{Checker, Site};
use crate::wire::{Reader, Writer};
use crate::{BytecodeError, Instr, Operand};

type Result<T> = std::result::Result<T, BytecodeError>;

/// How one kind of instruction field is encoded, decoded, validated and disassembled.
pub(crate) trait Field {
    type V: Copy;
    fn put(w: &mut Writer, v: Self::V);
    fn get(r: &mut Reader<'_>, what: &str) -> Result<Self::V>;
    fn check(cx: &Checker<'_>, v: Self::V, site: &Site) -> Result<()>;
    fn show(l: &Lister<'_>, v: Self::V, out: &mut String);
    /// A representative value, for the opcode-walking tests.
    #[cfg(test)]
    fn sample() -> Self::V;
}

/// A variable slot, shown by name.
pub(crate) struct SlotK;
/// A value operand (constant, reference, template, ...).
pub(crate) struct OperandK;
/// Index into `Program::assigns`.
pub(crate) struct AssignK;
/// Index into `Program::calls`.
pub(crate) struct CallK;
/// Index into `Program::conds`.
pub(crate) struct CondK;
/// A jump target (program counter).
pub(crate) struct PcK;

impl Field for SlotK {
    type V = u32;
    fn put(w: &mut Writer, v: u32) {
        w.u32v(v);
    }
    fn get(r: &mut Reader<'_>, what: &str) -> Result<u32> {
        r.u32v(what)
    }
    fn check(cx: &Checker<'_>, v: u32, site: &Site) -> Result<()> {
        cx.slot(v, site)
    }
    fn show(l: &Lister<'_>, v: u32, out: &mut String) {
        l.slot(v, out);
    }
    #[cfg(test)]
    fn sample() -> u32 {
        1
    }
}

impl Field for OperandK {
    type V = Operand;
    fn put(w: &mut Writer, v: Operand) {
        crate::encode::put_operand(w, v);
    }
    fn get(r: &mut Reader<'_>, what: &str) -> Result<Operand> {
        crate::decode::get_operand(r, what)
    }
    fn check(cx: &Checker<'_>, v: Operand, site: &Site) -> Result<()> {
        cx.operand(v, site)
    }
    fn show(l: &Lister<'_>, v: Operand, out: &mut String) {
        l.operand(v, out);
    }
    #[cfg(test)]
    fn sample() -> Operand {
        Operand::Template(2)
    }
}

/// Side-table index kinds differ only in which table they index.
macro_rules! index_kind {
    ($Kind:ident, $check:ident, $show:ident, $sample:literal) => {
        impl Field for $Kind {
            type V = u32;
            fn put(w: &mut Writer, v: u32) {
                w.u32v(v);
            }
            fn get(r: &mut Reader<'_>, what: &str) -> Result<u32> {
                r.u32v(what)
            }
            fn check(cx: &Checker<'_>, v: u32, site: &Site) -> Result<()> {
                cx.$check(v, site)
            }
            fn show(l: &Lister<'_>, v: u32, out: &mut String) {
                l.$show(v, out);
            }
            #[cfg(test)]
            fn sample() -> u32 {
                $sample
            }
        }
    };
}

index_kind!(AssignK, assign_index, assign, 0);
index_kind!(CallK, call_index, call, 300);
index_kind!(CondK, cond_index, cond, 7);
index_kind!(PcK, pc, pc, 70000);

/// Writes `sep` (e.g. `<-`, `then`) between the fields of a disassembled instruction.
fn separator(out: &mut String, sep: &str) {
    out.push(' ');
    if !sep.is_empty() {
        out.push_str(sep);
        out.push(' ');
    }
}

macro_rules! instr_table {
    ($(
        $(#[doc = $doc:literal])*
        $code:literal $Var:ident $name:literal { $($field:ident : $Kind:ident $sep:literal),* }
    )*) => {
        /// The opcode byte of each instruction, as written in the code section.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum Opcode {
            $($(#[doc = $doc])* $Var = $code,)*
        }

        impl Opcode {
            /// Every opcode, in byte order.
            pub const ALL: &'static [Opcode] = &[$(Opcode::$Var,)*];

            pub fn from_byte(b: u8) -> Option<Opcode> {
                match b {
                    $($code => Some(Opcode::$Var),)*
                    _ => None,
                }
            }

            pub fn byte(self) -> u8 {
                self as u8
            }

            /// Mnemonic used by the disassembler.
            pub fn name(self) -> &'static str {
                match self {
                    $(Opcode::$Var => $name,)*
                }
            }
        }

        impl Instr {
            pub fn opcode(&self) -> Opcode {
                match self {
                    $(Instr::$Var { .. } => Opcode::$Var,)*
                }
            }
        }

        pub(crate) fn put_instr(w: &mut Writer, i: &Instr) {
            match *i {
                $(Instr::$Var { $($field),* } => {
                    w.u8($code);
                    $(<$Kind as Field>::put(w, $field);)*
                })*
            }
        }

        pub(crate) fn get_instr(r: &mut Reader<'_>) -> Result<Instr> {
            let at = r.offset();
            match r.u8("opcode")? {
                $($code => Ok(Instr::$Var {
                    $($field: <$Kind as Field>::get(r, concat!($name, ".", stringify!($field)))?,)*
                }),)*
                other => Err(BytecodeError::at(at, format!("unknown opcode 0x{other:02x}"))),
            }
        }

        pub(crate) fn check_instr(cx: &Checker<'_>, pc: usize, i: &Instr) -> Result<()> {
            match *i {
                $(Instr::$Var { $($field),* } => {
                    $(<$Kind as Field>::check(
                        cx,
                        $field,
                        &Site::Code { pc, field: concat!($name, ".", stringify!($field)) },
                    )?;)*
                    Ok(())
                })*
            }
        }

        pub(crate) fn show_instr(l: &Lister<'_>, i: &Instr, out: &mut String) {
            match *i {
                $(Instr::$Var { $($field),* } => {
                    out.push_str($name);
                    $(
                        separator(out, $sep);
                        <$Kind as Field>::show(l, $field, out);
                    )*
                })*
            }
        }

        /// One instance of every instruction, in opcode order.
        #[cfg(test)]
        pub(crate) fn sample_instrs() -> Vec<Instr> {
            vec![$(Instr::$Var { $($field: <$Kind as Field>::sample(),)* },)*]
        }
    };
}

instr_table! {
    /// `nop`: a `reasoning` step.
    0x00 Nop "nop" {}
    /// `set DST <- OPERAND`: single-variable assign.
    0x01 Set "set" { dst: SlotK "", src: OperandK "<-" }
    /// `assign #N {...}`: multi-variable assign.
    0x02 Assign "assign" { assign: AssignK "" }
    /// `call #N tool(args) -> outputs`: tool call.
    0x03 Call "call" { call: CallK "" }
    /// `jump @PC`: unconditional jump.
    0x04 Jump "jump" { target: PcK "" }
    /// `branch #N ... then @PC else @PC`: LLM condition.
    0x05 Branch "branch" { cond: CondK "", if_true: PcK "then", if_false: PcK "else" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_opcode_round_trips() {
        let samples = sample_instrs();
        assert_eq!(samples.len(), Opcode::ALL.len());
        for (instr, op) in samples.iter().zip(Opcode::ALL) {
            assert_eq!(instr.opcode(), *op);
            let mut w = Writer::default();
            put_instr(&mut w, instr);
            assert_eq!(w.buf.first(), Some(&op.byte()));
            let mut r = Reader::new(&w.buf, 0);
            assert_eq!(get_instr(&mut r).unwrap(), *instr, "{}", op.name());
            assert!(r.is_empty(), "{} left bytes", op.name());
        }
    }

    #[test]
    fn every_opcode_byte_decodes_or_is_rejected() {
        for b in 0..=255u8 {
            // Opcode followed by zeros: every field kind accepts 0 (operand tag 0 = Const(0)).
            let bytes = [b, 0, 0, 0, 0, 0, 0, 0];
            let got = get_instr(&mut Reader::new(&bytes, 0));
            match Opcode::from_byte(b) {
                Some(op) => {
                    let instr = got.unwrap();
                    assert_eq!(instr.opcode(), op);
                    assert_eq!(op.byte(), b);
                }
                None => {
                    let e = got.unwrap_err();
                    assert_eq!(e.message(), format!("unknown opcode 0x{b:02x}"));
                    assert_eq!(e.offset(), Some(0));
                }
            }
        }
    }

    #[test]
    fn opcode_names_are_unique() {
        let mut names: Vec<_> = Opcode::ALL.iter().map(|o| o.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Opcode::ALL.len());
    }
}
