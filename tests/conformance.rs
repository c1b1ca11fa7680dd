//! Conformance suite: every directory under `tests/conformance/` holds `plan.json`,
//! `cassette.jsonl` and `expected.json`, one case per rule of docs/semantics.md. Each plan
//! is compiled, validated and run through the real host replaying its cassette, once
//! sequentially (`max_concurrency = 1`) and once concurrently (16); both must give the
//! expected final answer, or fail with the expected error at the expected seq_no.
//!
//! `expected.json`: `{"final_answer": V}` or `{"error": "substring", "code": "R00NN"?,
//! "seq_no": N?}`, plus
//! optional `"max_steps"`, `"max_bytes"` (limits) and `"vars"` (preset variables).

use std::path::Path;

use plan_compiler::{CompileOptions, compile};
use plan_host::{Host, HostOptions, Tracer, run_plan};
use plan_manifest::Manifest;
use plan_vm::Limits;
use serde_json::Value;

async fn run_case(dir: &Path, max_concurrency: u32) -> Result<(), String> {
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let src = std::fs::read_to_string(dir.join("plan.json")).unwrap();
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let compiled = compile(&src, &CompileOptions::default());
    let program = compiled
        .program
        .ok_or_else(|| format!("{name}: does not compile: {:#?}", compiled.diagnostics))?;
    let program = plan_bytecode::validate(program).map_err(|e| format!("{name}: {e}"))?;
    let opts = HostOptions {
        replay: Some(dir.join("cassette.jsonl")),
        ..HostOptions::default()
    };
    let host = Host::new(Manifest::builtin(), opts).map_err(|e| format!("{name}: {e}"))?;
    let mut limits = Limits {
        max_concurrency,
        ..Limits::default()
    };
    if let Some(n) = expected.get("max_steps").and_then(Value::as_u64) {
        limits.max_steps = n;
    }
    if let Some(n) = expected.get("max_bytes").and_then(Value::as_u64) {
        limits.max_total_bytes = n;
        limits.max_value_bytes = n;
    }
    let vars: Vec<(String, Value)> = expected
        .get("vars")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    let report = run_plan(&host, &program, vars, limits, &mut Tracer::none()).await;
    let ctx = format!("{name} (max_concurrency {max_concurrency})");
    match (expected.get("final_answer"), expected.get("error")) {
        (Some(want), _) => {
            if let Some(e) = &report.error {
                return Err(format!("{ctx}: failed: {} (seq {:?})", e.message, e.seq_no));
            }
            if &report.final_answer != want {
                return Err(format!(
                    "{ctx}: final answer {} != expected {want}",
                    report.final_answer
                ));
            }
        }
        (None, Some(Value::String(want))) => {
            let Some(e) = &report.error else {
                return Err(format!(
                    "{ctx}: succeeded with {} but should fail with {want:?}",
                    report.final_answer
                ));
            };
            if let Some(code) = expected.get("code").and_then(Value::as_str)
                && e.code.as_str() != code
            {
                return Err(format!(
                    "{ctx}: failed with {}, expected {code}: {}",
                    e.code, e.message
                ));
            }
            if !e.message.contains(want.as_str()) {
                return Err(format!(
                    "{ctx}: error {:?} does not mention {want:?}",
                    e.message
                ));
            }
            if let Some(seq) = expected.get("seq_no").and_then(Value::as_i64)
                && e.seq_no != Some(seq)
            {
                return Err(format!(
                    "{ctx}: failed at seq {:?}, expected {seq}: {}",
                    e.seq_no, e.message
                ));
            }
        }
        _ => return Err(format!("{name}: expected.json needs final_answer or error")),
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_suite() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 20, "conformance corpus went missing");
    let mut failures = Vec::new();
    for dir in &dirs {
        for mc in [1, 16] {
            if let Err(e) = run_case(dir, mc).await {
                failures.push(e);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} runs failed:\n{}",
        failures.len(),
        dirs.len() * 2,
        failures.join("\n")
    );
}
