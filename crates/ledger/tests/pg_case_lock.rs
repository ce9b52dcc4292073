//! The case lock operator actions and booking imports take before they
//! read what they decide on (`Tx::lock_case`, `Tx::lock_commitments`): on
//! PostgreSQL a second writer on the same case waits until the first one
//! commits, even when it names another intention of the case (a resend
//! and a cancellation touch different intentions, one commitment). The
//! race itself, with real processes, is `tests/ops_race.rs`.

mod backends_fixture;
mod pg_common;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use backends_fixture::Fixture;
use unavez_ledger::location::Location;
use unavez_ledger::pg::PgUrl;
use unavez_ledger::store::{OpenOptions, Store, StoreError, Tx};
use unavez_testkit::PgSchema;

fn open(url: &str) -> Store {
    let url = PgUrl::parse(url).unwrap_or_else(|e| panic!("{e}"));
    Store::open_location(&Location::Postgres(Box::new(url)), &OpenOptions::CREATE).unwrap_or_else(|e| panic!("{e}"))
}

/// Holds the case of commitment 1 (and intention 1) for a while, while
/// another connection runs `second`: when `second` got through, and when
/// the first let go.
fn while_held(schema: &PgSchema, second: fn(&Tx<'_>) -> Result<(), StoreError>) -> (Instant, Instant) {
    let mut first = open(&schema.url);
    let (held, go) = mpsc::channel();
    let url = schema.url.clone();
    let waiter = std::thread::spawn(move || {
        let mut store = open(&url);
        go.recv().unwrap();
        store
            .write(|tx| {
                second(tx)?;
                Ok::<_, StoreError>(Instant::now())
            })
            .unwrap_or_else(|e| panic!("{e}"))
    });
    let released = first
        .write(|tx| {
            tx.lock_case(1, &[1])?;
            held.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(400));
            Ok::<_, StoreError>(Instant::now())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    (waiter.join().unwrap(), released)
}

#[test]
fn a_second_writer_on_a_locked_case_waits_for_the_first_to_commit() {
    let schema = PgSchema::new();
    drop(open(&schema.url));
    let fx = Fixture::Pg(schema.url.clone());
    fx.commitment(1, 1, 0);
    fx.commitment(2, 2, 0);
    fx.intention(1, 1, "failed", "");
    fx.intention(2, 1, "planned", "");
    fx.intention(3, 2, "planned", "");

    // Another supervisor on another member of the same case.
    let (through, released) = while_held(&schema, |tx| tx.lock_case(1, &[2]));
    assert!(
        through >= released,
        "an action on the same case went through while it was held"
    );
    // A booking import changing the commitment.
    let (through, released) = while_held(&schema, |tx| tx.lock_commitments(&["cita-1", "cita-nueva"]));
    assert!(
        through >= released,
        "an import of the case went through while it was held"
    );
    // Another case is not held up.
    let (through, released) = while_held(&schema, |tx| {
        tx.lock_case(2, &[3])?;
        tx.lock_commitments(&["cita-2"])
    });
    assert!(through < released, "another case waited for this one");
}
