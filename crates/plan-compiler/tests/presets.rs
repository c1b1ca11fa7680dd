//! Variables a run starts with (`--var`) count as set: a plan that reads one is not
//! warned that it is never assigned; any other variable still is, as a warning.

use plan_compiler::{CompileOptions, compile};

const PLAN: &str = r#"[
 {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "llm_generate", "tool_params": {"prompt": "About ${topic} and ${other}"}, "output_vars": ["final_answer"]}}
]"#;

fn never_assigned(presets: &[&str]) -> Vec<String> {
    let opts = CompileOptions {
        presets: presets.iter().map(|p| (*p).to_owned()).collect(),
        ..CompileOptions::default()
    };
    let compiled = compile(PLAN, &opts);
    assert!(compiled.program.is_some(), "{:?}", compiled.diagnostics);
    compiled
        .diagnostics
        .iter()
        .filter(|d| d.code == "W0201")
        .map(|d| d.message.clone())
        .collect()
}

#[test]
fn a_preset_is_set_from_the_start() {
    assert_eq!(
        never_assigned(&[]),
        ["`topic` is never assigned", "`other` is never assigned"]
    );
    assert_eq!(never_assigned(&["topic"]), ["`other` is never assigned"]);
    assert_eq!(
        never_assigned(&["topic", "other", "unused"]),
        Vec::<String>::new()
    );
}
