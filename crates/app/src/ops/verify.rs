//! Verification: evidence an operator brings about whether a message
//! arrived, from a phone call or from asking the channel. Either way it is
//! applied with cause `operator`; what it cannot prove is a refusal,
//! explained.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{Actor, OpKind, OpOutcome, OpReport, OpsError, Refusal, act_on_intention, note_text, write_signal};
use crate::channel::LookupOutcome;
use crate::dispatch::request::evidence_for;
use crate::domain::history::{Cause, HistorySignal, Said};
use crate::domain::state::{IntentionState, Signal, Transition};
use crate::store::{IntentionRow, Tx};

/// A manual verification's outcome (a phone call, the customer at the desk).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifyOutcome {
    /// The customer confirms they received the message.
    Received,
    /// The customer did not receive it.
    NotReceived,
}

/// What a verification rests on.
#[derive(Debug, Clone, Copy)]
pub enum Verification<'a> {
    /// A phone call with its outcome: received is delivery evidence, not
    /// received a definitive failure of this message.
    Call(VerifyOutcome),
    /// The channel's answer to a lookup the caller made outside any
    /// transaction; `None`: the channel cannot be asked.
    Channel(Option<&'a LookupOutcome>),
}

/// Records a verification's evidence on an intention.
pub fn verify(
    tx: &Tx<'_>,
    actor: &Actor<'_>,
    intention_id: i64,
    by: Verification<'_>,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<OpReport, OpsError> {
    act_on_intention(tx, actor, OpKind::Verify, intention_id, reason, now, |row| {
        let found = match by {
            Verification::Call(outcome) => by_call(row, outcome),
            Verification::Channel(lookup) => by_channel(tx, row, lookup, now)?,
        };
        match found {
            Ok(evidence) => apply(tx, actor, row, evidence, reason, now),
            Err(refusal) => Ok(OpOutcome::Refused(refusal)),
        }
    })
}

/// What a call proves about a message that went out.
fn by_call(row: &IntentionRow, outcome: VerifyOutcome) -> Result<(Signal, String), Refusal> {
    match row.state {
        IntentionState::Planned => Err(Refusal::NotSentYet { state: row.state }),
        IntentionState::Cancelled => Err(Refusal::Closed {
            state: row.state,
            reason: row.state_reason.clone(),
        }),
        _ => Ok(match outcome {
            VerifyOutcome::Received => (Signal::Delivered, "manual:received".into()),
            VerifyOutcome::NotReceived => (Signal::Failed, "manual:not_received".into()),
        }),
    }
}

/// What the channel's answer proves. Its references are kept on the way.
fn by_channel(
    tx: &Tx<'_>,
    row: &IntentionRow,
    lookup: Option<&LookupOutcome>,
    now: DateTime<Utc>,
) -> Result<Result<(Signal, String), Refusal>, OpsError> {
    Ok(match lookup {
        None => Err(Refusal::NoLookup),
        // The console never asks by key (a repeat is a send): see
        // `tui::worker::channel_lookup`.
        Some(_) if row.provider_command_id.is_none() => Err(Refusal::NoCommandId),
        Some(LookupOutcome::NotFound) => Err(Refusal::ChannelNoRecord),
        Some(LookupOutcome::Unavailable { detail }) => Err(Refusal::ChannelUnavailable { detail: detail.clone() }),
        Some(LookupOutcome::Found {
            command_id,
            message_id,
            state,
            ..
        }) => match evidence_for(*state) {
            None => Err(Refusal::ChannelUnsure),
            Some(signal) => {
                // The channel's references make later statuses, lookups and
                // a withdrawal possible; early statuses waiting for them apply.
                tx.set_provider_refs(row.id, command_id.as_deref(), message_id.as_deref(), now)?;
                crate::status::apply_pending_for(tx, row.id, now)?;
                Ok((
                    signal,
                    format!("channel_lookup:{}", command_id.as_deref().unwrap_or("-")),
                ))
            }
        },
    })
}

/// Applies the evidence with cause `operator`, and says what it did.
fn apply(
    tx: &Tx<'_>,
    actor: &Actor<'_>,
    row: &IntentionRow,
    (signal, evidence): (Signal, String),
    reason: &str,
    now: DateTime<Utc>,
) -> Result<OpOutcome, OpsError> {
    let said = Said::new(HistorySignal::of(signal), Cause::Operator)
        .evidence(evidence)
        .note(note_text(actor, reason))
        .version(row.commitment_version);
    let (from, t) = write_signal(tx, row.id, signal, said, now)?;
    Ok(match t {
        Transition::Move(to) => OpOutcome::moved(to),
        Transition::Record(_) => OpOutcome::Recorded { state: from },
        Transition::Refuse => OpOutcome::Refused(Refusal::Closed {
            state: from,
            reason: row.state_reason.clone(),
        }),
    })
}
