//! The ledger store: every line of SQL in unavez lives under this module.
//!
//! SQLite in WAL mode with `synchronous=FULL` (an attempt recorded as started
//! must survive a power cut, or a crash could resend it), foreign keys on, a
//! busy timeout, and `BEGIN IMMEDIATE` for every read-then-write so two
//! processes never decide on the same stale read. Callers compose typed
//! operations on a [`Tx`] inside [`Store::write`]; they never see a
//! statement, and the same operations run on the shared PostgreSQL ledger
//! (`open.rs`: connections on either backend; `tx.rs`: transactions, and
//! running again what PostgreSQL rolled back for a deadlock).
//!
//! Submodules group the operations by the part of the system that uses them.

mod alerts;
mod attempts;
mod attention;
pub mod backup;
mod calls;
mod console;
mod day_timings;
mod dispatch;
mod feeds;
pub mod files;
mod heartbeat;
mod inbound;
pub mod inspect;
mod intents;
mod ledger;
mod locks;
mod metrics;
mod notifications;
mod open;
mod operator;
mod patient;
mod queries;
mod refused;
mod search;
mod tx;
mod uncertain;
mod webhooks;

pub use crate::api::{ChannelRefs, ClaimFacts, ClaimScope, LedgerTx, NewAttempt, PlannedRow, Reservation, ReserveRow};
pub use crate::domain::attempt::{AttemptOutcome, AttemptResult, Backoff, Finished, RetryPolicy};
pub use attention::{AttentionQuery, AttentionRow, AttentionView, CaseInfo, HandledMark, NewMark, RowKind};
pub use console::{Board, CounterQuery, HourCount, NotificationCell, Page, UpcomingRow};
pub use day_timings::DayTiming;
pub use dispatch::PresendFacts;
pub use feeds::{FeedRow, FeedSuccess};
pub use inbound::SignalRow;
pub use intents::Entry;
pub use intents::{Cause, HistoryRow, IntentionRow, Reserved, SignalResult};
pub use ledger::{CommitmentRow, ContactRow, EventEffect, LoggedEvent, NewContact, NewEvent};
pub use metrics::{Histogram, LATENCY_BUCKETS_MS, MetricsSnapshot};
pub use notifications::{ChangedNumber, MovingCommitment, TemplateStatus};
pub use open::{KEYED_OFF, OpenOptions, Store, open_connection};
pub use operator::{AcknowledgementRow, NewAcknowledgement, OperatorAction, OperatorActionRow};
pub use patient::{PatientCard, PatientMatch};
pub use queries::{AttemptRow, FamilyMember, IntentFilter, IntentionDetail};
pub use refused::{NewRefusal, RefusedEventRow};
pub use tx::own_writers;
pub use tx::{TRANSIENT_RETRIES, Tx};
pub use uncertain::UncertainItem;
pub use webhooks::{
    ChannelEventRow, NewChannelEvent, PARKED_KEY_MESSAGE_MISMATCH, PARKED_UNKNOWN_STATE, PendingStatus,
    REFUSED_FOREIGN_INSTANCE, Recorded, SOURCE_CLOUD, SOURCE_MOTOR, StatusOutcome,
};

use std::path::PathBuf;

use crate::domain::counter::Counter;
use chrono::{DateTime, TimeZone, Utc};

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
    /// An operation not yet written for both backends, run on PostgreSQL.
    #[error("{0} does not run on the PostgreSQL ledger yet")]
    NotOnPostgres(&'static str),
    #[error("{0}")]
    Pg(#[from] crate::pg::PgError),
    /// The blocking task running a ledger call ended without an answer
    /// (it panicked, or the runtime is shutting down).
    #[error("a ledger task stopped before answering: {0}")]
    Task(String),
}

impl StoreError {
    /// SQLITE_BUSY / LOCKED after the busy timeout: the caller may retry.
    /// A PostgreSQL deadlock victim or serialization failure: the
    /// transaction was rolled back and succeeds when run again.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Pg(crate::pg::PgError::Sql(e)) if crate::sql::is_transient(e))
    }

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
    (9, include_str!("migrations/0009_narrow_commitment_index.sql")),
    (10, include_str!("migrations/0010_one_day_index.sql")),
    (11, include_str!("migrations/0011_channel_pause.sql")),
    (12, include_str!("migrations/0012_patient_search.sql")),
    (13, include_str!("migrations/0013_feeds.sql")),
    (14, include_str!("migrations/0014_dispatcher_instance.sql")),
];

impl Tx<'_> {
    /// Adds `by` to a counter (duplicates blocked, rejections…).
    ///
    /// The increment is written when the transaction commits, with the
    /// others in name order: a counter row is the hottest row a writer
    /// touches, and on PostgreSQL a transaction that locked it early and
    /// then waited for a key another writer held was half of a deadlock.
    /// Taken last and in one order, counter rows never close a cycle.
    pub fn bump_counter(&self, counter: Counter, by: i64) -> Result<()> {
        *self.counters.borrow_mut().entry(counter.name()).or_default() += by;
        Ok(())
    }

    /// Writes the increments of [`Tx::bump_counter`], in name order.
    pub(super) fn flush_counters(&self) -> Result<()> {
        let pending = std::mem::take(&mut *self.counters.borrow_mut());
        for (name, by) in pending.iter().filter(|(_, by)| **by != 0) {
            self.db().exec(
                "INSERT INTO counters(name, value) VALUES (?1, ?2)
                 ON CONFLICT(name) DO UPDATE SET value = counters.value + excluded.value",
                &crate::vals![name.as_str(), *by],
            )?;
        }
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
        let run = |sql: &str| self.db().exec(sql, &[]).map_err(|e| E::from(e.into()));
        run("SAVEPOINT unavez_sp")?;
        // Counter increments wait for the commit: undone with the rest.
        let counters = self.counters.borrow().clone();
        match f(self) {
            Ok(v) => {
                run("RELEASE unavez_sp")?;
                Ok(v)
            }
            Err(e) => {
                run("ROLLBACK TO unavez_sp")?;
                run("RELEASE unavez_sp")?;
                *self.counters.borrow_mut() = counters;
                Err(e)
            }
        }
    }

    /// Sets a named value (a health probe's heartbeat): a real write of one
    /// row, so it fails when the ledger cannot be written.
    pub fn set_counter(&self, name: &str, value: i64) -> Result<()> {
        self.db().exec(
            "INSERT INTO counters(name, value) VALUES (?1, ?2)
             ON CONFLICT(name) DO UPDATE SET value = excluded.value",
            &crate::vals![name, value],
        )?;
        Ok(())
    }

    /// A counter's value as this transaction would commit it.
    pub fn counter(&self, name: &str) -> Result<i64> {
        let stored = self
            .db()
            .row("SELECT value FROM counters WHERE name = ?1", &crate::vals![name], |r| {
                r.int(0)
            })?
            .unwrap_or(0);
        Ok(stored + self.counters.borrow().get(name).copied().unwrap_or(0))
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
