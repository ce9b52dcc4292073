//! Manual contact (through the booking ingest path) and verification
//! through the channel.

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
    let c = tx.commitment_by_id(commitment_id)?;
    let row = match intention_id {
        Some(id) => Some(tx.intention(id)?),
        None => None,
    };
    let refusal = if c.commitment.kind != crate::domain::commitment::CommitmentKind::Appointment {
        Some(Refusal::NotAnAppointment)
    } else if c.commitment.is_cancelled() {
        Some(Refusal::CommitmentCancelled)
    } else {
        None
    };
    if let Some(r) = refusal {
        return finish(
            tx,
            actor,
            OpKind::ManualContact,
            row.as_ref(),
            (c.id, &c.commitment.reference),
            reason,
            OpOutcome::Refused(r),
            true,
            now,
        );
    }
    let ev = BookingEvent {
        // Operator actions are not replays of a booking feed: the event id
        // names who and when, so two contacts are two facts.
        event_id: format!(
            "operator:manual_contact:{}:{}:{}",
            c.commitment.reference,
            actor.name,
            now.timestamp_millis()
        ),
        kind: EventType::AppointmentManualContact,
        reference: c.commitment.reference.clone(),
        starts_at: None,
        version: None,
        contact: None,
        service: None,
        location: None,
        occurred_at: Some(now.fixed_offset()),
        operator: Some(actor.name.to_string()),
        note: Some(reason.trim().to_string()),
    };
    let closed = match ingest(tx, planner, &ev, "operator", now)? {
        Outcome::Stored { closed, .. } => closed,
        Outcome::Duplicate { .. } => 0,
    };
    let outcome = OpOutcome::Done {
        state: None,
        new_intention: None,
        closed,
    };
    finish(
        tx,
        actor,
        OpKind::ManualContact,
        row.as_ref(),
        (c.id, &c.commitment.reference),
        reason,
        outcome,
        true,
        now,
    )
}

/// Verification through the channel: the answer of a lookup made by the
/// caller (outside any transaction) is recorded as evidence with cause
/// `operator`. What the channel cannot prove is a refusal, explained.
pub fn verify_with_channel(
    tx: &Tx<'_>,
    actor: &Actor<'_>,
    intention_id: i64,
    lookup: Option<&LookupOutcome>,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<OpReport, OpsError> {
    check(actor, OpKind::Verify, reason)?;
    let row = tx.intention(intention_id)?;
    let outcome = match lookup {
        None => OpOutcome::Refused(Refusal::NoLookup),
        // The console never asks by key (a repeat is a send): see
        // `tui::worker::channel_lookup`.
        Some(_) if row.provider_command_id.is_none() => OpOutcome::Refused(Refusal::NoCommandId),
        Some(LookupOutcome::NotFound) => OpOutcome::Refused(Refusal::ChannelNoRecord),
        Some(LookupOutcome::Unavailable { detail }) => {
            OpOutcome::Refused(Refusal::ChannelUnavailable { detail: detail.clone() })
        }
        Some(LookupOutcome::Found {
            command_id,
            message_id,
            state,
            ..
        }) => match evidence_for(*state) {
            None => OpOutcome::Refused(Refusal::ChannelUnsure),
            Some(signal) => {
                // The channel's references make later statuses, lookups and
                // a withdrawal possible; early statuses waiting for them apply.
                tx.set_provider_refs(row.id, command_id.as_deref(), message_id.as_deref(), now)?;
                tx.apply_pending_statuses_for(row.id, now)?;
                let evidence = format!("channel_lookup:{}", command_id.as_deref().unwrap_or("-"));
                apply_verification(tx, actor, &row, signal, &evidence, reason, now)?
            }
        },
    };
    finish_on_intention(tx, actor, OpKind::Verify, &row, reason, outcome, now)
}
