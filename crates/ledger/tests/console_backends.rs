//! The console's screens answer alike on both backends: one generated
//! ledger (3,000 intentions over nine days, some cases needing a person,
//! a reschedule request, a refused booking event, a parked channel event,
//! a handled mark) is copied into PostgreSQL with `ledger copy`, and every
//! screen query is asked of both with the same parameters. The SQLite
//! answers are the reference (its own tests compare them with the full
//! ranking); PostgreSQL must give the same rows in the same order.

mod pg_common;

#[path = "../../bench/src/ledger_shape.rs"]
#[allow(dead_code)]
mod ledger_shape;

use chrono::{DateTime, Duration, TimeZone, Utc};
use unavez_ledger::copy::copy_sqlite_to_pg;
use unavez_ledger::domain::state::IntentionState;
use unavez_ledger::location::Location;
use unavez_ledger::store::{
    AttentionQuery, AttentionView, CounterQuery, IntentFilter, OpenOptions, RowKind, Store, StoreError, open_connection,
};
use unavez_testkit::PgSchema;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 15, 0, 0).unwrap()
}

fn generated(path: &std::path::Path) {
    drop(Store::open(path).unwrap());
    let mut c = open_connection(path).unwrap();
    let shape = ledger_shape::LedgerShape {
        contacts: 100,
        past_days: 6,
        future_days: 3,
        now: now(),
        tz: chrono_tz::America::Lima,
        total: 3000,
    };
    ledger_shape::write(&mut c, |c| ledger_shape::generate_contacts(c, 100, now())).unwrap();
    ledger_shape::write(&mut c, |c| ledger_shape::generate_intentions(c, &shape, 0, 3000)).unwrap();
    // Names written by plain SQL: filed in the typo index as the ledger
    // files the names it saves.
    Store::open(path).unwrap().write(|tx| tx.file_name_words()).unwrap();
    let t = now().timestamp_millis();
    c.execute_batch(&format!(
        "UPDATE intentions SET state = 'uncertain', state_reason = 'timeout' WHERE id % 13 = 0 AND state = 'read';
         UPDATE intentions SET state = 'review', state_reason = 'conflict' WHERE id % 29 = 0 AND state = 'read';
         UPDATE commitments SET reschedule_requested_at = {t} - 3600000 WHERE id IN (SELECT commitment_id FROM intentions
             WHERE starts_at > {t} ORDER BY id LIMIT 2);
         INSERT INTO refused_events(event_id, commitment_ref, type, version, conflict, fields, reason, source, payload,
             fingerprint, first_seen_at, last_seen_at)
             SELECT 'ev-refused-1', ref, 'appointment.rescheduled', version, 'same_version', '[\"starts_at\"]',
                 'same version, other content', 'http', '{{}}', 'fp', {t} - 60000, {t} - 60000
             FROM commitments ORDER BY id LIMIT 1;
         INSERT INTO channel_events(source, event_id, kind, status, payload, received_at, reason)
             VALUES ('cloud', 'wamid.parked', 'status', 'parked', '{{\"status\":\"read\"}}', {t} - 120000, 'key and message differ');
         INSERT INTO operator_actions(at, operator, role, action, intention_id, reason, result)
             SELECT {t} - 30000, 'ana', 'front_desk', 'resolve', id, 'llamó', 'ok'
             FROM intentions WHERE state = 'uncertain' ORDER BY id LIMIT 1;
         INSERT INTO attention_handled(kind, subject_id, handled_at, situation_at, operator, action_id)
             SELECT 'intention', i.id, {t} - 30000, i.state_changed_at, 'ana', a.id
             FROM operator_actions a JOIN intentions i ON i.id = a.intention_id;"
    ))
    .unwrap();
}

/// Every screen query, as text, in order.
fn screens(store: &mut Store) -> Vec<String> {
    let mut out = Vec::new();
    let day = "2026-11-29".parse().unwrap();
    let day_start = Utc.with_ymd_and_hms(2026, 11, 29, 5, 0, 0).unwrap();
    let mut queries = Vec::new();
    // A generated patient's name, surname first, and with a typo (the
    // fuzzy matches rank after the exact ones on both).
    let name: Vec<String> = ledger_shape::patient_name(4)
        .split(' ')
        .map(str::to_lowercase)
        .collect();
    let reversed = format!("{} {}", name[1], name[0]);
    let typo = format!("{} {}x", name[0], name[1]);
    for (filter, offset) in [
        (None, 0),
        (None, 50),
        (Some(reversed.as_str()), 0),
        (Some(typo.as_str()), 0),
        (Some("00"), 0),
        (Some("cita"), 0),
    ] {
        let mut q = AttentionQuery::new(now());
        q.filter = filter.map(str::to_string);
        q.offset = offset;
        q.channel_events = true;
        queries.push(q);
    }
    let mut handled = AttentionQuery::new(now());
    handled.view = AttentionView::HandledSince(now() - Duration::hours(1));
    handled.channel_events = true;
    queries.push(handled);
    store
        .read(|tx| {
            for q in &queries {
                out.push(format!("{:?}", tx.attention(q)?));
            }
            let name = ledger_shape::patient_name(1);
            for filter in [
                None,
                Some(name.as_str()),
                Some("+51 900 000 001"),
                Some("0001"),
                Some("12"),
            ] {
                out.push(format!(
                    "{:?}",
                    tx.upcoming(now(), now() + Duration::days(3), filter, 20, 0)?
                ));
            }
            out.push(format!("{:?}", tx.board(day)?));
            out.push(format!("{:?}", tx.board_hours(day, day_start)?));
            let cq = CounterQuery {
                day,
                states: vec!["read".into(), "uncertain".into()],
                reason: None,
            };
            out.push(format!("{:?}", tx.counter_rows(&cq, 20, 10)?));
            out.push(format!(
                "{:?}",
                tx.day_timings(
                    day,
                    now(),
                    &[IntentionState::Accepted, IntentionState::Read],
                    &[IntentionState::Read]
                )?
            ));
            out.push(format!("{:?}", tx.case_info(RowKind::Intention, 13)?));
            out.push(format!("{:?}", tx.case_info(RowKind::RefusedEvent, 1)?));
            out.push(format!("{:?}", tx.handled_mark(RowKind::Intention, 13)?));
            out.push(format!("{:?}", tx.due_queue(now())?));
            out.push(format!("{:?}", tx.resend_count(1)?));
            out.push(format!("{:?}", tx.pending_resend(1)?));
            out.push(format!("{:?}", tx.last_attempt_error(now() - Duration::days(30))?));
            out.push(format!("{:?}", tx.heartbeats(now() - Duration::days(1))?));
            let filter = IntentFilter {
                states: vec![IntentionState::Uncertain, IntentionState::Read],
                day: Some(day),
                limit: 30,
                offset: 5,
                ..IntentFilter::default()
            };
            out.push(format!("{:?}", tx.list_intentions(&filter)?));
            out.push(format!("{:?}", tx.count_by_state()?));
            out.push(format!("{:?}", tx.history(13)?));
            out.push(format!("{:?}", tx.attempts(13)?));
            out.push(format!("{:?}", tx.resend_family(13)?));
            let m = tx.metrics_snapshot()?;
            out.push(format!(
                "{:?} {:?} {:?} {:?} {:?} {:?}",
                m.counters, m.by_state, m.latency_to_acceptance, m.errors, m.channel_events, m.closures
            ));
            Ok::<_, StoreError>(())
        })
        .unwrap_or_else(|e| panic!("on {}: {e}", store.path().display()));
    out
}

#[test]
fn every_console_screen_reads_the_same_on_sqlite_and_postgresql() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clinic.db");
    generated(&path);
    let schema = PgSchema::new();
    let url = pg_common::url(&schema);
    copy_sqlite_to_pg(&path, &url, &mut |_, _, _| {}).unwrap_or_else(|e| panic!("{e}"));

    let on_sqlite = screens(&mut Store::open(&path).unwrap());
    let mut pg = Store::open_location(&Location::Postgres(Box::new(url)), &OpenOptions::EXISTING).unwrap();
    let on_pg = screens(&mut pg);
    assert!(
        on_sqlite[0].contains("Uncertain") || on_sqlite[0].contains("uncertain"),
        "{}",
        on_sqlite[0]
    );
    for (i, (a, b)) in on_sqlite.iter().zip(&on_pg).enumerate() {
        assert_eq!(a, b, "screen query #{i} differs");
    }
    assert_eq!(on_sqlite.len(), on_pg.len());
}
