//! The compiler's dataflow answers (W0202 "may be unset" and `explain`'s dependencies)
//! against a brute-force search of the paths of random plans with forward and backward
//! jumps, so the SSA construction behind them is checked on shapes nobody wrote by hand.

use std::collections::BTreeSet;

use plan_compiler::{CompileOptions, compile, explain};
use proptest::prelude::*;
use serde_json::{Value, json};

const VARS: [&str; 3] = ["a", "b", "c"];

#[derive(Clone, Debug)]
enum Step {
    /// `dst = "${src}"`
    Assign(usize, usize),
    /// `x = "${y}", y = "${x}"` (two reads and two writes in one step; the values are all
    /// read before any is written).
    Swap(usize, usize),
    /// `jmp target_seq`
    Jump(usize),
    /// `jmp` on a condition reading `var`.
    Branch(usize, usize, usize),
}

fn step(len: usize) -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0..3usize, 0..3usize).prop_map(|(d, s)| Step::Assign(d, s)),
        1 => (0..3usize, 1..3usize).prop_map(|(x, k)| Step::Swap(x, (x + k) % 3)),
        // Targets from 0: a jump back to the very first step is a join with the start.
        1 => (0..=len).prop_map(Step::Jump),
        2 => (0..3usize, 0..=len, 0..=len).prop_map(|(v, t, f)| Step::Branch(v, t, f)),
    ]
}

/// Steps 0..len are generated; step len sets final_answer from `a`.
fn plan_json(body: &[Step]) -> String {
    let mut plan = Vec::new();
    for (seq, s) in body.iter().enumerate() {
        plan.push(match *s {
            Step::Assign(d, src) => json!({"seq_no": seq, "type": "assign",
                "parameters": {VARS[d]: format!("${{{}}}", VARS[src])}}),
            Step::Swap(x, y) => json!({"seq_no": seq, "type": "assign", "parameters": {
                VARS[x]: format!("${{{}}}", VARS[y]), VARS[y]: format!("${{{}}}", VARS[x])}}),
            Step::Jump(t) => json!({"seq_no": seq, "type": "jmp", "parameters": {"target_seq": t}}),
            Step::Branch(v, t, f) => json!({"seq_no": seq, "type": "jmp", "parameters": {
                "condition_prompt": format!("${{{}}}?", VARS[v]),
                "jump_if_true": t, "jump_if_false": f}}),
        });
    }
    let last = body.len();
    plan.push(json!({"seq_no": last, "type": "assign", "parameters": {"final_answer": "${a}"}}));
    Value::Array(plan).to_string()
}

/// The plan as a graph: successors, the variables each step reads and writes.
struct Graph {
    succ: Vec<Vec<usize>>,
    reads: Vec<Vec<usize>>,
    writes: Vec<Vec<usize>>,
}

fn graph(body: &[Step]) -> Graph {
    let n = body.len() + 1;
    let mut g = Graph {
        succ: vec![Vec::new(); n],
        reads: vec![Vec::new(); n],
        writes: vec![Vec::new(); n],
    };
    for (at, s) in body.iter().enumerate() {
        match *s {
            Step::Assign(d, src) => {
                g.succ[at] = vec![at + 1];
                g.reads[at] = vec![src];
                g.writes[at] = vec![d];
            }
            Step::Swap(x, y) => {
                g.succ[at] = vec![at + 1];
                g.reads[at] = vec![x, y];
                g.writes[at] = vec![x, y];
            }
            Step::Jump(t) => g.succ[at] = vec![t],
            Step::Branch(v, t, f) => {
                g.succ[at] = vec![t, f];
                g.reads[at] = vec![v];
            }
        }
    }
    // The last step reads `a` and ends the run (final_answer, a variable of its own).
    g.reads[n - 1] = vec![0];
    g
}

/// Nodes reached from `from` through nodes that do not write `var` (those are reached
/// but not passed).
fn reach_avoiding(g: &Graph, from: &[usize], var: usize) -> Vec<bool> {
    let mut seen = vec![false; g.succ.len()];
    let mut stack: Vec<usize> = from.to_vec();
    while let Some(x) = stack.pop() {
        if std::mem::replace(&mut seen[x], true) {
            continue;
        }
        if g.writes[x].contains(&var) {
            continue;
        }
        stack.extend(g.succ[x].iter().copied());
    }
    seen
}

/// The (seq_no, variable) of each W0202 ("may be unset") of `compiled`.
fn maybe_unset(compiled: &plan_compiler::Compiled) -> BTreeSet<(i64, String)> {
    compiled
        .diagnostics
        .iter()
        .filter(|d| d.code == "W0202")
        .map(|d| {
            let var = d.message.split('`').nth(1).unwrap_or("").to_owned();
            (d.seq_no.unwrap_or(-1), var)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn may_be_unset_and_dependencies_match_a_path_search(
        body in (1..9usize).prop_flat_map(|len| proptest::collection::vec(step(len), len))
    ) {
        let src = plan_json(&body);
        let opts = CompileOptions::default();
        let compiled = compile(&src, &opts);
        // Loops nothing can leave, or no reachable final_answer: not this test's subject.
        prop_assume!(compiled.program.is_some());
        let g = graph(&body);
        let n = g.succ.len();
        let reachable = reach_avoiding(&g, &[0], usize::MAX);
        let written: BTreeSet<usize> = g.writes.iter().flatten().copied().collect();

        // W0202 where a path from the start reaches the read without a write of its var.
        let mut want = BTreeSet::new();
        for (var, name) in VARS.iter().enumerate() {
            let free = reach_avoiding(&g, &[0], var);
            for i in 0..n {
                if reachable[i] && g.reads[i].contains(&var) && written.contains(&var) && free[i] {
                    want.insert((i as i64, (*name).to_owned()));
                }
            }
        }
        prop_assert_eq!(maybe_unset(&compiled), want, "{}", src);

        // explain: the writes a read can see, through paths without another write.
        let steps = explain(&src, &opts).map_err(|_| TestCaseError::fail("explain failed"))?;
        for s in steps {
            let i = s.seq_no as usize;
            let mut deps = BTreeSet::new();
            for &var in g.reads[i].iter().filter(|_| reachable[i]) {
                for d in (0..n).filter(|&d| reachable[d] && g.writes[d].contains(&var)) {
                    if reach_avoiding(&g, &g.succ[d], var)[i] {
                        deps.insert(d as i64);
                    }
                }
            }
            let got: BTreeSet<i64> = s.depends_on.iter().copied().collect();
            prop_assert_eq!(got, deps, "seq {} of {}", i, src);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// A branch (`planvm branch`): verified from step `entry` with some variables set.
    /// W0202 where a path from the entry reaches the read with no write of a variable that
    /// was not set at the entry; E0211 for a read of a variable neither set nor written.
    #[test]
    fn may_be_unset_from_a_branch_entry_matches_a_path_search(
        (body, entry) in (1..9usize).prop_flat_map(|len| (proptest::collection::vec(step(len), len), 0..=len)),
        preset_mask in 0..8usize,
    ) {
        let src = plan_json(&body);
        let preset: Vec<usize> = (0..3).filter(|v| preset_mask & (1 << v) != 0).collect();
        let opts = CompileOptions {
            entry: Some(plan_compiler::Entry {
                seq_no: entry as i64,
                vars: preset.iter().map(|&v| VARS[v].to_owned()).collect(),
            }),
            ..CompileOptions::default()
        };
        let compiled = compile(&src, &opts);
        let g = graph(&body);
        let n = g.succ.len();
        let reachable = reach_avoiding(&g, &[entry], usize::MAX);
        let written: BTreeSet<usize> = g.writes.iter().flatten().copied().collect();
        let never_set: BTreeSet<String> = (0..n)
            .filter(|&i| reachable[i])
            .flat_map(|i| g.reads[i].iter().copied())
            .filter(|v| !written.contains(v) && !preset.contains(v))
            .map(|v| VARS[v].to_owned())
            .collect();
        let got_errors: BTreeSet<String> = compiled
            .diagnostics
            .iter()
            .filter(|d| d.code == "E0211")
            .map(|d| d.message.split('`').nth(1).unwrap_or("").to_owned())
            .collect();
        prop_assert_eq!(&got_errors, &never_set, "{}", src);
        prop_assert!(compiled.diagnostics.iter().all(|d| d.code != "W0201" && d.code != "W0204" || d.seq_no.is_some_and(|s| s >= entry as i64)), "{:?}", compiled.diagnostics);

        let mut want = BTreeSet::new();
        for (var, name) in VARS.iter().enumerate() {
            if preset.contains(&var) || !written.contains(&var) {
                continue;
            }
            let free = reach_avoiding(&g, &[entry], var);
            for i in 0..n {
                if reachable[i] && g.reads[i].contains(&var) && free[i] {
                    want.insert((i as i64, (*name).to_owned()));
                }
            }
        }
        prop_assert_eq!(maybe_unset(&compiled), want, "{}", src);
    }
}
