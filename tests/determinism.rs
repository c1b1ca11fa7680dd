//! Concurrency never changes a run's result: random plans (loops, branches, several calls
//! writing one variable, failing calls, assigns between calls, write tools, early
//! `final_answer`) give exactly the sequential result (`max_concurrency = 1`) whatever
//! order their tool answers arrive in: same variables, final answer and step count, or
//! the same failure (message, seq_no, line).
//!
//! Plans are generated as JSON text from a seed and compiled by the real compiler. Tool
//! answers are a pure function of the request, so only timing differs between runs. A
//! failing seed reproduces with `seed` printed in the assertion message.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use plan_bytecode::ValidatedProgram;
use plan_compiler::{CompileOptions, compile};
use plan_host::{Backend, Host, HostOptions, RunReport, ToolError, ToolErrorKind, Tracer};
use plan_manifest::Manifest;
use plan_vm::{Halt, Limits, Outcome, RequestKind, RunError, ToolRequest, Vm};
use serde_json::{Map, Value, json};

/// xorshift64*: tiny, seedable, and the same on every platform.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const TOOLS_TOML: &str = r#"
[[tool]]
name = "search"
effects = "read"
params = [ { name = "query", type = "any" } ]

[[tool]]
name = "lookup"
effects = "pure"
params = [ { name = "query", type = "any" } ]

[[tool]]
name = "flaky"
effects = "read"
params = [ { name = "query", type = "any" } ]

[[tool]]
name = "store"
effects = "write"
params = [ { name = "query", type = "any" } ]
"#;

fn manifest() -> Manifest {
    Manifest::from_toml_str(TOOLS_TOML, "determinism.toml").expect("test manifest")
}

const VARS: [&str; 5] = ["a", "b", "c", "d", "e"];

/// Builds one random plan as JSON.
struct Gen {
    rng: Rng,
    instrs: Vec<Value>,
    loops: usize,
}

impl Gen {
    fn seq(&self) -> i64 {
        self.instrs.len() as i64
    }

    fn push(&mut self, ty: &str, params: Value) -> usize {
        let seq = self.seq();
        self.instrs
            .push(json!({"seq_no": seq, "type": ty, "parameters": params}));
        self.instrs.len() - 1
    }

    fn var(&mut self) -> &'static str {
        VARS[self.rng.below(VARS.len())]
    }

    fn text(&mut self) -> String {
        match self.rng.below(4) {
            0 => format!("lit{}", self.rng.below(10)),
            1 => format!("${{{}}}", self.var()),
            _ => format!(
                "{}/${{{}}}/${{{}}}",
                self.rng.below(10),
                self.var(),
                self.var()
            ),
        }
    }

    fn assign(&mut self) {
        let mut p = Map::new();
        match self.rng.below(4) {
            // A swap: every value is read before any is written.
            0 => {
                let (x, y) = (self.var(), self.var());
                if x != y {
                    p.insert(x.into(), json!(format!("${{{y}}}")));
                    p.insert(y.into(), json!(format!("${{{x}}}")));
                }
            }
            1 => {
                p.insert("n".into(), json!("${n} + 1"));
            }
            _ => {
                for _ in 0..=self.rng.below(2) {
                    let x = self.var();
                    let t = self.text();
                    p.insert(x.into(), json!(t));
                }
            }
        }
        if p.is_empty() {
            p.insert("n".into(), json!("${n} * 2"));
        }
        self.push("assign", Value::Object(p));
    }

    fn call(&mut self) {
        let tool = *self.rng.pick(&[
            "search",
            "search",
            "lookup",
            "flaky",
            "store",
            "llm_generate",
        ]);
        let mut outs = vec![self.var()];
        if self.rng.chance(25) {
            let second = self.var();
            if second != outs[0] {
                outs.push(second);
            }
        }
        let arg = if tool == "llm_generate" {
            "prompt"
        } else {
            "query"
        };
        let text = self.text();
        self.push(
            "calling",
            json!({"tool_name": tool, "tool_params": {arg: text}, "output_vars": outs}),
        );
    }

    fn block(&mut self, depth: usize) {
        match self.rng.below(if depth < 2 { 10 } else { 6 }) {
            0..=1 => self.assign(),
            2..=5 => self.call(),
            6..=7 => self.branch(depth),
            _ => self.looped(depth),
        }
    }

    fn blocks(&mut self, depth: usize, max: usize) {
        for _ in 0..=self.rng.below(max) {
            self.block(depth);
        }
    }

    /// `if cond { A; jmp end } else { B }`; A may end the run early.
    fn branch(&mut self, depth: usize) {
        let prompt = format!("Pick {}?", self.text());
        let jmp = self.push("jmp", json!({"condition_prompt": prompt}));
        let then_seq = self.seq();
        self.blocks(depth + 1, 3);
        if self.rng.chance(20) {
            self.push("assign", json!({"final_answer": "early ${a} ${b}"}));
        }
        let skip = self.push("jmp", json!({"target_seq": 0}));
        let else_seq = self.seq();
        self.blocks(depth + 1, 3);
        let end = self.seq();
        self.instrs[jmp]["parameters"]["jump_if_true"] = json!(then_seq);
        self.instrs[jmp]["parameters"]["jump_if_false"] = json!(else_seq);
        self.instrs[skip]["parameters"]["target_seq"] = json!(end);
    }

    /// `k = 0; do { body; k = k + 1 } while cond("${k}")`.
    fn looped(&mut self, depth: usize) {
        self.loops += 1;
        let k = format!("k{}", self.loops);
        self.push("assign", json!({ k.clone(): 0 }));
        let body = self.seq();
        self.blocks(depth + 1, 3);
        self.push("assign", json!({ k.clone(): format!("${{{k}}} + 1") }));
        let prompt = format!("More after ${{{k}}} with {}?", self.text());
        let jmp = self.push(
            "jmp",
            json!({"condition_prompt": prompt, "jump_if_true": body}),
        );
        let next = self.seq();
        self.instrs[jmp]["parameters"]["jump_if_false"] = json!(next);
    }
}

fn plan_text(seed: u64) -> String {
    let mut g = Gen {
        rng: Rng::new(seed),
        instrs: Vec::new(),
        loops: 0,
    };
    g.push(
        "assign",
        json!({"a": "A", "b": "B", "c": 3, "d": "D", "e": "E", "n": 1}),
    );
    g.blocks(0, 8);
    g.push(
        "assign",
        json!({"final_answer": "${a} ${b} ${c} ${d} ${e} ${n}"}),
    );
    serde_json::to_string_pretty(&g.instrs).expect("plan serializes")
}

fn program(seed: u64) -> ValidatedProgram {
    let src = plan_text(seed);
    let opts = CompileOptions {
        manifest: manifest(),
        ..CompileOptions::default()
    };
    let compiled = compile(&src, &opts);
    let Some(program) = compiled.program else {
        panic!(
            "seed {seed}: plan does not compile: {:#?}\n{src}",
            compiled.diagnostics
        )
    };
    plan_bytecode::validate(program).unwrap_or_else(|e| panic!("seed {seed}: {e:?}"))
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The answer to a request: a pure function of what is asked.
fn answer(r: &ToolRequest) -> Result<Value, String> {
    let h = fnv(&format!("{}{}", r.tool, Value::Object(r.args.to_map())));
    if r.tool == "jmp_condition" {
        return Ok(json!(!h.is_multiple_of(3)));
    }
    if r.tool == "flaky" && h.is_multiple_of(3) {
        return Err(format!("flaky failed ({})", h % 1000));
    }
    match &r.kind {
        RequestKind::Tool {
            output_keys: Some(keys),
        } => {
            let mut m = Map::new();
            // Sometimes a key is missing: an output extraction failure.
            let n = if h.is_multiple_of(7) {
                keys.len() - 1
            } else {
                keys.len()
            };
            for k in &keys[..n] {
                m.insert(k.clone(), json!(format!("{k}{}", h % 100)));
            }
            Ok(Value::Object(m))
        }
        _ => Ok(json!(format!("{}{}", r.tool, h % 1000))),
    }
}

fn limits(max_concurrency: u32) -> Limits {
    Limits {
        max_steps: 400,
        max_concurrency,
        ..Limits::default()
    }
}

/// Drives a VM answering outstanding requests in an order chosen by `rng` (one or several
/// at a time); checks that write calls are always alone in flight.
fn run_shuffled(
    prog: &ValidatedProgram,
    max_concurrency: u32,
    rng: &mut Rng,
    ctx: &str,
) -> Result<Outcome, RunError> {
    let mut vm = Vm::new(prog, limits(max_concurrency));
    let mut out: Vec<std::sync::Arc<ToolRequest>> = Vec::new();
    for _ in 0..100_000 {
        match vm.run() {
            Halt::Yield(new) => {
                let write_out = out.iter().any(|r| r.tool == "store");
                assert!(!write_out || new.is_empty(), "{ctx}: issued past a write");
                if new.iter().any(|r| r.tool == "store") {
                    assert!(
                        out.is_empty() && new.len() == 1,
                        "{ctx}: write call not alone"
                    );
                }
                out.extend(new);
                assert!(!out.is_empty(), "{ctx}: waiting with nothing outstanding");
                assert!(out.len() <= max_concurrency.max(1) as usize, "{ctx}: cap");
                for _ in 0..=rng.below(out.len()) {
                    let r = out.remove(rng.below(out.len()));
                    vm.resume(r.id, answer(&r)).expect("known request");
                }
            }
            Halt::Done(o) => return Ok(o),
            Halt::Failed(e) => return Err(e),
        }
    }
    panic!("{ctx}: run did not end");
}

#[test]
fn random_plans_with_random_answer_orders_match_sequential() {
    let (mut done, mut failed, mut concurrent_yields) = (0, 0, 0);
    for seed in 0..250u64 {
        let prog = program(seed);
        let mut rng = Rng::new(seed ^ 0xABCD);
        let want = run_shuffled(&prog, 1, &mut rng, &format!("seed {seed} sequential"));
        match &want {
            Ok(_) => done += 1,
            Err(_) => failed += 1,
        }
        // The sequential run must not depend on the order either (there is only one).
        for round in 0..8 {
            let cap = *rng.pick(&[2, 3, 16, 16]);
            let ctx = format!("seed {seed} round {round} max_concurrency {cap}");
            let got = run_shuffled(&prog, cap, &mut rng, &ctx);
            assert_eq!(got, want, "{ctx}\n{}", plan_text(seed));
        }
        // Count plans where look-ahead actually issued more than one request at once.
        let mut vm = Vm::new(&prog, limits(16));
        if let Halt::Yield(first) = vm.run()
            && first.len() > 1
        {
            concurrent_yields += 1;
        }
    }
    // The generator must exercise both outcomes and real concurrency.
    assert!(done > 40 && failed > 40, "done {done}, failed {failed}");
    assert!(
        concurrent_yields > 40,
        "only {concurrent_yields} concurrent plans"
    );
}

/// Serves every tool with `answer` after a random delay (0–15 ms).
struct Jittery {
    rng: Mutex<Rng>,
}

impl Backend for Jittery {
    fn call<'a>(
        &'a self,
        req: &'a ToolRequest,
    ) -> Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send + 'a>> {
        let ms = self.rng.lock().map(|mut r| r.next() % 16).unwrap_or(0);
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            answer(req).map_err(|m| ToolError::new(ToolErrorKind::BadResponse, m))
        })
    }

    fn describe(&self) -> String {
        "jittery test backend".into()
    }
}

fn host(seed: u64) -> Host {
    let host = Host::new(manifest(), HostOptions::default()).expect("host");
    let backend: Arc<dyn Backend> = Arc::new(Jittery {
        rng: Mutex::new(Rng::new(seed)),
    });
    for t in [
        "search",
        "lookup",
        "flaky",
        "store",
        "llm_generate",
        "jmp_condition",
    ] {
        host.set_backend(t, backend.clone());
    }
    host
}

fn comparable(r: &RunReport) -> (Value, Option<String>, Option<i64>, u64, Map<String, Value>) {
    let e = r.error.as_ref();
    (
        r.final_answer.clone(),
        e.map(|e| e.message.clone()),
        e.and_then(|e| e.seq_no),
        r.steps,
        r.vars.clone().into_map(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_latencies_through_the_host_match_sequential() {
    for seed in 0..30u64 {
        let prog = program(seed);
        let h = host(seed);
        let want = plan_host::run_plan(&h, &prog, vec![], limits(1), &mut Tracer::none()).await;
        for round in 0..3 {
            let h = host(seed * 31 + round);
            let got = plan_host::run_plan(&h, &prog, vec![], limits(16), &mut Tracer::none()).await;
            assert_eq!(
                comparable(&got),
                comparable(&want),
                "seed {seed} round {round}\n{}",
                plan_text(seed)
            );
        }
    }
}

/// Saving a run at any commit point (the state goes through JSON) and resuming it in a
/// fresh VM, with the answers saved by then or with every answer the run got, gives the
/// uninterrupted result: same answer or failure, steps and variables. (Paused time: the
/// backends' delays only order the answers.)
#[tokio::test(start_paused = true)]
async fn random_plans_resumed_from_any_commit_point_match_the_uninterrupted_run() {
    let mut points = 0;
    for seed in 0..30u64 {
        let prog = program(seed);
        let mut saving = common::Saving::default();
        let want = plan_host::run_plan(&host(seed), &prog, vec![], limits(16), &mut saving).await;
        for (k, (state, saved)) in saving.history.iter().enumerate() {
            let state: plan_vm::VmState = serde_json::from_str(state).unwrap();
            let known = if k % 2 == 0 {
                saving.answers[..*saved].to_vec()
            } else {
                saving.answers.clone()
            };
            let h = host(seed * 17 + k as u64);
            let got =
                plan_host::resume_plan(&h, &prog, state, known, limits(16), &mut Tracer::none())
                    .await;
            assert_eq!(
                comparable(&got),
                comparable(&want),
                "seed {seed}, commit point {k}\n{}",
                plan_text(seed)
            );
            points += 1;
        }
    }
    assert!(points > 100, "only {points} commit points");
}
