//! Per-case serialization of operator actions (docs/design.md, "Operator
//! actions"): before an action reads anything it decides on, its
//! transaction locks the case — the commitment's row, then the original
//! intention's (and the selected one's). A second supervisor acting on the
//! same case, or a booking import changing its commitment (which locks the
//! same commitment row, `ingest_group`), waits until the first commits and
//! then decides on what the first one wrote. On SQLite `BEGIN IMMEDIATE`
//! already orders every writer; the ledger makes the lock a no-op there.

use super::{Case, OpsError};
use crate::store::{IntentionRow, RowKind, Tx};

/// Locks the case of intention `intention_id`: its commitment, its
/// family's original and itself. Returns nothing the caller should decide
/// on: every row read before the lock may be stale, so the caller reads
/// again after it.
pub fn lock_intention(tx: &Tx<'_>, intention_id: i64) -> Result<(), OpsError> {
    let row = tx.intention(intention_id)?;
    let original = original_of(tx, &row)?;
    tx.lock_case(original.commitment_id, &[original.id, row.id])?;
    Ok(())
}

/// Locks a case of the Atención list: an intention's as
/// [`lock_intention`]; any other's (a reschedule request, a refused
/// event) its commitment's, when it has one.
pub fn lock_case(tx: &Tx<'_>, case: Case) -> Result<(), OpsError> {
    match case.kind {
        RowKind::Intention => lock_intention(tx, case.subject_id),
        _ => {
            if let Some(commitment_id) = tx.case_info(case.kind, case.subject_id)?.and_then(|i| i.commitment_id) {
                tx.lock_case(commitment_id, &[])?;
            }
            Ok(())
        }
    }
}

/// The original of a family: resends made before the guard existed could
/// relate to another resend, so follow the chain up. (`related_id` never
/// changes once written, so it may be followed before the lock.)
pub(super) fn original_of(tx: &Tx<'_>, row: &IntentionRow) -> Result<IntentionRow, OpsError> {
    let mut current = row.clone();
    // A chain longer than this is a corrupt ledger, not a family.
    for _ in 0..64 {
        match current.related_id {
            Some(parent) => current = tx.intention(parent)?,
            None => break,
        }
    }
    Ok(current)
}
