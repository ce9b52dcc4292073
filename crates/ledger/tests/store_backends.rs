//! The same store operations on both backends, from one definition: each
//! test body runs once on a SQLite file and once on a PostgreSQL schema
//! (`both`). This is where the conformance suite grows as operations are
//! written once for both (`unavez_ledger::sql`); an operation not yet
//! written so answers `NotOnPostgres` on PostgreSQL, never a wrong result.

mod backends_fixture;
mod pg_common;

use chrono::{TimeZone, Utc};
use unavez_ledger::domain::counter::Counter;
use unavez_ledger::domain::state::IntentionState;
use unavez_ledger::store::{Store, StoreError};

/// Runs `body` on a fresh SQLite ledger and on a fresh PostgreSQL one.
fn both(body: impl Fn(&mut Store)) {
    backends_fixture::both(|store, _| body(store));
}

#[test]
fn counters_savepoints_and_snapshots_behave_alike() {
    both(|store| {
        store
            .write(|tx| {
                tx.bump_counter(Counter::DuplicateKeys, 2)?;
                tx.bump_counter(Counter::DuplicateKeys, 3)?;
                tx.set_counter("probe", 41)?;
                // A failed step inside a savepoint is undone alone.
                let failed: Result<(), StoreError> = tx.atomically(|tx| {
                    tx.set_counter("probe", 99)?;
                    Err(StoreError::NoIntention("#0".into()))
                });
                assert!(failed.is_err());
                Ok::<_, StoreError>(())
            })
            .unwrap();
        let (dups, probe, none) = store
            .read(|tx| {
                Ok::<_, StoreError>((
                    tx.counter(&Counter::DuplicateKeys.name())?,
                    tx.counter("probe")?,
                    tx.counter("never")?,
                ))
            })
            .unwrap();
        assert_eq!((dups, probe, none), (5, 41, 0), "on {}", store.path().display());
        // A failed write transaction leaves nothing behind.
        let failed: Result<(), StoreError> = store.write(|tx| {
            tx.set_counter("probe", 7)?;
            Err(StoreError::NoIntention("#0".into()))
        });
        assert!(failed.is_err());
        assert_eq!(store.read(|tx| tx.counter("probe")).unwrap(), 41);
        assert_eq!(store.quick_check().unwrap(), "ok");
        assert!(!store.write_locked().unwrap());
    });
}

#[test]
fn an_empty_ledger_reads_alike() {
    both(|store| {
        let day = "2026-12-01".parse().unwrap();
        let until = Utc.with_ymd_and_hms(2026, 12, 2, 0, 0, 0).unwrap();
        let timings = store
            .read(|tx| tx.day_timings(day, until, &[IntentionState::Accepted], &[IntentionState::Read]))
            .unwrap();
        assert!(timings.is_empty());
        let counts = store.read(|tx| tx.count_by_state()).unwrap();
        assert_eq!(counts.len(), IntentionState::ALL.len());
        assert!(counts.iter().all(|(_, n)| *n == 0));
    });
}
