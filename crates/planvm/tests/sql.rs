//! The `sql` tool backend through planvm: the offline example (a planner replayed from
//! its cassette, the query run for real on examples/shop.db) is refused a query that reads
//! a denied column, re-planned from the refusal, and answered; plans whose queries break a
//! constraint fail with a message that says which; the database is never written.

mod common;

use std::path::Path;

use common::{Out, planvm, s};

fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// planvm with `args`, its grounding cache in a directory of the test's own.
async fn run(args: &[&str]) -> Out {
    static CACHE: std::sync::LazyLock<tempfile::TempDir> =
        std::sync::LazyLock::new(|| tempfile::tempdir().unwrap());
    let cache = s(CACHE.path());
    let args = args.iter().map(|a| (*a).to_owned()).collect();
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
    let out = run(&[
        "run",
        &plan("SELECT id FROM orders ORDER BY id"),
        "--tools",
        &tools,
        "--format",
        "json",
    ])
    .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        report["final_answer"],
        serde_json::json!({"columns": ["id"], "rows": [[1], [2], [3]], "truncated": true})
    );
    for (sql, why) in [
        (
            "SELECT name FROM staff",
            "table \"staff\" is not in allow_tables [orders, products]",
        ),
        ("DELETE FROM orders", "the tool is read-only"),
        ("SELECT 1; SELECT 2", "one statement at a time"),
    ] {
        let out = run(&["run", &plan(sql), "--tools", &tools]).await;
        assert_eq!(out.code, Some(1), "{sql}: {}", out.stderr);
        assert!(out.stderr.contains(why), "{sql}: {}", out.stderr);
    }
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
