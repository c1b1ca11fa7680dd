//! Data-driven compiler tests: every file under `tests/corpus/valid` must compile (its
//! warnings are snapshotted), every file under `tests/corpus/invalid` must fail with the
//! snapshotted diagnostics. Files named `strict_*` are compiled with `--strict`.
//! Refresh snapshots with `INSTA_UPDATE=always cargo test --test corpus`, then review them.

use std::fmt::Write;
use std::path::Path;

use plan_compiler::{CompileOptions, Compiled, compile};

fn render(c: &Compiled) -> String {
    let mut out = String::new();
    for d in &c.diagnostics {
        let (line, col) = d.line_col(&c.line_index).unwrap_or((0, 0));
        let seq = d.seq_no.map_or("-".to_owned(), |s| s.to_string());
        writeln!(
            out,
            "{}[{}] {line}:{col} seq={seq}: {}",
            d.severity.as_str(),
            d.code,
            d.message
        )
        .unwrap();
        if let Some(h) = &d.help {
            writeln!(out, "    help: {h}").unwrap();
        }
    }
    if out.is_empty() {
        out.push_str("(no diagnostics)\n");
    }
    out
}

fn corpus(dir: &str) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "empty corpus {dir}");
    files
}

fn compile_file(path: &Path) -> Compiled {
    let src = std::fs::read_to_string(path).unwrap();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let opts = CompileOptions {
        strict: name.starts_with("strict_"),
        source_name: Some(name),
        ..Default::default()
    };
    compile(&src, &opts)
}

#[test]
fn valid_plans_compile_and_round_trip() {
    for path in corpus("tests/corpus/valid") {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let c = compile_file(&path);
        let program = c
            .program
            .clone()
            .unwrap_or_else(|| panic!("{name} did not compile:\n{}", render(&c)));
        insta::assert_snapshot!(format!("valid__{name}"), render(&c));
        // Round trip: encode → decode gives the same program, and it validates.
        let bytes = plan_bytecode::encode(&program);
        let decoded = plan_bytecode::decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(decoded, program, "{name}: round trip changed the program");
        let validated = plan_bytecode::validate(decoded).unwrap_or_else(|e| panic!("{name}: {e}"));
        insta::assert_snapshot!(format!("disasm__{name}"), plan_bytecode::disasm(&validated));
    }
}

#[test]
fn invalid_plans_report_errors() {
    for path in corpus("tests/corpus/invalid") {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let c = compile_file(&path);
        assert!(c.program.is_none(), "{name} compiled but should not have");
        assert!(
            c.diagnostics.iter().any(|d| d.is_error()),
            "{name}: no error reported"
        );
        insta::assert_snapshot!(format!("invalid__{name}"), render(&c));
    }
}

#[test]
fn strip_drops_debug_info_and_shrinks() {
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/valid/current_retrieval.json"),
    )
    .unwrap();
    let full = compile(&src, &CompileOptions::default()).program.unwrap();
    let stripped = compile(
        &src,
        &CompileOptions {
            strip: true,
            ..Default::default()
        },
    )
    .program
    .unwrap();
    assert!(full.debug.is_some());
    assert!(stripped.debug.is_none());
    let (a, b) = (
        plan_bytecode::encode(&full).len(),
        plan_bytecode::encode(&stripped).len(),
    );
    assert!(b < a, "stripped {b} >= full {a}");
    let minified =
        serde_json::to_string(&serde_json::from_str::<serde_json::Value>(&src).unwrap()).unwrap();
    assert!(
        b <= minified.len(),
        "stripped .pbc ({b} bytes) larger than minified JSON ({})",
        minified.len()
    );
}
