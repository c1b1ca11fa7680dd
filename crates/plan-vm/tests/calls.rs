//! Tool calls and conditions: the request the host sees, output_vars extraction, tool
//! errors, condition answer shapes, and resume misuse.

mod common;
use common::*;
use plan_vm::{CallId, Halt, Limits, RequestKind, Vm};
use serde_json::{Value, json};

#[test]
fn call_request_shape_is_the_cassette_key() {
    let mut b = B::new();
    let c = b.c(json!("TiDB"));
    b.set(0, "topic", c);
    let t = b.t("Tell me about ${topic}");
    let k = b.c(json!(5));
    let n = b.c(json!(null));
    b.call(
        1,
        "vector_search",
        vec![("query", t), ("top_k", k), ("filter", n)],
        &["chunks"],
    );
    let r = b.r("chunks");
    b.set(2, "final_answer", r);
    let prog = b.build();
    let mut vm = Vm::new(&prog, Limits::default());
    let Halt::Yield(reqs) = vm.run() else {
        panic!("expected a request")
    };
    assert_eq!(reqs.len(), 1);
    let req = &reqs[0];
    assert_eq!(req.tool, "vector_search");
    assert_eq!(
        serde_json::to_string(&req.args).unwrap(),
        r#"{"query":"Tell me about TiDB","top_k":5,"filter":null}"#
    );
    assert_eq!(req.kind, RequestKind::Tool { output_keys: None });
    assert_eq!((req.pc, req.seq_no), (1, Some(1)));
    // Nothing new until it is answered.
    assert_eq!(vm.run(), Halt::Yield(vec![]));
    vm.resume(req.id, Ok(json!(["c1", "c2"]))).unwrap();
    let Halt::Done(o) = vm.run() else {
        panic!("not done")
    };
    assert_eq!(o.final_answer, json!(["c1", "c2"]));
    assert_eq!(o.steps, 3);
}

fn multi_output(output: Value) -> Result<(Value, Value), plan_vm::RunError> {
    let mut b = B::new();
    let p = b.c(json!("q"));
    b.call(
        3,
        "llm_generate",
        vec![("prompt", p)],
        &["answer", "sources"],
    );
    let t = b.r("answer");
    b.set(4, "final_answer", t);
    let prog = b.build();
    let mut vm = Vm::new(&prog, Limits::default());
    let Halt::Yield(reqs) = vm.run() else {
        panic!("expected a request")
    };
    assert_eq!(
        reqs[0].kind,
        RequestKind::Tool {
            output_keys: Some(vec!["answer".into(), "sources".into()])
        }
    );
    vm.resume(reqs[0].id, Ok(output)).unwrap();
    match vm.run() {
        Halt::Done(o) => Ok((var(&o, "answer").clone(), var(&o, "sources").clone())),
        Halt::Failed(e) => Err(e),
        other => panic!("{other:?}"),
    }
}

#[test]
fn output_vars_take_keys_from_an_object() {
    let cases = [
        json!({"sources": [1], "answer": "A", "extra": 0}),
        json!(r#"{"answer": "A", "sources": [1]}"#),
        json!("Here it is: {\"answer\": \"A\", \"sources\": [1]} -- cheers"),
        json!("```json\n{\"answer\": \"A\", \"sources\": [1]}\n```"),
    ];
    for c in cases {
        assert_eq!(
            multi_output(c.clone()).unwrap(),
            (json!("A"), json!([1])),
            "{c}"
        );
    }
    let tricky = json!(r#"note {not json} then {"answer": "a } { b", "sources": "}{"}"#);
    assert_eq!(
        multi_output(tricky).unwrap(),
        (json!("a } { b"), json!("}{"))
    );
}

#[test]
fn output_vars_missing_key_fails_naming_it() {
    let e = multi_output(json!({"answer": "A", "other": 1})).unwrap_err();
    assert!(e.message.contains("no key `sources`"), "{}", e.message);
    assert!(e.message.contains("`answer`, `other`"), "{}", e.message);
    assert!(
        e.message.contains(r#"{"answer":"A","other":1}"#),
        "{}",
        e.message
    );
    assert_eq!((e.seq_no, e.line, e.pc), (Some(3), Some(10), Some(0)));

    let e = multi_output(json!("I cannot answer that.")).unwrap_err();
    assert!(e.message.contains("no JSON object"), "{}", e.message);
    assert!(e.message.contains("I cannot answer that."), "{}", e.message);

    let e = multi_output(json!(42)).unwrap_err();
    assert!(e.message.contains("not a JSON object"), "{}", e.message);
}

#[test]
fn tool_error_fails_the_run_at_that_instruction() {
    let mut b = B::new();
    b.nop(0);
    b.call(1, "retrieve_knowledge_graph", vec![], &["kg"]);
    let c = b.c(json!(1));
    b.set(2, "final_answer", c);
    let e = run_err_with(&b.build(), Limits::default(), |_| {
        Err("503 from backend".into())
    });
    assert!(
        e.message
            .contains("tool `retrieve_knowledge_graph` failed: 503 from backend")
    );
    assert_eq!((e.pc, e.seq_no, e.line), (Some(1), Some(1), Some(11)));
}

#[test]
fn resume_with_unknown_or_repeated_id_is_an_error() {
    let mut b = B::new();
    b.call(0, "t", vec![], &["x"]);
    let r = b.r("x");
    b.set(1, "final_answer", r);
    let prog = b.build();
    let mut vm = Vm::new(&prog, Limits::default());
    assert!(
        vm.resume(CallId(0), Ok(json!(1))).is_err(),
        "nothing issued yet"
    );
    let Halt::Yield(reqs) = vm.run() else {
        panic!()
    };
    let e = vm.resume(CallId(99), Ok(json!(1))).unwrap_err();
    assert!(
        e.message.contains("no outstanding tool request with id 99"),
        "{}",
        e.message
    );
    vm.resume(reqs[0].id, Ok(json!(1))).unwrap();
    assert!(
        vm.resume(reqs[0].id, Ok(json!(2)))
            .unwrap_err()
            .message
            .contains("already")
    );
    assert!(matches!(vm.run(), Halt::Done(_)));
    assert!(vm.resume(reqs[0].id, Ok(json!(2))).is_err(), "run ended");
}

/// A program: `if <cond> then final_answer = "yes" else final_answer = "no"`.
fn condition(answer: Value) -> Result<Value, plan_vm::RunError> {
    let mut b = B::new();
    let c = b.c(json!(3));
    b.set(0, "n", c);
    let prompt = b.t("Is ${n} odd?");
    let ctx = b.r("n");
    let br = b.branch(1, prompt, Some(ctx), 0, 0);
    let y = b.c(json!("yes"));
    let yes = b.set(2, "final_answer", y);
    let n = b.c(json!("no"));
    let no = b.set(3, "final_answer", n);
    let cond = b.p.conds.len() as u32 - 1;
    b.patch(
        br,
        plan_bytecode::Instr::Branch {
            cond,
            if_true: yes,
            if_false: no,
        },
    );
    let prog = b.build();
    let mut vm = Vm::new(&prog, Limits::default());
    let (halt, reqs) = drive(&mut vm, |_| Ok(answer.clone()));
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].tool, "jmp_condition");
    assert_eq!(reqs[0].kind, RequestKind::Condition);
    assert_eq!(
        Value::Object(reqs[0].args.to_map()),
        json!({"prompt": "Is 3 odd?", "context": 3})
    );
    match halt {
        Halt::Done(o) => Ok(o.final_answer),
        Halt::Failed(e) => Err(e),
        other => panic!("{other:?}"),
    }
}

#[test]
fn condition_answer_shapes() {
    let yes = [
        json!(true),
        json!("true"),
        json!("TRUE"),
        json!(" True.\n"),
        json!({"result": true, "explanation": "3 is odd"}),
        json!(r#"{"result": true, "explanation": "odd {sic}"}"#),
        json!("Let me think.\n```json\n{\"result\": true, \"explanation\": \"x\"}\n```"),
    ];
    for a in yes {
        assert_eq!(condition(a.clone()).unwrap(), json!("yes"), "{a}");
    }
    for a in [
        json!(false),
        json!("False"),
        json!(r#"{"explanation": "even", "result": false}"#),
    ] {
        assert_eq!(condition(a.clone()).unwrap(), json!("no"), "{a}");
    }
    for a in [json!("probably"), json!(1), json!({"result": "yes"})] {
        let e = condition(a.clone()).unwrap_err();
        assert!(e.message.contains("condition answer"), "{}", e.message);
        assert!(
            e.message.contains(&plan_value::preview(&a, 200)),
            "{}",
            e.message
        );
        assert_eq!(e.seq_no, Some(1));
    }
}

#[test]
fn condition_prompt_and_context_defaults() {
    let mut b = B::new();
    let c = b.c(json!({"q": 1}));
    b.set(0, "obj", c);
    let prompt = b.r("obj");
    let br = b.branch(1, prompt, None, 0, 0);
    let c = b.c(json!("done"));
    let end = b.set(2, "final_answer", c);
    b.patch(
        br,
        plan_bytecode::Instr::Branch {
            cond: 0,
            if_true: end,
            if_false: end,
        },
    );
    let (_, reqs) = drive(&mut Vm::new(&b.build(), Limits::default()), |_| {
        Ok(json!(true))
    });
    assert_eq!(
        Value::Object(reqs[0].args.to_map()),
        json!({"prompt": "{\"q\":1}", "context": null})
    );
}
