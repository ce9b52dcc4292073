//! Copies of a SQLite ledger file (`unavez ledger backup` and `restore`):
//! SQLite's online backup API, and what a copy holds, read without
//! migrating or otherwise changing it. Rows and files only: which copies
//! to keep, when to take one and whether a restore may go ahead are the
//! application's decisions.

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};
use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};

use super::{MIGRATIONS, Result, StoreError, files, from_ms, ms};
use crate::domain::heartbeat::{DispatcherState, Heartbeat};

/// How often a step the source's lock refused is tried again, and how long
/// apart: in WAL mode a reader is refused only for a moment (a checkpoint
/// resetting the log), never for a writer's whole transaction.
const BUSY_TRIES: u32 = 100;
const BUSY_PAUSE: Duration = Duration::from_millis(50);

/// What a SQLite ledger file holds, as far as a backup or a restore asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileFacts {
    /// Its `user_version`: the last migration applied to it.
    pub schema_version: u32,
    /// `PRAGMA quick_check`: `ok`, or the problems found.
    pub quick_check: String,
    /// Intentions stored (0 when the file has no ledger tables).
    pub intentions: i64,
}

impl FileFacts {
    pub fn is_ok(&self) -> bool {
        self.quick_check == "ok"
    }
}

/// The schema version this binary's migrations end at.
pub fn known_schema_version() -> u32 {
    MIGRATIONS.last().map(|m| m.0).unwrap_or(0)
}

impl crate::store::Store {
    /// An online copy of this SQLite ledger into `dest`, a new file
    /// created with [`files::private_mode`] (refused if it exists). One
    /// step of SQLite's backup API, so one read snapshot: every transaction
    /// committed before the copy began is in it, none committed later is
    /// half in it, and writers are not held up (WAL). The copy is one
    /// self-contained file (rollback journal, no `-wal`).
    pub fn backup_into(&self, dest: &Path, group: Option<u32>) -> Result<()> {
        copy_connection(self.sqlite()?, dest, group)
    }
}

/// Copies the SQLite database at `src` (opened read-only, never changed)
/// into the new private file `dest`, like [`crate::store::Store::backup_into`].
pub fn copy_file(src: &Path, dest: &Path, group: Option<u32>) -> Result<()> {
    copy_connection(&open_read_only(src)?, dest, group)
}

/// An online copy of the SQLite ledger at `src` into `dest`, like
/// [`crate::store::Store::backup_into`], on a connection of its own that
/// neither migrates nor checks the schema: a ledger a newer or older
/// binary wrote is copied as it is (the backup before an upgrade).
pub fn backup_ledger(src: &Path, dest: &Path, group: Option<u32>) -> Result<()> {
    if !src.exists() {
        return Err(StoreError::Missing {
            path: src.to_path_buf(),
        });
    }
    copy_connection(&super::open_connection(src)?, dest, group)
}

/// Whether another connection holds the write lock of the SQLite ledger
/// at `path` right now (a `BEGIN IMMEDIATE` that does not wait, rolled
/// back at once): a process is writing it.
pub fn file_write_locked(path: &Path) -> Result<bool> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|source| StoreError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    conn.busy_timeout(Duration::ZERO)?;
    match conn.execute_batch("BEGIN IMMEDIATE; ROLLBACK") {
        Ok(()) => Ok(false),
        Err(e) => {
            let e = StoreError::from(e);
            if e.is_busy() {
                return Ok(true);
            }
            Err(e)
        }
    }
}

fn copy_connection(src: &Connection, dest: &Path, group: Option<u32>) -> Result<()> {
    let create_error = |source| StoreError::Create {
        path: dest.to_path_buf(),
        source,
    };
    files::create_private(dest, group).map_err(create_error)?;
    let copied = (|| {
        let mut to = Connection::open(dest).map_err(|source| StoreError::Open {
            path: dest.to_path_buf(),
            source,
        })?;
        {
            let backup = Backup::new(src, &mut to)?;
            let mut tries = 0;
            loop {
                match backup.step(-1)? {
                    StepResult::Done => break,
                    // -1 copies every page in one step; More only if the
                    // source changed under a step that gave up its lock.
                    StepResult::More => {}
                    _ if tries < BUSY_TRIES => {
                        tries += 1;
                        std::thread::sleep(BUSY_PAUSE);
                    }
                    _ => {
                        return Err(StoreError::Sql(rusqlite::Error::SqliteFailure(
                            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
                            Some("the ledger stayed locked for the whole backup".into()),
                        )));
                    }
                }
            }
        }
        // The pages carry the source's WAL flag; a backup is one file.
        let _: String = to.query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0))?;
        Ok(())
    })();
    if copied.is_err() {
        // Never leave a half-written file that looks like a backup.
        let _ = std::fs::remove_file(dest);
        for c in files::companions(dest) {
            let _ = std::fs::remove_file(c);
        }
    }
    copied
}

fn open_read_only(path: &Path) -> Result<Connection> {
    if !path.exists() {
        return Err(StoreError::Missing {
            path: path.to_path_buf(),
        });
    }
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(|source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        })?;
    conn.busy_timeout(Duration::from_secs(30))?;
    Ok(conn)
}

fn has_table(conn: &Connection, name: &str) -> Result<bool> {
    Ok(conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [name],
        |r| r.get::<_, i64>(0),
    )? > 0)
}

/// Reads what the SQLite file at `path` holds, opened read-only: its
/// schema version, `quick_check` and how many intentions. A file that is
/// not a database is an error naming it.
pub fn inspect_file(path: &Path) -> Result<FileFacts> {
    let conn = open_read_only(path)?;
    let schema_version: u32 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let rows: Vec<String> = conn
        .prepare("PRAGMA quick_check")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let intentions = if has_table(&conn, "intentions")? {
        conn.query_row("SELECT count(*) FROM intentions", [], |r| r.get(0))?
    } else {
        0
    };
    Ok(FileFacts {
        schema_version,
        quick_check: rows.join("; "),
        intentions,
    })
}

/// The dispatcher heartbeat rows of the SQLite ledger at `path` that beat
/// at or after `since`, read-only and whatever its schema version (none
/// before the table existed): who may be using the file. Only the columns
/// liveness needs; the channel is left unknown.
pub fn file_heartbeats(path: &Path, since: DateTime<Utc>) -> Result<Vec<Heartbeat>> {
    let conn = open_read_only(path)?;
    if !has_table(&conn, "dispatchers")? {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare(
        "SELECT id, host, pid, owner, state, started_at, beat_at, interval_ms
         FROM dispatchers WHERE beat_at >= ?1 ORDER BY beat_at DESC, id LIMIT 100",
    )?;
    let rows = stmt.query_map([ms(since)], |r| {
        let state: String = r.get(4)?;
        Ok((
            Heartbeat {
                id: r.get(0)?,
                host: r.get(1)?,
                pid: u32::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
                owner: r.get(3)?,
                // Replaced below; a state this binary does not know is
                // taken as running (the safe side for a restore).
                state: DispatcherState::Running,
                last_error: None,
                last_error_at: None,
                started_at: from_ms(r.get(5)?),
                beat_at: from_ms(r.get(6)?),
                interval: chrono::Duration::milliseconds(r.get(7)?),
                channel: None,
                channel_instance: None,
            },
            state,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (mut hb, state) = row?;
        hb.state = state.parse().unwrap_or(DispatcherState::Running);
        out.push(hb);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::store::{OpenOptions, Store};

    #[test]
    fn a_backup_is_one_private_file_that_opens_and_checks() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("l.db");
        let store = Store::open(&db).unwrap();
        let dest = dir.path().join("copy.db");
        store.backup_into(&dest, None).unwrap();
        assert_eq!(std::fs::metadata(&dest).unwrap().permissions().mode() & 0o777, 0o600);
        let facts = inspect_file(&dest).unwrap();
        assert!(facts.is_ok(), "{facts:?}");
        assert_eq!(facts.schema_version, known_schema_version());
        for c in files::companions(&dest) {
            assert!(!c.exists(), "{} left behind", c.display());
        }
        // Never over an existing file.
        assert!(matches!(store.backup_into(&dest, None), Err(StoreError::Create { .. })));
        // A copy of the copy, and the copy opens as a ledger.
        let again = dir.path().join("again.db");
        copy_file(&dest, &again, None).unwrap();
        Store::open_with(&again, &OpenOptions::EXISTING).unwrap();
        assert!(
            file_heartbeats(&again, Utc::now() - chrono::Duration::hours(1))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_file_that_is_not_a_ledger_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.db");
        std::fs::write(&junk, b"this is not a database, not even close; ".repeat(200)).unwrap();
        assert!(inspect_file(&junk).is_err());
        assert!(matches!(
            inspect_file(&dir.path().join("none.db")),
            Err(StoreError::Missing { .. })
        ));
    }
}
