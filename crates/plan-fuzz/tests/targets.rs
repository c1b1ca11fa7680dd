//! The targets' own oracles must be right, or a fuzz run proves nothing: the template
//! reference against hand-written expectations, and each target on a few concrete inputs.

use plan_fuzz::FValue;
use plan_fuzz::template::{Input, TPiece, reference};
use serde_json::{Map, Value, json};

fn env(pairs: Value) -> Map<String, Value> {
    match pairs {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

#[test]
fn reference_interpolation_follows_the_spec() {
    let e = env(json!({
        "a": "A", "n": 5, "f": 3.0, "tiny": 1e-5, "o": {"k": [1, {"x": "deep"}]},
        "t": " {\"k\": [10, 20]} ", "b": true, "z": null,
    }));
    let cases: &[(&str, Value)] = &[
        ("plain", json!("plain")),
        ("${a}", json!("A")),
        ("${n}", json!(5)),
        ("${o}", json!({"k": [1, {"x": "deep"}]})),
        ("${missing}", json!("${missing}")),
        ("x${a}y", json!("xAy")),
        ("${n}/${f}/${tiny}", json!("5/3.0/1e-05")),
        ("${o.k.1.x} ${o.k.0}", json!("deep 1")),
        ("${t.k.1}", json!(20)),
        ("${o}!", json!("{\"k\":[1,{\"x\":\"deep\"}]}!")),
        ("${b}${z}", json!("truenull")),
        ("$${a}", json!("$A")),
        ("${}${1x}${a b}${", json!("${}${1x}${a b}${")),
        ("${o.nope} ${n.k}", json!("${o.nope} ${n.k}")),
        ("${o.k.01.x}", json!("deep")),
    ];
    for (t, want) in cases {
        assert_eq!(&reference(t, &e), want, "template {t:?}");
    }
}

#[test]
fn template_target_agrees_on_concrete_inputs() {
    use plan_fuzz::template::check;
    check(&Input {
        pieces: vec![
            TPiece::Lit("Answer: ".into()),
            TPiece::Ref {
                var: 0,
                path: vec![],
            },
            TPiece::Junk(0),
            TPiece::Ref {
                var: 1,
                path: vec![0, 2],
            },
            TPiece::Ref {
                var: 4,
                path: vec![],
            },
        ],
        values: vec![
            (0, FValue::Float(2.5)),
            (
                1,
                FValue::JsonText(Box::new(FValue::Obj(vec![(
                    0,
                    FValue::Arr(vec![FValue::Int(7)]),
                )]))),
            ),
        ],
    });
}

#[test]
fn every_target_accepts_empty_and_junk_input() {
    for (name, run) in plan_fuzz::TARGETS {
        for data in [&b""[..], b"\x00", b"[{\"seq_no\": 0}]", &[0xff; 64]] {
            let r = std::panic::catch_unwind(|| run(data));
            assert!(r.is_ok(), "{name} on {data:?}");
        }
    }
}
