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
//! own, never merged, and kept (see [`ingest_alone`]) so a person sees it.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::domain::commitment::{Change, Commitment, Effect, apply};
use crate::domain::counter::Counter;
use crate::domain::event::{BookingEvent, ConflictKind, differing_fields};
use crate::domain::fingerprint::fingerprint;
use crate::domain::history::{self, HistorySignal, Said};
use crate::domain::intention::NewIntention;
use crate::domain::state::{IntentionState, Signal};
use crate::planner::{PlanError, Planner};
use crate::store::{Cause, EventEffect, LoggedEvent, NewRefusal, Reserved, StoreError, Tx};

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

/// Applies one event in its own savepoint: a failure leaves nothing of it
/// behind and the rest of the caller's transaction goes on. A conflict is
/// then recorded as a refused event (outside the savepoint, so it is kept
/// when the caller commits) and still returned as the error.
pub fn ingest_alone(
    tx: &Tx<'_>,
    planner: &Planner<'_>,
    ev: &BookingEvent,
    source: &str,
    now: DateTime<Utc>,
) -> Result<Outcome, IngestError> {
    let result = tx.atomically(|tx| ingest(tx, planner, ev, source, now));
    if let Err(IngestError::Conflict(c)) = &result {
        let value = serde_json::to_value(ev).map_err(|e| IngestError::Rejected(e.to_string()))?;
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
            payload: &value.to_string(),
            fingerprint: &fingerprint(&value),
        };
        tx.atomically(|tx| tx.record_refusal(&refusal, now))?;
    }
    result
}

/// Applies one validated booking event inside `tx`. On `Err` the caller
/// must roll back what it wrote (use [`ingest_alone`] for that).
pub fn ingest(
    tx: &Tx<'_>,
    planner: &Planner<'_>,
    ev: &BookingEvent,
    source: &str,
    now: DateTime<Utc>,
) -> Result<Outcome, IngestError> {
    let value = serde_json::to_value(ev).map_err(|e| IngestError::Rejected(e.to_string()))?;
    if let Some(seen) = tx.logged_event(&ev.event_id)? {
        return repeated(tx, ev, &value, seen);
    }
    let current = tx.commitment(&ev.reference)?;
    let before = current.as_ref().map(|c| c.commitment.version);
    // `Err(current version)` for a stale event, recorded only.
    let applied = match apply(current.as_ref().map(|c| &c.commitment), ev, now) {
        Effect::Conflict { version, fields } => {
            return Err(IngestError::Conflict(Box::new(EventConflict {
                event_id: ev.event_id.clone(),
                reference: ev.reference.clone(),
                kind: ConflictKind::SameVersion,
                version,
                fields: fields.iter().map(|f| f.to_string()).collect(),
            })));
        }
        Effect::Rejected { reason } => return Err(IngestError::Rejected(reason)),
        Effect::Stale { current_version } => Err(current_version),
        Effect::Applied { after, kind, .. } => Ok((after, kind)),
    };
    let Some(log_id) = tx.record_commitment_event(
        &ev.event_id,
        &ev.reference,
        ev.kind.as_str(),
        source,
        &value.to_string(),
        now,
    )?
    else {
        // Unreachable inside one write transaction (checked above); kept
        // as the log's own guarantee.
        return Ok(Outcome::Duplicate {
            event_id: ev.event_id.clone(),
        });
    };
    let (after, kind) = match applied {
        Err(current_version) => {
            tx.set_event_effect(log_id, EventEffect::Stale, before, before)?;
            return Ok(Outcome::Stored {
                reference: ev.reference.clone(),
                effect: EventEffect::Stale,
                version: current_version,
                planned: vec![],
                already_present: 0,
                closed: 0,
                held: vec![],
                notes: vec![format!(
                    "version {} is older than the stored {current_version}: recorded only",
                    ev.version.map(|v| v.to_string()).unwrap_or_default()
                )],
            });
        }
        Ok(applied) => applied,
    };
    let contact_id = match &after.phone {
        Some(phone) => Some(tx.upsert_contact(phone, after.name.as_deref(), after.language.as_deref(), now)?),
        None => None,
    };
    let commitment_id = tx.save_commitment(&after, contact_id, now)?;
    let effect = if kind == Change::NoChange {
        EventEffect::NoChange
    } else {
        EventEffect::Applied
    };
    tx.set_event_effect(log_id, effect, before, Some(after.version))?;
    // Chaos and tests: a store failure in the middle of one event, after
    // it already wrote (the savepoint must leave nothing of it).
    #[cfg(feature = "failpoints")]
    if let Some(a) = crate::failpoint::hit("ingest_event") {
        return Err(StoreError::from(crate::failpoint::sqlite_error(a)).into());
    }

    let r = realize(tx, planner, &after, kind, ev, (commitment_id, contact_id), now)?;
    Ok(Outcome::Stored {
        reference: after.reference.clone(),
        effect,
        version: after.version,
        planned: r.planned,
        already_present: r.already_present,
        closed: r.closed,
        held: r.held,
        notes: r.notes,
    })
}

/// What planning did for one applied event.
struct Realized {
    planned: Vec<String>,
    already_present: usize,
    closed: usize,
    held: Vec<String>,
    notes: Vec<String>,
}

/// Plans for the commitment as it is now, closes what stopped being
/// pertinent and reserves the rest; held messages go straight to `review`.
fn realize(
    tx: &Tx<'_>,
    planner: &Planner<'_>,
    after: &Commitment,
    kind: Change,
    ev: &BookingEvent,
    (commitment_id, contact_id): (i64, Option<i64>),
    now: DateTime<Utc>,
) -> Result<Realized, IngestError> {
    let mut plan = planner.plan(after, kind, ev, now)?;
    let keep: Vec<&str> = plan
        .intentions
        .iter()
        .chain(plan.held.iter().map(|(n, _)| n))
        .map(|i| i.key.as_str())
        .collect();
    let mut r = Realized {
        planned: Vec::new(),
        already_present: 0,
        closed: 0,
        held: Vec::new(),
        notes: Vec::new(),
    };
    r.closed += crate::planning::close_planned(tx, commitment_id, &plan.closures, &keep, after.version, now)?.len();
    if plan.replaces_only && r.closed == 0 {
        plan.intentions.clear();
        plan.held.clear();
        plan.notes
            .push("nothing was waiting for the old number: no message moved".into());
    }
    // Planned and held intentions in one set-based reservation.
    let all: Vec<&NewIntention> = plan.intentions.iter().chain(plan.held.iter().map(|(n, _)| n)).collect();
    let reserved = crate::planning::reserve_all(tx, &all, commitment_id, contact_id, now)?;
    let (planned, held) = reserved.split_at(plan.intentions.len());
    for (n, got) in plan.intentions.iter().zip(planned) {
        match got {
            Reserved::New(_) => r.planned.push(n.key.to_string()),
            Reserved::Existing(_) => r.already_present += 1,
        }
    }
    let mut review = Vec::new();
    for ((n, reason), got) in plan.held.iter().zip(held) {
        match got {
            Reserved::New(id) => {
                let said = Said::new(HistorySignal::NeedsReview, Cause::Planner)
                    .note(reason.clone())
                    .version(n.commitment_version);
                let (_, record) = history::on_signal(*id, IntentionState::Planned, Signal::NeedsReview, said, now);
                review.extend(record);
                r.held.push(n.key.to_string());
            }
            Reserved::Existing(_) => r.already_present += 1,
        }
    }
    tx.apply_records(&review)?;
    r.notes = plan.notes;
    Ok(r)
}

/// An event id already in the log: a duplicate when its content is the
/// same, a conflict otherwise.
fn repeated(tx: &Tx<'_>, ev: &BookingEvent, value: &Value, seen: LoggedEvent) -> Result<Outcome, IngestError> {
    let stored: Value = serde_json::from_str(&seen.payload).unwrap_or(Value::Null);
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
