//! Commitments (appointments, orders) and how booking events change them.
//!
//! The version is what keeps an old message from being taken as the truth
//! about a new state: every change that matters to what the customer is told
//! (time, place, status, and for appointments the recipient's phone, name
//! and the service) raises it, and intentions carry the version they were
//! planned for. Confirmation and manual contact are *facts about* the
//! commitment, not changes to it, so they do not raise the version.
//!
//! A version names one content, as an idempotency key does at the engine:
//! an event that states the stored version but describes the commitment
//! otherwise is a [`Effect::Conflict`], refused whole, never merged.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::event::{BookingEvent, EventType};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommitmentKind {
    Appointment,
    Order,
}

impl CommitmentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Appointment => "appointment",
            Self::Order => "order",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "appointment" => Some(Self::Appointment),
            "order" => Some(Self::Order),
            _ => None,
        }
    }
}

/// Business status. For orders it is the last notified state name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commitment {
    pub reference: String,
    pub kind: CommitmentKind,
    /// `scheduled` / `cancelled` for appointments; the order state
    /// (`confirmado`, `enviado`…) for orders.
    pub status: String,
    pub version: i64,
    pub starts_at: Option<DateTime<Utc>>,
    pub service: Option<String>,
    pub location: Option<String>,
    pub phone: Option<String>,
    pub name: Option<String>,
    pub language: Option<String>,
    pub confirmed_at: Option<DateTime<Utc>>,
    pub manual_contact_at: Option<DateTime<Utc>>,
}

impl Commitment {
    pub fn is_cancelled(&self) -> bool {
        self.status == "cancelled"
    }
}

/// What an event did to a commitment.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// The event is older than what we hold: recorded, nothing changes.
    Stale { current_version: i64 },
    /// The commitment after the event. `version_changed` says whether
    /// intentions of the previous version stopped being valid.
    Applied {
        after: Commitment,
        version_changed: bool,
        kind: Change,
    },
    /// The event refers to something we do not know and cannot create
    /// (e.g. a reschedule for an unknown appointment).
    Rejected { reason: String },
    /// The event states the stored version but would change these fields
    /// (their JSON names): one version cannot have two contents.
    Conflict { version: i64, fields: Vec<&'static str> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Created,
    Rescheduled,
    Moved,
    Cancelled,
    Confirmed,
    ManualContact,
    OrderState,
    Internal,
    /// The phone changed (time and place did not): whatever was planned
    /// for the old number must never reach it.
    Recipient,
    /// The contact's name or the service changed: the planned texts are
    /// stale.
    Details,
    NoChange,
}

/// Applies one event to the current commitment (pure).
pub fn apply(current: Option<&Commitment>, ev: &BookingEvent, at: DateTime<Utc>) -> Effect {
    if let (Some(cur), Some(v)) = (current, ev.version)
        && v < cur.version
    {
        return Effect::Stale {
            current_version: cur.version,
        };
    }
    let kind = if ev.kind.is_order() {
        CommitmentKind::Order
    } else {
        CommitmentKind::Appointment
    };
    if let Some(cur) = current
        && cur.kind != kind
    {
        return Effect::Rejected {
            reason: format!(
                "ref {} is an {}, not an {}",
                cur.reference,
                cur.kind.as_str(),
                kind.as_str()
            ),
        };
    }
    let mut next = match current {
        Some(c) => c.clone(),
        None => {
            if !matches!(ev.kind, EventType::AppointmentScheduled | EventType::OrderConfirmed) && ev.contact.is_none() {
                return Effect::Rejected {
                    reason: format!(
                        "unknown ref {} and the event carries no contact to create it",
                        ev.reference
                    ),
                };
            }
            blank(ev, kind)
        }
    };
    take_contact_and_service(&mut next, ev);
    let (mut change, mut matters) = apply_kind(current, &mut next, ev, at);
    if ev.location.is_some() && next.kind == CommitmentKind::Order {
        next.location = ev.location.clone();
    }
    let Some(cur) = current else {
        next.version = ev.version.unwrap_or(1);
        return Effect::Applied {
            after: next,
            version_changed: true,
            kind: change,
        };
    };
    if ev.version == Some(cur.version) {
        let fields = content_differences(cur, &next);
        if !fields.is_empty() {
            return Effect::Conflict {
                version: cur.version,
                fields,
            };
        }
    }
    // Who receives the message and what it names matter as much as when:
    // a new phone or name makes every planned text wrong (and the old phone
    // must never get one), so the change raises the version like a move.
    let replans = matches!(
        change,
        Change::Created | Change::Rescheduled | Change::Moved | Change::Cancelled
    );
    if next.kind == CommitmentKind::Appointment && !replans {
        if next.phone != cur.phone {
            (change, matters) = (Change::Recipient, true);
        } else if next.name != cur.name || next.service != cur.service {
            (change, matters) = (Change::Details, true);
        }
    }
    next.version = match ev.version {
        // An event's own version (iCalendar SEQUENCE) is authoritative.
        Some(v) => v,
        None if matters => match cur.version.checked_add(1) {
            Some(v) => v,
            None => {
                return Effect::Rejected {
                    reason: format!("ref {} is at the largest version", cur.reference),
                };
            }
        },
        None => cur.version,
    };
    // A higher version from the booking system with nothing we track
    // changed still retires the old version's messages (the dispatcher's
    // validity check closes them): plan them again for the new one.
    if next.kind == CommitmentKind::Appointment
        && next.version != cur.version
        && matches!(change, Change::NoChange | Change::Confirmed | Change::ManualContact)
    {
        change = Change::Details;
    }
    Effect::Applied {
        version_changed: next.version != cur.version,
        after: next,
        kind: change,
    }
}

fn blank(ev: &BookingEvent, kind: CommitmentKind) -> Commitment {
    Commitment {
        reference: ev.reference.clone(),
        kind,
        status: String::new(),
        version: 0,
        starts_at: None,
        service: None,
        location: None,
        phone: None,
        name: None,
        language: None,
        confirmed_at: None,
        manual_contact_at: None,
    }
}

fn take_contact_and_service(next: &mut Commitment, ev: &BookingEvent) {
    if let Some(c) = &ev.contact {
        next.phone = Some(c.phone.clone());
        if c.name.is_some() {
            next.name = c.name.clone();
        }
        if c.language.is_some() {
            next.language = c.language.clone();
        }
    }
    if ev.service.is_some() {
        next.service = ev.service.clone();
    }
}

/// What the event's type does to `next`: the change and whether it raises
/// the version of a version-less event.
fn apply_kind(
    current: Option<&Commitment>,
    next: &mut Commitment,
    ev: &BookingEvent,
    at: DateTime<Utc>,
) -> (Change, bool) {
    match ev.kind {
        EventType::AppointmentScheduled | EventType::AppointmentRescheduled => {
            let new_start = ev.starts_at_utc();
            let moved_place = ev.location.is_some() && ev.location != next.location;
            let moved_time = new_start.is_some() && new_start != next.starts_at;
            let was_cancelled = next.is_cancelled();
            if ev.location.is_some() {
                next.location = ev.location.clone();
            }
            if new_start.is_some() {
                next.starts_at = new_start;
            }
            next.status = "scheduled".into();
            if current.is_none() {
                (Change::Created, true)
            } else if moved_time || was_cancelled {
                // A new time invalidates any earlier confirmation.
                next.confirmed_at = None;
                (Change::Rescheduled, true)
            } else if moved_place {
                (Change::Moved, true)
            } else {
                (Change::NoChange, false)
            }
        }
        EventType::AppointmentCancelled => {
            if next.is_cancelled() {
                (Change::NoChange, false)
            } else if current.is_none() {
                // An appointment we never announced (e.g. the cancelled rows
                // of an agenda export): remember it as cancelled, tell no one.
                next.status = "cancelled".into();
                next.starts_at = ev.starts_at_utc();
                next.location = ev.location.clone();
                (Change::NoChange, false)
            } else {
                next.status = "cancelled".into();
                (Change::Cancelled, true)
            }
        }
        EventType::AppointmentConfirmed => {
            if next.confirmed_at.is_some() {
                (Change::NoChange, false)
            } else {
                next.confirmed_at = Some(ev.occurred_at.map(|t| t.with_timezone(&Utc)).unwrap_or(at));
                (Change::Confirmed, false)
            }
        }
        EventType::AppointmentManualContact => {
            next.manual_contact_at = Some(ev.occurred_at.map(|t| t.with_timezone(&Utc)).unwrap_or(at));
            (Change::ManualContact, false)
        }
        EventType::OrderUpdated => (Change::Internal, false),
        order => {
            let state = order.order_notice().unwrap_or("actualizado");
            if current.is_none() {
                next.status = state.into();
                (Change::Created, true)
            } else if next.status == state && ev.version.is_none_or(|v| v == next.version) {
                (Change::NoChange, false)
            } else {
                next.status = state.into();
                (Change::OrderState, true)
            }
        }
    }
}

/// The JSON names of the event fields whose content differs between the
/// stored commitment and what the event would make of it. The status is
/// named `type`: the event's type is what asks for it. The language is
/// the person's (kept on the contact) and no message depends on it.
pub fn content_differences(cur: &Commitment, next: &Commitment) -> Vec<&'static str> {
    [
        ("type", cur.status != next.status),
        ("starts_at", cur.starts_at != next.starts_at),
        ("location", cur.location != next.location),
        ("service", cur.service != next.service),
        ("contact.phone", cur.phone != next.phone),
        ("contact.name", cur.name != next.name),
    ]
    .into_iter()
    .filter_map(|(f, differs)| differs.then_some(f))
    .collect()
}

#[cfg(test)]
mod tests {
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
}
