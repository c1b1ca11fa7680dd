//! The public API in use, plus the properties that are easier to state as code than as a
//! corpus file: spans index the original source, strict JSON reads exactly as serde_json
//! reads it, every code is documented and unique.

use plan_syntax::{
    CallForm, Dialect, InstrKind, LineIndex, NodeKind, Severity, codes, limits, parse, parse_plan,
    read,
};
use proptest::prelude::*;

/// The walkthrough: text in, plan out, diagnostics as data.
#[test]
fn api_walkthrough() {
    let src = "Here you go:\n```json\n[{'seq_no': 0, 'type': 'calling', 'parameters': \
               {'tool_name': 'vector_search', 'tool_params': {'query': 'q', 'top_k': 3}, 'output_vars': ['final_answer']},},]\n```";
    let parsed = parse(src);
    assert!(!parsed.has_errors());
    let plan = parsed.value.as_ref().expect("a plan");
    assert_eq!(plan.dialect, Dialect::Current);
    let InstrKind::Call(call) = &plan.instructions[0].kind else {
        panic!("not a call: {:?}", plan.instructions[0].kind)
    };
    let plan_syntax::Call {
        tool,
        params,
        output_vars,
        form,
    } = &**call;
    assert_eq!(
        (tool.text.as_str(), *form),
        ("vector_search", CallForm::Calling)
    );
    assert_eq!(params.len(), 2);
    assert_eq!(output_vars[0].text, "final_answer");
    // Spans point into the original text, fence and prose included.
    assert_eq!(&src[tool.span.range()], "'vector_search'");
    assert_eq!(&src[output_vars[0].span.range()], "'final_answer'");
    // Every repair is a warning with a location; `--strict` promotes exactly these.
    let kinds: Vec<&str> = parsed.diagnostics.iter().map(|d| d.code).collect();
    assert!(kinds.contains(&codes::CODE_FENCE));
    assert!(kinds.contains(&codes::SINGLE_QUOTED));
    assert!(kinds.contains(&codes::TRAILING_COMMA));
    assert!(
        parsed
            .diagnostics
            .iter()
            .all(|d| d.severity == Severity::Warning && codes::is_reader_repair(d.code))
    );
    let index = LineIndex::new(src);
    let fence = parsed
        .diagnostics
        .iter()
        .find(|d| d.code == codes::CODE_FENCE)
        .expect("fence warning");
    assert_eq!(fence.line_col(&index), Some((2, 1)));
    assert!(parse(src).into_result().is_ok());
}

#[test]
fn spans_inside_answer_wrapper_are_absolute() {
    let src = "<think>ignore [me]</think>\n<answer>\n{\"k\": [10, \"v\"]}\n</answer>";
    let node = read(src).value.expect("value");
    assert_eq!(&src[node.span.range()], "{\"k\": [10, \"v\"]}");
    let members = node.as_object().expect("object");
    assert_eq!(&src[members[0].key_span.range()], "\"k\"");
    let items = members[0].value.as_array().expect("array");
    assert_eq!(&src[items[0].span.range()], "10");
    assert_eq!(&src[items[1].span.range()], "\"v\"");
}

#[test]
fn line_and_column_count_characters() {
    let src = "[\n  \"日本\", @]";
    let r = read(src);
    let d = r.diagnostics.iter().find(|d| d.is_error()).expect("error");
    assert_eq!(d.code, codes::SYNTAX);
    assert_eq!(d.line_col(&LineIndex::new(src)), Some((2, 9)));
}

#[test]
fn into_result_reports_errors() {
    let err = parse("[{\"seq_no\": 0}]")
        .into_result()
        .expect_err("errors");
    let codes_seen: Vec<&str> = err.iter().map(|d| d.code).collect();
    assert_eq!(
        codes_seen,
        vec![codes::MISSING_TYPE, codes::MISSING_PARAMETERS]
    );
    assert!(err.iter().all(|d| d.seq_no == Some(0)));
}

#[test]
fn too_large_input_is_refused() {
    let src = " ".repeat(limits::MAX_SOURCE_BYTES + 1);
    let r = read(&src);
    assert!(r.value.is_none());
    assert_eq!(r.diagnostics[0].code, codes::TOO_LARGE);
}

#[test]
fn codes_are_unique_well_formed_and_documented() {
    let mut seen = std::collections::HashSet::new();
    for c in codes::ALL {
        let code = c.code;
        assert!(seen.insert(code), "duplicate code {code}");
        assert!(
            code.starts_with("E00")
                || code.starts_with("W00")
                || code.starts_with("E01")
                || code.starts_with("W01"),
            "{code}"
        );
        assert_eq!(code.len(), 5, "{code}");
        assert!(
            c.doc.trim().len() > 10,
            "{code} ({}) has no example",
            c.name
        );
        assert_eq!(c.is_repair(), code.starts_with("W00"), "{code}");
    }
    assert!(codes::is_reader_repair(codes::TRAILING_COMMA));
    assert!(!codes::is_reader_repair(codes::SYNTAX));
    assert!(!codes::is_reader_repair(codes::WRAPPED_PLAN));
}

#[test]
fn every_repair_has_a_strict_error_code_of_the_same_number() {
    let repairs: Vec<&str> = codes::ALL
        .iter()
        .map(|c| c.code)
        .filter(|c| c.starts_with("W00"))
        .collect();
    assert_eq!(repairs.len(), codes::STRICT_REPAIRS.len());
    for w in repairs {
        let e = codes::strict_code(w).unwrap_or_else(|| panic!("{w} has no strict code"));
        assert_eq!(e, format!("E08{}", &w[3..]), "{w}");
        assert!(codes::is_reader_repair(e), "{e}");
        assert!(!codes::ALL.iter().any(|c| c.code == e), "{e} is taken");
    }
    assert_eq!(codes::strict_code(codes::SYNTAX), None);
}

#[test]
fn parse_plan_on_hand_built_deep_tree_is_bounded() {
    // parse_plan takes any Node, not only reader output: its own depth cap applies.
    let mut src = String::from("{\"seq_no\": 0, \"type\": \"assign\", \"parameters\": {}}");
    for k in 0..40 {
        src = format!(
            "{{\"seq_no\": {k}, \"type\": \"condition\", \"parameters\": {{\"true_branch\": [{src}]}}}}"
        );
    }
    let node = read(&format!("[{src}]")).value.expect("reads: 121 levels");
    let p = parse_plan(&node);
    assert!(p.diagnostics.iter().any(|d| d.code == codes::PLAN_TOO_DEEP));
}

fn arb_json() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| Value::Number(n.into())),
        any::<u64>().prop_map(|n| Value::Number(n.into())),
        any::<f64>()
            .prop_filter_map("finite", serde_json::Number::from_f64)
            .prop_map(Value::Number),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec((any::<String>(), inner), 0..8)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    /// Strict JSON (compact or pretty) reads to exactly what serde_json reads, with no
    /// diagnostics at all, whatever the value.
    #[test]
    fn strict_json_reads_like_serde_json(v in arb_json(), pretty in any::<bool>()) {
        let text = if pretty { serde_json::to_string_pretty(&v) } else { serde_json::to_string(&v) }.expect("serialize");
        let r = read(&text);
        // A top-level scalar string that looks like prose is still read (it is the whole input).
        prop_assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
        let node = r.value.expect("value");
        prop_assert_eq!(node.to_value(), v);
        prop_assert_eq!(node.span.range(), 0..text.len());
    }
}

#[test]
fn number_edge_cases_match_serde_json() {
    for text in [
        "-0",
        "0",
        "1e2",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775809",
        "1.7976931348623157e308",
        "5e-324",
        "0.1",
    ] {
        let node = read(text).value.expect(text);
        let NodeKind::Number(n) = &node.kind else {
            panic!("{text}: not a number")
        };
        let want: serde_json::Value = serde_json::from_str(text).expect(text);
        assert_eq!(serde_json::Value::Number(n.clone()), want, "{text}");
    }
}
