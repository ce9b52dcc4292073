//! The webhook, inbound, notification, operator, refusal and recovery
//! operations of the store on both backends, from one definition: each
//! body runs on a SQLite file and on a PostgreSQL schema with the same
//! assertions (the helper is `store_backends.rs`'s `both`, plus a way to
//! write fixture rows the store has no operation for).

mod pg_common;

use chrono::{DateTime, Duration, TimeZone, Utc};
use unavez_ledger::domain::counter::Counter;
use unavez_ledger::domain::status::Report;
use unavez_ledger::location::Location;
use unavez_ledger::store::{
    NewChannelEvent, OpenOptions, Recorded, SOURCE_CLOUD, SOURCE_MOTOR, StatusOutcome, Store, StoreError,
};
use unavez_testkit::PgSchema;

/// Plain SQL on the ledger under test, for fixture rows the store has no
/// operation for (its own connection, outside the store's transactions).
enum Fixture {
    Sqlite(std::path::PathBuf),
    Pg(String),
}

impl Fixture {
    fn sql(&self, script: &str) {
        match self {
            Fixture::Sqlite(path) => rusqlite::Connection::open(path)
                .and_then(|c| c.execute_batch(script))
                .unwrap_or_else(|e| panic!("{e}: {script}")),
            Fixture::Pg(url) => postgres::Client::connect(url, postgres::NoTls)
                .and_then(|mut c| c.batch_execute(script))
                .unwrap_or_else(|e| panic!("{e}: {script}")),
        }
    }

    /// Commitment `id` (`ref` `cita-<id>`, version 1, scheduled at
    /// `starts`) of contact `contact`, with a contact row for it.
    fn commitment(&self, id: i64, contact: i64, starts: i64) {
        self.sql(&format!(
            "INSERT INTO contacts(id, phone, created_at, updated_at) VALUES ({contact}, '+5199900{contact}', 0, 0)
             ON CONFLICT DO NOTHING;
             INSERT INTO commitments(id, ref, kind, status, version, contact_id, starts_at, created_at, updated_at)
             VALUES ({id}, 'cita-{id}', 'appointment', 'scheduled', 1, {contact}, {starts}, 0, 0);"
        ));
    }

    /// Intention `id` (key `k<id>`) of commitment `commitment`, in `state`.
    fn intention(&self, id: i64, commitment: i64, state: &str, extra: &str) {
        self.sql(&format!(
            "INSERT INTO intentions(id, key, commitment_id, commitment_version, purpose, recipient, category,
                 channel, template, language, parameters, body, fingerprint, correlation_id, due_at, day, state,
                 state_changed_at, created_by, created_at, updated_at)
             VALUES ({id}, 'k{id}', {commitment}, 1, 'p', '+5199900{commitment}', 'transactional', 'motor', 't',
                 'es', '[]', 'b', 'f', 'c', 1000, '2026-12-01', '{state}', 1000, 'planner', 0, 0);
             {extra}"
        ));
    }

    /// Attempt `id` (number `n`) of intention `intention`.
    fn attempt(&self, id: i64, intention: i64, n: i64, ended: Option<i64>, outcome: &str, message_id: Option<&str>) {
        let ended = ended.map_or("NULL".to_string(), |e| e.to_string());
        let mid = message_id.map_or("NULL".to_string(), |m| format!("'{m}'"));
        self.sql(&format!(
            "INSERT INTO attempts(id, intention_id, n, worker, channel, started_at, ended_at, outcome, message_id,
                 commitment_version_checked)
             VALUES ({id}, {intention}, {n}, 'w', 'motor', 1000, {ended}, '{outcome}', {mid}, 1)"
        ));
    }
}

/// Runs `body` on a fresh SQLite ledger and on a fresh PostgreSQL one.
fn both(body: impl Fn(&mut Store, &Fixture)) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let mut sqlite = Store::open(&path).unwrap();
    body(&mut sqlite, &Fixture::Sqlite(path));
    let schema = PgSchema::new();
    let mut pg = Store::open_location(
        &Location::Postgres(Box::new(pg_common::url(&schema))),
        &OpenOptions::CREATE,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(pg.is_pg());
    body(&mut pg, &Fixture::Pg(schema.url.clone()));
}

fn at(minutes: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, 0).unwrap() + Duration::minutes(minutes)
}

fn event<'a>(event_id: &'a str, message_id: Option<&'a str>, key: Option<&'a str>) -> NewChannelEvent<'a> {
    NewChannelEvent {
        source: SOURCE_CLOUD,
        event_id,
        kind: "status",
        message_id,
        intention_key: key,
        // Not a status WhatsApp sends: a pending copy of it is ignored when
        // correlated (no report), which keeps the state machine out of it.
        payload: "{}",
    }
}

fn report() -> Report {
    Report {
        signal: None,
        status: "delivered".into(),
        evidence: "cloud:e".into(),
        note: None,
        error_code: None,
    }
}

fn ok<T>(r: Result<T, StoreError>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_channel_event_is_recorded_once_and_its_copies_counted() {
    both(|store, _| {
        store
            .write(|tx| {
                let first = tx.record_channel_event(&event("w1:delivered:1", Some("w1"), None), at(0))?;
                let Recorded::New(row) = first else { panic!("{first:?}") };
                let again = tx.record_channel_event(&event("w1:delivered:1", Some("w1"), None), at(1))?;
                assert_eq!(again, Recorded::Duplicate { row, intention_id: None });
                tx.record_channel_event(&event("w1:delivered:1", Some("w1"), None), at(2))?;
                let motor = NewChannelEvent {
                    source: SOURCE_MOTOR,
                    ..event("m1", None, None)
                };
                tx.record_channel_event(&motor, at(2))?;
                tx.mark_channel_event(row, "applied", None, at(3))?;
                Ok::<_, StoreError>(())
            })
            .unwrap();
        let on = store.path().display().to_string();
        store
            .read(|tx| {
                assert_eq!(
                    tx.channel_event(SOURCE_CLOUD, "w1:delivered:1")?,
                    Some(("status".into(), "applied".into(), None, 3)),
                    "on {on}"
                );
                assert_eq!(tx.channel_event(SOURCE_CLOUD, "nope")?, None);
                assert_eq!(tx.extra_copies(SOURCE_CLOUD)?, 2);
                assert_eq!(tx.extra_copies(SOURCE_MOTOR)?, 0);
                assert_eq!(tx.extra_copies("other")?, 0);
                assert_eq!(tx.counter(&Counter::DuplicateEvents.name())?, 2);
                let listed = tx.channel_events(10)?;
                assert_eq!(listed.len(), 2);
                assert_eq!(listed[0].0, SOURCE_CLOUD);
                assert_eq!(listed[1], (SOURCE_MOTOR.into(), "m1".into(), "status".into(), "received".into(), None));
                Ok::<_, StoreError>(())
            })
            .unwrap();
    });
}

#[test]
fn a_status_without_its_intention_waits_and_is_applied_once_its_message_id_is_known() {
    both(|store, fx| {
        fx.commitment(101, 201, 0);
        fx.intention(301, 101, "accepted", "");
        let outcome = ok(store.write(|tx| tx.ingest_status(&event("w9:sent:1", Some("w9"), None), &report(), at(0))));
        assert_eq!(outcome, StatusOutcome::Pending);
        let dup = ok(store.write(|tx| tx.ingest_status(&event("w9:sent:1", Some("w9"), None), &report(), at(0))));
        assert_eq!(dup, StatusOutcome::Duplicate { intention_id: None });
        // An old stray outside the sweep's window stays pending.
        ok(store.write(|tx| tx.ingest_status(&event("old:sent:1", Some("old"), None), &report(), at(-80 * 60))));
        assert_eq!(ok(store.read(|tx| tx.pending_status_count())), 2);
        assert_eq!(ok(store.write(|tx| tx.sweep_pending_statuses(10, at(1)))), 0);

        // The attempt learns the message id: the sweep correlates it, the
        // intention learns it too, and the stored payload (no report) is
        // ignored rather than applied.
        fx.attempt(401, 301, 1, Some(1000), "accepted", Some("w9"));
        assert_eq!(ok(store.write(|tx| tx.sweep_pending_statuses(10, at(2)))), 1);
        let on = store.path().display().to_string();
        store
            .read(|tx| {
                assert_eq!(tx.pending_status_count()?, 1, "on {on}");
                let (_, status, _, copies) = tx.channel_event(SOURCE_CLOUD, "w9:sent:1")?.unwrap();
                assert_eq!((status.as_str(), copies), ("ignored", 2));
                assert_eq!(tx.channel_events(10)?[0].4, Some(301));
                Ok::<_, StoreError>(())
            })
            .unwrap();
        // Known by its message id now, on the intention itself.
        assert_eq!(ok(store.write(|tx| tx.correlate_status(Some("w9"), None, at(3)))), Some(301));
        assert_eq!(ok(store.write(|tx| tx.correlate_status(Some("zz"), None, at(3)))), None);
        // A second pending event for it is applied as soon as asked.
        // (Its row id from the store: PostgreSQL spends an id on every
        // insert that conflicted, so ids are not counted rows.)
        let recorded = ok(store.write(|tx| tx.record_channel_event(&event("w9:read:2", Some("w9"), None), at(4))));
        let Recorded::New(row) = recorded else { panic!("{recorded:?}") };
        ok(store.write(|tx| tx.mark_channel_event(row, "pending", None, at(4))));
        assert_eq!(ok(store.write(|tx| tx.apply_pending_statuses_for(301, at(5)))), 1);
        assert_eq!(ok(store.write(|tx| tx.apply_pending_statuses_for(301, at(5)))), 0);
    });
}

#[test]
fn provider_references_are_learnt_once_and_never_overwritten() {
    both(|store, fx| {
        fx.commitment(102, 202, 0);
        fx.intention(302, 102, "dispatching", "");
        ok(store.write(|tx| tx.set_provider_refs(302, Some("cmd-1"), None, at(0))));
        ok(store.write(|tx| tx.set_provider_refs(302, Some("cmd-2"), Some("wm-1"), at(1))));
        ok(store.write(|tx| tx.set_provider_refs(302, None, Some("wm-2"), at(2))));
        // Whichever id the intention is found by, it is the first one kept.
        assert_eq!(ok(store.write(|tx| tx.correlate_status(Some("wm-1"), None, at(3)))), Some(302));
        assert_eq!(ok(store.write(|tx| tx.correlate_status(Some("wm-2"), None, at(3)))), None);
    });
}
