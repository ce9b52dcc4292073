//! `POST /webhooks/motor`: the engine's command events (engine contract), in the
//! wire format of [`crate::channel::motor_event`]: one [`MotorEvent`] (or
//! an array of them) signed with `X-Unavez-Signature`.
//!
//! Each event is deduplicated by its `event_id` (a copy adds to the stored
//! event's `copies`), correlated by the idempotency key (our intention key)
//! or the provider message id, and applied monotonically; the command id
//! and message id are recorded on the intention the first time they are
//! seen. Three checks come first, and all keep the event raw:
//! - an event from another engine instance than `[channel.motor]
//!   instance_id` is refused (`foreign_instance`): it is about messages of
//!   another installation;
//! - an event whose key and message id name two different intentions is
//!   parked (`key_message_mismatch`) and applied to neither: a person must
//!   see which message it is about;
//! - an event whose `estado` the engine contract does not name is parked
//!   (`unknown_state`): it says nothing we could apply.

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::auth::{check_signature, read_body};
use super::{ApiError, AppState};
use crate::channel::motor_event::{MotorEvent, SIGNATURE_HEADER};
use crate::domain::channel_event::EventStatus;
use crate::domain::counter::{Counter, Parking, Rejection, Source};
use crate::domain::json::{array_items, parse_strict};
use crate::domain::status::{motor_report, motor_signal};
use crate::store::{
    NewChannelEvent, PARKED_UNKNOWN_STATE, REFUSED_FOREIGN_INSTANCE, Recorded, SOURCE_MOTOR, StatusOutcome, StoreError,
    Tx,
};
use unavez_app::status::OnSplit;

#[derive(Debug, Serialize)]
pub struct MotorSummary {
    pub results: Vec<StatusOutcome>,
}

pub async fn receive(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    let raw = read_body(&state, Source::Motor, &headers, body).await?;
    let secret = state.secrets().motor_webhook_secret.clone();
    check_signature(
        &state,
        Source::Motor,
        secret.as_deref(),
        &headers,
        SIGNATURE_HEADER,
        &raw,
    )
    .await?;
    let events = match parse(&raw) {
        Ok(evs) => evs,
        Err(e) => {
            state.count_rejection(Source::Motor, Rejection::Malformed).await;
            return Err(ApiError::new(StatusCode::BAD_REQUEST, e));
        }
    };
    let results = state
        .blocking(move |st, store| {
            let now = Utc::now();
            let instance = st.config().channel.motor.instance_id.clone();
            store.write(|tx| {
                events
                    .iter()
                    .map(|(ev, payload)| tx.atomically(|tx| apply(tx, &instance, ev, payload, now)))
                    .collect()
            })
        })
        .await??;
    Ok((StatusCode::OK, Json(MotorSummary { results })).into_response())
}

/// One event or an array; each keeps its own text, as sent, for the log.
/// The whole body is refused if any event is unreadable or names a key
/// twice (which of the two counts is the reader's guess), naming which.
fn parse(raw: &[u8]) -> Result<Vec<(MotorEvent, String)>, String> {
    let text = std::str::from_utf8(raw).map_err(|e| format!("malformed engine event JSON: not UTF-8 ({e})"))?;
    let v = parse_strict(text).map_err(|e| format!("malformed engine event JSON: {e}"))?;
    let items: Vec<(String, Value)> = match v {
        Value::Array(items) => array_items(text)
            .filter(|t| t.len() == items.len())
            .ok_or("malformed engine event JSON: unreadable array")?
            .into_iter()
            .map(str::to_string)
            .zip(items)
            .collect(),
        one => vec![(text.trim().to_string(), one)],
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, (payload, item))| {
            let ev: MotorEvent = serde_json::from_value(item).map_err(|e| format!("engine event [{i}]: {e}"))?;
            if ev.event_id.trim().is_empty() {
                return Err(format!("engine event [{i}]: event_id: empty"));
            }
            Ok((ev, payload))
        })
        .collect()
}

/// Records and applies one engine event (call inside a savepoint);
/// `instance` is the configured engine instance id.
pub fn apply(
    tx: &Tx<'_>,
    instance: &str,
    ev: &MotorEvent,
    payload: &str,
    now: DateTime<Utc>,
) -> Result<StatusOutcome, StoreError> {
    let new = NewChannelEvent {
        source: SOURCE_MOTOR,
        event_id: &ev.event_id,
        kind: "motor_event",
        message_id: ev.provider_message_id.as_deref(),
        intention_key: Some(&ev.idempotency_key),
        payload,
    };
    if ev.instance_id != instance {
        return match tx.record_channel_event(&new, now)? {
            Recorded::New(row) => {
                tx.set_channel_event_reason(row, EventStatus::Refused, REFUSED_FOREIGN_INSTANCE)?;
                tx.bump_counter(Counter::WebhookRejected(Source::Motor, Rejection::ForeignInstance), 1)?;
                // Debug-quoted: these are the sender's words, and a raw
                // newline in them would forge a log line.
                tracing::warn!(
                    event_id = ?ev.event_id,
                    instance = ?ev.instance_id,
                    configured = ?instance,
                    "engine event from another instance refused"
                );
                Ok(StatusOutcome::Refused {
                    reason: REFUSED_FOREIGN_INSTANCE.into(),
                })
            }
            Recorded::Duplicate { intention_id, .. } => Ok(StatusOutcome::Duplicate { intention_id }),
        };
    }
    // A state the contract does not name says nothing we can apply; kept
    // raw for a technician instead of being answered `applied`.
    if motor_signal(&ev.estado).is_none() {
        return match tx.record_channel_event(&new, now)? {
            Recorded::New(row) => {
                tx.set_channel_event_reason(row, EventStatus::Parked, PARKED_UNKNOWN_STATE)?;
                tx.bump_counter(Counter::WebhookParked(Source::Motor, Parking::UnknownState), 1)?;
                tracing::warn!(
                    event_id = ?ev.event_id,
                    estado = ?ev.estado,
                    "engine event with a state the engine contract does not name: parked"
                );
                Ok(StatusOutcome::Parked {
                    reason: PARKED_UNKNOWN_STATE.into(),
                })
            }
            Recorded::Duplicate { intention_id, .. } => Ok(StatusOutcome::Duplicate { intention_id }),
        };
    }
    let out = unavez_app::status::ingest_status(tx, &new, &motor_report(ev), OnSplit::Park, now)?;
    if let StatusOutcome::Applied { intention_id, .. } = &out {
        let cmd = Some(ev.command_id.as_str()).filter(|c| !c.is_empty());
        tx.set_provider_refs(*intention_id, cmd, ev.provider_message_id.as_deref(), now)?;
    }
    Ok(out)
}
