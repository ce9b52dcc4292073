//! Booking events into the ledger: log the event, update the commitment,
//! plan, close what stopped being pertinent and reserve new intentions —
//! all inside the caller's transaction, so an event is applied whole or not
//! at all, and a repeated event (same `event_id`, same content) changes
//! nothing.
//!
//! One version names one content, as one idempotency key does at the
//! engine (engine contract: same key, other content → 409). An event that states
//! the stored version but describes the commitment otherwise, or that
//! reuses an event id with other content, is a conflict: refused on its
//! own, never merged, and kept (see [`ingest_each`]) so a person sees it.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::domain::counter::Counter;
use crate::domain::event::{BookingEvent, ConflictKind, differing_fields};
use crate::domain::fingerprint::fingerprint;
use crate::planner::{PlanError, Planner};
use crate::store::{EventEffect, LoggedEvent, NewRefusal, StoreError, Tx};

#[path = "ingest_group.rs"]
mod group;

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("{0}")]
    Rejected(String),
    /// The event conflicts with what the ledger holds; nothing of it was
    /// applied.
    #[error("version: {0}")]
    Conflict(Box<EventConflict>),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl IngestError {
    /// The event field an import row error names.
    pub fn field(&self) -> &'static str {
        match self {
            IngestError::Rejected(_) | IngestError::Plan(PlanError::Key(_)) => "ref",
            IngestError::Conflict(_) => "version",
            IngestError::Plan(_) => "type",
            IngestError::Store(_) => "store",
        }
    }

    /// The explanation without the field name.
    pub fn reason(&self) -> String {
        match self {
            IngestError::Conflict(c) => c.to_string(),
            IngestError::Store(e) => format!("the ledger could not apply this event: {e}"),
            other => other.to_string(),
        }
    }
}

/// Why an event was refused as a conflict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventConflict {
    pub event_id: String,
    /// The commitment the refusal is filed under.
    pub reference: String,
    pub kind: ConflictKind,
    /// The stored version the event conflicts with.
    pub version: i64,
    /// JSON names of the fields that differ (`location`, `contact.phone`…).
    pub fields: Vec<String>,
}

impl fmt::Display for EventConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fields = self.fields.join(", ");
        match self.kind {
            ConflictKind::SameVersion => write!(
                f,
                "{} is already at version {} with other content ({fields}): refused; a change needs a higher version",
                self.reference, self.version
            ),
            ConflictKind::EventIdReused => write!(
                f,
                "event_id {} was already received with other content ({fields}): refused; a changed event needs a new event_id",
                self.event_id
            ),
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// First time we see this event id.
    Stored {
        reference: String,
        effect: EventEffect,
        version: i64,
        planned: Vec<String>,
        already_present: usize,
        closed: usize,
        /// Reserved but handed to a person (`review`) instead of being
        /// sent: their rendered text is over WhatsApp's limit.
        held: Vec<String>,
        notes: Vec<String>,
    },
    /// The event id was already in the log with the same content: nothing
    /// changed.
    Duplicate { event_id: String },
}

/// Applies events in order, each whole or not at all, inside the caller's
/// transaction; one result per event. A conflict is also recorded as a
/// refused event (kept when the caller commits). An event that fails
/// leaves nothing of it behind and the others go on.
///
/// Events are first applied together in one savepoint, their intentions
/// reserved in set-based writes; only when one of them fails is the batch
/// undone and applied again one savepoint per event, so that every error
/// belongs to its own event and nothing of a good one is lost.
pub fn ingest_each(
    tx: &Tx<'_>,
    planner: &Planner<'_>,
    events: &[&BookingEvent],
    source: &str,
    now: DateTime<Utc>,
) -> Vec<Result<Outcome, IngestError>> {
    if events.len() > 1
        && let Ok(all) = tx.atomically(|tx| apply_all(tx, planner, events, source, now))
    {
        return all.into_iter().map(Ok).collect();
    }
    events
        .iter()
        .map(|ev| {
            let result = tx.atomically(|tx| apply_all(tx, planner, &[ev], source, now).map(|mut o| o.remove(0)));
            keep_refusal(tx, ev, source, now, result)
        })
        .collect()
}

/// Records a conflict as a refused event (in a savepoint of its own, so it
/// is kept when the caller commits), and hands the result on.
fn keep_refusal(
    tx: &Tx<'_>,
    ev: &BookingEvent,
    source: &str,
    now: DateTime<Utc>,
    result: Result<Outcome, IngestError>,
) -> Result<Outcome, IngestError> {
    if let Err(IngestError::Conflict(c)) = &result {
        let value = serde_json::to_value(ev).map_err(|e| IngestError::Rejected(e.to_string()))?;
        let payload = logged_payload(ev)?;
        let reason = c.to_string();
        let refusal = NewRefusal {
            event_id: &ev.event_id,
            commitment_ref: &c.reference,
            event_type: ev.kind.as_str(),
            version: c.version,
            conflict: c.kind,
            fields: &c.fields,
            reason: &reason,
            source,
            payload: &payload,
            fingerprint: &fingerprint(&value),
        };
        tx.atomically(|tx| tx.record_refusal(&refusal, now))?;
    }
    result
}

/// Applies one validated booking event inside `tx`. On `Err` the caller
/// must roll back what it wrote (or use [`ingest_each`], which does).
pub fn ingest(
    tx: &Tx<'_>,
    planner: &Planner<'_>,
    ev: &BookingEvent,
    source: &str,
    now: DateTime<Utc>,
) -> Result<Outcome, IngestError> {
    Ok(apply_all(tx, planner, &[ev], source, now)?.remove(0))
}

/// Applies events in order inside `tx`, set-based: a run of events that
/// touch distinct commitments is read, logged, saved and reserved with a
/// few multi-row statements (see [`group`]); on `Err` the caller must roll
/// back what it wrote.
fn apply_all(
    tx: &Tx<'_>,
    planner: &Planner<'_>,
    events: &[&BookingEvent],
    source: &str,
    now: DateTime<Utc>,
) -> Result<Vec<Outcome>, IngestError> {
    let mut outcomes = Vec::with_capacity(events.len());
    let mut rest = events;
    while !rest.is_empty() {
        let applied = group::apply(tx, planner, rest, source, now, &mut outcomes)?;
        rest = &rest[applied..];
    }
    // A phone reported wrong on a call gets nothing more (`ops::call`).
    for o in &mut outcomes {
        if let Outcome::Stored { planned, held, .. } = o {
            let wrong = crate::ops::hold_wrong_numbers(tx, planned, now).map_err(|e| match e {
                crate::ops::OpsError::Store(e) => IngestError::Store(e),
                other => IngestError::Rejected(other.to_string()),
            })?;
            planned.retain(|k| !wrong.contains(k));
            held.extend(wrong);
        }
    }
    Ok(outcomes)
}

/// What the event log keeps of an event: the text it was received as
/// when it came as JSON, else its serialization.
fn logged_payload(ev: &BookingEvent) -> Result<String, IngestError> {
    match &ev.raw {
        Some(raw) => Ok(raw.clone()),
        None => serde_json::to_string(ev).map_err(|e| IngestError::Rejected(e.to_string())),
    }
}

/// A logged payload as the event it describes, so that a received text
/// (with fields we ignore, other spacing) compares by content with the
/// same event sent again; a payload that is no event compares as it is.
fn logged_content(payload: &str) -> Value {
    let value: Value = serde_json::from_str(payload).unwrap_or(Value::Null);
    serde_json::from_value::<BookingEvent>(value.clone())
        .ok()
        .and_then(|ev| serde_json::to_value(ev).ok())
        .unwrap_or(value)
}

/// An event id already in the log: a duplicate when its content is the
/// same, a conflict otherwise.
fn repeated(tx: &Tx<'_>, ev: &BookingEvent, value: &Value, seen: LoggedEvent) -> Result<Outcome, IngestError> {
    let stored = logged_content(&seen.payload);
    let fields = differing_fields(&stored, value);
    if fields.is_empty() {
        tx.bump_counter(Counter::DuplicateEvents, 1)?;
        return Ok(Outcome::Duplicate {
            event_id: ev.event_id.clone(),
        });
    }
    // Filed under the event's own commitment when we know it, else under
    // the one the reused id belongs to, so it always has a place to show.
    let (reference, current) = match tx.commitment(&ev.reference)? {
        Some(c) => (ev.reference.clone(), Some(c)),
        None => (seen.commitment_ref.clone(), tx.commitment(&seen.commitment_ref)?),
    };
    Err(IngestError::Conflict(Box::new(EventConflict {
        event_id: ev.event_id.clone(),
        reference,
        kind: ConflictKind::EventIdReused,
        version: current.map(|c| c.commitment.version).unwrap_or(1),
        fields,
    })))
}

#[cfg(test)]
#[path = "ingest_tests.rs"]
mod tests;
