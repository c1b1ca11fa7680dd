//! Table tests generated from CPython by `data/gen.py` (float repr and every arithmetic
//! operator over a grid of ints and floats, with our documented deviations applied).

use plan_value::{Num, Op1, Op2, binary, python_float_repr, unary};

fn parse_num(s: &str) -> Option<Num> {
    if s == "none" {
        return None;
    }
    if let Some(i) = s.strip_prefix("int:") {
        return Some(Num::Int(i.parse().expect("int in table")));
    }
    let b = s.strip_prefix("float:").expect("tagged number in table");
    Some(Num::Float(f64::from_bits(
        u64::from_str_radix(b, 16).expect("hex bits"),
    )))
}

/// Compares floats by bits so that `-0.0` vs `0.0` counts.
fn same(a: Option<Num>, b: Option<Num>) -> bool {
    match (a, b) {
        (Some(Num::Float(x)), Some(Num::Float(y))) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

#[test]
fn float_repr_matches_python() {
    let data = include_str!("data/float_repr.tsv");
    let mut failures = Vec::new();
    let mut n = 0;
    for line in data.lines().filter(|l| !l.starts_with('#')) {
        let (bits, want) = line.split_once('\t').expect("two columns");
        let f = f64::from_bits(u64::from_str_radix(bits, 16).expect("hex"));
        let got = python_float_repr(f);
        if got != want {
            failures.push(format!("{bits}: got {got}, want {want}"));
        }
        n += 1;
    }
    assert!(n > 3000);
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn arithmetic_matches_python() {
    let data = include_str!("data/arith.tsv");
    let mut failures = Vec::new();
    let mut n = 0;
    for line in data.lines().filter(|l| !l.starts_with('#')) {
        let cols: Vec<&str> = line.split('\t').collect();
        let [op, a, b, want] = cols[..] else {
            panic!("bad row {line}")
        };
        let a = parse_num(a).expect("operand");
        let want = parse_num(want);
        let got = match op {
            "neg" => unary(Op1::Neg, a),
            "pos" => unary(Op1::Pos, a),
            _ => {
                let b = parse_num(b).expect("operand");
                let op = match op {
                    "add" => Op2::Add,
                    "sub" => Op2::Sub,
                    "mul" => Op2::Mul,
                    "div" => Op2::Div,
                    "mod" => Op2::Mod,
                    "pow" => Op2::Pow,
                    other => panic!("unknown op {other}"),
                };
                binary(op, a, b)
            }
        };
        if !same(got, want) {
            failures.push(format!("{line}: got {got:?}"));
        }
        n += 1;
    }
    assert!(n > 9000);
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
