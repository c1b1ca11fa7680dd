//! The single source of truth for instructions.
//!
//! [`instr_table!`] lists each instruction once: its opcode byte, its variant name, its
//! mnemonic, and for each field its type and *kind*. Everything else about instructions is
//! generated from that list: the [`Instr`] enum itself, the [`Opcode`] enum, the encoder
//! (`put_instr`), the decoder (`get_instr`), the validator (`check_instr`), the
//! disassembler (`show_instr`), and the slots each instruction reads and writes
//! ([`Instr::reads`], [`Instr::writes`]), which both the compiler's dataflow checks and the
//! VM's look-ahead scheduler use. The `every_opcode_*` tests walk all 256 opcode bytes.
//!
//! An operand kind ([`Field`] implementor) says how one field is written, read, checked,
//! shown, and which slots it reads or writes: a destination slot, an operand, an index
//! into a side table, or a jump target.

use crate::disasm::Lister;
use crate::validate::{Checker, Site};
use crate::wire::{Reader, Writer};
use serde::{Deserialize, Serialize};

use crate::{ArithOp, BytecodeError, Operand, Pc, Piece, Program, Slot};

type Result<T> = std::result::Result<T, BytecodeError>;

/// How one kind of instruction field is encoded, decoded, validated and disassembled.
pub(crate) trait Field {
    type V: Copy;
    fn put(w: &mut Writer, v: Self::V);
    fn get(r: &mut Reader<'_>, what: &str) -> Result<Self::V>;
    fn check(cx: &Checker<'_>, v: Self::V, site: &Site) -> Result<()>;
    fn show(l: &Lister<'_>, v: Self::V, out: &mut String);
    /// Calls `f` with the slot of each reference this field evaluates, in evaluation order.
    /// (No default: a new kind must say, or the scheduler would take it as reading nothing.)
    fn reads(p: &Program, v: Self::V, f: &mut dyn FnMut(Slot));
    /// Calls `f` with each slot this field sets.
    fn writes(p: &Program, v: Self::V, f: &mut dyn FnMut(Slot));
    /// Whether the field is a jump target: an instruction with one may not continue at
    /// the next instruction.
    const JUMP: bool = false;
    /// A representative value, for the opcode-walking tests.
    #[cfg(test)]
    fn sample() -> Self::V;
}

/// A destination slot (written), shown by name.
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
    fn reads(_: &Program, _: u32, _: &mut dyn FnMut(Slot)) {}
    fn writes(_p: &Program, v: u32, f: &mut dyn FnMut(Slot)) {
        f(v);
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
    fn reads(p: &Program, v: Operand, f: &mut dyn FnMut(Slot)) {
        operand_reads(p, v, f);
    }
    fn writes(_: &Program, _: Operand, _: &mut dyn FnMut(Slot)) {}
    #[cfg(test)]
    fn sample() -> Operand {
        Operand::Template(2)
    }
}

/// Side-table index kinds differ only in which table they index and what the entry
/// reads and writes.
macro_rules! index_kind {
    ($Kind:ident, $check:ident, $show:ident, $sample:literal $(, $io:item)*) => {
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
            $($io)*
        }
    };
}

index_kind!(
    AssignK,
    assign_index,
    assign,
    0,
    fn reads(p: &Program, v: u32, f: &mut dyn FnMut(Slot)) {
        for &(_, op) in p.assigns.get(v as usize).map_or(&[][..], |a| &a.targets) {
            operand_reads(p, op, f);
        }
    },
    fn writes(p: &Program, v: u32, f: &mut dyn FnMut(Slot)) {
        for &(slot, _) in p.assigns.get(v as usize).map_or(&[][..], |a| &a.targets) {
            f(slot);
        }
    }
);
index_kind!(
    CallK,
    call_index,
    call,
    300,
    fn reads(p: &Program, v: u32, f: &mut dyn FnMut(Slot)) {
        for &(_, op) in p.calls.get(v as usize).map_or(&[][..], |c| &c.args) {
            operand_reads(p, op, f);
        }
    },
    fn writes(p: &Program, v: u32, f: &mut dyn FnMut(Slot)) {
        for &slot in p.calls.get(v as usize).map_or(&[][..], |c| &c.outputs) {
            f(slot);
        }
    }
);
index_kind!(
    CondK,
    cond_index,
    cond,
    7,
    fn reads(p: &Program, v: u32, f: &mut dyn FnMut(Slot)) {
        if let Some(c) = p.conds.get(v as usize) {
            operand_reads(p, c.prompt, f);
            if let Some(ctx) = c.context {
                operand_reads(p, ctx, f);
            }
        }
    },
    fn writes(_: &Program, _: u32, _: &mut dyn FnMut(Slot)) {}
);
index_kind!(
    PcK,
    pc,
    pc,
    70000,
    fn reads(_: &Program, _: u32, _: &mut dyn FnMut(Slot)) {},
    fn writes(_: &Program, _: u32, _: &mut dyn FnMut(Slot)) {},
    const JUMP: bool = true;
);

/// Calls `f` with the slot of every reference `op` evaluates, in evaluation order (an
/// arithmetic operand's code, then its text fallback), repeats included. Reads are
/// slot-level: `${x.a}` reads all of `x`. Indices out of range are skipped, so this never
/// panics on a program that has not been validated (the compiler calls it while lowering).
// NB: validation bounds Array/Object nesting (MAX_OPERAND_DEPTH), and the compiler reports
// deeper nesting, so this recursion is bounded.
fn operand_reads(p: &Program, op: Operand, f: &mut dyn FnMut(Slot)) {
    let mut by_ref = |r: u32| {
        if let Some(def) = p.refs.get(r as usize) {
            f(def.slot);
        }
    };
    match op {
        Operand::Const(_) => {}
        Operand::Ref(r) => by_ref(r),
        Operand::Template(t) => template_reads(p, t, &mut by_ref),
        Operand::Arith(a) => {
            let Some(def) = p.ariths.get(a as usize) else {
                return;
            };
            for op in &def.code {
                if let ArithOp::Ref(r) = *op {
                    by_ref(r);
                }
            }
            template_reads(p, def.fallback, &mut by_ref);
        }
        Operand::Array(i) => {
            for &item in p.arrays.get(i as usize).map_or(&[][..], |a| a) {
                operand_reads(p, item, f);
            }
        }
        Operand::Object(i) => {
            for &(_, item) in p.objects.get(i as usize).map_or(&[][..], |o| o) {
                operand_reads(p, item, f);
            }
        }
    }
}

fn template_reads(p: &Program, t: u32, by_ref: &mut dyn FnMut(u32)) {
    for piece in p.templates.get(t as usize).map_or(&[][..], |t| t) {
        if let Piece::Ref(r) = *piece {
            by_ref(r);
        }
    }
}

/// Writes `sep` (e.g. `<-`, `then`) between the fields of a disassembled instruction.
fn separator(out: &mut String, sep: &str) {
    out.push(' ');
    if !sep.is_empty() {
        out.push_str(sep);
        out.push(' ');
    }
}

/// Declares [`Instr`], one variant per table row; a row without fields is a unit variant
/// (`Instr::Nop`, not `Instr::Nop {}`). A token muncher, since a variant's shape cannot
/// be chosen inside a single repetition.
macro_rules! declare_instr {
    ([$($done:tt)*]) => {
        /// One instruction. `Copy`, ≤ 16 bytes (see the size assertion in `lib.rs`).
        /// Declared by the instruction table in `opcodes.rs`, like everything about it.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
        pub enum Instr {
            $($done)*
        }
    };
    ([$($done:tt)*] $(#[doc = $doc:literal])* $Var:ident {} $($rest:tt)*) => {
        declare_instr!([$($done)* $(#[doc = $doc])* $Var,] $($rest)*);
    };
    (
        [$($done:tt)*]
        $(#[doc = $doc:literal])* $Var:ident { $($field:ident : $Ty:ty),+ }
        $($rest:tt)*
    ) => {
        declare_instr!([$($done)* $(#[doc = $doc])* $Var { $($field: $Ty),+ },] $($rest)*);
    };
}

macro_rules! instr_table {
    ($(
        $(#[doc = $doc:literal])*
        $code:literal $Var:ident $name:literal {
            $($field:ident : $Ty:ty = $Kind:ident $sep:literal),*
        }
    )*) => {
        declare_instr!([] $($(#[doc = $doc])* $Var { $($field: $Ty),* })*);

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

            /// Calls `f` with the slot of every reference this instruction evaluates, in
            /// evaluation order, repeats included. Reads are slot-level (`${x.a}` reads
            /// `x`). Indices out of range in `p` are skipped.
            pub fn reads(&self, p: &Program, f: &mut dyn FnMut(Slot)) {
                #[allow(unused_variables)]
                match *self {
                    $(Instr::$Var { $($field),* } => {
                        $(<$Kind as Field>::reads(p, $field, f);)*
                    })*
                }
            }

            /// Whether the instruction may go elsewhere than the next instruction (it has
            /// a jump target).
            pub fn jumps(&self) -> bool {
                match *self {
                    $(Instr::$Var { .. } => false $(|| <$Kind as Field>::JUMP)*,)*
                }
            }

            /// Calls `f` with each slot this instruction sets, in order.
            pub fn writes(&self, p: &Program, f: &mut dyn FnMut(Slot)) {
                #[allow(unused_variables)]
                match *self {
                    $(Instr::$Var { $($field),* } => {
                        $(<$Kind as Field>::writes(p, $field, f);)*
                    })*
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

// To add an instruction: a row here, its lowering in plan-compiler (lower.rs) and its
// `op_` method in plan-vm (vm.rs); an instruction that suspends also needs its request in
// vm.rs. A new field kind is one `Field` impl above.
instr_table! {
    /// `nop`: a `reasoning` step; does nothing at run time (the text is in the debug
    /// section).
    0x00 Nop "nop" {}
    /// `set DST <- OPERAND`: single-variable `assign`.
    0x01 Set "set" { dst: Slot = SlotK "", src: Operand = OperandK "<-" }
    /// `assign #N {...}`: multi-variable `assign` (`assigns` index); every value is
    /// evaluated before any slot is written.
    0x02 Assign "assign" { assign: u32 = AssignK "" }
    /// `call #N tool(args) -> outputs`: tool call (`calls` index); suspends the VM until
    /// the host answers.
    0x03 Call "call" { call: u32 = CallK "" }
    /// `jump @PC`: unconditional jump.
    0x04 Jump "jump" { target: Pc = PcK "" }
    /// `branch #N ... then @PC else @PC`: LLM condition (`conds` index); suspends, then
    /// jumps to `if_true` or `if_false`.
    0x05 Branch "branch" {
        cond: u32 = CondK "",
        if_true: Pc = PcK "then",
        if_false: Pc = PcK "else"
    }
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
