//! Operands → values, against a view of the slots: the committed slots when the head
//! executes, or the committed slots overlaid with finished look-ahead results when the
//! scheduler (`sched.rs`) evaluates ahead of the head.
//!
//! Rules (docs/semantics.md): a constant is cloned; a single reference passes the value
//! unchanged (dotted keys walk objects, arrays by decimal index, and strings holding a
//! JSON object/array); an unset reference is its own raw text; a template is interpolated
//! in ONE pass (inserted text is never rescanned); arithmetic falls back to its template's
//! text when an operand is not numeric or an operation fails.
//!
//! Every value built here is measured before (templates) or while (arrays, objects) it is
//! built, so no operand can allocate much beyond the per-value limit.

use std::borrow::Cow;
use std::sync::Arc;

use plan_bytecode::limits::MAX_ARITH_STACK;
use plan_bytecode::{ArithOp, Operand, Pc, Piece, RefDef, Slot};
use plan_value::{NODE_BYTES, Num, Val, binary, interpolated_len, unary, write_interpolated};
use serde_json::{Map, Value};

use crate::ErrorCode;
use crate::view::SlotView;
use crate::vm::{Fault, MAX_VALUE_DEPTH, Vm};

impl<'p> Vm<'p> {
    /// The value of `op` against the committed slots, for the head instruction.
    #[inline]
    pub(crate) fn resolve(&self, op: Operand) -> Result<Val, Fault> {
        self.resolve_in(&self.st.slots[..], self.st.pc, op)
    }

    /// The value of `op` against `view`; errors are placed at `pc`.
    pub(crate) fn resolve_in<S: SlotView + ?Sized>(
        &self,
        view: &S,
        pc: Pc,
        op: Operand,
    ) -> Result<Val, Fault> {
        let p = self.prog;
        match op {
            Operand::Const(c) => Ok(self.consts[c as usize].clone()),
            Operand::Ref(r) => {
                let def = &p.refs[r as usize];
                Ok(match lookup(self, view, def) {
                    Some(v) => v.into_val(),
                    None => Val::Str(self.const_str(def.raw).to_owned()),
                })
            }
            Operand::Template(t) => self.template(view, pc, t).map(Val::Str),
            Operand::Arith(a) => {
                let def = &p.ariths[a as usize];
                match self.arith(view, &def.code) {
                    Some(n) => Ok(Val::from(n)),
                    None => self.template(view, pc, def.fallback).map(Val::Str),
                }
            }
            // NB: validation bounds Array/Object nesting (MAX_OPERAND_DEPTH), so this
            // recursion is bounded.
            Operand::Array(i) => {
                let items = &p.arrays[i as usize];
                let mut out = Vec::with_capacity(items.len());
                let mut bytes = NODE_BYTES;
                for &item in items {
                    let v = self.resolve_in(view, pc, item)?;
                    bytes = bytes.saturating_add(self.check_built(pc, &v, bytes)?);
                    out.push(v.into_value());
                }
                Ok(Val::Json(Arc::new(Value::Array(out))))
            }
            Operand::Object(i) => {
                let entries = &p.objects[i as usize];
                let mut out = Map::with_capacity(entries.len());
                let mut bytes = NODE_BYTES;
                for &(k, item) in entries {
                    let key = self.const_str(k);
                    let v = self.resolve_in(view, pc, item)?;
                    let entry = NODE_BYTES.saturating_add(key.len() as u64);
                    bytes = bytes.saturating_add(entry);
                    bytes = bytes.saturating_add(self.check_built(pc, &v, bytes)?);
                    out.insert(key.to_owned(), v.into_value());
                }
                Ok(Val::Json(Arc::new(Value::Object(out))))
            }
        }
    }

    /// Measures an element about to join an array/object of `so_far` bytes; fails when
    /// the container would exceed the per-value limit or nest too deep.
    fn check_built(&self, pc: Pc, v: &Val, so_far: u64) -> Result<u64, Fault> {
        let size = v.size();
        if size.depth >= MAX_VALUE_DEPTH {
            return Err(self.error_at(
                pc,
                ErrorCode::TooDeep,
                format!("value nested more than {MAX_VALUE_DEPTH} levels deep"),
            ));
        }
        let total = so_far.saturating_add(size.bytes);
        if total > self.limits.max_value_bytes {
            return Err(self.error_at(
                pc,
                ErrorCode::ValueTooLarge,
                format!(
                    "value would be more than {} bytes, over the per-value limit of {} bytes \
                 (max_value_bytes)",
                    total, self.limits.max_value_bytes
                ),
            ));
        }
        Ok(size.bytes)
    }

    /// A string constant (validation guarantees the constants used as text are strings).
    pub(crate) fn const_str(&self, c: u32) -> &'p str {
        match &self.consts[c as usize] {
            Val::Str(s) => s,
            _ => "",
        }
    }

    /// Interpolates template `t` in one pass, checking the byte limit before each piece
    /// joins the text: a doubling loop (`x = "${x}${x}"`) fails without allocating more
    /// than the limit. Each value is looked up and formatted once (a float's repr is the
    /// costly part).
    pub(crate) fn template<S: SlotView + ?Sized>(
        &self,
        view: &S,
        pc: Pc,
        t: u32,
    ) -> Result<String, Fault> {
        let pieces = &self.prog.templates[t as usize];
        let limit = self.template_limit();
        // Sized for the literals plus a short value per reference: one allocation for
        // typical templates.
        let refs = pieces.len() / 2 + 1;
        let hint = self.prog.template_lit_bytes(t) + refs * 16;
        let mut out = String::with_capacity(hint.min(limit));
        if self.template_extend(view, t, 0, 0, &mut out) {
            Ok(out)
        } else {
            Err(self.template_too_long(view, pc, t))
        }
    }

    /// The text template `t` adds after its first piece, for a text of `base` bytes that
    /// already holds that piece (see [`Vm::appends_to`]): checked against the limit for
    /// the whole text, and failing with the whole text's length, exactly as if it were
    /// built anew.
    pub(crate) fn template_suffix<S: SlotView + ?Sized>(
        &self,
        view: &S,
        pc: Pc,
        t: u32,
        base: usize,
    ) -> Result<String, Fault> {
        let mut out = String::new();
        if self.template_extend(view, t, 1, base, &mut out) {
            Ok(out)
        } else {
            Err(self.template_too_long(view, pc, t))
        }
    }

    /// Appends the pieces of template `t` from `from` on to `out`, checking the byte limit
    /// (for `base` bytes of text before `out`) before each piece joins; false when the
    /// text would go over it (`out` then holds part of the text).
    fn template_extend<S: SlotView + ?Sized>(
        &self,
        view: &S,
        t: u32,
        from: usize,
        base: usize,
        out: &mut String,
    ) -> bool {
        let pieces = &self.prog.templates[t as usize];
        let limit = self.template_limit().saturating_sub(base);
        for piece in pieces.iter().skip(from) {
            let fits = match *piece {
                Piece::Lit(c) => push_within(out, self.const_str(c), limit),
                Piece::Ref(r) => {
                    let def = &self.prog.refs[r as usize];
                    match lookup(self, view, def) {
                        Some(Found::Val(v)) => append_val(out, v, limit),
                        Some(Found::Json(v)) => append_json(out, &v, limit),
                        None => push_within(out, self.const_str(def.raw), limit),
                    }
                }
            };
            if !fits {
                return false;
            }
        }
        true
    }

    /// Whether template `t`, stored into `dst`, starts with `${dst}` (no dotted path) and
    /// reads `dst` nowhere else: then the stored string can be extended where it is.
    pub(crate) fn appends_to(&self, t: u32, dst: Slot) -> bool {
        let pieces = &self.prog.templates[t as usize];
        let reads_dst = |p: &Piece| match *p {
            Piece::Ref(r) => self.prog.refs[r as usize].slot == dst,
            Piece::Lit(_) => false,
        };
        match pieces.split_first() {
            Some((&Piece::Ref(r), rest)) => {
                let def = &self.prog.refs[r as usize];
                def.slot == dst && def.path.is_empty() && !rest.iter().any(reads_dst)
            }
            _ => false,
        }
    }

    /// Most bytes of text one interpolation may produce.
    fn template_limit(&self) -> usize {
        let limit = self.limits.max_value_bytes.min(self.limits.max_total_bytes);
        usize::try_from(limit.saturating_sub(NODE_BYTES)).unwrap_or(usize::MAX)
    }

    /// The error for a template over the limit, with its exact length (measured again,
    /// without building it: this is the failure path only).
    #[cold]
    pub(crate) fn template_too_long<S: SlotView + ?Sized>(
        &self,
        view: &S,
        pc: Pc,
        t: u32,
    ) -> Fault {
        let mut len: u64 = 0;
        for piece in &self.prog.templates[t as usize] {
            let n = match *piece {
                Piece::Lit(c) => self.const_str(c).len() as u64,
                Piece::Ref(r) => {
                    let def = &self.prog.refs[r as usize];
                    match lookup(self, view, def) {
                        Some(Found::Val(v)) => v.interpolated_len(),
                        Some(Found::Json(v)) => interpolated_len(&v),
                        None => self.const_str(def.raw).len() as u64,
                    }
                }
            };
            len = len.saturating_add(n);
        }
        let limit = self.limits.max_value_bytes.min(self.limits.max_total_bytes);
        // NB: a string value is charged its length plus NODE_BYTES, so the text itself
        // may hold that much less than the limit: say so, or a text of exactly the limit
        // would read as "N bytes, over the limit of N".
        let text_limit = self.template_limit();
        // NB: named after the tighter of the two limits it is checked against.
        let code = if self.limits.max_total_bytes < self.limits.max_value_bytes {
            ErrorCode::TotalTooLarge
        } else {
            ErrorCode::ValueTooLarge
        };
        self.error_at(
            pc,
            code,
            format!(
                "interpolated text would be {len} bytes, over the {text_limit} bytes one value's \
                 text may hold (max_value_bytes / max_total_bytes = {limit}, less {NODE_BYTES} \
                 bytes the value itself is charged)"
            ),
        )
    }

    /// Evaluates postfix arithmetic; `None` means "use the fallback text".
    fn arith<S: SlotView + ?Sized>(&self, view: &S, code: &[ArithOp]) -> Option<Num> {
        // The most common shapes need no stack at all: `${i} + 1`, and chains folded left
        // to right, `${n} * 2 + 1`, `(${n} + 3) / 4` (a leaf, then pairs of a leaf and a
        // binary operator). NB: the same operands and operations in the same order as
        // the stack would take them.
        if let [first, ref rest @ ..] = *code
            && rest.len() % 2 == 0
            && rest
                .chunks_exact(2)
                .all(|pair| matches!(pair, [ArithOp::Const(_) | ArithOp::Ref(_), ArithOp::Bin(_)]))
        {
            let mut acc = self.operand_num(view, first)?;
            for pair in rest.chunks_exact(2) {
                if let [leaf, ArithOp::Bin(op)] = *pair {
                    acc = binary(op, acc, self.operand_num(view, leaf)?)?;
                }
            }
            return Some(acc);
        }
        // On the machine stack: plan expressions are short. Deeper ones (validation
        // bounds the depth at MAX_ARITH_STACK) get a heap stack that fits any.
        if code.len() <= SHORT_ARITH {
            self.eval_postfix(view, code, &mut ScalarStack::<SHORT_ARITH>::new())
        } else {
            let mut stack = Box::new(ScalarStack::<MAX_ARITH_STACK>::new());
            self.eval_postfix(view, code, &mut stack)
        }
    }

    #[inline(always)]
    fn eval_postfix<S: SlotView + ?Sized, const N: usize>(
        &self,
        view: &S,
        code: &[ArithOp],
        stack: &mut ScalarStack<N>,
    ) -> Option<Num> {
        for op in code {
            match *op {
                leaf @ (ArithOp::Const(_) | ArithOp::Ref(_)) => {
                    stack.push(self.operand_num(view, leaf)?)?;
                }
                ArithOp::Un(op) => {
                    let a = stack.pop()?;
                    stack.push(unary(op, a)?)?;
                }
                ArithOp::Bin(op) => {
                    let b = stack.pop()?;
                    let a = stack.pop()?;
                    stack.push(binary(op, a, b)?)?;
                }
            }
        }
        // Validation guarantees exactly one value; be safe anyway (text fallback).
        if stack.len == 1 { stack.pop() } else { None }
    }

    /// A leaf of arithmetic code as a number (`None`: not a leaf, or not numeric).
    #[inline(always)]
    fn operand_num<S: SlotView + ?Sized>(&self, view: &S, op: ArithOp) -> Option<Num> {
        match op {
            ArithOp::Const(c) => self.consts[c as usize].to_num(),
            ArithOp::Ref(r) => {
                let def = &self.prog.refs[r as usize];
                // Not through `lookup` for a plain reference: building and reading its
                // result measured ~8% slower on `vm_dispatch/arith_jump_loop`.
                if def.path.is_empty() {
                    view.get(def.slot)?.to_num()
                } else {
                    match lookup(self, view, def)? {
                        Found::Val(v) => v.to_num(),
                        Found::Json(v) => plan_value::to_num(&v),
                    }
                }
            }
            _ => None,
        }
    }
}

/// Longest arithmetic code evaluated on a stack in the machine stack (its depth is at most
/// its length).
const SHORT_ARITH: usize = 16;

/// The operand stack of short arithmetic, as parallel scalar arrays.
///
/// Why not `[Num; N]`: a `Num` is copied as one 16-byte vector load right after being
/// written as two 8-byte stores (tag, payload), and that load stalls on store forwarding
/// (measured: most of the arithmetic time of `plan_run/30_assigns`). Tag and payload kept
/// apart are written and read with the same width.
struct ScalarStack<const N: usize> {
    is_float: [bool; N],
    bits: [u64; N],
    len: usize,
}

impl<const N: usize> ScalarStack<N> {
    fn new() -> Self {
        ScalarStack {
            is_float: [false; N],
            bits: [0; N],
            len: 0,
        }
    }

    #[inline(always)]
    fn push(&mut self, n: Num) -> Option<()> {
        let (is_float, bits) = match n {
            Num::Int(i) => (false, i as u64),
            Num::Float(f) => (true, f.to_bits()),
        };
        *self.is_float.get_mut(self.len)? = is_float;
        *self.bits.get_mut(self.len)? = bits;
        self.len += 1;
        Some(())
    }

    #[inline(always)]
    fn pop(&mut self) -> Option<Num> {
        self.len = self.len.checked_sub(1)?;
        let bits = *self.bits.get(self.len)?;
        Some(if *self.is_float.get(self.len)? {
            Num::Float(f64::from_bits(bits))
        } else {
            Num::Int(bits as i64)
        })
    }
}

/// Longest text of a scalar (`-1.7976931348623157e+308` is 24 bytes, an `i64` at most 20).
const MAX_SCALAR_TEXT: usize = 32;

/// Appends `s` unless the text would exceed `limit` bytes.
#[inline]
fn push_within(out: &mut String, s: &str, limit: usize) -> bool {
    let need = out.len().saturating_add(s.len());
    if need > limit {
        return false;
    }
    reserve_within(out, s.len(), limit);
    out.push_str(s);
    true
}

/// Makes room for `extra` more bytes, growing by doubling as `String` does, but never to
/// a capacity past `limit` (or the exact need, if that is more).
#[inline]
fn reserve_within(out: &mut String, extra: usize, limit: usize) {
    let need = out.len().saturating_add(extra);
    if need > out.capacity() {
        let target = need.max(out.capacity().saturating_mul(2).min(limit));
        out.reserve_exact(target - out.len());
    }
}

/// What a reference finds: a slot's value, or JSON inside one (a dotted path).
pub(crate) enum Found<'v> {
    Val(&'v Val),
    Json(Cow<'v, Value>),
}

impl Found<'_> {
    /// The value found, as a value of its own.
    pub(crate) fn into_val(self) -> Val {
        match self {
            Found::Val(v) => v.clone(),
            Found::Json(Cow::Borrowed(v)) => Val::from(v),
            Found::Json(Cow::Owned(v)) => Val::from(v),
        }
    }
}

/// Follows a reference; `None` when the slot is unset or a key is missing.
// Inlined: most references have no dotted path, and a call per template piece cost more
// than the lookup (measured on `interpolation/vm_template_loop_2KiB`).
#[inline(always)]
pub(crate) fn lookup<'v, S: SlotView + ?Sized>(
    vm: &Vm<'_>,
    view: &'v S,
    def: &RefDef,
) -> Option<Found<'v>> {
    let base = view.get(def.slot)?;
    if def.path.is_empty() {
        return Some(Found::Val(base));
    }
    follow_path(vm, base, &def.path).map(Found::Json)
}

/// The dotted-path part of [`lookup`].
fn follow_path<'v>(vm: &Vm<'_>, base: &'v Val, path: &[u32]) -> Option<Cow<'v, Value>> {
    let mut cur = match base {
        Val::Json(j) => Cow::Borrowed(&**j),
        Val::Str(s) => Cow::Owned(parse_container(s)?),
        _ => return None,
    };
    for &k in path {
        cur = step(cur, vm.const_str(k))?;
    }
    Some(cur)
}

/// One dotted-path step: object key, array index (decimal), or into a string that holds
/// a JSON object/array.
fn step<'a>(cur: Cow<'a, Value>, key: &str) -> Option<Cow<'a, Value>> {
    match cur {
        Cow::Borrowed(v) => match v {
            Value::Object(m) => m.get(key).map(Cow::Borrowed),
            Value::Array(a) => a.get(index(key)?).map(Cow::Borrowed),
            Value::String(s) => step(Cow::Owned(parse_container(s)?), key),
            _ => None,
        },
        Cow::Owned(v) => match v {
            Value::Object(mut m) => m.swap_remove(key).map(Cow::Owned),
            Value::Array(mut a) => {
                let i = index(key)?;
                (i < a.len()).then(|| Cow::Owned(a.swap_remove(i)))
            }
            Value::String(s) => step(Cow::Owned(parse_container(&s)?), key),
            _ => None,
        },
    }
}

fn index(key: &str) -> Option<usize> {
    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    key.parse().ok()
}

/// A string whose content is a JSON object or array (tool outputs often are).
fn parse_container(s: &str) -> Option<Value> {
    let t = s.trim();
    if !(t.starts_with('{') || t.starts_with('[')) {
        return None;
    }
    match serde_json::from_str::<Value>(t) {
        Ok(v @ (Value::Object(_) | Value::Array(_))) => Some(v),
        _ => None,
    }
}

/// Appends a slot's value to a template's text unless the text would exceed `limit`.
// Inlined into the template loop, like `lookup` (a call per piece measured slower).
#[inline(always)]
fn append_val(out: &mut String, v: &Val, limit: usize) -> bool {
    match v {
        Val::Str(s) => push_within(out, s, limit),
        Val::Json(j) => append_json(out, j, limit),
        // A scalar's text is short: written (formatted once), then checked.
        scalar => {
            reserve_within(out, MAX_SCALAR_TEXT, limit);
            scalar.write_interpolated(out);
            out.len() <= limit
        }
    }
}

/// Appends JSON found in a value, measured before it is rendered.
fn append_json(out: &mut String, v: &Value, limit: usize) -> bool {
    if let Value::String(s) = v {
        return push_within(out, s, limit);
    }
    let n = usize::try_from(interpolated_len(v)).unwrap_or(usize::MAX);
    let fits = out.len().saturating_add(n) <= limit;
    if fits {
        reserve_within(out, n, limit);
        write_interpolated(v, out);
    }
    fits
}
