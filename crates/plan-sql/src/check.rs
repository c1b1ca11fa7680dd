//! The first guard: a query parsed (sqlparser) and refused for what it says, before any
//! database sees it. Exactly one statement; only a query when the tool is read-only (no
//! DML or DDL, not even inside a CTE, no `SELECT INTO`, no row locks); every table it
//! names, through CTEs, subqueries and aliases, in `allow_tables`; no column of
//! `deny_columns` (a bare column name that one of its tables denies, and a `*` over such a
//! table, are refused too: the parser does not know the schema, so it errs towards
//! refusing); no function that reaches outside the database.
//!
//! What it cannot see (a table reached through a view, a column picked by position) the
//! database's own guard still stops (`sqlite.rs`).

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use sqlparser::ast::{
    Expr, ObjectName, Query, Select, SelectItem, SelectItemQualifiedWildcardKind, SetExpr,
    Statement, TableFactor, Visit, Visitor,
};
use sqlparser::dialect::SQLiteDialect;
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
    let statements = Parser::parse_sql(&SQLiteDialect {}, sql)
        .map_err(|e| format!("the query does not parse: {e}"))?;
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
    let tables: HashSet<String> = names
        .relations
        .iter()
        .filter(|t| !names.ctes.contains(*t))
        .cloned()
        .collect();
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
        .map(|i| i.value.to_lowercase())
        .unwrap_or_default()
}

/// Names a statement defines or uses: its CTEs, its table aliases, every relation it
/// names.
#[derive(Default)]
struct Names {
    ctes: HashSet<String>,
    /// alias → the table (or CTE) it stands for.
    aliases: HashMap<String, String>,
    relations: Vec<String>,
}

impl Visitor for Names {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.ctes.insert(cte.alias.name.value.to_lowercase());
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
                .insert(alias.name.value.to_lowercase(), last(name));
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
    aliases: &'a HashMap<String, String>,
    /// The tables (not CTEs) the statement names.
    tables: &'a HashSet<String>,
}

impl Walk<'_> {
    /// The table `qualifier` (an alias or a table's name) stands for.
    fn table_of(&self, qualifier: &str) -> String {
        let q = qualifier.to_lowercase();
        self.aliases.get(&q).cloned().unwrap_or(q)
    }

    fn column(&self, table: &str, column: &str) -> ControlFlow<String> {
        if self.c.column_denied(table, column) {
            return ControlFlow::Break(format!("column \"{table}.{column}\" is in deny_columns"));
        }
        ControlFlow::Continue(())
    }

    /// A `*` over `table` (a table of the statement, not a CTE's output).
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
        if self.c.read_only && !matches!(statement, Statement::Query(_)) {
            let kind = statement.to_string();
            let kind = kind.split_whitespace().next().unwrap_or("?").to_uppercase();
            return ControlFlow::Break(format!(
                "the tool is read-only: only a query (SELECT ...) may run, and this is {kind}"
            ));
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
        for item in &select.projection {
            match item {
                SelectItem::Wildcard(_) => {
                    for from in &select.from {
                        let joined = std::iter::once(&from.relation)
                            .chain(from.joins.iter().map(|j| &j.relation));
                        for factor in joined {
                            if let TableFactor::Table { name, .. } = factor {
                                let t = last(name);
                                if !self.ctes.contains(&t) {
                                    self.star(&t)?;
                                }
                            }
                        }
                    }
                }
                SelectItem::QualifiedWildcard(
                    SelectItemQualifiedWildcardKind::ObjectName(q),
                    _,
                ) => {
                    let t = self.table_of(&last(q));
                    if !self.ctes.contains(&t) {
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
        if !self.ctes.contains(&t) && !self.c.table_allowed(&t) {
            return ControlFlow::Break(self.c.not_allowed(&t));
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<String> {
        match expr {
            Expr::Identifier(id) => {
                // NB: a bare name may be any of the statement's tables' columns.
                for t in self.tables {
                    self.column(t, &id.value)?;
                }
            }
            Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
                let column = &parts[parts.len() - 1].value;
                let table = self.table_of(&parts[parts.len() - 2].value);
                self.column(&table, column)?;
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
    }
}
