//! Property tests: arbitrary input never panics the reader, verifier, decoder or validator.

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
}
