//! One confirmed operator action, run the same way from the console and
//! from the command line (`unavez intents cancel|verify|contact|resolve|
//! request-resend|decline-resend`):
//! ask the channel first where the action needs it (outside any
//! transaction, so a slow channel never holds the write lock), then decide
//! in one write that also checks the case did not change since the
//! operator looked at it.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{Actor, Ask, Case, OpKind, OpReport, OpsError, ResendGuard, Verification, VerifyOutcome};
use crate::channel::{CancelOutcome, Channel, LookupOutcome};
use crate::config::Config;
use crate::domain::lifecycle::OperatingDay;
use crate::domain::state::IntentionState;
use crate::planner::Planner;
use crate::store::Store;
use crate::templates::Templates;

/// An operator action, fully specified and confirmed.
#[derive(Debug, Clone, PartialEq)]
pub enum PendingOp {
    Cancel {
        intention_id: i64,
    },
    Verify {
        intention_id: i64,
        outcome: VerifyOutcome,
    },
    /// Authorize a resend; `acknowledge_delivered` when the supervisor
    /// typed the word after seeing an earlier message was delivered or read.
    Resend {
        intention_id: i64,
        acknowledge_delivered: bool,
    },
    ManualContact {
        commitment_id: i64,
        intention_id: Option<i64>,
    },
    /// "Marcar atendido".
    Resolve {
        case: Case,
    },
    /// Reprocess one operating day by state (technicians; the console runs
    /// it through `dispatch::reprocess`, not [`run`]).
    Reprocess {
        day: OperatingDay,
        states: Vec<IntentionState>,
    },
    /// Verify by asking the channel now.
    VerifyChannel {
        intention_id: i64,
    },
    /// Stop new claims of the embedded dispatcher (the console flips its
    /// switch; not [`run`]).
    PauseDispatch,
    ResumeDispatch,
    /// The front desk asks a supervisor for a resend.
    RequestResend {
        intention_id: i64,
    },
    /// A supervisor declines the front desk's request.
    DeclineResend {
        intention_id: i64,
    },
    /// What came of a call to the patient.
    CallOutcome {
        intention_id: i64,
        outcome: crate::domain::call::CallOutcome,
    },
    /// Take a case's "handled" mark back.
    Reopen {
        case: Case,
    },
    /// Confirm (cancel) or discard a calendar feed's held disappearances.
    FeedReview {
        feed: String,
        confirm: bool,
    },
}

impl PendingOp {
    pub fn kind(&self) -> OpKind {
        match self {
            PendingOp::Cancel { .. } => OpKind::Cancel,
            PendingOp::Verify { .. } | PendingOp::VerifyChannel { .. } => OpKind::Verify,
            PendingOp::Resend { .. } => OpKind::AuthorizeResend,
            PendingOp::ManualContact { .. } => OpKind::ManualContact,
            PendingOp::Resolve { .. } => OpKind::Resolve,
            PendingOp::Reprocess { .. } => OpKind::Reprocess,
            PendingOp::PauseDispatch => OpKind::PauseDispatch,
            PendingOp::ResumeDispatch => OpKind::ResumeDispatch,
            PendingOp::RequestResend { .. } => OpKind::RequestResend,
            PendingOp::DeclineResend { .. } => OpKind::DeclineResend,
            PendingOp::CallOutcome { .. } => OpKind::CallOutcome,
            PendingOp::Reopen { .. } => OpKind::Reopen,
            PendingOp::FeedReview { confirm: true, .. } => OpKind::FeedConfirm,
            PendingOp::FeedReview { confirm: false, .. } => OpKind::FeedDiscard,
        }
    }

    /// The case the action is taken on, for the "changed meanwhile" check.
    pub fn case(&self) -> Option<Case> {
        match self {
            PendingOp::Cancel { intention_id }
            | PendingOp::Verify { intention_id, .. }
            | PendingOp::Resend { intention_id, .. }
            | PendingOp::VerifyChannel { intention_id }
            | PendingOp::RequestResend { intention_id }
            | PendingOp::DeclineResend { intention_id }
            | PendingOp::CallOutcome { intention_id, .. } => Some(Case::intention(*intention_id)),
            PendingOp::ManualContact {
                intention_id: Some(id), ..
            } => Some(Case::intention(*id)),
            PendingOp::Resolve { case } | PendingOp::Reopen { case } => Some(*case),
            _ => None,
        }
    }
}

/// What running an action needs besides the store.
pub struct OpEnv<'a> {
    pub config: &'a Config,
    pub templates: &'a Templates,
    /// The channel, for a verification that asks it and a cancel that asks
    /// it to withdraw a queued command; `None`: the ledger decides alone.
    pub channel: Option<Arc<dyn Channel>>,
    /// The runtime the channel's HTTP client lives on (never one built per
    /// call: its death would take the pooled connections with it).
    pub runtime: Option<tokio::runtime::Handle>,
}

/// Runs one case action. `seen` is when the case's situation began as the
/// operator saw it (`None`: no check); a different one now refuses with
/// [`OpsError::Changed`] and changes nothing.
pub fn run(
    store: &mut Store,
    env: &OpEnv<'_>,
    op: &PendingOp,
    actor: &Actor<'_>,
    reason: &str,
    seen: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<OpReport, OpsError> {
    let tz = env.config.tz();
    let planner = Planner::new(&env.config.policy, env.templates, tz);
    let lookup = match op {
        PendingOp::VerifyChannel { intention_id } => channel_lookup(store, env, *intention_id, now)?,
        _ => None,
    };
    let withdraw = match op {
        PendingOp::Cancel { intention_id } => channel_withdraw(store, env, *intention_id)?,
        _ => None,
    };
    store.write(|tx| {
        if let Some(case) = op.case() {
            // Locked before the "changed meanwhile" check reads the case.
            super::lock_case(tx, case)?;
            super::ensure_unchanged(tx, case, seen)?;
        }
        match op {
            PendingOp::Cancel { intention_id } => {
                super::cancel(tx, actor, *intention_id, withdraw.as_ref(), reason, now)
            }
            PendingOp::Verify { intention_id, outcome } => {
                super::verify(tx, actor, *intention_id, Verification::Call(*outcome), reason, now)
            }
            PendingOp::Resend {
                intention_id,
                acknowledge_delivered,
            } => {
                let guard = ResendGuard::from_policy(&env.config.policy, *acknowledge_delivered);
                super::authorize_resend(tx, actor, *intention_id, reason, guard, tz, now)
            }
            PendingOp::ManualContact {
                commitment_id,
                intention_id,
            } => super::manual_contact(tx, &planner, actor, *commitment_id, *intention_id, reason, now),
            PendingOp::VerifyChannel { intention_id } => {
                let by = Verification::Channel(lookup.as_ref());
                super::verify(tx, actor, *intention_id, by, reason, now)
            }
            PendingOp::Resolve { case } => super::resolve(tx, actor, *case, reason, now),
            PendingOp::RequestResend { intention_id } => {
                let max = env.config.policy.max_resends_per_day;
                super::ask_resend(tx, actor, Ask::Request, *intention_id, reason, max, tz, now)
            }
            PendingOp::DeclineResend { intention_id } => {
                let max = env.config.policy.max_resends_per_day;
                super::ask_resend(tx, actor, Ask::Decline, *intention_id, reason, max, tz, now)
            }
            PendingOp::CallOutcome { intention_id, outcome } => {
                super::call_outcome(tx, &planner, actor, *intention_id, *outcome, now)
            }
            PendingOp::Reopen { case } => super::reopen(tx, actor, *case, reason, now),
            PendingOp::FeedReview { feed, confirm } => {
                super::review_feed(tx, &planner, actor, feed, *confirm, reason, now).map(|r| r.report(op.kind()))
            }
            PendingOp::Reprocess { .. } | PendingOp::PauseDispatch | PendingOp::ResumeDispatch => {
                Err(OpsError::NotAllowed {
                    role: actor.role.as_str(),
                    op: op.kind().as_str(),
                })
            }
        }
    })
}

fn channel_and_runtime(env: &OpEnv<'_>) -> Option<(Arc<dyn Channel>, tokio::runtime::Handle)> {
    Some((env.channel.clone()?, env.runtime.clone()?))
}

/// Asks the channel where the intention's command is. `None` when the
/// channel cannot be asked (no lookup capability).
fn channel_lookup(
    store: &mut Store,
    env: &OpEnv<'_>,
    intention_id: i64,
    now: DateTime<Utc>,
) -> Result<Option<LookupOutcome>, OpsError> {
    let (channel, rt) = channel_and_runtime(env).ok_or_else(|| OpsError::Channel("no channel configured".into()))?;
    if !channel.capabilities().command_lookup {
        return Ok(None);
    }
    let row = store.read(|tx| tx.intention(intention_id))?;
    let Some(command_id) = row.provider_command_id.as_deref() else {
        // Without an engine command id, the only way to ask an idempotent
        // engine is to repeat the request with the same key, and if the
        // first request never arrived that repeat is the first delivery.
        // A verification never sends: the reconciler makes that repeat,
        // with the validity check in the transaction that records it.
        // `verify` refuses it as `NoCommandId`.
        return Ok(Some(LookupOutcome::NotFound));
    };
    let req = crate::dispatch::request::send_request(&row, None, now);
    Ok(Some(rt.block_on(channel.lookup(&req, Some(command_id)))))
}

/// For an accepted intention on a channel that can withdraw queued
/// commands: the channel's answer to `cancel`. `None` for any other state
/// (the ledger decides alone) or when there is no channel to ask.
fn channel_withdraw(store: &mut Store, env: &OpEnv<'_>, intention_id: i64) -> Result<Option<CancelOutcome>, OpsError> {
    let row = store.read(|tx| tx.intention(intention_id))?;
    let Some((channel, rt)) = channel_and_runtime(env) else {
        return Ok(None);
    };
    let (Some(command_id), IntentionState::Accepted) = (row.provider_command_id, row.state) else {
        return Ok(None);
    };
    if !channel.capabilities().cancel {
        return Ok(Some(CancelOutcome::Unsupported));
    }
    Ok(Some(rt.block_on(channel.cancel(&command_id))))
}
