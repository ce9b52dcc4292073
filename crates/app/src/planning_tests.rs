//! Reserving and closing through the set-based ledger, on a real SQLite
//! file: the conflict decision and the closure rules live here now.

use chrono::{DateTime, Duration, TimeZone, Utc};

use super::*;
use crate::domain::commitment::{Commitment, CommitmentKind};
use crate::domain::intention::{NewIntention, correlation_id};
use crate::domain::key::{IntentionKey, Purpose};
use crate::domain::state::{CancelReason, IntentionState};
use crate::store::Store;
use crate::templates::Category;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 15, 0, 0).unwrap()
}

fn temp_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("ledger.db")).unwrap();
    (dir, store)
}

fn commitment(reference: &str) -> Commitment {
    Commitment {
        reference: reference.into(),
        kind: CommitmentKind::Appointment,
        status: crate::domain::commitment::CommitmentStatus::Scheduled,
        version: 1,
        starts_at: Some(now() + Duration::days(2)),
        service: Some("Odontología".into()),
        location: Some("Sede Miraflores".into()),
        phone: Some("+51987654321".into()),
        name: Some("Ana".into()),
        language: None,
        confirmed_at: None,
        manual_contact_at: None,
    }
}

fn intention(reference: &str, purpose: Purpose, version: i64, body: &str) -> NewIntention {
    let key = IntentionKey::for_commitment(reference, &purpose, version).unwrap();
    NewIntention {
        correlation_id: correlation_id(&key),
        key,
        commitment_ref: reference.into(),
        commitment_version: version,
        asks_confirmation: matches!(purpose, Purpose::Reminder { minutes: 1440 }),
        purpose,
        recipient: "+51987654321".into(),
        category: Category::Transactional,
        channel: "whatsapp".into(),
        template: "recordatorio_cita".into(),
        language: "es_PE".into(),
        parameters: vec!["Ana".into(), body.into()],
        body: body.into(),
        due_at: now() + Duration::days(1),
        expires_at: None,
        day: "2026-11-30".parse().unwrap(),
        created_by: "planner".into(),
        authorized_by: None,
        reason: None,
        related_key: None,
    }
}

/// Saves `reference` and returns (commitment id, contact id).
fn seed(store: &mut Store, reference: &str) -> (i64, i64) {
    store
        .write(|tx| {
            let contact = tx.upsert_contact("+51987654321", Some("Ana"), None, now())?;
            let id = tx.save_commitment(&commitment(reference), Some(contact), now())?;
            Ok::<_, StoreError>((id, contact))
        })
        .unwrap()
}

#[test]
fn reserve_returns_existing_for_the_same_key_and_content() {
    let (_dir, mut store) = temp_store();
    let (cid, contact) = seed(&mut store, "cita-1");
    let n = intention("cita-1", Purpose::Booking, 1, "hola");
    let first = store.write(|tx| reserve(tx, &n, cid, Some(contact), now())).unwrap();
    let second = store
        .write(|tx| reserve(tx, &n, cid, Some(contact), now() + Duration::hours(1)))
        .unwrap();
    assert!(matches!(first, Reserved::New(_)));
    assert_eq!(second, Reserved::Existing(first.id()));
    store
        .read(|tx| {
            assert_eq!(tx.intention_id("cita-1:aviso-reserva:v1")?, Some(first.id()));
            // Only the first presentation is in history; the repeat is counted.
            assert_eq!(tx.history(first.id())?.len(), 1);
            assert_eq!(tx.counter("duplicate_keys")?, 1);
            Ok::<_, StoreError>(())
        })
        .unwrap();
}

#[test]
fn reserve_with_other_content_is_a_conflict_naming_key_and_fingerprints() {
    let (_dir, mut store) = temp_store();
    let (cid, contact) = seed(&mut store, "cita-1");
    let original = intention("cita-1", Purpose::Booking, 1, "hola");
    let other = intention("cita-1", Purpose::Booking, 1, "adiós");
    let id = store
        .write(|tx| reserve(tx, &original, cid, Some(contact), now()))
        .unwrap()
        .id();
    let e = store
        .write(|tx| reserve(tx, &other, cid, Some(contact), now()))
        .unwrap_err();
    match &e {
        StoreError::Conflict { key, stored, presented } => {
            assert_eq!(key, "cita-1:aviso-reserva:v1");
            assert_eq!(stored, &original.fingerprint());
            assert_eq!(presented, &other.fingerprint());
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let msg = e.to_string();
    assert!(
        msg.contains("cita-1:aviso-reserva:v1")
            && msg.contains(&original.fingerprint())
            && msg.contains(&other.fingerprint())
    );
    let row = store.read(|tx| tx.intention(id)).unwrap();
    assert_eq!(row.body, "hola", "nothing overwritten");
    assert_eq!(row.fingerprint, original.fingerprint());
}

#[test]
fn closures_cancel_only_what_their_rule_names() {
    let (_dir, mut store) = temp_store();
    let (cid, contact) = seed(&mut store, "cita-1");
    let reserve = |store: &mut Store, p: Purpose, v: i64| {
        store
            .write(|tx| reserve(tx, &intention("cita-1", p.clone(), v, "x"), cid, Some(contact), now()))
            .unwrap()
            .id()
    };
    let booking1 = reserve(&mut store, Purpose::Booking, 1);
    let r24_1 = reserve(&mut store, Purpose::Reminder { minutes: 1440 }, 1);
    let r24_2 = reserve(&mut store, Purpose::Reminder { minutes: 1440 }, 2);
    let r2_2 = reserve(&mut store, Purpose::Reminder { minutes: 120 }, 2);
    let superseded = Closure::OlderThan {
        version: 2,
        reason: CancelReason::Superseded,
    };
    let closed = store
        .write(|tx| close_planned(tx, cid, &[superseded], &[], 2, now()))
        .unwrap();
    assert_eq!(closed, [booking1, r24_1]);
    let confirmed = Closure::ConfirmReminders {
        reason: CancelReason::AlreadyConfirmed,
    };
    let closed = store
        .write(|tx| close_planned(tx, cid, &[confirmed], &[], 2, now()))
        .unwrap();
    assert_eq!(closed, [r24_2]);
    let all = Closure::AllPlanned {
        reason: CancelReason::CommitmentCancelled,
    };
    let kept_key = "cita-1:recordatorio-2h:v2";
    let closed = store
        .write(|tx| close_planned(tx, cid, &[all], &[kept_key], 3, now()))
        .unwrap();
    assert!(closed.is_empty(), "the kept key stays planned");
    store
        .read(|tx| {
            let b = tx.intention(booking1)?;
            assert_eq!(
                (b.state, b.state_reason.as_deref()),
                (IntentionState::Cancelled, Some("superseded"))
            );
            let r = tx.intention(r24_2)?;
            assert_eq!(
                (r.state, r.state_reason.as_deref()),
                (IntentionState::Cancelled, Some("already_confirmed"))
            );
            assert_eq!(tx.intention(r2_2)?.state, IntentionState::Planned);
            let h = tx.history(booking1)?;
            assert_eq!(
                h.iter().map(|h| h.to_state.as_str()).collect::<Vec<_>>(),
                ["planned", "cancelled"]
            );
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let closed = store.write(|tx| close_planned(tx, cid, &[all], &[], 3, now())).unwrap();
    assert_eq!(closed, [r2_2]);
    let manual = Closure::Reminders {
        reason: CancelReason::ManualContact,
    };
    assert!(
        store
            .write(|tx| close_planned(tx, cid, &[manual], &[], 3, now()))
            .unwrap()
            .is_empty(),
        "nothing planned left"
    );
}
