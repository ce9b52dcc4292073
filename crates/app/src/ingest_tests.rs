//! `ingest_each` on a real SQLite file: a batch applies as one-by-one
//! would, and a bad event in it is refused alone (nothing of it written,
//! the others kept, a conflict kept as a refused event).

use chrono::{DateTime, TimeZone, Utc};

use super::*;
use crate::policy::Policy;
use crate::store::Store;
use crate::templates::Templates;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 15, 0, 0).unwrap()
}

fn scheduled(event_id: &str, reference: &str, location: &str) -> BookingEvent {
    BookingEvent::from_json(&format!(
        r#"{{"event_id":"{event_id}","type":"appointment.scheduled","ref":"{reference}","version":1,
            "starts_at":"2026-12-03T09:30:00-05:00","contact":{{"phone":"+51987654321","name":"Ana"}},
            "location":"{location}"}}"#
    ))
    .unwrap()
}

/// Runs `events` through `ingest_each` in one transaction of a new ledger
/// that already holds `cita-0` at version 1.
fn run(events: &[BookingEvent]) -> (tempfile::TempDir, Store, Vec<Result<Outcome, IngestError>>) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("l.db")).unwrap();
    let (policy, templates) = (Policy::default(), Templates::embedded());
    let planner = Planner {
        policy: &policy,
        templates: &templates,
        tz: chrono_tz::America::Lima,
    };
    let first = scheduled("evt-0", "cita-0", "Sede A");
    store.write(|tx| ingest(tx, &planner, &first, "test", now())).unwrap();
    let refs: Vec<&BookingEvent> = events.iter().collect();
    let results = store
        .write(|tx| Ok::<_, StoreError>(ingest_each(tx, &planner, &refs, "test", now())))
        .unwrap();
    (dir, store, results)
}

fn planned(o: &Result<Outcome, IngestError>) -> Vec<String> {
    match o {
        Ok(Outcome::Stored { planned, .. }) => planned.clone(),
        other => panic!("not stored: {other:?}"),
    }
}

#[test]
fn a_batch_reserves_what_each_event_plans() {
    let events = [
        scheduled("evt-1", "cita-1", "Sede A"),
        scheduled("evt-2", "cita-2", "Sede A"),
        // The same commitment again in the same batch: its first event's
        // reservations are written before this one is planned.
        scheduled("evt-3", "cita-1", "Sede A"),
        scheduled("evt-1", "cita-1", "Sede A"),
    ];
    let (_dir, mut store, results) = run(&events);
    assert_eq!(planned(&results[0]).len(), 3, "{results:?}");
    assert_eq!(planned(&results[1]).len(), 3);
    assert!(matches!(
        &results[2],
        Ok(Outcome::Stored {
            effect: EventEffect::NoChange,
            ..
        })
    ));
    assert!(matches!(&results[3], Ok(Outcome::Duplicate { .. })), "{results:?}");
    let n = store
        .read(|tx| tx.list_intentions(&crate::store::IntentFilter::default()))
        .unwrap()
        .len();
    assert_eq!(n, 9, "three commitments, three intentions each");
}

#[test]
fn a_conflict_in_a_batch_is_refused_alone_and_kept() {
    let events = [
        scheduled("evt-1", "cita-1", "Sede A"),
        // cita-0 is stored at version 1 in Sede A: same version, other content.
        scheduled("evt-2", "cita-0", "Sede B"),
        scheduled("evt-3", "cita-3", "Sede A"),
    ];
    let (_dir, mut store, results) = run(&events);
    assert_eq!(planned(&results[0]).len(), 3);
    assert!(matches!(&results[1], Err(IngestError::Conflict(_))), "{results:?}");
    assert_eq!(planned(&results[2]).len(), 3);
    let refused = store.read(|tx| tx.refused_events("cita-0")).unwrap();
    assert_eq!(refused.len(), 1, "the conflict is kept");
    let c = store.read(|tx| tx.commitment("cita-0")).unwrap().unwrap();
    assert_eq!(
        c.commitment.location.as_deref(),
        Some("Sede A"),
        "nothing of it applied"
    );
    assert!(store.read(|tx| tx.logged_event("evt-2")).unwrap().is_none());
}
