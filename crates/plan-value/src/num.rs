//! Numbers with Python's rules: `int` and `float`, `/` always float, `%` takes the
//! divisor's sign, `**` bounded.
//!
//! Every operation returns `None` instead of an error value: the only thing callers do on
//! failure is fall back to the interpolated text, so the reason does not matter.
//! Deviations from Python, all deliberate and documented in docs/semantics.md:
//! - integers are `i64`; where Python would grow a bigint we fail (→ text fallback);
//! - non-finite results (`inf`, `nan`) fail instead of raising or propagating;
//! - a negative float base with a fractional exponent fails (Python gives a complex).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A number as the plan language sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Num {
    Int(i64),
    Float(f64),
}

/// Unary arithmetic operators. The one enum for them: the parser's AST, the bytecode's
/// arithmetic code and [`unary`] all use it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op1 {
    Neg,
    Pos,
}

/// Binary arithmetic operators. The one enum for them: the parser's AST, the bytecode's
/// arithmetic code and [`binary`] all use it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op2 {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Mod,
}

impl Op1 {
    /// As written in a plan.
    pub fn symbol(self) -> &'static str {
        match self {
            Op1::Neg => "-",
            Op1::Pos => "+",
        }
    }
}

impl Op2 {
    /// As written in a plan.
    pub fn symbol(self) -> &'static str {
        match self {
            Op2::Add => "+",
            Op2::Sub => "-",
            Op2::Mul => "*",
            Op2::Div => "/",
            Op2::Pow => "**",
            Op2::Mod => "%",
        }
    }
}

impl Num {
    fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

/// Reads a value as a number: JSON numbers (a `u64` beyond `i64` becomes a float) and
/// strings that parse as Python `int()` or `float()` after trimming ASCII whitespace.
/// Booleans, `inf`/`nan`, hex, underscores and non-finite results are not numbers.
#[inline]
pub fn to_num(v: &Value) -> Option<Num> {
    match v {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Some(Num::Int(i))
            } else {
                n.as_f64().filter(|f| f.is_finite()).map(Num::Float)
            }
        }
        Value::String(s) => parse_num(s),
        _ => None,
    }
}

/// Parses `s` as Python's `int(s)` then `float(s)` would (subset: no underscores, no
/// `inf`/`nan`). Integers beyond `i64` are not numbers (Python would make a bigint).
pub fn parse_num(s: &str) -> Option<Num> {
    let t = s.trim_matches(|c: char| c.is_ascii_whitespace());
    let b = t.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = i - int_start;
    if i == b.len() {
        if int_digits == 0 {
            return None;
        }
        // Rust's i64 parser accepts a leading '+', like Python.
        return t.parse::<i64>().ok().map(Num::Int);
    }
    let mut frac_digits = 0;
    if b[i] == b'.' {
        i += 1;
        let f = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = i - f;
    }
    if int_digits == 0 && frac_digits == 0 {
        return None;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let e = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == e {
            return None;
        }
    }
    if i != b.len() {
        return None;
    }
    // The grammar above is a subset of what Rust's float parser accepts.
    t.parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
        .map(Num::Float)
}

/// Converts a number back to a JSON value: the JSON of the VM's value for it (one rule
/// for both: a non-finite float, which no `Num` of this crate is, becomes null).
#[inline]
pub fn num_to_value(n: Num) -> Value {
    crate::Val::from(n).into_value()
}

#[inline]
fn finite(f: f64) -> Option<Num> {
    f.is_finite().then_some(Num::Float(f))
}

/// Applies a unary operator.
#[inline]
pub fn unary(op: Op1, n: Num) -> Option<Num> {
    match (op, n) {
        (Op1::Pos, n) => Some(n),
        (Op1::Neg, Num::Int(i)) => i.checked_neg().map(Num::Int),
        (Op1::Neg, Num::Float(f)) => finite(-f),
    }
}

/// Applies a binary operator with Python's rules; `None` on division or modulo by zero,
/// `i64` overflow, a non-finite result, `0 ** negative` or a complex result.
///
/// NB: always inlined. As a call, its operands and result went through memory (a `Num`
/// is not passed in registers), and the caller's 16-byte reload of the result, written
/// as a tag and a payload, stalled on store forwarding: 7% of the 30-assign plan.
#[inline(always)]
pub fn binary(op: Op2, a: Num, b: Num) -> Option<Num> {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => int_op(op, x, y),
        _ => float_op(op, a.as_f64(), b.as_f64()),
    }
}

#[inline]
fn int_op(op: Op2, x: i64, y: i64) -> Option<Num> {
    match op {
        Op2::Add => x.checked_add(y).map(Num::Int),
        Op2::Sub => x.checked_sub(y).map(Num::Int),
        Op2::Mul => x.checked_mul(y).map(Num::Int),
        Op2::Div => {
            if y == 0 {
                None
            } else {
                finite(x as f64 / y as f64)
            }
        }
        Op2::Mod => {
            if y == 0 {
                return None;
            }
            if y == -1 {
                // Python: anything % -1 == 0; Rust's i64::MIN % -1 overflows.
                return Some(Num::Int(0));
            }
            let r = x % y;
            Some(Num::Int(if r != 0 && ((r < 0) != (y < 0)) {
                r + y
            } else {
                r
            }))
        }
        Op2::Pow => int_pow(x, y),
    }
}

fn int_pow(x: i64, y: i64) -> Option<Num> {
    if y < 0 {
        if x == 0 {
            return None; // ZeroDivisionError in Python.
        }
        return float_pow(x as f64, y as f64);
    }
    // Bases whose powers never grow: answer without looping, whatever the exponent.
    match x {
        0 => return Some(Num::Int(if y == 0 { 1 } else { 0 })),
        1 => return Some(Num::Int(1)),
        -1 => return Some(Num::Int(if y % 2 == 0 { 1 } else { -1 })),
        _ => {}
    }
    // |x| >= 2: anything beyond 63 overflows; checked_pow is O(log y) anyway.
    let e = u32::try_from(y).ok()?;
    x.checked_pow(e).map(Num::Int)
}

#[inline]
fn float_op(op: Op2, x: f64, y: f64) -> Option<Num> {
    match op {
        Op2::Add => finite(x + y),
        Op2::Sub => finite(x - y),
        Op2::Mul => finite(x * y),
        Op2::Div => {
            if y == 0.0 {
                None
            } else {
                finite(x / y)
            }
        }
        Op2::Mod => {
            if y == 0.0 {
                return None;
            }
            // CPython's float_rem: fmod, then move the result to the divisor's sign.
            let m = x % y;
            let m = if m != 0.0 {
                if (y < 0.0) != (m < 0.0) { m + y } else { m }
            } else {
                0.0f64.copysign(y)
            };
            finite(m)
        }
        Op2::Pow => float_pow(x, y),
    }
}

fn float_pow(x: f64, y: f64) -> Option<Num> {
    if !x.is_finite() || !y.is_finite() {
        return None;
    }
    if x == 0.0 && y < 0.0 {
        return None; // ZeroDivisionError in Python.
    }
    if x < 0.0 && y.fract() != 0.0 {
        return None; // Python returns a complex number.
    }
    finite(x.powf(y))
}
