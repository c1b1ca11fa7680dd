//! Python's `repr(float)`: the shortest digits that round-trip, laid out the way CPython's
//! `float_repr_style = 'short'` does: scientific notation iff the decimal exponent is
//! < -4 or >= 16, otherwise positional with at least one fractional digit.
//!
//! The digits come straight from the float when it is a decimal of at most 15
//! significant digits with at most [`MAX_DIRECT_FRACTION`] of them after the point (what
//! plan arithmetic mostly makes: `2.5`, `0.75`, `19.99`), and from `ryu` otherwise. Both
//! give the same digits: see [`direct_digits`]. Such a decimal of at least `1e-4` is
//! written straight from its integer and fraction parts.

/// Formats `f` exactly like Python's `repr(f)` (`3.0`, `0.5`, `1e+16`, `1e-05`, `-0.0`).
pub fn python_float_repr(f: f64) -> String {
    let mut out = String::new();
    write_python_float(f, &mut out);
    out
}

/// Most fractional digits the direct path tries before leaving the float to `ryu`.
const MAX_DIRECT_FRACTION: usize = 8;

/// `10^k` for `k <= MAX_DIRECT_FRACTION`: exact doubles.
const POW10: [f64; MAX_DIRECT_FRACTION + 1] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8];
const POW10_U64: [u64; MAX_DIRECT_FRACTION + 1] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
];

/// Significant digits of the shortest round-trip form of `f`, as an integer `m`, and the
/// `k` such that the digits stand for `m / 10^k`; `None` when `f` is no such decimal of
/// at most 15 digits with `k <= MAX_DIRECT_FRACTION`.
///
/// Why these are ryu's digits: `m / 10^k` with `m` and `10^k` exact doubles is one
/// correctly rounded division, so the check below passes only if the decimal `m·10^-k`
/// reads back as `f`. Decimals of at most 15 significant digits lie at least 10^-15 of
/// their magnitude apart, more than the width of the interval that rounds to `f` (at
/// most 2^-52 of it), so at most one of them reads back as `f`: when this one does, it is
/// the shortest form, the one ryu finds.
#[inline]
fn direct_digits(f: f64) -> Option<(u64, usize)> {
    let a = f.abs();
    if !(1e-8..1e15).contains(&a) {
        return None;
    }
    for (k, &p) in POW10.iter().enumerate() {
        let x = a * p;
        if x >= 1e15 {
            return None;
        }
        // Rounded to the nearest integer by truncation: `f64::round` is a libm call here.
        let m = (x + 0.5) as u64;
        // Why the first test: it is a subtraction where the exact one is a division (a
        // dependent 13+ cycles, three times for a value such as 1234.75). It only skips
        // what the division would reject: if `m / p` rounds to `a` then `m` is within
        // `a·p·2^-53` of `a·p`, and `x` within `a·p·2^-53` too, so `|x - m| <= x·2^-51`,
        // far below `x·1e-13`.
        // NB: not `x == m`: that product is rounded too (`0.3 * 10` is not `3.0`).
        if (x - m as f64).abs() <= x * 1e-13 && m as f64 / p == a {
            return Some((m, k));
        }
    }
    None
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
    if f.is_sign_negative() {
        out.push('-');
    }
    if f == 0.0 {
        out.push_str("0.0");
        return;
    }
    let direct = direct_digits(f);
    if let Some((m, k)) = direct
        && f.abs() >= 1e-4
    {
        // NB: the usual case, written without the general layout: `m / 10^k` is below
        // 10^15 and at least 10^-4, so positional; and `m` has no trailing zero unless
        // `k` is 0 (`direct_digits` finds the smallest `k`).
        let mut buf = itoa::Buffer::new();
        out.push_str(buf.format(m / POW10_U64[k]));
        out.push('.');
        if k == 0 {
            out.push('0');
        } else {
            let fraction = buf.format(m % POW10_U64[k]);
            for _ in fraction.len()..k {
                out.push('0');
            }
            out.push_str(fraction);
        }
        return;
    }
    // Significant digits, without trailing zeros, and where the decimal point sits
    // relative to them: value = 0.d1d2d3... * 10^decpt.
    let mut digits = [0u8; 32];
    let (n, decpt) = match direct {
        Some((m, k)) => {
            // `m < 10^15`: its digits fit `digits`.
            let mut buf = itoa::Buffer::new();
            let text = buf.format(m).as_bytes();
            digits[..text.len()].copy_from_slice(text);
            (text.len(), text.len() as i32 - k as i32)
        }
        None => ryu_digits(f, &mut digits),
    };
    let mut n = n;
    while n > 0 && digits[n - 1] == b'0' {
        n -= 1;
    }
    layout(&digits[..n], decpt, out);
}

/// The shortest digits of finite, non-zero `f` from ryu's text: `(count, decpt)`.
fn ryu_digits(f: f64, digits: &mut [u8; 32]) -> (usize, i32) {
    let mut buf = ryu::Buffer::new();
    let s = buf.format_finite(f.abs());
    let (mantissa, exp) = match s.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (s, 0),
    };
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
    (n, decpt)
}

/// Writes `0.d1d2... * 10^decpt` as Python's repr does.
fn layout(digits: &[u8], decpt: i32, out: &mut String) {
    let n = digits.len();
    if n == 0 {
        out.push_str("0.0");
        return;
    }
    // The text is built in a buffer and appended once: at most 17 digits, a point, and
    // either an exponent (`e-308`) or up to 4 leading / 16 trailing zeros.
    let mut buf = [0u8; 48];
    let mut len = 0;
    let mut put = |bytes: &[u8]| {
        buf[len..len + bytes.len()].copy_from_slice(bytes);
        len += bytes.len();
    };
    let x = decpt - 1; // exponent in d.ddd × 10^x form
    if !(-4..16).contains(&x) {
        put(&digits[..1]);
        if n > 1 {
            put(b".");
            put(&digits[1..]);
        }
        put(if x < 0 { b"e-" } else { b"e+" });
        let ax = x.unsigned_abs();
        if ax >= 100 {
            put(&[b'0' + (ax / 100) as u8]);
        }
        put(&[b'0' + (ax / 10 % 10) as u8, b'0' + (ax % 10) as u8]);
    } else if decpt <= 0 {
        put(b"0.");
        for _ in 0..(-decpt) {
            put(b"0");
        }
        put(digits);
    } else {
        let d = decpt as usize;
        if d < n {
            put(&digits[..d]);
            put(b".");
            put(&digits[d..]);
        } else {
            put(digits);
            for _ in n..d {
                put(b"0");
            }
            put(b".0");
        }
    }
    push_ascii(out, &buf[..len]);
}

/// Appends ASCII text (digits, signs, points) byte by byte: no UTF-8 validation, which
/// cost more than the digits themselves for short numbers.
#[inline]
pub(crate) fn push_ascii(out: &mut String, bytes: &[u8]) {
    out.reserve(bytes.len());
    for &b in bytes {
        // NB: only ASCII is passed; any other byte would still be a valid char.
        out.push(char::from(b));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The repr through ryu alone, as before the direct path.
    fn via_ryu(f: f64) -> String {
        let mut out = String::new();
        if f.is_sign_negative() {
            out.push('-');
        }
        let mut digits = [0u8; 32];
        let (mut n, decpt) = ryu_digits(f, &mut digits);
        while n > 0 && digits[n - 1] == b'0' {
            n -= 1;
        }
        layout(&digits[..n], decpt, &mut out);
        out
    }

    /// A small deterministic generator (xorshift64*), so failures reproduce.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
    }

    #[test]
    fn direct_digits_are_ryus_digits() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut direct = 0;
        let mut check = |f: f64| {
            if f.is_finite() && f != 0.0 {
                if direct_digits(f).is_some() {
                    direct += 1;
                }
                let mut got = String::new();
                write_python_float(f, &mut got);
                assert_eq!(got, via_ryu(f), "{f:e} ({:#x})", f.to_bits());
            }
        };
        for _ in 0..60_000 {
            let r = rng.next();
            // Short decimals of every size and fraction (the direct path's inputs).
            let m = (r >> 20) % 10u64.pow(1 + (r % 16) as u32);
            let k = (r >> 8) % 12;
            let d = m as f64 / 10f64.powi(k as i32);
            check(d);
            check(-d);
            // Their neighbours, one unit in the last place away (never short decimals).
            check(f64::from_bits(d.to_bits().wrapping_add(1)));
            check(f64::from_bits(d.to_bits().wrapping_sub(1)));
            // Arithmetic on them, as plans do it.
            check(d * 3.0 / 7.0);
            check(d + 0.1);
            // Any bit pattern.
            check(f64::from_bits(rng.next()));
        }
        for f in [
            1e-8,
            1e-9,
            1.5e-8,
            0.1,
            0.2 + 0.1,
            1e15,
            999_999_999_999_999.0,
            999_999_999_999_999.9,
            1e15 - 0.5,
            123_456_789.123_456_78,
            9_007_199_254_740_993.0,
            f64::MIN_POSITIVE,
            f64::MAX,
            1e16,
            0.000_123_456_78,
            // Around the lower bound of the positional form (Python writes 1e-05 below it).
            1e-4,
            9.9e-5,
            0.000_100_000_01,
            3.0,
            1_342_177.75,
        ] {
            check(f);
        }
        assert!(
            direct > 30_000,
            "the direct path was taken only {direct} times"
        );
    }
}
