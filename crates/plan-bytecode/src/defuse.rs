//! Per-instruction read and write slot sets, computed once per program when it is
//! validated (so every run of it shares them), for the VM's look-ahead scheduler. What an
//! instruction reads and writes is the instruction table's answer (`Instr::reads`,
//! `Instr::writes` in `opcodes.rs`); this keeps it sorted, deduplicated and flat.
//!
//! Reads are slot-level and conservative: `${x.a}` reads all of `x`. A template or an
//! arithmetic operand reads every slot it references, including those of its text
//! fallback, so an entry whose reads are all settled evaluates to exactly the value the
//! sequential run would compute.

use crate::{Pc, Program, Slot};

/// Slot sets per instruction, flattened: `reads[read_at[pc]..read_at[pc + 1]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DefUse {
    reads: Vec<Slot>,
    read_at: Vec<usize>,
    writes: Vec<Slot>,
    write_at: Vec<usize>,
}

impl DefUse {
    /// `prog` has passed validation, so every slot it names exists.
    pub(crate) fn new(prog: &Program) -> DefUse {
        let mut du = DefUse {
            reads: Vec::new(),
            read_at: vec![0],
            writes: Vec::new(),
            write_at: vec![0],
        };
        let mut r: Vec<Slot> = Vec::new();
        let mut w: Vec<Slot> = Vec::new();
        for instr in &prog.code {
            r.clear();
            w.clear();
            instr.reads(prog, &mut |s| r.push(s));
            instr.writes(prog, &mut |s| w.push(s));
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
