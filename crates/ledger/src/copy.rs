//! Moving a clinic to the shared ledger: a SQLite ledger copied into an
//! empty PostgreSQL one, in batches, then verified.
//!
//! Why it is shaped so:
//! - **One PostgreSQL transaction.** The target ends with the whole copy
//!   or nothing: a failure half-way leaves it as empty as it was, and the
//!   copy can simply be run again.
//! - **One SQLite read transaction.** The source may be in use (`serve`
//!   still running): WAL gives the copy one consistent snapshot.
//! - **Ids kept**, identities moved past them afterwards, so every
//!   reference (history, attempts, resends, operator actions) holds.
//! - **Derived tables rebuilt, not copied**: the per-day counts and the
//!   search documents are kept by PostgreSQL's own triggers as rows
//!   arrive, the counts counted once at the end; both are then verified
//!   against the source's, and the tables analysed after the commit. The
//!   dispatcher heartbeat rows stay behind: they describe processes that
//!   ran against the old file.
//! - **Refuses a non-empty target**: a copy never merges two ledgers.

use std::path::Path;

use crate::location::Location;
use crate::pg::PgUrl;
use crate::sql::{Db, Value};
use crate::store::{OpenOptions, Store, StoreError, open_connection};

/// Tables in an order that satisfies every foreign key (intentions refer
/// to earlier intentions only: a resend is reserved after its original).
pub const COPIED_TABLES: &[&str] = &[
    "contacts",
    "commitments",
    "commitment_events",
    "commitment_signals",
    "intentions",
    "intention_history",
    "attempts",
    "channel_events",
    "counters",
    "operator_actions",
    "refused_events",
    "resend_acknowledgements",
    "template_status",
    "attention_handled",
    "feeds",
    "feed_seen",
    "feed_held",
];

/// Rows per multi-row `INSERT` (PostgreSQL takes at most 65,535
/// parameters in one statement; the widest table has 35 columns).
const BATCH: usize = 1000;

#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// Opening either ledger, or a transaction on it (the message names
    /// the file or the URL).
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("reading {table} from the source: {source}")]
    Read { table: String, source: rusqlite::Error },
    #[error("writing {table} to the target: {source}")]
    Write {
        table: String,
        source: crate::sql::SqlError,
    },
    #[error(
        "the target ledger {url} is not empty ({table} has {rows} rows): a copy goes into an empty database only, never merges two ledgers"
    )]
    NotEmpty { url: String, table: String, rows: i64 },
    #[error("verification failed after copying: {0}; nothing was committed to the target")]
    Mismatch(String),
}

/// What was copied, per table, and what was verified.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyReport {
    pub tables: Vec<(String, i64)>,
    pub intentions_verified: i64,
}

/// Progress while copying: `(table, rows copied so far, rows in the table)`.
pub type Progress<'a> = &'a mut dyn FnMut(&str, i64, i64);

/// Copies the SQLite ledger at `from` into the PostgreSQL ledger at `to`
/// (migrated first, so initialised or not), then verifies row counts, the
/// set of intention keys and their fingerprints before committing.
pub fn copy_sqlite_to_pg(from: &Path, to: &PgUrl, progress: Progress<'_>) -> Result<CopyReport, CopyError> {
    // Opening through the store checks the file and brings it to this
    // version, as every command does.
    drop(Store::open_with(from, &OpenOptions::EXISTING)?);
    let mut src = open_connection(from)?;
    let snapshot = src.transaction().map_err(StoreError::Sql)?;
    let mut target = Store::open_location(&Location::Postgres(Box::new(to.clone())), &OpenOptions::CREATE)?;
    let url = to.to_string();
    let report = target.write(|tx| {
        let db = tx.db();
        // Deferred checks fail here, naming the table being copied, not at
        // the commit.
        db.exec("SET CONSTRAINTS ALL IMMEDIATE", &[])
            .map_err(StoreError::from)?;
        refuse_non_empty(&db, &url)?;
        // The per-day counts are counted once at the end: kept row by row,
        // every copied intention rewrote its day's count row, leaving as
        // many dead versions as intentions in one tiny table the console
        // reads on every refresh. The trigger is off inside this
        // transaction only (DDL is transactional: a failed copy leaves it on).
        db.exec("ALTER TABLE intentions DISABLE TRIGGER intention_counts_insert", &[])
            .map_err(StoreError::from)?;
        let mut report = CopyReport::default();
        for table in COPIED_TABLES {
            let n = copy_table(&snapshot, &db, table, progress)?;
            report.tables.push((table.to_string(), n));
        }
        db.exec(
            "INSERT INTO intention_counts(day, state, n) \
             SELECT day, state, count(*) FROM intentions GROUP BY day, state",
            &[],
        )
        .map_err(write_err("intention_counts"))?;
        db.exec("ALTER TABLE intentions ENABLE TRIGGER intention_counts_insert", &[])
            .map_err(StoreError::from)?;
        move_identities(&db)?;
        verify_counts(&snapshot, &db)?;
        report.intentions_verified = verify_keys(&snapshot, &db)?;
        Ok::<_, CopyError>(report)
    })?;
    // Fresh statistics: without them the first hours of consoles and
    // dispatchers on the copied ledger would plan every query for empty
    // tables (autovacuum gets to them only later).
    target.write(|tx| tx.db().exec(&analyze_statement(), &[]).map_err(StoreError::from))?;
    Ok(report)
}

/// `ANALYZE` of the ledger's tables by name (the whole database may hold
/// other schemas).
fn analyze_statement() -> String {
    let tables: Vec<&str> = COPIED_TABLES
        .iter()
        .copied()
        .chain([
            "intention_counts",
            "commitment_search",
            "commitment_search_names",
            "commitment_search_word_sets",
            "contact_phone_suffixes",
            "name_word_deletes",
        ])
        .collect();
    format!("ANALYZE {}", tables.join(", "))
}

fn write_err(table: &str) -> impl Fn(crate::sql::SqlError) -> CopyError + '_ {
    move |source| CopyError::Write {
        table: table.to_string(),
        source,
    }
}

fn read_err(table: &str) -> impl Fn(rusqlite::Error) -> CopyError + '_ {
    move |source| CopyError::Read {
        table: table.to_string(),
        source,
    }
}

fn refuse_non_empty(db: &Db<'_>, url: &str) -> Result<(), CopyError> {
    for table in COPIED_TABLES.iter().chain(&["dispatchers"]) {
        let rows = db
            .row(&format!("SELECT count(*) FROM {table}"), &[], |r| r.int(0))
            .map_err(write_err(table))?
            .unwrap_or(0);
        if rows > 0 {
            return Err(CopyError::NotEmpty {
                url: url.to_string(),
                table: table.to_string(),
                rows,
            });
        }
    }
    Ok(())
}

fn columns(src: &rusqlite::Connection, table: &str) -> Result<Vec<String>, CopyError> {
    src.prepare(&format!("PRAGMA table_info({table})"))
        .and_then(|mut s| s.query_map([], |r| r.get(1))?.collect())
        .map_err(read_err(table))
}

/// Copies one table in batches of [`BATCH`] rows.
fn copy_table(src: &rusqlite::Connection, db: &Db<'_>, table: &str, progress: Progress<'_>) -> Result<i64, CopyError> {
    let cols = columns(src, table)?;
    let total: i64 = src
        .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .map_err(read_err(table))?;
    let list = cols.join(", ");
    // In id order (a resend refers to an earlier intention); tables keyed
    // otherwise have no references among their own rows.
    let order = if cols.iter().any(|c| c == "id") {
        " ORDER BY id"
    } else {
        ""
    };
    let mut stmt = src
        .prepare(&format!("SELECT {list} FROM {table}{order}"))
        .map_err(read_err(table))?;
    let mut rows = stmt.query([]).map_err(read_err(table))?;
    let mut batch: Vec<Value> = Vec::with_capacity(BATCH * cols.len());
    let mut done = 0_i64;
    progress(table, 0, total);
    loop {
        let row = rows.next().map_err(read_err(table))?;
        if let Some(r) = row {
            for i in 0..cols.len() {
                batch.push(value_at(r, i).map_err(read_err(table))?);
            }
        }
        let full = batch.len() >= BATCH * cols.len();
        if (full || row.is_none()) && !batch.is_empty() {
            let n = batch.len() / cols.len();
            let one = format!("({})", vec!["?"; cols.len()].join(", "));
            let sql = format!("INSERT INTO {table} ({list}) VALUES {}", vec![one; n].join(", "));
            db.exec(&sql, &batch).map_err(write_err(table))?;
            batch.clear();
            done += n as i64;
            progress(table, done, total);
        }
        if row.is_none() {
            return Ok(done);
        }
    }
}

fn value_at(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Value<'static>> {
    use rusqlite::types::ValueRef;
    Ok(match r.get_ref(i)? {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(v) => Value::Int(v),
        ValueRef::Real(v) => Value::Real(v),
        ValueRef::Text(t) => Value::from(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::from(String::from_utf8_lossy(b).into_owned()),
    })
}

/// New rows on the target get ids after the copied ones.
fn move_identities(db: &Db<'_>) -> Result<(), CopyError> {
    for table in COPIED_TABLES {
        let has_id = db
            .row(
                "SELECT count(*) FROM information_schema.columns
                 WHERE table_schema = current_schema() AND table_name = ?1 AND column_name = 'id'
                   AND is_identity = 'YES'",
                &[Value::from(*table)],
                |r| r.int(0),
            )
            .map_err(write_err(table))?
            .unwrap_or(0);
        if has_id > 0 {
            db.exec(
                &format!(
                    "SELECT setval(pg_get_serial_sequence('{table}', 'id'), max(id)) FROM {table} HAVING count(*) > 0"
                ),
                &[],
            )
            .map_err(write_err(table))?;
        }
    }
    Ok(())
}

/// Every copied table and the trigger-kept per-day counts match the source.
fn verify_counts(src: &rusqlite::Connection, db: &Db<'_>) -> Result<(), CopyError> {
    for table in COPIED_TABLES.iter().chain(&["intention_counts"]) {
        let (expr, what) = match *table {
            "intention_counts" => ("CAST(coalesce(sum(n), 0) AS BIGINT)", "intentions counted per day"),
            _ => ("count(*)", "rows"),
        };
        let sql = format!("SELECT {expr} FROM {table}");
        let source: i64 = src.query_row(&sql, [], |r| r.get(0)).map_err(read_err(table))?;
        let target = db.row(&sql, &[], |r| r.int(0)).map_err(write_err(table))?.unwrap_or(0);
        if source != target {
            return Err(CopyError::Mismatch(format!(
                "{table}: {source} {what} in the source, {target} in the target"
            )));
        }
    }
    Ok(())
}

/// The same intention keys with the same fingerprints on both sides,
/// compared in key order (byte order on both: SQLite's BINARY collation,
/// PostgreSQL's "C"), a page at a time. Returns how many were compared.
fn verify_keys(src: &rusqlite::Connection, db: &Db<'_>) -> Result<i64, CopyError> {
    const PAGE: i64 = 10_000;
    let mut after = String::new();
    let mut compared = 0;
    let mut page_src = src
        .prepare("SELECT key, fingerprint FROM intentions WHERE key > ?1 ORDER BY key LIMIT ?2")
        .map_err(read_err("intentions"))?;
    loop {
        let mine: Vec<(String, String)> = page_src
            .query_map(rusqlite::params![after, PAGE], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|rows| rows.collect())
            .map_err(read_err("intentions"))?;
        let theirs: Vec<(String, String)> = db
            .rows(
                "SELECT key, fingerprint FROM intentions WHERE key COLLATE \"C\" > ?1 ORDER BY key COLLATE \"C\" LIMIT ?2",
                &[Value::from(after.as_str()), Value::from(PAGE)],
                |r| Ok((r.text(0)?, r.text(1)?)),
            )
            .map_err(write_err("intentions"))?;
        if let Some(i) = (0..mine.len().max(theirs.len())).find(|i| mine.get(*i) != theirs.get(*i)) {
            return Err(CopyError::Mismatch(format!(
                "intention {:?} in the source, {:?} in the target",
                mine.get(i),
                theirs.get(i)
            )));
        }
        compared += mine.len() as i64;
        match mine.last() {
            Some((k, _)) if mine.len() as i64 == PAGE => after = k.clone(),
            _ => return Ok(compared),
        }
    }
}
