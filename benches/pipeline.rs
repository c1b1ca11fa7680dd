//! In-process benchmarks of the pipeline: compile throughput (against serde_json's plain
//! parse of the same text), template interpolation (against plain `String`
//! concatenation), VM dispatch, and the two plan shapes of issue 5 with an instant host.
//! Figures and goals: BENCHMARKS.md. Run: `cargo bench --bench pipeline`.

mod common;

use std::hint::black_box;
use std::time::Duration;

use common::*;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use plan_bytecode::*;
use plan_compiler::{CompileOptions, compile};
use plan_vm::{Halt, Limits, Vm};
use serde_json::{Value, json};

fn compile_throughput(c: &mut Criterion) {
    let big = generated(2000);
    let opts = CompileOptions::default();
    let mut g = c.benchmark_group("compile");
    for (name, src) in [
        ("small", SMALL.to_owned()),
        ("14_step", FOURTEEN_STEP.to_owned()),
        ("2000_instr", big),
    ] {
        g.throughput(Throughput::Bytes(src.len() as u64));
        g.bench_with_input(BenchmarkId::new("planc", name), &src, |b, s| {
            b.iter(|| {
                let c = compile(black_box(s), &opts);
                assert!(c.program.is_some());
                c
            })
        });
        g.bench_with_input(BenchmarkId::new("serde_json_value", name), &src, |b, s| {
            b.iter(|| serde_json::from_str::<Value>(black_box(s)).unwrap())
        });
    }
    g.finish();
}

/// A template of 64 pieces (32 literals of 48 bytes, 32 references to 8 string
/// variables of 16 bytes): ~2 KiB of output per interpolation.
fn interpolation(c: &mut Criterion) {
    let lit = "some literal text between references, 48 bytes.";
    let values: Vec<String> = (0..8).map(|i| format!("value-{i:02}-abcdefg")).collect();
    let mut template = String::new();
    for i in 0..32 {
        template.push_str(lit);
        template.push_str(&format!("${{v{}}}", i % 8));
    }
    let plan = json!([{"seq_no": 0, "type": "assign", "parameters": {"final_answer": template}}]);
    let program = compile_ok(&plan.to_string(), true);
    let expected_len = 32 * lit.len() + 32 * values[0].len();
    let preset: Vec<(String, Value)> = values
        .iter()
        .enumerate()
        .map(|(i, v)| (format!("v{i}"), json!(v)))
        .collect();

    let mut g = c.benchmark_group("interpolation");
    g.throughput(Throughput::Bytes(expected_len as u64));
    g.bench_function("vm_template_2KiB", |b| {
        b.iter(|| {
            let mut vm = Vm::new(&program, Limits::default());
            for (n, v) in &preset {
                vm.set_var(n, v.clone()).unwrap();
            }
            match vm.run() {
                Halt::Done(o) => {
                    debug_assert_eq!(o.final_answer.as_str().map(str::len), Some(expected_len));
                    o
                }
                other => panic!("{other:?}"),
            }
        })
    });
    // Steady state: `t = <template>; jump back`, ended by the step limit, so the cost of
    // a run (Vm::new, presets, outcome) is spread over `LOOPS` interpolations.
    const LOOPS: u64 = 1000;
    let looped = template_loop(lit, 32, 8);
    let limits = Limits {
        max_steps: 2 * LOOPS,
        ..Limits::default()
    };
    g.throughput(Throughput::Bytes(LOOPS * expected_len as u64));
    g.bench_function("vm_template_loop_2KiB", |b| {
        b.iter(|| {
            let mut vm = Vm::new(&looped, limits.clone());
            for (n, v) in &preset {
                vm.set_var(n, v.clone()).unwrap();
            }
            let h = vm.run();
            debug_assert!(matches!(h, Halt::Failed(_)));
            h
        })
    });
    g.throughput(Throughput::Bytes(expected_len as u64));
    // Baseline: the same pieces concatenated into a pre-sized String, nothing else.
    g.bench_function("string_concat_2KiB", |b| {
        b.iter(|| {
            let mut s = String::with_capacity(expected_len);
            for i in 0..32 {
                s.push_str(black_box(lit));
                s.push_str(black_box(&values[i % 8]));
            }
            s
        })
    });
    g.finish();
}

/// `loop { t = "<lit>${v0}<lit>${v1}..."; jump loop }` with `refs` references to `vars`
/// variables `v0..`, set by the caller.
fn template_loop(lit: &str, refs: usize, vars: usize) -> ValidatedProgram {
    let mut consts = vec![json!(lit)];
    let mut slots: Vec<String> = Vec::new();
    let mut refdefs = Vec::new();
    for i in 0..vars {
        consts.push(json!(format!("${{v{i}}}")));
        slots.push(format!("v{i}"));
        refdefs.push(RefDef {
            slot: i as u32,
            path: vec![],
            raw: i as u32 + 1,
        });
    }
    slots.push("t".into());
    slots.push("final_answer".into());
    let pieces = (0..refs)
        .flat_map(|i| [Piece::Lit(0), Piece::Ref((i % vars) as u32)])
        .collect();
    validate(Program {
        consts,
        slots,
        code: vec![
            Instr::Set {
                dst: vars as u32,
                src: Operand::Template(0),
            },
            Instr::Jump { target: 0 },
        ],
        refs: refdefs,
        templates: vec![pieces],
        ..Program::default()
    })
    .unwrap()
}

/// `i = 0; loop { i = ${i} + 1; nop; jump loop }`, ended by the step limit: pure dispatch.
fn dispatch(c: &mut Criterion) {
    let p = Program {
        consts: vec![json!(0), json!(1), json!(" + 1"), json!("${i}")],
        slots: vec!["i".into(), "final_answer".into()],
        code: vec![
            Instr::Set {
                dst: 0,
                src: Operand::Const(0),
            },
            Instr::Set {
                dst: 0,
                src: Operand::Arith(0),
            },
            Instr::Nop,
            Instr::Jump { target: 1 },
        ],
        refs: vec![RefDef {
            slot: 0,
            path: vec![],
            raw: 3,
        }],
        templates: vec![vec![Piece::Ref(0), Piece::Lit(2)]],
        ariths: vec![ArithDef {
            code: vec![
                ArithOp::Ref(0),
                ArithOp::Const(1),
                ArithOp::Bin(plan_value::Op2::Add),
            ],
            fallback: 0,
        }],
        ..Program::default()
    };
    let program = validate(p).unwrap();
    let steps: u64 = 1_000_000;
    let limits = Limits {
        max_steps: steps,
        ..Limits::default()
    };
    let mut g = c.benchmark_group("vm_dispatch");
    g.throughput(Throughput::Elements(steps));
    g.bench_function("arith_jump_loop", |b| {
        b.iter(|| {
            let mut vm = Vm::new(&program, limits.clone());
            let h = vm.run();
            assert!(matches!(h, Halt::Failed(_)), "ends on the step limit");
            h
        })
    });
    g.finish();
}

/// The two plan shapes, run in-process with an instant host: an already compiled
/// and validated program, `Vm::new` + run to completion. Compile time is measured
/// separately (`plan_compile/*`).
fn plan_shapes(c: &mut Criterion) {
    let fourteen = compile_ok(FOURTEEN_STEP, false);
    let thirty_src = thirty_assigns();
    let thirty = compile_ok(&thirty_src, false);
    let answer = json!("A short instant tool answer.");
    let o = run_instant(&thirty, Limits::default(), &answer);
    assert!(
        o.final_answer
            .as_str()
            .is_some_and(|s| s.starts_with("Step 28"))
    );

    let mut g = c.benchmark_group("plan_run");
    g.throughput(Throughput::Elements(1));
    g.bench_function("14_step_calls", |b| {
        b.iter(|| run_instant(&fourteen, Limits::default(), &answer))
    });
    g.bench_function("30_assigns", |b| {
        b.iter(|| run_instant(&thirty, Limits::default(), &answer))
    });
    g.finish();

    let opts = CompileOptions::default();
    let mut g = c.benchmark_group("plan_compile");
    g.throughput(Throughput::Elements(1));
    g.bench_function("14_step_calls", |b| {
        b.iter(|| compile(black_box(FOURTEEN_STEP), &opts))
    });
    g.bench_function("30_assigns", |b| {
        b.iter(|| compile(black_box(&thirty_src), &opts))
    });
    g.finish();
}

fn config() -> Criterion {
    // The machine is shared (2 cores): shorter runs, more samples than the minimum.
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50)
}

criterion_group! {
    name = benches;
    config = config();
    targets = compile_throughput, interpolation, dispatch, plan_shapes
}
criterion_main!(benches);
