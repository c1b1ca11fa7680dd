//! AST → flat list of steps, one per executable instruction. Older-dialect `condition`
//! branches are laid out inline (`Branch`, true branch, synthetic `Jump` over the false
//! branch, false branch), so every later pass works on one linear list where a step's
//! index is its program counter.

use plan_syntax::{Condition, InstrKind, Instruction, Name, Node, SeqRef, Span};

/// Where a jump goes: a `seq_no` as written, or a step index decided by flattening.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Target<'a> {
    Seq(&'a SeqRef),
    Step(usize),
}

#[derive(Debug)]
pub(crate) enum StepKind<'a> {
    Nop,
    Assign(&'a [(Name, Node)]),
    Call {
        tool: &'a Name,
        params: &'a [(Name, Node)],
        outputs: &'a [Name],
    },
    Jump(Target<'a>),
    Branch {
        prompt: Option<&'a Node>,
        context: Option<&'a Node>,
        if_true: Target<'a>,
        if_false: Target<'a>,
    },
}

#[derive(Debug)]
pub(crate) struct Step<'a> {
    /// The instruction; for a synthetic step, the `condition` it was made for.
    pub(crate) instr: &'a Instruction,
    pub(crate) kind: StepKind<'a>,
    /// Inserted by flattening (jump over a false branch, landing pad): no seq_no of its own.
    pub(crate) synthetic: bool,
    /// Nesting depth inside older-dialect branches.
    pub(crate) depth: u32,
}

// NB: what a step shares with its instruction is read from it, not copied: a step is a
// third of the size it was with copies, which mattered on plans of 100k instructions.
impl<'a> Step<'a> {
    pub(crate) fn seq_no(&self) -> Option<i64> {
        self.instr.seq_no
    }

    pub(crate) fn seq_span(&self) -> Span {
        self.instr.seq_span
    }

    pub(crate) fn span(&self) -> Span {
        self.instr.span
    }

    /// Instruction type as written (`"calling"`, ...).
    pub(crate) fn ty(&self) -> &'a str {
        match (self.synthetic, &self.instr.ty) {
            (true, _) => "jmp",
            (false, Some(n)) => &n.text,
            (false, None) => "",
        }
    }

    /// The instruction the step was written as (`None`: synthetic).
    pub(crate) fn written(&self) -> Option<&'a Instruction> {
        (!self.synthetic).then_some(self.instr)
    }
}

/// Flattens `instrs`. The flag is false when an instruction is `Invalid` or lacks what
/// lowering needs (its error was already reported by the parser): such an instruction
/// becomes a `Nop` so per-instruction checks still run on the rest, but whole-plan
/// checks would only report consequences of the known error and are skipped.
pub(crate) fn flatten(instrs: &[Instruction]) -> (Vec<Step<'_>>, bool) {
    let mut out = Vec::with_capacity(instrs.len());
    let mut ok = true;
    flatten_into(instrs, 0, &mut out, &mut ok);
    (out, ok)
}

fn flatten_into<'a>(instrs: &'a [Instruction], depth: u32, out: &mut Vec<Step<'a>>, ok: &mut bool) {
    for ins in instrs {
        let step = |kind| Step {
            instr: ins,
            kind,
            synthetic: false,
            depth,
        };
        match &ins.kind {
            InstrKind::Reasoning(_) => out.push(step(StepKind::Nop)),
            InstrKind::Assign { vars } => out.push(step(StepKind::Assign(vars))),
            InstrKind::Call(c) => out.push(step(StepKind::Call {
                tool: &c.tool,
                params: &c.params,
                outputs: &c.output_vars,
            })),
            InstrKind::Jmp(j) => match (
                &j.condition_prompt,
                &j.jump_if_true,
                &j.jump_if_false,
                &j.target_seq,
            ) {
                (Some(p), Some(t), Some(f), _) => out.push(step(StepKind::Branch {
                    prompt: Some(p),
                    context: j.context.as_ref(),
                    if_true: Target::Seq(t),
                    if_false: Target::Seq(f),
                })),
                (None, _, _, Some(t)) => out.push(step(StepKind::Jump(Target::Seq(t)))),
                _ => {
                    *ok = false;
                    out.push(step(StepKind::Nop));
                }
            },
            InstrKind::Condition(c) => {
                let Condition {
                    prompt,
                    context,
                    true_branch,
                    false_branch,
                } = &**c;
                let at = out.len();
                out.push(step(StepKind::Branch {
                    prompt: prompt.as_ref(),
                    context: context.as_ref(),
                    if_true: Target::Step(at + 1),
                    if_false: Target::Step(at + 1), // patched below
                }));
                flatten_into(true_branch, depth + 1, out, ok);
                let jump_at = out.len();
                if !false_branch.is_empty() {
                    out.push(Step {
                        instr: ins,
                        kind: StepKind::Jump(Target::Step(0)), // patched below
                        synthetic: true,
                        depth: depth + 1,
                    });
                }
                let false_at = out.len();
                flatten_into(false_branch, depth + 1, out, ok);
                let end = out.len();
                if let StepKind::Branch { if_false, .. } = &mut out[at].kind {
                    *if_false = Target::Step(false_at);
                }
                if !false_branch.is_empty() {
                    out[jump_at].kind = StepKind::Jump(Target::Step(end));
                }
            }
            InstrKind::Invalid => {
                *ok = false;
                out.push(step(StepKind::Nop));
            }
        }
    }
}
