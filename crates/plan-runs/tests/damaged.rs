//! A damaged store is a clear error, never a panic or a guess: each kind of damage done
//! to a copy of a store (a journal entry that is not JSON, a plan name that is not UTF-8,
//! a saved state that does not fit its program or says the run ended, a call whose
//! arguments or tool were changed, a file cut short, a file that is not a store) is
//! `ErrorKind::Damaged` (or `NotAStore`) naming the store, the run and what is wrong,
//! and calls nothing.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use plan_host::{Backend, Host, HostOptions, RunReport, ToolError, ToolErrorKind, Tracer};
use plan_manifest::Manifest;
use plan_runs::open::Access;
use plan_runs::{Error, ErrorKind, StoreAt};
use plan_store::Durability;
use plan_vm::ToolRequest;
use serde_json::json;

/// Five searches, each on the last one's answer (over a second in all, so the run saves
/// a state), then an LLM call.
const CHAIN: &str = r#"[
 {"seq_no": 0, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "a"}, "output_vars": ["a"]}},
 {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "${a}"}, "output_vars": ["b"]}},
 {"seq_no": 2, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "${b}"}, "output_vars": ["c"]}},
 {"seq_no": 3, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "${c}"}, "output_vars": ["d"]}},
 {"seq_no": 4, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "${d}"}, "output_vars": ["e"]}},
 {"seq_no": 5, "type": "calling", "parameters": {"tool_name": "llm_generate", "tool_params": {"prompt": "${e}"}, "output_vars": ["final_answer"]}}
]"#;

/// Answers `tool(args)` after 250 ms, counting the calls; while `down`, refuses
/// `llm_generate`.
#[derive(Default)]
struct Tools {
    calls: AtomicUsize,
    down: AtomicBool,
}

struct Tool(Arc<Tools>);

impl Backend for Tool {
    fn call<'a>(
        &'a self,
        req: &'a ToolRequest,
    ) -> BoxFuture<'a, Result<serde_json::Value, ToolError>> {
        self.0.calls.fetch_add(1, Ordering::SeqCst);
        let down = req.tool == "llm_generate" && self.0.down.load(Ordering::SeqCst);
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(250)).await;
            match down {
                true => Err(ToolError::new(ToolErrorKind::Refused, "backend is down")),
                false => Ok(json!(format!("{}({})", req.tool, req.args.len()))),
            }
        })
    }

    fn describe(&self) -> String {
        "in-process tools".into()
    }
}

/// Runs [`CHAIN`] as stored run `id` at `at`.
async fn run(at: &StoreAt, id: &str, host: &Host) -> RunReport {
    common::start_plan(host, CHAIN, (Some(at), id), &mut Tracer::none()).await
}

/// What each operation a person runs on a store comes to.
fn list(at: &StoreAt) -> Result<(), Error> {
    plan_runs::read::list(&*at.open(Access::Read)?).map(drop)
}

fn show(at: &StoreAt, id: &str) -> Result<(), Error> {
    plan_runs::read::show(&*at.open(Access::Read)?, id).map(drop)
}

fn variables_at(at: &StoreAt, id: &str, seq: i64) -> Result<(), Error> {
    plan_runs::read::variables_at(&*at.open(Access::Read)?, id, seq).map(drop)
}

fn resume(at: &StoreAt, id: &str) -> Result<(), Error> {
    plan_runs::resume(at, plan_runs::ResumeRequest::new(id)).map(drop)
}

fn copy(db: &Path, to: &Path) -> StoreAt {
    std::fs::copy(db, to).unwrap();
    StoreAt::new(to, Durability::Normal)
}

#[tokio::test]
async fn a_damaged_store_is_an_error_that_names_the_store_and_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let at = StoreAt::new(&db, Durability::Normal);
    let tools = Arc::new(Tools::default());
    let host = Host::new(Manifest::builtin(), HostOptions::default()).unwrap();
    for t in ["vector_search", "llm_generate"] {
        host.set_backend(t, Arc::new(Tool(tools.clone())));
    }
    assert!(run(&at, "A", &host).await.is_ok());
    // A run that failed at its last call, with a saved state to go on from.
    tools.down.store(true, Ordering::SeqCst);
    assert!(!run(&at, "F", &host).await.is_ok());
    let conn = rusqlite::Connection::open(&db).unwrap();
    let saved: i64 = conn
        .query_row(
            "SELECT count(*) FROM checkpoints WHERE run = 'F'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(saved, 1, "the failed run saved a state");
    drop(conn);
    let calls = tools.calls.load(Ordering::SeqCst);

    // Each damage on a copy of the store: (what, SQL, what reads it, what the error names).
    type Read = fn(&StoreAt) -> Result<(), Error>;
    let cases: [(&str, &str, Read, &[&str]); 6] = [
        (
            "an entry that is not JSON",
            "UPDATE journal SET entry = '[{\"sent\": ' WHERE run = 'F' AND seq = 0; \
             UPDATE runs SET tool_calls = NULL WHERE id = 'F'",
            list,
            &["run `F`", "journal entry 0", "not JSON"],
        ),
        (
            "a plan name that is not UTF-8",
            "UPDATE runs SET plan = CAST(X'C328' AS TEXT) WHERE id = 'A'",
            list,
            &["run `A`", "cannot be read"],
        ),
        (
            "a state that does not fit the program",
            "UPDATE checkpoints SET state = json_set(state, '$.pc', 100000)",
            |at| resume(at, "F"),
            &["run `F`", "saved state does not fit"],
        ),
        (
            "a state marked done",
            "UPDATE checkpoints SET state = json_set(state, '$.status', json('{\"status\": \"done\"}'))",
            |at| resume(at, "F"),
            &["run `F`", "saved state says the run ended"],
        ),
        (
            "a call whose arguments were changed",
            "UPDATE journal SET entry = replace(entry, '\"query\":\"a\"', '\"query\":\"z\"') WHERE run = 'A'",
            |at| variables_at(at, "A", 3),
            &["run `A`", "other arguments"],
        ),
        (
            "a call of another tool",
            "UPDATE journal SET entry = replace(entry, '\"tool\":\"vector_search\"', '\"tool\":\"llm_generate\"') WHERE run = 'A'",
            |at| variables_at(at, "A", 3),
            &["run `A`", "is of `llm_generate`"],
        ),
    ];
    for (what, sql, read, named) in cases {
        let damaged = dir.path().join("copy.db");
        let copy_at = copy(&db, &damaged);
        rusqlite::Connection::open(&damaged)
            .unwrap()
            .execute_batch(sql)
            .unwrap();
        let e = read(&copy_at)
            .err()
            .unwrap_or_else(|| panic!("{what}: read whole"));
        assert_eq!(e.kind, ErrorKind::Damaged, "{what}: {e}");
        let shown = damaged.display().to_string();
        for name in [shown.as_str(), "the store is damaged"].iter().chain(named) {
            assert!(e.message.contains(name), "{what}: no {name:?} in {e}");
        }
        std::fs::remove_file(&damaged).unwrap();
    }
    assert_eq!(
        tools.calls.load(Ordering::SeqCst),
        calls,
        "nothing is called"
    );

    // A store cut short: whatever reads the cut part says the store is damaged.
    let cut = dir.path().join("cut.db");
    let cut_at = copy(&db, &cut);
    let len = std::fs::metadata(&cut).unwrap().len();
    std::fs::File::options()
        .write(true)
        .open(&cut)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let read: [Result<(), Error>; 3] = [list(&cut_at), show(&cut_at, "A"), show(&cut_at, "F")];
    let damaged = read.iter().filter_map(|r| r.as_ref().err()).inspect(|e| {
        assert_eq!(e.kind, ErrorKind::Damaged, "{e}");
    });
    assert!(damaged.count() > 0, "the cut store was read whole");

    // A file of one byte is not an empty store to write over.
    let one = dir.path().join("one.db");
    std::fs::write(&one, "x").unwrap();
    let e = StoreAt::new(&one, Durability::Normal)
        .open(Access::Create)
        .err()
        .unwrap();
    assert!(
        matches!(e.kind, ErrorKind::NotAStore | ErrorKind::Damaged),
        "{e}"
    );
    assert_eq!(std::fs::read(&one).unwrap(), b"x");
}
