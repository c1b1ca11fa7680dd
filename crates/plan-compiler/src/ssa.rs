//! Which assignments each read can see, for plans of any shape, in time and memory near
//! linear in the plan: the variables are put in SSA form over the control-flow graph.
//!
//! Why not a set of variables (or of definitions) per step: that is steps × variables
//! bits, and a 100k-step plan that jumps back once needed gigabytes and seconds. Here a
//! read is linked to the one *name* it sees: a definition (the step that wrote the
//! variable), "unset" (no write on some path from the start), or a merge (φ) where paths
//! with different definitions join. φs are placed at the iterated dominance frontiers of
//! each variable's writers (Cytron et al.), and names are handed out by one walk of the
//! dominator tree. Both questions the compiler asks follow from the names:
//! - may the variable be unset at this read (the W0202 check, for plans with loops)?
//! - which steps' writes can this read see (`planc explain`'s dependencies)?
//!
//! Dominators are computed with the iterative algorithm of Cooper, Harvey and Kennedy
//! ("A Simple, Fast Dominance Algorithm"), over reverse post-order.

use plan_bytecode::Slot;
use smallvec::SmallVec;

use crate::lower::Io;
use crate::verify::{Cfg, Entry, Preds, post_order};

/// What a read sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Name {
    /// No write on some path: the variable may be unset.
    Unset,
    /// Set before the run started (a branch's variables).
    Preset,
    /// The write of step `i`.
    Def(u32),
    /// The merge `i` of `Ssa::phis`.
    Phi(u32),
}

struct Phi {
    operands: SmallVec<[Name; 2]>,
}

pub(crate) struct Ssa {
    /// The name each read sees, steps' reads one after the other (the order of
    /// `Io::reads`); reads of unreachable steps see `Unset`.
    names: Vec<Name>,
    /// Where each step's reads start in `names`.
    starts: Vec<usize>,
    phis: Vec<Phi>,
    /// Per φ: whether "unset" flows into it.
    phi_unset: Vec<bool>,
}

const NONE: usize = usize::MAX;

impl Ssa {
    /// `n` steps (the end of the plan, `n`, is not a node: nothing is read there).
    pub(crate) fn build(
        cfg: &Cfg,
        preds: &Preds,
        io: &Io,
        n: usize,
        nslots: usize,
        entry: &Entry,
    ) -> Ssa {
        // Reverse post-order of the reachable steps.
        let root = (entry.step < n).then_some(entry.step);
        let post = post_order(&cfg.succ, root.into_iter(), |w| w < n);
        let rpo: Vec<usize> = post.iter().rev().copied().collect();
        let mut order = vec![NONE; n];
        for (k, &v) in rpo.iter().enumerate() {
            order[v] = k;
        }
        let reachable = |v: usize| v < n && order[v] != NONE;

        // Immediate dominators.
        let mut idom = vec![NONE; n];
        if let Some(&root) = rpo.first() {
            idom[root] = root;
        }
        let intersect = |idom: &[usize], mut a: usize, mut b: usize| {
            while a != b {
                while order[a] > order[b] {
                    a = idom[a];
                }
                while order[b] > order[a] {
                    b = idom[b];
                }
            }
            a
        };
        let mut changed = true;
        while changed {
            changed = false;
            for &b in rpo.iter().skip(1) {
                let mut new = NONE;
                for &p in preds.of(b) {
                    if !reachable(p) || idom[p] == NONE {
                        continue;
                    }
                    new = if new == NONE {
                        p
                    } else {
                        intersect(&idom, p, new)
                    };
                }
                if new != NONE && idom[b] != new {
                    idom[b] = new;
                    changed = true;
                }
            }
        }

        // Dominance frontiers, as flat lists per step. NB: the start of the run is an
        // edge into the first step too (on which nothing is set yet), as if from a virtual
        // entry node dominating it: the first step is a join as soon as a jump goes back
        // to it, and the walk up from its predecessors goes up to and including itself.
        let root = rpo.first().copied();
        let mut frontier: Vec<SmallVec<[usize; 2]>> = vec![SmallVec::new(); n];
        for &b in &rpo {
            let ps: SmallVec<[usize; 4]> = preds
                .of(b)
                .iter()
                .copied()
                .filter(|&p| reachable(p))
                .collect();
            let is_root = Some(b) == root;
            if ps.len() + usize::from(is_root) < 2 {
                continue;
            }
            for p in ps {
                let mut runner = p;
                loop {
                    if !is_root && runner == idom[b] {
                        break;
                    }
                    if frontier[runner].last() != Some(&b) {
                        frontier[runner].push(b);
                    }
                    if is_root && runner == b {
                        break;
                    }
                    runner = idom[runner];
                }
            }
        }

        // φ placement: for each variable, at the iterated frontier of its writers.
        let mut writers: Vec<Vec<usize>> = vec![Vec::new(); nslots];
        for &b in &rpo {
            for &w in io.writes(b) {
                if writers[w as usize].last() != Some(&b) {
                    writers[w as usize].push(b);
                }
            }
        }
        let mut phis: Vec<Phi> = Vec::new();
        // Per step: (variable, φ) placed there.
        let mut phis_at: Vec<SmallVec<[(Slot, u32); 1]>> = vec![SmallVec::new(); n];
        // Which step last got a φ / was queued for the variable in hand (stamped with it,
        // so nothing is cleared between variables).
        let mut has_phi = vec![NONE; n];
        let mut queued = vec![NONE; n];
        let mut work = Vec::new();
        for (slot, defs) in writers.iter().enumerate() {
            for &d in defs {
                queued[d] = slot;
                work.push(d);
            }
            while let Some(d) = work.pop() {
                for &b in &frontier[d] {
                    if has_phi[b] == slot {
                        continue;
                    }
                    has_phi[b] = slot;
                    phis_at[b].push((slot as Slot, phis.len() as u32));
                    phis.push(Phi {
                        operands: SmallVec::new(),
                    });
                    if queued[b] != slot {
                        queued[b] = slot;
                        work.push(b);
                    }
                }
            }
        }

        // Names: one walk of the dominator tree with a stack of names per variable.
        let mut children: Vec<SmallVec<[usize; 2]>> = vec![SmallVec::new(); n];
        for &b in rpo.iter().skip(1) {
            if idom[b] != NONE {
                children[idom[b]].push(b);
            }
        }
        let mut starts = Vec::with_capacity(n + 1);
        let mut total = 0;
        for i in 0..n {
            starts.push(total);
            total += io.reads(i).len();
        }
        starts.push(total);
        let mut names = vec![Name::Unset; total];
        // The entry edge into the first step brings "unset" to its φs (a preset variable:
        // its preset value).
        let preset = |s: Slot| entry.preset.binary_search(&s).is_ok();
        if let Some(r) = root {
            for &(s, phi) in &phis_at[r] {
                let name = if preset(s) { Name::Preset } else { Name::Unset };
                phis[phi as usize].operands.push(name);
            }
        }
        let mut current: Vec<Vec<Name>> = vec![Vec::new(); nslots];
        for &s in &entry.preset {
            // NB: at the bottom of its stack, never popped: what every read sees unless a
            // write or a φ is on top.
            current[s as usize].push(Name::Preset);
        }
        let top = |current: &[Vec<Name>], s: Slot| {
            current[s as usize].last().copied().unwrap_or(Name::Unset)
        };
        // Variables whose stacks were pushed, undone when a node's subtree is left.
        let mut log: Vec<Slot> = Vec::new();
        // (node, log length when entered, entered yet)
        let mut walk: Vec<(usize, usize, bool)> =
            rpo.first().map(|&r| (r, 0, false)).into_iter().collect();
        while let Some(frame) = walk.last_mut() {
            let (b, mark, entered) = *frame;
            if entered {
                walk.pop();
                while log.len() > mark {
                    if let Some(s) = log.pop() {
                        current[s as usize].pop();
                    }
                }
                continue;
            }
            frame.2 = true;
            frame.1 = log.len();
            for &(s, phi) in &phis_at[b] {
                current[s as usize].push(Name::Phi(phi));
                log.push(s);
            }
            for (k, &(s, _)) in io.reads(b).iter().enumerate() {
                names[starts[b] + k] = top(&current, s);
            }
            for &w in io.writes(b) {
                current[w as usize].push(Name::Def(b as u32));
                log.push(w);
            }
            for &succ in cfg.succ[b].iter().filter(|&&s| s < n) {
                for &(s, phi) in &phis_at[succ] {
                    let name = top(&current, s);
                    phis[phi as usize].operands.push(name);
                }
            }
            for &c in &children[b] {
                walk.push((c, 0, false));
            }
        }

        // Which φs "unset" flows into.
        let mut users: Vec<SmallVec<[u32; 2]>> = vec![SmallVec::new(); phis.len()];
        let mut phi_unset = vec![false; phis.len()];
        let mut work: Vec<u32> = Vec::new();
        for (i, p) in phis.iter().enumerate() {
            for op in &p.operands {
                match *op {
                    Name::Phi(q) => users[q as usize].push(i as u32),
                    Name::Unset if !phi_unset[i] => {
                        phi_unset[i] = true;
                        work.push(i as u32);
                    }
                    _ => {}
                }
            }
        }
        while let Some(q) = work.pop() {
            for &u in &users[q as usize] {
                if !phi_unset[u as usize] {
                    phi_unset[u as usize] = true;
                    work.push(u);
                }
            }
        }
        Ssa {
            names,
            starts,
            phis,
            phi_unset,
        }
    }

    /// The name the `k`-th read of step `i` sees.
    pub(crate) fn name(&self, i: usize, k: usize) -> Name {
        self.names[self.starts[i] + k]
    }

    /// Whether the `k`-th read of step `i` may find its variable unset.
    pub(crate) fn may_be_unset(&self, i: usize, k: usize) -> bool {
        match self.name(i, k) {
            Name::Unset => true,
            Name::Def(_) | Name::Preset => false,
            Name::Phi(p) => self.phi_unset[p as usize],
        }
    }

    /// Appends to `out` the steps whose writes the `k`-th read of step `i` can see.
    /// `seen` is scratch (one flag per φ, left all false).
    pub(crate) fn defs_seen(&self, i: usize, k: usize, seen: &mut [bool], out: &mut Vec<usize>) {
        let mut stack = vec![self.name(i, k)];
        let mut visited: Vec<u32> = Vec::new();
        while let Some(name) = stack.pop() {
            match name {
                Name::Unset | Name::Preset => {}
                Name::Def(d) => out.push(d as usize),
                Name::Phi(p) => {
                    if !std::mem::replace(&mut seen[p as usize], true) {
                        visited.push(p);
                        stack.extend(self.phis[p as usize].operands.iter().copied());
                    }
                }
            }
        }
        for p in visited {
            seen[p as usize] = false;
        }
    }

    pub(crate) fn phi_count(&self) -> usize {
        self.phis.len()
    }
}
