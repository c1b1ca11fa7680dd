//! A schema of its own for each test in the test PostgreSQL server, and waiting for a
//! state that other threads or servers reach: what the engine's and the service's
//! PostgreSQL tests share (the service's tests include this file).
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

/// A schema of its own in the test PostgreSQL server (`PLANRT_TEST_POSTGRES`, which
/// `scripts/postgres` starts), as a store URL; dropped with it. None, said loudly, when
/// there is no server and none is required (`PLANRT_REQUIRE_POSTGRES`).
pub struct PgSchema {
    admin: String,
    pub schema: String,
    pub url: String,
}

impl PgSchema {
    pub fn new() -> Option<PgSchema> {
        let Ok(admin) = std::env::var("PLANRT_TEST_POSTGRES") else {
            let why =
                "SKIPPED: no PostgreSQL server (PLANRT_TEST_POSTGRES; scripts/test starts one)";
            assert!(
                std::env::var_os("PLANRT_REQUIRE_POSTGRES").is_none(),
                "{why}"
            );
            eprintln!("{why}");
            return None;
        };
        let schema = format!("t_{}", plan_store::new_run_id().replace('-', ""));
        let sql = format!("CREATE SCHEMA {schema}");
        let connect = admin.clone();
        // NB: on a thread of its own: the blocking client must not run on a runtime's.
        std::thread::spawn(move || {
            let mut c = postgres::Client::connect(&connect, postgres::NoTls).unwrap();
            c.batch_execute(&sql).unwrap();
        })
        .join()
        .unwrap();
        let sep = if admin.contains('?') { '&' } else { '?' };
        let url = format!("{admin}{sep}options=-csearch_path%3D{schema}");
        Some(PgSchema { admin, schema, url })
    }

    /// The rows of `sql` in the schema, each column as text (None: NULL).
    pub fn select(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        let (admin, schema, sql) = (self.admin.clone(), self.schema.clone(), sql.to_owned());
        std::thread::spawn(move || {
            let mut c = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
            c.batch_execute(&format!("SET search_path = {schema}"))
                .unwrap();
            c.simple_query(&sql)
                .unwrap()
                .into_iter()
                .filter_map(|m| match m {
                    postgres::SimpleQueryMessage::Row(r) => {
                        Some((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect())
                    }
                    _ => None,
                })
                .collect()
        })
        .join()
        .unwrap()
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        let (admin, sql) = (
            self.admin.clone(),
            format!("DROP SCHEMA {} CASCADE", self.schema),
        );
        let _ = std::thread::spawn(move || {
            if let Ok(mut c) = postgres::Client::connect(&admin, postgres::NoTls) {
                let _ = c.batch_execute(&sql);
            }
        })
        .join();
    }
}

/// Waits for a state that other threads or servers reach: `ready` is looked at every
/// 50 ms until it holds, and the test fails saying `what()` once `patience` has gone by
/// without it. The patience is far beyond what reaching the state takes: this waits for
/// it, it does not check how long it took.
pub async fn until(
    patience: Duration,
    what: impl Fn() -> String,
    mut ready: impl AsyncFnMut() -> bool,
) {
    const EVERY: Duration = Duration::from_millis(50);
    for _ in 0..=patience.as_millis() / EVERY.as_millis() {
        if ready().await {
            return;
        }
        tokio::time::sleep(EVERY).await;
    }
    panic!("{} (waited {patience:?})", what());
}
