//! A person's answer to a mass disappearance on a calendar feed
//! (`domain::feed`): confirm cancels the held commitments the usual way,
//! discard lets them go (the body that raised the hold is already the
//! baseline). Both are recorded in `operator_actions` like every action.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{Actor, OpKind, OpOutcome, OpsError, action_row, check};
use crate::planner::Planner;
use crate::store::{OperatorAction, Tx};

/// What a confirm or discard did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FeedReview {
    pub feed: String,
    pub action_id: i64,
    /// The held refs it settled.
    pub held: Vec<String>,
    /// Confirm: the refs whose commitment was cancelled.
    pub cancelled: Vec<String>,
}

impl FeedReview {
    /// As every other action reports itself.
    pub fn report(&self, op: OpKind) -> super::OpReport {
        super::OpReport::new(
            op,
            self.action_id,
            None,
            format!("feed {}", self.feed),
            OpOutcome::done(self.cancelled.len()),
        )
    }
}

/// Confirms (`confirm = true`: cancels them) or discards the
/// disappearances held on feed `name`.
pub fn review_feed(
    tx: &Tx<'_>,
    planner: &Planner<'_>,
    actor: &Actor<'_>,
    name: &str,
    confirm: bool,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<FeedReview, OpsError> {
    let op = if confirm {
        OpKind::FeedConfirm
    } else {
        OpKind::FeedDiscard
    };
    check(actor, op, reason)?;
    if tx.feed(name)?.is_none() {
        return Err(OpsError::UnknownFeed(name.to_string()));
    }
    let held = tx.feed_held(name)?;
    if held.is_empty() {
        return Err(OpsError::NothingHeld(name.to_string()));
    }
    // Unheld first: the cancellation plans its notice on a commitment
    // that is no longer held.
    let refs: Vec<&str> = held.iter().map(|s| s.reference.as_str()).collect();
    tx.feed_unhold(name, &refs)?;
    let cancelled = if confirm {
        crate::feed::cancel_vanished(tx, planner, name, &held, now)?
    } else {
        Vec::new()
    };
    let detail = if confirm {
        format!("{} of {} held disappearance(s) cancelled", cancelled.len(), held.len())
    } else {
        format!(
            "{} held disappearance(s) released; the current feed is the baseline",
            held.len()
        )
    };
    let scope = format!("feed {name}");
    let outcome = OpOutcome::done(0);
    let action_id = tx.record_operator_action(
        &OperatorAction {
            scope: Some(&scope),
            ..action_row(actor, op, reason, &outcome, &detail)
        },
        now,
    )?;
    Ok(FeedReview {
        feed: name.to_string(),
        action_id,
        held: refs.iter().map(|r| r.to_string()).collect(),
        cancelled,
    })
}
