//! The load-time validator: turns an untrusted `Program` into a [`ValidatedProgram`].
//!
//! After validation the VM may index every table without checks. What is guaranteed:
//! - table sizes are within `limits.rs` (so the program also encodes to a decodable file);
//! - `code` is non-empty, every jump/branch target is `< code.len()`;
//! - every slot is `< slots.len()`, slot names are unique;
//! - every constant index is in range, and is a string where a string is required
//!   (ref paths and raw text, template literals, argument names, object keys);
//! - every side-table index (refs, templates, ariths, arrays, objects, assigns, calls,
//!   conds, tools) is in range, including indices inside other side-table entries;
//! - each arithmetic program is well-formed postfix: the stack never underflows, never
//!   exceeds `MAX_ARITH_STACK`, ends with exactly one value; `ArithOp::Const` is numeric;
//! - `Operand::Array`/`Operand::Object` nesting is acyclic and at most `MAX_OPERAND_DEPTH`
//!   deep (the VM recurses on it);
//! - call outputs and argument names are not duplicated; tool names are unique;
//! - with debug info: one entry per instruction, reasoning pcs in range.
//!
//! Every table entry is checked, used or not: it is simpler to reason about and costs
//! nothing at plan sizes.

use std::collections::HashSet;
use std::fmt;

use serde_json::Value;

use crate::limits::*;
use crate::opcodes::check_instr;
use crate::wire::value_depth_exceeds;
use crate::{ArithOp, BytecodeError, ConstIdx, Operand, Piece, Program, ValidatedProgram};

type Result<T> = std::result::Result<T, BytecodeError>;

/// Where a checked index sits, for error messages (`code[3] set.dst`, `calls[0] argument 1`).
pub(crate) enum Site {
    Code {
        pc: usize,
        field: &'static str,
    },
    Entry {
        table: &'static str,
        index: usize,
        field: &'static str,
    },
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Site::Code { pc, field } => write!(f, "code[{pc}] {field}"),
            Site::Entry {
                table,
                index,
                field: "",
            } => write!(f, "{table}[{index}]"),
            Site::Entry {
                table,
                index,
                field,
            } => write!(f, "{table}[{index}] {field}"),
        }
    }
}

fn entry(table: &'static str, index: usize, field: &'static str) -> Site {
    Site::Entry {
        table,
        index,
        field,
    }
}

/// Read-only view of the program being validated; the opcode table calls back into it.
pub(crate) struct Checker<'p> {
    p: &'p Program,
}

#[cold]
fn fail(site: &Site, msg: impl fmt::Display) -> BytecodeError {
    BytecodeError::invalid(format!("{site}: {msg}"))
}

fn in_range(site: &Site, what: &str, idx: u32, len: usize) -> Result<()> {
    if (idx as usize) < len {
        Ok(())
    } else {
        Err(fail(
            site,
            format_args!("{what} {idx} out of range ({len} {what}s)"),
        ))
    }
}

impl<'p> Checker<'p> {
    pub(crate) fn slot(&self, v: u32, site: &Site) -> Result<()> {
        in_range(site, "slot", v, self.p.slots.len())
    }

    pub(crate) fn pc(&self, v: u32, site: &Site) -> Result<()> {
        if (v as usize) < self.p.code.len() {
            Ok(())
        } else {
            Err(fail(
                site,
                format_args!(
                    "jump target {v} out of range ({} instructions)",
                    self.p.code.len()
                ),
            ))
        }
    }

    pub(crate) fn assign_index(&self, v: u32, site: &Site) -> Result<()> {
        in_range(site, "assign", v, self.p.assigns.len())
    }

    pub(crate) fn call_index(&self, v: u32, site: &Site) -> Result<()> {
        in_range(site, "call", v, self.p.calls.len())
    }

    pub(crate) fn cond_index(&self, v: u32, site: &Site) -> Result<()> {
        in_range(site, "cond", v, self.p.conds.len())
    }

    fn constant(&self, v: ConstIdx, site: &Site) -> Result<&'p Value> {
        match self.p.consts.get(v as usize) {
            Some(c) => Ok(c),
            None => Err(fail(
                site,
                format_args!(
                    "constant {v} out of range ({} constants)",
                    self.p.consts.len()
                ),
            )),
        }
    }

    fn string_const(&self, v: ConstIdx, site: &Site) -> Result<&'p str> {
        match self.constant(v, site)? {
            Value::String(s) => Ok(s),
            other => Err(fail(
                site,
                format_args!("constant {v} must be a string, found {}", kind(other)),
            )),
        }
    }

    pub(crate) fn operand(&self, op: Operand, site: &Site) -> Result<()> {
        let p = self.p;
        match op {
            Operand::Const(i) => self.constant(i, site).map(drop),
            Operand::Ref(i) => in_range(site, "ref", i, p.refs.len()),
            Operand::Template(i) => in_range(site, "template", i, p.templates.len()),
            Operand::Arith(i) => in_range(site, "arith", i, p.ariths.len()),
            Operand::Array(i) => in_range(site, "array", i, p.arrays.len()),
            Operand::Object(i) => in_range(site, "object", i, p.objects.len()),
        }
    }

    fn limits(&self) -> Result<()> {
        let p = self.p;
        let tables = table_sizes(p);
        for (what, len, max) in tables {
            if len > max {
                return Err(BytecodeError::invalid(format!(
                    "too many {what}: {len} (limit {max})"
                )));
            }
        }
        Ok(())
    }

    fn list_len(site: &Site, len: usize) -> Result<()> {
        if len > MAX_LIST {
            Err(fail(
                site,
                format_args!("list of {len} items exceeds the limit of {MAX_LIST}"),
            ))
        } else {
            Ok(())
        }
    }

    fn check_string(site: &Site, s: &str) -> Result<()> {
        if s.len() > MAX_STRING {
            Err(fail(
                site,
                format_args!(
                    "string of {} bytes exceeds the limit of {MAX_STRING}",
                    s.len()
                ),
            ))
        } else {
            Ok(())
        }
    }

    fn consts(&self) -> Result<()> {
        for (i, c) in self.p.consts.iter().enumerate() {
            if value_depth_exceeds(c, MAX_CONST_DEPTH) {
                return Err(fail(
                    &entry("consts", i, ""),
                    format_args!("nested deeper than the limit of {MAX_CONST_DEPTH}"),
                ));
            }
            if let Value::String(s) = c {
                Self::check_string(&entry("consts", i, ""), s)?;
            }
        }
        Ok(())
    }

    fn slots(&self) -> Result<()> {
        let mut seen = HashSet::with_capacity(self.p.slots.len());
        for (i, name) in self.p.slots.iter().enumerate() {
            Self::check_string(&entry("slots", i, ""), name)?;
            if !seen.insert(name.as_str()) {
                return Err(fail(
                    &entry("slots", i, ""),
                    format_args!("duplicate slot name {name:?}"),
                ));
            }
        }
        Ok(())
    }

    fn tools(&self) -> Result<()> {
        let mut seen = HashSet::with_capacity(self.p.tools.len());
        for (i, t) in self.p.tools.iter().enumerate() {
            let site = entry("tools", i, "");
            Self::check_string(&site, &t.name)?;
            if t.name.is_empty() {
                return Err(fail(&site, "empty tool name"));
            }
            if !seen.insert(t.name.as_str()) {
                return Err(fail(
                    &site,
                    format_args!("duplicate tool name {:?}", t.name),
                ));
            }
        }
        Ok(())
    }

    fn refs(&self) -> Result<()> {
        for (i, r) in self.p.refs.iter().enumerate() {
            self.slot(r.slot, &entry("refs", i, "slot"))?;
            Self::list_len(&entry("refs", i, "path"), r.path.len())?;
            for k in &r.path {
                self.string_const(*k, &entry("refs", i, "path key"))?;
            }
            self.string_const(r.raw, &entry("refs", i, "raw"))?;
        }
        Ok(())
    }

    fn templates(&self) -> Result<()> {
        for (i, pieces) in self.p.templates.iter().enumerate() {
            Self::list_len(&entry("templates", i, ""), pieces.len())?;
            for piece in pieces {
                match *piece {
                    Piece::Lit(c) => self
                        .string_const(c, &entry("templates", i, "literal"))
                        .map(drop)?,
                    Piece::Ref(r) => {
                        in_range(&entry("templates", i, "piece"), "ref", r, self.p.refs.len())?
                    }
                }
            }
        }
        Ok(())
    }

    fn ariths(&self) -> Result<()> {
        for (i, a) in self.p.ariths.iter().enumerate() {
            let site = entry("ariths", i, "");
            Self::list_len(&site, a.code.len())?;
            in_range(
                &entry("ariths", i, "fallback"),
                "template",
                a.fallback,
                self.p.templates.len(),
            )?;
            let mut depth: usize = 0;
            for (k, op) in a.code.iter().enumerate() {
                let (pops, pushes) = match *op {
                    ArithOp::Const(c) => {
                        let v = self.constant(c, &site)?;
                        if !v.is_number() {
                            return Err(fail(
                                &site,
                                format_args!("op {k}: constant {c} is not a number ({})", kind(v)),
                            ));
                        }
                        (0, 1)
                    }
                    ArithOp::Ref(r) => {
                        in_range(&site, "ref", r, self.p.refs.len())?;
                        (0, 1)
                    }
                    ArithOp::Un(_) => (1, 1),
                    ArithOp::Bin(_) => (2, 1),
                };
                depth = match depth.checked_sub(pops) {
                    Some(d) => d + pushes,
                    None => {
                        let sym = match *op {
                            ArithOp::Un(o) => o.symbol(),
                            ArithOp::Bin(o) => o.symbol(),
                            ArithOp::Const(_) | ArithOp::Ref(_) => "push",
                        };
                        return Err(fail(
                            &site,
                            format_args!("op {k} (`{sym}`) underflows the stack"),
                        ));
                    }
                };
                if depth > MAX_ARITH_STACK {
                    return Err(fail(
                        &site,
                        format_args!("stack deeper than the limit of {MAX_ARITH_STACK}"),
                    ));
                }
            }
            if depth != 1 {
                return Err(fail(
                    &site,
                    format_args!("ends with {depth} values on the stack, expected 1"),
                ));
            }
        }
        Ok(())
    }

    fn arrays_and_objects(&self) -> Result<()> {
        for (i, items) in self.p.arrays.iter().enumerate() {
            Self::list_len(&entry("arrays", i, ""), items.len())?;
            for op in items {
                self.operand(*op, &entry("arrays", i, "element"))?;
            }
        }
        for (i, entries) in self.p.objects.iter().enumerate() {
            Self::list_len(&entry("objects", i, ""), entries.len())?;
            for (k, op) in entries {
                self.string_const(*k, &entry("objects", i, "key"))?;
                self.operand(*op, &entry("objects", i, "value"))?;
            }
        }
        Nesting::new(self.p).check_all()
    }

    fn assigns(&self) -> Result<()> {
        for (i, a) in self.p.assigns.iter().enumerate() {
            Self::list_len(&entry("assigns", i, ""), a.targets.len())?;
            for (slot, op) in &a.targets {
                self.slot(*slot, &entry("assigns", i, "target"))?;
                self.operand(*op, &entry("assigns", i, "value"))?;
            }
        }
        Ok(())
    }

    fn calls(&self) -> Result<()> {
        for (i, c) in self.p.calls.iter().enumerate() {
            in_range(
                &entry("calls", i, "tool"),
                "tool",
                c.tool,
                self.p.tools.len(),
            )?;
            Self::list_len(&entry("calls", i, "args"), c.args.len())?;
            let mut names = HashSet::with_capacity(c.args.len());
            for (name, op) in &c.args {
                let site = entry("calls", i, "argument");
                let s = self.string_const(*name, &site)?;
                if !names.insert(s) {
                    return Err(fail(&site, format_args!("duplicate argument name {s:?}")));
                }
                self.operand(*op, &site)?;
            }
            Self::list_len(&entry("calls", i, "outputs"), c.outputs.len())?;
            let mut outs = HashSet::with_capacity(c.outputs.len());
            for s in &c.outputs {
                let site = entry("calls", i, "output");
                self.slot(*s, &site)?;
                if !outs.insert(*s) {
                    let name = self.p.slots.get(*s as usize).map_or("?", String::as_str);
                    return Err(fail(
                        &site,
                        format_args!("duplicate output slot {s} ({name:?})"),
                    ));
                }
            }
        }
        Ok(())
    }

    fn conds(&self) -> Result<()> {
        for (i, c) in self.p.conds.iter().enumerate() {
            self.operand(c.prompt, &entry("conds", i, "prompt"))?;
            if let Some(ctx) = c.context {
                self.operand(ctx, &entry("conds", i, "context"))?;
            }
        }
        Ok(())
    }

    fn code(&self) -> Result<()> {
        if self.p.code.is_empty() {
            return Err(BytecodeError::invalid("program has no instructions"));
        }
        for (pc, instr) in self.p.code.iter().enumerate() {
            check_instr(self, pc, instr)?;
        }
        Ok(())
    }

    fn debug(&self) -> Result<()> {
        let Some(d) = &self.p.debug else {
            return Ok(());
        };
        if d.entries.len() != self.p.code.len() {
            return Err(BytecodeError::invalid(format!(
                "debug info has {} entries for {} instructions",
                d.entries.len(),
                self.p.code.len()
            )));
        }
        if let Some(s) = &d.source {
            Self::check_string(&entry("debug", 0, "source"), s)?;
        }
        for (i, (pc, thoughts, deps)) in d.reasoning.iter().enumerate() {
            let site = entry("reasoning", i, "pc");
            if (*pc as usize) >= self.p.code.len() {
                return Err(fail(
                    &site,
                    format_args!("pc {pc} out of range ({} instructions)", self.p.code.len()),
                ));
            }
            Self::check_string(&site, thoughts)?;
            Self::check_string(&site, deps)?;
        }
        Ok(())
    }
}

/// Cycle and depth check over the graph of arrays/objects that contain each other.
/// Depth-first with memoised depths, so linear in the number of edges; recursion stops
/// at `MAX_OPERAND_DEPTH`, so it is bounded too.
struct Nesting<'p> {
    p: &'p Program,
    /// Per node: None = unvisited, Some(None) = on the current path, Some(Some(d)) = done, depth d.
    arrays: Vec<Option<Option<usize>>>,
    objects: Vec<Option<Option<usize>>>,
}

#[derive(Clone, Copy)]
enum Node {
    Array(usize),
    Object(usize),
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Node::Array(i) => write!(f, "arrays[{i}]"),
            Node::Object(i) => write!(f, "objects[{i}]"),
        }
    }
}

impl<'p> Nesting<'p> {
    fn new(p: &'p Program) -> Self {
        Nesting {
            p,
            arrays: vec![None; p.arrays.len()],
            objects: vec![None; p.objects.len()],
        }
    }

    fn check_all(mut self) -> Result<()> {
        for i in 0..self.p.arrays.len() {
            self.depth(Node::Array(i), 0)?;
        }
        for i in 0..self.p.objects.len() {
            self.depth(Node::Object(i), 0)?;
        }
        Ok(())
    }

    fn state(&mut self, n: Node) -> Option<&mut Option<Option<usize>>> {
        match n {
            Node::Array(i) => self.arrays.get_mut(i),
            Node::Object(i) => self.objects.get_mut(i),
        }
    }

    /// Nesting depth of `n` (1 for an array of scalars). `level` = enclosing containers.
    fn depth(&mut self, n: Node, level: usize) -> Result<usize> {
        match self.state(n) {
            Some(Some(Some(d))) => {
                let d = *d;
                return if level + d > MAX_OPERAND_DEPTH {
                    Err(too_deep(n))
                } else {
                    Ok(d)
                };
            }
            Some(Some(None)) => {
                return Err(BytecodeError::invalid(format!(
                    "{n} contains itself (cyclic array/object operands)"
                )));
            }
            Some(slot @ None) => *slot = Some(None),
            // Indices were range-checked before; treat a miss as a leaf to stay total.
            None => return Ok(0),
        }
        if level >= MAX_OPERAND_DEPTH {
            return Err(too_deep(n));
        }
        let children: Vec<Operand> = match n {
            Node::Array(i) => self.p.arrays.get(i).cloned().unwrap_or_default(),
            Node::Object(i) => self
                .p
                .objects
                .get(i)
                .map(|e| e.iter().map(|(_, op)| *op).collect())
                .unwrap_or_default(),
        };
        let mut max_child = 0;
        for op in children {
            let child = match op {
                Operand::Array(j) => Node::Array(j as usize),
                Operand::Object(j) => Node::Object(j as usize),
                _ => continue,
            };
            max_child = max_child.max(self.depth(child, level + 1)?);
        }
        let d = max_child + 1;
        if let Some(slot) = self.state(n) {
            *slot = Some(Some(d));
        }
        Ok(d)
    }
}

#[cold]
fn too_deep(n: Node) -> BytecodeError {
    BytecodeError::invalid(format!(
        "{n}: array/object operands nested deeper than the limit of {MAX_OPERAND_DEPTH}"
    ))
}

/// JSON type name of a constant, for messages.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

pub(crate) fn validate(program: Program) -> Result<ValidatedProgram> {
    {
        let cx = Checker { p: &program };
        cx.limits()?;
        cx.consts()?;
        cx.slots()?;
        cx.tools()?;
        cx.refs()?;
        cx.templates()?;
        cx.ariths()?;
        cx.arrays_and_objects()?;
        cx.assigns()?;
        cx.calls()?;
        cx.conds()?;
        cx.code()?;
        cx.debug()?;
    }
    let template_lit_bytes = program
        .templates
        .iter()
        .map(|pieces| {
            pieces
                .iter()
                .map(|piece| match *piece {
                    Piece::Lit(c) => program
                        .consts
                        .get(c as usize)
                        .and_then(Value::as_str)
                        .map_or(0, str::len),
                    Piece::Ref(_) => 0,
                })
                .sum()
        })
        .collect();
    let defuse = crate::defuse::DefUse::new(&program);
    let tool_names = program
        .tools
        .iter()
        .map(|t| t.name.as_str().into())
        .collect();
    let final_slot = program.final_answer_slot();
    Ok(ValidatedProgram {
        program,
        final_slot,
        template_lit_bytes,
        defuse,
        tool_names,
        arg_names: Default::default(),
        slot_names: Default::default(),
        fingerprint: Default::default(),
        op_names: Default::default(),
        const_vals: Default::default(),
    })
}
