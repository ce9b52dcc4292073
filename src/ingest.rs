//! Booking events into the ledger: log the event, update the commitment,
//! plan, close what stopped being pertinent and reserve new intentions —
//! all inside the caller's transaction, so an event is applied whole or not
//! at all, and a repeated event (same `event_id`) changes nothing.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::commitment::{Change, Effect, apply};
use crate::domain::event::BookingEvent;
use crate::planner::{PlanError, Planner};
use crate::store::{EventEffect, Reserved, StoreError, Tx};

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("{0}")]
    Rejected(String),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Store(#[from] StoreError),
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
        notes: Vec<String>,
    },
    /// The event id was already in the log: nothing changed.
    Duplicate { event_id: String },
}

/// Applies one validated booking event inside `tx`.
pub fn ingest(
    tx: &Tx<'_>,
    planner: &Planner<'_>,
    ev: &BookingEvent,
    source: &str,
    now: DateTime<Utc>,
) -> Result<Outcome, IngestError> {
    let payload = serde_json::to_string(ev).map_err(|e| IngestError::Rejected(e.to_string()))?;
    let Some(log_id) =
        tx.record_commitment_event(&ev.event_id, &ev.reference, ev.kind.as_str(), source, &payload, now)?
    else {
        return Ok(Outcome::Duplicate {
            event_id: ev.event_id.clone(),
        });
    };
    let current = tx.commitment(&ev.reference)?;
    let before = current.as_ref().map(|c| c.commitment.version);
    let (after, kind) = match apply(current.as_ref().map(|c| &c.commitment), ev, now) {
        Effect::Rejected { reason } => return Err(IngestError::Rejected(reason)),
        Effect::Stale { current_version } => {
            tx.set_event_effect(log_id, EventEffect::Stale, before, before)?;
            return Ok(Outcome::Stored {
                reference: ev.reference.clone(),
                effect: EventEffect::Stale,
                version: current_version,
                planned: vec![],
                already_present: 0,
                closed: 0,
                notes: vec![format!(
                    "version {} is older than the stored {current_version}: recorded only",
                    ev.version.map(|v| v.to_string()).unwrap_or_default()
                )],
            });
        }
        Effect::Applied { after, kind, .. } => (after, kind),
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

    let plan = planner.plan(&after, kind, ev, now)?;
    let keep: Vec<&str> = plan.intentions.iter().map(|i| i.key.as_str()).collect();
    let mut closed = 0;
    for rule in &plan.closures {
        closed += tx.close_planned(commitment_id, *rule, &keep, after.version, now)?.len();
    }
    let mut planned = Vec::new();
    let mut already_present = 0;
    for n in &plan.intentions {
        match tx.reserve(n, commitment_id, contact_id, now)? {
            Reserved::New(_) => planned.push(n.key.to_string()),
            Reserved::Existing(_) => already_present += 1,
        }
    }
    Ok(Outcome::Stored {
        reference: after.reference.clone(),
        effect,
        version: after.version,
        planned,
        already_present,
        closed,
        notes: plan.notes,
    })
}
