//! The look-ahead scan: issues tool calls ahead of the head when the head waits.
//!
//! Model: out-of-order issue, in-order commit (a CPU reorder buffer). The head (`vm.rs`)
//! commits instructions strictly in program order, exactly as a sequential run. While it
//! waits for a request, this scan walks the sequential path from the head — the window of
//! dynamic instruction instances `steps, steps + 1, …` — and decides for each:
//!
//! - `dirty` holds the slots whose latest writer earlier in the window has not finished
//!   (an unanswered or unissued call, an entry that could not be evaluated). An entry
//!   none of whose reads is dirty sees exactly the values the sequential run will give it:
//!   committed slots overlaid with the outputs of finished earlier window entries (the
//!   latest writer wins).
//! - Set/Assign with settled reads are evaluated into the overlay; otherwise their writes
//!   turn dirty. Jumps are followed (the path is still the sequential one).
//! - A call with settled reads is issued (unless `max_concurrency` requests are out). A
//!   `write` tool is issued only when no earlier call in the window lacks its answer, and
//!   nothing after an unanswered write call is issued: write calls keep program order
//!   relative to every other call.
//! - A condition with settled reads is issued, but the scan stops there: which way it
//!   goes is unknown until the head commits it, and a call that the sequential run might
//!   not make is never started.
//! - The scan stops after an instruction that sets `final_answer` (the run ends there), at
//!   an entry that will fail (its error surfaces when the head reaches it, so the
//!   earliest failure in program order wins), at the window size, at the step limit, and
//!   when the look-ahead's values would hold more than `max_total_bytes`.
//!
//! Nothing here is saved: the window is derived again on every scan from the committed
//! state and the pending requests, which carry their instance number. So a restored run
//! continues with the same decisions. Stopping a scan early only loses concurrency, never
//! correctness.

use std::borrow::Cow;

use plan_bytecode::{Effects, Instr, Pc, Slot};
use plan_value::Val;
use smallvec::{SmallVec, smallvec};

use crate::view::{Over, Overlay};
use crate::vm::Vm;
use crate::{RequestKind, Status, ToolName};

/// Most dynamic instructions the scan looks at past the head.
pub const WINDOW: u64 = 256;

/// A request the scan decided to issue.
pub(crate) struct Ahead {
    pub(crate) instance: u64,
    pub(crate) pc: Pc,
    pub(crate) tool: ToolName,
    pub(crate) args: crate::Args,
    pub(crate) kind: RequestKind,
}

/// The values a finished window entry writes.
type Written<'a> = SmallVec<[(Slot, Cow<'a, Val>); 4]>;

/// What the scan knows about slots at the current window position.
struct Window<'a> {
    base: &'a [Option<Val>],
    over: Vec<Over<'a>>,
    /// Bytes of the values the look-ahead holds (bounded by `max_total_bytes`).
    bytes: u64,
}

impl Window<'_> {
    fn view(&self) -> Overlay<'_> {
        Overlay {
            base: self.base,
            over: &self.over,
        }
    }

    fn settled(&self, reads: &[Slot]) -> bool {
        reads
            .iter()
            .all(|&s| !matches!(self.over[s as usize], Over::Dirty))
    }

    fn mark_dirty(&mut self, writes: &[Slot]) {
        for &s in writes {
            // The stale value must not be seen again, and its bytes stay counted: the
            // budget is only a bound on what the look-ahead holds.
            self.over[s as usize] = Over::Dirty;
        }
    }
}

/// What the look-ahead has issued, and how many calls are out.
struct Issued<'a> {
    out: &'a mut Vec<Ahead>,
    inflight: &'a mut usize,
    cap: usize,
    /// Some earlier call or condition in the window has no answer yet.
    call_waiting: &'a mut bool,
}

impl Vm<'_> {
    /// Decides which requests to issue ahead of the head (see the module doc).
    pub(crate) fn scan(&self) -> Vec<Ahead> {
        let mut out = Vec::new();
        if !matches!(self.st.status, Status::Running) {
            return out;
        }
        let prog = self.prog;
        let cap = self.limits.max_concurrency.max(1) as usize;
        let mut inflight = self
            .st
            .pending
            .iter()
            .filter(|p| p.result.is_none())
            .count();
        let n_slots = prog.slots.len();
        let mut w = Window {
            base: &self.st.slots,
            over: vec![Over::Base; n_slots],
            bytes: 0,
        };
        // Some earlier call or condition in the window has no answer yet.
        let mut call_waiting = false;
        let end = self
            .st
            .steps
            .saturating_add(WINDOW)
            .min(self.limits.max_steps);
        let mut pc = self.st.pc;
        let mut n = self.st.steps;
        // NB: once `cap` requests are out nothing more can be issued: stop early.
        while n < end && inflight < cap {
            let Some(&instr) = prog.code.get(pc as usize) else {
                break;
            };
            let settled = w.settled(prog.reads(pc));
            let mut next = pc + 1;
            match instr {
                Instr::Jump { target } => next = target,
                Instr::Set { .. } | Instr::Assign { .. } => {
                    if !self.scan_assign(&mut w, pc, instr, settled) {
                        break;
                    }
                }
                Instr::Call { call } => {
                    let mut issued = Issued {
                        out: &mut out,
                        inflight: &mut inflight,
                        cap,
                        call_waiting: &mut call_waiting,
                    };
                    if !self.scan_call(&mut w, &mut issued, (pc, n), call, settled) {
                        break;
                    }
                }
                Instr::Branch { cond, .. } => {
                    if self.pending_for(n).is_none()
                        && settled
                        && inflight < cap
                        && let Ok((tool, args, kind)) = self.cond_request(&w.view(), pc, cond)
                    {
                        out.push(Ahead {
                            instance: n,
                            pc,
                            tool,
                            args,
                            kind,
                        });
                    }
                    break;
                }
                // Any other instruction that continues at the next one (`Nop`, and one
                // added to the table without a case here): what it writes is known only
                // once the head runs it, so reads of those slots wait for the head.
                // Evaluating it here, as for `Set` and `Assign`, only lets more calls
                // start early.
                other if !other.jumps() => w.mark_dirty(prog.writes(pc)),
                // One that may jump, without a case here: where the run goes is not
                // known, so nothing after it is issued.
                _ => break,
            }
            if self
                .final_slot
                .is_some_and(|f| prog.writes(pc).contains(&f))
            {
                break;
            }
            pc = next;
            n += 1;
        }
        out
    }

    /// The look-ahead at `Set` or `Assign` instruction `pc`: its values taken into the
    /// window when what it reads is `settled`, else what it writes marked unknown.
    /// `false`: the look-ahead stops here.
    fn scan_assign(&self, w: &mut Window<'_>, pc: Pc, instr: Instr, settled: bool) -> bool {
        if !settled {
            w.mark_dirty(self.prog.writes(pc));
            return true;
        }
        match instr {
            Instr::Set { dst, src } => match self.resolve_in(&w.view(), pc, src) {
                Ok(v) => self.accept(w, [(dst, Cow::Owned(v))]),
                Err(_) => false,
            },
            Instr::Assign { assign } => match self.assign_values(&w.view(), pc, assign) {
                Ok(values) => {
                    let values = values.into_iter().map(|(s, v)| (s, Cow::Owned(v)));
                    self.accept(w, values)
                }
                Err(_) => false,
            },
            _ => true,
        }
    }

    /// The look-ahead at call `call` (instruction `pc`, the `n`-th executed): its answer
    /// taken into the window, or the call issued when its inputs are `settled` and room
    /// is left. `false`: the look-ahead stops here.
    fn scan_call<'w>(
        &'w self,
        w: &mut Window<'w>,
        issued: &mut Issued<'_>,
        (pc, n): (Pc, u64),
        call: u32,
        settled: bool,
    ) -> bool {
        let prog = self.prog;
        let def = &prog.calls[call as usize];
        let effects = prog.tools[def.tool as usize].effects;
        let write = effects == Effects::Write;
        // NB: a question to a person is asked only when the run gets there: never ahead
        // of the head, and nothing after it is issued while it waits (the run stops at
        // it, perhaps for days: what was issued ahead would be thrown away).
        let human = effects == Effects::Human;
        if human && n != self.st.steps && self.pending_for(n).is_none() {
            return false;
        }
        let answered: Option<Written<'_>> = match self.pending_for(n) {
            // Only a tampered state gets here; stop rather than guess.
            Some(p) if p.request.pc != pc => return false,
            Some(p) => match &p.result {
                // One output: the answer itself, borrowed.
                Some(Ok(v)) if def.outputs.len() == 1 => {
                    Some(smallvec![(def.outputs[0], Cow::Borrowed(v))])
                }
                Some(Ok(v)) => match self.outputs_of(pc, call, &p.request.tool, v.clone()) {
                    Ok(values) => Some(
                        values
                            .into_iter()
                            .map(|(s, v)| (s, Cow::Owned(v)))
                            .collect(),
                    ),
                    Err(_) => return false,
                },
                // This entry fails the run when the head reaches it.
                Some(Err(_)) => return false,
                None => None,
            },
            None => {
                if settled && *issued.inflight < issued.cap && !(write && *issued.call_waiting) {
                    let Ok((tool, args, kind)) = self.call_request(&w.view(), pc, call) else {
                        return false;
                    };
                    issued.out.push(Ahead {
                        instance: n,
                        pc,
                        tool,
                        args,
                        kind,
                    });
                    *issued.inflight += 1;
                }
                None
            }
        };
        match answered {
            Some(values) => self.accept(w, values),
            None => {
                if write || human {
                    return false;
                }
                *issued.call_waiting = true;
                w.mark_dirty(prog.writes(pc));
                true
            }
        }
    }

    /// Records values a finished window entry writes; `false` when the entry would fail
    /// (its error surfaces at the head) or the look-ahead would hold too many bytes.
    fn accept<'a>(
        &self,
        w: &mut Window<'a>,
        values: impl IntoIterator<Item = (Slot, Cow<'a, Val>)>,
    ) -> bool {
        for (slot, v) in values {
            let Ok(size) = self.measure(v.size()) else {
                return false;
            };
            w.bytes = w.bytes.saturating_add(size);
            if w.bytes > self.limits.max_total_bytes {
                return false;
            }
            w.over[slot as usize] = Over::Value(v);
        }
        true
    }
}
