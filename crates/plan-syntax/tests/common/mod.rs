//! Shared rendering for the snapshot tests: diagnostics with line:col and the source text
//! their span covers (so a snapshot shows that spans point at the right bytes), a compact
//! JSON rendering of the reader's tree, and a one-line-per-instruction rendering of a plan.

#![allow(dead_code)]

use std::fmt::Write;

use plan_syntax::{Diagnostic, InstrKind, Instruction, LineIndex, Node, Plan, Span};

fn snippet(src: &str, span: Span) -> String {
    let text = src.get(span.range()).unwrap_or("<out of range>");
    let mut s: String = text.chars().take(40).collect();
    if text.chars().count() > 40 {
        s.push('…');
    }
    format!("{s:?}")
}

pub(crate) fn render_diags(src: &str, diags: &[Diagnostic]) -> String {
    let index = LineIndex::new(src);
    let mut out = String::new();
    // Every repair is reported (a Python-literal plan has one W0008 per string); the
    // snapshot shows the first three of a run and counts the rest.
    let mut run = 0usize;
    for (i, d) in diags.iter().enumerate() {
        let prev = i.checked_sub(1).map(|p| &diags[p]);
        run = if prev.is_some_and(|p| p.code == d.code && p.message == d.message) {
            run + 1
        } else {
            0
        };
        let next_same = diags
            .get(i + 1)
            .is_some_and(|n| n.code == d.code && n.message == d.message);
        if run >= 3 {
            if !next_same {
                let _ = writeln!(
                    out,
                    "... and {} more {}[{}]",
                    run - 2,
                    d.severity.as_str(),
                    d.code
                );
            }
            continue;
        }
        let at = match d.span {
            Some(span) => {
                let (l, c) = index.line_col(span.start);
                format!("{l}:{c} {}", snippet(src, span))
            }
            None => "-".to_owned(),
        };
        let seq = d.seq_no.map(|s| format!(" seq_no={s}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "{}[{}] {}{seq}\n    at {at}",
            d.severity.as_str(),
            d.code,
            d.message
        );
        for (span, label) in &d.labels {
            let (l, c) = index.line_col(span.start);
            let _ = writeln!(out, "    label {l}:{c} {} {label}", snippet(src, *span));
        }
        if let Some(h) = &d.help {
            let _ = writeln!(out, "    help: {h}");
        }
    }
    if diags.is_empty() {
        out.push_str("(no diagnostics)\n");
    }
    out
}

pub(crate) fn render_tree(node: &Node) -> String {
    serde_json::to_string(&node.to_value()).unwrap_or_default()
}

fn short(node: &Node) -> String {
    let s = match node.as_str() {
        Some(s) => format!("{s:?}"),
        None => render_tree(node),
    };
    if s.chars().count() > 70 {
        let mut t: String = s.chars().take(70).collect();
        t.push('…');
        t
    } else {
        s
    }
}

fn short_text(s: &Option<String>) -> String {
    match s {
        None => "-".to_owned(),
        Some(s) => {
            let mut t: String = s.chars().take(50).collect();
            if s.chars().count() > 50 {
                t.push('…');
            }
            format!("{t:?}")
        }
    }
}

pub(crate) fn render_plan(plan: &Plan) -> String {
    let mut out = format!("dialect: {:?}\n", plan.dialect);
    for i in &plan.instructions {
        render_instr(&mut out, i, 0);
    }
    out
}

fn render_instr(out: &mut String, i: &Instruction, indent: usize) {
    let pad = "  ".repeat(indent);
    let seq = i.seq_no.map_or("?".to_owned(), |s| s.to_string());
    let ty = i.ty.as_ref().map_or("?", |t| &*t.text);
    let _ = write!(out, "{pad}#{seq} {ty}: ");
    match &i.kind {
        InstrKind::Reasoning(r) => {
            let plan_syntax::Reasoning {
                chain_of_thoughts,
                dependency_analysis,
            } = &**r;
            let _ = writeln!(
                out,
                "cot={} deps={}",
                short_text(chain_of_thoughts),
                short_text(dependency_analysis)
            );
        }
        InstrKind::Assign { vars } => {
            let parts: Vec<String> = vars
                .iter()
                .map(|(n, v)| format!("{} = {}", n.text, short(v)))
                .collect();
            let _ = writeln!(out, "assign {}", parts.join("; "));
        }
        InstrKind::Jmp(j) => {
            let plan_syntax::Jmp {
                condition_prompt,
                context,
                jump_if_true,
                jump_if_false,
                target_seq,
            } = &**j;
            let t = |r: &Option<plan_syntax::SeqRef>| {
                r.map_or("-".to_owned(), |r| r.seq_no.to_string())
            };
            match condition_prompt {
                Some(p) => {
                    let ctx = context
                        .as_ref()
                        .map(short)
                        .unwrap_or_else(|| "-".to_owned());
                    let _ = writeln!(
                        out,
                        "if {} (context {ctx}) then {} else {} (target_seq {})",
                        short(p),
                        t(jump_if_true),
                        t(jump_if_false),
                        t(target_seq)
                    );
                }
                None => {
                    let _ = writeln!(out, "goto {}", t(target_seq));
                }
            }
        }
        InstrKind::Call(c) => {
            let plan_syntax::Call {
                tool,
                params,
                output_vars,
                form,
            } = &**c;
            let ps: Vec<String> = params
                .iter()
                .map(|(n, v)| format!("{}={}", n.text, short(v)))
                .collect();
            let outs: Vec<&str> = output_vars.iter().map(|n| n.text.as_str()).collect();
            let _ = writeln!(
                out,
                "call {}({}) -> {:?} [{form:?}]",
                tool.text,
                ps.join(", "),
                outs
            );
        }
        InstrKind::Condition(c) => {
            let plan_syntax::Condition {
                prompt,
                context,
                true_branch,
                false_branch,
            } = &**c;
            let p = prompt.as_ref().map(short).unwrap_or_else(|| "-".to_owned());
            let ctx = context
                .as_ref()
                .map(short)
                .unwrap_or_else(|| "-".to_owned());
            let _ = writeln!(out, "condition {p} (context {ctx})");
            let _ = writeln!(out, "{pad}  true:");
            for b in true_branch {
                render_instr(out, b, indent + 2);
            }
            let _ = writeln!(out, "{pad}  false:");
            for b in false_branch {
                render_instr(out, b, indent + 2);
            }
        }
        InstrKind::Invalid => {
            let _ = writeln!(out, "<invalid>");
        }
    }
}
