//! Grounding: the few tables, columns and values of a database that matter for a goal,
//! for the planner's prompt. A schema of hundreds of tables does not fit a prompt, and an
//! LLM given all of it writes worse SQL; given none, it guesses names.
//!
//! An [`Index`] of a [`Schema`] holds three BM25 retrievers (tables: name, comment and
//! column names; columns: table and column names and comment; values: the distinct short
//! text values sampled from each text column), over identifiers split into words
//! (`store_id` → `store id`, `OrderDate` → `order date`) with their short forms spelled
//! out. [`Index::ground`] scores every table by its own match and its best columns' and
//! value's (a table the question names as written first), spreads the scores along the
//! foreign keys (declared, or inferred from column names), counts a series of tables
//! named alike (a table per year) once, lets a family of like tables give way after its
//! best, ranks every table, orders the first to cover the question's words, takes the
//! best, and adds by structure: the tables on the shortest foreign-key path between
//! two chosen ones (with their join columns), so a query that needs a join can be written
//! from what the prompt shows. Columns: the best-matching, the keys, then the chosen
//! tables' first ones; values: the best-matching ones in the chosen tables. Each signal
//! can be turned off ([`Signals`]) to measure it (docs/sql.md).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::fmt::Write;

use bm25::{DefaultTokenizer, Language, Tokenizer};
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
    /// What the schema says the table holds (a comment on it, a catalogue's description).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
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

/// Matching values shown per column, at most.
const VALUES_PER_COLUMN: usize = 3;

/// How much a selection holds at most.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budget {
    pub tables: usize,
    pub columns: usize,
    pub values: usize,
    /// Tables scoring below this share of the best one's are left out (default: none
    /// is: the best `tables` are shown, however weakly they match).
    pub min_score: Option<f32>,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            tables: 5,
            columns: 20,
            values: 10,
            min_score: None,
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
    /// The chosen tables that stand for a series (see [`Signals::series`]): each one's
    /// name → every table of its series, by name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub series: BTreeMap<String, Vec<String>>,
    /// The columns shown that stand for a series of columns (see
    /// [`Signals::column_series`]): each one's `table.column` → the names of every
    /// column of its series, in the table's order.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub column_series: BTreeMap<String, Vec<String>>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ValueMatch {
    pub table: String,
    pub column: String,
    pub value: String,
}

/// `name` as words: `store_id` → `store id`, `OrderDate` → `order date`, `HTTPStatus` →
/// `http status`, `sales2024` → `sales 2024`.
pub fn words(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let chars: Vec<char> = name.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            out.push(' ');
            continue;
        }
        if let Some(&p) = i.checked_sub(1).and_then(|j| chars.get(j)) {
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let boundary = (c.is_uppercase() && (p.is_lowercase() || p.is_ascii_digit()))
                // The last capital of a run starts the next word: `HTTPStatus`.
                || (c.is_uppercase() && p.is_uppercase() && next_lower)
                || (c.is_ascii_digit() != p.is_ascii_digit() && p.is_alphanumeric());
            if boundary {
                out.push(' ');
            }
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// Short forms identifiers use, and the word a question says instead.
const ABBREVIATIONS: &[(&str, &str)] = &[
    ("acct", "account"),
    ("addr", "address"),
    ("amt", "amount"),
    ("avg", "average"),
    ("cat", "category"),
    ("cnt", "count"),
    ("cust", "customer"),
    ("dept", "department"),
    ("desc", "description"),
    ("dob", "birth"),
    ("dt", "date"),
    ("emp", "employee"),
    ("geo", "geography"),
    ("inv", "invoice"),
    ("lat", "latitude"),
    ("lng", "longitude"),
    ("lon", "longitude"),
    ("mgr", "manager"),
    ("num", "number"),
    ("pct", "percent"),
    ("pop", "population"),
    ("prod", "product"),
    ("qty", "quantity"),
    ("rev", "revenue"),
    ("ts", "timestamp"),
    ("tx", "transaction"),
    ("txn", "transaction"),
    ("usr", "user"),
    ("yr", "year"),
];

/// `name` as words, each short form followed by the word it stands for (`cust_qty` →
/// `cust customer qty quantity`).
fn expanded(name: &str) -> String {
    let mut out = String::new();
    for w in words(name).split_whitespace() {
        out.push_str(w);
        out.push(' ');
        if let Ok(i) = ABBREVIATIONS.binary_search_by(|(short, _)| short.cmp(&w)) {
            out.push_str(ABBREVIATIONS[i].1);
            out.push(' ');
        }
    }
    out
}

/// The runs of digits in `text`, without leading zeros (`q1`, `2017_5yr`: 1, 2017, 5).
fn numbers_in(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter(|run| !run.is_empty())
        .map(|run| match run.trim_start_matches('0') {
            "" => "0".to_owned(),
            n => n.to_owned(),
        })
        .collect()
}

/// `text` as the index reads it: its words, short forms spelled out when `signals` say.
fn identifier_words(text: &str, signals: Signals) -> String {
    match signals.abbreviations {
        true => expanded(text),
        false => words(text),
    }
}

/// `text`'s words, then each two neighbours written as one (`census tracts` →
/// `censustracts`): identifiers run words together (`censustract_2018`, `zipcodes`).
fn joined_pairs(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut out = words.join(" ");
    for pair in words.windows(2) {
        if pair.iter().all(|w| w.chars().all(char::is_alphabetic)) {
            out.push(' ');
            out.push_str(pair[0]);
            out.push_str(pair[1]);
        }
    }
    out
}

/// Whether `a` and `b` are one noun, singular or plural (`customer`, `customers`;
/// `category`, `categories`; `address`, `addresses`): enough to tell that `customer_id`
/// names the table `customers`.
fn same_noun(a: &str, b: &str) -> bool {
    let plural = |one: &str, many: &str| {
        many.strip_prefix(one)
            .is_some_and(|rest| rest == "s" || rest == "es")
            || one
                .strip_suffix('y')
                .is_some_and(|stem| many.strip_prefix(stem) == Some("ies"))
    };
    a == b || plural(a, b) || plural(b, a)
}

/// The signals grounding weighs, all on by default; each can be turned off to measure
/// what it brings (`cargo run -p plan-sql --example grounding -- --ablation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signals {
    /// A column that matches lifts its table.
    pub columns: bool,
    /// A sampled value that matches lifts its column's table.
    pub values: bool,
    /// What the schema says of a table or column (comments, a catalogue's descriptions).
    pub comments: bool,
    /// Short forms in identifiers read as the words they stand for (`qty`: quantity).
    pub abbreviations: bool,
    /// Scores spread along the foreign keys (personalized PageRank seeded by the matches):
    /// a table joined to well-matching ones rises.
    pub graph: bool,
    /// Foreign keys inferred from column names (`orders.customer_id` → `customers`) when
    /// the schema declares none.
    pub inferred_keys: bool,
    /// A table on the shortest join path between two chosen ones is chosen with them.
    pub join_paths: bool,
    /// Tables of one family (one dataset, the same columns or the same name but for its
    /// digits: a table per state, per year, per shard) give way to other tables after
    /// their best: ten of one family would fill the prompt with one thing.
    pub families: bool,
    /// Numbers in table names weighed against the question's (`2017`: `county_2017_5yr`
    /// rather than `county_2015_5yr`). Off by default: on the development sets it helps
    /// at 3 or 5 tables and costs at 10.
    pub numbers: bool,
    /// A series of tables of one dataset named the same but for a number (one per year,
    /// day, release, shard: `gsod1929` to `gsod2024`, `events_20210101`,
    /// `activities_29`) and of like columns is one place of the selection: its best
    /// table, shown with the names of the others.
    pub series: bool,
    /// A table the question names as it is written (`posts_answers`, an identifier with
    /// `_` in it) ranks with the best.
    pub named: bool,
    /// Tables are ordered to cover the question: a table matching only the words that
    /// better ones it does not join matched gives way to one that matches words they did
    /// not (the trips of green taxis after those of yellow ones, and before the taxi
    /// zones the question also asks about, is one table too many).
    pub coverage: bool,
    /// Columns of one table named the same but for a number (`year_1960` to
    /// `year_2019`, `address_line1`, `address_line2`) take one place among the columns
    /// shown: the first of them, shown with the names of the others.
    pub column_series: bool,
}

impl Default for Signals {
    fn default() -> Self {
        Signals {
            columns: true,
            values: true,
            comments: true,
            abbreviations: true,
            graph: true,
            inferred_keys: true,
            join_paths: true,
            families: true,
            // NB: measured neutral to harmful on the development sets (docs/sql.md).
            numbers: false,
            series: true,
            named: true,
            coverage: true,
            column_series: true,
        }
    }
}

/// What a table's matching columns add to its score, as a share of theirs: the best
/// [`COLUMNS_COUNTED`] of them, their sum over the square root of that count (a table
/// matching on two columns outranks one matching on one, but not twofold).
const COLUMN_WEIGHT: f32 = 0.5;
const COLUMNS_COUNTED: usize = 2;

/// What a table's best-matching sampled value adds to its score, as a share of its own:
/// less than a column's name, since one word of a question can match a value anywhere.
const VALUE_WEIGHT: f32 = 0.5;

/// What a number in a table's name does to its score when the question has numbers: one
/// the question says lifts it (`2017` for `county_2017_5yr`), one it does not lowers it
/// (`county_2015_5yr`).
const NUMBER_ASKED: f32 = 1.5;
const NUMBER_NOT_ASKED: f32 = 0.7;

/// Of a table's score after the graph, the share that came along its foreign keys
/// (PageRank's damping): the rest is its own match.
const GRAPH_DAMPING: f32 = 0.3;

/// What a table joined to the best-matching one gains, as a share of that one's score.
const NEIGHBOUR_BONUS: f32 = 0.3;

/// What a table keeps of its score for each better table of its family.
const FAMILY_DECAY: f32 = 0.5;

/// What a word's match keeps of itself, in the order of coverage, for each table before
/// that matched it too (see [`Signals::coverage`]).
const COVERED_KEEP: f32 = 0.7;

/// The places ordered by coverage: more than a prompt is given (5 by default, 10 in the
/// evaluation), so that a table the coverage lifts can come from below them.
const COVERAGE_RANKS: usize = 30;

/// Rounds of score spreading; each reaches one join further.
const GRAPH_ROUNDS: usize = 8;
/// Reciprocal-rank fusion's constant for the embeddings' order and the words' order: a
/// table's place in the fused order is by `1/(K + its place in one) + 1/(K + in the
/// other)`. Small, so the top of each order counts most (measured from 3 to 60 on the
/// development sets: 10 was the best at 5 and 10 tables together, docs/sql.md).
const FUSION_K: f32 = 10.0;
/// A table's comment, at most, in its embedding's document: the comment's start says
/// what the table holds, and the model reads a bounded number of tokens.
const EMBEDDED_COMMENT: usize = 200;

/// BM25 over an index's documents: `bm25`'s scores (its Okapi weights, k1 1.2 and b
/// 0.75, its idf, a question's repeated words counted again), from an inverted index of
/// our own, whose tokens are told apart by their text (`bm25` by a 32-bit hash of it,
/// which merged the few that collide). Each distinct word of the documents is tokenized once ([`Words`]) and each
/// token is a number; a token's postings hold each document's weight for it. Building
/// `bm25`'s embedder and scorer hashed every token into a map per document and kept a
/// set per token: most of the time a schema's index took.
struct Bm25 {
    tokenizer: DefaultTokenizer,
    /// Token → its number.
    terms: foldhash::HashMap<String, u32>,
    /// By token number: (document, its weight for the token), documents in order.
    postings: Vec<Vec<(u32, f32)>>,
    /// Documents indexed.
    docs: usize,
}

impl Bm25 {
    const K1: f32 = 1.2;
    const B: f32 = 0.75;
    /// `bm25`'s average document length when there is none to average.
    const FALLBACK_AVGDL: f32 = 256.0;

    fn new(docs: &[String]) -> Bm25 {
        let mut words = Words::new();
        let tokenized: Vec<Vec<u32>> = docs.iter().map(|d| words.tokenize(d)).collect();
        let total: u64 = tokenized.iter().map(|t| t.len() as u64).sum();
        let avgdl = match docs.len() {
            0 => Self::FALLBACK_AVGDL,
            n => (total as f64 / n as f64) as f32,
        };
        let avgdl = if avgdl <= 0.0 {
            Self::FALLBACK_AVGDL
        } else {
            avgdl
        };
        let mut postings: Vec<Vec<(u32, f32)>> = vec![Vec::new(); words.terms.len()];
        let mut counts: Vec<(u32, u32)> = Vec::new();
        for (doc, tokens) in (0u32..).zip(&tokenized) {
            let norm = Self::K1 * (1.0 - Self::B + Self::B * (tokens.len() as f32 / avgdl));
            counts.clear();
            counts.extend(tokens.iter().map(|&t| (t, 1)));
            counts.sort_unstable_by_key(|&(t, _)| t);
            counts.dedup_by(|next, kept| {
                let same = next.0 == kept.0;
                if same {
                    kept.1 += 1;
                }
                same
            });
            for &(term, tf) in &counts {
                let tf = tf as f32;
                postings[term as usize].push((doc, tf * (Self::K1 + 1.0) / (tf + norm)));
            }
        }
        Bm25 {
            tokenizer: words.inner,
            terms: words.terms,
            postings,
            docs: docs.len(),
        }
    }

    /// Term `term`'s postings and its inverse document frequency.
    fn weighted(&self, term: u32) -> (&[(u32, f32)], f32) {
        let postings = &self.postings[term as usize];
        let df = postings.len() as f32;
        let idf = (1.0 + (self.docs as f32 - df + 0.5) / (df + 0.5)).ln();
        (postings, idf)
    }

    /// The numbers of `text`'s tokens that the documents have.
    fn known(&self, text: &str) -> Vec<u32> {
        let tokens = self.tokenizer.tokenize(text).into_iter();
        tokens.filter_map(|t| self.terms.get(&t).copied()).collect()
    }

    /// Each document's match with `query`, term by term (the query's distinct
    /// tokens, numbered in order): (term, its share of the score), but for the terms
    /// `skip` says of the document.
    fn by_term(
        &self,
        query: &str,
        docs: usize,
        skip: impl Fn(usize, u32) -> bool,
    ) -> Vec<Vec<(usize, f32)>> {
        let mut out = vec![Vec::new(); docs];
        let mut seen: foldhash::HashMap<u32, usize> = foldhash::HashMap::default();
        for token in self.tokenizer.tokenize(query) {
            let Some(&term) = self.terms.get(&token) else {
                continue;
            };
            let next = seen.len();
            let j = *seen.entry(term).or_insert(next);
            let (postings, idf) = self.weighted(term);
            for &(doc, weight) in postings.iter().filter(|(d, _)| !skip(*d as usize, term)) {
                let doc = &mut out[doc as usize];
                match doc.iter_mut().find(|(k, _)| *k == j) {
                    Some((_, c)) => *c += idf * weight,
                    None => doc.push((j, idf * weight)),
                }
            }
        }
        out
    }

    /// The `limit` documents that match `query` best: (number, score), best first, ties
    /// in the documents' order (so that which of equally good columns or values are
    /// kept, and what the planner is shown, is the same each time).
    fn best(&self, query: &str, limit: usize) -> Vec<(usize, f32)> {
        let mut score: foldhash::HashMap<u32, f32> = foldhash::HashMap::default();
        // NB: a token's score added in the query's order, each time it comes, as `bm25`
        // adds them: the same sums to the bit.
        for token in self.tokenizer.tokenize(query) {
            let Some(&term) = self.terms.get(&token) else {
                continue;
            };
            let (postings, idf) = self.weighted(term);
            for &(doc, weight) in postings {
                *score.entry(doc).or_insert(0.0) += idf * weight;
            }
        }
        let mut found: Vec<(usize, f32)> =
            score.into_iter().map(|(d, s)| (d as usize, s)).collect();
        found.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        found.truncate(limit);
        found
    }
}

/// `bm25`'s English tokenizer (Unicode words, lowercase, stop words left out, stemmed),
/// each distinct space-separated piece tokenized once while an index is built: its
/// documents repeat their words (a table's name in each of its columns' documents, the
/// same values in many columns), and stemming was most of the time an index took to
/// build. The pieces' tokens are the whole text's: a Unicode word never spans a space.
/// Each token is numbered as it is first seen.
struct Words {
    inner: DefaultTokenizer,
    /// Piece → its tokens' numbers.
    pieces: foldhash::HashMap<String, Vec<u32>>,
    terms: foldhash::HashMap<String, u32>,
}

impl Words {
    fn new() -> Words {
        Words {
            inner: DefaultTokenizer::new(Language::English),
            pieces: foldhash::HashMap::default(),
            terms: foldhash::HashMap::default(),
        }
    }

    /// The numbers of `text`'s tokens, in order.
    fn tokenize(&mut self, text: &str) -> Vec<u32> {
        // NB: transliterated whole first, as `bm25` does: its transliteration of a text
        // that is not all ASCII drops tabs and newlines, joining the words on either side.
        let text = deunicode::deunicode_with_tofu_cow(text, "[?]");
        let mut tokens = Vec::new();
        for piece in text.split(' ').filter(|p| !p.is_empty()) {
            if let Some(known) = self.pieces.get(piece) {
                tokens.extend_from_slice(known);
                continue;
            }
            let numbered: Vec<u32> = (self.inner.tokenize(piece).into_iter())
                .map(|token| {
                    let next = u32::try_from(self.terms.len()).unwrap_or(u32::MAX);
                    *self.terms.entry(token).or_insert(next)
                })
                .collect();
            tokens.extend_from_slice(&numbered);
            self.pieces.insert(piece.to_owned(), numbered);
        }
        tokens
    }
}

/// A schema indexed for grounding.
pub struct Index {
    schema: Schema,
    signals: Signals,
    /// Lowercase table name → position.
    by_name: HashMap<String, usize>,
    tables: Bm25,
    columns: Bm25,
    /// Column document id → (table, column).
    column_ids: Vec<(usize, usize)>,
    values: Option<Bm25>,
    /// Value document id → (table, column, value).
    value_ids: Vec<(usize, usize, usize)>,
    /// Tables joined by a foreign key, both ways: table → (other, this side's column,
    /// the other side's column).
    links: Vec<Vec<(usize, usize, usize)>>,
    /// Each table's family (see [`Signals::families`]).
    family: Vec<usize>,
    /// Each table's series, by its newest table (see [`Signals::series`]).
    series: Vec<usize>,
    /// By a series' newest table, its tables, oldest first (empty for other tables).
    members: Vec<Vec<usize>>,
    /// Lowercase table name past its dataset → the tables so named.
    by_short_name: HashMap<String, Vec<usize>>,
    /// The table index's terms of each table's dataset (the name before its last `.`).
    dataset_terms: Vec<Vec<u32>>,
    /// The numbers in each table's name, past its dataset (`county_2017_5yr`: 2017, 5).
    numbers: Vec<Vec<String>>,
    /// The model and each series' embedding (by its first table), when grounding has one.
    embeddings: Option<Embeddings>,
}

/// A sentence-embedding model and the embedding of each place's document (see
/// [`Index::embedding_documents`]).
struct Embeddings {
    model: std::sync::Arc<plan_embed::Model>,
    /// By table: its series' embedding at the series' first table, empty elsewhere.
    tables: Vec<Vec<f32>>,
}

impl Index {
    pub fn new(schema: Schema) -> Index {
        Index::with(schema, Signals::default())
    }

    /// An index weighing only `signals`.
    pub fn with(schema: Schema, signals: Signals) -> Index {
        let by_name: HashMap<String, usize> = schema
            .tables
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.to_lowercase(), i))
            .collect();
        let ident = |name: &str| identifier_words(name, signals);
        let table_docs: Vec<String> = (schema.tables.iter())
            .map(|t| table_document(t, signals))
            .collect();
        let mut column_docs = Vec::new();
        let mut column_ids = Vec::new();
        let mut value_docs = Vec::new();
        let mut value_ids = Vec::new();
        for (ti, t) in schema.tables.iter().enumerate() {
            for (ci, c) in t.columns.iter().enumerate() {
                let name = ident(&c.name);
                let mut d = format!("{name} {name} {}", ident(&t.name));
                if signals.comments
                    && let Some(comment) = &c.comment
                {
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
        let links = links(&schema, &by_name, signals.inferred_keys);
        let family = families(&schema);
        let series = match signals.series {
            true => series(&schema),
            false => (0..schema.tables.len()).collect(),
        };
        let members = members(&schema, &series);
        let mut by_short_name: HashMap<String, Vec<usize>> = HashMap::new();
        for (t, table) in schema.tables.iter().enumerate() {
            (by_short_name.entry(split_dataset(&table.name).1.to_lowercase()))
                .or_default()
                .push(t);
        }
        let numbers = schema
            .tables
            .iter()
            .map(|t| numbers_in(split_dataset(&t.name).1))
            .collect();
        // NB: the values' index, the largest, is built beside the others.
        let wanted = signals.values && !value_docs.is_empty();
        let ((tables, columns), values) = std::thread::scope(|scope| {
            let values = scope.spawn(|| wanted.then(|| Bm25::new(&value_docs)));
            let others = (Bm25::new(&table_docs), Bm25::new(&column_docs));
            // NB: a panic in the builder is a bug: it is the caller's, as it was.
            let values = values
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e));
            (others, values)
        });
        let dataset_terms = schema
            .tables
            .iter()
            .map(|t| match split_dataset(&t.name).0 {
                "" => Vec::new(),
                dataset => tables.known(&ident(dataset)),
            })
            .collect();
        Index {
            by_name,
            dataset_terms,
            tables,
            columns,
            values,
            column_ids,
            value_ids,
            links,
            family,
            series,
            members,
            by_short_name,
            numbers,
            schema,
            signals,
            embeddings: None,
        }
    }

    /// What each table's embedding is made of, by table: for a series' first table, its
    /// name as words, the start of its comment and its columns' names; `None` for the
    /// series' other tables, which it stands for.
    pub fn embedding_documents(&self) -> Vec<Option<String>> {
        (self.schema.tables.iter().enumerate())
            .map(|(i, t)| {
                if self.series[i] != i {
                    return None;
                }
                let mut d = words(&t.name);
                if let Some(comment) = &t.comment {
                    d.push_str(". ");
                    d.extend(comment.chars().take(EMBEDDED_COMMENT));
                }
                d.push_str(". columns: ");
                let columns: Vec<String> = t.columns.iter().map(|c| words(&c.name)).collect();
                d.push_str(&columns.join(", "));
                Some(d)
            })
            .collect()
    }

    /// This index with `model`'s embeddings of its [`Index::embedding_documents`]
    /// (`vectors`, in their order and with an empty one where a document is `None`):
    /// tables are then ranked by the words' order and the embeddings' fused.
    ///
    /// Panics if `vectors` does not have one entry per table.
    pub fn with_embeddings(
        mut self,
        model: std::sync::Arc<plan_embed::Model>,
        vectors: Vec<Vec<f32>>,
    ) -> Index {
        assert_eq!(
            vectors.len(),
            self.schema.tables.len(),
            "one vector a table"
        );
        self.embeddings = Some(Embeddings {
            model,
            tables: vectors,
        });
        self
    }

    /// Each table's embedding, as [`Index::with_embeddings`] takes them (none without a
    /// model).
    pub fn embedding_vectors(&self) -> Vec<Vec<f32>> {
        self.embeddings
            .as_ref()
            .map_or_else(Vec::new, |e| e.tables.clone())
    }

    /// This index with `model`'s embeddings, computed now (see
    /// [`Index::with_embeddings`]).
    pub fn embedded(self, model: std::sync::Arc<plan_embed::Model>) -> Index {
        let vectors = embed_documents(&model, &self.embedding_documents());
        self.with_embeddings(model, vectors)
    }

    /// `ranked` reordered by the fusion of its order with the embeddings' order (by
    /// each place's similarity to `question`), when the index has embeddings.
    fn fuse(&self, question: &str, ranked: &mut [usize]) {
        let Some(e) = &self.embeddings else {
            return;
        };
        let q = e.model.embed(question);
        let similarity: Vec<f32> = (ranked.iter())
            .map(|&t| plan_embed::similarity(&q, &e.tables[self.series[t]]))
            .collect();
        let mut by_meaning: Vec<usize> = (0..ranked.len()).collect();
        by_meaning.sort_by(|&a, &b| similarity[b].total_cmp(&similarity[a]).then(a.cmp(&b)));
        let mut meaning_place = vec![0usize; ranked.len()];
        for (place, &i) in by_meaning.iter().enumerate() {
            meaning_place[i] = place;
        }
        let fused = |i: usize| {
            1.0 / (FUSION_K + i as f32 + 1.0) + 1.0 / (FUSION_K + meaning_place[i] as f32 + 1.0)
        };
        let mut order: Vec<usize> = (0..ranked.len()).collect();
        order.sort_by(|&a, &b| fused(b).total_cmp(&fused(a)).then(a.cmp(&b)));
        let before = ranked.to_vec();
        for (slot, i) in ranked.iter_mut().zip(order) {
            *slot = before[i];
        }
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Every table, best first, for `question` (of a series, only its best: see
    /// [`Signals::series`]).
    pub fn rank(&self, question: &str) -> Vec<String> {
        let scores = self.scores(question);
        let mut ranked = self.ranked(&scores.table, &scores.terms);
        self.fuse(question, &mut ranked);
        ranked
            .into_iter()
            .map(|t| self.schema.tables[t].name.clone())
            .collect()
    }

    /// The tables, columns and values of the schema that matter for `question`: the
    /// `budget.tables` best tables (fewer only when `budget.min_score` cuts them; a
    /// series counted once), with the tables that join them, their best columns with
    /// their keys, and the values that match.
    pub fn ground(&self, question: &str, budget: Budget) -> Selection {
        let Scores {
            terms,
            table: score,
            column: column_score,
            values: value_hits,
        } = self.scores(question);
        let mut ranked = self.ranked(&score, &terms);
        if let (Some(min), Some(&best)) = (budget.min_score, ranked.first()) {
            let floor = min * score[best];
            ranked.retain(|&t| score[t] >= floor && score[t] > 0.0);
        }
        self.fuse(question, &mut ranked);
        let chosen = self.choose_tables(&ranked, budget.tables);
        let set: HashSet<usize> = chosen.iter().copied().collect();
        let column_series = self.column_series(&chosen);
        let ordered = self.choose_columns(&chosen, &column_score, &column_series, budget.columns);
        let values = self.choose_values(value_hits, &set, budget.values);
        let name = |(t, c): (usize, usize)| {
            let table = &self.schema.tables[t];
            format!("{}.{}", table.name, table.columns[c].name)
        };
        Selection {
            tables: chosen
                .iter()
                .map(|&t| self.schema.tables[t].name.clone())
                .collect(),
            columns: ordered.iter().map(|&tc| name(tc)).collect(),
            column_series: ordered
                .iter()
                .filter_map(|tc| {
                    let (t, members) = &column_series.members[*column_series.of.get(tc)?];
                    let columns = &self.schema.tables[*t].columns;
                    let names = members.iter().map(|&c| columns[c].name.clone());
                    Some((name(*tc), names.collect()))
                })
                .collect(),
            values,
            series: chosen
                .iter()
                .filter_map(|&t| {
                    let members = &self.members[self.series[t]];
                    (members.len() > 1).then(|| {
                        let names = members.iter().map(|&m| self.schema.tables[m].name.clone());
                        (self.schema.tables[t].name.clone(), names.collect())
                    })
                })
                .collect(),
        }
    }

    /// Whether tables `a` and `b` join (a foreign key, declared or inferred).
    fn joined(&self, a: usize, b: usize) -> bool {
        self.links[a].iter().any(|&(o, _, _)| o == b)
    }

    /// Every table, best first: by score, then (among tables nothing matched) the most
    /// joined first, then in the schema's order; of a series, only its best. With
    /// families, each table's score is first halved for every better one of its family.
    fn ranked(&self, score: &[f32], terms: &[Vec<(usize, f32)>]) -> Vec<usize> {
        let order = |ranked: &mut Vec<usize>, score: &[f32]| {
            ranked.sort_by(|&a, &b| {
                score[b]
                    .total_cmp(&score[a])
                    .then(self.links[b].len().cmp(&self.links[a].len()))
                    .then(a.cmp(&b))
            });
        };
        let mut ranked: Vec<usize> = (0..score.len()).collect();
        order(&mut ranked, score);
        // NB: of a series, its best table stands for it.
        let mut seen = HashSet::new();
        ranked.retain(|&t| seen.insert(self.series[t]));
        let mut given = score.to_vec();
        if self.signals.families {
            let mut before: HashMap<usize, i32> = HashMap::new();
            for &t in &ranked {
                let before = before.entry(self.family[t]).or_default();
                given[t] *= FAMILY_DECAY.powi(*before);
                *before += 1;
            }
            order(&mut ranked, &given);
        }
        if self.signals.coverage {
            covering(&mut ranked, &given, terms, |a, b| self.joined(a, b));
        }
        ranked
    }

    /// How well each table, column and sampled value matches `question`. A table's own
    /// score is its document's match and its best column's and value's; then, with the
    /// graph, part of every table's score flows along its foreign keys.
    fn scores(&self, question: &str) -> Scores {
        let n = self.schema.tables.len();
        let q = joined_pairs(&identifier_words(question, self.signals));
        let mut score = vec![0f32; n];
        for (id, s) in self.tables.best(&q, n) {
            score[id] += s;
        }
        // NB: the words of a table's dataset (`sales` of `sales.orders`) are its
        // neighbours' too: a question about the dataset is not covered by one table.
        let mut terms = match self.signals.coverage {
            true => (self.tables).by_term(&q, n, |t, term| self.dataset_terms[t].contains(&term)),
            false => Vec::new(),
        };
        let mut column_score: HashMap<(usize, usize), f32> = HashMap::new();
        let mut best_column = vec![0f32; n];
        let mut per_table: HashMap<usize, Vec<f32>> = HashMap::new();
        for (id, s) in self.columns.best(&q, 200) {
            let (t, c) = self.column_ids[id];
            column_score.insert((t, c), s);
            per_table.entry(t).or_default().push(s);
        }
        for (t, mut scores) in per_table {
            scores.sort_by(|a, b| b.total_cmp(a));
            let best: f32 = scores.iter().take(COLUMNS_COUNTED).sum();
            best_column[t] = best / (COLUMNS_COUNTED as f32).sqrt();
        }
        let mut value_hits = Vec::new();
        let mut best_value = vec![0f32; n];
        if let Some(values) = &self.values {
            for (id, s) in values.best(question, 100) {
                let (t, c, v) = self.value_ids[id];
                best_value[t] = best_value[t].max(s);
                value_hits.push((s, t, c, v));
            }
        }
        if self.signals.columns {
            for t in 0..n {
                score[t] += COLUMN_WEIGHT * best_column[t];
            }
        }
        for t in 0..n {
            score[t] += VALUE_WEIGHT * best_value[t];
        }
        let asked = numbers_in(question);
        if self.signals.numbers && !asked.is_empty() {
            for (t, numbers) in self.numbers.iter().enumerate() {
                for number in numbers {
                    score[t] *= match asked.contains(number) {
                        true => NUMBER_ASKED,
                        false => NUMBER_NOT_ASKED,
                    };
                }
            }
        }
        // NB: each word's match as a share of the table's own score, which the graph,
        // a name and the families then scale.
        for (t, words) in terms.iter_mut().enumerate() {
            for (_, share) in words.iter_mut() {
                *share /= score[t].max(f32::MIN_POSITIVE);
            }
        }
        if self.signals.graph {
            score = self.spread(score);
            // NB: a table joined to the best one is likelier to be asked about with it
            // than an equally named one elsewhere (a warehouse repeats `orders`).
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
        }
        if self.signals.named {
            self.lift_named(question, &mut score);
        }
        Scores {
            terms,
            table: score,
            column: column_score,
            values: value_hits,
        }
    }

    /// Each table the question names as written (see [`Signals::named`]) gains the best
    /// table's score.
    fn lift_named(&self, question: &str, score: &mut [f32]) {
        let mut named: BTreeSet<usize> = BTreeSet::new();
        let words = question.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'));
        for word in words.map(|w| w.trim_matches('.').to_lowercase()) {
            // NB: `dataset.posts_answers` names `posts_answers` however the schema
            // qualifies it.
            let short = split_dataset(&word).1;
            if !short.contains('_') {
                continue;
            }
            let full = self.by_name.get(&word).into_iter();
            named.extend(full.chain(self.by_short_name.get(short).into_iter().flatten()));
        }
        // NB: with nothing else matched, a named table still comes first.
        let best = score.iter().copied().fold(1f32, f32::max);
        for t in named {
            score[t] += best;
        }
    }

    /// Personalized PageRank over the foreign-key graph, seeded by the tables' own
    /// scores: each round, a table keeps its own score's share and receives the damped
    /// share of its neighbours' (a table with no join keeps all of its own). The scale is
    /// the seed's, so that `min_score` reads the same with or without the graph.
    fn spread(&self, seed: Vec<f32>) -> Vec<f32> {
        let total: f32 = seed.iter().sum();
        if total <= 0.0 || self.links.iter().all(Vec::is_empty) {
            return seed;
        }
        let mut rank = seed.clone();
        let mut next = vec![0f32; seed.len()];
        for _ in 0..GRAPH_ROUNDS {
            for (t, out) in next.iter_mut().enumerate() {
                *out = (1.0 - GRAPH_DAMPING) * seed[t];
            }
            for (t, links) in self.links.iter().enumerate() {
                if links.is_empty() {
                    next[t] += GRAPH_DAMPING * rank[t];
                    continue;
                }
                let share = GRAPH_DAMPING * rank[t] / links.len() as f32;
                for &(o, _, _) in links {
                    next[o] += share;
                }
            }
            std::mem::swap(&mut rank, &mut next);
        }
        rank
    }

    /// The best tables of `ranked`, each joined to those before it by the tables on the
    /// shortest foreign-key path between them, while `budget` lasts.
    fn choose_tables(&self, ranked: &[usize], budget: usize) -> Vec<usize> {
        // NB: a series is one place: a path through one of its tables is through it.
        let taken =
            |chosen: &[usize], t: usize| chosen.iter().any(|&c| self.series[c] == self.series[t]);
        let mut chosen: Vec<usize> = Vec::new();
        for &t in ranked {
            if chosen.len() >= budget {
                break;
            }
            if taken(&chosen, t) {
                continue;
            }
            let path = match self.signals.join_paths {
                true => self.path_to(t, &chosen),
                false => Vec::new(),
            };
            let mut places = HashSet::new();
            let new: Vec<usize> = (path.into_iter())
                .filter(|&p| !taken(&chosen, p) && places.insert(self.series[p]))
                .collect();
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

    /// The columns of the `chosen` tables to show, at most `budget`: the best-matching
    /// ones first (of equal matches, the better table's first), leaving room for the
    /// keys that join the chosen tables, then those keys, then the chosen tables' other
    /// columns, best table first: a query needs the columns a question does not name too
    /// (`name`, `id`). Of a series of columns, one is shown.
    fn choose_columns(
        &self,
        chosen: &[usize],
        column_score: &HashMap<(usize, usize), f32>,
        series: &ColumnSeries,
        budget: usize,
    ) -> Vec<(usize, usize)> {
        let mut joins: Vec<(usize, usize)> = Vec::new();
        for &t in chosen {
            for &(o, a, _) in &self.links[t] {
                if chosen.contains(&o) && !joins.contains(&(t, a)) {
                    joins.push((t, a));
                }
            }
        }
        let mut best = matched_columns(chosen, column_score);
        for &t in chosen {
            if let Some(c) = self.schema.tables[t]
                .columns
                .iter()
                .position(|c| c.primary_key)
            {
                best.push((t, c));
            }
        }
        let room = budget.saturating_sub(joins.len()).max(1);
        let mut picked = Picked::default();
        for tc in best.into_iter().filter(|tc| !joins.contains(tc)) {
            if picked.columns.len() >= room {
                break;
            }
            picked.push(tc, series);
        }
        for tc in joins {
            picked.push_key(tc, series);
        }
        // NB: round the chosen tables, each one's first columns first (its keys and names,
        // as schemas are written): one wide table must not take every place.
        let widest = chosen
            .iter()
            .map(|&t| self.schema.tables[t].columns.len())
            .max()
            .unwrap_or(0);
        'fill: for c in 0..widest {
            for &t in chosen {
                if picked.columns.len() >= budget {
                    break 'fill;
                }
                if c < self.schema.tables[t].columns.len() {
                    picked.push((t, c), series);
                }
            }
        }
        let mut ordered = picked.columns;
        ordered.truncate(budget.max(1));
        ordered
    }

    /// The series of columns of the `chosen` tables (see [`Signals::column_series`]):
    /// none when that signal is off.
    fn column_series(&self, chosen: &[usize]) -> ColumnSeries {
        let mut out = ColumnSeries::default();
        if !self.signals.column_series {
            return out;
        }
        for &t in chosen {
            // NB: keyed by the whole name's pattern: a nested field's path (`geo.lat1`) is
            // part of what it is named.
            let mut by_pattern: HashMap<(String, String), Vec<usize>> = HashMap::new();
            for (c, column) in self.schema.tables[t].columns.iter().enumerate() {
                if let Some(pattern) = numbered(&column.name) {
                    by_pattern.entry(pattern).or_default().push(c);
                }
            }
            let mut found: Vec<Vec<usize>> =
                (by_pattern.into_values()).filter(|m| m.len() > 1).collect();
            // NB: in the table's order, so that the same columns are shown each time.
            found.sort_unstable();
            for members in found {
                for &c in &members {
                    out.of.insert((t, c), out.members.len());
                }
                out.members.push((t, members));
            }
        }
        out
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
    /// graph (empty when `to` is empty, `from` is next to one, or none is reachable). A
    /// series is one place: a path leaves from any table of `from`'s and ends at any
    /// table of a series in `to`.
    fn path_to(&self, from: usize, to: &[usize]) -> Vec<usize> {
        if to.is_empty() {
            return Vec::new();
        }
        let targets: HashSet<usize> = to.iter().map(|&t| self.series[t]).collect();
        let starts = &self.members[self.series[from]];
        let mut prev: HashMap<usize, usize> = HashMap::new();
        let mut queue: VecDeque<usize> = starts.iter().copied().collect();
        let mut seen: HashSet<usize> = starts.iter().copied().collect();
        while let Some(t) = queue.pop_front() {
            if targets.contains(&self.series[t]) {
                let mut path = Vec::new();
                let mut at = prev.get(&t).copied();
                while let Some(p) = at {
                    path.push(p);
                    at = prev.get(&p).copied();
                }
                // NB: the last is where the path left from's series.
                path.pop();
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
    /// chosen columns and their joins, then the matched values; `dialect` is the SQL the
    /// database speaks (`SQLite`, `PostgreSQL`), which the planner writes.
    pub fn text(&self, tool: &str, dialect: &str, selection: &Selection) -> String {
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
            "The database of tool `{tool}` ({dialect}): the tables, columns and values that matter for the goal (the database has more; `...` marks columns left out)."
        );
        for name in &selection.tables {
            let Some(&ti) = self.by_name.get(&name.to_lowercase()) else {
                continue;
            };
            let t = &self.schema.tables[ti];
            let _ = writeln!(out);
            if let Some(series) = selection.series.get(name) {
                let _ = writeln!(
                    out,
                    "-- one of {} tables named alike, of like columns: {}",
                    series.len(),
                    series_names(series)
                );
            }
            let _ = writeln!(out, "CREATE TABLE {} (", t.name);
            let shown: Vec<usize> = (0..t.columns.len())
                .filter(|c| chosen.contains(&(ti, *c)))
                .collect();
            for (i, &ci) in shown.iter().enumerate() {
                let c = &t.columns[ci];
                let mut line = format!("  {} {}", c.name, c.ty);
                if c.primary_key {
                    line.push_str(" PRIMARY KEY");
                }
                let declared = t
                    .foreign_keys
                    .iter()
                    .find(|fk| fk.column.eq_ignore_ascii_case(&c.name));
                if let Some(fk) = declared {
                    let _ = write!(line, " REFERENCES {}({})", fk.ref_table, fk.ref_column);
                }
                if i + 1 < shown.len() || shown.len() < t.columns.len() {
                    line.push(',');
                }
                let mut notes: Vec<String> = c.comment.iter().cloned().collect();
                if let Some(series) = selection
                    .column_series
                    .get(&format!("{}.{}", t.name, c.name))
                {
                    notes.push(format!(
                        "one of {} columns named alike: {}",
                        series.len(),
                        series_names(series)
                    ));
                }
                // NB: keys inferred from names are shown as what they are, not as
                // declared REFERENCES.
                if declared.is_none() {
                    for &(o, a, b) in &self.links[ti] {
                        if a == ci && selection.tables.contains(&self.schema.tables[o].name) {
                            let other = &self.schema.tables[o];
                            notes.push(format!("joins {}({})", other.name, other.columns[b].name));
                        }
                    }
                }
                if !notes.is_empty() {
                    let _ = write!(line, " -- {}", notes.join("; "));
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

/// `ranked`'s first [`COVERAGE_RANKS`] tables put in the order that covers the question
/// best: each next one the best by its `score` less the share of it that the tables
/// before it already had (a word's match keeps [`COVERED_KEEP`] of itself for each table
/// before it that matched it too, and that it does not join: tables that join share
/// words, such as their keys', and are asked about together). `terms`: each table's
/// match, word by word, as shares of its score; `joined(a, b)`: whether `a` and `b` join.
fn covering(
    ranked: &mut [usize],
    score: &[f32],
    terms: &[Vec<(usize, f32)>],
    joined: impl Fn(usize, usize) -> bool,
) {
    let head = ranked.len().min(COVERAGE_RANKS);
    for at in 0..head {
        let before = &ranked[..at];
        let gain = |t: usize| {
            let apart: Vec<usize> = before.iter().copied().filter(|&b| !joined(t, b)).collect();
            let had: f32 = (terms[t].iter())
                .map(|&(w, share)| {
                    let by = apart
                        .iter()
                        .filter(|&&b| terms[b].iter().any(|&(v, _)| v == w));
                    share * (1.0 - COVERED_KEEP.powi(by.count() as i32))
                })
                .sum();
            score[t] * (1.0 - had.min(1.0))
        };
        // NB: of equal gains, the one ranked first.
        let mut best = at;
        let mut best_gain = gain(ranked[at]);
        for (i, &t) in ranked.iter().enumerate().take(head).skip(at + 1) {
            let g = gain(t);
            if g > best_gain {
                (best, best_gain) = (i, g);
            }
        }
        ranked[at..=best].rotate_right(1);
    }
}

/// The columns of the `chosen` tables that matched, best first; of equal matches, the
/// better table's first (a column that every table of a family has).
/// `model`'s embedding of each of `documents` (see [`Index::embedding_documents`]),
/// empty where there is none, as [`Index::with_embeddings`] takes them.
pub(crate) fn embed_documents(
    model: &plan_embed::Model,
    documents: &[Option<String>],
) -> Vec<Vec<f32>> {
    let wanted: Vec<String> = documents.iter().flatten().cloned().collect();
    let mut computed = model.embed_all(&wanted).into_iter();
    (documents.iter())
        .map(|d| match d {
            Some(_) => computed.next().unwrap_or_default(),
            None => Vec::new(),
        })
        .collect()
}

fn matched_columns(
    chosen: &[usize],
    column_score: &HashMap<(usize, usize), f32>,
) -> Vec<(usize, usize)> {
    let place: HashMap<usize, usize> = (chosen.iter().enumerate()).map(|(i, &t)| (t, i)).collect();
    let mut matched: Vec<((usize, usize), f32, usize)> = (column_score.iter())
        .filter_map(|(&tc, &s)| Some((tc, s, *place.get(&tc.0)?)))
        .collect();
    matched.sort_by(|a, b| {
        (b.1.total_cmp(&a.1))
            .then(a.2.cmp(&b.2))
            .then(a.0.cmp(&b.0))
    });
    matched.into_iter().map(|(tc, _, _)| tc).collect()
}

/// The series of columns of some tables (see [`Signals::column_series`]).
#[derive(Default)]
struct ColumnSeries {
    /// (table, column) → its series, for the columns of one.
    of: HashMap<(usize, usize), usize>,
    /// Each series: its table and its columns, in the table's order.
    members: Vec<(usize, Vec<usize>)>,
}

/// The columns chosen so far, in order, and the series of columns they stand for.
#[derive(Default)]
struct Picked {
    columns: Vec<(usize, usize)>,
    series: HashSet<usize>,
}

impl Picked {
    /// Adds `tc`, unless it is there or a column of its series is.
    fn push(&mut self, tc: (usize, usize), series: &ColumnSeries) {
        if let Some(&s) = series.of.get(&tc)
            && self.series.contains(&s)
        {
            return;
        }
        self.push_key(tc, series);
    }

    /// Adds `tc` unless it is there: a join's key is shown whatever its series.
    fn push_key(&mut self, tc: (usize, usize), series: &ColumnSeries) {
        if self.columns.contains(&tc) {
            return;
        }
        if let Some(&s) = series.of.get(&tc) {
            self.series.insert(s);
        }
        self.columns.push(tc);
    }
}

/// A series' names as the prompt shows them: all of a short one, the first two and the
/// last of a long one.
fn series_names(names: &[String]) -> String {
    match names {
        [first, second, .., last] if names.len() > 6 => format!("{first}, {second}, ..., {last}"),
        _ => names.join(", "),
    }
}

/// The tables each table joins, both ways (other table, this side's column, the other
/// side's): the schema's foreign keys, or, when it declares none and `infer` is set,
/// those its column names imply (see [`inferred_keys`]).
fn links(
    schema: &Schema,
    by_name: &HashMap<String, usize>,
    infer: bool,
) -> Vec<Vec<(usize, usize, usize)>> {
    let mut links = vec![Vec::new(); schema.tables.len()];
    let mut add = |a: (usize, usize), b: (usize, usize)| {
        if a.0 != b.0 && !links[a.0].contains(&(b.0, a.1, b.1)) {
            links[a.0].push((b.0, a.1, b.1));
            links[b.0].push((a.0, b.1, a.1));
        }
    };
    let col = |table: &Table, name: &str| {
        table
            .columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    };
    let mut declared = false;
    for (ti, t) in schema.tables.iter().enumerate() {
        for fk in &t.foreign_keys {
            let Some(&ri) = by_name.get(&fk.ref_table.to_lowercase()) else {
                continue;
            };
            if let (Some(a), Some(b)) =
                (col(t, &fk.column), col(&schema.tables[ri], &fk.ref_column))
            {
                declared = true;
                add((ti, a), (ri, b));
            }
        }
    }
    if !declared && infer {
        for (a, b) in inferred_keys(schema) {
            add(a, b);
        }
    }
    links
}

/// Each table's family: tables of one dataset (the part of the name before its last `.`)
/// with the same column names, or with the same name but for its digits
/// (`county_2017_5yr`, `county_2018_5yr`).
fn families(schema: &Schema) -> Vec<usize> {
    let n = schema.tables.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut t: usize) -> usize {
        while parent[t] != t {
            parent[t] = parent[parent[t]];
            t = parent[t];
        }
        t
    }
    let mut by_columns: HashMap<(String, Vec<String>), usize> = HashMap::new();
    let mut by_shape: HashMap<String, usize> = HashMap::new();
    for (i, t) in schema.tables.iter().enumerate() {
        let name = t.name.to_lowercase();
        let dataset = split_dataset(&name).0.to_owned();
        let mut columns: Vec<String> = t.columns.iter().map(|c| c.name.to_lowercase()).collect();
        columns.sort();
        let shape: String = name.chars().filter(|c| !c.is_ascii_digit()).collect();
        let firsts = [
            *by_columns.entry((dataset, columns)).or_insert(i),
            *by_shape.entry(shape).or_insert(i),
        ];
        for first in firsts {
            let (a, b) = (root(&mut parent, first), root(&mut parent, i));
            parent[b] = a;
        }
    }
    (0..n).map(|t| root(&mut parent, t)).collect()
}

/// `name` split at its last `.`: its dataset (empty without one) and its own name.
fn split_dataset(name: &str) -> (&str, &str) {
    name.rsplit_once('.').unwrap_or(("", name))
}

/// `a` against `b`, their runs of digits compared as numbers (`t_9` before `t_10`), then
/// as written.
fn by_numbers(a: &str, b: &str) -> std::cmp::Ordering {
    fn runs(s: &str) -> impl Iterator<Item = (bool, &str)> {
        s.as_bytes()
            .chunk_by(|x, y| x.is_ascii_digit() == y.is_ascii_digit())
            .map(|run| {
                // NB: chunks split only between an ASCII digit and another byte, never
                // inside a UTF-8 sequence.
                let text = std::str::from_utf8(run).unwrap_or_default();
                (run[0].is_ascii_digit(), text)
            })
    }
    let key = |(digits, text): (bool, &str)| match digits {
        true => {
            let trimmed = text.trim_start_matches('0');
            (trimmed.len(), trimmed.to_owned())
        }
        false => (0, text.to_lowercase()),
    };
    let (a_runs, b_runs) = (runs(a).map(key), runs(b).map(key));
    a_runs.cmp(b_runs).then_with(|| a.cmp(b))
}

/// `name`'s own part (past its dataset), lowercase, with each number (and each run of
/// numbers, `1662_2000`) as `\0`, and its dataset as it is: `gsod2019` → `gsod\0`,
/// `county_2017_5yr` → `county_\0_\0yr`; `None` without a digit.
fn numbered(name: &str) -> Option<(String, String)> {
    let (dataset, own) = split_dataset(name);
    let own = own.to_lowercase();
    let mut out = String::with_capacity(own.len());
    let mut chars = own.chars().peekable();
    while let Some(c) = chars.next() {
        if !c.is_ascii_digit() {
            out.push(c);
            continue;
        }
        while chars.next_if(char::is_ascii_digit).is_some() {}
        // NB: `1662_2000` is one range, one place; `2017_5yr` a year and a span.
        let whole = chars.peek().is_none_or(|c| !c.is_alphabetic());
        if whole && (out.ends_with("\0_") || out.ends_with("\0-")) {
            out.pop();
        } else {
            out.push('\0');
        }
    }
    (out != own).then(|| (dataset.to_lowercase(), out))
}

/// What share of their column names (of all either has) two tables share to be of one
/// series.
const SERIES_LIKENESS: f32 = 0.5;

/// How many series of one pattern a table is compared with, the latest first: a schema
/// of thousands of unlike tables named alike costs no more than this each.
const SERIES_TRIED: usize = 8;

/// Each table's series (see [`Signals::series`]), by its newest table: tables of one
/// dataset whose names are the same but for their numbers, newest (greatest number)
/// first, each joining the series whose last table it is like (half their column names
/// or more shared); a table like none starts a series of its own.
fn series(schema: &Schema) -> Vec<usize> {
    let columns = |t: usize| -> HashSet<String> {
        schema.tables[t]
            .columns
            .iter()
            .map(|c| c.name.to_lowercase())
            .collect()
    };
    let mut by_pattern: HashMap<(String, String), Vec<usize>> = HashMap::new();
    for (t, table) in schema.tables.iter().enumerate() {
        if let Some(pattern) = numbered(&table.name) {
            by_pattern.entry(pattern).or_default().push(t);
        }
    }
    let mut series: Vec<usize> = (0..schema.tables.len()).collect();
    for members in by_pattern.values_mut().filter(|m| m.len() > 1) {
        members.sort_by(|&a, &b| by_numbers(&schema.tables[b].name, &schema.tables[a].name));
        // NB: (its newest table, its last table's columns), a series each.
        let mut open: Vec<(usize, HashSet<String>)> = Vec::new();
        for &t in members.iter() {
            let ours = columns(t);
            let like = open
                .iter_mut()
                .rev()
                .take(SERIES_TRIED)
                .find(|(_, theirs)| {
                    let shared = ours.intersection(theirs).count();
                    shared as f32 / ours.union(theirs).count().max(1) as f32 >= SERIES_LIKENESS
                });
            match like {
                Some((first, last)) => {
                    series[t] = *first;
                    *last = ours;
                }
                None => open.push((t, ours)),
            }
        }
    }
    series
}

/// What a table's BM25 document says: its name twice (a table is about what it is
/// called), its comment, its columns' names.
fn table_document(t: &Table, signals: Signals) -> String {
    let ident = |name: &str| identifier_words(name, signals);
    let mut d = ident(&t.name);
    d.push(' ');
    d.push_str(&ident(&t.name));
    if signals.comments
        && let Some(comment) = &t.comment
    {
        d.push(' ');
        d.push_str(comment);
    }
    for c in &t.columns {
        d.push(' ');
        d.push_str(&ident(&c.name));
    }
    d
}

/// By each series' first table (see [`series`]), its tables in the order of their
/// numbers; empty for the other tables.
fn members(schema: &Schema, series: &[usize]) -> Vec<Vec<usize>> {
    let mut members = vec![Vec::new(); series.len()];
    for (t, &first) in series.iter().enumerate() {
        members[first].push(t);
    }
    for m in &mut members {
        m.sort_by(|&a, &b| by_numbers(&schema.tables[a].name, &schema.tables[b].name));
    }
    members
}

/// The words that end a key column's name (`customer_id`, `CustomerKey`, `country_code`).
const KEY_WORDS: &[&str] = &["id", "key", "code", "no", "num", "number"];

/// Columns shared by more tables than this join only a table they name, not each other:
/// a `user_id` in forty tables of events is no join between them.
const MAX_SHARED: usize = 6;

/// The foreign keys column names imply, for schemas that declare none: `orders.customer_id`
/// joins `customers` (at its own `customer_id`, else its key, else its `id`), and a key
/// column shared by a few tables joins them where one of them has it as its key (or first
/// column).
fn inferred_keys(schema: &Schema) -> Vec<((usize, usize), (usize, usize))> {
    let tables = &schema.tables;
    // A table by the last word of its name: `sales.order_items` → `items`.
    let mut by_noun: HashMap<String, Vec<usize>> = HashMap::new();
    let mut by_column: HashMap<String, Vec<(usize, usize)>> = HashMap::new();
    for (ti, t) in tables.iter().enumerate() {
        let name = words(split_dataset(&t.name).1);
        by_noun.entry(name.replace(' ', "")).or_default().push(ti);
        if let Some(last) = name.split_whitespace().last() {
            by_noun.entry(last.to_owned()).or_default().push(ti);
        }
        for (ci, c) in t.columns.iter().enumerate() {
            by_column
                .entry(c.name.to_lowercase())
                .or_default()
                .push((ti, ci));
        }
    }
    let key_of = |ti: usize, column: &str| {
        let t = &tables[ti];
        t.columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(column))
            .or_else(|| t.columns.iter().position(|c| c.primary_key))
            .or_else(|| {
                t.columns
                    .iter()
                    .position(|c| c.name.eq_ignore_ascii_case("id"))
            })
    };
    let mut out = Vec::new();
    for (ti, t) in tables.iter().enumerate() {
        for (ci, c) in t.columns.iter().enumerate() {
            let w = words(&c.name);
            let parts: Vec<&str> = w.split_whitespace().collect();
            let Some((last, stem)) = parts.split_last() else {
                continue;
            };
            if stem.is_empty() || !KEY_WORDS.contains(last) {
                continue;
            }
            // `customer_id` → the table `customers`; `ship_country_code` → `countries`.
            let nouns = [stem.concat(), stem[stem.len() - 1].to_owned()];
            let named: Vec<usize> = by_noun
                .iter()
                .filter(|(noun, _)| nouns.iter().any(|n| same_noun(n, noun)))
                .flat_map(|(_, ts)| ts.iter().copied())
                .filter(|&o| o != ti)
                .collect();
            for o in named {
                if let Some(oc) = key_of(o, &c.name) {
                    out.push(((ti, ci), (o, oc)));
                }
            }
            // The same key column elsewhere, where it is that table's own key.
            let shared = &by_column[&c.name.to_lowercase()];
            if shared.len() <= MAX_SHARED {
                for &(o, oc) in shared.iter().filter(|(o, _)| *o != ti) {
                    let theirs = &tables[o].columns[oc];
                    if theirs.primary_key || (oc == 0 && !t.columns[ci].primary_key && ci != 0) {
                        out.push(((ti, ci), (o, oc)));
                    }
                }
            }
        }
    }
    out
}

/// How a question matches a schema: each table's score, each matching column's (table,
/// column) and each matching sampled value's (score, table, column, value).
struct Scores {
    table: Vec<f32>,
    /// Each table's document's match, word by word: (the question's word, its share of
    /// the table's own score, before the graph).
    terms: Vec<Vec<(usize, f32)>>,
    column: HashMap<(usize, usize), f32>,
    values: Vec<(f32, usize, usize, usize)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_tokenized_as_the_whole_text_is() {
        let default = DefaultTokenizer::new(Language::English);
        let mut words = Words::new();
        let texts = [
            "customer customers customer_id the of orders",
            "Orders per region, 2019-2020: total (USD)!",
            "café Zürich naïve  tabs\tand\nnewlines",
            "東京 の 売上 数字 2024年",
            "it's O'Brien's e-mail: a@b.com 3.5% x/y",
            "",
            "   ",
        ];
        for _ in 0..2 {
            for t in texts {
                let numbered = words.tokenize(t);
                let mut names = vec![""; words.terms.len()];
                for (name, &n) in &words.terms {
                    names[n as usize] = name;
                }
                let tokens: Vec<&str> = numbered.iter().map(|&n| names[n as usize]).collect();
                assert_eq!(tokens, default.tokenize(t), "{t:?}");
            }
        }
    }

    /// The index scores as `bm25`'s embedder and scorer do, to the bit: repeated words
    /// in documents and questions, words no document has, a document with no words.
    #[test]
    fn scores_are_bm25s() {
        use bm25::{Embedder, EmbedderBuilder, Scorer};
        let docs: Vec<String> = [
            "customer customer id customer name region",
            "orders order id customer id total amount order date",
            "order items order id product id quantity price",
            "products product id product name category price",
            "",
            "regions region name country country country",
            "café Zürich naïve tabs\tand\nnewlines 東京",
        ]
        .map(String::from)
        .to_vec();
        let ours = Bm25::new(&docs);
        let corpus: Vec<&str> = docs.iter().map(String::as_str).collect();
        let tokenizer = DefaultTokenizer::new(Language::English);
        let embedder: Embedder<u32, DefaultTokenizer> =
            EmbedderBuilder::with_tokenizer_and_fit_to_corpus(tokenizer, &corpus).build();
        let mut scorer: Scorer<u32, u32> = Scorer::new();
        for (id, doc) in (0u32..).zip(&docs) {
            scorer.upsert(&id, embedder.embed(doc));
        }
        for q in [
            "total amount per customer region",
            "customer customer orders",
            "price of products by category, price",
            "nothing here matches",
            "country Zurich",
            "",
        ] {
            let mut theirs: Vec<(usize, f32)> = (scorer.matches(&embedder.embed(q)).into_iter())
                .map(|m| (m.id as usize, m.score))
                .collect();
            theirs.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            let ours = ours.best(q, usize::MAX);
            assert_eq!(ours.len(), theirs.len(), "{q}");
            for ((a, x), (b, y)) in ours.iter().zip(&theirs) {
                assert_eq!(
                    (a, x.to_bits()),
                    (b, y.to_bits()),
                    "{q}: {ours:?} {theirs:?}"
                );
            }
        }
    }

    #[test]
    fn equally_good_tables_columns_and_values_are_chosen_the_same_each_time() {
        // NB: many ties: every table has the same columns and values, only its name
        // tells it apart. Each index hashes with its own seeds.
        let tables = (0..40)
            .map(|i| {
                let mut t = Table {
                    comment: None,
                    name: format!("region_{i}"),
                    columns: (0..6)
                        .map(|c| col(&format!("status_{c}"), "TEXT"))
                        .collect(),
                    foreign_keys: vec![],
                };
                for c in &mut t.columns {
                    c.values = vec!["open".into(), "closed".into()];
                }
                t
            })
            .collect();
        let schema = Schema { tables };
        let budget = Budget {
            tables: 5,
            columns: 12,
            values: 6,
            min_score: None,
        };
        let first = Index::new(schema.clone()).ground("open status by region", budget);
        for _ in 0..5 {
            let again = Index::new(schema.clone()).ground("open status by region", budget);
            assert_eq!(again, first);
        }
    }

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
            comment: None,
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
            comment: None,
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
            comment: None,
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
            comment: None,
            name: "products".into(),
            columns: vec![
                col("id", "INTEGER"),
                col("name", "TEXT"),
                col("price", "REAL"),
            ],
            foreign_keys: vec![],
        };
        // NB: named by letters: numbered, they would be one series.
        let noise = (0..50u8).map(|i| Table {
            comment: None,
            name: format!(
                "audit_log_{}{}",
                (b'a' + i / 26) as char,
                (b'a' + i % 26) as char
            ),
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
        assert_eq!(words("sales2024Total"), "sales 2024 total");
        assert_eq!(words("HTTPStatus"), "http status");
        assert_eq!(words("events_*"), "events  ");
        assert_eq!(expanded("cust_qty"), "cust customer qty quantity ");
        assert!(ABBREVIATIONS.windows(2).all(|w| w[0].0 < w[1].0), "sorted");
    }

    #[test]
    fn nouns_match_singular_and_plural() {
        for (a, b) in [
            ("customer", "customers"),
            ("category", "categories"),
            ("address", "addresses"),
            ("order", "order"),
        ] {
            assert!(same_noun(a, b) && same_noun(b, a), "{a} {b}");
        }
        assert!(!same_noun("order", "orderly"));
        assert!(!same_noun("cat", "categories"));
    }

    #[test]
    fn every_table_is_ranked_and_a_budget_is_filled() {
        let index = Index::new(shop());
        let all = index.rank("nothing here matches at all");
        assert_eq!(all.len(), shop().tables.len());
        let s = index.ground("staff", Budget::default());
        assert_eq!(s.tables.len(), Budget::default().tables, "{s:?}");
        let cut = Budget {
            min_score: Some(0.5),
            ..Budget::default()
        };
        assert!(index.ground("staff", cut).tables.len() < Budget::default().tables);
    }

    #[test]
    fn keys_are_inferred_from_column_names_when_none_are_declared() {
        let mut schema = shop();
        for t in &mut schema.tables {
            t.foreign_keys.clear();
            for c in &mut t.columns {
                c.primary_key = false;
            }
        }
        let index = Index::new(schema.clone());
        let joined = |a: &str, b: &str| {
            let (a, b) = (index.by_name[a], index.by_name[b]);
            index.links[a].iter().any(|&(o, _, _)| o == b)
        };
        assert!(joined("orders", "staff"), "orders.staff_id: staff");
        assert!(joined("orders", "products"), "orders.product_id: products");
        assert!(joined("staff", "stores"), "staff.store_id: stores");
        assert!(!joined("orders", "stores"));
        let off = Signals {
            inferred_keys: false,
            ..Signals::default()
        };
        let plain = Index::with(schema, off);
        assert!(plain.links.iter().all(Vec::is_empty));
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
        let text = index.text("shop_db", "SQLite", &s);
        assert!(text.contains("CREATE TABLE stores ("), "{text}");
        assert!(text.contains("- stores.city = 'Berlin'"), "{text}");
    }

    #[test]
    fn a_table_named_as_written_ranks_first() {
        let goal = "Which staff member sold the most orders, as the audit_log_bc table says?";
        assert_eq!(Index::new(shop()).rank(goal)[0], "audit_log_bc");
        let unnamed = Signals {
            named: false,
            ..Signals::default()
        };
        assert_ne!(Index::with(shop(), unnamed).rank(goal)[0], "audit_log_bc");
    }

    #[test]
    fn tables_are_ordered_to_cover_the_question() {
        // Yellow trips match words 0 and 1, green trips the same a little less, zones
        // word 2 alone: once yellow trips are in, green trips bring less than zones.
        // (Each word's match as a share of the table's score.)
        let terms = vec![
            vec![(0, 0.5), (1, 0.5)],
            vec![(0, 0.5), (1, 0.5)],
            vec![(2, 1.0)],
        ];
        let score = [2.0, 1.8, 1.5];
        let mut ranked = vec![0, 1, 2];
        covering(&mut ranked, &score, &terms, |_, _| false);
        assert_eq!(ranked, [0, 2, 1]);
        // Joined to yellow trips, green trips share its words as its complement.
        let mut ranked = vec![0, 1, 2];
        let joined = |a: usize, b: usize| a.min(b) == 0 && a.max(b) == 1;
        covering(&mut ranked, &score, &terms, joined);
        assert_eq!(ranked, [0, 1, 2]);
        // Words nobody else matched: the order of the scores.
        let terms = vec![vec![(0, 1.0)], vec![(1, 1.0)], vec![(2, 1.0)]];
        let mut ranked = vec![0, 1, 2];
        covering(&mut ranked, &score, &terms, |_, _| false);
        assert_eq!(ranked, [0, 1, 2]);
    }

    #[test]
    fn a_join_path_through_a_series_is_through_its_place() {
        let table = |name: &str, columns: &[&str], keys: &[(&str, &str)]| Table {
            name: name.into(),
            columns: columns.iter().map(|c| col(c, "INTEGER")).collect(),
            foreign_keys: keys.iter().map(|(c, t)| fk(c, t)).collect(),
            ..Table::default()
        };
        let orders = ["id", "customer_id", "amount"];
        let schema = Schema {
            tables: vec![
                table("customers", &["id", "name"], &[]),
                table("orders_2023", &orders, &[("customer_id", "customers")]),
                table("orders_2024", &orders, &[("customer_id", "customers")]),
                table(
                    "refunds",
                    &["id", "order_id"],
                    &[("order_id", "orders_2023")],
                ),
            ],
        };
        let index = Index::new(schema);
        for goal in [
            "refunds of customers by name",
            "amount of 2024 orders and refunds per customer name",
            "refunds of 2024 orders",
        ] {
            let s = index.ground(goal, Budget::default());
            let orders = s.tables.iter().filter(|t| t.starts_with("orders_")).count();
            assert!(orders <= 1, "{goal}: {s:?}");
            assert!(s.series.len() <= 1, "{goal}: {s:?}");
            assert!(s.tables.contains(&"refunds".to_owned()), "{goal}: {s:?}");
        }
        // Refunds join the orders' place directly: no table between them.
        let s = index.ground(
            "refunds of 2024 orders",
            Budget {
                tables: 2,
                ..Budget::default()
            },
        );
        assert_eq!(s.tables, ["refunds", "orders_2024"], "{s:?}");
    }

    #[test]
    fn numbers_in_names_are_found() {
        for (name, pattern) in [
            ("gsod2019", Some(("", "gsod#"))),
            ("county_2017_5yr", Some(("", "county_#_#yr"))),
            ("events_20210131", Some(("", "events_#"))),
            ("icoads_core_1662_2000", Some(("", "icoads_core_#"))),
            ("Storms-1990-1995", Some(("", "storms-#"))),
            ("irs_990_2012", Some(("", "irs_#"))),
            ("1998_q1", Some(("", "#_q#"))),
            ("2019", Some(("", "#"))),
            // A `#` is not a number.
            ("a#_1", Some(("", "a#_#"))),
            ("College_1.Course_2", Some(("college_1", "course_#"))),
            ("college_1.course", None),
            ("orders", None),
        ] {
            let found = numbered(name).map(|(d, p)| (d, p.replace('\0', "#")));
            let pattern = pattern.map(|(d, p)| (d.to_owned(), p.to_owned()));
            assert_eq!(found, pattern, "{name}");
        }
        assert_ne!(numbered("a#_1"), numbered("a1"));
    }

    #[test]
    fn numbers_in_names_order_as_numbers() {
        let mut names = vec!["t_10", "t_9", "T_2", "t_1a", "t_01"];
        names.sort_by(|a, b| by_numbers(a, b));
        assert_eq!(names, ["t_01", "t_1a", "T_2", "t_9", "t_10"]);
    }

    #[test]
    fn a_series_of_tables_by_year_is_one_place() {
        let year = |y: u32| Table {
            name: format!("storms_{y}"),
            columns: vec![
                col("state", "TEXT"),
                col("event_type", "TEXT"),
                col("deaths", "INT"),
            ],
            ..Table::default()
        };
        let mut tables: Vec<Table> = (2018..=2023).map(year).collect();
        // Of another shape: not of the series, though named like it.
        tables.push(Table {
            name: "storms_2024".into(),
            columns: vec![
                col("region", "TEXT"),
                col("kind", "TEXT"),
                col("lost", "INT"),
            ],
            ..Table::default()
        });
        tables.push(Table {
            name: "states".into(),
            columns: vec![col("state", "TEXT"), col("population", "INT")],
            ..Table::default()
        });
        let index = Index::new(Schema { tables });
        let budget = Budget {
            tables: 3,
            ..Budget::default()
        };
        let s = index.ground("storm deaths per state in 2021 and 2022", budget);
        assert_eq!(s.tables[0], "storms_2021", "{s:?}");
        assert!(s.tables.contains(&"states".to_owned()), "{s:?}");
        let series: Vec<String> = (2018..=2023).map(|y| format!("storms_{y}")).collect();
        assert_eq!(s.series.get("storms_2021"), Some(&series), "{s:?}");
        assert_eq!(s.series.len(), 1, "{s:?}");
        let text = index.text("noaa", "PostgreSQL", &s);
        assert!(
            text.contains("The database of tool `noaa` (PostgreSQL):"),
            "{text}"
        );
        assert!(
            text.contains("-- one of 6 tables named alike, of like columns: storms_2018, storms_2019, storms_2020, storms_2021, storms_2022, storms_2023\nCREATE TABLE storms_2021 ("),
            "{text}"
        );
        let apart = Index::with(
            index.schema().clone(),
            Signals {
                series: false,
                ..Signals::default()
            },
        );
        let s = apart.ground("storm deaths per state in 2021 and 2022", budget);
        assert!(s.series.is_empty(), "{s:?}");
        let storms = s.tables.iter().filter(|t| t.starts_with("storms_")).count();
        assert_eq!(storms, 2, "{s:?}");
    }

    #[test]
    fn a_series_of_columns_by_year_is_one_place() {
        let mut columns = vec![col("country_code", "TEXT"), col("country", "TEXT")];
        columns.extend((1960..=2019).map(|y| col(&format!("year_{y}"), "INT")));
        columns.push(col("region", "TEXT"));
        let population = Table {
            name: "population_by_country".into(),
            columns,
            ..Table::default()
        };
        let index = Index::new(Schema {
            tables: vec![population],
        });
        let budget = Budget {
            columns: 5,
            ..Budget::default()
        };
        let s = index.ground("population of each country and region per year", budget);
        let years: Vec<&String> = (s.columns.iter())
            .filter(|c| c.contains(".year_"))
            .collect();
        assert_eq!(years.len(), 1, "{s:?}");
        let all: Vec<String> = (1960..=2019).map(|y| format!("year_{y}")).collect();
        assert_eq!(s.column_series.get(years[0]), Some(&all), "{s:?}");
        // NB: the place the other years would have taken goes to the region.
        assert!(
            s.columns
                .contains(&"population_by_country.region".to_owned()),
            "{s:?}"
        );
        let text = index.text("world_bank", "SQLite", &s);
        assert!(
            text.contains("-- one of 60 columns named alike: year_1960, year_1961, ..., year_2019"),
            "{text}"
        );
        let apart = Index::with(
            index.schema().clone(),
            Signals {
                column_series: false,
                ..Signals::default()
            },
        );
        let s = apart.ground("population of each country and region per year", budget);
        assert!(s.column_series.is_empty(), "{s:?}");
        assert!(
            s.columns.iter().filter(|c| c.contains(".year_")).count() > 1,
            "{s:?}"
        );
    }

    #[test]
    fn a_series_of_columns_keeps_to_one_nested_field() {
        let names = ["home.line1", "home.line2", "work.line3", "work.line4", "id"];
        let index = Index::new(Schema {
            tables: vec![Table {
                name: "people".into(),
                columns: names.iter().map(|c| col(c, "TEXT")).collect(),
                ..Table::default()
            }],
        });
        let series = index.column_series(&[0]);
        let members: Vec<&Vec<usize>> = series.members.iter().map(|(_, m)| m).collect();
        assert_eq!(members, [&vec![0, 1], &vec![2, 3]]);
        assert!(!series.of.contains_key(&(0, 4)));
    }

    #[test]
    fn of_equal_matches_the_better_tables_column_comes_first() {
        // Table 7 is chosen first, table 3 second, table 5 not at all.
        let chosen = [7, 3];
        let scores = HashMap::from([((3, 0), 1.5), ((7, 2), 1.0), ((3, 1), 1.0), ((5, 0), 9.0)]);
        assert_eq!(matched_columns(&chosen, &scores), [(3, 0), (7, 2), (3, 1)]);
    }
}
