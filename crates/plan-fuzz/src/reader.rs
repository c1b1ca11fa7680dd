//! Target `reader`: arbitrary bytes as a plan, the way `planc check` sees them.
//!
//! Checks: `compile` never panics; `program` is present exactly when no diagnostic is an
//! error; every diagnostic span lies inside the source on character boundaries (renderers
//! slice the source with it); a compiled program validates and survives an
//! encode → decode round trip; `classify_string` and `parse_arith` never panic on any
//! string the reader finds, in either dialect.

use plan_compiler::{CompileOptions, compile};
use plan_syntax::{Dialect, Node, NodeKind};

pub fn run(data: &[u8]) {
    // `planc` rejects non-UTF-8 with E0000 before the reader; lossy conversion keeps the
    // fuzzer's byte mutations useful instead of wasting them on that one check.
    let src = String::from_utf8_lossy(data);
    // `parse` builds each instruction while it reads: the same plan and diagnostics as
    // building from the whole tree.
    let streamed = plan_syntax::parse(&src);
    let read = plan_syntax::read(&src);
    let mut diags = read.diagnostics;
    let whole = read.value.map(|root| plan_syntax::parse_plan(&root));
    if let Some(p) = &whole {
        diags.extend(p.diagnostics.iter().cloned());
    }
    assert_eq!(
        format!("{:?}", streamed.diagnostics),
        format!("{diags:?}"),
        "`parse` and `read` + `parse_plan` report differently"
    );
    assert_eq!(
        format!("{:?}", streamed.value),
        format!("{:?}", whole.and_then(|p| p.value)),
        "`parse` and `read` + `parse_plan` build different plans"
    );
    let c = compile(&src, &CompileOptions::default());
    let has_error = c.diagnostics.iter().any(|d| d.is_error());
    assert_eq!(
        c.program.is_some(),
        !has_error,
        "a program must be produced exactly when there is no error: {:?}",
        c.diagnostics
    );
    for d in &c.diagnostics {
        let spans = d.span.iter().chain(d.labels.iter().map(|(s, _)| s));
        for s in spans {
            let r = s.range();
            assert!(
                r.start <= r.end
                    && r.end <= src.len()
                    && src.is_char_boundary(r.start)
                    && src.is_char_boundary(r.end),
                "{} has span {r:?} outside the {}-byte source or off a char boundary",
                d.code,
                src.len()
            );
        }
        let _ = d.line_col(&c.line_index);
    }
    if let Some(program) = c.program {
        let bytes = plan_bytecode::encode(&program);
        let decoded = plan_bytecode::decode(&bytes).expect("compiler output must decode");
        assert_eq!(decoded, program, "encode → decode changed the program");
        let v = plan_bytecode::validate(program).expect("compiler output must validate");
        let _ = plan_bytecode::disasm(&v);
    }
    if let Some(node) = plan_syntax::read(&src).value {
        strings(&node, &mut |s| {
            for d in [Dialect::Current, Dialect::Older] {
                let _ = plan_syntax::classify_string(s, d);
                let _ = plan_syntax::parse_arith(s, d);
            }
        });
    }
}

/// Every string (keys included) in the tree, iteratively: the tree may be deep.
fn strings(root: &Node, f: &mut impl FnMut(&str)) {
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        match &n.kind {
            NodeKind::String(s) => f(s),
            NodeKind::Array(items) => stack.extend(items),
            NodeKind::Object(members) => {
                for m in members {
                    f(&m.key);
                    stack.push(&m.value);
                }
            }
            NodeKind::Null | NodeKind::Bool(_) | NodeKind::Number(_) => {}
        }
    }
}
