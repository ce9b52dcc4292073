//! Manual contact, through the booking ingest path.

use super::*;

/// Marks the commitment as contacted by staff, through the same ingest path
/// as the booking system's `appointment.manual_contact`, so the planner
/// closes the equivalent pending reminders. `intention_id`, when the action
/// started from an intention, gets the history note.
pub fn manual_contact(
    tx: &Tx<'_>,
    planner: &Planner<'_>,
    actor: &Actor<'_>,
    commitment_id: i64,
    intention_id: Option<i64>,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<OpReport, OpsError> {
    check(actor, OpKind::ManualContact, reason)?;
    // A cancellation import locks the same row: whichever commits first,
    // the other sees it (a contact after a cancellation is refused).
    match intention_id {
        Some(id) => lock_intention(tx, id)?,
        None => tx.lock_case(commitment_id, &[])?,
    }
    let c = tx.commitment_by_id(commitment_id)?;
    let row = match intention_id {
        Some(id) => Some(tx.intention(id)?),
        None => None,
    };
    let refusal = crate::domain::guard::contact_refusal(
        c.commitment.kind == crate::domain::commitment::CommitmentKind::Appointment,
        c.commitment.is_cancelled(),
    );
    let outcome = match refusal {
        Some(r) => OpOutcome::Refused(r),
        None => {
            let ev = contact_event(&c.commitment.reference, actor, reason, now);
            match ingest(tx, planner, &ev, "operator", now)? {
                Outcome::Stored { closed, .. } => OpOutcome::done(closed),
                Outcome::Duplicate { .. } => OpOutcome::done(0),
            }
        }
    };
    let rec = Record {
        op: OpKind::ManualContact,
        row: row.as_ref(),
        commitment: (c.id, &c.commitment.reference),
        reason,
        outcome,
        note_history: true,
        extra: None,
    };
    record(tx, actor, rec, now)
}

/// The booking event a manual contact is, as the booking system would send
/// it.
fn contact_event(reference: &str, actor: &Actor<'_>, reason: &str, now: DateTime<Utc>) -> BookingEvent {
    BookingEvent {
        // Operator actions are not replays of a booking feed: the event id
        // names who and when, so two contacts are two facts.
        event_id: format!(
            "operator:manual_contact:{reference}:{}:{}",
            actor.name,
            now.timestamp_millis()
        ),
        kind: EventType::AppointmentManualContact,
        reference: reference.to_string(),
        starts_at: None,
        version: None,
        contact: None,
        service: None,
        location: None,
        occurred_at: Some(now.fixed_offset()),
        operator: Some(actor.name.to_string()),
        note: Some(reason.trim().to_string()),
        raw: None,
    }
}
