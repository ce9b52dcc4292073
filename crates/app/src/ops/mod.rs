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
//! Every action first locks its case (`lock.rs`), so two operators, or an
//! operator and a booking import, acting on one case are ordered on every
//! backend and each decides on what the other committed.
//!
//! `verify.rs` holds verification (by a call or through the channel);
//! `contact.rs` manual contact; `call.rs` call outcomes and reopening; `handled.rs` marking cases handled;
//! `pause.rs` pausing and resuming the embedded dispatcher; `resend.rs`
//! authorizing a resend and the guard around it; `request.rs` the front
//! desk's request for one, its answer, and the facts every guard reads
//! (`domain::guard`); `run.rs` running one confirmed action, channel
//! question first.

mod call;
mod contact;
mod feed;
mod handled;
pub mod identity;
mod lock;
mod pause;
mod refusal;
mod request;
mod resend;
mod run;
mod verify;

pub(crate) use call::hold_wrong_numbers;
pub use call::{call_outcome, call_tries, reopen};
pub use contact::manual_contact;
pub use feed::{FeedReview, review_feed};
pub use handled::{Case, ensure_unchanged, resolve};
pub use identity::{Identity, IdentityError};
pub use lock::{lock_case, lock_intention};
pub use pause::switch_dispatch;
pub use refusal::Refusal;
pub use request::{Ask, ask_resend, guard_facts};
pub use resend::{ResendEvidence, ResendGuard, authorize_resend, resend_evidence};
pub use run::{OpEnv, PendingOp, run};
pub use verify::{Verification, VerifyOutcome, verify};

/// The actions and who may do them are domain vocabulary (core); re-exported
/// here, where they are carried out.
pub use crate::domain::operator::{OpKind, allowed};

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::channel::CancelOutcome;
use crate::config::Role;
use crate::domain::event::{BookingEvent, EventType};
use crate::domain::history::{self, Cause, HistorySignal, Said};
use crate::domain::key::KeyError;
use crate::domain::state::{CancelReason, IntentionState, Signal, Transition};
use crate::ingest::{IngestError, Outcome, ingest};
use crate::planner::Planner;
use crate::store::{IntentionRow, OperatorAction, StoreError, Tx};

/// The signed-in operator.
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a> {
    pub name: &'a str,
    pub role: Role,
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
    /// Done: the intention moved to `to`.
    fn moved(to: IntentionState) -> OpOutcome {
        OpOutcome::Done {
            state: Some(to),
            new_intention: None,
            closed: 0,
        }
    }

    /// Done without moving an intention; `closed` planned reminders closed.
    fn done(closed: usize) -> OpOutcome {
        OpOutcome::Done {
            state: None,
            new_intention: None,
            closed,
        }
    }

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

impl OpReport {
    fn new(
        op: OpKind,
        action_id: i64,
        row: Option<&IntentionRow>,
        commitment_ref: String,
        outcome: OpOutcome,
    ) -> OpReport {
        OpReport {
            op,
            action_id,
            intention_id: row.map(|r| r.id),
            intention_key: row.map(|r| r.key.clone()),
            commitment_ref,
            outcome,
        }
    }
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
    #[error("no feed named {0:?} in the ledger (has `serve` polled it?)")]
    UnknownFeed(String),
    /// A calendar feed's review with nothing held to act on.
    #[error("feed {0:?} holds nothing for review")]
    NothingHeld(String),
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

/// One action to record: on what, why, and what came of it.
pub(crate) struct Record<'r> {
    pub op: OpKind,
    pub row: Option<&'r IntentionRow>,
    /// The commitment's id and reference.
    pub commitment: (i64, &'r str),
    pub reason: &'r str,
    pub outcome: OpOutcome,
    /// Also write a note in the intention's history, when the state
    /// machine did not already write one.
    pub note_history: bool,
    /// What the record must say besides its outcome (a resend's
    /// acknowledgement).
    pub extra: Option<&'r str>,
}

impl<'r> Record<'r> {
    /// An action on one intention, noted in its history.
    pub fn on(op: OpKind, row: &'r IntentionRow, reason: &'r str, outcome: OpOutcome) -> Record<'r> {
        Record {
            op,
            row: Some(row),
            commitment: (row.commitment_id, &row.commitment_ref),
            reason,
            outcome,
            note_history: true,
            extra: None,
        }
    }

    /// What the `operator_actions` row says besides the result.
    fn detail(&self) -> String {
        let detail = match &self.outcome {
            OpOutcome::Refused(r) => r.to_string(),
            OpOutcome::Recorded { state } => format!("recorded only; state stays {state}"),
            OpOutcome::Done {
                new_intention: Some((id, key)),
                ..
            } => format!("new intention #{id} {key}"),
            OpOutcome::Done {
                state: Some(s), closed, ..
            } => format!("state {s}; {closed} closed"),
            OpOutcome::Done { .. } if self.op == OpKind::RequestResend => "resend requested".to_string(),
            OpOutcome::Done { .. } if self.op == OpKind::DeclineResend => "resend request declined".to_string(),
            OpOutcome::Done { closed, .. } => format!("{closed} planned reminders closed"),
        };
        match self.extra {
            Some(e) => format!("{detail}; {e}"),
            None => detail,
        }
    }
}

/// The `operator_actions` row of `op` by `actor`: who, what, why and the
/// result. The caller says on what.
fn action_row<'a>(
    actor: &Actor<'a>,
    op: OpKind,
    reason: &'a str,
    outcome: &OpOutcome,
    detail: &'a str,
) -> OperatorAction<'a> {
    OperatorAction {
        operator: actor.name,
        role: actor.role.as_str(),
        action: op.as_str(),
        intention_id: None,
        commitment_id: None,
        scope: None,
        reason: reason.trim(),
        result: outcome.result(),
        detail: Some(detail),
    }
}

/// Records the action and its result in `operator_actions`, marks the case
/// handled when the action settles it, and writes the history note the
/// record asks for.
pub(crate) fn record(
    tx: &Tx<'_>,
    actor: &Actor<'_>,
    rec: Record<'_>,
    now: DateTime<Utc>,
) -> Result<OpReport, OpsError> {
    let detail = rec.detail();
    let scope = rec
        .row
        .map(|r| format!("intention #{} {}", r.id, r.key))
        .unwrap_or_else(|| format!("commitment {}", rec.commitment.1));
    let action_id = tx.record_operator_action(
        &OperatorAction {
            intention_id: rec.row.map(|r| r.id),
            commitment_id: Some(rec.commitment.0),
            scope: Some(&scope),
            ..action_row(actor, rec.op, rec.reason, &rec.outcome, &detail)
        },
        now,
    )?;
    handled::mark_after(tx, actor, &rec, action_id, now)?;
    if rec.note_history
        && let Some(r) = rec.row
    {
        let note = format!("{} — {}: {detail}", note_text(actor, rec.reason), rec.outcome.result());
        let said = operator_said(rec.op.history_signal(), action_id, r.commitment_version).note(note);
        write_note(tx, r.id, said, now)?;
    }
    Ok(OpReport::new(
        rec.op,
        action_id,
        rec.row,
        rec.commitment.1.to_string(),
        rec.outcome,
    ))
}

/// What an operator's history row says besides its note: the action's
/// row in `operator_actions` as evidence, and the commitment version.
pub(crate) fn operator_said(signal: HistorySignal, action_id: i64, version: i64) -> Said {
    Said::new(signal, Cause::Operator)
        .evidence(format!("operator_action:{action_id}"))
        .version(version)
}

/// Appends a history row that changes no state, on the intention as it is
/// now in this transaction.
pub(crate) fn write_note(tx: &Tx<'_>, id: i64, said: Said, now: DateTime<Utc>) -> Result<(), OpsError> {
    let state = tx.intention(id)?.state;
    tx.apply_records(&[history::note(id, state, said, now)])?;
    Ok(())
}

/// Feeds `signal` through the state machine from the intention's state now
/// in this transaction and stores the row it decides: the state it was in
/// and what the machine did.
pub(crate) fn write_signal(
    tx: &Tx<'_>,
    id: i64,
    signal: Signal,
    said: Said,
    now: DateTime<Utc>,
) -> Result<(IntentionState, Transition), OpsError> {
    let from = tx.intention(id)?.state;
    let (t, record) = history::on_signal(id, from, signal, said, now);
    tx.apply_records(record.as_slice())?;
    Ok((from, t))
}

/// An action on one intention: checked, decided on the intention as it is
/// now, and recorded in `operator_actions` (a refusal also in the
/// intention's history; a move is already there, from the state machine).
pub(crate) fn act_on_intention(
    tx: &Tx<'_>,
    actor: &Actor<'_>,
    op: OpKind,
    intention_id: i64,
    reason: &str,
    now: DateTime<Utc>,
    decide: impl FnOnce(&IntentionRow) -> Result<OpOutcome, OpsError>,
) -> Result<OpReport, OpsError> {
    check(actor, op, reason)?;
    lock_intention(tx, intention_id)?;
    let row = tx.intention(intention_id)?;
    let outcome = decide(&row)?;
    let note_history = matches!(outcome, OpOutcome::Refused(_));
    let rec = Record {
        note_history,
        ..Record::on(op, &row, reason, outcome)
    };
    record(tx, actor, rec, now)
}

/// Cancels an intention that has not left (planned, or in review), or one
/// the channel accepted but may still hold queued. For the latter,
/// `withdraw` is the channel's answer to `cancel(command_id)`, asked by the
/// caller outside the transaction: only the channel's own confirmation
/// closes it (`withdrawn`); "too late" or "unreachable" is explained and
/// changes nothing. Without an answer the ledger decides alone.
pub fn cancel(
    tx: &Tx<'_>,
    actor: &Actor<'_>,
    intention_id: i64,
    withdraw: Option<&CancelOutcome>,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<OpReport, OpsError> {
    act_on_intention(tx, actor, OpKind::Cancel, intention_id, reason, now, |row| {
        use crate::domain::guard::{Withdrawal, cancel_decision, cancel_refusal};
        let answer = withdraw.map(|w| match w {
            CancelOutcome::Cancelled => Withdrawal::Withdrawn,
            CancelOutcome::TooLate { .. } | CancelOutcome::Unsupported => Withdrawal::Kept,
            CancelOutcome::Unavailable { detail } => Withdrawal::Unreachable { detail: detail.clone() },
        });
        // Decided by core before signalling: a cancel the state machine
        // would only record is refused, and noted once, with the operator
        // action.
        let why = match cancel_decision(row.state, row.state_reason.as_deref(), answer.as_ref()) {
            Ok(why) => why,
            Err(r) => return Ok(OpOutcome::Refused(r)),
        };
        let mut note = note_text(actor, reason);
        let mut evidence = None;
        if why == CancelReason::Withdrawn {
            note.push_str(" — the channel withdrew the queued command");
            evidence = row.provider_command_id.as_deref();
        }
        let signal = Signal::Cancel(why);
        let mut said = Said::new(HistorySignal::Cancel, Cause::Operator)
            .note(note)
            .version(row.commitment_version);
        said.evidence = evidence.map(str::to_string);
        Ok(match write_signal(tx, row.id, signal, said, now)?.1 {
            Transition::Move(to) => OpOutcome::moved(to),
            _ => OpOutcome::Refused(cancel_refusal(row.state, row.state_reason.as_deref())),
        })
    })
}
