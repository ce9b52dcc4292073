//! The front desk asks for a resend, a supervisor answers (issue 25 §3),
//! and the facts every guard of `domain::guard` reads about a case.
//!
//! The front desk may not resend. "Pedir reenvío" records the request (a
//! reason is required) in `operator_actions` and the intention's history;
//! the case then shows in the supervisors' Atención as "reenvío pedido por
//! recepción". A supervisor authorizes it (the normal guarded resend) or
//! declines it with a reason; the latest of the three on the intention is
//! the request's state, which the front desk sees on the same row. Neither
//! a request nor a decline marks the case handled: both sides still have
//! something to do with it.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::resend::{load, resend_facts};
use super::{Actor, OpKind, OpOutcome, OpReport, OpsError, Record, check, lock_intention, record};
use crate::config::Role;
use crate::domain::commitment::CommitmentKind;
use crate::domain::guard::{self, CommitmentState, Facts, ResendAsk, Why};
use crate::store::Tx;

/// What the guards read about intention `intention_id` for `role`, in the
/// caller's transaction. Reads only: the console asks it before a form
/// opens, and every guarded action reads the same after its lock.
pub fn guard_facts(
    tx: &Tx<'_>,
    role: Role,
    intention_id: i64,
    max_per_day: u32,
    tz: Tz,
    now: DateTime<Utc>,
) -> Result<Facts, OpsError> {
    let fam = load(tx, intention_id, max_per_day, tz, now)?;
    let c = &fam.commitment.commitment;
    let commitment = if c.is_cancelled() {
        CommitmentState::Cancelled
    } else if c.confirmed_at.is_some() {
        CommitmentState::Confirmed
    } else {
        CommitmentState::Open
    };
    let resend = resend_facts(&fam.original, &fam.commitment, &fam.evidence, tz, now);
    Ok(Facts {
        role,
        state: fam.row.state,
        state_reason: fam.row.state_reason.clone(),
        commitment,
        appointment: c.kind == CommitmentKind::Appointment,
        resend,
        ask: resend_ask(tx, intention_id)?,
    })
}

/// The request's state: the latest request, decline or authorization.
fn resend_ask(tx: &Tx<'_>, intention_id: i64) -> Result<ResendAsk, OpsError> {
    Ok(match tx.resend_ask(intention_id)? {
        Some((action, by, reason)) if action == OpKind::RequestResend.as_str() => ResendAsk::Requested { by, reason },
        Some((action, by, reason)) if action == OpKind::DeclineResend.as_str() => ResendAsk::Declined { by, reason },
        _ => ResendAsk::None,
    })
}

/// The two answers a resend request can get from the people around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// "Pedir reenvío": the front desk asks a supervisor to authorize a
    /// resend. Refused when a resend would be refused now (the same rules
    /// as the resend itself) or a request is already open.
    Request,
    /// A supervisor declines the open request, saying why.
    Decline,
}

impl Ask {
    pub fn op(self) -> OpKind {
        match self {
            Ask::Request => OpKind::RequestResend,
            Ask::Decline => OpKind::DeclineResend,
        }
    }
}

/// A request or its decline on `intention_id`: checked, locked, judged by
/// its guard on the facts read after the lock, and recorded either way.
#[allow(clippy::too_many_arguments)]
pub fn ask_resend(
    tx: &Tx<'_>,
    actor: &Actor<'_>,
    ask: Ask,
    intention_id: i64,
    reason: &str,
    max_per_day: u32,
    tz: Tz,
    now: DateTime<Utc>,
) -> Result<OpReport, OpsError> {
    let op = ask.op();
    check(actor, op, reason)?;
    lock_intention(tx, intention_id)?;
    let facts = guard_facts(tx, actor.role, intention_id, max_per_day, tz, now)?;
    let outcome = match guard::check(op, &facts) {
        Ok(()) => OpOutcome::done(0),
        Err(Why::Rule(r)) => OpOutcome::Refused(r),
        // `check` above already refused a role that may not.
        Err(Why::Role) => {
            return Err(OpsError::NotAllowed {
                role: actor.role.as_str(),
                op: op.as_str(),
            });
        }
    };
    let row = tx.intention(intention_id)?;
    record(tx, actor, Record::on(op, &row, reason, outcome), now)
}
