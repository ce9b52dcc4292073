//! The model's calls into `unavez-core`: every decision the actors take is
//! one of these, with the ledger's rows turned into core's facts.

use chrono::{DateTime, Duration, Utc};
use unavez_core::domain::attempt::{AttemptResult, Backoff, RetryPolicy};
use unavez_core::domain::commitment::CommitmentKind;
use unavez_core::domain::finish::{self, FinishFacts};
use unavez_core::domain::guard::{self, CommitmentState, Facts, PendingResend, ResendAsk, ResendFacts};
use unavez_core::domain::history::Cause;
use unavez_core::domain::operator::Role;
use unavez_core::domain::presend::{self, Holder, PresendFacts};
use unavez_core::domain::recovery::{self, LeaseFacts, ToReview};
use unavez_core::domain::state::{IntentionState, ReviewReason, Signal, Transition, transition};
use unavez_core::domain::validity::{self, CommitmentFacts, IntentionFacts, Rules, Validity};
use unavez_core::templates::Category;

use crate::world::{Commitment, Intention, World, intern, purpose};

/// The model's one instant: time does not pass in the model, leases run
/// out by an explicit event instead.
pub fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).expect("a fixed instant")
}

/// Core's validity verdict for `i` against the commitment `c`.
pub fn validity(i: &Intention, c: Commitment) -> Validity {
    validity::check(
        &IntentionFacts {
            commitment_version: i.planned_version.into(),
            purpose: purpose(i.purpose),
            category: Category::Transactional,
            asks_confirmation: false,
            expires_at: None,
            created_at: now() - Duration::hours(1),
        },
        &CommitmentFacts {
            kind: CommitmentKind::Appointment,
            cancelled: c.cancelled,
            version: c.version.into(),
            starts_at: Some(now() + Duration::days(2)),
            confirmed_at: None,
            manual_contact_at: None,
        },
        None,
        0,
        &Rules {
            quiet_hours: None,
            daily_cap: 0,
            tz: chrono_tz::UTC,
        },
        now(),
    )
}

/// Core's pre-send re-check of row `i` for `holder`.
pub fn presend(w: &World, i: usize, holder: &Holder) -> Option<String> {
    let row = &w.intentions[i];
    let Some(attempt) = row.attempt else {
        return Some("no open attempt".into());
    };
    let (owner, until) = match row.lease {
        Some(l) => (
            Some(owner_name(l.owner.into())),
            Some(if l.live { now() + Duration::seconds(30) } else { now() }),
        ),
        None => (None, None),
    };
    presend::moved(
        &PresendFacts {
            n: attempt.n.into(),
            attempt_open: true,
            version_checked: attempt.version_checked.into(),
            state: row.state,
            lease_owner: owner,
            lease_until: until,
            purpose: purpose(row.purpose),
            commitment_version: w.commitment.version.into(),
            commitment_cancelled: w.commitment.cancelled,
        },
        holder,
        now(),
    )
}

pub fn owner_name(d: usize) -> String {
    format!("dispatcher-{d}")
}

/// Core's decision on a recorded answer (`finish::decide`): an accepted
/// answer is evidence, a timeout makes a row in flight uncertain; a late
/// answer for a row that moved on changes nothing it must not. The state
/// it leaves the row in, when it moved, and the reason it gives.
pub fn finish(
    w: &World,
    i: usize,
    reconciler: bool,
    held: bool,
    accepted: bool,
) -> (Option<IntentionState>, Option<&'static str>) {
    let row = &w.intentions[i];
    let facts = FinishFacts {
        attempt_id: i as i64,
        intention_id: i as i64,
        n: row.attempt.map_or(1, |a| a.n.into()),
        version_checked: row.attempt.map_or(row.planned_version, |a| a.version_checked).into(),
        // A lease that ran out closed the attempt: this answer is late.
        attempt_ended: !held || row.attempt.is_none(),
        state: row.state,
        attempt_count: 1,
        unsent: 0,
        intention_version: row.planned_version.into(),
        current_version: w.commitment.version.into(),
    };
    let result = if accepted {
        AttemptResult::Acknowledged {
            evidence: Some(Signal::Accepted),
            command_id: Some("command"),
            message_id: None,
            http_status: Some(202),
            detail: None,
        }
    } else {
        AttemptResult::Uncertain { detail: "timeout" }
    };
    let cause = if reconciler {
        Cause::Reconciler
    } else {
        Cause::Dispatcher
    };
    let retry = RetryPolicy {
        max_attempts: 3,
        backoff: Backoff::new(vec![60]),
    };
    let plan = finish::decide(&facts, &result, cause, &retry, now());
    match plan.record {
        Some(r) if r.applied && r.to != row.state => (Some(r.to), r.reason.map(intern)),
        _ => (None, None),
    }
}

/// Core's transition, as the state machine applies it.
pub fn apply(from: IntentionState, signal: Signal) -> Option<IntentionState> {
    match transition(from, signal) {
        Transition::Move(to) => Some(to),
        Transition::Record(_) | Transition::Refuse => None,
    }
}

/// Core's lease recovery: whether an expired lease makes row `i` uncertain.
pub fn expire(i: usize, row: &Intention) -> bool {
    let facts = LeaseFacts {
        intention_id: i as i64,
        state: row.state,
        owner: row.lease.map(|l| owner_name(l.owner.into())),
        open_attempts: row.attempt.map(|a| i64::from(a.n)).into_iter().collect(),
    };
    recovery::expire_leases(&[facts], now()).moved().contains(&(i as i64))
}

/// Core's review row for a repeat the validity rule refused: the reason
/// a person sees, when the machine takes it.
pub fn refused_repeat(i: usize, row: &Intention, verdict: &Validity, version: u8) -> Option<&'static str> {
    let Validity::Cancel { reason, explanation } = verdict else {
        return None;
    };
    let why = ToReview::RefusedRepeat {
        reason: ReviewReason::for_refused_repeat(*reason),
        version: version.into(),
    };
    let r = recovery::reconcile_review(i as i64, row.state, why, explanation, now())?;
    r.applied
        .then(|| intern(r.reason.unwrap_or_else(|| "needs_review".into())))
}

/// The guard's facts for an operator acting on row `i`.
pub fn guard_facts(w: &World, i: usize, max_per_day: u32) -> Facts {
    let row = &w.intentions[i];
    let family: Vec<&Intention> = w.rows().iter().filter(|r| r.family == row.family).collect();
    let original = &w.intentions[usize::from(row.family)];
    let pending = family.iter().skip(1).find(|r| {
        matches!(
            r.state,
            IntentionState::Planned | IntentionState::Dispatching | IntentionState::Uncertain
        )
    });
    Facts {
        role: Role::Supervisor,
        state: row.state,
        state_reason: row.reason.map(str::to_string),
        commitment: if w.commitment.cancelled {
            CommitmentState::Cancelled
        } else {
            CommitmentState::Open
        },
        appointment: true,
        resend: ResendFacts {
            original: original.state,
            planned_version: original.planned_version.into(),
            current_version: w.commitment.version.into(),
            expired: false,
            pending: pending.map(|_| PendingResend {
                key: format!("{}:reenvio:1", row.family),
                authorized_by: Some("supervisor".into()),
                authorized_at: now().fixed_offset(),
            }),
            authorized_today: (family.len() - 1) as u32,
            max_per_day,
        },
        ask: ResendAsk::None,
    }
}

pub use guard::{authorize_resend, cancel, verify};

/// The monotonic rule's check on a written change: evidence never moves
/// backwards. The explicit exceptions in core: a release (nothing reached
/// the channel) returns `dispatching` to `planned`;
/// [`unavez_core::domain::state::replan_failed`] and reopening a handled
/// case are operator actions the model does not take.
pub fn backward(from: IntentionState, to: IntentionState) -> bool {
    use IntentionState as S;
    if from == to {
        return false;
    }
    if from.is_terminal() {
        return true;
    }
    if (from, to) == (S::Dispatching, S::Planned) {
        return false;
    }
    matches!((from.rank(), to.rank()), (Some(a), Some(b)) if b < a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::{Attempt, Bounds, Lease};

    /// The one-family check stands for every family (docs/verification.md,
    /// "One check or two") only if a booking notice and a reminder are
    /// decided alike at the model's instant: same validity verdict, same
    /// pre-send re-check, for every commitment and row the runs reach.
    #[test]
    fn a_booking_notice_and_a_reminder_are_decided_alike() {
        let mut w = World::new(&Bounds::dispatch());
        for version in 1..=3u8 {
            for cancelled in [false, true] {
                let c = Commitment { version, cancelled };
                w.commitment = c;
                for planned in 1..=3u8 {
                    for state in IntentionState::ALL {
                        for lease in [None, Some(true), Some(false)] {
                            for r in 0..2 {
                                let row = &mut w.intentions[r];
                                row.planned_version = planned;
                                row.state = state;
                                row.lease = lease.map(|live| Lease { owner: 0, live });
                                row.attempt = Some(Attempt {
                                    n: 1,
                                    version_checked: planned,
                                });
                            }
                            assert_eq!(validity(&w.intentions[0], c), validity(&w.intentions[1], c));
                            for holder in [Holder::Lease(owner_name(0)), Holder::Reconciler] {
                                assert_eq!(presend(&w, 0, &holder), presend(&w, 1, &holder), "{state} {c:?}");
                            }
                        }
                    }
                }
            }
        }
    }
}
