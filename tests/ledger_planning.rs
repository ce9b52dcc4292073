//! What each booking event does to a commitment's intentions, through the
//! library (`ingest` and `import_file`) on both ledgers (a real SQLite file
//! and a PostgreSQL schema, one body each, `on_both!`) with a fixed clock: reschedule, cancel, confirm, manual contact, stale versions,
//! orders and the flood guard.

use chrono::{DateTime, Duration, TimeZone, Utc};
use unavez::config::Policy;
use unavez::domain::event::BookingEvent;
use unavez::import::{ImportError, ImportOptions, import_file};
use unavez::ingest::{Outcome, ingest};
use unavez::planner::Planner;
use unavez::store::{EventEffect, IntentFilter, Store, StoreError};
use unavez::templates::Templates;
use unavez_testkit::{Backend, TestLedger, on_both};

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 15, 0, 0).unwrap()
}

struct Lab {
    _ledger: TestLedger,
    store: Store,
    policy: Policy,
    templates: Templates,
    n: usize,
}

impl Lab {
    fn new(backend: Backend) -> Lab {
        let ledger = backend.ledger();
        let store = Store::open(ledger.db()).unwrap();
        Lab {
            _ledger: ledger,
            store,
            policy: Policy::default(),
            templates: Templates::embedded(),
            n: 0,
        }
    }

    /// Ingests one event (an `event_id` is added) at `now()`.
    fn ev(&mut self, json: &str) -> Outcome {
        self.n += 1;
        let text = json.replacen('{', &format!("{{\"event_id\":\"evt-{}\",", self.n), 1);
        let ev = BookingEvent::from_json(&text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        let planner = Planner {
            policy: &self.policy,
            templates: &self.templates,
            tz: chrono_tz::America::Lima,
        };
        self.store.write(|tx| ingest(tx, &planner, &ev, "test", now())).unwrap()
    }

    /// (key, state, reason) of the commitment's intentions, by id.
    fn intents(&mut self, reference: &str) -> Vec<(String, String, String)> {
        let f = IntentFilter {
            commitment_ref: Some(reference.into()),
            limit: 1000,
            ..Default::default()
        };
        let mut rows = self.store.read(|tx| tx.list_intentions(&f)).unwrap();
        rows.sort_by_key(|r| r.id);
        rows.into_iter()
            .map(|r| (r.key, r.state.as_str().to_string(), r.state_reason.unwrap_or_default()))
            .collect()
    }
}

fn row(key: &str, state: &str, reason: &str) -> (String, String, String) {
    (key.into(), state.into(), reason.into())
}

const ANA: &str =
    r#""contact":{"phone":"+51987654321","name":"Ana Quispe"},"service":"Odontología","location":"Sede Miraflores""#;

fn scheduled(reference: &str, at: &str) -> String {
    format!(r#"{{"type":"appointment.scheduled","ref":"{reference}","starts_at":"{at}",{ANA}}}"#)
}

fn scheduling_plans_a_booking_notice_and_two_reminders(backend: Backend) {
    let mut lab = Lab::new(backend);
    lab.ev(&scheduled("cita-1", "2026-12-03T09:30:00-05:00"));
    assert_eq!(
        lab.intents("cita-1"),
        [
            row("cita-1:aviso-reserva:v1", "planned", ""),
            row("cita-1:recordatorio-24h:v1", "planned", ""),
            row("cita-1:recordatorio-2h:v1", "planned", ""),
        ]
    );
}

fn reschedule_supersedes_the_old_version_and_plans_an_update_notice(backend: Backend) {
    let mut lab = Lab::new(backend);
    lab.ev(&scheduled("cita-1", "2026-12-03T09:30:00-05:00"));
    let o = lab.ev(r#"{"type":"appointment.rescheduled","ref":"cita-1","starts_at":"2026-12-05T11:00:00-05:00"}"#);
    assert!(
        matches!(
            o,
            Outcome::Stored {
                version: 2,
                closed: 3,
                ..
            }
        ),
        "{o:?}"
    );
    assert_eq!(
        lab.intents("cita-1"),
        [
            row("cita-1:aviso-reserva:v1", "cancelled", "superseded"),
            row("cita-1:recordatorio-24h:v1", "cancelled", "superseded"),
            row("cita-1:recordatorio-2h:v1", "cancelled", "superseded"),
            row("cita-1:aviso-cambio:v2", "planned", ""),
            row("cita-1:recordatorio-24h:v2", "planned", ""),
            row("cita-1:recordatorio-2h:v2", "planned", ""),
        ]
    );
    let d = lab
        .store
        .read(|tx| tx.intention_detail("cita-1:aviso-cambio:v2"))
        .unwrap();
    assert!(
        d.intention.body.contains("sábado 5 de diciembre a las 11:00"),
        "{}",
        d.intention.body
    );
}

fn cancellation_closes_everything_planned_and_notifies(backend: Backend) {
    let mut lab = Lab::new(backend);
    lab.ev(&scheduled("cita-1", "2026-12-03T09:30:00-05:00"));
    lab.ev(r#"{"type":"appointment.cancelled","ref":"cita-1"}"#);
    assert_eq!(
        lab.intents("cita-1"),
        [
            row("cita-1:aviso-reserva:v1", "cancelled", "commitment_cancelled"),
            row("cita-1:recordatorio-24h:v1", "cancelled", "commitment_cancelled"),
            row("cita-1:recordatorio-2h:v1", "cancelled", "commitment_cancelled"),
            row("cita-1:aviso-cancelacion:v2", "planned", ""),
        ]
    );
    // Cancelling again is recorded and changes nothing.
    let o = lab.ev(r#"{"type":"appointment.cancelled","ref":"cita-1"}"#);
    assert!(
        matches!(
            o,
            Outcome::Stored {
                effect: EventEffect::NoChange,
                ..
            }
        ),
        "{o:?}"
    );
    assert_eq!(lab.intents("cita-1").len(), 4);
}

fn confirmation_cancels_only_the_reminder_that_asks_to_confirm(backend: Backend) {
    let mut lab = Lab::new(backend);
    lab.ev(&scheduled("cita-1", "2026-12-03T09:30:00-05:00"));
    lab.ev(r#"{"type":"appointment.confirmed","ref":"cita-1"}"#);
    assert_eq!(
        lab.intents("cita-1"),
        [
            row("cita-1:aviso-reserva:v1", "planned", ""),
            row("cita-1:recordatorio-24h:v1", "cancelled", "already_confirmed"),
            row("cita-1:recordatorio-2h:v1", "planned", ""),
        ]
    );
}

fn manual_contact_cancels_the_pending_reminders(backend: Backend) {
    let mut lab = Lab::new(backend);
    lab.ev(&scheduled("cita-1", "2026-12-03T09:30:00-05:00"));
    lab.ev(
        r#"{"type":"appointment.manual_contact","ref":"cita-1","operator":"recepcion","note":"llamó por teléfono"}"#,
    );
    assert_eq!(
        lab.intents("cita-1"),
        [
            row("cita-1:aviso-reserva:v1", "planned", ""),
            row("cita-1:recordatorio-24h:v1", "cancelled", "manual_contact"),
            row("cita-1:recordatorio-2h:v1", "cancelled", "manual_contact"),
        ]
    );
}

fn an_older_version_is_recorded_and_changes_nothing(backend: Backend) {
    let mut lab = Lab::new(backend);
    lab.ev(&format!(
        r#"{{"type":"appointment.scheduled","ref":"cita-1","version":3,"starts_at":"2026-12-03T09:30:00-05:00",{ANA}}}"#
    ));
    let before = lab.intents("cita-1");
    let o = lab
        .ev(r#"{"type":"appointment.rescheduled","ref":"cita-1","version":2,"starts_at":"2026-12-09T09:30:00-05:00"}"#);
    assert!(
        matches!(
            o,
            Outcome::Stored {
                effect: EventEffect::Stale,
                version: 3,
                ..
            }
        ),
        "{o:?}"
    );
    assert!(
        matches!(&o, Outcome::Stored { notes, .. } if notes[0] == "version 2 is older than the stored 3: recorded only"),
        "{o:?}"
    );
    assert_eq!(lab.intents("cita-1"), before);
    let (c, events) = lab
        .store
        .read(|tx| Ok::<_, StoreError>((tx.commitment("cita-1")?.unwrap(), tx.commitment_events("cita-1")?)))
        .unwrap();
    assert_eq!(
        c.commitment.starts_at,
        Some(Utc.with_ymd_and_hms(2026, 12, 3, 14, 30, 0).unwrap())
    );
    assert_eq!(c.commitment.version, 3);
    let effects: Vec<&str> = events.iter().map(|e| e.2.as_str()).collect();
    assert_eq!(effects, ["applied", "stale"], "the stale event is kept in the log");
}

fn orders_notify_each_business_state_and_not_internal_updates(backend: Backend) {
    let mut lab = Lab::new(backend);
    let contact = r#""contact":{"phone":"+51987654324","name":"Carla"}"#;
    lab.ev(&format!(r#"{{"type":"order.confirmed","ref":"pedido-88",{contact}}}"#));
    for t in [
        "paid",
        "updated",
        "prepared",
        "updated",
        "shipped",
        "exception",
        "delivered",
        "returned",
    ] {
        lab.ev(&format!(r#"{{"type":"order.{t}","ref":"pedido-88"}}"#));
    }
    let keys: Vec<String> = lab.intents("pedido-88").into_iter().map(|r| r.0).collect();
    assert_eq!(
        keys,
        [
            "pedido-88:confirmado:v1:whatsapp",
            "pedido-88:pagado:v2:whatsapp",
            "pedido-88:preparado:v3:whatsapp",
            "pedido-88:enviado:v4:whatsapp",
            "pedido-88:incidencia:v5:whatsapp",
            "pedido-88:entregado:v6:whatsapp",
            "pedido-88:devuelto:v7:whatsapp",
        ]
    );
    // The seed's example key: shipped as state version 5.
    let mut lab = Lab::new(backend);
    lab.ev(&format!(r#"{{"type":"order.confirmed","ref":"pedido-88",{contact}}}"#));
    lab.ev(r#"{"type":"order.shipped","ref":"pedido-88","version":5}"#);
    let o = lab.ev(r#"{"type":"order.updated","ref":"pedido-88","version":5}"#);
    assert!(
        matches!(&o, Outcome::Stored { planned, .. } if planned.is_empty()),
        "{o:?}"
    );
    let keys: Vec<String> = lab.intents("pedido-88").into_iter().map(|r| r.0).collect();
    assert_eq!(
        keys,
        ["pedido-88:confirmado:v1:whatsapp", "pedido-88:enviado:v5:whatsapp"]
    );
}

fn flood_guard_plans_nothing_for_the_past_or_for_old_events(backend: Backend) {
    let mut lab = Lab::new(backend);
    let o = lab.ev(&scheduled("cita-1", "2026-11-20T09:30:00-05:00"));
    assert!(
        matches!(&o, Outcome::Stored { planned, notes, .. } if planned.is_empty() && notes[0].contains("past")),
        "{o:?}"
    );
    let old = now() - Duration::hours(i64::from(lab.policy.horizon_hours) + 1);
    let o = lab.ev(&format!(
        r#"{{"type":"appointment.scheduled","ref":"cita-2","starts_at":"2026-12-03T09:30:00-05:00","occurred_at":"{}",{ANA}}}"#,
        old.to_rfc3339()
    ));
    assert!(
        matches!(&o, Outcome::Stored { planned, notes, .. } if planned.is_empty() && notes[0].contains("horizon")),
        "{o:?}"
    );
    assert!(lab.intents("cita-1").is_empty() && lab.intents("cita-2").is_empty());
    // Recent enough: planned.
    let o = lab.ev(&format!(
        r#"{{"type":"appointment.scheduled","ref":"cita-3","starts_at":"2026-12-03T09:30:00-05:00","occurred_at":"{}",{ANA}}}"#,
        (now() - Duration::hours(1)).to_rfc3339()
    ));
    assert!(
        matches!(&o, Outcome::Stored { planned, .. } if planned.len() == 3),
        "{o:?}"
    );
}

fn replanning_the_same_state_reserves_nothing_new(backend: Backend) {
    let mut lab = Lab::new(backend);
    lab.ev(&scheduled("cita-1", "2026-12-03T09:30:00-05:00"));
    let before = lab.intents("cita-1");
    let o = lab.ev(&scheduled("cita-1", "2026-12-03T14:30:00Z"));
    assert!(
        matches!(&o, Outcome::Stored { effect: EventEffect::NoChange, planned, .. } if planned.is_empty()),
        "{o:?}"
    );
    assert_eq!(lab.intents("cita-1"), before);
}

fn ics_sequence_drives_versions_through_import_file(backend: Backend) {
    let ledger = backend.ledger();
    let dir = &ledger.dir;
    let mut store = Store::open(ledger.db()).unwrap();
    let (policy, templates) = (Policy::default(), Templates::embedded());
    let planner = Planner {
        policy: &policy,
        templates: &templates,
        tz: chrono_tz::America::Lima,
    };
    let vevent = |seq: u32, start: &str| {
        format!(
            "BEGIN:VEVENT\r\nUID:cita-7\r\nSEQUENCE:{seq}\r\nDTSTART;TZID=America/Lima:{start}\r\nSUMMARY:Odontología\r\n\
             ATTENDEE;CN=Ana Quispe:tel:+51987654321\r\nEND:VEVENT\r\n"
        )
    };
    let write = |name: &str, body: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, format!("BEGIN:VCALENDAR\r\nVERSION:2.0\r\n{body}END:VCALENDAR\r\n")).unwrap();
        p
    };
    let opts = ImportOptions {
        skip_invalid: false,
        rejects_path: None,
        source: "t".into(),
    };
    let first = write("a.ics", &vevent(0, "20261203T093000"));
    let r = import_file(&mut store, &planner, &first, &opts, now()).unwrap();
    assert_eq!((r.stored, r.intentions_planned), (1, 3));
    // The exporter moved the appointment and raised SEQUENCE.
    let moved = write(
        "b.ics",
        &format!("{}{}", vevent(0, "20261203T093000"), vevent(1, "20261204T100000")),
    );
    let r = import_file(&mut store, &planner, &moved, &opts, now()).unwrap();
    assert_eq!(
        (r.duplicates, r.stored, r.intentions_closed, r.intentions_planned),
        (1, 1, 3, 3)
    );
    // The same UID+SEQUENCE+STATUS with other properties is not "the same
    // event again": a conflict, refused with its line, nothing stored.
    let late = write("c.ics", &vevent(0, "20261210T093000"));
    match import_file(&mut store, &planner, &late, &opts, now()) {
        Err(ImportError::Rejected { rows, .. }) => {
            let shown: Vec<String> = rows.iter().map(|e| format!("{}:{}", e.line, e.field)).collect();
            assert_eq!(shown, ["3:version"], "{rows:?}");
            assert!(rows[0].reason.contains("starts_at"), "{}", rows[0].reason);
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    // An older export arriving late (another STATUS, so another id) is stale.
    let stale = write(
        "d.ics",
        &vevent(0, "20261210T093000").replace("SEQUENCE:0\r\n", "SEQUENCE:0\r\nSTATUS:TENTATIVE\r\n"),
    );
    let r = import_file(&mut store, &planner, &stale, &opts, now()).unwrap();
    assert_eq!((r.stale, r.intentions_planned), (1, 0));
    let c = store.read(|tx| tx.commitment("cita-7")).unwrap().unwrap();
    assert_eq!(c.commitment.version, 2);
    assert_eq!(
        c.commitment.starts_at,
        Some(Utc.with_ymd_and_hms(2026, 12, 4, 15, 0, 0).unwrap())
    );
}

fn a_cancellation_of_an_appointment_we_never_knew_notifies_no_one(backend: Backend) {
    let mut lab = Lab::new(backend);
    let o = lab.ev(&format!(
        r#"{{"type":"appointment.cancelled","ref":"cita-9","starts_at":"2026-12-03T09:30:00-05:00",{ANA}}}"#
    ));
    assert!(
        matches!(&o, Outcome::Stored { effect: EventEffect::NoChange, planned, .. } if planned.is_empty()),
        "{o:?}"
    );
    assert!(lab.intents("cita-9").is_empty());
    let c = lab.store.read(|tx| tx.commitment("cita-9")).unwrap().unwrap();
    assert_eq!(c.commitment.status.as_str(), "cancelled");
}

on_both!(
    scheduling_plans_a_booking_notice_and_two_reminders,
    reschedule_supersedes_the_old_version_and_plans_an_update_notice,
    cancellation_closes_everything_planned_and_notifies,
    confirmation_cancels_only_the_reminder_that_asks_to_confirm,
    manual_contact_cancels_the_pending_reminders,
    an_older_version_is_recorded_and_changes_nothing,
    orders_notify_each_business_state_and_not_internal_updates,
    flood_guard_plans_nothing_for_the_past_or_for_old_events,
    replanning_the_same_state_reserves_nothing_new,
    ics_sequence_drives_versions_through_import_file,
    a_cancellation_of_an_appointment_we_never_knew_notifies_no_one,
);
