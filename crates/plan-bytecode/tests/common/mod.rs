//! A hand-built program that uses every opcode, every side table and every constant kind,
//! shared by the round-trip, malformed-input, validator and disassembler tests.
#![allow(dead_code)] // each test binary uses a different subset

use plan_bytecode::*;
use serde_json::json;

/// Arithmetic operators by short name, so postfix code in tests reads as it disassembles.
#[allow(non_upper_case_globals)]
pub(crate) mod ops {
    use plan_bytecode::ArithOp::{self, Bin, Un};
    use plan_value::{Op1, Op2};

    pub(crate) const Neg: ArithOp = Un(Op1::Neg);
    pub(crate) const Pos: ArithOp = Un(Op1::Pos);
    pub(crate) const Add: ArithOp = Bin(Op2::Add);
    pub(crate) const Sub: ArithOp = Bin(Op2::Sub);
    pub(crate) const Mul: ArithOp = Bin(Op2::Mul);
    pub(crate) const Div: ArithOp = Bin(Op2::Div);
    pub(crate) const Pow: ArithOp = Bin(Op2::Pow);
    pub(crate) const Mod: ArithOp = Bin(Op2::Mod);
}

/// Roughly the plan: search for the question, compute a number, summarise, ask the LLM
/// whether the summary is enough, then produce `final_answer`.
pub(crate) fn sample() -> Program {
    let consts = vec![
        json!("${question}"),     // c0
        json!("query"),           // c1
        json!(5),                 // c2
        json!("top_k"),           // c3
        json!("${n}"),            // c4
        json!(1),                 // c5
        json!(2),                 // c6
        json!("Found: "),         // c7
        json!("items"),           // c8
        json!("${chunks.items}"), // c9
        json!("q"),               // c10
        json!("list"),            // c11
        json!("Is "),             // c12
        json!(" enough?"),        // c13
        json!("${summary}"),      // c14
        json!("Answer: "),        // c15
        json!("prompt"),          // c16
        json!({"nested": [1.5, null, true, false, -7, 18446744073709551615u64, "s\n\"q\""], "empty": {}}), // c17
        json!("("),         // c18
        json!(" + 1) * 2"), // c19
        json!("${chunks}"), // c20
        json!(-0.25),       // c21
    ];
    let slots = [
        "question",
        "chunks",
        "n",
        "answer_count",
        "summary",
        "meta",
        "final_answer",
        "draft",
    ]
    .map(String::from)
    .to_vec();
    let refs = vec![
        RefDef {
            slot: 0,
            path: vec![],
            raw: 0,
        },
        RefDef {
            slot: 2,
            path: vec![],
            raw: 4,
        },
        RefDef {
            slot: 1,
            path: vec![8],
            raw: 9,
        },
        RefDef {
            slot: 4,
            path: vec![],
            raw: 14,
        },
        RefDef {
            slot: 1,
            path: vec![],
            raw: 20,
        },
    ];
    let templates = vec![
        vec![Piece::Lit(7), Piece::Ref(2)],
        vec![Piece::Lit(12), Piece::Ref(3), Piece::Lit(13)],
        vec![Piece::Lit(15), Piece::Ref(3)],
        vec![Piece::Lit(18), Piece::Ref(1), Piece::Lit(19)],
    ];
    use ArithOp::{Const, Ref};
    use ops::*;
    let ariths = vec![
        ArithDef {
            code: vec![Ref(1), Const(5), Add, Const(6), Mul],
            fallback: 3,
        },
        ArithDef {
            code: vec![
                Const(2),
                Neg,
                Pos,
                Const(21),
                Sub,
                Const(5),
                Div,
                Const(6),
                Pow,
                Const(6),
                Mod,
            ],
            fallback: 3,
        },
    ];
    let arrays = vec![vec![Operand::Const(2), Operand::Ref(1), Operand::Const(17)]];
    let objects = vec![vec![(10, Operand::Ref(0)), (11, Operand::Array(0))]];
    let assigns = vec![AssignDef {
        targets: vec![
            (4, Operand::Template(0)),
            (5, Operand::Object(0)),
            (3, Operand::Arith(1)),
        ],
    }];
    let calls = vec![
        CallDef {
            tool: 0,
            args: vec![(1, Operand::Ref(0)), (3, Operand::Const(2))],
            outputs: vec![1],
        },
        CallDef {
            tool: 1,
            args: vec![(16, Operand::Template(2))],
            outputs: vec![7, 6],
        },
    ];
    let conds = vec![
        CondDef {
            prompt: Operand::Template(1),
            context: Some(Operand::Ref(4)),
        },
        CondDef {
            prompt: Operand::Template(2),
            context: None,
        },
    ];
    let tools = vec![
        ToolDef {
            name: "vector_search".into(),
            effects: Effects::Read,
        },
        ToolDef {
            name: "llm_generate".into(),
            effects: Effects::Pure,
        },
        ToolDef {
            name: "send_email".into(),
            effects: Effects::Write,
        },
    ];
    let code = vec![
        Instr::Nop,
        Instr::Call { call: 0 },
        Instr::Set {
            dst: 2,
            src: Operand::Const(2),
        },
        Instr::Set {
            dst: 3,
            src: Operand::Arith(0),
        },
        Instr::Assign { assign: 0 },
        Instr::Branch {
            cond: 0,
            if_true: 6,
            if_false: 7,
        },
        Instr::Jump { target: 8 },
        Instr::Branch {
            cond: 1,
            if_true: 8,
            if_false: 8,
        },
        Instr::Call { call: 1 },
        Instr::Set {
            dst: 6,
            src: Operand::Template(2),
        },
    ];
    let seq = [
        (0, 2, 3),
        (1, 8, 3),
        (2, 15, 3),
        (2, 15, 3),
        (3, 22, 3),
        (4, 30, 3),
        (4, 30, 3),
        (5, 38, 3),
        (6, 45, 3),
        (-1, 52, 5),
    ];
    let debug = DebugInfo {
        entries: seq
            .iter()
            .map(|&(seq_no, line, column)| DebugEntry {
                seq_no,
                line,
                column,
            })
            .collect(),
        reasoning: vec![(
            0,
            "The user asks a question; search first, then summarise.\nSecond line of thoughts."
                .into(),
            "Step 1 depends on nothing; step 4 on step 1.".into(),
        )],
        source: Some("plans/sample.json".into()),
    };
    Program {
        consts,
        slots,
        code,
        refs,
        templates,
        ariths,
        arrays,
        objects,
        assigns,
        calls,
        conds,
        tools,
        debug: Some(debug),
    }
}

/// `sample()` without debug info (as `planc compile --strip` writes it).
pub(crate) fn stripped() -> Program {
    Program {
        debug: None,
        ..sample()
    }
}

/// Re-seals a (possibly mutated) file so it passes the checksum, to reach deeper checks.
pub(crate) fn reseal(bytes: &mut [u8]) {
    if bytes.len() >= HEADER_LEN {
        let crc = crc32fast::hash(&bytes[HEADER_LEN..]).to_le_bytes();
        bytes[12..16].copy_from_slice(&crc);
    }
}
