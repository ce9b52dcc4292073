//! The resend families Atención's rows and the patient card read for a
//! whole page at once (issue 25 §3) answer alike on both backends: any
//! member selects its family, a legacy chain (a resend of a resend) is
//! followed up to the original, and a page larger than one statement's
//! batch reads every row.

mod backends_fixture;
mod pg_common;

use backends_fixture::{Fixture, open};
use chrono::{Duration, TimeZone, Utc};
use unavez_ledger::domain::guard::{Family, FamilyResend};
use unavez_ledger::domain::state::IntentionState;
use unavez_testkit::{Backend, on_both};

fn now() -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 15, 0, 0).unwrap()
}

fn at(minutes: i64) -> chrono::DateTime<Utc> {
    now() + Duration::minutes(minutes)
}

/// Commitment 10 (now at version 2): original 100 (failed, planned for v1,
/// expiring), its resend 101 (planned) and a legacy resend 102 of 101
/// (cancelled). Commitment 20: a lone message 200.
fn fixture(f: &Fixture) {
    f.sql(&format!(
        "INSERT INTO contacts(id, phone, name, created_at, updated_at) VALUES (1, '+51908439509', 'María', 0, 0);
         INSERT INTO commitments(id, ref, kind, status, version, contact_id, contact_name, starts_at, created_at,
             updated_at)
         VALUES (10, 'cita-10', 'appointment', 'scheduled', 2, 1, NULL, {soon}, 0, 0),
                (20, 'cita-20', 'appointment', 'scheduled', 1, 1, NULL, {soon}, 0, 0);",
        soon = at(120).timestamp_millis()
    ));
    f.intention(
        100,
        10,
        "failed",
        &format!(
            "UPDATE intentions SET expires_at = {} WHERE id = 100;",
            at(60).timestamp_millis()
        ),
    );
    f.intention(
        101,
        10,
        "planned",
        &format!(
            "UPDATE intentions SET related_id = 100, authorized_by = 'ana', created_at = {} WHERE id = 101;",
            at(-30).timestamp_millis()
        ),
    );
    f.intention(
        102,
        10,
        "cancelled",
        &format!(
            "UPDATE intentions SET related_id = 101, authorized_by = 'luis', created_at = {} WHERE id = 102;",
            at(-10).timestamp_millis()
        ),
    );
    f.intention(200, 20, "read", "");
}

fn families_follow_the_chain_for_a_whole_page(backend: Backend) {
    let (mut store, f, _l) = open(backend);
    fixture(&f);
    let want = Family {
        original: IntentionState::Failed,
        planned_version: 1,
        current_version: 2,
        expires_at: Some(at(60)),
        resends: vec![
            FamilyResend {
                key: "k101".into(),
                state: IntentionState::Planned,
                authorized_by: Some("ana".into()),
                created_at: at(-30),
            },
            FamilyResend {
                key: "k102".into(),
                state: IntentionState::Cancelled,
                authorized_by: Some("luis".into()),
                created_at: at(-10),
            },
        ],
    };
    // A page of 120 ids (more than one statement's batch), most of them
    // of no intention.
    let ids: Vec<i64> = (1..=120).chain([200]).collect();
    let got = store.read(|tx| tx.families(&ids)).unwrap();
    assert_eq!(got.len(), 4, "{got:?}");
    for id in [100, 101, 102] {
        assert_eq!(got[&id], want, "family of #{id}");
    }
    assert_eq!(
        got[&200],
        Family {
            original: IntentionState::Read,
            planned_version: 1,
            current_version: 1,
            expires_at: None,
            resends: Vec::new(),
        }
    );
    // What the guard reads of it: 101 pending, both authorized today.
    let facts = got[&100].facts(2, chrono_tz::America::Lima, now());
    assert_eq!(facts.pending.map(|p| p.key).as_deref(), Some("k101"));
    assert_eq!(facts.authorized_today, 2);
    assert!(store.read(|tx| tx.families(&[])).unwrap().is_empty());

    // The patient card carries each message's family.
    let card = store
        .read(|tx| tx.patient_card("+51908439509", at(-60), at(60 * 24)))
        .unwrap()
        .unwrap();
    let cells: Vec<_> = card.commitments.iter().flat_map(|c| c.notifications.iter()).collect();
    assert_eq!(cells.len(), 4);
    for n in cells {
        let family = n.family.as_ref().expect("every message has its family");
        assert_eq!(family, &got[&n.intention_id], "#{}", n.intention_id);
        assert_eq!(n.resend_ask, None);
    }
}

on_both!(families_follow_the_chain_for_a_whole_page);
