//! Control-flow and dataflow checks over the lowered steps: reachability, termination,
//! `final_answer` coverage, definitely-assigned variables, seq_no hygiene.

use plan_bytecode::Slot;
use plan_syntax::{Diagnostic, Span};
use smallvec::SmallVec;

use crate::cfg::{Cfg, Entry, Preds, Small, post_order, preds};
use crate::codes;
use crate::flatten::{Step, StepKind};
use crate::lower::Io;

fn bitset(n: usize) -> Small<u64> {
    Small::from_elem(0, n.div_ceil(64))
}
fn set(b: &mut [u64], i: usize) {
    b[i / 64] |= 1 << (i % 64);
}
fn get(b: &[u64], i: usize) -> bool {
    b[i / 64] >> (i % 64) & 1 == 1
}

/// How many seq_nos a message lists before summarising the rest.
const LISTED: usize = 12;

/// `1, 2, 3` (at most [`LISTED`], then `and N more`).
fn seq_list(steps: &[Step<'_>], idx: &[usize]) -> String {
    let mut s: Vec<String> = idx
        .iter()
        .take(LISTED)
        .map(|&i| seq_label(&steps[i]))
        .collect();
    if idx.len() > LISTED {
        s.push(format!("and {} more", idx.len() - LISTED));
    }
    s.join(", ")
}

/// The loops a run can enter and never leave: the strongly connected components of the
/// `stuck` steps (reachable, and no path from them ends the run) that no edge leaves.
/// A loop whose exit leads only into another such loop is not one: its exit exists. Each
/// loop's members are sorted; loops are in order of their first member. Kosaraju's two
/// passes, both iterative.
fn inescapable_loops(
    succ: &[SmallVec<[usize; 2]>],
    preds: &Preds,
    stuck: &[bool],
) -> Vec<Vec<usize>> {
    let n = stuck.len();
    if !stuck.iter().any(|&s| s) {
        return Vec::new();
    }
    let in_sub = |i: usize| i < n && stuck[i];
    // Pass 1: post-order of a depth-first search along successors.
    let order = post_order(succ, (0..n).filter(|&r| stuck[r]), in_sub);
    // Pass 2: components along predecessors, in reverse post-order.
    const NONE: usize = usize::MAX;
    let mut comp = Small::from_elem(NONE, n);
    let mut count = 0;
    let mut work = Small::new();
    for &v in order.iter().rev() {
        if comp[v] != NONE {
            continue;
        }
        comp[v] = count;
        work.push(v);
        while let Some(u) = work.pop() {
            for &p in preds.of(u) {
                if in_sub(p) && comp[p] == NONE {
                    comp[p] = count;
                    work.push(p);
                }
            }
        }
        count += 1;
    }
    let mut bottom = Small::from_elem(true, count);
    for v in (0..n).filter(|&v| stuck[v]) {
        if succ[v].iter().any(|&w| w >= n || comp[w] != comp[v]) {
            bottom[comp[v]] = false;
        }
    }
    let mut loops: Vec<Vec<usize>> = vec![Vec::new(); count];
    for v in (0..n).filter(|&v| stuck[v] && bottom[comp[v]]) {
        loops[comp[v]].push(v);
    }
    let mut loops: Vec<Vec<usize>> = loops.into_iter().filter(|l| !l.is_empty()).collect();
    loops.sort_by_key(|l| l[0]);
    loops
}

/// How to set `final_answer`, for E0206.
const FINAL_ANSWER_HELP: &str = "the last instruction must store the answer in final_answer, e.g. \"output_vars\": [\"final_answer\"] or {\"type\": \"assign\", \"parameters\": {\"final_answer\": \"${summary}\"}}";

/// E0206 for a plan in which no instruction sets `final_answer`.
pub(crate) fn no_final_answer(plan_span: Span) -> Diagnostic {
    Diagnostic::error(codes::NO_FINAL_ANSWER, "no instruction sets final_answer")
        .with_span(plan_span)
        .with_help(FINAL_ANSWER_HELP)
}

fn seq_label(step: &Step<'_>) -> String {
    step.seq_no()
        .map_or_else(|| "?".to_owned(), |s| s.to_string())
}

pub(crate) fn verify(
    steps: &[Step<'_>],
    io: &Io,
    cfg: &Cfg,
    slots: &[String],
    entry: &Entry,
    plan_span: Span,
    diags: &mut Vec<Diagnostic>,
) {
    let n = steps.len();
    if n == 0 {
        diags.push(
            Diagnostic::error(codes::NO_FINAL_ANSWER, "the plan has no instructions")
                .with_span(plan_span)
                .with_help(
                    "write at least a reasoning step and an instruction that sets final_answer",
                ),
        );
        return;
    }
    check_seq_nos(steps, entry, diags);
    check_reachable(steps, io, cfg, entry, diags);
    check_termination(steps, io, cfg, plan_span, diags);
    let preds = preds(&cfg.succ, n + 1);
    check_loops(steps, io, cfg, &preds, diags);
    check_reads(steps, io, cfg, slots, entry, &preds, diags);
}

/// Style: the first instruction is `reasoning` (W0206), seq_nos count up.
fn check_seq_nos(steps: &[Step<'_>], entry: &Entry, diags: &mut Vec<Diagnostic>) {
    if !entry.branch && !matches!(steps[0].kind, StepKind::Nop) {
        diags.push(
            Diagnostic::warning(codes::FIRST_NOT_REASONING, "the first instruction is not `reasoning`")
                .with_span(steps[0].span())
                .with_seq(steps[0].seq_no())
                .with_help("start the plan with {\"seq_no\": 0, \"type\": \"reasoning\", \"parameters\": {\"chain_of_thoughts\": ..., \"dependency_analysis\": ...}}"),
        );
    }
    for (expected, s) in steps.iter().filter(|s| !s.synthetic).enumerate() {
        let expected = expected as i64;
        if let Some(seq) = s.seq_no()
            && seq != expected
        {
            diags.push(
                Diagnostic::warning(
                    codes::SEQ_ORDER,
                    format!("seq_no {seq} where {expected} was expected"),
                )
                .with_span(s.seq_span())
                .with_seq(Some(seq))
                .with_help("number instructions 0, 1, 2, ... in the order they are written"),
            );
            break;
        }
    }
}

/// Whether `i` sets `final_answer`.
fn writes_final(io: &Io, cfg: &Cfg, i: usize) -> bool {
    cfg.final_slot.is_some_and(|f| io.writes(i).contains(&f))
}

/// Instructions no path reaches (after the one that ends the run, or anywhere).
fn check_reachable(
    steps: &[Step<'_>],
    io: &Io,
    cfg: &Cfg,
    entry: &Entry,
    diags: &mut Vec<Diagnostic>,
) {
    let n = steps.len();
    // NB: a branch starts past its first steps on purpose: they are not reported.
    let mut i = if entry.branch { entry.step } else { 0 };
    while i < n {
        if cfg.reachable[i] || steps[i].synthetic {
            i += 1;
            continue;
        }
        let start = i;
        while i < n && !cfg.reachable[i] {
            i += 1;
        }
        let end = i - 1;
        let after_final = start > 0 && writes_final(io, cfg, start - 1) && cfg.reachable[start - 1];
        let range = if start == end {
            format!("instruction {}", seq_label(&steps[start]))
        } else {
            format!(
                "instructions {} to {}",
                seq_label(&steps[start]),
                seq_label(&steps[end])
            )
        };
        let span = Span {
            start: steps[start].span().start,
            end: steps[end].span().end,
        };
        let d = if after_final {
            Diagnostic::warning(
                codes::AFTER_FINAL,
                format!(
                    "{range} never run: the run ends when seq {} sets final_answer",
                    seq_label(&steps[start - 1])
                ),
            )
            .with_help(
                "set final_answer in the last instruction, or remove the instructions after it",
            )
        } else {
            Diagnostic::warning(codes::UNREACHABLE, format!("{range} can never run"))
                .with_help("no path from the first instruction reaches here: fix the jump targets or remove these instructions")
        };
        diags.push(d.with_span(span).with_seq(steps[start].seq_no()));
    }
}

/// A plan whose runs cannot end with an answer, or may run off its end.
fn check_termination(
    steps: &[Step<'_>],
    io: &Io,
    cfg: &Cfg,
    plan_span: Span,
    diags: &mut Vec<Diagnostic>,
) {
    let n = steps.len();
    let any_final = (0..n).any(|i| cfg.reachable[i] && writes_final(io, cfg, i));
    if !any_final {
        let unreachable_finals: Vec<usize> = (0..n).filter(|&i| writes_final(io, cfg, i)).collect();
        let help = FINAL_ANSWER_HELP;
        let d = match unreachable_finals.split_first() {
            // Point at the instructions that would end the run, not at the whole plan.
            Some((&first, rest)) => {
                let seqs = seq_list(steps, &unreachable_finals);
                let mut d = Diagnostic::error(
                    codes::NO_FINAL_ANSWER,
                    format!("only unreachable instructions set final_answer (seq {seqs})"),
                )
                .with_span(steps[first].span())
                .with_seq(steps[first].seq_no())
                .with_help(format!(
                    "make one of them reachable (fix the jump targets before it); {help}"
                ));
                for &i in rest.iter().take(LISTED) {
                    d = d.with_label(steps[i].span(), "also sets final_answer, also unreachable");
                }
                d
            }
            None => no_final_answer(plan_span),
        };
        diags.push(d);
    } else if cfg.reachable[n] {
        let last = (0..n)
            .rev()
            .find(|&i| cfg.reachable[i] && cfg.succ[i].contains(&n))
            .unwrap_or(n - 1);
        diags.push(
            Diagnostic::warning(codes::FALLS_OFF_END, "a path reaches the end of the plan without setting final_answer")
                .with_span(steps[last].span())
                .with_seq(steps[last].seq_no())
                .with_help("such a run fails: make sure every path ends with an instruction that sets final_answer"),
        );
    }
}

/// Loops a run can enter and never leave.
fn check_loops(steps: &[Step<'_>], io: &Io, cfg: &Cfg, preds: &Preds, diags: &mut Vec<Diagnostic>) {
    let n = steps.len();
    // Nodes that can terminate: reverse reachability from halts and the end.
    let mut can_end = Small::from_elem(false, n + 1);
    let mut stack: Small<usize> = (0..n)
        .filter(|&i| writes_final(io, cfg, i))
        .chain([n])
        .collect();
    while let Some(i) = stack.pop() {
        if can_end[i] {
            continue;
        }
        can_end[i] = true;
        stack.extend(preds.of(i).iter().copied().filter(|&p| !can_end[p]));
    }
    let stuck: Small<bool> = (0..n).map(|i| cfg.reachable[i] && !can_end[i]).collect();
    for members in inescapable_loops(&cfg.succ, preds, &stuck) {
        // The jump that closes the loop: the last member with an edge back into the loop.
        let closing = members
            .iter()
            .rev()
            .copied()
            .find(|&i| {
                cfg.succ[i]
                    .iter()
                    .any(|&s| s <= i && members.binary_search(&s).is_ok())
            })
            .unwrap_or(members[0]);
        let shown: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&i| !steps[i].synthetic)
            .collect();
        let head = shown.first().copied().unwrap_or(members[0]);
        let mut d = Diagnostic::error(
            codes::INESCAPABLE_CYCLE,
            format!(
                "a loop that no conditional jump can leave (seq {})",
                seq_list(steps, &shown)
            ),
        )
        .with_span(steps[closing].span())
        .with_seq(steps[closing].seq_no())
        .with_help("add a conditional jmp (condition_prompt with jump_if_true/jump_if_false) that exits the loop, or set final_answer inside it");
        if head != closing {
            d = d.with_label(steps[head].span(), "the loop starts here");
        }
        diags.push(d);
    }
}

/// Reads of variables that may be unset there (a forward must-analysis).
fn check_reads(
    steps: &[Step<'_>],
    io: &Io,
    cfg: &Cfg,
    slots: &[String],
    entry: &Entry,
    preds: &Preds,
    diags: &mut Vec<Diagnostic>,
) {
    let n = steps.len();
    let nslots = slots.len();
    let mut assigned_anywhere = bitset(nslots);
    for w in io.all_writes().iter().chain(&entry.preset) {
        set(&mut assigned_anywhere, *w as usize);
    }
    let mut preset = bitset(nslots);
    for &w in &entry.preset {
        set(&mut preset, w as usize);
    }
    let words = nslots.div_ceil(64);
    let order: Small<usize> = (0..n).filter(|&i| cfg.reachable[i]).collect();
    let mut check = ReadCheck {
        assigned_anywhere,
        warned_never: bitset(nslots),
        warned_here: SmallVec::new(),
        never_is_error: entry.branch,
    };
    let (mut inn, mut out) = (Small::from_elem(0u64, words), Small::from_elem(0u64, words));
    // `out` := the out-set of `p` (its in-set plus what it writes), then `inn &= out`.
    let meet = |inn: &mut [u64], out: &mut [u64], din_p: &[u64], p: usize| {
        out.copy_from_slice(din_p);
        for w in io.writes(p) {
            set(out, *w as usize);
        }
        for (a, b) in inn.iter_mut().zip(out.iter()) {
            *a &= *b;
        }
    };

    if order.iter().all(|&i| cfg.succ[i].iter().all(|&s| s > i)) {
        // NB: every jump goes forward (the usual plan): in step order each in-set is final
        // when computed, so one pass checks the reads, and an in-set is kept only until its
        // last successor has used it. Memory is a few sets instead of one per step (on
        // large plans the n × slots table and its page faults were a visible cost).
        let mut uses = Small::from_elem(0u32, n);
        for &i in &order {
            for &p in preds.of(i).iter().filter(|&&p| cfg.reachable[p]) {
                uses[p] += 1;
            }
        }
        let mut held: Vec<Vec<u64>> = vec![Vec::new(); n];
        let mut spare: Vec<Vec<u64>> = Vec::new();
        for &i in &order {
            if i == entry.step {
                inn.copy_from_slice(&preset);
            } else {
                inn.fill(!0);
            }
            for &p in preds.of(i).iter().filter(|&&p| cfg.reachable[p]) {
                meet(&mut inn, &mut out, &held[p], p);
                uses[p] -= 1;
                if uses[p] == 0 {
                    spare.push(std::mem::take(&mut held[p]));
                }
            }
            check.step(i, |_, s| !get(&inn, s), io, steps, slots, diags);
            if uses[i] > 0 {
                let mut keep = spare.pop().unwrap_or_default();
                keep.clear();
                keep.extend_from_slice(&inn);
                held[i] = keep;
            }
        }
        return;
    }

    // A plan that jumps back: the reads are checked against SSA names (see `ssa.rs`),
    // not against an in-set per step, which for a loop needed a steps × variables table.
    let ssa = crate::ssa::Ssa::build(cfg, preds, io, n, nslots, entry);
    for &i in &order {
        check.step(i, |k, _| ssa.may_be_unset(i, k), io, steps, slots, diags);
    }
}

/// The reads check of the must-analysis, step by step in step order.
struct ReadCheck {
    assigned_anywhere: Small<u64>,
    warned_never: Small<u64>,
    /// Slots already reported at this step: a step reads a handful, so a short list beats
    /// a bitset over all slots per step.
    warned_here: SmallVec<[Slot; 8]>,
    /// A branch: a variable never set is an error (E0211), not a warning.
    never_is_error: bool,
}

impl ReadCheck {
    /// Reports the reads of step `i`; `may_be_unset(k, slot)` tells whether its `k`-th
    /// read, of `slot`, may find the variable unset.
    fn step(
        &mut self,
        i: usize,
        may_be_unset: impl Fn(usize, usize) -> bool,
        io: &Io,
        steps: &[Step<'_>],
        slots: &[String],
        diags: &mut Vec<Diagnostic>,
    ) {
        self.warned_here.clear();
        for (k, &(slot, span)) in io.reads(i).iter().enumerate() {
            let s = slot as usize;
            let name = &slots[s];
            if !get(&self.assigned_anywhere, s) {
                if !get(&self.warned_never, s) {
                    set(&mut self.warned_never, s);
                    let d = if self.never_is_error {
                        Diagnostic::error(codes::UNKNOWN_VAR_AT_ENTRY, format!("`{name}` is neither set at the branch point nor assigned in the plan"))
                            .with_help(format!("assign `{name}` before this instruction, or branch at a step where the run had set it"))
                    } else {
                        Diagnostic::warning(codes::NEVER_ASSIGNED, format!("`{name}` is never assigned"))
                            .with_help(format!("assign `{name}` in an earlier instruction (or pass it with `planvm run --var {name}=...`); until then the reference stays as literal text"))
                    };
                    diags.push(d.with_span(span).with_seq(steps[i].seq_no()));
                }
            } else if may_be_unset(k, s) && !self.warned_here.contains(&slot) {
                self.warned_here.push(slot);
                diags.push(
                    Diagnostic::warning(codes::MAYBE_UNSET, format!("`{name}` may be unset here"))
                        .with_span(span)
                        .with_seq(steps[i].seq_no())
                        .with_help(format!("on some path to this instruction no earlier instruction assigns `{name}`; the reference would stay as literal text")),
                );
            }
        }
    }
}
