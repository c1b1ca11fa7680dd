//! Behaviour tests for number parsing, interpolation, byte accounting, object extraction,
//! previews and condition answers.

use plan_value::*;
use serde_json::{Value, json};

#[test]
fn to_num_accepts_what_python_int_and_float_accept() {
    let cases: &[(Value, Option<Num>)] = &[
        (json!(3), Some(Num::Int(3))),
        (json!(-3), Some(Num::Int(-3))),
        (json!(2.5), Some(Num::Float(2.5))),
        (json!(u64::MAX), Some(Num::Float(u64::MAX as f64))),
        (json!("3"), Some(Num::Int(3))),
        (json!("-3"), Some(Num::Int(-3))),
        (json!("+3"), Some(Num::Int(3))),
        (json!("  42\n"), Some(Num::Int(42))),
        (json!("007"), Some(Num::Int(7))),
        (json!("3.5"), Some(Num::Float(3.5))),
        (json!("1e3"), Some(Num::Float(1000.0))),
        (json!("1E-2"), Some(Num::Float(0.01))),
        (json!(".5"), Some(Num::Float(0.5))),
        (json!("5."), Some(Num::Float(5.0))),
        (json!("-.5e+1"), Some(Num::Float(-5.0))),
        (json!("inf"), None),
        (json!("-inf"), None),
        (json!("nan"), None),
        (json!("infinity"), None),
        (json!("0x10"), None),
        (json!(""), None),
        (json!("   "), None),
        (json!("1_000"), None),
        (json!("."), None),
        (json!("e3"), None),
        (json!("1e"), None),
        (json!("1e+"), None),
        (json!("--1"), None),
        (json!("+-1"), None),
        (json!("1 2"), None),
        (json!("1e400"), None),
        (json!("99999999999999999999"), None),
        (json!("٣"), None),
        (json!(true), None),
        (json!(null), None),
        (json!([1]), None),
        (json!({"a": 1}), None),
    ];
    for (v, want) in cases {
        assert_eq!(to_num(v), *want, "to_num({v})");
    }
}

#[test]
fn pow_is_bounded() {
    // NB: an unbounded `2 ** i64::MAX` would never end.
    let cases = [
        (Num::Int(2), Num::Int(i64::MAX), None),
        (Num::Int(-3), Num::Int(i64::MAX), None),
        (Num::Int(1), Num::Int(i64::MAX), Some(Num::Int(1))),
        (Num::Int(-1), Num::Int(i64::MAX), Some(Num::Int(-1))),
        (Num::Int(-1), Num::Int(i64::MAX - 1), Some(Num::Int(1))),
        (Num::Int(0), Num::Int(i64::MAX), Some(Num::Int(0))),
        (Num::Int(0), Num::Int(0), Some(Num::Int(1))),
        (Num::Int(0), Num::Int(-1), None),
        (Num::Int(1), Num::Int(i64::MIN), Some(Num::Float(1.0))),
        (Num::Int(2), Num::Int(-1), Some(Num::Float(0.5))),
        (Num::Int(2), Num::Int(62), Some(Num::Int(1 << 62))),
        (Num::Int(2), Num::Int(63), None),
        (Num::Int(-2), Num::Int(63), Some(Num::Int(i64::MIN))),
        (Num::Float(10.0), Num::Float(1e300), None),
        (Num::Float(-8.0), Num::Float(1.0 / 3.0), None),
        (Num::Float(-8.0), Num::Float(3.0), Some(Num::Float(-512.0))),
        (Num::Float(0.0), Num::Float(-0.5), None),
    ];
    for (a, b, want) in cases {
        assert_eq!(binary(Op2::Pow, a, b), want, "{a:?} ** {b:?}");
    }
}

#[test]
fn python_semantics_spot_checks() {
    use Num::*;
    assert_eq!(binary(Op2::Div, Int(7), Int(2)), Some(Float(3.5)));
    assert_eq!(binary(Op2::Div, Int(6), Int(3)), Some(Float(2.0)));
    assert_eq!(binary(Op2::Mod, Int(-7), Int(3)), Some(Int(2)));
    assert_eq!(binary(Op2::Mod, Int(7), Int(-3)), Some(Int(-2)));
    assert_eq!(binary(Op2::Mod, Int(i64::MIN), Int(-1)), Some(Int(0)));
    assert_eq!(binary(Op2::Mod, Float(-7.5), Float(2.0)), Some(Float(0.5)));
    assert_eq!(binary(Op2::Mod, Int(5), Int(0)), None);
    assert_eq!(binary(Op2::Div, Float(1.0), Float(0.0)), None);
    assert_eq!(binary(Op2::Add, Int(i64::MAX), Int(1)), None);
    assert_eq!(binary(Op2::Mul, Float(1e300), Float(1e300)), None);
    assert_eq!(binary(Op2::Add, Int(1), Float(0.5)), Some(Float(1.5)));
    assert_eq!(unary(Op1::Neg, Int(i64::MIN)), None);
    assert_eq!(num_to_value(Int(3)), json!(3));
    assert_eq!(num_to_value(Float(3.0)), json!(3.0));
    assert_eq!(num_to_value(Float(f64::NAN)), Value::Null);
}

#[test]
fn interpolation_formats_each_type() {
    let cases: &[(Value, &str)] = &[
        (json!("raw \"text\"\n"), "raw \"text\"\n"),
        (json!(42), "42"),
        (json!(-7), "-7"),
        (json!(i64::MIN), "-9223372036854775808"),
        (json!(u64::MAX), "18446744073709551615"),
        (json!(3.5), "3.5"),
        (json!(3.0), "3.0"),
        (json!(0.5), "0.5"),
        (json!(1e16), "1e+16"),
        (json!(1e-5), "1e-05"),
        (json!(true), "true"),
        (json!(false), "false"),
        (json!(null), "null"),
        (json!([1, "a", null, 2.5]), r#"[1,"a",null,2.5]"#),
        (
            json!({"b": 1, "a": [true], "c": {"d": "x"}}),
            r#"{"b":1,"a":[true],"c":{"d":"x"}}"#,
        ),
        (json!({"z": 1, "y": 2}), r#"{"z":1,"y":2}"#),
        // NB: nested floats are serde_json's rendering, not Python's repr.
        (json!([1e16, 3.0, 1e-5]), "[1e+16,3.0,0.00001]"),
        (
            json!({"s": "q\"\\\n\u{1}\u{7f}é"}),
            "{\"s\":\"q\\\"\\\\\\n\\u0001\u{7f}é\"}",
        ),
        (json!([]), "[]"),
        (json!({}), "{}"),
    ];
    for (v, want) in cases {
        let got = interpolated(v);
        assert_eq!(got, *want, "interpolating {v}");
        assert_eq!(interpolated_len(v), got.len() as u64, "length of {v}");
    }
}

#[test]
fn interpolated_len_is_exact_on_generated_json() {
    // Every float repr from the table, nested and not, with every control character.
    let mut s = String::new();
    for c in 0u8..0x80 {
        s.push(c as char);
    }
    let values = vec![
        json!(s),
        json!([s, {"k\u{0}\"": [1.25e-7, -0.0, 123456789.0, 1e300, 5e-324]}]),
        json!({"nested": {"deeper": [[[], {}], [null, false, u64::MAX, i64::MIN]]}}),
    ];
    for v in values {
        assert_eq!(interpolated_len(&v), interpolated(&v).len() as u64, "{v}");
        assert_eq!(
            json_len(&v),
            serde_json::to_string(&v).unwrap().len() as u64
        );
    }
}

#[test]
fn value_bytes_counts_nodes_strings_and_keys() {
    assert_eq!(value_bytes(&json!(null)), NODE_BYTES);
    assert_eq!(value_bytes(&json!(12)), NODE_BYTES);
    assert_eq!(value_bytes(&json!("abcd")), NODE_BYTES + 4);
    assert_eq!(value_bytes(&json!([1, "ab"])), 3 * NODE_BYTES + 2);
    assert_eq!(value_bytes(&json!({"key": "v"})), 3 * NODE_BYTES + 3 + 1);
    assert_eq!(value_size(&json!([[[1]]])).depth, 4);
    assert_eq!(value_size(&json!(1)).depth, 1);
    // Deep values are measured without recursion.
    let mut v = json!(0);
    for _ in 0..100_000 {
        v = Value::Array(vec![v]);
    }
    let size = value_size(&v);
    assert_eq!(size.depth, 100_001);
    assert_eq!(size.bytes, 100_001 * NODE_BYTES);
    // Drop the deep value without recursing through it.
    let mut cur = v;
    while let Value::Array(mut a) = cur {
        cur = a.pop().unwrap_or(Value::Null);
    }
}

#[test]
fn extract_first_object_cases() {
    let cases: &[(&str, Option<Value>)] = &[
        (r#"{"a": 1}"#, Some(json!({"a": 1}))),
        ("  \n{\"a\": 1}\n ", Some(json!({"a": 1}))),
        (
            "Here you go: {\"a\": 1, \"b\": \"x\"} hope it helps",
            Some(json!({"a": 1, "b": "x"})),
        ),
        (
            "Sure!\n```json\n{\"answer\": \"yes\", \"n\": 2}\n```\nDone.",
            Some(json!({"answer": "yes", "n": 2})),
        ),
        ("```JSON\n{\"a\": 2}\n```", Some(json!({"a": 2}))),
        // The fence is preferred over an earlier object in prose.
        (
            "{\"early\": 1}\nbut really:\n```json\n{\"a\": 3}\n```",
            Some(json!({"a": 3})),
        ),
        // A fence that is not an object falls back to scanning.
        ("```json\n[1, 2]\n```\n{\"a\": 4}", Some(json!({"a": 4}))),
        // Braces inside strings don't confuse it.
        (
            r#"x {"s": "a } b { c", "t": "}"} y"#,
            Some(json!({"s": "a } b { c", "t": "}"})),
        ),
        (
            r#"{"s": "esc \" } {", "n": {"m": [1, {"k": "}"}]}}"#,
            Some(json!({"s": "esc \" } {", "n": {"m": [1, {"k": "}"}]}})),
        ),
        // Invalid candidates before a valid one.
        (
            r#"{not json} {"a": } {"b" 1} {"ok": true}"#,
            Some(json!({"ok": true})),
        ),
        (r#"set {x} to {"y": {"z": 1}"#, Some(json!({"z": 1}))),
        ("he said \"hi {\" and {\"a\": 1}", Some(json!({"a": 1}))),
        ("{}", Some(json!({}))),
        ("no objects here", None),
        ("[1, 2, 3]", None),
        ("{\"unterminated\": ", None),
        ("", None),
    ];
    for (text, want) in cases {
        let got = extract_first_object(text).map(Value::Object);
        assert_eq!(&got, want, "extract from {text:?}");
    }
}

#[test]
fn extract_first_object_through_endless_openings() {
    // NB: each opening is a candidate that fails; the cost per opening (once quadratic in
    // their number) is counted by `scripts/counters` (`icount objects`), not timed here.
    let texts = [
        "{".repeat(1 << 20),
        "{\"a\":[".repeat(1 << 17),
        "{\"".repeat(1 << 19),
        format!("{}{{\"found\": 1}}", "{\"k\": \"v\", ".repeat(1 << 18)),
    ];
    let found: Vec<_> = texts.iter().map(|t| extract_first_object(t)).collect();
    let want = json!({"found": 1}).as_object().cloned();
    assert_eq!(found, [None, None, None, want]);
}

#[test]
fn preview_is_short_single_line_and_char_safe() {
    assert_eq!(preview(&json!("short"), 80), "short");
    assert_eq!(preview(&json!("a\nb\tc"), 80), "a\\nb\\tc");
    assert_eq!(preview(&json!("ééééé"), 3), "ééé…");
    assert_eq!(preview(&json!({"a": [1, 2]}), 80), r#"{"a":[1,2]}"#);
    assert_eq!(preview(&json!({"a": "xxxxxxxx"}), 5), r#"{"a":…"#);
    assert_eq!(preview(&json!(3.0), 80), "3.0");
    let huge = json!(vec!["x".repeat(1000); 10_000]);
    let p = preview(&huge, 20);
    assert_eq!(p.chars().count(), 21);
    assert!(p.ends_with('…'));
}

#[test]
fn condition_answer_shapes() {
    let ok: &[(Value, bool)] = &[
        (json!(true), true),
        (json!(false), false),
        (json!("true"), true),
        (json!("FALSE"), false),
        (json!("  True.\n"), true),
        (json!("\"false\""), false),
        (json!({"result": true, "explanation": "x"}), true),
        (
            json!(r#"{"result": false, "explanation": "no {braces} here"}"#),
            false,
        ),
        (
            json!("Thinking...\n```json\n{\"result\": true, \"explanation\": \"ok\"}\n```"),
            true,
        ),
        (
            json!("The answer: {\"explanation\": \"because\", \"result\": false}"),
            false,
        ),
    ];
    for (v, want) in ok {
        assert_eq!(parse_condition_answer(v), Ok(*want), "{v}");
    }
    let bad = [
        json!("maybe"),
        json!("true or false"),
        json!({"result": "true"}),
        json!(r#"{"answer": true}"#),
        json!(1),
        json!(null),
        json!([true]),
    ];
    for v in bad {
        let err = parse_condition_answer(&v).expect_err("must be rejected");
        assert!(err.contains(&preview(&v, 200)), "{err}");
    }
}
