//! Grounding measured: recall of the gold tables and columns of text-to-SQL questions,
//! and time per question, against a plain BM25 over table names. See BENCHMARKS.md.
//!
//! ```sh
//! cargo run --release -p plan-sql --example grounding -- DIR [OWN.jsonl DB]
//! ```
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

use plan_sql::ground::{Budget, Column, ForeignKey, Index, Schema, Table};
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
                .map(|n| Table {
                    name: n.as_str().unwrap().to_owned(),
                    ..Table::default()
                })
                .collect();
            // NB: column 0 is `*`; a column's position in the list is its id.
            let mut at = vec![(usize::MAX, 0); columns.len()];
            for (id, c) in columns.iter().enumerate().skip(1) {
                let t = c[0].as_u64().unwrap() as usize;
                at[id] = (t, tables[t].columns.len());
                tables[t].columns.push(Column {
                    name: c[1].as_str().unwrap().to_owned(),
                    ty: types[id].as_str().unwrap_or("").to_owned(),
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
        index: &Index,
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
                },
            );
            self.took.push(start.elapsed());
            self.tables[i] += usize::from(has_all(&s.tables, tables));
            self.baseline[i] += usize::from(has_all(&index.tables_by_name(question, k), tables));
        }
        for (i, k) in [10, 20].into_iter().enumerate() {
            let s = index.ground(
                question,
                Budget {
                    tables: 5,
                    columns: k,
                    values: 10,
                },
            );
            self.columns[i] += usize::from(has_all(&s.columns, columns));
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

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
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
    let index = Index::new(all.clone());
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
    for line in std::fs::read_to_string(dir.join("questions.jsonl"))
        .unwrap()
        .lines()
    {
        let q: Value = serde_json::from_str(line).unwrap();
        let db = q["db_id"].as_str().unwrap();
        let Some(g) = gold(q["sql"].as_str().unwrap(), &schemas[db]) else {
            skipped += 1;
            continue;
        };
        spider_tally.add(&index, q["question"].as_str().unwrap(), &qualify(db, g));
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
            t.add(&index, q["question"].as_str().unwrap(), &qualify("own", g));
        }
        t.print("own set", all.tables.len());
    }
}
