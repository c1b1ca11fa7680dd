//! The engine on a PostgreSQL store, in-process: a run whose connections the server drops
//! while it waits for a long call keeps its lease (renewed on a new connection before the
//! old lease lapsed), then commits or fails cleanly and resumes to its answer without
//! sending a completed call again. Skipped, saying so, without a PostgreSQL server
//! (`scripts/test` starts one, and requires it).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::pg::{PgSchema, until};
use plan_host::{Host, HostOptions, RunReport, Tracer};
use plan_manifest::Manifest;
use plan_runs::engine::{Hooks, StartRequest, start};
use plan_runs::{Resume, ResumeRequest, StoreAt};
use plan_store::Durability;
use serde_json::json;
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A host whose `llm_generate` is the HTTP tool at `base`/llm.
fn host(base: &str) -> Host {
    plan_host::install_crypto();
    let text = format!(
        "[[tool]]\nname = \"llm_generate\"\n[tool.backend]\nkind = \"http\"\n\
         url = \"{base}/llm\"\npointer = \"/text\"\n"
    );
    let manifest = Manifest::from_toml_str(&text, "tools.toml").unwrap();
    Host::new(manifest, HostOptions::default()).unwrap()
}

/// A lease not renewed. NB: a renewal on a dropped connection may fail before one on a
/// new connection succeeds: what the test checks is the lease in the store.
fn warn(e: &plan_runs::Error) {
    eprintln!("warning: {e}");
}

/// Runs a plan of one `llm_generate` call as stored run `slow` at `at`.
async fn run_slow(host: &Host, at: &StoreAt) -> RunReport {
    let plan = json!([{"seq_no": 0, "type": "calling", "parameters": {"tool_name": "llm_generate",
                       "tool_params": {"prompt": "p"}, "output_vars": ["final_answer"]}}])
    .to_string();
    let opts = plan_compiler::CompileOptions {
        manifest: host.manifest().clone(),
        ..Default::default()
    };
    let program = plan_compiler::compile(&plan, &opts).validate().unwrap();
    let request = StartRequest {
        id: Some("slow".into()),
        name: "slow.json",
        source: Some(&plan),
        program: &program,
        vars: Vec::new(),
        limits: plan_vm::Limits::default(),
    };
    let hooks = Hooks {
        journal: &mut Tracer::none(),
        warn,
        started: |_| {},
    };
    start(host, Some(at), request, hooks).await.unwrap().0
}

/// The run's stored lease (when it lapses, by the clock of the process that renewed it);
/// None once the run has ended.
fn lease(pg: &PgSchema) -> Option<i64> {
    let rows = pg.select("SELECT lease_until FROM runs WHERE id = 'slow'");
    rows[0][0].as_deref().map(|l| l.parse().unwrap())
}

/// A store whose connections the server drops while a run waits for a long call (a
/// restart, a failover): its lease is still renewed, on a new connection, so no other
/// process takes the run and sends its call again; the run then commits on a new
/// connection, or fails at its commit with a store error (R0012) and resumes to its
/// answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_connections_are_dropped_keeps_its_lease_and_resumes() {
    let Some(pg) = PgSchema::new() else {
        return;
    };
    let slow = MockServer::start().await;
    Mock::given(wiremock::matchers::method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"text": "slow answer"}))
                .set_delay(Duration::from_secs(6)),
        )
        .mount(&slow)
        .await;
    // NB: the run's connections (its own, its lease's), told apart by their name from
    // the test's.
    let name = pg.schema.clone();
    let at = StoreAt::new(
        format!("{}&application_name={name}", pg.url),
        Durability::Normal,
    );
    let host = Arc::new(host(&slow.uri()));
    let run = tokio::spawn({
        let (host, at) = (host.clone(), at.clone());
        async move { run_slow(&host, &at).await }
    });
    let sent = async || !slow.received_requests().await.unwrap().is_empty();
    until(Duration::from_secs(20), || "no call was sent".into(), sent).await;
    let dropped = pg.select(&format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '{name}'"
    ));
    assert!(!dropped.is_empty(), "no connection of the run was found");
    let before = lease(&pg).expect("the run holds a lease while its call is out");
    let mut renewed = None;
    let what = || "the lease was not renewed once its connection was dropped".into();
    let later = async || {
        renewed = lease(&pg).filter(|&l| l > before);
        renewed.is_some()
    };
    until(Duration::from_secs(60), what, later).await;
    // NB: renewed every quarter of the lease for a whole lease ahead: the renewal (its
    // own clock, on record) came before the lease it renewed lapsed, else another
    // process could have taken the run.
    let renewed = renewed.unwrap();
    let at_renewal = renewed - plan_store::lease_ms();
    assert!(
        at_renewal < before,
        "renewed at {at_renewal} for a lease that lapsed at {before}"
    );
    let report = run.await.unwrap();
    // NB: its commit goes on a connection of the pool: a new one once the renewals found
    // the old ones closed (the run ends ok); else a closed one (the run fails with the
    // store's error, and resumes).
    let committed = report.is_ok();
    if !committed {
        let code = report.error.as_ref().map(|e| e.code.as_str());
        assert_eq!(code, Some("R0012"), "{:?}", report.error);
    }
    // NB: a run that ended is reported as stored, and calls nothing.
    let resumed = match plan_runs::resume(&at, ResumeRequest::new("slow")) {
        Ok(Resume::Finished(report)) => *report,
        Ok(Resume::Ready(ready)) => {
            let claimed = ready.claim(warn).unwrap();
            claimed.go(&host, &mut ()).await
        }
        Err(e) => panic!("the run does not resume: {e}"),
    };
    assert_eq!(resumed.final_answer, json!("slow answer"), "{resumed:?}");
    let sent = slow.received_requests().await.unwrap().len();
    let want = if committed { 1 } else { 2 };
    assert_eq!(
        sent, want,
        "the call was sent once, and again only by a resume"
    );
}
