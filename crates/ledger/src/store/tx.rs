//! One transaction on the ledger ([`Tx`]), on either backend, and the
//! write loop that runs it again when PostgreSQL rolls it back for a
//! deadlock or a serialization failure. The operations in the sibling
//! modules take `&Tx`.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Duration;

use rusqlite::TransactionBehavior;

use super::open::Inner;
use super::{Result, Store, StoreError};

/// A transaction. Operations are methods in the submodules; dropping it
/// without [`Store::write`] returning `Ok` rolls back.
pub struct Tx<'c> {
    inner: TxInner<'c>,
    /// Counter increments, written at commit in name order (see
    /// [`Tx::bump_counter`]).
    pub(super) counters: RefCell<BTreeMap<String, i64>>,
    /// The store's [`Store::set_phone_country`].
    pub(super) phone_country: unavez_core::search::Country,
    /// The server's clock as [`Tx::clock`] first read it in this
    /// transaction (PostgreSQL): a result batch and the claim committed
    /// with it are decided at one instant, for one round trip.
    clock_at: std::cell::Cell<Option<chrono::DateTime<chrono::Utc>>>,
}

enum TxInner<'c> {
    Sqlite(rusqlite::Transaction<'c>),
    Pg(crate::sql::PgTx<'c>),
}

/// Begins a transaction on `$store`, first replacing a PostgreSQL
/// connection already known to be closed; a `BEGIN` that fails because the
/// server closed the connection meanwhile ran nothing, so it is begun once
/// more on a new one. A macro, not a method: the transaction borrows the
/// store, and a method returning it could not reconnect on its error path.
macro_rules! begin_or_reconnect {
    ($store:ident, $behavior:expr) => {
        'begun: {
            $store.reconnect_if_lost().map_err(E::from)?;
            let e = match $store.begin($behavior) {
                Ok(tx) => break 'begun tx,
                Err(e) => e,
            };
            if !$store.reconnect_if_lost().map_err(E::from)? {
                return Err(E::from(e));
            }
            $store.begin($behavior).map_err(E::from)?
        }
    };
}

/// Write transactions this process holds open now, on any store: a
/// write lock seen while one is open may be this process's own (its
/// embedded dispatcher, its import), not "another process" (issue 25 §5).
static OWN_WRITERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Counts one open write transaction of this process while it lives.
struct OwnWriter;

impl OwnWriter {
    fn enter() -> OwnWriter {
        OWN_WRITERS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        OwnWriter
    }
}

impl Drop for OwnWriter {
    fn drop(&mut self) {
        OWN_WRITERS.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// How many write transactions this process holds open now.
pub fn own_writers() -> usize {
    OWN_WRITERS.load(std::sync::atomic::Ordering::SeqCst)
}

impl Store {
    /// Runs `f` in one write transaction (`BEGIN IMMEDIATE` on SQLite,
    /// READ COMMITTED on PostgreSQL), committing on `Ok`.
    ///
    /// On PostgreSQL, writers on several hosts lock rows in orders no one
    /// host controls (two imports of one agenda, a claim and a result on
    /// the same day's counters), so the server may pick this transaction
    /// as a deadlock's victim. It rolled everything back, so `f` runs
    /// again on a fresh transaction, up to [`TRANSIENT_RETRIES`] times,
    /// after a short jittered pause; `f` must therefore keep its effects
    /// inside the transaction (it gets no other state to mutate than what
    /// it returns). SQLite has one writer and never asks for this.
    pub fn write<T, E>(&mut self, mut f: impl FnMut(&Tx<'_>) -> std::result::Result<T, E>) -> std::result::Result<T, E>
    where
        E: From<StoreError>,
    {
        let mut retries = 0;
        loop {
            // Chaos failpoints (feature `failpoints`, see `crate::failpoint`): a
            // transaction that cannot begin, or a commit that fails.
            #[cfg(feature = "failpoints")]
            if let Some(a) = crate::failpoint::hit("store_begin") {
                return Err(E::from(StoreError::from(crate::failpoint::sqlite_error(a))));
            }
            let wrapped = begin_or_reconnect!(self, TransactionBehavior::Immediate);
            let _own = OwnWriter::enter();
            let again = retries < TRANSIENT_RETRIES;
            match f(&wrapped) {
                Err(e) if !(again && wrapped.hit_transient()) => return Err(e),
                Err(_) => {}
                Ok(v) => {
                    #[cfg(feature = "failpoints")]
                    if let Some(a) = crate::failpoint::hit("store_commit") {
                        drop(wrapped);
                        return Err(E::from(StoreError::from(crate::failpoint::sqlite_error(a))));
                    }
                    match wrapped.commit() {
                        Ok(()) => return Ok(v),
                        Err(e) if again && e.is_transient() => {}
                        Err(e) => return Err(E::from(e)),
                    }
                }
            }
            retries += 1;
            tracing::debug!(
                retries,
                "PostgreSQL rolled a write back (deadlock or serialization); running it again"
            );
            std::thread::sleep(transient_pause(retries));
        }
    }

    /// Runs read-only queries in one snapshot (a deferred transaction under
    /// WAL on SQLite, REPEATABLE READ READ ONLY on PostgreSQL): never
    /// blocking writers.
    pub fn read<T, E>(&mut self, f: impl FnOnce(&Tx<'_>) -> std::result::Result<T, E>) -> std::result::Result<T, E>
    where
        E: From<StoreError>,
    {
        let wrapped = begin_or_reconnect!(self, TransactionBehavior::Deferred);
        f(&wrapped)
    }

    fn begin(&mut self, behavior: TransactionBehavior) -> Result<Tx<'_>> {
        let inner = match &mut self.inner {
            Inner::Sqlite { conn, .. } => TxInner::Sqlite(conn.transaction_with_behavior(behavior)?),
            Inner::Pg { client, statements, .. } => {
                let mut build = client.build_transaction();
                if matches!(behavior, TransactionBehavior::Deferred) {
                    build = build
                        .isolation_level(postgres::IsolationLevel::RepeatableRead)
                        .read_only(true);
                }
                TxInner::Pg(crate::sql::PgTx::new(
                    build.start().map_err(crate::pg::PgError::from)?,
                    statements,
                ))
            }
        };
        Ok(Tx {
            inner,
            counters: RefCell::default(),
            phone_country: self.phone_country,
            clock_at: std::cell::Cell::new(None),
        })
    }
}

impl Tx<'_> {
    /// Whether PostgreSQL failed a statement of this transaction for a
    /// reason a second run cures (never on SQLite).
    fn hit_transient(&self) -> bool {
        match &self.inner {
            TxInner::Sqlite(_) => false,
            TxInner::Pg(tx) => tx.hit_transient(),
        }
    }

    /// `e`, a state change refused because the row moved since this
    /// transaction read it. On PostgreSQL another host's (or a webhook's)
    /// commit can land between the read and the move, and the decision
    /// was made on what is now stale: `Store::write` runs the whole
    /// transaction again, which reads the row afresh and decides anew, as
    /// SQLite's single writer would have from the start. On SQLite (one
    /// writer, `BEGIN IMMEDIATE`) it is the caller's mistake, reported.
    pub(super) fn stale(&self, e: StoreError) -> StoreError {
        if let TxInner::Pg(tx) = &self.inner {
            tx.note_stale();
        }
        e
    }

    fn commit(self) -> Result<()> {
        self.flush_counters()?;
        match self.inner {
            TxInner::Sqlite(tx) => tx.commit()?,
            TxInner::Pg(tx) => tx.into_inner().commit().map_err(crate::pg::PgError::from)?,
        }
        Ok(())
    }

    /// The SQLite connection, for what only SQLite has (the last
    /// insert's rowid); on PostgreSQL, [`StoreError::NotOnPostgres`].
    pub(super) fn sqlite(&self) -> Result<&rusqlite::Connection> {
        match &self.inner {
            TxInner::Sqlite(tx) => Ok(tx),
            TxInner::Pg(_) => Err(StoreError::NotOnPostgres("a SQLite-only operation")),
        }
    }

    /// Statements written once for both backends ([`crate::sql`]).
    pub(crate) fn db(&self) -> crate::sql::Db<'_> {
        match &self.inner {
            TxInner::Sqlite(tx) => crate::sql::Db::Sqlite(tx),
            TxInner::Pg(tx) => crate::sql::Db::Pg(tx),
        }
    }

    /// The time a claim or a result is decided at: the caller's on SQLite
    /// (one host; tests drive it), the database server's on PostgreSQL,
    /// whatever the caller's host thinks, so leases and due times written
    /// by several hosts compare on one clock. Read once per transaction
    /// (the instant the transaction decides at; [`Tx::now`] reads afresh).
    pub fn clock(&self, caller: chrono::DateTime<chrono::Utc>) -> Result<chrono::DateTime<chrono::Utc>> {
        if !self.is_pg() {
            return Ok(caller);
        }
        if let Some(at) = self.clock_at.get() {
            return Ok(at);
        }
        let at = self.now()?;
        self.clock_at.set(Some(at));
        Ok(at)
    }

    /// The ledger's clock: the database server's on PostgreSQL (several
    /// hosts share it, their clocks disagree), this host's on SQLite (one
    /// host).
    pub fn now(&self) -> Result<chrono::DateTime<chrono::Utc>> {
        match &self.inner {
            TxInner::Sqlite(_) => Ok(chrono::Utc::now()),
            TxInner::Pg(_) => Ok(super::from_ms(
                self.db()
                    .row("SELECT unavez_now_ms()", &[], |r| r.int(0))?
                    .unwrap_or_default(),
            )),
        }
    }

    /// Whether this transaction runs on the shared PostgreSQL ledger.
    pub fn is_pg(&self) -> bool {
        matches!(self.inner, TxInner::Pg(_))
    }
}

/// How many times [`Store::write`] runs a transaction again after
/// PostgreSQL rolled it back for a deadlock or a serialization failure.
/// Each is a real conflict with another writer; ten in a row means the
/// ledger is in a lock storm an operator should hear about.
pub const TRANSIENT_RETRIES: u32 = 10;

/// A pause that grows with each retry and differs between processes, so
/// the two sides of a deadlock do not meet again in step.
fn transient_pause(retries: u32) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let jitter = u64::from((nanos ^ std::process::id()) % 10);
    Duration::from_millis(u64::from(retries.min(6)) * 5 + jitter)
}
