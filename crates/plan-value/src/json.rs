//! Compact JSON written straight into a byte buffer, byte for byte what `serde_json`
//! writes, with a faster string escape: a string is scanned eight bytes at a time for the
//! three kinds of byte that need escaping (control characters, `"` and `\`), and copied
//! in runs. NB: serde_json looks each byte up in a table; that was a tenth of a batch's
//! instructions (the replay lookup's canonical arguments, the store's journal), for text
//! that almost never needs escaping.
//!
//! Like serde_json's serializer, [`write_value`] recurses on the value's depth: callers
//! hand it values whose depth the VM bounds (or that serde_json parsed, with its own
//! bound).

use serde_json::Value;

const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);

/// Whether any byte of `w` is below 0x20, `"` or `\` (exact for the word, not per byte:
/// the usual "has a zero byte" trick, on `w` and on `w` xor each of the two characters).
#[inline]
fn any_special(w: u64) -> bool {
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let control = w.wrapping_sub(ONES * 0x20) & !w & HIGHS;
    (control | zero(w ^ (ONES * u64::from(b'"'))) | zero(w ^ (ONES * u64::from(b'\\')))) != 0
}

/// How serde_json writes byte `b` of a string: None, as is; an empty escape, as `\u00XX`.
fn escape(b: u8) -> Option<&'static [u8]> {
    match b {
        b'"' => Some(b"\\\""),
        b'\\' => Some(b"\\\\"),
        0x08 => Some(b"\\b"),
        0x0C => Some(b"\\f"),
        b'\n' => Some(b"\\n"),
        b'\r' => Some(b"\\r"),
        b'\t' => Some(b"\\t"),
        0x00..=0x1F => Some(b""),
        _ => None,
    }
}

/// Appends `s` as a JSON string literal (quotes included), exactly as serde_json does.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        if let Some(word) = bytes.get(i..i + 8) {
            let w = u64::from_ne_bytes(word.try_into().expect("eight bytes"));
            if !any_special(w) {
                i += 8;
                continue;
            }
        }
        let b = bytes[i];
        if let Some(esc) = escape(b) {
            out.extend_from_slice(&bytes[start..i]);
            if esc.is_empty() {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xF)]);
            } else {
                out.extend_from_slice(esc);
            }
            start = i + 1;
        }
        i += 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Appends `v` as compact JSON, exactly as `serde_json::to_writer` does (object keys in
/// the map's order).
pub fn write_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        // NB: serde_json writes numbers with itoa and ryu; into a vector it cannot fail.
        Value::Number(n) => drop(serde_json::to_writer(&mut *out, n)),
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => write_object(out, map.iter().map(|(k, v)| (k.as_str(), v))),
    }
}

/// Appends the `(key, value)` pairs as a JSON object, in their order (as serde_json writes
/// a map).
pub fn write_object<'a>(out: &mut Vec<u8>, pairs: impl IntoIterator<Item = (&'a str, &'a Value)>) {
    out.push(b'{');
    for (i, (k, v)) in pairs.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, k);
        out.push(b':');
        write_value(out, v);
    }
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ours(s: &str) -> String {
        let mut out = Vec::new();
        write_str(&mut out, s);
        String::from_utf8(out).unwrap()
    }

    /// Every byte that needs escaping, at every offset of an eight-byte word and next to
    /// the end of the string, and every other ASCII byte and some multi-byte characters.
    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let specials: Vec<char> = (0u8..0x20)
            .map(char::from)
            .chain(['"', '\\', '\u{7f}', 'ü', '€', '😀', '\u{2028}'])
            .collect();
        for c in specials
            .iter()
            .copied()
            .chain((0x20u8..0x7f).map(char::from))
        {
            for len in 0..20 {
                for at in 0..len {
                    let s: String = (0..len).map(|i| if i == at { c } else { 'a' }).collect();
                    assert_eq!(ours(&s), serde_json::to_string(&s).unwrap(), "{s:?}");
                }
            }
        }
        let mixed: String = specials.iter().cycle().take(300).collect();
        assert_eq!(ours(&mixed), serde_json::to_string(&mixed).unwrap());
        assert_eq!(ours(""), "\"\"");
    }

    /// Bytes just above and below each special byte must not be taken for it (the word
    /// test borrows across bytes).
    #[test]
    fn words_near_the_special_bytes_are_copied_unescaped() {
        for a in 0x20u8..0x7f {
            for b in [0x1Fu8, 0x20, 0x21, 0x22, 0x23, 0x5B, 0x5C, 0x5D, 0x7E] {
                let s: String = [a, b, a, a, b, a, b, b, a]
                    .iter()
                    .map(|&x| char::from(x))
                    .collect();
                assert_eq!(ours(&s), serde_json::to_string(&s).unwrap(), "{s:?}");
            }
        }
    }

    #[test]
    fn values_are_written_as_serde_json_writes_them() {
        for v in [
            json!(null),
            json!([
                true,
                false,
                0,
                -7,
                i64::MIN,
                u64::MAX,
                1.5,
                -0.0,
                1e300,
                3.0
            ]),
            json!({"b": 1, "a": {"z": [2.5, "x\"y\n"]}, "": {}, "e": []}),
            json!("tab\there \u{1} ü"),
        ] {
            let mut out = Vec::new();
            write_value(&mut out, &v);
            assert_eq!(String::from_utf8(out).unwrap(), v.to_string());
        }
    }
}
