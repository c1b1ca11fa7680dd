//! Data-driven tests: every file under `tests/corpus/{reader,plan}/{valid,invalid}/` is read
//! (and, for `plan/`, parsed into a plan), and the diagnostics plus a rendering of the
//! result are snapshotted with insta. `valid/` files must produce no error (warnings for
//! repairs are expected), `invalid/` files at least one.
//!
//! Add a case by dropping a `.txt` file in the right folder and running
//! `INSTA_UPDATE=always cargo test -p plan-syntax --test corpus`, then review the `.snap`.

mod common;

use std::path::Path;

use common::{render_diags, render_plan, render_tree};

fn run_dir(kind: &str, validity: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(kind)
        .join(validity);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus dir {}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus files in {}", dir.display());
    let mut failures = Vec::new();
    for path in files {
        let src = std::fs::read_to_string(&path).expect("corpus files are UTF-8");
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("file name")
            .to_owned();
        let read = plan_syntax::read(&src);
        let mut diags = read.diagnostics.clone();
        let mut body = String::new();
        match (&read.value, kind) {
            (None, _) => body.push_str("--- nothing read\n"),
            (Some(node), "reader") => {
                body.push_str("--- tree\n");
                body.push_str(&render_tree(node));
                body.push('\n');
            }
            (Some(node), _) => {
                let plan = plan_syntax::parse_plan(node);
                diags.extend(plan.diagnostics);
                // `parse` builds each instruction while it reads: the same plan and
                // diagnostics as building from the whole tree.
                let streamed = plan_syntax::parse(&src);
                assert_eq!(
                    (
                        format!("{:?}", streamed.value),
                        format!("{:?}", streamed.diagnostics)
                    ),
                    (format!("{:?}", plan.value), format!("{diags:?}")),
                    "{name}: `parse` differs from `read` + `parse_plan`"
                );
                match &plan.value {
                    Some(p) => {
                        body.push_str("--- plan\n");
                        body.push_str(&render_plan(p));
                    }
                    None => body.push_str("--- no plan\n"),
                }
            }
        }
        let has_errors = diags.iter().any(|d| d.is_error());
        if has_errors != (validity == "invalid") {
            failures.push(format!(
                "{kind}/{validity}/{name}: has_errors = {has_errors}"
            ));
        }
        let snap = format!("--- diagnostics\n{}{body}", render_diags(&src, &diags));
        insta::with_settings!({ snapshot_suffix => "", prepend_module_to_snapshot => false, omit_expression => true }, {
            insta::assert_snapshot!(format!("{kind}-{validity}-{name}"), snap);
        });
    }
    assert!(
        failures.is_empty(),
        "wrong validity:\n{}",
        failures.join("\n")
    );
}

#[test]
fn reader_valid() {
    run_dir("reader", "valid");
}

#[test]
fn reader_invalid() {
    run_dir("reader", "invalid");
}

#[test]
fn plan_valid() {
    run_dir("plan", "valid");
}

#[test]
fn plan_invalid() {
    run_dir("plan", "invalid");
}
