//! Reconcilers on several hosts take `uncertain` intentions from one
//! PostgreSQL ledger: each locks what it takes and skips what another is
//! taking, so no intention is looked up (and repeated) by two at once.
//! Before, both read the same due rows and the second's repeat was
//! refused by the attempts' unique key, logged as a warning.

mod backends_fixture;
mod pg_common;

use std::sync::mpsc;
use std::time::Duration;

use backends_fixture::Fixture;
use chrono::{TimeZone, Utc};
use unavez_ledger::location::Location;
use unavez_ledger::store::{OpenOptions, Store, StoreError};
use unavez_testkit::PgSchema;

fn open(schema: &PgSchema) -> Store {
    Store::open_location(
        &Location::Postgres(Box::new(pg_common::url(schema))),
        &OpenOptions::CREATE,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn two_reconcilers_never_take_the_same_uncertain_intention() {
    let schema = PgSchema::new();
    let mut first = open(&schema);
    let mut second = open(&schema);
    let fx = Fixture::Pg(schema.url.clone());
    fx.commitment(1, 1, 0);
    for id in 1..=6 {
        fx.intention(id, 1, "uncertain", "");
    }
    let now = Utc.with_ymd_and_hms(2026, 12, 1, 12, 0, 0).unwrap();
    let hold = chrono::Duration::seconds(60);
    let (taken_tx, taken) = mpsc::channel();
    let (done_tx, done) = mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        first
            .write(|tx| {
                let ids: Vec<i64> = tx
                    .take_uncertain(now, hold, 4)?
                    .iter()
                    .map(|i| i.intention.id)
                    .collect();
                taken_tx.send(ids).unwrap();
                // Still taking (uncommitted) while the other looks.
                let _ = done.recv_timeout(Duration::from_secs(10));
                Ok::<_, StoreError>(())
            })
            .unwrap()
    });
    let mine = taken.recv().unwrap();
    let theirs: Vec<i64> = second
        .write(|tx| {
            Ok::<_, StoreError>(
                tx.take_uncertain(now, hold, 10)?
                    .iter()
                    .map(|i| i.intention.id)
                    .collect(),
            )
        })
        .unwrap();
    done_tx.send(()).unwrap();
    holder.join().unwrap();
    assert_eq!(mine.len(), 4);
    assert_eq!(theirs.len(), 2, "only the two nobody was taking: {mine:?} {theirs:?}");
    assert!(theirs.iter().all(|id| !mine.contains(id)), "{mine:?} {theirs:?}");
    // Once committed, the hold keeps every one from a third look.
    let again: Vec<i64> = second
        .write(|tx| {
            Ok::<_, StoreError>(
                tx.take_uncertain(now, hold, 10)?
                    .iter()
                    .map(|i| i.intention.id)
                    .collect(),
            )
        })
        .unwrap();
    assert!(again.is_empty(), "{again:?}");
}
