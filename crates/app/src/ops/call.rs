//! The outcome of a call to the patient (issue 25, section 4), and
//! reopening a case marked handled.
//!
//! Each outcome is one operator action whose reason is the outcome's word
//! (`domain::call`): "confirmó" goes through the booking ingest path as an
//! `appointment.confirmed` would, so the planner closes the reminders it
//! makes redundant; "no contesta" only counts a try (the case is due on the
//! call list again after `RETRY_AFTER_MINUTES`); "pidió reprogramar" puts
//! the reschedule request on the commitment for the supervisor; "número
//! equivocado" holds that phone's planned messages in review.

use super::*;
use crate::domain::call::{CallOutcome, Tries};
use crate::domain::commitment::CommitmentKind;

/// Records what came of a call about intention `intention_id`.
pub fn call_outcome(
    tx: &Tx<'_>,
    planner: &Planner<'_>,
    actor: &Actor<'_>,
    intention_id: i64,
    outcome: CallOutcome,
    now: DateTime<Utc>,
) -> Result<OpReport, OpsError> {
    let reason = outcome.as_str();
    check(actor, OpKind::CallOutcome, reason)?;
    // A cancellation import locks the same case: whichever commits first,
    // the other decides on it.
    lock_intention(tx, intention_id)?;
    let row = tx.intention(intention_id)?;
    let c = tx.commitment_by_id(row.commitment_id)?;
    let refusal = if c.commitment.kind != CommitmentKind::Appointment {
        Some(Refusal::NotAnAppointment)
    } else if c.commitment.is_cancelled() && outcome != CallOutcome::WrongNumber {
        Some(Refusal::CommitmentCancelled)
    } else {
        None
    };
    let outcome_row = match refusal {
        Some(r) => OpOutcome::Refused(r),
        None => apply(tx, planner, actor, &row, &c.commitment.reference, outcome, now)?,
    };
    let rec = Record {
        op: OpKind::CallOutcome,
        row: Some(&row),
        commitment: (c.id, &c.commitment.reference),
        reason,
        outcome: outcome_row,
        note_history: true,
        extra: None,
    };
    // A settling outcome marks the case handled (`handled::mark_after`).
    record(tx, actor, rec, now)
}

/// The outcome's effect on the ledger, before it is recorded.
fn apply(
    tx: &Tx<'_>,
    planner: &Planner<'_>,
    actor: &Actor<'_>,
    row: &IntentionRow,
    reference: &str,
    outcome: CallOutcome,
    now: DateTime<Utc>,
) -> Result<OpOutcome, OpsError> {
    Ok(match outcome {
        CallOutcome::Confirmed => {
            let ev = call_event(EventType::AppointmentConfirmed, reference, actor, now);
            match ingest(tx, planner, &ev, "operator", now)? {
                Outcome::Stored { closed, .. } => OpOutcome::done(closed),
                Outcome::Duplicate { .. } => OpOutcome::done(0),
            }
        }
        CallOutcome::NoAnswer => OpOutcome::done(0),
        CallOutcome::RescheduleRequested => {
            let source = format!("operator:call:{}:{}", actor.name, now.timestamp_millis());
            let text = format!("{} ({})", outcome.as_str(), actor.name);
            tx.request_reschedule(row.commitment_id, &text, &source, now)?;
            OpOutcome::done(0)
        }
        CallOutcome::WrongNumber => {
            let mut held = 0;
            for id in tx.planned_to(&row.recipient)? {
                let said = Said::new(HistorySignal::NeedsReview, Cause::Operator)
                    .note(outcome.as_str())
                    .version(row.commitment_version);
                if let (_, Transition::Move(_)) = write_signal(tx, id, Signal::NeedsReview, said, now)? {
                    held += 1;
                }
            }
            OpOutcome::done(held)
        }
    })
}

/// Messages just planned for a phone a call reported wrong wait in review,
/// reason `wrong_number`, instead of going out: nothing more goes to that
/// number until the patient's phone changes (another recipient). Returns
/// the keys held.
pub(crate) fn hold_wrong_numbers(tx: &Tx<'_>, keys: &[String], now: DateTime<Utc>) -> Result<Vec<String>, OpsError> {
    if keys.is_empty() || !tx.any_wrong_number()? {
        return Ok(Vec::new());
    }
    let mut held = Vec::new();
    for key in keys {
        let row = tx.find_intention(key)?;
        if row.state != IntentionState::Planned || !tx.wrong_number(&row.recipient)? {
            continue;
        }
        let said = Said::new(HistorySignal::NeedsReview, Cause::Planner)
            .note(CallOutcome::WrongNumber.as_str())
            .version(row.commitment_version);
        if let (_, Transition::Move(_)) = write_signal(tx, row.id, Signal::NeedsReview, said, now)? {
            held.push(key.clone());
        }
    }
    Ok(held)
}

/// The unanswered calls of a case so far.
pub fn call_tries(tx: &Tx<'_>, intention_id: i64) -> Result<Tries, OpsError> {
    let (count, last_at) = tx.call_tries(intention_id)?;
    Ok(Tries { count, last_at })
}

/// Reopens a case marked handled: removes the mark and records why, as an
/// action of its own (the action that marked it stays in the log).
pub fn reopen(
    tx: &Tx<'_>,
    actor: &Actor<'_>,
    case: Case,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<OpReport, OpsError> {
    check(actor, OpKind::Reopen, reason)?;
    let (info, row) = super::handled::locked_case(tx, case)?;
    let outcome = if tx.unmark_handled(case.kind, case.subject_id)? {
        OpOutcome::done(0)
    } else {
        OpOutcome::Refused(Refusal::NotHandled)
    };
    // A channel event of no commitment here has nothing to reopen by call.
    let commitment_id = info
        .commitment_id
        .ok_or_else(|| crate::store::StoreError::NoIntention(format!("{} {}", case.kind.as_str(), case.subject_id)))?;
    let rec = Record {
        op: OpKind::Reopen,
        row: row.as_ref(),
        commitment: (commitment_id, &info.commitment_ref),
        reason,
        outcome,
        note_history: true,
        extra: None,
    };
    record(tx, actor, rec, now)
}

/// The booking event a call outcome is, as the booking system would send
/// it.
fn call_event(kind: EventType, reference: &str, actor: &Actor<'_>, now: DateTime<Utc>) -> BookingEvent {
    BookingEvent {
        // Not a replay of a booking feed: who and when make two calls two
        // facts.
        event_id: format!("operator:call:{reference}:{}:{}", actor.name, now.timestamp_millis()),
        kind,
        reference: reference.to_string(),
        starts_at: None,
        version: None,
        contact: None,
        service: None,
        location: None,
        occurred_at: Some(now.fixed_offset()),
        operator: Some(actor.name.to_string()),
        note: Some(CallOutcome::Confirmed.as_str().to_string()),
        raw: None,
    }
}
