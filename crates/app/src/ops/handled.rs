//! Working the queue down: an operator action on a case marks it handled
//! (*atendido*) with who and when, "marcar atendido" does it with a reason
//! alone, and an action refuses to apply to a case that changed after the
//! operator looked at it. Whether a mark still covers its case is the
//! domain's rule (`domain::attention::handled_covers`); Atención applies it.

use chrono::{DateTime, Utc};

use super::{
    Actor, OpKind, OpOutcome, OpReport, OpsError, Record, action_row, check, note_text, operator_said, write_note,
};
use crate::store::{CaseInfo, IntentionRow, NewMark, OperatorAction, RowKind, StoreError, Tx};

/// A case of the Atención list, by what it is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Case {
    pub kind: RowKind,
    /// The intention, the commitment (reschedule request) or the refused
    /// event.
    pub subject_id: i64,
}

impl Case {
    pub fn intention(id: i64) -> Case {
        Case {
            kind: RowKind::Intention,
            subject_id: id,
        }
    }
}

/// Whether this action, done, settles the case it was taken on. A call
/// outcome's reason is the outcome: an unanswered call leaves the case open.
fn handles(op: OpKind, reason: &str) -> bool {
    match op {
        OpKind::CallOutcome => crate::domain::call::CallOutcome::from_stored(reason).is_some_and(|o| o.settles()),
        _ => matches!(
            op,
            OpKind::Cancel | OpKind::Verify | OpKind::AuthorizeResend | OpKind::ManualContact | OpKind::Resolve
        ),
    }
}

/// After an operator action is recorded: a done (or recorded) action on a
/// case marks it handled. Manual contact is a call to the customer, so it
/// also answers the commitment's reschedule request.
pub(super) fn mark_after(
    tx: &Tx<'_>,
    actor: &Actor<'_>,
    rec: &Record<'_>,
    action_id: i64,
    now: DateTime<Utc>,
) -> Result<(), OpsError> {
    if !handles(rec.op, rec.reason) || matches!(rec.outcome, OpOutcome::Refused(_)) {
        return Ok(());
    }
    if let Some(r) = rec.row {
        mark(tx, Case::intention(r.id), actor, action_id, now)?;
    }
    if rec.op == OpKind::ManualContact {
        let case = Case {
            kind: RowKind::RescheduleRequest,
            subject_id: rec.commitment.0,
        };
        mark(tx, case, actor, action_id, now)?;
    }
    Ok(())
}

/// Records the mark on the case's situation as it is now (after the
/// action applied).
fn mark(tx: &Tx<'_>, case: Case, actor: &Actor<'_>, action_id: i64, now: DateTime<Utc>) -> Result<(), OpsError> {
    let situation = tx.case_info(case.kind, case.subject_id)?.and_then(|i| i.since);
    tx.mark_handled(
        &NewMark {
            kind: case.kind,
            subject_id: case.subject_id,
            situation,
            operator: actor.name,
            action_id,
        },
        now,
    )?;
    Ok(())
}

/// Refuses to act on a case whose situation changed after `seen` (when the
/// operator's form opened): what they decided on is no longer what is
/// there.
pub fn ensure_unchanged(tx: &Tx<'_>, case: Case, seen: Option<DateTime<Utc>>) -> Result<(), OpsError> {
    let Some(seen) = seen else { return Ok(()) };
    let info = tx.case_info(case.kind, case.subject_id)?;
    match info.and_then(|i| i.since) {
        Some(since) if since != seen => Err(OpsError::Changed),
        _ => Ok(()),
    }
}

/// Locks a case (docs/design.md, "One case, one action at a time") and
/// reads it: its commitment and situation, and its intention when it is
/// one. An unknown case is an error.
pub(super) fn locked_case(tx: &Tx<'_>, case: Case) -> Result<(CaseInfo, Option<IntentionRow>), OpsError> {
    super::lock_case(tx, case)?;
    let info = tx
        .case_info(case.kind, case.subject_id)?
        .ok_or_else(|| StoreError::NoIntention(format!("{} {}", case.kind.as_str(), case.subject_id)))?;
    let row = match case.kind {
        RowKind::Intention => Some(tx.intention(case.subject_id)?),
        _ => None,
    };
    Ok((info, row))
}

/// "Marcar atendido": the case needs nothing else; the reason says why.
pub fn resolve(
    tx: &Tx<'_>,
    actor: &Actor<'_>,
    case: Case,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<OpReport, OpsError> {
    check(actor, OpKind::Resolve, reason)?;
    let (info, row) = locked_case(tx, case)?;
    let scope = match (&row, info.commitment_id) {
        (Some(r), _) => format!("intention #{} {}", r.id, r.key),
        (None, Some(_)) => format!(
            "{} #{} of commitment {}",
            case.kind.as_str(),
            case.subject_id,
            info.commitment_ref
        ),
        // A channel event of no commitment here (another installation's).
        (None, None) => format!("{} #{}", case.kind.as_str(), case.subject_id),
    };
    let outcome = OpOutcome::done(0);
    let action_id = tx.record_operator_action(
        &OperatorAction {
            intention_id: row.as_ref().map(|r| r.id),
            commitment_id: info.commitment_id,
            scope: Some(&scope),
            ..action_row(actor, OpKind::Resolve, reason, &outcome, "marked handled")
        },
        now,
    )?;
    mark(tx, case, actor, action_id, now)?;
    if let Some(r) = &row {
        let said = operator_said(OpKind::Resolve.history_signal(), action_id, r.commitment_version);
        write_note(tx, r.id, said.note(note_text(actor, reason)), now)?;
    }
    Ok(OpReport::new(
        OpKind::Resolve,
        action_id,
        row.as_ref(),
        info.commitment_ref,
        outcome,
    ))
}
