//! `POST /v1/bookings/events`: the booking system or CRM pushes the same
//! event objects as the `.jsonl` import, one object or an array, with
//! `Authorization: Bearer <token>`.
//!
//! Each event is applied inside its own savepoint through
//! [`crate::ingest::ingest_each`], so it is applied whole or not at all,
//! and a repeated `event_id` with the same content changes nothing. The
//! answer lists every event: `stored`, `duplicate`, or `rejected` with the
//! reason (naming the field); an appointment further ahead than `[import]
//! max_days_ahead` is rejected like a malformed one. A conflict (the stored version with other
//! content, or a reused `event_id`) is `rejected` naming `version` and the
//! differing fields, every time it is posted, and kept for a person. A
//! store error while applying one event is that event's rejection: the
//! others are applied. HTTP 200 when none was rejected, 422 when all were,
//! 207 when mixed; 5xx only when the request's transaction itself cannot
//! begin or commit.

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::auth::{check_bearer, read_body};
use super::{ApiError, AppState};
use crate::domain::counter::{Counter, Rejection, Source};
use crate::domain::event::BookingEvent;
use crate::domain::json::{array_items, parse_strict};
use crate::ingest::{IngestError, Outcome, ingest_each};
use crate::store::StoreError;

/// One line of the answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EventResult {
    /// Position in the posted array (0 for a single object).
    pub index: usize,
    pub event_id: Option<String>,
    /// `stored`, `duplicate` or `rejected`.
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// For stored events: keys planned, intentions closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IngestSummary {
    pub stored: usize,
    pub duplicates: usize,
    pub rejected: usize,
    pub results: Vec<EventResult>,
}

pub async fn receive(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    let token = state.secrets().ingest_token.clone();
    check_bearer(&state, Source::Bookings, token.as_deref(), &headers).await?;
    let raw = read_body(&state, Source::Bookings, &headers, body).await?;
    let items = match posted_events(&raw) {
        Ok(items) => items,
        Err(reason) => {
            state.count_rejection(Source::Bookings, Rejection::Malformed).await;
            return Err(ApiError::new(StatusCode::BAD_REQUEST, reason));
        }
    };
    let summary = state
        .blocking(move |st, store| {
            let now = Utc::now();
            store.write(|tx| {
                let planner = st.planner();
                let mut results = Vec::with_capacity(items.len());
                for (index, (text, value)) in items.iter().enumerate() {
                    let event_id = value.get("event_id").and_then(Value::as_str).map(str::to_string);
                    let horizon = st.config().import.max_days_ahead;
                    let checked = BookingEvent::from_json(text)
                        .and_then(|ev| ev.check_horizon(now, horizon).map(|()| ev).map_err(|e| vec![e]));
                    let ev = match checked {
                        Ok(ev) => ev,
                        Err(errors) => {
                            let reason = errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; ");
                            results.push(rejected(index, event_id, reason));
                            continue;
                        }
                    };
                    match ingest_each(tx, &planner, &[&ev], "http", now).remove(0) {
                        Ok(Outcome::Duplicate { .. }) => results.push(EventResult {
                            index,
                            event_id,
                            outcome: "duplicate".into(),
                            reason: None,
                            detail: None,
                        }),
                        Ok(stored @ Outcome::Stored { .. }) => results.push(EventResult {
                            index,
                            event_id,
                            outcome: "stored".into(),
                            reason: None,
                            detail: serde_json::to_value(&stored).ok(),
                        }),
                        Err(IngestError::Conflict(c)) => {
                            let mut r = rejected(index, event_id, format!("version: {c}"));
                            r.detail = serde_json::to_value(&*c)
                                .ok()
                                .map(|c| serde_json::json!({ "conflict": c }));
                            results.push(r);
                        }
                        // This event's savepoint is rolled back; the others
                        // stand (the sender may post this one again).
                        Err(e @ IngestError::Store(_)) => {
                            tracing::warn!(index, error = ?e.to_string(), "booking event not applied: store error");
                            results.push(rejected(index, event_id, format!("{}: {}", e.field(), e.reason())));
                        }
                        Err(e) => results.push(rejected(index, event_id, e.to_string())),
                    }
                }
                let summary = summarize(results);
                if summary.rejected > 0 {
                    tx.bump_counter(
                        Counter::WebhookRejected(Source::Bookings, Rejection::InvalidEvent),
                        summary.rejected as i64,
                    )?;
                }
                Ok::<_, StoreError>(summary)
            })
        })
        .await??;
    let status = match (summary.rejected, summary.results.len()) {
        (0, _) => StatusCode::OK,
        (r, n) if r == n => StatusCode::UNPROCESSABLE_ENTITY,
        _ => StatusCode::MULTI_STATUS,
    };
    Ok((status, Json(summary)).into_response())
}

/// The posted events: one object or an array of them, each with the exact
/// text it was sent as (the event log keeps it) and its value. A key given
/// twice anywhere refuses the whole body (400), naming the key and where:
/// the sender and we would read it differently.
fn posted_events(body: &[u8]) -> Result<Vec<(String, Value)>, String> {
    let text = std::str::from_utf8(body).map_err(|e| format!("malformed JSON: not UTF-8 ({e})"))?;
    let value = parse_strict(text).map_err(|e| format!("malformed JSON: {e}"))?;
    match value {
        Value::Object(_) => Ok(vec![(text.trim().to_string(), value)]),
        Value::Array(values) => {
            let texts = array_items(text)
                .filter(|t| t.len() == values.len())
                .ok_or("malformed JSON: unreadable array")?;
            Ok(texts.into_iter().map(str::to_string).zip(values).collect())
        }
        _ => Err("expected an event object or an array of them".into()),
    }
}

fn rejected(index: usize, event_id: Option<String>, reason: String) -> EventResult {
    EventResult {
        index,
        event_id,
        outcome: "rejected".into(),
        reason: Some(reason),
        detail: None,
    }
}

fn summarize(results: Vec<EventResult>) -> IngestSummary {
    let count = |o: &str| results.iter().filter(|r| r.outcome == o).count();
    IngestSummary {
        stored: count("stored"),
        duplicates: count("duplicate"),
        rejected: count("rejected"),
        results,
    }
}
