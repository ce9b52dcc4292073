//! Unit tests of the planner: what each change plans and closes.

use super::*;

#[test]
fn each_closure_names_what_it_closes() {
    let r = CancelReason::Superseded;
    let older = Closure::OlderThan { version: 2, reason: r };
    assert!(older.closes(1, "aviso-reserva", false) && !older.closes(2, "aviso-reserva", false));
    assert!(Closure::AllPlanned { reason: r }.closes(5, "confirmado", false));
    let confirm = Closure::ConfirmReminders { reason: r };
    assert!(confirm.closes(1, "recordatorio-24h", true) && !confirm.closes(1, "recordatorio-2h", false));
    let reminders = Closure::Reminders { reason: r };
    assert!(reminders.closes(1, "recordatorio-2h", false) && !reminders.closes(1, "aviso-reserva", false));
    for c in [
        older,
        confirm,
        reminders,
        Closure::AllPlanned {
            reason: CancelReason::ManualContact,
        },
    ] {
        assert!(matches!(
            c.reason(),
            CancelReason::Superseded | CancelReason::ManualContact
        ));
    }
}
use crate::domain::commitment::{Effect, apply};
use chrono::TimeZone;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 15, 0, 0).unwrap()
}

fn ev(kind: &str, extra: &str) -> BookingEvent {
    BookingEvent::from_json(&format!(
        r#"{{"event_id":"e","type":"{kind}","ref":"cita-1042","contact":{{"phone":"+51987654321","name":"Ana"}},"service":"Odontología","location":"Sede Miraflores"{extra}}}"#
    ))
    .unwrap()
}

fn run(before: Option<&Commitment>, e: &BookingEvent) -> (Commitment, Plan) {
    let policy = Policy::default();
    let templates = Templates::embedded();
    let p = Planner {
        policy: &policy,
        templates: &templates,
        tz: chrono_tz::America::Lima,
    };
    match apply(before, e, now()) {
        Effect::Applied { after, kind, .. } => {
            let plan = p.plan(&after, kind, e, now()).unwrap();
            (after, plan)
        }
        other => panic!("{other:?}"),
    }
}

fn keys(p: &Plan) -> Vec<&str> {
    p.intentions.iter().map(|i| i.key.as_str()).collect()
}

#[test]
fn scheduling_plans_a_booking_notice_and_two_reminders() {
    let (_, plan) = run(
        None,
        &ev("appointment.scheduled", r#","starts_at":"2026-12-01T09:30:00-05:00""#),
    );
    assert_eq!(
        keys(&plan),
        [
            "cita-1042:aviso-reserva:v1",
            "cita-1042:recordatorio-24h:v1",
            "cita-1042:recordatorio-2h:v1"
        ]
    );
    let r24 = &plan.intentions[1];
    assert!(r24.asks_confirmation);
    assert_eq!(r24.due_at, Utc.with_ymd_and_hms(2026, 11, 30, 14, 30, 0).unwrap());
    assert_eq!(r24.day.to_string(), "2026-11-30");
    assert!(r24.body.contains("martes 1 de diciembre a las 09:30"), "{}", r24.body);
    assert!(!plan.intentions[2].asks_confirmation);
    assert_eq!(plan.intentions[0].due_at, now());
}

#[test]
fn replanning_gives_the_same_keys_and_content() {
    let e = ev("appointment.scheduled", r#","starts_at":"2026-12-01T09:30:00-05:00""#);
    let (_, a) = run(None, &e);
    let (_, b) = run(None, &e);
    let fa: Vec<String> = a.intentions.iter().map(|i| i.fingerprint()).collect();
    let fb: Vec<String> = b.intentions.iter().map(|i| i.fingerprint()).collect();
    assert_eq!(keys(&a), keys(&b));
    assert_eq!(fa, fb);
}

#[test]
fn reschedule_plans_an_update_notice_and_supersedes_the_old_version() {
    let (c, _) = run(
        None,
        &ev("appointment.scheduled", r#","starts_at":"2026-12-01T09:30:00-05:00""#),
    );
    let (_, plan) = run(
        Some(&c),
        &ev("appointment.rescheduled", r#","starts_at":"2026-12-03T09:30:00-05:00""#),
    );
    assert_eq!(
        keys(&plan),
        [
            "cita-1042:aviso-cambio:v2",
            "cita-1042:recordatorio-24h:v2",
            "cita-1042:recordatorio-2h:v2"
        ]
    );
    assert_eq!(
        plan.closures,
        [Closure::OlderThan {
            version: 2,
            reason: CancelReason::Superseded
        }]
    );
}

#[test]
fn cancellation_closes_planned_ones_and_notifies() {
    let (c, _) = run(
        None,
        &ev("appointment.scheduled", r#","starts_at":"2026-12-01T09:30:00-05:00""#),
    );
    let (_, plan) = run(Some(&c), &ev("appointment.cancelled", ""));
    assert_eq!(keys(&plan), ["cita-1042:aviso-cancelacion:v2"]);
    assert_eq!(
        plan.closures,
        [Closure::AllPlanned {
            reason: CancelReason::CommitmentCancelled
        }]
    );
}

#[test]
fn confirmation_and_manual_contact_only_close() {
    let (c, _) = run(
        None,
        &ev("appointment.scheduled", r#","starts_at":"2026-12-01T09:30:00-05:00""#),
    );
    let (c, plan) = run(Some(&c), &ev("appointment.confirmed", ""));
    assert!(plan.intentions.is_empty());
    assert_eq!(
        plan.closures,
        [Closure::ConfirmReminders {
            reason: CancelReason::AlreadyConfirmed
        }]
    );
    let (_, plan) = run(
        Some(&c),
        &ev("appointment.manual_contact", r#","operator":"recepcion""#),
    );
    assert!(plan.intentions.is_empty());
    assert_eq!(
        plan.closures,
        [Closure::Reminders {
            reason: CancelReason::ManualContact
        }]
    );
}

#[test]
fn past_reminders_are_skipped_and_past_appointments_plan_nothing() {
    // Booked 3 hours ahead: the 24 h reminder already passed.
    let (_, plan) = run(
        None,
        &ev("appointment.scheduled", r#","starts_at":"2026-11-29T13:00:00-05:00""#),
    );
    assert_eq!(
        keys(&plan),
        ["cita-1042:aviso-reserva:v1", "cita-1042:recordatorio-2h:v1"]
    );
    let (_, plan) = run(
        None,
        &ev("appointment.scheduled", r#","starts_at":"2026-11-20T09:30:00-05:00""#),
    );
    assert!(plan.intentions.is_empty());
    assert!(plan.notes[0].contains("past"));
}

#[test]
fn historical_events_plan_nothing() {
    let (_, plan) = run(
        None,
        &ev(
            "appointment.scheduled",
            r#","starts_at":"2026-12-01T09:30:00-05:00","occurred_at":"2026-10-01T09:00:00-05:00""#,
        ),
    );
    assert!(plan.intentions.is_empty());
    assert!(plan.notes[0].contains("horizon"));
}

#[test]
fn orders_notify_business_states_only() {
    let mk = |kind: &str| {
        BookingEvent::from_json(&format!(
            r#"{{"event_id":"e","type":"{kind}","ref":"pedido-88","contact":{{"phone":"+51987654321","name":"Luis"}}}}"#
        ))
        .unwrap()
    };
    let (o, plan) = run(None, &mk("order.confirmed"));
    assert_eq!(keys(&plan), ["pedido-88:confirmado:v1:whatsapp"]);
    let (o, plan) = run(Some(&o), &mk("order.updated"));
    assert!(plan.intentions.is_empty());
    let (_, plan) = run(Some(&o), &mk("order.shipped"));
    assert_eq!(keys(&plan), ["pedido-88:enviado:v2:whatsapp"]);
    assert_eq!(
        plan.intentions[0].body,
        "Hola Luis, tu pedido pedido-88 ya está en camino."
    );
}

#[test]
fn a_new_phone_gets_the_booking_notice_and_reminders_but_no_change_notice() {
    let (c, _) = run(
        None,
        &ev("appointment.scheduled", r#","starts_at":"2026-12-01T09:30:00-05:00""#),
    );
    let moved = BookingEvent::from_json(
        r#"{"event_id":"e2","type":"appointment.scheduled","ref":"cita-1042","starts_at":"2026-12-01T09:30:00-05:00",
            "contact":{"phone":"+51911222333","name":"Ana"},"service":"Odontología","location":"Sede Miraflores"}"#,
    )
    .unwrap();
    let (after, plan) = run(Some(&c), &moved);
    assert_eq!(after.version, 2);
    assert_eq!(
        keys(&plan),
        [
            "cita-1042:aviso-reserva:v2",
            "cita-1042:recordatorio-24h:v2",
            "cita-1042:recordatorio-2h:v2"
        ]
    );
    assert!(plan.intentions.iter().all(|i| i.recipient == "+51911222333"));
    assert_eq!(
        plan.closures,
        [Closure::OlderThan {
            version: 2,
            reason: CancelReason::Superseded
        }]
    );
    // A name fix on a confirmed appointment: reminders only, and none
    // that asks to confirm again.
    let mut confirmed = after.clone();
    confirmed.confirmed_at = Some(now());
    let mut renamed = moved.clone();
    renamed.contact.as_mut().unwrap().name = Some("Ana María".into());
    let (_, plan) = run(Some(&confirmed), &renamed);
    assert_eq!(keys(&plan), ["cita-1042:recordatorio-2h:v3"]);
}

#[test]
fn a_text_over_whatsapps_limit_is_held_for_review_not_planned() {
    let policy = Policy::default();
    let long = "x".repeat(MAX_BODY_CHARS);
    let templates = Templates::parse(
        &crate::templates::DEFAULT_TEMPLATES.replace("tu cita de {{2}} quedó reservada", &format!("{long} {{{{2}}}}")),
        "t.toml",
    )
    .unwrap();
    let p = Planner {
        policy: &policy,
        templates: &templates,
        tz: chrono_tz::America::Lima,
    };
    let e = ev("appointment.scheduled", r#","starts_at":"2026-12-01T09:30:00-05:00""#);
    let Effect::Applied { after, kind, .. } = apply(None, &e, now()) else {
        panic!("applied")
    };
    let plan = p.plan(&after, kind, &e, now()).unwrap();
    assert_eq!(
        keys(&plan),
        ["cita-1042:recordatorio-24h:v1", "cita-1042:recordatorio-2h:v1"]
    );
    assert_eq!(plan.held.len(), 1);
    let (held, reason) = &plan.held[0];
    assert_eq!(held.key.as_str(), "cita-1042:aviso-reserva:v1");
    assert!(held.body.chars().count() > MAX_BODY_CHARS);
    assert!(reason.contains("4096") && reason.contains("not sent"), "{reason}");
    assert!(plan.notes.iter().any(|n| n.starts_with("cita-1042:aviso-reserva:v1: ")));
}

#[test]
fn a_new_phone_on_an_order_moves_its_waiting_notice_and_never_resends_one() {
    let mk = |kind: &str, phone: &str| {
        BookingEvent::from_json(&format!(
            r#"{{"event_id":"e","type":"{kind}","ref":"pedido-88","contact":{{"phone":"{phone}","name":"Luis"}}}}"#
        ))
        .unwrap()
    };
    let (o, _) = run(None, &mk("order.confirmed", "+51987654321"));
    // Same state, new phone: the waiting notice moves (only if one waits).
    let (o2, plan) = run(Some(&o), &mk("order.updated", "+51911222333"));
    assert_eq!(keys(&plan), ["pedido-88:confirmado:v2:whatsapp"]);
    assert_eq!(plan.intentions[0].recipient, "+51911222333");
    assert!(plan.replaces_only);
    assert!(matches!(plan.closures[..], [Closure::OlderThan { version: 2, .. }]));
    // New state and new phone at once: the new state's notice, always.
    let (_, plan) = run(Some(&o2), &mk("order.shipped", "+51900000001"));
    assert_eq!(keys(&plan), ["pedido-88:enviado:v3:whatsapp"]);
    assert!(!plan.replaces_only);
    assert_eq!(plan.closures.len(), 1);
    // The same phone again: nothing moves.
    let (_, plan) = run(Some(&o2), &mk("order.updated", "+51911222333"));
    assert!(plan.intentions.is_empty() && plan.closures.is_empty());
}

#[test]
fn a_text_names_the_year_only_when_it_is_not_the_year_the_message_is_due() {
    // Planned 2026-11-29; the appointment is 2027-01-01 09:30 Lima. The
    // booking notice (due now, in 2026) says the year; the reminders (due
    // 2026-12-31 and 2027-01-01) say it only where it differs.
    let (_, plan) = run(
        None,
        &ev("appointment.scheduled", r#","starts_at":"2027-01-01T09:30:00-05:00""#),
    );
    let body = |key: &str| {
        plan.intentions
            .iter()
            .find(|i| i.key.as_str() == key)
            .map(|i| i.body.clone())
            .unwrap()
    };
    assert!(body("cita-1042:aviso-reserva:v1").contains("viernes 1 de enero de 2027"));
    assert!(body("cita-1042:recordatorio-24h:v1").contains("viernes 1 de enero de 2027"));
    let r2 = plan
        .intentions
        .iter()
        .find(|i| i.key.as_str() == "cita-1042:recordatorio-2h:v1")
        .unwrap();
    assert_eq!(r2.parameters[2], "viernes 1 de enero");
}

/// WhatsApp refuses a message whose parameter count differs from its
/// template's (Graph error 132000): every shipped template numbers the
/// parameters the planner sends for its purpose, `{{1}}` to `{{n}}`.
#[test]
fn every_shipped_template_takes_the_parameters_planned_for_its_purpose() {
    use crate::template_check::{PURPOSES, Params};
    use std::collections::BTreeMap;
    let at = |day: u32| format!(r#","starts_at":"2026-12-{day:02}T09:30:00-05:00""#);
    let (c, booked) = run(None, &ev("appointment.scheduled", &at(1)));
    let (c, moved) = run(Some(&c), &ev("appointment.rescheduled", &at(3)));
    let (_, cancelled) = run(Some(&c), &ev("appointment.cancelled", ""));
    let mut plans = vec![booked, moved, cancelled];
    let order = |kind: &str| {
        BookingEvent::from_json(&format!(
            r#"{{"event_id":"e","type":"{kind}","ref":"pedido-88","contact":{{"phone":"+51987654321","name":"Luis"}}}}"#
        ))
        .unwrap()
    };
    for kind in [
        "order.confirmed",
        "order.paid",
        "order.prepared",
        "order.shipped",
        "order.exception",
        "order.delivered",
        "order.returned",
    ] {
        plans.push(run(None, &order(kind)).1);
    }
    // Template name → how many parameters the planner sent it.
    let mut sent: BTreeMap<String, usize> = BTreeMap::new();
    for i in plans.iter().flat_map(|p| &p.intentions) {
        let n = *sent.entry(i.template.clone()).or_insert(i.parameters.len());
        assert_eq!(n, i.parameters.len(), "{} gets one count of parameters", i.template);
    }
    let templates = Templates::embedded();
    for purpose in PURPOSES {
        let t = templates.for_purpose(purpose).unwrap();
        let n = sent
            .get(&t.name)
            .unwrap_or_else(|| panic!("{purpose}: {} never planned", t.name));
        let numbered: Vec<u32> = (1..).take(*n).collect();
        assert_eq!(
            Params::of(&t.body),
            Params::Positional(numbered),
            "{purpose}: {} does not take the {n} parameters the planner sends",
            t.name
        );
    }
}
