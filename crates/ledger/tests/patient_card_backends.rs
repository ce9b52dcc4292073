//! The patient card's reads answer alike on both backends: a patient is a
//! contact (one phone); the card holds that contact's commitments in the
//! window asked for, each with its intentions; the chooser lists the
//! patients a search matches, one line per phone.

mod backends_fixture;
mod pg_common;

use backends_fixture::{Fixture, open};
use chrono::{Duration, TimeZone, Utc};
use unavez_testkit::{Backend, on_both};

fn ms(h: i64) -> i64 {
    (now() + Duration::hours(h)).timestamp_millis()
}

fn now() -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 15, 0, 0).unwrap()
}

/// Two patients who share a surname, a third one, commitments before,
/// inside and after the card's window.
fn fixture(f: &Fixture) {
    f.sql(&format!(
        "INSERT INTO contacts(id, phone, name, created_at, updated_at) VALUES
             (1, '+51908439509', 'María Flores', 0, 0),
             (2, '+51911222333', 'Rosa Flores', 0, 0),
             (3, '+51944555666', NULL, 0, 0);
         INSERT INTO commitments(id, ref, kind, status, version, contact_id, contact_name, starts_at, created_at, updated_at)
         VALUES (10, 'cita-10', 'appointment', 'scheduled', 1, 1, NULL, {old}, 0, 0),
                (11, 'cita-11', 'appointment', 'scheduled', 1, 1, NULL, {yesterday}, 0, 0),
                (12, 'cita-12', 'appointment', 'cancelled', 2, 1, NULL, {tomorrow}, 0, 0),
                (13, 'cita-13', 'appointment', 'scheduled', 1, 1, NULL, {far}, 0, 0),
                (20, 'cita-20', 'appointment', 'scheduled', 1, 2, NULL, {tomorrow}, 0, 0),
                (30, 'cita-30', 'appointment', 'scheduled', 1, 3, 'Juan Pérez', {tomorrow}, 0, 0);",
        old = ms(-30),
        yesterday = ms(-20),
        tomorrow = ms(20),
        far = ms(24 * 8),
    ));
    f.intention(100, 11, "read", "");
    f.intention(101, 12, "delivered", "");
    f.intention(
        102,
        12,
        "failed",
        "UPDATE intentions SET state_reason = 'no_salio' WHERE id = 102;",
    );
    f.intention(200, 20, "planned", "");
}

fn patient_card_reads_the_window_with_intentions(backend: Backend) {
    let (mut store, f, _l) = open(backend);
    fixture(&f);
    let (from, to) = (now() - Duration::hours(24), now() + Duration::days(7));
    let card = store
        .read(|tx| tx.patient_card("+51908439509", from, to))
        .unwrap()
        .expect("the contact exists");
    assert_eq!(card.contact_id, 1);
    assert_eq!(card.name.as_deref(), Some("María Flores"));
    let ids: Vec<i64> = card.commitments.iter().map(|c| c.commitment_id).collect();
    assert_eq!(ids, [11, 12], "only the window's commitments, by start time");
    let cells: Vec<(i64, &str, Option<&str>)> = card.commitments[1]
        .notifications
        .iter()
        .map(|n| (n.intention_id, n.state.as_str(), n.state_reason.as_deref()))
        .collect();
    assert_eq!(cells, [(101, "delivered", None), (102, "failed", Some("no_salio"))]);
    assert_eq!(card.commitments[0].notifications[0].intention_id, 100);
    // No contact with that phone: no card; a contact with nothing in the
    // window: an empty one.
    assert!(
        store
            .read(|tx| tx.patient_card("+51900000000", from, to))
            .unwrap()
            .is_none()
    );
    let none = store
        .read(|tx| tx.patient_card("+51908439509", from, from))
        .unwrap()
        .unwrap();
    assert!(none.commitments.is_empty());
    // A contact with no name takes the booking's.
    let juan = store
        .read(|tx| tx.patient_card("+51944555666", from, to))
        .unwrap()
        .unwrap();
    assert_eq!(juan.name.as_deref(), Some("Juan Pérez"));
}

fn patients_lists_one_line_per_phone(backend: Backend) {
    let (mut store, f, _l) = open(backend);
    fixture(&f);
    let mut names = |q: &str| -> Vec<(i64, Option<String>)> {
        store
            .read(|tx| tx.patients(q, 10))
            .unwrap()
            .into_iter()
            .map(|p| (p.contact_id, p.name))
            .collect()
    };
    // Four commitments of María's match, one line for her.
    assert_eq!(
        names("Flores"),
        [
            (1, Some("María Flores".to_string())),
            (2, Some("Rosa Flores".to_string()))
        ]
    );
    assert_eq!(names("9509"), [(1, Some("María Flores".to_string()))]);
    assert_eq!(names("Juan"), [(3, Some("Juan Pérez".to_string()))]);
    assert!(names("nadie").is_empty());
    assert!(names("  ").is_empty());
    // The limit is a count of patients, not of commitments.
    assert_eq!(store.read(|tx| tx.patients("Flores", 1)).unwrap().len(), 1);
}

on_both!(
    patient_card_reads_the_window_with_intentions,
    patients_lists_one_line_per_phone
);
