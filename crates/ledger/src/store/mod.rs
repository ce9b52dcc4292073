//! The ledger store: every line of SQL in unavez lives under this module.
//!
//! SQLite in WAL mode with `synchronous=FULL` (an attempt recorded as started
//! must survive a power cut, or a crash could resend it), foreign keys on, a
//! busy timeout, and `BEGIN IMMEDIATE` for every read-then-write so two
//! processes never decide on the same stale read. Callers compose typed
//! operations on a [`Tx`] inside [`Store::write`]; they never see a
//! statement, so a PostgreSQL store can implement the same surface later.
//!
//! Submodules group the operations by the part of the system that uses them.

mod attempts;
mod attention;
mod console;
mod dispatch;
mod inbound;
mod intents;
mod ledger;
mod metrics;
mod operator;
mod queries;
mod refused;
mod uncertain;
mod webhooks;

pub use attempts::{AttemptOutcome, AttemptResult, Finished, RetryPolicy};
pub use attention::{AttentionQuery, AttentionRow, AttentionView, CaseInfo, HandledMark, NewMark, RowKind};
pub use console::{Board, CounterQuery, HourCount, NotificationCell, Page, UpcomingRow};
pub use dispatch::{ClaimDecision, ClaimScope, Claimed, Holder, PresendFacts};
pub use inbound::SignalRow;
pub use intents::Entry;
pub use intents::{Cause, HistoryRow, IntentionRow, Reserved, SignalResult};
pub use ledger::{CommitmentRow, ContactRow, EventEffect, LoggedEvent};
pub use metrics::{Histogram, LATENCY_BUCKETS_MS, MetricsSnapshot};
pub use operator::{AcknowledgementRow, NewAcknowledgement, OperatorAction, OperatorActionRow};
pub use queries::{AttemptRow, FamilyMember, IntentFilter, IntentionDetail};
pub use refused::{NewRefusal, RefusedEventRow};
pub use uncertain::UncertainItem;
pub use webhooks::{ChannelEventRow, NewChannelEvent, Recorded, SOURCE_CLOUD, SOURCE_MOTOR, StatusOutcome};

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use rusqlite::{Connection, OpenFlags, TransactionBehavior};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open database {path}: {source}")]
    Open { path: PathBuf, source: rusqlite::Error },
    #[error("database migration {version} failed: {source}")]
    Migration { version: u32, source: rusqlite::Error },
    #[error("database {path} has schema version {found}, newer than this unavez ({known}); upgrade unavez")]
    TooNew { path: PathBuf, found: u32, known: u32 },
    #[error(
        "key {key} is already reserved with other content (stored fingerprint {stored}, presented {presented}); nothing was overwritten"
    )]
    Conflict {
        key: String,
        stored: String,
        presented: String,
    },
    #[error("no intention {0}")]
    NoIntention(String),
    #[error("no commitment {0}")]
    NoCommitment(String),
    #[error("corrupt row in {table}: {detail}")]
    Corrupt { table: &'static str, detail: String },
    #[error("database error: {0}")]
    Sql(#[from] rusqlite::Error),
}

impl StoreError {
    /// SQLITE_BUSY / LOCKED after the busy timeout: the caller may retry.
    pub fn is_busy(&self) -> bool {
        matches!(self, StoreError::Sql(rusqlite::Error::SqliteFailure(e, _))
            if matches!(e.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked))
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

const MIGRATIONS: &[(u32, &str)] = &[
    (1, include_str!("migrations/0001_ledger.sql")),
    (2, include_str!("migrations/0002_console_speed.sql")),
    (3, include_str!("migrations/0003_refused_events.sql")),
    (4, include_str!("migrations/0004_resend_acknowledgements.sql")),
    (8, include_str!("migrations/0008_front_desk_queue.sql")),
];

/// One connection to the ledger. Not `Sync`: each thread or task that
/// writes opens its own (cheap) or goes through a channel to one owner.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

/// A write transaction (`BEGIN IMMEDIATE`). Operations are methods in the
/// submodules; dropping without [`Store::write`] returning `Ok` rolls back.
pub struct Tx<'c> {
    tx: rusqlite::Transaction<'c>,
}

impl Store {
    /// Opens (creating if needed) and migrates the ledger.
    pub fn open(path: &Path) -> Result<Store> {
        let mut store = Store {
            conn: open_connection(path)?,
            path: path.to_path_buf(),
        };
        store.migrate()?;
        Ok(store)
    }

    fn migrate(&mut self) -> Result<()> {
        let known = MIGRATIONS.last().map(|m| m.0).unwrap_or(0);
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let current: u32 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if current > known {
            return Err(StoreError::TooNew {
                path: self.path.clone(),
                found: current,
                known,
            });
        }
        for (version, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
            tx.execute_batch(sql).map_err(|source| StoreError::Migration {
                version: *version,
                source,
            })?;
            tx.pragma_update(None, "user_version", version)
                .map_err(|source| StoreError::Migration {
                    version: *version,
                    source,
                })?;
        }
        tx.commit()?;
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction, committing on `Ok`.
    pub fn write<T, E>(&mut self, f: impl FnOnce(&Tx<'_>) -> std::result::Result<T, E>) -> std::result::Result<T, E>
    where
        E: From<StoreError>,
    {
        // Chaos failpoints (feature `failpoints`, see `crate::failpoint`): a
        // transaction that cannot begin, or a commit that fails.
        #[cfg(feature = "failpoints")]
        if let Some(a) = crate::failpoint::hit("store_begin") {
            return Err(E::from(StoreError::from(crate::failpoint::sqlite_error(a))));
        }
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| E::from(StoreError::from(e)))?;
        let wrapped = Tx { tx };
        let out = f(&wrapped)?;
        #[cfg(feature = "failpoints")]
        if let Some(a) = crate::failpoint::hit("store_commit") {
            drop(wrapped);
            return Err(E::from(StoreError::from(crate::failpoint::sqlite_error(a))));
        }
        wrapped.tx.commit().map_err(|e| E::from(StoreError::from(e)))?;
        Ok(out)
    }

    /// Runs read-only queries in one deferred transaction (a consistent
    /// snapshot under WAL, never blocking writers).
    pub fn read<T, E>(&mut self, f: impl FnOnce(&Tx<'_>) -> std::result::Result<T, E>) -> std::result::Result<T, E>
    where
        E: From<StoreError>,
    {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Deferred)
            .map_err(|e| E::from(StoreError::from(e)))?;
        let wrapped = Tx { tx };
        f(&wrapped)
    }

    /// `PRAGMA integrity_check`: `ok` or the problems found.
    pub fn integrity_check(&self) -> Result<String> {
        let rows: Vec<String> = self
            .conn
            .prepare("PRAGMA integrity_check")?
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows.join("; "))
    }
}

/// Opens a connection with the production pragmas (WAL, `synchronous=FULL`,
/// foreign keys, busy timeout) and no migration: [`Store::open`] builds on
/// it, and tools that must measure or inspect the file as the product sees
/// it (the bench, the chaos checker) use it directly.
pub fn open_connection(path: &Path) -> Result<Connection> {
    let open_error = |source| StoreError::Open {
        path: path.to_path_buf(),
        source,
    };
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(open_error)?;
    configure(&conn).map_err(open_error)?;
    Ok(conn)
}

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(Duration::from_secs(30))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // Savepoint (per-event) journals in memory, not in temp files: they
    // only serve rollbacks inside a transaction, never durability.
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    conn.pragma_update(None, "cache_size", -16384)?;
    conn.set_prepared_statement_cache_capacity(256);
    Ok(())
}

/// The connection as store code sees it. `execute` and `query_row` go
/// through the prepared-statement cache: parsing SQL was ~40 % of the
/// import path's CPU before (see docs/bench-log.md), and every statement here
/// is a fixed string. Everything else derefs to the connection.
pub(crate) struct Conn<'a>(&'a Connection);

impl std::ops::Deref for Conn<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.0
    }
}

impl<'a> Conn<'a> {
    pub(crate) fn execute<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        self.0.prepare_cached(sql)?.execute(params)
    }

    pub(crate) fn query_row<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    {
        self.0.prepare_cached(sql)?.query_row(params, f)
    }

    pub(crate) fn prepare_cached(&self, sql: &str) -> rusqlite::Result<rusqlite::CachedStatement<'a>> {
        self.0.prepare_cached(sql)
    }

    pub(crate) fn prepare(&self, sql: &str) -> rusqlite::Result<rusqlite::Statement<'a>> {
        self.0.prepare(sql)
    }
}

impl Tx<'_> {
    fn conn(&self) -> Conn<'_> {
        Conn(&self.tx)
    }

    /// Adds `by` to a named counter (duplicates blocked, rejections…).
    pub fn bump_counter(&self, name: &str, by: i64) -> Result<()> {
        self.conn().execute(
            "INSERT INTO counters(name, value) VALUES (?1, ?2)
             ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
            rusqlite::params![name, by],
        )?;
        Ok(())
    }

    /// Runs `f` inside a savepoint: its writes are kept on `Ok` and undone
    /// on `Err`, leaving the rest of the transaction intact. Used to apply
    /// one event of a batch whole or not at all.
    pub fn atomically<T, E>(&self, f: impl FnOnce(&Tx<'_>) -> std::result::Result<T, E>) -> std::result::Result<T, E>
    where
        E: From<StoreError>,
    {
        // Cached statements: a batch import opens one savepoint per event.
        self.conn()
            .execute("SAVEPOINT unavez_sp", [])
            .map_err(|e| E::from(e.into()))?;
        match f(self) {
            Ok(v) => {
                self.conn()
                    .execute("RELEASE unavez_sp", [])
                    .map_err(|e| E::from(e.into()))?;
                Ok(v)
            }
            Err(e) => {
                self.conn()
                    .execute_batch("ROLLBACK TO unavez_sp; RELEASE unavez_sp")
                    .map_err(|e| E::from(e.into()))?;
                Err(e)
            }
        }
    }

    pub fn counter(&self, name: &str) -> Result<i64> {
        use rusqlite::OptionalExtension;
        Ok(self
            .conn()
            .query_row("SELECT value FROM counters WHERE name = ?1", [name], |r| r.get(0))
            .optional()?
            .unwrap_or(0))
    }
}

/// Milliseconds since the epoch, the storage form of every instant.
pub fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

pub fn from_ms(v: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(v).single().unwrap_or_default()
}

#[cfg(test)]
mod tests;
