//! The reconciler's writes: the facts read from the ledger, the rows
//! decided by `unavez_core::domain::recovery`, stored through the
//! set-based ledger API. Nothing here picks a signal or words a note the
//! core did not decide; the ledger picks nothing at all.

use chrono::{DateTime, Utc};

use crate::domain::recovery::{self, ToReview};
use crate::domain::state::Signal;
use crate::store::{StoreError, Tx};
use unavez_ledger::api_recovery::RecoveryTx;

type Result<T> = std::result::Result<T, StoreError>;

/// Crash safety: `dispatching` intentions whose lease ended become
/// `uncertain` with their open attempts (the request may have gone out),
/// never `planned`. Returns the ids moved.
pub(crate) fn expire_leases(tx: &Tx<'_>, now: DateTime<Utc>) -> Result<Vec<i64>> {
    let plan = recovery::expire_leases(&RecoveryTx::expired_leases(tx, now)?, now);
    tx.write_attempts(&plan.attempts)?;
    tx.apply_records(&plan.records)?;
    Ok(plan.moved())
}

/// Shutdown (or a send task that died) with attempts still in flight: the
/// requests may have been processed, so their intentions become
/// `uncertain` (the rule is `domain::recovery::abandon`). Returns the ids
/// moved.
pub(crate) fn abandon_attempts(tx: &Tx<'_>, attempt_ids: &[i64], why: &str, now: DateTime<Utc>) -> Result<Vec<i64>> {
    if attempt_ids.is_empty() {
        return Ok(Vec::new());
    }
    let plan = recovery::abandon(&RecoveryTx::lease_facts_of_attempts(tx, attempt_ids)?, why, now);
    tx.write_attempts(&plan.attempts)?;
    tx.apply_records(&plan.records)?;
    Ok(plan.moved())
}

/// Records one reconciliation try that did not settle the intention.
pub(crate) fn note(tx: &Tx<'_>, id: i64, note: &str, evidence: Option<&str>, now: DateTime<Utc>) -> Result<()> {
    let state = tx.intention(id)?.state;
    tx.apply_records(&[recovery::reconcile_note(id, state, note, evidence, now)])
}

/// Applies reconciliation evidence (a lookup's or a withdrawal's answer):
/// the channel's references first, then the state machine's row, then any
/// status webhook that waited for those references. Whether it moved.
pub(crate) fn evidence(
    tx: &Tx<'_>,
    id: i64,
    signal: Signal,
    refs: (Option<&str>, Option<&str>),
    note: &str,
    now: DateTime<Utc>,
) -> Result<bool> {
    let (command_id, message_id) = refs;
    let known = command_id.is_some() || message_id.is_some();
    if known {
        tx.set_channel_refs(&[(id, command_id.map(str::to_string), message_id.map(str::to_string))])?;
    }
    let state = tx.intention(id)?.state;
    let record = recovery::reconcile_evidence(id, state, signal, command_id.or(message_id), note, now);
    let moved = record.as_ref().is_some_and(|r| r.applied);
    tx.apply_records(record.as_slice())?;
    if known {
        crate::status::apply_pending(tx, &[id], now)?;
    }
    Ok(moved)
}

/// Hands an intention to a person with the reconciler's explanation.
/// Whether it moved.
pub(crate) fn to_review(tx: &Tx<'_>, id: i64, why: ToReview, note: &str, now: DateTime<Utc>) -> Result<bool> {
    let state = tx.intention(id)?.state;
    let record = recovery::reconcile_review(id, state, why, note, now);
    let moved = record.as_ref().is_some_and(|r| r.applied);
    tx.apply_records(record.as_slice())?;
    Ok(moved)
}
