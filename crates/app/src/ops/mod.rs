//! Operator actions as library code, shared by the console and the CLI:
//! cancel, verify, authorize a new send, manual contact.
//!
//! Every action runs inside the caller's write transaction, requires a
//! non-empty reason and a responsible, and leaves two traces: a row in
//! `operator_actions` (who, role, what, on what, why, result) and a row in
//! the intention's history. What the ledger refuses (cancelling a message
//! that was already delivered, resending one that never left) is not an
//! error: it is recorded as a refusal and returned with a [`Refusal`] the
//! console explains in the operator's language.
//!
//! `contact.rs` holds manual contact and verification through the channel;
//! `pause.rs` pausing and resuming the embedded dispatcher; `resend.rs`
//! authorizing a resend and the guard around it.

mod contact;
mod handled;
pub mod identity;
mod pause;
mod refusal;
mod resend;
mod run;

pub use contact::{manual_contact, verify_with_channel};
pub use handled::{Case, ensure_unchanged, resolve};
pub use identity::{Identity, IdentityError};
pub use pause::switch_dispatch;
pub use refusal::Refusal;
pub use resend::{ResendEvidence, ResendGuard, authorize_resend, resend_evidence};
pub use run::{OpEnv, PendingOp, run};

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::channel::{CancelOutcome, LookupOutcome};
use crate::config::Role;
use crate::dispatch::request::evidence_for;
use crate::domain::event::{BookingEvent, EventType};
use crate::domain::key::KeyError;
use crate::domain::state::{CancelReason, IntentionState, Signal, Transition};
use crate::ingest::{IngestError, Outcome, ingest};
use crate::planner::Planner;
use crate::store::{Cause, Entry, IntentionRow, OperatorAction, StoreError, Tx};

/// The operator actions, as stored in `operator_actions.action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    Cancel,
    Verify,
    AuthorizeResend,
    ManualContact,
    Reprocess,
    /// Stop new claims of the embedded dispatcher.
    PauseDispatch,
    ResumeDispatch,
    /// "Marcar atendido": the case needs nothing else.
    Resolve,
}

impl OpKind {
    pub const ALL: [OpKind; 8] = [
        Self::Cancel,
        Self::Verify,
        Self::AuthorizeResend,
        Self::ManualContact,
        Self::Reprocess,
        Self::PauseDispatch,
        Self::ResumeDispatch,
        Self::Resolve,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::Cancel => "cancel",
            OpKind::Verify => "verify",
            OpKind::AuthorizeResend => "authorize_resend",
            OpKind::ManualContact => "manual_contact",
            OpKind::Reprocess => "reprocess",
            OpKind::PauseDispatch => "pause_dispatch",
            OpKind::ResumeDispatch => "resume_dispatch",
            OpKind::Resolve => "resolve",
        }
    }
}

/// Which roles may do what. The console's key registry and the library
/// both ask this one function, so a hidden key is also a refused call.
pub fn allowed(role: Role, op: OpKind) -> bool {
    match op {
        OpKind::Cancel | OpKind::ManualContact => matches!(role, Role::FrontDesk | Role::Supervisor),
        // Anyone who works a case may say it needs nothing else.
        OpKind::Verify | OpKind::Resolve => true,
        OpKind::AuthorizeResend => role == Role::Supervisor,
        OpKind::Reprocess => role == Role::Technician,
        // The desk works the lists; stopping the sends is a call for the
        // people who answer for the whole queue.
        OpKind::PauseDispatch | OpKind::ResumeDispatch => matches!(role, Role::Supervisor | Role::Technician),
    }
}

/// The signed-in operator.
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a> {
    pub name: &'a str,
    pub role: Role,
}

/// A manual verification's outcome (a phone call, the customer at the desk).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifyOutcome {
    /// The customer confirms they received the message.
    Received,
    /// The customer did not receive it.
    NotReceived,
}

/// What an action did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum OpOutcome {
    /// The state moved (or the new intention exists).
    Done {
        state: Option<IntentionState>,
        new_intention: Option<(i64, String)>,
        closed: usize,
    },
    /// Kept in history; the state did not change (weaker or repeated
    /// evidence).
    Recorded {
        state: IntentionState,
    },
    Refused(Refusal),
}

impl OpOutcome {
    fn result(&self) -> &'static str {
        match self {
            OpOutcome::Done { .. } => "done",
            OpOutcome::Recorded { .. } => "recorded",
            OpOutcome::Refused(_) => "refused",
        }
    }
}

/// An action's report: what, on what, and the `operator_actions` row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpReport {
    pub op: OpKind,
    pub action_id: i64,
    pub intention_id: Option<i64>,
    pub intention_key: Option<String>,
    pub commitment_ref: String,
    pub outcome: OpOutcome,
}

#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    #[error("a reason is required for {0}")]
    ReasonRequired(&'static str),
    #[error("role {role} may not {op}")]
    NotAllowed { role: &'static str, op: &'static str },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Ingest(#[from] IngestError),
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The case changed after the operator's form opened.
    #[error("the case changed while the form was open; review it and confirm again")]
    Changed,
    /// The channel could not be reached for an action that needs it.
    #[error("{0}")]
    Channel(String),
}

pub(crate) fn check(actor: &Actor<'_>, op: OpKind, reason: &str) -> Result<(), OpsError> {
    if !allowed(actor.role, op) {
        return Err(OpsError::NotAllowed {
            role: actor.role.as_str(),
            op: op.as_str(),
        });
    }
    if reason.trim().is_empty() {
        return Err(OpsError::ReasonRequired(op.as_str()));
    }
    Ok(())
}

pub(crate) fn note_text(actor: &Actor<'_>, reason: &str) -> String {
    format!("{} ({}): {}", actor.name, actor.role.as_str(), reason.trim())
}

/// Records the action and its result in `operator_actions`, and a history
/// note on the intention when the state machine did not already write one.
#[allow(clippy::too_many_arguments)]
fn finish(
    tx: &Tx<'_>,
    actor: &Actor<'_>,
    op: OpKind,
    row: Option<&IntentionRow>,
    commitment: (i64, &str),
    reason: &str,
    outcome: OpOutcome,
    note_history: bool,
    now: DateTime<Utc>,
) -> Result<OpReport, OpsError> {
    record(tx, actor, op, row, commitment, reason, outcome, note_history, None, now)
}

/// [`finish`] for a done action whose record must say more than its
/// outcome (a resend's acknowledgement), with the history note.
#[allow(clippy::too_many_arguments)]
fn finish_with(
    tx: &Tx<'_>,
    actor: &Actor<'_>,
    op: OpKind,
    row: Option<&IntentionRow>,
    commitment: (i64, &str),
    reason: &str,
    outcome: OpOutcome,
    extra: Option<&str>,
    now: DateTime<Utc>,
) -> Result<OpReport, OpsError> {
    record(tx, actor, op, row, commitment, reason, outcome, true, extra, now)
}

#[allow(clippy::too_many_arguments)]
fn record(
    tx: &Tx<'_>,
    actor: &Actor<'_>,
    op: OpKind,
    row: Option<&IntentionRow>,
    commitment: (i64, &str),
    reason: &str,
    outcome: OpOutcome,
    note_history: bool,
    extra: Option<&str>,
    now: DateTime<Utc>,
) -> Result<OpReport, OpsError> {
    let detail = match &outcome {
        OpOutcome::Refused(r) => Some(r.to_string()),
        OpOutcome::Recorded { state } => Some(format!("recorded only; state stays {state}")),
        OpOutcome::Done {
            new_intention: Some((id, key)),
            ..
        } => Some(format!("new intention #{id} {key}")),
        OpOutcome::Done {
            state: Some(s), closed, ..
        } => Some(format!("state {s}; {closed} closed")),
        OpOutcome::Done { closed, .. } => Some(format!("{closed} planned reminders closed")),
    };
    let detail = match (detail, extra) {
        (Some(d), Some(e)) => Some(format!("{d}; {e}")),
        (d, e) => d.or(e.map(str::to_string)),
    };
    let scope = row
        .map(|r| format!("intention #{} {}", r.id, r.key))
        .unwrap_or_else(|| format!("commitment {}", commitment.1));
    let action_id = tx.record_operator_action(
        &OperatorAction {
            operator: actor.name,
            role: actor.role.as_str(),
            action: op.as_str(),
            intention_id: row.map(|r| r.id),
            commitment_id: Some(commitment.0),
            scope: Some(&scope),
            reason: reason.trim(),
            result: outcome.result(),
            detail: detail.as_deref(),
        },
        now,
    )?;
    handled::mark_after(tx, actor, op, row, commitment.0, &outcome, action_id, now)?;
    if note_history && let Some(r) = row {
        let note = format!(
            "{} — {}: {}",
            note_text(actor, reason),
            outcome.result(),
            detail.as_deref().unwrap_or("")
        );
        tx.note(
            r.id,
            &Entry {
                signal: op.as_str(),
                cause: Cause::Operator,
                evidence: Some(&format!("operator_action:{action_id}")),
                note: Some(&note),
                commitment_version: Some(r.commitment_version),
            },
            now,
        )?;
    }
    Ok(OpReport {
        op,
        action_id,
        intention_id: row.map(|r| r.id),
        intention_key: row.map(|r| r.key.clone()),
        commitment_ref: commitment.1.to_string(),
        outcome,
    })
}

/// Why a cancel from `state` is refused.
fn cancel_refusal(row: &IntentionRow) -> Refusal {
    use IntentionState as S;
    match row.state {
        S::Dispatching => Refusal::InFlight,
        S::Uncertain => Refusal::Uncertain,
        S::Accepted | S::Sent => Refusal::ChannelHasIt { state: row.state },
        S::Delivered | S::Read => Refusal::Delivered { state: row.state },
        S::Planned | S::Review | S::Failed | S::Cancelled => Refusal::Closed {
            state: row.state,
            reason: row.state_reason.clone(),
        },
    }
}

/// Cancels an intention that has not left (planned, or in review).
pub fn cancel(
    tx: &Tx<'_>,
    actor: &Actor<'_>,
    intention_id: i64,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<OpReport, OpsError> {
    check(actor, OpKind::Cancel, reason)?;
    let row = tx.intention(intention_id)?;
    let note = note_text(actor, reason);
    let outcome = match crate::domain::state::transition(row.state, Signal::Cancel(CancelReason::Operator)) {
        Transition::Move(to) => {
            tx.signal(
                row.id,
                Signal::Cancel(CancelReason::Operator),
                &Entry {
                    signal: "cancel",
                    cause: Cause::Operator,
                    evidence: None,
                    note: Some(&note),
                    commitment_version: Some(row.commitment_version),
                },
                now,
            )?;
            OpOutcome::Done {
                state: Some(to),
                new_intention: None,
                closed: 0,
            }
        }
        Transition::Record(_) | Transition::Refuse => OpOutcome::Refused(cancel_refusal(&row)),
    };
    finish_on_intention(tx, actor, OpKind::Cancel, &row, reason, outcome, now)
}

/// Cancels an intention the channel accepted but may still hold queued:
/// `withdraw` is the channel's answer to `cancel(command_id)`, asked by the
/// caller outside the transaction. Only the channel's own confirmation
/// closes it (`withdrawn`); "too late" or "unreachable" is explained and
/// changes nothing. Any other state goes through [`cancel`].
pub fn cancel_with_channel(
    tx: &Tx<'_>,
    actor: &Actor<'_>,
    intention_id: i64,
    withdraw: Option<&CancelOutcome>,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<OpReport, OpsError> {
    let row = tx.intention(intention_id)?;
    let (Some(answer), IntentionState::Accepted) = (withdraw, row.state) else {
        return cancel(tx, actor, intention_id, reason, now);
    };
    check(actor, OpKind::Cancel, reason)?;
    let note = note_text(actor, reason);
    let outcome = match answer {
        CancelOutcome::Cancelled => {
            let r = tx.signal(
                row.id,
                Signal::Cancel(CancelReason::Withdrawn),
                &Entry {
                    signal: "cancel",
                    cause: Cause::Operator,
                    evidence: row.provider_command_id.as_deref(),
                    note: Some(&format!("{note} — the channel withdrew the queued command")),
                    commitment_version: Some(row.commitment_version),
                },
                now,
            )?;
            match r.transition {
                Transition::Move(to) => OpOutcome::Done {
                    state: Some(to),
                    new_intention: None,
                    closed: 0,
                },
                _ => OpOutcome::Refused(cancel_refusal(&row)),
            }
        }
        CancelOutcome::TooLate { .. } | CancelOutcome::Unsupported => OpOutcome::Refused(cancel_refusal(&row)),
        CancelOutcome::Unavailable { detail } => {
            OpOutcome::Refused(Refusal::ChannelUnavailable { detail: detail.clone() })
        }
    };
    finish_on_intention(tx, actor, OpKind::Cancel, &row, reason, outcome, now)
}

/// Records an action on one intention (a cancel or a verification, done
/// or refused) in `operator_actions`, and a refusal in the intention's
/// history too, whichever way the action was taken.
pub(crate) fn finish_on_intention(
    tx: &Tx<'_>,
    actor: &Actor<'_>,
    kind: OpKind,
    row: &IntentionRow,
    reason: &str,
    outcome: OpOutcome,
    now: DateTime<Utc>,
) -> Result<OpReport, OpsError> {
    let note_history = matches!(outcome, OpOutcome::Refused(_));
    finish(
        tx,
        actor,
        kind,
        Some(row),
        (row.commitment_id, &row.commitment_ref),
        reason,
        outcome,
        note_history,
        now,
    )
}

/// Records manual evidence (a phone call with its outcome): received is
/// delivery evidence, not received is a definitive failure of this message.
pub fn verify_manual(
    tx: &Tx<'_>,
    actor: &Actor<'_>,
    intention_id: i64,
    outcome: VerifyOutcome,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<OpReport, OpsError> {
    check(actor, OpKind::Verify, reason)?;
    let row = tx.intention(intention_id)?;
    let result = match row.state {
        IntentionState::Planned => OpOutcome::Refused(Refusal::NotSentYet { state: row.state }),
        IntentionState::Cancelled => OpOutcome::Refused(Refusal::Closed {
            state: row.state,
            reason: row.state_reason.clone(),
        }),
        _ => {
            let (signal, evidence) = match outcome {
                VerifyOutcome::Received => (Signal::Delivered, "manual:received"),
                VerifyOutcome::NotReceived => (Signal::Failed, "manual:not_received"),
            };
            apply_verification(tx, actor, &row, signal, evidence, reason, now)?
        }
    };
    finish_on_intention(tx, actor, OpKind::Verify, &row, reason, result, now)
}

/// Applies a verification's evidence (a phone call's outcome, the
/// channel's answer) with cause `operator`, and says what it did.
pub(crate) fn apply_verification(
    tx: &Tx<'_>,
    actor: &Actor<'_>,
    row: &IntentionRow,
    signal: Signal,
    evidence: &str,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<OpOutcome, OpsError> {
    let note = note_text(actor, reason);
    let r = tx.signal(
        row.id,
        signal,
        &Entry {
            signal: signal.name(),
            cause: Cause::Operator,
            evidence: Some(evidence),
            note: Some(&note),
            commitment_version: Some(row.commitment_version),
        },
        now,
    )?;
    Ok(match r.transition {
        Transition::Move(to) => OpOutcome::Done {
            state: Some(to),
            new_intention: None,
            closed: 0,
        },
        Transition::Record(_) => OpOutcome::Recorded { state: r.from },
        Transition::Refuse => OpOutcome::Refused(Refusal::Closed {
            state: r.from,
            reason: row.state_reason.clone(),
        }),
    })
}
