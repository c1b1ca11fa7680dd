//! Property tests: no input panics, hangs or overflows the stack in any entry point.

use plan_syntax::{Dialect, classify_string, parse, parse_arith, parse_plan, read};
use proptest::prelude::*;

fn everything(s: &str) {
    let r = read(s);
    if let Some(node) = &r.value {
        // Spans always lie inside the source, on char boundaries.
        check_spans(s, node);
        let _ = parse_plan(node);
    }
    for d in &r.diagnostics {
        if let Some(sp) = d.span {
            assert!(sp.start <= sp.end && (sp.end as usize) <= s.len(), "{d:?}");
            assert!(
                s.is_char_boundary(sp.start as usize) && s.is_char_boundary(sp.end as usize),
                "{d:?}"
            );
        }
    }
    let _ = parse(s);
    for d in [Dialect::Current, Dialect::Older] {
        let _ = classify_string(s, d);
        let _ = parse_arith(s, d);
    }
}

fn check_spans(src: &str, node: &plan_syntax::Node) {
    let range = node.span.range();
    assert!(range.start <= range.end && range.end <= src.len());
    assert!(src.is_char_boundary(range.start) && src.is_char_boundary(range.end));
    match &node.kind {
        plan_syntax::NodeKind::Array(items) => items.iter().for_each(|n| check_spans(src, n)),
        plan_syntax::NodeKind::Object(members) => {
            members.iter().for_each(|m| check_spans(src, &m.value))
        }
        _ => {}
    }
}

/// Strings built from the pieces the reader and template lexer care about, so random
/// inputs reach the interesting states (not just "no JSON found").
fn jsonish() -> impl Strategy<Value = String> {
    let atoms = prop::sample::select(vec![
        "[",
        "]",
        "{",
        "}",
        ",",
        ":",
        "\"",
        "'",
        "\\",
        "\\u",
        "\\x",
        "\\U",
        "d83d",
        "0",
        "-",
        "1.5e3",
        "e",
        ".",
        " ",
        "\n",
        "//",
        "/*",
        "*/",
        "```",
        "```json\n",
        "<think>",
        "</think>",
        "<answer>",
        "</answer>",
        "true",
        "None",
        "NaN",
        "${",
        "}",
        "${a.b}",
        "{{",
        "}}",
        "{{ x }}",
        "+",
        "*",
        "**",
        "%",
        "(",
        ")",
        "é",
        "\"seq_no\"",
        "\"type\"",
        "\"parameters\"",
        "\"calling\"",
        "\"jmp\"",
        "\"condition\"",
        "\"assign\"",
        "\"tool_name\"",
        "\"true_branch\"",
        "\"target_seq\"",
        "\"value\"",
        "\"var_name\"",
        "\"output_vars\"",
    ]);
    prop::collection::vec(atoms, 0..80).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_strings(s in any::<String>()) {
        everything(&s);
    }

    #[test]
    fn arbitrary_bytes(b in prop::collection::vec(any::<u8>(), 0..512)) {
        everything(&String::from_utf8_lossy(&b));
    }

    #[test]
    fn jsonish_strings(s in jsonish()) {
        everything(&s);
    }

    #[test]
    fn nested_brackets(depth in 0usize..2000, open in prop::sample::select(vec!["[", "{\"a\":", "[{\"k\": [", "("]), close in any::<bool>()) {
        let mut s = open.repeat(depth);
        if close {
            s.push('1');
            s.push_str(&"]".repeat(depth));
        }
        everything(&s);
    }
}

#[test]
fn very_deep_nesting_is_a_clean_error() {
    let s = "[".repeat(1_000_000);
    let r = read(&s);
    assert!(r.value.is_none());
    assert_eq!(r.diagnostics.len(), 1);
    assert_eq!(r.diagnostics[0].code, plan_syntax::codes::TOO_DEEP);
    let s = "{\"a\":".repeat(1_000_000);
    assert_eq!(read(&s).diagnostics[0].code, plan_syntax::codes::TOO_DEEP);
    // In prose, a deep candidate is still reported as too deep.
    let s = format!("Plan: {}", "[".repeat(10_000));
    assert_eq!(read(&s).diagnostics[0].code, plan_syntax::codes::TOO_DEEP);
}

#[test]
fn many_brackets_in_prose_find_no_plan() {
    // Every `[` is a candidate that fails at once; the candidate cap bounds the work,
    // which `scripts/counters` counts per bracket (`icount brackets`): a million took
    // hours when it was quadratic.
    let s = "[x ".repeat(1_000_000);
    let r = read(&s);
    assert!(r.value.is_none());
}

#[test]
fn error_count_is_capped() {
    let s = format!("[{}]", "1 ".repeat(10_000));
    let r = read(&s);
    assert!(r.value.is_none(), "too many errors stops the parse");
    assert_eq!(r.diagnostics.len(), plan_syntax::limits::MAX_READ_ERRORS);
}
