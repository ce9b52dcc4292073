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

mod alerts;
mod attempts;
mod attention;
mod console;
mod day_timings;
mod dispatch;
pub mod files;
mod heartbeat;
mod inbound;
mod intents;
mod ledger;
mod metrics;
mod notifications;
mod operator;
mod queries;
mod refused;
mod uncertain;
mod webhooks;

pub use crate::api::{ClaimFacts, ClaimScope, LedgerTx, NewAttempt, PlannedRow, Reservation, ReserveRow};
pub use crate::domain::attempt::{AttemptOutcome, AttemptResult, Backoff, Finished, RetryPolicy};
pub use attention::{AttentionQuery, AttentionRow, AttentionView, CaseInfo, HandledMark, NewMark, RowKind};
pub use console::{Board, CounterQuery, HourCount, NotificationCell, Page, UpcomingRow};
pub use day_timings::DayTiming;
pub use dispatch::PresendFacts;
pub use inbound::SignalRow;
pub use intents::Entry;
pub use intents::{Cause, HistoryRow, IntentionRow, Reserved, SignalResult};
pub use ledger::{CommitmentRow, ContactRow, EventEffect, LoggedEvent, NewEvent};
pub use metrics::{Histogram, LATENCY_BUCKETS_MS, MetricsSnapshot};
pub use notifications::{ChangedNumber, MovingCommitment, TemplateStatus};
pub use operator::{AcknowledgementRow, NewAcknowledgement, OperatorAction, OperatorActionRow};
pub use queries::{AttemptRow, FamilyMember, IntentFilter, IntentionDetail};
pub use refused::{NewRefusal, RefusedEventRow};
pub use uncertain::UncertainItem;
pub use webhooks::{
    ChannelEventRow, NewChannelEvent, PARKED_KEY_MESSAGE_MISMATCH, REFUSED_FOREIGN_INSTANCE, Recorded, SOURCE_CLOUD,
    SOURCE_MOTOR, StatusOutcome,
};

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::domain::counter::Counter;
use chrono::{DateTime, TimeZone, Utc};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open database {path}: {source}")]
    Open { path: PathBuf, source: rusqlite::Error },
    #[error("no ledger at {path}: check --db or `database` in the config (`unavez init` creates one)")]
    Missing { path: PathBuf },
    #[error("cannot create database {path}: {source}")]
    Create { path: PathBuf, source: std::io::Error },
    #[error("ledger {path} is read-only for this process ({why}): fix its permissions or run as its owner")]
    ReadOnly { path: PathBuf, why: String },
    #[error("ledger {path} fails PRAGMA quick_check ({detail}); restore a backup (docs/operations.md, \"Backups\")")]
    Damaged { path: PathBuf, detail: String },
    #[error("database migration {version} failed: {source}")]
    Migration { version: u32, source: rusqlite::Error },
    #[error("database {path} has schema version {found}, this process expects {known}; restart it after the upgrade")]
    SchemaChanged { path: PathBuf, found: u32, known: u32 },
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
    #[error("no attempt #{0}")]
    NoAttempt(i64),
    #[error("intention #{id} is no longer {expected}: a change decided on a stale read was not applied")]
    Moved {
        id: i64,
        expected: crate::domain::state::IntentionState,
    },
    #[error("no commitment {0}")]
    NoCommitment(String),
    #[error("corrupt row in {table}: {detail}")]
    Corrupt { table: &'static str, detail: String },
    #[error("database error: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("{0}")]
    Pg(#[from] crate::pg::PgError),
    /// The blocking task running a ledger call ended without an answer
    /// (it panicked, or the runtime is shutting down).
    #[error("a ledger task stopped before answering: {0}")]
    Task(String),
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
    (5, include_str!("migrations/0005_notifications.sql")),
    (6, include_str!("migrations/0006_front_desk_queue.sql")),
    (7, include_str!("migrations/0007_dispatchers_alerts.sql")),
    (8, include_str!("migrations/0008_reserve_speed.sql")),
];

/// One connection to the ledger. Not `Sync`: each thread or task that
/// writes opens its own (cheap) or goes through a channel to one owner.
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// The busy timeout set on `conn`, restored after a probe that must
    /// not wait.
    busy: std::cell::Cell<Duration>,
}

/// A write transaction (`BEGIN IMMEDIATE`). Operations are methods in the
/// submodules; dropping without [`Store::write`] returning `Ok` rolls back.
pub struct Tx<'c> {
    tx: rusqlite::Transaction<'c>,
}

/// How [`Store::open_with`] treats the file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Create the ledger when the file does not exist (`false`: a missing
    /// file is [`StoreError::Missing`], so a mistyped path never leaves an
    /// empty database behind).
    pub create: bool,
    /// The group that shares the ledger: a new file gets mode 0660 and this
    /// group; without one, 0600.
    pub group: Option<u32>,
}

impl OpenOptions {
    pub const CREATE: OpenOptions = OpenOptions {
        create: true,
        group: None,
    };
    pub const EXISTING: OpenOptions = OpenOptions {
        create: false,
        group: None,
    };
}

impl Store {
    /// Opens (creating if needed, mode 0600) and migrates the ledger.
    pub fn open(path: &Path) -> Result<Store> {
        Self::open_with(path, &OpenOptions::CREATE)
    }

    /// Opens and migrates the ledger; creates it only if `opts.create`,
    /// with private permissions (see [`OpenOptions`]).
    pub fn open_with(path: &Path, opts: &OpenOptions) -> Result<Store> {
        if !path.exists() {
            if !opts.create {
                return Err(StoreError::Missing {
                    path: path.to_path_buf(),
                });
            }
            // Another process may create it between the check and here
            // (four imports started at once): theirs is as good as ours.
            match files::create_private(path, opts.group) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(source) => {
                    return Err(StoreError::Create {
                        path: path.to_path_buf(),
                        source,
                    });
                }
            }
        }
        let mut store = Store {
            conn: open_connection(path)?,
            path: path.to_path_buf(),
            busy: std::cell::Cell::new(BUSY_TIMEOUT),
        };
        store.migrate()?;
        // SQLite gives the -wal and -shm files the database's mode; the
        // group is the creator's, so set it here for the ones we own.
        if let Some(gid) = opts.group {
            files::share_companions(path, gid);
        }
        Ok(store)
    }

    /// Opens an existing ledger that is already at this binary's schema
    /// version, without taking the write lock (no migration): for extra
    /// connections of a running service, which must open even while
    /// another process holds the lock.
    pub fn attach(path: &Path) -> Result<Store> {
        if !path.exists() {
            return Err(StoreError::Missing {
                path: path.to_path_buf(),
            });
        }
        let store = Store {
            conn: open_connection(path)?,
            path: path.to_path_buf(),
            busy: std::cell::Cell::new(BUSY_TIMEOUT),
        };
        let known = MIGRATIONS.last().map(|m| m.0).unwrap_or(0);
        let current: u32 = store.conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if current != known {
            return Err(StoreError::SchemaChanged {
                path: path.to_path_buf(),
                found: current,
                known,
            });
        }
        Ok(store)
    }

    /// Refuses a ledger a long-running process must not start on: one that
    /// fails `PRAGMA quick_check` or that this process cannot write.
    pub fn check_serviceable(&self) -> Result<()> {
        if let Some(why) = self.read_only_reason() {
            return Err(StoreError::ReadOnly {
                path: self.path.clone(),
                why,
            });
        }
        let detail = self.quick_check()?;
        if detail != "ok" {
            return Err(StoreError::Damaged {
                path: self.path.clone(),
                detail,
            });
        }
        Ok(())
    }

    /// Why this connection cannot write, if it cannot: SQLite opens a
    /// write-protected file read-only without an error.
    pub fn read_only_reason(&self) -> Option<String> {
        if self.conn.is_readonly(rusqlite::MAIN_DB).unwrap_or(false) {
            return Some("SQLite opened it read-only".into());
        }
        files::unwritable_reason(&self.path)
    }

    /// `PRAGMA quick_check` (the cheap form of the integrity check): `ok`
    /// or the problems found.
    pub fn quick_check(&self) -> Result<String> {
        let rows: Vec<String> = self
            .conn
            .prepare("PRAGMA quick_check")?
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows.join("; "))
    }

    /// Sets how long this connection waits for another writer's lock
    /// (30 s by default): short for health probes that must answer fast.
    pub fn set_busy_timeout(&self, wait: Duration) -> Result<()> {
        self.conn.busy_timeout(wait)?;
        self.busy.set(wait);
        Ok(())
    }

    /// [`Store::attach`] when the ledger is at this binary's schema (no
    /// write lock needed, so another process's long write never delays
    /// the start), else [`Store::open_with`] an existing file, which
    /// migrates it.
    pub fn attach_or_open(path: &Path) -> Result<Store> {
        match Store::attach(path) {
            Err(StoreError::SchemaChanged { .. }) => Store::open_with(path, &OpenOptions::EXISTING),
            other => other,
        }
    }

    /// Whether another connection holds the write lock right now: a
    /// `BEGIN IMMEDIATE` that does not wait, rolled back at once (no write,
    /// no fsync). `false` when this connection cannot write at all.
    pub fn write_locked(&self) -> Result<bool> {
        self.conn.busy_timeout(Duration::ZERO)?;
        let probe = self.conn.execute_batch("BEGIN IMMEDIATE; ROLLBACK");
        self.conn.busy_timeout(self.busy.get())?;
        match probe {
            Ok(()) => Ok(false),
            Err(e) => {
                let e = StoreError::from(e);
                if e.is_busy() {
                    return Ok(true);
                }
                // A half-begun transaction must not outlive the probe.
                let _ = self.conn.execute_batch("ROLLBACK");
                Ok(false)
            }
        }
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

/// How long a connection waits for another writer's lock by default.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // Savepoint (per-event) journals in memory, not in temp files: they
    // only serve rollbacks inside a transaction, never durability.
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    conn.pragma_update(None, "cache_size", -16384)?;
    conn.set_prepared_statement_cache_capacity(256);
    // Query plans that do not depend on bound values. The bundled SQLite
    // marks a `col = ?` term it only estimates for re-preparation when a
    // new value is bound, and rusqlite's statement cache clears the
    // bindings of every statement it hands back, so each reuse of such a
    // statement was parsed and planned again (the import's commitment and
    // planned-intention lookups: ~19 % of its CPU). Every statement here
    // is written for its index, not for the values it will see.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
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

    /// Statements written once for both backends ([`crate::sql`]).
    pub(crate) fn db(&self) -> crate::sql::Db<'_> {
        crate::sql::Db::Sqlite(&self.tx)
    }

    /// Adds `by` to a counter (duplicates blocked, rejections…).
    pub fn bump_counter(&self, counter: Counter, by: i64) -> Result<()> {
        self.conn().execute(
            "INSERT INTO counters(name, value) VALUES (?1, ?2)
             ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
            rusqlite::params![counter.name(), by],
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

    /// Sets a named value (a health probe's heartbeat): a real write of one
    /// row, so it fails when the ledger cannot be written.
    pub fn set_counter(&self, name: &str, value: i64) -> Result<()> {
        self.conn().execute(
            "INSERT INTO counters(name, value) VALUES (?1, ?2)
             ON CONFLICT(name) DO UPDATE SET value = excluded.value",
            rusqlite::params![name, value],
        )?;
        Ok(())
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

// The bench's ledger generator (a bench tool, not part of the store), so
// the console's and the alerts' checks run on the same realistic ledger
// the console bench reads.
#[cfg(test)]
#[allow(dead_code)]
#[path = "../../../bench/src/ledger_shape.rs"]
mod ledger_shape;
