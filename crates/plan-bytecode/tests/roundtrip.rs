//! encode → decode gives back the same program, for every table and every opcode.

mod common;

use plan_bytecode::*;

#[test]
fn instr_is_at_most_16_bytes() {
    assert!(
        std::mem::size_of::<Instr>() <= 16,
        "Instr is {} bytes",
        std::mem::size_of::<Instr>()
    );
}

#[test]
fn sample_uses_every_opcode() {
    let p = common::sample();
    for op in Opcode::ALL {
        assert!(
            p.code.iter().any(|i| i.opcode() == *op),
            "sample lacks {}",
            op.name()
        );
    }
}

#[test]
fn sample_is_valid() {
    validate(common::sample()).unwrap();
    validate(common::stripped()).unwrap();
}

#[test]
fn round_trip_with_debug() {
    let p = common::sample();
    let bytes = encode(&p);
    assert!(is_pbc(&bytes));
    assert_eq!(decode(&bytes).unwrap(), p);
    assert_eq!(load(&bytes).unwrap().into_inner(), p);
}

#[test]
fn round_trip_stripped() {
    let p = common::stripped();
    let bytes = encode(&p);
    assert_eq!(decode(&bytes).unwrap(), p);
    assert!(bytes.len() < encode(&common::sample()).len());
    // The header says whether debug info is present.
    assert_eq!(u16::from_le_bytes([bytes[10], bytes[11]]) & FLAG_DEBUG, 0);
}

#[test]
fn round_trip_each_instruction_alone() {
    // One program per opcode: every other table empty except what the instruction needs,
    // so each section's presence/absence combination is exercised.
    let full = common::sample();
    for instr in &full.code {
        let p = Program {
            code: vec![*instr],
            debug: None,
            ..full.clone()
        };
        assert_eq!(decode(&encode(&p)).unwrap(), p, "{instr:?}");
    }
}

#[test]
fn empty_program_round_trips_but_does_not_validate() {
    let p = Program::default();
    let bytes = encode(&p);
    assert_eq!(bytes.len(), HEADER_LEN);
    assert_eq!(decode(&bytes).unwrap(), p);
    assert_eq!(
        load(&bytes).unwrap_err().message(),
        "program has no instructions"
    );
}

#[test]
fn empty_debug_info_round_trips() {
    let p = Program {
        code: vec![Instr::Nop],
        debug: Some(DebugInfo::default()),
        ..Program::default()
    };
    assert_eq!(decode(&encode(&p)).unwrap(), p);
}

#[test]
fn constants_of_every_kind_round_trip() {
    use serde_json::json;
    let consts = vec![
        json!(null),
        json!(true),
        json!(false),
        json!(0),
        json!(-1),
        json!(i64::MIN),
        json!(i64::MAX),
        json!(u64::MAX),
        json!(1.0),
        json!(-0.0),
        json!(f64::MAX),
        json!(f64::MIN_POSITIVE),
        json!(""),
        json!("héllo ✓ \u{0} \n"),
        json!([]),
        json!({}),
        json!({"b": 1, "a": [1, {"z": null}], "": "empty key"}),
    ];
    let p = Program {
        consts,
        code: vec![Instr::Nop],
        ..Program::default()
    };
    let back = decode(&encode(&p)).unwrap();
    assert_eq!(back, p);
    // Key order is preserved (it shows in interpolated text).
    let keys: Vec<_> = back.consts[16]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys, ["b", "a", ""]);
    // Floats keep their type: 1.0 does not come back as the integer 1.
    assert!(back.consts[8].is_f64());
}

#[test]
fn stripped_file_is_smaller_than_minified_json() {
    // The compact encoding must beat the program's own JSON form by a wide margin; the
    // source plan (with its verbose keys) is larger still.
    let p = common::stripped();
    let json = serde_json::to_vec(&p).unwrap();
    let pbc = encode(&p);
    assert!(
        pbc.len() * 2 < json.len(),
        "pbc {} bytes vs json {} bytes",
        pbc.len(),
        json.len()
    );
}

#[test]
fn is_pbc_checks_magic_only() {
    assert!(is_pbc(&MAGIC));
    assert!(!is_pbc(b"[{\"seq_no\": 0}]"));
    assert!(!is_pbc(&MAGIC[..7]));
    assert!(!is_pbc(b""));
}
