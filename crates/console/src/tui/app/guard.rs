//! What the console asks the guards (`domain::guard`) before any form
//! opens (issue 25 §3): the facts a row shows, the hint built from them,
//! and the verdict of an action key on the case under the cursor.
//!
//! The row carries what every guard reads, its resend family included
//! (read for the whole page by the ledger's `Tx::fill_families`): the
//! facts of a pending resend and of the day's count come from the same
//! `domain::guard::Family::facts` the action runs, so a row never offers a
//! resend its guard would refuse. Only the acknowledgement of an earlier
//! delivery is left to the resend's confirmation, where it is typed.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::config::Role;
use crate::domain::attention::{CaseKind, NextStep};
use crate::domain::commitment::CommitmentKind;
use crate::domain::guard::{self, CommitmentState, Facts, ResendAsk, ResendFacts, Verdict};
use crate::domain::state::IntentionState;
use crate::ops::OpKind;
use crate::store::{AttentionRow, NotificationCell, RowKind, UpcomingRow};

/// What an Atención row is, for the next step.
pub fn case_kind(r: &AttentionRow) -> CaseKind {
    match r.kind {
        RowKind::RescheduleRequest => CaseKind::RescheduleRequest,
        RowKind::RefusedEvent => CaseKind::RefusedEvent,
        RowKind::ChannelEvent => CaseKind::ChannelEvent,
        RowKind::Intention => CaseKind::Intention(row_state(r)),
    }
}

/// The intention state behind the row's situation (a stuck row is
/// dispatching; an unconfirmed one, which the channel took and never
/// confirmed, accepted).
fn row_state(r: &AttentionRow) -> IntentionState {
    r.state.intention_state().unwrap_or(IntentionState::Review)
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

/// What the resend rules read besides the case: `[policy]
/// max_resends_per_day`, the clinic's zone (its operating day) and now.
#[derive(Debug, Clone, Copy)]
pub struct ResendCtx {
    pub max_per_day: u32,
    pub tz: Tz,
    pub now: DateTime<Utc>,
}

/// The guards' facts of a row for `role`. A case that is not an
/// intention is judged by role and commitment alone.
pub fn row_facts(role: Role, r: &AttentionRow, cx: ResendCtx) -> Facts {
    let state = row_state(r);
    let resend = match &r.family {
        Some(family) => family.facts(cx.max_per_day, cx.tz, cx.now),
        None => ResendFacts::single(state, cx.max_per_day),
    };
    Facts {
        role,
        state,
        state_reason: r.state_reason.clone(),
        commitment: commitment_state(r.commitment_status.as_deref(), r.confirmed),
        appointment: r.appointment,
        resend,
        ask: parse_ask(r.resend_ask.as_deref()),
    }
}

/// The guards' facts of a patient card's message (`c`'s notification
/// `n`), read as Atención's rows are: its family and request come with
/// the card.
pub fn card_facts(role: Role, c: &UpcomingRow, n: &NotificationCell, cx: ResendCtx) -> Facts {
    let state = n.state.parse().unwrap_or(IntentionState::Review);
    let resend = match &n.family {
        Some(family) => family.facts(cx.max_per_day, cx.tz, cx.now),
        None => ResendFacts::single(state, cx.max_per_day),
    };
    Facts {
        role,
        state,
        state_reason: n.state_reason.clone(),
        commitment: commitment_state(Some(c.status.as_str()), c.confirmed_at.is_some()),
        appointment: c.kind == CommitmentKind::Appointment,
        resend,
        ask: parse_ask(n.resend_ask.as_deref()),
    }
}

/// What this person should do next with the row.
pub fn row_hint(role: Role, r: &AttentionRow, cx: ResendCtx) -> NextStep {
    guard::hint(case_kind(r), &row_facts(role, r, cx))
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
