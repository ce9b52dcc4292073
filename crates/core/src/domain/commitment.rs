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
pub use super::lifecycle::{CommitmentStatus, OrderState};

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
    /// Scheduled or cancelled for appointments; the order's state
    /// (`confirmado`, `enviado`…) for orders.
    pub status: CommitmentStatus,
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
        self.status == CommitmentStatus::Cancelled
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
    /// The phone changed (time and place, or the order's state, did not):
    /// whatever was planned for the old number must never reach it.
    Recipient,
    /// An order moved to a new state and to a new phone in one event: the
    /// new state's notice goes to the new phone, and what was still
    /// planned for the old one is retired.
    OrderStateNewRecipient,
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
    (change, matters) = who_and_what(cur, &next, change, matters);
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

/// Who receives the message and what it names matter as much as when: a
/// new phone or name makes every planned text wrong (and the old phone
/// must never get one), so such a change raises the version like a move.
fn who_and_what(cur: &Commitment, next: &Commitment, change: Change, matters: bool) -> (Change, bool) {
    let replans = matches!(
        change,
        Change::Created | Change::Rescheduled | Change::Moved | Change::Cancelled
    );
    let new_phone = next.phone != cur.phone;
    match next.kind {
        CommitmentKind::Appointment if !replans && new_phone => (Change::Recipient, true),
        CommitmentKind::Appointment if !replans && (next.name != cur.name || next.service != cur.service) => {
            (Change::Details, true)
        }
        // An order's notices go to a phone too: what was planned for the
        // old number is retired and the planner moves it to the new one.
        CommitmentKind::Order if new_phone => match change {
            Change::Created | Change::OrderState => (Change::OrderStateNewRecipient, true),
            _ => (Change::Recipient, true),
        },
        _ => (change, matters),
    }
}

fn blank(ev: &BookingEvent, kind: CommitmentKind) -> Commitment {
    Commitment {
        reference: ev.reference.clone(),
        kind,
        // Each event kind sets its own status; this is only the start.
        status: match kind {
            CommitmentKind::Appointment => CommitmentStatus::Scheduled,
            CommitmentKind::Order => CommitmentStatus::Order(OrderState::Updated),
        },
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
            next.status = CommitmentStatus::Scheduled;
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
                next.status = CommitmentStatus::Cancelled;
                next.starts_at = ev.starts_at_utc();
                next.location = ev.location.clone();
                (Change::NoChange, false)
            } else {
                // The cancellation is the newest word on the appointment:
                // the time and place it names are the ones kept, so the
                // final row does not depend on whether an older reschedule
                // arrived before it or (stale, ignored) after it.
                next.status = CommitmentStatus::Cancelled;
                if let Some(start) = ev.starts_at_utc() {
                    next.starts_at = Some(start);
                }
                if ev.location.is_some() {
                    next.location = ev.location.clone();
                }
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
            let state = CommitmentStatus::Order(order.order_state().unwrap_or(OrderState::Updated));
            if current.is_none() {
                next.status = state;
                (Change::Created, true)
            } else if next.status == state && ev.version.is_none_or(|v| v == next.version) {
                (Change::NoChange, false)
            } else {
                next.status = state;
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
#[path = "commitment_tests.rs"]
mod tests;
