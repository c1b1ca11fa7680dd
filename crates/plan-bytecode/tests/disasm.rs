//! Snapshots of the disassembly listing (`planc disasm` prints exactly this).

mod common;

use plan_bytecode::*;

#[test]
fn disasm_with_debug_info() {
    insta::assert_snapshot!(disasm(&common::sample()));
}

#[test]
fn disasm_stripped() {
    insta::assert_snapshot!(disasm(&common::stripped()));
}

#[test]
fn disasm_of_an_invalid_program_marks_bad_indices() {
    // Disassembly is total: `planc disasm` must be able to show a file that fails to
    // validate, so bad indices render as `?` markers instead of panicking.
    let mut p = common::stripped();
    p.code.push(Instr::Set {
        dst: 40,
        src: Operand::Ref(90),
    });
    p.code.push(Instr::Jump { target: 1000 });
    p.code.push(Instr::Call { call: 9 });
    p.arrays[0].push(Operand::Array(0));
    p.code.push(Instr::Set {
        dst: 0,
        src: Operand::Array(0),
    });
    let text = disasm(&p);
    assert!(text.contains("set ?slot40 <- ?ref90"), "{text}");
    assert!(text.contains("jump @1000?"), "{text}");
    assert!(text.contains("call #9 ?"), "{text}");
    assert!(text.contains("[…]"), "cyclic array is cut off: {text}");
}

#[test]
fn arithmetic_renders_with_python_precedence() {
    use ArithOp::{Const, Ref};
    use common::ops::*;
    // consts: c0 = 2, c1 = 3, c2 = 1; ref r0 = ${x}.
    let render = |code: Vec<ArithOp>| {
        let p = Program {
            consts: vec![2.into(), 3.into(), 1.into(), "${x}".into()],
            slots: vec!["x".into()],
            refs: vec![RefDef {
                slot: 0,
                path: vec![],
                raw: 3,
            }],
            templates: vec![vec![Piece::Ref(0)]],
            ariths: vec![ArithDef { code, fallback: 0 }],
            code: vec![Instr::Set {
                dst: 0,
                src: Operand::Arith(0),
            }],
            ..Program::default()
        };
        let text = disasm(&p);
        let line = text.lines().last().unwrap();
        line.split_once("arith#0 ").unwrap().1.to_owned()
    };
    let cases: Vec<(Vec<ArithOp>, &str)> = vec![
        (vec![Const(0), Const(0), Pow, Neg], "-2 ** 2"),
        (vec![Const(0), Neg, Const(0), Pow], "(-2) ** 2"),
        (vec![Const(0), Const(2), Neg, Pow], "2 ** -1"),
        (vec![Const(0), Const(1), Const(0), Pow, Pow], "2 ** 3 ** 2"),
        (
            vec![Const(0), Const(1), Pow, Const(0), Pow],
            "(2 ** 3) ** 2",
        ),
        (vec![Const(0), Const(1), Const(2), Sub, Sub], "2 - (3 - 1)"),
        (vec![Const(0), Const(1), Sub, Const(2), Sub], "2 - 3 - 1"),
        (vec![Ref(0), Const(2), Add, Const(1), Mul], "(${x} + 1) * 3"),
        (vec![Ref(0), Const(2), Const(1), Mul, Add], "${x} + 1 * 3"),
        (vec![Ref(0), Neg, Neg], "-(-${x})"),
        (vec![Const(0), Const(2), Const(1), Add, Pow], "2 ** (1 + 3)"),
    ];
    for (code, want) in cases {
        assert_eq!(render(code.clone()), want, "{code:?}");
    }
}
