//! The first guard: a query parsed (sqlparser) and refused for what it says, before any
//! database sees it. Exactly one statement; only a query when the tool is read-only (no
//! DML or DDL, not even inside a CTE, no `SELECT INTO`, no row locks); every table it
//! names, through CTEs, subqueries and aliases, in `allow_tables`; no column of
//! `deny_columns` (a bare column name that one of its tables denies, and a `*` over such a
//! table, are refused too: the parser does not know the schema, so it errs towards
//! refusing; so are the columns a `USING` joins on, and a `NATURAL` join where columns are
//! denied); no function that reaches outside the database. A writable tool runs queries
//! and row writes only (no DDL, `PRAGMA`, `VACUUM`), and no insert into a table with a
//! denied column (an insert names no column the database's guard is told of).
//!
//! What it cannot see (a table reached through a view, a column picked by position) the
//! database's own guard still stops (`sqlite.rs`).

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use sqlparser::ast::{
    Expr, JoinConstraint, JoinOperator, ObjectName, Query, Select, SelectItem,
    SelectItemQualifiedWildcardKind, SetExpr, Statement, TableFactor, TableWithJoins, Visit,
    Visitor,
};
use sqlparser::dialect::{Dialect, PostgreSqlDialect, SQLiteDialect};
use sqlparser::parser::Parser;

use crate::Constraints;

/// Functions that reach outside the database (files, extensions, other databases, the
/// server's settings) or run SQL text the parser never sees.
pub(crate) const DENIED_FUNCTIONS: &[&str] = &[
    // SQLite and its shell's extensions.
    "load_extension",
    "readfile",
    "writefile",
    "edit",
    "fts3_tokenizer",
    "zipfile",
    "sqlar_compress",
    "sqlar_uncompress",
    // PostgreSQL.
    "pg_read_file",
    "pg_read_binary_file",
    "pg_ls_dir",
    "pg_stat_file",
    "pg_ls_logdir",
    "pg_ls_waldir",
    "lo_import",
    "lo_export",
    "lo_get",
    "lo_put",
    "dblink",
    "dblink_exec",
    "dblink_connect",
    "pg_terminate_backend",
    "pg_cancel_backend",
    "pg_reload_conf",
    "set_config",
    "pg_sleep",
    "query_to_xml",
    "query_to_xmlschema",
    "query_to_xml_and_xmlschema",
    "cursor_to_xml",
    "table_to_xml",
    "schema_to_xml",
    "database_to_xml",
];

/// Checks `sql` (SQLite's dialect) against `c`: Err says what is refused and why.
pub fn check(sql: &str, c: &Constraints) -> Result<(), String> {
    check_in(&SQLiteDialect {}, sql, c)
}

/// [`check`] in PostgreSQL's dialect.
pub fn check_postgres(sql: &str, c: &Constraints) -> Result<(), String> {
    check_in(&PostgreSqlDialect {}, sql, c)
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

fn check_in(dialect: &dyn Dialect, sql: &str, c: &Constraints) -> Result<(), String> {
    let statements =
        Parser::parse_sql(dialect, sql).map_err(|e| format!("the query does not parse: {e}"))?;
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
    let mut names = Names::default();
    let _ = statement.visit(&mut names);
    // NB: every name a relation goes by, a CTE's too: a CTE named like a table may stand
    // for it in one scope and not in another, and the parser errs towards refusing.
    let tables: HashSet<String> = names.relations.iter().cloned().collect();
    let mut walk = Walk {
        c,
        ctes: &names.ctes,
        aliases: &names.aliases,
        tables: &tables,
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

/// Whether `name` may be a CTE's: a qualified name (`main.t`) never is.
fn may_be_cte(name: &ObjectName, ctes: &HashSet<String>) -> bool {
    name.0.len() == 1 && ctes.contains(&last(name))
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
            TableFactor::Table { name, .. } => out.push(name),
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => from_tables(table_with_joins, out),
            _ => {}
        }
    }
}

/// Names a statement defines or uses: its CTEs, its table aliases, every relation it
/// names.
#[derive(Default)]
struct Names {
    ctes: HashSet<String>,
    /// alias → every table (or CTE) it stands for somewhere in the statement.
    aliases: HashMap<String, Vec<String>>,
    relations: Vec<String>,
}

impl Visitor for Names {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.ctes.insert(cte.alias.name.value.to_ascii_lowercase());
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table {
            name,
            alias: Some(alias),
            ..
        } = factor
        {
            self.aliases
                .entry(alias.name.value.to_ascii_lowercase())
                .or_default()
                .push(last(name));
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_relation(&mut self, relation: &ObjectName) -> ControlFlow<()> {
        self.relations.push(last(relation));
        ControlFlow::Continue(())
    }
}

struct Walk<'a> {
    c: &'a Constraints,
    ctes: &'a HashSet<String>,
    aliases: &'a HashMap<String, Vec<String>>,
    /// Every name a relation of the statement goes by.
    tables: &'a HashSet<String>,
}

impl Walk<'_> {
    /// The tables `qualifier` (an alias, or a table's own name) may stand for.
    fn tables_of(&self, qualifier: &str) -> Vec<String> {
        let q = qualifier.to_ascii_lowercase();
        let mut out = self.aliases.get(&q).cloned().unwrap_or_default();
        out.push(q);
        out
    }

    /// A column named without its table: any of the statement's tables may have it.
    fn bare(&self, column: &str) -> ControlFlow<String> {
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

    fn pre_visit_relation(&mut self, relation: &ObjectName) -> ControlFlow<String> {
        let t = last(relation);
        if !may_be_cte(relation, self.ctes) && !self.c.table_allowed(&t) {
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
            Expr::Function(f) => {
                let name = last(&f.name);
                if DENIED_FUNCTIONS.contains(&name.as_str()) {
                    return ControlFlow::Break(format!(
                        "function \"{name}\" reaches outside the database and is not allowed"
                    ));
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
