//! Look-ahead issue with in-order commit: which requests go out together, and that the
//! result is the sequential one whatever order the host answers in.

mod common;
use common::*;
use plan_bytecode::{Effects, Instr, ValidatedProgram};
use std::sync::Arc;

use plan_vm::{Halt, Limits, Outcome, RunError, ToolRequest, Vm};
use serde_json::{Value, json};

/// Which outstanding request the mock host answers next.
#[derive(Clone, Copy, Debug)]
enum Order {
    /// Oldest first.
    Fifo,
    /// Newest first (the reverse of issue order).
    Lifo,
    /// Pseudo-random, from a seed.
    Random(u64),
}

/// One run against a host that answers one request at a time in `order`.
struct Trace {
    halt: Halt,
    /// The requests of each yield, in order.
    yields: Vec<Vec<Arc<ToolRequest>>>,
    /// Most requests outstanding at once.
    peak: usize,
}

fn drive_in(
    prog: &ValidatedProgram,
    limits: Limits,
    order: Order,
    answer: impl Fn(&ToolRequest) -> Result<Value, String>,
) -> Trace {
    let mut vm = Vm::new(prog, limits);
    let mut outstanding: Vec<Arc<ToolRequest>> = Vec::new();
    let mut yields = Vec::new();
    let mut peak = 0;
    let mut rng = match order {
        Order::Random(seed) => seed | 1,
        _ => 1,
    };
    for _ in 0..10_000 {
        match vm.run() {
            Halt::Yield(reqs) => {
                outstanding.extend(reqs.iter().cloned());
                peak = peak.max(outstanding.len());
                yields.push(reqs);
                assert!(
                    !outstanding.is_empty(),
                    "VM waits but nothing is outstanding"
                );
                let i = match order {
                    Order::Fifo => 0,
                    Order::Lifo => outstanding.len() - 1,
                    Order::Random(_) => {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        (rng % outstanding.len() as u64) as usize
                    }
                };
                let r = outstanding.remove(i);
                vm.resume(r.id, answer(&r)).unwrap();
            }
            halt => {
                // Whatever is still out is exactly what the VM reports as abandoned.
                assert_eq!(vm.abandoned(), outstanding);
                return Trace { halt, yields, peak };
            }
        }
    }
    panic!("run did not end");
}

fn sequential(
    prog: &ValidatedProgram,
    answer: impl Fn(&ToolRequest) -> Result<Value, String>,
) -> Trace {
    let limits = Limits {
        max_concurrency: 1,
        ..Limits::default()
    };
    let t = drive_in(prog, limits, Order::Fifo, answer);
    assert_eq!(t.peak, 1, "max_concurrency = 1 is one call at a time");
    t
}

/// Answers depend only on the request, never on timing: `tool(args)`.
fn echo(r: &ToolRequest) -> Result<Value, String> {
    Ok(json!(format!(
        "{}({})",
        r.tool,
        Value::Object(r.args.to_map())
    )))
}

fn tools(reqs: &[Arc<ToolRequest>]) -> Vec<&str> {
    reqs.iter().map(|r| r.tool.as_str()).collect()
}

fn outcome(t: &Trace) -> &Outcome {
    match &t.halt {
        Halt::Done(o) => o,
        other => panic!("expected Done, got {other:?}"),
    }
}

fn failure(t: &Trace) -> &RunError {
    match &t.halt {
        Halt::Failed(e) => e,
        other => panic!("expected Failed, got {other:?}"),
    }
}

/// 4 aspects × (knowledge graph, vector search) → 4 syntheses → final answer.
fn four_aspects() -> ValidatedProgram {
    let mut b = B::new();
    let mut seq = 0;
    for i in 0..4 {
        let q = b.c(json!(format!("aspect {i}")));
        b.call(
            seq,
            "retrieve_knowledge_graph",
            vec![("query", q)],
            &[&format!("kg{i}")],
        );
        let q = b.c(json!(format!("aspect {i}")));
        b.call(
            seq + 1,
            "vector_search",
            vec![("query", q)],
            &[&format!("vs{i}")],
        );
        seq += 2;
    }
    for i in 0..4 {
        let p = b.t(&format!("Synthesize ${{kg{i}}} and ${{vs{i}}}"));
        b.call(
            seq,
            "llm_generate",
            vec![("prompt", p)],
            &[&format!("syn{i}")],
        );
        seq += 1;
    }
    let p = b.t("Answer from ${syn0} ${syn1} ${syn2} ${syn3}");
    b.call(seq, "llm_generate", vec![("prompt", p)], &["final_answer"]);
    b.build()
}

#[test]
fn four_aspects_issue_all_retrievals_at_once() {
    let prog = four_aspects();
    let want = sequential(&prog, echo);
    assert_eq!(want.yields.len(), 13);
    for order in [
        Order::Fifo,
        Order::Lifo,
        Order::Random(7),
        Order::Random(99),
    ] {
        let t = drive_in(&prog, Limits::default(), order, echo);
        assert_eq!(outcome(&t), outcome(&want), "{order:?}");
        let first = &t.yields[0];
        assert_eq!(first.len(), 8, "{order:?}: {:?}", tools(first));
        assert!(first.iter().all(|r| r.tool != "llm_generate"), "{order:?}");
        // The requests themselves (args, pc, seq_no) are the sequential ones.
        let mut got: Vec<_> = t
            .yields
            .concat()
            .into_iter()
            .map(|r| (r.pc, r.args.clone()))
            .collect();
        let mut exp: Vec<_> = want
            .yields
            .concat()
            .into_iter()
            .map(|r| (r.pc, r.args.clone()))
            .collect();
        got.sort_by_key(|x| x.0);
        exp.sort_by_key(|x| x.0);
        assert_eq!(got, exp, "{order:?}");
    }
    // Fifo answers: every synthesis starts as soon as its two retrievals are in.
    let t = drive_in(&prog, Limits::default(), Order::Fifo, echo);
    let syn_starts: Vec<usize> = t
        .yields
        .iter()
        .enumerate()
        .filter(|(_, y)| y.iter().any(|r| r.tool == "llm_generate"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(syn_starts.len(), 5, "4 syntheses, then the final call");
}

#[test]
fn max_concurrency_caps_outstanding_requests() {
    let prog = four_aspects();
    let want = sequential(&prog, echo);
    for cap in [2, 3, 5] {
        let limits = Limits {
            max_concurrency: cap,
            ..Limits::default()
        };
        let t = drive_in(&prog, limits, Order::Random(cap as u64), echo);
        assert_eq!(outcome(&t), outcome(&want));
        assert_eq!(t.yields[0].len(), cap as usize);
        assert!(t.peak <= cap as usize, "peak {} over {cap}", t.peak);
    }
    let mut vm = Vm::new(&prog, Limits::default());
    vm.set_max_concurrency(1);
    let Halt::Yield(first) = vm.run() else {
        panic!()
    };
    assert_eq!(first.len(), 1);
}

#[test]
fn assigns_between_calls_are_evaluated_ahead() {
    // a = t1(); k = "key"; q = "${a}!"; b = t2(${k}); c = t3(${q}); final = ...
    let mut b = B::new();
    b.call(0, "t1", vec![], &["a"]);
    let c = b.c(json!("key"));
    b.set(1, "k", c);
    let t = b.t("${a}!");
    b.set(2, "q", t);
    let r = b.r("k");
    b.call(3, "t2", vec![("x", r)], &["b"]);
    let r = b.r("q");
    b.call(4, "t3", vec![("x", r)], &["c"]);
    let t = b.t("${b} ${c}");
    b.set(5, "final_answer", t);
    let prog = b.build();
    let want = sequential(&prog, echo);
    let t = drive_in(&prog, Limits::default(), Order::Fifo, echo);
    assert_eq!(tools(&t.yields[0]), ["t1", "t2"]);
    assert_eq!(t.yields[0][1].args["x"], json!("key"));
    assert_eq!(tools(&t.yields[1]), ["t3"], "t3 waits for t1 (through q)");
    assert_eq!(outcome(&t), outcome(&want));
    for seed in 0..20 {
        let t = drive_in(&prog, Limits::default(), Order::Random(seed), echo);
        assert_eq!(outcome(&t), outcome(&want));
    }
}

#[test]
fn nothing_is_issued_past_an_unresolved_branch() {
    // a = ta(); if cond { b = tb() } else { c = tc() }; final = ...
    let mut b = B::new();
    b.call(0, "ta", vec![], &["a"]);
    let p = b.c(json!("go left?"));
    let br = b.branch(1, p, None, 0, 0);
    let left = b.call(2, "tb", vec![], &["x"]);
    let j = b.jump(2, 0);
    let right = b.call(3, "tc", vec![], &["x"]);
    let end = b.here();
    let t = b.t("${a} ${x}");
    b.set(4, "final_answer", t);
    b.patch(
        br,
        Instr::Branch {
            cond: 0,
            if_true: left,
            if_false: right,
        },
    );
    b.patch(j, Instr::Jump { target: end });
    let prog = b.build();

    let mut vm = Vm::new(&prog, Limits::default());
    let Halt::Yield(first) = vm.run() else {
        panic!()
    };
    assert_eq!(tools(&first), ["ta", "jmp_condition"]);
    // The call's answer alone releases nothing: the branch is still open.
    vm.resume(first[0].id, Ok(json!("A"))).unwrap();
    assert_eq!(vm.run(), Halt::Yield(vec![]));
    vm.resume(first[1].id, Ok(json!(false))).unwrap();
    let Halt::Yield(next) = vm.run() else {
        panic!()
    };
    assert_eq!(tools(&next), ["tc"]);
    vm.resume(next[0].id, Ok(json!("C"))).unwrap();
    let Halt::Done(o) = vm.run() else { panic!() };
    assert_eq!(o.final_answer, json!("A C"));
}

#[test]
fn loop_bodies_overlap_within_an_iteration() {
    // i = 0; loop: x = s1(${i}); y = s2(${i}); i = i + 1; log = "${log}${x}${y}";
    // while cond("${i}"); final = log
    let mut b = B::new();
    let z = b.c(json!(0));
    b.set(0, "i", z);
    let e = b.c(json!(""));
    b.set(0, "log", e);
    let q = b.r("i");
    let body = b.call(1, "s1", vec![("i", q)], &["x"]);
    let q = b.r("i");
    b.call(2, "s2", vec![("i", q)], &["y"]);
    let inc = b.arith(vec![A::R("i"), A::N(json!(1)), A::Add], "${i} + 1");
    b.set(3, "i", inc);
    let t = b.t("${log}[${x}|${y}]");
    b.set(4, "log", t);
    let p = b.t("again after ${i}?");
    let br = b.branch(5, p, None, 0, 0);
    let r = b.r("log");
    let end = b.set(6, "final_answer", r);
    b.patch(
        br,
        Instr::Branch {
            cond: 0,
            if_true: body,
            if_false: end,
        },
    );
    let prog = b.build();
    let answer = |r: &ToolRequest| {
        if r.tool == "jmp_condition" {
            Ok(json!(r.args["prompt"] != json!("again after 4?")))
        } else {
            echo(r)
        }
    };
    let want = sequential(&prog, answer);
    for order in [
        Order::Fifo,
        Order::Lifo,
        Order::Random(3),
        Order::Random(11),
    ] {
        let t = drive_in(&prog, Limits::default(), order, answer);
        assert_eq!(outcome(&t), outcome(&want), "{order:?}");
        // Each iteration: s1, s2 and the condition (it reads only `i`) go out together.
        assert_eq!(tools(&t.yields[0]), ["s1", "s2", "jmp_condition"]);
    }
    assert_eq!(outcome(&want).steps, 2 + 4 * 5 + 1);
}

#[test]
fn write_tools_keep_program_order() {
    // r1(); r2(); w(); r3(); all independent.
    let mut b = B::new();
    b.call(0, "r1", vec![], &["a"]);
    b.call(1, "r2", vec![], &["b"]);
    b.call(2, "w", vec![], &["c"]);
    b.call(3, "r3", vec![], &["d"]);
    let t = b.t("${a}${b}${c}${d}");
    b.set(4, "final_answer", t);
    b.p.tools[2].effects = Effects::Write;
    let prog = b.build();

    let mut vm = Vm::new(&prog, Limits::default());
    let Halt::Yield(first) = vm.run() else {
        panic!()
    };
    assert_eq!(tools(&first), ["r1", "r2"]);
    // Answering the later read is not enough: r1 is still out.
    vm.resume(first[1].id, Ok(json!("B"))).unwrap();
    assert_eq!(vm.run(), Halt::Yield(vec![]));
    vm.resume(first[0].id, Ok(json!("A"))).unwrap();
    let Halt::Yield(next) = vm.run() else {
        panic!()
    };
    assert_eq!(tools(&next), ["w"]);
    vm.resume(next[0].id, Ok(json!("C"))).unwrap();
    let Halt::Yield(next) = vm.run() else {
        panic!()
    };
    assert_eq!(tools(&next), ["r3"]);
    vm.resume(next[0].id, Ok(json!("D"))).unwrap();
    let Halt::Done(o) = vm.run() else { panic!() };
    assert_eq!(o.final_answer, json!("ABCD"));

    // Whatever the answer order, the write call is alone in flight.
    for seed in 0..10 {
        let t = drive_in(&prog, Limits::default(), Order::Random(seed), echo);
        let w_yield = t
            .yields
            .iter()
            .position(|y| tools(y).contains(&"w"))
            .unwrap();
        assert_eq!(tools(&t.yields[w_yield]), ["w"]);
    }
}

#[test]
fn several_calls_writing_one_variable_commit_in_program_order() {
    // x = t1(); x = t2(); y = t3(${x}); final = "${x} ${y}"
    let mut b = B::new();
    b.call(0, "t1", vec![], &["x"]);
    b.call(1, "t2", vec![], &["x"]);
    let r = b.r("x");
    b.call(2, "t3", vec![("x", r)], &["y"]);
    let t = b.t("${x} ${y}");
    b.set(3, "final_answer", t);
    let prog = b.build();
    let answer = |r: &ToolRequest| {
        Ok(match r.tool.as_str() {
            "t1" => json!("one"),
            "t2" => json!("two"),
            _ => json!(format!("got {}", r.args["x"])),
        })
    };
    let want = sequential(&prog, answer);
    assert_eq!(outcome(&want).final_answer, json!(r#"two got "two""#));

    let mut vm = Vm::new(&prog, Limits::default());
    let Halt::Yield(first) = vm.run() else {
        panic!()
    };
    assert_eq!(tools(&first), ["t1", "t2"]);
    // t2's answer settles x for t3 even though t1 (the head) is still out.
    vm.resume(first[1].id, answer(&first[1])).unwrap();
    let Halt::Yield(next) = vm.run() else {
        panic!()
    };
    assert_eq!(tools(&next), ["t3"]);
    assert_eq!(next[0].args["x"], json!("two"));
    for order in [Order::Fifo, Order::Lifo, Order::Random(5)] {
        let t = drive_in(&prog, Limits::default(), order, answer);
        assert_eq!(outcome(&t), outcome(&want), "{order:?}");
    }
}

#[test]
fn earliest_failure_in_program_order_wins() {
    // a = slow(); b = bad1(); c = bad2(); final
    let mut b = B::new();
    b.call(0, "slow", vec![], &["a"]);
    b.call(1, "bad1", vec![], &["b"]);
    b.call(2, "bad2", vec![], &["c"]);
    let t = b.t("${a}${b}${c}");
    b.set(3, "final_answer", t);
    let prog = b.build();
    let answer = |r: &ToolRequest| match r.tool.as_str() {
        "slow" => Ok(json!("A")),
        other => Err(format!("{other} broke")),
    };
    let want = sequential(&prog, answer);
    assert_eq!(tools(&want.yields.concat()), ["slow", "bad1"]);
    let e = failure(&want);
    assert!(
        e.message.contains("tool `bad1` failed: bad1 broke"),
        "{}",
        e.message
    );
    assert_eq!(e.seq_no, Some(1));

    // The later failures arrive first; the run fails only when the head reaches bad1.
    let mut vm = Vm::new(&prog, Limits::default());
    let Halt::Yield(first) = vm.run() else {
        panic!()
    };
    assert_eq!(tools(&first), ["slow", "bad1", "bad2"]);
    vm.resume(first[2].id, answer(&first[2])).unwrap();
    assert_eq!(vm.run(), Halt::Yield(vec![]));
    vm.resume(first[1].id, answer(&first[1])).unwrap();
    assert_eq!(vm.run(), Halt::Yield(vec![]));
    vm.resume(first[0].id, answer(&first[0])).unwrap();
    assert_eq!(vm.run(), Halt::Failed(e.clone()));
    for order in [Order::Fifo, Order::Lifo, Order::Random(1), Order::Random(2)] {
        let t = drive_in(&prog, Limits::default(), order, answer);
        assert_eq!(failure(&t), e, "{order:?}");
    }
}

#[test]
fn failing_head_abandons_requests_issued_ahead() {
    let mut b = B::new();
    b.call(0, "bad", vec![], &["a"]);
    b.call(1, "other", vec![], &["b"]);
    let c = b.c(json!(1));
    b.set(2, "final_answer", c);
    let prog = b.build();
    let mut vm = Vm::new(&prog, Limits::default());
    let Halt::Yield(first) = vm.run() else {
        panic!()
    };
    assert_eq!(tools(&first), ["bad", "other"]);
    assert!(
        vm.abandoned().is_empty(),
        "nothing is abandoned while running"
    );
    vm.resume(first[0].id, Err("down".into())).unwrap();
    let Halt::Failed(e) = vm.run() else { panic!() };
    assert_eq!(e.seq_no, Some(0));
    assert_eq!(vm.abandoned(), [first[1].clone()]);
    // The host may still deliver the late answer: refused, harmlessly.
    assert!(vm.resume(first[1].id, Ok(json!(1))).is_err());
    assert_eq!(vm.run(), Halt::Failed(e));
}

#[test]
fn final_answer_set_early_stops_the_look_ahead() {
    // a = t1(); final_answer = "${a}"; b = t2()   (t2 never runs sequentially)
    let mut b = B::new();
    b.call(0, "t1", vec![], &["a"]);
    let t = b.t("done: ${a}");
    b.set(1, "final_answer", t);
    b.call(2, "t2", vec![], &["b"]);
    let prog = b.build();
    let t = drive_in(&prog, Limits::default(), Order::Lifo, echo);
    assert_eq!(tools(&t.yields.concat()), ["t1"]);
    assert_eq!(outcome(&t).final_answer, json!("done: t1({})"));

    // final_answer = t0(); later = t1(): only t0.
    let mut b = B::new();
    let x = b.c(json!("x"));
    b.set(0, "x", x);
    b.call(1, "t0", vec![], &["final_answer"]);
    b.call(2, "t1", vec![], &["later"]);
    let prog = b.build();
    let t = drive_in(&prog, Limits::default(), Order::Lifo, echo);
    assert_eq!(tools(&t.yields.concat()), ["t0"]);
    assert_eq!(outcome(&t).vars.get("later"), None);
}

#[test]
fn look_ahead_stays_within_the_step_limit() {
    let mut b = B::new();
    for i in 0..6 {
        b.call(i, "t", vec![], &[&format!("v{i}")]);
    }
    let c = b.c(json!(1));
    b.set(6, "final_answer", c);
    let prog = b.build();
    let limits = Limits {
        max_steps: 3,
        ..Limits::default()
    };
    let mut vm = Vm::new(&prog, limits.clone());
    let Halt::Yield(first) = vm.run() else {
        panic!()
    };
    assert_eq!(first.len(), 3, "the 4th call would be step 4 of 3");
    let t = drive_in(&prog, limits, Order::Lifo, echo);
    let e = failure(&t);
    assert!(e.message.contains("max_steps = 3"), "{}", e.message);
    assert_eq!(e.seq_no, Some(3));
}

#[test]
fn oversized_look_ahead_values_stop_the_scan_not_the_run() {
    // big = "${a}${a}" chains ahead of the head must not allocate past the limits; the
    // sequential error still comes from the instruction that overflows, at the head.
    let mut b = B::new();
    b.call(0, "t", vec![], &["h"]);
    let c = b.c(json!("x".repeat(300)));
    b.set(1, "a", c);
    let t = b.t("${a}${a}");
    b.set(2, "a", t);
    let t = b.t("${a}${a}");
    b.set(3, "a", t);
    b.call(4, "t2", vec![], &["z"]);
    let c = b.c(json!(1));
    b.set(5, "final_answer", c);
    let prog = b.build();
    let limits = Limits {
        max_value_bytes: 1000,
        ..Limits::default()
    };
    let mut vm = Vm::new(&prog, limits.clone());
    let Halt::Yield(first) = vm.run() else {
        panic!()
    };
    assert_eq!(tools(&first), ["t"], "nothing issued past the failing set");
    let t = drive_in(&prog, limits, Order::Lifo, echo);
    let e = failure(&t);
    assert!(e.message.contains("interpolated text"), "{}", e.message);
    assert_eq!(e.seq_no, Some(3));
}

#[test]
fn a_run_saved_with_requests_in_flight_continues_elsewhere() {
    let prog = four_aspects();
    let want = sequential(&prog, echo);
    let mut vm = Vm::new(&prog, Limits::default());
    let Halt::Yield(first) = vm.run() else {
        panic!()
    };
    assert_eq!(first.len(), 8);
    // Answer three out of order, then save with five still out.
    for i in [6, 1, 3] {
        vm.resume(first[i].id, echo(&first[i])).unwrap();
    }
    assert_eq!(
        vm.run(),
        Halt::Yield(vec![]),
        "the head (request 0) is still out"
    );
    let text = serde_json::to_string(vm.state()).unwrap();
    drop(vm);
    let state: plan_vm::VmState = serde_json::from_str(&text).unwrap();
    let resend = state.unanswered();
    let ids: Vec<usize> = resend
        .iter()
        .map(|r| first.iter().position(|f| f == r).unwrap())
        .collect();
    assert_eq!(ids, [0, 2, 4, 5, 7]);
    let mut vm = Vm::from_state(&prog, state, Limits::default()).unwrap();
    for r in resend.iter().rev() {
        vm.resume(r.id, echo(r)).unwrap();
    }
    let mut out: Vec<Arc<ToolRequest>> = Vec::new();
    let o = loop {
        match vm.run() {
            Halt::Yield(reqs) => {
                out.extend(reqs);
                let r = out.pop().expect("something outstanding");
                vm.resume(r.id, echo(&r)).unwrap();
            }
            Halt::Done(o) => break o,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(&o, outcome(&want));
}
