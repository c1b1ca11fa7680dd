//! `.pbc` size against the minified JSON of the same plan (not a timing: prints a table).
//! Run: `cargo bench --bench sizes`. Goal: stripped `.pbc` ≤ minified JSON.

mod common;

use common::*;

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too, harmlessly.
    let mut plans: Vec<(String, String)> = vec![
        (
            "14-step (current_retrieval)".into(),
            FOURTEEN_STEP.to_owned(),
        ),
        ("small loop (jmp_loop)".into(), SMALL.to_owned()),
        ("30 assigns".into(), thirty_assigns()),
        ("generated 2,000 instructions".into(), generated(2000)),
    ];
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = std::fs::read_dir(root.join("tests/corpus/valid"))
        .into_iter()
        .flatten()
        .chain(
            std::fs::read_dir(root.join("examples"))
                .into_iter()
                .flatten(),
        )
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    for p in files {
        let name = p.strip_prefix(root).unwrap_or(&p).display().to_string();
        plans.push((name, std::fs::read_to_string(&p).unwrap()));
    }
    println!(
        "{:<40} {:>10} {:>10} {:>10} {:>10} {:>7}",
        "plan", "json", "minified", "pbc", "stripped", "ratio"
    );
    let mut worst: f64 = 0.0;
    for (name, src) in &plans {
        let Some(minified) = plan_syntax::read(src)
            .value
            .map(|n| n.to_value().to_string())
        else {
            continue;
        };
        let full = plan_bytecode::encode(&compile_ok(src, false));
        let stripped = plan_bytecode::encode(&compile_ok(src, true));
        let ratio = stripped.len() as f64 / minified.len() as f64;
        worst = worst.max(ratio);
        println!(
            "{:<40} {:>10} {:>10} {:>10} {:>10} {:>7.3}",
            name,
            src.len(),
            minified.len(),
            full.len(),
            stripped.len(),
            ratio
        );
    }
    println!("largest stripped/minified ratio: {worst:.3} (goal ≤ 1.0)");
}
