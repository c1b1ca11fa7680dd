//! Steps → `Program`: slot interning, constant pooling, template and arithmetic lowering,
//! constant folding, tool-parameter checks. Records what each step reads and writes for
//! the verifier's dataflow passes.
//!
//! Performance: lowering runs once per step over plans of up to thousands of steps, so
//! names, strings and references are interned in tables of indices into the `Program`'s
//! own tables (the key is where the index points), hashed with foldhash: a string is
//! copied only into the `Program` itself, once, and an entry costs 4 bytes.

use std::hash::BuildHasher;

use hashbrown::HashTable;
use hashbrown::hash_table::Entry;

// NB: foldhash, not SipHash: the keys are short names hashed once per use, where SipHash
// dominated the profile; foldhash is seeded per process, so plans cannot be crafted to
// collide the way they could against an unseeded hash (FxHash).
use foldhash::{HashMap, HashMapExt};

use plan_bytecode::limits::{MAX_ARITH_STACK, MAX_LIST, MAX_OPERAND_DEPTH, table_sizes};
use plan_bytecode::{
    ArithDef, ArithOp, AssignDef, CallDef, CondDef, ConstIdx, Effects, Instr, Operand, Piece,
    Program, RefDef, Slot, ToolDef,
};
use plan_manifest::{Effects as ManifestEffects, Manifest};
use plan_syntax::{
    Diagnostic, Dialect, Expr, Name, Node, NodeKind, PieceStr, RefStr, Span, VarRef, has_ref,
    parse_arith, pieces_into,
};
use plan_value::Num;
use serde_json::Value;
use smallvec::SmallVec;

use crate::codes;
use crate::flatten::{Step, StepKind};

/// What each step reads and writes (slots), for dataflow. The slots are the instruction
/// table's answer (`Instr::reads`, `Instr::writes`), so the compiler's checks and the VM's
/// scheduler cannot disagree; the span of each read is this crate's side table, recorded
/// while its references were lowered (in the same evaluation order). All steps' lists live
/// in two flat arrays rather than two vectors per step: allocating those was measurable.
#[derive(Clone, Debug, Default)]
pub(crate) struct Io {
    /// (slot, span of the value that reads it)
    reads: Vec<(Slot, Span)>,
    writes: Vec<Slot>,
    /// Per step, where its reads and its writes end in the arrays above.
    ends: Vec<(usize, usize)>,
}

impl Io {
    fn starts(&self, step: usize) -> (usize, usize) {
        match step.checked_sub(1) {
            Some(prev) => self.ends[prev],
            None => (0, 0),
        }
    }

    /// What step `step` reads, in the order its values were lowered.
    pub(crate) fn reads(&self, step: usize) -> &[(Slot, Span)] {
        &self.reads[self.starts(step).0..self.ends[step].0]
    }

    pub(crate) fn writes(&self, step: usize) -> &[Slot] {
        &self.writes[self.starts(step).1..self.ends[step].1]
    }

    /// Every step's writes, step after step.
    pub(crate) fn all_writes(&self) -> &[Slot] {
        &self.writes
    }
}

pub(crate) struct Lowerer<'m, 'p> {
    pub(crate) program: Program,
    pub(crate) diags: Vec<Diagnostic>,
    pub(crate) io: Io,
    dialect: Dialect,
    manifest: &'m Manifest,
    /// String constants (indices into `program.consts`, by the text they point to).
    str_consts: HashTable<ConstIdx>,
    /// Every other constant by its compact JSON (see `const_key`).
    consts: HashMap<String, ConstIdx>,
    /// Slots, by the name in `program.slots` they point to.
    slots: HashTable<Slot>,
    /// References, by the `program.refs` entry they point to.
    refs: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
    tools: HashMap<&'p str, u32>,
    /// Span of each reference lowered in the current step, in evaluation order: the side
    /// table that gives the instruction table's reads their place in the plan.
    read_spans: Vec<Span>,
    /// Scratch for the pieces of one string (reused: most strings are lowered this way).
    pieces: Vec<PieceStr<'p>>,
    /// seq_no of the step being lowered (for limit errors found deep in its values).
    seq: Option<i64>,
    /// Nesting of array/object operands around the value being lowered.
    operand_depth: usize,
    /// Program tables already reported as past their limit (one error each).
    tables_reported: u32,
}

/// Whether a string value may be arithmetic (only `assign` values are).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Assign,
    Param,
}

fn const_key(v: &Value) -> String {
    // NB: serde_json renders 1 and 1.0 differently, so ints and floats never share a slot.
    serde_json::to_string(v).unwrap_or_default()
}

/// A reference to lower: borrowed from the plan's text, or built by the arithmetic parser.
enum AnyRef<'p, 'e> {
    Str(RefStr<'p>),
    Owned(&'e VarRef),
}

/// What lowering leaves for the checks after it: the program and each step's reads and
/// writes. The lowerer's interning maps are gone by then (on a large plan they were a
/// tenth of the memory of `planc check` at its peak, in the dataflow analysis).
pub(crate) struct Lowered {
    pub(crate) program: Program,
    pub(crate) diags: Vec<Diagnostic>,
    pub(crate) io: Io,
}

/// The index in `table` of the item of `items` that `is` accepts (`hash` is its hash, as
/// `hash_of` hashes an item), or of the item `make` builds, pushed to `items`.
fn intern<T>(
    table: &mut HashTable<u32>,
    items: &mut Vec<T>,
    hash: u64,
    is: impl Fn(&T) -> bool,
    hash_of: impl Fn(&T) -> u64,
    make: impl FnOnce() -> T,
) -> u32 {
    match table.entry(
        hash,
        |&i| is(&items[i as usize]),
        |&i| hash_of(&items[i as usize]),
    ) {
        Entry::Occupied(e) => *e.get(),
        Entry::Vacant(e) => {
            let i = items.len() as u32;
            items.push(make());
            *e.insert(i).get()
        }
    }
}

/// The text of a string constant (every entry of `str_consts` points to one).
fn text(c: &Value) -> &str {
    c.as_str().unwrap_or_default()
}

impl<'m, 'p> Lowerer<'m, 'p> {
    pub(crate) fn finish(mut self) -> Lowered {
        // NB: the tables were sized for a large plan's worst case and live as long as the
        // program; a small plan's few unused bytes are not worth a reallocation each.
        fn fit<T>(v: &mut Vec<T>) {
            if (v.capacity() - v.len()) * std::mem::size_of::<T>() > 64 << 10 {
                v.shrink_to_fit();
            }
        }
        let p = &mut self.program;
        fit(&mut p.consts);
        fit(&mut p.slots);
        fit(&mut p.refs);
        fit(&mut p.templates);
        fit(&mut p.assigns);
        fit(&mut p.ariths);
        fit(&mut p.calls);
        Lowered {
            program: self.program,
            diags: self.diags,
            io: self.io,
        }
    }

    /// `steps`: how many steps will be lowered. The tables are sized for it up front: on
    /// large plans rehashing while they grew was a visible part of lowering (about one
    /// variable and two distinct strings per step is typical; an entry is 5 bytes).
    /// The program's tables too: grown from empty, their reallocations were a tenth of
    /// compiling a small plan (`finish` gives back what a large one left unused).
    pub(crate) fn new(dialect: Dialect, manifest: &'m Manifest, steps: usize) -> Self {
        // NB: the step count is the plan's, untrusted: sized for at most 65,536 steps, and
        // a larger plan's tables grow (8M one-byte steps of a 16 MiB input would reserve
        // gigabytes up front).
        let steps = steps.min(1 << 16);
        let program = Program {
            consts: Vec::with_capacity(2 * steps),
            slots: Vec::with_capacity(steps),
            refs: Vec::with_capacity(steps),
            templates: Vec::with_capacity(steps),
            assigns: Vec::with_capacity(steps),
            ..Program::default()
        };
        Lowerer {
            program,
            diags: Vec::new(),
            io: Io {
                reads: Vec::with_capacity(steps),
                writes: Vec::with_capacity(steps),
                ends: Vec::with_capacity(steps),
            },
            dialect,
            manifest,
            str_consts: HashTable::with_capacity(2 * steps),
            consts: HashMap::new(),
            slots: HashTable::with_capacity(steps),
            refs: HashTable::with_capacity(steps),
            hasher: foldhash::fast::RandomState::default(),
            tools: HashMap::new(),
            read_spans: Vec::new(),
            pieces: Vec::new(),
            seq: None,
            operand_depth: 0,
            tables_reported: 0,
        }
    }

    /// Reports a list (`what`, `len` items) past the bytecode's `MAX_LIST` at `span`: a
    /// plan past any limit of the loader gets an error here, never a `.pbc` that will not
    /// load. The limits are the loader's own (`plan_bytecode::limits`).
    fn check_list(&mut self, len: usize, what: &str, span: Span) {
        if len > MAX_LIST {
            self.too_big(
                format!("{what} has {len} items; a compiled plan allows at most {MAX_LIST}"),
                span,
            );
        }
    }

    #[cold]
    fn too_big(&mut self, message: String, span: Span) {
        self.diags.push(
            Diagnostic::error(codes::OVER_LIMIT, message)
                .with_span(span)
                .with_seq(self.seq)
                .with_help("split it over several instructions or variables"),
        );
    }

    /// After step `span`: reports each program table that has just grown past its limit
    /// (constants, variables, side tables, tools), once, at the step that crossed it.
    pub(crate) fn check_tables(&mut self, span: Span) {
        for (k, (what, len, max)) in table_sizes(&self.program).into_iter().enumerate() {
            if len > max && self.tables_reported & (1 << k) == 0 {
                self.tables_reported |= 1 << k;
                self.too_big(
                    format!("the plan needs more than {max} {what}, the most a compiled plan may have; this instruction goes past it"),
                    span,
                );
            }
        }
    }

    /// Pools a constant. Strings go by their text: two strings share an entry exactly when
    /// their `const_key`s (quoted JSON) are equal, and no other value's key starts with `"`.
    pub(crate) fn konst(&mut self, v: Value) -> ConstIdx {
        let v = match v {
            Value::String(s) => return self.konst_str(&s),
            v => v,
        };
        let key = const_key(&v);
        if let Some(&i) = self.consts.get(&key) {
            return i;
        }
        let i = self.program.consts.len() as ConstIdx;
        self.program.consts.push(v);
        self.consts.insert(key, i);
        i
    }

    /// A string constant.
    fn konst_str(&mut self, s: &str) -> ConstIdx {
        let hasher = &self.hasher;
        intern(
            &mut self.str_consts,
            &mut self.program.consts,
            hasher.hash_one(s),
            |c| text(c) == s,
            |c| hasher.hash_one(text(c)),
            || Value::String(s.to_owned()),
        )
    }

    /// The slot of a variable.
    pub(crate) fn slot(&mut self, name: &str) -> Slot {
        let hasher = &self.hasher;
        intern(
            &mut self.slots,
            &mut self.program.slots,
            hasher.hash_one(name),
            |s| s == name,
            |s| hasher.hash_one(s.as_str()),
            || name.to_owned(),
        )
    }

    fn var_ref(&mut self, r: AnyRef<'p, '_>, span: Span) -> u32 {
        // NB: the order slot, path keys, raw is the order constants are numbered in.
        let (slot, path, raw) = match r {
            AnyRef::Str(r) => {
                let slot = self.slot(r.name);
                self.read_spans.push(span);
                let path: Vec<ConstIdx> = r.keys().map(|k| self.konst_str(k)).collect();
                self.check_list(path.len(), "a reference's dotted path", span);
                (slot, path, self.konst_str(r.raw))
            }
            AnyRef::Owned(r) => {
                let slot = self.slot(&r.name);
                self.read_spans.push(span);
                let path: Vec<ConstIdx> = r.path.iter().map(|k| self.konst_str(k)).collect();
                (slot, path, self.konst_str(&r.raw))
            }
        };
        let hasher = &self.hasher;
        intern(
            &mut self.refs,
            &mut self.program.refs,
            hasher.hash_one((slot, path.as_slice(), raw)),
            |r| (r.slot, r.path.as_slice(), r.raw) == (slot, path.as_slice(), raw),
            |r| hasher.hash_one((r.slot, r.path.as_slice(), r.raw)),
            // NB: a copy, made only for a new reference (most have no path to copy).
            || RefDef {
                slot,
                path: path.clone(),
                raw,
            },
        )
    }

    fn template(&mut self, pieces: &[PieceStr<'p>], span: Span) -> u32 {
        self.check_list(
            pieces.len(),
            "this text (its literal parts and references)",
            span,
        );
        let lowered = pieces
            .iter()
            .map(|p| match *p {
                PieceStr::Lit(s) => Piece::Lit(self.konst_str(s)),
                PieceStr::Ref(r) => Piece::Ref(self.var_ref(AnyRef::Str(r), span)),
            })
            .collect();
        self.program.templates.push(lowered);
        (self.program.templates.len() - 1) as u32
    }

    /// `{"var": "name"}` (older dialect reference object): the variable's name.
    fn var_object(&self, node: &'p Node) -> Option<&'p str> {
        if self.dialect != Dialect::Older {
            return None;
        }
        match node.as_object()? {
            [m] if m.key == "var" => m.value.as_str(),
            _ => None,
        }
    }

    /// Whether a value contains any reference (else it is one constant).
    fn has_refs(&self, node: &'p Node) -> bool {
        match &node.kind {
            NodeKind::String(s) => has_ref(s, self.dialect),
            NodeKind::Array(a) => a.iter().any(|n| self.has_refs(n)),
            NodeKind::Object(m) => {
                self.var_object(node).is_some() || m.iter().any(|m| self.has_refs(&m.value))
            }
            _ => false,
        }
    }

    fn operand(&mut self, node: &'p Node, ctx: Ctx, seq: Option<i64>) -> Operand {
        match &node.kind {
            NodeKind::String(s) => {
                if ctx == Ctx::Assign
                    && let Some(expr) = parse_arith(s, self.dialect)
                {
                    return self.arith(s, &expr, node.span, seq);
                }
                let mut pieces = std::mem::take(&mut self.pieces);
                pieces_into(s, self.dialect, &mut pieces);
                let op = match *pieces.as_slice() {
                    [] | [PieceStr::Lit(_)] => Operand::Const(self.konst_str(s)),
                    [PieceStr::Ref(r)] => Operand::Ref(self.var_ref(AnyRef::Str(r), node.span)),
                    _ => Operand::Template(self.template(&pieces, node.span)),
                };
                self.pieces = pieces;
                op
            }
            NodeKind::Object(members) => {
                if let Some(name) = self.var_object(node) {
                    let r = VarRef {
                        name: name.to_owned(),
                        path: Vec::new(),
                        raw: format!("{{{{{name}}}}}"),
                    };
                    return Operand::Ref(self.var_ref(AnyRef::Owned(&r), node.span));
                }
                if !self.has_refs(node) {
                    return Operand::Const(self.konst(node.to_value()));
                }
                self.check_list(members.len(), "this object", node.span);
                let fields = self.nested(node.span, |lw| {
                    members
                        .iter()
                        .map(|m| {
                            let k = lw.konst_str(&m.key);
                            (k, lw.operand(&m.value, Ctx::Param, seq))
                        })
                        .collect()
                });
                self.program.objects.push(fields);
                Operand::Object((self.program.objects.len() - 1) as u32)
            }
            NodeKind::Array(items) => {
                if !self.has_refs(node) {
                    return Operand::Const(self.konst(node.to_value()));
                }
                self.check_list(items.len(), "this array", node.span);
                let items = self.nested(node.span, |lw| {
                    items
                        .iter()
                        .map(|n| lw.operand(n, Ctx::Param, seq))
                        .collect()
                });
                self.program.arrays.push(items);
                Operand::Array((self.program.arrays.len() - 1) as u32)
            }
            _ => Operand::Const(self.konst(node.to_value())),
        }
    }

    /// Lowers the members of an array/object operand one level deeper, reporting the
    /// level past the loader's `MAX_OPERAND_DEPTH`.
    fn nested<T>(&mut self, span: Span, f: impl FnOnce(&mut Self) -> T) -> T {
        self.operand_depth += 1;
        if self.operand_depth == MAX_OPERAND_DEPTH + 1 {
            self.too_big(
                format!("arrays and objects holding references are nested more than {MAX_OPERAND_DEPTH} deep here; a compiled plan allows at most {MAX_OPERAND_DEPTH}"),
                span,
            );
        }
        let out = f(self);
        self.operand_depth -= 1;
        out
    }

    fn arith(&mut self, text: &'p str, expr: &Expr, span: Span, seq: Option<i64>) -> Operand {
        if !expr_has_refs(expr) {
            // Constant folding: the reference VM evaluates such literals too, so we match
            // it, but tell the author since it is rarely what they meant.
            return match fold(expr) {
                Some(n) => {
                    let v = plan_value::num_to_value(n);
                    self.diags.push(
                        Diagnostic::warning(
                            codes::ARITH_CHANGES_LITERAL,
                            format!("the string \"{text}\" is arithmetic and is assigned as the number {v}"),
                        )
                        .with_span(span)
                        .with_seq(seq)
                        .with_help("if you meant the text, add a non-arithmetic character (e.g. \"date: 2024-10-05\") or assign it from a tool output"),
                    );
                    Operand::Const(self.konst(v))
                }
                None => Operand::Const(self.konst_str(text)),
            };
        }
        let mut code = Vec::new();
        self.arith_code(expr, span, &mut code);
        self.check_list(
            code.len(),
            "this arithmetic (its numbers, references and operators)",
            span,
        );
        let depth = stack_depth(&code);
        if depth > MAX_ARITH_STACK {
            self.too_big(
                format!("this arithmetic needs a stack of {depth} values; a compiled plan allows at most {MAX_ARITH_STACK} (nest fewer parentheses or powers)"),
                span,
            );
        }
        let mut pieces = std::mem::take(&mut self.pieces);
        pieces_into(text, self.dialect, &mut pieces);
        let fallback = match *pieces.as_slice() {
            [] | [PieceStr::Lit(_)] => {
                let k = self.konst_str(text);
                self.program.templates.push(vec![Piece::Lit(k)]);
                (self.program.templates.len() - 1) as u32
            }
            // A single reference or a template: interpolated as written.
            _ => self.template(&pieces, span),
        };
        self.pieces = pieces;
        self.program.ariths.push(ArithDef { code, fallback });
        Operand::Arith((self.program.ariths.len() - 1) as u32)
    }

    fn arith_code(&mut self, e: &Expr, span: Span, code: &mut Vec<ArithOp>) {
        match e {
            Expr::Num(n) => code.push(ArithOp::Const(self.konst(Value::Number(n.clone())))),
            Expr::Ref(r) => code.push(ArithOp::Ref(self.var_ref(AnyRef::Owned(r), span))),
            Expr::Unary(op, a) => {
                self.arith_code(a, span, code);
                code.push(ArithOp::Un(*op));
            }
            Expr::Binary(op, a, b) => {
                self.arith_code(a, span, code);
                self.arith_code(b, span, code);
                code.push(ArithOp::Bin(*op));
            }
        }
    }

    fn tool_index(&mut self, name: &'p str) -> u32 {
        if let Some(&i) = self.tools.get(name) {
            return i;
        }
        let effects = match self.manifest.get(name).map(|t| t.effects) {
            Some(ManifestEffects::Pure) => Effects::Pure,
            Some(ManifestEffects::Write) => Effects::Write,
            Some(ManifestEffects::Human) => Effects::Human,
            _ => Effects::Read,
        };
        let i = self.program.tools.len() as u32;
        self.program.tools.push(ToolDef {
            name: name.to_owned(),
            effects,
        });
        self.tools.insert(name, i);
        i
    }

    fn check_var_name(&mut self, name: &Name, seq: Option<i64>) {
        if name.text.trim().is_empty() {
            self.diags.push(
                Diagnostic::error(codes::BAD_VAR_NAME, "empty variable name")
                    .with_span(name.span)
                    .with_seq(seq)
                    .with_help("give the variable a descriptive name such as \"summary\""),
            );
        }
    }

    /// Lowers one step to one instruction. `targets` are the step indices (= pcs) its
    /// jump goes to (`[target]` or `[if_true, if_false]`), resolved by the caller.
    pub(crate) fn step(&mut self, step: &Step<'p>, targets: &[usize]) -> Instr {
        let target = |k: usize| targets.get(k).copied().unwrap_or(0) as u32;
        self.read_spans.clear();
        let seq = step.seq_no();
        self.seq = seq;
        // For an assign of several variables: where each value's reads end.
        let mut value_ends: SmallVec<[usize; 4]> = SmallVec::new();
        let instr = match step.kind {
            StepKind::Nop => Instr::Nop,
            StepKind::Assign(vars) => {
                let vars = last_of_each_name(vars);
                // NB: every target is interned before any value, which fixes slot numbers.
                let slots: SmallVec<[Slot; 4]> =
                    vars.iter().map(|(name, _)| self.slot(&name.text)).collect();
                let mut targets: SmallVec<[(Slot, Operand); 2]> = SmallVec::new();
                for ((name, value), &slot) in vars.iter().zip(&slots) {
                    self.check_var_name(name, seq);
                    let op = self.operand(value, Ctx::Assign, seq);
                    targets.push((slot, op));
                    value_ends.push(self.read_spans.len());
                }
                self.check_list(targets.len(), "this assign", step.span());
                if targets.len() == 1 {
                    let (dst, src) = targets[0];
                    Instr::Set { dst, src }
                } else {
                    self.program.assigns.push(AssignDef {
                        targets: targets.into_vec(),
                    });
                    Instr::Assign {
                        assign: (self.program.assigns.len() - 1) as u32,
                    }
                }
            }
            StepKind::Call {
                tool,
                params,
                outputs,
            } => self.call(tool, params, outputs, step.span()),
            StepKind::Jump(_) => Instr::Jump { target: target(0) },
            StepKind::Branch {
                prompt, context, ..
            } => {
                let prompt = match prompt {
                    Some(p) => self.operand(p, Ctx::Param, seq),
                    None => Operand::Const(self.konst_str("")),
                };
                let context = context
                    .filter(|c| !matches!(c.kind, NodeKind::Null))
                    .map(|c| self.operand(c, Ctx::Param, seq));
                self.program.conds.push(CondDef { prompt, context });
                Instr::Branch {
                    cond: (self.program.conds.len() - 1) as u32,
                    if_true: target(0),
                    if_false: target(1),
                }
            }
        };
        self.check_tables(step.span());
        self.record_io(&instr, step.span());
        if value_ends.len() > 1 {
            self.check_sibling_refs(&value_ends, seq);
        }
        instr
    }

    /// Lowers a call of `tool` with `params` into `outputs`.
    fn call(
        &mut self,
        tool: &'p Name,
        params: &'p [(Name, Node)],
        outputs: &'p [Name],
        span: Span,
    ) -> Instr {
        let seq = self.seq;
        let args = self.call_args(tool, params, seq);
        let mut outs = Vec::with_capacity(outputs.len());
        for o in outputs {
            self.check_var_name(o, seq);
            let s = self.slot(&o.text);
            if outs.contains(&s) {
                self.diags.push(
                    Diagnostic::error(
                        codes::DUPLICATE_OUTPUT,
                        format!("output variable `{}` is listed twice", o.text),
                    )
                    .with_span(o.span)
                    .with_seq(seq)
                    .with_help("list each output variable once"),
                );
            }
            outs.push(s);
        }
        if outputs.is_empty() {
            self.diags.push(
                Diagnostic::warning(
                    codes::OUTPUT_DISCARDED,
                    format!("the output of `{}` is discarded", tool.text),
                )
                .with_span(tool.span)
                .with_seq(seq)
                .with_help("add \"output_vars\": [\"name\"] to keep the result"),
            );
        }
        self.check_list(args.len(), "this call's tool_params", span);
        self.check_list(outs.len(), "this call's output_vars", span);
        let tool = self.tool_index(&tool.text);
        self.program.calls.push(CallDef {
            tool,
            args,
            outputs: outs,
        });
        Instr::Call {
            call: (self.program.calls.len() - 1) as u32,
        }
    }

    /// Appends what `instr` (just lowered) reads and writes to `io`, each read with the
    /// span its reference was lowered at.
    fn record_io(&mut self, instr: &Instr, step_span: Span) {
        let io = &mut self.io;
        let first = io.reads.len();
        instr.reads(&self.program, &mut |slot| io.reads.push((slot, step_span)));
        instr.writes(&self.program, &mut |slot| io.writes.push(slot));
        let reads = &mut io.reads[first..];
        // Both walk the operands in evaluation order, so they pair up one to one. Were they
        // ever to disagree, each read keeps the step's span: coarser, never wrong.
        debug_assert_eq!(reads.len(), self.read_spans.len(), "read spans out of step");
        if reads.len() == self.read_spans.len() {
            for (read, &span) in reads.iter_mut().zip(&self.read_spans) {
                read.1 = span;
            }
        }
        io.ends.push((io.reads.len(), io.writes.len()));
    }

    /// Warns when a value of the assign just recorded (its values' reads end at
    /// `value_ends`) references another variable assigned by the same instruction. A value
    /// reading its own variable (`"n": "${n} + 1"`) is the usual update idiom and is not
    /// reported.
    fn check_sibling_refs(&mut self, value_ends: &[usize], seq: Option<i64>) {
        let step = self.io.ends.len() - 1;
        // Sorted, for the lookups (an assign may set 100k names; the usual few stay on the
        // stack).
        let mut siblings: SmallVec<[Slot; 8]> = self.io.writes(step).into();
        siblings.sort_unstable();
        let reads = self.io.reads(step);
        if value_ends.last() != Some(&reads.len()) || value_ends.len() != siblings.len() {
            // The reads and the spans did not pair up (see `record_io`): no places to
            // report at, so no report.
            return;
        }
        let mut start = 0;
        for (k, &end) in value_ends.iter().enumerate() {
            let own = self.io.writes(step)[k];
            let mut seen: SmallVec<[Slot; 4]> = SmallVec::new();
            for i in start..end {
                let (slot, span) = self.io.reads(step)[i];
                if slot == own || siblings.binary_search(&slot).is_err() || seen.contains(&slot) {
                    continue;
                }
                seen.push(slot);
                let name = &self.program.slots[slot as usize];
                self.diags.push(
                    Diagnostic::warning(
                        codes::ASSIGN_SELF_REF,
                        format!("`{name}` is assigned by this same instruction, so this reference sees its value from before it"),
                    )
                    .with_span(span)
                    .with_seq(seq)
                    .with_help("all values of one assign are computed before any is stored: split it into two assign instructions if one value needs the other"),
                );
            }
            start = end;
        }
    }

    /// E0202 for a call of a tool the manifest does not have.
    fn unknown_tool(&mut self, tool: &Name, seq: Option<i64>) {
        let names: Vec<&str> = self
            .manifest
            .tools
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        let help = match crate::suggest(&tool.text, &names) {
            Some(s) => format!("did you mean `{s}`? available tools: {}", names.join(", ")),
            None => format!(
                "available tools: {} (add others with --tools FILE.toml)",
                names.join(", ")
            ),
        };
        self.diags.push(
            Diagnostic::error(codes::UNKNOWN_TOOL, format!("unknown tool `{}`", tool.text))
                .with_span(tool.span)
                .with_seq(seq)
                .with_help(help),
        );
    }

    fn call_args(
        &mut self,
        tool: &'p Name,
        params: &'p [(Name, Node)],
        seq: Option<i64>,
    ) -> Vec<(ConstIdx, Operand)> {
        let params = last_of_each_name(params);
        let manifest = self.manifest;
        let spec = manifest.get(&tool.text);
        if spec.is_none() {
            self.unknown_tool(tool, seq);
        }
        let mut args = Vec::with_capacity(params.len());
        for &(name, value) in &params {
            let declared = spec.map(|s| (s.params.is_empty(), s.param(&name.text)));
            let ps = match declared {
                Some((false, None)) => {
                    if let Some(spec) = spec {
                        self.unknown_param(spec, name, seq);
                    }
                    continue;
                }
                Some((_, ps)) => ps,
                None => None,
            };
            if ps.is_some_and(|p| p.default.is_some()) && matches!(value.kind, NodeKind::Null) {
                // Given as null: absent, so the default applies (added below).
                continue;
            }
            let op = self.operand(value, Ctx::Param, seq);
            if let (Some(ps), Operand::Const(k)) = (&ps, op) {
                self.check_const_arg((tool, name, value), ps, k, seq);
            }
            let k = self.konst_str(&name.text);
            args.push((k, op));
        }
        for (name, value) in defaulted(self.manifest, &tool.text, &params) {
            let k = self.konst_str(name);
            let v = self.konst(value.clone());
            args.push((k, Operand::Const(v)));
        }
        if let Some(spec) = spec {
            for p in spec.params.iter().filter(|p| p.required) {
                if !params.iter().any(|(n, _)| n.text == p.name) {
                    self.diags.push(
                        Diagnostic::error(
                            codes::MISSING_PARAM,
                            format!("`{}` requires parameter `{}`", spec.name, p.name),
                        )
                        .with_span(tool.span)
                        .with_seq(seq)
                        .with_help(format!(
                            "add \"{}\": <{}> to tool_params",
                            p.name,
                            p.ty.as_str()
                        )),
                    );
                }
            }
        }
        args
    }

    /// `name`, which `spec` does not declare: warned of, with the names it takes.
    fn unknown_param(&mut self, spec: &plan_manifest::ToolSpec, name: &Name, seq: Option<i64>) {
        let known: Vec<&str> = spec.params.iter().map(|p| p.name.as_str()).collect();
        let help = match crate::suggest(&name.text, &known) {
            Some(s) => format!(
                "did you mean `{s}`? `{}` takes: {}",
                spec.name,
                known.join(", ")
            ),
            None => format!("`{}` takes: {}", spec.name, known.join(", ")),
        };
        self.diags.push(
            Diagnostic::warning(
                codes::UNKNOWN_PARAM,
                format!(
                    "`{}` has no parameter `{}`; it is dropped",
                    spec.name, name.text
                ),
            )
            .with_span(name.span)
            .with_seq(seq)
            .with_help(help),
        );
    }

    /// Checks constant `k`, given as `value` for param `ps` (`name`) of `tool`, against
    /// its declared type and choices. NB: null stands for "absent" where a param is
    /// optional.
    fn check_const_arg(
        &mut self,
        (tool, name, value): (&Name, &Name, &Node),
        ps: &plan_manifest::ParamSpec,
        k: ConstIdx,
        seq: Option<i64>,
    ) {
        let v = &self.program.consts[k as usize];
        let absent = v.is_null() && !ps.required;
        if absent {
            return;
        }
        if !ps.ty.accepts(v) {
            self.diags.push(
                Diagnostic::error(
                    codes::PARAM_TYPE,
                    format!(
                        "parameter `{}` of `{}` must be {}, found {}",
                        name.text,
                        tool.text,
                        article(ps.ty.as_str()),
                        value.type_name()
                    ),
                )
                .with_span(value.span)
                .with_seq(seq)
                .with_help(format!(
                    "write {} here (e.g. {}), or a variable reference \"${{name}}\"",
                    article(ps.ty.as_str()),
                    example_of(ps.ty)
                )),
            );
        } else if let Some(choices) = ps.choices.as_ref().filter(|c| !c.contains(v)) {
            let list = choices
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            self.diags.push(
                Diagnostic::error(
                    codes::PARAM_TYPE,
                    format!(
                        "parameter `{}` of `{}` must be one of {list}, found {v}",
                        name.text, tool.text
                    ),
                )
                .with_span(value.span)
                .with_seq(seq)
                .with_help(format!("write one of {list} here")),
            );
        }
    }
}

/// The declared defaults a call of `tool` with `params` receives: every param with a
/// `default` that the call omits or gives as `null`, in declaration order. They are
/// compiled into the call's arguments, so every backend receives them.
pub(crate) fn defaulted<'m>(
    manifest: &'m Manifest,
    tool: &str,
    params: &[&(Name, Node)],
) -> SmallVec<[(&'m str, &'m Value); 2]> {
    let Some(spec) = manifest.get(tool) else {
        return SmallVec::new();
    };
    spec.params
        .iter()
        .filter_map(|p| Some((p.name.as_str(), p.default.as_ref()?)))
        .filter(|(name, _)| {
            !params
                .iter()
                .any(|(n, v)| n.text == *name && !matches!(v.kind, NodeKind::Null))
        })
        .collect()
}

/// A key written twice in one object keeps its last value, as JSON parsers do (the reader
/// has already warned about the duplicate).
pub(crate) fn last_of_each_name(members: &[(Name, Node)]) -> SmallVec<[&(Name, Node); 8]> {
    // NB: a plan may put 100k keys in one object: hash beyond a handful, never compare
    // every pair.
    if members.len() <= 16 {
        return members
            .iter()
            .enumerate()
            .filter(|(i, (n, _))| !members[i + 1..].iter().any(|(m, _)| m.text == n.text))
            .map(|(_, m)| m)
            .collect();
    }
    let mut last: HashMap<&str, usize> = HashMap::with_capacity(members.len());
    for (i, (n, _)) in members.iter().enumerate() {
        last.insert(&n.text, i);
    }
    members
        .iter()
        .enumerate()
        .filter(|(i, (n, _))| last.get(n.text.as_str()) == Some(i))
        .map(|(_, m)| m)
        .collect()
}

fn article(ty: &str) -> String {
    match ty {
        "int" => "an integer".into(),
        "any" => "any value".into(),
        "object" | "array" => format!("an {ty}"),
        _ => format!("a {ty}"),
    }
}

fn example_of(ty: plan_manifest::ParamType) -> &'static str {
    use plan_manifest::ParamType as T;
    match ty {
        T::Int => "5",
        T::Number => "0.5",
        T::String => "\"text\"",
        T::Bool => "true",
        T::Array => "[\"a\", \"b\"]",
        T::Object => "{\"key\": \"value\"}",
        T::Any => "null",
    }
}

/// The deepest the stack of postfix arithmetic `code` gets, as the validator counts it.
fn stack_depth(code: &[ArithOp]) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    for op in code {
        match op {
            ArithOp::Const(_) | ArithOp::Ref(_) => depth += 1,
            ArithOp::Un(_) => {}
            ArithOp::Bin(_) => depth = depth.saturating_sub(1),
        }
        max = max.max(depth);
    }
    max
}

fn expr_has_refs(e: &Expr) -> bool {
    match e {
        Expr::Num(_) => false,
        Expr::Ref(_) => true,
        Expr::Unary(_, a) => expr_has_refs(a),
        Expr::Binary(_, a, b) => expr_has_refs(a) || expr_has_refs(b),
    }
}

/// Evaluates a reference-free expression with the VM's own numeric rules.
fn fold(e: &Expr) -> Option<Num> {
    match e {
        Expr::Num(n) => plan_value::to_num(&Value::Number(n.clone())),
        Expr::Ref(_) => None,
        Expr::Unary(op, a) => plan_value::unary(*op, fold(a)?),
        Expr::Binary(op, a, b) => plan_value::binary(*op, fold(a)?, fold(b)?),
    }
}
