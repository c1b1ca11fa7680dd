//! What the engine's tests share: a plan's run started through `engine::start`, and (in
//! `pg.rs`, which the service's tests include too) a PostgreSQL schema of a test's own
//! and waits for a state.
#![allow(dead_code, unreachable_pub)]

pub mod pg;

use plan_host::{Host, RunReport, Tracer};
use plan_runs::StoreAt;
use plan_runs::engine::{Hooks, StartRequest, start};

/// Runs `plan`, compiled against `host`'s tools, on `host` as run `id`: stored at `at`
/// when given (this process's), its events to `tracer`.
pub async fn start_plan(
    host: &Host,
    plan: &str,
    (at, id): (Option<&StoreAt>, &str),
    tracer: &mut Tracer,
) -> RunReport {
    let opts = plan_runs::engine::compile_options(host.manifest(), Vec::new());
    let program = plan_compiler::compile(plan, &opts).validate().unwrap();
    let request = StartRequest {
        id: Some(id.into()),
        name: "plan.json",
        source: Some(plan),
        program: &program,
        vars: Vec::new(),
        limits: plan_vm::Limits::default(),
    };
    let hooks = Hooks {
        journal: tracer,
        warn: |e| panic!("the run's lease could not be renewed: {e}"),
        started: |_| {},
    };
    start(host, at, request, hooks).await.unwrap().0
}
