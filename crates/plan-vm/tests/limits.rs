//! Every limit fails the run with a clear message and the instruction's seq_no, and a
//! doubling loop stops on the byte limit without allocating past it.

mod common;
use common::*;
use plan_bytecode::Instr;
use plan_vm::{Halt, Limits};
use serde_json::json;

#[test]
fn step_limit() {
    let mut b = B::new();
    b.nop(0);
    b.jump(1, 0);
    let limits = Limits {
        max_steps: 100,
        ..Limits::default()
    };
    let e = run_err(&b.build(), limits);
    assert_eq!(e.code, plan_vm::ErrorCode::StepLimit);
    assert!(e.message.contains("max_steps = 100"), "{}", e.message);
    assert!(e.message.contains("--max-steps"), "{}", e.message);
    // Step 101 would be the Nop at pc 0.
    assert_eq!((e.pc, e.seq_no), (Some(0), Some(0)));
}

#[test]
fn a_step_slice_pauses_the_run_without_changing_it() {
    // `n = 0; loop { n = n + 1 }` until the step limit, with no tool call at all.
    let mut b = B::new();
    let zero = b.c(json!(0));
    b.set(0, "n", zero);
    let top = b.here();
    let n_plus_1 = b.arith(vec![A::R("n"), A::N(json!(1)), A::Add], "${n} + 1");
    b.set(1, "n", n_plus_1);
    b.jump(2, top);
    let prog = b.build();
    let limits = Limits {
        max_steps: 1_000,
        ..Limits::default()
    };
    let mut whole = plan_vm::Vm::new(&prog, limits.clone());
    let Halt::Failed(want) = whole.run() else {
        panic!("the loop ends on the step limit")
    };
    let mut sliced = plan_vm::Vm::new(&prog, limits);
    sliced.set_step_slice(Some(64));
    let mut pauses = 0;
    let got = loop {
        match sliced.run() {
            Halt::Yield(reqs) => {
                assert!(reqs.is_empty() && sliced.paused());
                assert!(sliced.state().steps() <= 64 * (pauses + 1));
                pauses += 1;
            }
            Halt::Failed(e) => break e,
            Halt::Done(o) => panic!("{o:?}"),
        }
    };
    assert_eq!(pauses, 1_000 / 64);
    assert_eq!(got, want);
    // The step count stops at the limit, as the message says.
    assert_eq!(sliced.state().steps(), 1_000);
    assert!(
        got.message.contains("executed 1000 instructions"),
        "{}",
        got.message
    );
}

#[test]
fn default_step_limit_is_ten_thousand() {
    let mut b = B::new();
    b.jump(0, 0);
    let e = run_err(&b.build(), Limits::default());
    assert!(
        e.message.contains("executed 10000 instructions"),
        "{}",
        e.message
    );
}

/// `x = "ab"; loop { x = "${x}${x}" }`.
fn doubling() -> plan_bytecode::ValidatedProgram {
    let mut b = B::new();
    let c = b.c(json!("ab"));
    b.set(0, "x", c);
    let t = b.t("${x}${x}");
    let body = b.set(1, "x", t);
    b.jump(2, body);
    b.build()
}

#[test]
fn doubling_string_stops_on_the_byte_limit() {
    // NB: 25 doublings reach the limit; one that slipped past it would exhaust memory.
    let e = run_err(&doubling(), Limits::default());
    assert!(
        e.message.contains("interpolated text would be"),
        "{}",
        e.message
    );
    assert!(
        e.message.contains(&format!("{}", 16u64 << 20)),
        "{}",
        e.message
    );
    assert_eq!(e.seq_no, Some(1));
}

/// The text is checked piece by piece while it is built; the error still gives the exact
/// length the whole template would have had.
#[test]
fn a_value_of_exactly_the_limit_fits_and_one_more_byte_is_reported_as_such() {
    // `x = "${a}!"`: a string value is charged its length plus 16, so with a limit of
    // 1,000 bytes its text may hold 984.
    let run = |a_len: usize| {
        let mut b = B::new();
        let a = b.t("${a}!");
        b.set(0, "final_answer", a);
        let prog = b.build();
        let limits = Limits {
            max_value_bytes: 1000,
            ..Limits::default()
        };
        let mut vm = plan_vm::Vm::new(&prog, limits);
        vm.set_var("a", json!("y".repeat(a_len))).unwrap();
        vm.run()
    };
    assert!(matches!(run(983), Halt::Done(_)), "984 bytes of text fit");
    let Halt::Failed(e) = run(984) else {
        panic!("985 bytes of text do not")
    };
    assert!(
        e.message.starts_with(
            "interpolated text would be 985 bytes, over the 984 bytes one value's text may hold"
        ),
        "{}",
        e.message
    );
}

#[test]
fn template_error_gives_the_exact_would_be_length() {
    let limits = Limits {
        max_value_bytes: 1000,
        ..Limits::default()
    };
    // "ab" doubles to 512 bytes (528 charged, fits), then 1,024 bytes (over 1,000 - 16).
    let e = run_err(&doubling(), limits);
    assert!(
        e.message
            .starts_with("interpolated text would be 1024 bytes, over the 984 bytes one value's text may hold (max_value_bytes / max_total_bytes = 1000, less 16"),
        "{}",
        e.message
    );
}

#[test]
fn total_bytes_limit_across_variables() {
    // Each value fits the per-value limit; together they exceed the total.
    let mut b = B::new();
    let c = b.c(json!("x".repeat(400)));
    b.set(0, "a", c);
    let t = b.t("${a}");
    b.set(1, "b", t);
    let t = b.t("${a}!");
    b.set(2, "c", t);
    let c = b.c(json!(1));
    b.set(3, "final_answer", c);
    let limits = Limits {
        max_total_bytes: 1000,
        max_value_bytes: 500,
        ..Limits::default()
    };
    let e = run_err(&b.build(), limits);
    assert!(e.message.contains("max_total_bytes"), "{}", e.message);
    assert!(
        e.message.contains("over the limit of 1000 bytes"),
        "{}",
        e.message
    );
    assert_eq!(e.seq_no, Some(2));
}

#[test]
fn overwriting_a_variable_releases_its_bytes() {
    let mut b = B::new();
    let c = b.c(json!("x".repeat(400)));
    let first = b.set(0, "a", c);
    let t = b.arith(vec![A::R("n"), A::N(json!(1)), A::Add], "${n} + 1");
    b.set(1, "n", t);
    let c = b.c(json!("x".repeat(401)));
    b.set(2, "a", c);
    let br_prompt = b.t("${n}");
    let br = b.branch(3, br_prompt, None, first, first);
    let c = b.c(json!("ok"));
    let end = b.set(4, "final_answer", c);
    b.patch(
        br,
        Instr::Branch {
            cond: 0,
            if_true: first,
            if_false: end,
        },
    );
    let limits = Limits {
        max_total_bytes: 1000,
        max_value_bytes: 1000,
        ..Limits::default()
    };
    let mut rounds = 0;
    let prog = b.build();
    let mut vm = plan_vm::Vm::new(&prog, limits);
    vm.set_var("n", json!(0)).unwrap();
    let (halt, _) = drive(&mut vm, |_| {
        rounds += 1;
        Ok(json!(rounds < 20))
    });
    assert!(matches!(halt, plan_vm::Halt::Done(_)), "{halt:?}");
}

#[test]
fn per_value_limit_on_tool_output() {
    let mut b = B::new();
    b.call(7, "llm_generate", vec![], &["big"]);
    let c = b.c(json!(1));
    b.set(8, "final_answer", c);
    let limits = Limits {
        max_value_bytes: 1000,
        ..Limits::default()
    };
    let e = run_err_with(&b.build(), limits, |_| Ok(json!("y".repeat(2000))));
    assert!(
        e.message.contains("value for `big` is 2016 bytes"),
        "{}",
        e.message
    );
    assert!(e.message.contains("max_value_bytes"), "{}", e.message);
    assert_eq!(e.seq_no, Some(7));
}

#[test]
fn arrays_of_big_references_are_bounded_while_built() {
    // `x = [${x}, ${x}]` in a loop doubles a structure instead of a string.
    let mut b = B::new();
    let c = b.c(json!("seed"));
    b.set(0, "x", c);
    let (r1, r2) = (b.r("x"), b.r("x"));
    let arr = b.array(vec![r1, r2]);
    let body = b.set(1, "x", arr);
    b.jump(2, body);
    let e = run_err(
        &b.build(),
        Limits {
            max_steps: 1_000_000,
            ..Limits::default()
        },
    );
    // Depth grows by one per round: the depth cap (100) or the byte cap ends it.
    assert!(
        e.message.contains("levels deep") || e.message.contains("max_value_bytes"),
        "{}",
        e.message
    );
    assert_eq!(e.seq_no, Some(1));
}

#[test]
fn deep_tool_output_is_refused() {
    let mut b = B::new();
    b.call(0, "t", vec![], &["deep"]);
    let c = b.c(json!(1));
    b.set(1, "final_answer", c);
    let mut deep = json!(0);
    for _ in 0..120 {
        deep = json!([deep]);
    }
    let e = run_err_with(&b.build(), Limits::default(), |_| Ok(deep.clone()));
    assert!(
        e.message.contains("nested more than 100 levels"),
        "{}",
        e.message
    );
}

/// `s = "${s}..."` extends the stored string in place; the result, the other values of
/// the same assign, and the limit error are exactly those of building the text anew.
#[test]
fn appending_in_place_changes_nothing_but_the_cost() {
    // s = "a"; 3 times { old = "${s}", s = "${s}-${n}", n = "${n}!" }; final_answer = ...
    let mut b = B::new();
    let a = b.c(json!("a"));
    b.set(0, "s", a);
    let dot = b.c(json!("."));
    b.set(1, "n", dot);
    for seq in 2..5 {
        let old = b.t("${s}");
        let grown = b.t("${s}-${n}");
        let bang = b.t("${n}!");
        b.assign(seq, vec![("old", old), ("s", grown), ("n", bang)]);
    }
    let out = b.t("${s}|${old}|${n}");
    b.set(5, "final_answer", out);
    let o = run_ok(&b.build());
    assert_eq!(o.final_answer, json!("a-.-.!-.!!|a-.-.!|.!!!"));

    // A loop appending 10 bytes a turn stops on the byte limit with the exact length.
    let mut b = B::new();
    let empty = b.c(json!(""));
    b.set(0, "s", empty);
    let top = b.here();
    let grow = b.t("${s}abcdefghij");
    b.set(1, "s", grow);
    b.jump(2, top);
    let limits = Limits {
        max_value_bytes: 1000,
        max_steps: 1_000_000,
        ..Limits::default()
    };
    let e = run_err(&b.build(), limits);
    assert!(
        e.message.starts_with(
            "interpolated text would be 990 bytes, over the 984 bytes one value's text may hold"
        ),
        "{}",
        e.message
    );
    assert_eq!(e.seq_no, Some(1));
}

/// An assign whose first target appends in place: its values are still computed in order
/// (the first error is the first target's) and a failed store leaves the text as it was.
#[test]
fn appending_in_place_fails_as_building_anew_does() {
    let build = || {
        let mut b = B::new();
        let s = b.t("${s}${big}");
        let t = b.t("${big}${big}");
        b.assign(0, vec![("s", s), ("t", t)]);
        b.build()
    };
    let prog = build();
    let run = |limits: Limits| {
        let mut vm = plan_vm::Vm::new(&prog, limits);
        vm.set_var("s", json!("aaaaaa")).unwrap();
        vm.set_var("big", json!("b".repeat(480))).unwrap();
        let Halt::Failed(e) = vm.run() else {
            panic!("fails")
        };
        let s = prog.slot_of("s").unwrap();
        (e, vm.state().slot(s).map(plan_value::Val::to_value))
    };
    // Both texts are over the 484 bytes a value's text may hold here: the error is the
    // first target's.
    let (e, s) = run(Limits {
        max_value_bytes: 500,
        ..Limits::default()
    });
    assert!(
        e.message
            .starts_with("interpolated text would be 486 bytes, over the 484 bytes"),
        "{}",
        e.message
    );
    assert_eq!(s, Some(json!("aaaaaa")));
    // The values fit, the total does not, from the first store on: `s` keeps its text.
    let (e, s) = run(Limits {
        max_total_bytes: 990,
        ..Limits::default()
    });
    assert!(
        e.message.starts_with("variables would hold 998 bytes"),
        "{}",
        e.message
    );
    assert_eq!(s, Some(json!("aaaaaa")));
}

/// A hand-made program may assign one slot twice in one instruction: the last value wins
/// and is built from the slot's value before the instruction, never appended in place to
/// the earlier target's value.
#[test]
fn a_slot_assigned_twice_is_never_appended_in_place() {
    let mut b = B::new();
    let x = b.c(json!("x"));
    let grown = b.t("${s}!");
    b.assign(0, vec![("s", x), ("s", grown)]);
    let out = b.t("${s}");
    b.set(1, "final_answer", out);
    let prog = b.build();
    let mut vm = plan_vm::Vm::new(&prog, Limits::default());
    vm.set_var("s", json!("ab")).unwrap();
    let Halt::Done(o) = vm.run() else {
        panic!("runs")
    };
    assert_eq!(o.final_answer, json!("ab!"));
}
