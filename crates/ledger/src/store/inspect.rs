//! What `unavez doctor` reads of a SQLite ledger file without migrating
//! it or taking its write lock: the schema version, the journal mode and
//! `PRAGMA quick_check`. Facts only; `domain::doctor` decides.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use super::{MIGRATIONS, Result};

/// The schema version this binary migrates a ledger to.
pub fn known_version() -> u32 {
    MIGRATIONS.last().map(|m| m.0).unwrap_or(0)
}

/// A SQLite ledger file as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileFacts {
    /// `PRAGMA user_version`: the migrations applied.
    pub user_version: u32,
    /// `PRAGMA journal_mode` (`wal` for every ledger unavez made).
    pub journal_mode: String,
    /// `ok`, or the problems `quick_check` found.
    pub quick_check: String,
}

/// Opens `path` (never creating it) and reads its [`FileFacts`]; reads
/// only, so it runs beside a working `serve`.
pub fn file_facts(path: &Path) -> Result<FileFacts> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(2))?;
    let user_version: u32 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let journal_mode: String = conn.pragma_query_value(None, "journal_mode", |r| r.get(0))?;
    let rows: Vec<String> = conn
        .prepare("PRAGMA quick_check")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(FileFacts {
        user_version,
        journal_mode: journal_mode.to_ascii_lowercase(),
        quick_check: rows.join("; "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_ledger_is_current_wal_and_sound() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l.db");
        drop(crate::store::Store::open(&p).unwrap());
        let f = file_facts(&p).unwrap();
        assert_eq!(f.user_version, known_version());
        assert_eq!(f.journal_mode, "wal");
        assert_eq!(f.quick_check, "ok");
        assert!(file_facts(&dir.path().join("none.db")).is_err(), "never created");
        assert!(!dir.path().join("none.db").exists());
    }
}

/// A PostgreSQL ledger as found: its schema version and its clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgFacts {
    pub version: u32,
    pub known: u32,
    /// `clock_timestamp()` on the server, in milliseconds since the epoch.
    pub server_ms: i64,
}

/// Connects (without migrating) and reads [`PgFacts`].
pub fn pg_facts(url: &crate::pg::PgUrl) -> Result<PgFacts> {
    let (mut client, version) = crate::pg::PgLedger::connect_checked(url)?;
    let row = client
        .query_one("SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint", &[])
        .map_err(crate::pg::PgError::from)?;
    Ok(PgFacts {
        version,
        known: crate::pg::PgLedger::known_version(),
        server_ms: row.get(0),
    })
}
