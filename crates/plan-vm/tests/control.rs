//! Control flow: loops re-execute, a run ends exactly when `final_answer` is set, falling
//! off the end fails, tracing records steps, stores and jumps.

mod common;
use common::*;
use plan_bytecode::Instr;
use plan_vm::{Event, Halt, Limits, Vm};
use serde_json::{Value, json};

/// `i = 0; loop { out = search("item ${i}"); i = i + 1 } while LLM says ${i} < 3`.
fn counter_loop() -> plan_bytecode::ValidatedProgram {
    let mut b = B::new();
    let z = b.c(json!(0));
    b.set(0, "i", z);
    let q = b.t("item ${i}");
    let body = b.call(1, "search", vec![("q", q)], &["out"]);
    let inc = b.arith(vec![A::R("i"), A::N(json!(1)), A::Add], "${i} + 1");
    b.set(2, "i", inc);
    let prompt = b.t("${i} < 3");
    let br = b.branch(3, prompt, None, 0, 0);
    let t = b.t("${i}: ${out}");
    let end = b.set(4, "final_answer", t);
    b.patch(
        br,
        Instr::Branch {
            cond: 0,
            if_true: body,
            if_false: end,
        },
    );
    b.build()
}

fn loop_host(r: &plan_vm::ToolRequest) -> Result<Value, String> {
    match r.tool.as_str() {
        "search" => Ok(json!(format!("r {}", r.args["q"].as_str().unwrap()))),
        "jmp_condition" => {
            let p = r.args["prompt"].as_str().unwrap();
            let n: i64 = p.split(' ').next().unwrap().parse().unwrap();
            Ok(json!({"result": n < 3, "explanation": "counted"}))
        }
        t => Err(format!("no tool {t}")),
    }
}

#[test]
fn backward_jumps_re_execute_the_body() {
    let prog = counter_loop();
    let mut vm = Vm::new(&prog, Limits::default());
    let (halt, reqs) = drive(&mut vm, loop_host);
    let Halt::Done(o) = halt else {
        panic!("{halt:?}")
    };
    let queries: Vec<&Value> = reqs
        .iter()
        .filter(|r| r.tool == "search")
        .map(|r| &r.args["q"])
        .collect();
    assert_eq!(
        queries,
        [&json!("item 0"), &json!("item 1"), &json!("item 2")]
    );
    assert_eq!(o.final_answer, json!("3: r item 2"));
    assert_eq!(o.steps, 1 + 3 * 3 + 1);
}

#[test]
fn unconditional_jump_skips_instructions() {
    let mut b = B::new();
    let j = b.jump(0, 0);
    let c = b.c(json!("skipped"));
    b.set(1, "x", c);
    let c = b.c(json!("landed"));
    let target = b.set(2, "final_answer", c);
    b.patch(j, Instr::Jump { target });
    let o = run_ok(&b.build());
    assert_eq!(o.final_answer, json!("landed"));
    assert!(!o.vars.contains_key("x"));
    assert_eq!(o.steps, 2);
}

#[test]
fn run_ends_as_soon_as_final_answer_is_set() {
    let mut b = B::new();
    b.nop(0);
    let (c1, c2) = (b.c(json!("early")), b.c(json!(2)));
    b.assign(1, vec![("final_answer", c1), ("after", c2)]);
    let c = b.c(json!("never"));
    b.set(2, "later", c);
    let c = b.c(json!("late"));
    b.set(3, "final_answer", c);
    let o = run_ok(&b.build());
    assert_eq!(o.final_answer, json!("early"));
    // The whole instruction completes; nothing after it runs.
    assert_eq!(o.vars.get("after"), Some(&json!(2)));
    assert!(!o.vars.contains_key("later"));
    assert_eq!(o.steps, 2);
}

#[test]
fn final_answer_from_a_tool_ends_the_run() {
    let mut b = B::new();
    b.call(0, "llm_generate", vec![], &["final_answer"]);
    let c = b.c(json!(1));
    b.set(1, "after", c);
    let o = run_ok_with(&b.build(), |_| Ok(json!("from tool")));
    assert_eq!(o.final_answer, json!("from tool"));
    assert!(!o.vars.contains_key("after"));
}

#[test]
fn names_that_are_substrings_of_final_answer_do_not_end_the_run() {
    let mut b = B::new();
    for (i, name) in [
        "a",
        "i",
        "s",
        "answer",
        "final",
        "final_answer_draft",
        "_",
        "n",
    ]
    .into_iter()
    .enumerate()
    {
        let c = b.c(json!(i));
        b.set(i as i64, name, c);
    }
    let t = b.t("${a}${i}${s}${answer}${final}${final_answer_draft}");
    b.set(20, "final_answer", t);
    let o = run_ok(&b.build());
    assert_eq!(o.final_answer, json!("012345"));
    assert_eq!(o.steps, 9);
}

#[test]
fn falling_off_the_end_fails() {
    let mut b = B::new();
    let c = b.c(json!(1));
    b.set(0, "x", c);
    b.nop(1);
    let e = run_err(&b.build(), Limits::default());
    assert_eq!(e.message, "plan ended without setting final_answer");
    assert_eq!((e.pc, e.seq_no, e.line), (Some(1), Some(1), Some(11)));
    assert_eq!(
        e.to_string(),
        "plan ended without setting final_answer (seq_no 1, line 11)"
    );
}

#[test]
fn a_finished_or_failed_vm_keeps_its_halt() {
    let mut b = B::new();
    let c = b.c(json!("x"));
    b.set(0, "final_answer", c);
    let prog = b.build();
    let mut vm = Vm::new(&prog, Limits::default());
    let first = vm.run();
    assert!(matches!(first, Halt::Done(_)));
    assert_eq!(vm.run(), first);

    let mut b = B::new();
    b.nop(0);
    let prog = b.build();
    let mut vm = Vm::new(&prog, Limits::default());
    let first = vm.run();
    assert!(matches!(first, Halt::Failed(_)));
    assert_eq!(vm.run(), first);
}

#[test]
fn tracing_records_steps_stores_and_jumps() {
    let prog = counter_loop();
    let mut vm = Vm::new(&prog, Limits::default());
    vm.set_tracing(true);
    let (halt, _) = drive(&mut vm, loop_host);
    assert!(matches!(halt, Halt::Done(_)));
    let events = vm.take_events();
    assert!(vm.take_events().is_empty(), "drained");
    assert_eq!(
        events[0],
        Event::Step {
            pc: 0,
            seq_no: Some(0),
            op: "set i".into()
        }
    );
    assert_eq!(
        events[1],
        Event::VarSet {
            name: "i".into(),
            preview: "0".into(),
            bytes: 16,
            value: None,
        }
    );
    assert_eq!(
        events[2],
        Event::Step {
            pc: 1,
            seq_no: Some(1),
            op: "call search".into()
        }
    );
    let jumps: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e, Event::Jump { .. }))
        .collect();
    assert_eq!(jumps.len(), 3);
    assert_eq!(
        jumps[0],
        &Event::Jump {
            from_seq: Some(3),
            to_seq: Some(1),
            taken: Some(true)
        }
    );
    assert_eq!(
        jumps[2],
        &Event::Jump {
            from_seq: Some(3),
            to_seq: Some(4),
            taken: Some(false)
        }
    );
    let steps = events
        .iter()
        .filter(|e| matches!(e, Event::Step { .. }))
        .count();
    assert_eq!(steps, 11);
    // Events serialize as tagged JSON lines for --trace.
    assert_eq!(
        serde_json::to_string(&events[1]).unwrap(),
        r#"{"event":"var_set","name":"i","preview":"0","bytes":16}"#
    );

    // Off by default.
    let mut vm = Vm::new(&prog, Limits::default());
    drive(&mut vm, loop_host);
    assert!(vm.take_events().is_empty());

    // A host that reads only values: no preview next to a value it gets, a preview where
    // the value is over its cap.
    let var_sets = |cap: u64| {
        let mut vm = Vm::new(&prog, Limits::default());
        vm.set_tracing(true);
        vm.set_trace_values(cap);
        vm.set_trace_previews(false);
        drive(&mut vm, loop_host);
        vm.take_events()
            .into_iter()
            .filter(|e| matches!(e, Event::VarSet { .. }))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        var_sets(1 << 20)[0],
        Event::VarSet {
            name: "i".into(),
            preview: String::new(),
            bytes: 16,
            value: Some(json!(0)),
        }
    );
    assert_eq!(
        var_sets(8)[0],
        Event::VarSet {
            name: "i".into(),
            preview: "0".into(),
            bytes: 16,
            value: None,
        }
    );
}

/// The first `Done` hands the variables over (moved, not copied); the finished VM keeps
/// answering `Done` with the same answer and step count.
#[test]
fn done_hands_variables_over_once() {
    let mut b = B::new();
    let (c1, c2) = (b.c(json!("kept")), b.c(json!([1, 2])));
    b.set(0, "x", c2);
    b.assign(1, vec![("final_answer", c1)]);
    let prog = b.build();
    let mut vm = Vm::new(&prog, Limits::default());
    vm.set_var("goal", json!("g")).unwrap();
    let Halt::Done(first) = vm.run() else {
        panic!("expected Done")
    };
    assert_eq!(first.final_answer, json!("kept"));
    let names: Vec<&str> = first.vars.keys().collect();
    assert_eq!(names, ["x", "final_answer", "goal"]);
    let Halt::Done(again) = vm.run() else {
        panic!("expected Done again")
    };
    assert_eq!(again.final_answer, first.final_answer);
    assert_eq!(again.steps, first.steps);
    assert_eq!(again.vars.keys().collect::<Vec<_>>(), ["final_answer"]);
    // What the finished VM still holds is what it charges.
    assert_eq!(vm.state().bytes(), 16 + "kept".len() as u64);
}
