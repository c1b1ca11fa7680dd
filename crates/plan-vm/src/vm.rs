//! The VM: dispatch loop, one `op_*` method per instruction, suspension at tool calls.
//!
//! Control flow of a run: `run()` dispatches at the head (the next instruction in program
//! order), committing answered requests as it reaches them, until the head waits for an
//! unanswered request, sets `final_answer` (→ `Done`), or fails (→ `Failed`). When the
//! head waits, the look-ahead scan (`sched.rs`) issues the independent calls after it, and
//! `run()` yields everything newly issued. A failed VM keeps returning the same error; a
//! finished one hands its variables over in the first `Done` and afterwards returns
//! `Done` with the same final answer and step count and only `final_answer` in `vars`.
//!
//! Performance: the loop copies one `Instr` (≤ 16 bytes) per step, touches no debug info
//! and formats nothing unless tracing is on; `Jump`, `Nop` and `Set` of a small constant
//! allocate nothing.

use std::sync::{Arc, LazyLock};

use plan_bytecode::{Instr, Pc, Slot, ValidatedProgram};
use plan_value::{Val, extract_first_object, parse_condition_answer, preview_val, value_size};
use serde_json::Value;

use crate::state::{Pending, Status, VmState};
use crate::view::SlotView;
use crate::{
    Args, CallId, ErrorCode, Event, Halt, Limits, Outcome, RequestKind, RunError, ToolName,
    ToolRequest,
};

/// Deepest nesting of any value the VM stores or sends (arrays/objects). Kept below
/// serde_json's parser limit (128) so that a saved [`VmState`], which nests values a few
/// levels down, always parses back.
pub const MAX_VALUE_DEPTH: u32 = 100;

/// Characters of a value shown in trace events.
const TRACE_PREVIEW: usize = 80;
/// Characters of a value shown in error messages.
const ERROR_PREVIEW: usize = 200;

/// Tool name of condition requests (also their cassette key).
pub(crate) const CONDITION_TOOL: &str = "jmp_condition";

/// [`CONDITION_TOOL`] as a request's shared name: allocated once per process.
static CONDITION_TOOL_NAME: LazyLock<ToolName> = LazyLock::new(|| CONDITION_TOOL.into());

/// The argument names of condition requests, shared like [`CONDITION_TOOL_NAME`].
static CONDITION_ARGS: LazyLock<[Arc<str>; 2]> =
    LazyLock::new(|| ["prompt".into(), "context".into()]);

/// A run of one validated program.
pub struct Vm<'p> {
    pub(crate) prog: &'p ValidatedProgram,
    /// The program's constants as values ([`ValidatedProgram::const_vals`]).
    pub(crate) consts: &'p [Val],
    pub(crate) limits: Limits,
    pub(crate) st: VmState,
    /// Bytes charged for each slot (derived from `st.slots`; not serialized).
    slot_bytes: Vec<u64>,
    pub(crate) final_slot: Option<Slot>,
    /// Set by `store` when `final_answer` is written; checked after each instruction.
    ended: bool,
    /// Instructions one `run()` may execute before returning (see [`Vm::set_step_slice`]).
    slice: Option<u64>,
    /// The step count at which the current `run()` stops: the step limit, or the end of
    /// the slice if that comes first (one comparison per step covers both).
    stop_at: u64,
    /// The last `run()` returned because its slice was used up.
    paused: bool,
    tracing: bool,
    /// `VarSet` events carry values of at most this many bytes (0: none).
    trace_values: u64,
    /// `VarSet` events that carry their value carry its preview too.
    trace_previews: bool,
    events: Vec<Event>,
}

/// Tool name, arguments and kind of a request about to be issued.
pub(crate) type RequestParts = (ToolName, Args, RequestKind);

/// The values one instruction stores: a multi-variable assign's, a call's outputs (on
/// the stack for up to 4 targets).
pub(crate) type AssignValues = smallvec::SmallVec<[(Slot, Val); 4]>;

/// A failure inside the VM, boxed so that `Result`s on the hot path stay small.
pub(crate) type Fault = Box<RunError>;

/// Why something may not be done: the error's code and message, placed by the caller.
pub(crate) type Why = (ErrorCode, String);

/// Which limit a value would exceed, with the figures. The message, which names the
/// variable, is made only when the refusal is reported ([`Refusal::why`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Refusal {
    TooDeep,
    ValueTooLarge { bytes: u64 },
    TotalTooLarge { total: u64 },
}

impl Refusal {
    /// The error for a value refused on its way into variable `name`.
    #[cold]
    pub(crate) fn why(self, name: &str, limits: &Limits) -> Why {
        match self {
            Refusal::TooDeep => (
                ErrorCode::TooDeep,
                format!("value for `{name}` is nested more than {MAX_VALUE_DEPTH} levels deep"),
            ),
            Refusal::ValueTooLarge { bytes } => (
                ErrorCode::ValueTooLarge,
                format!(
                    "value for `{name}` is {bytes} bytes, over the per-value limit of {} bytes \
                     (max_value_bytes)",
                    limits.max_value_bytes
                ),
            ),
            Refusal::TotalTooLarge { total } => (
                ErrorCode::TotalTooLarge,
                format!(
                    "variables would hold {total} bytes, over the limit of {} bytes (max_total_bytes)",
                    limits.max_total_bytes
                ),
            ),
        }
    }
}

impl<'p> Vm<'p> {
    /// A fresh run of `program`.
    pub fn new(program: &'p ValidatedProgram, limits: Limits) -> Self {
        let n = program.slots.len();
        Vm {
            prog: program,
            consts: program.const_vals(),
            limits,
            st: VmState::new(n, program.fingerprint()),
            slot_bytes: vec![0; n],
            final_slot: program.final_answer_slot(),
            ended: false,
            slice: None,
            stop_at: 0,
            paused: false,
            tracing: false,
            trace_values: 0,
            trace_previews: true,
            events: Vec::new(),
        }
    }

    /// Continues a saved run. The state is checked against the program (it may come from
    /// disk) and its byte counts are recomputed.
    pub fn from_state(
        program: &'p ValidatedProgram,
        state: VmState,
        limits: Limits,
    ) -> Result<Self, RunError> {
        let bad = |m: String| RunError {
            code: ErrorCode::BadState,
            message: format!("saved run does not match the program: {m}"),
            pc: None,
            seq_no: None,
            line: None,
        };
        state.check(program).map_err(bad)?;
        let mut vm = Vm::new(program, limits);
        let mut total: u64 = 0;
        for (i, v) in state.slots.iter().enumerate() {
            if let Some(v) = v {
                let size = v.size();
                if size.depth > MAX_VALUE_DEPTH {
                    return Err(bad(format!("slot {i} is nested too deeply")));
                }
                vm.slot_bytes[i] = size.bytes;
                total = total.saturating_add(size.bytes);
            }
        }
        for v in state.extra.values() {
            total = total.saturating_add(value_size(v).bytes);
        }
        vm.st = state;
        vm.st.bytes = total;
        Ok(vm)
    }

    /// Makes a fresh run start at `pc` instead of the first instruction: a branch of a
    /// stored run continues that run's variables (set with [`Vm::set_var`]) at one of the
    /// new plan's instructions. Only before the first `run()`.
    pub fn start_at(&mut self, pc: Pc) -> Result<(), RunError> {
        if self.st.steps != 0 || !self.st.pending.is_empty() || self.st.pc != 0 {
            return Err(unplaced((
                ErrorCode::BadState,
                "start_at: the run has already started".into(),
            )));
        }
        if pc as usize >= self.prog.code.len() {
            return Err(unplaced((
                ErrorCode::BadState,
                format!("start_at: pc {pc} is beyond the program"),
            )));
        }
        self.st.pc = pc;
        Ok(())
    }

    pub fn state(&self) -> &VmState {
        &self.st
    }

    pub fn into_state(self) -> VmState {
        self.st
    }

    pub fn program(&self) -> &'p ValidatedProgram {
        self.prog
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Sets [`Limits::max_concurrency`]: how many requests may be outstanding at once
    /// (1 = strictly sequential).
    pub fn set_max_concurrency(&mut self, n: u32) {
        self.limits.max_concurrency = n;
    }

    /// After the run ended (`Done`/`Failed`): requests issued ahead of the head that the
    /// run no longer needs and that have no answer yet. The host should cancel them
    /// (dropping their futures is enough); `resume` for them returns an error, which is
    /// harmless. Empty while the run is going on.
    pub fn abandoned(&self) -> Vec<Arc<ToolRequest>> {
        match self.st.status {
            Status::Running => Vec::new(),
            _ => self.st.unanswered(),
        }
    }

    /// Makes each `run()` return after at most `steps` instructions (`None`: run until a
    /// tool is needed, the default). A run that used up its slice returns
    /// `Halt::Yield(vec![])` with [`Vm::paused`] true; calling `run()` again continues.
    /// A host sets it so that its deadline is checked however long a plan computes
    /// without calling a tool.
    pub fn set_step_slice(&mut self, steps: Option<u64>) {
        self.slice = steps.map(|n| n.max(1));
    }

    /// Whether the last `run()` stopped only because its step slice was used up.
    pub fn paused(&self) -> bool {
        self.paused
    }

    /// Records trace events from now on (or stops).
    pub fn set_tracing(&mut self, on: bool) {
        self.tracing = on;
    }

    /// With tracing on, `VarSet` events also carry the value written when it holds at most
    /// `max_bytes` (0: never). A journal that keeps every step's writes asks for them;
    /// the cap keeps a loop that rewrites a large value from copying it at every step.
    pub fn set_trace_values(&mut self, max_bytes: u64) {
        self.trace_values = max_bytes;
    }

    /// Whether `VarSet` events that carry their value also carry its preview (on by
    /// default). A host whose readers use only the values turns them off: a preview is a
    /// string formatted for every variable written. An event without its value always
    /// has its preview.
    pub fn set_trace_previews(&mut self, on: bool) {
        self.trace_previews = on;
    }

    /// Drains the recorded trace events.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// Presets a variable (e.g. a goal). Call it before the first `run()`: requests
    /// already issued ahead of the head were resolved against the values of that time.
    /// A name the program never mentions is kept and reported in `Outcome::vars`. Byte
    /// limits apply. Setting `final_answer` this way does not end the run: only an
    /// instruction does.
    pub fn set_var(&mut self, name: &str, value: Value) -> Result<(), RunError> {
        let refused = |r: Refusal| unplaced(r.why(name, &self.limits));
        let size = self.measure(value_size(&value)).map_err(refused)?;
        match self.prog.slot_of(name) {
            Some(slot) => {
                let old = self.slot_bytes[slot as usize];
                self.st.bytes = self.charged(old, size).map_err(refused)?;
                self.slot_bytes[slot as usize] = size;
                self.st.slots[slot as usize] = Some(Val::from(value));
            }
            None => {
                let old = self.st.extra.get(name).map_or(0, |v| value_size(v).bytes);
                self.st.bytes = self.charged(old, size).map_err(refused)?;
                self.st.extra.insert(name.to_owned(), value);
            }
        }
        Ok(())
    }

    /// Delivers the host's answer to request `id` (a tool error as `Err(message)`, which
    /// fails the run at the instruction that issued it). The next `run()` consumes it.
    pub fn resume(&mut self, id: CallId, result: Result<Value, String>) -> Result<(), RunError> {
        if !matches!(self.st.status, Status::Running) {
            return Err(unplaced((
                ErrorCode::BadState,
                format!("cannot resume request {}: the run has ended", id.0),
            )));
        }
        let Some(p) = self.st.pending.iter_mut().find(|p| p.request.id == id) else {
            return Err(unplaced((
                ErrorCode::BadState,
                format!("no outstanding tool request with id {}", id.0),
            )));
        };
        if p.result.is_some() {
            return Err(unplaced((
                ErrorCode::BadState,
                format!("tool request {} was already answered", id.0),
            )));
        }
        // Reject over-deep outputs now so the suspended state always serializes and
        // parses back.
        let result = match result {
            Ok(v) if value_size(&v).depth > MAX_VALUE_DEPTH => Err(format!(
                "output nested more than {MAX_VALUE_DEPTH} levels deep"
            )),
            Ok(v) => Ok(Val::from(v)),
            Err(e) => Err(e),
        };
        p.result = Some(result);
        Ok(())
    }

    /// Runs until the VM needs tool results, finishes, or fails.
    ///
    /// First commits at the head, in program order, everything that can be committed
    /// (answered requests, then plain instructions, exactly as a sequential run); when
    /// the head waits for a tool, looks ahead and issues the independent calls after it.
    pub fn run(&mut self) -> Halt {
        match &self.st.status {
            Status::Running => {}
            Status::Done => return Halt::Done(self.take_outcome()),
            Status::Failed { error } => return Halt::Failed(error.clone()),
        }
        let mut issued = Vec::new();
        self.paused = false;
        self.stop_at = match self.slice {
            Some(n) => self.st.steps.saturating_add(n).min(self.limits.max_steps),
            None => self.limits.max_steps,
        };
        if let Some(halt) = self.dispatch(&mut issued) {
            return halt;
        }
        if self.paused {
            // The head is not waiting for a tool: nothing to look ahead for yet.
            return Halt::Yield(issued);
        }
        let ahead = self.scan();
        for a in ahead {
            issued.push(self.issue(a.instance, a.pc, a.tool, a.args, a.kind));
        }
        Halt::Yield(issued)
    }

    /// Executes at the head until it waits for an unanswered request (`None`; the head's
    /// new request, if it issued one, is pushed to `issued`) or the run ends.
    fn dispatch(&mut self, issued: &mut Vec<Arc<ToolRequest>>) -> Option<Halt> {
        let code = &self.prog.code;
        loop {
            let pc = self.st.pc;
            let Some(&instr) = code.get(pc as usize) else {
                return Some(self.fall_off_end());
            };
            let r: Result<(), Fault> = match instr {
                // NB: suspension points: the head commits these only once answered.
                Instr::Call { .. } | Instr::Branch { .. } => {
                    if self.st.steps >= self.limits.max_steps {
                        return Some(self.step_limit(pc));
                    }
                    match self.head_request(pc) {
                        Err(e) => Err(e),
                        Ok(Some(i)) if self.st.pending[i].result.is_some() => {
                            let p = self.st.pending.remove(i);
                            self.st.steps += 1;
                            if self.tracing {
                                self.trace_step(pc);
                            }
                            self.complete(p)
                        }
                        Ok(Some(_)) => return None,
                        Ok(None) => {
                            match self.head_request_args(pc, instr) {
                                Ok((tool, args, kind)) => {
                                    let instance = self.st.steps;
                                    issued.push(self.issue(instance, pc, tool, args, kind));
                                    return None;
                                }
                                // The head's own failure: placed and counted as a
                                // sequential run would (the step is being executed).
                                Err(e) => {
                                    self.st.steps += 1;
                                    if self.tracing {
                                        self.trace_step(pc);
                                    }
                                    Err(e)
                                }
                            }
                        }
                    }
                }
                _ => {
                    if self.st.steps >= self.stop_at {
                        if self.st.steps >= self.limits.max_steps {
                            return Some(self.step_limit(pc));
                        }
                        // NB: the slice is over; `pc` runs first on the next `run()`.
                        self.paused = true;
                        return None;
                    }
                    self.st.steps += 1;
                    if self.tracing {
                        self.trace_step(pc);
                    }
                    match instr {
                        Instr::Nop => {
                            self.st.pc = pc + 1;
                            continue;
                        }
                        Instr::Jump { target } => {
                            if self.tracing {
                                self.trace_jump(pc, target, None);
                            }
                            self.st.pc = target;
                            continue;
                        }
                        Instr::Set { dst, src } => self.op_set(pc, dst, src),
                        Instr::Assign { assign } => self.op_assign(pc, assign),
                        Instr::Call { .. } | Instr::Branch { .. } => Ok(()),
                    }
                }
            };
            if let Err(e) = r {
                return Some(self.fail(*e));
            }
            if self.ended {
                return Some(self.finish());
            }
        }
    }

    /// Index in `pending` of the request of the head instance, if issued.
    fn head_request(&self, pc: Pc) -> Result<Option<usize>, Fault> {
        let instance = self.st.steps;
        match self
            .st
            .pending
            .iter()
            .position(|p| p.request.instance == instance)
        {
            Some(i) if self.st.pending[i].request.pc != pc => Err(self.error_at(
                pc,
                ErrorCode::Internal,
                format!(
                    "internal error: request {} was issued for another instruction",
                    self.st.pending[i].request.id.0
                ),
            )),
            found => Ok(found),
        }
    }

    fn head_request_args(&self, pc: Pc, instr: Instr) -> Result<RequestParts, Fault> {
        let slots = &self.st.slots[..];
        match instr {
            Instr::Call { call } => self.call_request(slots, pc, call),
            Instr::Branch { cond, .. } => self.cond_request(slots, pc, cond),
            _ => Err(self.error_at(
                pc,
                ErrorCode::Internal,
                "internal error: request from a non-call".into(),
            )),
        }
    }

    /// Index in `pending` of the request issued by instance `instance`, if any.
    pub(crate) fn pending_for(&self, instance: u64) -> Option<&Pending> {
        self.st
            .pending
            .iter()
            .find(|p| p.request.instance == instance)
    }

    #[inline]
    fn op_set(&mut self, pc: Pc, dst: Slot, src: plan_bytecode::Operand) -> Result<(), Fault> {
        if let plan_bytecode::Operand::Template(t) = src
            && self.is_append(dst, t)
        {
            return self.op_append(pc, dst, t);
        }
        let v = self.resolve(src)?;
        self.store(dst, v)?;
        self.st.pc = pc + 1;
        Ok(())
    }

    /// `s = "${s}..."` where `s` holds a string: the rest of the template is appended to
    /// the stored string where it is, so a loop growing a string costs what it appends,
    /// not a copy of everything so far per iteration. Same result, limits, errors and
    /// state as building the text anew.
    fn op_append(&mut self, pc: Pc, dst: Slot, t: u32) -> Result<(), Fault> {
        let suffix = self.suffix(pc, dst, t)?;
        self.store_appended(dst, suffix)?;
        self.st.pc = pc + 1;
        Ok(())
    }

    /// Whether `slot = template t` can extend `slot`'s string in place. Out of line: the
    /// dispatch loop pays one compare for it on other operands.
    #[inline(never)]
    fn is_append(&self, slot: Slot, t: u32) -> bool {
        matches!(self.st.slots[slot as usize], Some(Val::Str(_))) && self.appends_to(t, slot)
    }

    /// What `slot = template t` adds to `slot`'s string (see [`Vm::appends_to`]).
    fn suffix(&self, pc: Pc, slot: Slot, t: u32) -> Result<String, Fault> {
        self.template_suffix(&self.st.slots[..], pc, t, self.string_len(slot))
    }

    /// Length of the string in `slot` (0 if it holds none).
    fn string_len(&self, slot: Slot) -> usize {
        match &self.st.slots[slot as usize] {
            Some(Val::Str(s)) => s.len(),
            _ => 0,
        }
    }

    /// Stores `slot`'s string extended by `suffix`, as `store` would store the whole
    /// text: the limits are checked first, so on failure the slot is left as it was.
    fn store_appended(&mut self, slot: Slot, suffix: String) -> Result<(), Fault> {
        let bytes = plan_value::NODE_BYTES
            .saturating_add(self.string_len(slot) as u64)
            .saturating_add(suffix.len() as u64);
        self.within_value_limit(bytes)
            .and_then(|b| self.charged(self.slot_bytes[slot as usize], b))
            .map_err(|r| self.store_refused(slot, r))?;
        let Some(Val::Str(mut text)) = self.st.slots[slot as usize].take() else {
            return Err(self.error_here((
                ErrorCode::Internal,
                "internal error: append to a non-string".into(),
            )));
        };
        text.push_str(&suffix);
        self.store(slot, Val::Str(text))
    }

    fn op_assign(&mut self, pc: Pc, assign: u32) -> Result<(), Fault> {
        // One target of the form `s = "${s}..."` may extend its string in place. Values
        // are still computed in order and all before any is stored (that target's only
        // as the text it adds), so errors and what each value sees are unchanged.
        let prog = self.prog;
        let targets = &prog.assigns[assign as usize].targets;
        // NB: only a slot no other target writes (a hand-made program may name a slot
        // twice; the text must extend the value the slot holds now).
        let append = targets.iter().position(|&(slot, op)| {
            matches!(op, plan_bytecode::Operand::Template(t) if self.is_append(slot, t))
                && targets.iter().filter(|&&(s, _)| s == slot).count() == 1
        });
        let Some(k) = append else {
            // Why one and two targets apart: their values go straight from `resolve_in`
            // to `store`. Through the list, each value was copied in and out with loads
            // wider than the stores that had just written it (two store-forwarding
            // stalls per value, measured: a quarter of the dispatch loop's time).
            match targets[..] {
                [(slot, op)] => {
                    let v = self.resolve_in(&self.st.slots[..], pc, op)?;
                    self.store(slot, v)?;
                }
                [(s0, op0), (s1, op1)] => {
                    let v0 = self.resolve_in(&self.st.slots[..], pc, op0)?;
                    let v1 = self.resolve_in(&self.st.slots[..], pc, op1)?;
                    self.store(s0, v0)?;
                    self.store(s1, v1)?;
                }
                _ => {
                    let values = self.assign_values(&self.st.slots[..], pc, assign)?;
                    for (slot, v) in values {
                        self.store(slot, v)?;
                    }
                }
            }
            self.st.pc = pc + 1;
            return Ok(());
        };
        let mut values = AssignValues::with_capacity(targets.len());
        let mut suffix = String::new();
        for (i, &(slot, op)) in targets.iter().enumerate() {
            match op {
                plan_bytecode::Operand::Template(t) if i == k => {
                    suffix = self.suffix(pc, slot, t)?;
                    values.push((slot, Val::Null));
                }
                _ => values.push((slot, self.resolve_in(&self.st.slots[..], pc, op)?)),
            }
        }
        for (i, (slot, v)) in values.into_iter().enumerate() {
            if i == k {
                self.store_appended(slot, std::mem::take(&mut suffix))?;
            } else {
                self.store(slot, v)?;
            }
        }
        self.st.pc = pc + 1;
        Ok(())
    }

    /// Every value of a multi-variable assign, before any store: `a, b = b, a` swaps.
    pub(crate) fn assign_values<S: SlotView + ?Sized>(
        &self,
        view: &S,
        pc: Pc,
        assign: u32,
    ) -> Result<AssignValues, Fault> {
        let targets = &self.prog.assigns[assign as usize].targets;
        let mut values = AssignValues::with_capacity(targets.len());
        for &(slot, op) in targets {
            values.push((slot, self.resolve_in(view, pc, op)?));
        }
        Ok(values)
    }

    /// The request a call instruction sends, with its arguments resolved against `view`.
    pub(crate) fn call_request<S: SlotView + ?Sized>(
        &self,
        view: &S,
        pc: Pc,
        call: u32,
    ) -> Result<RequestParts, Fault> {
        let prog = self.prog;
        let def = &prog.calls[call as usize];
        let mut args = smallvec::SmallVec::with_capacity(def.args.len());
        let mut bytes: u64 = 0;
        for (&(_, op), name) in def.args.iter().zip(prog.arg_names(call)) {
            let v = self.resolve_in(view, pc, op)?;
            bytes = bytes.saturating_add(v.size().bytes);
            if bytes > self.limits.max_total_bytes {
                return Err(self.error_at(
                    pc,
                    ErrorCode::TotalTooLarge,
                    format!(
                        "tool arguments would be more than {} bytes, over the limit of {} bytes \
                         (max_total_bytes)",
                        bytes, self.limits.max_total_bytes
                    ),
                ));
            }
            args.push((name.clone(), v.into_value()));
        }
        let output_keys = (def.outputs.len() > 1).then(|| {
            def.outputs
                .iter()
                .map(|&s| prog.slots[s as usize].clone())
                .collect()
        });
        let tool = match prog.tool_name(def.tool) {
            Some(name) => name.clone().into(),
            None => prog.tools[def.tool as usize].name.as_str().into(),
        };
        Ok((
            tool,
            Args::from_pairs(args),
            RequestKind::Tool { output_keys },
        ))
    }

    /// The request a condition sends, resolved against `view`.
    pub(crate) fn cond_request<S: SlotView + ?Sized>(
        &self,
        view: &S,
        pc: Pc,
        cond: u32,
    ) -> Result<RequestParts, Fault> {
        let def = &self.prog.conds[cond as usize];
        let prompt = self.resolve_in(view, pc, def.prompt)?.into_text();
        let context = match def.context {
            Some(op) => self.resolve_in(view, pc, op)?.into_value(),
            None => Value::Null,
        };
        let [p, c] = &*CONDITION_ARGS;
        let args = smallvec::smallvec![(p.clone(), Value::String(prompt)), (c.clone(), context)];
        Ok((
            CONDITION_TOOL_NAME.clone(),
            Args::from_pairs(args),
            RequestKind::Condition,
        ))
    }

    /// Records a request as outstanding. NB: the instruction that issued it commits only
    /// when the head reaches `instance` and the result is in.
    fn issue(
        &mut self,
        instance: u64,
        pc: Pc,
        tool: ToolName,
        args: Args,
        kind: RequestKind,
    ) -> Arc<ToolRequest> {
        let id = CallId(self.st.next_call);
        self.st.next_call += 1;
        let request = Arc::new(ToolRequest {
            id,
            tool,
            args,
            kind,
            pc,
            seq_no: self.prog.seq_no_at(pc),
            instance,
        });
        self.st.pending.push(Pending {
            request: request.clone(),
            result: None,
        });
        request
    }

    /// Commits an answered request at the head: stores outputs or takes the branch.
    fn complete(&mut self, p: Pending) -> Result<(), Fault> {
        let pc = p.request.pc;
        let result = p.result.unwrap_or_else(|| Err("no result".into()));
        match self.prog.code[pc as usize] {
            Instr::Call { call } => {
                let output = result.map_err(|m| {
                    self.error_at(
                        pc,
                        ErrorCode::ToolFailed,
                        format!("tool `{}` failed: {m}", p.request.tool),
                    )
                })?;
                for (slot, v) in self.outputs_of(pc, call, &p.request.tool, output)? {
                    self.store(slot, v)?;
                }
                self.st.pc = pc + 1;
            }
            Instr::Branch {
                if_true, if_false, ..
            } => {
                let taken = self.branch_answer(pc, result)?;
                let target = if taken { if_true } else { if_false };
                if self.tracing {
                    self.trace_jump(pc, target, Some(taken));
                }
                self.st.pc = target;
            }
            _ => {
                return Err(self.error_at(
                    pc,
                    ErrorCode::Internal,
                    "internal error: request from a non-call".into(),
                ));
            }
        }
        Ok(())
    }

    fn branch_answer(&self, pc: Pc, result: Result<Val, String>) -> Result<bool, Fault> {
        let answer = result.map_err(|m| {
            self.error_at(
                pc,
                ErrorCode::ToolFailed,
                format!("condition call failed: {m}"),
            )
        })?;
        parse_condition_answer(&answer.into_value())
            .map_err(|m| self.error_at(pc, ErrorCode::BadConditionAnswer, m))
    }

    /// The values a call's output variables take from its `output`, or why it has none.
    /// Checks every key before returning any, so a failure leaves no partial writes.
    pub(crate) fn outputs_of(
        &self,
        pc: Pc,
        call: u32,
        tool: &str,
        output: Val,
    ) -> Result<AssignValues, Fault> {
        let prog = self.prog;
        let outputs = &prog.calls[call as usize].outputs;
        match outputs.len() {
            0 => Ok(AssignValues::new()),
            1 => Ok(smallvec::smallvec![(outputs[0], output)]),
            _ => {
                let extracted;
                let json_object = match &output {
                    Val::Json(j) => j.as_object(),
                    _ => None,
                };
                let obj =
                    match (&output, json_object) {
                        (_, Some(m)) => m,
                        (Val::Str(s), None) => match extract_first_object(s) {
                            Some(m) => {
                                extracted = m;
                                &extracted
                            }
                            None => {
                                return Err(self.error_at(pc, ErrorCode::MissingOutput, format!(
                                "output of tool `{tool}` has no JSON object with keys {}: {}",
                                key_list(outputs.iter().map(|&s| prog.slots[s as usize].as_str())),
                                preview_val(&output, ERROR_PREVIEW)
                            )));
                            }
                        },
                        (other, None) => {
                            return Err(self.error_at(pc, ErrorCode::MissingOutput, format!(
                            "output of tool `{tool}` is not a JSON object (needed for keys {}): {}",
                            key_list(outputs.iter().map(|&s| prog.slots[s as usize].as_str())),
                            preview_val(other, ERROR_PREVIEW)
                        )));
                        }
                    };
                let mut values = AssignValues::with_capacity(outputs.len());
                for &slot in outputs {
                    let key = prog.slots[slot as usize].as_str();
                    match obj.get(key) {
                        Some(v) => values.push((slot, Val::from(v))),
                        None => {
                            return Err(self.error_at(pc, ErrorCode::MissingOutput, format!(
                                "output of tool `{tool}` has no key `{key}` (keys present: {}): {}",
                                key_list(obj.keys().map(String::as_str)),
                                preview_val(&output, ERROR_PREVIEW)
                            )));
                        }
                    }
                }
                Ok(values)
            }
        }
    }

    /// Writes `v` into `slot`, enforcing the byte and depth limits.
    // Inlined: saving and restoring registers around the call was about a third of its
    // instructions (30 assigns: 34,218 → 33,689 instructions per run).
    #[inline(always)]
    fn store(&mut self, slot: Slot, v: Val) -> Result<(), Fault> {
        let s = slot as usize;
        let size = v.size();
        // NB: the slot's name is loaded only to say why a value is refused: loading it
        // on every store was a measurable part of each.
        let total = match self
            .measure(size)
            .and_then(|bytes| self.charged(self.slot_bytes[s], bytes))
        {
            Ok(total) => total,
            Err(r) => return Err(self.store_refused(slot, r)),
        };
        self.st.bytes = total;
        self.slot_bytes[s] = size.bytes;
        if self.tracing {
            self.trace_store(slot, &v, size.bytes);
        }
        self.st.slots[s] = Some(v);
        if Some(slot) == self.final_slot {
            self.ended = true;
        }
        Ok(())
    }

    /// The error of a store into `slot` that `r` refused, naming the variable.
    #[cold]
    #[inline(never)]
    fn store_refused(&self, slot: Slot, r: Refusal) -> Fault {
        self.error_here(r.why(&self.prog.slots[slot as usize], &self.limits))
    }

    /// The trace event of a store of `v` (`bytes` as charged) into `slot`.
    #[inline(never)]
    fn trace_store(&mut self, slot: Slot, v: &Val, bytes: u64) {
        let value = (bytes <= self.trace_values).then(|| v.to_value());
        let preview = if self.trace_previews || value.is_none() {
            preview_val(v, TRACE_PREVIEW)
        } else {
            String::new()
        };
        self.events.push(Event::VarSet {
            name: self.prog.slots[slot as usize].as_str().to_owned(),
            preview,
            bytes,
            value,
        });
    }

    /// Bytes of a value of `size`, or which limit it is over.
    #[inline]
    pub(crate) fn measure(&self, size: plan_value::ValueSize) -> Result<u64, Refusal> {
        if size.depth > MAX_VALUE_DEPTH {
            return Err(Refusal::TooDeep);
        }
        self.within_value_limit(size.bytes)
    }

    /// `bytes`, if one value of that size may be stored.
    #[inline]
    fn within_value_limit(&self, bytes: u64) -> Result<u64, Refusal> {
        if bytes > self.limits.max_value_bytes {
            return Err(Refusal::ValueTooLarge { bytes });
        }
        Ok(bytes)
    }

    /// The running total with `old` bytes replaced by `new`, if within `max_total_bytes`.
    #[inline]
    fn charged(&self, old: u64, new: u64) -> Result<u64, Refusal> {
        let total = self.st.bytes.saturating_sub(old).saturating_add(new);
        if total > self.limits.max_total_bytes {
            return Err(Refusal::TotalTooLarge { total });
        }
        Ok(total)
    }

    /// The outcome of a finished run. The run is over, so its variables *move* into
    /// `vars` instead of being copied; only `final_answer` stays in its slot, so that
    /// `run()` on the finished VM returns the same answer again.
    fn take_outcome(&mut self) -> Outcome {
        let final_answer = self
            .final_slot
            .and_then(|s| self.st.slots[s as usize].as_ref())
            .map_or(Value::Null, Val::to_value);
        let extra = std::mem::take(&mut self.st.extra);
        let final_slot = self.final_slot.map_or(usize::MAX, |s| s as usize);
        let kept = self.slot_bytes.get(final_slot).copied().unwrap_or(0);
        // NB: the values move as they are; they become JSON only if the host reads them
        // as JSON (see `Vars`).
        let values = self
            .st
            .slots
            .iter_mut()
            .zip(&mut self.slot_bytes)
            .enumerate()
            .map(|(i, (v, b))| {
                if i == final_slot {
                    return v.clone();
                }
                *b = 0;
                v.take()
            })
            .collect();
        self.st.bytes = kept;
        Outcome {
            final_answer,
            vars: crate::Vars::new(self.prog.slot_names().clone(), values, extra),
            steps: self.st.steps,
        }
    }

    fn finish(&mut self) -> Halt {
        self.st.status = Status::Done;
        Halt::Done(self.take_outcome())
    }

    #[cold]
    fn fail(&mut self, e: RunError) -> Halt {
        self.st.status = Status::Failed { error: e.clone() };
        Halt::Failed(e)
    }

    #[cold]
    fn fall_off_end(&mut self) -> Halt {
        let last = (self.prog.code.len() as Pc).saturating_sub(1);
        let e = self.error_at(
            last,
            ErrorCode::NoFinalAnswer,
            "plan ended without setting final_answer".into(),
        );
        self.fail(*e)
    }

    #[cold]
    fn step_limit(&mut self, pc: Pc) -> Halt {
        let e = self.error_at(
            pc,
            ErrorCode::StepLimit,
            format!(
                "step limit exceeded: the plan executed {} instructions (max_steps = {}); \
                 raise it with --max-steps",
                self.limits.max_steps, self.limits.max_steps
            ),
        );
        self.fail(*e)
    }

    /// An error at the current instruction.
    #[cold]
    pub(crate) fn error_here(&self, (code, message): Why) -> Fault {
        self.error_at(self.st.pc, code, message)
    }

    #[cold]
    pub(crate) fn error_at(&self, pc: Pc, code: ErrorCode, message: String) -> Fault {
        let seq_no = self.prog.seq_no_at(pc);
        let line = self.prog.line_at(pc);
        Box::new(RunError {
            code,
            message,
            pc: Some(pc),
            seq_no,
            line,
        })
    }

    #[cold]
    fn trace_step(&mut self, pc: Pc) {
        let p = self.prog;
        self.events.push(Event::Step {
            pc,
            seq_no: p.seq_no_at(pc),
            op: p.op_name(pc).to_owned(),
        });
    }

    #[cold]
    fn trace_jump(&mut self, from: Pc, to: Pc, taken: Option<bool>) {
        let p = self.prog;
        self.events.push(Event::Jump {
            from_seq: p.seq_no_at(from),
            to_seq: p.seq_no_at(to),
            taken,
        });
    }
}

fn key_list<'a>(keys: impl Iterator<Item = &'a str>) -> String {
    let keys: Vec<String> = keys.map(|k| format!("`{k}`")).collect();
    if keys.is_empty() {
        "(none)".to_owned()
    } else {
        keys.join(", ")
    }
}

/// An error not tied to an instruction (preset variables, resume misuse).
#[cold]
fn unplaced((code, message): Why) -> RunError {
    RunError {
        code,
        message,
        pc: None,
        seq_no: None,
        line: None,
    }
}
