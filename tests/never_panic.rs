//! Property tests: arbitrary input never panics the reader, verifier, decoder or validator,
//! and mutated `.pbc` files never panic the loader, the disassembler or the VM.

use plan_compiler::{CompileOptions, compile};
use proptest::prelude::*;

fn plan_like() -> impl Strategy<Value = String> {
    // Fragments of plan syntax glued together at random: reaches deeper than random bytes.
    let frag = prop::sample::select(vec![
        "[",
        "]",
        "{",
        "}",
        ",",
        ":",
        "\"seq_no\"",
        "\"type\"",
        "\"parameters\"",
        "\"assign\"",
        "\"jmp\"",
        "\"calling\"",
        "\"condition\"",
        "\"tool_name\"",
        "\"llm_generate\"",
        "\"output_vars\"",
        "\"final_answer\"",
        "\"target_seq\"",
        "\"${x}\"",
        "\"{{x}}\"",
        "\"${x} + 1\"",
        "\"2**99999\"",
        "0",
        "1",
        "-1",
        "2.5",
        "null",
        "True",
        "None",
        "'s'",
        "//c\n",
        "/*",
        "*/",
        "```json\n",
        "```",
        "<think>",
        "</think>",
        "\"true_branch\"",
        "\"jump_if_true\"",
        "\"var\"",
        "\"value\"",
        "\"var_name\"",
        "\"tool_params\"",
    ]);
    prop::collection::vec(frag, 0..60).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn compile_never_panics_on_strings(s in ".{0,300}") {
        let _ = compile(&s, &CompileOptions::default());
    }

    #[test]
    fn compile_never_panics_on_plan_fragments(s in plan_like()) {
        let c = compile(&s, &CompileOptions::default());
        if let Some(p) = c.program {
            // Whatever compiles must encode, decode and validate.
            let bytes = plan_bytecode::encode(&p);
            let back = plan_bytecode::decode(&bytes).unwrap();
            prop_assert_eq!(&back, &p);
            prop_assert!(plan_bytecode::validate(back).is_ok());
        }
    }

    #[test]
    fn loader_never_panics_on_bytes(b in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = plan_bytecode::load(&b);
    }

    /// Random bytes almost never get past the 8-byte magic: mutate real `.pbc` files
    /// instead, and let the fuzz target's logic fix the checksum, so the mutations reach
    /// the section decoder, the validator, the disassembler and the VM.
    #[test]
    fn loader_never_panics_on_mutated_pbc(
        which in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<u32>(), any::<u8>(), 0u8..5), 1..8),
    ) {
        let files = valid_pbc_files();
        let mut bytes = files[which.index(files.len())].clone();
        for (at, byte, kind) in edits {
            let at = at as usize % (bytes.len() + 1);
            match kind {
                0 if at < bytes.len() => bytes[at] = byte,
                1 if at < bytes.len() => bytes[at] ^= 1 << (byte % 8),
                2 => bytes.insert(at, byte),
                3 if at < bytes.len() => {
                    bytes.remove(at);
                }
                _ => bytes.truncate(at),
            }
        }
        plan_fuzz::bytecode::run(&bytes);
    }
}

/// Every plan of `tests/corpus/valid` and `examples/`, compiled to `.pbc` bytes.
fn valid_pbc_files() -> &'static [Vec<u8>] {
    static FILES: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    FILES.get_or_init(|| {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        for dir in ["tests/corpus/valid", "examples"] {
            let mut paths: Vec<_> = std::fs::read_dir(root.join(dir))
                .expect("corpus dir")
                .map(|e| e.expect("entry").path())
                .filter(|p| {
                    !p.to_string_lossy().ends_with(".jsonl")
                        && p.extension().is_some_and(|e| {
                            !["toml", "db", "sql"].contains(&e.to_str().unwrap_or(""))
                        })
                })
                .collect();
            paths.sort();
            for p in paths {
                let src = std::fs::read_to_string(&p).expect("plan");
                if let Some(program) = compile(&src, &CompileOptions::default()).program {
                    files.push(plan_bytecode::encode(&program));
                }
            }
        }
        assert!(
            files.len() >= 10,
            "too few plans to mutate: {}",
            files.len()
        );
        files
    })
}

/// The mutations above reach past the checksum: of every single-bit flip of the valid
/// files, with the checksum fixed, some still load (and so run) and most are refused by
/// the decoder or the validator, not by the checksum.
#[test]
fn mutated_pbc_files_reach_the_validator_and_the_vm() {
    let (mut loaded, mut total) = (0, 0);
    for f in valid_pbc_files() {
        for at in plan_bytecode::HEADER_LEN..f.len() {
            let mut b = f.clone();
            b[at] ^= 1 << (at % 8);
            let fixed = plan_fuzz::bytecode::with_fixed_checksum(&b).expect("header");
            total += 1;
            if plan_bytecode::load(&fixed).is_ok() {
                loaded += 1;
            }
        }
    }
    assert!(
        loaded > 0 && loaded < total,
        "{loaded} of {total} flips load"
    );
}
