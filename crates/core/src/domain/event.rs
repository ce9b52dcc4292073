//! Booking events: the input contract shared by `unavez import` (`.jsonl`,
//! `.csv`, `.ics`) and the HTTP ingest endpoint.
//!
//! Parsing is lenient about what it does not know (unknown fields are
//! ignored, so booking systems can send more than we use) and strict about
//! what it does (unknown types, bad phones and bad times are errors that name
//! the field), because a silently misread appointment time is a message at
//! the wrong hour.

use chrono::{DateTime, FixedOffset, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;

use super::fingerprint::canonical_json;
use super::json::parse_strict;
use super::key::check_ref;
use super::lifecycle::OrderState;
pub use super::phone::{check_phone, is_e164};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventType {
    #[serde(rename = "appointment.scheduled")]
    AppointmentScheduled,
    #[serde(rename = "appointment.rescheduled")]
    AppointmentRescheduled,
    #[serde(rename = "appointment.cancelled")]
    AppointmentCancelled,
    #[serde(rename = "appointment.confirmed")]
    AppointmentConfirmed,
    #[serde(rename = "appointment.manual_contact")]
    AppointmentManualContact,
    #[serde(rename = "order.confirmed")]
    OrderConfirmed,
    #[serde(rename = "order.paid")]
    OrderPaid,
    #[serde(rename = "order.prepared")]
    OrderPrepared,
    #[serde(rename = "order.shipped")]
    OrderShipped,
    #[serde(rename = "order.exception")]
    OrderException,
    #[serde(rename = "order.delivered")]
    OrderDelivered,
    #[serde(rename = "order.returned")]
    OrderReturned,
    #[serde(rename = "order.updated")]
    OrderUpdated,
}

impl EventType {
    pub const ALL: [EventType; 13] = [
        Self::AppointmentScheduled,
        Self::AppointmentRescheduled,
        Self::AppointmentCancelled,
        Self::AppointmentConfirmed,
        Self::AppointmentManualContact,
        Self::OrderConfirmed,
        Self::OrderPaid,
        Self::OrderPrepared,
        Self::OrderShipped,
        Self::OrderException,
        Self::OrderDelivered,
        Self::OrderReturned,
        Self::OrderUpdated,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::AppointmentScheduled => "appointment.scheduled",
            Self::AppointmentRescheduled => "appointment.rescheduled",
            Self::AppointmentCancelled => "appointment.cancelled",
            Self::AppointmentConfirmed => "appointment.confirmed",
            Self::AppointmentManualContact => "appointment.manual_contact",
            Self::OrderConfirmed => "order.confirmed",
            Self::OrderPaid => "order.paid",
            Self::OrderPrepared => "order.prepared",
            Self::OrderShipped => "order.shipped",
            Self::OrderException => "order.exception",
            Self::OrderDelivered => "order.delivered",
            Self::OrderReturned => "order.returned",
            Self::OrderUpdated => "order.updated",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    pub fn is_order(self) -> bool {
        self.as_str().starts_with("order.")
    }

    /// The Spanish event name used in order keys and templates, or `None`
    /// for internal micro-states that produce no message.
    /// The order state this event moves an order to (None for
    /// appointment events and internal updates).
    pub fn order_state(self) -> Option<OrderState> {
        Some(match self {
            Self::OrderConfirmed => OrderState::Confirmed,
            Self::OrderPaid => OrderState::Paid,
            Self::OrderPrepared => OrderState::Prepared,
            Self::OrderShipped => OrderState::Shipped,
            Self::OrderException => OrderState::Exception,
            Self::OrderDelivered => OrderState::Delivered,
            Self::OrderReturned => OrderState::Returned,
            _ => return None,
        })
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventContact {
    pub phone: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
}

/// One validated booking event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BookingEvent {
    pub event_id: String,
    #[serde(rename = "type")]
    pub kind: EventType,
    #[serde(rename = "ref")]
    pub reference: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts_at: Option<DateTime<FixedOffset>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contact: Option<EventContact>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occurred_at: Option<DateTime<FixedOffset>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The JSON text the event was received as (a `.jsonl` line, an item
    /// of a `POST /v1/bookings/events` body), which the event log keeps
    /// as it is; `None` for events built from other formats (CSV,
    /// iCalendar) or by us, whose log entry is their serialization.
    #[serde(skip)]
    pub raw: Option<String>,
}

/// Why an event was refused as a conflict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConflictKind {
    /// It states the stored version of its commitment with other content.
    SameVersion,
    /// Its event id was already received with other content.
    EventIdReused,
}

impl ConflictKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SameVersion => "same_version",
            Self::EventIdReused => "event_id_reused",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::SameVersion, Self::EventIdReused]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

/// One thing wrong with an event, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: String,
    pub reason: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.reason)
    }
}

fn err(field: &str, reason: impl Into<String>) -> FieldError {
    FieldError {
        field: field.to_string(),
        reason: reason.into(),
    }
}

/// The longest texts an event may carry, in characters. They bound what a
/// message, a log line or a terminal row can be made to hold by one event,
/// and they leave a rendered message well under WhatsApp's 4,096 characters
/// with the shipped templates.
pub const MAX_EVENT_ID_CHARS: usize = 200;
/// A ref is part of every idempotency key (at most 200 characters with its
/// purpose, version and any resend suffix).
pub const MAX_REF_CHARS: usize = 120;
pub const MAX_NAME_CHARS: usize = 120;
/// Service and place.
pub const MAX_LABEL_CHARS: usize = 200;
/// Notes and reasons.
pub const MAX_NOTE_CHARS: usize = 1000;
/// The largest integer every JSON reader holds exactly (2^53 - 1); also
/// keeps "the next version" of a version-less event from overflowing.
pub const MAX_VERSION: i64 = 9_007_199_254_740_991;

impl BookingEvent {
    /// Parses one JSON object (refusing a key given twice), keeping its
    /// text as [`BookingEvent::raw`], and reporting the *first* field that is wrong
    /// (serde stops there) or every semantic problem found by [`validate`].
    ///
    /// [`validate`]: BookingEvent::validate
    pub fn from_json(text: &str) -> Result<BookingEvent, Vec<FieldError>> {
        // Strict: a key given twice would be read one way here and
        // another way by the sender (see `domain::json`).
        let value = parse_strict(text).map_err(|e| vec![err("json", e.to_string())])?;
        let mut ev = Self::from_value(value)?;
        ev.raw = Some(text.to_string());
        Ok(ev)
    }

    pub fn from_value(raw: serde_json::Value) -> Result<BookingEvent, Vec<FieldError>> {
        let obj = raw.as_object().ok_or_else(|| vec![err("json", "expected an object")])?;
        // Check the fields serde would report vaguely, so the message names them.
        let mut errors = Vec::new();
        match obj.get("type").and_then(|t| t.as_str()) {
            None => errors.push(err("type", "missing")),
            Some(t) if EventType::parse(t).is_none() => errors.push(err("type", format!("unknown type {t:?}"))),
            Some(_) => {}
        }
        for f in ["event_id", "ref"] {
            if obj.get(f).and_then(|v| v.as_str()).is_none_or(|s| s.trim().is_empty()) {
                errors.push(err(f, "missing"));
            }
        }
        for f in ["starts_at", "occurred_at"] {
            if let Some(v) = obj.get(f).filter(|v| !v.is_null()) {
                match v.as_str() {
                    Some(s) if DateTime::parse_from_rfc3339(s).is_err() => {
                        errors.push(err(f, format!("unparsable time {s:?} (expected RFC 3339 with offset)")))
                    }
                    None => errors.push(err(f, "expected a string")),
                    _ => {}
                }
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let ev: BookingEvent = serde_json::from_value(raw).map_err(|e| vec![err("json", e.to_string())])?;
        ev.validate()?;
        Ok(ev)
    }

    /// Semantic checks that do not depend on stored state.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        if self.event_id.trim().is_empty() {
            errors.push(err("event_id", "missing"));
        }
        if let Err(e) = check_ref(&self.reference) {
            errors.push(err("ref", e.to_string()));
        }
        if let Some(c) = &self.contact
            && let Err(reason) = check_phone(&c.phone)
        {
            errors.push(err("contact.phone", reason));
        }
        match self.kind {
            EventType::AppointmentScheduled => {
                if self.starts_at.is_none() {
                    errors.push(err("starts_at", "missing (required for appointment.scheduled)"));
                }
                if self.contact.is_none() {
                    errors.push(err("contact", "missing (required for appointment.scheduled)"));
                }
            }
            EventType::AppointmentRescheduled if self.starts_at.is_none() => {
                errors.push(err("starts_at", "missing (the new time of appointment.rescheduled)"));
            }
            EventType::AppointmentManualContact if self.operator.as_deref().is_none_or(str::is_empty) => {
                errors.push(err("operator", "missing (who contacted the customer)"));
            }
            EventType::OrderConfirmed if self.contact.is_none() => {
                errors.push(err("contact", "missing (required for order.confirmed)"));
            }
            _ => {}
        }
        if let Some(v) = self.version
            && !(1..=MAX_VERSION).contains(&v)
        {
            errors.push(err("version", format!("must be between 1 and {MAX_VERSION}, got {v}")));
        }
        for (field, text, max) in self.bounded_texts() {
            let n = text.chars().count();
            if n > max {
                errors.push(err(field, format!("too long: {n} characters (at most {max})")));
            }
        }
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }

    /// Every free text of the event with its JSON name and its limit.
    fn bounded_texts(&self) -> Vec<(&'static str, &str, usize)> {
        let c = self.contact.as_ref();
        [
            ("event_id", Some(self.event_id.as_str()), MAX_EVENT_ID_CHARS),
            ("ref", Some(self.reference.as_str()), MAX_REF_CHARS),
            ("contact.name", c.and_then(|c| c.name.as_deref()), MAX_NAME_CHARS),
            ("service", self.service.as_deref(), MAX_LABEL_CHARS),
            ("location", self.location.as_deref(), MAX_LABEL_CHARS),
            ("operator", self.operator.as_deref(), MAX_NAME_CHARS),
            ("note", self.note.as_deref(), MAX_NOTE_CHARS),
        ]
        .into_iter()
        .filter_map(|(f, t, max)| t.map(|t| (f, t, max)))
        .collect()
    }

    pub fn starts_at_utc(&self) -> Option<DateTime<Utc>> {
        self.starts_at.map(|t| t.with_timezone(&Utc))
    }

    /// Refuses a start more than `max_days` after `now` (`[import]
    /// max_days_ahead`): a mistyped year (`9999`) is a typo, not a booking,
    /// and its notices would name a day without the year.
    pub fn check_horizon(&self, now: DateTime<Utc>, max_days: u32) -> Result<(), FieldError> {
        let limit = now + chrono::Duration::days(max_days.into());
        match self.starts_at {
            Some(s) if s.with_timezone(&Utc) > limit => Err(err(
                "starts_at",
                format!(
                    "{} is more than {max_days} days ahead (import.max_days_ahead): check the year",
                    s.to_rfc3339()
                ),
            )),
            _ => Ok(()),
        }
    }
}

/// The JSON names of the fields in which two serialized events differ
/// (`location`, `contact.phone`…), compared in canonical form so that a
/// time written with another offset or extra whitespace is the same
/// content. `event_id` is left out: the caller compares events that share it.
pub fn differing_fields(a: &serde_json::Value, b: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    diff_into("", a, b, &mut out);
    out
}

fn diff_into(prefix: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value;
    let empty = serde_json::Map::new();
    let (ma, mb) = match (a, b) {
        (Value::Object(ma), Value::Object(mb)) => (ma, mb),
        (Value::Object(ma), Value::Null) => (ma, &empty),
        (Value::Null, Value::Object(mb)) => (&empty, mb),
        _ => {
            if canonical_json(a) != canonical_json(b) {
                out.push(prefix.trim_end_matches('.').to_string());
            }
            return;
        }
    };
    let mut keys: Vec<&String> = ma.keys().chain(mb.keys()).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        if prefix.is_empty() && k == "event_id" {
            continue;
        }
        let (va, vb) = (ma.get(k).unwrap_or(&Value::Null), mb.get(k).unwrap_or(&Value::Null));
        diff_into(&format!("{prefix}{k}."), va, vb, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"event_id":"evt-0001","type":"appointment.scheduled","ref":"cita-1042",
     "starts_at":"2026-12-01T09:30:00-05:00","version":1,
     "contact":{"phone":"+51987654321","name":"Ana Quispe","language":"es"},
     "service":"Odontología","location":"Sede Miraflores","occurred_at":"2026-11-29T15:00:00-05:00",
     "extra":"ignored"}"#;

    #[test]
    fn the_documented_example_parses() {
        let ev = BookingEvent::from_json(GOOD).unwrap();
        assert_eq!(ev.kind, EventType::AppointmentScheduled);
        assert_eq!(ev.reference, "cita-1042");
        assert_eq!(ev.version, Some(1));
        assert_eq!(ev.starts_at_utc().unwrap().to_rfc3339(), "2026-12-01T14:30:00+00:00");
    }

    #[test]
    fn a_start_past_the_horizon_is_refused_naming_starts_at() {
        let now = DateTime::parse_from_rfc3339("2026-12-01T12:00:00Z").unwrap().to_utc();
        let at = |t: &str| {
            BookingEvent::from_json(&GOOD.replace("2026-12-01T09:30:00-05:00", t))
                .unwrap()
                .check_horizon(now, 400)
        };
        assert!(at("2026-12-01T09:30:00-05:00").is_ok());
        assert!(at("2028-01-05T12:00:00Z").is_ok());
        let e = at("9999-12-31T09:00:00-05:00").unwrap_err();
        assert_eq!(e.field, "starts_at");
        assert!(e.reason.contains("9999-12-31") && e.reason.contains("400 days"), "{e}");
        assert!(at("2028-01-05T12:00:01Z").is_err());
        // Past starts are not this rule's business (the planner notes them).
        assert!(at("2020-01-01T09:00:00Z").is_ok());
    }

    #[test]
    fn errors_name_the_field() {
        let bad = GOOD.replace("+51987654321", "987654321");
        let e = BookingEvent::from_json(&bad).unwrap_err();
        assert_eq!(e[0].field, "contact.phone");
        let bad = GOOD.replace("appointment.scheduled", "appointment.moved");
        let e = BookingEvent::from_json(&bad).unwrap_err();
        assert_eq!(e[0].field, "type");
        assert!(e[0].reason.contains("unknown type"));
        let bad = GOOD.replace("2026-12-01T09:30:00-05:00", "mañana");
        let e = BookingEvent::from_json(&bad).unwrap_err();
        assert_eq!(e[0].field, "starts_at");
        let bad = GOOD.replace("\"ref\":\"cita-1042\",", "");
        let e = BookingEvent::from_json(&bad).unwrap_err();
        assert_eq!(e[0].field, "ref");
        let e = BookingEvent::from_json("{not json").unwrap_err();
        assert_eq!(e[0].field, "json");
    }

    #[test]
    fn an_invalid_phone_names_the_field() {
        let e = BookingEvent::from_json(&GOOD.replace("+51987654321", "+51000000000")).unwrap_err();
        assert_eq!(e[0].field, "contact.phone");
        assert!(e[0].reason.contains("not a valid phone number"), "{:?}", e[0]);
    }

    #[test]
    fn a_key_given_twice_is_refused_and_the_text_is_kept() {
        let twice = r#"{"event_id":"e-1","type":"appointment.cancelled","type":"appointment.scheduled","ref":"cita-1",
            "starts_at":"2026-12-01T09:30:00-05:00","contact":{"phone":"+51987654321"}}"#;
        let e = BookingEvent::from_json(twice).unwrap_err();
        assert_eq!(e[0].field, "json");
        assert!(e[0].reason.starts_with("duplicate key \"type\""), "{:?}", e[0]);
        let nested = GOOD.replace("\"name\":\"Ana Quispe\"", "\"name\":\"Ana\",\"name\":\"Eva\"");
        let e = BookingEvent::from_json(&nested).unwrap_err();
        assert!(e[0].reason.starts_with("duplicate key \"contact.name\""), "{:?}", e[0]);
        let ev = BookingEvent::from_json(GOOD).unwrap();
        assert_eq!(
            ev.raw.as_deref(),
            Some(GOOD),
            "the text as received, unknown fields and all"
        );
        assert_eq!(
            BookingEvent::from_value(serde_json::from_str(GOOD).unwrap())
                .unwrap()
                .raw,
            None
        );
        assert!(!serde_json::to_string(&ev).unwrap().contains("raw"));
    }

    #[test]
    fn type_names_round_trip() {
        for t in EventType::ALL {
            assert_eq!(EventType::parse(t.as_str()), Some(t));
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(json, format!("\"{}\"", t.as_str()));
        }
    }

    #[test]
    fn oversize_texts_are_refused_naming_the_field() {
        let long = |n: usize| "x".repeat(n);
        let mut v: serde_json::Value = serde_json::from_str(GOOD).unwrap();
        v["contact"]["name"] = long(MAX_NAME_CHARS).into();
        v["service"] = long(MAX_LABEL_CHARS).into();
        v["location"] = "ñ".repeat(MAX_LABEL_CHARS).into();
        v["note"] = long(MAX_NOTE_CHARS).into();
        assert!(
            BookingEvent::from_value(v.clone()).is_ok(),
            "at the limits (in characters, not bytes)"
        );
        v["contact"]["name"] = long(MAX_NAME_CHARS + 1).into();
        v["service"] = long(MAX_LABEL_CHARS + 1).into();
        v["location"] = "ñ".repeat(MAX_LABEL_CHARS + 1).into();
        v["note"] = long(MAX_NOTE_CHARS + 1).into();
        v["operator"] = long(MAX_NAME_CHARS + 1).into();
        let e = BookingEvent::from_value(v).unwrap_err();
        let shown: Vec<String> = e.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            shown,
            [
                "contact.name: too long: 121 characters (at most 120)",
                "service: too long: 201 characters (at most 200)",
                "location: too long: 201 characters (at most 200)",
                "operator: too long: 121 characters (at most 120)",
                "note: too long: 1001 characters (at most 1000)",
            ]
        );
        let e = BookingEvent::from_json(&GOOD.replace("\"version\":1", "\"version\":9007199254740992")).unwrap_err();
        assert_eq!(e[0].field, "version");
    }

    #[test]
    fn differing_fields_are_named_by_their_json_paths() {
        let a: serde_json::Value = serde_json::from_str(GOOD).unwrap();
        let mut b = a.clone();
        b["event_id"] = "other".into();
        b["starts_at"] = "2026-12-01T14:30:00Z".into();
        b["service"] = " Odontología ".into();
        assert!(
            differing_fields(&a, &b).is_empty(),
            "same instant, same text, id ignored"
        );
        b["location"] = "Sede B".into();
        b["contact"]["phone"] = "+51911222333".into();
        b["note"] = "nuevo".into();
        assert_eq!(differing_fields(&a, &b), ["contact.phone", "location", "note"]);
        b.as_object_mut().unwrap().remove("contact");
        assert_eq!(
            differing_fields(&a, &b),
            ["contact.language", "contact.name", "contact.phone", "location", "note"]
        );
    }
}
