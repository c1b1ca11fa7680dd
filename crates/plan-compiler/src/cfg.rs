//! The plan's control-flow graph over the lowered steps (successors, what a run can
//! reach, where runs start) and the graph tools the checks (`verify`) and the SSA form
//! (`ssa`) share: per-node lists, predecessors, a post-order.

use plan_bytecode::Slot;
use smallvec::SmallVec;

use crate::flatten::{Step, StepKind};
use crate::lower::Io;

/// The checks' tables: a small plan's fit on the stack (each was an allocation for a plan
/// of a few steps, a visible share of compiling it).
pub(crate) type Small<T> = SmallVec<[T; 16]>;

/// Successors of each step; `n` (one past the last step) stands for "fell off the end".
/// A step that writes `final_answer` has no successor: the run ends there.
pub(crate) struct Cfg {
    pub(crate) succ: Vec<SmallVec<[usize; 2]>>,
    pub(crate) reachable: Small<bool>,
    /// The slot of `final_answer`: a step writing it ends the run.
    pub(crate) final_slot: Option<Slot>,
}

/// Where runs start: the first step with nothing set, or (a branch) another step with
/// some variables set.
#[derive(Clone, Debug, Default)]
pub(crate) struct Entry {
    pub(crate) step: usize,
    /// Slots set at the start, sorted.
    pub(crate) preset: Vec<Slot>,
    /// A branch: references to variables that are never set are errors, and the steps
    /// before the entry are not reported as unreachable.
    pub(crate) branch: bool,
}

impl Cfg {
    pub(crate) fn new(
        steps: &[Step<'_>],
        io: &Io,
        targets: &[SmallVec<[usize; 2]>],
        final_slot: Option<Slot>,
        entry: usize,
    ) -> Cfg {
        let n = steps.len();
        let succ: Vec<SmallVec<[usize; 2]>> = (0..n)
            .map(|i| {
                if final_slot.is_some_and(|f| io.writes(i).contains(&f)) {
                    SmallVec::new()
                } else {
                    match steps[i].kind {
                        StepKind::Jump(_) | StepKind::Branch { .. } => targets[i].clone(),
                        _ => smallvec::smallvec![i + 1],
                    }
                }
            })
            .collect();
        let mut reachable = Small::from_elem(false, n + 1);
        let mut stack: Small<usize> = smallvec::smallvec![entry];
        while let Some(i) = stack.pop() {
            if reachable[i] {
                continue;
            }
            reachable[i] = true;
            if i < n {
                stack.extend(succ[i].iter().copied().filter(|&s| !reachable[s]));
            }
        }
        Cfg {
            succ,
            reachable,
            final_slot,
        }
    }
}

/// Lists per node in two flat arrays (compressed rows): `list[start[i]..start[i + 1]]`
/// belong to node `i`. NB: the analyses keep several per-node and per-variable lists
/// alive at once; one vector each (24 bytes and an allocation even when empty) was most
/// of their memory on a plan with 100k steps and as many variables.
pub(crate) struct Lists<T> {
    start: Small<u32>,
    list: Small<T>,
}

impl<T: Copy + Default> Lists<T> {
    /// The lists of `nodes` nodes from `(node, item)` pairs given twice by `pairs` (once
    /// to count, once to fill), items in the order given.
    pub(crate) fn build<I: Iterator<Item = (usize, T)>>(
        nodes: usize,
        pairs: impl Fn() -> I,
    ) -> Lists<T> {
        let mut start = Small::from_elem(0u32, nodes + 1);
        for (node, _) in pairs() {
            start[node + 1] += 1;
        }
        for i in 0..nodes {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut list = Small::from_elem(T::default(), start[nodes] as usize);
        for (node, item) in pairs() {
            list[fill[node] as usize] = item;
            fill[node] += 1;
        }
        Lists { start, list }
    }

    pub(crate) fn of(&self, node: usize) -> &[T] {
        &self.list[self.start[node] as usize..self.start[node + 1] as usize]
    }
}

/// Predecessor lists of a graph, each in increasing order.
pub(crate) type Preds = Lists<usize>;

/// The predecessors of `nodes` nodes from their successors.
pub(crate) fn preds(succ: &[SmallVec<[usize; 2]>], nodes: usize) -> Preds {
    Lists::build(nodes, || {
        succ.iter()
            .enumerate()
            .flat_map(|(i, ss)| ss.iter().map(move |&s| (s, i)))
    })
}

/// Post-order of a depth-first search along `succ` from each of `roots` in turn (one not
/// yet visited), through the nodes `keep` accepts. Iterative, so a 100k-step plan cannot
/// overflow the stack.
pub(crate) fn post_order(
    succ: &[SmallVec<[usize; 2]>],
    roots: impl Iterator<Item = usize>,
    keep: impl Fn(usize) -> bool,
) -> Small<usize> {
    let mut order = Small::new();
    let mut visited = Small::from_elem(false, succ.len());
    let mut stack: Small<(usize, usize)> = Small::new();
    for root in roots {
        if visited[root] {
            continue;
        }
        visited[root] = true;
        stack.push((root, 0));
        while let Some((v, k)) = stack.last_mut() {
            let v = *v;
            if let Some(&w) = succ[v].get(*k) {
                *k += 1;
                if keep(w) && !visited[w] {
                    visited[w] = true;
                    stack.push((w, 0));
                }
            } else {
                order.push(v);
                stack.pop();
            }
        }
    }
    order
}
