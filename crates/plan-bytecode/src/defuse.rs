//! Per-instruction read and write slot sets, computed once per program when it is
//! validated (so every run of it shares them), for the VM's look-ahead scheduler.
//!
//! Reads are slot-level and conservative: `${x.a}` reads all of `x`. A template or an
//! arithmetic operand reads every slot it references, including those of its text
//! fallback, so an entry whose reads are all settled evaluates to exactly the value the
//! sequential run would compute.

use crate::{ArithOp, Instr, Operand, Pc, Piece, Program, Slot};

/// Slot sets per instruction, flattened: `reads[read_at[pc]..read_at[pc + 1]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DefUse {
    reads: Vec<Slot>,
    read_at: Vec<usize>,
    writes: Vec<Slot>,
    write_at: Vec<usize>,
}

impl DefUse {
    /// NB: `prog` must have passed validation (every index is used unchecked).
    pub(crate) fn new(prog: &Program) -> DefUse {
        let mut du = DefUse {
            reads: Vec::new(),
            read_at: vec![0],
            writes: Vec::new(),
            write_at: vec![0],
        };
        let mut r: Vec<Slot> = Vec::new();
        let mut w: Vec<Slot> = Vec::new();
        for &instr in &prog.code {
            r.clear();
            w.clear();
            match instr {
                Instr::Nop | Instr::Jump { .. } => {}
                Instr::Set { dst, src } => {
                    operand_reads(prog, src, &mut r);
                    w.push(dst);
                }
                Instr::Assign { assign } => {
                    for &(slot, op) in &prog.assigns[assign as usize].targets {
                        operand_reads(prog, op, &mut r);
                        w.push(slot);
                    }
                }
                Instr::Call { call } => {
                    let def = &prog.calls[call as usize];
                    for &(_, op) in &def.args {
                        operand_reads(prog, op, &mut r);
                    }
                    w.extend_from_slice(&def.outputs);
                }
                Instr::Branch { cond, .. } => {
                    let def = &prog.conds[cond as usize];
                    operand_reads(prog, def.prompt, &mut r);
                    if let Some(op) = def.context {
                        operand_reads(prog, op, &mut r);
                    }
                }
            }
            r.sort_unstable();
            r.dedup();
            w.sort_unstable();
            w.dedup();
            du.reads.extend_from_slice(&r);
            du.read_at.push(du.reads.len());
            du.writes.extend_from_slice(&w);
            du.write_at.push(du.writes.len());
        }
        du
    }

    /// Slots the instruction at `pc` reads.
    pub(crate) fn reads(&self, pc: Pc) -> &[Slot] {
        let i = pc as usize;
        match (self.read_at.get(i), self.read_at.get(i + 1)) {
            (Some(&a), Some(&b)) => self.reads.get(a..b).unwrap_or(&[]),
            _ => &[],
        }
    }

    /// Slots the instruction at `pc` writes.
    pub(crate) fn writes(&self, pc: Pc) -> &[Slot] {
        let i = pc as usize;
        match (self.write_at.get(i), self.write_at.get(i + 1)) {
            (Some(&a), Some(&b)) => self.writes.get(a..b).unwrap_or(&[]),
            _ => &[],
        }
    }
}

/// Adds every slot `op` references to `out`.
// NB: validation bounds Array/Object nesting (MAX_OPERAND_DEPTH), so this recursion is
// bounded.
fn operand_reads(prog: &Program, op: Operand, out: &mut Vec<Slot>) {
    match op {
        Operand::Const(_) => {}
        Operand::Ref(r) => out.push(prog.refs[r as usize].slot),
        Operand::Template(t) => template_reads(prog, t, out),
        Operand::Arith(a) => {
            let def = &prog.ariths[a as usize];
            for op in &def.code {
                if let ArithOp::Ref(r) = *op {
                    out.push(prog.refs[r as usize].slot);
                }
            }
            template_reads(prog, def.fallback, out);
        }
        Operand::Array(i) => {
            for &item in &prog.arrays[i as usize] {
                operand_reads(prog, item, out);
            }
        }
        Operand::Object(i) => {
            for &(_, item) in &prog.objects[i as usize] {
                operand_reads(prog, item, out);
            }
        }
    }
}

fn template_reads(prog: &Program, t: u32, out: &mut Vec<Slot>) {
    for piece in &prog.templates[t as usize] {
        if let Piece::Ref(r) = *piece {
            out.push(prog.refs[r as usize].slot);
        }
    }
}
