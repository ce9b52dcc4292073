//! The shared ledger on PostgreSQL (issue 13, in progress): connection,
//! versioned migrations for the same logical schema as SQLite's, the
//! database's clock, and the claim primitive for many hosts.
//!
//! Why PostgreSQL looks like this:
//! - **Same rows as SQLite.** Times are BIGINT milliseconds, flags BIGINT
//!   0/1, ids identities, so a SQLite ledger copies across unchanged and
//!   the same decisions read the same facts.
//! - **The database's clock.** Several hosts share one ledger; their clocks
//!   disagree. Due times and leases are compared with `unavez_now_ms()`
//!   (the server's `clock_timestamp()`), never with a host's `Utc::now()`.
//! - **READ COMMITTED + `FOR UPDATE SKIP LOCKED`.** A claim locks the due
//!   rows it takes; a concurrent claimer skips them instead of waiting, and
//!   a row committed as `dispatching` meanwhile fails the re-checked
//!   `WHERE` (PostgreSQL re-evaluates it on the newest version), so no two
//!   hosts claim one intention. SERIALIZABLE would add retries without
//!   closing anything the row locks do not (docs/design.md, "PostgreSQL").
//! - **Migrations under an advisory lock**: hosts starting together apply
//!   them once.
//!
//! What is here: [`PgLedger`] (connect, migrate under an advisory lock,
//! the database clock), URLs ([`url`]) and live-console notifications
//! ([`listen`]). The ledger's operations themselves are the store's
//! (`store/`), written once for both engines through [`crate::sql`]; a
//! `Store` opened on a `postgres://` location runs them here.

mod client;
pub mod listen;
pub mod url;

pub use client::PgClient;
pub use listen::PgListener;
pub use url::PgUrl;

/// Runs `f` on a short-lived thread of its own and waits for it: the
/// synchronous client must not block a thread that drives async tasks
/// (see [`PgClient`]), and opening a ledger is rare enough to afford it.
fn off_async<T: Send>(f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    std::thread::scope(|s| s.spawn(f).join())
        .unwrap_or_else(|_| Err(PgError::Url("opening the PostgreSQL ledger panicked".into())))
}

/// PostgreSQL errors, with what was being done.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error("cannot connect to the PostgreSQL ledger {url}: {}", detail(source))]
    Connect { url: String, source: postgres::Error },
    #[error("PostgreSQL ledger migration {version} failed: {}", detail(source))]
    Migration { version: u32, source: postgres::Error },
    #[error("PostgreSQL ledger {url} has schema version {found}, newer than this unavez ({known}); upgrade unavez")]
    TooNew { url: String, found: u32, known: u32 },
    #[error("{0}")]
    Url(String),
    #[error("PostgreSQL error: {}", detail(.0))]
    Sql(#[from] postgres::Error),
}

/// The server's own message (and where it points) rather than the
/// client's bare "db error".
fn detail(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut s = format!("{} ({})", db.message(), db.code().code());
            if let Some(d) = db.detail() {
                s.push_str(&format!("; {d}"));
            }
            if let Some(w) = db.where_() {
                s.push_str(&format!("; at {w}"));
            }
            s
        }
        None => match std::error::Error::source(e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    }
}

pub type Result<T, E = PgError> = std::result::Result<T, E>;

/// PostgreSQL's own migrations, one logical schema with SQLite's
/// `store/migrations/` (compared by `tests/pg_schema.rs`).
const MIGRATIONS: &[(u32, &str)] = &[
    (1, include_str!("migrations/0001_ledger.sql")),
    (2, include_str!("migrations/0002_counts_at_commit.sql")),
    (3, include_str!("migrations/0003_console_queries.sql")),
    (4, include_str!("migrations/0004_narrow_commitment_index.sql")),
    (5, include_str!("migrations/0005_one_day_index.sql")),
    (6, include_str!("migrations/0006_channel_pause.sql")),
    (7, include_str!("migrations/0007_patient_search.sql")),
    (8, include_str!("migrations/0008_feeds.sql")),
    (9, include_str!("migrations/0009_dispatcher_instance.sql")),
    (10, include_str!("migrations/0010_name_word_sets.sql")),
    (11, include_str!("migrations/0011_word_sets_replanned.sql")),
    (12, include_str!("migrations/0012_counts_per_transaction.sql")),
    (13, include_str!("migrations/0013_dispatch_indexes.sql")),
];

/// The advisory lock key of migrations ("unavez" in ASCII).
const MIGRATION_LOCK: i64 = 0x756e_6176_657a;

/// One connection to a PostgreSQL ledger.
pub struct PgLedger {
    client: PgClient,
    url: PgUrl,
}

impl PgLedger {
    /// Connects and brings the schema to this version (on a thread of its
    /// own: see [`PgClient`]).
    pub fn open(url: &PgUrl) -> Result<PgLedger> {
        off_async(|| {
            let client = PgClient::connect(url)?;
            let mut ledger = PgLedger {
                client,
                url: url.clone(),
            };
            ledger.migrate()?;
            Ok(ledger)
        })
    }

    /// A connection and the schema version stored in the ledger (no
    /// migration: for a process's extra connections).
    pub fn connect_checked(url: &PgUrl) -> Result<(PgClient, u32)> {
        off_async(|| {
            let mut client = PgClient::connect(url)?;
            let found = stored_version(&mut client).ok().flatten();
            Ok((client, found.unwrap_or(0)))
        })
    }

    /// The schema version this binary knows.
    pub fn known_version() -> u32 {
        MIGRATIONS.last().map(|m| m.0).unwrap_or(0)
    }

    fn migrate(&mut self) -> Result<()> {
        let known = Self::known_version();
        // Every console start and every pooled connection opens the
        // ledger: an up-to-date one is only read, so opening writes nothing
        // (no commit, no lock shared with the other hosts, and it works on
        // a read-only session).
        match stored_version(&mut self.client)? {
            Some(v) if v == known => return Ok(()),
            Some(v) if v > known => {
                return Err(PgError::TooNew {
                    url: self.url.to_string(),
                    found: v,
                    known,
                });
            }
            _ => {}
        }
        let mut tx = self.client.transaction()?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
        // The version lives in its own table (SQLite keeps it in
        // `PRAGMA user_version`); the schema comparison leaves it out.
        tx.batch_execute("CREATE TABLE IF NOT EXISTS unavez_schema (version INTEGER NOT NULL)")?;
        let current: Option<i32> = tx
            .query_opt("SELECT version FROM unavez_schema", &[])?
            .map(|r| r.get(0));
        let current = current.unwrap_or(0) as u32;
        if current > known {
            return Err(PgError::TooNew {
                url: self.url.to_string(),
                found: current,
                known,
            });
        }
        for (version, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
            tx.batch_execute(sql).map_err(|source| PgError::Migration {
                version: *version,
                source,
            })?;
        }
        tx.execute("DELETE FROM unavez_schema", &[])?;
        tx.execute("INSERT INTO unavez_schema(version) VALUES ($1)", &[&(known as i32)])?;
        tx.commit()?;
        Ok(())
    }

    /// The schema version stored in the ledger.
    pub fn schema_version(&mut self) -> Result<u32> {
        let v: i32 = self.client.query_one("SELECT version FROM unavez_schema", &[])?.get(0);
        Ok(v as u32)
    }

    /// The database's clock, in the ledger's unit (milliseconds).
    pub fn now_ms(&mut self) -> Result<i64> {
        Ok(self.client.query_one("SELECT unavez_now_ms()", &[])?.get(0))
    }

    /// The connection itself (reads outside a transaction, tests).
    pub fn into_client(self) -> PgClient {
        self.client
    }

    /// The raw client, for tests and the schema comparison.
    pub fn client(&mut self) -> &mut postgres::Client {
        &mut self.client
    }
}

/// The schema version stored, read without a transaction of its own:
/// `None` when the ledger was never initialised.
fn stored_version(client: &mut postgres::Client) -> Result<Option<u32>> {
    let exists: bool = client
        .query_one("SELECT to_regclass('unavez_schema') IS NOT NULL", &[])?
        .get(0);
    if !exists {
        return Ok(None);
    }
    let v: Option<i32> = client
        .query_opt("SELECT version FROM unavez_schema", &[])?
        .map(|r| r.get(0));
    Ok(v.map(|v| v as u32))
}
