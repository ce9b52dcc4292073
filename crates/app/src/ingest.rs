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

use std::collections::HashSet;
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
use crate::planning::Want;
use crate::store::{Cause, EventEffect, LoggedEvent, NewEvent, NewRefusal, Reserved, StoreError, Tx};

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

/// Applies events in order inside `tx`, their reservations written
/// together; on `Err` the caller must roll back what it wrote.
fn apply_all(
    tx: &Tx<'_>,
    planner: &Planner<'_>,
    events: &[&BookingEvent],
    source: &str,
    now: DateTime<Utc>,
) -> Result<Vec<Outcome>, IngestError> {
    let mut batch = Batch::default();
    for ev in events {
        let outcome = stage(tx, planner, ev, source, now, &mut batch)?;
        batch.outcomes.push(outcome);
    }
    batch.settle(tx, now)?;
    Ok(batch.outcomes)
}

/// Writes one event's log row and commitment, plans and closes; what it
/// reserves waits in `batch` (its outcome's `planned`, `held` and
/// `already_present` are filled when the batch settles).
fn stage(
    tx: &Tx<'_>,
    planner: &Planner<'_>,
    ev: &BookingEvent,
    source: &str,
    now: DateTime<Utc>,
    batch: &mut Batch,
) -> Result<Outcome, IngestError> {
    let value = serde_json::to_value(ev).map_err(|e| IngestError::Rejected(e.to_string()))?;
    if let Some(seen) = tx.logged_event(&ev.event_id)? {
        return repeated(tx, ev, &value, seen);
    }
    let current = tx.commitment(&ev.reference)?;
    let before = current.as_ref().map(|c| c.commitment.version);
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
    let (effect, after_version) = match &applied {
        Err(_) => (EventEffect::Stale, before),
        Ok((after, Change::NoChange)) => (EventEffect::NoChange, Some(after.version)),
        Ok((after, _)) => (EventEffect::Applied, Some(after.version)),
    };
    let logged = NewEvent {
        event_id: &ev.event_id,
        reference: &ev.reference,
        kind: ev.kind.as_str(),
        source,
        payload: &value.to_string(),
        effect,
        version_before: before,
        version_after: after_version,
    };
    if tx.record_commitment_event(&logged, now)?.is_none() {
        // Unreachable inside one write transaction (checked above); kept
        // as the log's own guarantee.
        return Ok(Outcome::Duplicate {
            event_id: ev.event_id.clone(),
        });
    }
    let (after, kind) = match applied {
        Err(current_version) => {
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
    // Chaos and tests: a store failure in the middle of one event, after
    // it already wrote (the savepoint must leave nothing of it).
    #[cfg(feature = "failpoints")]
    if let Some(a) = crate::failpoint::hit("ingest_event") {
        return Err(StoreError::from(crate::failpoint::sqlite_error(a)).into());
    }

    let event = Staged {
        ev,
        ids: (commitment_id, contact_id),
        fresh: current.is_none(),
    };
    let r = realize(tx, planner, &after, kind, &event, batch, now)?;
    Ok(Outcome::Stored {
        reference: after.reference.clone(),
        effect,
        version: after.version,
        planned: vec![],
        already_present: 0,
        closed: r.closed,
        held: vec![],
        notes: r.notes,
    })
}

/// One event being applied: its commitment and contact ids, and whether
/// this event created the commitment (then nothing of it is planned yet).
struct Staged<'e> {
    ev: &'e BookingEvent,
    ids: (i64, Option<i64>),
    fresh: bool,
}

/// What planning did for one applied event before its reservations.
struct Realized {
    closed: usize,
    notes: Vec<String>,
}

/// An intention a staged event reserves.
struct Wanted {
    /// Which outcome of the batch it belongs to.
    event: usize,
    intention: NewIntention,
    commitment_id: i64,
    contact_id: Option<i64>,
    /// Held for a person (`review`) instead of being sent, and why.
    held: Option<String>,
}

/// The outcomes of the events staged so far and the reservations they
/// wait for.
#[derive(Default)]
struct Batch {
    outcomes: Vec<Outcome>,
    wanted: Vec<Wanted>,
    /// Commitments with reservations not written yet.
    pending: HashSet<i64>,
}

impl Batch {
    /// Reserves everything wanted in set-based writes and completes the
    /// outcomes; held messages go straight to `review`.
    fn settle(&mut self, tx: &Tx<'_>, now: DateTime<Utc>) -> Result<(), IngestError> {
        let wants: Vec<Want<'_>> = self
            .wanted
            .iter()
            .map(|w| Want {
                intention: &w.intention,
                commitment_id: w.commitment_id,
                contact_id: w.contact_id,
            })
            .collect();
        let reserved = crate::planning::reserve_all(tx, &wants, now)?;
        let mut review = Vec::new();
        for (w, got) in self.wanted.iter().zip(reserved) {
            let Some(Outcome::Stored {
                planned,
                held,
                already_present,
                ..
            }) = self.outcomes.get_mut(w.event)
            else {
                continue;
            };
            match (got, &w.held) {
                (Reserved::Existing(_), _) => *already_present += 1,
                (Reserved::New(_), None) => planned.push(w.intention.key.to_string()),
                (Reserved::New(id), Some(reason)) => {
                    let said = Said::new(HistorySignal::NeedsReview, Cause::Planner)
                        .note(reason.clone())
                        .version(w.intention.commitment_version);
                    let (_, record) = history::on_signal(id, IntentionState::Planned, Signal::NeedsReview, said, now);
                    review.extend(record);
                    held.push(w.intention.key.to_string());
                }
            }
        }
        tx.apply_records(&review)?;
        self.wanted.clear();
        self.pending.clear();
        Ok(())
    }
}

/// Plans for the commitment as it is now and closes what stopped being
/// pertinent; the rest waits in `batch` to be reserved.
fn realize(
    tx: &Tx<'_>,
    planner: &Planner<'_>,
    after: &Commitment,
    kind: Change,
    event: &Staged<'_>,
    batch: &mut Batch,
    now: DateTime<Utc>,
) -> Result<Realized, IngestError> {
    let (commitment_id, contact_id) = event.ids;
    let mut plan = planner.plan(after, kind, event.ev, now)?;
    let keep: Vec<&str> = plan
        .intentions
        .iter()
        .chain(plan.held.iter().map(|(n, _)| n))
        .map(|i| i.key.as_str())
        .collect();
    // A closure reads what is planned: this commitment's reservations
    // still waiting in the batch are written first.
    if batch.pending.contains(&commitment_id) {
        batch.settle(tx, now)?;
    }
    let closed = match event.fresh {
        true => 0,
        false => crate::planning::close_planned(tx, commitment_id, &plan.closures, &keep, after.version, now)?.len(),
    };
    if plan.replaces_only && closed == 0 {
        plan.intentions.clear();
        plan.held.clear();
        plan.notes
            .push("nothing was waiting for the old number: no message moved".into());
    }
    let slot = batch.outcomes.len();
    let planned = plan.intentions.into_iter().map(|n| (n, None));
    let held = plan.held.into_iter().map(|(n, reason)| (n, Some(reason)));
    for (intention, held) in planned.chain(held) {
        batch.wanted.push(Wanted {
            event: slot,
            intention,
            commitment_id,
            contact_id,
            held,
        });
        batch.pending.insert(commitment_id);
    }
    Ok(Realized {
        closed,
        notes: plan.notes,
    })
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

#[cfg(test)]
#[path = "ingest_tests.rs"]
mod tests;
