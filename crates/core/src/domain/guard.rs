//! Whether an operator action would be accepted now, answered without
//! writing, and the hint ("Qué hacer") built from those answers.
//!
//! Each action of `unavez-app`'s `ops` runs its guard here inside its
//! transaction, on the facts it read after locking the case; the console
//! asks the same functions about the facts it shows, before any form opens.
//! So a hint never names an action its guard would refuse, and a key whose
//! guard refuses says why at once (docs/design.md, "Operator actions").

use chrono::{DateTime, FixedOffset, Utc};
use chrono_tz::Tz;
use serde::Serialize;

use super::attention::{CaseKind, NextStep};
use super::intention::operating_day;
use super::operator::{OpKind, Role, allowed};
use super::refusal::Refusal;
use super::state::{CancelReason, IntentionState, Signal, Transition, transition};

/// The commitment, as far as the guards go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CommitmentState {
    Open,
    /// The customer confirmed the appointment.
    Confirmed,
    Cancelled,
}

impl CommitmentState {
    pub const ALL: [CommitmentState; 3] = [Self::Open, Self::Confirmed, Self::Cancelled];
}

/// A resend of the family still waiting for its outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingResend {
    pub key: String,
    pub authorized_by: Option<String>,
    pub authorized_at: DateTime<FixedOffset>,
}

/// The front desk's request for a resend, as the case stands: the latest
/// of request, decline and authorization on it decides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "ask", rename_all = "snake_case")]
pub enum ResendAsk {
    None,
    Requested { by: String, reason: String },
    Declined { by: String, reason: String },
}

/// What the resend rules read about the family.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResendFacts {
    /// The family's original.
    pub original: IntentionState,
    /// The commitment version the original was planned for, and the
    /// commitment's version now.
    pub planned_version: i64,
    pub current_version: i64,
    /// The original's validity has ended.
    pub expired: bool,
    pub pending: Option<PendingResend>,
    pub authorized_today: u32,
    /// `[policy] max_resends_per_day`.
    pub max_per_day: u32,
}

impl ResendFacts {
    /// A family of one message, planned for the commitment as it is.
    pub fn single(original: IntentionState, max_per_day: u32) -> ResendFacts {
        ResendFacts {
            original,
            planned_version: 1,
            current_version: 1,
            expired: false,
            pending: None,
            authorized_today: 0,
            max_per_day,
        }
    }
}

/// A resend of a family (any member but the original), as the resend
/// rules read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FamilyResend {
    pub key: String,
    pub state: IntentionState,
    /// `None` for a member nobody authorized (none is, today).
    pub authorized_by: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// A resend family as stored: its original, the commitment's version now
/// and every resend. [`Family::facts`] is the one place the resend rules'
/// facts are derived from it, for the action (`unavez_app::ops`) and for
/// the hints of a page of rows alike (the ledger reads the families of a
/// whole page at once), so a hint never offers a resend its guard would
/// refuse for a pending resend or the day's cap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Family {
    pub original: IntentionState,
    /// The commitment version the original was planned for.
    pub planned_version: i64,
    /// The commitment's version now.
    pub current_version: i64,
    pub expires_at: Option<DateTime<Utc>>,
    /// In the order authorized.
    pub resends: Vec<FamilyResend>,
}

impl Family {
    /// What the resend rules read: the first resend still waiting for its
    /// outcome, and how many resends were authorized in the clinic's
    /// operating day of `now`.
    pub fn facts(&self, max_per_day: u32, tz: Tz, now: DateTime<Utc>) -> ResendFacts {
        let pending = self.resends.iter().find(|m| m.state.awaits_outcome());
        let today = operating_day(now, tz);
        let authorized_today = self
            .resends
            .iter()
            .filter(|m| m.authorized_by.is_some() && operating_day(m.created_at, tz) == today)
            .count();
        ResendFacts {
            original: self.original,
            planned_version: self.planned_version,
            current_version: self.current_version,
            expired: self.expires_at.is_some_and(|e| e <= now),
            pending: pending.map(|p| PendingResend {
                key: p.key.clone(),
                authorized_by: p.authorized_by.clone(),
                authorized_at: p.created_at.with_timezone(&tz).fixed_offset(),
            }),
            authorized_today: u32::try_from(authorized_today).unwrap_or(u32::MAX),
            max_per_day,
        }
    }
}

/// Everything a guard reads: who asks, the selected intention, its
/// commitment, its family and the front desk's request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Facts {
    pub role: Role,
    pub state: IntentionState,
    pub state_reason: Option<String>,
    pub commitment: CommitmentState,
    /// An appointment (manual contact applies to appointments only).
    pub appointment: bool,
    pub resend: ResendFacts,
    pub ask: ResendAsk,
}

/// Why a guard refuses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum Why {
    /// This role may not take the action at all.
    Role,
    /// The ledger's rule refuses it on this case now.
    Rule(Refusal),
}

pub type Verdict = Result<(), Why>;

fn role(f: &Facts, op: OpKind) -> Verdict {
    if allowed(f.role, op) { Ok(()) } else { Err(Why::Role) }
}

fn rule(r: Option<Refusal>) -> Verdict {
    r.map_or(Ok(()), |r| Err(Why::Rule(r)))
}

/// Why a cancel from the intention's state is refused, by what holds the
/// message now.
pub fn cancel_refusal(state: IntentionState, state_reason: Option<&str>) -> Refusal {
    use IntentionState as S;
    match state {
        S::Dispatching => Refusal::InFlight,
        S::Uncertain => Refusal::Uncertain,
        S::Accepted | S::Sent => Refusal::ChannelHasIt { state },
        S::Delivered | S::Read => Refusal::Delivered { state },
        S::Planned | S::Review | S::Failed | S::Cancelled => Refusal::Closed {
            state,
            reason: state_reason.map(str::to_string),
        },
    }
}

/// The channel's answer when asked to withdraw an accepted message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Withdrawal {
    /// The channel withdrew the queued command.
    Withdrawn,
    /// Too late (it already went out), or the channel cannot withdraw.
    Kept,
    /// The channel could not be reached.
    Unreachable { detail: String },
}

/// The cancel's decision on an intention in `state`: the reason it closes
/// with, or why it is refused. Only what has not left closes without the
/// channel; an accepted message closes only if the channel confirms it
/// withdrew it (`withdrawal`, the channel's answer the caller asked first;
/// `None` when it did not ask, and the ledger decides alone).
pub fn cancel_decision(
    state: IntentionState,
    state_reason: Option<&str>,
    withdrawal: Option<&Withdrawal>,
) -> Result<CancelReason, Refusal> {
    let accepted = state == IntentionState::Accepted;
    let why = match withdrawal {
        Some(Withdrawal::Withdrawn) if accepted => CancelReason::Withdrawn,
        Some(Withdrawal::Kept) if accepted => return Err(cancel_refusal(state, state_reason)),
        Some(Withdrawal::Unreachable { detail }) if accepted => {
            return Err(Refusal::ChannelUnavailable { detail: detail.clone() });
        }
        _ => CancelReason::Operator,
    };
    // A cancel the state machine would only record is refused.
    match transition(state, Signal::Cancel(why)) {
        Transition::Move(_) => Ok(why),
        _ => Err(cancel_refusal(state, state_reason)),
    }
}

/// A cancel, as [`cancel_decision`] decides it (`withdrawn`: the channel
/// confirmed it withdrew an accepted message).
pub fn cancel(f: &Facts, withdrawn: bool) -> Verdict {
    role(f, OpKind::Cancel)?;
    let answer = withdrawn.then_some(&Withdrawal::Withdrawn);
    cancel_decision(f.state, f.state_reason.as_deref(), answer)
        .map(|_| ())
        .map_err(Why::Rule)
}

/// A verification by a call: evidence on a message that went out.
pub fn verify(f: &Facts) -> Verdict {
    role(f, OpKind::Verify)?;
    rule(match f.state {
        IntentionState::Planned => Some(Refusal::NotSentYet { state: f.state }),
        IntentionState::Cancelled => Some(Refusal::Closed {
            state: f.state,
            reason: f.state_reason.clone(),
        }),
        _ => None,
    })
}

/// Manual contact: a call about an appointment that still stands.
pub fn manual_contact(f: &Facts) -> Verdict {
    role(f, OpKind::ManualContact)?;
    rule(contact_refusal(
        f.appointment,
        f.commitment == CommitmentState::Cancelled,
    ))
}

/// Why a manual contact is refused, from the commitment alone.
pub fn contact_refusal(appointment: bool, cancelled: bool) -> Option<Refusal> {
    if !appointment {
        Some(Refusal::NotAnAppointment)
    } else if cancelled {
        Some(Refusal::CommitmentCancelled)
    } else {
        None
    }
}

/// "Marcar atendido": whoever works the case may close it.
pub fn resolve(f: &Facts) -> Verdict {
    role(f, OpKind::Resolve)
}

/// Every resend rule but the acknowledgement, in the order a supervisor
/// can act on them: what the original is, whether its content is still the
/// truth, what is still pending, and the day's cap.
pub fn resend_refusal(r: &ResendFacts, commitment_cancelled: bool) -> Option<Refusal> {
    match r.original {
        IntentionState::Planned => return Some(Refusal::NotSentYet { state: r.original }),
        IntentionState::Dispatching => return Some(Refusal::InFlight),
        IntentionState::Uncertain => return Some(Refusal::Uncertain),
        _ => {}
    }
    if commitment_cancelled {
        return Some(Refusal::CommitmentCancelled);
    }
    if r.current_version != r.planned_version {
        return Some(Refusal::StaleVersion {
            planned: r.planned_version,
            current: r.current_version,
        });
    }
    if r.expired {
        return Some(Refusal::Expired);
    }
    if let Some(p) = &r.pending {
        return Some(Refusal::ResendPending {
            key: p.key.clone(),
            authorized_by: p.authorized_by.clone(),
            authorized_at: p.authorized_at,
        });
    }
    if r.authorized_today >= r.max_per_day {
        return Some(Refusal::DailyCap {
            limit: r.max_per_day,
            authorized_today: r.authorized_today,
        });
    }
    None
}

/// Whether a family member already reached the customer: delivered or
/// read, by its state or by a delivery or read the channel reported. A
/// resend after one needs the supervisor's explicit acknowledgement.
pub fn has_reached(state: IntentionState, delivered: bool, read: bool) -> bool {
    delivered || read || state.reached_recipient()
}

/// The authorization's last rule: the member that last reached the
/// customer (`key`, state), if any, refuses a resend the supervisor did
/// not acknowledge.
pub fn acknowledgement_refusal(last_reached: Option<(&str, IntentionState)>, acknowledged: bool) -> Option<Refusal> {
    match last_reached {
        Some((key, state)) if !acknowledged => Some(Refusal::AcknowledgeDelivery {
            key: key.to_string(),
            state,
        }),
        _ => None,
    }
}

/// What refuses an authorization now: every resend rule first
/// ([`resend_refusal`]), then the acknowledgement
/// ([`acknowledgement_refusal`]).
pub fn authorization_refusal(
    rule: Option<Refusal>,
    last_reached: Option<(&str, IntentionState)>,
    acknowledged: bool,
) -> Option<Refusal> {
    rule.or_else(|| acknowledgement_refusal(last_reached, acknowledged))
}

/// A resend, the acknowledgement of an earlier delivery aside (that one is
/// typed in the confirmation, never refused before it).
pub fn authorize_resend(f: &Facts) -> Verdict {
    role(f, OpKind::AuthorizeResend)?;
    rule(resend_refusal(&f.resend, f.commitment == CommitmentState::Cancelled))
}

/// The front desk asks for a resend: only one a supervisor could
/// authorize now, and once until it is answered.
pub fn request_resend(f: &Facts) -> Verdict {
    role(f, OpKind::RequestResend)?;
    if let ResendAsk::Requested { by, .. } = &f.ask {
        return rule(Some(Refusal::ResendRequested { by: by.clone() }));
    }
    rule(resend_refusal(&f.resend, f.commitment == CommitmentState::Cancelled))
}

/// A supervisor declines an open request.
pub fn decline_resend(f: &Facts) -> Verdict {
    role(f, OpKind::DeclineResend)?;
    match f.ask {
        ResendAsk::Requested { .. } => Ok(()),
        _ => rule(Some(Refusal::NoResendRequest)),
    }
}

/// The guard of `op` on one case. Actions on no case (the dispatcher, a
/// day's reprocess) are decided by role alone here. A cancel is judged as
/// the console runs it: the channel is asked first for an accepted
/// message.
pub fn check(op: OpKind, f: &Facts) -> Verdict {
    match op {
        OpKind::Cancel => cancel(f, true),
        OpKind::Verify => verify(f),
        OpKind::ManualContact => manual_contact(f),
        OpKind::Resolve => resolve(f),
        OpKind::AuthorizeResend => authorize_resend(f),
        OpKind::RequestResend => request_resend(f),
        OpKind::DeclineResend => decline_resend(f),
        // A call's outcome and a reopen are judged by the app on the case
        // (`ops::call`); no hint names them.
        OpKind::CallOutcome | OpKind::Reopen => role(f, op),
        OpKind::Reprocess
        | OpKind::PauseDispatch
        | OpKind::ResumeDispatch
        | OpKind::FeedConfirm
        | OpKind::FeedDiscard => role(f, op),
    }
}

/// What this person should do next with a case: built only from actions
/// whose guards accept them now ([`NextStep::actions`]), first the one
/// that settles the case best.
pub fn hint(kind: CaseKind, f: &Facts) -> NextStep {
    let ok = |op: OpKind| check(op, f).is_ok();
    match kind {
        CaseKind::RescheduleRequest if ok(OpKind::ManualContact) => return NextStep::Reschedule,
        // Who may not call leaves the reschedule to the desk.
        CaseKind::RescheduleRequest => return NextStep::MarkHandled,
        CaseKind::RefusedEvent => return NextStep::CheckConflict,
        CaseKind::ChannelEvent => return NextStep::CheckEvent,
        CaseKind::Intention(_) => {}
    }
    if matches!(f.state, IntentionState::Dispatching | IntentionState::Uncertain) {
        // The reconciler settles it with the channel; never a blind resend.
        return NextStep::WaitForChannel;
    }
    if let ResendAsk::Requested { .. } = f.ask {
        if ok(OpKind::AuthorizeResend) {
            return NextStep::AnswerRequest;
        }
        if ok(OpKind::DeclineResend) {
            return NextStep::DeclineRequest;
        }
        return NextStep::WaitForSupervisor;
    }
    match f.commitment {
        // A failed notice of a cancelled appointment: the patient must hear
        // of the cancellation by phone, then the case is done.
        CommitmentState::Cancelled => return NextStep::CallAboutCancellation,
        // The customer confirmed: nothing to chase.
        CommitmentState::Confirmed => return NextStep::AlreadyConfirmed,
        CommitmentState::Open => {}
    }
    if matches!(f.state, IntentionState::Accepted | IntentionState::Sent) && ok(OpKind::Verify) {
        // Only a message nobody confirmed delivering is a case in these
        // states (the Cloud API cannot be asked): call, then record it.
        return NextStep::ConfirmDelivery;
    }
    let declined = matches!(f.ask, ResendAsk::Declined { .. });
    if f.state == IntentionState::Failed {
        if ok(OpKind::AuthorizeResend) {
            return NextStep::Resend;
        }
        if !declined && ok(OpKind::RequestResend) {
            return NextStep::RequestResend;
        }
    }
    if ok(OpKind::ManualContact) {
        return NextStep::Call;
    }
    if ok(OpKind::Verify) {
        return NextStep::Verify;
    }
    NextStep::MarkHandled
}

#[cfg(test)]
#[path = "guard_tests.rs"]
mod tests;
