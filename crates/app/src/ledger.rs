//! The one handle to the ledger that every part of a process shares: the
//! dispatcher, the reconciler, the webhook server and the console all take
//! their connections from the same [`Ledger`].
//!
//! Why one: the ledger is opened (and migrated, and checked) once, so a bad
//! file fails at start and not on the first webhook; connections are reused
//! with their prepared-statement caches warm; and there is one place that
//! knows how blocking SQLite work leaves an async runtime
//! ([`Ledger::call`], on tokio's blocking pool).
//!
//! A task that writes in a steady stream (the dispatcher, the reconciler)
//! takes a [`Session`]: one connection of its own, used by one call at a
//! time. Two writers of one process then queue on a mutex instead of on
//! SQLite's busy handler, whose sleeps grow to 100 ms. Everything else
//! (webhook handlers, console reads, operator actions) borrows a pooled
//! connection per call.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use crate::store::{OpenOptions, Store, StoreError};
use unavez_ledger::location::Location;

/// Idle connections kept for reuse.
const IDLE: usize = 4;

/// Pooled calls that may hold a connection at once ([`Ledger::with`]);
/// the rest wait for one to come back. On PostgreSQL each connection is a
/// server process: webhook requests stuck behind a row lock, each with a
/// connection of its own, once used up the server's (the engine repeats a
/// request it gave up on, and the stuck call keeps its connection).
pub const MAX_POOLED: usize = 16;

/// A shared, cloneable handle to one ledger file.
#[derive(Clone)]
pub struct Ledger {
    inner: Arc<Inner>,
}

struct Inner {
    location: Location,
    /// The file, or the URL without its password (for messages).
    path: PathBuf,
    idle: Mutex<Vec<Store>>,
    /// Pooled calls holding a connection now (at most [`MAX_POOLED`]).
    busy: Mutex<usize>,
    returned: Condvar,
}

/// A place among the [`MAX_POOLED`], given back when dropped (a panicking
/// call included).
struct Place<'a>(&'a Inner);

impl Drop for Place<'_> {
    fn drop(&mut self) {
        let mut busy = self.0.busy.lock().unwrap_or_else(|p| p.into_inner());
        *busy = busy.saturating_sub(1);
        self.0.returned.notify_one();
    }
}

impl Inner {
    fn place(&self) -> Place<'_> {
        let mut busy = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        while *busy >= MAX_POOLED {
            busy = self.returned.wait(busy).unwrap_or_else(|p| p.into_inner());
        }
        *busy += 1;
        Place(self)
    }
}

impl Ledger {
    /// Opens the ledger a setting names (a file or a `postgres://` URL),
    /// creating and migrating it if needed.
    pub fn open(path: &Path) -> Result<Ledger, StoreError> {
        Ok(Ledger::from_store(Store::open(path)?))
    }

    /// Opens (and migrates) the ledger with `opts`: the first connection
    /// does the checks and is kept for reuse.
    pub fn open_with(path: &Path, opts: &OpenOptions) -> Result<Ledger, StoreError> {
        let first = Store::open_with(path, opts)?;
        Ok(Ledger::from_store(first))
    }

    /// Opens an existing ledger without waiting for the write lock when it
    /// is at this binary's schema; migrates otherwise (see
    /// [`Store::attach_or_open`]).
    pub fn attach_or_open(path: &Path) -> Result<Ledger, StoreError> {
        Ok(Ledger::from_store(Store::attach_or_open(path)?))
    }

    /// Opens (and migrates) the ledger wherever it is: a SQLite file or
    /// the shared PostgreSQL ledger.
    pub fn open_location(location: &Location, opts: &OpenOptions) -> Result<Ledger, StoreError> {
        Ok(Ledger::from_store(Store::open_location(location, opts)?))
    }

    /// A handle around a store opened elsewhere (its checks already done).
    pub fn from_store(store: Store) -> Ledger {
        Ledger {
            inner: Arc::new(Inner {
                location: store.location(),
                path: store.path().to_path_buf(),
                idle: Mutex::new(vec![store]),
                busy: Mutex::new(0),
                returned: Condvar::new(),
            }),
        }
    }

    /// Where the ledger is.
    pub fn location(&self) -> &Location {
        &self.inner.location
    }

    /// The ledger file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs blocking store work on a pooled connection (call it from a
    /// thread that may block: the console's worker, `spawn_blocking`).
    /// At most [`MAX_POOLED`] run at once; the others wait their turn.
    pub fn with<T>(&self, f: impl FnOnce(&mut Store) -> T) -> Result<T, StoreError> {
        let _place = self.inner.place();
        let mut store = self.take()?;
        let out = f(&mut store);
        self.give_back(store);
        Ok(out)
    }

    /// [`Ledger::with`] on tokio's blocking pool, for async callers.
    pub async fn call<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Store) -> T + Send + 'static,
    {
        let ledger = self.clone();
        tokio::task::spawn_blocking(move || ledger.with(f))
            .await
            .map_err(|e| StoreError::Task(e.to_string()))?
    }

    /// A connection of its own, kept by the caller (a thread that owns its
    /// blocking work, like the console's database thread).
    pub fn connection(&self) -> Result<Store, StoreError> {
        self.take()
    }

    /// A connection of its own for one steady writer (see the module).
    pub fn session(&self) -> Result<Session, StoreError> {
        Ok(Session::from_store(self.take()?))
    }

    fn take(&self) -> Result<Store, StoreError> {
        let idle = self.inner.idle.lock().map(|mut v| v.pop()).unwrap_or(None);
        match idle {
            Some(s) => Ok(s),
            // Later connections attach without the migration's write
            // lock, so one opens even while another process holds it.
            None => Store::attach_location(&self.inner.location),
        }
    }

    fn give_back(&self, store: Store) {
        if let Ok(mut idle) = self.inner.idle.lock()
            && idle.len() < IDLE
        {
            idle.push(store);
        }
    }
}

/// One connection used by one task, one call at a time.
#[derive(Clone)]
pub struct Session(Arc<Mutex<Store>>);

impl Session {
    /// A session on a store opened elsewhere (its checks already done).
    pub fn from_store(store: Store) -> Session {
        Session(Arc::new(Mutex::new(store)))
    }

    /// Runs `f` with the session's connection on tokio's blocking pool.
    pub async fn call<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Store) -> T + Send + 'static,
    {
        let store = self.0.clone();
        tokio::task::spawn_blocking(move || {
            // A panic while holding the lock leaves the connection usable:
            // SQLite rolled the transaction back when it was dropped.
            let mut guard = store.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut guard)
        })
        .await
        .map_err(|e| StoreError::Task(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_reused_and_a_missing_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("l.db");
        assert!(matches!(
            Ledger::open_with(&db, &OpenOptions::EXISTING),
            Err(StoreError::Missing { .. })
        ));
        let ledger = Ledger::open(&db).unwrap();
        let a = ledger.with(|s| s as *const Store as usize).unwrap();
        let b = ledger.with(|s| s as *const Store as usize).unwrap();
        assert_eq!(a, b, "the idle connection is reused");
        // Two at once: the second attaches a new connection.
        let nested = ledger
            .with(|_| ledger.with(|s| s.path().to_path_buf()).unwrap())
            .unwrap();
        assert_eq!(nested, db);
    }

    #[test]
    fn at_most_max_pooled_calls_hold_a_connection_and_the_rest_wait() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(&dir.path().join("l.db")).unwrap();
        let (now, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let calls: Vec<_> = (0..3 * MAX_POOLED)
            .map(|_| {
                let (ledger, now, peak) = (ledger.clone(), now.clone(), peak.clone());
                std::thread::spawn(move || {
                    ledger
                        .with(|_| {
                            let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                            peak.fetch_max(n, Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_millis(30));
                            now.fetch_sub(1, Ordering::SeqCst);
                        })
                        .unwrap()
                })
            })
            .collect();
        for c in calls {
            c.join().unwrap();
        }
        let peak = peak.load(Ordering::SeqCst);
        assert!(peak <= MAX_POOLED && peak > 1, "{peak} at once");
    }

    #[test]
    fn the_handle_opens_the_shared_ledger_and_attaches_more_connections() {
        let schema = unavez_testkit::PgSchema::new();
        let location = Location::parse(Path::new(&schema.url)).unwrap();
        let ledger = Ledger::open_location(&location, &OpenOptions::CREATE).unwrap();
        assert!(ledger.path().to_string_lossy().starts_with("postgres://"));
        let both_pg = ledger
            .with(|a| {
                a.write(|tx| tx.set_counter("probe", 3))?;
                // A second connection at once: attached, not migrated.
                ledger.with(|b| Ok::<_, StoreError>((a.is_pg(), b.is_pg(), b.read(|tx| tx.counter("probe"))?)))?
            })
            .unwrap()
            .unwrap();
        assert_eq!(both_pg, (true, true, 3));
    }

    #[test]
    fn a_session_serialises_its_calls_on_one_connection() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(&dir.path().join("l.db")).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let s = ledger.session().unwrap();
        let ids = rt.block_on(async {
            let (a, b) = tokio::join!(
                s.call(|st| st as *const Store as usize),
                s.call(|st| st as *const Store as usize)
            );
            (a.unwrap(), b.unwrap())
        });
        assert_eq!(ids.0, ids.1);
    }
}
