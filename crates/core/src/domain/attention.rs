//! Which cases need a person at the front desk, when a case counts as
//! handled, and what to do next with it: the attention rule's one home.
//!
//! The ledger's Atención query is *built from* [`AttentionRule::clauses`]
//! (`crates/ledger/src/store/attention.rs`), never written by hand, so the
//! console, the counts and this module's tests can not disagree about
//! which intentions are open cases (docs/design.md, "The front desk's work
//! queue").

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use super::state::IntentionState;

/// One way an intention becomes a case for a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "clause", rename_all = "snake_case")]
pub enum Clause {
    /// Every intention in this state, however old (nobody else will settle
    /// it: uncertain outcomes and reviews).
    Always(IntentionState),
    /// In this state and due within the rule's `failed_window` before now:
    /// older failures have left the desk.
    DueWithinWindow(IntentionState),
    /// In this state with its lease expired: a dispatch that never came
    /// back (shown as "stuck").
    LeaseExpired(IntentionState),
}

impl Clause {
    pub fn state(self) -> IntentionState {
        match self {
            Clause::Always(s) | Clause::DueWithinWindow(s) | Clause::LeaseExpired(s) => s,
        }
    }
}

/// The attention rule and its windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionRule {
    /// Failed intentions due longer ago than this have left the desk.
    pub failed_window: Duration,
    /// Reschedule requests are cases for commitments starting within this
    /// much of now (either way).
    pub reschedule_window: Duration,
    /// Parked or refused channel events are technicians' cases for this
    /// long after they arrived: an event of another installation from last
    /// month tells nobody anything new.
    pub channel_event_window: Duration,
}

impl Default for AttentionRule {
    fn default() -> Self {
        AttentionRule {
            failed_window: Duration::days(3),
            reschedule_window: Duration::days(7),
            channel_event_window: Duration::days(7),
        }
    }
}

/// What the rule needs to know about one intention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaseFacts {
    pub state: IntentionState,
    pub due_at: DateTime<Utc>,
    pub lease_until: Option<DateTime<Utc>>,
}

impl AttentionRule {
    /// The clauses, in the order the console ranks them.
    pub const CLAUSES: [Clause; 4] = [
        Clause::Always(IntentionState::Uncertain),
        Clause::Always(IntentionState::Review),
        Clause::DueWithinWindow(IntentionState::Failed),
        Clause::LeaseExpired(IntentionState::Dispatching),
    ];

    pub fn clauses(&self) -> &'static [Clause] {
        &Self::CLAUSES
    }

    /// The clause that makes `facts` a case now, if any.
    pub fn matches(&self, facts: &CaseFacts, now: DateTime<Utc>) -> Option<Clause> {
        self.clauses().iter().copied().find(|c| {
            c.state() == facts.state
                && match c {
                    Clause::Always(_) => true,
                    Clause::DueWithinWindow(_) => facts.due_at >= now - self.failed_window,
                    Clause::LeaseExpired(_) => facts.lease_until.is_some_and(|l| l < now),
                }
        })
    }

    /// The earliest due time a `DueWithinWindow` clause still accepts.
    pub fn failed_since(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        now - self.failed_window
    }
}

/// A mark "atendido" covers a case until something new happens to it: the
/// mark names the situation it was made on (when the intention's state last
/// changed, when the reschedule was requested, when the refused event was
/// last seen, when the channel event was received), and the case reopens as soon as its situation is another
/// one. Repeated or lower-ranked signals change no state and are not news.
/// Comparing situations, not the mark's clock with the situation's, keeps
/// a mark right when another process's clock runs ahead.
pub fn handled_covers(marked_situation: DateTime<Utc>, situation_since: DateTime<Utc>) -> bool {
    marked_situation == situation_since
}

/// What an Atención row is about, as far as the next step goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CaseKind {
    /// An intention in one of the rule's states (stuck: `Dispatching`).
    Intention(IntentionState),
    /// The customer asked to reschedule.
    RescheduleRequest,
    /// A booking event refused as a conflict.
    RefusedEvent,
    /// A channel event parked or refused (technicians only): applied to
    /// nothing until a person looks.
    ChannelEvent,
}

/// What the front desk should do next with a case: each Atención row says
/// it in words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NextStep {
    /// Call the customer: we do not know whether the message arrived, or a
    /// person must decide (review).
    Call,
    /// The message did not arrive: send it again (supervisor) or call.
    Resend,
    /// The channel will still report: wait for its confirmation.
    WaitForChannel,
    /// A booking-system conflict: a technician checks it.
    CheckConflict,
    /// The customer wants another time: call to reschedule.
    Reschedule,
    /// A channel event was kept but applied to nothing: a technician reads
    /// why (its reason) and checks which message it was about.
    CheckEvent,
}

impl NextStep {
    pub const ALL: [NextStep; 6] = [
        NextStep::Call,
        NextStep::Resend,
        NextStep::WaitForChannel,
        NextStep::CheckConflict,
        NextStep::Reschedule,
        NextStep::CheckEvent,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NextStep::Call => "call",
            NextStep::Resend => "resend",
            NextStep::WaitForChannel => "wait_for_channel",
            NextStep::CheckConflict => "check_conflict",
            NextStep::Reschedule => "reschedule",
            NextStep::CheckEvent => "check_event",
        }
    }
}

/// The next step for a case. An uncertain outcome is the reconciler's to
/// settle with the channel (never by a blind resend), so the desk waits
/// for it unless a person is asked (review).
pub fn next_step(kind: CaseKind) -> NextStep {
    match kind {
        CaseKind::RescheduleRequest => NextStep::Reschedule,
        CaseKind::RefusedEvent => NextStep::CheckConflict,
        CaseKind::ChannelEvent => NextStep::CheckEvent,
        CaseKind::Intention(IntentionState::Failed) => NextStep::Resend,
        CaseKind::Intention(IntentionState::Dispatching | IntentionState::Uncertain) => NextStep::WaitForChannel,
        CaseKind::Intention(_) => NextStep::Call,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 10, 12, 0, 0).unwrap()
    }

    fn facts(state: IntentionState, due_days_ago: i64, lease_min: Option<i64>) -> CaseFacts {
        CaseFacts {
            state,
            due_at: now() - Duration::days(due_days_ago),
            lease_until: lease_min.map(|m| now() + Duration::minutes(m)),
        }
    }

    /// Every state, old and recent, leased and not: exactly the documented
    /// cases match.
    #[test]
    fn the_rule_matches_exactly_its_cases() {
        let rule = AttentionRule::default();
        for state in IntentionState::ALL {
            for (days, lease) in [(0, None), (2, None), (4, None), (0, Some(-1)), (0, Some(5))] {
                let got = rule.matches(&facts(state, days, lease), now());
                let want = match state {
                    IntentionState::Uncertain | IntentionState::Review => true,
                    IntentionState::Failed => days <= 3,
                    IntentionState::Dispatching => lease == Some(-1),
                    _ => false,
                };
                assert_eq!(got.is_some(), want, "{state} due {days} d ago, lease {lease:?}");
                if let Some(c) = got {
                    assert_eq!(c.state(), state);
                }
            }
        }
    }

    #[test]
    fn failed_window_edge_is_inclusive() {
        let rule = AttentionRule::default();
        let f = CaseFacts {
            state: IntentionState::Failed,
            due_at: rule.failed_since(now()),
            lease_until: None,
        };
        assert_eq!(
            rule.matches(&f, now()),
            Some(Clause::DueWithinWindow(IntentionState::Failed))
        );
    }

    #[test]
    fn a_mark_covers_until_the_situation_changes() {
        let t = now();
        assert!(handled_covers(t, t));
        assert!(!handled_covers(t, t - Duration::seconds(1)));
        assert!(!handled_covers(t, t + Duration::milliseconds(1)));
    }

    #[test]
    fn every_case_has_a_next_step() {
        use IntentionState as S;
        assert_eq!(next_step(CaseKind::RescheduleRequest), NextStep::Reschedule);
        assert_eq!(next_step(CaseKind::RefusedEvent), NextStep::CheckConflict);
        assert_eq!(next_step(CaseKind::ChannelEvent), NextStep::CheckEvent);
        assert_eq!(next_step(CaseKind::Intention(S::Failed)), NextStep::Resend);
        assert_eq!(next_step(CaseKind::Intention(S::Review)), NextStep::Call);
        assert_eq!(next_step(CaseKind::Intention(S::Uncertain)), NextStep::WaitForChannel);
        assert_eq!(next_step(CaseKind::Intention(S::Dispatching)), NextStep::WaitForChannel);
        let names: std::collections::HashSet<_> = NextStep::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(names.len(), NextStep::ALL.len());
    }
}
