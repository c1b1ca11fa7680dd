//! Compact JSON written straight into a byte buffer, byte for byte what `serde_json`
//! writes, with a faster string escape: a string is scanned eight bytes at a time for the
//! three kinds of byte that need escaping (control characters, `"` and `\`), and copied
//! in runs. NB: serde_json looks each byte up in a table, for text that almost never
//! needs escaping. Its string escape, buffer growth included, was a tenth of a batch's
//! instructions (the replay lookup's canonical arguments, the store's journal); this
//! writer took 1.4% off a batch with a store (most of that tenth was the buffer growth).
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

/// The bytes of `t` (one to eight) as a word for [`any_special`]: fewer than eight are read
/// with two overlapping loads (a byte tested twice changes nothing) and padded with `a`s.
/// NB: not a copy into a padded array, which is a call to `memcpy` for a variable length.
#[inline]
fn word_at(t: &[u8]) -> u64 {
    const PAD: u64 = ONES * b'a' as u64;
    let n = t.len();
    let u16_at = |k: usize| u64::from(u16::from_ne_bytes([t[k], t[k + 1]]));
    let u32_at = |k: usize| u64::from(u32::from_ne_bytes([t[k], t[k + 1], t[k + 2], t[k + 3]]));
    match n {
        8.. => u64::from_ne_bytes([t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]]),
        4..=7 => u32_at(0) | (u32_at(n - 4) << 32),
        2..=3 => u16_at(0) | (u16_at(n - 2) << 16) | (PAD << 32),
        1 => u64::from(t[0]) | (PAD << 8),
        0 => PAD,
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
        // NB: the last bytes (fewer than eight) are tested as one word too, padded with a
        // byte that needs no escape: most strings (keys, names, short values) are shorter
        // than a word, and testing their bytes one by one was most of their cost.
        let n = (bytes.len() - i).min(8);
        if any_special(word_at(&bytes[i..i + n])) {
            for (j, &b) in bytes[i..i + n].iter().enumerate() {
                let Some(esc) = escape(b) else { continue };
                out.extend_from_slice(&bytes[start..i + j]);
                if esc.is_empty() {
                    out.extend_from_slice(b"\\u00");
                    out.push(HEX[usize::from(b >> 4)]);
                    out.push(HEX[usize::from(b & 0xF)]);
                } else {
                    out.extend_from_slice(esc);
                }
                start = i + j + 1;
            }
        }
        i += n;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Appends `v` as compact JSON, exactly as `serde_json::to_writer` does (object keys in
/// the map's order).
pub fn write_value(out: &mut Vec<u8>, v: &Value) {
    write(out, v, false);
}

/// Appends `v` as [`write_value`] does, with the keys of every object sorted: a canonical
/// text (equal values give equal text, whatever the order their keys came in).
pub fn write_canonical(out: &mut Vec<u8>, v: &Value) {
    write(out, v, true);
}

/// Appends the `(key, value)` pairs as a JSON object, in their order (as serde_json writes
/// a map).
pub fn write_object<'a, K: AsRef<str>>(
    out: &mut Vec<u8>,
    pairs: impl IntoIterator<Item = (K, &'a Value)>,
) {
    object(out, pairs, false);
}

/// Appends the `(key, value)` pairs as a JSON object in [`write_canonical`]'s form.
pub fn write_canonical_object<'a, K: AsRef<str>>(
    out: &mut Vec<u8>,
    pairs: impl IntoIterator<Item = (K, &'a Value)>,
) {
    object(out, pairs, true);
}

fn write(out: &mut Vec<u8>, v: &Value, sorted: bool) {
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
                write(out, item, sorted);
            }
            out.push(b']');
        }
        Value::Object(map) => object(out, map.iter(), sorted),
    }
}

fn object<'a, K: AsRef<str>>(
    out: &mut Vec<u8>,
    pairs: impl IntoIterator<Item = (K, &'a Value)>,
    sorted: bool,
) {
    fn members<'a, K: AsRef<str>>(
        out: &mut Vec<u8>,
        pairs: impl Iterator<Item = (K, &'a Value)>,
        sorted: bool,
    ) {
        out.push(b'{');
        for (i, (k, v)) in pairs.enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_str(out, k.as_ref());
            out.push(b':');
            write(out, v, sorted);
        }
        out.push(b'}');
    }
    if sorted {
        // NB: on the stack for the usual few keys (a replay lookup sorts each call's args).
        let mut pairs: smallvec::SmallVec<[_; 8]> = pairs.into_iter().collect();
        pairs.sort_unstable_by(|(a, _), (b, _)| a.as_ref().cmp(b.as_ref()));
        members(out, pairs.into_iter(), true);
    } else {
        members(out, pairs.into_iter(), false);
    }
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
    fn canonical_text_sorts_the_keys_of_every_object() {
        let mut out = Vec::new();
        write_canonical(
            &mut out,
            &json!({"b": [{"z": 1, "a": 2}], "a": {"y": null, "x": "é"}}),
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"a":{"x":"é","y":null},"b":[{"a":2,"z":1}]}"#
        );
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
