//! What a value costs against the VM's memory limits.
//!
//! The numbers are an approximation of heap use, chosen to be cheap to compute and hard
//! to game: every node costs [`NODE_BYTES`], strings and object keys add their length.

use serde_json::Value;

/// Charged per JSON node (and per object entry, for its key).
pub const NODE_BYTES: u64 = 16;

/// Size and nesting depth of a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ValueSize {
    /// Bytes charged (see [`value_bytes`]).
    pub bytes: u64,
    /// Nesting depth: 1 for a scalar, 1 + the deepest element for arrays and objects.
    pub depth: u32,
}

/// The bytes charged for `v`: [`NODE_BYTES`] per node plus string lengths, plus
/// [`NODE_BYTES`] and the key length per object entry. Iterative: any depth is fine.
pub fn value_bytes(v: &Value) -> u64 {
    value_size(v).bytes
}

/// Bytes and depth of `v` in one iterative pass.
#[inline]
pub fn value_size(v: &Value) -> ValueSize {
    // Scalars are the common case in VM stores: answer without allocating a stack.
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => ValueSize {
            bytes: NODE_BYTES,
            depth: 1,
        },
        Value::String(s) => ValueSize {
            bytes: NODE_BYTES.saturating_add(s.len() as u64),
            depth: 1,
        },
        Value::Array(_) | Value::Object(_) => value_size_walk(v),
    }
}

/// The general case of [`value_size`], kept out of line so the scalar check inlines.
fn value_size_walk(v: &Value) -> ValueSize {
    let mut bytes: u64 = 0;
    let mut depth: u32 = 0;
    let mut stack: Vec<(&Value, u32)> = vec![(v, 1)];
    while let Some((v, d)) = stack.pop() {
        depth = depth.max(d);
        bytes = bytes.saturating_add(NODE_BYTES);
        match v {
            Value::String(s) => bytes = bytes.saturating_add(s.len() as u64),
            Value::Array(a) => stack.extend(a.iter().map(|c| (c, d.saturating_add(1)))),
            Value::Object(m) => {
                for (k, c) in m {
                    bytes = bytes.saturating_add(NODE_BYTES + k.len() as u64);
                    stack.push((c, d.saturating_add(1)));
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    ValueSize { bytes, depth }
}
