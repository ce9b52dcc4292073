//! Unit tests of the commitment rules (how each booking event changes a
//! commitment, versions, conflicts).

use super::*;
use chrono::TimeZone;

fn ev(kind: &str, extra: &str) -> BookingEvent {
    let text =
        format!(r#"{{"event_id":"e","type":"{kind}","ref":"cita-1","contact":{{"phone":"+51987654321"}}{extra}}}"#);
    BookingEvent::from_json(&text).unwrap()
}

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0).unwrap()
}

fn applied(e: Effect) -> (Commitment, bool, Change) {
    match e {
        Effect::Applied {
            after,
            version_changed,
            kind,
        } => (after, version_changed, kind),
        other => panic!("expected applied, got {other:?}"),
    }
}

#[test]
fn scheduling_creates_version_one_and_reschedule_raises_it() {
    let (c, changed, kind) = applied(apply(
        None,
        &ev("appointment.scheduled", r#","starts_at":"2026-12-01T09:30:00-05:00""#),
        now(),
    ));
    assert_eq!((c.version, changed, kind), (1, true, Change::Created));
    let (c2, changed, kind) = applied(apply(
        Some(&c),
        &ev("appointment.rescheduled", r#","starts_at":"2026-12-02T09:30:00-05:00""#),
        now(),
    ));
    assert_eq!((c2.version, changed, kind), (2, true, Change::Rescheduled));
    // The same time again is no change.
    let (c3, changed, kind) = applied(apply(
        Some(&c2),
        &ev("appointment.rescheduled", r#","starts_at":"2026-12-02T14:30:00Z""#),
        now(),
    ));
    assert_eq!((c3.version, changed, kind), (2, false, Change::NoChange));
}

#[test]
fn place_and_cancellation_raise_the_version_confirmation_does_not() {
    let (c, ..) = applied(apply(
        None,
        &ev(
            "appointment.scheduled",
            r#","starts_at":"2026-12-01T09:30:00-05:00","location":"A""#,
        ),
        now(),
    ));
    let (c, changed, kind) = applied(apply(
        Some(&c),
        &ev(
            "appointment.rescheduled",
            r#","starts_at":"2026-12-01T09:30:00-05:00","location":"B""#,
        ),
        now(),
    ));
    assert_eq!((c.version, changed, kind), (2, true, Change::Moved));
    let (c, changed, kind) = applied(apply(Some(&c), &ev("appointment.confirmed", ""), now()));
    assert_eq!((c.version, changed, kind), (2, false, Change::Confirmed));
    assert!(c.confirmed_at.is_some());
    let (c, changed, kind) = applied(apply(Some(&c), &ev("appointment.cancelled", ""), now()));
    assert_eq!((c.version, changed, kind), (3, true, Change::Cancelled));
    let (_, changed, kind) = applied(apply(Some(&c), &ev("appointment.cancelled", ""), now()));
    assert_eq!((changed, kind), (false, Change::NoChange));
}

#[test]
fn event_versions_are_authoritative_and_older_ones_are_stale() {
    let (c, ..) = applied(apply(
        None,
        &ev(
            "appointment.scheduled",
            r#","starts_at":"2026-12-01T09:30:00-05:00","version":4"#,
        ),
        now(),
    ));
    assert_eq!(c.version, 4);
    let e = apply(
        Some(&c),
        &ev(
            "appointment.rescheduled",
            r#","starts_at":"2026-12-03T09:30:00-05:00","version":3"#,
        ),
        now(),
    );
    assert_eq!(e, Effect::Stale { current_version: 4 });
    let (c, changed, _) = applied(apply(
        Some(&c),
        &ev(
            "appointment.rescheduled",
            r#","starts_at":"2026-12-03T09:30:00-05:00","version":7"#,
        ),
        now(),
    ));
    assert_eq!((c.version, changed), (7, true));
}

#[test]
fn a_later_cancellation_gives_the_same_row_whichever_order_an_older_reschedule_arrives() {
    let v1 = ev(
        "appointment.scheduled",
        r#","starts_at":"2026-12-01T09:30:00-05:00","location":"Sede A","version":1"#,
    );
    let v2 = ev(
        "appointment.rescheduled",
        r#","starts_at":"2026-12-01T10:30:00-05:00","location":"Sede B","version":2"#,
    );
    let v3 = ev(
        "appointment.cancelled",
        r#","starts_at":"2026-12-01T10:30:00-05:00","location":"Sede B","version":3"#,
    );
    let fold = |events: &[&BookingEvent]| {
        let mut cur: Option<Commitment> = None;
        for e in events {
            if let Effect::Applied { after, .. } = apply(cur.as_ref(), e, now()) {
                cur = Some(after);
            }
        }
        cur.expect("applied")
    };
    let in_order = fold(&[&v1, &v2, &v3]);
    let late_reschedule = fold(&[&v1, &v3, &v2]);
    assert_eq!(in_order.status, CommitmentStatus::Cancelled);
    assert_eq!(
        (in_order.starts_at, &in_order.location, in_order.version),
        (
            late_reschedule.starts_at,
            &late_reschedule.location,
            late_reschedule.version
        )
    );
}

#[test]
fn cancelling_an_unknown_appointment_stores_it_cancelled_without_a_change_to_announce() {
    let e = ev("appointment.cancelled", r#","starts_at":"2026-12-01T09:30:00-05:00""#);
    let (c, _, kind) = applied(apply(None, &e, now()));
    assert_eq!((c.status.as_str(), c.version, kind), ("cancelled", 1, Change::NoChange));
    assert!(c.starts_at.is_some());
}

#[test]
fn reschedule_clears_an_old_confirmation() {
    let (c, ..) = applied(apply(
        None,
        &ev("appointment.scheduled", r#","starts_at":"2026-12-01T09:30:00-05:00""#),
        now(),
    ));
    let (c, ..) = applied(apply(Some(&c), &ev("appointment.confirmed", ""), now()));
    let (c, ..) = applied(apply(
        Some(&c),
        &ev("appointment.rescheduled", r#","starts_at":"2026-12-05T09:30:00-05:00""#),
        now(),
    ));
    assert!(
        c.confirmed_at.is_none(),
        "a confirmation of the old time is not one of the new time"
    );
}

#[test]
fn orders_raise_the_version_per_notified_state_and_ignore_internal_ones() {
    let mk = |kind: &str| {
        BookingEvent::from_json(&format!(
            r#"{{"event_id":"e","type":"{kind}","ref":"pedido-88","contact":{{"phone":"+51987654321"}}}}"#
        ))
        .unwrap()
    };
    let (o, ..) = applied(apply(None, &mk("order.confirmed"), now()));
    assert_eq!((o.version, o.status.as_str()), (1, "confirmado"));
    let (o, changed, kind) = applied(apply(Some(&o), &mk("order.updated"), now()));
    assert_eq!((o.version, changed, kind), (1, false, Change::Internal));
    let (o, changed, kind) = applied(apply(Some(&o), &mk("order.shipped"), now()));
    assert_eq!(
        (o.version, changed, kind, o.status.as_str()),
        (2, true, Change::OrderState, "enviado")
    );
}

#[test]
fn unknown_refs_without_contact_are_rejected_and_kinds_do_not_mix() {
    let e = BookingEvent::from_json(r#"{"event_id":"e","type":"appointment.cancelled","ref":"cita-9"}"#).unwrap();
    assert!(matches!(apply(None, &e, now()), Effect::Rejected { .. }));
    let (c, ..) = applied(apply(
        None,
        &ev("appointment.scheduled", r#","starts_at":"2026-12-01T09:30:00-05:00""#),
        now(),
    ));
    let o = BookingEvent::from_json(r#"{"event_id":"e","type":"order.paid","ref":"cita-1"}"#).unwrap();
    assert!(matches!(apply(Some(&c), &o, now()), Effect::Rejected { .. }));
}

fn conflict_fields(e: Effect) -> Vec<&'static str> {
    match e {
        Effect::Conflict { fields, .. } => fields,
        other => panic!("expected a conflict, got {other:?}"),
    }
}

#[test]
fn an_equal_version_with_other_content_is_a_conflict_naming_the_fields() {
    let (c, ..) = applied(apply(
        None,
        &ev(
            "appointment.scheduled",
            r#","starts_at":"2026-12-01T09:30:00-05:00","version":1,"location":"Sede A","service":"Odontología""#,
        ),
        now(),
    ));
    let base = r#","starts_at":"2026-12-01T09:30:00-05:00","version":1,"location":"Sede A""#;
    let moved = ev("appointment.scheduled", &base.replace("Sede A", "Sede B"));
    assert_eq!(conflict_fields(apply(Some(&c), &moved, now())), ["location"]);
    let text = r#"{"event_id":"e","type":"appointment.scheduled","ref":"cita-1","version":1,
        "starts_at":"2026-12-01T10:30:00-05:00","contact":{"phone":"+51911222333","name":"Rosa"},
        "service":"Pediatría"}"#;
    let other = BookingEvent::from_json(text).unwrap();
    assert_eq!(
        conflict_fields(apply(Some(&c), &other, now())),
        ["starts_at", "service", "contact.phone", "contact.name"]
    );
    let cancel = ev("appointment.cancelled", r#","version":1"#);
    assert_eq!(conflict_fields(apply(Some(&c), &cancel, now())), ["type"]);
    // The same content at the same version is no change; a fact about
    // the commitment (a confirmation) is not a content change.
    let (_, changed, kind) = applied(apply(Some(&c), &ev("appointment.scheduled", base), now()));
    assert_eq!((changed, kind), (false, Change::NoChange));
    let (after, changed, kind) = applied(apply(Some(&c), &ev("appointment.confirmed", r#","version":1"#), now()));
    assert_eq!((after.version, changed, kind), (1, false, Change::Confirmed));
    // Orders too: another state at the same version.
    let mk = |kind: &str, v: &str| {
        BookingEvent::from_json(&format!(
            r#"{{"event_id":"e","type":"{kind}","ref":"pedido-1","contact":{{"phone":"+51987654321"}}{v}}}"#
        ))
        .unwrap()
    };
    let (o, ..) = applied(apply(None, &mk("order.confirmed", r#","version":2"#), now()));
    assert_eq!(
        conflict_fields(apply(Some(&o), &mk("order.shipped", r#","version":2"#), now())),
        ["type"]
    );
}

#[test]
fn versionless_changes_of_phone_name_or_service_raise_the_version() {
    let (c, ..) = applied(apply(
        None,
        &ev("appointment.scheduled", r#","starts_at":"2026-12-01T09:30:00-05:00""#),
        now(),
    ));
    let moved_phone = BookingEvent::from_json(
        r#"{"event_id":"e","type":"appointment.scheduled","ref":"cita-1","starts_at":"2026-12-01T09:30:00-05:00",
            "contact":{"phone":"+51911222333"}}"#,
    )
    .unwrap();
    let (c2, changed, kind) = applied(apply(Some(&c), &moved_phone, now()));
    assert_eq!((c2.version, changed, kind), (2, true, Change::Recipient));
    assert_eq!(c2.phone.as_deref(), Some("+51911222333"));
    let confirmed = BookingEvent::from_json(
        r#"{"event_id":"e","type":"appointment.confirmed","ref":"cita-1","service":"Pediatría"}"#,
    )
    .unwrap();
    let (c3, changed, kind) = applied(apply(Some(&c2), &confirmed, now()));
    assert_eq!(
        (c3.version, changed, kind),
        (3, true, Change::Details),
        "a confirmation that also changes the text"
    );
    assert!(c3.confirmed_at.is_some());
    // The language is the person's, not the message's: no new version.
    let lang = BookingEvent::from_json(
        r#"{"event_id":"e","type":"appointment.confirmed","ref":"cita-1","contact":{"phone":"+51911222333","language":"en"}}"#,
    )
    .unwrap();
    let (c4, changed, kind) = applied(apply(Some(&c3), &lang, now()));
    assert_eq!((c4.version, changed, kind), (3, false, Change::NoChange));
    assert_eq!(c4.language.as_deref(), Some("en"));
}

#[test]
fn a_higher_version_that_changes_nothing_we_track_replans_for_it() {
    let (c, ..) = applied(apply(
        None,
        &ev(
            "appointment.scheduled",
            r#","starts_at":"2026-12-01T09:30:00-05:00","version":1"#,
        ),
        now(),
    ));
    let (c2, changed, kind) = applied(apply(
        Some(&c),
        &ev(
            "appointment.scheduled",
            r#","starts_at":"2026-12-01T09:30:00-05:00","version":2"#,
        ),
        now(),
    ));
    assert_eq!((c2.version, changed, kind), (2, true, Change::Details));
}
