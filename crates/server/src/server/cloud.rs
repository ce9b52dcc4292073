//! `GET|POST /webhooks/whatsapp`: the WhatsApp Cloud API.
//!
//! A notification is `{"object": "whatsapp_business_account", "entry":
//! [{"changes": [{"field": "messages", "value": {"statuses": [...],
//! "messages": [...]}}]}]}`. Each status and each inbound message is one
//! event: stored raw, deduplicated, applied inside its own savepoint, in
//! the order it appears. Every change of another `field` (template
//! statuses, user preferences, calls, account updates, fields Meta adds
//! later) is stored raw too and handled by [`super::notices`]. A status of
//! `type: "call"` is a call's, not a message's: stored, never parked as a
//! pending message status.
//!
//! Nothing in a notification is dropped: a status or message object that
//! cannot be acted on (unreadable, a placeholder sender such as
//! `<WHATSAPP_USER_PHONE_NUMBER>`, no sender at all) is stored raw with
//! status `refused` and an [`Unactionable`] reason, counted, and listed
//! for technicians with the parked events (docs/design.md, "Every webhook
//! body is kept").

use std::collections::HashMap;

use axum::Json;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::auth::{check_signature, constant_time_eq, read_body};
use super::inbound::{self, InboundOutcome};
use super::notices::{self, Notice, NoticeOutcome};
use super::{ApiError, AppState};
use crate::domain::channel_event::EventStatus;
use crate::domain::counter::{Counter, Rejection, Source, Unactionable};
use crate::domain::json::parse_strict;
use crate::domain::status::{CloudStatus, parse_timestamp};
use crate::store::{NewChannelEvent, Recorded, SOURCE_CLOUD, StatusOutcome, StoreError, Tx};
use unavez_app::status::OnSplit;

/// Meta's signature header: HMAC-SHA256 of the raw body with the app secret.
pub const SIGNATURE_HEADER: &str = "X-Hub-Signature-256";

/// The notification envelope; every level tolerates missing and unknown
/// fields, because Meta adds fields and sends other `field` kinds.
#[derive(Debug, Deserialize)]
pub struct Notification {
    #[serde(default)]
    pub object: Option<String>,
    #[serde(default)]
    pub entry: Vec<NotificationEntry>,
}

#[derive(Debug, Deserialize)]
pub struct NotificationEntry {
    #[serde(default)]
    pub id: Option<String>,
    /// Unix seconds; template and account notices carry it.
    #[serde(default)]
    pub time: Option<Value>,
    #[serde(default)]
    pub changes: Vec<NotificationChange>,
}

/// `value` stays raw: its shape depends on `field`.
#[derive(Debug, Deserialize)]
pub struct NotificationChange {
    #[serde(default)]
    pub field: Option<String>,
    #[serde(default)]
    pub value: Value,
}

/// A `messages` change. `statuses[]` and `messages[]` stay raw JSON here
/// so that one malformed item is rejected alone instead of failing the
/// whole batch; `contacts[]` tells which `user_id` a phone has.
#[derive(Debug, Default, Deserialize)]
pub struct ChangeValue {
    #[serde(default)]
    pub statuses: Vec<Value>,
    #[serde(default)]
    pub messages: Vec<Value>,
    #[serde(default)]
    pub contacts: Vec<Value>,
}

/// The answer to a notification: what happened to each event.
#[derive(Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct BatchSummary {
    pub received: usize,
    pub applied: usize,
    pub pending: usize,
    pub duplicates: usize,
    /// Stored with no effect on any message: call statuses, account
    /// updates, fields we do not act on, messages we cannot correlate yet.
    #[serde(default)]
    pub recorded: usize,
    /// `(index in the batch, reason)` of events that could not be acted
    /// on; each is stored raw as `refused`.
    pub rejected: Vec<(usize, String)>,
}

/// `GET /webhooks/whatsapp?hub.mode=subscribe&hub.verify_token=…&hub.challenge=…`
pub async fn verify_subscription(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let Some(expected) = state.secrets().cloud_verify_token.clone() else {
        return Err(state.not_configured(
            "cloud_verify",
            "verify token is not configured (see server.cloud_verify_token_env)".into(),
        ));
    };
    let mode = q.get("hub.mode").map(String::as_str);
    let token = q.get("hub.verify_token").map(String::as_str).unwrap_or("");
    match (mode, q.get("hub.challenge")) {
        (Some("subscribe"), Some(challenge)) if constant_time_eq(token.as_bytes(), expected.as_bytes()) => {
            Ok((StatusCode::OK, challenge.clone()).into_response())
        }
        (Some("subscribe"), Some(_)) => {
            state.count_rejection(Source::Cloud, Rejection::VerifyToken).await;
            Err(ApiError::new(StatusCode::FORBIDDEN, "hub.verify_token does not match"))
        }
        _ => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "expected hub.mode=subscribe and hub.challenge",
        )),
    }
}

/// `POST /webhooks/whatsapp`: signature first, then parse, then apply.
pub async fn receive(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    let raw = read_body(&state, Source::Cloud, &headers, body).await?;
    let secret = state.secrets().cloud_app_secret.clone();
    check_signature(
        &state,
        Source::Cloud,
        secret.as_deref(),
        &headers,
        SIGNATURE_HEADER,
        &raw,
    )
    .await?;
    // Strict first: a key given twice in a status would be read one way
    // here and another way by whoever reads the stored payload.
    // (Then read again as the envelope, whose errors keep their position.)
    let strict = std::str::from_utf8(&raw)
        .map_err(|e| e.to_string())
        .and_then(|text| parse_strict(text).map(drop).map_err(|e| e.to_string()));
    let note = strict.and_then(|()| serde_json::from_slice::<Notification>(&raw).map_err(|e| e.to_string()));
    let note = match note {
        Ok(n) => n,
        Err(e) => {
            state.count_rejection(Source::Cloud, Rejection::Malformed).await;
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("malformed notification JSON: {e}"),
            ));
        }
    };
    let items = items(note);
    let summary = state
        .blocking(move |st, store| {
            let now = Utc::now();
            store.write(|tx| process_batch(tx, st, items.clone(), now))
        })
        .await??;
    Ok((StatusCode::OK, Json(summary)).into_response())
}

/// One event of a notification.
#[derive(Debug, Clone)]
pub enum Item {
    Status(Value),
    /// A message, and the `user_id` of its change's `contacts[]` when
    /// they name exactly one (the sender of a message without `from`).
    Message(Value, Option<String>),
    /// A `contacts[]` entry: `wa_id` and Meta's `user_id`.
    Contact(Value),
    /// A change of another field, or a call status.
    Notice(Notice),
}

/// The events of a notification, in order; a `messages` change's contacts
/// come first so its messages can be correlated by `user_id`.
pub fn items(note: Notification) -> Vec<Item> {
    let mut out = Vec::new();
    for e in note.entry {
        for c in e.changes {
            let field = c.field.unwrap_or_default();
            if field != "messages" {
                out.push(Item::Notice(Notice {
                    field: if field.is_empty() { "unknown".into() } else { field },
                    entry_id: e.id.clone(),
                    entry_time: e.time.clone(),
                    value: c.value,
                }));
                continue;
            }
            let v: ChangeValue = serde_json::from_value(c.value.clone()).unwrap_or_default();
            let sole_user_id = sole_user_id(&v.contacts);
            out.extend(v.contacts.into_iter().map(Item::Contact));
            for s in v.statuses {
                if s.get("type").and_then(Value::as_str) == Some("call") {
                    out.push(Item::Notice(Notice {
                        field: "calls".into(),
                        entry_id: e.id.clone(),
                        entry_time: e.time.clone(),
                        value: s,
                    }));
                } else {
                    out.push(Item::Status(s));
                }
            }
            out.extend(v.messages.into_iter().map(|m| Item::Message(m, sole_user_id.clone())));
        }
    }
    out
}

/// The one `user_id` a change's `contacts[]` names, if they name one.
fn sole_user_id(contacts: &[Value]) -> Option<String> {
    let mut ids: Vec<&str> = contacts
        .iter()
        .filter_map(|c| c.get("user_id").and_then(Value::as_str))
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .collect();
    ids.dedup();
    match ids.as_slice() {
        [one] => Some((*one).to_string()),
        _ => None,
    }
}

/// An event that cannot be acted on: why (stored) and the detail (in the
/// answer and the log).
pub type Refused = (Unactionable, String);

/// Applies a notification's events in order, each whole or not at all.
pub fn process_batch(
    tx: &Tx<'_>,
    state: &AppState,
    items: Vec<Item>,
    now: DateTime<Utc>,
) -> Result<BatchSummary, StoreError> {
    let mut s = BatchSummary {
        received: items.iter().filter(|i| !matches!(i, Item::Contact(_))).count(),
        ..BatchSummary::default()
    };
    // The index a rejection names counts events, not contacts[] entries.
    let mut i = 0;
    for item in items {
        if let Item::Contact(v) = &item {
            inbound::learn_user_id(tx, v, now)?;
            continue;
        }
        let (kind, raw) = match &item {
            Item::Status(v) => ("status", Some(v.clone())),
            Item::Message(v, _) => ("inbound", Some(v.clone())),
            _ => ("", None),
        };
        let outcome = match item {
            Item::Status(v) => tx
                .atomically(|tx| process_status(tx, v, now))
                .map(|o| o.map(Counted::Status)),
            Item::Message(v, contact_user_id) => tx
                .atomically(|tx| inbound::process(tx, state, v, contact_user_id.as_deref(), now))
                .map(|o| o.map(Counted::Inbound)),
            Item::Contact(_) => continue,
            Item::Notice(n) => tx
                .atomically(|tx| notices::process(tx, &n, state.templates(), now))
                .map(|o| Ok(Counted::Notice(o))),
        }?;
        match outcome {
            Ok(Counted::Status(StatusOutcome::Applied { .. }))
            | Ok(Counted::Inbound(InboundOutcome::Applied { .. })) => s.applied += 1,
            Ok(Counted::Status(StatusOutcome::Pending)) => s.pending += 1,
            Ok(Counted::Status(StatusOutcome::Duplicate { .. }))
            | Ok(Counted::Inbound(InboundOutcome::Duplicate))
            | Ok(Counted::Notice(NoticeOutcome::Duplicate)) => s.duplicates += 1,
            Ok(Counted::Status(StatusOutcome::Parked { .. } | StatusOutcome::Refused { .. }))
            | Ok(Counted::Inbound(InboundOutcome::Recorded { .. }))
            | Ok(Counted::Notice(NoticeOutcome::Recorded { .. })) => s.recorded += 1,
            Err((why, detail)) => {
                tx.bump_counter(Counter::WebhookRejected(Source::Cloud, Rejection::MalformedEvent), 1)?;
                if let Some(raw) = raw {
                    tx.atomically(|tx| keep_refused(tx, kind, &raw, why, now))?;
                }
                tracing::warn!(index = i, reason = why.as_str(), detail = ?detail, "webhook event refused and kept");
                s.rejected.push((i, detail));
            }
        }
        i += 1;
    }
    Ok(s)
}

/// Keeps an event that cannot be acted on: raw, `refused`, with its
/// reason. Its id is made from its bytes (it may have no usable id of its
/// own), so a redelivery counts as a copy, never a second row.
fn keep_refused(tx: &Tx<'_>, kind: &str, raw: &Value, why: Unactionable, now: DateTime<Utc>) -> Result<(), StoreError> {
    let payload = raw.to_string();
    let event_id = format!("refused:{}", &hex::encode(Sha256::digest(payload.as_bytes()))[..32]);
    let ev = NewChannelEvent {
        source: SOURCE_CLOUD,
        event_id: &event_id,
        kind,
        message_id: None,
        intention_key: None,
        payload: &payload,
    };
    if let Recorded::New(row) = tx.record_channel_event(&ev, now)? {
        tx.set_channel_event_reason(row, EventStatus::Refused, why.as_str())?;
    }
    Ok(())
}

enum Counted {
    Status(StatusOutcome),
    Inbound(InboundOutcome),
    Notice(NoticeOutcome),
}

/// One `statuses[]` object: `Ok(Err(why))` when it cannot be read.
fn process_status(tx: &Tx<'_>, v: Value, now: DateTime<Utc>) -> Result<Result<StatusOutcome, Refused>, StoreError> {
    let unreadable = |detail: String| Ok(Err((Unactionable::UnreadableStatus, detail)));
    let status: CloudStatus = match serde_json::from_value(v.clone()) {
        Ok(s) => s,
        Err(e) => return unreadable(format!("status object: {e}")),
    };
    if status.id.trim().is_empty() || status.status.trim().is_empty() {
        return unreadable("status object: empty id or status".into());
    }
    // Not applied: an unreadable time is no evidence (kept `refused`).
    if let Err(reason) = parse_timestamp(&status.timestamp) {
        return unreadable(format!("status object: {reason}"));
    }
    let payload = v.to_string();
    let event_id = status.event_id();
    let ev = NewChannelEvent {
        source: SOURCE_CLOUD,
        event_id: &event_id,
        kind: "status",
        message_id: Some(&status.id),
        intention_key: status.biz_opaque_callback_data.as_deref(),
        payload: &payload,
    };
    unavez_app::status::ingest_status(tx, &ev, &status.report(), OnSplit::Correlate, now).map(Ok)
}
