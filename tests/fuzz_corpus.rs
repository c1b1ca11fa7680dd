//! Replays the committed fuzz corpora (`fuzz/corpus/<target>/`) and the minimised crash
//! reproducers (`fuzz/regressions/<target>/`) through the same target code cargo-fuzz
//! runs (`plan_fuzz::<target>::run`), so every `cargo test` exercises what the fuzzers
//! found interesting. A panic here is a fuzz finding: the file name says which input.

use std::path::{Path, PathBuf};

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn replay(target: &str, run: fn(&[u8])) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let corpus = files(&root.join("corpus").join(target));
    assert!(
        !corpus.is_empty(),
        "no committed corpus for fuzz target {target}"
    );
    for path in corpus
        .iter()
        .chain(&files(&root.join("regressions").join(target)))
    {
        let data = std::fs::read(path).unwrap();
        let outcome = std::panic::catch_unwind(|| run(&data));
        assert!(
            outcome.is_ok(),
            "fuzz target {target} failed on {}",
            path.display()
        );
    }
}

#[test]
fn every_target_has_a_test() {
    let names: Vec<&str> = plan_fuzz::TARGETS.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        ["reader", "bytecode", "template", "roundtrip", "vm_outputs"]
    );
}

#[test]
fn reader_corpus() {
    replay("reader", plan_fuzz::reader::run);
}

#[test]
fn bytecode_corpus() {
    replay("bytecode", plan_fuzz::bytecode::run);
}

#[test]
fn template_corpus() {
    replay("template", plan_fuzz::template::run);
}

#[test]
fn roundtrip_corpus() {
    replay("roundtrip", plan_fuzz::roundtrip::run);
}

#[test]
fn vm_outputs_corpus() {
    replay("vm_outputs", plan_fuzz::vm_outputs::run);
}
