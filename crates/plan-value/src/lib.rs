//! `plan-value`: the value semantics shared by the compiler (constant folding) and the VM.
//!
//! Values are `serde_json::Value` at the boundaries (the workspace enables
//! `preserve_order`, so object keys keep their insertion order) and [`Val`] inside the VM.
//! This crate says what the plan language does with them:
//!
//! - [`num`]: `Num` (Int(i64) | Float(f64)), [`to_num`] (numbers and strings that parse as
//!   numbers), [`num_to_value`], [`unary`]/[`binary`] with Python's numeric rules; `None`
//!   on failure (division by zero, overflow, non-finite, complex), never panics or hangs.
//! - [`repr`]: [`python_float_repr`], exactly Python's `repr(float)`.
//! - [`interp`]: [`write_interpolated`] (strings raw, ints decimal, floats as Python repr,
//!   everything else compact JSON), [`interpolated_len`] (its exact length, without
//!   building it), [`preview`].
//! - [`bytes`]: [`value_bytes`], the size charged against memory limits.
//! - [`extract`]: [`extract_first_object`], the first JSON object in text (```json fences,
//!   prose; braces inside JSON strings don't confuse it).
//! - [`condition`]: [`parse_condition_answer`], the answer shapes a condition accepts.
//! - [`json`]: [`json::write_value`], [`json::write_str`]: compact JSON, byte for byte
//!   serde_json's, with a faster string escape.
//! - [`val`]: [`Val`], the VM's compact value (numbers inline, strings moved, containers
//!   shared), serialized exactly as the JSON it stands for.
//!
//! Start reading at `num.rs`; everything is small and independent. No function here
//! recurses on value depth except serde_json's own (de)serialization and
//! [`json::write_value`], which writes what serde_json would.

pub mod bytes;
pub mod condition;
pub mod distance;
pub mod extract;
pub mod interp;
pub mod json;
pub mod num;
pub mod repr;
pub mod val;

pub use bytes::{NODE_BYTES, ValueSize, value_bytes, value_size};
pub use condition::parse_condition_answer;
pub use distance::edit_distance;
pub use extract::extract_first_object;
pub use interp::{
    interpolated, interpolated_len, json_len, preview, preview_val, write_interpolated,
};
pub use num::{Num, Op1, Op2, binary, num_to_value, parse_num, to_num, unary};
pub use repr::{python_float_repr, write_python_float};
pub use val::Val;
