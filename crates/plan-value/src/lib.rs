//! `plan-value`: the value semantics shared by the compiler (constant folding) and the VM.
//!
//! API CONTRACT (implementation in progress):
//! - `Num` (Int(i64) | Float(f64)), `to_num(&Value) -> Option<Num>` (numbers and strings that
//!   parse as numbers), `num_to_value`.
//! - `unary(UnaryOp, Num)`, `binary(BinaryOp, Num, Num) -> Option<Num>`: Python numeric
//!   rules, `None` on failure (division by zero, overflow, non-finite), never panics or hangs.
//! - `write_interpolated(&Value, &mut String)`: strings raw, ints decimal, floats as Python
//!   repr, everything else compact JSON.
//! - `python_float_repr(f64) -> String`.
//! - `value_bytes(&Value) -> u64`: the size charged against memory limits.
//! - `extract_first_object(&str) -> Option<Map>`: first JSON object in text (```json fences,
//!   prose; braces inside JSON strings don't confuse it).
//! - `preview(&Value, max_chars) -> String`.
