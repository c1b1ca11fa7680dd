//! How a store is named and held: a PostgreSQL URL's password never shows (in the URL,
//! in its query, in key=value settings), a refused login says whose, and a worker's
//! `--lease`. The tests of a refused login need the test server (PLANRT_TEST_POSTGRES,
//! which `scripts/postgres` starts with a password role); without it they say they are
//! skipped, unless PLANRT_REQUIRE_POSTGRES is set.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{BIN, Out, PgSchema, Reaped, files, http_tools, s, until};
use serde_json::json;

const PLAN: &str = r#"[
 {"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "Search.", "dependency_analysis": "None."}},
 {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "q"}, "output_vars": ["final_answer"]}}
]"#;

/// planvm with `args` in `dir`, stopped after `limit` if it has not ended (a worker
/// waits for its store to come back).
fn planvm_in(dir: &Path, args: &[&str], limit: Duration) -> Out {
    let mut child = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .env_remove("PLANVM_STORE")
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() && start.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    Out::of(child.wait_with_output().unwrap())
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn a_password_in_a_postgres_url_or_settings_never_shows() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("plan.json"), PLAN).unwrap();
    std::fs::write(
        d.join("sql.json"),
        PLAN.replace("vector_search", "db")
            .replace(r#"{"query": "q"}"#, r#"{"sql": "SELECT 1"}"#),
    )
    .unwrap();
    let port = closed_port();
    let secret = "s3cretPw";
    std::fs::write(
        d.join("sql.toml"),
        format!(
            "[[tool]]\nname = \"db\"\nparams = [{{ name = \"sql\", type = \"string\", required = true }}]\n\
             [tool.backend]\nkind = \"sql\"\n\
             url = \"postgres://planrt@127.0.0.1:{port}/shop?sslmode=disable&password={secret}\"\n"
        ),
    )
    .unwrap();
    let before = files(d);
    for store in [
        format!("postgres://planrt@127.0.0.1:{port}/runs?password={secret}"),
        format!("postgresql://planrt:{secret}@127.0.0.1:{port}/runs?password={secret}"),
        format!("host=127.0.0.1 port={port} user=planrt password={secret} dbname=runs"),
        format!("host=127.0.0.1 port={port} user=planrt password='{secret} x' dbname=runs"),
    ] {
        for args in [
            vec!["runs", "list", "--store", &store],
            vec!["worker", "--store", &store, "--poll", "0.2"],
            vec!["submit", "plan.json", "--store", &store],
            vec!["run", "plan.json", "--store", &store],
        ] {
            let out = planvm_in(d, &args, Duration::from_secs(10));
            assert_ne!(out.code, Some(0), "{args:?}: {}", out.stderr);
            let all = format!("{}{}", out.stdout, out.stderr);
            assert!(!all.contains(secret), "{args:?}: {all}");
            assert!(all.contains("***"), "{args:?} names the store: {all}");
        }
    }
    // Settings are a database's, not a file's name: no file was made of them.
    assert_eq!(files(d), before);
    // A `sql` tool's database that cannot be reached.
    let out = planvm_in(
        d,
        &["run", "sql.json", "--tools", "sql.toml"],
        Duration::from_secs(30),
    );
    assert_ne!(out.code, Some(0), "{}", out.stderr);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(!all.contains(secret), "{all}");
    assert!(all.contains("password=***"), "{all}");
}

#[test]
fn a_refused_login_says_whose_and_settings_reach_the_database() {
    let Some(pg) = PgSchema::new() else {
        return;
    };
    let admin = std::env::var("PLANRT_TEST_POSTGRES").unwrap();
    let port: u16 = admin
        .rsplit_once(':')
        .and_then(|(_, p)| p.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap();
    let mut c = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
    c.batch_execute(
        "DO $$ BEGIN
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'planrt_password') THEN
             CREATE ROLE planrt_password LOGIN PASSWORD 'right-one';
           END IF;
         END $$",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wrong = "wr0ngPw";
    for store in [
        format!("postgres://planrt_password:{wrong}@127.0.0.1:{port}/postgres"),
        format!("postgres://planrt_password@127.0.0.1:{port}/postgres?password={wrong}"),
        format!("host=127.0.0.1 port={port} user=planrt_password password={wrong} dbname=postgres"),
    ] {
        let out = planvm_in(
            d,
            &["runs", "list", "--store", &store],
            Duration::from_secs(30),
        );
        assert_ne!(out.code, Some(0), "{}", out.stderr);
        assert!(
            out.stderr.contains(
                "authentication failed for user `planrt_password`: password authentication failed for user \"planrt_password\""
            ),
            "{}",
            out.stderr
        );
        assert!(!out.stderr.contains(wrong), "{}", out.stderr);
    }
    // Settings name the database as a URL does.
    let settings = format!(
        "host=127.0.0.1 port={port} user=planrt dbname=postgres options='-csearch_path={}'",
        pg.schema
    );
    let out = planvm_in(
        d,
        &["runs", "list", "--store", &settings, "--format", "json"],
        Duration::from_secs(30),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        pg.select("SELECT count(*) FROM runs"),
        [[Some("0".to_owned())]]
    );
    assert!(files(d).is_empty(), "{:?}", files(d));
}

#[tokio::test]
async fn a_worker_holds_its_runs_for_its_lease() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(
            wiremock::ResponseTemplate::new(200)
                .set_body_json(json!({"text": "found"}))
                .set_delay(Duration::from_secs(30)),
        )
        .mount(&server)
        .await;
    let tools = s(&http_tools(
        d,
        &server.uri(),
        &[("vector_search", "/search", Some("/text"))],
    ));
    std::fs::write(d.join("plan.json"), PLAN).unwrap();
    let db = s(&d.join("runs.db"));
    // Out of bounds: refused before anything is held.
    for lease in ["0", "1.5", "3601", "x"] {
        let out = planvm_in(
            d,
            &[
                "worker", "--store", &db, "--tools", &tools, "--lease", lease,
            ],
            Duration::from_secs(10),
        );
        assert_eq!(out.code, Some(2), "--lease {lease}: {}", out.stderr);
        assert!(out.stderr.contains("--lease"), "{}", out.stderr);
    }
    let out = planvm_in(
        d,
        &["submit", "plan.json", "--store", &db, "--tools", &tools],
        Duration::from_secs(30),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let _worker = Reaped(
        Command::new(BIN)
            .args([
                "worker", "--store", &db, "--tools", &tools, "--poll", "0.2", "--lease", "40",
            ])
            .env_remove("PLANVM_STORE")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // The lease the worker wrote when it took the run, against the time it took it (both
    // on record, by its clock): 40 s ahead, and 10 s more at each renewal. The default
    // lease (10 s) would reach 40 s only renewed for half a minute.
    let taken = || {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.query_row(
            "SELECT lease_until - updated_at FROM runs WHERE status = 'running' AND lease_until > 0",
            [],
            |r| r.get::<_, i64>(0),
        )
        .ok()
    };
    until(
        Duration::from_secs(60),
        || "the run was never taken".into(),
        async || taken().is_some(),
    )
    .await;
    let ahead = taken().unwrap();
    assert!(
        ahead >= 40_000,
        "the lease ends {ahead} ms after the run was taken"
    );
}
