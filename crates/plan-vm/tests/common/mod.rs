//! A tiny assembler for hand-built programs and a synchronous mock host.
//!
//! Why hand-built programs: these tests pin the VM's semantics independently of the
//! compiler; each program is a few lines that read like the plan they stand for.

#![allow(dead_code, unreachable_pub)]

use plan_bytecode::*;
use plan_value::{Op1, Op2};
use plan_vm::*;
use serde_json::{Map, Value};

/// One term of a postfix arithmetic program.
pub enum A {
    N(Value),
    R(&'static str),
    Neg,
    Pos,
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Mod,
}

#[derive(Default)]
pub struct B {
    pub p: Program,
    seqs: Vec<i64>,
}

impl B {
    pub fn new() -> Self {
        B::default()
    }

    pub fn konst(&mut self, v: Value) -> ConstIdx {
        if let Some(i) = self.p.consts.iter().position(|c| *c == v) {
            return i as ConstIdx;
        }
        self.p.consts.push(v);
        (self.p.consts.len() - 1) as ConstIdx
    }

    pub fn slot(&mut self, name: &str) -> Slot {
        if let Some(s) = self.p.slot_of(name) {
            return s;
        }
        self.p.slots.push(name.to_owned());
        (self.p.slots.len() - 1) as Slot
    }

    /// `"x.a.b"` → a reference to slot `x` with path `a`, `b`.
    pub fn reference(&mut self, dotted: &str) -> u32 {
        let mut parts = dotted.split('.');
        let slot = self.slot(parts.next().unwrap());
        let path = parts
            .map(|k| self.konst(Value::String(k.to_owned())))
            .collect();
        let raw = self.konst(Value::String(format!("${{{dotted}}}")));
        self.p.refs.push(RefDef { slot, path, raw });
        (self.p.refs.len() - 1) as u32
    }

    pub fn c(&mut self, v: Value) -> Operand {
        Operand::Const(self.konst(v))
    }

    pub fn r(&mut self, dotted: &str) -> Operand {
        Operand::Ref(self.reference(dotted))
    }

    fn template_index(&mut self, text: &str) -> u32 {
        let mut pieces = Vec::new();
        let mut rest = text;
        while let Some(i) = rest.find("${") {
            let Some(j) = rest[i..].find('}') else { break };
            if i > 0 {
                pieces.push(Piece::Lit(self.konst(Value::String(rest[..i].to_owned()))));
            }
            pieces.push(Piece::Ref(self.reference(&rest[i + 2..i + j])));
            rest = &rest[i + j + 1..];
        }
        if !rest.is_empty() {
            pieces.push(Piece::Lit(self.konst(Value::String(rest.to_owned()))));
        }
        self.p.templates.push(pieces);
        (self.p.templates.len() - 1) as u32
    }

    /// A template: `${name.path}` references, everything else literal.
    pub fn t(&mut self, text: &str) -> Operand {
        Operand::Template(self.template_index(text))
    }

    /// Arithmetic `code` with `fallback` as its text fallback template.
    pub fn arith(&mut self, code: Vec<A>, fallback: &str) -> Operand {
        let code = code
            .into_iter()
            .map(|a| match a {
                A::N(v) => ArithOp::Const(self.konst(v)),
                A::R(name) => ArithOp::Ref(self.reference(name)),
                A::Neg => ArithOp::Un(Op1::Neg),
                A::Pos => ArithOp::Un(Op1::Pos),
                A::Add => ArithOp::Bin(Op2::Add),
                A::Sub => ArithOp::Bin(Op2::Sub),
                A::Mul => ArithOp::Bin(Op2::Mul),
                A::Div => ArithOp::Bin(Op2::Div),
                A::Pow => ArithOp::Bin(Op2::Pow),
                A::Mod => ArithOp::Bin(Op2::Mod),
            })
            .collect();
        let fallback = self.template_index(fallback);
        self.p.ariths.push(ArithDef { code, fallback });
        Operand::Arith((self.p.ariths.len() - 1) as u32)
    }

    pub fn array(&mut self, items: Vec<Operand>) -> Operand {
        self.p.arrays.push(items);
        Operand::Array((self.p.arrays.len() - 1) as u32)
    }

    pub fn object(&mut self, entries: Vec<(&str, Operand)>) -> Operand {
        let entries = entries
            .into_iter()
            .map(|(k, v)| (self.konst(Value::String(k.into())), v))
            .collect();
        self.p.objects.push(entries);
        Operand::Object((self.p.objects.len() - 1) as u32)
    }

    fn push(&mut self, seq: i64, i: Instr) -> Pc {
        self.p.code.push(i);
        self.seqs.push(seq);
        (self.p.code.len() - 1) as Pc
    }

    pub fn nop(&mut self, seq: i64) -> Pc {
        self.push(seq, Instr::Nop)
    }

    pub fn set(&mut self, seq: i64, name: &str, src: Operand) -> Pc {
        let dst = self.slot(name);
        self.push(seq, Instr::Set { dst, src })
    }

    pub fn assign(&mut self, seq: i64, targets: Vec<(&str, Operand)>) -> Pc {
        let targets = targets
            .into_iter()
            .map(|(n, o)| (self.slot(n), o))
            .collect();
        self.p.assigns.push(AssignDef { targets });
        let assign = (self.p.assigns.len() - 1) as u32;
        self.push(seq, Instr::Assign { assign })
    }

    pub fn call(&mut self, seq: i64, tool: &str, args: Vec<(&str, Operand)>, outs: &[&str]) -> Pc {
        let tool = match self.p.tools.iter().position(|t| t.name == tool) {
            Some(i) => i as u32,
            None => {
                self.p.tools.push(ToolDef {
                    name: tool.into(),
                    effects: Effects::Read,
                });
                (self.p.tools.len() - 1) as u32
            }
        };
        let args = args
            .into_iter()
            .map(|(k, v)| (self.konst(Value::String(k.into())), v))
            .collect();
        let outputs = outs.iter().map(|o| self.slot(o)).collect();
        self.p.calls.push(CallDef {
            tool,
            args,
            outputs,
        });
        let call = (self.p.calls.len() - 1) as u32;
        self.push(seq, Instr::Call { call })
    }

    pub fn jump(&mut self, seq: i64, target: Pc) -> Pc {
        self.push(seq, Instr::Jump { target })
    }

    pub fn branch(
        &mut self,
        seq: i64,
        prompt: Operand,
        context: Option<Operand>,
        t: Pc,
        f: Pc,
    ) -> Pc {
        self.p.conds.push(CondDef { prompt, context });
        let cond = (self.p.conds.len() - 1) as u32;
        self.push(
            seq,
            Instr::Branch {
                cond,
                if_true: t,
                if_false: f,
            },
        )
    }

    /// Next instruction's pc (for forward jumps, patch with `patch_jump`).
    pub fn here(&self) -> Pc {
        self.p.code.len() as Pc
    }

    pub fn patch(&mut self, pc: Pc, instr: Instr) {
        self.p.code[pc as usize] = instr;
    }

    /// Validates, with debug info: seq_no as given, line = 10 + pc.
    pub fn build(mut self) -> ValidatedProgram {
        let entries = self
            .seqs
            .iter()
            .enumerate()
            .map(|(pc, &seq_no)| DebugEntry {
                seq_no,
                line: 10 + pc as u32,
                column: 1,
            })
            .collect();
        self.p.debug = Some(DebugInfo {
            entries,
            reasoning: Vec::new(),
            source: None,
        });
        validate(self.p).expect("test program validates")
    }
}

/// Drives `vm` to the end, answering each request with `host`; returns the final halt and
/// every request seen.
pub fn drive(
    vm: &mut Vm<'_>,
    mut host: impl FnMut(&ToolRequest) -> Result<Value, String>,
) -> (Halt, Vec<ToolRequest>) {
    let mut seen = Vec::new();
    for _ in 0..100_000 {
        match vm.run() {
            Halt::Yield(reqs) => {
                assert!(
                    !reqs.is_empty(),
                    "yield with nothing new while nothing is answered"
                );
                for r in reqs {
                    let out = host(&r);
                    vm.resume(r.id, out).expect("resume known id");
                    seen.push(std::sync::Arc::unwrap_or_clone(r));
                }
            }
            halt => return (halt, seen),
        }
    }
    panic!("mock host gave up");
}

/// Runs `prog` with default limits and no tools; returns the outcome or panics.
pub fn run_ok(prog: &ValidatedProgram) -> Outcome {
    run_ok_with(prog, |r| panic!("unexpected request {r:?}"))
}

pub fn run_ok_with(
    prog: &ValidatedProgram,
    host: impl FnMut(&ToolRequest) -> Result<Value, String>,
) -> Outcome {
    let mut vm = Vm::new(prog, Limits::default());
    match drive(&mut vm, host).0 {
        Halt::Done(o) => o,
        other => panic!("expected Done, got {other:?}"),
    }
}

pub fn run_err(prog: &ValidatedProgram, limits: Limits) -> RunError {
    run_err_with(prog, limits, |r| panic!("unexpected request {r:?}"))
}

pub fn run_err_with(
    prog: &ValidatedProgram,
    limits: Limits,
    host: impl FnMut(&ToolRequest) -> Result<Value, String>,
) -> RunError {
    let mut vm = Vm::new(prog, limits);
    match drive(&mut vm, host).0 {
        Halt::Failed(e) => e,
        other => panic!("expected Failed, got {other:?}"),
    }
}

pub fn var<'a>(o: &'a Outcome, name: &str) -> &'a Value {
    o.vars
        .get(name)
        .unwrap_or_else(|| panic!("{name} not set in {:?}", o.vars))
}

pub fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => panic!("not an object"),
    }
}
