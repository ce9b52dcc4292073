//! Read-only views of the ledger for the chaos harness's history checker
//! (`crate::chaos::check`): every intention with its first claim, the
//! booking changes that raised each commitment's version (with the time the
//! import that applied them stamped on them), and the final commitments.
//! Free functions over one read transaction of the product's own store
//! (`Tx`), so they read a SQLite file and the shared PostgreSQL ledger
//! alike: the ledger itself ships no test tools, and these only read.

use std::collections::HashSet;

use crate::domain::state::IntentionState;
use crate::store::{IntentFilter, IntentionRow, StoreError, Tx};

type Result<T> = std::result::Result<T, StoreError>;

/// One intention as the checker sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedIntention {
    pub id: i64,
    pub key: String,
    pub commitment_id: i64,
    pub commitment_ref: String,
    pub version: i64,
    pub purpose: String,
    pub state: String,
    pub state_reason: Option<String>,
    /// History id of the first successful claim (validity passed), if any.
    pub first_claim: Option<i64>,
    /// Its attempt counter.
    pub attempts: i64,
    /// When it falls due (ms since the epoch), and when a deferral or
    /// backoff lets it be claimed again.
    pub due_at_ms: i64,
    pub next_attempt_at_ms: Option<i64>,
}

/// A booking change that raised a commitment to `version`, as the ledger's
/// event log recorded it. `received_at_ms` is the importing process's clock
/// when it began (before its transaction could start); the harness turns it
/// into a commit time with its own record of when that import finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionChange {
    pub commitment_id: i64,
    pub version: i64,
    pub event_id: String,
    pub received_at_ms: i64,
}

/// A commitment's final state, for the model check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedCommitment {
    pub reference: String,
    pub version: i64,
    pub status: String,
}

/// Every intention, ordered by id (one query: what settling polls).
pub fn rows(tx: &Tx<'_>) -> Result<Vec<IntentionRow>> {
    let mut rows = tx.list_intentions(&IntentFilter {
        limit: u32::MAX,
        ..Default::default()
    })?;
    rows.sort_by_key(|r| r.id);
    Ok(rows)
}

/// Every intention with its first claim (from its history).
pub fn intentions(tx: &Tx<'_>) -> Result<Vec<CheckedIntention>> {
    rows(tx)?
        .into_iter()
        .map(|r| {
            let first_claim = tx
                .history(r.id)?
                .iter()
                .filter(|h| h.signal == "claim" && h.applied)
                .map(|h| h.id)
                .min();
            Ok(checked(r, first_claim))
        })
        .collect()
}

fn checked(r: IntentionRow, first_claim: Option<i64>) -> CheckedIntention {
    CheckedIntention {
        id: r.id,
        key: r.key,
        commitment_id: r.commitment_id,
        commitment_ref: r.commitment_ref,
        version: r.commitment_version,
        purpose: r.purpose,
        state: r.state.to_string(),
        state_reason: r.state_reason,
        first_claim,
        attempts: r.attempt_count,
        due_at_ms: r.due_at.timestamp_millis(),
        next_attempt_at_ms: r.next_attempt_at.map(|t| t.timestamp_millis()),
    }
}

/// Whether settling is done with this intention: not in flight, not
/// uncertain, not planned and due by `horizon_ms`, and if the ledger says
/// accepted, the engine has sent it (`gone_out`).
pub fn unsettled(r: &IntentionRow, horizon_ms: i64, gone_out: &HashSet<String>) -> bool {
    match r.state {
        IntentionState::Dispatching | IntentionState::Uncertain => true,
        IntentionState::Planned => {
            let due = r.due_at.timestamp_millis();
            r.next_attempt_at.map_or(due, |t| t.timestamp_millis()).max(due) <= horizon_ms
        }
        IntentionState::Accepted => !gone_out.contains(&r.key),
        _ => false,
    }
}

/// The final commitments, and the booking changes that raised their
/// versions: every applied event that set a version, the first one per
/// commitment and version, in log order; and every event id in the log.
pub fn commitments_and_changes(tx: &Tx<'_>) -> Result<(Vec<CheckedCommitment>, Vec<VersionChange>, HashSet<String>)> {
    let mut commitments = tx.list_commitments(u32::MAX, 0)?;
    commitments.sort_by_key(|c| c.id);
    let mut changes = Vec::new();
    let mut logged = HashSet::new();
    let mut out = Vec::with_capacity(commitments.len());
    for c in commitments {
        let mut seen = HashSet::new();
        for (event_id, _kind, effect, _before, after, received_at) in tx.commitment_events(&c.commitment.reference)? {
            if let Some(version) = after.filter(|_| effect == "applied")
                && seen.insert(version)
            {
                changes.push(VersionChange {
                    commitment_id: c.id,
                    version,
                    event_id: event_id.clone(),
                    received_at_ms: received_at.timestamp_millis(),
                });
            }
            logged.insert(event_id);
        }
        out.push(CheckedCommitment {
            reference: c.commitment.reference,
            version: c.commitment.version,
            status: c.commitment.status.to_string(),
        });
    }
    Ok((out, changes, logged))
}

/// Whether a booking event id is in the log.
pub fn has_event(tx: &Tx<'_>, event_id: &str) -> Result<bool> {
    Ok(tx.logged_event(event_id)?.is_some())
}
