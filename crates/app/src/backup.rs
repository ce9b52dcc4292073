//! Backups and restores of a SQLite ledger (`unavez ledger backup`,
//! `unavez ledger restore`, `[backup]` in `serve`); docs/operations.md,
//! "Backups".
//!
//! A backup is an online copy made while `serve` runs (the ledger's one
//! snapshot copy, `store::backup`), written under a hidden partial name,
//! checked with `quick_check`, then renamed to its UTC time
//! (`domain::backup::file_name`), mode 0600; the newest `keep` stay.
//! A PostgreSQL ledger is pg_dump's job: the command is given, nothing is
//! pretended.
//!
//! A restore refuses a ledger a live dispatcher (heartbeat rows, judged by
//! `domain::heartbeat`) or any writer is using, refuses a copy that fails
//! `quick_check` or that a newer unavez wrote, migrates an older copy
//! (on a scratch file next to the ledger, never the copy itself), moves the
//! replaced ledger aside with its `-wal` and `-shm`, and puts the copy in
//! its place, mode 0600.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

use crate::config::Periodic;
use crate::domain::backup::{self as rules, BackupMeasure};
use crate::domain::heartbeat::{self, Heartbeat};
use crate::location::Location;
use crate::pg::PgUrl;
use crate::store::backup::{self as copies, FileFacts};
use crate::store::{OpenOptions, Store, StoreError, files};

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// Nothing was done: a PostgreSQL ledger is backed up with pg_dump.
    #[error(
        "{ledger} is a PostgreSQL ledger, which unavez does not copy: back it up with pg_dump (the password from PGPASSWORD or ~/.pgpass; restore with pg_restore): {command}"
    )]
    Postgres { ledger: String, command: String },
    #[error("backup directory {dir}: {source}")]
    Dir { dir: PathBuf, source: std::io::Error },
    #[error("backing up {ledger}: {source}")]
    Copy { ledger: PathBuf, source: StoreError },
    #[error("the copy of {ledger} fails PRAGMA quick_check ({detail}); it was deleted, the ledger is unchanged")]
    Damaged { ledger: PathBuf, detail: String },
    #[error("cannot delete the old backup {path}: {source}")]
    Prune { path: PathBuf, source: std::io::Error },
}

/// A backup made.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Taken {
    pub path: PathBuf,
    pub at: DateTime<Utc>,
    pub bytes: u64,
    /// Intentions in the copy.
    pub intentions: i64,
    pub schema_version: u32,
    /// Older backups deleted to keep the newest `keep`.
    pub pruned: Vec<PathBuf>,
}

/// The pg_dump command line for a PostgreSQL ledger, into `dir`, quoted
/// for a shell.
pub fn pg_dump_command(url: &PgUrl, dir: &Path, now: DateTime<Utc>) -> String {
    let file = dir.join(format!("unavez-{}.dump", now.format("%Y%m%dT%H%M%SZ")));
    url.pg_dump_args(&file)
        .iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

fn shell_quote(a: &str) -> String {
    let plain = a.chars().all(|c| c.is_ascii_alphanumeric() || "-_=./:@,+%".contains(c));
    if plain {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', r"'\''"))
    }
}

/// The backups `dir` holds (names only; none when it does not exist).
fn listing(dir: &Path) -> Result<Vec<String>, BackupError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(BackupError::Dir {
                dir: dir.into(),
                source,
            });
        }
    };
    Ok(entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect())
}

/// When the newest backup in `dir` was taken, by its name.
pub fn newest_in(dir: &Path) -> Option<DateTime<Utc>> {
    rules::newest(&listing(dir).ok()?)
}

/// The backup alerts' measure as the directory shows it, for a reader
/// that does not run the backups (a console): the newest copy is the last
/// success; failures are not seen. `None` when the directory cannot be
/// read (another account's, 0700), so nobody is told of a backup they
/// cannot see as missing.
pub fn measure_from_dir(periodic: &Periodic, now: DateTime<Utc>) -> Option<BackupMeasure> {
    std::fs::read_dir(&periodic.dir).ok()?;
    let names = listing(&periodic.dir).ok()?;
    Some(BackupMeasure {
        every: periodic.every,
        // With no copy at all, it is late already.
        watched_since: now - periodic.every * 2,
        last_success: rules::newest(&names),
        last_failure: None,
    })
}

/// Backs up the ledger at `location` into `dir` (created, mode 0700, if
/// missing), named for `now`, verified, 0600; then deletes all but the
/// newest `keep` backups there (0: none deleted). Blocking.
pub fn take(location: &Location, dir: &Path, keep: u32, now: DateTime<Utc>) -> Result<Taken, BackupError> {
    let ledger = match location {
        Location::Sqlite(path) => path,
        Location::Postgres(url) => {
            return Err(BackupError::Postgres {
                ledger: url.to_string(),
                command: pg_dump_command(url, dir, now),
            });
        }
    };
    {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| BackupError::Dir {
                dir: dir.into(),
                source,
            })?;
    }
    let name = rules::file_name(now);
    let path = dir.join(&name);
    // Copied under a name that is not a backup's until it is checked: a
    // process killed mid-copy leaves no file retention would count.
    let partial = dir.join(format!(".{name}.partial"));
    let copy_error = |source| BackupError::Copy {
        ledger: ledger.clone(),
        source,
    };
    copies::backup_ledger(ledger, &partial, None).map_err(copy_error)?;
    let facts = match copies::inspect_file(&partial) {
        Ok(f) if f.is_ok() => f,
        other => {
            let _ = std::fs::remove_file(&partial);
            return Err(match other {
                Ok(f) => BackupError::Damaged {
                    ledger: ledger.clone(),
                    detail: f.quick_check,
                },
                Err(e) => copy_error(e),
            });
        }
    };
    let placed = std::fs::rename(&partial, &path).and_then(|()| std::fs::metadata(&path));
    let bytes = match placed {
        Ok(m) => m.len(),
        Err(source) => {
            let _ = std::fs::remove_file(&partial);
            return Err(BackupError::Dir {
                dir: dir.into(),
                source,
            });
        }
    };
    let mut pruned = Vec::new();
    // Never the one just made, even behind a backup "from the future".
    for old in rules::to_prune(&listing(dir)?, keep).into_iter().filter(|n| *n != name) {
        let p = dir.join(old);
        std::fs::remove_file(&p).map_err(|source| BackupError::Prune {
            path: p.clone(),
            source,
        })?;
        pruned.push(p);
    }
    Ok(Taken {
        path,
        at: now,
        bytes,
        intentions: facts.intentions,
        schema_version: facts.schema_version,
        pruned,
    })
}

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error(
        "{ledger} is a PostgreSQL ledger: restore it with pg_restore from a pg_dump file (unavez restores SQLite files only)"
    )]
    Postgres { ledger: String },
    #[error("{src}: {source}")]
    Source { src: PathBuf, source: StoreError },
    #[error("{src} is not an unavez ledger (no schema version): nothing was changed")]
    NotALedger { src: PathBuf },
    #[error("{src} fails PRAGMA quick_check ({detail}): choose another backup; nothing was changed")]
    Damaged { src: PathBuf, detail: String },
    #[error(
        "{src} has schema version {found}, newer than this unavez ({known}): restore it with the unavez that made it, or upgrade; nothing was changed"
    )]
    TooNew { src: PathBuf, found: u32, known: u32 },
    #[error(
        "a dispatcher is running on {ledger} (host {host}, pid {pid}, last beat {beat_at}): stop `unavez serve` (systemctl stop unavez) before restoring; nothing was changed"
    )]
    InUse {
        ledger: PathBuf,
        host: String,
        pid: u32,
        beat_at: DateTime<Utc>,
    },
    #[error(
        "another process is writing {ledger} (an import, a console): stop it before restoring; nothing was changed"
    )]
    Writing { ledger: PathBuf },
    #[error("restoring into {ledger}: {source}")]
    Ledger { ledger: PathBuf, source: StoreError },
    #[error("restoring into {ledger}: {source}")]
    Io { ledger: PathBuf, source: std::io::Error },
}

/// A restore done.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Restored {
    pub ledger: PathBuf,
    /// Where the replaced ledger and its `-wal`/`-shm` went (empty when
    /// there was no ledger).
    pub moved_aside: Vec<PathBuf>,
    /// The copy's schema version, and whether it was migrated to this
    /// binary's.
    pub schema_version: u32,
    pub migrated: bool,
    pub intentions: i64,
}

/// How far back heartbeat rows are read: any dispatcher that beat within
/// its window of missed beats is in it.
const HEARTBEAT_LOOKBACK: chrono::Duration = chrono::Duration::minutes(10);

/// Restores the SQLite backup `src` as the ledger at `location` (see the
/// module's header). `group`: `[storage] group`, as for a new ledger.
/// Blocking.
pub fn restore(
    location: &Location,
    src: &Path,
    group: Option<u32>,
    now: DateTime<Utc>,
) -> Result<Restored, RestoreError> {
    let ledger = match location {
        Location::Sqlite(path) => path.clone(),
        Location::Postgres(url) => {
            return Err(RestoreError::Postgres {
                ledger: url.to_string(),
            });
        }
    };
    let facts = check_source(src)?;
    if ledger.exists() {
        check_unused(&ledger, now)?;
    }
    let stamp = now.format("%Y%m%dT%H%M%SZ");
    let sibling = |what: &str| {
        let mut name = ledger.file_name().unwrap_or_default().to_owned();
        name.push(format!(".{what}-{stamp}"));
        ledger.with_file_name(name)
    };
    let io = |source| RestoreError::Io {
        ledger: ledger.clone(),
        source,
    };
    let scratch = sibling("restoring");
    let on_scratch = |source| RestoreError::Ledger {
        ledger: ledger.clone(),
        source,
    };
    copies::copy_file(src, &scratch, group).map_err(on_scratch)?;
    // Migrated (as `unavez init` would) and checked on the scratch file,
    // before anything is replaced; closing it leaves no -wal behind.
    let prepared = (|| {
        let store = Store::open_with(&scratch, &OpenOptions { create: false, group })?;
        let detail = store.quick_check()?;
        drop(store);
        Ok::<_, StoreError>(detail)
    })();
    let detail = match prepared {
        Ok(d) => d,
        Err(e) => {
            remove_with_companions(&scratch);
            return Err(on_scratch(e));
        }
    };
    if detail != "ok" {
        remove_with_companions(&scratch);
        return Err(RestoreError::Damaged {
            src: src.into(),
            detail,
        });
    }
    let moved_aside = if ledger.exists() {
        files::move_aside(&ledger, &sibling("replaced")).map_err(|e| {
            remove_with_companions(&scratch);
            io(e)
        })?
    } else {
        Vec::new()
    };
    if let Err(e) = std::fs::rename(&scratch, &ledger) {
        // Put the replaced ledger back where it was.
        if let Some(aside) = moved_aside.last() {
            let _ = files::move_aside(aside, &ledger);
        }
        return Err(io(e));
    }
    Ok(Restored {
        ledger,
        moved_aside,
        schema_version: facts.schema_version,
        migrated: facts.schema_version < copies::known_schema_version(),
        intentions: facts.intentions,
    })
}

fn remove_with_companions(p: &Path) {
    let _ = std::fs::remove_file(p);
    for c in files::companions(p) {
        let _ = std::fs::remove_file(c);
    }
}

/// The copy opens, passes `quick_check`, and is an unavez ledger no newer
/// than this binary.
fn check_source(src: &Path) -> Result<FileFacts, RestoreError> {
    let facts = copies::inspect_file(src).map_err(|source| RestoreError::Source {
        src: src.into(),
        source,
    })?;
    if !facts.is_ok() {
        return Err(RestoreError::Damaged {
            src: src.into(),
            detail: facts.quick_check,
        });
    }
    let known = copies::known_schema_version();
    if facts.schema_version > known {
        return Err(RestoreError::TooNew {
            src: src.into(),
            found: facts.schema_version,
            known,
        });
    }
    if facts.schema_version == 0 {
        return Err(RestoreError::NotALedger { src: src.into() });
    }
    Ok(facts)
}

/// No live dispatcher beats on the ledger and nobody holds its write lock.
fn check_unused(ledger: &Path, now: DateTime<Utc>) -> Result<(), RestoreError> {
    let on_ledger = |source| RestoreError::Ledger {
        ledger: ledger.into(),
        source,
    };
    let beats: Vec<Heartbeat> = copies::file_heartbeats(ledger, now - HEARTBEAT_LOOKBACK).map_err(on_ledger)?;
    if let Some(b) = heartbeat::live(&beats, None, now).first() {
        return Err(RestoreError::InUse {
            ledger: ledger.into(),
            host: b.host.clone(),
            pid: b.pid,
            beat_at: b.beat_at,
        });
    }
    if copies::file_write_locked(ledger).map_err(on_ledger)? {
        return Err(RestoreError::Writing { ledger: ledger.into() });
    }
    Ok(())
}

/// How the periodic backups went, shared between the task that runs them
/// and whoever reports them (`/metrics`). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Monitor {
    inner: Arc<Mutex<BackupMeasure>>,
}

impl Monitor {
    /// Watching from `now`, with the newest backup already in the
    /// directory as the last success (a restart does not forget it).
    pub fn new(periodic: &Periodic, now: DateTime<Utc>) -> Monitor {
        Monitor {
            inner: Arc::new(Mutex::new(BackupMeasure {
                every: periodic.every,
                watched_since: now,
                last_success: newest_in(&periodic.dir),
                last_failure: None,
            })),
        }
    }

    pub fn measure(&self) -> BackupMeasure {
        *self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn record(&self, ok: bool, at: DateTime<Utc>) {
        let mut m = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if ok {
            m.last_success = Some(at);
        } else {
            m.last_failure = Some(at);
        }
    }
}

/// After a failed backup, the next try comes this soon (or after one
/// period, if that is shorter).
const RETRY_AFTER: chrono::Duration = chrono::Duration::minutes(10);

/// Takes a backup of the ledger at `location` every `periodic.every`
/// (the first one when the newest in the directory is a period old),
/// recording each outcome on `monitor`, until `shutdown` completes. A
/// backup in progress when it does is finished, not cut.
pub async fn run_every(
    location: Location,
    periodic: Periodic,
    monitor: Monitor,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    tokio::pin!(shutdown);
    let mut retry_at: Option<DateTime<Utc>> = None;
    loop {
        let now = Utc::now();
        let due = retry_at.unwrap_or_else(|| rules::next_due(newest_in(&periodic.dir), periodic.every, now));
        let wait = (due - now).to_std().unwrap_or_default();
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep(wait) => {}
        }
        let (loc, p) = (location.clone(), periodic.clone());
        let at = Utc::now();
        let done = tokio::task::spawn_blocking(move || take(&loc, &p.dir, p.keep, at)).await;
        let ended = Utc::now();
        match done {
            Ok(Ok(t)) => {
                monitor.record(true, t.at);
                retry_at = None;
                tracing::info!(file = %t.path.display(), bytes = t.bytes, pruned = t.pruned.len(), "backup taken");
            }
            Ok(Err(e)) => {
                monitor.record(false, ended);
                retry_at = Some(ended + periodic.every.min(RETRY_AFTER));
                tracing::warn!("backup failed (next try in at most 10 minutes): {e}");
            }
            Err(e) => {
                monitor.record(false, ended);
                retry_at = Some(ended + periodic.every.min(RETRY_AFTER));
                tracing::warn!("backup task stopped: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The migrations of an older unavez (before 0012, the patient search).
    const OLDER: &[&str] = &[
        include_str!("../../ledger/src/store/migrations/0001_ledger.sql"),
        include_str!("../../ledger/src/store/migrations/0002_console_speed.sql"),
        include_str!("../../ledger/src/store/migrations/0003_refused_events.sql"),
        include_str!("../../ledger/src/store/migrations/0004_resend_acknowledgements.sql"),
        include_str!("../../ledger/src/store/migrations/0005_notifications.sql"),
        include_str!("../../ledger/src/store/migrations/0006_front_desk_queue.sql"),
        include_str!("../../ledger/src/store/migrations/0007_dispatchers_alerts.sql"),
        include_str!("../../ledger/src/store/migrations/0008_reserve_speed.sql"),
        include_str!("../../ledger/src/store/migrations/0009_narrow_commitment_index.sql"),
        include_str!("../../ledger/src/store/migrations/0010_one_day_index.sql"),
        include_str!("../../ledger/src/store/migrations/0011_channel_pause.sql"),
    ];

    #[test]
    fn an_older_copy_is_migrated_on_a_scratch_file_and_the_copy_is_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("old.db");
        {
            let conn = crate::store::open_connection(&old).unwrap();
            for (n, sql) in OLDER.iter().enumerate() {
                conn.execute_batch(sql).unwrap();
                conn.pragma_update(None, "user_version", n as u32 + 1).unwrap();
            }
            // One file, as `ledger backup` writes them.
            conn.pragma_update(None, "journal_mode", "DELETE").unwrap();
        }
        // Into a place with no ledger yet.
        let ledger = dir.path().join("unavez.db");
        let done = restore(&Location::Sqlite(ledger.clone()), &old, None, Utc::now()).unwrap();
        assert_eq!((done.schema_version, done.migrated), (11, true));
        assert!(done.moved_aside.is_empty());
        Store::attach(&ledger).expect("at this binary's schema");
        assert_eq!(
            copies::inspect_file(&old).unwrap().schema_version,
            11,
            "the copy itself is unchanged"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 2, "no scratch file left: {left:?}");
    }

    #[test]
    fn a_console_judges_backups_only_from_a_directory_it_can_read() {
        let dir = tempfile::tempdir().unwrap();
        let periodic = Periodic {
            every: chrono::Duration::hours(1),
            dir: dir.path().join("copias"),
            keep: 2,
        };
        let now = Utc::now();
        assert_eq!(measure_from_dir(&periodic, now), None, "no directory, no verdict");
        std::fs::create_dir(&periodic.dir).unwrap();
        let never = measure_from_dir(&periodic, now).unwrap();
        assert_eq!(never.last_success, None);
        assert!(
            never.age(now) >= never.stale_after(),
            "configured and never taken: late"
        );
        let db = dir.path().join("l.db");
        Store::open(&db).unwrap();
        let t = take(&Location::Sqlite(db), &periodic.dir, 2, now).unwrap();
        let m = measure_from_dir(&periodic, now).unwrap();
        assert_eq!(
            m.last_success.map(|s| s.timestamp_millis()),
            Some(t.at.timestamp_millis())
        );
        assert!(!m.failing());
    }
}
