//! Grounding: the few tables, columns and values of a database that matter for a goal,
//! for the planner's prompt. A schema of hundreds of tables does not fit a prompt, and an
//! LLM given all of it writes worse SQL; given none, it guesses names.
//!
//! An [`Index`] of a [`Schema`] holds three BM25 retrievers (tables: name and column
//! names; columns: table and column names, type and comment; values: the distinct short
//! text values sampled from each text column), over identifiers split into words
//! (`store_id` → `store id`, `OrderDate` → `order date`). [`Index::ground`] scores every
//! table by its own match and its best column's and value's, takes the best, then adds by
//! structure: the tables on the shortest foreign-key path between two chosen ones (with
//! their join columns), so a query that needs a join can be written from what the prompt
//! shows. Columns: the chosen tables' keys, then their best-matching ones; values: the
//! best-matching ones in the chosen tables.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::fmt::Write;

use bm25::{Language, SearchEngine, SearchEngineBuilder};
use serde::{Deserialize, Serialize};

/// A database's schema, as grounding sees it (denied columns and tables outside
/// `allow_tables` are left out when it is read from a tool's database).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Schema {
    pub tables: Vec<Table>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Table {
    pub name: String,
    pub columns: Vec<Column>,
    pub foreign_keys: Vec<ForeignKey>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Column {
    pub name: String,
    /// The declared type (`INTEGER`, `TEXT`, ...), as written.
    #[serde(rename = "type")]
    pub ty: String,
    pub primary_key: bool,
    /// A comment the schema gives it (`-- ...` after it in SQLite's CREATE TABLE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Distinct short text values sampled from it (empty: none kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ForeignKey {
    pub column: String,
    pub ref_table: String,
    pub ref_column: String,
}

/// What a table joined to the best-matching one gains, as a share of that one's score.
const NEIGHBOUR_BONUS: f32 = 0.3;

/// Matching values shown per column, at most.
const VALUES_PER_COLUMN: usize = 3;

/// How much a selection holds at most.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    pub tables: usize,
    pub columns: usize,
    pub values: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            tables: 5,
            columns: 20,
            values: 10,
        }
    }
}

/// What grounding chose for a goal, best first.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Selection {
    pub tables: Vec<String>,
    /// `table.column`.
    pub columns: Vec<String>,
    pub values: Vec<ValueMatch>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ValueMatch {
    pub table: String,
    pub column: String,
    pub value: String,
}

/// `name` as words: `store_id` → `store id`, `OrderDate` → `order date`.
pub fn words(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let mut prev: Option<char> = None;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            out.push(' ');
        } else {
            if c.is_uppercase() && prev.is_some_and(|p| p.is_lowercase() || p.is_ascii_digit()) {
                out.push(' ');
            }
            out.extend(c.to_lowercase());
        }
        prev = Some(c);
    }
    out
}

/// A schema indexed for grounding.
pub struct Index {
    schema: Schema,
    /// Lowercase table name → position.
    by_name: HashMap<String, usize>,
    tables: SearchEngine<u32>,
    /// Table names alone (the baseline a benchmark compares with).
    names: SearchEngine<u32>,
    columns: SearchEngine<u32>,
    /// Column document id → (table, column).
    column_ids: Vec<(usize, usize)>,
    values: Option<SearchEngine<u32>>,
    /// Value document id → (table, column, value).
    value_ids: Vec<(usize, usize, usize)>,
    /// Tables joined by a foreign key, both ways: table → (other, this side's column,
    /// the other side's column).
    links: Vec<Vec<(usize, usize, usize)>>,
}

impl Index {
    pub fn new(schema: Schema) -> Index {
        let by_name: HashMap<String, usize> = schema
            .tables
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.to_lowercase(), i))
            .collect();
        let table_docs: Vec<String> = schema
            .tables
            .iter()
            .map(|t| {
                let mut d = words(&t.name);
                // NB: the table's name counts twice: a table is about what it is called.
                d.push(' ');
                d.push_str(&words(&t.name));
                for c in &t.columns {
                    d.push(' ');
                    d.push_str(&words(&c.name));
                }
                d
            })
            .collect();
        let name_docs: Vec<String> = schema.tables.iter().map(|t| words(&t.name)).collect();
        let mut column_docs = Vec::new();
        let mut column_ids = Vec::new();
        let mut value_docs = Vec::new();
        let mut value_ids = Vec::new();
        for (ti, t) in schema.tables.iter().enumerate() {
            for (ci, c) in t.columns.iter().enumerate() {
                let mut d = format!("{} {} {}", words(&c.name), words(&c.name), words(&t.name));
                if let Some(comment) = &c.comment {
                    d.push(' ');
                    d.push_str(comment);
                }
                column_docs.push(d);
                column_ids.push((ti, ci));
                for (vi, v) in c.values.iter().enumerate() {
                    value_docs.push(v.clone());
                    value_ids.push((ti, ci, vi));
                }
            }
        }
        let mut links = vec![Vec::new(); schema.tables.len()];
        for (ti, t) in schema.tables.iter().enumerate() {
            for fk in &t.foreign_keys {
                let Some(&ri) = by_name.get(&fk.ref_table.to_lowercase()) else {
                    continue;
                };
                let col = |table: &Table, name: &str| {
                    table
                        .columns
                        .iter()
                        .position(|c| c.name.eq_ignore_ascii_case(name))
                };
                let (Some(a), Some(b)) =
                    (col(t, &fk.column), col(&schema.tables[ri], &fk.ref_column))
                else {
                    continue;
                };
                links[ti].push((ri, a, b));
                links[ri].push((ti, b, a));
            }
        }
        let engine = |docs: Vec<String>| {
            SearchEngineBuilder::<u32>::with_corpus(Language::English, docs).build()
        };
        Index {
            by_name,
            tables: engine(table_docs),
            names: engine(name_docs),
            columns: engine(column_docs),
            values: (!value_docs.is_empty()).then(|| engine(value_docs)),
            column_ids,
            value_ids,
            links,
            schema,
        }
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The baseline: the `k` tables whose names alone match `question` best (BM25).
    pub fn tables_by_name(&self, question: &str, k: usize) -> Vec<String> {
        self.names
            .search(&words(question), k)
            .into_iter()
            .filter(|r| r.score > 0.0)
            .map(|r| self.schema.tables[r.document.id as usize].name.clone())
            .collect()
    }

    /// The tables, columns and values of the schema that matter for `question`.
    pub fn ground(&self, question: &str, budget: Budget) -> Selection {
        let Scores {
            table: score,
            column: column_score,
            values: value_hits,
        } = self.scores(question);
        let n = self.schema.tables.len();
        let mut ranked: Vec<usize> = (0..n).filter(|&t| score[t] > 0.0).collect();
        ranked.sort_by(|&a, &b| score[b].total_cmp(&score[a]).then(a.cmp(&b)));
        let chosen = self.choose_tables(&ranked, budget.tables);
        let set: HashSet<usize> = chosen.iter().copied().collect();
        let ordered = self.choose_columns(&chosen, &set, &column_score, budget.columns);
        let values = self.choose_values(value_hits, &set, budget.values);
        Selection {
            tables: chosen
                .iter()
                .map(|&t| self.schema.tables[t].name.clone())
                .collect(),
            columns: ordered
                .iter()
                .map(|&(t, c)| {
                    let table = &self.schema.tables[t];
                    format!("{}.{}", table.name, table.columns[c].name)
                })
                .collect(),
            values,
        }
    }

    /// How well each table, column and sampled value matches `question`. A table's score
    /// is its own match and its best column's and value's, with a bonus for the tables
    /// joined to the best one.
    fn scores(&self, question: &str) -> Scores {
        let n = self.schema.tables.len();
        let q = words(question);
        let mut score = vec![0f32; n];
        for r in self.tables.search(&q, n) {
            score[r.document.id as usize] += r.score;
        }
        let mut column_score: HashMap<(usize, usize), f32> = HashMap::new();
        let mut best_column = vec![0f32; n];
        for r in self.columns.search(&q, 200) {
            let (t, c) = self.column_ids[r.document.id as usize];
            column_score.insert((t, c), r.score);
            best_column[t] = best_column[t].max(r.score);
        }
        let mut value_hits = Vec::new();
        let mut best_value = vec![0f32; n];
        if let Some(values) = &self.values {
            for r in values.search(question, 100) {
                let (t, c, v) = self.value_ids[r.document.id as usize];
                best_value[t] = best_value[t].max(r.score);
                value_hits.push((r.score, t, c, v));
            }
        }
        for t in 0..n {
            score[t] += 0.5 * best_column[t] + best_value[t];
        }
        // NB: a table joined to the best one is likelier to be asked about with it than
        // an equally named one elsewhere (a warehouse repeats `orders` and `customers`).
        if let Some(top) = (0..n).max_by(|&a, &b| score[a].total_cmp(&score[b]).then(b.cmp(&a)))
            && score[top] > 0.0
        {
            let bonus = NEIGHBOUR_BONUS * score[top];
            for &(o, _, _) in &self.links[top] {
                if score[o] > 0.0 {
                    score[o] += bonus;
                }
            }
        }
        Scores {
            table: score,
            column: column_score,
            values: value_hits,
        }
    }

    /// The best tables of `ranked`, each joined to those before it by the tables on the
    /// shortest foreign-key path between them, while `budget` lasts.
    fn choose_tables(&self, ranked: &[usize], budget: usize) -> Vec<usize> {
        let mut chosen: Vec<usize> = Vec::new();
        for &t in ranked {
            if chosen.len() >= budget {
                break;
            }
            if chosen.contains(&t) {
                continue;
            }
            let path = self.path_to(t, &chosen);
            let new: Vec<usize> = path.into_iter().filter(|p| !chosen.contains(p)).collect();
            if chosen.len() + new.len() < budget || chosen.is_empty() {
                chosen.push(t);
                chosen.extend(new);
            } else if chosen.len() < budget {
                chosen.push(t);
            }
        }
        chosen.truncate(budget);
        chosen
    }

    /// The columns of the `chosen` tables (`set`) to show, at most `budget`: the
    /// best-matching ones first (the selection is best first), leaving room for the keys
    /// that join the chosen tables, then those keys, then the chosen tables' other
    /// columns, best table first: a query needs the columns a question does not name too
    /// (`name`, `id`).
    fn choose_columns(
        &self,
        chosen: &[usize],
        set: &HashSet<usize>,
        column_score: &HashMap<(usize, usize), f32>,
        budget: usize,
    ) -> Vec<(usize, usize)> {
        let push = |cols: &mut Vec<(usize, usize)>, tc: (usize, usize)| {
            if !cols.contains(&tc) {
                cols.push(tc);
            }
        };
        let mut cols: Vec<(usize, usize)> = Vec::new();
        for &t in chosen {
            for &(o, a, _) in &self.links[t] {
                if set.contains(&o) {
                    push(&mut cols, (t, a));
                }
            }
        }
        let mut matched: Vec<((usize, usize), f32)> = column_score
            .iter()
            .filter(|((t, _), _)| set.contains(t))
            .map(|(&k, &s)| (k, s))
            .collect();
        matched.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut best: Vec<(usize, usize)> = matched.into_iter().map(|(k, _)| k).collect();
        for &t in chosen {
            if let Some(c) = self.schema.tables[t]
                .columns
                .iter()
                .position(|c| c.primary_key)
            {
                best.push((t, c));
            }
        }
        let room = budget.saturating_sub(cols.len()).max(1);
        let mut ordered: Vec<(usize, usize)> = Vec::new();
        for tc in best.iter().filter(|tc| !cols.contains(tc)).take(room) {
            push(&mut ordered, *tc);
        }
        for tc in cols {
            push(&mut ordered, tc);
        }
        for &t in chosen {
            for c in 0..self.schema.tables[t].columns.len() {
                if ordered.len() >= budget {
                    break;
                }
                push(&mut ordered, (t, c));
            }
        }
        ordered.truncate(budget.max(1));
        ordered
    }

    /// The best of the values that matched, of the chosen tables (`set`), at most
    /// `budget`. NB: a few values per column: the planner learns how a column spells its
    /// values; ten of one column teach it nothing more than three.
    fn choose_values(
        &self,
        mut value_hits: Vec<(f32, usize, usize, usize)>,
        set: &HashSet<usize>,
        budget: usize,
    ) -> Vec<ValueMatch> {
        value_hits.retain(|(_, t, _, _)| set.contains(t));
        value_hits.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then((a.1, a.2, a.3).cmp(&(b.1, b.2, b.3)))
        });
        let mut per_column: HashMap<(usize, usize), usize> = HashMap::new();
        value_hits
            .into_iter()
            .filter(|(_, t, c, _)| {
                let n = per_column.entry((*t, *c)).or_default();
                *n += 1;
                *n <= VALUES_PER_COLUMN
            })
            .take(budget)
            .map(|(_, t, c, v)| {
                let table = &self.schema.tables[t];
                ValueMatch {
                    table: table.name.clone(),
                    column: table.columns[c].name.clone(),
                    value: table.columns[c].values[v].clone(),
                }
            })
            .collect()
    }

    /// The tables strictly between `from` and the nearest of `to` on the foreign-key
    /// graph (empty when `to` is empty, `from` is next to one, or none is reachable).
    fn path_to(&self, from: usize, to: &[usize]) -> Vec<usize> {
        if to.is_empty() {
            return Vec::new();
        }
        let targets: HashSet<usize> = to.iter().copied().collect();
        let mut prev: HashMap<usize, usize> = HashMap::new();
        let mut queue = VecDeque::from([from]);
        let mut seen = HashSet::from([from]);
        while let Some(t) = queue.pop_front() {
            if targets.contains(&t) {
                let mut path = Vec::new();
                let mut at = prev.get(&t).copied();
                while let Some(p) = at.filter(|&p| p != from) {
                    path.push(p);
                    at = prev.get(&p).copied();
                }
                return path;
            }
            for &(o, _, _) in &self.links[t] {
                if seen.insert(o) {
                    prev.insert(o, t);
                    queue.push_back(o);
                }
            }
        }
        Vec::new()
    }

    /// `selection` as the prompt shows it: each chosen table as a CREATE TABLE with its
    /// chosen columns and their joins, then the matched values.
    pub fn text(&self, tool: &str, selection: &Selection) -> String {
        let mut out = String::new();
        let chosen: BTreeSet<(usize, usize)> = selection
            .columns
            .iter()
            .filter_map(|tc| {
                let (t, c) = tc.rsplit_once('.')?;
                let ti = *self.by_name.get(&t.to_lowercase())?;
                let ci = self.schema.tables[ti]
                    .columns
                    .iter()
                    .position(|col| col.name == c)?;
                Some((ti, ci))
            })
            .collect();
        let _ = writeln!(
            out,
            "The database of tool `{tool}` (SQLite): the tables, columns and values that matter for the goal (the database has more; `...` marks columns left out)."
        );
        for name in &selection.tables {
            let Some(&ti) = self.by_name.get(&name.to_lowercase()) else {
                continue;
            };
            let t = &self.schema.tables[ti];
            let _ = writeln!(out, "\nCREATE TABLE {} (", t.name);
            let shown: Vec<usize> = (0..t.columns.len())
                .filter(|c| chosen.contains(&(ti, *c)))
                .collect();
            for (i, &ci) in shown.iter().enumerate() {
                let c = &t.columns[ci];
                let mut line = format!("  {} {}", c.name, c.ty);
                if c.primary_key {
                    line.push_str(" PRIMARY KEY");
                }
                if let Some(fk) = t
                    .foreign_keys
                    .iter()
                    .find(|fk| fk.column.eq_ignore_ascii_case(&c.name))
                {
                    let _ = write!(line, " REFERENCES {}({})", fk.ref_table, fk.ref_column);
                }
                if i + 1 < shown.len() || shown.len() < t.columns.len() {
                    line.push(',');
                }
                if let Some(comment) = &c.comment {
                    let _ = write!(line, " -- {comment}");
                }
                let _ = writeln!(out, "{line}");
            }
            if shown.len() < t.columns.len() {
                let _ = writeln!(out, "  ...");
            }
            let _ = writeln!(out, ");");
        }
        if !selection.values.is_empty() {
            let _ = writeln!(out, "\nValues in the data that match the goal:");
            for v in &selection.values {
                let _ = writeln!(
                    out,
                    "- {}.{} = '{}'",
                    v.table,
                    v.column,
                    v.value.replace('\'', "''").replace(['\n', '\r'], " ")
                );
            }
        }
        out
    }
}

/// How a question matches a schema: each table's score, each matching column's (table,
/// column) and each matching sampled value's (score, table, column, value).
struct Scores {
    table: Vec<f32>,
    column: HashMap<(usize, usize), f32>,
    values: Vec<(f32, usize, usize, usize)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, ty: &str) -> Column {
        Column {
            name: name.into(),
            ty: ty.into(),
            primary_key: name == "id",
            ..Column::default()
        }
    }

    fn fk(column: &str, table: &str) -> ForeignKey {
        ForeignKey {
            column: column.into(),
            ref_table: table.into(),
            ref_column: "id".into(),
        }
    }

    fn shop() -> Schema {
        let mut staff = Table {
            name: "staff".into(),
            columns: vec![
                col("id", "INTEGER"),
                col("name", "TEXT"),
                col("store_id", "INTEGER"),
                col("role", "TEXT"),
            ],
            foreign_keys: vec![fk("store_id", "stores")],
        };
        staff.columns[3].values = vec!["manager".into(), "sales".into()];
        let mut stores = Table {
            name: "stores".into(),
            columns: vec![
                col("id", "INTEGER"),
                col("name", "TEXT"),
                col("city", "TEXT"),
            ],
            foreign_keys: vec![],
        };
        stores.columns[2].values = vec!["Berlin".into(), "Paris".into(), "Milan".into()];
        let orders = Table {
            name: "orders".into(),
            columns: vec![
                col("id", "INTEGER"),
                col("staff_id", "INTEGER"),
                col("product_id", "INTEGER"),
                col("quantity", "INTEGER"),
                col("OrderedAt", "TEXT"),
            ],
            foreign_keys: vec![fk("staff_id", "staff"), fk("product_id", "products")],
        };
        let products = Table {
            name: "products".into(),
            columns: vec![
                col("id", "INTEGER"),
                col("name", "TEXT"),
                col("price", "REAL"),
            ],
            foreign_keys: vec![],
        };
        let noise = (0..50).map(|i| Table {
            name: format!("audit_log_{i}"),
            columns: vec![col("id", "INTEGER"), col("event", "TEXT")],
            foreign_keys: vec![],
        });
        Schema {
            tables: [staff, stores, orders, products]
                .into_iter()
                .chain(noise)
                .collect(),
        }
    }

    #[test]
    fn identifiers_split_into_words() {
        assert_eq!(words("store_id"), "store id");
        assert_eq!(words("OrderedAt"), "ordered at");
        assert_eq!(words("sales2024Total"), "sales2024 total");
    }

    #[test]
    fn a_question_gets_its_tables_the_tables_that_join_them_and_its_values() {
        let index = Index::new(shop());
        let s = index.ground(
            "Which city is the store of the staff member who sold the most orders?",
            Budget::default(),
        );
        for t in ["stores", "staff", "orders"] {
            assert!(s.tables.contains(&t.to_owned()), "{t}: {s:?}");
        }
        assert!(s.columns.contains(&"staff.store_id".to_owned()), "{s:?}");
        assert!(s.columns.contains(&"orders.staff_id".to_owned()), "{s:?}");
        // Orders and stores are joined through staff: asking for both brings staff.
        let s = index.ground(
            "orders per city of the stores",
            Budget {
                tables: 3,
                ..Budget::default()
            },
        );
        assert_eq!(s.tables.len(), 3, "{s:?}");
        assert!(s.tables.contains(&"staff".to_owned()), "{s:?}");
        let s = index.ground("How many managers work in Berlin?", Budget::default());
        let values: Vec<&str> = s.values.iter().map(|v| v.value.as_str()).collect();
        assert!(values.contains(&"Berlin"), "{s:?}");
        let text = index.text("shop_db", &s);
        assert!(text.contains("CREATE TABLE stores ("), "{text}");
        assert!(text.contains("- stores.city = 'Berlin'"), "{text}");
    }
}
