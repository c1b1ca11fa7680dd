//! Run error codes are stable, distinct, serialized as written, declared with their
//! documentation in `plan_vm::codes` (which `planc codes` lists), and documented.

use plan_vm::ErrorCode;

#[test]
fn codes_are_distinct_serialized_as_written_and_documented() {
    let docs = include_str!("../../../docs/semantics.md");
    let mut seen = std::collections::HashSet::new();
    assert_eq!(ErrorCode::ALL.len(), plan_vm::codes::ALL.len());
    for (code, declared) in ErrorCode::ALL.into_iter().zip(plan_vm::codes::ALL) {
        let s = code.as_str();
        assert_eq!(
            s, declared.code,
            "ErrorCode::ALL and codes::ALL in one order"
        );
        assert!(seen.insert(s), "{s} twice");
        assert!(s.len() == 5 && s.starts_with('R'), "{s}");
        assert_eq!(serde_json::to_value(code).unwrap(), serde_json::json!(s));
        let back: ErrorCode = serde_json::from_value(serde_json::json!(s)).unwrap();
        assert_eq!(back, code);
        assert!(
            docs.contains(&format!("| {s} |")),
            "{s} is not in docs/semantics.md"
        );
    }
}
