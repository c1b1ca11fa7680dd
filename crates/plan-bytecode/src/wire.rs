//! Low-level byte I/O: a growable `Writer` and a bounds-checked `Reader`, LEB128 varints,
//! and the compact tagged encoding of JSON constants.
//!
//! The reader never indexes without a check and never allocates more than the bytes left
//! in its input justify: counts go through [`Reader::count`], which compares them against a
//! limit and against the remaining input before the caller reserves capacity.

use serde_json::{Map, Number, Value};

use crate::BytecodeError;
use crate::limits::{MAX_CONST_DEPTH, MAX_STRING};

type Result<T> = std::result::Result<T, BytecodeError>;

/// Append-only output buffer.
#[derive(Default)]
pub(crate) struct Writer {
    pub(crate) buf: Vec<u8>,
}

impl Writer {
    pub(crate) fn u8(&mut self, b: u8) {
        self.buf.push(b);
    }

    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// Unsigned LEB128.
    pub(crate) fn uv(&mut self, mut v: u64) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.buf.push(byte);
                return;
            }
            self.buf.push(byte | 0x80);
        }
    }

    pub(crate) fn u32v(&mut self, v: u32) {
        self.uv(u64::from(v));
    }

    /// A length or count. Lengths of in-memory data always fit in u64.
    pub(crate) fn len(&mut self, n: usize) {
        self.uv(n as u64);
    }

    /// Signed LEB128 via zigzag, so small negative numbers stay small.
    pub(crate) fn iv(&mut self, v: i64) {
        self.uv(((v << 1) ^ (v >> 63)) as u64);
    }

    pub(crate) fn str(&mut self, s: &str) {
        self.len(s.len());
        self.bytes(s.as_bytes());
    }
}

/// Bounds-checked cursor over untrusted bytes. `base` is the absolute file offset of
/// `data[0]`, so every error can name a byte offset in the whole file.
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8], base: usize) -> Self {
        Reader { data, pos: 0, base }
    }

    /// Absolute file offset of the next byte.
    pub(crate) fn offset(&self) -> usize {
        self.base.saturating_add(self.pos)
    }

    pub(crate) fn remaining(&self) -> usize {
        self.data.len().saturating_sub(self.pos)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    pub(crate) fn u8(&mut self, what: &str) -> Result<u8> {
        match self.data.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => Err(BytecodeError::truncated(self.offset(), what)),
        }
    }

    pub(crate) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = match self.pos.checked_add(n) {
            Some(end) if end <= self.data.len() => end,
            _ => return Err(BytecodeError::truncated(self.offset(), what)),
        };
        let s = self
            .data
            .get(self.pos..end)
            .ok_or_else(|| BytecodeError::truncated(self.offset(), what))?;
        self.pos = end;
        Ok(s)
    }

    /// Unsigned LEB128 of at most `max_bits` bits, canonical (shortest) form only, so each
    /// value has exactly one encoding and a flipped byte cannot decode to the same value.
    fn uv_bits(&mut self, max_bits: u32, what: &str) -> Result<u64> {
        let start = self.offset();
        let mut result: u64 = 0;
        let mut shift: u32 = 0;
        loop {
            let byte = self.u8(what)?;
            let low = u64::from(byte & 0x7f);
            if shift + 7 > max_bits && (low >> (max_bits - shift)) != 0 {
                return Err(BytecodeError::at(
                    start,
                    format!("{what}: varint overflows {max_bits} bits"),
                ));
            }
            result |= low << shift;
            if byte & 0x80 == 0 {
                if byte == 0 && shift > 0 {
                    return Err(BytecodeError::at(start, format!("{what}: overlong varint")));
                }
                return Ok(result);
            }
            shift += 7;
            if shift >= max_bits {
                return Err(BytecodeError::at(
                    start,
                    format!("{what}: varint overflows {max_bits} bits"),
                ));
            }
        }
    }

    pub(crate) fn u64v(&mut self, what: &str) -> Result<u64> {
        self.uv_bits(64, what)
    }

    pub(crate) fn u32v(&mut self, what: &str) -> Result<u32> {
        // max_bits = 32 admits exactly the values that fit in u32.
        self.uv_bits(32, what).map(|v| v as u32)
    }

    pub(crate) fn iv(&mut self, what: &str) -> Result<i64> {
        let z = self.u64v(what)?;
        Ok(((z >> 1) as i64) ^ -((z & 1) as i64))
    }

    /// Reads a count of items, each of which occupies at least `min_item_bytes` in the
    /// input. Checks it against `limit` and the remaining input, so the caller may
    /// `Vec::with_capacity(count)` safely.
    pub(crate) fn count(
        &mut self,
        limit: usize,
        min_item_bytes: usize,
        what: &str,
    ) -> Result<usize> {
        let at = self.offset();
        let n = self.u32v(what)? as usize;
        if n > limit {
            return Err(BytecodeError::at(
                at,
                format!("{what}: count {n} exceeds the limit of {limit}"),
            ));
        }
        match n.checked_mul(min_item_bytes) {
            Some(need) if need <= self.remaining() => Ok(n),
            _ => Err(BytecodeError::at(
                at,
                format!(
                    "{what}: count {n} needs more bytes than the {} left",
                    self.remaining()
                ),
            )),
        }
    }

    /// A length-prefixed UTF-8 string.
    pub(crate) fn str(&mut self, what: &str) -> Result<&'a str> {
        let at = self.offset();
        let n = self.u32v(what)? as usize;
        if n > MAX_STRING {
            return Err(BytecodeError::at(
                at,
                format!("{what}: string length {n} exceeds the limit of {MAX_STRING}"),
            ));
        }
        let body_at = self.offset();
        let bytes = self.take(n, what)?;
        std::str::from_utf8(bytes).map_err(|e| {
            BytecodeError::at(
                body_at.saturating_add(e.valid_up_to()),
                format!("{what}: invalid UTF-8"),
            )
        })
    }

    /// Splits off the next `n` bytes as their own reader (a section body).
    pub(crate) fn sub(&mut self, n: usize, what: &str) -> Result<Reader<'a>> {
        let base = self.offset();
        let data = self.take(n, what)?;
        Ok(Reader::new(data, base))
    }

    /// Errors unless every byte was consumed.
    pub(crate) fn finish(&self, what: &str) -> Result<()> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(BytecodeError::at(
                self.offset(),
                format!("{} trailing bytes after {what}", self.remaining()),
            ))
        }
    }
}

// Constant encoding tags. Kept tiny: most plan constants are short strings and small ints.
const T_NULL: u8 = 0;
const T_FALSE: u8 = 1;
const T_TRUE: u8 = 2;
/// Any integer that fits in i64, zigzag varint.
const T_INT: u8 = 3;
/// An integer above i64::MAX (serde_json keeps those as u64), plain varint.
const T_UINT: u8 = 4;
/// A finite f64, 8 bytes little endian (exact round trip; `1.0` stays a float).
const T_FLOAT: u8 = 5;
const T_STRING: u8 = 6;
const T_ARRAY: u8 = 7;
const T_OBJECT: u8 = 8;

pub(crate) fn put_value(w: &mut Writer, v: &Value) {
    match v {
        Value::Null => w.u8(T_NULL),
        Value::Bool(false) => w.u8(T_FALSE),
        Value::Bool(true) => w.u8(T_TRUE),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                w.u8(T_INT);
                w.iv(i);
            } else if let Some(u) = n.as_u64() {
                w.u8(T_UINT);
                w.uv(u);
            } else {
                // serde_json numbers are i64, u64 or finite f64; NaN cannot occur.
                w.u8(T_FLOAT);
                w.bytes(&n.as_f64().unwrap_or(0.0).to_le_bytes());
            }
        }
        Value::String(s) => {
            w.u8(T_STRING);
            w.str(s);
        }
        Value::Array(items) => {
            w.u8(T_ARRAY);
            w.len(items.len());
            for item in items {
                put_value(w, item);
            }
        }
        Value::Object(map) => {
            w.u8(T_OBJECT);
            w.len(map.len());
            for (k, item) in map {
                w.str(k);
                put_value(w, item);
            }
        }
    }
}

/// Decodes one constant. `depth` is the number of enclosing arrays/objects.
pub(crate) fn get_value(r: &mut Reader<'_>, depth: usize) -> Result<Value> {
    let at = r.offset();
    let tag = r.u8("constant tag")?;
    Ok(match tag {
        T_NULL => Value::Null,
        T_FALSE => Value::Bool(false),
        T_TRUE => Value::Bool(true),
        T_INT => Value::from(r.iv("integer constant")?),
        T_UINT => {
            let u = r.u64v("integer constant")?;
            if i64::try_from(u).is_ok() {
                return Err(BytecodeError::at(
                    at,
                    "non-canonical unsigned integer constant (fits in i64)",
                ));
            }
            Value::from(u)
        }
        T_FLOAT => {
            let bytes = r.take(8, "float constant")?;
            let mut arr = [0u8; 8];
            arr.copy_from_slice(bytes);
            let f = f64::from_le_bytes(arr);
            match Number::from_f64(f) {
                Some(n) => Value::Number(n),
                None => return Err(BytecodeError::at(at, "float constant is not finite")),
            }
        }
        T_STRING => Value::String(r.str("string constant")?.to_owned()),
        T_ARRAY | T_OBJECT => {
            if depth >= MAX_CONST_DEPTH {
                return Err(BytecodeError::at(
                    at,
                    format!("constant nested deeper than the limit of {MAX_CONST_DEPTH}"),
                ));
            }
            if tag == T_ARRAY {
                let n = r.count(crate::limits::MAX_CONSTS, 1, "array constant length")?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(get_value(r, depth + 1)?);
                }
                Value::Array(items)
            } else {
                // Each entry is at least a key length byte and a value tag.
                let n = r.count(crate::limits::MAX_CONSTS, 2, "object constant length")?;
                let mut map = Map::new();
                for _ in 0..n {
                    let key_at = r.offset();
                    let key = r.str("object constant key")?;
                    let value = get_value(r, depth + 1)?;
                    if map.contains_key(key) {
                        return Err(BytecodeError::at(
                            key_at,
                            format!("duplicate key {key:?} in object constant"),
                        ));
                    }
                    map.insert(key.to_owned(), value);
                }
                Value::Object(map)
            }
        }
        other => {
            return Err(BytecodeError::at(
                at,
                format!("unknown constant tag {other}"),
            ));
        }
    })
}

/// Nesting depth of a constant (0 for scalars), stopping early past `cap` so a hostile
/// in-memory value cannot make this recurse without bound.
pub(crate) fn value_depth_exceeds(v: &Value, cap: usize) -> bool {
    fn go(v: &Value, left: usize) -> bool {
        match v {
            Value::Array(items) => left == 0 || items.iter().any(|i| go(i, left - 1)),
            Value::Object(map) => left == 0 || map.values().any(|i| go(i, left - 1)),
            _ => false,
        }
    }
    go(v, cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_u(v: u64) -> u64 {
        let mut w = Writer::default();
        w.uv(v);
        let mut r = Reader::new(&w.buf, 0);
        let got = r.u64v("t").unwrap();
        assert!(r.is_empty());
        got
    }

    #[test]
    fn varints_round_trip() {
        for v in [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            assert_eq!(round_u(v), v);
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, -64, 64] {
            let mut w = Writer::default();
            w.iv(v);
            assert_eq!(Reader::new(&w.buf, 0).iv("t").unwrap(), v);
        }
    }

    #[test]
    fn varints_reject_overlong_and_overflow() {
        let e = Reader::new(&[0x80, 0x00], 0).u32v("x").unwrap_err();
        assert!(e.message().contains("overlong"), "{e}");
        let e = Reader::new(&[0xff, 0xff, 0xff, 0xff, 0x1f], 0)
            .u32v("x")
            .unwrap_err();
        assert!(e.message().contains("overflows 32 bits"), "{e}");
        assert_eq!(
            Reader::new(&[0xff, 0xff, 0xff, 0xff, 0x0f], 0)
                .u32v("x")
                .unwrap(),
            u32::MAX
        );
        let e = Reader::new(&[0xff; 11], 0).u64v("x").unwrap_err();
        assert!(e.message().contains("overflows 64 bits"), "{e}");
        let e = Reader::new(&[0x80], 0).u32v("x").unwrap_err();
        assert!(e.message().contains("truncated"), "{e}");
    }

    #[test]
    fn depth_check_stops_at_cap() {
        let mut v = Value::Null;
        for _ in 0..10 {
            v = Value::Array(vec![v]);
        }
        assert!(!value_depth_exceeds(&v, 10));
        assert!(value_depth_exceeds(&v, 9));
    }
}
