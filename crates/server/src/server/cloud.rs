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

use std::collections::HashMap;

use axum::Json;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::auth::{check_signature, constant_time_eq, read_body};
use super::inbound::{self, InboundOutcome};
use super::notices::{self, Notice, NoticeOutcome};
use super::{ApiError, AppState};
use crate::domain::counter::{Counter, Rejection, Source};
use crate::domain::json::parse_strict;
use crate::domain::status::{CloudStatus, parse_timestamp};
use crate::store::{NewChannelEvent, SOURCE_CLOUD, StatusOutcome, StoreError, Tx};
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
    /// `(index in the batch, reason)` of events that could not be read.
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
    Message(Value),
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
            out.extend(v.messages.into_iter().map(Item::Message));
        }
    }
    out
}

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
        let outcome = match item {
            Item::Status(v) => tx
                .atomically(|tx| process_status(tx, v, now))
                .map(|o| o.map(Counted::Status)),
            Item::Message(v) => tx
                .atomically(|tx| inbound::process(tx, state, v, now))
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
            Err(reason) => {
                tx.bump_counter(Counter::WebhookRejected(Source::Cloud, Rejection::MalformedEvent), 1)?;
                s.rejected.push((i, reason));
            }
        }
        i += 1;
    }
    Ok(s)
}

enum Counted {
    Status(StatusOutcome),
    Inbound(InboundOutcome),
    Notice(NoticeOutcome),
}

/// One `statuses[]` object: `Ok(Err(reason))` when it cannot be read.
fn process_status(tx: &Tx<'_>, v: Value, now: DateTime<Utc>) -> Result<Result<StatusOutcome, String>, StoreError> {
    let status: CloudStatus = match serde_json::from_value(v.clone()) {
        Ok(s) => s,
        Err(e) => return Ok(Err(format!("status object: {e}"))),
    };
    if status.id.trim().is_empty() || status.status.trim().is_empty() {
        return Ok(Err("status object: empty id or status".into()));
    }
    // Refused before it is stored: an unreadable time is no evidence.
    if let Err(reason) = parse_timestamp(&status.timestamp) {
        return Ok(Err(format!("status object: {reason}")));
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
