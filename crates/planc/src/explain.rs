//! `planc explain`: the compiler's dataflow summary (`plan_compiler::ExplainStep`) as a
//! numbered list in the style of TaskWeaver's `init_plan`, or as a Graphviz digraph.
//!
//! Steps are numbered by their `seq_no`, so `<sequentially depends on 1, 2>` names the
//! same numbers the plan's author wrote.

use clap::Args;
use plan_compiler::ExplainStep;
use plan_render::exit;

use crate::front::{FrontendArgs, out, plan_and_options, report_human};
use std::collections::HashMap;
use std::fmt::Write;
use std::path::PathBuf;

/// Indentation per nesting level (older-dialect `condition` branches).
const INDENT: &str = "   ";

/// ```text
/// 1. retrieve_knowledge_graph "TiDB purpose" -> tidb_purpose_kg
/// 3. llm_generate -> tidb_purpose_explanation <sequentially depends on 1, 2>
/// ```
pub(crate) fn render_list(steps: &[ExplainStep]) -> String {
    let mut out = String::new();
    for s in steps {
        for _ in 0..s.depth {
            out.push_str(INDENT);
        }
        let _ = write!(out, "{}. {}", s.seq_no, one_line(&s.title));
        if !s.depends_on.is_empty() {
            let deps: Vec<String> = s.depends_on.iter().map(i64::to_string).collect();
            let _ = write!(out, " <sequentially depends on {}>", deps.join(", "));
        }
        out.push('\n');
    }
    out
}

/// Titles quote plan text (prompts, queries); a newline inside would break the one step
/// per line shape of the list.
fn one_line(s: &str) -> String {
    s.replace('\r', "\\r").replace('\n', "\\n")
}

/// Scheduler level of each step (same order as `steps`): 0 for a step that depends on
/// nothing, else 1 + the highest level among its dependencies. Steps with the same level
/// have no dependency chain between them, so a scheduler could run them together.
///
/// Only dependencies on steps *earlier in the list* count. A dependency on a later step
/// is loop-carried (its value arrives through a backward `jmp`), and counting it would
/// make the "longest chain" infinite; such edges are still drawn, just not ranked.
/// Dependencies on unknown seq_nos are ignored (the compiler should not produce them,
/// but the renderer must not trust that).
pub(crate) fn levels(steps: &[ExplainStep]) -> Vec<u32> {
    let pos = positions(steps);
    let mut levels: Vec<u32> = Vec::with_capacity(steps.len());
    for (i, s) in steps.iter().enumerate() {
        let level = s
            .depends_on
            .iter()
            .filter_map(|d| pos.get(d).copied())
            .filter(|&j| j < i)
            .filter_map(|j| levels.get(j).copied())
            .map(|l| l.saturating_add(1))
            .max()
            .unwrap_or(0);
        levels.push(level);
    }
    levels
}

/// seq_no → index of its first step (duplicate seq_nos are a compile error, but the first
/// one wins rather than a panic if they ever get here).
fn positions(steps: &[ExplainStep]) -> HashMap<i64, usize> {
    let mut pos = HashMap::with_capacity(steps.len());
    for (i, s) in steps.iter().enumerate() {
        pos.entry(s.seq_no).or_insert(i);
    }
    pos
}

/// A Graphviz digraph of the dataflow: one node per step (`seq_no. title`), one edge per
/// dependency labelled with the variable(s) it carries, and `rank=same` groups of steps
/// with the same [`levels`]. Loop-carried edges (to an earlier step) are dashed and do not
/// constrain the layout.
pub(crate) fn render_dot(steps: &[ExplainStep]) -> String {
    let pos = positions(steps);
    let levels = levels(steps);
    let mut out = String::from("digraph plan {\n  rankdir=TB;\n  node [shape=box];\n");
    for s in steps {
        let label = format!("{}. {}", s.seq_no, s.title);
        let _ = writeln!(
            out,
            "  {} [label=\"{}\"];",
            node_id(s.seq_no),
            escape(&label)
        );
    }
    for (i, s) in steps.iter().enumerate() {
        for dep in &s.depends_on {
            let Some(&j) = pos.get(dep) else { continue };
            let Some(from) = steps.get(j) else { continue };
            let vars: Vec<&str> = s
                .reads
                .iter()
                .filter(|v| from.writes.contains(v))
                .map(String::as_str)
                .collect();
            let mut attrs = Vec::new();
            if !vars.is_empty() {
                attrs.push(format!("label=\"{}\"", escape(&vars.join(", "))));
            }
            if j >= i {
                attrs.push("style=dashed".to_owned());
                attrs.push("constraint=false".to_owned());
            }
            let attrs = if attrs.is_empty() {
                String::new()
            } else {
                format!(" [{}]", attrs.join(", "))
            };
            let _ = writeln!(
                out,
                "  {} -> {}{};",
                node_id(from.seq_no),
                node_id(s.seq_no),
                attrs
            );
        }
    }
    let max = levels.iter().copied().max();
    for level in 0..max.map_or(0, |m| m.saturating_add(1)) {
        let ids: Vec<String> = steps
            .iter()
            .zip(&levels)
            .filter(|(_, l)| **l == level)
            .map(|(s, _)| node_id(s.seq_no))
            .collect();
        let _ = writeln!(
            out,
            "  {{ rank=same; {}; }}  // level {level}",
            ids.join("; ")
        );
    }
    out.push_str("}\n");
    out
}

/// Node ids must be DOT identifiers; seq_nos can be negative.
fn node_id(seq_no: i64) -> String {
    if seq_no < 0 {
        format!("s_{}", seq_no.unsigned_abs())
    } else {
        format!("s{seq_no}")
    }
}

/// Escapes text for a DOT double-quoted string. Titles quote plan text, which the LLM wrote.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(
        seq_no: i64,
        title: &str,
        deps: &[i64],
        reads: &[&str],
        writes: &[&str],
        depth: u32,
    ) -> ExplainStep {
        ExplainStep {
            seq_no,
            kind: "calling".into(),
            title: title.into(),
            depends_on: deps.to_vec(),
            reads: reads.iter().map(|s| s.to_string()).collect(),
            writes: writes.iter().map(|s| s.to_string()).collect(),
            depth,
        }
    }

    /// The TiDB example: two independent retrievals, then a summary of both.
    fn tidb() -> Vec<ExplainStep> {
        vec![
            step(0, "reasoning", &[], &[], &[], 0),
            step(
                1,
                "retrieve_knowledge_graph \"TiDB purpose\" -> tidb_purpose_kg",
                &[],
                &[],
                &["tidb_purpose_kg"],
                0,
            ),
            step(
                2,
                "vector_search \"TiDB purpose\" -> tidb_purpose_docs",
                &[],
                &[],
                &["tidb_purpose_docs"],
                0,
            ),
            step(
                3,
                "llm_generate -> tidb_purpose_explanation",
                &[1, 2],
                &["tidb_purpose_kg", "tidb_purpose_docs"],
                &["tidb_purpose_explanation"],
                0,
            ),
            step(
                4,
                "assign final_answer",
                &[3],
                &["tidb_purpose_explanation"],
                &["final_answer"],
                0,
            ),
        ]
    }

    #[test]
    fn list_numbers_by_seq_no_and_annotates_dependencies() {
        let expected = "\
0. reasoning
1. retrieve_knowledge_graph \"TiDB purpose\" -> tidb_purpose_kg
2. vector_search \"TiDB purpose\" -> tidb_purpose_docs
3. llm_generate -> tidb_purpose_explanation <sequentially depends on 1, 2>
4. assign final_answer <sequentially depends on 3>
";
        assert_eq!(render_list(&tidb()), expected);
    }

    #[test]
    fn list_indents_nested_branches_and_keeps_one_line_per_step() {
        let steps = vec![
            step(6, "condition", &[5], &["n"], &[], 0),
            step(7, "assign final_answer", &[], &[], &["final_answer"], 1),
            step(8, "llm_generate \"a\nb\" -> e", &[5], &["n"], &["e"], 1),
            step(9, "deeper", &[8], &["e"], &[], 2),
        ];
        let expected = "\
6. condition <sequentially depends on 5>
   7. assign final_answer
   8. llm_generate \"a\\nb\" -> e <sequentially depends on 5>
      9. deeper <sequentially depends on 8>
";
        assert_eq!(render_list(&steps), expected);
    }

    #[test]
    fn levels_are_longest_dependency_chains() {
        assert_eq!(levels(&tidb()), [0, 0, 0, 1, 2]);
        // Diamond with a shortcut: 3 depends on 1 (level 0) and 2 (level 1) → level 2.
        let steps = vec![
            step(1, "a", &[], &[], &["a"], 0),
            step(2, "b", &[1], &["a"], &["b"], 0),
            step(3, "c", &[1, 2], &["a", "b"], &["c"], 0),
        ];
        assert_eq!(levels(&steps), [0, 1, 2]);
    }

    #[test]
    fn levels_ignore_loop_carried_unknown_and_self_dependencies() {
        // 1 reads what 2 writes on the next loop iteration; 2 depends on itself; 3 names a
        // seq_no that does not exist. None of that may recurse forever or panic.
        let steps = vec![
            step(1, "a", &[2], &["b"], &["a"], 0),
            step(2, "b", &[1, 2], &["a", "b"], &["b"], 0),
            step(3, "c", &[99, 2], &["b"], &["c"], 0),
        ];
        assert_eq!(levels(&steps), [0, 1, 2]);
        assert_eq!(levels(&[]), Vec::<u32>::new());
    }

    #[test]
    fn levels_follow_list_order_not_seq_no_order() {
        // seq_nos out of order (a warning, still compiled): position decides what is "earlier".
        let steps = vec![
            step(5, "a", &[], &[], &["a"], 0),
            step(2, "b", &[5], &["a"], &["b"], 0),
        ];
        assert_eq!(levels(&steps), [0, 1]);
    }

    #[test]
    fn dot_has_nodes_labelled_edges_and_ranks() {
        let expected = r#"digraph plan {
  rankdir=TB;
  node [shape=box];
  s0 [label="0. reasoning"];
  s1 [label="1. retrieve_knowledge_graph \"TiDB purpose\" -> tidb_purpose_kg"];
  s2 [label="2. vector_search \"TiDB purpose\" -> tidb_purpose_docs"];
  s3 [label="3. llm_generate -> tidb_purpose_explanation"];
  s4 [label="4. assign final_answer"];
  s1 -> s3 [label="tidb_purpose_kg"];
  s2 -> s3 [label="tidb_purpose_docs"];
  s3 -> s4 [label="tidb_purpose_explanation"];
  { rank=same; s0; s1; s2; }  // level 0
  { rank=same; s3; }  // level 1
  { rank=same; s4; }  // level 2
}
"#;
        assert_eq!(render_dot(&tidb()), expected);
    }

    #[test]
    fn dot_dashes_loop_edges_and_escapes_text() {
        let steps = vec![
            step(
                -1,
                "say \"hi\" \\ now\nplease",
                &[2],
                &["x", "y"],
                &["z"],
                0,
            ),
            step(2, "b", &[], &[], &["x", "y"], 0),
        ];
        let expected = r#"digraph plan {
  rankdir=TB;
  node [shape=box];
  s_1 [label="-1. say \"hi\" \\ now\nplease"];
  s2 [label="2. b"];
  s2 -> s_1 [label="x, y", style=dashed, constraint=false];
  { rank=same; s_1; s2; }  // level 0
}
"#;
        assert_eq!(render_dot(&steps), expected);
        assert_eq!(
            render_dot(&[]),
            "digraph plan {\n  rankdir=TB;\n  node [shape=box];\n}\n"
        );
    }
}

#[derive(Args, Debug)]
pub(crate) struct ExplainArgs {
    /// The plan.
    #[arg(value_name = "PLAN")]
    plan: PathBuf,
    /// Print a Graphviz digraph of the dataflow instead of the list.
    #[arg(long)]
    dot: bool,
    #[command(flatten)]
    frontend: FrontendArgs,
}

pub(crate) fn cmd_explain(a: &ExplainArgs) -> u8 {
    let (name, src, opts) = match plan_and_options(&a.plan, &a.frontend, false) {
        Ok(x) => x,
        Err(code) => return code,
    };
    match plan_compiler::explain(&src, &opts) {
        Ok(steps) => {
            out(&if a.dot {
                render_dot(&steps)
            } else {
                render_list(&steps)
            });
            exit::OK
        }
        Err(compiled) => {
            report_human(&name, &src, &compiled.diagnostics, false);
            exit::PLAN_ERRORS
        }
    }
}
