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

fn event(json: &str) -> BookingEvent {
    BookingEvent::from_json(json).unwrap()
}

/// An appointment event for `reference` at `version`, starting at `hour`
/// on 2026-12-03, for `phone` with `name` and `language`.
fn appointment(
    event_id: &str,
    kind: &str,
    reference: &str,
    version: i64,
    hour: u32,
    (phone, name, language): (&str, &str, &str),
) -> BookingEvent {
    event(&format!(
        r#"{{"event_id":"{event_id}","type":"appointment.{kind}","ref":"{reference}","version":{version},
            "starts_at":"2026-12-03T{hour:02}:30:00-05:00","contact":{{"phone":"{phone}","name":"{name}","language":"{language}"}},
            "location":"Sede A"}}"#
    ))
}

/// What the ledger holds, without its surrogate ids: commitments with
/// their contacts and event logs, and every intention with its history.
fn snapshot(store: &mut Store) -> String {
    store
        .read(|tx| {
            let mut out = String::new();
            for c in tx.list_commitments(1000, 0)? {
                let contact = match c.contact_id {
                    Some(id) => tx.contact(id)?.map(|k| (k.phone, k.name, k.language)),
                    None => None,
                };
                out.push_str(&format!(
                    "{} {:?} {contact:?}\n  {:?}\n",
                    c.commitment.reference,
                    c.commitment,
                    tx.commitment_events(&c.commitment.reference)?
                        .into_iter()
                        .map(|e| (e.0, e.2, e.3, e.4))
                        .collect::<Vec<_>>()
                ));
            }
            let filter = crate::store::IntentFilter {
                limit: 1000,
                ..Default::default()
            };
            let mut intentions = tx.list_intentions(&filter)?;
            intentions.sort_by(|a, b| a.key.cmp(&b.key));
            for i in intentions {
                let history: Vec<_> = tx
                    .history(i.id)?
                    .into_iter()
                    .map(|h| {
                        (
                            h.from_state,
                            h.to_state,
                            h.applied,
                            h.signal,
                            h.cause,
                            h.note,
                            h.commitment_version,
                        )
                    })
                    .collect();
                out.push_str(&format!(
                    "{} {} {:?} {} {} {}\n  {history:?}\n",
                    i.key, i.state, i.state_reason, i.fingerprint, i.recipient, i.commitment_ref
                ));
            }
            Ok::<_, StoreError>(out)
        })
        .unwrap()
}

/// The events applied together (in groups) leave the ledger exactly as
/// applied one at a time, with the same outcomes: commitments repeated in
/// the batch, contacts shared and renamed, a duplicate, a stale version,
/// and a stored commitment without a name of its own whose contact an
/// earlier event of the batch renames (read after the rename, it keeps
/// that name when the contact is renamed again).
#[test]
fn a_batch_leaves_the_ledger_as_one_event_at_a_time() {
    const P1: &str = "+51987654321";
    const P2: &str = "+51911111111";
    let stored = event(&format!(
        r#"{{"event_id":"evt-0","type":"appointment.scheduled","ref":"cita-0","version":1,
            "starts_at":"2026-12-03T10:30:00-05:00","contact":{{"phone":"{P2}"}},"location":"Sede A"}}"#
    ));
    let events = [
        appointment("evt-1", "scheduled", "cita-1", 1, 9, (P1, "Ana", "es")),
        appointment("evt-2", "scheduled", "cita-2", 1, 11, (P1, "Beto", "en")),
        appointment("evt-3", "scheduled", "cita-3", 1, 12, (P2, "Dora", "en")),
        event(r#"{"event_id":"evt-4","type":"appointment.confirmed","ref":"cita-0"}"#),
        appointment("evt-5", "rescheduled", "cita-1", 2, 16, (P1, "Ana", "es")),
        appointment("evt-1", "scheduled", "cita-1", 1, 9, (P1, "Ana", "es")),
        appointment("evt-6", "scheduled", "cita-1", 1, 9, (P1, "Ana", "es")),
        appointment("evt-7", "cancelled", "cita-2", 2, 11, (P1, "Beto", "en")),
        appointment("evt-8", "rescheduled", "cita-3", 2, 13, (P2, "Eva", "en")),
    ];
    let (policy, templates) = (Policy::default(), Templates::embedded());
    let planner = Planner {
        policy: &policy,
        templates: &templates,
        tz: chrono_tz::America::Lima,
    };
    let open = |dir: &tempfile::TempDir| {
        let mut store = Store::open(&dir.path().join("l.db")).unwrap();
        store.write(|tx| ingest(tx, &planner, &stored, "test", now())).unwrap();
        store
    };
    let (one_dir, batch_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut one = open(&one_dir);
    let singly: Vec<String> = events
        .iter()
        .map(|ev| {
            format!(
                "{:?}",
                one.write(|tx| Ok::<_, StoreError>(ingest_each(tx, &planner, &[ev], "test", now())))
            )
        })
        .collect();
    let mut batch = open(&batch_dir);
    let refs: Vec<&BookingEvent> = events.iter().collect();
    let together: Vec<String> = batch
        .write(|tx| Ok::<_, StoreError>(ingest_each(tx, &planner, &refs, "test", now())))
        .unwrap()
        .into_iter()
        .map(|o| format!("Ok([{o:?}])"))
        .collect();
    assert_eq!(together, singly);
    assert_eq!(snapshot(&mut batch), snapshot(&mut one));
    assert!(
        together.iter().all(|o| !o.contains("Err")),
        "every event applies: {together:#?}"
    );
}
