//! A state change decided on a row that another transaction moved and
//! committed after this one read it: on PostgreSQL (READ COMMITTED, each
//! statement its own snapshot) the move's `WHERE state = …` refuses it,
//! and `Store::write` runs the whole transaction again, which reads the
//! row afresh and decides anew, as SQLite's single writer would have from
//! the start. The dispatcher recording a send's answer while the engine's
//! webhook for the same message lands is this race; before, the whole
//! batch of answers was refused and left its intentions `dispatching`
//! until their leases ran out. On SQLite a stale move cannot happen, so a
//! refused one is the caller's mistake and is reported at once.

mod backends_fixture;
mod pg_common;

use std::cell::Cell;

use backends_fixture::Fixture;
use chrono::Utc;
use unavez_ledger::domain::history::{self, HistorySignal, Said};
use unavez_ledger::domain::state::{IntentionState, Signal};
use unavez_ledger::location::Location;
use unavez_ledger::store::{Cause, OpenOptions, Store, StoreError};
use unavez_testkit::PgSchema;

fn open(schema: &PgSchema) -> Store {
    Store::open_location(
        &Location::Postgres(Box::new(pg_common::url(schema))),
        &OpenOptions::CREATE,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// `signal` on intention 1 as it stands in `tx`, written if the state
/// machine moves it.
fn on(tx: &unavez_ledger::store::Tx<'_>, signal: Signal, cause: Cause) -> Result<IntentionState, StoreError> {
    let state = tx.intention(1)?.state;
    let said = Said::new(HistorySignal::of(signal), cause);
    let (_, record) = history::on_signal(1, state, signal, said, Utc::now());
    tx.apply_records(record.as_slice())?;
    Ok(state)
}

#[test]
fn a_move_decided_on_a_stale_read_runs_again_on_the_fresh_row() {
    let schema = PgSchema::new();
    let mut dispatcher = open(&schema);
    let fx = Fixture::Pg(schema.url.clone());
    fx.commitment(1, 1, 0);
    fx.intention(1, 1, "dispatching", "");
    let mut webhook = open(&schema);

    let runs = Cell::new(0);
    let decided_on = dispatcher
        .write(|tx| {
            runs.set(runs.get() + 1);
            let state = tx.intention(1)?.state;
            if runs.get() == 1 {
                // The engine's status webhook lands between the read and
                // the move, and commits.
                webhook.write(|w| on(w, Signal::Sent, Cause::Webhook))?;
            }
            let said = Said::new(HistorySignal::of(Signal::Accepted), Cause::Dispatcher);
            let (_, record) = history::on_signal(1, state, Signal::Accepted, said, Utc::now());
            tx.apply_records(record.as_slice())?;
            Ok::<_, StoreError>(state)
        })
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(runs.get(), 2, "run once more after the stale read");
    assert_eq!(
        decided_on,
        IntentionState::Sent,
        "the second run read the webhook's commit"
    );
    let now = dispatcher.read(|tx| tx.intention(1)).unwrap().state;
    assert_eq!(
        now,
        IntentionState::Sent,
        "evidence of a later stage is never moved back"
    );
    let moves = fx
        .int("SELECT count(*) FROM intention_history WHERE intention_id = 1 AND to_state = 'accepted'")
        .unwrap_or(0);
    assert_eq!(moves, 0, "the stale decision left no trace");
}

#[test]
fn a_move_refused_without_any_concurrent_change_is_still_an_error() {
    // On PostgreSQL the runs again find the same row and give up.
    let schema = PgSchema::new();
    let mut pg = open(&schema);
    let fx = Fixture::Pg(schema.url.clone());
    fx.commitment(1, 1, 0);
    fx.intention(1, 1, "sent", "");
    // On SQLite: reported at once.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let mut sqlite = Store::open(&path).unwrap();
    let file = Fixture::Sqlite(path);
    file.commitment(1, 1, 0);
    file.intention(1, 1, "sent", "");

    for (store, more_than_once) in [(&mut pg, true), (&mut sqlite, false)] {
        let runs = Cell::new(0);
        let r = store.write(|tx| {
            runs.set(runs.get() + 1);
            // A decision made as if the row were still dispatching.
            let said = Said::new(HistorySignal::of(Signal::Accepted), Cause::Dispatcher);
            let (_, record) = history::on_signal(1, IntentionState::Dispatching, Signal::Accepted, said, Utc::now());
            tx.apply_records(record.as_slice())
        });
        assert!(matches!(r, Err(StoreError::Moved { id: 1, .. })), "{r:?}");
        assert_eq!(runs.get() > 1, more_than_once, "{} runs", runs.get());
    }
}

/// The webhook path's race: a "read" status moves the row and, before it
/// commits, a delayed "delivered" for the same message (decided on the
/// committed `sent`) waits for the row's lock. Once the first commits, the
/// second's move from `sent` is refused and its transaction runs again on
/// the fresh row, where `delivered` is only recorded. Before, the move was
/// unconditional and took the row back down to `delivered`.
#[test]
fn a_lower_status_landing_behind_a_higher_one_never_moves_the_row_back() {
    let schema = PgSchema::new();
    let mut first = open(&schema);
    let mut second = open(&schema);
    let fx = Fixture::Pg(schema.url.clone());
    fx.commitment(1, 1, 0);
    fx.intention(1, 1, "sent", "");
    let entry = |signal| unavez_ledger::store::Entry {
        signal,
        cause: Cause::Webhook,
        evidence: Some("sim:1"),
        note: None,
        commitment_version: None,
    };
    let mut late = None;
    first
        .write(|tx| {
            tx.signal(1, Signal::Read, &entry("read"), Utc::now())?;
            if late.is_none() {
                let mut store = std::mem::replace(&mut second, open(&schema));
                late = Some(std::thread::spawn(move || {
                    let entry = unavez_ledger::store::Entry {
                        signal: "delivered",
                        cause: Cause::Webhook,
                        evidence: Some("sim:2"),
                        note: None,
                        commitment_version: None,
                    };
                    store.write(|tx| tx.signal(1, Signal::Delivered, &entry, Utc::now()))
                }));
                // Long enough for the late status to read `sent` and wait.
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let r = late.unwrap().join().unwrap().unwrap();
    assert_eq!(r.from, IntentionState::Read, "decided again on the fresh row");
    let now = second.read(|tx| tx.intention(1)).unwrap().state;
    assert_eq!(now, IntentionState::Read, "a read message never looks undelivered");
    let back = fx
        .int("SELECT count(*) FROM intention_history WHERE intention_id = 1 AND applied = 1 AND to_state = 'delivered'")
        .unwrap_or(0);
    assert_eq!(back, 0, "no applied move down in the history");
}
