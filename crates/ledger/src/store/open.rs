//! Opening the ledger and running transactions on it, on either backend.
//!
//! [`Store`] is one connection: a SQLite file (WAL, `synchronous=FULL`,
//! `BEGIN IMMEDIATE` for every read-then-write) or the shared PostgreSQL
//! ledger (READ COMMITTED writes, REPEATABLE READ read-only snapshots).
//! Transactions on it ([`super::Tx`]) are in `store/tx.rs`. Operations written with [`crate::sql::Db`] run on both;
//! those still written against rusqlite answer
//! [`StoreError::NotOnPostgres`] on PostgreSQL (see docs/design.md, "A
//! shared ledger on PostgreSQL").

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use super::{MIGRATIONS, Result, StoreError, files};
use crate::location::Location;
use crate::pg::{PgClient, PgLedger, PgUrl};

/// One connection to the ledger. Not `Sync`: each thread or task that
/// writes opens its own (cheap) or goes through a channel to one owner.
pub struct Store {
    pub(super) inner: Inner,
    /// The country of phones a patient search types without a country
    /// code (the clinic's `default_country`; Peru unless set, see
    /// [`Store::set_phone_country`]).
    pub(super) phone_country: unavez_core::search::Country,
}

pub(super) enum Inner {
    Sqlite {
        conn: Connection,
        path: PathBuf,
        /// The busy timeout set on `conn`, restored after a probe that
        /// must not wait.
        busy: std::cell::Cell<Duration>,
    },
    Pg {
        client: PgClient,
        statements: Box<crate::sql::StatementCache>,
        url: Box<PgUrl>,
        /// The URL (without its password), where callers show a path.
        shown: PathBuf,
        /// Planned by keys ([`Store::plan_by_keys`]): set again on a new
        /// connection after a lost one.
        by_keys: bool,
    },
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
    /// Opens and migrates the ledger a setting names: a file path
    /// (created if needed, mode 0600) or a `postgres://` URL (see
    /// [`Location::parse`]), so a caller holding a `--db` value need not
    /// care which engine it is.
    pub fn open(setting: &Path) -> Result<Store> {
        Self::open_location(&Location::parse(setting)?, &OpenOptions::CREATE)
    }

    /// Opens and migrates the ledger wherever it is: a SQLite file (created
    /// only if `opts.create`) or a PostgreSQL database (its schema created
    /// or migrated under an advisory lock).
    pub fn open_location(location: &Location, opts: &OpenOptions) -> Result<Store> {
        match location {
            Location::Sqlite(path) => Self::open_with(path, opts),
            Location::Postgres(url) => Self::open_pg(url),
        }
    }

    fn open_pg(url: &PgUrl) -> Result<Store> {
        Ok(Store::pg_at(PgLedger::open(url)?.into_client(), url))
    }

    fn pg_at(client: PgClient, url: &PgUrl) -> Store {
        Store {
            phone_country: unavez_core::search::Country::PE,
            inner: Inner::Pg {
                client,
                statements: Default::default(),
                url: Box::new(url.clone()),
                shown: PathBuf::from(url.to_string()),
                by_keys: false,
            },
        }
    }

    /// Sets the country of phones a patient search types without a
    /// country code (`908 439 509` is `+51908439509` in Peru).
    pub fn set_phone_country(&mut self, country: unavez_core::search::Country) {
        self.phone_country = country;
    }

    /// Another connection to a ledger already opened (and migrated) by
    /// this process: [`Store::attach`] for a file; for PostgreSQL a new
    /// connection whose schema version is checked, not migrated.
    pub fn attach_location(location: &Location) -> Result<Store> {
        match location {
            Location::Sqlite(path) => Store::attach_file(path),
            Location::Postgres(url) => Ok(Store::pg_at(pg_checked(url)?, url)),
        }
    }

    /// Replaces a PostgreSQL connection the server closed (see
    /// [`PgClient::is_lost`]) with a new one, checked like
    /// [`Store::attach_location`]'s; whether it did. A long-running process
    /// (`serve`) then loses one call to a terminated connection, never every
    /// later one. Only between transactions: a transaction never spans two
    /// connections.
    pub(super) fn reconnect_if_lost(&mut self) -> Result<bool> {
        let Inner::Pg {
            client,
            statements,
            url,
            by_keys,
            ..
        } = &mut self.inner
        else {
            return Ok(false);
        };
        if !client.is_lost() {
            return Ok(false);
        }
        *client = pg_checked(url)?;
        // Prepared statements belong to the connection that prepared them.
        **statements = Default::default();
        if *by_keys {
            keyed_plans(client)?;
        }
        tracing::warn!(ledger = %url, "the PostgreSQL ledger closed this connection; reconnected");
        Ok(true)
    }

    fn sqlite_at(conn: Connection, path: &Path) -> Store {
        Store {
            phone_country: unavez_core::search::Country::PE,
            inner: Inner::Sqlite {
                conn,
                path: path.to_path_buf(),
                busy: std::cell::Cell::new(BUSY_TIMEOUT),
            },
        }
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
        let mut store = Store::sqlite_at(open_connection(path)?, path);
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
    /// another process holds the lock. The setting is a file or a
    /// `postgres://` URL ([`Store::attach_location`]).
    pub fn attach(setting: &Path) -> Result<Store> {
        match Location::parse(setting)? {
            Location::Sqlite(path) => Store::attach_file(&path),
            pg => Store::attach_location(&pg),
        }
    }

    fn attach_file(path: &Path) -> Result<Store> {
        if !path.exists() {
            return Err(StoreError::Missing {
                path: path.to_path_buf(),
            });
        }
        let store = Store::sqlite_at(open_connection(path)?, path);
        let known = MIGRATIONS.last().map(|m| m.0).unwrap_or(0);
        let current: u32 = store.sqlite()?.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if current != known {
            return Err(StoreError::SchemaChanged {
                path: path.to_path_buf(),
                found: current,
                known,
            });
        }
        Ok(store)
    }

    /// The SQLite connection, or [`StoreError::NotOnPostgres`].
    pub(super) fn sqlite(&self) -> Result<&Connection> {
        match &self.inner {
            Inner::Sqlite { conn, .. } => Ok(conn),
            Inner::Pg { .. } => Err(StoreError::NotOnPostgres("a SQLite file operation")),
        }
    }

    /// The SQLite connection itself, for the ledger's own tests.
    #[cfg(test)]
    pub(crate) fn sqlite_conn(&self) -> &Connection {
        self.sqlite().expect("a SQLite test ledger")
    }

    #[cfg(test)]
    pub(crate) fn sqlite_conn_mut(&mut self) -> &mut Connection {
        match &mut self.inner {
            Inner::Sqlite { conn, .. } => conn,
            Inner::Pg { .. } => panic!("a SQLite test ledger"),
        }
    }

    /// Whether this is the shared PostgreSQL ledger.
    pub fn is_pg(&self) -> bool {
        matches!(self.inner, Inner::Pg { .. })
    }

    /// Refuses a ledger a long-running process must not start on: one that
    /// fails `PRAGMA quick_check` or that this process cannot write. (A
    /// PostgreSQL ledger answered its migration, which wrote.)
    pub fn check_serviceable(&self) -> Result<()> {
        if let Some(why) = self.read_only_reason() {
            return Err(StoreError::ReadOnly {
                path: self.path().to_path_buf(),
                why,
            });
        }
        let detail = self.quick_check()?;
        if detail != "ok" {
            return Err(StoreError::Damaged {
                path: self.path().to_path_buf(),
                detail,
            });
        }
        Ok(())
    }

    /// Why this connection cannot write, if it cannot: SQLite opens a
    /// write-protected file read-only without an error.
    pub fn read_only_reason(&self) -> Option<String> {
        match &self.inner {
            Inner::Sqlite { conn, path, .. } => {
                if conn.is_readonly(rusqlite::MAIN_DB).unwrap_or(false) {
                    return Some("SQLite opened it read-only".into());
                }
                files::unwritable_reason(path)
            }
            Inner::Pg { .. } => None,
        }
    }

    /// `PRAGMA quick_check` (the cheap form of the integrity check): `ok`
    /// or the problems found. PostgreSQL checks its own pages.
    pub fn quick_check(&self) -> Result<String> {
        self.pragma_rows("quick_check")
    }

    /// `PRAGMA integrity_check`: `ok` or the problems found.
    pub fn integrity_check(&self) -> Result<String> {
        self.pragma_rows("integrity_check")
    }

    fn pragma_rows(&self, pragma: &str) -> Result<String> {
        let Inner::Sqlite { conn, .. } = &self.inner else {
            return Ok("ok".into());
        };
        let rows: Vec<String> = conn
            .prepare(&format!("PRAGMA {pragma}"))?
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows.join("; "))
    }

    /// Sets how long this connection waits for another writer's lock
    /// (30 s by default): short for health probes that must answer fast.
    pub fn set_busy_timeout(&mut self, wait: Duration) -> Result<()> {
        match &mut self.inner {
            Inner::Sqlite { conn, busy, .. } => {
                conn.busy_timeout(wait)?;
                busy.set(wait);
            }
            Inner::Pg { client, .. } => {
                client
                    .batch_execute(&format!("SET lock_timeout = {}", wait.as_millis().max(1)))
                    .map_err(crate::pg::PgError::from)?;
            }
        }
        Ok(())
    }

    /// Plans this connection's statements as reads and writes of rows
    /// named by key: index probes joined by nested loops, never a
    /// sequential scan, hash join or merge join where an index serves.
    /// For the dispatcher's connections (its session and its pre-send
    /// reader) on PostgreSQL, whose every statement names its rows by id
    /// or walks an index in order.
    ///
    /// Why: a connection keeps each statement's generic plan, made from
    /// its first executions. A dispatcher starting on a fresh ledger, or
    /// on tables whose statistics predate the backlog (no `ANALYZE` since
    /// the import; a server without autovacuum never takes one), plans its
    /// batch reads for nearly empty `attempts` and `intentions`: a hash
    /// join over a sequential scan of the whole table. That plan is kept,
    /// and each batch then reads every attempt and intention of the ledger
    /// (7-12 ms per batch at 50,000 messages, growing with the ledger;
    /// docs/bench-log.md, 2026-12-02 12:08 entry). With these settings the
    /// plan does not depend on the statistics. SQLite plans keyed
    /// statements by index whatever its statistics say: nothing to do.
    pub fn plan_by_keys(&mut self) -> Result<()> {
        // Once per connection: a dispatcher started again on the same
        // session (`dispatch_once` in a loop) costs no round trip.
        if let Inner::Pg { client, by_keys, .. } = &mut self.inner
            && !*by_keys
        {
            // Kept first: a connection lost meanwhile is replaced with
            // the settings ([`Store::reconnect_if_lost`]).
            *by_keys = true;
            keyed_plans(client)?;
        }
        Ok(())
    }

    /// Whether this connection plans by keys ([`Store::plan_by_keys`]), as
    /// the server says; SQLite always does.
    pub fn plans_by_keys(&mut self) -> Result<bool> {
        let Inner::Pg { client, .. } = &mut self.inner else {
            return Ok(true);
        };
        let all_off = KEYED_OFF
            .iter()
            .map(|name| format!("current_setting('{name}') = 'off'"))
            .collect::<Vec<_>>()
            .join(" AND ");
        let row = client
            .query_one(&format!("SELECT {all_off}"), &[])
            .map_err(crate::pg::PgError::from)?;
        Ok(row.get(0))
    }

    /// [`Store::attach`] when the ledger is at this binary's schema (no
    /// write lock needed, so another process's long write never delays
    /// the start), else opens the existing ledger, which migrates it; the
    /// setting is a file or a `postgres://` URL.
    pub fn attach_or_open(path: &Path) -> Result<Store> {
        let location = Location::parse(path)?;
        match Store::attach_location(&location) {
            Err(StoreError::SchemaChanged { .. }) => Store::open_location(&location, &OpenOptions::EXISTING),
            other => other,
        }
    }

    /// Whether another connection holds the write lock right now: a
    /// `BEGIN IMMEDIATE` that does not wait, rolled back at once (no write,
    /// no fsync). `false` when this connection cannot write at all, and on
    /// PostgreSQL, which has no ledger-wide write lock.
    pub fn write_locked(&self) -> Result<bool> {
        let Inner::Sqlite { conn, busy, .. } = &self.inner else {
            return Ok(false);
        };
        conn.busy_timeout(Duration::ZERO)?;
        let probe = conn.execute_batch("BEGIN IMMEDIATE; ROLLBACK");
        conn.busy_timeout(busy.get())?;
        match probe {
            Ok(()) => Ok(false),
            Err(e) => {
                let e = StoreError::from(e);
                if e.is_busy() {
                    return Ok(true);
                }
                // A half-begun transaction must not outlive the probe.
                let _ = conn.execute_batch("ROLLBACK");
                Ok(false)
            }
        }
    }

    fn migrate(&mut self) -> Result<()> {
        let Inner::Sqlite { conn, path, .. } = &mut self.inner else {
            return Ok(());
        };
        let known = MIGRATIONS.last().map(|m| m.0).unwrap_or(0);
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let current: u32 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if current > known {
            return Err(StoreError::TooNew {
                path: path.clone(),
                found: current,
                known,
            });
        }
        for (version, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
            let failed = |source| StoreError::Migration {
                version: *version,
                source,
            };
            tx.execute_batch(sql).map_err(failed)?;
            tx.pragma_update(None, "user_version", version).map_err(failed)?;
        }
        // The typo index of names already stored (SQLite folds no accents
        // in SQL, so migration 0012 cannot file them itself).
        if current < super::search::TYPO_INDEX_SINCE && known >= super::search::TYPO_INDEX_SINCE {
            super::search::file_vocabulary(&crate::sql::Db::Sqlite(&tx))?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Where this ledger is (to open more connections to it).
    pub fn location(&self) -> Location {
        match &self.inner {
            Inner::Sqlite { path, .. } => Location::Sqlite(path.clone()),
            Inner::Pg { url, .. } => Location::Postgres(url.clone()),
        }
    }

    /// The file, or the PostgreSQL URL (without its password) as a path,
    /// for messages.
    pub fn path(&self) -> &Path {
        match &self.inner {
            Inner::Sqlite { path, .. } => path,
            Inner::Pg { shown, .. } => shown,
        }
    }
}

/// A new connection to a PostgreSQL ledger already at this binary's
/// schema version (checked, not migrated).
fn pg_checked(url: &PgUrl) -> Result<PgClient> {
    let (client, found) = PgLedger::connect_checked(url)?;
    let known = PgLedger::known_version();
    if found != known {
        return Err(StoreError::SchemaChanged {
            path: PathBuf::from(url.to_string()),
            found,
            known,
        });
    }
    Ok(client)
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

/// WAL mode, waiting for it: switching a new file's journal needs a lock
/// SQLite does not wait for through the busy handler, and several
/// processes opening a ledger that one of them has just created (four
/// imports started at once) would otherwise fail with "database is
/// locked". The mode is stored in the file: once one connection set it,
/// the others find it set.
fn set_wal(conn: &Connection) -> rusqlite::Result<()> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

/// How long a connection waits for another writer's lock by default.
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    set_wal(conn)?;
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
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    Ok(())
}

/// The planner methods [`Store::plan_by_keys`] turns off (and
/// [`Store::plans_by_keys`] reads back); public so that a bench session
/// meant to plan as the dispatcher does sets exactly these.
pub const KEYED_OFF: [&str; 3] = ["enable_seqscan", "enable_hashjoin", "enable_mergejoin"];

/// Sets [`KEYED_OFF`] on the session, in one round trip.
fn keyed_plans(client: &mut PgClient) -> Result<()> {
    let sets: String = KEYED_OFF.iter().map(|name| format!("SET {name} = off;")).collect();
    client.batch_execute(&sets).map_err(crate::pg::PgError::from)?;
    Ok(())
}
