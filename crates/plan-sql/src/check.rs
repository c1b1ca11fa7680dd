//! The first guard: a query parsed (sqlparser) and refused for what it says, before any
//! database sees it. Exactly one statement; only a query when the tool is read-only (no
//! DML or DDL, not even inside a CTE, no `SELECT INTO`, no row locks); every table it
//! names, through CTEs (resolved in their own scope), subqueries and aliases, in
//! `allow_tables`, and no internal table of the database (`sqlite_*`, `pg_*`) unless
//! `allow_tables` names it; no column of `deny_columns` (a bare column name that one of
//! its tables denies, a `*` over such a table, a whole row of it used as a value
//! (`row_to_json(s)`, `s::text`), its columns renamed by an alias, and `INDEXED BY` on it
//! are refused too: the parser does not know the schema, so it errs towards refusing; so
//! are the columns a `USING` joins on, and a `NATURAL` join where columns are denied);
//! only functions of an allowlist, wherever they are called (a select list, `FROM`,
//! `WHERE`, `ORDER BY`, nested). A writable tool runs queries and row writes only (no
//! DDL, `PRAGMA`, `VACUUM`), and no insert into a table with a denied column (an insert
//! names no column the database's guard is told of).
//!
//! An LLM wrote the query: it is parsed within bounds (operators counted on the tokens
//! before a tree is built, the parser's recursion limited), so that no syntax tree is
//! deeper than the stack can walk or drop.
//!
//! What it cannot see (a table reached through a view, a column picked by position) the
//! database's own guard still stops on SQLite (`sqlite.rs`); on PostgreSQL, the role's
//! grants do (docs/sql.md).

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, JoinConstraint, JoinOperator,
    ObjectName, Query, Select, SelectItem, SelectItemQualifiedWildcardKind, SetExpr, Statement,
    TableFactor, TableIndexDirective, TableWithJoins, Visit, Visitor,
};
use sqlparser::dialect::{Dialect, PostgreSqlDialect, SQLiteDialect};
use sqlparser::keywords::Keyword;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, Tokenizer};

use crate::{Constraints, QueryError};

/// Operators (and `UNION`s, casts, `.`s) one query may hold: a chain of them is parsed
/// into a tree as deep as it is long, which is walked and dropped by recursion.
pub(crate) const MAX_OPERATORS: usize = 2_000;

/// How deep the parser may recurse (nested parentheses, subqueries, function calls).
const MAX_NESTING: usize = 50;

/// The SQL dialect a query is checked in.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Flavor {
    Sqlite,
    Postgres,
}

/// The window functions, the same in both databases, which a query of either may call.
const WINDOW_FUNCTIONS: &[&str] = &[
    "row_number",
    "rank",
    "dense_rank",
    "percent_rank",
    "cume_dist",
    "ntile",
    "lag",
    "lead",
    "first_value",
    "last_value",
    "nth_value",
];

/// Functions a SQLite query may call (and [`WINDOW_FUNCTIONS`]): SQLite's own, which compute values from their
/// arguments (core, aggregate, window, date, math, JSON). Anything else (extensions:
/// `load_extension`, `readfile`, `fts3_tokenizer`, ...) is refused.
const SQLITE_FUNCTIONS: &[&str] = &[
    // Core.
    "abs",
    "char",
    "coalesce",
    "concat",
    "concat_ws",
    "format",
    "glob",
    "hex",
    "if",
    "ifnull",
    "iif",
    "instr",
    "length",
    "like",
    "likelihood",
    "likely",
    "lower",
    "ltrim",
    "max",
    "min",
    "nullif",
    "octet_length",
    "printf",
    "quote",
    "random",
    "randomblob",
    "replace",
    "round",
    "rtrim",
    "sign",
    "soundex",
    "substr",
    "substring",
    "trim",
    "typeof",
    "unhex",
    "unicode",
    "unistr",
    "unistr_quote",
    "unlikely",
    "upper",
    "zeroblob",
    "current_date",
    "current_time",
    "current_timestamp",
    "changes",
    "total_changes",
    "last_insert_rowid",
    // Aggregates.
    "avg",
    "count",
    "group_concat",
    "string_agg",
    "sum",
    "total",
    "median",
    "percentile",
    "percentile_cont",
    "percentile_disc",
    // Date and time.
    "date",
    "time",
    "datetime",
    "julianday",
    "unixepoch",
    "strftime",
    "timediff",
    // Math.
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "ceil",
    "ceiling",
    "cos",
    "cosh",
    "degrees",
    "exp",
    "floor",
    "ln",
    "log",
    "log10",
    "log2",
    "mod",
    "pi",
    "pow",
    "power",
    "radians",
    "sin",
    "sinh",
    "sqrt",
    "tan",
    "tanh",
    "trunc",
    // JSON (`->` and `->>` are functions to SQLite's authorizer).
    "json",
    "jsonb",
    "json_array",
    "jsonb_array",
    "json_array_length",
    "json_error_position",
    "json_extract",
    "jsonb_extract",
    "json_insert",
    "jsonb_insert",
    "json_object",
    "jsonb_object",
    "json_patch",
    "jsonb_patch",
    "json_pretty",
    "json_remove",
    "jsonb_remove",
    "json_replace",
    "jsonb_replace",
    "json_set",
    "jsonb_set",
    "json_type",
    "json_valid",
    "json_quote",
    "json_group_array",
    "jsonb_group_array",
    "json_group_object",
    "jsonb_group_object",
    "json_each",
    "json_tree",
    "->",
    "->>",
];

/// Functions a PostgreSQL query may call (and [`WINDOW_FUNCTIONS`]): pure functions of
/// their arguments (aggregates, strings, numbers, dates, JSON, arrays, text search). Left
/// out on purpose, among others: whatever reads files or settings (`pg_read_file`,
/// `pg_ls_dir`, `current_setting`), runs SQL text the parser never sees (`query_to_xml`
/// and its family, `ts_stat`, `ts_rewrite`, `dblink`), writes what a rollback does not undo
/// (`pg_logical_emit_message`, `nextval`, `setval`, `pg_advisory_lock`, `pg_notify`,
/// `set_config`, `lo_*`), touches other sessions (`pg_terminate_backend`) or sleeps.
const POSTGRES_FUNCTIONS: &[&str] = &[
    // Aggregates.
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "bool_and",
    "bool_or",
    "every",
    "array_agg",
    "string_agg",
    "json_agg",
    "jsonb_agg",
    "json_object_agg",
    "jsonb_object_agg",
    "json_agg_strict",
    "jsonb_agg_strict",
    "json_object_agg_strict",
    "jsonb_object_agg_strict",
    "json_object_agg_unique",
    "jsonb_object_agg_unique",
    "bit_and",
    "bit_or",
    "bit_xor",
    "stddev",
    "stddev_pop",
    "stddev_samp",
    "variance",
    "var_pop",
    "var_samp",
    "corr",
    "covar_pop",
    "covar_samp",
    "regr_avgx",
    "regr_avgy",
    "regr_count",
    "regr_intercept",
    "regr_r2",
    "regr_slope",
    "regr_sxx",
    "regr_sxy",
    "regr_syy",
    "percentile_cont",
    "percentile_disc",
    "mode",
    "any_value",
    "range_agg",
    "range_intersect_agg",
    // Conditionals.
    "coalesce",
    "nullif",
    "greatest",
    "least",
    "num_nulls",
    "num_nonnulls",
    // Strings.
    "length",
    "char_length",
    "character_length",
    "octet_length",
    "bit_length",
    "lower",
    "upper",
    "initcap",
    "trim",
    "btrim",
    "ltrim",
    "rtrim",
    "lpad",
    "rpad",
    "substr",
    "substring",
    "left",
    "right",
    "position",
    "strpos",
    "replace",
    "translate",
    "concat",
    "concat_ws",
    "format",
    "repeat",
    "reverse",
    "split_part",
    "starts_with",
    "ascii",
    "chr",
    "md5",
    "sha224",
    "sha256",
    "sha384",
    "sha512",
    "regexp_replace",
    "regexp_match",
    "regexp_matches",
    "regexp_split_to_array",
    "regexp_split_to_table",
    "regexp_count",
    "regexp_instr",
    "regexp_like",
    "regexp_substr",
    "string_to_array",
    "string_to_table",
    "array_to_string",
    "quote_ident",
    "quote_literal",
    "quote_nullable",
    "encode",
    "decode",
    "overlay",
    "normalize",
    "to_hex",
    "to_ascii",
    "unistr",
    "casefold",
    // Formatting.
    "to_char",
    "to_number",
    "to_date",
    "to_timestamp",
    // Numbers.
    "abs",
    "ceil",
    "ceiling",
    "floor",
    "round",
    "trunc",
    "sign",
    "sqrt",
    "cbrt",
    "exp",
    "ln",
    "log",
    "log10",
    "power",
    "pow",
    "mod",
    "div",
    "pi",
    "degrees",
    "radians",
    "sin",
    "cos",
    "tan",
    "cot",
    "asin",
    "acos",
    "atan",
    "atan2",
    "sind",
    "cosd",
    "tand",
    "cotd",
    "asind",
    "acosd",
    "atand",
    "atan2d",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "acosh",
    "atanh",
    "width_bucket",
    "factorial",
    "gcd",
    "lcm",
    "scale",
    "min_scale",
    "trim_scale",
    "random",
    "random_normal",
    "erf",
    "erfc",
    // Dates and times.
    "now",
    "current_date",
    "current_time",
    "current_timestamp",
    "localtime",
    "localtimestamp",
    "clock_timestamp",
    "statement_timestamp",
    "transaction_timestamp",
    "timeofday",
    "date_part",
    "date_trunc",
    "date_bin",
    "extract",
    "age",
    "make_date",
    "make_time",
    "make_timestamp",
    "make_timestamptz",
    "make_interval",
    "justify_days",
    "justify_hours",
    "justify_interval",
    "isfinite",
    "date_add",
    "date_subtract",
    "timezone",
    // JSON.
    "to_json",
    "to_jsonb",
    "row_to_json",
    "array_to_json",
    "json_build_object",
    "jsonb_build_object",
    "json_build_array",
    "jsonb_build_array",
    "json_object",
    "jsonb_object",
    "json_array_length",
    "jsonb_array_length",
    "json_each",
    "jsonb_each",
    "json_each_text",
    "jsonb_each_text",
    "json_extract_path",
    "jsonb_extract_path",
    "json_extract_path_text",
    "jsonb_extract_path_text",
    "json_object_keys",
    "jsonb_object_keys",
    "json_array_elements",
    "jsonb_array_elements",
    "json_array_elements_text",
    "jsonb_array_elements_text",
    "json_typeof",
    "jsonb_typeof",
    "json_strip_nulls",
    "jsonb_strip_nulls",
    "jsonb_pretty",
    "jsonb_set",
    "jsonb_set_lax",
    "jsonb_insert",
    "jsonb_path_exists",
    "jsonb_path_match",
    "jsonb_path_query",
    "jsonb_path_query_array",
    "jsonb_path_query_first",
    "json_scalar",
    "json_serialize",
    // Arrays and ranges.
    "array_length",
    "cardinality",
    "array_append",
    "array_prepend",
    "array_cat",
    "array_position",
    "array_positions",
    "array_remove",
    "array_replace",
    "array_dims",
    "array_lower",
    "array_upper",
    "array_ndims",
    "array_fill",
    "trim_array",
    "unnest",
    "generate_series",
    "generate_subscripts",
    "lower_inc",
    "upper_inc",
    "lower_inf",
    "upper_inf",
    "isempty",
    "range_merge",
    // Text search over values (not `ts_stat` or `ts_rewrite`, which run SQL text).
    "to_tsvector",
    "to_tsquery",
    "plainto_tsquery",
    "phraseto_tsquery",
    "websearch_to_tsquery",
    "ts_rank",
    "ts_rank_cd",
    "ts_headline",
    "setweight",
    "strip",
    "numnode",
    "querytree",
    "tsvector_to_array",
    "array_to_tsvector",
    "ts_delete",
    "ts_filter",
    "length",
    // Values about the session itself.
    "pg_typeof",
    "current_user",
    "session_user",
    "current_role",
    "user",
    "current_catalog",
    "current_schema",
];

/// Checks `sql` (SQLite's dialect) against `c`: [`QueryError::Refused`] says what is
/// refused and why.
pub fn check(sql: &str, c: &Constraints) -> Result<(), QueryError> {
    check_in(Flavor::Sqlite, sql, c).map_err(QueryError::Refused)
}

/// [`check`] in PostgreSQL's dialect.
pub fn check_postgres(sql: &str, c: &Constraints) -> Result<(), QueryError> {
    check_in(Flavor::Postgres, sql, c).map_err(QueryError::Refused)
}

/// Whether `name` (as SQLite's authorizer names it) is a function a query may call.
pub(crate) fn sqlite_function_allowed(name: &str) -> bool {
    let name = name.to_lowercase();
    SQLITE_FUNCTIONS.contains(&name.as_str()) || WINDOW_FUNCTIONS.contains(&name.as_str())
}

/// The statements of `sql`, parsed within bounds: no more than [`MAX_OPERATORS`]
/// operators (counted on the tokens, before any tree is built) and [`MAX_NESTING`]
/// levels of the parser's recursion, so that no tree is deeper than the stack can take.
pub(crate) fn parse(flavor: Flavor, sql: &str) -> Result<Vec<Statement>, String> {
    let dialect: &dyn Dialect = match flavor {
        Flavor::Sqlite => &SQLiteDialect {},
        Flavor::Postgres => &PostgreSqlDialect {},
    };
    let tokens = Tokenizer::new(dialect, sql)
        .tokenize()
        .map_err(|e| format!("the query does not parse: {e}"))?;
    let mut operators = 0usize;
    let mut previous: [Option<&Token>; 2] = [None, None];
    for token in &tokens {
        // NB: `U&"\0073alary"` is the identifier `salary` to PostgreSQL, and `U & "..."`
        // to the parser: two names it would check, neither the real one.
        if let (Some(Token::Word(u)), Some(Token::Ampersand), Token::Word(w)) =
            (previous[0], previous[1], token)
            && u.quote_style.is_none()
            && u.value.eq_ignore_ascii_case("u")
            && w.quote_style.is_some()
        {
            return Err(
                "a Unicode-escaped identifier (U&\"...\") is not allowed: write the name plainly"
                    .into(),
            );
        }
        if is_operator(token) {
            operators += 1;
        }
        if !matches!(token, Token::Whitespace(_)) {
            previous = [previous[1], Some(token)];
        } else {
            previous = [None, None];
        }
    }
    if operators > MAX_OPERATORS {
        return Err(format!(
            "the query is too long to check: {operators} operators, more than {MAX_OPERATORS}: write a shorter one (an IN list, a CASE, or several queries)"
        ));
    }
    Parser::new(dialect)
        .with_recursion_limit(MAX_NESTING)
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_statements())
        .map_err(|e| {
            let e = e.to_string();
            if e.contains("recursion limit") {
                format!("the query is nested too deeply to check (more than {MAX_NESTING} levels): write it flatter")
            } else {
                format!("the query does not parse: {e}")
            }
        })
}

/// Whether `token` may join two expressions into a deeper one: every symbol but
/// parentheses, commas and `;`, and the keywords that act as operators.
fn is_operator(token: &Token) -> bool {
    match token {
        Token::Word(w) => {
            w.quote_style.is_none()
                && matches!(
                    w.keyword,
                    Keyword::AND
                        | Keyword::OR
                        | Keyword::NOT
                        | Keyword::IS
                        | Keyword::IN
                        | Keyword::LIKE
                        | Keyword::ILIKE
                        | Keyword::BETWEEN
                        | Keyword::SIMILAR
                        | Keyword::GLOB
                        | Keyword::REGEXP
                        | Keyword::RLIKE
                        | Keyword::MATCH
                        | Keyword::COLLATE
                        | Keyword::XOR
                        | Keyword::DIV
                        | Keyword::AT
                        | Keyword::UNION
                        | Keyword::INTERSECT
                        | Keyword::EXCEPT
                        | Keyword::MINUS
                        | Keyword::OVERLAPS
                        | Keyword::OPERATOR
                        | Keyword::NOTNULL
                        | Keyword::ESCAPE
                )
        }
        Token::Whitespace(_)
        | Token::Number(..)
        | Token::SingleQuotedString(_)
        | Token::DoubleQuotedString(_)
        | Token::DollarQuotedString(_)
        | Token::NationalStringLiteral(_)
        | Token::EscapedStringLiteral(_)
        | Token::UnicodeStringLiteral(_)
        | Token::HexStringLiteral(_)
        | Token::SingleQuotedByteStringLiteral(_)
        | Token::DoubleQuotedByteStringLiteral(_)
        | Token::Comma
        | Token::SemiColon
        | Token::LParen
        | Token::RParen
        | Token::Placeholder(_)
        | Token::EOF => false,
        _ => true,
    }
}

/// Whether query `q` writes: a CTE's INSERT, UPDATE or DELETE, or SELECT INTO.
pub(crate) fn query_writes(q: &Query) -> bool {
    struct Writes;
    impl Visitor for Writes {
        type Break = ();
        fn pre_visit_statement(&mut self, s: &Statement) -> ControlFlow<()> {
            if matches!(s, Statement::Query(_)) {
                ControlFlow::Continue(())
            } else {
                ControlFlow::Break(())
            }
        }
        fn pre_visit_select(&mut self, s: &Select) -> ControlFlow<()> {
            if s.into.is_some() {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        }
    }
    q.visit(&mut Writes).is_break()
}

fn check_in(flavor: Flavor, sql: &str, c: &Constraints) -> Result<(), String> {
    let statements = parse(flavor, sql)?;
    let statement = match statements.as_slice() {
        [] => return Err("there is no statement".into()),
        [one] => one,
        many => {
            return Err(format!(
                "one statement at a time, and this is {}",
                many.len()
            ));
        }
    };
    let mut names = Names {
        c,
        aliases: HashMap::new(),
        relations: Vec::new(),
        rows: HashMap::new(),
    };
    let _ = statement.visit(&mut names);
    // NB: every name a relation goes by, a CTE's too: a bare column may be any of theirs.
    let tables: HashSet<String> = names.relations.iter().cloned().collect();
    let mut walk = Walk {
        c,
        flavor,
        aliases: &names.aliases,
        rows: &names.rows,
        tables: &tables,
        scopes: Vec::new(),
        bodies: HashMap::new(),
        pushed: Vec::new(),
        function_name: None,
    };
    match statement.visit(&mut walk) {
        ControlFlow::Break(why) => Err(why),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// The last part of a name, lowercase (`main.Orders` → `orders`).
fn last(name: &ObjectName) -> String {
    name.0
        .last()
        .and_then(|p| p.as_ident())
        .map(|i| i.value.to_ascii_lowercase())
        .unwrap_or_default()
}

/// A join's constraint, when it has one.
fn constraint(op: &JoinOperator) -> Option<&JoinConstraint> {
    match op {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c)
        | JoinOperator::CrossJoin(c)
        | JoinOperator::Semi(c)
        | JoinOperator::LeftSemi(c)
        | JoinOperator::RightSemi(c)
        | JoinOperator::Anti(c)
        | JoinOperator::LeftAnti(c)
        | JoinOperator::RightAnti(c)
        | JoinOperator::StraightJoin(c) => Some(c),
        JoinOperator::AsOf { constraint, .. } => Some(constraint),
        _ => None,
    }
}

/// The tables a FROM item names itself (nested joins included, not subqueries).
fn from_tables<'a>(from: &'a TableWithJoins, out: &mut Vec<&'a ObjectName>) {
    for factor in std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation)) {
        match factor {
            TableFactor::Table {
                name, args: None, ..
            } => out.push(name),
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => from_tables(table_with_joins, out),
            _ => {}
        }
    }
}

/// The arguments of a function call, as written.
fn arguments(args: &[FunctionArg]) -> impl Iterator<Item = &FunctionArgExpr> {
    args.iter().map(|a| match a {
        FunctionArg::Named { arg, .. }
        | FunctionArg::ExprNamed { arg, .. }
        | FunctionArg::Unnamed(arg) => arg,
    })
}

/// Names a statement defines or uses: its table aliases, every relation it names, and
/// the names that stand for a whole row of a table with denied columns.
struct Names<'a> {
    c: &'a Constraints,
    /// alias → every table (or CTE) it stands for somewhere in the statement.
    aliases: HashMap<String, Vec<String>>,
    relations: Vec<String>,
    /// Names (a table's own, its aliases) whose value is a row holding a denied column.
    rows: HashMap<String, String>,
}

impl Visitor for Names<'_> {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } = factor
        {
            let table = last(name);
            if self.c.denied_column_of(&table).is_some() {
                self.rows.insert(table.clone(), table.clone());
                if let Some(alias) = alias {
                    self.rows
                        .insert(alias.name.value.to_ascii_lowercase(), table.clone());
                }
            }
            if let Some(alias) = alias {
                self.aliases
                    .entry(alias.name.value.to_ascii_lowercase())
                    .or_default()
                    .push(table);
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_relation(&mut self, relation: &ObjectName) -> ControlFlow<()> {
        self.relations.push(last(relation));
        ControlFlow::Continue(())
    }
}

/// A scope of CTE names, innermost last.
enum Scope {
    /// The CTEs of a `WITH`, seen by its query's body.
    With(HashSet<String>),
    /// The body of one CTE of the `WITH` at index `with`: it sees `visible` of its
    /// siblings, and not `hidden` (a name it shares with a real table is the table there).
    Body {
        visible: HashSet<String>,
        hidden: HashSet<String>,
        with: usize,
    },
}

struct Walk<'a> {
    c: &'a Constraints,
    flavor: Flavor,
    aliases: &'a HashMap<String, Vec<String>>,
    rows: &'a HashMap<String, String>,
    /// Every name a relation of the statement goes by.
    tables: &'a HashSet<String>,
    scopes: Vec<Scope>,
    /// Each CTE body (by address) → its scope, known once its `WITH` is entered.
    bodies: HashMap<*const Query, Scope>,
    /// Scopes each query being walked pushed.
    pushed: Vec<usize>,
    /// The name of the table function being walked: not a table.
    function_name: Option<*const ObjectName>,
}

impl Walk<'_> {
    /// Whether `name`, where it is being walked, stands for a CTE.
    fn is_cte(&self, name: &str) -> bool {
        let mut i = self.scopes.len();
        while i > 0 {
            i -= 1;
            match &self.scopes[i] {
                Scope::With(names) if names.contains(name) => return true,
                Scope::With(_) => {}
                Scope::Body { visible, .. } if visible.contains(name) => return true,
                Scope::Body { hidden, with, .. } if hidden.contains(name) => i = *with,
                Scope::Body { .. } => {}
            }
        }
        false
    }

    /// The tables `qualifier` (an alias, or a table's own name) may stand for.
    fn tables_of(&self, qualifier: &str) -> Vec<String> {
        let q = qualifier.to_ascii_lowercase();
        let mut out = self.aliases.get(&q).cloned().unwrap_or_default();
        out.push(q);
        out
    }

    /// A column named without its table: any of the statement's tables may have it, and
    /// a table's name or alias stands for its whole row.
    fn bare(&self, column: &str) -> ControlFlow<String> {
        let lower = column.to_ascii_lowercase();
        if let Some(table) = self.rows.get(&lower) {
            let col = self.c.denied_column_of(table).unwrap_or_default();
            return ControlFlow::Break(format!(
                "\"{column}\" is a whole row of \"{table}\", which holds \"{table}.{col}\" (in deny_columns): name the columns to read"
            ));
        }
        for t in self.tables {
            self.column(t, column)?;
        }
        ControlFlow::Continue(())
    }

    fn column(&self, table: &str, column: &str) -> ControlFlow<String> {
        if self.c.column_denied(table, column) {
            return ControlFlow::Break(format!("column \"{table}.{column}\" is in deny_columns"));
        }
        ControlFlow::Continue(())
    }

    /// The constraints of `from`'s joins, nested ones too: the columns a `USING` joins on
    /// are read as bare names are, and a `NATURAL` join compares every column two tables
    /// share.
    fn joins(&self, from: &TableWithJoins) -> ControlFlow<String> {
        for factor in std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation))
        {
            if let TableFactor::NestedJoin {
                table_with_joins, ..
            } = factor
            {
                self.joins(table_with_joins)?;
            }
        }
        for join in &from.joins {
            match constraint(&join.join_operator) {
                Some(JoinConstraint::Using(cols) | JoinConstraint::UsingAlias(cols, _)) => {
                    for col in cols {
                        self.bare(&last(col))?;
                    }
                }
                Some(JoinConstraint::Natural) if !self.c.deny_columns.is_empty() => {
                    return ControlFlow::Break(
                        "a NATURAL join compares every column two tables share, denied ones included: join with ON"
                            .into(),
                    );
                }
                _ => {}
            }
        }
        ControlFlow::Continue(())
    }

    /// A `*` over `table`.
    fn star(&self, table: &str) -> ControlFlow<String> {
        if let Some(col) = self.c.denied_column_of(table) {
            return ControlFlow::Break(format!(
                "`*` over \"{table}\" would read \"{table}.{col}\", which is in deny_columns: name the columns to read"
            ));
        }
        ControlFlow::Continue(())
    }

    /// A call of function `name` with `args`: an allowed function, and no whole row of a
    /// table with denied columns among its arguments (`row_to_json(s.*)`).
    fn function<'f>(
        &self,
        name: &ObjectName,
        args: impl Iterator<Item = &'f FunctionArgExpr>,
    ) -> ControlFlow<String> {
        let parts: Vec<_> = name.0.iter().map(|p| p.as_ident()).collect();
        let Some(Some(ident)) = parts.last() else {
            return ControlFlow::Break(format!("function `{name}` is not allowed"));
        };
        let shown = ident.value.to_lowercase();
        // NB: PostgreSQL finds `pg_catalog`'s functions first by a bare name; a
        // qualified one may be another schema's, and a quoted one is case-sensitive.
        let qualified_ok = match parts.as_slice() {
            [_] => true,
            [Some(schema), _] => {
                self.flavor == Flavor::Postgres && schema.value.eq_ignore_ascii_case("pg_catalog")
            }
            _ => false,
        };
        let case_ok = self.flavor == Flavor::Sqlite
            || ident.quote_style.is_none()
            || ident.value == ident.value.to_lowercase();
        let known = WINDOW_FUNCTIONS.contains(&shown.as_str())
            || match self.flavor {
                Flavor::Sqlite => SQLITE_FUNCTIONS.contains(&shown.as_str()),
                Flavor::Postgres => POSTGRES_FUNCTIONS.contains(&shown.as_str()),
            };
        if !(qualified_ok && case_ok && known) {
            return ControlFlow::Break(format!(
                "function \"{shown}\" is not allowed: a query may call only the database's own functions of values (aggregates, strings, numbers, dates, JSON), none that reads files or settings, runs SQL text, writes, or waits"
            ));
        }
        for arg in args {
            if let FunctionArgExpr::QualifiedWildcard(q) = arg {
                for t in self.tables_of(&last(q)) {
                    self.star(&t)?;
                }
            }
        }
        ControlFlow::Continue(())
    }

    /// A table as a FROM item: its own checks beyond its name.
    fn table_factor(&mut self, factor: &TableFactor) -> ControlFlow<String> {
        match factor {
            TableFactor::Table {
                name,
                args: Some(args),
                ..
            } => {
                self.function_name = Some(name as *const ObjectName);
                self.function(name, arguments(&args.args))
            }
            TableFactor::Table {
                name,
                alias,
                index_directives,
                ..
            } => {
                let table = last(name);
                let Some(col) = self.c.denied_column_of(&table) else {
                    return ControlFlow::Continue(());
                };
                if alias.as_ref().is_some_and(|a| !a.columns.is_empty()) {
                    return ControlFlow::Break(format!(
                        "\"{table}\" has a column in deny_columns (\"{table}.{col}\"): its columns may not be renamed by an alias (AS t(a, b)); alias the table only"
                    ));
                }
                if index_directives
                    .iter()
                    .any(|d| matches!(d, TableIndexDirective::IndexedBy(_)))
                {
                    return ControlFlow::Break(format!(
                        "INDEXED BY on \"{table}\", which has a column in deny_columns (\"{table}.{col}\"): an index may order rows by it; leave the choice of index to the database"
                    ));
                }
                ControlFlow::Continue(())
            }
            TableFactor::Function { name, args, .. } => self.function(name, arguments(args)),
            TableFactor::Derived { .. }
            | TableFactor::NestedJoin { .. }
            | TableFactor::UNNEST { .. } => ControlFlow::Continue(()),
            _ => ControlFlow::Break(
                "this kind of FROM item is not supported: name tables, subqueries, or functions"
                    .into(),
            ),
        }
    }
}

impl Visitor for Walk<'_> {
    type Break = String;

    fn pre_visit_statement(&mut self, statement: &Statement) -> ControlFlow<String> {
        let kind = || {
            let text = statement.to_string();
            text.split_whitespace().next().unwrap_or("?").to_uppercase()
        };
        if self.c.read_only && !matches!(statement, Statement::Query(_)) {
            return ControlFlow::Break(format!(
                "the tool is read-only: only a query (SELECT ...) may run, and this is {}",
                kind()
            ));
        }
        match statement {
            // NB: a join in an UPDATE compares columns no SELECT of it names.
            Statement::Update(update)
                if update.from.is_some() && !self.c.deny_columns.is_empty() =>
            {
                return ControlFlow::Break(
                    "UPDATE ... FROM may not run when columns are denied: use a subquery".into(),
                );
            }
            Statement::Query(_) | Statement::Update(_) | Statement::Delete(_) => {}
            // NB: an insert names no column the database's guard is told of.
            Statement::Insert(insert) => {
                let t = insert.table.to_string();
                let t = t.rsplit('.').next().unwrap_or(&t);
                let t = t.trim_matches(['"', '`', '[', ']']).to_ascii_lowercase();
                if let Some(col) = self.c.denied_column_of(&t) {
                    return ControlFlow::Break(format!(
                        "rows of \"{t}\" may not be inserted: its column \"{t}.{col}\" is in deny_columns"
                    ));
                }
            }
            _ => {
                return ControlFlow::Break(format!(
                    "only queries and writes to rows may run, and this is {}",
                    kind()
                ));
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<String> {
        let mut pushed = 0;
        if let Some(scope) = self.bodies.remove(&(query as *const Query)) {
            self.scopes.push(scope);
            pushed += 1;
        }
        if let Some(with) = &query.with {
            let names: Vec<String> = with
                .cte_tables
                .iter()
                .map(|cte| cte.alias.name.value.to_ascii_lowercase())
                .collect();
            let index = self.scopes.len();
            // NB: SQLite resolves a CTE's name anywhere in its WITH (RECURSIVE or not);
            // PostgreSQL, without RECURSIVE, only in the CTEs after it: before, and in
            // its own body, the name is a table's.
            for (i, cte) in with.cte_tables.iter().enumerate() {
                let sees_all = self.flavor == Flavor::Sqlite || with.recursive;
                let visible: HashSet<String> = if sees_all {
                    names.iter().cloned().collect()
                } else {
                    names[..i].iter().cloned().collect()
                };
                let hidden = names
                    .iter()
                    .filter(|n| !visible.contains(*n))
                    .cloned()
                    .collect();
                self.bodies.insert(
                    &*cte.query as *const Query,
                    Scope::Body {
                        visible,
                        hidden,
                        with: index,
                    },
                );
            }
            self.scopes.push(Scope::With(names.into_iter().collect()));
            pushed += 1;
        }
        self.pushed.push(pushed);
        if self.c.read_only && !query.locks.is_empty() {
            return ControlFlow::Break(
                "the tool is read-only: a query may not lock rows (FOR UPDATE/SHARE)".into(),
            );
        }
        if matches!(*query.body, SetExpr::Table(_)) {
            return ControlFlow::Break("write `TABLE t` as `SELECT ... FROM t`".into());
        }
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _query: &Query) -> ControlFlow<String> {
        let n = self.pushed.pop().unwrap_or(0);
        self.scopes.truncate(self.scopes.len().saturating_sub(n));
        ControlFlow::Continue(())
    }

    fn pre_visit_select(&mut self, select: &Select) -> ControlFlow<String> {
        if self.c.read_only && select.into.is_some() {
            return ControlFlow::Break(
                "the tool is read-only: SELECT INTO would create a table".into(),
            );
        }
        let mut named = Vec::new();
        for from in &select.from {
            from_tables(from, &mut named);
            self.joins(from)?;
        }
        for item in &select.projection {
            match item {
                SelectItem::Wildcard(_) => {
                    for name in &named {
                        self.star(&last(name))?;
                    }
                }
                SelectItem::QualifiedWildcard(
                    SelectItemQualifiedWildcardKind::ObjectName(q),
                    _,
                ) => {
                    for t in self.tables_of(&last(q)) {
                        self.star(&t)?;
                    }
                }
                _ => {}
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<String> {
        self.table_factor(factor)
    }

    fn pre_visit_relation(&mut self, relation: &ObjectName) -> ControlFlow<String> {
        if self.function_name.take() == Some(relation as *const ObjectName) {
            return ControlFlow::Continue(());
        }
        let t = last(relation);
        if relation.0.len() == 1 && self.is_cte(&t) {
            return ControlFlow::Continue(());
        }
        // NB: on PostgreSQL, `other.orders` is another schema's table, not the `orders`
        // that allow_tables means.
        if self.flavor == Flavor::Postgres && relation.0.len() > 1 {
            let schema = relation.0[relation.0.len() - 2]
                .as_ident()
                .map(|i| i.value.to_ascii_lowercase())
                .unwrap_or_default();
            if schema != "public" {
                return ControlFlow::Break(format!(
                    "table `{relation}` is in schema \"{schema}\": name tables without their schema"
                ));
            }
        }
        if !self.c.table_allowed(&t) {
            return ControlFlow::Break(self.c.not_allowed(&t));
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<String> {
        match expr {
            Expr::Identifier(id) => self.bare(&id.value)?,
            Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
                let column = &parts[parts.len() - 1].value;
                for table in self.tables_of(&parts[parts.len() - 2].value) {
                    self.column(&table, column)?;
                }
            }
            Expr::QualifiedWildcard(q, _) => {
                for t in self.tables_of(&last(q)) {
                    self.star(&t)?;
                }
            }
            Expr::Function(f) => match &f.args {
                FunctionArguments::List(list) => self.function(&f.name, arguments(&list.args))?,
                _ => self.function(&f.name, std::iter::empty())?,
            },
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The refusal's words, as the planner reads them.
    fn check(sql: &str, c: &Constraints) -> Result<(), String> {
        super::check(sql, c).map_err(|e| e.to_string())
    }

    fn check_postgres(sql: &str, c: &Constraints) -> Result<(), String> {
        super::check_postgres(sql, c).map_err(|e| e.to_string())
    }

    fn constraints() -> Constraints {
        Constraints {
            allow_tables: Some(vec!["orders".into(), "customers".into(), "staff".into()]),
            deny_columns: Constraints::deny(&["staff.salary".into()]).unwrap(),
            ..Constraints::default()
        }
    }

    /// Each query that must pass, and each that must be refused with a message holding
    /// the given text.
    #[test]
    fn every_constraint_passes_what_it_allows_and_refuses_the_rest() {
        let c = constraints();
        let pass = [
            "SELECT id, total FROM orders",
            "select o.id, c.name from orders o join customers c on c.id = o.customer_id",
            "WITH big AS (SELECT * FROM orders WHERE total > 100) SELECT count(*) FROM big",
            "SELECT name FROM (SELECT name FROM staff) AS s",
            "SELECT s.name, s.store FROM staff s ORDER BY s.name",
            "SELECT * FROM orders",
            "SELECT count(*) FROM staff",
            "SELECT o.* FROM orders o JOIN staff s ON s.id = o.staff_id",
            "SELECT id FROM orders UNION SELECT id FROM customers",
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5) SELECT count(*) FROM c",
            "SELECT upper(name), round(avg(total), 2) FROM orders o JOIN staff s ON s.id = o.staff_id GROUP BY 1",
            "SELECT 1 + 1 + 1 + 1",
        ];
        for q in pass {
            assert_eq!(check(q, &c), Ok(()), "{q}");
        }
        let refused = [
            ("DELETE FROM orders", "read-only"),
            ("UPDATE orders SET total = 0", "read-only"),
            ("INSERT INTO orders VALUES (1)", "read-only"),
            ("DROP TABLE orders", "read-only"),
            ("CREATE TABLE x (a)", "read-only"),
            ("PRAGMA writable_schema = 1", "read-only"),
            ("ATTACH DATABASE '/tmp/x.db' AS x", "read-only"),
            ("VACUUM", "read-only"),
            ("BEGIN", "read-only"),
            ("SELECT 1; DELETE FROM orders", "one statement at a time"),
            (
                "SELECT * FROM salaries",
                "table \"salaries\" is not in allow_tables [orders, customers, staff]",
            ),
            (
                "SELECT * FROM orders o JOIN main.salaries s ON 1",
                "\"salaries\"",
            ),
            (
                "WITH x AS (SELECT * FROM salaries) SELECT * FROM x",
                "\"salaries\"",
            ),
            (
                "SELECT (SELECT max(amount) FROM salaries) FROM orders",
                "\"salaries\"",
            ),
            (
                "SELECT salary FROM staff",
                "\"staff.salary\" is in deny_columns",
            ),
            ("SELECT s.salary FROM staff s", "\"staff.salary\""),
            (
                "SELECT x FROM (SELECT salary AS x FROM staff)",
                "\"staff.salary\"",
            ),
            (
                "SELECT name FROM staff WHERE salary > 10",
                "\"staff.salary\"",
            ),
            ("SELECT * FROM staff", "`*` over \"staff\""),
            ("SELECT s.* FROM staff s", "`*` over \"staff\""),
            ("SELECT * FROM orders JOIN staff ON 1", "`*` over \"staff\""),
            ("SELECT load_extension('x')", "\"load_extension\""),
            ("SELECT readfile('/etc/passwd')", "\"readfile\""),
            ("SELECT id FROM orders FOR UPDATE", "lock"),
            // A CTE named like a table does not stand for it when the name is qualified.
            (
                "WITH salaries(x) AS (SELECT 1) SELECT o.id FROM orders o JOIN main.salaries USING (staff_id)",
                "\"salaries\" is not in allow_tables",
            ),
            (
                "SELECT s.name FROM staff s JOIN orders o USING (salary)",
                "\"staff.salary\"",
            ),
            (
                "SELECT s.name FROM staff s NATURAL JOIN orders o",
                "NATURAL",
            ),
            (
                "SELECT s.salary FROM staff s, (SELECT 1 FROM orders s)",
                "\"staff.salary\"",
            ),
            (
                "SELECT * FROM (orders JOIN staff ON 1)",
                "`*` over \"staff\"",
            ),
            (
                "SELECT o.id FROM (orders o JOIN staff s USING (salary))",
                "\"staff.salary\"",
            ),
            ("SELEC id FROM orders", "does not parse"),
            ("", "no statement"),
        ];
        for (q, why) in refused {
            match check(q, &c) {
                Ok(()) => panic!("{q}: passed"),
                Err(e) => assert!(e.contains(why), "{q}: {e}"),
            }
        }
    }

    #[test]
    fn a_writable_tool_runs_writes_on_its_tables_only() {
        let c = Constraints {
            read_only: false,
            ..constraints()
        };
        assert_eq!(
            check("UPDATE orders SET total = 0 WHERE id = 1", &c),
            Ok(())
        );
        let e = check("DELETE FROM salaries", &c).unwrap_err();
        assert!(e.contains("\"salaries\""), "{e}");
        let e = check(
            "INSERT OR REPLACE INTO staff (id, name, salary) VALUES (1, 'A', 9)",
            &c,
        )
        .unwrap_err();
        assert!(e.contains("\"staff.salary\""), "{e}");
        let e = check(
            "UPDATE orders SET total = 1 FROM staff s JOIN orders o USING (salary) WHERE o.id = 1",
            &c,
        )
        .unwrap_err();
        assert!(e.contains("UPDATE ... FROM"), "{e}");
        for q in ["VACUUM", "CREATE TABLE x (a)", "PRAGMA foreign_keys = 0"] {
            let e = check(q, &c).unwrap_err();
            assert!(e.contains("only queries and writes to rows"), "{q}: {e}");
        }
    }

    /// A tree as deep as the query is long is never built: a chain of operators past the
    /// bound is refused from its tokens, at any length, on a thread with a small stack.
    #[test]
    fn a_long_chain_of_operators_is_refused_before_it_is_parsed() {
        let run = |q: String| {
            std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || {
                    let c = Constraints::default();
                    (check(&q, &c), check_postgres(&q, &c))
                })
                .unwrap()
                .join()
                .expect("the check overflowed its stack")
        };
        let near = format!("SELECT 1{}", "+1".repeat(MAX_OPERATORS));
        assert_eq!(run(near), (Ok(()), Ok(())));
        for q in [
            format!("SELECT 1{}", "+1".repeat(60_000)),
            format!("SELECT 1 WHERE 1 = 1{}", " OR 1 = 1".repeat(30_000)),
            format!("SELECT 1{}", " UNION SELECT 1".repeat(10_000)),
            format!("SELECT 1{}", "::int".repeat(10_000)),
        ] {
            let (a, b) = run(q);
            for e in [a.unwrap_err(), b.unwrap_err()] {
                assert!(e.contains("too long to check"), "{e}");
            }
        }
        let (a, b) = run(format!(
            "SELECT {}1{}",
            "(".repeat(5_000),
            ")".repeat(5_000)
        ));
        for e in [a.unwrap_err(), b.unwrap_err()] {
            assert!(e.contains("nested too deeply"), "{e}");
        }
    }
}
