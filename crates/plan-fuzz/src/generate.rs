//! Building blocks the structured targets share: arbitrary JSON values (bounded depth, so a
//! fuzz input cannot blow the stack of anything that recurses) and a small, fixed set of
//! variable names and keys, so references hit set variables often.

use arbitrary::Arbitrary;
use serde_json::{Map, Number, Value};

/// Variable names a model may assign or reference. The last one is never assigned by
/// any model, so references to it exercise "unset stays literal".
pub(crate) const VARS: &[&str] = &["a", "b", "c_1", "final_text", "unset_var"];

/// Keys used in objects and in dotted paths (`"0"`/`"1"` also index arrays).
pub(crate) const KEYS: &[&str] = &["k", "x", "0", "1", "a", "name"];

pub(crate) fn var(i: u8) -> &'static str {
    VARS[usize::from(i) % VARS.len()]
}

/// A variable that some step may set (never `unset_var`).
pub(crate) fn set_var(i: u8) -> &'static str {
    VARS[usize::from(i) % (VARS.len() - 1)]
}

pub(crate) fn key(i: u8) -> &'static str {
    KEYS[usize::from(i) % KEYS.len()]
}

/// Values nested deeper than this are cut to `null` when converted.
const MAX_DEPTH: u32 = 5;

/// An arbitrary JSON value.
#[derive(Arbitrary, Clone, Debug)]
pub enum FValue {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// Text that looks like a reference or a JSON container, the tricky strings.
    Tricky(u8, u8),
    Arr(Vec<FValue>),
    Obj(Vec<(u8, FValue)>),
    /// A JSON container serialized into a string (LLM outputs often are).
    JsonText(Box<FValue>),
}

impl FValue {
    pub fn to_value(&self) -> Value {
        self.to_value_at(0)
    }

    fn to_value_at(&self, depth: u32) -> Value {
        if depth > MAX_DEPTH {
            return Value::Null;
        }
        match self {
            FValue::Null => Value::Null,
            FValue::Bool(b) => Value::Bool(*b),
            FValue::Int(i) => Value::from(*i),
            // Non-finite floats are not JSON.
            FValue::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
            FValue::Str(s) => Value::String(s.clone()),
            FValue::Tricky(a, b) => Value::String(match a % 6 {
                0 => format!("${{{}}}", var(*b)),
                1 => format!("{{{{{}}}}}", var(*b)),
                2 => format!(" {{\"{}\": {b}}} ", key(*b)),
                3 => format!("[{b}, \"${{{}}}\"]", var(*b)),
                4 => format!("{b}"),
                _ => format!("{}.{}", b, a),
            }),
            FValue::Arr(items) => Value::Array(
                items
                    .iter()
                    .take(8)
                    .map(|v| v.to_value_at(depth + 1))
                    .collect(),
            ),
            FValue::Obj(members) => {
                let mut m = Map::new();
                for (k, v) in members.iter().take(8) {
                    m.insert(key(*k).to_owned(), v.to_value_at(depth + 1));
                }
                Value::Object(m)
            }
            FValue::JsonText(inner) => Value::String(
                serde_json::to_string(&inner.to_value_at(depth + 1)).unwrap_or_default(),
            ),
        }
    }
}
