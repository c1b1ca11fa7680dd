//! Which assignments each read can see, for plans of any shape, in time and memory near
//! linear in the plan: the variables are put in SSA form over the control-flow graph.
//!
//! Why not a set of variables (or of definitions) per step: that is steps × variables
//! bits, and a 100k-step plan that jumps back once needed gigabytes and seconds. Here a
//! read is linked to the one *name* it sees: a definition (the step that wrote the
//! variable), "unset" (no write on some path from the start), or a merge (φ) where paths
//! with different definitions join. φs are placed at the iterated dominance frontiers of
//! each variable's writers (Cytron et al.), only for the variables some basic block reads
//! before it writes them (semi-pruned, Briggs et al.), and names are handed out by one
//! walk of the dominator tree. Both questions the compiler asks follow from the names:
//! - may the variable be unset at this read (the W0202 check, for plans with loops)?
//! - which steps' writes can this read see (`planc explain`'s dependencies)?
//!
//! Dominators are computed with the iterative algorithm of Cooper, Harvey and Kennedy
//! ("A Simple, Fast Dominance Algorithm"), over reverse post-order.

use plan_bytecode::Slot;
use smallvec::SmallVec;

use crate::cfg::{Cfg, Entry, Lists, Preds, Small, post_order};
use crate::lower::Io;

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
    names: Small<Name>,
    /// Where each step's reads start in `names`.
    starts: Small<u32>,
    phis: Small<Phi>,
    /// Per φ: whether "unset" flows into it.
    phi_unset: Small<bool>,
}

/// No step (indices are `u32`: a plan has far fewer steps than its 16 MiB of source).
const NONE: u32 = u32::MAX;

/// Which variables some basic block of the reachable steps reads before it writes them
/// (in a step, reads come before writes). A block is a chain of steps, each the only
/// successor of the one before and entered only from it; the first step is a block's
/// start (the start of the run enters it).
fn global_variables(
    cfg: &Cfg,
    preds: &Preds,
    io: &Io,
    rpo: &[u32],
    root: Option<u32>,
    nslots: usize,
    reachable: &impl Fn(usize) -> bool,
) -> Small<bool> {
    let only_succ = |b: usize| match cfg.succ[b].as_slice() {
        &[s] if reachable(s) => Some(s),
        _ => None,
    };
    let starts_block = |b: usize| {
        if Some(b as u32) == root {
            return true;
        }
        let mut ps = preds.of(b).iter().filter(|&&p| reachable(p));
        match (ps.next(), ps.next()) {
            (Some(&p), None) => only_succ(p) != Some(b),
            _ => true,
        }
    };
    let mut global = Small::from_elem(false, nslots);
    // The block that last wrote each variable (by its first step).
    let mut written = Small::from_elem(NONE, nslots);
    for &b in rpo {
        let b = b as usize;
        if !starts_block(b) {
            continue;
        }
        let mut step = b;
        loop {
            for &(s, _) in io.reads(step) {
                if written[s as usize] != b as u32 {
                    global[s as usize] = true;
                }
            }
            for &w in io.writes(step) {
                written[w as usize] = b as u32;
            }
            match only_succ(step) {
                Some(next) if !starts_block(next) => step = next,
                _ => break,
            }
        }
    }
    global
}

/// Per step: the φs placed there, as (variable, φ).
type PhisAt = Small<SmallVec<[(Slot, u32); 1]>>;

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
        let (rpo, order) = reverse_post_order(cfg, n, entry);
        let reachable = |v: usize| v < n && order[v] != NONE;
        let idom = immediate_dominators(preds, &rpo, &order, &reachable, n);
        let root = rpo.first().copied();
        let frontier = dominance_frontiers(preds, &rpo, &idom, &reachable, n);

        // φ placement: for each variable, at the iterated frontier of its writers; only
        // for the variables some basic block reads before it writes them (semi-pruned
        // SSA, Briggs et al.). A variable that every block writes before reading it is
        // seen at each read by a write of the same block, so no φ of it could reach a
        // read: a 100k-step chain that jumps back once placed a φ per variable at the head
        // of its loop.
        let global = global_variables(cfg, preds, io, &rpo, root, nslots, &reachable);
        let writers = Lists::build(nslots, || {
            rpo.iter().flat_map(|&b| {
                io.writes(b as usize)
                    .iter()
                    .filter(|&&s| global[s as usize])
                    .map(move |&s| (s as usize, b))
            })
        });
        drop(global);
        let (mut phis, phis_at) = place_phis(&frontier, &writers, nslots, n);
        drop(frontier);
        drop(writers);

        let children = Lists::build(n, || {
            rpo.iter()
                .skip(1)
                .filter(|&&b| idom[b as usize] != NONE)
                .map(|&b| (idom[b as usize] as usize, b))
        });
        drop(idom);
        drop(order);
        let (names, starts) = rename(
            cfg, io, n, nslots, entry, root, &children, &phis_at, &mut phis,
        );
        drop(children);
        drop(phis_at);
        let phi_unset = unset_phis(&phis);
        Ssa {
            names,
            starts,
            phis,
            phi_unset,
        }
    }

    /// The name the `k`-th read of step `i` sees.
    pub(crate) fn name(&self, i: usize, k: usize) -> Name {
        self.names[self.starts[i] as usize + k]
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

/// The reachable steps in reverse post-order, and each step's place in it (`NONE`:
/// unreachable).
fn reverse_post_order(cfg: &Cfg, n: usize, entry: &Entry) -> (Small<u32>, Small<u32>) {
    let root = (entry.step < n).then_some(entry.step);
    let rpo: Small<u32> = post_order(&cfg.succ, root.into_iter(), |w| w < n)
        .iter()
        .rev()
        .map(|&v| v as u32)
        .collect();
    let mut order = Small::from_elem(NONE, n);
    for (k, &v) in rpo.iter().enumerate() {
        order[v as usize] = k as u32;
    }
    (rpo, order)
}

/// Each reachable step's immediate dominator (Cooper, Harvey and Kennedy's iteration).
fn immediate_dominators(
    preds: &Preds,
    rpo: &[u32],
    order: &[u32],
    reachable: &impl Fn(usize) -> bool,
    n: usize,
) -> Small<u32> {
    let mut idom = Small::from_elem(NONE, n);
    if let Some(&root) = rpo.first() {
        idom[root as usize] = root;
    }
    let intersect = |idom: &[u32], mut a: u32, mut b: u32| {
        while a != b {
            while order[a as usize] > order[b as usize] {
                a = idom[a as usize];
            }
            while order[b as usize] > order[a as usize] {
                b = idom[b as usize];
            }
        }
        a
    };
    let mut changed = true;
    while changed {
        changed = false;
        for &b in rpo.iter().skip(1) {
            let mut new = NONE;
            for &p in preds.of(b as usize) {
                if !reachable(p) || idom[p] == NONE {
                    continue;
                }
                let p = p as u32;
                new = if new == NONE {
                    p
                } else {
                    intersect(&idom, p, new)
                };
            }
            if new != NONE && idom[b as usize] != new {
                idom[b as usize] = new;
                changed = true;
            }
        }
    }
    idom
}

/// Dominance frontiers, as flat lists per step. NB: the start of the run is an edge into
/// the first step too (on which nothing is set yet), as if from a virtual entry node
/// dominating it: the first step is a join as soon as a jump goes back to it, and the
/// walk up from its predecessors goes up to and including itself.
fn dominance_frontiers(
    preds: &Preds,
    rpo: &[u32],
    idom: &[u32],
    reachable: &impl Fn(usize) -> bool,
    n: usize,
) -> Small<SmallVec<[u32; 2]>> {
    let root = rpo.first().copied();
    let mut frontier: Small<SmallVec<[u32; 2]>> = Small::from_elem(SmallVec::new(), n);
    for &b in rpo {
        let ps: SmallVec<[u32; 4]> = preds
            .of(b as usize)
            .iter()
            .copied()
            .filter(|&p| reachable(p))
            .map(|p| p as u32)
            .collect();
        let is_root = Some(b) == root;
        if ps.len() + usize::from(is_root) < 2 {
            continue;
        }
        for p in ps {
            let mut runner = p;
            loop {
                if !is_root && runner == idom[b as usize] {
                    break;
                }
                let f = &mut frontier[runner as usize];
                if f.last() != Some(&b) {
                    f.push(b);
                }
                if is_root && runner == b {
                    break;
                }
                runner = idom[runner as usize];
            }
        }
    }
    frontier
}

/// The φs of each variable, at the iterated dominance frontier of its `writers`: every
/// φ (operands still empty), and where each is.
fn place_phis(
    frontier: &[SmallVec<[u32; 2]>],
    writers: &Lists<u32>,
    nslots: usize,
    n: usize,
) -> (Small<Phi>, PhisAt) {
    let mut phis: Small<Phi> = SmallVec::new();
    let mut phis_at: PhisAt = Small::from_elem(SmallVec::new(), n);
    // Which step last got a φ / was queued for the variable in hand (stamped with it, so
    // nothing is cleared between variables).
    let mut has_phi = Small::from_elem(NONE, n);
    let mut queued = Small::from_elem(NONE, n);
    let mut work: Small<u32> = SmallVec::new();
    for slot in 0..nslots {
        let stamp = slot as u32;
        for &d in writers.of(slot) {
            // NB: a step that writes the variable twice is queued once.
            if queued[d as usize] != stamp {
                queued[d as usize] = stamp;
                work.push(d);
            }
        }
        while let Some(d) = work.pop() {
            for &b in &frontier[d as usize] {
                let b = b as usize;
                if has_phi[b] == stamp {
                    continue;
                }
                has_phi[b] = stamp;
                phis_at[b].push((stamp, phis.len() as u32));
                phis.push(Phi {
                    operands: SmallVec::new(),
                });
                if queued[b] != stamp {
                    queued[b] = stamp;
                    work.push(b as u32);
                }
            }
        }
    }
    (phis, phis_at)
}

/// Names every read and every φ operand: one walk of the dominator tree (`children`),
/// with the name on top of each variable's stack and a log to undo the pushes when a
/// node's subtree is left. Returns the names of the reads, flat, and where each step's
/// start.
#[allow(clippy::too_many_arguments)]
fn rename(
    cfg: &Cfg,
    io: &Io,
    n: usize,
    nslots: usize,
    entry: &Entry,
    root: Option<u32>,
    children: &Lists<u32>,
    phis_at: &PhisAt,
    phis: &mut Small<Phi>,
) -> (Small<Name>, Small<u32>) {
    let mut starts = Small::with_capacity(n + 1);
    let mut total = 0u32;
    for i in 0..n {
        starts.push(total);
        total += io.reads(i).len() as u32;
    }
    starts.push(total);
    let mut names = Small::from_elem(Name::Unset, total as usize);
    // The entry edge into the first step brings "unset" to its φs (a preset variable: its
    // preset value).
    let preset = |s: Slot| entry.preset.binary_search(&s).is_ok();
    if let Some(r) = root {
        for &(s, phi) in &phis_at[r as usize] {
            let name = if preset(s) { Name::Preset } else { Name::Unset };
            phis[phi as usize].operands.push(name);
        }
    }
    // NB: a preset variable's name is at the bottom of its stack, never undone: what every
    // read sees unless a write or a φ is on top.
    let mut top = Small::from_elem(Name::Unset, nslots);
    for &s in &entry.preset {
        top[s as usize] = Name::Preset;
    }
    // (variable, the name it had before), undone in reverse when a subtree is left.
    let mut log: Small<(Slot, Name)> = SmallVec::new();
    let push = |top: &mut [Name], log: &mut Small<(Slot, Name)>, s: Slot, name: Name| {
        log.push((s, std::mem::replace(&mut top[s as usize], name)));
    };
    // (node, log length when entered, entered yet)
    let mut walk: Small<(u32, u32, bool)> = root.map(|r| (r, 0, false)).into_iter().collect();
    while let Some(frame) = walk.last_mut() {
        let (b, mark, entered) = *frame;
        let b = b as usize;
        if entered {
            walk.pop();
            for (s, before) in log.drain(mark as usize..).rev() {
                top[s as usize] = before;
            }
            continue;
        }
        frame.2 = true;
        frame.1 = log.len() as u32;
        for &(s, phi) in &phis_at[b] {
            push(&mut top, &mut log, s, Name::Phi(phi));
        }
        for (k, &(s, _)) in io.reads(b).iter().enumerate() {
            names[starts[b] as usize + k] = top[s as usize];
        }
        for &w in io.writes(b) {
            push(&mut top, &mut log, w, Name::Def(b as u32));
        }
        for &succ in cfg.succ[b].iter().filter(|&&s| s < n) {
            for &(s, phi) in &phis_at[succ] {
                phis[phi as usize].operands.push(top[s as usize]);
            }
        }
        for &c in children.of(b) {
            walk.push((c, 0, false));
        }
    }
    (names, starts)
}

/// Which φs "unset" flows into.
fn unset_phis(phis: &[Phi]) -> Small<bool> {
    let mut phi_unset = Small::from_elem(false, phis.len());
    let users = Lists::build(phis.len(), || {
        phis.iter().enumerate().flat_map(|(i, p)| {
            p.operands.iter().filter_map(move |op| match *op {
                Name::Phi(q) => Some((q as usize, i as u32)),
                _ => None,
            })
        })
    });
    let mut work: Small<u32> = SmallVec::new();
    for (i, p) in phis.iter().enumerate() {
        if p.operands.contains(&Name::Unset) {
            phi_unset[i] = true;
            work.push(i as u32);
        }
    }
    while let Some(q) = work.pop() {
        for &u in users.of(q as usize) {
            if !phi_unset[u as usize] {
                phi_unset[u as usize] = true;
                work.push(u);
            }
        }
    }
    phi_unset
}
