//! The PostgreSQL ledger keeps the contract of the dispatcher's and the
//! planner's rows, through the same store operations as SQLite: reserve N (a key given twice or already stored comes
//! back as existing, with the stored fingerprint), the claim's facts, the
//! attempt rows and their finish facts, channel references, next tries,
//! the version-sequence facts and counters.

mod pg_common;

use chrono::{Duration, Utc};
use pg_common::ledger;
use unavez_ledger::api::{NewAttempt, Reservation};
use unavez_ledger::domain::attempt::AttemptOutcome;
use unavez_ledger::domain::counter::Counter;
use unavez_ledger::domain::finish::AttemptWrite;
use unavez_ledger::domain::history::{Cause, HistorySignal, Said};
use unavez_ledger::domain::intention::{NewIntention, correlation_id};
use unavez_ledger::domain::key::{IntentionKey, Purpose};
use unavez_ledger::domain::state::IntentionState;
use unavez_ledger::location::Location;
use unavez_ledger::pg::PgLedger;
use unavez_ledger::store::{OpenOptions, Store, StoreError};
use unavez_ledger::templates::Category;
use unavez_testkit::PgSchema;

fn intention(reference: &str, purpose: Purpose, body: &str) -> NewIntention {
    let key = IntentionKey::for_commitment(reference, &purpose, 1).unwrap();
    NewIntention {
        correlation_id: correlation_id(&key),
        key,
        commitment_ref: reference.into(),
        commitment_version: 1,
        asks_confirmation: matches!(purpose, Purpose::Reminder { minutes: 1440 }),
        purpose,
        recipient: "+51987654321".into(),
        category: Category::Transactional,
        channel: "whatsapp".into(),
        template: "recordatorio_cita".into(),
        language: "es_PE".into(),
        parameters: vec!["Ana".into(), body.into()],
        body: body.into(),
        due_at: Utc::now() - Duration::seconds(5),
        expires_at: None,
        day: "2026-11-30".parse().unwrap(),
        created_by: "planner".into(),
        authorized_by: None,
        reason: None,
        related_key: None,
    }
}

/// A contact and an appointment; returns (commitment id, contact id).
fn seed(ledger: &mut PgLedger) -> (i64, i64) {
    let r = ledger
        .client()
        .query_one(
            "WITH k AS (INSERT INTO contacts(phone, name, created_at, updated_at)
                        VALUES ('+51987654321', 'Ana', 0, 0) RETURNING id)
             INSERT INTO commitments(ref, kind, status, version, starts_at, contact_id, created_at, updated_at)
             SELECT 'CITA-7', 'appointment', 'scheduled', 1, 1800000000000, id, 0, 0 FROM k
             RETURNING id, contact_id",
            &[],
        )
        .unwrap();
    (r.get(0), r.get(1))
}

#[test]
fn reserve_claim_facts_attempts_and_counters_keep_the_ledger_contract() {
    let schema = PgSchema::new();
    let mut pg = ledger(&schema);
    let (cid, kid) = seed(&mut pg);
    let mut ledger = Store::open_location(
        &Location::Postgres(Box::new(pg_common::url(&schema))),
        &OpenOptions::EXISTING,
    )
    .unwrap();
    let booking = intention("CITA-7", Purpose::Booking, "hola");
    let reminder = intention("CITA-7", Purpose::Reminder { minutes: 1440 }, "mañana");
    let res = |n: &'static NewIntention, fp: &'static str| Reservation {
        intention: n,
        fingerprint: fp,
        commitment_id: cid,
        contact_id: Some(kid),
        said: Said::new(HistorySignal::Reserved, Cause::Planner),
        at: Utc::now(),
    };
    let booking: &'static NewIntention = Box::leak(Box::new(booking));
    let reminder: &'static NewIntention = Box::leak(Box::new(reminder));
    let first = ledger
        .write(|tx| tx.reserve_many(&[res(booking, "fp-b"), res(reminder, "fp-r"), res(booking, "fp-other")]))
        .unwrap();
    assert!(first[0].inserted && first[1].inserted && !first[2].inserted);
    assert_eq!(first[2].id, first[0].id);
    assert_eq!(
        first[2].fingerprint, "fp-b",
        "the stored fingerprint, for the caller to compare"
    );
    let again = ledger.write(|tx| tx.reserve_many(&[res(reminder, "fp-r2")])).unwrap();
    assert_eq!(
        (again[0].id, again[0].inserted, again[0].fingerprint.as_str()),
        (first[1].id, false, "fp-r")
    );
    let (b, r) = (first[0].id, first[1].id);

    let (facts, planned) = ledger
        .write(|tx| {
            Ok::<_, StoreError>((
                tx.claim_facts(&[r, b, 999], Some(Utc::now() - Duration::days(1)))?,
                tx.planned_of_commitment(cid)?,
            ))
        })
        .unwrap();
    assert_eq!(facts.iter().map(|f| f.intention.id).collect::<Vec<_>>(), vec![r, b]);
    let f = &facts[0];
    assert_eq!(f.intention.key, reminder.key.to_string());
    assert_eq!(f.intention.parameters, vec!["Ana".to_string(), "mañana".into()]);
    assert!(f.intention.asks_confirmation);
    assert_eq!(f.intention.state, IntentionState::Planned);
    assert_eq!(f.commitment.version, 1);
    assert!(!f.commitment.cancelled);
    assert_eq!(f.contact.as_ref().map(|c| c.name.as_deref()), Some(Some("Ana")));
    assert!(!f.acknowledged);
    assert_eq!((f.sent_today, f.counted_today), (0, false));
    assert_eq!(planned.iter().map(|p| p.id).collect::<Vec<_>>(), vec![b, r]);

    let now = Utc::now();
    let attempt = ledger
        .write(|tx| {
            let ids = tx.start_attempts(&[NewAttempt {
                intention_id: b,
                n: 1,
                worker: "w".into(),
                channel: "whatsapp".into(),
                version_checked: 1,
                lease: Some(("host-a".into(), now + Duration::seconds(30))),
                at: now,
            }])?;
            tx.write_attempts(&[AttemptWrite::End {
                attempt_id: ids[0],
                outcome: AttemptOutcome::Accepted,
                http_status: Some(200),
                command_id: Some("cmd-1".into()),
                message_id: Some("wamid.1".into()),
                error_code: None,
                error_detail: None,
                at: now,
            }])?;
            tx.set_channel_refs(&[(b, Some("cmd-1".into()), Some("wamid.1".into()))])?;
            tx.set_next_attempt(&[(r, Some(now + Duration::minutes(5)))], now)?;
            tx.bump_counter(Counter::DuplicateKeys, 2)?;
            tx.bump_counter(Counter::DuplicateKeys, 3)?;
            Ok::<_, StoreError>(ids[0])
        })
        .unwrap();
    let (finish, seq, row, facts) = ledger
        .write(|tx| {
            Ok::<_, StoreError>((
                tx.finish_facts(&[attempt])?,
                tx.sequence_facts(b, &["update"])?,
                tx.intention(b)?,
                tx.claim_facts(&[r], Some(now - Duration::days(1)))?,
            ))
        })
        .unwrap();
    assert_eq!(
        (finish[0].intention_id, finish[0].n, finish[0].attempt_ended),
        (b, 1, true)
    );
    assert_eq!(seq.producer, Some((1, 1)));
    assert_eq!(seq.notice, None);
    assert!(seq.appointment);
    assert_eq!(row.provider_message_id.as_deref(), Some("wamid.1"));
    assert_eq!(row.lease_owner.as_deref(), Some("host-a"));
    assert!(facts[0].intention.next_attempt_at.is_some());
    assert_eq!(facts[0].sent_today, 1, "the booking notice reached the channel today");
    let counter: i64 = pg
        .client()
        .query_one(
            "SELECT value FROM counters WHERE name = $1",
            &[&Counter::DuplicateKeys.name()],
        )
        .unwrap()
        .get(0);
    assert_eq!(counter, 5);
    assert!(ledger.write(|tx| tx.finish_facts(&[attempt + 100])).is_err());
}
