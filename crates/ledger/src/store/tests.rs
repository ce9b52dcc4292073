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
        self.sqlite()?.execute(
            "INSERT INTO attempts(intention_id, n, worker, channel, started_at, commitment_version_checked)
             VALUES (?1, 1, 'test', 'whatsapp', ?2, 1)",
            params![intention_id, ms(now())],
        )?;
        Ok(())
    }

    fn test_raw_update(&self, id: i64, column: &str, value: &str) -> Result<usize> {
        Ok(self.sqlite()?.execute(
            &format!("UPDATE intentions SET {column} = ?2 WHERE id = ?1"),
            params![id, value],
        )?)
    }

    fn test_count(&self, table: &str) -> Result<i64> {
        Ok(self
            .sqlite()?
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))?)
    }
}

#[test]
fn wal_mode_and_foreign_keys_are_on() {
    let (_dir, store) = temp_store();
    let mode: String = store
        .sqlite_conn()
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode.to_lowercase(), "wal");
    let fk: i64 = store
        .sqlite_conn()
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
            .sqlite_conn()
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
    store.sqlite_conn().pragma_update(None, "user_version", 999).unwrap();
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
        .write(|tx| Ok::<_, StoreError>(tx.sqlite()?.execute("DELETE FROM intention_history", [])?))
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
            let e = NewEvent {
                event_id: "evt-1",
                reference: "cita-1",
                kind: "appointment.scheduled",
                source: "t",
                payload: "{}",
                effect: EventEffect::Applied,
                version_before: None,
                version_after: Some(1),
            };
            let a = tx.record_commitment_event(&e, now())?;
            let b = tx.record_commitment_event(&e, now())?;
            Ok::<_, StoreError>((a, b))
        })
        .unwrap();
    assert!(first.is_some() && second.is_none());
    assert_eq!(store.read(|tx| tx.counter("duplicate_events")).unwrap(), 1);
    let log = store.read(|tx| tx.commitment_events("cita-1")).unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!((log[0].2.as_str(), log[0].3, log[0].4), ("applied", None, Some(1)));
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
    let deleted = store.write(|tx| Ok::<_, StoreError>(tx.sqlite()?.execute("DELETE FROM refused_events", [])?));
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

#[test]
fn a_held_write_lock_is_seen_without_waiting_and_attaching_does_not_wait_for_it() {
    let (_dir, store) = temp_store();
    let path = store.path().to_path_buf();
    let mut other = Store::open(&path).unwrap();
    assert!(!other.write_locked().unwrap());
    store.sqlite_conn().execute_batch("BEGIN IMMEDIATE").unwrap();
    let start = std::time::Instant::now();
    assert!(other.write_locked().unwrap());
    let mut attached = Store::attach_or_open(&path).unwrap();
    // Reads go on under WAL; only writers wait.
    assert_eq!(attached.read(|tx| tx.counter("x")).unwrap(), 0);
    assert!(
        start.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    // The probe left this connection's own timeout as it was.
    other.set_busy_timeout(std::time::Duration::from_millis(50)).unwrap();
    assert!(other.write_locked().unwrap());
    let e = other.write(|tx| tx.set_counter("x", 1)).unwrap_err();
    assert!(e.is_busy(), "{e}");
    store.sqlite_conn().execute_batch("ROLLBACK").unwrap();
    assert!(!other.write_locked().unwrap());
    other.write(|tx| tx.set_counter("x", 1)).unwrap();
}

/// Records a channel event and parks or refuses it as the webhook handlers
/// do; returns its row id.
fn channel_event(tx: &Tx<'_>, event_id: &str, key: &str, status: &str, reason: &str, at: DateTime<Utc>) -> i64 {
    let ev = NewChannelEvent {
        source: SOURCE_MOTOR,
        event_id,
        kind: "motor_event",
        message_id: None,
        intention_key: Some(key),
        payload: "{}",
    };
    let Recorded::New(row) = tx.record_channel_event(&ev, at).unwrap() else {
        panic!("{event_id} is new")
    };
    if !status.is_empty() {
        let status = crate::domain::channel_event::EventStatus::parse(status).expect("a channel event status");
        tx.set_channel_event_reason(row, status, reason).unwrap();
    }
    row
}

/// Parked and refused channel events are a technician's cases: listed
/// only when asked for, first, with their reason, by search too; a mark
/// "atendido" covers one until ever (a copy is not news); old ones and
/// applied ones are no cases.
#[test]
fn parked_and_refused_channel_events_are_cases_when_asked_for() {
    let (_dir, mut store) = temp_store();
    let (cid, contact) = seed(&mut store, "cita-1");
    let purpose = Purpose::Reminder { minutes: 1440 };
    let (parked, foreign) = store
        .write(|tx| {
            let n = intention("cita-1", purpose.clone(), 1, "hola");
            tx.test_reserve(&n, cid, contact)?;
            let key = n.key.to_string();
            let parked = channel_event(tx, "evt-a", &key, "parked", PARKED_KEY_MESSAGE_MISMATCH, now());
            let foreign = channel_event(
                tx,
                "evt-b",
                "otra-clinica:aviso:v1",
                "refused",
                REFUSED_FOREIGN_INSTANCE,
                now() - Duration::hours(1),
            );
            channel_event(
                tx,
                "evt-old",
                &key,
                "parked",
                PARKED_KEY_MESSAGE_MISMATCH,
                now() - Duration::days(8),
            );
            channel_event(tx, "evt-ok", &key, "", "", now());
            Ok::<_, StoreError>((parked, foreign))
        })
        .unwrap();
    let plain = AttentionQuery::new(now());
    let page = store.read(|tx| tx.attention(&plain)).unwrap();
    assert!(page.rows.iter().all(|r| r.kind != RowKind::ChannelEvent));
    let mut q = AttentionQuery::new(now());
    q.channel_events = true;
    let page = store.read(|tx| tx.attention(&q)).unwrap();
    let events: Vec<&AttentionRow> = page.rows.iter().take(2).collect();
    assert!(
        events.iter().all(|r| r.kind == RowKind::ChannelEvent),
        "{:?}",
        page.rows
    );
    assert_eq!(page.total, page.rows.len() as i64);
    assert_eq!(page.total, store.read(|tx| tx.attention(&plain)).unwrap().total + 2);
    let p = events.iter().find(|r| r.subject_id == parked).unwrap();
    assert_eq!(
        (p.state.as_str(), p.state_reason.as_deref(), p.commitment_ref.as_str()),
        ("parked", Some(PARKED_KEY_MESSAGE_MISMATCH), "cita-1")
    );
    assert_eq!(
        (p.commitment_id, p.name.as_deref(), p.intention_id),
        (Some(cid), Some("Ana"), None)
    );
    assert_eq!(p.last_event.as_deref(), Some("motor:evt-a"));
    assert_eq!(p.since, now());
    let f = events.iter().find(|r| r.subject_id == foreign).unwrap();
    assert_eq!(
        (f.state.as_str(), f.commitment_id, f.commitment_ref.as_str()),
        ("refused", None, "")
    );

    // Found by its event id, its key, or its patient.
    for (text, want) in [
        ("evt-b", vec![foreign]),
        ("otra-clinica", vec![foreign]),
        ("cita-1", vec![parked]),
    ] {
        q.filter = Some(text.into());
        let found: Vec<i64> = store
            .read(|tx| tx.attention(&q))
            .unwrap()
            .rows
            .iter()
            .filter(|r| r.kind == RowKind::ChannelEvent)
            .map(|r| r.subject_id)
            .collect();
        assert_eq!(found, want, "{text}");
    }
    q.filter = None;

    // Marked handled: off the open list, on the day's handled one; a copy
    // of the event is not news.
    let info = store
        .read(|tx| tx.case_info(RowKind::ChannelEvent, foreign))
        .unwrap()
        .unwrap();
    assert_eq!(
        (info.commitment_id, info.since),
        (None, Some(now() - Duration::hours(1)))
    );
    store
        .write(|tx| {
            let action = tx.record_operator_action(
                &OperatorAction {
                    operator: "tecnico",
                    role: "technician",
                    action: "resolve",
                    intention_id: None,
                    commitment_id: None,
                    scope: Some("channel_event"),
                    reason: "otra clínica, avisada",
                    result: "done",
                    detail: None,
                },
                now(),
            )?;
            tx.mark_handled(
                &NewMark {
                    kind: RowKind::ChannelEvent,
                    subject_id: foreign,
                    situation: info.since,
                    operator: "tecnico",
                    action_id: action,
                },
                now(),
            )?;
            let copy = NewChannelEvent {
                source: SOURCE_MOTOR,
                event_id: "evt-b",
                kind: "motor_event",
                message_id: None,
                intention_key: Some("otra-clinica:aviso:v1"),
                payload: "{}",
            };
            tx.record_channel_event(&copy, now()).map(|_| ())
        })
        .unwrap();
    let open: Vec<i64> = store
        .read(|tx| tx.attention(&q))
        .unwrap()
        .rows
        .iter()
        .filter(|r| r.kind == RowKind::ChannelEvent)
        .map(|r| r.subject_id)
        .collect();
    assert_eq!(open, [parked]);
    q.view = AttentionView::HandledSince(now() - Duration::hours(1));
    let handled = store.read(|tx| tx.attention(&q)).unwrap();
    assert_eq!(handled.rows.len(), 1);
    assert_eq!(
        (handled.rows[0].kind, handled.rows[0].subject_id),
        (RowKind::ChannelEvent, foreign)
    );
    assert_eq!(handled.rows[0].handled.as_ref().unwrap().operator, "tecnico");
    q.channel_events = false;
    assert_eq!(store.read(|tx| tx.attention(&q)).unwrap().total, 0);
}

/// Migration 0007 rebuilds `attention_handled` (a wider CHECK) with every
/// mark kept, and adds the dispatchers' heartbeat table.
#[test]
fn migration_0007_keeps_the_marks_and_admits_channel_events() {
    let (dir, store) = temp_store();
    let n = ms(now());
    store
        .sqlite_conn()
        .execute_batch(&format!(
            "INSERT INTO operator_actions(id, at, operator, role, action, reason, result)
                 VALUES (1, {n}, 'recepcion', 'front_desk', 'resolve', 'x', 'done');
             INSERT INTO attention_handled(kind, subject_id, handled_at, situation_at, operator, action_id)
                 VALUES ('intention', 7, {n}, {n}, 'recepcion', 1), ('refused', 2, {n}, NULL, 'tecnico', 1);
             DROP TABLE dispatchers;
             DROP TRIGGER contact_phone_suffixes_insert; DROP TRIGGER contact_phone_suffixes_update;
             DROP TRIGGER contact_phone_suffixes_delete; DROP TABLE contact_phone_suffixes;
             DROP TRIGGER commitment_search_names_insert; DROP TRIGGER commitment_search_names_update;
             DROP TRIGGER commitment_search_names_delete; DROP TRIGGER commitment_search_names_contact;
             DROP TABLE commitment_search_words; DROP TABLE commitment_search_names; DROP TABLE name_word_deletes;
             DROP TABLE feed_held; DROP TABLE feed_seen; DROP TABLE feeds;
             PRAGMA user_version = 6;"
        ))
        .unwrap();
    drop(store);
    let store = Store::open(&dir.path().join("ledger.db")).unwrap();
    let marks: i64 = store
        .sqlite_conn()
        .query_row("SELECT count(*) FROM attention_handled", [], |r| r.get(0))
        .unwrap();
    assert_eq!(marks, 2);
    store
        .sqlite_conn()
        .execute_batch(&format!(
            "INSERT INTO attention_handled(kind, subject_id, handled_at, situation_at, operator, action_id)
                 VALUES ('channel_event', 1, {n}, {n}, 'tecnico', 1);
             INSERT INTO dispatchers(id, host, pid, state, started_at, beat_at, interval_ms)
                 VALUES ('d', 'h', 1, 'running', {n}, {n}, 5000);"
        ))
        .unwrap();
    let bad = store.sqlite_conn().execute_batch(&format!(
        "INSERT INTO attention_handled(kind, subject_id, handled_at, operator, action_id)
             VALUES ('other', 1, {n}, 'x', 1)"
    ));
    assert!(bad.is_err());
}
