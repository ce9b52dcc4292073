//! Channel status reports → state-machine signals (pure).
//!
//! Two sources speak different words for the same evidence: the WhatsApp
//! Cloud API (`sent`, `delivered`, `read`, `failed`) and the engine of seed
//! 003 (`en_cola`, `enviado`, `entregado`, `leido`, `fallido`, `cancelado`,
//! `ambiguo`). Both become one [`Signal`] plus the evidence reference and
//! note that history records. Words we do not know are kept as evidence
//! and change nothing (`signal: None`), because a provider adding a status
//! must never make us drop or misread an event.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::state::{CancelReason, Signal};

/// Engine command states (engine contract spelling).
pub mod estado {
    pub const EN_COLA: &str = "en_cola";
    pub const ENVIADO: &str = "enviado";
    pub const ENTREGADO: &str = "entregado";
    pub const LEIDO: &str = "leido";
    pub const FALLIDO: &str = "fallido";
    pub const CANCELADO: &str = "cancelado";
    pub const AMBIGUO: &str = "ambiguo";
}

/// One engine event: a command changed state, or an ambiguous command was
/// resolved (`resolves_ambiguous = true`, `estado` is the resolution).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MotorEvent {
    /// Unique per event; receivers deduplicate on it.
    pub event_id: String,
    /// `comando.estado` for every state change.
    #[serde(rename = "type")]
    pub kind: String,
    pub instance_id: String,
    pub command_id: String,
    pub idempotency_key: String,
    pub estado: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_message_id: Option<String>,
    /// Failure reason (`comando_vencido`, `generacion_cambiada`…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(default)]
    pub resolves_ambiguous: bool,
    /// RFC 3339.
    pub occurred_at: String,
}

/// One status object of a Cloud API `statuses[]` array, as Meta documents
/// it. Unknown fields are ignored; `pricing` and `conversation` are kept
/// in the raw payload only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CloudStatus {
    /// The wamid of our message.
    pub id: String,
    pub status: String,
    /// Unix seconds; Meta sends a string, some relays a number.
    #[serde(default)]
    pub timestamp: Value,
    #[serde(default)]
    pub recipient_id: Option<String>,
    /// The intention key we sent with the message.
    #[serde(default)]
    pub biz_opaque_callback_data: Option<String>,
    #[serde(default)]
    pub errors: Vec<CloudError>,
}

/// An entry of `errors[]` (status `failed`, or a message we could not read).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CloudError {
    #[serde(default)]
    pub code: Option<i64>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub error_data: Option<CloudErrorData>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CloudErrorData {
    #[serde(default)]
    pub details: Option<String>,
}

/// What a status report means for an intention.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// `None`: a status word we do not map; recorded, never applied.
    pub signal: Option<Signal>,
    /// The provider's own word, for history.
    pub status: String,
    /// Evidence reference written to history (`cloud:<event id>`).
    pub evidence: String,
    /// Error code and title, engine detail, or an ambiguity resolution.
    pub note: Option<String>,
    pub error_code: Option<String>,
}

/// `ts` as the text Meta sends (`"1750857384"`), whatever its JSON type.
pub fn timestamp_text(ts: &Value) -> String {
    match ts {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A Cloud API `timestamp` as the instant it says: Unix seconds, as a
/// string of digits (what Meta sends) or a JSON integer (some relays),
/// after 1970 and within what a date can hold. Anything else (`"abc"`,
/// `""`, `-1`, missing) is refused with the reason: a status whose time
/// cannot be read is not evidence we can order.
pub fn parse_timestamp(ts: &Value) -> Result<DateTime<Utc>, String> {
    let seconds = match ts {
        Value::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s.parse::<i64>().ok(),
        Value::Number(n) => n.as_i64(),
        Value::Null => return Err("timestamp: missing".into()),
        _ => None,
    };
    seconds
        .filter(|s| *s > 0)
        .and_then(|s| DateTime::from_timestamp(s, 0))
        .ok_or_else(|| format!("timestamp: {} is not a positive number of Unix seconds", ts))
}

impl CloudStatus {
    /// Deduplication id: Meta has no event id, and the same wamid reports
    /// several statuses, so the triple identifies one report.
    pub fn event_id(&self) -> String {
        format!("{}:{}:{}", self.id, self.status, timestamp_text(&self.timestamp))
    }

    pub fn report(&self) -> Report {
        let signal = cloud_signal(&self.status);
        let error_code = self.errors.first().and_then(|e| e.code).map(|c| c.to_string());
        let note = (!self.errors.is_empty()).then(|| {
            self.errors
                .iter()
                .map(|e| {
                    let mut s = e.code.map(|c| c.to_string()).unwrap_or_else(|| "?".into());
                    for part in [
                        &e.title,
                        &e.message,
                        &e.error_data.as_ref().and_then(|d| d.details.clone()),
                    ]
                    .into_iter()
                    .flatten()
                    {
                        if !s.contains(part.as_str()) {
                            s.push_str(": ");
                            s.push_str(part);
                        }
                    }
                    s
                })
                .collect::<Vec<_>>()
                .join("; ")
        });
        Report {
            signal,
            status: self.status.clone(),
            evidence: format!("cloud:{}", self.event_id()),
            note,
            error_code,
        }
    }
}

/// Cloud API status word → signal.
pub fn cloud_signal(status: &str) -> Option<Signal> {
    Some(match status {
        "sent" => Signal::Sent,
        "delivered" => Signal::Delivered,
        "read" => Signal::Read,
        "failed" => Signal::Failed,
        _ => return None,
    })
}

/// Engine state word → signal. `en_cola` is the engine's acceptance;
/// `cancelado` is a withdrawal the engine confirms (nothing went out);
/// `ambiguo` is the engine itself not knowing.
pub fn motor_signal(estado_word: &str) -> Option<Signal> {
    Some(match estado_word {
        estado::EN_COLA => Signal::Accepted,
        estado::ENVIADO => Signal::Sent,
        estado::ENTREGADO => Signal::Delivered,
        estado::LEIDO => Signal::Read,
        estado::FALLIDO => Signal::Failed,
        estado::CANCELADO => Signal::Cancel(CancelReason::Withdrawn),
        estado::AMBIGUO => Signal::Unknown,
        _ => return None,
    })
}

/// What an engine event means for an intention.
pub fn motor_report(ev: &MotorEvent) -> Report {
    let mut notes = Vec::new();
    if ev.resolves_ambiguous {
        notes.push("engine resolved an ambiguous command".to_string());
    }
    if let Some(d) = ev.detail.as_deref().filter(|d| !d.is_empty()) {
        notes.push(d.to_string());
    }
    Report {
        signal: motor_signal(&ev.estado),
        status: ev.estado.clone(),
        evidence: format!("motor:{}", ev.event_id),
        note: (!notes.is_empty()).then(|| notes.join("; ")),
        error_code: (ev.estado == estado::FALLIDO).then(|| ev.detail.clone().unwrap_or_else(|| "fallido".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(json: &str) -> CloudStatus {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn cloud_words_map_to_signals() {
        assert_eq!(cloud_signal("sent"), Some(Signal::Sent));
        assert_eq!(cloud_signal("delivered"), Some(Signal::Delivered));
        assert_eq!(cloud_signal("read"), Some(Signal::Read));
        assert_eq!(cloud_signal("failed"), Some(Signal::Failed));
        assert_eq!(cloud_signal("deleted"), None);
        assert_eq!(cloud_signal("played"), None);
        assert_eq!(cloud_signal("SENT"), None);
    }

    #[test]
    fn motor_words_map_to_signals() {
        assert_eq!(motor_signal("en_cola"), Some(Signal::Accepted));
        assert_eq!(motor_signal("enviado"), Some(Signal::Sent));
        assert_eq!(motor_signal("entregado"), Some(Signal::Delivered));
        assert_eq!(motor_signal("leido"), Some(Signal::Read));
        assert_eq!(motor_signal("fallido"), Some(Signal::Failed));
        assert_eq!(motor_signal("cancelado"), Some(Signal::Cancel(CancelReason::Withdrawn)));
        assert_eq!(motor_signal("ambiguo"), Some(Signal::Unknown));
        assert_eq!(motor_signal("perdido"), None);
    }

    #[test]
    fn event_id_is_wamid_status_timestamp_whatever_the_json_type() {
        let a = status(r#"{"id":"wamid.A","status":"sent","timestamp":"1750857384","extra":1}"#);
        let b = status(r#"{"id":"wamid.A","status":"sent","timestamp":1750857384}"#);
        assert_eq!(a.event_id(), "wamid.A:sent:1750857384");
        assert_eq!(a.event_id(), b.event_id());
        let c = status(r#"{"id":"wamid.A","status":"delivered","timestamp":"1750857384"}"#);
        assert_ne!(a.event_id(), c.event_id());
    }

    #[test]
    fn timestamps_must_be_positive_unix_seconds() {
        use serde_json::json;
        let at = |v: Value| parse_timestamp(&v).map(|t| t.timestamp());
        assert_eq!(at(json!("1750857384")), Ok(1750857384));
        assert_eq!(at(json!(1750857384)), Ok(1750857384));
        assert_eq!(at(json!("1")), Ok(1));
        for bad in [
            json!("abc"),
            json!(""),
            json!("-1"),
            json!(-1),
            json!(0),
            json!("0"),
            json!(" 17"),
            json!("1e9"),
            json!(1.5),
            json!("99999999999999999999"),
            json!(i64::MAX),
            json!(true),
            json!({}),
        ] {
            let e = at(bad.clone()).unwrap_err();
            assert!(e.starts_with("timestamp: "), "{bad}: {e}");
        }
        assert_eq!(
            at(json!("abc")).unwrap_err(),
            "timestamp: \"abc\" is not a positive number of Unix seconds"
        );
        assert_eq!(at(Value::Null).unwrap_err(), "timestamp: missing");
    }

    #[test]
    fn failed_reports_carry_code_and_title() {
        let s = status(
            r#"{"id":"wamid.B","status":"failed","timestamp":"1","recipient_id":"51987654321",
                "errors":[{"code":131026,"title":"Message undeliverable","message":"Message undeliverable",
                "error_data":{"details":"Receiver is incapable of receiving this message"}}]}"#,
        );
        let r = s.report();
        assert_eq!(r.signal, Some(Signal::Failed));
        assert_eq!(r.error_code.as_deref(), Some("131026"));
        assert_eq!(
            r.note.as_deref(),
            Some("131026: Message undeliverable: Receiver is incapable of receiving this message")
        );
        assert_eq!(r.evidence, "cloud:wamid.B:failed:1");
    }

    #[test]
    fn motor_reports_note_resolutions() {
        let ev = MotorEvent {
            event_id: "evt-9".into(),
            kind: "comando.estado".into(),
            instance_id: "i".into(),
            command_id: "cmd-1".into(),
            idempotency_key: "cita-1:recordatorio-24h:v1".into(),
            estado: "enviado".into(),
            provider_message_id: None,
            detail: None,
            resolves_ambiguous: true,
            occurred_at: "2026-11-29T15:00:00Z".into(),
        };
        let r = motor_report(&ev);
        assert_eq!(r.signal, Some(Signal::Sent));
        assert_eq!(r.evidence, "motor:evt-9");
        assert!(r.note.unwrap().contains("ambiguous"));
        let failed = MotorEvent {
            estado: "fallido".into(),
            detail: Some("comando_vencido".into()),
            ..ev
        };
        assert_eq!(motor_report(&failed).error_code.as_deref(), Some("comando_vencido"));
    }
}
