//! `plan-compiler`: plan text → verified `Program`.
//!
//! Pipeline (start reading at [`compile`]):
//! 1. `plan_syntax::parse`: lenient reader + plan AST (both dialects), with diagnostics.
//! 2. `flatten`: older-dialect `condition` branches laid out inline, one step per instruction.
//! 3. `lower`: slots interned, constants pooled, templates/arithmetic compiled, constant
//!    folding, tool-parameter checks; one bytecode instruction per step.
//! 4. `verify`: reachability, termination, `final_answer` coverage, dataflow warnings.
//!
//! Every stage collects diagnostics instead of stopping, so one `planc check` reports
//! everything; `Compiled::program` is `Some` only when there is no error.
//!
//! [`load`] is what a runner calls: plan bytes, source or `.pbc`, to a validated program
//! (`load.rs`, reading files with a size cap); [`files`] is file identity, so that no
//! output of a command overwrites one of its inputs (a plan, a cassette, a store).

mod cfg;
mod codes;
pub mod files;
mod flatten;
mod load;
mod lower;
mod ssa;
mod verify;

pub use codes::*;
pub use load::{LoadError, Loaded, MAX_INPUT_BYTES, load, read_capped};

// Seeded and fast: see `lower.rs`.
use foldhash::{HashMap, HashMapExt};

use plan_bytecode::{DebugEntry, DebugInfo, Instr};
use smallvec::SmallVec;

use plan_bytecode::Program;
use plan_manifest::Manifest;
use plan_syntax::{Diagnostic, LineIndex, Severity};

/// Options for one compilation.
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// Reader repairs become errors.
    pub strict: bool,
    /// Drop the debug section (seq_no/line map, reasoning text).
    pub strip: bool,
    pub manifest: Manifest,
    /// File name recorded in the debug section.
    pub source_name: Option<String>,
    /// Verify the plan as run from one of its instructions with some variables already
    /// set (a branch of a stored run), instead of from its first instruction.
    pub entry: Option<Entry>,
    /// Variables the run is started with (`--var`): counted as set from its start, so a
    /// plan that reads one is not warned that it is never assigned (W0201). Unlike an
    /// [`Entry`]'s, a variable neither among them nor assigned stays a warning.
    pub presets: Vec<String>,
}

/// Where a run of the plan starts, and what is set when it does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// The instruction the run starts at.
    pub seq_no: i64,
    /// Variables set at the start. A reference to a variable that is neither among them
    /// nor assigned anywhere in the plan is an error ([`codes::UNKNOWN_VAR_AT_ENTRY`]).
    pub vars: Vec<String>,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            strict: false,
            strip: false,
            manifest: Manifest::builtin(),
            source_name: None,
            entry: None,
            presets: Vec::new(),
        }
    }
}

/// Result of compiling one plan: the program when there were no errors, and every diagnostic.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub program: Option<Program>,
    pub diagnostics: Vec<Diagnostic>,
    pub line_index: LineIndex,
}

/// Reads, checks and lowers a plan.
pub fn compile(src: &str, opts: &CompileOptions) -> Compiled {
    let (compiled, _) = compile_inner(src, opts, false);
    compiled
}

/// Reader repair warnings (`W00NN`) become errors (`E08NN`) under `--strict`.
fn is_repair(d: &Diagnostic) -> bool {
    plan_syntax::codes::is_reader_repair(d.code)
}

fn compile_inner(
    src: &str,
    opts: &CompileOptions,
    want_explain: bool,
) -> (Compiled, Option<Vec<ExplainStep>>) {
    let line_index = LineIndex::new(src);
    let parsed = plan_syntax::parse(src);
    let mut diagnostics = parsed.diagnostics;
    if opts.strict {
        refuse_repairs(&mut diagnostics);
    }
    let Some(plan) = parsed.value else {
        let compiled = Compiled {
            program: None,
            diagnostics,
            line_index,
        };
        return (compiled, None);
    };
    let (steps, complete) = flatten::flatten(&plan.instructions);
    let n = steps.len();

    let targets = jump_targets(&steps, &mut diagnostics);
    let mut lw = lower::Lowerer::new(plan.dialect, &opts.manifest, n);
    let mut code = Vec::with_capacity(n + 1);
    for (s, t) in steps.iter().zip(&targets) {
        // NB: a target of `n` (end of plan) lands on a trailing `Nop`, so the VM falls off
        // the end exactly as if execution had run past the last instruction.
        code.push(lw.step(s, t));
    }
    let mut lw = lw.finish();
    let needs_pad = targets.iter().flatten().any(|&t| t == n);
    check_size(&steps, needs_pad, &mut diagnostics);
    let final_slot = lw.program.final_answer_slot();
    let entry = entry_of(
        opts.entry.as_ref(),
        &opts.presets,
        &steps,
        &lw.program.slots,
        plan.span,
        &mut lw.diags,
    );
    let cfg = cfg::Cfg::new(&steps, &lw.io, &targets, final_slot, entry.step);
    // NB: the tables only lowering needed are freed before the dataflow analysis, which
    // is where checking a large plan peaks in memory.
    drop(targets);
    if complete {
        verify::verify(
            &steps,
            &lw.io,
            &cfg,
            &lw.program.slots,
            &entry,
            plan.span,
            &mut lw.diags,
        );
    } else {
        // Some instruction could not be read, so the control flow is unknown and the plan
        // is not verified; but a plan that nowhere even names final_answer surely lacks
        // it, and `check` reports every problem at once.
        let sets_final = final_slot.is_some_and(|f| lw.io.all_writes().contains(&f));
        if !sets_final && !src.contains("final_answer") {
            lw.diags.push(verify::no_final_answer(plan.span));
        }
    }
    diagnostics.append(&mut lw.diags);
    collapse_repeated_repairs(&mut diagnostics);
    let explain_steps = want_explain.then(|| explain_steps(&steps, &lw, &cfg, &opts.manifest));

    let mut program = lw.program;
    program.code = code;
    if needs_pad {
        program.code.push(Instr::Nop);
    }
    if !opts.strip {
        program.debug = Some(debug_info(&steps, &line_index, needs_pad, opts));
    }
    sort_diagnostics(&mut diagnostics);
    let ok = !diagnostics.iter().any(Diagnostic::is_error);
    let compiled = Compiled {
        program: ok.then_some(program),
        diagnostics,
        line_index,
    };
    (compiled, explain_steps)
}

/// `--strict`: the reader's repairs become the errors of the same number.
fn refuse_repairs(diagnostics: &mut [Diagnostic]) {
    for d in diagnostics.iter_mut().filter(|d| is_repair(d)) {
        d.severity = Severity::Error;
        d.code = plan_syntax::codes::strict_code(d.code).unwrap_or(d.code);
        d.help = Some(format!(
            "{} (--strict rejects repaired input: emit plain JSON)",
            d.help.as_deref().unwrap_or("fix the input")
        ));
    }
}

/// Each step's jump targets as step indexes (`n`: the end of the plan, also where a
/// target that names no instruction goes, reported); a seq_no used twice is reported.
fn jump_targets(
    steps: &[flatten::Step<'_>],
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<SmallVec<[usize; 2]>> {
    let n = steps.len();
    // seq_no → step index, duplicates reported.
    let mut by_seq: HashMap<i64, usize> = HashMap::with_capacity(n);
    for (i, s) in steps.iter().enumerate().filter(|(_, s)| !s.synthetic) {
        if let Some(seq) = s.seq_no() {
            if let Some(&first) = by_seq.get(&seq) {
                diagnostics.push(
                    Diagnostic::error(DUPLICATE_SEQ, format!("seq_no {seq} is used twice"))
                        .with_span(s.seq_span())
                        .with_seq(Some(seq))
                        .with_label(steps[first].seq_span(), "first used here")
                        .with_help("give every instruction a unique seq_no, numbered 0, 1, 2, ... in order"),
                );
            } else {
                by_seq.insert(seq, i);
            }
        }
    }
    let resolve_target =
        |t: &flatten::Target, diagnostics: &mut Vec<Diagnostic>, seq: Option<i64>| match *t {
            flatten::Target::Step(i) => i,
            flatten::Target::Seq(r) => match by_seq.get(&r.seq_no) {
                Some(&i) => i,
                None => {
                    diagnostics.push(
                        Diagnostic::error(
                            BAD_TARGET,
                            format!("jump target {} names no instruction", r.seq_no),
                        )
                        .with_span(r.span)
                        .with_seq(seq)
                        .with_help("use the seq_no of an existing instruction"),
                    );
                    n
                }
            },
        };

    steps
        .iter()
        .map(|s| match &s.kind {
            flatten::StepKind::Jump(t) => {
                smallvec::smallvec![resolve_target(t, diagnostics, s.seq_no())]
            }
            flatten::StepKind::Branch {
                if_true, if_false, ..
            } => smallvec::smallvec![
                resolve_target(if_true, diagnostics, s.seq_no()),
                resolve_target(if_false, diagnostics, s.seq_no())
            ],
            _ => SmallVec::new(),
        })
        .collect()
}

/// E0210 for a plan with more instructions than the bytecode allows (`needs_pad`: a
/// `Nop` will follow them).
fn check_size(steps: &[flatten::Step<'_>], needs_pad: bool, diagnostics: &mut Vec<Diagnostic>) {
    let n = steps.len();
    let max_code = plan_bytecode::limits::MAX_CODE;
    if n + usize::from(needs_pad) > max_code
        && let Some(s) = steps.get(max_code.min(n.saturating_sub(1)))
    {
        diagnostics.push(
            Diagnostic::error(
                codes::OVER_LIMIT,
                format!(
                    "the plan has {n} instructions; a compiled plan may have at most {max_code}"
                ),
            )
            .with_span(s.span())
            .with_seq(s.seq_no())
            .with_help("split the plan"),
        );
    }
}

/// The debug section: each instruction's seq_no and place (and the padding `Nop`'s, the
/// last one's), the reasoning text, the source's name.
fn debug_info(
    steps: &[flatten::Step<'_>],
    line_index: &LineIndex,
    needs_pad: bool,
    opts: &CompileOptions,
) -> DebugInfo {
    let entry = |s: &flatten::Step<'_>| {
        let (line, column) = line_index.line_col(s.span().start);
        DebugEntry {
            seq_no: s.seq_no().unwrap_or(-1),
            line,
            column,
        }
    };
    let mut entries: Vec<DebugEntry> = steps.iter().map(entry).collect();
    if needs_pad {
        entries.push(entries.last().cloned().unwrap_or(DebugEntry {
            seq_no: -1,
            line: 1,
            column: 1,
        }));
    }
    let reasoning = steps
        .iter()
        .enumerate()
        .filter_map(|(pc, s)| match &s.written()?.kind {
            plan_syntax::InstrKind::Reasoning(r) => Some((
                pc as u32,
                r.chain_of_thoughts.clone().unwrap_or_default(),
                r.dependency_analysis.clone().unwrap_or_default(),
            )),
            _ => None,
        })
        .collect();
    DebugInfo {
        entries,
        reasoning,
        source: opts.source_name.clone(),
    }
}

/// How many repairs of one kind are reported one by one before the rest are summarised.
const REPAIRS_SHOWN_PER_KIND: usize = 3;

/// A Python-literal plan has one single-quoted string per key and value: hundreds of
/// identical repairs bury everything else. Keep the first few of each kind with their
/// locations and summarise the rest in one diagnostic (severity kept, so `--strict`
/// still fails).
fn collapse_repeated_repairs(diags: &mut Vec<Diagnostic>) {
    if !diags.iter().any(is_repair) {
        return;
    }
    let mut counts: HashMap<&'static str, usize> = HashMap::new();
    for d in diags.iter().filter(|d| is_repair(d)) {
        *counts.entry(d.code).or_default() += 1;
    }
    let mut seen: HashMap<&'static str, usize> = HashMap::new();
    let mut out = Vec::with_capacity(diags.len());
    for d in diags.drain(..) {
        let Some(&total) = counts.get(d.code) else {
            out.push(d);
            continue;
        };
        let k = seen.entry(d.code).or_default();
        *k += 1;
        if *k <= REPAIRS_SHOWN_PER_KIND {
            out.push(d);
        } else if *k == REPAIRS_SHOWN_PER_KIND + 1 {
            let more = total - REPAIRS_SHOWN_PER_KIND;
            let mut summary = d;
            summary.message = format!("{} more like this: {}", more, summary.message);
            out.push(summary);
        }
    }
    *diags = out;
}

/// Source order, errors before warnings at the same place.
fn sort_diagnostics(d: &mut [Diagnostic]) {
    d.sort_by_key(|d| (d.span.map_or(0, |s| s.start), std::cmp::Reverse(d.severity)));
}

/// The closest candidate within a small edit distance, for "did you mean" help.
pub(crate) fn suggest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    // NB: names taken from a plan can be megabytes; nothing that long is a misspelling.
    if word.len() > plan_value::distance::MAX_NAME_LEN {
        return None;
    }
    candidates
        .iter()
        .map(|c| (plan_value::edit_distance(word, c), *c))
        .filter(|(d, c)| *d <= (c.len().max(word.len()) / 3).max(1))
        .min()
        .map(|(_, c)| c)
}

/// One step of `planc explain`: a plan instruction and the earlier steps it depends on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExplainStep {
    pub seq_no: i64,
    /// Instruction type as written (`calling`, `assign`, ...).
    pub kind: String,
    /// Short description: tool name and output vars, assigned vars, jump targets, ...
    pub title: String,
    /// seq_nos of the instructions whose outputs this one reads (def-use dataflow).
    pub depends_on: Vec<i64>,
    /// Variables this step reads and writes.
    pub reads: Vec<String>,
    pub writes: Vec<String>,
    /// Nesting depth (older-dialect branches are nested under their `condition`).
    pub depth: u32,
}

/// Dataflow summary of a plan for `planc explain`, or the diagnostics that prevented it.
pub fn explain(src: &str, opts: &CompileOptions) -> Result<Vec<ExplainStep>, Box<Compiled>> {
    match compile_inner(src, opts, true) {
        (c, Some(steps)) if c.program.is_some() => Ok(steps),
        (c, _) => Err(Box::new(c)),
    }
}

/// The verifier's view of `entry`: the step it names (an error if none does) and the
/// slots of its variables, and of the `presets` set before the run starts.
fn entry_of(
    entry: Option<&Entry>,
    presets: &[String],
    steps: &[flatten::Step<'_>],
    slots: &[String],
    plan_span: plan_syntax::Span,
    diags: &mut Vec<Diagnostic>,
) -> cfg::Entry {
    let slots_of = |names: &mut dyn Iterator<Item = &String>| {
        let mut set: Vec<plan_bytecode::Slot> = names
            .filter_map(|name| slots.iter().position(|s| s == name))
            .map(|i| i as plan_bytecode::Slot)
            .collect();
        set.sort_unstable();
        set.dedup();
        set
    };
    let Some(e) = entry else {
        return cfg::Entry {
            preset: slots_of(&mut presets.iter()),
            ..cfg::Entry::default()
        };
    };
    let step = steps
        .iter()
        .position(|s| s.seq_no() == Some(e.seq_no) && !s.synthetic);
    if step.is_none() {
        diags.push(
            Diagnostic::error(
                codes::BAD_TARGET,
                format!("no instruction has seq_no {} to start at", e.seq_no),
            )
            .with_span(plan_span)
            .with_help("start at the seq_no of an instruction of this plan"),
        );
    }
    cfg::Entry {
        step: step.unwrap_or(0),
        preset: slots_of(&mut e.vars.iter().chain(presets)),
        branch: true,
    }
}

/// How `explain` names step `i`, which writes `writes`: its kind and what it does.
fn step_title(
    steps: &[flatten::Step<'_>],
    i: usize,
    (cfg, manifest): (&cfg::Cfg, &Manifest),
    writes: &[String],
) -> String {
    let seq_of = |t: usize| {
        steps
            .get(t)
            .and_then(|t| t.seq_no())
            .map_or("end".to_owned(), |t| t.to_string())
    };
    match &steps[i].kind {
        flatten::StepKind::Nop => "reasoning".to_owned(),
        flatten::StepKind::Assign(_) => format!("assign {}", writes.join(", ")),
        flatten::StepKind::Call { tool, params, .. } => {
            let q = params.iter().find_map(|(_, v)| v.as_str()).map(|q| {
                let short: String = q.chars().take(48).collect();
                if short.len() < q.len() {
                    format!(" \"{short}…\"")
                } else {
                    format!(" \"{short}\"")
                }
            });
            let defaults: Vec<String> =
                lower::defaulted(manifest, &tool.text, &lower::last_of_each_name(params))
                    .iter()
                    .map(|(name, v)| format!("{name} = {v}"))
                    .collect();
            let defaults = if defaults.is_empty() {
                String::new()
            } else {
                format!(" ({} by default)", defaults.join(", "))
            };
            let out = if writes.is_empty() {
                String::new()
            } else {
                format!(" -> {}", writes.join(", "))
            };
            format!("{}{}{defaults}{}", tool.text, q.unwrap_or_default(), out)
        }
        flatten::StepKind::Jump(_) => {
            let to = cfg.succ[i].first().map_or("end".to_owned(), |&t| seq_of(t));
            format!("jump to {to}")
        }
        flatten::StepKind::Branch { .. } => {
            let seqs: Vec<String> = cfg.succ[i].iter().map(|&t| seq_of(t)).collect();
            format!(
                "if condition then {} else {}",
                seqs.first().map_or("?", |s| s),
                seqs.get(1).map_or("?", |s| s)
            )
        }
    }
}

/// For each step, the steps whose writes of a variable it reads may still be live when it
/// runs (reaching definitions, from the SSA names of `ssa.rs`).
fn explain_steps(
    steps: &[flatten::Step<'_>],
    lw: &lower::Lowered,
    cfg: &cfg::Cfg,
    manifest: &Manifest,
) -> Vec<ExplainStep> {
    let n = steps.len();
    // NB: from SSA names, not a set of definitions per step: that was steps × writes bits
    // (a 100k-step chain took 1.4 GB and half a minute).
    let preds = cfg::preds(&cfg.succ, n + 1);
    let ssa = ssa::Ssa::build(
        cfg,
        &preds,
        &lw.io,
        n,
        lw.program.slots.len(),
        &cfg::Entry::default(),
    );
    let mut seen = vec![false; ssa.phi_count()];
    let mut defs: Vec<usize> = Vec::new();
    let name = |s: &u32| lw.program.slots[*s as usize].clone();
    steps
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.synthetic)
        .map(|(i, s)| {
            let mut reads: Vec<u32> = lw.io.reads(i).iter().map(|r| r.0).collect();
            reads.sort_unstable();
            reads.dedup();
            defs.clear();
            for k in 0..lw.io.reads(i).len() {
                ssa.defs_seen(i, k, &mut seen, &mut defs);
            }
            let mut depends_on: Vec<i64> = defs.iter().filter_map(|&d| steps[d].seq_no()).collect();
            depends_on.sort_unstable();
            depends_on.dedup();
            let writes: Vec<String> = lw.io.writes(i).iter().map(name).collect();
            let title = step_title(steps, i, (cfg, manifest), &writes);
            ExplainStep {
                seq_no: s.seq_no().unwrap_or(-1),
                kind: s.ty().to_owned(),
                title,
                depends_on,
                reads: reads.iter().map(name).collect(),
                writes,
                depth: s.depth,
            }
        })
        .collect()
}
