//! A write PostgreSQL rolls back for a deadlock runs again: two writers
//! lock two rows in opposite orders (as two hosts' transactions can), the
//! server fails one of them, and `Store::write` runs that one again on a
//! fresh transaction, so both commit and neither's work is lost or doubled.
//! Counter increments (the hottest rows) wait for the commit and are
//! written in one order, so they never close such a cycle themselves.

mod pg_common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier};

use pg_common::url;
use unavez_ledger::domain::counter::Counter;
use unavez_ledger::location::Location;
use unavez_ledger::store::{OpenOptions, Store, StoreError};
use unavez_testkit::PgSchema;

fn open(schema: &PgSchema) -> Store {
    Store::open_location(&Location::Postgres(Box::new(url(schema))), &OpenOptions::CREATE).unwrap()
}

#[test]
fn a_deadlock_victim_runs_again_and_both_writes_commit() {
    let schema = PgSchema::new();
    let mut first = open(&schema);
    first
        .write(|tx| {
            tx.set_counter("row_a", 0)?;
            tx.set_counter("row_b", 0)
        })
        .unwrap();
    let barrier = Arc::new(Barrier::new(2));
    let runs = Arc::new(AtomicU32::new(0));
    let writer = |a: &'static str, b: &'static str, value: i64| {
        let (barrier, runs, mut store) = (barrier.clone(), runs.clone(), open(&schema));
        std::thread::spawn(move || {
            store
                .write(|tx| {
                    tx.set_counter(a, value)?;
                    // Only the first run meets the other writer halfway.
                    if runs.fetch_add(1, Ordering::SeqCst) < 2 {
                        barrier.wait();
                    }
                    tx.set_counter(b, value)?;
                    tx.bump_counter(Counter::DuplicateKeys, 1)?;
                    Ok::<_, StoreError>(())
                })
                .unwrap()
        })
    };
    let one = writer("row_a", "row_b", 1);
    let two = writer("row_b", "row_a", 2);
    one.join().unwrap();
    two.join().unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 3, "exactly one writer ran again");
    let (a, b, bumps) = first
        .read(|tx| {
            Ok::<_, StoreError>((
                tx.counter("row_a")?,
                tx.counter("row_b")?,
                tx.counter(&Counter::DuplicateKeys.name())?,
            ))
        })
        .unwrap();
    assert_eq!(a, b, "the writer that ran last wrote both rows");
    assert_eq!(bumps, 2, "each writer's increment counted once");
}

#[test]
fn an_increment_undone_with_its_savepoint_is_not_written() {
    let schema = PgSchema::new();
    let mut store = open(&schema);
    store
        .write(|tx| {
            tx.bump_counter(Counter::DuplicateKeys, 1)?;
            let undone: Result<(), StoreError> = tx.atomically(|tx| {
                tx.bump_counter(Counter::DuplicateKeys, 5)?;
                Err(StoreError::Task("undo".into()))
            });
            assert!(undone.is_err());
            assert_eq!(
                tx.counter(&Counter::DuplicateKeys.name())?,
                1,
                "read back before commit"
            );
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let n = store.read(|tx| tx.counter(&Counter::DuplicateKeys.name())).unwrap();
    assert_eq!(n, 1);
}

/// A host frozen inside a transaction (SIGSTOP, a stuck disk) must not
/// hold its row locks, and every other host's writes behind them, for as
/// long as it stays frozen: the server ends a session idle in a
/// transaction after ten seconds, the other writer goes on, and the
/// frozen one finds its work rolled back.
#[test]
fn a_writer_stuck_inside_a_transaction_loses_it_and_releases_its_locks() {
    let schema = PgSchema::new();
    open(&schema).write(|tx| tx.set_counter("row", 0)).unwrap();
    let mut stuck = open(&schema);
    let (locked_tx, locked) = std::sync::mpsc::channel();
    let frozen = std::thread::spawn(move || {
        stuck.write(|tx| {
            tx.set_counter("row", 1)?;
            let _ = locked_tx.send(());
            std::thread::sleep(std::time::Duration::from_secs(12));
            tx.set_counter("row", 3)
        })
    });
    locked.recv().unwrap();
    let started = std::time::Instant::now();
    let mut other = open(&schema);
    other.write(|tx| tx.set_counter("row", 2)).unwrap();
    let waited = started.elapsed();
    assert!(
        waited < std::time::Duration::from_secs(11),
        "the other writer waited {waited:?}"
    );
    assert!(frozen.join().unwrap().is_err(), "the stuck transaction cannot commit");
    assert_eq!(other.read(|tx| tx.counter("row")).unwrap(), 2);
}
