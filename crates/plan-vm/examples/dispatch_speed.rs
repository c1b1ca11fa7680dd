//! Measures dispatch speed on an arithmetic/jump loop (`cargo run --release -p plan-vm
//! --example dispatch_speed`). The loop never sets `final_answer`; it ends on the step
//! limit, so the whole run is pure dispatch.

use plan_bytecode::*;
use plan_vm::{Halt, Limits, Vm};
use serde_json::json;

fn main() {
    let steps: u64 = 20_000_000;
    let p = Program {
        consts: vec![
            json!(0),
            json!(1),
            json!("i"),
            json!("${i} + 1"),
            json!("${i}"),
        ],
        slots: vec!["i".into(), "final_answer".into()],
        code: vec![
            Instr::Set {
                dst: 0,
                src: Operand::Const(0),
            },
            Instr::Set {
                dst: 0,
                src: Operand::Arith(0),
            },
            Instr::Nop,
            Instr::Jump { target: 1 },
        ],
        refs: vec![RefDef {
            slot: 0,
            path: vec![],
            raw: 4,
        }],
        templates: vec![vec![Piece::Ref(0), Piece::Lit(3)]],
        ariths: vec![ArithDef {
            code: vec![
                ArithOp::Ref(0),
                ArithOp::Const(1),
                ArithOp::Bin(plan_value::Op2::Add),
            ],
            fallback: 0,
        }],
        ..Program::default()
    };
    let prog = validate(p).expect("valid");
    let mut vm = Vm::new(
        &prog,
        Limits {
            max_steps: steps,
            ..Limits::default()
        },
    );
    let start = std::time::Instant::now();
    let halt = vm.run();
    let secs = start.elapsed().as_secs_f64();
    assert!(matches!(halt, Halt::Failed(_)));
    println!(
        "{steps} instructions in {secs:.3}s = {:.1} M instructions/s (i = {})",
        steps as f64 / secs / 1e6,
        vm.state().slot(0).cloned().unwrap_or_default()
    );
}
