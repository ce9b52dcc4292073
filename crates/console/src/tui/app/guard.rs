//! What the console asks the guards (`domain::guard`) before any form
//! opens (issue 25 §3): the facts a row shows, the hint built from them,
//! and the verdict of an action key on the case under the cursor.
//!
//! The row carries what every guard reads but a resend family's pending
//! members and the day's count (`unavez_app::ops::guard_facts` reads those
//! in the ledger). Those two rules are judged where the family is read:
//! the resend's confirmation, which then never offers `s`, and the action
//! itself. The verdicts here refuse only what the action would refuse.

use crate::config::Role;
use crate::domain::attention::{CaseKind, NextStep};
use crate::domain::guard::{self, CommitmentState, Facts, ResendAsk, ResendFacts, Verdict};
use crate::domain::state::IntentionState;
use crate::ops::OpKind;
use crate::store::{AttentionRow, RowKind};

/// What an Atención row is, for the next step.
pub fn case_kind(r: &AttentionRow) -> CaseKind {
    match r.kind {
        RowKind::RescheduleRequest => CaseKind::RescheduleRequest,
        RowKind::RefusedEvent => CaseKind::RefusedEvent,
        RowKind::ChannelEvent => CaseKind::ChannelEvent,
        RowKind::Intention => CaseKind::Intention(row_state(r)),
    }
}

fn row_state(r: &AttentionRow) -> IntentionState {
    match r.state.as_str() {
        "stuck" => IntentionState::Dispatching,
        // A message the channel took and never confirmed (Cloud API).
        "unconfirmed" => IntentionState::Accepted,
        s => s.parse().unwrap_or(IntentionState::Review),
    }
}

/// The commitment as the guards see it.
pub fn commitment_state(status: Option<&str>, confirmed: bool) -> CommitmentState {
    match status {
        Some("cancelled") => CommitmentState::Cancelled,
        _ if confirmed => CommitmentState::Confirmed,
        _ => CommitmentState::Open,
    }
}

/// The row's `resend_ask` (`action:operator:reason`) as the request's state.
pub fn parse_ask(ask: Option<&str>) -> ResendAsk {
    let Some(ask) = ask else { return ResendAsk::None };
    let mut parts = ask.splitn(3, ':');
    let (action, by, reason) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default().to_string(),
        parts.next().unwrap_or_default().to_string(),
    );
    match action {
        a if a == OpKind::RequestResend.as_str() => ResendAsk::Requested { by, reason },
        a if a == OpKind::DeclineResend.as_str() => ResendAsk::Declined { by, reason },
        _ => ResendAsk::None,
    }
}

/// The guards' facts of a row for `role`. A case that is not an
/// intention is judged by role and commitment alone.
pub fn row_facts(role: Role, r: &AttentionRow, max_per_day: u32) -> Facts {
    let state = row_state(r);
    Facts {
        role,
        state,
        state_reason: r.state_reason.clone(),
        commitment: commitment_state(r.commitment_status.as_deref(), r.confirmed),
        appointment: r.appointment,
        resend: ResendFacts::single(state, max_per_day),
        ask: parse_ask(r.resend_ask.as_deref()),
    }
}

/// What this person should do next with the row.
pub fn row_hint(role: Role, r: &AttentionRow, max_per_day: u32) -> NextStep {
    guard::hint(case_kind(r), &row_facts(role, r, max_per_day))
}

/// The verdict of `op` on a target with these facts: only actions on an
/// intention have a case to judge; the rest are judged by role (the key
/// registry) and by the action.
pub fn verdict(op: OpKind, facts: Option<&Facts>) -> Verdict {
    match facts {
        Some(f) => guard::check(op, f),
        None => Ok(()),
    }
}
