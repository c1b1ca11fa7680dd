//! The disassembler: a readable listing of a `Program`.
//!
//! Total on any input: it takes an unvalidated `Program` (so `planc disasm` can show a
//! file that fails validation), renders out-of-range indices as `?` markers, and bounds
//! recursion into nested arrays/objects. Instruction text comes from the opcode table
//! (`opcodes.rs`); this module only knows how to show each kind of field.

use std::fmt::Write as _;

use serde_json::Value;

use crate::limits::MAX_OPERAND_DEPTH;
use crate::opcodes::show_instr;
use crate::{ArithOp, Effects, Operand, Piece, Program};
use plan_value::Op2;

/// Longest constant preview, in characters, before it is cut with `…`.
const PREVIEW: usize = 48;
/// Longest reasoning preview, in characters.
const REASONING_PREVIEW: usize = 60;

pub(crate) struct Lister<'p> {
    p: &'p Program,
}

/// Cuts `s` to `max` characters, marking the cut.
fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// JSON text of a value, cut for display.
fn preview(v: &Value) -> String {
    truncate(&serde_json::to_string(v).unwrap_or_default(), PREVIEW)
}

/// A string shown quoted with JSON escapes (newlines visible), cut for display.
fn quoted(s: &str) -> String {
    serde_json::to_string(&truncate(s, PREVIEW)).unwrap_or_default()
}

impl<'p> Lister<'p> {
    fn string_const(&self, i: u32) -> Option<&'p str> {
        self.p.consts.get(i as usize)?.as_str()
    }

    pub(crate) fn slot(&self, v: u32, out: &mut String) {
        match self.p.slots.get(v as usize) {
            Some(name) if is_plain_name(name) => out.push_str(name),
            Some(name) => out.push_str(&quoted(name)),
            None => {
                let _ = write!(out, "?slot{v}");
            }
        }
    }

    pub(crate) fn pc(&self, v: u32, out: &mut String) {
        let _ = write!(out, "@{v}");
        if (v as usize) >= self.p.code.len() {
            out.push('?');
        } else if let Some(seq) = self.p.seq_no_at(v) {
            let _ = write!(out, " (seq {seq})");
        }
    }

    /// `${name.key.sub}`: the reference as the plan's current dialect writes it.
    fn reference(&self, r: u32, out: &mut String) {
        let Some(def) = self.p.refs.get(r as usize) else {
            let _ = write!(out, "?ref{r}");
            return;
        };
        out.push_str("${");
        self.slot(def.slot, out);
        for k in &def.path {
            out.push('.');
            match self.string_const(*k) {
                Some(s) => out.push_str(s),
                None => {
                    let _ = write!(out, "?c{k}");
                }
            }
        }
        out.push('}');
    }

    /// Template source text (literals raw, references as `${...}`), unquoted, uncut.
    fn template_text(&self, t: u32) -> Option<String> {
        let pieces = self.p.templates.get(t as usize)?;
        let mut s = String::new();
        for piece in pieces {
            match *piece {
                Piece::Lit(c) => match self.string_const(c) {
                    Some(text) => s.push_str(text),
                    None => {
                        let _ = write!(s, "?c{c}");
                    }
                },
                Piece::Ref(r) => self.reference(r, &mut s),
            }
        }
        Some(s)
    }

    /// Infix rendering of a postfix arithmetic program with Python's precedence, adding
    /// only the parentheses Python would need (so `-2**2` and `(-2)**2` read correctly).
    fn arith_text(&self, a: u32) -> Option<String> {
        // Precedence levels: 1 `+ -`, 2 `* / %`, 3 unary, 4 `**`, 5 atom.
        const UNARY: u8 = 3;
        const POW: u8 = 4;
        const ATOM: u8 = 5;
        fn wrap((s, _): (String, u8), need_parens: bool) -> String {
            if need_parens { format!("({s})") } else { s }
        }
        let def = self.p.ariths.get(a as usize)?;
        let mut stack: Vec<(String, u8)> = Vec::new();
        for op in &def.code {
            match *op {
                ArithOp::Const(c) => {
                    let text = self
                        .p
                        .consts
                        .get(c as usize)
                        .map_or_else(|| format!("?c{c}"), preview);
                    // A negative literal parses like a unary minus.
                    let prec = if text.starts_with('-') { UNARY } else { ATOM };
                    stack.push((text, prec));
                }
                ArithOp::Ref(r) => {
                    let mut s = String::new();
                    self.reference(r, &mut s);
                    stack.push((s, ATOM));
                }
                ArithOp::Un(op) => {
                    let x = stack.pop()?;
                    // `--x` is valid Python but reads badly: parenthesise nested signs.
                    let parens = x.1 <= UNARY;
                    stack.push((format!("{}{}", op.symbol(), wrap(x, parens)), UNARY));
                }
                ArithOp::Bin(op) => {
                    let rhs = stack.pop()?;
                    let lhs = stack.pop()?;
                    let sym = op.symbol();
                    let prec = match op {
                        Op2::Add | Op2::Sub => 1,
                        Op2::Mul | Op2::Div | Op2::Mod => 2,
                        Op2::Pow => POW,
                    };
                    let (lp, rp) = if prec == POW {
                        // Right-associative; binds tighter than a unary on its left only.
                        (lhs.1 <= POW, rhs.1 < UNARY)
                    } else {
                        (lhs.1 < prec, rhs.1 <= prec)
                    };
                    stack.push((format!("{} {sym} {}", wrap(lhs, lp), wrap(rhs, rp)), prec));
                }
            }
        }
        if stack.len() == 1 {
            stack.pop().map(|(s, _)| s)
        } else {
            None
        }
    }

    pub(crate) fn operand(&self, op: Operand, out: &mut String) {
        self.operand_at(op, out, 0);
    }

    fn operand_at(&self, op: Operand, out: &mut String, depth: usize) {
        match op {
            Operand::Const(c) => match self.p.consts.get(c as usize) {
                Some(v) => out.push_str(&preview(v)),
                None => {
                    let _ = write!(out, "?c{c}");
                }
            },
            Operand::Ref(r) => self.reference(r, out),
            Operand::Template(t) => match self.template_text(t) {
                Some(text) => {
                    let _ = write!(out, "tmpl#{t} {}", quoted(&text));
                }
                None => {
                    let _ = write!(out, "tmpl#{t}?");
                }
            },
            Operand::Arith(a) => match self.arith_text(a) {
                Some(text) => {
                    let _ = write!(out, "arith#{a} {}", truncate(&text, PREVIEW));
                }
                None => {
                    let _ = write!(out, "arith#{a}?");
                }
            },
            Operand::Array(i) => {
                let Some(items) = self.p.arrays.get(i as usize) else {
                    let _ = write!(out, "?array{i}");
                    return;
                };
                if depth >= MAX_OPERAND_DEPTH {
                    out.push_str("[…]");
                    return;
                }
                out.push('[');
                for (k, item) in items.iter().enumerate() {
                    if k > 0 {
                        out.push_str(", ");
                    }
                    self.operand_at(*item, out, depth + 1);
                }
                out.push(']');
            }
            Operand::Object(i) => {
                let Some(entries) = self.p.objects.get(i as usize) else {
                    let _ = write!(out, "?object{i}");
                    return;
                };
                if depth >= MAX_OPERAND_DEPTH {
                    out.push_str("{…}");
                    return;
                }
                out.push('{');
                for (k, (key, item)) in entries.iter().enumerate() {
                    if k > 0 {
                        out.push_str(", ");
                    }
                    match self.string_const(*key) {
                        Some(s) => out.push_str(&quoted(s)),
                        None => {
                            let _ = write!(out, "?c{key}");
                        }
                    }
                    out.push_str(": ");
                    self.operand_at(*item, out, depth + 1);
                }
                out.push('}');
            }
        }
    }

    pub(crate) fn assign(&self, a: u32, out: &mut String) {
        let _ = write!(out, "#{a} ");
        let Some(def) = self.p.assigns.get(a as usize) else {
            out.push('?');
            return;
        };
        out.push('{');
        for (k, (slot, op)) in def.targets.iter().enumerate() {
            out.push_str(if k > 0 { ", " } else { " " });
            self.slot(*slot, out);
            out.push_str(" <- ");
            self.operand(*op, out);
        }
        out.push_str(" }");
    }

    pub(crate) fn call(&self, c: u32, out: &mut String) {
        let _ = write!(out, "#{c} ");
        let Some(def) = self.p.calls.get(c as usize) else {
            out.push('?');
            return;
        };
        match self.p.tools.get(def.tool as usize) {
            Some(t) => out.push_str(&t.name),
            None => {
                let _ = write!(out, "?tool{}", def.tool);
            }
        }
        out.push('(');
        for (k, (name, op)) in def.args.iter().enumerate() {
            if k > 0 {
                out.push_str(", ");
            }
            match self.string_const(*name) {
                Some(s) => out.push_str(s),
                None => {
                    let _ = write!(out, "?c{name}");
                }
            }
            out.push('=');
            self.operand(*op, out);
        }
        out.push(')');
        if !def.outputs.is_empty() {
            out.push_str(" -> ");
            for (k, s) in def.outputs.iter().enumerate() {
                if k > 0 {
                    out.push_str(", ");
                }
                self.slot(*s, out);
            }
        }
    }

    pub(crate) fn cond(&self, c: u32, out: &mut String) {
        let _ = write!(out, "#{c} ");
        let Some(def) = self.p.conds.get(c as usize) else {
            out.push('?');
            return;
        };
        out.push_str("if llm(prompt=");
        self.operand(def.prompt, out);
        if let Some(ctx) = def.context {
            out.push_str(", context=");
            self.operand(ctx, out);
        }
        out.push(')');
    }
}

/// Whether a variable name can be shown bare (otherwise it is quoted).
fn is_plain_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
}

fn effects_name(e: Effects) -> &'static str {
    match e {
        Effects::Pure => "pure",
        Effects::Read => "read",
        Effects::Write => "write",
        Effects::Human => "human",
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The listing's header: counts, and where the debug section came from.
fn header(p: &Program, out: &mut String) {
    let _ = writeln!(
        out,
        "; plan bytecode v{}: {}, {}, {}, {}",
        crate::FORMAT_VERSION,
        plural(p.code.len(), "instruction", "instructions"),
        plural(p.consts.len(), "constant", "constants"),
        plural(p.slots.len(), "slot", "slots"),
        plural(p.tools.len(), "tool", "tools"),
    );
    let _ = writeln!(
        out,
        "; tables: {}, {}, {}, {}, {}, {}, {}, {}",
        plural(p.refs.len(), "ref", "refs"),
        plural(p.templates.len(), "template", "templates"),
        plural(p.ariths.len(), "arith", "ariths"),
        plural(p.arrays.len(), "array", "arrays"),
        plural(p.objects.len(), "object", "objects"),
        plural(p.assigns.len(), "assign", "assigns"),
        plural(p.calls.len(), "call", "calls"),
        plural(p.conds.len(), "cond", "conds"),
    );
    match &p.debug {
        Some(d) => {
            // The source path is shown whole: a cut path is no help in finding the file.
            let src = d.source.as_deref().map_or_else(
                || "unknown source".to_owned(),
                |s| serde_json::to_string(s).unwrap_or_default(),
            );
            let _ = writeln!(
                out,
                "; debug info: {src}, {}",
                plural(d.reasoning.len(), "reasoning text", "reasoning texts")
            );
        }
        None => out.push_str("; debug info: stripped\n"),
    }
}

/// Renders `program` as a readable listing: a header with counts, the constant pool, the
/// slots, the tools, then one line per instruction (pc, seq_no and source position when
/// debug info is present, the instruction with slots named and constants shown, and a
/// summary of the reasoning text for `nop`s).
pub fn disasm(program: &Program) -> String {
    let p = program;
    let l = Lister { p };
    let mut out = String::new();

    header(p, &mut out);

    let idx_width = |n: usize| n.saturating_sub(1).to_string().len();

    out.push_str("\nconsts:\n");
    let w = idx_width(p.consts.len());
    for (i, c) in p.consts.iter().enumerate() {
        let _ = writeln!(out, "  c{i:<w$}  {}", preview(c));
    }

    out.push_str("\nslots:\n");
    let w = idx_width(p.slots.len());
    for i in 0..p.slots.len() {
        let mut name = String::new();
        l.slot(i as u32, &mut name);
        let _ = writeln!(out, "  s{i:<w$}  {name}");
    }

    out.push_str("\ntools:\n");
    let w = idx_width(p.tools.len());
    for (i, t) in p.tools.iter().enumerate() {
        let _ = writeln!(out, "  t{i:<w$}  {} ({})", t.name, effects_name(t.effects));
    }

    out.push_str("\ncode:\n");
    let pc_w = idx_width(p.code.len()).max(2);
    let entries = p.debug.as_ref().map(|d| &d.entries);
    let seq_w = entries.map_or(0, |e| {
        e.iter()
            .map(|x| x.seq_no.to_string().len())
            .max()
            .unwrap_or(0)
            .max(3)
    });
    let pos_w = entries.map_or(0, |e| {
        e.iter()
            .map(|x| format!("{}:{}", x.line, x.column).len())
            .max()
            .unwrap_or(0)
            .max(8)
    });
    if entries.is_some() {
        let _ = writeln!(
            out,
            "  {:>pc_w$}  {:>seq_w$}  {:<pos_w$}  instruction",
            "pc", "seq", "line:col"
        );
    } else {
        let _ = writeln!(out, "  {:>pc_w$}  instruction", "pc");
    }
    // Reasoning texts by pc, built once so the listing stays linear in program size.
    let mut notes: std::collections::HashMap<usize, Vec<(&str, &str)>> =
        std::collections::HashMap::new();
    if let Some(d) = &p.debug {
        for (at, thoughts, deps) in &d.reasoning {
            notes
                .entry(*at as usize)
                .or_default()
                .push((thoughts, deps));
        }
    }
    for (pc, instr) in p.code.iter().enumerate() {
        let _ = write!(out, "  {pc:>pc_w$}  ");
        if let Some(entries) = entries {
            match entries.get(pc) {
                Some(e) => {
                    let pos = format!("{}:{}", e.line, e.column);
                    let _ = write!(out, "{:>seq_w$}  {pos:<pos_w$}  ", e.seq_no);
                }
                None => {
                    let _ = write!(out, "{:>seq_w$}  {:<pos_w$}  ", "?", "?");
                }
            }
        }
        show_instr(&l, instr, &mut out);
        for (thoughts, deps) in notes.get(&pc).into_iter().flatten() {
            let _ = write!(out, "  ; reasoning: {}", quoted_short(thoughts));
            if !deps.is_empty() {
                let _ = write!(out, " deps: {}", quoted_short(deps));
            }
        }
        out.push('\n');
    }
    out
}

/// Reasoning texts are long prose: first line only, cut short.
fn quoted_short(s: &str) -> String {
    let first = s.lines().next().unwrap_or("");
    let mut cut = truncate(first, REASONING_PREVIEW);
    if first.len() < s.trim_end().len() && !cut.ends_with('…') {
        cut.push('…');
    }
    serde_json::to_string(&cut).unwrap_or_default()
}
