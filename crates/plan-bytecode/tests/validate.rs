//! One rejection per validator rule, each asserting the exact message. Table-driven: a
//! case is a name, an edit of the valid sample program, and the expected error.

mod common;

use plan_bytecode::*;
use serde_json::json;

type Edit = fn(&mut Program);

const CASES: &[(&str, Edit, &str)] = &[
    (
        "empty code",
        |p| {
            p.code.clear();
            p.debug = None;
        },
        "program has no instructions",
    ),
    (
        "slot out of range",
        |p| {
            p.code[2] = Instr::Set {
                dst: 99,
                src: Operand::Const(0),
            }
        },
        "code[2] set.dst: slot 99 out of range (8 slots)",
    ),
    (
        "const out of range",
        |p| {
            p.code[2] = Instr::Set {
                dst: 2,
                src: Operand::Const(500),
            }
        },
        "code[2] set.src: constant 500 out of range (22 constants)",
    ),
    (
        "ref operand out of range",
        |p| {
            p.code[2] = Instr::Set {
                dst: 2,
                src: Operand::Ref(5),
            }
        },
        "code[2] set.src: ref 5 out of range (5 refs)",
    ),
    (
        "template operand out of range",
        |p| {
            p.code[2] = Instr::Set {
                dst: 2,
                src: Operand::Template(4),
            }
        },
        "code[2] set.src: template 4 out of range (4 templates)",
    ),
    (
        "arith operand out of range",
        |p| {
            p.code[2] = Instr::Set {
                dst: 2,
                src: Operand::Arith(2),
            }
        },
        "code[2] set.src: arith 2 out of range (2 ariths)",
    ),
    (
        "array operand out of range",
        |p| {
            p.code[2] = Instr::Set {
                dst: 2,
                src: Operand::Array(1),
            }
        },
        "code[2] set.src: array 1 out of range (1 arrays)",
    ),
    (
        "object operand out of range",
        |p| {
            p.code[2] = Instr::Set {
                dst: 2,
                src: Operand::Object(1),
            }
        },
        "code[2] set.src: object 1 out of range (1 objects)",
    ),
    (
        "jump target out of range",
        |p| p.code[6] = Instr::Jump { target: 10 },
        "code[6] jump.target: jump target 10 out of range (10 instructions)",
    ),
    (
        "branch target out of range",
        |p| {
            p.code[5] = Instr::Branch {
                cond: 0,
                if_true: 6,
                if_false: 11,
            }
        },
        "code[5] branch.if_false: jump target 11 out of range (10 instructions)",
    ),
    (
        "cond index out of range",
        |p| {
            p.code[5] = Instr::Branch {
                cond: 2,
                if_true: 6,
                if_false: 7,
            }
        },
        "code[5] branch.cond: cond 2 out of range (2 conds)",
    ),
    (
        "call index out of range",
        |p| p.code[1] = Instr::Call { call: 2 },
        "code[1] call.call: call 2 out of range (2 calls)",
    ),
    (
        "assign index out of range",
        |p| p.code[4] = Instr::Assign { assign: 1 },
        "code[4] assign.assign: assign 1 out of range (1 assigns)",
    ),
    (
        "duplicate slot names",
        |p| p.slots[7] = "question".into(),
        "slots[7]: duplicate slot name \"question\"",
    ),
    (
        "ref slot out of range",
        |p| p.refs[1].slot = 8,
        "refs[1] slot: slot 8 out of range (8 slots)",
    ),
    (
        "ref path key not a string",
        |p| p.refs[2].path = vec![2],
        "refs[2] path key: constant 2 must be a string, found number",
    ),
    (
        "ref raw not a string",
        |p| p.refs[0].raw = 17,
        "refs[0] raw: constant 17 must be a string, found object",
    ),
    (
        "template literal not a string",
        |p| p.templates[1][0] = Piece::Lit(5),
        "templates[1] literal: constant 5 must be a string, found number",
    ),
    (
        "template ref out of range",
        |p| p.templates[1][1] = Piece::Ref(9),
        "templates[1] piece: ref 9 out of range (5 refs)",
    ),
    (
        "arith underflow",
        |p| p.ariths[0].code = vec![ArithOp::Const(5), common::ops::Add],
        "ariths[0]: op 1 (`+`) underflows the stack",
    ),
    (
        "arith unary underflow",
        |p| p.ariths[0].code = vec![common::ops::Neg],
        "ariths[0]: op 0 (`-`) underflows the stack",
    ),
    (
        "arith leaves two values",
        |p| p.ariths[0].code = vec![ArithOp::Const(5), ArithOp::Const(6)],
        "ariths[0]: ends with 2 values on the stack, expected 1",
    ),
    (
        "arith empty",
        |p| p.ariths[0].code.clear(),
        "ariths[0]: ends with 0 values on the stack, expected 1",
    ),
    (
        "arith too deep",
        |p| p.ariths[0].code = vec![ArithOp::Const(5); 300],
        "ariths[0]: stack deeper than the limit of 256",
    ),
    (
        "arith const not numeric",
        |p| p.ariths[1].code[0] = ArithOp::Const(1),
        "ariths[1]: op 0: constant 1 is not a number (string)",
    ),
    (
        "arith ref out of range",
        |p| p.ariths[0].code[0] = ArithOp::Ref(5),
        "ariths[0]: ref 5 out of range (5 refs)",
    ),
    (
        "arith fallback out of range",
        |p| p.ariths[0].fallback = 4,
        "ariths[0] fallback: template 4 out of range (4 templates)",
    ),
    (
        "array element out of range",
        |p| p.arrays[0].push(Operand::Ref(77)),
        "arrays[0] element: ref 77 out of range (5 refs)",
    ),
    (
        "object key not a string",
        |p| p.objects[0][0].0 = 2,
        "objects[0] key: constant 2 must be a string, found number",
    ),
    (
        "object value out of range",
        |p| p.objects[0][0].1 = Operand::Template(9),
        "objects[0] value: template 9 out of range (4 templates)",
    ),
    (
        "array contains itself",
        |p| p.arrays[0].push(Operand::Array(0)),
        "arrays[0] contains itself (cyclic array/object operands)",
    ),
    (
        "indirect cycle through an object",
        |p| p.arrays[0].push(Operand::Object(0)),
        "arrays[0] contains itself (cyclic array/object operands)",
    ),
    (
        "operand nesting too deep",
        |p| {
            // arrays[i] contains arrays[i + 1]: a chain of 100.
            p.arrays = (0..100u32)
                .map(|i| {
                    if i < 99 {
                        vec![Operand::Array(i + 1)]
                    } else {
                        vec![]
                    }
                })
                .collect();
        },
        "arrays[64]: array/object operands nested deeper than the limit of 64",
    ),
    (
        "assign target out of range",
        |p| p.assigns[0].targets[1].0 = 8,
        "assigns[0] target: slot 8 out of range (8 slots)",
    ),
    (
        "assign value out of range",
        |p| p.assigns[0].targets[1].1 = Operand::Const(22),
        "assigns[0] value: constant 22 out of range (22 constants)",
    ),
    (
        "call tool out of range",
        |p| p.calls[1].tool = 3,
        "calls[1] tool: tool 3 out of range (3 tools)",
    ),
    (
        "call arg name not a string",
        |p| p.calls[0].args[0].0 = 5,
        "calls[0] argument: constant 5 must be a string, found number",
    ),
    (
        "call duplicate arg names",
        |p| p.calls[0].args[1].0 = 1,
        "calls[0] argument: duplicate argument name \"query\"",
    ),
    (
        "call arg value out of range",
        |p| p.calls[0].args[1].1 = Operand::Arith(3),
        "calls[0] argument: arith 3 out of range (2 ariths)",
    ),
    (
        "call output out of range",
        |p| p.calls[1].outputs.push(8),
        "calls[1] output: slot 8 out of range (8 slots)",
    ),
    (
        "call duplicate outputs",
        |p| p.calls[1].outputs = vec![6, 7, 6],
        "calls[1] output: duplicate output slot 6 (\"final_answer\")",
    ),
    (
        "cond prompt out of range",
        |p| p.conds[0].prompt = Operand::Ref(5),
        "conds[0] prompt: ref 5 out of range (5 refs)",
    ),
    (
        "cond context out of range",
        |p| p.conds[0].context = Some(Operand::Object(3)),
        "conds[0] context: object 3 out of range (1 objects)",
    ),
    (
        "duplicate tool names",
        |p| p.tools[2].name = "llm_generate".into(),
        "tools[2]: duplicate tool name \"llm_generate\"",
    ),
    (
        "empty tool name",
        |p| p.tools[2].name.clear(),
        "tools[2]: empty tool name",
    ),
    (
        "debug entries count",
        |p| {
            p.debug.as_mut().unwrap().entries.pop();
        },
        "debug info has 9 entries for 10 instructions",
    ),
    (
        "reasoning pc out of range",
        |p| p.debug.as_mut().unwrap().reasoning[0].0 = 10,
        "reasoning[0] pc: pc 10 out of range (10 instructions)",
    ),
    (
        "constant too deep",
        |p| {
            let mut v = json!(1);
            for _ in 0..129 {
                v = json!([v]);
            }
            p.consts.push(v);
        },
        "consts[22]: nested deeper than the limit of 128",
    ),
];

#[test]
fn each_rule_rejects_with_its_message() {
    validate(common::sample()).expect("the base program is valid");
    let mut failures = Vec::new();
    for (name, edit, expected) in CASES {
        let mut p = common::sample();
        edit(&mut p);
        match validate(p) {
            Ok(_) => failures.push(format!("{name}: validated, expected {expected:?}")),
            Err(e) => {
                assert_eq!(e.offset(), None, "{name}");
                if e.message() != *expected {
                    failures.push(format!(
                        "{name}:\n   got {:?}\n  want {expected:?}",
                        e.message()
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn rejected_programs_are_rejected_by_load_too() {
    // A program that fails validation still encodes, and (within the decoder's limits)
    // decodes to the same program; `load` rejects it with the validator's message.
    for (name, edit, expected) in CASES {
        let mut p = common::sample();
        edit(&mut p);
        let bytes = encode(&p);
        match decode(&bytes) {
            Ok(back) => assert_eq!(back, p, "{name}"),
            Err(e) => {
                // Only the decoder's own caps may stop it first.
                assert_eq!(
                    e.message(),
                    "constant nested deeper than the limit of 128",
                    "{name}"
                );
                continue;
            }
        }
        match load(&bytes) {
            Ok(_) => panic!("{name}: loaded"),
            Err(e) => assert_eq!(e.message(), *expected, "{name}"),
        }
    }
}

#[test]
fn shared_subtrees_are_not_cycles() {
    // Two objects both containing arrays[0] (a DAG) is fine.
    let mut p = common::sample();
    p.objects
        .push(vec![(10, Operand::Array(0)), (11, Operand::Object(0))]);
    validate(p).unwrap();
}

#[test]
fn operand_nesting_at_the_limit_is_accepted() {
    let mut p = common::sample();
    p.arrays = (0..64u32)
        .map(|i| {
            if i < 63 {
                vec![Operand::Array(i + 1)]
            } else {
                vec![]
            }
        })
        .collect();
    p.objects.clear();
    p.assigns[0]
        .targets
        .retain(|(_, op)| !matches!(op, Operand::Object(_)));
    validate(p).unwrap();
}

#[test]
fn error_display_without_offset() {
    let mut p = common::sample();
    p.code.clear();
    assert_eq!(
        validate(p).unwrap_err().to_string(),
        "invalid bytecode: program has no instructions"
    );
}
