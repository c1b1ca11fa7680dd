//! Grounding measured: recall of the gold tables and columns of text-to-SQL questions,
//! and time per question, against plain BM25 over table documents. See BENCHMARKS.md.
//!
//! ```sh
//! cargo run --release -p plan-sql --example grounding -- DIR [OWN.jsonl DB]
//! cargo run --release -p plan-sql --example grounding -- --per-db DIR...
//! ```
//!
//! `--per-db`: each question grounded in its own database (Spider 2.0's), all gold tables
//! in the top 3, 5 and 10 against plain BM25 over table documents, gold-column recall, and
//! time per question (see [`per_db`]). `GROUNDING_SHOW` prints where each question's gold
//! tables ranked, `GROUNDING_ONLY=ID` grounds one question, `GROUNDING_MISSED` prints each
//! gold column not shown and whether its table was. `GROUNDING_EMBEDDINGS=DIR` adds a
//! sentence-embedding model's order (a BERT model's directory, see `plan-embed`), fused
//! with the words' order; the time to embed the tables is the index's, unless
//! `GROUNDING_CACHE=DIR` kept them from an earlier run.
//!
//! DIR holds Spider's `tables.json` and `dev.json` as its repository has them
//! (github.com/taoyds/spider, `evaluation_examples/examples/`). Every question is grounded
//! in the union of every database's tables (named `db_id.table`), so that grounding must
//! find the database as well as the tables, as in a warehouse of hundreds of tables. The
//! gold tables and columns are read from the gold SQL with sqlparser (aliases resolved; a
//! bare column belongs to the query's table that has it). OWN.jsonl (`{question, sql}`)
//! adds questions over the SQLite file DB (its values sampled as the tool does), grounded
//! in the same union plus that database.

use std::collections::{BTreeSet, HashMap};
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use plan_sql::ground::{
    Budget, Column, ForeignKey, Index, Schema, Selection, Signals, Table, words,
};
use serde_json::Value;
use sqlparser::ast::{Expr, ObjectName, TableFactor, Visit, Visitor};
use sqlparser::dialect::SQLiteDialect;
use sqlparser::parser::Parser;

fn last(name: &ObjectName) -> String {
    name.0
        .last()
        .and_then(|p| p.as_ident())
        .map(|i| i.value.to_lowercase())
        .unwrap_or_default()
}

#[derive(Default)]
struct Refs {
    tables: Vec<String>,
    aliases: HashMap<String, String>,
    qualified: Vec<(String, String)>,
    bare: Vec<String>,
}

impl Visitor for Refs {
    type Break = ();
    fn pre_visit_relation(&mut self, r: &ObjectName) -> ControlFlow<()> {
        self.tables.push(last(r));
        ControlFlow::Continue(())
    }
    fn pre_visit_table_factor(&mut self, f: &TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table {
            name,
            alias: Some(a),
            ..
        } = f
        {
            self.aliases.insert(a.name.value.to_lowercase(), last(name));
        }
        ControlFlow::Continue(())
    }
    fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
        match e {
            Expr::Identifier(i) => self.bare.push(i.value.to_lowercase()),
            Expr::CompoundIdentifier(p) if p.len() >= 2 => self.qualified.push((
                p[p.len() - 2].value.to_lowercase(),
                p[p.len() - 1].value.to_lowercase(),
            )),
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// The gold tables and columns (`table`, `table.column`, lowercase) of `sql` over `db`.
fn gold(sql: &str, db: &Schema) -> Option<(BTreeSet<String>, BTreeSet<String>)> {
    let stmts = Parser::parse_sql(&SQLiteDialect {}, sql).ok()?;
    let mut r = Refs::default();
    for s in &stmts {
        let _ = s.visit(&mut r);
    }
    let known: HashMap<String, &Table> = db
        .tables
        .iter()
        .map(|t| (t.name.to_lowercase(), t))
        .collect();
    let tables: BTreeSet<String> = r
        .tables
        .iter()
        .filter(|t| known.contains_key(*t))
        .cloned()
        .collect();
    let mut columns = BTreeSet::new();
    let has = |t: &str, c: &str| {
        known
            .get(t)
            .is_some_and(|t| t.columns.iter().any(|x| x.name.eq_ignore_ascii_case(c)))
    };
    for (q, c) in &r.qualified {
        let t = r.aliases.get(q).cloned().unwrap_or_else(|| q.clone());
        if has(&t, c) {
            columns.insert(format!("{t}.{c}"));
        }
    }
    for c in &r.bare {
        if let Some(t) = tables.iter().find(|t| has(t, c)) {
            columns.insert(format!("{t}.{c}"));
        }
    }
    (!tables.is_empty()).then_some((tables, columns))
}

/// Spider's schemas (`tables.json`): db_id → its tables, with their original names.
fn spider(dir: &std::path::Path) -> Vec<(String, Schema)> {
    let all: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("tables.json")).unwrap()).unwrap();
    all.iter()
        .map(|db| {
            let names = db["table_names_original"].as_array().unwrap();
            let columns = db["column_names_original"].as_array().unwrap();
            let types = db["column_types"].as_array().unwrap();
            let mut tables: Vec<Table> = names
                .iter()
                .enumerate()
                .map(|(i, n)| Table {
                    name: n.as_str().unwrap().to_owned(),
                    comment: db["table_descriptions"][i]
                        .as_str()
                        .map(str::trim)
                        .filter(|d| !d.is_empty())
                        .map(str::to_owned),
                    ..Table::default()
                })
                .collect();
            // NB: column 0 is `*`; a column's position in the list is its id.
            let mut at = vec![(usize::MAX, 0); columns.len()];
            for (id, c) in columns.iter().enumerate().skip(1) {
                let t = c[0].as_u64().unwrap() as usize;
                at[id] = (t, tables[t].columns.len());
                let text = |key: &str| {
                    let s = db[key][id].as_str().unwrap_or("").trim();
                    (!s.is_empty()).then(|| s.to_owned())
                };
                let name = c[1].as_str().unwrap().to_owned();
                let sampled = &db["sample_values"][format!("{}.{name}", tables[t].name)];
                // NB: as the tools sample a column: short text with a letter (names,
                // categories), not dates, codes or prose.
                let values = sampled.as_array().map_or_else(Vec::new, |vs| {
                    vs.iter()
                        .filter_map(Value::as_str)
                        .filter(|v| (1..=40).contains(&v.chars().count()))
                        .filter(|v| v.chars().any(char::is_alphabetic))
                        .map(str::to_owned)
                        .collect()
                });
                tables[t].columns.push(Column {
                    name,
                    ty: types[id].as_str().unwrap_or("").to_owned(),
                    comment: text("column_descriptions"),
                    values,
                    ..Column::default()
                });
            }
            let id = |v: &Value| v.as_u64().map(|i| i as usize);
            for pk in db["primary_keys"].as_array().unwrap() {
                let ids: Vec<usize> = match pk {
                    Value::Array(list) => list.iter().filter_map(id).collect(),
                    one => id(one).into_iter().collect(),
                };
                for i in ids {
                    let (t, c) = at[i];
                    tables[t].columns[c].primary_key = true;
                }
            }
            for fk in db["foreign_keys"].as_array().unwrap() {
                let (Some(from), Some(to)) = (id(&fk[0]), id(&fk[1])) else {
                    continue;
                };
                let ((ft, fc), (tt, tc)) = (at[from], at[to]);
                let fk = ForeignKey {
                    column: tables[ft].columns[fc].name.clone(),
                    ref_table: tables[tt].name.clone(),
                    ref_column: tables[tt].columns[tc].name.clone(),
                };
                tables[ft].foreign_keys.push(fk);
            }
            (db["db_id"].as_str().unwrap().to_owned(), Schema { tables })
        })
        .collect()
}

/// Every database's tables in one schema, each named `db.table` (its keys too).
fn union(dbs: &[(String, Schema)]) -> Schema {
    let mut out = Schema::default();
    for (db, s) in dbs {
        for t in &s.tables {
            let mut t = t.clone();
            t.name = format!("{db}.{}", t.name);
            for fk in &mut t.foreign_keys {
                fk.ref_table = format!("{db}.{}", fk.ref_table);
            }
            out.tables.push(t);
        }
    }
    out
}

#[derive(Default)]
struct Tally {
    n: usize,
    tables: [usize; 2],
    baseline: [usize; 2],
    columns: [usize; 2],
    took: Vec<Duration>,
}

impl Tally {
    fn add(
        &mut self,
        (index, baseline): (&Index, &Baseline),
        question: &str,
        (tables, columns): &(BTreeSet<String>, BTreeSet<String>),
    ) {
        self.n += 1;
        let has_all = |got: &[String], want: &BTreeSet<String>| {
            let got: BTreeSet<String> = got.iter().map(|g| g.to_lowercase()).collect();
            want.iter().all(|w| got.contains(w))
        };
        for (i, k) in [3, 5].into_iter().enumerate() {
            let start = Instant::now();
            let s = index.ground(
                question,
                Budget {
                    tables: k,
                    columns: 20,
                    values: 10,
                    ..Budget::default()
                },
            );
            self.took.push(start.elapsed());
            self.tables[i] += usize::from(has_all(&s.tables, tables));
            self.baseline[i] += usize::from(has_all(&baseline.top(question, k), tables));
        }
        for (i, k) in [10, 20].into_iter().enumerate() {
            let s = index.ground(
                question,
                Budget {
                    tables: 5,
                    columns: k,
                    values: 10,
                    ..Budget::default()
                },
            );
            let got = shown_columns(&s);
            self.columns[i] += usize::from(columns.iter().all(|c| got.contains(c)));
        }
    }

    fn print(&mut self, what: &str, tables: usize) {
        let pct = |x: usize| 100.0 * x as f64 / self.n.max(1) as f64;
        self.took.sort();
        let p = |q: f64| self.took[((self.took.len() - 1) as f64 * q) as usize];
        println!(
            "{what}: {} questions, {tables} tables\n  tables@3 {:.1}% (baseline {:.1}%)  tables@5 {:.1}% (baseline {:.1}%)\n  columns@10 {:.1}%  columns@20 {:.1}%\n  time per question: p50 {:?}, p95 {:?}",
            self.n,
            pct(self.tables[0]),
            pct(self.baseline[0]),
            pct(self.tables[1]),
            pct(self.baseline[1]),
            pct(self.columns[0]),
            pct(self.columns[1]),
            p(0.5),
            p(0.95)
        );
    }
}

/// Plain BM25 over one document per table (its name, its columns' names, and what the
/// schema says of both): the baseline of `--per-db`.
struct Baseline {
    engine: bm25::SearchEngine<u32>,
    names: Vec<String>,
}

impl Baseline {
    fn new(schema: &Schema) -> Baseline {
        let docs: Vec<String> = schema
            .tables
            .iter()
            .map(|t| {
                let mut d = words(&t.name);
                d.push(' ');
                d.push_str(t.comment.as_deref().unwrap_or(""));
                for c in &t.columns {
                    d.push(' ');
                    d.push_str(&words(&c.name));
                    d.push(' ');
                    d.push_str(c.comment.as_deref().unwrap_or(""));
                }
                d
            })
            .collect();
        Baseline {
            engine: bm25::SearchEngineBuilder::<u32>::with_corpus(bm25::Language::English, docs)
                .build(),
            names: schema
                .tables
                .iter()
                .map(|t| t.name.to_lowercase())
                .collect(),
        }
    }

    /// The `k` best tables; of equal scores, the first in the schema (the engine's own
    /// order of ties changes from run to run).
    fn top(&self, question: &str, k: usize) -> Vec<String> {
        let mut found = self.engine.search(&words(question), self.names.len());
        found.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(a.document.id.cmp(&b.document.id))
        });
        found
            .into_iter()
            .take(k)
            .map(|r| self.names[r.document.id as usize].clone())
            .collect()
    }
}

/// Every question grounded in its own database: DIR holds `tables.json` (Spider's shape,
/// with optional `table_descriptions`, `column_descriptions` and `sample_values`) and
/// `dev.json` (`db_id`, `question`, `gold_tables`, `gold_columns`; without them, the gold
/// is read from `query`; `external_knowledge` joins the question only when
/// `GROUNDING_KNOWLEDGE` is set).
fn per_db(dir: &std::path::Path, signals: Signals, quiet: bool) {
    let dbs: HashMap<String, Schema> = spider(dir).into_iter().collect();
    let questions: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("dev.json")).unwrap()).unwrap();
    let start = Instant::now();
    let indexes: HashMap<&str, (Index, Baseline)> = dbs
        .iter()
        .map(|(db, s)| {
            (
                db.as_str(),
                (
                    with_model(Index::with(s.clone(), signals)),
                    Baseline::new(s),
                ),
            )
        })
        .collect();
    let built = start.elapsed();
    let ks = [3, 5, 10];
    let (mut ours, mut base) = ([0usize; 3], [0usize; 3]);
    let (mut recall, mut n, mut with_columns) = (0f64, 0usize, 0usize);
    let mut took = Vec::new();
    let lower = |v: &Value| -> BTreeSet<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_lowercase))
            .collect()
    };
    for q in &questions {
        let Some((index, baseline)) = q["db_id"].as_str().and_then(|db| indexes.get(db)) else {
            continue;
        };
        // NB: Spider 1's questions carry only their SQL: the gold is read from it.
        let (tables, columns) = match q.get("gold_tables") {
            Some(t) => (lower(t), lower(&q["gold_columns"])),
            None => match gold(q["query"].as_str().unwrap_or(""), index.schema()) {
                Some(g) => g,
                None => continue,
            },
        };
        if tables.is_empty() {
            continue;
        }
        n += 1;
        let mut question = q["question"].as_str().unwrap_or("").to_owned();
        // NB: Spider 2.0's `external_knowledge` (documents of tens of kilobytes, some) is
        // left out: a goal is what grounding gets, and with it the matches were worse.
        if let Some(k) = q["external_knowledge"]
            .as_str()
            .filter(|_| std::env::var_os("GROUNDING_KNOWLEDGE").is_some())
        {
            question.push('\n');
            question.push_str(k);
        }
        let has_all = |got: &[String]| {
            let got: BTreeSet<String> = got.iter().map(|g| g.to_lowercase()).collect();
            tables.iter().all(|w| got.contains(w))
        };
        let shows_all = |s: &Selection| {
            tables
                .iter()
                .all(|w| places(s).iter().any(|p| p.contains(w)))
        };
        let only = std::env::var("GROUNDING_ONLY").ok();
        if only
            .as_deref()
            .is_some_and(|o| o != q["instance_id"].as_str().unwrap_or(""))
        {
            continue;
        }
        if std::env::var_os("GROUNDING_SHOW").is_some() {
            let all = Budget {
                tables: index.schema().tables.len(),
                ..Budget::default()
            };
            let s = index.ground(&question, all);
            let ranked = places(&s);
            let at: Vec<String> = tables
                .iter()
                .map(|t| match ranked.iter().position(|p| p.contains(t)) {
                    Some(i) => format!("{t}@{}", i + 1),
                    None => format!("{t}@-"),
                })
                .collect();
            let shown = if only.is_some() { 25 } else { 5 };
            let top: Vec<&String> = s.tables.iter().take(shown).collect();
            let text: String = question.chars().take(160).collect();
            let id = q["instance_id"].as_str().unwrap_or("");
            println!(
                "{id} ({} tables)\n  {text}\n  gold {at:?}\n  top {top:?}",
                ranked.len()
            );
        }
        for (i, k) in ks.into_iter().enumerate() {
            let budget = Budget {
                tables: k,
                columns: 40,
                values: 10,
                ..Budget::default()
            };
            let begun = Instant::now();
            let s = index.ground(&question, budget);
            took.push(begun.elapsed());
            ours[i] += usize::from(shows_all(&s));
            base[i] += usize::from(has_all(&baseline.top(&question, k)));
            if k == 10 && !columns.is_empty() {
                with_columns += 1;
                let got = shown_columns(&s);
                let found = columns.iter().filter(|c| got.contains(*c)).count();
                recall += found as f64 / columns.len() as f64;
                // NB: `GROUNDING_MISSED`: each gold column not shown, and whether its table
                // was (then the column budget cut it) or not.
                if std::env::var_os("GROUNDING_MISSED").is_some() {
                    let chosen: BTreeSet<String> = places(&s).into_iter().flatten().collect();
                    for c in columns.iter().filter(|c| !got.contains(*c)) {
                        let table = c.rsplit_once('.').map_or("", |(t, _)| t);
                        let shown = if chosen.contains(table) {
                            "shown"
                        } else {
                            "not shown"
                        };
                        let id = q["instance_id"].as_str().unwrap_or("");
                        println!("missed {id} {c} (of {}): its table {shown}", columns.len());
                    }
                }
            }
        }
    }
    let pct = |x: usize| 100.0 * x as f64 / n.max(1) as f64;
    let column_recall = 100.0 * recall / with_columns.max(1) as f64;
    if quiet {
        println!(
            "| {:.1}% | {:.1}% | {:.1}% | {column_recall:.1}% |",
            pct(ours[0]),
            pct(ours[1]),
            pct(ours[2])
        );
        return;
    }
    took.sort();
    let p = |q: f64| took[((took.len().max(1) - 1) as f64 * q) as usize];
    let sizes: Vec<usize> = dbs.values().map(|s| s.tables.len()).collect();
    println!(
        "{}: {n} questions over {} databases (up to {} tables), indexed in {built:?}",
        dir.display(),
        dbs.len(),
        sizes.iter().max().unwrap_or(&0)
    );
    for (i, k) in ks.into_iter().enumerate() {
        println!(
            "  all gold tables in the top {k:>2}: {:5.1}%  (BM25 {:5.1}%)",
            pct(ours[i]),
            pct(base[i])
        );
    }
    println!("  gold-column recall within 40 columns (10 tables): {column_recall:.1}%");
    println!("  time per question: p50 {:?}, p95 {:?}", p(0.5), p(0.95));
}

/// The tables `s` shows, each with the tables of its series (lowercase): one place each.
fn places(s: &Selection) -> Vec<BTreeSet<String>> {
    s.tables
        .iter()
        .map(|t| stands_for(s, t).collect())
        .collect()
}

/// The columns `s` shows, `table.column` in lowercase: a series' tables have the columns
/// its shown table has, and a column shown stands for its series of columns, whose names
/// the prompt gives.
fn shown_columns(s: &Selection) -> BTreeSet<String> {
    let mut got = BTreeSet::new();
    for tc in &s.columns {
        let (t, c) = tc.rsplit_once('.').unwrap_or(("", tc));
        let own = [c.to_owned()];
        let series = s.column_series.get(tc).map_or(&own[..], Vec::as_slice);
        for c in series {
            for m in stands_for(s, t) {
                got.insert(format!("{m}.{}", c.to_lowercase()));
            }
        }
    }
    got
}

/// Table `t` of `s` and the tables of its series, lowercase.
fn stands_for<'a>(s: &'a Selection, t: &'a str) -> impl Iterator<Item = String> + 'a {
    let series = s.series.get(t).into_iter().flatten();
    std::iter::once(t)
        .chain(series.map(String::as_str))
        .map(str::to_lowercase)
}

/// The signals `GROUNDING_OFF` (a comma-separated list: `columns`, `values`,
/// `comments`, `abbreviations`, `graph`, `inferred_keys`, `join_paths`, `families`,
/// `numbers`, `series`, `named`, `coverage`, `column_series`) does not turn off.
fn signals_from_env() -> Signals {
    let mut s = Signals::default();
    let off = std::env::var("GROUNDING_OFF").unwrap_or_default();
    for name in off.split(',').filter(|n| !n.is_empty()) {
        match name {
            "columns" => s.columns = false,
            "values" => s.values = false,
            "comments" => s.comments = false,
            "abbreviations" => s.abbreviations = false,
            "graph" => s.graph = false,
            "inferred_keys" => s.inferred_keys = false,
            "join_paths" => s.join_paths = false,
            "families" => s.families = false,
            "numbers" => s.numbers = false,
            "series" => s.series = false,
            "named" => s.named = false,
            "coverage" => s.coverage = false,
            "column_series" => s.column_series = false,
            other => panic!("GROUNDING_OFF: no signal `{other}`"),
        }
    }
    s
}

/// Each signal turned off alone, then all but the lexical match: a row each.
fn ablation(dir: &std::path::Path) {
    let all = Signals::default();
    let off: [(&str, Signals); 14] = [
        ("all signals", all),
        (
            "no columns",
            Signals {
                columns: false,
                ..all
            },
        ),
        (
            "no values",
            Signals {
                values: false,
                ..all
            },
        ),
        (
            "no comments",
            Signals {
                comments: false,
                ..all
            },
        ),
        (
            "no abbreviations",
            Signals {
                abbreviations: false,
                ..all
            },
        ),
        (
            "no graph",
            Signals {
                graph: false,
                ..all
            },
        ),
        (
            "no inferred keys",
            Signals {
                inferred_keys: false,
                ..all
            },
        ),
        (
            "no join paths",
            Signals {
                join_paths: false,
                ..all
            },
        ),
        (
            "no families",
            Signals {
                families: false,
                ..all
            },
        ),
        (
            "no series",
            Signals {
                series: false,
                ..all
            },
        ),
        (
            "no named tables",
            Signals {
                named: false,
                ..all
            },
        ),
        (
            "no coverage",
            Signals {
                coverage: false,
                ..all
            },
        ),
        (
            "no column series",
            Signals {
                column_series: false,
                ..all
            },
        ),
        (
            "with numbers",
            Signals {
                numbers: true,
                ..all
            },
        ),
    ];
    println!(
        "{}\n| signals | top 3 | top 5 | top 10 | columns |",
        dir.display()
    );
    println!("|---|---|---|---|---|");
    for (name, signals) in off {
        print!("| {name} ");
        per_db(dir, signals, true);
    }
    let lexical = Signals {
        columns: false,
        values: false,
        comments: false,
        abbreviations: false,
        graph: false,
        inferred_keys: false,
        join_paths: false,
        families: false,
        numbers: false,
        series: false,
        named: false,
        coverage: false,
        column_series: false,
    };
    print!("| table documents alone ");
    per_db(dir, lexical, true);
}

/// `index` with the embeddings of `GROUNDING_EMBEDDINGS`'s model, when it is set.
fn with_model(index: Index) -> Index {
    static MODEL: std::sync::OnceLock<Option<std::sync::Arc<plan_embed::Model>>> =
        std::sync::OnceLock::new();
    let model = MODEL.get_or_init(|| {
        let dir = std::env::var_os("GROUNDING_EMBEDDINGS")?;
        let model = plan_embed::Model::load(dir.as_ref())
            .unwrap_or_else(|e| panic!("GROUNDING_EMBEDDINGS: {e}"));
        Some(std::sync::Arc::new(model))
    });
    let kept = std::env::var_os("GROUNDING_CACHE").map(std::path::PathBuf::from);
    match model {
        Some(m) => plan_sql::embedded::embedded(index, m.clone(), kept.as_deref()),
        None => index,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--per-db") => {
            for dir in &args[1..] {
                per_db(std::path::Path::new(dir), signals_from_env(), false);
            }
            return;
        }
        Some("--ablation") => {
            for dir in &args[1..] {
                ablation(std::path::Path::new(dir));
            }
            return;
        }
        _ => {}
    }
    let dir = std::path::Path::new(args.first().expect("usage: grounding DIR [OWN.jsonl DB]"));
    let mut dbs = spider(dir);
    let own = match (args.get(1), args.get(2)) {
        (Some(q), Some(db)) => {
            let sql =
                plan_sql::Sqlite::open(std::path::Path::new(db), plan_sql::Constraints::default())
                    .unwrap();
            dbs.push(("own".into(), sql.schema().unwrap()));
            Some(std::fs::read_to_string(q).unwrap())
        }
        _ => None,
    };
    let schemas: HashMap<String, Schema> = dbs.iter().cloned().collect();
    let all = union(&dbs);
    let start = Instant::now();
    let index = with_model(Index::with(all.clone(), signals_from_env()));
    let baseline = Baseline::new(&all);
    println!(
        "index of {} tables built in {:?}",
        all.tables.len(),
        start.elapsed()
    );
    let qualify = |db: &str, (t, c): (BTreeSet<String>, BTreeSet<String>)| {
        (
            t.into_iter()
                .map(|t| format!("{db}.{t}"))
                .collect::<BTreeSet<_>>(),
            c.into_iter()
                .map(|c| format!("{db}.{c}"))
                .collect::<BTreeSet<_>>(),
        )
    };
    let mut spider_tally = Tally::default();
    let mut skipped = 0;
    let questions: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("dev.json")).unwrap()).unwrap();
    for q in &questions {
        let db = q["db_id"].as_str().unwrap();
        let Some(g) = gold(q["query"].as_str().unwrap(), &schemas[db]) else {
            skipped += 1;
            continue;
        };
        spider_tally.add(
            (&index, &baseline),
            q["question"].as_str().unwrap(),
            &qualify(db, g),
        );
    }
    spider_tally.print(
        &format!("Spider dev ({skipped} gold queries not parsed)"),
        all.tables.len(),
    );
    if let Some(text) = own {
        let mut t = Tally::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let q: Value = serde_json::from_str(line).unwrap();
            let g = gold(q["sql"].as_str().unwrap(), &schemas["own"]).expect("own gold parses");
            t.add(
                (&index, &baseline),
                q["question"].as_str().unwrap(),
                &qualify("own", g),
            );
        }
        t.print("own set", all.tables.len());
    }
}
