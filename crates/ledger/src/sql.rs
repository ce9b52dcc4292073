//! One way to run a statement on either backend, so the ledger's SQL is
//! written once.
//!
//! Why not a trait with a SQLite and a PostgreSQL implementation of every
//! operation: the ledger's ~140 operations are plain SQL that both engines
//! understand, and two copies of each would drift (and double what a
//! reviewer must read). The ledger therefore writes its statements in the
//! subset both engines share — `?N` placeholders (rewritten to `$N` for
//! PostgreSQL), `ON CONFLICT … DO …`, `RETURNING`, `IS DISTINCT FROM`,
//! `CAST(? AS BIGINT)` where a parameter's type cannot be inferred,
//! integers for flags — and branches on [`Db`] only where the engines
//! truly differ: claim locking (`FOR UPDATE SKIP LOCKED`), the clock, the
//! patient search index, change notifications and file-level operations.
//!
//! Values cross as [`Value`] (integer, text, real, null): the shapes the
//! ledger stores on both (milliseconds, 0/1 flags, JSON text). PostgreSQL
//! states each parameter's type; [`Value`] converts to whatever it asks
//! for, and [`crate::rows::Cols`] reads integers from `int2/4/8` and
//! booleans alike, so `EXISTS (…)` reads the same on both.

use std::borrow::Cow;
use std::cell::RefCell;
use std::error::Error as StdError;

use postgres::types::{IsNull, ToSql, Type, to_sql_checked};

use crate::rows::Cols;

/// A statement parameter. Text is borrowed where the caller has it (an
/// import binds every body and parameter list without copying them).
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    Null,
    Int(i64),
    Text(Cow<'a, str>),
    Real(f64),
}

impl From<i64> for Value<'_> {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<u32> for Value<'_> {
    fn from(v: u32) -> Self {
        Value::Int(i64::from(v))
    }
}
impl From<bool> for Value<'_> {
    fn from(v: bool) -> Self {
        Value::Int(i64::from(v))
    }
}
impl From<f64> for Value<'_> {
    fn from(v: f64) -> Self {
        Value::Real(v)
    }
}
impl<'a> From<&'a str> for Value<'a> {
    fn from(v: &'a str) -> Self {
        Value::Text(Cow::Borrowed(v))
    }
}
impl<'a> From<&'a String> for Value<'a> {
    fn from(v: &'a String) -> Self {
        Value::Text(Cow::Borrowed(v))
    }
}
impl From<String> for Value<'_> {
    fn from(v: String) -> Self {
        Value::Text(Cow::Owned(v))
    }
}
impl<'a, T: Into<Value<'a>>> From<Option<T>> for Value<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// `[Value; N]` from expressions of any type with `Into<Value>`.
#[macro_export]
macro_rules! vals {
    ($($v:expr),* $(,)?) => { [$($crate::sql::Value::from($v)),*] };
}

impl rusqlite::ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(match self {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int(v) => ToSqlOutput::Borrowed(ValueRef::Integer(*v)),
            Value::Real(v) => ToSqlOutput::Borrowed(ValueRef::Real(*v)),
            Value::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
        })
    }
}

fn text_like(ty: &Type) -> bool {
    matches!(
        *ty,
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN
    )
}

type BoxError = Box<dyn StdError + Sync + Send>;

impl ToSql for Value<'_> {
    fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, BoxError> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(v) => match *ty {
                Type::INT8 => v.to_sql(ty, out),
                Type::INT4 => i32::try_from(*v)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*v)?.to_sql(ty, out),
                Type::BOOL => (*v != 0).to_sql(ty, out),
                Type::FLOAT8 => (*v as f64).to_sql(ty, out),
                _ if text_like(ty) => v.to_string().to_sql(&Type::TEXT, out),
                _ => Err(format!("an integer cannot be sent as {ty}").into()),
            },
            Value::Real(v) => match *ty {
                Type::FLOAT8 => v.to_sql(ty, out),
                Type::FLOAT4 => (*v as f32).to_sql(ty, out),
                _ => Err(format!("a real cannot be sent as {ty}").into()),
            },
            Value::Text(s) => match *ty {
                _ if text_like(ty) => s.as_ref().to_sql(&Type::TEXT, out),
                Type::INT8 => s.parse::<i64>()?.to_sql(ty, out),
                _ => Err(format!("text cannot be sent as {ty}").into()),
            },
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// `?N` and bare `?` placeholders as PostgreSQL's `$N` (outside quotes).
pub fn to_pg_placeholders(sql: &str) -> String {
    pg_statement(sql).0
}

/// The statement for PostgreSQL, numbered `$1…` over the parameters it
/// uses, and which of the caller's values (1-based) those are. PostgreSQL
/// must know every parameter's type, and cannot for one the text never
/// mentions: statements built from one list of values (Atención's views
/// use a prefix of eleven) send only what they use.
fn pg_statement(sql: &str) -> (String, Vec<usize>) {
    let mut pieces: Vec<Result<String, usize>> = Vec::new();
    let mut text = String::with_capacity(sql.len() + 8);
    let mut chars = sql.chars().peekable();
    let mut quoted = false;
    let mut next = 0;
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                quoted = !quoted;
                text.push(c);
            }
            '?' if !quoted => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                next += 1;
                let n = digits.parse().unwrap_or(next);
                pieces.push(Ok(std::mem::take(&mut text)));
                pieces.push(Err(n));
            }
            _ => text.push(c),
        }
    }
    pieces.push(Ok(text));
    let mut used: Vec<usize> = pieces.iter().filter_map(|p| p.as_ref().err().copied()).collect();
    used.sort_unstable();
    used.dedup();
    let mut out = String::with_capacity(sql.len() + 8);
    for p in pieces {
        match p {
            Ok(t) => out.push_str(&t),
            Err(n) => {
                let at = used.binary_search(&n).unwrap_or(0) + 1;
                out.push('$');
                out.push_str(&at.to_string());
            }
        }
    }
    (out, used)
}

/// Where a statement runs: a SQLite connection (inside the caller's
/// transaction) or a PostgreSQL transaction or client.
pub enum Db<'a> {
    Sqlite(&'a rusqlite::Connection),
    Pg(&'a dyn PgRun),
}

/// A PostgreSQL transaction or client behind a `RefCell` (the ledger's
/// operations take `&self`, as rusqlite's do).
pub trait PgRun {
    fn run(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, postgres::Error>;
    fn fetch(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<postgres::Row>, postgres::Error>;
}

/// The statements a PostgreSQL connection has prepared, by their text:
/// without it every statement costs a round trip to be parsed and planned
/// before the one that runs it (SQLite's `prepare_cached` is the same idea).
/// A prepared statement belongs to the connection and survives the
/// transaction it was made in, committed or not.
#[derive(Default)]
pub struct StatementCache(RefCell<std::collections::HashMap<String, postgres::Statement>>);

/// Distinct statement texts kept per connection; past it the cache starts
/// over (texts built per batch size would otherwise grow it without end).
const CACHED_STATEMENTS: usize = 512;

/// A transaction on PostgreSQL (read or write) that prepares each
/// statement once per connection, and remembers whether the server chose
/// it as a deadlock's victim or failed it for serialization: such a
/// transaction did nothing wrong and succeeds when run again (see
/// `Store::write`), while any other failure is the caller's to report.
pub struct PgTx<'c> {
    tx: RefCell<postgres::Transaction<'c>>,
    transient: std::cell::Cell<bool>,
    cache: &'c StatementCache,
}

impl<'c> PgTx<'c> {
    pub fn new(tx: postgres::Transaction<'c>, cache: &'c StatementCache) -> PgTx<'c> {
        PgTx {
            tx: RefCell::new(tx),
            transient: std::cell::Cell::new(false),
            cache,
        }
    }

    /// Whether a statement failed for a reason a second run cures.
    pub fn hit_transient(&self) -> bool {
        self.transient.get()
    }

    /// Marks this transaction as one a second run cures: a state change
    /// decided on a row that another transaction changed and committed
    /// after this one read it (READ COMMITTED reads each statement's own
    /// snapshot), which the move's `WHERE state = …` then refused.
    pub fn note_stale(&self) {
        self.transient.set(true);
    }

    pub fn into_inner(self) -> postgres::Transaction<'c> {
        self.tx.into_inner()
    }

    fn statement(&self, sql: &str) -> Result<postgres::Statement, postgres::Error> {
        if let Some(st) = self.cache.0.borrow().get(sql) {
            return Ok(st.clone());
        }
        let st = self.tx.borrow_mut().prepare(sql)?;
        let mut cache = self.cache.0.borrow_mut();
        if cache.len() >= CACHED_STATEMENTS {
            cache.clear();
        }
        cache.insert(sql.to_string(), st.clone());
        Ok(st)
    }

    fn noted<T>(&self, r: Result<T, postgres::Error>) -> Result<T, postgres::Error> {
        if let Err(e) = &r
            && is_transient(e)
        {
            self.transient.set(true);
        }
        r
    }
}

/// Deadlock victim (40P01) or serialization failure (40001): PostgreSQL
/// rolled the work back and asks for it again.
pub fn is_transient(e: &postgres::Error) -> bool {
    e.code().is_some_and(|c| {
        *c == postgres::error::SqlState::T_R_DEADLOCK_DETECTED
            || *c == postgres::error::SqlState::T_R_SERIALIZATION_FAILURE
    })
}

impl PgRun for PgTx<'_> {
    fn run(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, postgres::Error> {
        let r = self
            .statement(sql)
            .and_then(|st| self.tx.borrow_mut().execute(&st, params));
        self.noted(r)
    }
    fn fetch(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<postgres::Row>, postgres::Error> {
        let r = self
            .statement(sql)
            .and_then(|st| self.tx.borrow_mut().query(&st, params));
        self.noted(r)
    }
}

impl PgRun for RefCell<crate::pg::PgClient> {
    fn run(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, postgres::Error> {
        self.borrow_mut().execute(sql, params)
    }
    fn fetch(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<postgres::Row>, postgres::Error> {
        self.borrow_mut().query(sql, params)
    }
}

/// A failed statement, from either engine.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error(transparent)]
    Pg(#[from] postgres::Error),
    /// A row that does not read as the caller expects.
    #[error("{0}")]
    Row(String),
}

impl From<SqlError> for crate::store::StoreError {
    fn from(e: SqlError) -> Self {
        match e {
            SqlError::Sqlite(e) => crate::store::StoreError::Sql(e),
            SqlError::Pg(e) => crate::store::StoreError::Pg(e.into()),
            SqlError::Row(detail) => crate::store::StoreError::Corrupt { table: "row", detail },
        }
    }
}

/// The caller's values a PostgreSQL statement uses, in its numbering (a
/// number past the values given is sent as NULL, as SQLite binds it).
fn used<'v>(params: &'v [Value<'_>], numbers: &[usize]) -> Vec<&'v (dyn ToSql + Sync)> {
    numbers
        .iter()
        .map(|n| params.get(n - 1).unwrap_or(&Value::Null) as &(dyn ToSql + Sync))
        .collect()
}

impl Db<'_> {
    /// Runs a statement; the number of rows it changed. Values after the
    /// highest `?N` the statement uses are ignored on both engines.
    pub fn exec(&self, sql: &str, params: &[Value<'_>]) -> Result<usize, SqlError> {
        match self {
            Db::Sqlite(c) => {
                let mut stmt = c.prepare_cached(sql)?;
                let n = stmt.parameter_count().min(params.len());
                Ok(stmt.execute(rusqlite::params_from_iter(&params[..n]))?)
            }
            Db::Pg(tx) => {
                let (sql, numbers) = pg_statement(sql);
                Ok(tx.run(&sql, &used(params, &numbers))? as usize)
            }
        }
    }

    /// Every row of a query, read by `f`.
    pub fn rows<T>(
        &self,
        sql: &str,
        params: &[Value<'_>],
        mut f: impl FnMut(&dyn Cols) -> Result<T, String>,
    ) -> Result<Vec<T>, SqlError> {
        match self {
            Db::Sqlite(c) => {
                let mut stmt = c.prepare_cached(sql)?;
                let n = stmt.parameter_count().min(params.len());
                let mut rows = stmt.query(rusqlite::params_from_iter(&params[..n]))?;
                let mut out = Vec::new();
                while let Some(r) = rows.next()? {
                    out.push(f(r).map_err(SqlError::Row)?);
                }
                Ok(out)
            }
            Db::Pg(tx) => {
                let (sql, numbers) = pg_statement(sql);
                let rows = tx.fetch(&sql, &used(params, &numbers))?;
                rows.iter().map(|r| f(r).map_err(SqlError::Row)).collect()
            }
        }
    }

    /// The first row of a query, if any.
    pub fn row<T>(
        &self,
        sql: &str,
        params: &[Value<'_>],
        f: impl FnMut(&dyn Cols) -> Result<T, String>,
    ) -> Result<Option<T>, SqlError> {
        Ok(self.rows(sql, params, f)?.into_iter().next())
    }

    pub fn is_pg(&self) -> bool {
        matches!(self, Db::Pg(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_for_postgres_outside_quotes() {
        assert_eq!(to_pg_placeholders("SELECT ?1, ?2, ?1"), "SELECT $1, $2, $1");
        assert_eq!(to_pg_placeholders("VALUES (?, ?), (?, ?)"), "VALUES ($1, $2), ($3, $4)");
        assert_eq!(to_pg_placeholders("SELECT 'a?b', ?10"), "SELECT 'a?b', $1");
        assert_eq!(
            to_pg_placeholders("WHERE x = 'it''s' AND y = ?3"),
            "WHERE x = 'it''s' AND y = $1"
        );
        // Only the values a statement mentions are sent, renumbered.
        assert_eq!(
            pg_statement("SELECT ?7, ?1, ?7"),
            ("SELECT $2, $1, $2".to_string(), vec![1, 7])
        );
    }

    #[test]
    fn values_come_from_the_ledger_shapes() {
        assert_eq!(
            vals![1_i64, "a", None::<i64>, true, Some("b".to_string())],
            [
                Value::Int(1),
                Value::Text("a".into()),
                Value::Null,
                Value::Int(1),
                Value::Text("b".into())
            ]
        );
    }
}
