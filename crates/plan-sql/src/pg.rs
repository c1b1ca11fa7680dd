//! PostgreSQL's guard: each query gets a connection of its own and runs in a transaction
//! that is `READ ONLY` for a read-only tool (the server refuses every write, whatever the
//! parser missed) with `statement_timeout` set to the tool's limit, and is rolled back
//! (a writable tool's is committed). What PostgreSQL cannot be told per query (tables and
//! columns a role may not read) is its own business: give the tool a role with `SELECT`
//! on the allowed tables and columns only (column-level `GRANT`), so that the server
//! refuses what `allow_tables` and `deny_columns` refuse (docs/sql.md).
//!
//! Rows come back as PostgreSQL writes them as JSON (`row_to_json`: numbers, booleans,
//! nulls, strings, nested JSON), in the query's column order, duplicates included.

use std::fmt;
use std::sync::Arc;

use postgres::error::SqlState;
use postgres::{Client, Config};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::Value;

use crate::{Constraints, DbError, QueryError, Rows, name_connections};

/// A PostgreSQL database a tool queries under its constraints.
#[derive(Clone)]
pub struct Postgres {
    config: Arc<Config>,
    /// The URL without its password, for messages.
    shown: String,
    constraints: Arc<Constraints>,
}

impl fmt::Debug for Postgres {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Postgres")
            .field("url", &self.shown)
            .finish_non_exhaustive()
    }
}

impl Postgres {
    /// The database `url` (`postgres://user@host/db`, or key=value settings) names,
    /// queried under `constraints`. Nothing is connected until a query runs.
    pub fn open(url: &str, constraints: Constraints) -> Result<Postgres, DbError> {
        let mut config: Config = url.parse().map_err(|e| {
            DbError::Config(format!(
                "`{}` is not a PostgreSQL URL: {e}",
                without_password(url)
            ))
        })?;
        name_connections(&mut config);
        config.connect_timeout(constraints.timeout);
        Ok(Postgres {
            config: Arc::new(config),
            shown: without_password(url),
            constraints: Arc::new(constraints),
        })
    }

    pub fn constraints(&self) -> &Constraints {
        &self.constraints
    }

    /// The same database, logged into with `password` (kept out of the URL).
    pub fn with_password(mut self, password: &str) -> Postgres {
        Arc::make_mut(&mut self.config).password(password);
        self
    }

    /// Runs `sql` if both guards let it: the parser's check first, then the server's.
    /// Blocking: call it off an async runtime's threads.
    pub fn query(&self, sql: &str) -> Result<Rows, QueryError> {
        crate::check::check_postgres(sql, &self.constraints)?;
        self.execute(sql)
    }

    fn connect(&self) -> Result<Client, QueryError> {
        crate::tls::connect_postgres(&self.config)
            .map_err(|e| QueryError::Unavailable(format!("cannot connect to {}: {e}", self.shown)))
    }

    /// Runs `sql` with the server's guard alone (the parser's check is separate).
    pub fn execute(&self, sql: &str) -> Result<Rows, QueryError> {
        let c = &*self.constraints;
        let mut client = self.connect()?;
        let failed = |e: postgres::Error| self.failed(e);
        let mut tx = client
            .build_transaction()
            .read_only(c.read_only)
            .start()
            .map_err(failed)?;
        let ms = c.timeout.as_millis().clamp(1, i32::MAX as u128);
        tx.batch_execute(&format!("SET LOCAL statement_timeout = {ms}"))
            .map_err(failed)?;
        let statement = tx.prepare(sql).map_err(failed)?;
        let columns: Vec<String> = statement
            .columns()
            .iter()
            .map(|c| c.name().to_owned())
            .collect();
        let out = if columns.is_empty() {
            let n = tx.execute(&statement, &[]).map_err(failed)?;
            Rows {
                columns: vec!["rows_affected".into()],
                rows: vec![vec![Value::from(n)]],
                truncated: false,
            }
        } else if returns_rows_of_a_query(sql) {
            let wrapped = wrap(sql, columns.len(), c.max_rows, c.max_result_bytes);
            let mut out = Rows {
                columns,
                rows: Vec::new(),
                truncated: false,
            };
            let none: [&str; 0] = [];
            let mut rows = tx.query_raw(&wrapped, none).map_err(failed)?;
            use postgres::fallible_iterator::FallibleIterator;
            while let Some(row) = rows.next().map_err(failed)? {
                if out.rows.len() == c.max_rows {
                    out.truncated = true;
                    break;
                }
                // NB: None: the server kept the row back, since the rows so far and it
                // are over max_result_bytes.
                let Some(text) = row.try_get::<_, Option<&str>>(0).map_err(failed)? else {
                    out.truncated = true;
                    break;
                };
                out.rows.push(values(text).map_err(QueryError::Failed)?);
            }
            out
        } else {
            // NB: a write that returns rows (`RETURNING`): run as it is, at most the
            // tool's rows kept.
            let rows = tx.query(&statement, &[]).map_err(failed)?;
            let mut out = Rows {
                columns,
                rows: Vec::new(),
                truncated: rows.len() > c.max_rows,
            };
            for row in rows.iter().take(c.max_rows) {
                out.rows
                    .push((0..row.len()).map(|i| text_value(row, i)).collect());
            }
            out
        };
        if c.read_only {
            tx.rollback().map_err(failed)?;
        } else {
            tx.commit().map_err(failed)?;
        }
        Ok(out)
    }

    /// What a failure means for the plan: refused (the server's guard), over time, or the
    /// query's own fault.
    fn failed(&self, e: postgres::Error) -> QueryError {
        let Some(db) = e.as_db_error() else {
            return if e.is_closed() {
                QueryError::Unavailable(format!("{}: the connection closed: {e}", self.shown))
            } else {
                QueryError::Unavailable(format!("{}: {e}", self.shown))
            };
        };
        let message = db.message().to_owned();
        match db.code() {
            c if *c == SqlState::QUERY_CANCELED => QueryError::Timeout(self.constraints.timeout),
            c if *c == SqlState::READ_ONLY_SQL_TRANSACTION => QueryError::Refused(format!(
                "the tool is read-only, and the statement would write ({message})"
            )),
            c if *c == SqlState::INSUFFICIENT_PRIVILEGE => {
                QueryError::Refused(format!("the database refused it: {message}"))
            }
            c if *c == SqlState::TOO_MANY_CONNECTIONS || *c == SqlState::CANNOT_CONNECT_NOW => {
                QueryError::Unavailable(message)
            }
            _ => QueryError::Failed(match db.hint() {
                Some(hint) => format!("{message} (hint: {hint})"),
                None => message,
            }),
        }
    }
}

impl Postgres {
    /// A session for reading the schema: read-only, under the tool's time limit per
    /// statement, each statement on its own (one that fails leaves the others be).
    fn reader(&self) -> Result<Client, String> {
        let mut client = self.connect().map_err(|e| e.to_string())?;
        let ms = self
            .constraints
            .timeout
            .as_millis()
            .clamp(1, i32::MAX as u128);
        client
            .batch_execute(&format!(
                "SET default_transaction_read_only = on; SET statement_timeout = {ms}"
            ))
            .map_err(|e| format!("{}: {e}", self.shown))?;
        Ok(client)
    }

    /// A fingerprint of the schema the tool sees (its tables', views' and columns' names
    /// and types, and the foreign keys): an index of the schema is stale once it moves.
    pub fn schema_version(&self) -> Result<i64, DbError> {
        let mut client = self.reader().map_err(DbError::Unavailable)?;
        let row = client
            .query_one(
                "SELECT (coalesce(sum(hashtext(c.relname || '.' || a.attname || ':' || a.atttypid::text)::bigint), 0) \
                 + (SELECT count(*) FROM pg_constraint WHERE contype = 'f'))::bigint \
                 FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid \
                 WHERE c.relkind IN ('r', 'v', 'm', 'p', 'f') AND pg_table_is_visible(c.oid) \
                 AND a.attnum > 0 AND NOT a.attisdropped \
                 AND c.relnamespace NOT IN (SELECT oid FROM pg_namespace WHERE nspname IN ('pg_catalog', 'information_schema'))",
                &[],
            )
            .map_err(|e| DbError::Unavailable(format!("reading the schema of {}: {e}", self.shown)))?;
        Ok(row.get(0))
    }

    /// The schema grounding sees, as [`crate::Sqlite::schema`] reads it: the tables and
    /// views on the search path the tool may query, their columns (denied ones left out)
    /// with types, primary keys and comments (`COMMENT ON COLUMN`), foreign keys, and
    /// distinct short text values sampled from each text column the role may read.
    pub fn schema(&self) -> Result<crate::ground::Schema, DbError> {
        self.read_schema().map_err(DbError::Unavailable)
    }

    fn read_schema(&self) -> Result<crate::ground::Schema, String> {
        use crate::ground::{Column, ForeignKey, Schema, Table};
        let c = &*self.constraints;
        let mut client = self.reader()?;
        let err = |e: postgres::Error| format!("reading the schema of {}: {e}", self.shown);
        let tables = client
            .query(
                "SELECT c.oid, c.relname, obj_description(c.oid, 'pg_class') FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE c.relkind IN ('r', 'v', 'm', 'p', 'f') AND pg_table_is_visible(c.oid) \
                 AND n.nspname NOT IN ('pg_catalog', 'information_schema') ORDER BY c.relname",
                &[],
            )
            .map_err(err)?;
        let mut schema = Schema::default();
        for t in tables {
            let (oid, name): (postgres::types::Oid, String) = (t.get(0), t.get(1));
            if !c.table_allowed(&name) {
                continue;
            }
            let columns = client
                .query(
                    "SELECT a.attname, format_type(a.atttypid, a.atttypmod), \
                     coalesce((SELECT true FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisprimary AND a.attnum = ANY(i.indkey)), false), \
                     col_description(a.attrelid, a.attnum), ty.typcategory::text = 'S' \
                     FROM pg_attribute a JOIN pg_type ty ON ty.oid = a.atttypid \
                     WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                    &[&oid],
                )
                .map_err(err)?;
            let quoted = quote(&name);
            let mut cols = Vec::new();
            for col in columns {
                let column: String = col.get(0);
                if c.column_denied(&name, &column) {
                    continue;
                }
                let text: bool = col.get(4);
                // NB: values the role may not read are simply not shown.
                let values = if text {
                    client
                        .query(
                            &format!(
                                "SELECT DISTINCT v FROM (SELECT {}::text AS v FROM {quoted} LIMIT {}) s \
                                 WHERE length(v) BETWEEN 1 AND {} AND v ~ '[[:alpha:]]' ORDER BY v LIMIT {}",
                                quote(&column),
                                crate::sqlite::VALUE_SAMPLE_ROWS,
                                crate::sqlite::MAX_VALUE_CHARS,
                                crate::sqlite::MAX_VALUES
                            ),
                            &[],
                        )
                        .map(|rows| rows.iter().map(|r| r.get::<_, String>(0)).collect())
                        .unwrap_or_default()
                } else {
                    Vec::new()
                };
                cols.push(Column {
                    name: column,
                    ty: col.get(1),
                    primary_key: col.get(2),
                    comment: col.get(3),
                    values,
                });
            }
            let fks = client
                .query(
                    "SELECT a.attname, rc.relname, ra.attname FROM pg_constraint k \
                     JOIN pg_class rc ON rc.oid = k.confrelid \
                     JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1] \
                     JOIN pg_attribute ra ON ra.attrelid = k.confrelid AND ra.attnum = k.confkey[1] \
                     WHERE k.contype = 'f' AND k.conrelid = $1 ORDER BY a.attnum",
                    &[&oid],
                )
                .map_err(err)?;
            schema.tables.push(Table {
                name,
                comment: t.get(2),
                columns: cols,
                // NB: a join to a table the tool may not read is not shown.
                foreign_keys: fks
                    .iter()
                    .map(|r| ForeignKey {
                        column: r.get(0),
                        ref_table: r.get(1),
                        ref_column: r.get(2),
                    })
                    .filter(|fk| c.table_allowed(&fk.ref_table))
                    .collect(),
            });
        }
        Ok(schema)
    }

    /// What names this database in a cache key (never its password).
    pub(crate) fn key(&self) -> &str {
        &self.shown
    }
}

/// `name` as a quoted identifier.
fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Whether `sql` is a query (SELECT, VALUES, WITH ... SELECT): what can stand inside
/// `FROM (...)`. A write with `RETURNING` is not.
fn returns_rows_of_a_query(sql: &str) -> bool {
    use sqlparser::ast::Statement;
    match crate::check::parse(crate::check::Flavor::Postgres, sql).as_deref() {
        Ok([Statement::Query(q)]) => !crate::check::query_writes(q),
        _ => false,
    }
}

/// Query `sql` (of `width` columns) as the server runs it: each row as the text of a JSON
/// object, at most `max_rows + 1` of them, and none past the first whose text makes the
/// rows so far longer than `max_bytes`: that one is NULL, so that a value of any size is
/// measured by the server, never sent.
///
/// NB: the query's columns are renamed `c1`, `c2`, ...: a column of the query could
/// otherwise be named like the alias of its rows, and `row_to_json` would be given that
/// column. The rows keep the query's order (`row_number() OVER ()` numbers them as they
/// come). One statement (the parser and the extended protocol both say so): the query
/// cannot close the parenthesis and start another.
fn wrap(sql: &str, width: usize, max_rows: usize, max_bytes: usize) -> String {
    let body = sql.trim().trim_end_matches(';');
    let columns: Vec<String> = (1..=width).map(|i| format!("c{i}")).collect();
    format!(
        "SELECT CASE WHEN sum(octet_length(planvm_json)) OVER (ORDER BY planvm_n) <= {max_bytes} \
         THEN planvm_json END FROM (SELECT row_to_json(planvm_row)::text AS planvm_json, \
         row_number() OVER () AS planvm_n FROM ({body}\n) AS planvm_row ({}) LIMIT {}) AS planvm_rows \
         ORDER BY planvm_n",
        columns.join(", "),
        max_rows.saturating_add(1)
    )
}

/// The values of a row that `row_to_json` wrote, in column order (a name twice is two
/// columns).
fn values(text: &str) -> Result<Vec<Value>, String> {
    struct Ordered;
    impl<'de> Visitor<'de> for Ordered {
        type Value = Vec<Value>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<Value>, A::Error> {
            let mut out = Vec::new();
            while let Some((_, v)) = map.next_entry::<String, Value>()? {
                out.push(v);
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    de.deserialize_map(Ordered)
        .map_err(|e| format!("a row PostgreSQL wrote is not JSON: {e}"))
}

/// Column `i` of a row a write returned: its text form (any type), or null.
fn text_value(row: &postgres::Row, i: usize) -> Value {
    use postgres::types::Type;
    let ty = row.columns()[i].type_().clone();
    let number = |v: Option<f64>| v.map_or(Value::Null, Value::from);
    match ty {
        Type::BOOL => row
            .try_get::<_, Option<bool>>(i)
            .ok()
            .flatten()
            .map_or(Value::Null, Value::from),
        Type::INT2 => row
            .try_get::<_, Option<i16>>(i)
            .ok()
            .flatten()
            .map_or(Value::Null, Value::from),
        Type::INT4 => row
            .try_get::<_, Option<i32>>(i)
            .ok()
            .flatten()
            .map_or(Value::Null, Value::from),
        Type::INT8 => row
            .try_get::<_, Option<i64>>(i)
            .ok()
            .flatten()
            .map_or(Value::Null, Value::from),
        Type::FLOAT4 => number(
            row.try_get::<_, Option<f32>>(i)
                .ok()
                .flatten()
                .map(f64::from),
        ),
        Type::FLOAT8 => number(row.try_get::<_, Option<f64>>(i).ok().flatten()),
        _ => row
            .try_get::<_, Option<String>>(i)
            .ok()
            .flatten()
            .map_or(Value::Null, Value::from),
    }
}

/// `url` with its password masked, for messages: `user:password@`, a `password=` of its
/// query (`?password=...`, as libpq takes it), or the `password` of key=value settings
/// (quoted or not). Every message that names a PostgreSQL database goes through it.
pub fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return settings_without_password(url);
    };
    // NB: `scheme://user:password@host`: the password ends at the first `@`, which a
    // password must percent-encode.
    let (auth, rest) = match rest.split_once('@') {
        Some((auth, host)) => match auth.split_once(':') {
            Some((user, _)) => (format!("{user}:***@"), host),
            None => (format!("{auth}@"), host),
        },
        None => (String::new(), rest),
    };
    let Some((path, query)) = rest.split_once('?') else {
        return format!("{scheme}://{auth}{rest}");
    };
    let query: Vec<String> = query
        .split('&')
        .map(|kv| match kv.split_once('=') {
            Some((k, _)) if is_password_key(&percent_decoded(k)) => format!("{k}=***"),
            _ => kv.to_owned(),
        })
        .collect();
    format!("{scheme}://{auth}{path}?{}", query.join("&"))
}

fn is_password_key(key: &str) -> bool {
    key.trim().eq_ignore_ascii_case("password")
}

/// `%XX` escapes of `s` decoded (others kept), to know a key however it is written.
fn percent_decoded(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Key=value settings (`host=db password='a b'`) with the password's value masked,
/// read as libpq reads them: spaces around `=`, values in single quotes with `\`
/// escapes.
fn settings_without_password(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let skip_spaces = |mut i: usize| {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        i
    };
    while i < chars.len() {
        let start = i;
        i = skip_spaces(i);
        let key_at = i;
        while i < chars.len() && chars[i] != '=' && !chars[i].is_whitespace() {
            i += 1;
        }
        let key: String = chars[key_at..i].iter().collect();
        let eq = skip_spaces(i);
        if eq >= chars.len() || chars[eq] != '=' {
            out.extend(&chars[start..i]);
            continue;
        }
        let value_at = skip_spaces(eq + 1);
        let mut end = value_at;
        if chars.get(value_at) == Some(&'\'') {
            end += 1;
            while end < chars.len() && chars[end] != '\'' {
                end += if chars[end] == '\\' { 2 } else { 1 };
            }
            end = (end + 1).min(chars.len());
        } else {
            while end < chars.len() && !chars[end].is_whitespace() {
                end += 1;
            }
        }
        out.extend(&chars[start..value_at]);
        if is_password_key(&key) {
            out.push_str("***");
        } else {
            out.extend(&chars[value_at..end]);
        }
        i = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            without_password("postgres://app:s3cret@db.example.com:5432/shop"),
            "postgres://app:***@db.example.com:5432/shop"
        );
        assert_eq!(
            without_password("host=db user=app password=s3cret dbname=shop"),
            "host=db user=app password=*** dbname=shop"
        );
        assert_eq!(
            without_password("postgres://app@db/shop"),
            "postgres://app@db/shop"
        );
        for (url, shown) in [
            (
                "postgres://app@db/shop?password=s3cret",
                "postgres://app@db/shop?password=***",
            ),
            (
                "postgresql://app:s3cret@db/shop?sslmode=require&PassWord=s3cret&x=1",
                "postgresql://app:***@db/shop?sslmode=require&PassWord=***&x=1",
            ),
            (
                "postgres://db/shop?pass%77ord=s3cret",
                "postgres://db/shop?pass%77ord=***",
            ),
            (
                "host=db password = 's3 cr\\'et' user=app",
                "host=db password = *** user=app",
            ),
            ("password=s3cret", "password=***"),
        ] {
            assert_eq!(without_password(url), shown, "{url}");
        }
        let e = Postgres::open("postgres://app:s3cret@[bad", Constraints::default()).unwrap_err();
        assert!(matches!(e, DbError::Config(_)), "{e:?}");
        assert!(!e.to_string().contains("s3cret"), "{e}");
    }

    #[test]
    fn rows_keep_their_order_and_duplicates() {
        assert_eq!(
            values(r#"{"b": 1, "a": "x", "b": null}"#).unwrap(),
            [Value::from(1), Value::from("x"), Value::Null]
        );
    }
}
