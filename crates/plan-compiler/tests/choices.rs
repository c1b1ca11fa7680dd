//! A param's `enum` (from the tools file, or an MCP server's JSON Schema): a constant
//! argument outside it is an error naming the param and its values; a variable, an
//! absent optional param and a value inside it are not.

use plan_compiler::{CompileOptions, compile};
use plan_manifest::Manifest;

const TOOLS: &str = r#"
[[tool]]
name = "weather"
params = [
  { name = "city", type = "string", required = true, enum = ["Oslo", "Lima"] },
  { name = "unit", type = "string", enum = ["C", "F"], default = "C" },
]
"#;

fn errors(args: &str) -> Vec<String> {
    let plan = format!(
        r#"[{{"seq_no": 0, "type": "calling", "parameters": {{"tool_name": "weather", "tool_params": {args}, "output_vars": ["final_answer"]}}}}]"#
    );
    let opts = CompileOptions {
        manifest: Manifest::from_toml_str(TOOLS, "tools.toml").unwrap(),
        presets: vec!["where".into()],
        ..CompileOptions::default()
    };
    compile(&plan, &opts)
        .diagnostics
        .iter()
        .filter(|d| d.code.starts_with('E'))
        .map(|d| format!("{}: {}", d.code, d.message))
        .collect()
}

#[test]
fn constants_outside_an_enum_are_refused() {
    assert!(errors(r#"{"city": "Oslo"}"#).is_empty());
    assert!(errors(r#"{"city": "Lima", "unit": "F"}"#).is_empty());
    assert!(errors(r#"{"city": "${where}", "unit": null}"#).is_empty());
    assert_eq!(
        errors(r#"{"city": "Paris", "unit": "K"}"#),
        [
            r#"E0204: parameter `city` of `weather` must be one of "Oslo", "Lima", found "Paris""#,
            r#"E0204: parameter `unit` of `weather` must be one of "C", "F", found "K""#,
        ]
    );
}
