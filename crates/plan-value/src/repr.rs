//! Python's `repr(float)`: the shortest digits that round-trip (from ryu), laid out the
//! way CPython's `float_repr_style = 'short'` does: scientific notation iff the decimal
//! exponent is < -4 or >= 16, otherwise positional with at least one fractional digit.

/// Formats `f` exactly like Python's `repr(f)` (`3.0`, `0.5`, `1e+16`, `1e-05`, `-0.0`).
pub fn python_float_repr(f: f64) -> String {
    let mut out = String::new();
    write_python_float(f, &mut out);
    out
}

/// Appends `repr(f)` to `out`.
pub fn write_python_float(f: f64, out: &mut String) {
    if f.is_nan() {
        out.push_str("nan");
        return;
    }
    if f.is_infinite() {
        out.push_str(if f < 0.0 { "-inf" } else { "inf" });
        return;
    }
    let mut buf = ryu::Buffer::new();
    let s = buf.format_finite(f);
    let (neg, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (mantissa, exp) = match s.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (s, 0),
    };
    // Collect the significant digits and where the decimal point sits relative to them:
    // value = 0.d1d2d3... * 10^decpt.
    let mut digits = [0u8; 32];
    let mut n = 0usize;
    let mut decpt: i32 = exp;
    let mut seen_point = false;
    let mut leading = true;
    for &c in mantissa.as_bytes() {
        if c == b'.' {
            seen_point = true;
            continue;
        }
        if leading && c == b'0' {
            if seen_point {
                decpt -= 1;
            }
            continue;
        }
        leading = false;
        if !seen_point {
            decpt += 1;
        }
        if n < digits.len() {
            digits[n] = c;
            n += 1;
        }
    }
    while n > 0 && digits[n - 1] == b'0' {
        n -= 1;
    }
    if neg {
        out.push('-');
    }
    if n == 0 {
        out.push_str("0.0");
        return;
    }
    let digits = &digits[..n];
    let push = |out: &mut String, d: &[u8]| {
        for &c in d {
            out.push(c as char);
        }
    };
    let x = decpt - 1; // exponent in d.ddd × 10^x form
    if !(-4..16).contains(&x) {
        push(out, &digits[..1]);
        if n > 1 {
            out.push('.');
            push(out, &digits[1..]);
        }
        out.push('e');
        out.push(if x < 0 { '-' } else { '+' });
        let ax = x.unsigned_abs();
        if ax < 10 {
            out.push('0');
        }
        out.push_str(&ax.to_string());
    } else if decpt <= 0 {
        out.push_str("0.");
        for _ in 0..(-decpt) {
            out.push('0');
        }
        push(out, digits);
    } else {
        let d = decpt as usize;
        if d < n {
            push(out, &digits[..d]);
            out.push('.');
            push(out, &digits[d..]);
        } else {
            push(out, digits);
            for _ in n..d {
                out.push('0');
            }
            out.push_str(".0");
        }
    }
}
