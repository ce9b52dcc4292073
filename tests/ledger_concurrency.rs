//! Atomic reservation under contention: threads with their own connections
//! and separate OS processes presenting the same intentions at once, on
//! both ledgers (`on_both!`).

mod ledger_support;

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};

use chrono::{DateTime, Duration, TimeZone, Utc};
use ledger_support::*;
use unavez::domain::commitment::{Commitment, CommitmentKind};
use unavez::domain::intention::{NewIntention, correlation_id};
use unavez::domain::key::{IntentionKey, Purpose};
use unavez::store::{Reserved, Store, StoreError};
use unavez::templates::Category;
use unavez_testkit::{Backend, on_both};

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 15, 0, 0).unwrap()
}

/// The n-th of the 500 intentions every thread presents.
fn intention(n: i64) -> NewIntention {
    let key = IntentionKey::for_commitment("cita-1042", &Purpose::Booking, n).unwrap();
    NewIntention {
        correlation_id: correlation_id(&key),
        key,
        commitment_ref: "cita-1042".into(),
        commitment_version: n,
        purpose: Purpose::Booking,
        recipient: "+51987654321".into(),
        category: Category::Transactional,
        channel: "whatsapp".into(),
        template: "cita_reserva".into(),
        language: "es_PE".into(),
        parameters: vec!["Ana".into(), format!("{n}")],
        body: format!("Hola Ana, mensaje {n}"),
        due_at: now() + Duration::minutes(n),
        expires_at: None,
        asks_confirmation: false,
        day: "2026-11-29".parse().unwrap(),
        created_by: "planner".into(),
        authorized_by: None,
        reason: None,
        related_key: None,
    }
}

fn sixteen_threads_presenting_the_same_500_intentions_make_500_rows_with_the_same_ids(backend: Backend) {
    const THREADS: usize = 16;
    const N: i64 = 500;
    let ledger = backend.ledger();
    let path = ledger.db.clone();
    let (commitment_id, contact_id) = {
        let mut store = Store::open(&path).unwrap();
        store
            .write(|tx| {
                let contact = tx.upsert_contact("+51987654321", Some("Ana"), None, now())?;
                let c = Commitment {
                    reference: "cita-1042".into(),
                    kind: CommitmentKind::Appointment,
                    status: unavez::domain::commitment::CommitmentStatus::Scheduled,
                    version: 1,
                    starts_at: Some(now() + Duration::days(3)),
                    service: None,
                    location: None,
                    phone: Some("+51987654321".into()),
                    name: Some("Ana".into()),
                    language: None,
                    confirmed_at: None,
                    manual_contact_at: None,
                };
                Ok::<_, StoreError>((tx.save_commitment(&c, Some(contact), now())?, contact))
            })
            .unwrap()
    };
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let path = path.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let mut store = Store::open(&path).unwrap();
                // Each thread walks the list from a different start, in
                // small transactions, so the threads interleave on keys.
                let order: Vec<i64> = (0..N).map(|i| (i + t as i64 * 31) % N + 1).collect();
                let mut seen = BTreeMap::new();
                let mut new = 0;
                barrier.wait();
                for chunk in order.chunks(25) {
                    let got = store
                        .write(|tx| {
                            chunk
                                .iter()
                                .map(|&n| {
                                    Ok((
                                        n,
                                        unavez::planning::reserve(
                                            tx,
                                            &intention(n),
                                            commitment_id,
                                            Some(contact_id),
                                            now(),
                                        )?,
                                    ))
                                })
                                .collect::<Result<Vec<_>, StoreError>>()
                        })
                        .unwrap();
                    for (n, r) in got {
                        if matches!(r, Reserved::New(_)) {
                            new += 1;
                        }
                        seen.insert(n, r.id());
                    }
                }
                (seen, new)
            })
        })
        .collect();
    let results: Vec<(BTreeMap<i64, i64>, usize)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let total_new: usize = results.iter().map(|r| r.1).sum();
    assert_eq!(total_new, N as usize, "each intention is new exactly once");
    let first = &results[0].0;
    assert_eq!(first.len(), N as usize);
    for (t, (seen, _)) in results.iter().enumerate() {
        assert_eq!(seen, first, "thread {t} saw other ids");
    }
    let mut store = Store::open(&path).unwrap();
    let rows = store
        .read(|tx| {
            tx.list_intentions(&unavez::store::IntentFilter {
                limit: 10_000,
                ..Default::default()
            })
        })
        .unwrap();
    assert_eq!(rows.len(), N as usize);
    for r in &rows {
        let n = r.commitment_version;
        assert_eq!(first[&n], r.id);
        assert_eq!(r.fingerprint, intention(n).fingerprint());
    }
}

fn sixteen_threads_ingesting_the_same_events_store_each_once(backend: Backend) {
    use unavez::config::Policy;
    use unavez::domain::event::BookingEvent;
    use unavez::ingest::{Outcome, ingest};
    use unavez::planner::Planner;
    use unavez::templates::Templates;

    let ledger = backend.ledger();
    let path = ledger.db.clone();
    Store::open(&path).unwrap();
    let events: Vec<BookingEvent> = (0..60)
        .map(|i| {
            BookingEvent::from_json(&format!(
                r#"{{"event_id":"evt-{i}","type":"appointment.scheduled","ref":"cita-{i}","starts_at":"2026-12-0{}T09:30:00-05:00","contact":{{"phone":"+519876543{:02}","name":"Ana"}}}}"#,
                1 + i % 5,
                i
            ))
            .unwrap()
        })
        .collect();
    let events = Arc::new(events);
    let barrier = Arc::new(Barrier::new(16));
    let handles: Vec<_> = (0..16)
        .map(|_| {
            let (path, events, barrier) = (path.clone(), events.clone(), barrier.clone());
            std::thread::spawn(move || {
                let policy = Policy::default();
                let templates = Templates::embedded();
                let planner = Planner {
                    policy: &policy,
                    templates: &templates,
                    tz: chrono_tz::America::Lima,
                };
                let mut store = Store::open(&path).unwrap();
                barrier.wait();
                let mut stored = 0;
                for ev in events.iter() {
                    let o = store.write(|tx| ingest(tx, &planner, ev, "test", now())).unwrap();
                    if matches!(o, Outcome::Stored { .. }) {
                        stored += 1;
                    }
                }
                stored
            })
        })
        .collect();
    let stored: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(stored, 60, "every event applied exactly once across threads");
    let mut store = Store::open(&path).unwrap();
    let rows = store
        .read(|tx| {
            tx.list_intentions(&unavez::store::IntentFilter {
                limit: 10_000,
                ..Default::default()
            })
        })
        .unwrap();
    assert_eq!(rows.len(), 180, "booking notice and two reminders per appointment");
}

fn four_processes_importing_the_same_file_at_once_equal_one_import(backend: Backend) {
    let ledger = backend.ledger();
    let (dir, db) = (&ledger.dir, ledger.db.clone());
    // A larger file than the fixture, so that the imports overlap.
    let mut text = std::fs::read_to_string(fixture("agenda.jsonl")).unwrap();
    for i in 0..150 {
        text.push_str(&format!(
            "{{\"event_id\":\"evt-p{i}\",\"type\":\"appointment.scheduled\",\"ref\":\"cita-p{i}\",\"starts_at\":\"2031-04-{:02}T{:02}:00:00-05:00\",\"contact\":{{\"phone\":\"+5198700{:04}\",\"name\":\"Paciente {i}\"}},\"service\":\"Medicina general\",\"location\":\"Sede Miraflores\"}}\n",
            1 + i % 28,
            8 + i % 10,
            i
        ));
    }
    let file = dir.path().join("agenda.jsonl");
    std::fs::write(&file, &text).unwrap();
    let events = 160;

    let children: Vec<_> = (0..4)
        .map(|_| {
            unavez(&db)
                .arg("import")
                .arg(&file)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<_> = children.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    let mut stored = 0;
    let mut duplicates = 0;
    for o in &outputs {
        let (out, err) = (stdout(o), stderr(o));
        assert!(
            o.status.success(),
            "exit {:?}\nstdout:\n{out}\nstderr:\n{err}",
            o.status
        );
        assert!(out.contains("already present"), "{out}");
        assert!(!err.to_lowercase().contains("error"), "an error surfaced: {err}");
        stored += report_number(&out, "stored") + report_number(&out, "unchanged");
        duplicates += report_number(&out, "already present");
    }
    assert_eq!(stored, events, "each event applied once");
    assert_eq!(
        duplicates,
        3 * events,
        "the other three saw every event as already present"
    );

    let alone = backend.ledger();
    let single = alone.db.clone();
    assert!(run(&single, &["import", file.to_str().unwrap()]).status.success());
    let shared_rows = intention_summary(&db);
    assert_eq!(shared_rows.len(), intention_summary(&single).len());
    assert_eq!(shared_rows, intention_summary(&single));
    assert_eq!(
        json(&db, &["commitments", "list", "--limit", "1000"])
            .as_array()
            .unwrap()
            .len(),
        json(&single, &["commitments", "list", "--limit", "1000"])
            .as_array()
            .unwrap()
            .len()
    );
}

on_both!(
    sixteen_threads_presenting_the_same_500_intentions_make_500_rows_with_the_same_ids,
    sixteen_threads_ingesting_the_same_events_store_each_once,
    four_processes_importing_the_same_file_at_once_equal_one_import,
);
