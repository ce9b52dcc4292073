//! Store unit tests on a real SQLite file (WAL) in a temporary directory.

use chrono::{DateTime, Duration, TimeZone, Utc};
use rusqlite::params;

use super::*;
use crate::domain::commitment::{Commitment, CommitmentKind};
use crate::domain::counter::Counter;
use crate::domain::intention::{NewIntention, correlation_id};
use crate::domain::key::{IntentionKey, Purpose};
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
        day: "2026-11-30".into(),
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

impl Tx<'_> {
    /// Test-only: reserves one intention through the set-based write.
    fn test_reserve(&self, n: &NewIntention, cid: i64, contact: i64) -> Result<ReserveRow> {
        let fingerprint = n.fingerprint();
        let said = crate::domain::history::Said::new(crate::domain::history::HistorySignal::Reserved, Cause::Planner);
        let row = Reservation {
            intention: n,
            fingerprint: &fingerprint,
            commitment_id: cid,
            contact_id: Some(contact),
            said,
            at: now(),
        };
        Ok(self.reserve_many(&[row])?.remove(0))
    }

    /// Test-only: records a started attempt, as the dispatcher will.
    fn test_insert_attempt(&self, intention_id: i64) -> Result<()> {
        self.conn().execute(
            "INSERT INTO attempts(intention_id, n, worker, channel, started_at, commitment_version_checked)
             VALUES (?1, 1, 'test', 'whatsapp', ?2, 1)",
            params![intention_id, ms(now())],
        )?;
        Ok(())
    }

    fn test_raw_update(&self, id: i64, column: &str, value: &str) -> Result<usize> {
        Ok(self.conn().execute(
            &format!("UPDATE intentions SET {column} = ?2 WHERE id = ?1"),
            params![id, value],
        )?)
    }

    fn test_count(&self, table: &str) -> Result<i64> {
        Ok(self
            .conn()
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))?)
    }
}

#[test]
fn wal_mode_and_foreign_keys_are_on() {
    let (_dir, store) = temp_store();
    let mode: String = store
        .conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode.to_lowercase(), "wal");
    let fk: i64 = store
        .conn
        .pragma_query_value(None, "foreign_keys", |r| r.get(0))
        .unwrap();
    assert_eq!(fk, 1);
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[test]
fn migrations_are_idempotent_on_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let mut store = Store::open(&path).unwrap();
    let (cid, contact) = seed(&mut store, "cita-1");
    store
        .write(|tx| tx.test_reserve(&intention("cita-1", Purpose::Booking, 1, "x"), cid, contact))
        .unwrap();
    drop(store);
    for _ in 0..3 {
        let mut again = Store::open(&path).unwrap();
        let v: u32 = again
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(v, MIGRATIONS.last().unwrap().0);
        assert_eq!(again.read(|tx| tx.test_count("intentions")).unwrap(), 1);
    }
}

#[test]
fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let store = Store::open(&path).unwrap();
    store.conn.pragma_update(None, "user_version", 999).unwrap();
    drop(store);
    let e = Store::open(&path).err().unwrap();
    assert!(matches!(e, StoreError::TooNew { found: 999, .. }), "{e}");
}

#[test]
fn reserving_a_key_twice_inserts_once_and_returns_the_stored_fingerprint() {
    let (_dir, mut store) = temp_store();
    let (cid, contact) = seed(&mut store, "cita-1");
    let original = intention("cita-1", Purpose::Booking, 1, "hola");
    let other = intention("cita-1", Purpose::Booking, 1, "adiós");
    let reminder = intention("cita-1", Purpose::Reminder { minutes: 120 }, 1, "hola");
    let rows = store
        .write(|tx| {
            let first = tx.test_reserve(&original, cid, contact)?;
            // One set-based write: a stored key, a new one, and a key given twice.
            let (f1, f2) = (other.fingerprint(), reminder.fingerprint());
            let said =
                crate::domain::history::Said::new(crate::domain::history::HistorySignal::Reserved, Cause::Planner);
            let row = |n, fingerprint| Reservation {
                intention: n,
                fingerprint,
                commitment_id: cid,
                contact_id: Some(contact),
                said: said.clone(),
                at: now(),
            };
            let many = tx.reserve_many(&[row(&other, &f1), row(&reminder, &f2), row(&reminder, &f2)])?;
            Ok::<_, StoreError>((first, many))
        })
        .unwrap();
    let (first, many) = rows;
    assert!(first.inserted);
    assert_eq!(
        many[0],
        ReserveRow {
            id: first.id,
            inserted: false,
            fingerprint: original.fingerprint()
        }
    );
    assert!(
        many[1].inserted && !many[2].inserted && many[1].id == many[2].id,
        "{many:?}"
    );
    store
        .read(|tx| {
            assert_eq!(tx.test_count("intentions")?, 2);
            assert_eq!(tx.intention(first.id)?.body, "hola", "nothing overwritten");
            assert_eq!(tx.history(many[1].id)?.len(), 1, "one reserved row per new intention");
            Ok::<_, StoreError>(())
        })
        .unwrap();
}

#[test]
fn content_is_frozen_once_an_attempt_exists() {
    let (_dir, mut store) = temp_store();
    let (cid, contact) = seed(&mut store, "cita-1");
    let id = store
        .write(|tx| tx.test_reserve(&intention("cita-1", Purpose::Booking, 1, "hola"), cid, contact))
        .unwrap()
        .id;
    // Before any attempt the row may still be corrected.
    assert_eq!(store.write(|tx| tx.test_raw_update(id, "body", "hola!")).unwrap(), 1);
    store.write(|tx| tx.test_insert_attempt(id)).unwrap();
    for column in [
        "body",
        "recipient",
        "template",
        "parameters",
        "fingerprint",
        "language",
        "key",
    ] {
        let e = store.write(|tx| tx.test_raw_update(id, column, "changed")).unwrap_err();
        assert!(e.to_string().contains("immutable"), "{column}: {e}");
    }
    // State is not content: it still moves.
    assert_eq!(
        store.write(|tx| tx.test_raw_update(id, "state_reason", "ok")).unwrap(),
        1
    );
    assert_eq!(store.read(|tx| tx.intention(id)).unwrap().body, "hola!");
}

#[test]
fn history_is_append_only() {
    let (_dir, mut store) = temp_store();
    let (cid, contact) = seed(&mut store, "cita-1");
    store
        .write(|tx| tx.test_reserve(&intention("cita-1", Purpose::Booking, 1, "x"), cid, contact))
        .unwrap();
    let e = store
        .write(|tx| Ok::<_, StoreError>(tx.conn().execute("DELETE FROM intention_history", [])?))
        .unwrap_err();
    assert!(e.to_string().contains("append-only"), "{e}");
}

#[test]
fn counters_add_up_and_default_to_zero() {
    let (_dir, mut store) = temp_store();
    store
        .write(|tx| {
            assert_eq!(tx.counter("nothing")?, 0);
            tx.bump_counter(Counter::DuplicateKeys, 2)?;
            tx.bump_counter(Counter::DuplicateKeys, 3)?;
            Ok::<_, StoreError>(())
        })
        .unwrap();
    assert_eq!(store.read(|tx| tx.counter("duplicate_keys")).unwrap(), 5);
}

#[test]
fn repeated_event_ids_are_recorded_once() {
    let (_dir, mut store) = temp_store();
    let (first, second) = store
        .write(|tx| {
            let a = tx.record_commitment_event("evt-1", "cita-1", "appointment.scheduled", "t", "{}", now())?;
            let b = tx.record_commitment_event("evt-1", "cita-1", "appointment.scheduled", "t", "{}", now())?;
            Ok::<_, StoreError>((a, b))
        })
        .unwrap();
    assert!(first.is_some() && second.is_none());
    assert_eq!(store.read(|tx| tx.counter("duplicate_events")).unwrap(), 1);
}

#[test]
fn a_failed_savepoint_leaves_the_rest_of_the_transaction() {
    let (_dir, mut store) = temp_store();
    store
        .write(|tx| {
            tx.bump_counter(Counter::MarketingStop, 1)?;
            let r: Result<()> = tx.atomically(|tx| {
                tx.bump_counter(Counter::MarketingResume, 1)?;
                Err(StoreError::NoIntention("x".into()))
            });
            assert!(r.is_err());
            Ok::<_, StoreError>(())
        })
        .unwrap();
    store
        .read(|tx| {
            assert_eq!((tx.counter("marketing_stop")?, tx.counter("marketing_resume")?), (1, 0));
            Ok::<_, StoreError>(())
        })
        .unwrap();
}

fn refusal<'a>(event_id: &'a str, fingerprint: &'a str, fields: &'a [String]) -> NewRefusal<'a> {
    NewRefusal {
        event_id,
        commitment_ref: "cita-1",
        event_type: "appointment.scheduled",
        version: 1,
        conflict: crate::domain::event::ConflictKind::SameVersion,
        fields,
        reason: "cita-1 is already at version 1 with other content (location)",
        source: "http",
        payload: r#"{"event_id":"evt-2","location":"Sede B"}"#,
        fingerprint,
    }
}

#[test]
fn a_refused_event_is_kept_once_per_content_and_counted_each_time() {
    let (_dir, mut store) = temp_store();
    seed(&mut store, "cita-1");
    let fields = vec!["location".to_string()];
    store
        .write(|tx| {
            tx.record_refusal(&refusal("evt-2", "sha256:b", &fields), now())?;
            tx.record_refusal(&refusal("evt-2", "sha256:b", &fields), now() + Duration::minutes(5))?;
            tx.record_refusal(&refusal("evt-2", "sha256:c", &fields), now())?;
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let rows = store.read(|tx| tx.refused_events("cita-1")).unwrap();
    let seen: Vec<(i64, bool)> = rows.iter().map(|r| (r.times, r.open)).collect();
    assert_eq!(seen, [(2, true), (1, true)]);
    assert_eq!(rows[0].fields, ["location"]);
    assert_eq!(rows[0].payload["location"], "Sede B");
    assert_eq!(rows[0].last_seen_at, now() + Duration::minutes(5));
    assert_eq!(store.read(|tx| tx.counter("refused_events")).unwrap(), 3);
    let deleted = store.write(|tx| Ok::<_, StoreError>(tx.conn().execute("DELETE FROM refused_events", [])?));
    assert!(deleted.is_err(), "refused events are evidence: append-only");
}

#[test]
fn the_attention_list_shows_a_refused_event_until_a_newer_version_settles_it() {
    let (_dir, mut store) = temp_store();
    seed(&mut store, "cita-1");
    let fields = vec!["location".to_string()];
    store
        .write(|tx| tx.record_refusal(&refusal("evt-2", "sha256:b", &fields), now()))
        .unwrap();
    let page = store.read(|tx| tx.attention(&AttentionQuery::new(now()))).unwrap();
    assert_eq!((page.rows.len(), page.total), (1, 1));
    let r = &page.rows[0];
    assert_eq!(
        (r.kind, r.state.as_str(), r.intention_id),
        (RowKind::RefusedEvent, "refused_event", None)
    );
    assert_eq!(r.commitment_ref, "cita-1");
    assert!(
        r.last_event
            .as_deref()
            .unwrap()
            .starts_with("evt-2: cita-1 is already at version 1")
    );
    let mut q = AttentionQuery::new(now());
    q.filter = Some("evt-2".into());
    assert_eq!(store.read(|tx| tx.attention(&q)).unwrap().total, 1);
    q.filter = Some("cita-9".into());
    assert_eq!(store.read(|tx| tx.attention(&q)).unwrap().total, 0);
    // The booking system sends version 2: the conflict is settled.
    store
        .write(|tx| {
            let mut c = commitment("cita-1");
            c.version = 2;
            tx.save_commitment(&c, None, now())
        })
        .unwrap();
    let page = store.read(|tx| tx.attention(&AttentionQuery::new(now()))).unwrap();
    assert_eq!((page.rows.len(), page.total), (0, 0));
    assert!(!store.read(|tx| tx.refused_events("cita-1")).unwrap()[0].open);
}

#[test]
fn the_name_belongs_to_the_commitment_not_to_the_shared_phone() {
    let (_dir, mut store) = temp_store();
    store
        .write(|tx| {
            let k = tx.upsert_contact("+51987654321", Some("Juan"), None, now())?;
            let mut a = commitment("cita-1");
            a.name = Some("Juan".into());
            tx.save_commitment(&a, Some(k), now())?;
            let k = tx.upsert_contact("+51987654321", Some("Pedro"), None, now())?;
            let mut b = commitment("cita-2");
            b.name = Some("Pedro".into());
            tx.save_commitment(&b, Some(k), now())?;
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let names: Vec<Option<String>> = ["cita-1", "cita-2"]
        .iter()
        .map(|r| store.read(|tx| tx.commitment(r)).unwrap().unwrap().commitment.name)
        .collect();
    assert_eq!(names, [Some("Juan".into()), Some("Pedro".into())]);
}
