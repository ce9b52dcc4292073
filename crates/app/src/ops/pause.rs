//! Pausing and resuming the embedded dispatcher: the ledger side.
//!
//! The switch itself lives with the running services
//! ([`crate::dispatch::Control`]); this records who flipped it and why, in
//! the same `operator_actions` log as every other action. The caller
//! commits the record first and flips the switch after, so a pause that was
//! not recorded never happens.

use chrono::{DateTime, Utc};

use super::{Actor, OpKind, OpOutcome, OpReport, OpsError, action_row, check};
use crate::store::{OperatorAction, Tx};

/// What the `operator_actions` row names as the action's scope.
pub const DISPATCH_SCOPE: &str = "dispatcher";

/// Records a pause (`pause = true`) or resume of dispatch.
pub fn switch_dispatch(
    tx: &Tx<'_>,
    actor: &Actor<'_>,
    pause: bool,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<OpReport, OpsError> {
    let op = if pause {
        OpKind::PauseDispatch
    } else {
        OpKind::ResumeDispatch
    };
    check(actor, op, reason)?;
    let detail = if pause {
        "new claims stop; sends in flight finish and reconciliation continues"
    } else {
        "new claims resume"
    };
    let outcome = OpOutcome::done(0);
    let action_id = tx.record_operator_action(
        &OperatorAction {
            scope: Some(DISPATCH_SCOPE),
            ..action_row(actor, op, reason, &outcome, detail)
        },
        now,
    )?;
    Ok(OpReport::new(op, action_id, None, DISPATCH_SCOPE.to_string(), outcome))
}
