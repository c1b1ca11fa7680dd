//! A suspended run saved as JSON continues in a fresh VM with the same outcome; a saved
//! state that does not match the program is refused.

mod common;
use common::*;
use plan_bytecode::Instr;
use plan_vm::{Halt, Limits, Vm, VmState};
use serde_json::{Value, json};

fn program() -> plan_bytecode::ValidatedProgram {
    let mut b = B::new();
    let z = b.c(json!(0));
    b.set(0, "i", z);
    let q = b.t("q${i}");
    let body = b.call(1, "search", vec![("q", q)], &["hits", "note"]);
    let inc = b.arith(vec![A::R("i"), A::N(json!(1)), A::Add], "${i} + 1");
    b.set(2, "i", inc);
    let p = b.t("again after ${i}?");
    let br = b.branch(3, p, None, 0, 0);
    let t = b.t("${i} ${hits} ${note}");
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

fn host(r: &plan_vm::ToolRequest) -> Result<Value, String> {
    if r.tool == "jmp_condition" {
        let again = r.args["prompt"] != json!("again after 3?");
        return Ok(json!(if again { "True" } else { "false." }));
    }
    Ok(json!(format!(
        "```json\n{{\"hits\": [\"{}\"], \"note\": 1.5}}\n```",
        r.args["q"].as_str().unwrap()
    )))
}

#[test]
fn saved_state_round_trips_mid_run() {
    let prog = program();
    let mut straight = Vm::new(&prog, Limits::default());
    let (Halt::Done(want), _) = drive(&mut straight, host) else {
        panic!()
    };
    assert_eq!(want.final_answer, json!(r#"3 ["q2"] 1.5"#));

    // The search and the loop condition are independent: both go out in one yield.
    let mut vm = Vm::new(&prog, Limits::default());
    let Halt::Yield(first) = vm.run() else {
        panic!()
    };
    let tools: Vec<&str> = first.iter().map(|r| r.tool.as_str()).collect();
    assert_eq!(tools, ["search", "jmp_condition"]);

    // Save after every yield with none, the first, or all of its requests answered;
    // restore into a new VM, re-send what is unanswered, continue.
    for save_after in 1..=4 {
        for answer_first in 0..=2usize {
            let mut vm = Vm::new(&prog, Limits::default());
            let mut yields = 0;
            let outcome = loop {
                match vm.run() {
                    Halt::Yield(reqs) => {
                        yields += 1;
                        if yields != save_after {
                            for r in &reqs {
                                vm.resume(r.id, host(r)).unwrap();
                            }
                            continue;
                        }
                        let (now, later) = reqs.split_at(answer_first.min(reqs.len()));
                        for r in now {
                            vm.resume(r.id, host(r)).unwrap();
                        }
                        let text = serde_json::to_string(vm.state()).unwrap();
                        drop(vm);
                        let state: VmState = serde_json::from_str(&text).unwrap();
                        let unanswered = state.unanswered();
                        vm = Vm::from_state(&prog, state, Limits::default()).unwrap();
                        assert_eq!(unanswered, later);
                        for r in &unanswered {
                            vm.resume(r.id, host(r)).unwrap();
                        }
                    }
                    Halt::Done(o) => break o,
                    Halt::Failed(e) => panic!("{e}"),
                }
            };
            assert_eq!(
                outcome, want,
                "saved after yield {save_after}, {answer_first} answered"
            );
        }
    }
}

#[test]
fn mismatched_state_is_refused() {
    let prog = program();
    let mut vm = Vm::new(&prog, Limits::default());
    let Halt::Yield(_) = vm.run() else { panic!() };
    let text = serde_json::to_string(vm.state()).unwrap();

    let mut b = B::new();
    let c = b.c(json!(1));
    b.set(0, "final_answer", c);
    let other = b.build();
    let state: VmState = serde_json::from_str(&text).unwrap();
    let e = Vm::from_state(&other, state, Limits::default())
        .err()
        .expect("refused");
    assert!(
        e.message.contains("does not match the program"),
        "{}",
        e.message
    );

    // A pending request pointing at a non-call instruction.
    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["pending"][0]["request"]["pc"] = json!(0);
    let state: VmState = serde_json::from_value(v).unwrap();
    assert!(Vm::from_state(&prog, state, Limits::default()).is_err());

    // A pc beyond the program.
    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["pc"] = json!(99);
    let state: VmState = serde_json::from_value(v).unwrap();
    assert!(Vm::from_state(&prog, state, Limits::default()).is_err());

    // A request for an instruction already committed, and two for one instance.
    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["steps"] = json!(5);
    let state: VmState = serde_json::from_value(v).unwrap();
    assert!(Vm::from_state(&prog, state, Limits::default()).is_err());
    let mut v: Value = serde_json::from_str(&text).unwrap();
    let p0 = v["pending"][0].clone();
    v["pending"][1]["request"]["instance"] = p0["request"]["instance"].clone();
    let state: VmState = serde_json::from_value(v).unwrap();
    let e = Vm::from_state(&prog, state, Limits::default())
        .err()
        .unwrap();
    assert!(e.message.contains("two pending requests"), "{}", e.message);
}

/// A state names its program by fingerprint and its format by number: another program,
/// even one with the same slots and code shape, or another format, is refused by name.
#[test]
fn state_of_another_program_or_format_is_refused_by_name() {
    let prog = program();
    let mut vm = Vm::new(&prog, Limits::default());
    let Halt::Yield(_) = vm.run() else { panic!() };
    assert_eq!(vm.state().program_fingerprint(), prog.fingerprint());
    let text = serde_json::to_string(vm.state()).unwrap();
    let restore = |v: Value, p: &plan_bytecode::ValidatedProgram| {
        let state: VmState = serde_json::from_value(v).unwrap();
        Vm::from_state(p, state, Limits::default())
            .err()
            .map(|e| e.message)
    };
    let saved: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(restore(saved.clone(), &prog), None);

    // The same program with one constant changed: same slots, same code, other plan.
    let mut changed = prog.program().clone();
    changed.consts[0] = json!(7);
    let changed = plan_bytecode::validate(changed).unwrap();
    assert_ne!(changed.fingerprint(), prog.fingerprint());
    let e = restore(saved.clone(), &changed).expect("refused");
    assert!(e.contains("belongs to another program"), "{e}");

    // Debug info is not part of it: a stripped program continues the run.
    let mut stripped = prog.program().clone();
    stripped.debug = None;
    let stripped = plan_bytecode::validate(stripped).unwrap();
    assert_eq!(stripped.fingerprint(), prog.fingerprint());

    for (format, says) in [
        (json!(99), "by a newer planvm"),
        (json!(0), "by an older planvm"),
    ] {
        let mut v = saved.clone();
        v["format"] = format;
        let e = restore(v, &prog).expect("refused");
        assert!(e.contains(says), "{e}");
    }
    let mut v = saved;
    v.as_object_mut().unwrap().remove("format");
    let e = restore(v, &prog).expect("refused");
    assert!(e.contains("by an older planvm"), "{e}");
}

/// An `OwnedVm` owns its program: it can be kept past the scope that built the program,
/// moved to another thread between two calls, and continued from its state.
#[test]
fn an_owned_vm_keeps_its_program_alive_across_threads() {
    use plan_vm::{Halt, Limits, OwnedVm};
    use std::sync::Arc;

    fn start() -> OwnedVm {
        let mut b = B::new();
        let q = b.c(serde_json::json!("q"));
        b.call(0, "vector_search", vec![("query", q)], &["chunks"]);
        let r = b.r("chunks");
        b.set(1, "final_answer", r);
        // NB: the program goes out of this scope; the run keeps it.
        OwnedVm::new(Arc::new(b.build()), Limits::default())
    }

    let mut run = start();
    let Halt::Yield(reqs) = run.with(|vm| vm.run()) else {
        panic!("expected a request")
    };
    let id = reqs[0].id;
    let saved = run.state().clone();
    let program = run.program().clone();
    let handle = std::thread::spawn(move || {
        run.with(|vm| vm.resume(id, Ok(serde_json::json!("answer"))))
            .unwrap();
        run.with(|vm| vm.run())
    });
    match handle.join().unwrap() {
        Halt::Done(out) => assert_eq!(out.final_answer, serde_json::json!("answer")),
        other => panic!("{other:?}"),
    }
    // The saved state continues as a second, independent run of the same program.
    let mut again = OwnedVm::from_state(program, saved, Limits::default()).unwrap();
    again
        .with(|vm| vm.resume(id, Ok(serde_json::json!("other"))))
        .unwrap();
    assert!(matches!(again.with(|vm| vm.run()), Halt::Done(o) if o.final_answer == "other"));
}
