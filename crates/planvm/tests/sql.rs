//! The `sql` tool backend through planvm: the offline example (a planner replayed from
//! its cassette, the query run for real on examples/shop.db) is refused a query that reads
//! a denied column, re-planned from the refusal, and answered; plans whose queries break a
//! constraint fail with a message that says which; the database is never written.

mod common;

use std::path::Path;

use common::{Out, planvm, root, s};
use serde_json::json;

/// planvm with `args`, its grounding cache in a directory of the test's own.
async fn run(args: &[&str]) -> Out {
    static CACHE: std::sync::LazyLock<tempfile::TempDir> =
        std::sync::LazyLock::new(|| tempfile::tempdir().unwrap());
    let cache = s(CACHE.path());
    planvm(args, &[("PLANVM_CACHE_DIR", &cache)]).await
}

/// The example database, copied (a test never touches the repository's file).
fn shop(dir: &Path) -> std::path::PathBuf {
    let db = dir.join("shop.db");
    std::fs::copy(root().join("examples/shop.db"), &db).unwrap();
    db
}

#[tokio::test]
async fn the_sql_example_is_refused_a_denied_column_replanned_and_answered() {
    let dir = tempfile::tempdir().unwrap();
    for f in ["sql.toml", "ask_shop.cassette.jsonl"] {
        std::fs::copy(root().join("examples").join(f), dir.path().join(f)).unwrap();
    }
    std::fs::create_dir(dir.path().join("planner-sql")).unwrap();
    let db = shop(dir.path());
    let before = std::fs::read(&db).unwrap();
    let tools = s(&dir.path().join("sql.toml"));
    let goal = "Who sold the most in 2024, and in which city is their store?";
    let out = run(&["ask", goal, "--tools", &tools, "--format", "json"]).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let answer: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        answer["answer"],
        "Elena Bianchi sold the most in 2024: 1696.0 EUR in sales, at the Navigli store in Milan."
    );
    let first = &answer["rounds"][0]["run_error"]["message"];
    assert!(
        first.as_str().unwrap().contains(
            "refused: `*` over \"staff\" would read \"staff.salary\", which is in deny_columns"
        ),
        "{first}"
    );
    assert_eq!(answer["rounds"][1]["kind"], "replan");
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "the database is not written"
    );
}

#[tokio::test]
async fn a_query_that_breaks_a_constraint_fails_the_run_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let db = shop(dir.path());
    let before = std::fs::read(&db).unwrap();
    let tools = dir.path().join("tools.toml");
    std::fs::write(
        &tools,
        format!(
            "[[tool]]\nname = \"db\"\n[tool.backend]\nkind = \"sql\"\nurl = \"sqlite:{}\"\n\
             allow_tables = [\"orders\", \"products\"]\nmax_rows = 3\n",
            db.display()
        ),
    )
    .unwrap();
    let plan = |sql: &str| {
        let p = dir.path().join("plan.json");
        let steps = serde_json::json!([{"seq_no": 0, "type": "calling", "parameters": {
            "tool_name": "db", "tool_params": {"sql": sql}, "output_vars": ["final_answer"]}}]);
        std::fs::write(&p, steps.to_string()).unwrap();
        s(&p)
    };
    let tools = s(&tools);
    // NB: each constraint is plan-sql's (tests/bypass.rs, src/check.rs); here, that a
    // refusal fails the run (exit 1) and says why.
    let out = run(&["run", &plan("SELECT name FROM staff"), "--tools", &tools]).await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("table \"staff\" is not in allow_tables [orders, products]"),
        "{}",
        out.stderr
    );
    // `planc check` knows the tool's one param from its backend.
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"[{"seq_no": 0, "type": "calling", "parameters": {"tool_name": "db", "tool_params": {"query": "x"}, "output_vars": ["final_answer"]}}]"#,
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_planvm"))
        .args(["run", &s(&bad), "--tools", &tools])
        .output()
        .unwrap();
    let out = Out::of(out);
    assert_eq!(out.code, Some(65), "{}", out.stderr);
    assert!(out.stderr.contains("`sql`"), "{}", out.stderr);
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "the database is not written"
    );
}

#[tokio::test]
async fn grounding_ranks_by_an_embedding_model_and_keeps_the_tables_embeddings() {
    let dir = tempfile::tempdir().unwrap();
    shop(dir.path());
    std::fs::create_dir(dir.path().join("model")).unwrap();
    plan_embed::testing::write_tiny_model(&dir.path().join("model"), 16);
    let toml = std::fs::read_to_string(root().join("examples/sql.toml")).unwrap();
    let tools = dir.path().join("sql.toml");
    std::fs::write(
        &tools,
        format!("{toml}\n[grounding]\nembeddings = \"model\"\n"),
    )
    .unwrap();
    let cache = dir.path().join("cache");
    let ground = async |tools: &Path| {
        let args = [
            "ground",
            "Which staff sold the most?",
            "--tools",
            &s(tools),
            "--format",
            "json",
        ];
        planvm(args, &[("PLANVM_CACHE_DIR", &s(&cache))]).await
    };
    let out = ground(&tools).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let chosen: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert!(chosen["tables"].to_string().contains("staff"), "{chosen}");
    let kept = std::fs::read_dir(cache.join("embeddings")).unwrap().count();
    assert_eq!(
        kept, 1,
        "the tables' embeddings are kept for the next process"
    );
    // The same answer from the kept embeddings.
    let again = ground(&tools).await;
    assert_eq!(again.stdout, out.stdout);
    // A model that cannot be read leaves the database out, and says why.
    std::fs::remove_file(dir.path().join("model/model.safetensors")).unwrap();
    std::fs::remove_dir_all(&cache).unwrap();
    let out = ground(&tools).await;
    assert_eq!(out.code, Some(66), "{}", out.stderr);
    assert!(
        out.stderr.contains("[grounding] embeddings =") && out.stderr.contains("model.safetensors"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn grounding_shows_the_planner_the_tables_a_question_needs_and_nothing_denied() {
    let tools = s(&root().join("examples/sql.toml"));
    let out = run(&[
        "ground",
        "How many managers work in Berlin?",
        "--tools",
        &tools,
        "--format",
        "json",
    ])
    .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let chosen: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(chosen["tool"], "shop_db");
    let tables: Vec<&str> = chosen["tables"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_str())
        .collect();
    for t in ["staff", "stores"] {
        assert!(tables.contains(&t), "{t}: {chosen}");
    }
    let values = chosen["values"].to_string();
    assert!(
        values.contains("manager") && values.contains("Berlin"),
        "{values}"
    );
    assert!(
        !out.stdout.contains("salary"),
        "a denied column is never shown: {}",
        out.stdout
    );
    // The planner's prompt has the same section.
    let out = run(&[
        "ask",
        "How many managers work in Berlin?",
        "--tools",
        &tools,
        "--print-prompt",
    ])
    .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("# Databases"), "{}", out.stdout);
    assert!(
        out.stdout.contains("CREATE TABLE staff ("),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("- stores.city = 'Berlin'"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("salary"), "{}", out.stdout);
    // A tools file without a database tool has nothing to ground.
    let out = run(&[
        "ground",
        "x",
        "--tools",
        &s(&root().join("examples/ask.toml")),
    ])
    .await;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
}

/// The planner's SQL example plans run on the example database as they are.
#[tokio::test]
async fn the_sql_example_plans_run_on_the_example_database() {
    let dir = tempfile::tempdir().unwrap();
    let tools = s(&root().join("examples/sql.toml"));
    let examples = root().join("examples/planner-sql");
    let mut n = 0;
    for entry in std::fs::read_dir(&examples).unwrap() {
        let example: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap()).unwrap();
        let plan = dir.path().join("plan.json");
        std::fs::write(&plan, example["plan"].to_string()).unwrap();
        let out = run(&["run", &s(&plan), "--tools", &tools]).await;
        assert_eq!(out.code, Some(0), "{}: {}", example["goal"], out.stderr);
        assert!(!out.stdout.contains("${"), "{}", out.stdout);
        n += 1;
    }
    assert!(n >= 2);
}

/// The example shop on PostgreSQL (PLANRT_TEST_POSTGRES, which scripts/test starts;
/// skipped, saying so, without it unless PLANRT_REQUIRE_POSTGRES is set): a plan's join
/// answered through a tools file naming the password's variable, which never shows, the
/// planner told it is PostgreSQL, and a clear error without it. (Constraints and
/// grounding on PostgreSQL: plan-sql's tests/postgres.rs.)
#[tokio::test]
async fn the_shop_on_postgresql() {
    let Ok(url) = std::env::var("PLANRT_TEST_POSTGRES") else {
        let why = "SKIPPED: no PostgreSQL server (PLANRT_TEST_POSTGRES; scripts/test starts one)";
        assert!(
            std::env::var_os("PLANRT_REQUIRE_POSTGRES").is_none(),
            "{why}"
        );
        eprintln!("{why}");
        return;
    };
    let db = "planrt_planvm_shop";
    let shop_url = {
        let sql = std::fs::read_to_string(root().join("examples/shop.sql")).unwrap();
        let url = url.clone();
        let (base, _) = url.rsplit_once('/').unwrap();
        let shop_url = format!("{base}/{db}");
        let create = shop_url.clone();
        tokio::task::spawn_blocking(move || {
            let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            admin
                .batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
                .unwrap();
            admin
                .batch_execute(&format!("CREATE DATABASE {db}"))
                .unwrap();
            let mut shop = postgres::Client::connect(&create, postgres::NoTls).unwrap();
            shop.batch_execute(&sql).unwrap();
        })
        .await
        .unwrap();
        shop_url
    };
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("pg.toml");
    std::fs::write(
        &tools,
        format!(
            "[[tool]]\nname = \"shop_db\"\n[tool.backend]\nkind = \"sql\"\nurl = \"{shop_url}\"\n\
             password_env = \"SHOP_DB_PASSWORD\"\ndeny_columns = [\"staff.salary\"]\nmax_rows = 50\n"
        ),
    )
    .unwrap();
    let tools = s(&tools);
    let plan = |sql: &str| {
        json!([
            {"seq_no": 0, "type": "reasoning", "parameters": {"chain_of_thoughts": "Query.", "dependency_analysis": "None."}},
            {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "shop_db", "tool_params": {"sql": sql}, "output_vars": ["top"]}},
            {"seq_no": 2, "type": "assign", "parameters": {"final_answer": "${top.rows.0.0} in ${top.rows.0.1}"}}
        ])
        .to_string()
    };
    let password = "pg-password-that-never-shows";
    let env = [("SHOP_DB_PASSWORD", password)];
    let best = dir.path().join("best.json");
    std::fs::write(
        &best,
        plan(
            "SELECT s.name, st.city, sum(o.quantity * p.price) AS sales FROM orders o \
             JOIN staff s ON s.id = o.staff_id JOIN stores st ON st.id = s.store_id \
             JOIN products p ON p.id = o.product_id WHERE o.ordered_at LIKE '2024%' \
             GROUP BY s.name, st.city ORDER BY sales DESC LIMIT 1",
        ),
    )
    .unwrap();
    let cache = dir.path().join("cache");
    let cache = s(&cache);
    let pg_env = |extra: &[(&'static str, &'static str)]| {
        let mut e: Vec<(&str, &str)> = extra.to_vec();
        e.push(("PLANVM_CACHE_DIR", &cache));
        e
    };
    let out = planvm(["run", &s(&best), "--tools", &tools], &pg_env(&env)).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "Elena Bianchi in Milan");
    assert!(!out.stderr.contains(password), "{}", out.stderr);
    // The planner is told which SQL the database speaks.
    let out = planvm(
        ["ground", "Who sold the most?", "--tools", &tools],
        &pg_env(&env),
    )
    .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout
            .contains("The database of tool `shop_db` (PostgreSQL):"),
        "{}",
        out.stdout
    );
    // Without the password's variable, the tool says which is missing.
    let out = planvm(["run", &s(&best), "--tools", &tools], &pg_env(&[])).await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("password_env SHOP_DB_PASSWORD: the variable is unset or empty"),
        "{}",
        out.stderr
    );
}
