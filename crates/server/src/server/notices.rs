//! Cloud API notifications whose `field` is not `messages`: every one is
//! stored raw (`channel_events.kind` = its field, so `/metrics` counts
//! them per field in `unavez_channel_events`), and a few act:
//!
//! | field | effect |
//! |---|---|
//! | `message_template_status_update` | the template's status is recorded; `REJECTED`, `PAUSED` or `DISABLED` puts its planned messages in `review` (one alert, not one failure per message). A template this clinic neither sends nor has planned messages of is only noted (`template_not_used`): another app's on the same account |
//! | `message_template_quality_update`, `template_category_update` | quality / category recorded |
//! | `user_preferences` | a marketing `stop` / `resume` the user asked WhatsApp for: marketing consent only |
//! | `account_update`, `smb_message_echoes`, `calls`, anything else | stored, no other effect |

use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::domain::channel_event::EventStatus;
use crate::domain::counter::Counter;
use crate::domain::status::timestamp_text;
use crate::domain::webhook;
use crate::store::{NewChannelEvent, Recorded, SOURCE_CLOUD, StoreError, TemplateStatus, Tx};
use crate::template_check::MetaStatus;
use crate::templates::Templates;

/// The note (`channel_events.reason`) on a template notice for a template
/// this clinic neither sends nor has planned messages of.
pub const TEMPLATE_NOT_USED: &str = "template_not_used";

/// What happened to one notification of another field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoticeOutcome {
    /// Stored; `held` planned messages went to review.
    Recorded {
        held: usize,
    },
    Duplicate,
}

/// One change (`entry[].changes[]`) of a field other than `messages`,
/// with the entry's id and time (part of its identity: Meta sends the
/// same template status again later as a new notification).
#[derive(Debug, Clone)]
pub struct Notice {
    pub field: String,
    pub entry_id: Option<String>,
    pub entry_time: Option<Value>,
    pub value: Value,
}

impl Notice {
    /// A deterministic event id: field plus a hash of entry id, time and value.
    pub fn event_id(&self) -> String {
        let identity = serde_json::json!([self.entry_id, self.entry_time, self.value]).to_string();
        let h = hex::encode(Sha256::digest(identity.as_bytes()));
        format!("{}:{}", self.field, &h[..32])
    }
}

/// Stores one notice raw and applies what it means (inside a savepoint);
/// `templates` are the ones this clinic sends.
pub fn process(
    tx: &Tx<'_>,
    n: &Notice,
    templates: &Templates,
    now: DateTime<Utc>,
) -> Result<NoticeOutcome, StoreError> {
    let payload = serde_json::json!({"field": n.field, "entry_id": n.entry_id, "time": n.entry_time, "value": n.value})
        .to_string();
    let id = n.event_id();
    let ev = NewChannelEvent {
        source: SOURCE_CLOUD,
        event_id: &id,
        kind: &n.field,
        message_id: None,
        intention_key: None,
        payload: &payload,
    };
    let row = match tx.record_channel_event(&ev, now)? {
        Recorded::New(row) => row,
        Recorded::Duplicate { .. } => return Ok(NoticeOutcome::Duplicate),
    };
    let text = |k: &str| n.value.get(k).map(timestamp_text).filter(|s| !s.is_empty());
    let mut held = 0;
    match n.field.as_str() {
        "message_template_status_update" | "message_template_quality_update" | "template_category_update" => {
            let (Some(name), language) = (text("message_template_name"), text("message_template_language")) else {
                tx.mark_channel_event(row, EventStatus::Recorded, None, now)?;
                return Ok(NoticeOutcome::Recorded { held });
            };
            // Another app's template on the same business account: a note
            // on the stored event, never this clinic's alert.
            let planned = tx.planned_of_template(&name)?;
            if !templates.names(&name) && planned.is_empty() {
                tx.set_channel_event_reason(row, EventStatus::Recorded, TEMPLATE_NOT_USED)?;
                tracing::info!(template = ?name, field = ?n.field, "template notice for a template this clinic does not use: noted");
                return Ok(NoticeOutcome::Recorded { held });
            }
            let status = text("event")
                .map(|s| s.to_ascii_uppercase())
                .filter(|_| n.field == "message_template_status_update");
            let reason = text("reason").filter(|r| r != "NONE");
            let category = text("new_category").or_else(|| text("message_template_category"));
            let quality = text("new_quality_score");
            let t = TemplateStatus {
                name: &name,
                language: language.as_deref().unwrap_or(""),
                status: status.as_deref(),
                reason: reason.as_deref(),
                category: category.as_deref(),
                quality: quality.as_deref(),
            };
            tx.set_template_status(&t, row, now)?;
            // Core's rule decides which statuses block sending, the same
            // one `templates check` and the ledger's SQL read.
            if let Some(s) = t.status.filter(|s| MetaStatus::parse(s).blocks_sending()) {
                let note = format!(
                    "WhatsApp reports template {name} as {s}{}: held for review instead of failing",
                    reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
                );
                tx.apply_records(&webhook::hold_template(&planned, &note, &format!("cloud:{id}"), now))?;
                held = planned.len();
                tx.bump_counter(Counter::TemplateBlocked, 1)?;
                // Debug-quoted: the name is the sender's text, and a raw
                // quote or newline in it would forge a log line.
                tracing::warn!(template = ?name, status = ?s, held, "message template blocked by WhatsApp");
            }
        }
        "user_preferences" => {
            for p in n
                .value
                .get("user_preferences")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                preference(tx, p, now)?;
            }
        }
        _ => {}
    }
    tx.mark_channel_event(row, EventStatus::Recorded, None, now)?;
    Ok(NoticeOutcome::Recorded { held })
}

/// `{"wa_id": "…", "category": "marketing_messages", "value": "stop"|"resume"}`.
fn preference(tx: &Tx<'_>, p: &Value, now: DateTime<Utc>) -> Result<(), StoreError> {
    let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("");
    if s("category") != "marketing_messages" {
        return Ok(());
    }
    let stop = match s("value") {
        "stop" => true,
        "resume" => false,
        _ => return Ok(()),
    };
    let digits = s("wa_id").trim().trim_start_matches('+');
    if digits.is_empty() {
        return Ok(());
    }
    let at = p
        .get("timestamp")
        .map(timestamp_text)
        .and_then(|t| t.parse::<i64>().ok())
        .and_then(|t| Utc.timestamp_opt(t, 0).single())
        .map(|t| t.min(now))
        .unwrap_or(now);
    tx.set_marketing_preference(&format!("+{digits}"), stop, at, now)?;
    tx.bump_counter(
        if stop {
            Counter::MarketingStop
        } else {
            Counter::MarketingResume
        },
        1,
    )?;
    Ok(())
}
