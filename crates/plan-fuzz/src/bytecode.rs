//! Target `bytecode`: arbitrary bytes as a `.pbc` file.
//!
//! The bytes are loaded twice: as they are, and with the header checksum recomputed, so
//! mutations reach the section decoder and the validator instead of all dying on the CRC.
//! Whatever validates must: disassemble, round-trip through encode → decode, and run to a
//! clean end under a stub host with tight limits (1,000 steps, small byte limits) that
//! answers every request with a value derived from the input.

use plan_bytecode::{HEADER_LEN, ValidatedProgram};
use plan_vm::{Limits, RequestKind, ToolRequest, Vm};
use serde_json::{Value, json};

use crate::drive::drive;

/// Tight limits: every run ends quickly and allocates little.
pub fn limits() -> Limits {
    Limits {
        max_steps: 1000,
        max_total_bytes: 64 << 10,
        max_value_bytes: 16 << 10,
        ..Limits::default()
    }
}

pub fn run(data: &[u8]) {
    check(data);
    if let Some(fixed) = with_fixed_checksum(data) {
        check(&fixed);
    }
}

/// `data` with its header checksum recomputed over the rest (`None` when there is no
/// whole header), so that a mutated file gets past the CRC check.
pub fn with_fixed_checksum(data: &[u8]) -> Option<Vec<u8>> {
    if data.len() < HEADER_LEN {
        return None;
    }
    let mut fixed = data.to_vec();
    let crc = crc32fast::hash(&fixed[HEADER_LEN..]).to_le_bytes();
    fixed[12..16].copy_from_slice(&crc);
    Some(fixed)
}

fn check(bytes: &[u8]) {
    // A decode that succeeds but does not validate is fine; a panic anywhere is not.
    let Ok(program) = plan_bytecode::load(bytes) else {
        return;
    };
    let _ = plan_bytecode::disasm(&program);
    let again = plan_bytecode::decode(&plan_bytecode::encode(&program))
        .expect("a validated program must re-encode to a decodable file");
    assert_eq!(
        &again,
        program.program(),
        "encode → decode changed a validated program"
    );
    execute(&program, bytes);
}

fn execute(program: &ValidatedProgram, seed: &[u8]) {
    let mut vm = Vm::new(program, limits());
    let mut n: usize = 0;
    let _ = drive(&mut vm, &limits(), |r| {
        n += 1;
        answer(r, seed, n)
    });
}

/// A deterministic answer picked by the input bytes and the request count.
fn answer(r: &ToolRequest, seed: &[u8], n: usize) -> Result<Value, String> {
    let b = if seed.is_empty() {
        0
    } else {
        seed[(n.wrapping_mul(31)) % seed.len()]
    };
    if matches!(r.kind, RequestKind::Condition) {
        return match b % 4 {
            0 => Ok(json!({"result": true, "explanation": "fuzz"})),
            1 => Ok(json!("false")),
            2 => Ok(json!(true)),
            _ => Ok(json!("maybe")),
        };
    }
    match b % 6 {
        0 => Ok(json!("text")),
        1 => Ok(json!(b)),
        2 => {
            // An object with every requested output key.
            let mut m = serde_json::Map::new();
            if let RequestKind::Tool {
                output_keys: Some(keys),
            } = &r.kind
            {
                for k in keys {
                    m.insert(k.clone(), json!(n));
                }
            }
            Ok(Value::Object(m))
        }
        3 => Ok(json!({"k": [1, 2.5, "${x}"], "x": null})),
        4 => Err(format!("tool error {b}")),
        _ => Ok(Value::String("ab".repeat(usize::from(b) * 16))),
    }
}
