//! How values become text: interpolation into templates, its exact length (so the VM can
//! refuse an oversized template before building it), and short previews for messages.

use crate::repr::{push_ascii, write_python_float};
use serde_json::Value;

/// Appends `v` as a template inserts it: strings raw, integers in decimal, floats as
/// Python's repr, `true`/`false`/`null`, arrays and objects as compact JSON with keys in
/// their original order.
///
/// NB: floats *nested* inside arrays and objects are written by serde_json (shortest
/// round-trip digits; e.g. `1e-5` nested is `0.00001` where Python's repr says `1e-05`),
/// because that text is JSON that other tools parse, not a Python repr.
pub fn write_interpolated(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => out.push_str(s),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                push_ascii(out, itoa::Buffer::new().format(i).as_bytes());
            } else if let Some(u) = n.as_u64() {
                out.push_str(&u.to_string());
            } else {
                write_python_float(n.as_f64().unwrap_or(f64::NAN), out);
            }
        }
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Null => out.push_str("null"),
        Value::Array(_) | Value::Object(_) => {
            // Serializing a `Value` into a String cannot fail (keys are strings).
            if let Ok(s) = serde_json::to_string(v) {
                out.push_str(&s);
            }
        }
    }
}

/// `v` as interpolated text (see [`write_interpolated`]).
pub fn interpolated(v: &Value) -> String {
    let mut s = String::new();
    write_interpolated(v, &mut s);
    s
}

/// The exact number of bytes [`write_interpolated`] appends for `v`, computed without
/// allocating the text (iteratively, so any depth is fine).
pub fn interpolated_len(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.len() as u64,
        Value::Number(n) if n.is_f64() => {
            let mut s = String::new();
            write_python_float(n.as_f64().unwrap_or(f64::NAN), &mut s);
            s.len() as u64
        }
        _ => json_len(v),
    }
}

/// Exact length of `serde_json::to_string(v)` (compact form).
pub fn json_len(v: &Value) -> u64 {
    let mut total: u64 = 0;
    let mut stack: Vec<&Value> = vec![v];
    while let Some(v) = stack.pop() {
        let n = match v {
            Value::Null => 4,
            Value::Bool(true) => 4,
            Value::Bool(false) => 5,
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    itoa::Buffer::new().format(i).len() as u64
                } else if let Some(u) = n.as_u64() {
                    decimal_digits(u)
                } else {
                    // serde_json's own float formatter, measured without allocating.
                    let mut c = CountingWriter(0);
                    let _ = serde_json::to_writer(&mut c, n);
                    c.0
                }
            }
            Value::String(s) => json_str_len(s),
            Value::Array(a) => {
                stack.extend(a.iter());
                2 + (a.len() as u64).saturating_sub(1)
            }
            Value::Object(m) => {
                let mut n = 2 + (m.len() as u64).saturating_sub(1);
                for (k, v) in m {
                    n = n.saturating_add(json_str_len(k) + 1);
                    stack.push(v);
                }
                n
            }
        };
        total = total.saturating_add(n);
    }
    total
}

fn decimal_digits(mut u: u64) -> u64 {
    let mut d = 1;
    while u >= 10 {
        u /= 10;
        d += 1;
    }
    d
}

/// Length of a JSON string literal as serde_json writes it (quotes included).
fn json_str_len(s: &str) -> u64 {
    let mut n = 2u64;
    for &b in s.as_bytes() {
        n += match b {
            b'"' | b'\\' | 0x08 | 0x09 | 0x0A | 0x0C | 0x0D => 2,
            0x00..=0x1F => 6,
            _ => 1,
        };
    }
    n
}

/// A short single-line preview of `v` for traces and error messages: strings raw (line
/// breaks shown as `\n`), anything else as compact JSON, cut to at most `max_chars`
/// characters with `…` appended when cut. Never renders more of a huge value than needed.
pub fn preview(v: &Value, max_chars: usize) -> String {
    match v {
        Value::String(s) => preview_text(Some(s), v, max_chars),
        _ => preview_text(None, v, max_chars),
    }
}

/// [`preview`] of a VM value.
pub fn preview_val(v: &crate::Val, max_chars: usize) -> String {
    match v {
        crate::Val::Str(s) => preview_text(Some(s), v, max_chars),
        _ => preview_text(None, v, max_chars),
    }
}

/// `text` raw if given, else `v` as compact JSON, cut (see [`preview`]).
fn preview_text<T: serde::Serialize + ?Sized>(
    text: Option<&str>,
    v: &T,
    max_chars: usize,
) -> String {
    let mut out = String::new();
    let mut count = 0usize;
    let mut cut = false;
    let mut push = |c: char, out: &mut String| -> bool {
        if count >= max_chars {
            cut = true;
            return false;
        }
        out.push(c);
        count += 1;
        true
    };
    let text_owned;
    let text: &str = match text {
        Some(s) => s,
        None => {
            // Render at most enough bytes for max_chars characters (a char is ≤ 4 bytes;
            // escapes below at most double that), then stop.
            let cap = max_chars.saturating_mul(8).saturating_add(8);
            let mut w = CappedWriter {
                buf: Vec::new(),
                cap,
            };
            let _ = serde_json::to_writer(&mut w, v);
            text_owned = String::from_utf8_lossy(&w.buf).into_owned();
            &text_owned
        }
    };
    'outer: for c in text.chars() {
        let esc: &[char] = match c {
            '\n' => &['\\', 'n'],
            '\r' => &['\\', 'r'],
            '\t' => &['\\', 't'],
            _ => &[],
        };
        if esc.is_empty() {
            if !push(c, &mut out) {
                break;
            }
        } else {
            for &e in esc {
                if !push(e, &mut out) {
                    break 'outer;
                }
            }
        }
    }
    if cut {
        out.push('…');
    }
    out
}

/// A writer that only counts bytes.
struct CountingWriter(u64);

impl std::io::Write for CountingWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0 += data.len() as u64;
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A writer that keeps at most `cap` bytes and then refuses more (aborting serialization).
struct CappedWriter {
    buf: Vec<u8>,
    cap: usize,
}

impl std::io::Write for CappedWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let room = self.cap.saturating_sub(self.buf.len());
        if room == 0 {
            return Err(std::io::Error::other("preview full"));
        }
        let n = room.min(data.len());
        self.buf.extend_from_slice(&data[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
