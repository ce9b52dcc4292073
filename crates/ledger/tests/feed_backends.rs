//! Calendar feed rows on both backends: the status row and its poller's
//! lease (one `serve` at a time, taken over when it lapses), the baseline
//! of the previous successful poll, and held disappearances, whose
//! commitments' planned messages are not claimed while held.

mod backends_fixture;
mod pg_common;

use backends_fixture::open;
use chrono::{DateTime, Duration, TimeZone, Utc};
use unavez_ledger::api::ClaimScope;
use unavez_ledger::domain::feed::Seen;
use unavez_ledger::store::{FeedSuccess, Store, StoreError};
use unavez_testkit::{Backend, on_both};

fn at(minutes: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, 0).unwrap() + Duration::minutes(minutes)
}

fn seen(n: i64) -> Seen {
    Seen {
        reference: format!("cita-{n}"),
        uid: format!("u{n}@x"),
        starts_at: at(60 * 24 * n),
    }
}

fn a_feed_lease_is_one_owner_at_a_time(backend: Backend) {
    let (mut store, _f, _l) = open(backend);
    let lease = |store: &mut Store, owner: &str, minute: i64| {
        store
            .write(|tx| tx.feed_lease("agenda", "https://cal.test", owner, at(minute + 1), at(minute)))
            .unwrap()
    };
    assert!(lease(&mut store, "serve-a", 0));
    assert!(!lease(&mut store, "serve-b", 0), "a live lease is not taken");
    assert!(lease(&mut store, "serve-a", 0), "its owner renews it");
    assert!(lease(&mut store, "serve-b", 2), "a lapsed lease is taken over");
    assert!(!lease(&mut store, "serve-a", 2));
    store.write(|tx| tx.feed_release_lease("agenda", "serve-b")).unwrap();
    assert!(lease(&mut store, "serve-a", 2), "a released lease is free");
    let row = store.read(|tx| tx.feed("agenda")).unwrap().unwrap();
    assert_eq!(row.lease_owner.as_deref(), Some("serve-a"));
    assert_eq!(row.origin, "https://cal.test");
}

fn a_feed_status_row_keeps_success_and_failure(backend: Backend) {
    let (mut store, _f, _l) = open(backend);
    store
        .write(|tx| {
            tx.feed_lease("agenda", "https://cal.test", "a", at(1), at(0))?;
            tx.feed_failure("agenda", "HTTP 500", at(1))?;
            tx.feed_failure("agenda", "empty body", at(2))?;
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let row = store.read(|tx| tx.feed("agenda")).unwrap().unwrap();
    assert_eq!(row.failing_since, Some(at(1)), "the first failure since a success");
    assert_eq!(
        (row.last_failure_at, row.last_failure.as_deref()),
        (Some(at(2)), Some("empty body"))
    );
    let ok = FeedSuccess {
        etag: Some("\"v1\""),
        last_modified: Some("Tue, 01 Dec 2026 09:00:00 GMT"),
        events_seen: 12,
        events_applied: 3,
    };
    store.write(|tx| tx.feed_success("agenda", &ok, at(3))).unwrap();
    let row = store.read(|tx| tx.feed("agenda")).unwrap().unwrap();
    assert_eq!(row.failing_since, None);
    assert_eq!(row.etag.as_deref(), Some("\"v1\""));
    assert_eq!(
        (row.events_seen, row.events_applied, row.last_success_at),
        (12, 3, Some(at(3)))
    );
    assert_eq!(
        row.last_failure.as_deref(),
        Some("empty body"),
        "the last failure stays for the record"
    );
    store.write(|tx| tx.feed_unchanged("agenda", at(4))).unwrap();
    let row = store.read(|tx| tx.feed("agenda")).unwrap().unwrap();
    assert_eq!((row.last_success_at, row.events_seen), (Some(at(4)), 12));
    assert_eq!(store.read(|tx| tx.feeds()).unwrap().len(), 1);
}

fn baseline_and_holds_are_rows_and_a_hold_stops_claims(backend: Backend) {
    let (mut store, f, _l) = open(backend);
    f.sql(
        "INSERT INTO commitments(id, ref, kind, status, version, created_at, updated_at)
         VALUES (1, 'cita-1', 'appointment', 'scheduled', 1, 0, 0), (2, 'cita-2', 'appointment', 'scheduled', 1, 0, 0);",
    );
    f.intention(10, 1, "planned", "");
    f.intention(20, 2, "planned", "");
    store
        .write(|tx| {
            tx.feed_lease("agenda", "https://cal.test", "a", at(1), at(0))?;
            tx.feed_replace_seen("agenda", &[seen(1), seen(2), seen(3)])?;
            tx.feed_replace_seen("agenda", &[seen(2), seen(3)])?;
            tx.feed_hold("agenda", &[seen(1), seen(4)], at(0))?;
            tx.feed_hold("agenda", &[seen(1)], at(5))?;
            Ok::<_, StoreError>(())
        })
        .unwrap();
    assert_eq!(store.read(|tx| tx.feed_seen("agenda")).unwrap(), [seen(2), seen(3)]);
    assert_eq!(store.read(|tx| tx.feed_held("agenda")).unwrap(), [seen(1), seen(4)]);
    assert_eq!(store.read(|tx| tx.feed("agenda")).unwrap().unwrap().held, 2);
    let due = |store: &mut Store| {
        store
            .write(|tx| tx.due_ids(&ClaimScope::Due, 10, at(60 * 24 * 30)))
            .unwrap()
    };
    assert_eq!(due(&mut store), [20], "a held commitment's messages wait");
    let n = store
        .write(|tx| tx.feed_unhold("agenda", &["cita-1", "cita-4"]))
        .unwrap();
    assert_eq!(n, 2);
    assert_eq!(due(&mut store), [10, 20]);
}

on_both!(
    a_feed_lease_is_one_owner_at_a_time,
    a_feed_status_row_keeps_success_and_failure,
    baseline_and_holds_are_rows_and_a_hold_stops_claims
);
