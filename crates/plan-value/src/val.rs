//! [`Val`]: the VM's own value. JSON (`serde_json::Value`) stays at the boundaries (tool
//! arguments and outputs, presets, the outcome); inside a run values are `Val`s.
//!
//! Why: a `serde_json::Value` with `preserve_order` is 80 bytes, and a VM moves every
//! value several times (resolved, collected, stored). Each move of a freshly built value
//! is a wide copy of narrow writes, which stalls on store forwarding; that was the largest
//! single cost of a short run. A `Val` is 32 bytes: numbers and booleans inline, a string
//! as the `String` it was built as (moved, never copied, between slot, arguments and
//! outcome), and arrays, objects and integers beyond `i64` as shared JSON (`Arc`), so
//! copying a variable that holds a tool's large answer copies no data.
//!
//! A `Val` serializes exactly as the JSON value it stands for, so saved states keep their
//! format.

use std::borrow::Cow;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bytes::{NODE_BYTES, ValueSize, value_size};
use crate::interp::{interpolated_len, write_interpolated};
use crate::num::{Num, parse_num, to_num};
use crate::repr::push_ascii;
use crate::repr::write_python_float;

/// A value inside the VM (see the module docs).
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Val {
    #[default]
    Null,
    Bool(bool),
    /// A JSON integer that fits `i64`.
    Int(i64),
    /// A finite float (JSON has no others).
    Float(f64),
    Str(String),
    /// Arrays, objects, and integers beyond `i64` (a `u64`): JSON, shared.
    Json(Arc<Value>),
}

// Why: the point of `Val` is to be small; growing it would bring the moves back.
const _: () = assert!(std::mem::size_of::<Val>() <= 32);

impl From<Value> for Val {
    #[inline]
    fn from(v: Value) -> Val {
        match v {
            Value::Null => Val::Null,
            Value::Bool(b) => Val::Bool(b),
            Value::String(s) => Val::Str(s),
            Value::Number(n) => match n.as_i64() {
                Some(i) => Val::Int(i),
                None if n.is_f64() => Val::Float(n.as_f64().unwrap_or(0.0)),
                None => Val::Json(Arc::new(Value::Number(n))),
            },
            v @ (Value::Array(_) | Value::Object(_)) => Val::Json(Arc::new(v)),
        }
    }
}

impl From<&Value> for Val {
    #[inline]
    fn from(v: &Value) -> Val {
        match v {
            Value::Null => Val::Null,
            Value::Bool(b) => Val::Bool(*b),
            Value::String(s) => Val::Str(s.clone()),
            Value::Number(_) | Value::Array(_) | Value::Object(_) => Val::from(v.clone()),
        }
    }
}

impl From<Num> for Val {
    /// A number as a value; a non-finite float (no `Num` this crate returns is one)
    /// becomes null, as `serde_json` makes it.
    #[inline]
    fn from(n: Num) -> Val {
        match n {
            Num::Int(i) => Val::Int(i),
            Num::Float(f) if f.is_finite() => Val::Float(f),
            Num::Float(_) => Val::Null,
        }
    }
}

impl Val {
    /// The JSON value (moved: a string is not copied; shared JSON is copied only if
    /// something else still holds it).
    #[inline]
    pub fn into_value(self) -> Value {
        match self {
            Val::Null => Value::Null,
            Val::Bool(b) => Value::Bool(b),
            Val::Int(i) => Value::from(i),
            Val::Float(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
            Val::Str(s) => Value::String(s),
            Val::Json(j) => Arc::unwrap_or_clone(j),
        }
    }

    /// The JSON value, copied.
    pub fn to_value(&self) -> Value {
        self.clone().into_value()
    }

    /// The JSON value, borrowed when this is shared JSON.
    pub fn as_json(&self) -> Cow<'_, Value> {
        match self {
            Val::Json(j) => Cow::Borrowed(j),
            other => Cow::Owned(other.to_value()),
        }
    }

    /// Bytes charged and nesting depth, as [`value_size`] gives for the JSON value.
    #[inline]
    pub fn size(&self) -> ValueSize {
        match self {
            Val::Null | Val::Bool(_) | Val::Int(_) | Val::Float(_) => ValueSize {
                bytes: NODE_BYTES,
                depth: 1,
            },
            Val::Str(s) => ValueSize {
                bytes: NODE_BYTES.saturating_add(s.len() as u64),
                depth: 1,
            },
            Val::Json(j) => value_size(j),
        }
    }

    /// As a number (see [`to_num`]). Numbers, most operands of arithmetic, are read
    /// inline; text and JSON through a call (parsing is too large to inline, and a call per
    /// operand measured 35,445 instructions per run of `plan_run/30_assigns` against
    /// 34,218).
    #[inline(always)]
    pub fn to_num(&self) -> Option<Num> {
        match self {
            Val::Int(i) => Some(Num::Int(*i)),
            Val::Float(f) => Some(Num::Float(*f)),
            Val::Null | Val::Bool(_) => None,
            Val::Str(_) | Val::Json(_) => self.parsed_num(),
        }
    }

    /// [`Val::to_num`] of text and JSON.
    #[inline(never)]
    fn parsed_num(&self) -> Option<Num> {
        match self {
            Val::Str(s) => parse_num(s),
            Val::Json(j) => to_num(j),
            _ => None,
        }
    }

    /// Appends the value as a template inserts it (see [`write_interpolated`]).
    #[inline]
    pub fn write_interpolated(&self, out: &mut String) {
        match self {
            Val::Str(s) => out.push_str(s),
            Val::Int(i) => push_ascii(out, itoa::Buffer::new().format(*i).as_bytes()),
            Val::Float(f) => write_python_float(*f, out),
            Val::Bool(true) => out.push_str("true"),
            Val::Bool(false) => out.push_str("false"),
            Val::Null => out.push_str("null"),
            Val::Json(j) => write_interpolated(j, out),
        }
    }

    /// Exactly the bytes [`Val::write_interpolated`] appends.
    pub fn interpolated_len(&self) -> u64 {
        match self {
            Val::Str(s) => s.len() as u64,
            Val::Json(j) => interpolated_len(j),
            other => {
                let mut s = String::new();
                other.write_interpolated(&mut s);
                s.len() as u64
            }
        }
    }

    /// The value as prompt text: a string as it is, anything else interpolated.
    pub fn into_text(self) -> String {
        match self {
            Val::Str(s) => s,
            other => {
                let mut s = String::new();
                other.write_interpolated(&mut s);
                s
            }
        }
    }
}

impl Serialize for Val {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Val::Null => s.serialize_unit(),
            Val::Bool(b) => s.serialize_bool(*b),
            Val::Int(i) => s.serialize_i64(*i),
            Val::Float(f) => s.serialize_f64(*f),
            Val::Str(v) => s.serialize_str(v),
            Val::Json(j) => j.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Val {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(Val::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_val_stands_for_its_json_value() {
        for v in [
            json!(null),
            json!(true),
            json!(0),
            json!(-7),
            json!(i64::MIN),
            json!(u64::MAX),
            json!(3.0),
            json!(1e-5),
            json!(-0.0),
            json!("text ü"),
            json!([1, "a", [null]]),
            json!({"b": 1, "a": {"z": [2.5]}}),
        ] {
            let val = Val::from(v.clone());
            assert_eq!(val, Val::from(&v));
            assert_eq!(val.to_value(), v);
            assert_eq!(serde_json::to_string(&val).unwrap(), v.to_string());
            let back: Val = serde_json::from_str(&v.to_string()).unwrap();
            assert_eq!(back.into_value(), v);
            assert_eq!(val.size(), value_size(&v), "{v}");
            assert_eq!(val.to_num(), to_num(&v), "{v}");
            let mut a = String::new();
            let mut b = String::new();
            val.write_interpolated(&mut a);
            write_interpolated(&v, &mut b);
            assert_eq!(a, b);
            assert_eq!(val.interpolated_len(), interpolated_len(&v));
            assert_eq!(val.as_json().into_owned(), v);
        }
    }
}
