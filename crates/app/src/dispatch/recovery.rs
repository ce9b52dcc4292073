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

/// Attempts left open on intentions no dispatcher holds, started longer
/// than `grace` ago (no send is in flight that long: leases and the
/// channel's timeout are shorter), closed with what the intention knows
/// (`domain::recovery::close_orphans`). How many.
pub(crate) fn close_orphans(tx: &Tx<'_>, now: DateTime<Utc>, grace: chrono::Duration) -> Result<usize> {
    let orphans = RecoveryTx::orphaned_attempts(tx, now - grace, ORPHANS_PER_PASS)?;
    tx.write_attempts(&recovery::close_orphans(&orphans, now))?;
    Ok(orphans.len())
}

/// Orphans closed per pass: a backlog (an old ledger's) is worked off over
/// a few passes instead of in one long transaction.
const ORPHANS_PER_PASS: u32 = 500;

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
    let known = learn_refs(tx, id, refs)?;
    let state = tx.intention(id)?.state;
    let record = recovery::reconcile_evidence(id, state, signal, refs.0.or(refs.1), note, now);
    let moved = record.as_ref().is_some_and(|r| r.applied);
    tx.apply_records(record.as_slice())?;
    if known {
        crate::status::apply_pending(tx, &[id], now)?;
    }
    Ok(moved)
}

/// Applies a status poll's answer, only if it moves the intention
/// (`domain::recovery::poll_evidence`): the channel's references, the
/// row, and any status webhook that waited for them. Whether it moved.
pub(crate) fn poll_evidence(
    tx: &Tx<'_>,
    id: i64,
    signal: Signal,
    refs: (Option<&str>, Option<&str>),
    note: &str,
    now: DateTime<Utc>,
) -> Result<bool> {
    let state = tx.intention(id)?.state;
    let Some(record) = recovery::poll_evidence(id, state, signal, refs.0.or(refs.1), note, now) else {
        return Ok(false);
    };
    learn_refs(tx, id, refs)?;
    tx.apply_records(&[record])?;
    crate::status::apply_pending(tx, &[id], now)?;
    Ok(true)
}

/// Stores the channel's references (command id, message id) an answer
/// carried, if any; whether it carried one.
fn learn_refs(tx: &Tx<'_>, id: i64, (command_id, message_id): (Option<&str>, Option<&str>)) -> Result<bool> {
    let known = command_id.is_some() || message_id.is_some();
    if known {
        tx.set_channel_refs(&[(id, command_id.map(str::to_string), message_id.map(str::to_string))])?;
    }
    Ok(known)
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
