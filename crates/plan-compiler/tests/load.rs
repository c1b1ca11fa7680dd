//! `plan_compiler::load`: one loader for bytecode and source, every refusal as data.

use plan_compiler::{CompileOptions, LoadError, MAX_INPUT_BYTES, load, read_capped};
use plan_syntax::limits::MAX_SOURCE_BYTES;

const PLAN: &str = r#"[
  {"seq_no": 0, "type": "assign", "parameters": {"x": "2024-10-05"}},
  {"seq_no": 1, "type": "assign", "parameters": {"final_answer": "${x}"}}
]"#;

fn opts() -> CompileOptions {
    CompileOptions::default()
}

#[test]
fn source_and_its_bytecode_load_to_the_same_program() {
    let from_source = load(PLAN.as_bytes().to_vec(), &opts()).unwrap();
    assert_eq!(from_source.source.as_deref(), Some(PLAN));
    // The constant-folded date (W0210) and the first instruction not being reasoning.
    let codes: Vec<_> = from_source.diagnostics.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["W0206", "W0210"]);
    assert!(from_source.diagnostics.iter().all(|d| !d.is_error()));

    let pbc = plan_bytecode::encode(&from_source.program);
    let from_pbc = load(pbc, &opts()).unwrap();
    assert_eq!(from_pbc.program, from_source.program);
    assert_eq!(from_pbc.source, None);
    assert!(from_pbc.diagnostics.is_empty());
}

#[test]
fn a_plan_with_errors_keeps_every_diagnostic() {
    let bad = r#"[{"seq_no": 0, "type": "calling", "parameters": {"tool_name": "nope"}},
                  {"seq_no": 0, "type": "assign", "parameters": {"y": "${q}"}}]"#;
    let Err(e) = load(bad.as_bytes().to_vec(), &opts()) else {
        panic!("loaded a plan with errors");
    };
    let LoadError::Invalid {
        source,
        diagnostics,
        ..
    } = &e
    else {
        panic!("{e:?}");
    };
    assert_eq!(source, bad);
    let mut errors: Vec<_> = diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.code)
        .collect();
    errors.sort_unstable();
    // Unknown tool, duplicate seq_no, and no final_answer: all reported together.
    assert_eq!(errors, ["E0201", "E0202", "E0206"]);
    assert!(
        diagnostics.iter().any(|d| !d.is_error()),
        "warnings are kept too"
    );
    assert_eq!(e.error_count(), 3);
    assert_eq!(e.to_string(), "3 errors");
}

#[test]
fn bytes_that_are_neither_bytecode_nor_text_are_refused_with_the_offset() {
    let e = load(b"[\"a\xff\"]".to_vec(), &opts()).unwrap_err();
    assert!(matches!(e, LoadError::NotText { offset: 3 }), "{e:?}");
    assert!(e.to_string().contains("invalid byte at offset 3"), "{e}");
}

#[test]
fn damaged_bytecode_is_a_bytecode_error() {
    let ok = load(PLAN.as_bytes().to_vec(), &opts()).unwrap();
    let mut pbc = plan_bytecode::encode(&ok.program);
    let last = pbc.len() - 1;
    pbc[last] ^= 0xff;
    let e = load(pbc, &opts()).unwrap_err();
    assert!(matches!(e, LoadError::Bytecode(_)), "{e:?}");
    assert!(e.to_string().contains("checksum mismatch"), "{e}");
}

#[test]
fn source_over_the_limit_is_refused_by_its_size_alone() {
    let big = vec![b' '; MAX_SOURCE_BYTES + 1];
    let e = load(big, &opts()).unwrap_err();
    assert!(matches!(e, LoadError::TooLarge { len } if len == MAX_SOURCE_BYTES + 1));
    // Exactly at the limit is read (and is then just an empty plan).
    let at = vec![b' '; MAX_SOURCE_BYTES];
    assert!(matches!(
        load(at, &opts()).unwrap_err(),
        LoadError::Invalid { .. }
    ));
}

#[test]
fn read_capped_reads_one_byte_past_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.json");
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(MAX_INPUT_BYTES + 100).unwrap();
    assert_eq!(
        read_capped(&path).unwrap().len() as u64,
        MAX_INPUT_BYTES + 1
    );
    assert!(read_capped(&dir.path().join("missing.json")).is_err());
}
