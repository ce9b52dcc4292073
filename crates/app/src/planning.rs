//! Planning in the ledger: reserving what a plan calls for and closing the
//! planned intentions a closure names. The ledger stores rows; the
//! decisions are here: a key already stored with other content is a
//! conflict (the fingerprints differ), a repeated key with the same content
//! is the same intention, and which planned rows a closure closes
//! ([`Closure::closes`]).

use chrono::{DateTime, Utc};

use crate::domain::counter::Counter;
use crate::domain::history::{self, Cause, HistorySignal, Said};
use crate::domain::intention::NewIntention;
use crate::domain::state::{IntentionState, Signal};
use crate::planner::Closure;
use crate::store::{LedgerTx, Reservation, Reserved, StoreError};

/// An intention a plan calls for, with the commitment and contact it
/// belongs to (one set-based reservation may carry many commitments').
#[derive(Debug, Clone, Copy)]
pub struct Want<'a> {
    pub intention: &'a NewIntention,
    pub commitment_id: i64,
    pub contact_id: Option<i64>,
}

/// Reserves every intention (one set-based write): the new rows, or the
/// existing ones for the same key and content. A key stored with other
/// content is a [`StoreError::Conflict`] naming both fingerprints, and
/// nothing is overwritten; the caller's savepoint undoes the rest.
pub fn reserve_all<L: LedgerTx + ?Sized>(
    tx: &L,
    wants: &[Want<'_>],
    at: DateTime<Utc>,
) -> Result<Vec<Reserved>, StoreError> {
    let fingerprints: Vec<String> = wants.iter().map(|w| w.intention.fingerprint()).collect();
    let rows: Vec<Reservation<'_>> = wants
        .iter()
        .zip(&fingerprints)
        .map(|(w, fingerprint)| {
            let n = w.intention;
            Reservation {
                intention: n,
                fingerprint,
                commitment_id: w.commitment_id,
                contact_id: w.contact_id,
                said: Said {
                    signal: HistorySignal::Reserved,
                    cause: if n.created_by == "planner" {
                        Cause::Planner
                    } else {
                        Cause::Operator
                    },
                    evidence: None,
                    note: n.reason.clone(),
                    commitment_version: Some(n.commitment_version),
                },
                at,
            }
        })
        .collect();
    let stored = tx.reserve_many(&rows)?;
    let mut out = Vec::with_capacity(stored.len());
    let mut duplicates = 0;
    for ((w, presented), row) in wants.iter().zip(fingerprints).zip(stored) {
        if row.inserted {
            out.push(Reserved::New(row.id));
        } else if row.fingerprint != presented {
            return Err(StoreError::Conflict {
                key: w.intention.key.to_string(),
                stored: row.fingerprint,
                presented,
            });
        } else {
            duplicates += 1;
            out.push(Reserved::Existing(row.id));
        }
    }
    if duplicates > 0 {
        tx.bump_counter(Counter::DuplicateKeys, duplicates)?;
    }
    Ok(out)
}

/// [`reserve_all`] for one intention.
pub fn reserve<L: LedgerTx + ?Sized>(
    tx: &L,
    n: &NewIntention,
    commitment_id: i64,
    contact_id: Option<i64>,
    at: DateTime<Utc>,
) -> Result<Reserved, StoreError> {
    let want = Want {
        intention: n,
        commitment_id,
        contact_id,
    };
    Ok(reserve_all(tx, &[want], at)?[0])
}

/// Closes the still-planned intentions of a commitment that `rules` name
/// (the first rule that names one gives its reason), except the keys in
/// `keep` (the same plan reserves them). Returns the closed ids.
pub fn close_planned<L: LedgerTx + ?Sized>(
    tx: &L,
    commitment_id: i64,
    rules: &[Closure],
    keep: &[&str],
    version: i64,
    at: DateTime<Utc>,
) -> Result<Vec<i64>, StoreError> {
    if rules.is_empty() {
        return Ok(Vec::new());
    }
    let mut records = Vec::new();
    for row in tx.planned_of_commitment(commitment_id)? {
        if keep.contains(&row.key.as_str()) {
            continue;
        }
        let Some(rule) = rules
            .iter()
            .find(|r| r.closes(row.commitment_version, &row.purpose, row.asks_confirmation))
        else {
            continue;
        };
        let said = Said::new(HistorySignal::Cancel, Cause::Planner).version(version);
        let (_, record) = history::on_signal(row.id, IntentionState::Planned, Signal::Cancel(rule.reason()), said, at);
        records.extend(record.filter(|r| r.applied));
    }
    tx.apply_records(&records)?;
    Ok(records.iter().map(|r| r.intention_id).collect())
}

#[cfg(test)]
#[path = "planning_tests.rs"]
mod tests;
